"""`arc-trl transcripts`: SFT transcripts from evaluation folders: the episodes that solved their task and the
programs relabelled in hindsight (arc_trl/warmstart/transcripts.py), for `arc-trl sft --transcripts`."""

from __future__ import annotations

import argparse
import json
import os
import sys

from arc_trl.config.choices import AGENT_MODES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="arc-trl transcripts", description=__doc__, allow_abbrev=False)
    parser.add_argument("--eval-dir", nargs="+", required=True,
                        help="evaluation folders (completions.jsonl + per_attempt.jsonl, from evaluate generate)")
    parser.add_argument("--dataset", required=True, help="the tasks the folders attempted, with their solutions "
                        "(e.g. arc-agi-1/train); never an evaluation split you will report on")
    parser.add_argument("--out", required=True, help="the JSONL file to write")
    parser.add_argument("--agent-mode", choices=AGENT_MODES, default="repl")
    parser.add_argument("--prompt-template", default=None,
                        help="the prompt the transcripts are rendered with (the one the warm-started model is "
                             "evaluated with, e.g. configs/prompts/coder-repl.yaml)")
    parser.add_argument("--kinds", default="solved,hindsight", help="solved, hindsight or both (default)")
    parser.add_argument("--max-per-task", type=int, default=None, help="rows of each kind per task at most")
    parser.add_argument("--skip-task-ids", nargs="+", default=(),
                        help="held-out tasks (e.g. the validation tasks choices are made on): never in a row")
    parser.add_argument("--allow-eval-split", action="store_true",
                        help="take a dataset whose name says eval/evaluation (refused by default: training on the "
                             "split you report on is a leak)")
    parser.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1), help="sandbox processes")
    args = parser.parse_args(argv)
    from arc_trl.data import load_template
    from arc_trl.sandbox import SandboxConfig, SandboxPool
    from arc_trl.tasks import load_tasks
    from arc_trl.warmstart.transcripts import TranscriptError, build_transcripts, write_transcripts

    name = args.dataset.lower().replace("\\", "/")
    if not args.allow_eval_split and any(part in ("eval", "evaluation") for part in name.replace(".", "/").split("/")):
        print(f"error: --dataset {args.dataset}: an evaluation split; transcripts are for training (pass "
              "--allow-eval-split if this really is not the split you report on)", file=sys.stderr)
        return 2
    try:
        tasks = load_tasks(args.dataset)
        template = load_template(args.prompt_template, args.agent_mode)
        with SandboxPool(num_workers=max(1, args.workers), config=SandboxConfig()) as pool:
            rows, report = build_transcripts(args.eval_dir, tasks, args.agent_mode, template, pool,
                                             kinds=tuple(k.strip() for k in args.kinds.split(",") if k.strip()),
                                             max_per_task=args.max_per_task,
                                             skip_ids=frozenset(args.skip_task_ids))
    except (TranscriptError, OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    write_transcripts(rows, args.out)
    print(f"[transcripts] {len(rows)} rows -> {args.out}: {json.dumps(report.summary())}")
    return 0
