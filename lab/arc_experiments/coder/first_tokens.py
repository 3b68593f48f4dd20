"""How a model's reply begins, sampled on CPU with transformers in the coder harness's prompt (what a cut first turn
was spending its tokens on): the next-token top 5 and `--samples` sampled openings per task.

    python -m arc_experiments.coder.first_tokens MODEL_DIR TASK_ID... [--samples 4 --tokens 6] > OUT.txt
"""

from __future__ import annotations

import argparse
import sys

from arc_experiments.coder.plan import ROOT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("task_ids", nargs="+")
    parser.add_argument("--dataset", default="arc-agi-1/train")
    parser.add_argument("--prompt-template", default=str(ROOT / "configs" / "prompts" / "coder-repl-digits.yaml"))
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from arc_trl.chat_template import prompt_ids
    from arc_trl.data import load_template
    from arc_trl.eval.generate import add_generate_arguments, task_prompt
    from arc_trl.eval.generation_settings import resolve_options
    from arc_trl.tasks import load_tasks

    generate_args = resolve_options(add_generate_arguments(argparse.ArgumentParser()).parse_args(
        ["--model", args.model, "--dataset", args.dataset, "--prompt-template", args.prompt_template,
         "--check-transform", "--output-dir", "/dev/null"]))
    template = load_template(args.prompt_template, "repl")
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16)
    tasks = {task.id: task for task in load_tasks(args.dataset)}
    torch.manual_seed(args.seed)
    print(f"# {' '.join(sys.argv)}")
    for task_id in args.task_ids:
        ids = prompt_ids(tokenizer, task_prompt(tasks[task_id], generate_args, template))
        x = torch.tensor([ids])
        with torch.no_grad():
            top = model(x).logits[0, -1].float().softmax(-1).topk(5)
        print(f"{task_id}: prompt {len(ids)} tokens; next-token top 5: "
              + ", ".join(f"{tokenizer.convert_ids_to_tokens(int(i))!r} {float(p):.3f}"
                          for p, i in zip(top.values, top.indices)))
        out = model.generate(x, max_new_tokens=args.tokens, do_sample=True, temperature=1.0, top_k=0,
                             num_return_sequences=args.samples)
        for row in out[:, len(ids):]:
            print(f"  sampled: {tokenizer.decode(row)!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
