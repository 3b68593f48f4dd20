"""Sweep files: a base training config plus the keys to vary, expanded into one resolved config per run.

```yaml
name: lr-sweep                     # default: the sweep file's name without extension
base_config: configs/tiny-cpu.yaml # relative to the sweep file, else to the repository root
sweep_dir: runs/sweeps/lr-sweep    # default: runs/sweeps/<name> (relative to the current directory)
output_root: null                  # default: outputs live in the run folders <sweep_dir>/<run_name>/
fixed: {max_steps: 200}            # overrides applied to every run (dotted keys address nested dicts)
variants:                          # explicit override sets, each optionally named
  - {name: grpo, teacher_tau: 0.0}
  - {name: opd, teacher_tau: 0.3}
grid:                              # cartesian product of value lists
  learning_rate: [1e-6, 4e-6]
random:                            # n samples, reproducible with seed (see sampling.py)
  n: 4
  seed: 0
  params: {lora_r: {choice: [16, 32]}}
run_name: "{variant}_lr{learning_rate}"   # default: built from the varied keys
wandb: {project: arc-trl, group: lr-sweep} # group default: the sweep name
condor: {request_memory: 128G}     # submit settings of the condor launcher (see condor.py)
```

Blocks combine as a product: every variant x every grid point x every random sample. A key may be varied by one
block only. Values apply in the order base config < fixed < variant < grid < random.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from arc_trl.launch.launch_config import gpu_split
from arc_trl.launch.naming import MAX_NAME_LENGTH, default_template, format_value, render_name, template_keys
from arc_trl.launch.overrides import OverrideError, apply_overrides, coerce_number, get_dotted
from arc_trl.launch.run_state import RunState, run_state
from arc_trl.launch.sampling import Distribution, sample_points

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG_FILE = "config.yaml"
MANIFEST_FILE = "sweep_manifest.json"
TOP_LEVEL_KEYS = (
    "name", "base_config", "sweep_dir", "output_root", "fixed", "variants", "grid", "random", "run_name", "wandb",
    "condor",
)
SPECIAL_PLACEHOLDERS = ("variant", "index")
PER_RUN_KEYS = {"output_dir", "run_name"}


class SweepError(ValueError):
    """An invalid sweep file; the message names the file and the offending key."""

    def __init__(self, path: Path | str, message: str):
        super().__init__(f"{path}: {message}")


@dataclass(frozen=True)
class Variant:
    name: str
    overrides: dict[str, Any]


@dataclass
class SweepSpec:
    path: Path
    name: str
    base_config_path: Path
    base_config: dict
    sweep_dir: Path
    output_root: Path | None = None
    fixed: dict[str, Any] = field(default_factory=dict)
    variants: list[Variant] = field(default_factory=list)
    grid: dict[str, list] = field(default_factory=dict)
    random_params: dict[str, Distribution] = field(default_factory=dict)
    random_n: int = 0
    random_seed: int = 0
    run_name: str | None = None
    wandb_project: str | None = None
    wandb_group: str | None = None
    condor: dict[str, Any] = field(default_factory=dict)

    @property
    def varied_keys(self) -> list[str]:
        keys = [key for variant in self.variants for key in variant.overrides]
        return list(dict.fromkeys(keys + list(self.grid) + list(self.random_params)))


@dataclass
class Run:
    index: int
    name: str
    varied: dict[str, Any]  # the values of every varied key in this run (as in its resolved config)
    config: dict  # the resolved training config
    run_dir: Path  # holds config.yaml and train.log
    output_dir: Path
    variant: str | None = None

    @property
    def config_path(self) -> Path:
        return self.run_dir / CONFIG_FILE

    def state(self) -> RunState:
        return run_state(self.output_dir)


# ----------------------------------------------------------------------------------------------------------------
# Loading


def _mapping(path: Path, key: str, value: Any) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SweepError(path, f"'{key}' must be a mapping, got {type(value).__name__}: {value!r}")
    return {str(k): coerce_number(v) for k, v in value.items()}


def _resolve_base_config(path: Path, value: Any) -> Path:
    if not isinstance(value, str) or not value:
        raise SweepError(path, "'base_config' is required: the path of the training config the runs start from")
    candidate = Path(value).expanduser()
    tried = [candidate] if candidate.is_absolute() else [path.parent / candidate, REPO_ROOT / candidate]
    for option in tried:
        if option.is_file():
            return option.resolve()
    raise SweepError(path, f"base_config {value!r} not found (tried {', '.join(str(p) for p in tried)})")


def _load_yaml_mapping(path: Path, what: str) -> dict:
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise SweepError(path, f"{what} is not valid YAML: {error}") from error
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SweepError(path, f"{what} must be a YAML mapping, got {type(data).__name__}")
    return data


def _parse_variants(path: Path, value: Any) -> list[Variant]:
    if value is None:
        return []
    if not isinstance(value, list) or not value:
        raise SweepError(path, "'variants' must be a non-empty list of override mappings")
    variants = []
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise SweepError(path, f"variants[{i}] must be a mapping of overrides, got {item!r}")
        overrides = {str(k): coerce_number(v) for k, v in item.items() if k != "name"}
        name = item.get("name")
        if name is None:
            name = "_".join(f"{k.split('.')[-1]}{format_value(v)}" for k, v in overrides.items()) or f"v{i}"
        variants.append(Variant(str(name), overrides))
    names = [variant.name for variant in variants]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise SweepError(path, f"variants: duplicate names {duplicates}")
    return variants


def _parse_grid(path: Path, value: Any) -> dict[str, list]:
    grid = _mapping(path, "grid", value)
    for key, values in grid.items():
        if not isinstance(values, list):
            raise SweepError(path, f"grid.{key} must be a list of values, got {values!r}")
        if not values:
            raise SweepError(path, f"grid.{key} is an empty list: the grid would have no runs")
        grid[key] = [coerce_number(v) for v in values]
    return grid


def _parse_random(path: Path, value: Any) -> tuple[dict[str, Distribution], int, int]:
    if value is None:
        return {}, 0, 0
    if not isinstance(value, dict):
        raise SweepError(path, f"'random' must be a mapping with n, seed and params, got {value!r}")
    unknown = set(value) - {"n", "seed", "params"}
    if unknown:
        raise SweepError(path, f"random: unknown keys {sorted(unknown)} (allowed: n, seed, params)")
    n, seed = value.get("n"), value.get("seed", 0)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise SweepError(path, f"random.n must be a positive integer, got {n!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise SweepError(path, f"random.seed must be an integer, got {seed!r}")
    params = value.get("params")
    if not isinstance(params, dict) or not params:
        raise SweepError(path, "random.params must be a non-empty mapping of key -> distribution")
    try:
        parsed = {str(key): Distribution.parse(str(key), spec) for key, spec in params.items()}
    except ValueError as error:
        raise SweepError(path, str(error)) from error
    return parsed, n, seed


def load_sweep(path: str | Path, sweep_dir: str | Path | None = None) -> SweepSpec:
    """Parse and validate a sweep file. `sweep_dir` overrides the file's `sweep_dir`."""
    path = Path(path)
    if not path.is_file():
        raise SweepError(path, "sweep file not found")
    data = _load_yaml_mapping(path, "sweep file")
    unknown = [key for key in data if key not in TOP_LEVEL_KEYS]
    if unknown:
        raise SweepError(path, f"unknown keys {unknown} (allowed: {', '.join(TOP_LEVEL_KEYS)})")

    name = str(data.get("name") or path.stem)
    base_path = _resolve_base_config(path, data.get("base_config"))
    base_config = _load_yaml_mapping(base_path, "base config")
    wandb = _mapping(path, "wandb", data.get("wandb"))
    if set(wandb) - {"project", "group"}:
        raise SweepError(path, f"wandb: unknown keys {sorted(set(wandb) - {'project', 'group'})} (project, group)")
    run_name = data.get("run_name")
    if run_name is not None and (not isinstance(run_name, str) or not run_name.strip()):
        raise SweepError(path, f"run_name must be a non-empty template string, got {run_name!r}")
    output_root = data.get("output_root")

    spec = SweepSpec(
        path=path.resolve(),
        name=name,
        base_config_path=base_path,
        base_config=base_config,
        sweep_dir=Path(sweep_dir or data.get("sweep_dir") or Path("runs") / "sweeps" / name).expanduser().resolve(),
        output_root=Path(output_root).expanduser().resolve() if output_root else None,
        fixed=_mapping(path, "fixed", data.get("fixed")),
        variants=_parse_variants(path, data.get("variants")),
        grid=_parse_grid(path, data.get("grid")),
        run_name=run_name,
        wandb_project=wandb.get("project"),
        wandb_group=str(wandb.get("group") or name),
        condor=_mapping(path, "condor", data.get("condor")),
    )
    spec.random_params, spec.random_n, spec.random_seed = _parse_random(path, data.get("random"))
    if not (spec.variants or spec.grid or spec.random_params):
        raise SweepError(path, "nothing to vary: give at least one of 'grid', 'variants' or 'random'")
    _check_key_overlap(spec)
    return spec


