"""Build the tiny random-init Qwen3 model + local tokenizer used by the CPU demo and tests (no network).

    arc-trl build-tiny-model --out outputs/tiny-model [--layers 2 --hidden 128 --vocab 2048] [--force]
    arc-trl build-tiny-model --shape qwen3-8b --out /tmp/qwen3-8b-random --device cuda   # real shapes
"""

from __future__ import annotations

import argparse
from pathlib import Path


from arc_trl.models.tiny_model import SHAPES, TinyModelSpec, build_tiny_model, shape_spec  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="outputs/tiny-model", help="output folder")
    parser.add_argument("--layers", type=int, default=TinyModelSpec.num_hidden_layers)
    parser.add_argument("--hidden", type=int, default=TinyModelSpec.hidden_size)
    parser.add_argument("--intermediate", type=int, default=TinyModelSpec.intermediate_size)
    parser.add_argument("--heads", type=int, default=TinyModelSpec.num_attention_heads)
    parser.add_argument("--kv-heads", type=int, default=TinyModelSpec.num_key_value_heads)
    parser.add_argument("--vocab", type=int, default=TinyModelSpec.vocab_size)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shape", choices=sorted(SHAPES), help="a real Qwen3 shape (overrides the size flags)")
    parser.add_argument("--device", default=None, help="where to initialise the weights (cuda for big shapes)")
    parser.add_argument("--force", action="store_true", help="rebuild even if the folder already holds a model")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if (out / "config.json").exists() and not args.force:
        print(f"[tiny-model] {out} already exists (use --force to rebuild)")
        return
    spec = shape_spec(args.shape, args.seed) if args.shape and args.shape != "tiny" else TinyModelSpec(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        intermediate_size=args.intermediate,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        seed=args.seed,
    )
    build_tiny_model(out, spec, device=args.device)
    print(f"[tiny-model] wrote {out}")


if __name__ == "__main__":
    main()
