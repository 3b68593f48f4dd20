"""Plot a run's collapse-guard log (`output_dir/collapse_guard.jsonl`): each signal per step, one line per attempt
(attempt k starts after the k-th rollback), collapse/warn steps marked, the baseline dashed."""

from __future__ import annotations

import json
from pathlib import Path

DEFAULT_KEYS = ("reward", "entropy", "episode/truncated_rate", "episode/model_tokens", "episode/repeat_frac",
                "episode/submit_rate")
COLORS = {"warn": "tab:orange", "collapse": "tab:red"}


def read_guard_log(path: str | Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def plot_guard_log(path: str | Path, out: str | Path, keys: tuple[str, ...] = DEFAULT_KEYS, title: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = read_guard_log(path)
    steps = [r for r in records if r["event"] == "step"]
    keys = tuple(k for k in keys if any(r["raw"].get(k) is not None for r in steps))
    attempts = sorted({r["attempt"] for r in steps})
    fig, axes = plt.subplots(len(keys), 1, figsize=(7, 1.7 * len(keys)), sharex=True, squeeze=False)
    for ax, key in zip(axes[:, 0], keys):
        for attempt in attempts:
            rows = [r for r in steps if r["attempt"] == attempt and r["raw"].get(key) is not None]
            label = "before rollback" if attempt == 0 else f"after rollback {attempt}"
            ax.plot([r["step"] for r in rows], [r["raw"][key] for r in rows], marker="o", ms=3,
                    label=label if len(attempts) > 1 else None)
            for r in rows:
                if r["label"] in COLORS:
                    ax.scatter([r["step"]], [r["raw"][key]], s=60, facecolors="none", edgecolors=COLORS[r["label"]],
                               linewidths=1.5, zorder=5)
        first = [r for r in steps if r["attempt"] == 0]
        ready = next((i for i, r in enumerate(first) if r.get("baseline_ready")), None)  # the last baseline step
        base = [r["raw"][key] for r in first[: (ready or 0) + 1] if r["raw"].get(key) is not None]
        if ready is not None and base:
            ax.axhline(sum(base) / len(base), color="gray", ls="--", lw=0.8)
        for r in records:
            if r["event"] == "rollback":
                ax.axvline(r["from_step"], color="tab:red", lw=0.8, ls=":")
        ax.set_ylabel(key.split("/")[-1], fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0, 0].set_title(title or "collapse guard: signals per step (circles: red collapse, orange warn; "
                         "dashed: baseline)", fontsize=8)
    if len(attempts) > 1:
        axes[0, 0].legend(fontsize=7)
    axes[-1, 0].set_xlabel("step")
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
