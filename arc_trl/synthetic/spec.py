"""`synthetic:` dataset specs, so any tool that takes a dataset name can take a generated curriculum.

    synthetic:n=64,seed=0,difficulty=tiny,families=rotate+flip+transpose

Keys: n (tasks, required), seed (default 0), difficulty (tiny|small|medium|full, default small), families
(`+`-separated names, default all). The same spec always yields the same tasks and ids.
"""

from __future__ import annotations

PREFIX = "synthetic:"


def is_synthetic_spec(spec: object) -> bool:
    return isinstance(spec, str) and spec.startswith(PREFIX)


def parse_synthetic_spec(spec: str) -> dict:
    """Parse the key=value list after `synthetic:` into `generate_curriculum` keyword arguments."""
    body = spec[len(PREFIX) :]
    out: dict = {"seed": 0, "difficulty": "small", "families": None}
    for part in filter(None, (p.strip() for p in body.split(","))):
        if "=" not in part:
            raise ValueError(f"{spec!r}: expected key=value, got {part!r}")
        key, value = (x.strip() for x in part.split("=", 1))
        if key == "n":
            out["n_tasks"] = int(value)
        elif key == "seed":
            out["seed"] = int(value)
        elif key == "difficulty":
            out["difficulty"] = value
        elif key == "families":
            out["families"] = [f for f in value.split("+") if f]
        else:
            raise ValueError(f"{spec!r}: unknown key {key!r} (allowed: n, seed, difficulty, families)")
    if "n_tasks" not in out:
        raise ValueError(f"{spec!r}: the number of tasks n=... is required")
    return out


def load_synthetic_spec(spec: str):
    from arc_trl.synthetic.generate import generate_curriculum

    return generate_curriculum(**parse_synthetic_spec(spec))
