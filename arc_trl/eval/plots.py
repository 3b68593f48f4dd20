"""PNG plots of evaluation results. Uses matplotlib's object API with the Agg canvas: no display, no pyplot state."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


def plot_pass_at_k(curves: Mapping[str, Mapping[str, Any]], out_path: str | Path, title: str = "pass@k") -> Path:
    """Draw one pass@k line per curve (as returned by `pass_at_k_curve`), k on a log2 axis; save a PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    all_ks: set[int] = set()
    for name, curve in curves.items():
        points = sorted((int(k), 100.0 * v) for k, v in curve.get("pass_at_k", {}).items())
        if not points:
            continue
        ks, values = zip(*points, strict=True)
        all_ks.update(ks)
        ax.plot(ks, values, marker="o", label=f"{name} (n={curve.get('max_attempts', max(ks))})")
    if all_ks and max(all_ks) > 1:
        ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(all_ks), [str(k) for k in sorted(all_ks)])
    ax.set_xlabel("k (attempts)")
    ax.set_ylabel("pass@k (%)")
    ax.set_ylim(bottom=0)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if all_ks:
        ax.legend(loc="lower right")
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_path, format="png", bbox_inches="tight")
    return out_path