def _check_key_overlap(spec: SweepSpec) -> None:
    variant_keys = {key for variant in spec.variants for key in variant.overrides}
    reserved = sorted((variant_keys | set(spec.grid) | set(spec.random_params) | set(spec.fixed)) & PER_RUN_KEYS)
    if reserved:
        raise SweepError(spec.path, f"{reserved} are set per run by the sweep (output_dir = <sweep_dir or "
                         "output_root>/<run name>, run_name from the 'run_name' template); do not set them")
    blocks = {"variants": variant_keys, "grid": set(spec.grid), "random": set(spec.random_params)}
    for (first, a), (second, b) in itertools.combinations(blocks.items(), 2):
        if a & b:
            raise SweepError(spec.path, f"keys {sorted(a & b)} are varied by both '{first}' and '{second}'")


# ----------------------------------------------------------------------------------------------------------------
# Expansion


def _points(spec: SweepSpec) -> list[tuple[Variant | None, dict[str, Any]]]:
    variants: list[Variant | None] = list(spec.variants) or [None]
    keys = list(spec.grid)
    grid_points = [dict(zip(keys, values)) for values in itertools.product(*spec.grid.values())] if keys else [{}]
    samples = sample_points(spec.random_params, spec.random_n, spec.random_seed) if spec.random_params else [{}]
    return [
        (variant, {**(variant.overrides if variant else {}), **grid_point, **sample})
        for variant in variants
        for grid_point in grid_points
        for sample in samples
    ]


