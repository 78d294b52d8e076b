"""The report's plot: ours beside the paper's Table 6."""

from .build import PAPER_TABLE6


def plot_utilisation(report, path):
    """Utilisation % of LUT/FF/CLB against host bandwidth, ours beside the paper's Table 6.

    Left: the percentages. Right: what one generator lane costs in each build
    (``LUT_per_lane``, ``FF_per_lane``, in thousands) beside the paper's fitted slopes,
    which are also the targets (1.6 k LUT, 3.3 k FF): a row's own per-lane cost, since a
    slope fitted over a sweep whose codec changes with the bandwidth says little.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    rows = sorted(report["rows"], key=lambda r: r["host_bw"])
    paper = sorted(PAPER_TABLE6.items())
    # distinct markers: a LUT-bound design has CLB % = LUT %, one line over the other
    colours = {"LUT": ("tab:blue", "o"), "FF": ("tab:orange", "^"), "CLB": ("tab:green", "D")}
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    xs = [r["host_bw"] for r in rows]
    for res, (colour, mark) in colours.items():
        ys = [r[f"{res}_pct"] for r in rows]
        ax.plot(xs, ys, f"{mark}-", color=colour, mfc="none", label=f"{res} ours (core, Yosys)")
        px, py = [bw for bw, _ in paper], [v[res] for _, v in paper]
        ax.plot(px, py, f"{mark}--", color=colour, alpha=0.6,
                label=f"{res} paper (with shell)")
    growth = {g["resource"]: g for g in report.get("growth", [])}
    for res in ("LUT", "FF"):
        colour, mark = colours[res]
        pts = [(r["host_bw"], r[f"{res}_per_lane"] / 1000) for r in rows
               if r.get(f"{res}_per_lane") is not None]
        if pts:
            ax2.plot(*zip(*pts, strict=True), f"{mark}-", color=colour, mfc="none",
                     label=f"{res} ours, per lane of each build")
        slope = growth.get(res, {}).get("paper_per_lane")
        if slope is not None:
            ax2.axhline(slope / 1000, color=colour, ls="--", alpha=0.6,
                        label=f"{res} paper (fitted slope, {slope / 1000:.2f} k)")
    ax2.set_yscale("log")
    plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
    ax2.yaxis.set_major_formatter(plain)
    ax2.yaxis.set_minor_formatter(plain)
    ax.set_ylabel("% of the U280 (XCU280)")
    ax.set_title("Utilisation")
    ax2.set_ylabel("thousands per generator lane (log)")
    ax2.set_title("Cost of one generator lane (lane, its arbiter and register share)",
                  fontsize=9)
    for a in (ax, ax2):
        a.set_xscale("log", base=2)
        ticks = sorted(set(xs) | {bw for bw, _ in paper})
        a.set_xticks(ticks)
        a.set_xticklabels([str(t) for t in ticks])
        a.set_xlabel("host bandwidth (Gb/s)")
        a.grid(True, alpha=0.3)
        a.legend(fontsize=7)
    fig.text(0.01, 0.01,
             "Paper (NAIC '24, Table 6): whole design including the OpenNIC shell, Vivado. "
             "Ours: SqueezeNIC core only, sum of out-of-context Yosys block syntheses, "
             + ("with the loopback RX lanes and checkers" if report.get("loopback")
                else "TX only as the paper") + "; CLB = max(LUT/8, FF/16).", fontsize=7)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
