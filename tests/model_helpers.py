"""Test models built locally in seconds: a tiny model that has memorised one reference REPL episode.

A random-init model never ends its turn or writes code, so multi-turn behaviour (EOS, code blocks, environment
replies, SUBMIT) can't be exercised with it. Overfitting the tiny model on a single synthetic reference episode
(assistant tokens only) gives a real model whose sampled episodes have all of that.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load_script(name: str) -> ModuleType:
    """Import `scripts/<name>.py` as a module (scripts are not a package); registered in sys.modules so that its
    dataclasses can resolve their annotations."""
    spec = importlib.util.spec_from_file_location(f"arc_trl_script_{name}", SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def reference_episode(task, pool):
    from arc_trl.sft_data import reference_conversation

    session = pool.new_session(task)
    try:
        return reference_conversation(task, "repl", session)
    finally:
        session.close()


def memorize_episode(base_dir: Path, out_dir: Path, conversation: list[dict], steps: int = 250, lr: float = 1e-2):
    """Copy the model at `base_dir` to `out_dir`, trained to reproduce the assistant turns of `conversation`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(base_dir)
    enc = tokenizer.apply_chat_template(
        conversation, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    ids = torch.tensor([enc["input_ids"]])
    labels = ids.masked_fill(torch.tensor([enc["assistant_masks"]]) == 0, -100)
    model = AutoModelForCausalLM.from_pretrained(base_dir)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    loss = None
    for _ in range(steps):
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    out_dir = Path(out_dir)
    shutil.copytree(base_dir, out_dir, dirs_exist_ok=True)
    model.save_pretrained(out_dir)
    return out_dir, float(loss.detach())


def shutdown_llm(llm) -> None:
    """Stop a vLLM engine now (its atexit hooks otherwise log into pytest's closed capture streams)."""
    core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    if core is not None and hasattr(core, "shutdown"):
        core.shutdown()
