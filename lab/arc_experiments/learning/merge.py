"""Join the results.json files of several machines that each ran part of one learning experiment."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def merge_results(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One results dict from the results.json of several machines (each ran some stages of the same profile).

    Evaluations, training runs, RL runs and teachers are joined (the first part that has one wins; a second copy of
    an evaluation with other numbers is listed in `merge_notes`). Stage times are joined the same way; stages run on
    more than one machine (the model and student rebuilt before an RL run) are listed in `repeated_stages`."""
    if not parts:
        raise ValueError("merge_results needs at least one results dict")
    merged: dict[str, Any] = {k: v for k, v in parts[0].items()}
    for key in ("heldout", "training", "runs", "teachers", "stage_seconds"):
        merged[key] = dict(parts[0].get(key) or {})
    merged["student_evals"] = list(parts[0].get("student_evals") or ["student"])
    notes, repeated, devices, loads = [], set(), [], []
    for part in parts:
        devices.append(part.get("device") or part.get("machine", "unknown"))
        loads += part.get("loads", [])
    first_student = merged["student_evals"][0] if "student" in merged["heldout"] else None
    merged["runs"] = {name: {**run, "student": run.get("student") or first_student} if run.get("final") else run
                      for name, run in merged["runs"].items()}  # the student each evaluated run started from
    for part in parts[1:]:
        part_student = "student" if "student" in (part.get("heldout") or {}) else None
        for key in ("heldout", "training", "runs", "teachers"):
            for name, value in (part.get(key) or {}).items():
                if key == "runs" and value.get("final"):  # run on this part's machine, from its student
                    value = {**value, "student": value.get("student") or part_student}
                if name not in merged[key]:
                    merged[key][name] = value
                elif key == "heldout" and name == "student" and (
                        value.get("per_task") != merged[key][name].get("per_task")
                        or value.get("model") != merged[key][name].get("model")):  # rebuilt here: both count
                    rebuilt = f"student@{len(merged['student_evals']) + 1}"
                    merged[key][rebuilt] = value
                    merged["student_evals"].append(rebuilt)
                    part_student = rebuilt
                    notes.append(f"heldout student: rebuilt on another machine ({rebuilt}); the student is the "
                                 "per-task mean of its evaluations")
                elif key == "heldout" and value.get("per_task") != merged[key][name].get("per_task"):
                    notes.append(f"heldout {name}: two different evaluations; the first part's is kept")
                elif key == "teachers" and _better_kl(value, merged[key][name]):
                    merged[key][name] = value
                elif key == "runs":  # a run listed by every part of the profile: keep the evaluations of each
                    kept = merged[key][name]
                    merged[key][name] = {**kept, "final": kept.get("final") or value.get("final"),
                                         "student": kept.get("student") or value.get("student"),
                                         **({"student_model": start} if (start := kept.get("student_model")
                                                                         or value.get("student_model")) else {}),
                                         "checkpoints": {**value.get("checkpoints", {}), **kept.get("checkpoints", {})}}
        for name, seconds in (part.get("stage_seconds") or {}).items():
            if name in merged["stage_seconds"]:
                repeated.add(name)
            else:
                merged["stage_seconds"][name] = seconds
        for key in ("heldout_check", "validation_dataset", "opd_teacher"):
            if merged.get(key) is None:
                merged[key] = part.get(key)
        merged["date"] = max(str(merged.get("date") or ""), str(part.get("date") or "")) or None
    merged["devices"] = list(dict.fromkeys(devices))
    merged["parts"] = len(parts)
    merged["repeated_stages"] = sorted(repeated)
    merged["merge_notes"] = notes
    merged["total_seconds"] = sum(sum((p.get("stage_seconds") or {}).values()) for p in parts)
    if loads:
        merged.update(loads=loads, load_mean=sum(loads) / len(loads), load_max=max(loads))
    return merged


def _better_kl(new: dict[str, Any], old: dict[str, Any]) -> bool:
    """A teacher's teacher_kl from another machine replaces the kept one when that has none, or when it comes from a
    probe (the same measurement for every teacher) and the kept one does not."""
    if new.get("teacher_kl") is None:
        return False
    probe = "probe" in str(new.get("teacher_kl_source"))
    return old.get("teacher_kl") is None or (probe and "probe" not in str(old.get("teacher_kl_source")))


# ------------------------------------------------------------------------------------------------------ reporting
