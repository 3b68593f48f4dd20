"""Teacher prefill vs student generation for the same sequences, vLLM on CPU (goal: ratio <= 0.2).

    python benchmarks/teacher_bench.py [--batch 32 --new-tokens 256 --layers 4 --hidden 256]

The student samples `--new-tokens` tokens for each of `--batch` real ARC prompts (colocated vLLM); the teacher — the
same model on its own vLLM OpenAI server, as in the 4-GPU layout — scores the resulting prompt + completion sequences
through `ServerTeacher` (TRL's `VLLMClient.get_sequence_logprobs`, prompt_logprobs). Load times are excluded.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")


def start_server(model_dir: Path, port: int, max_len: int, log_path: Path) -> subprocess.Popen:
    log = open(log_path, "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir), "--port", str(port),
         "--dtype", "float32", "--max-model-len", str(max_len), "--max-logprobs", "-1"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    deadline = time.time() + 600
    while time.time() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"teacher server exited; see {log_path}")
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200:
                return server
        except OSError:
            time.sleep(2)
    raise TimeoutError("teacher server did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--prompt-tokens", type=int, default=1024)
    args = parser.parse_args()

    from transformers import AutoTokenizer
    from vllm import LLM

    from arc_trl.rollout import VLLMGenerator
    from arc_trl.opd import ServerTeacher
    from common import arc_prompts, build_bench_model

    model_dir = build_bench_model(args.layers, args.hidden, "teacher_bench_")
    workdir = model_dir.parent
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    prompts = arc_prompts(tokenizer, args.batch, args.prompt_tokens)
    max_len = args.prompt_tokens + args.new_tokens + 8

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = start_server(model_dir, port, max_len, workdir / "teacher_server.log")
    try:
        llm = LLM(model=str(model_dir), dtype="float32", max_model_len=max_len, max_num_seqs=args.batch, seed=0)
        student = VLLMGenerator(llm, [], ignore_eos=True)
        student.generate(prompts[:2], 8)  # warm-up
        start = time.perf_counter()
        completions, _ = student.generate(prompts, args.new_tokens)
        gen_s = time.perf_counter() - start

        teacher = ServerTeacher(f"http://127.0.0.1:{port}", batch_size=8)
        sequences = [p + c for p, c in zip(prompts, completions)]
        lengths = [len(p) for p in prompts]
        teacher.score(sequences[:2], lengths[:2])  # warm-up
        start = time.perf_counter()
        scores = teacher.score(sequences, lengths)
        teacher_s = time.perf_counter() - start
        assert all(len(s) == args.new_tokens for s in scores)

        from vllm import SamplingParams  # the same prefill in-process, without HTTP/JSON, for reference

        start = time.perf_counter()
        llm.generate([{"prompt_token_ids": s} for s in sequences], SamplingParams(max_tokens=1, prompt_logprobs=0),
                     use_tqdm=False)
        inprocess_s = time.perf_counter() - start
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=60)
    n = len(prompts)
    print(f"model: Qwen3 {args.layers}x{args.hidden}; {n} sequences, mean prompt {sum(lengths) / n:.0f} tokens + "
          f"{args.new_tokens} generated")
    print(f"student generation (vLLM, colocated): {gen_s:6.2f} s")
    print(f"teacher prefill (vLLM server)       : {teacher_s:6.2f} s")
    print(f"  (same prefill in-process, no HTTP : {inprocess_s:6.2f} s)")
    print(f"ratio teacher / generation          : {teacher_s / gen_s:.3f}  (goal <= 0.2)")


if __name__ == "__main__":
    main()