def _template(spec: SweepSpec) -> str:
    if spec.run_name:
        return spec.run_name
    keys = list(spec.grid) + list(spec.random_params)
    return default_template(keys, has_variants=bool(spec.variants))


def _render(spec: SweepSpec, template: str, index: int, variant: Variant | None, config: dict) -> str:
    values: dict[str, Any] = {"index": f"{index:03d}", "variant": variant.name if variant else "none"}
    for key in template_keys(template):
        if key in SPECIAL_PLACEHOLDERS:
            continue
        value = get_dotted(config, key, default=KeyError)
        if value is KeyError:
            raise SweepError(spec.path, f"run_name placeholder {{{key}}} is neither a config key nor one of "
                             f"{', '.join(SPECIAL_PLACEHOLDERS)}")
        values[key] = value
    try:
        name = render_name(template, values)
    except (ValueError, TypeError) as error:
        raise SweepError(spec.path, f"run_name template {template!r}: {error}") from error
    if not name or name in (".", ".."):
        raise SweepError(spec.path, f"run_name template {template!r} gives an empty name for run {index}")
    if len(name) > MAX_NAME_LENGTH:
        raise SweepError(spec.path, f"run name {name[:60]}... is longer than {MAX_NAME_LENGTH} characters; "
                         "set a shorter 'run_name' template")
    return name


def _finalize(spec: SweepSpec, config: dict, name: str, output_dir: Path) -> dict:
    config["output_dir"] = str(output_dir)
    config["run_name"] = name
    env = config.get("env") or {}
    if not isinstance(env, dict):
        raise SweepError(spec.base_config_path, f"'env' must be a mapping, got {env!r}")
    env = {**env, "WANDB_RUN_GROUP": spec.wandb_group}
    if spec.wandb_project:
        env["WANDB_PROJECT"] = spec.wandb_project
    config["env"] = env
    return config


