"""What `teacher_backend: local` loads from `teacher_model`: a LoRA run's output (the adapter folder) scores as the
adapter merged into its base, and a folder without a model (a run that has not finished) or a missing absolute path is
refused naming the path (issue 41's RL-trained teacher is another run's output_dir)."""

from __future__ import annotations

import pytest
import torch

from arc_trl.opd import LocalTeacher
from arc_trl.opd.local import check_teacher_path

SEQUENCE, PROMPT = [1, 2, 3, 4, 5, 6, 7], 3


def test_a_lora_adapter_folder_scores_as_the_merged_model_not_as_its_base(tiny_model_dir, tmp_path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    peft_model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir),
                                LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    peft_model.save_pretrained(tmp_path / "adapter")  # what a LoRA run's save_model writes: the adapter alone
    assert not (tmp_path / "adapter" / "config.json").exists()
    merged = LocalTeacher(peft_model.merge_and_unload(), pad_token_id=0).score([SEQUENCE], [PROMPT])[0]
    base = LocalTeacher(AutoModelForCausalLM.from_pretrained(tiny_model_dir), pad_token_id=0).score(
        [SEQUENCE], [PROMPT])[0]
    loaded = LocalTeacher.from_pretrained(str(tmp_path / "adapter"), pad_token_id=0).score([SEQUENCE], [PROMPT])[0]
    assert len(loaded) == len(SEQUENCE) - PROMPT
    assert loaded == pytest.approx(merged, abs=1e-5)
    assert max(abs(a - b) for a, b in zip(loaded, base)) > 1e-3  # the adapter is applied, not only the base loaded


def test_a_folder_without_a_model_or_a_missing_path_is_refused_naming_it(tmp_path):
    unfinished = tmp_path / "run"
    unfinished.mkdir()
    (unfinished / "arc_trl_config.json").write_text("{}")  # what a started run's output_dir has before its save
    with pytest.raises(ValueError, match=rf"teacher_model {unfinished}: no model in this folder .*run_summary"):
        check_teacher_path(str(unfinished))
    with pytest.raises(ValueError, match=rf"teacher_model {tmp_path / 'nowhere'}: no such folder"):
        LocalTeacher.from_pretrained(str(tmp_path / "nowhere"), pad_token_id=0)
    (unfinished / "config.json").write_text("{}")
    check_teacher_path(str(unfinished))  # a model folder passes
    check_teacher_path("HuggingFaceTB/SmolLM2-135M-Instruct")  # a hub id is transformers' to resolve
