"""The collapse detector: pure logic over the per-step metric dicts a run logs (no trainer, no I/O).

Each `SignalRule` compares the mean of a metric over the last `window` logged steps with the run's own baseline (the
mean over its first `baseline_steps` logged steps), as a difference (`delta`), a ratio (`ratio`) or in baseline
standard deviations (`zscore`), in the direction that means trouble. A rule fires at `warn` or `collapse` level.
A step is labelled

- `collapse` when at least `min_signals` rules fire at collapse level, or a metric of `NONFINITE_KEYS` is NaN/inf;
- `warn` when any rule fires (at either level) but fewer than `min_signals` reach collapse level;
- `ok` otherwise, and always while the baseline is still being collected.

Defaults and why: docs/collapse.md. Every threshold can be overridden per key (`collapse_thresholds`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

OK, WARN, COLLAPSE = "ok", "warn", "collapse"
LEVELS = {OK: 0, WARN: 1, COLLAPSE: 2}
DIRECTIONS = ("up", "down")
CHANGES = ("delta", "ratio", "zscore")
NONFINITE_KEYS = ("loss", "grad_norm", "entropy", "reward")


@dataclass(frozen=True)
class SignalRule:
    """`key` going `direction` by more than `warn` / `collapse` (in `change` units) against the baseline."""

    key: str
    direction: str  # "up": rising is bad; "down": falling is bad
    change: str  # "delta": window - baseline; "ratio": window / baseline; "zscore": (window - baseline) / std
    warn: float
    collapse: float
    floor: float = 1e-3  # ratio: smallest baseline (and window) value; zscore: smallest std

    @property
    def name(self) -> str:
        return f"{self.key}:{self.direction}"

    def validate(self) -> SignalRule:
        if self.direction not in DIRECTIONS:
            raise ValueError(f"collapse rule {self.name}: direction must be one of {DIRECTIONS}, "
                             f"got {self.direction!r}")
        if self.change not in CHANGES:
            raise ValueError(f"collapse rule {self.name}: change must be one of {CHANGES}, got {self.change!r}")
        if not 0 < self.warn <= self.collapse:
            raise ValueError(f"collapse rule {self.name}: need 0 < warn <= collapse, got {self.warn}, {self.collapse}")
        return self

    def score(self, window: float, baseline: float, baseline_std: float) -> float:
        """How far `window` moved from `baseline` in the bad direction (<= 0: not at all), in `change` units."""
        sign = 1.0 if self.direction == "up" else -1.0
        if self.change == "delta":
            return sign * (window - baseline)
        if self.change == "zscore":
            return sign * (window - baseline) / max(baseline_std, self.floor)
        high, low = (window, baseline) if self.direction == "up" else (baseline, window)
        return max(high, self.floor) / max(low, self.floor)

    def describe(self, window: float, baseline: float, score: float, threshold: float) -> str:
        unit = {"delta": f"{'+' if self.direction == 'up' else '-'}{score:.3g}",
                "ratio": f"x{score:.3g}" if self.direction == "up" else f"/{score:.3g}",
                "zscore": f"{score:.3g} sd {self.direction}"}[self.change]
        return f"{self.key} {window:.4g} vs baseline {baseline:.4g} ({unit} >= {threshold:g})"


# The seeds' collapse (research log 002): completions grow to the token cap and repeat the same text, so length,
# truncation and repetition rise together while SUBMIT/valid-code rates and entropy fall. Thresholds are changes
# against the run's own first steps; two rules must reach collapse level together (min_signals) so that one noisy
# metric cannot stop a run. Why each number: docs/collapse.md.
DEFAULT_RULES: tuple[SignalRule, ...] = (
    SignalRule("episode/repeat_frac", "up", "delta", warn=0.15, collapse=0.30),
    SignalRule("episode/repeat_run", "up", "ratio", warn=2.0, collapse=4.0, floor=4.0),
    SignalRule("episode/truncated_rate", "up", "delta", warn=0.20, collapse=0.40),
    SignalRule("episode/model_tokens", "up", "ratio", warn=1.5, collapse=2.0, floor=1.0),
    SignalRule("entropy", "down", "ratio", warn=2.0, collapse=4.0, floor=1e-3),
    SignalRule("entropy", "up", "ratio", warn=2.0, collapse=3.0, floor=1e-3),
    SignalRule("sampling/sampling_logp_difference/mean", "up", "ratio", warn=3.0, collapse=10.0, floor=1e-3),
    SignalRule("episode/code_parsed_rate", "down", "delta", warn=0.25, collapse=0.50),
    SignalRule("episode/submit_rate", "down", "delta", warn=0.25, collapse=0.50),
    SignalRule("reward", "down", "zscore", warn=4.0, collapse=8.0, floor=0.05),
)


@dataclass
class DetectorSettings:
    rules: tuple[SignalRule, ...] = DEFAULT_RULES
    baseline_steps: int = 20  # logged steps averaged into the baseline (the run's first ones)
    window: int = 10  # logged steps averaged into the current value
    min_signals: int = 2  # rules at collapse level needed to label a step `collapse`
    nonfinite_keys: tuple[str, ...] = NONFINITE_KEYS

    def validate(self) -> DetectorSettings:
        for name in ("baseline_steps", "window", "min_signals"):
            if getattr(self, name) < 1:
                raise ValueError(f"collapse guard: {name} must be >= 1, got {getattr(self, name)}")
        names = [rule.validate().name for rule in self.rules]
        if len(set(names)) != len(names):
            raise ValueError(f"collapse guard: duplicate rules in {names}")
        return self


def rules_with_overrides(overrides: Mapping[str, Any] | None, base: tuple[SignalRule, ...] = DEFAULT_RULES
                         ) -> tuple[SignalRule, ...]:
    """Apply `collapse_thresholds` to the default rules.

    Keys are a metric (`episode/truncated_rate`, every rule on it) or a rule name (`entropy:down`); values are a dict
    of rule fields (`warn`, `collapse`, `change`, `floor`, `direction` for new rules), or `null`/`"off"` to drop the
    rule(s). A key that matches no default rule adds a new rule (it then needs direction, change, warn, collapse).
    """
    rules = list(base)
    for key, value in (overrides or {}).items():
        matches = [i for i, rule in enumerate(rules) if key in (rule.key, rule.name)]
        if value is None or value == "off" or value is False:
            if not matches:
                raise ValueError(f"collapse_thresholds: {key!r} matches no rule (rules: {[r.name for r in rules]})")
            rules = [rule for i, rule in enumerate(rules) if i not in matches]
            continue
        if not isinstance(value, Mapping):
            raise ValueError(f"collapse_thresholds[{key!r}] must be a mapping of rule fields or null, got {value!r}")
        unknown = set(value) - {"direction", "change", "warn", "collapse", "floor"}
        if unknown:
            raise ValueError(f"collapse_thresholds[{key!r}]: unknown fields {sorted(unknown)}")
        if matches:
            for i in matches:
                rules[i] = replace(rules[i], **value).validate()
            continue
        metric, _, direction = key.partition(":")
        fields = {"direction": direction or None, **value}
        missing = [name for name in ("direction", "change", "warn", "collapse") if fields.get(name) is None]
        if missing:
            raise ValueError(f"collapse_thresholds[{key!r}] is a new rule and needs {missing}")
        rules.append(SignalRule(metric, **fields).validate())
    return tuple(rules)


@dataclass
class Firing:
    rule: str
    level: str
    score: float
    window: float
    baseline: float
    reason: str


@dataclass
class Verdict:
    step: int
    label: str
    fired: list[Firing] = field(default_factory=list)
    values: dict[str, float] = field(default_factory=dict)  # the window means of every watched metric
    baseline_ready: bool = True
    raw: dict[str, float] = field(default_factory=dict)  # this step's own values of the watched metrics

    @property
    def level(self) -> int:
        return LEVELS[self.label]

    def reasons(self) -> str:
        return "; ".join(f"[{f.level}] {f.reason}" for f in self.fired) or "no signal fired"

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "label": self.label,
            "baseline_ready": self.baseline_ready,
            "fired": [{"rule": f.rule, "level": f.level, "score": _finite(f.score), "window": _finite(f.window),
                       "baseline": _finite(f.baseline), "reason": f.reason} for f in self.fired],
            "values": {k: _finite(v) for k, v in self.values.items()},
            "raw": {k: _finite(v) for k, v in self.raw.items()},
        }


def _finite(x: float) -> float | None | str:
    return round(x, 6) if math.isfinite(x) else str(x)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


class CollapseDetector:
    """Feed it one metric dict per logged training step (`update`); it returns that step's `Verdict`."""

    def __init__(self, settings: DetectorSettings | None = None) -> None:
        self.settings = (settings or DetectorSettings()).validate()
        self.keys = sorted({rule.key for rule in self.settings.rules})
        self._baseline_rows: list[dict[str, float]] = []
        self._baseline: dict[str, tuple[float, float]] | None = None  # key -> (mean, std)
        self._recent: deque[dict[str, float]] = deque(maxlen=self.settings.window)

    @property
    def baseline(self) -> dict[str, tuple[float, float]] | None:
        return self._baseline

    def update(self, step: int, metrics: Mapping[str, Any]) -> Verdict:
        row = {k: v for k in self.keys if (v := _number(metrics.get(k))) is not None}
        nonfinite = [k for k in self.settings.nonfinite_keys
                     if (v := _number(metrics.get(k))) is not None and not math.isfinite(v)]
        finite_row = {k: v for k, v in row.items() if math.isfinite(v)}
        self._recent.append(finite_row)
        if self._baseline is None:
            self._baseline_rows.append(finite_row)
            if len(self._baseline_rows) >= self.settings.baseline_steps:
                self._baseline = _mean_std(self._baseline_rows)
        values = {k: m for k, (m, _) in _mean_std(list(self._recent)).items()}
        fired = [Firing(f"{k}:nonfinite", COLLAPSE, math.inf, math.nan, math.nan, f"{k} is {metrics.get(k)}")
                 for k in nonfinite]
        if self._baseline is None:
            return Verdict(step, COLLAPSE if fired else OK, fired, values, baseline_ready=False, raw=row)
        for rule in self.settings.rules:
            if rule.key not in values or rule.key not in self._baseline:
                continue  # a metric this run does not log (e.g. no vLLM: no sampling/*): the rule stays silent
            mean, std = self._baseline[rule.key]
            score = rule.score(values[rule.key], mean, std)
            for level, threshold in ((COLLAPSE, rule.collapse), (WARN, rule.warn)):
                if score >= threshold:
                    reason = rule.describe(values[rule.key], mean, score, threshold)
                    fired.append(Firing(rule.name, level, score, values[rule.key], mean, reason))
                    break
        collapsed = sum(f.level == COLLAPSE for f in fired if not f.rule.endswith(":nonfinite"))
        if nonfinite or collapsed >= self.settings.min_signals:
            label = COLLAPSE
        elif fired:
            label = WARN
        else:
            label = OK
        return Verdict(step, label, fired, values, raw=row)


def _mean_std(rows: list[dict[str, float]]) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    keys = {k for row in rows for k in row}
    for key in keys:
        xs = [row[key] for row in rows if key in row]
        mean = sum(xs) / len(xs)
        std = math.sqrt(sum((x - mean) ** 2 for x in xs) / len(xs))
        out[key] = (mean, std)
    return out