def expand_sweep(spec: SweepSpec, known_keys: set[str] | None = None) -> list[Run]:
    """One `Run` per point of the sweep, with unique names and resolved configs (nothing is written).

    `known_keys`: when given, every top-level key of a resolved config must be in it (catches typos before launch).
    """
    template = _template(spec)
    try:
        base = apply_overrides(spec.base_config, spec.fixed)
    except OverrideError as error:
        raise SweepError(spec.path, f"fixed: {error}") from error
    runs: list[Run] = []
    for index, (variant, overrides) in enumerate(_points(spec)):
        try:
            config = apply_overrides(base, overrides)
        except OverrideError as error:
            raise SweepError(spec.path, str(error)) from error
        name = _render(spec, template, index, variant, config)
        output_dir = (spec.output_root or spec.sweep_dir) / name
        config = _finalize(spec, config, name, output_dir)
        try:
            gpu_split(config)
        except ValueError as error:
            raise SweepError(spec.path, f"run {name!r}: {error}") from error
        varied = {key: get_dotted(config, key) for key in spec.varied_keys}
        runs.append(Run(index, name, varied, config, spec.sweep_dir / name, output_dir, variant and variant.name))
    _check_unique(spec, runs, template)
    if known_keys is not None:
        _check_known_keys(spec, runs, known_keys)
    return runs


def _check_unique(spec: SweepSpec, runs: list[Run], template: str) -> None:
    seen: dict[str, Run] = {}
    for run in runs:
        if run.name in seen:
            other = seen[run.name]
            raise SweepError(
                spec.path,
                f"run name collision: {run.name!r} is produced by runs {other.index} ({other.varied}) and "
                f"{run.index} ({run.varied}) with run_name template {template!r}; add the missing keys (or "
                "{index}) to 'run_name'",
            )
        seen[run.name] = run


def _check_known_keys(spec: SweepSpec, runs: list[Run], known_keys: set[str]) -> None:
    for run in runs:
        unknown = sorted(set(run.config) - known_keys)
        if unknown:
            raise SweepError(spec.path, f"run {run.name!r}: unknown config keys {unknown} (from the base config "
                             f"{spec.base_config_path} or the sweep); `arc-trl train` would reject them")


# ----------------------------------------------------------------------------------------------------------------
# Writing


def write_runs(spec: SweepSpec, runs: list[Run]) -> list[str]:
    """Write `<sweep_dir>/<run>/config.yaml` for every run and the manifest. Returns warnings to show the user.

    A finished run keeps the config.yaml it ran with; a resumable run whose config changed gets the new one.
    """
    warnings = []
    for run in runs:
        run.run_dir.mkdir(parents=True, exist_ok=True)
        text = yaml.safe_dump(run.config, sort_keys=False)
        state = run.state()
        old = run.config_path.read_text() if run.config_path.is_file() else None
        if old is not None and old != text and state.status != "new":
            if state.status == "finished":
                warnings.append(f"{run.name}: finished with a different config; kept its config.yaml "
                                f"(delete {run.output_dir} to run it again)")
                continue
            warnings.append(f"{run.name}: config changed since the last launch; resuming with the new config")
        run.config_path.write_text(text)
    write_manifest(spec, runs)
    return warnings


def write_manifest(spec: SweepSpec, runs: list[Run], results: dict[str, int | None] | None = None) -> Path:
    manifest = {
        "name": spec.name,
        "sweep_file": str(spec.path),
        "base_config": str(spec.base_config_path),
        "sweep_dir": str(spec.sweep_dir),
        "wandb_group": spec.wandb_group,
        "varied_keys": spec.varied_keys,
        "runs": [
            {
                "name": run.name,
                "index": run.index,
                "variant": run.variant,
                "varied": run.varied,
                "config": str(run.config_path),
                "output_dir": str(run.output_dir),
                "status": run.state().status,
                **({"exit_code": results.get(run.name)} if results and run.name in results else {}),
            }
            for run in runs
        ],
    }
    spec.sweep_dir.mkdir(parents=True, exist_ok=True)
    path = spec.sweep_dir / MANIFEST_FILE
    path.write_text(json.dumps(manifest, indent=2, default=str) + "\n")
    return path


def format_table(spec: SweepSpec, runs: list[Run]) -> str:
    """Aligned text table: run name, one column per varied key, status."""
    keys = spec.varied_keys
    header = ["run", *keys, "status"]
    rows = [[run.name, *(format_value(run.varied.get(key)) for key in keys), run.state().describe()] for run in runs]
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [header, *rows]]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)
