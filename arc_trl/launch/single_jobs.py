"""Single HTCondor jobs: one training run (through `arc-trl serve`) or one evaluation (`arc-trl evaluate`): the
logic of `arc-trl condor`. Jobs run the commands as `python -m arc_trl ...` with the submitting interpreter.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from arc_trl.launch.condor import CondorError, CondorResources, build_submit, default_resources, submit_or_write
from arc_trl.launch.launchers import SERVE_ARGS
from arc_trl.launch.server_plan import REPO_ROOT, PlanError
from arc_trl.launch.server_runner import load_config

EVALUATE_ARGS = ["-m", "arc_trl", "evaluate"]  # `arc-trl evaluate` run by the submitting interpreter
EVALUATE_DEFAULTS = CondorResources(gpus=1, cpus=8, memory="32G", disk="20G")


def _resource_overrides(args: argparse.Namespace) -> dict[str, Any]:
    values = {
        "gpus": args.gpus, "cpus": args.cpus, "memory": args.memory, "disk": args.disk,
        "requirements": args.requirements, "max_retries": args.max_retries,
    }
    values = {key: value for key, value in values.items() if value is not None}
    if args.no_getenv:
        values["getenv"] = False
    if args.env:
        values["environment"] = dict(_key_value(item, "--env") for item in args.env)
    if args.submit_extra:
        values["extra"] = dict(_key_value(item, "--submit-extra") for item in args.submit_extra)
    return values


def _key_value(text: str, flag: str) -> tuple[str, str]:
    if "=" not in text:
        raise CondorError(f"{flag} {text!r}: expected KEY=VALUE")
    key, value = text.split("=", 1)
    return key.strip(), value


def _add_resource_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("resources (defaults derived from the config where possible)")
    group.add_argument("--gpus", type=int, help="request_gpus")
    group.add_argument("--cpus", type=int, help="request_cpus")
    group.add_argument("--memory", help="request_memory, e.g. 128G")
    group.add_argument("--disk", help="request_disk, e.g. 100G")
    group.add_argument("--requirements", help="ClassAd expression, e.g. 'TARGET.Machine == \"node21\"'")
    group.add_argument("--max-retries", type=int, help="re-runs of a failed job (default 2)")
    group.add_argument("--no-getenv", action="store_true", help="do not copy the submitter's environment")
    group.add_argument("--env", action="append", metavar="KEY=VALUE", help="environment variable of the job")
    group.add_argument("--submit-extra", action="append", metavar="KEY=VALUE", help="raw submit command")
    group.add_argument("--job-dir", type=Path, help="where the .sub and condor logs go")
    group.add_argument("--dry-run", action="store_true", help="write the .sub file and print it; submit nothing "
                       "(train: and check the config as `arc-trl train --check_config true` does: exit 2 if it fails)")
    group.add_argument("--no-preflight", action="store_true", help="--dry-run: skip that check")


def build_arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Submit one training or evaluation job to HTCondor (or write its .sub file when no schedd is "
        "reachable). Arguments after `--` go to `arc-trl train` (train) or `arc-trl evaluate` (evaluate).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="arc-trl serve --config X --resume --auto-ports")
    train.add_argument("--config", required=True, type=Path, help="training YAML")
    _add_resource_flags(train)
    evaluate = commands.add_parser("evaluate", help="arc-trl evaluate <args after -->")
    evaluate.add_argument("--name", default="evaluate", help="batch name and log file prefix")
    _add_resource_flags(evaluate)
    return parser


def train_job(args: argparse.Namespace, extra: list[str]) -> tuple[Any, Path]:
    config_path = args.config.resolve()
    config = load_config(config_path)
    base = default_resources(config)
    resources = CondorResources.from_mapping(_resource_overrides(args), base, "arc-trl condor train")
    output_dir = Path(config.get("output_dir") or REPO_ROOT / "runs" / config_path.stem).resolve()
    job_dir = (args.job_dir or output_dir / "condor").resolve()
    name = str(config.get("run_name") or config_path.stem)
    submit = build_submit(
        executable=sys.executable,
        arguments=[*SERVE_ARGS, "--config", str(config_path), "--resume", "--auto-ports", *extra],
        resources=resources,
        log=job_dir / "condor.log",
        output=str(job_dir / "train.$(Cluster).log"),
        error=str(job_dir / "train.$(Cluster).err"),
        batch_name=name,
        initialdir=REPO_ROOT,
    )
    return submit, job_dir / f"{name}.sub"


def _evaluate_output_dir(extra: list[str]) -> Path | None:
    for i, arg in enumerate(extra):
        if arg in ("--output-dir", "--output_dir") and i + 1 < len(extra):
            return Path(extra[i + 1])
        if arg.startswith(("--output-dir=", "--output_dir=")):
            return Path(arg.split("=", 1)[1])
    return None


def evaluate_job(args: argparse.Namespace, extra: list[str]) -> tuple[Any, Path]:
    if not extra:
        raise CondorError("evaluate: give the `arc-trl evaluate` arguments after `--`")
    resources = CondorResources.from_mapping(_resource_overrides(args), EVALUATE_DEFAULTS, "arc-trl condor evaluate")
    output_dir = _evaluate_output_dir(extra)
    default_dir = (output_dir / "condor") if output_dir else REPO_ROOT / "runs" / "condor" / time.strftime(
        f"{args.name}-%Y%m%d-%H%M%S")
    job_dir = (args.job_dir or default_dir).resolve()
    submit = build_submit(
        executable=sys.executable,
        arguments=[*EVALUATE_ARGS, *extra],
        resources=resources,
        log=job_dir / "condor.log",
        output=str(job_dir / f"{args.name}.$(Cluster).log"),
        error=str(job_dir / f"{args.name}.$(Cluster).err"),
        batch_name=args.name,
        initialdir=REPO_ROOT,
    )
    return submit, job_dir / f"{args.name}.sub"


def main(argv: list[str] | None = None, printer: Callable[[str], None] = print) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, extra = argv[:split], argv[split + 1 :]
    args = build_arg_parser().parse_args(argv)
    try:
        submit, submit_file = (train_job if args.command == "train" else evaluate_job)(args, extra)
    except (CondorError, PlanError, ValueError) as error:
        printer(f"error: {error}")
        return 2
    if args.dry_run:
        printer(str(submit))
    submit_or_write(submit, submit_file, dry_run=args.dry_run, printer=printer)
    if args.dry_run and args.command == "train" and not args.no_preflight:
        from arc_trl.launch.preflight import preflight

        from arc_trl.launch.server_runner import build_arg_parser as serve_parser

        # the job runs `arc-trl serve`: its own flags (--gpus, --no-accelerate, ...) are not training keys
        _, train_overrides = serve_parser().parse_known_args(["--config", str(args.config), *extra])
        passed, found = preflight(args.config, train_overrides)
        printer(f"preflight: {'ok, ' if passed else ''}{found}")
        return 0 if passed else 2
    return 0
