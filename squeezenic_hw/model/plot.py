"""The paper's Figure 3: iteration time normalised to the no-compression baseline.

Uses matplotlib's object API with the Agg canvas (no pyplot, no global
backend switch), so it works headless and leaves no state behind.
"""

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .scenario import SCHEMES

__all__ = ["plot_result", "SCHEME_LABELS"]

SCHEME_LABELS = {
    "none": "No compression",
    "gpu-app1": "Approach 1 on GPU",
    "nic-app1": "Approach 1 on SqueezeNIC",
    "gpu-app2": "Approach 2 on GPU",
    "nic-app2": "Approach 2 on SqueezeNIC",
}

_COLOURS = {
    "none": "#7f7f7f", "gpu-app1": "#9ecae1", "nic-app1": "#08519c",
    "gpu-app2": "#fdae6b", "nic-app2": "#d94801",
}


def plot_result(result, path, *, title=None):
    """Draw grouped bars of normalised iteration time per node count and save to ``path``.

    Parameters
    ----------
    result : ModelResult
        From :func:`~squeezenic_hw.model.scenario.evaluate`.
    path : str or os.PathLike
        Output file; the format follows its extension (``.png``, ``.svg``, ``.pdf``).
    title : str, optional
        Figure title; a default names the model and codec.
    """
    cfg = result.config
    nodes = list(cfg.nodes)
    schemes = list(SCHEMES)
    fig = Figure(figsize=(8, 4.5), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    width = 0.8 / len(schemes)
    for i, s in enumerate(schemes):
        xs = [j + (i - (len(schemes) - 1) / 2) * width for j in range(len(nodes))]
        ys = [1 / result.row(n, s).speedup for n in nodes]
        bars = ax.bar(xs, ys, width, label=SCHEME_LABELS[s], color=_COLOURS[s],
                      edgecolor="black", linewidth=0.4)
        if s.startswith("nic-"):
            for bar, n in zip(bars, nodes, strict=True):
                ax.annotate(f"{result.row(n, s).speedup:.2f}x",
                            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=7, rotation=90,
                            xytext=(0, 2), textcoords="offset points")
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(nodes)), [str(n) for n in nodes])
    ax.set_xlabel("Nodes")
    ax.set_ylabel("Iteration time / no-compression baseline")
    top = max(1 / r.speedup for r in result.rows)
    ax.set_ylim(0, top * 1.18)
    c = cfg.compression
    ax.set_title(title or (f"{cfg.work.name}, {c.label} (r = {c.rate:.4g}), "
                           f"M = {cfg.gpus_per_node}, B = {cfg.inter_bw * 8 / 1e9:g} Gb/s"),
                 fontsize=10)
    ax.legend(fontsize=8, ncols=3, loc="upper center", bbox_to_anchor=(0.5, -0.14),
              frameon=False)
    ax.grid(axis="y", linewidth=0.3)
    fig.tight_layout()
    fig.savefig(path)
