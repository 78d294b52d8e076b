"""The report's plot: ours beside the paper's Table 6."""

from .build import PAPER_TABLE6


def plot_utilisation(report, path):
    """Utilisation % of LUT/FF/CLB against host bandwidth, ours beside the paper's Table 6.

    Left: the percentages; right: the increase over each series' smallest host
    bandwidth (the shell, in the paper's figures only, cancels out there), titled with
    the fitted LUT and FF per added lane, ours beside the paper's.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
        if len(ys) > 1:
            ax2.plot(xs, [y - ys[0] for y in ys], f"{mark}-", color=colour, mfc="none",
                     label=f"{res} ours")
        ax2.plot(px, [y - py[0] for y in py], f"{mark}--", color=colour, alpha=0.6,
                 label=f"{res} paper")
    for a in (ax, ax2):
        a.set_xscale("log", base=2)
        ticks = sorted(set(xs) | {bw for bw, _ in paper})
        a.set_xticks(ticks)
        a.set_xticklabels([str(t) for t in ticks])
        a.set_xlabel("host bandwidth (Gb/s)")
        a.grid(True, alpha=0.3)
        a.legend(fontsize=7)
    ax.set_ylabel("% of the U280 (XCU280)")
    ax.set_title("Utilisation")
    ax2.set_ylabel("percentage points over the smallest host_bw")
    slopes = {g["resource"]: g for g in report.get("growth", [])}

    def per_lane(res, key):
        v = slopes.get(res, {}).get(key)
        return "n/a" if v is None else f"{v / 1000:.2f} k"

    ax2.set_title("Growth per added 100 Gb/s lane: LUT "
                  f"{per_lane('LUT', 'ours_per_lane')} ours / {per_lane('LUT', 'paper_per_lane')} "
                  f"paper, FF {per_lane('FF', 'ours_per_lane')} / "
                  f"{per_lane('FF', 'paper_per_lane')}", fontsize=9)
    fig.text(0.01, 0.01,
             "Paper (NAIC '24, Table 6): whole design including the OpenNIC shell, Vivado. "
             "Ours: SqueezeNIC core only, sum of out-of-context Yosys block syntheses, "
             + ("with the loopback RX lanes and checkers" if report.get("loopback")
                else "TX only as the paper") + "; CLB = max(LUT/8, FF/16).", fontsize=7)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
