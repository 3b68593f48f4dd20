"""Random-search distributions of a sweep's `random:` block.

Each parameter takes exactly one of:
  `{choice: [a, b, ...]}`     one of the listed values
  `{uniform: [low, high]}`    float in [low, high]
  `{log_uniform: [low, high]}` float, uniform in log space (0 < low < high), e.g. learning rates
  `{int: [low, high]}`        integer in [low, high], both ends included
Sampled floats are rounded to 4 significant digits so that run names and configs show the same numbers.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from arc_trl.launch.overrides import coerce_number

KINDS = ("choice", "uniform", "log_uniform", "int")
SIGNIFICANT_DIGITS = 4


@dataclass(frozen=True)
class Distribution:
    kind: str
    args: tuple

    @classmethod
    def parse(cls, key: str, spec: Any) -> Distribution:
        """Raises ValueError naming `key` when `spec` is not one of the forms above."""
        if not isinstance(spec, dict) or len(spec) != 1:
            raise ValueError(f"random parameter {key!r} must be a mapping with exactly one of {', '.join(KINDS)}, "
                             f"got {spec!r}")
        (kind, args), = spec.items()
        if kind not in KINDS:
            raise ValueError(f"random parameter {key!r}: unknown distribution {kind!r} (use one of {', '.join(KINDS)})")
        if not isinstance(args, list) or not args:
            raise ValueError(f"random parameter {key!r}: {kind} needs a non-empty list, got {args!r}")
        if kind == "choice":
            return cls(kind, tuple(coerce_number(value) for value in args))
        if len(args) != 2:
            raise ValueError(f"random parameter {key!r}: {kind} needs [low, high], got {args!r}")
        low, high = (coerce_number(value) for value in args)
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high))
        if not numeric or not low < high:
            raise ValueError(f"random parameter {key!r}: {kind} needs numbers low < high, got {args!r}")
        if kind == "int" and not (isinstance(low, int) and isinstance(high, int)):
            raise ValueError(f"random parameter {key!r}: int needs integer bounds, got {args!r}")
        if kind == "log_uniform" and low <= 0:
            raise ValueError(f"random parameter {key!r}: log_uniform needs 0 < low, got {args!r}")
        return cls(kind, (low, high))

    def sample(self, rng: random.Random) -> Any:
        if self.kind == "choice":
            return self.args[rng.randrange(len(self.args))]
        low, high = self.args
        if self.kind == "int":
            return rng.randint(low, high)
        if self.kind == "uniform":
            value = rng.uniform(low, high)
        else:
            value = math.exp(rng.uniform(math.log(low), math.log(high)))
        return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


def sample_points(params: dict[str, Distribution], n: int, seed: int) -> list[dict[str, Any]]:
    """`n` override dicts; the same (params, n, seed) always gives the same points."""
    rng = random.Random(seed)
    return [{key: dist.sample(rng) for key, dist in params.items()} for _ in range(n)]
