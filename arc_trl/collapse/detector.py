"""The collapse detector: pure logic over the per-step metric dicts a run logs (no trainer, no I/O).

Three kinds of evidence, each checked on every logged step:

- *drift* (the slow collapse): each `SignalRule` compares the mean of a metric over the last `window` logged steps
  with the run's frozen baseline (the mean over its first `baseline_steps` steps not labelled `collapse`), as a
  difference (`delta`), a ratio (`ratio`) or in baseline standard deviations (`zscore`), in the direction that
  means trouble; at `warn` or `collapse` level.
- *breaks* (a sudden collapse): each `delta`/`ratio` rule also compares this step's own value with the run's
  *healthy level* (the mean over its last `baseline_steps` steps not labelled `collapse`; at step 2: step 1), at
  collapse level only. A window mean dilutes a break (one broken step moves a 10-step mean by a tenth).
- *states* (`StateRule`, `RewardFloorRule`): this step's value is a collapse whatever the baseline (no valid
  prediction left, nearly every episode truncated, no episode above the healthy mean reward) where the healthy
  level was far from it; at collapse level.

A step labelled `collapse` never enters the baseline nor the healthy level, so a collapse cannot become the norm,
however early it comes and however long it lasts. A step is labelled

- `collapse` when rules on at least `min_signals` different metrics are at collapse level, or a metric of
  `NONFINITE_KEYS` is NaN/inf;
- `warn` when any rule fires but fewer than `min_signals` metrics reach collapse level;
- `ok` otherwise (step 1 is always ok unless non-finite: there is nothing to compare it with).

Defaults and why: docs/collapse.md. Every threshold can be overridden per key or rule name (`collapse_thresholds`).
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
    """`key` going `direction` by more than `warn` / `collapse` (in `change` units) against the baseline (window
    mean), and, when `sudden`, by more than `collapse` against the healthy level (this step's own value)."""

    key: str
    direction: str  # "up": rising is bad; "down": falling is bad
    change: str  # "delta": window - baseline; "ratio": window / baseline; "zscore": (window - baseline) / std
    warn: float
    collapse: float
    floor: float = 1e-3  # ratio: smallest baseline (and window) value; zscore: smallest std
    sudden: bool = True  # also check this step's value against the healthy level (delta and ratio rules only)

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

    def describe(self, window: float, baseline: float, score: float, threshold: float, sudden: bool = False) -> str:
        unit = {"delta": f"{'+' if self.direction == 'up' else '-'}{score:.3g}",
                "ratio": f"x{score:.3g}" if self.direction == "up" else f"/{score:.3g}",
                "zscore": f"{score:.3g} sd {self.direction}"}[self.change]
        if sudden:
            return f"{self.key} {window:.4g} this step vs healthy {baseline:.4g} ({unit} >= {threshold:g})"
        return f"{self.key} {window:.4g} vs baseline {baseline:.4g} ({unit} >= {threshold:g})"


@dataclass(frozen=True)
class StateRule:
    """A state that is a collapse whatever the baseline: this step's value of the first of `keys` the run logs is at
    most (`bad="low"`) / at least (`bad="high"`) `value`, where the healthy level was at least / at most `healthy`."""

    name: str
    keys: tuple[str, ...]  # the first one the run logs is used (e.g. valid predictions, else SUBMITs)
    bad: str  # "low" | "high"
    value: float
    healthy: float
    what: str = ""  # the reason's words

    def validate(self) -> StateRule:
        if self.bad not in ("low", "high"):
            raise ValueError(f"collapse rule {self.name}: bad must be 'low' or 'high', got {self.bad!r}")
        wrong_side = self.value >= self.healthy if self.bad == "low" else self.value <= self.healthy
        if wrong_side:
            raise ValueError(f"collapse rule {self.name}: value {self.value} must be on the bad side of healthy "
                             f"{self.healthy}")
        return self

    def check(self, raw: Mapping[str, float], healthy_rows: list[dict[str, float]]) -> Firing | None:
        key = next((k for k in self.keys if k in raw), None)
        levels = [row[key] for row in healthy_rows if key in row] if key else []
        if not levels:
            return None
        value, level = raw[key], sum(levels) / len(levels)
        if self.bad == "low":
            fired = value <= self.value and level >= self.healthy
            words = f"{key} {value:.3g} this step (<= {self.value:g}) after a healthy {level:.3g} (>= {self.healthy:g})"
        else:
            fired = value >= self.value and level <= self.healthy
            words = f"{key} {value:.3g} this step (>= {self.value:g}) after a healthy {level:.3g} (<= {self.healthy:g})"
        if not fired:
            return None
        return Firing(self.name, COLLAPSE, math.inf, value, level, f"{self.what}: {words}" if self.what else words,
                      key=key, kind="state")


@dataclass(frozen=True)
class RewardFloorRule:
    """The whole batch at the bottom: this step's best episode (`reward_max`) scores no more than the healthy mean
    reward, where every healthy step had an episode above it. A reward pinned at its floor for the whole batch is the
    extreme case; the rule needs no reward mode's floor (in `barc`, a batch of invalid answers, 0, and no code, -1,
    is at the bottom too)."""

    name: str = "reward_at_floor"
    value: float = 0.0  # margin: fires when reward_max <= healthy mean reward - value
    keys = ("reward", "reward_max")  # class attribute: the metrics it reads

    def validate(self) -> RewardFloorRule:
        if self.value < 0:
            raise ValueError(f"collapse rule {self.name}: value (a margin) must be >= 0, got {self.value}")
        return self

    def check(self, raw: Mapping[str, float], healthy_rows: list[dict[str, float]]) -> Firing | None:
        rows = [row for row in healthy_rows if "reward" in row and "reward_max" in row]
        if "reward_max" not in raw or not rows:
            return None
        mean = sum(row["reward"] for row in rows) / len(rows)
        worst_best = min(row["reward_max"] for row in rows)
        if not (raw["reward_max"] <= mean - self.value and worst_best > mean):
            return None
        reason = (f"no episode above the healthy mean reward: reward_max {raw['reward_max']:.4g} this step <= "
                  f"{mean:.4g} (every healthy step had one, >= {worst_best:.4g})")
        return Firing(self.name, COLLAPSE, math.inf, raw["reward_max"], mean, reason, key="reward", kind="state")


# The collapse of the GRPO-on-ARC research log: completions grow to the token cap and repeat the same text, so length,
# truncation and repetition rise together while SUBMIT/valid-code rates and entropy fall. Thresholds are changes
# against the run's own first steps; two metrics must reach collapse level together (min_signals) so that one
# noisy metric cannot stop a run. Why each number: docs/collapse.md.
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

# States that are a collapse whatever the baseline (issue 24: a GPU run collapsed at step 2, inside the baseline).
DEFAULT_STATE_RULES: tuple[StateRule | RewardFloorRule, ...] = (
    StateRule("no_valid_left", ("episode/valid_prediction_rate", "episode/submit_rate"), "low", value=0.02,
              healthy=0.3, what="no valid prediction left"),
    StateRule("all_truncated", ("episode/truncated_rate",), "high", value=0.9, healthy=0.5,
              what="nearly every episode truncated"),
    RewardFloorRule(),
)


@dataclass
class DetectorSettings:
    rules: tuple[SignalRule, ...] = DEFAULT_RULES
    baseline_steps: int = 20  # non-collapse steps averaged into the baseline (the run's first) and the healthy level
    window: int = 10  # logged steps averaged into the current value (drift rules)
    min_signals: int = 2  # metrics at collapse level needed to label a step `collapse`
    nonfinite_keys: tuple[str, ...] = NONFINITE_KEYS
    state_rules: tuple[StateRule | RewardFloorRule, ...] = DEFAULT_STATE_RULES

    def validate(self) -> DetectorSettings:
        for name in ("baseline_steps", "window", "min_signals"):
            if getattr(self, name) < 1:
                raise ValueError(f"collapse guard: {name} must be >= 1, got {getattr(self, name)}")
        names = [rule.validate().name for rule in self.rules] + [rule.validate().name for rule in self.state_rules]
        if len(set(names)) != len(names):
            raise ValueError(f"collapse guard: duplicate rules in {names}")
        return self


STATE_FIELDS = {"value", "healthy"}


def rules_with_overrides(overrides: Mapping[str, Any] | None, base: tuple[SignalRule, ...] = DEFAULT_RULES
                         ) -> tuple[SignalRule, ...]:
    """Apply `collapse_thresholds` to the default signal rules (keys naming a state rule are left to
    `state_rules_with_overrides`).

    Keys are a metric (`episode/truncated_rate`, every rule on it) or a rule name (`entropy:down`); values are a dict
    of rule fields (`warn`, `collapse`, `change`, `floor`, `sudden`, `direction` for new rules), or `null`/`"off"` to
    drop the rule(s). A key that matches no default rule adds a new rule (it then needs direction, change, warn,
    collapse).
    """
    rules = list(base)
    state_names = {rule.name for rule in DEFAULT_STATE_RULES}
    for key, value in (overrides or {}).items():
        if key in state_names:
            continue
        matches = [i for i, rule in enumerate(rules) if key in (rule.key, rule.name)]
        if value is None or value == "off" or value is False:
            if not matches:
                raise ValueError(f"collapse_thresholds: {key!r} matches no rule (rules: "
                                 f"{[r.name for r in rules] + sorted(state_names)})")
            rules = [rule for i, rule in enumerate(rules) if i not in matches]
            continue
        if not isinstance(value, Mapping):
            raise ValueError(f"collapse_thresholds[{key!r}] must be a mapping of rule fields or null, got {value!r}")
        unknown = set(value) - {"direction", "change", "warn", "collapse", "floor", "sudden"}
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


def state_rules_with_overrides(overrides: Mapping[str, Any] | None,
                               base: tuple[StateRule | RewardFloorRule, ...] = DEFAULT_STATE_RULES
                               ) -> tuple[StateRule | RewardFloorRule, ...]:
    """Apply the `collapse_thresholds` keys that name a state rule (`no_valid_left`, `all_truncated`,
    `reward_at_floor`): `null`/`"off"` drops it, a mapping sets `value` (and `healthy` for the first two)."""
    rules = list(base)
    for key, value in (overrides or {}).items():
        matches = [i for i, rule in enumerate(rules) if rule.name == key]
        if not matches:
            continue
        if value is None or value == "off" or value is False:
            rules = [rule for i, rule in enumerate(rules) if i not in matches]
            continue
        allowed = STATE_FIELDS if isinstance(rules[matches[0]], StateRule) else {"value"}
        if not isinstance(value, Mapping) or set(value) - allowed:
            raise ValueError(f"collapse_thresholds[{key!r}] must be null or a mapping of {sorted(allowed)}, "
                             f"got {value!r}")
        rules[matches[0]] = replace(rules[matches[0]], **value).validate()
    return tuple(rules)


@dataclass
class Firing:
    rule: str
    level: str
    score: float
    window: float  # the value judged: the window mean (drift) or this step's value (break, state)
    baseline: float  # what it was judged against: the baseline (drift) or the healthy level (break, state)
    reason: str
    key: str = ""  # the metric (signals are counted per metric)
    kind: str = "drift"  # drift | break | state | nonfinite


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
            "fired": [{"rule": f.rule, "level": f.level, "kind": f.kind, "score": _finite(f.score),
                       "window": _finite(f.window), "baseline": _finite(f.baseline), "reason": f.reason}
                      for f in self.fired],
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
        self.keys = sorted({rule.key for rule in self.settings.rules}
                           | {key for rule in self.settings.state_rules for key in rule.keys})
        self._baseline_rows: list[dict[str, float]] = []  # the first baseline_steps non-collapse steps
        self._baseline: dict[str, tuple[float, float]] | None = None  # key -> (mean, std)
        self._healthy: deque[dict[str, float]] = deque(maxlen=self.settings.baseline_steps)  # last non-collapse
        self._recent: deque[dict[str, float]] = deque(maxlen=self.settings.window)

    @property
    def baseline(self) -> dict[str, tuple[float, float]] | None:
        return self._baseline

    @property
    def healthy_level(self) -> dict[str, float]:
        """The mean of every watched metric over the last `baseline_steps` steps not labelled `collapse`."""
        return {k: m for k, (m, _) in _mean_std(list(self._healthy)).items()}

    def update(self, step: int, metrics: Mapping[str, Any]) -> Verdict:
        row = {k: v for k in self.keys if (v := _number(metrics.get(k))) is not None}
        nonfinite = [k for k in self.settings.nonfinite_keys
                     if (v := _number(metrics.get(k))) is not None and not math.isfinite(v)]
        finite_row = {k: v for k, v in row.items() if math.isfinite(v)}
        self._recent.append(finite_row)
        values = {k: m for k, (m, _) in _mean_std(list(self._recent)).items()}
        fired = [Firing(f"{k}:nonfinite", COLLAPSE, math.inf, math.nan, math.nan, f"{k} is {metrics.get(k)}",
                        key=k, kind="nonfinite") for k in nonfinite]
        healthy_rows = list(self._healthy)
        healthy = self.healthy_level
        for rule in self.settings.rules:  # one firing per rule: the higher level of drift and break
            drift = self._drift(rule, values)
            firing = drift if drift is not None and drift.level == COLLAPSE else (
                self._break(rule, finite_row, healthy) or drift)
            if firing is not None:
                fired.append(firing)
        for state in self.settings.state_rules:
            firing = state.check(finite_row, healthy_rows)
            if firing is not None:
                fired.append(firing)
        collapsed = {f.key for f in fired if f.level == COLLAPSE and f.kind != "nonfinite"}
        if nonfinite or len(collapsed) >= self.settings.min_signals:
            label = COLLAPSE
        elif fired:
            label = WARN
        else:
            label = OK
        if label != COLLAPSE:  # a collapsed step never becomes the norm
            self._healthy.append(finite_row)
            if self._baseline is None:
                self._baseline_rows.append(finite_row)
                if len(self._baseline_rows) >= self.settings.baseline_steps:
                    self._baseline = _mean_std(self._baseline_rows)
        return Verdict(step, label, fired, values, baseline_ready=self._baseline is not None, raw=row)

    def _drift(self, rule: SignalRule, values: dict[str, float]) -> Firing | None:
        """The window mean against the frozen baseline (once it is complete), at warn or collapse level."""
        if self._baseline is None or rule.key not in values or rule.key not in self._baseline:
            return None  # a metric this run does not log (e.g. no vLLM: no sampling/*): the rule stays silent
        mean, std = self._baseline[rule.key]
        score = rule.score(values[rule.key], mean, std)
        for level, threshold in ((COLLAPSE, rule.collapse), (WARN, rule.warn)):
            if score >= threshold:
                reason = rule.describe(values[rule.key], mean, score, threshold)
                return Firing(rule.name, level, score, values[rule.key], mean, reason, key=rule.key)
        return None

    @staticmethod
    def _break(rule: SignalRule, raw: dict[str, float], healthy: dict[str, float]) -> Firing | None:
        """This step's own value against the healthy level, at collapse level only (delta and ratio rules)."""
        if not rule.sudden or rule.change == "zscore" or rule.key not in raw or rule.key not in healthy:
            return None
        score = rule.score(raw[rule.key], healthy[rule.key], 0.0)
        if score < rule.collapse:
            return None
        reason = rule.describe(raw[rule.key], healthy[rule.key], score, rule.collapse, sudden=True)
        return Firing(rule.name, COLLAPSE, score, raw[rule.key], healthy[rule.key], reason, key=rule.key, kind="break")


def _mean_std(rows: list[dict[str, float]]) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    keys = {k for row in rows for k in row}
    for key in keys:
        xs = [row[key] for row in rows if key in row]
        mean = sum(xs) / len(xs)
        std = math.sqrt(sum((x - mean) ** 2 for x in xs) / len(xs))
        out[key] = (mean, std)
    return out
