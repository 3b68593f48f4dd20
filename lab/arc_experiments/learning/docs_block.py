"""The experiment's report: the generated block of docs/learning.md, the training plots, the summary JSON and the
console's outcome line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from arc_experiments.learning.profile import ARMS, WINDOW

DOCS = Path("docs/learning.md")
IMAGES = Path("docs/img")
BEGIN, END = "<!-- demo-results:begin -->", "<!-- demo-results:end -->"


def moving_average(values: list[float], width: int = WINDOW) -> list[float]:
    """Trailing mean over up to `width` values (fewer at the start)."""
    windows = (values[max(0, i - width + 1) : i + 1] for i in range(len(values)))
    return [sum(w) / len(w) for w in windows]


def plot_series(runs: dict[str, dict[str, Any]], key: str, ylabel: str, title: str, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.0), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    colors = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:gray")
    for (name, run), color in zip(runs.items(), colors):
        values = run.get(key) or []
        if not values:
            continue
        steps = run["steps"][: len(values)]
        ax.plot(steps, values, color=color, alpha=0.35, linewidth=1, marker=".", label=f"{name} (per step)")
        ax.plot(steps, moving_average(values), color=color, linewidth=2, label=f"{name} ({WINDOW}-step mean)")
    ax.set_xlabel("GRPO step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", bbox_inches="tight")


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def num(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _columns(results: dict[str, Any]) -> list[tuple[str, str]]:
    """The held-out table's columns (evaluation name, title): the student, each RL run's end, each teacher."""
    ev, runs = results["heldout"], results.get("runs")
    arm_titles = {"grpo-opd": "after GRPO + OPD", "grpo-only": "after GRPO only (ablation)"}
    if runs is None:  # results written before runs were recorded
        columns = [("student", "student (SFT warm start, before RL)"), ("grpo-opd", arm_titles["grpo-opd"]),
                   ("grpo-only", arm_titles["grpo-only"]), ("teacher", "teacher (longer SFT)")]
        return [(k, title) for k, title in columns if k in ev]
    columns = [("student", "student (SFT warm start, before RL)")]
    by_arm = sorted(runs.items(), key=lambda item: (ARMS.index(item[1]["arm"]), item[1]["seed"]))
    for name, run in by_arm:
        suffix = f", seed {run['seed']}" if name != run["arm"] else ""
        if run.get("final") in ev:
            columns.append((run["final"], arm_titles[run["arm"]] + suffix))
    for name, teacher in (results.get("teachers") or {}).items():
        if name not in ev:
            continue
        if teacher["privileged"] != "none":
            title = f"{name} (privileged prompt: {teacher['privileged']})"
        else:
            title = "teacher (longer SFT)" if name == "teacher" else f"{name} (teacher)"
        columns.append((name, title))
    return [(k, title) for k, title in columns if k in ev]


def results_block(results: dict[str, Any], image_prefix: str = "learning", stats: str | None = None) -> str:
    """The generated docs block: held-out table, RL training table, teacher_kl, stage times, `stats` (the CI tables of
    arc_experiments/learning/report.py) and the plots."""
    ev, runs = results["heldout"], results["training"]
    columns = _columns(results)
    first = ev[columns[0][0]]
    lines = [
        f"Held-out tasks: `{results['heldout_dataset']}`, {first['n_attempts'] // first['n_tasks']} attempts per task "
        f"at temperature {results['temperature']} ({first['n_attempts']} attempts per model).",
        "",
        "| held-out metric | " + " | ".join(title for _, title in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    rows = [("solve rate (pass@1)", "solve_rate", pct), (f"pass@{first['n_attempts'] // first['n_tasks']}",
            "pass_at_k", pct), ("valid submissions", "valid_outputs", pct), ("pixel score", "pixel_score", pct),
            (f"mean reward ({results['reward_mode']})", "mean_reward", num),
            ("episodes ending in SUBMIT", "submit_rate", pct), ("turns per episode", "turns", lambda x: num(x, 2))]
    for label, key, fmt in rows:
        if any(ev[k].get(key) is not None for k, _ in columns):  # results written before a metric existed lack it
            lines.append(f"| {label} | " + " | ".join(fmt(ev[k].get(key)) for k, _ in columns) + " |")
    if runs:
        lines += ["", f"| RL training (first / last {WINDOW} steps) | " + " | ".join(runs) + " |",
                  "|---|" + "---|" * len(runs)]
        for label, key, fmt in (("mean reward", "reward", num), ("valid submissions", "valid", pct),
                                ("exact test grids", "exact", pct), ("teacher_kl", "teacher_kl", num)):
            cells = []
            for run in runs.values():
                a, b = run.get(f"{key}_first"), run.get(f"{key}_last")
                cells.append("-" if a is None else f"{fmt(a)} -> {fmt(b)}")
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    kl_runs = {name: run["teacher_kl"] for name, run in runs.items() if run.get("teacher_kl")}
    if list(kl_runs) == ["grpo-opd"]:
        kl = kl_runs["grpo-opd"]
        lines.append(f"\nteacher_kl at the first step {kl[0]:.3f}, at the last step {kl[-1]:.3f}.")
    elif kl_runs:
        lines.append("\nteacher_kl at the first / last step: " + ", ".join(
            f"{name} {kl[0]:.3f} / {kl[-1]:.3f}" for name, kl in kl_runs.items()) + ".")
    if stats:
        lines += ["", stats]
    times = ", ".join(f"{name} {s:.0f} s" for name, s in results["stage_seconds"].items())
    parts = results.get("parts", 1)
    where = results["machine"] if parts == 1 else f"{parts} machines ({' + '.join(results['devices'])})"
    repeated = results.get("repeated_stages") or []
    again = f"; also rebuilt on other machines, in the total: {', '.join(repeated)}" if repeated else ""
    lines += [
        "",
        f"Run: seed {results['seed']}, {where}, total wall time {results['total_seconds'] / 60:.1f} min "
        f"({times}{again}); 1-minute load average during the run {results['load_mean']:.1f} on average, "
        f"{results['load_max']:.1f} at most ({results['cpus']} CPUs: a load above that means other processes "
        "were competing for them). Written by "
        f"`python -m arc_experiments.learning` on {results['date']}.",
        "",
    ]
    if stats and (results.get("runs") or {}):
        lines.append(f"![held-out pass@1 over GRPO steps](img/{image_prefix}_heldout_pass1.png)")
    lines += [
        f"![reward over GRPO steps](img/{image_prefix}_reward.png)",
        f"![teacher_kl over GRPO steps](img/{image_prefix}_teacher_kl.png)",
    ]
    return "\n".join(lines)


def write_docs(block: str, section: str = "demo") -> None:
    """Replace the generated block of `section` in docs/learning.md (markers `<!-- SECTION-results:begin/end -->`)."""
    begin, end = (BEGIN, END) if section == "demo" else (f"<!-- {section}-results:begin -->",
                                                          f"<!-- {section}-results:end -->")
    text = DOCS.read_text() if DOCS.exists() else f"# Learning demo\n\n{begin}\n{end}\n"
    if begin not in text or end not in text:
        text += f"\n{begin}\n{end}\n"
    head, rest = text.split(begin, 1)
    tail = rest.split(end, 1)[1]
    DOCS.write_text(f"{head}{begin}\n{block}\n{end}{tail}")


def write_report(results: dict[str, Any], profile: dict[str, Any]) -> dict[str, Any] | None:
    """Plots, the generated docs block and (profile `summary_file`) the summary JSON of a finished run (also from a
    results.json copied from a GPU machine, or several merged). Returns the summary (None without per-task data)."""
    from arc_experiments.learning.report import ci_block, plot_curves, write_summary

    training, prefix = results["training"], profile["image_prefix"]
    plot_series(training, "reward", f"mean reward ({results['reward_mode']})", "Reward over GRPO steps",
                IMAGES / f"{prefix}_reward.png")
    plot_series({k: v for k, v in training.items() if v.get("teacher_kl")}, "teacher_kl",
                "teacher_kl (mean logp_student - logp_teacher)", "teacher_kl over GRPO steps",
                IMAGES / f"{prefix}_teacher_kl.png")
    summary, stats = None, None
    if results["heldout"].get("student", {}).get("per_task"):  # results written before per-task data existed lack it
        path = profile["summary_file"]
        if path:
            summary = write_summary(results, path)
            print(f"[demo] wrote {path}")
        else:
            from arc_experiments.learning.report import summary as summarise

            summary = summarise(results)
        stats = ci_block(summary, with_checks=bool(path))
        if any(summary["curves"].values()):
            plot_curves(summary["curves"], IMAGES / f"{prefix}_heldout_pass1.png")
    write_docs(results_block(results, prefix, stats), profile["docs_section"])
    return summary


def outcome_line(results: dict[str, Any]) -> str | None:
    """One line on the console: the student against each arm's end (seeds pooled), with CIs when there are runs."""
    from arc_experiments.learning.report import summary as summarise

    if not results["heldout"].get("student", {}).get("per_task"):
        return None
    s = summarise(results)
    parts = [f"held-out pass@1: student {pct(s['student_pass1'])}"]
    for key, label in (("grpo_opd", "GRPO + OPD"), ("grpo_only", "GRPO only")):
        if s[f"{key}_pass1"] is not None:
            parts.append(f"{label} {pct(s[f'{key}_pass1'])}")
    for name, t in s["teachers"].items():
        if t["pass1"] is not None:
            parts.append(f"{name} {pct(t['pass1'])}")
    if s["grpo_opd_minus_student_ci95"]:
        lo, hi = s["grpo_opd_minus_student_ci95"]
        parts.append(f"GRPO + OPD - student {100 * s['grpo_opd_minus_student']:+.1f} points "
                     f"[{100 * lo:+.1f}, {100 * hi:+.1f}]")
    return "[demo] " + ", ".join(parts)


