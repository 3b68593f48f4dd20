"""Teacher backends and on-policy distillation: a real vLLM teacher server, privileged prompts, learning."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
import torch

from arc_trl.chat_template import prompt_ids
from arc_trl.opd import LocalTeacher, ServerTeacher, TeacherUnavailableError
from arc_trl.train_entry import main
from teacher_trainers import lora_trainer, record_teacher_scores
from test_trainer import CONFIG


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _reference_sequences(model_dir, task):
    from transformers import AutoTokenizer

    from arc_trl.data import render_messages

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    prompt = prompt_ids(tokenizer, render_messages(task, "repl"))
    text = "```python\nprint([x.shape for x in train_inputs])\n```"
    completion = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    other = tokenizer("Hello world, 0123 456", add_special_tokens=False)["input_ids"]
    return [prompt + completion, prompt + other, prompt[:50] + completion], [len(prompt), len(prompt), 50], tokenizer


@pytest.mark.parametrize("server", ["refused", "silent"])
def test_server_teacher_honours_teacher_timeout_at_first_connection(server):
    """teacher_timeout_s bounds the first connection too (it was a fixed 60 s wait, and forever for a server that
    accepts connections but never answers): nothing listening, or a socket that never replies."""
    import trl.generation.vllm_client  # noqa: F401  (imports vLLM: slow, and not part of the wait measured here)

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        if server == "silent":
            listener.listen(8)  # the kernel accepts connections; nobody ever reads or answers
        else:
            listener.close()
        url = f"http://127.0.0.1:{port}"
        start = time.monotonic()
        with pytest.raises(TeacherUnavailableError, match=f"teacher server at {url} is not reachable within "
                                                          "teacher_timeout_s=2 s") as err:
            ServerTeacher(url, timeout_s=2.0, max_retries=0)
        assert time.monotonic() - start < 2.0 + 2.0
        if server == "refused":
            assert "/health: [Errno 111] Connection refused" in str(err.value)


def _lora_trainer(model_dir, out, temperature: float = 1.0, **arc_overrides):
    """A LoRA (fresh adapter) ArcGRPOTrainer on the tiny task set, with the frozen base model as teacher."""
    return lora_trainer(model_dir, out, grpo={"temperature": temperature}, teacher_backend="base", teacher_tau=1.0,
                        **arc_overrides)


@pytest.mark.vllm
def test_vllm_teacher_server_logprobs_equal_a_transformers_forward(memorized_model_dir, memorized_task, tmp_path):
    """A real vLLM OpenAI server (CPU) started here scores sequences like a transformers forward of the same model;
    then, once it is gone, scoring fails after bounded retries with a resumable message."""
    from arc_trl.opd import build_teacher

    port = _free_port()
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    log = open(tmp_path / "server.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(memorized_model_dir),
         "--port", str(port), "--dtype", "float32", "--max-model-len", "4096", "--max-logprobs", "-1"],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )
    try:
        deadline = time.time() + 300
        while time.time() < deadline:
            assert server.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200:
                    break
            except OSError:
                time.sleep(2)
        sequences, prompt_lengths, tokenizer = _reference_sequences(memorized_model_dir, memorized_task)
        teacher = ServerTeacher(f"http://127.0.0.1:{port}", max_retries=1, timeout_s=60, batch_size=2)
        served = teacher.submit(sequences, prompt_lengths).result()
        from transformers import AutoModelForCausalLM

        local = LocalTeacher(AutoModelForCausalLM.from_pretrained(memorized_model_dir), tokenizer.pad_token_id)
        reference = local.score(sequences, prompt_lengths)
        for got, want, seq, p in zip(served, reference, sequences, prompt_lengths):
            assert len(got) == len(want) == len(seq) - p
            assert max(abs(a - b) for a, b in zip(got, want)) < 2e-3
        # the memorised model is confident on its own code and not on noise
        assert sum(served[0]) / len(served[0]) > sum(served[1]) / len(served[1]) + 2
        # At a sampling temperature other than 1 every backend, as the trainer builds it, still gives the teacher's
        # own (temperature-1) log-probs, the only ones vLLM's prompt log-probs offer (docs/opd.md, "Temperature").
        trainer = _lora_trainer(memorized_model_dir, tmp_path / "t05", temperature=0.5,
                                teacher_model=str(memorized_model_dir), teacher_server_url=f"http://127.0.0.1:{port}")
        try:
            assert trainer.temperature == 0.5
            student = trainer._get_per_token_logps_and_entropies(  # the student's log-probs are TRL's: tempered
                trainer.model, torch.tensor([sequences[0]]), torch.ones(1, len(sequences[0]), dtype=torch.long),
                len(sequences[0]) - prompt_lengths[0])[0][0].tolist()
            assert max(abs(a - b) for a, b in zip(student, served[0])) > 0.1
            for backend in ("base", "local", "server"):
                trainer.arc_config.teacher_backend = backend
                scored = build_teacher(trainer).score(sequences, prompt_lengths)
                for got, want in zip(scored, served):
                    assert max(abs(a - b) for a, b in zip(got, want)) < 2e-3, backend
        finally:
            trainer.close()
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=60)
        log.close()
    start = time.time()
    with pytest.raises(TeacherUnavailableError, match="failed 2 times.*--resume_from_checkpoint"):
        teacher.score(sequences, prompt_lengths)
    assert time.time() - start < 60


def test_privileged_teacher_scores_the_same_completion_tokens(tiny_model_dir, memorized_model_dir, tmp_path):
    """teacher_privileged=solutions: the teacher's prompt holds the test outputs, its completion tokens are exactly
    the student's (aligned token by token)."""
    from test_trainer import _trainer

    trainer = _trainer(tiny_model_dir, tmp_path, teacher_backend="local", teacher_model=str(memorized_model_dir),
                       teacher_tau=1.0, teacher_privileged="solutions")
    calls = record_teacher_scores(trainer)
    try:
        trainer.model.train()
        inputs = [trainer.train_dataset[i] for i in (0, 0, 1, 1)]
        batch = trainer._generate_and_score_completions(inputs)
        [(sequences, prompt_lengths)] = calls
        episodes = trainer.rollout.last_episodes
        tokenizer = trainer.processing_class
        for row, ep, seq, plen in zip(inputs, episodes, sequences, prompt_lengths):
            teacher_prompt = prompt_ids(tokenizer, row["teacher_prompt"])
            assert seq[:plen] == teacher_prompt and seq[plen:] == ep.completion_ids
            assert len(teacher_prompt) > len(ep.prompt_ids)
            task = json.loads(row["task_json"])
            solution = "\n".join("".join(map(str, r)) for r in task["test"][0]["output"])
            assert solution in tokenizer.decode(teacher_prompt)
            assert solution not in tokenizer.decode(ep.prompt_ids)
        n = batch["completion_ids"].shape[1]
        assert batch["advantages"].shape == (4, n)
    finally:
        trainer.close()


def test_pure_distillation_lowers_teacher_kl(tiny_model_dir, memorized_model_dir, memorized_task, tmp_path):
    """adv_tau = 0: only the teacher term drives learning; a student that differs from the teacher (the same
    episode memorised for fewer steps) moves towards it, so the mean teacher_kl falls clearly (fixed seed)."""
    from arc_trl.data import save_tasks_folder
    from arc_trl.sandbox import SandboxPool
    from model_helpers import memorize_episode, reference_episode

    with SandboxPool(num_workers=1) as pool:
        conversation = reference_episode(memorized_task, pool)
    student, _ = memorize_episode(tiny_model_dir, tmp_path / "student", conversation, steps=100)
    data = save_tasks_folder([memorized_task], tmp_path / "tasks")
    out = tmp_path / "run"
    main([
        "--config", CONFIG, "--model_name_or_path", str(student), "--output_dir", str(out), "--use_vllm", "false",
        "--dataset", str(data), "--max_prompt_tokens", "2000", "--teacher_backend", "local",
        "--teacher_model", str(memorized_model_dir), "--teacher_tau", "1.0", "--adv_tau", "0.0",
        "--max_turns", "1", "--max_tokens_per_turn", "24", "--max_completion_length", "24",
        "--num_generations", "8", "--per_device_train_batch_size", "8", "--learning_rate", "1e-3",
        "--max_steps", "30", "--save_steps", "1000", "--seed", "0",
    ])
    history = json.loads((out / "run_summary.json").read_text())
    assert history["global_step"] == 30
    state = json.loads((out / "trainer_state.json").read_text())
    kls = [h["teacher_kl"] for h in state["log_history"] if "teacher_kl" in h]
    first, last = sum(kls[:8]) / 8, sum(kls[-8:]) / 8
    assert len(kls) == 30 and last < 0.7 * first, kls


def test_overlapping_teacher_is_called_while_the_rollout_runs(tiny_model_dir, memorized_model_dir, tmp_path):
    """A teacher that can overlap (a server) receives finished episodes during the rollout, not after it."""
    from concurrent.futures import ThreadPoolExecutor

    from test_trainer import _trainer

    trainer = _trainer(tiny_model_dir, tmp_path, teacher_backend="local", teacher_model=str(memorized_model_dir),
                       teacher_tau=1.0)
    local = trainer.teacher
    pool = ThreadPoolExecutor(1)
    during_rollout = []

    class Overlapping:
        overlaps_generation = True

        def score(self, sequences, prompt_lengths):
            return local.score(sequences, prompt_lengths)

        def submit(self, sequences, prompt_lengths):
            during_rollout.append(trainer.rollout.rows is not None)
            return pool.submit(local.score, sequences, prompt_lengths)

    trainer.teacher = Overlapping()
    trainer.rollout.on_finished = trainer.teacher_term.submit_finished
    try:
        trainer.model.train()
        batch = trainer._generate_and_score_completions([trainer.train_dataset[i] for i in (0, 0, 1, 1)])
        assert during_rollout and all(during_rollout)
        episodes = trainer.rollout.last_episodes
        expected = local.score([ep.prompt_ids + ep.completion_ids for ep in episodes],
                               [len(ep.prompt_ids) for ep in episodes])
        student = trainer.teacher_term.student_logps(batch)
        for i, (ep, row) in enumerate(zip(episodes, expected)):
            n = len(ep.completion_ids)
            want = (torch.tensor(row) - student[i, :n]).clamp(-20, 20)  # teacher_logprob_clip default
            got = batch["advantages"][i, :n]  # = A_grpo (constant per row) + (logp_T - logp_S), tau = 1
            assert torch.allclose(got - got.mean(), want - want.mean(), atol=1e-4)
    finally:
        trainer.close()
        pool.shutdown()


def test_base_model_teacher_needs_lora(tiny_model_dir, tmp_path):
    from test_trainer import _trainer

    with pytest.raises(ValueError, match="teacher_backend=base needs a LoRA"):
        _trainer(tiny_model_dir, tmp_path, teacher_backend="base", teacher_tau=1.0)


def test_base_model_teacher_with_lora_is_the_frozen_base(tiny_model_dir, tmp_path):
    """teacher_backend=base: the LoRA student's own base model (adapter disabled) is the teacher, so with a fresh
    (zero-initialised) adapter the teacher and student log-probs coincide and teacher_kl is 0."""
    from arc_trl.opd import BaseModelTeacher

    trainer = _lora_trainer(tiny_model_dir, tmp_path / "lora")
    dataset = trainer.train_dataset
    try:
        assert isinstance(trainer.teacher, BaseModelTeacher)
        trainer.model.train()
        trainer._generate_and_score_completions([dataset[i] for i in (0, 0, 1, 1)])
        assert abs(trainer._metrics["train"]["teacher_kl"][-1]) < 1e-4
        assert trainer._metrics["train"]["teacher_missing_frac"][-1] == 0.0
    finally:
        trainer.close()


def test_reverse_kl_gradient_equals_the_advantage_formulation_on_policy_only(tiny_model_dir, memorized_model_dir,
                                                                              tmp_path):
    """docs/opd.md: under TRL's default use_bias_correction_kl the reverse_kl term tau * r * k3(T, log pi) has the
    gradient tau * r * (log pi - T), so on-policy (r = 1) it equals the advantage formulation's -tau * (T - s); with
    r != 1 (a stale sampling policy) the two differ."""
    from arc_trl.opd import opd_advantages
    from arc_trl.trainer.loss_mask import loss_mask
    from test_trainer import _trainer

    tau = 0.5
    trainer = _trainer(tiny_model_dir, tmp_path, teacher_backend="local", teacher_model=str(memorized_model_dir),
                       teacher_tau=tau, teacher_loss="reverse_kl")
    try:
        assert trainer.args.use_bias_correction_kl  # TRL 1.16's default
        trainer.model.train()
        trainer.current_gradient_accumulation_steps = 1
        kl_batch = trainer._generate_and_score_completions([trainer.train_dataset[i] for i in (0, 0, 1, 1)])
        student = trainer.teacher_term.student_logps(kl_batch)
        mask = loss_mask(kl_batch)
        advantages = opd_advantages(kl_batch["advantages"], kl_batch["ref_per_token_logps"], student, mask, 1.0, tau)
        adv_batch = {k: v for k, v in kl_batch.items() if k != "ref_per_token_logps"} | {"advantages": advantages}

        def gradient(batch, kl_coef):
            trainer.model.zero_grad()
            trainer._teacher_kl_coef = kl_coef  # reverse_kl: TRL's beta term; advantage: none
            trainer.compute_loss(trainer.model, batch).backward()
            return torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None])

        g_kl, g_adv = gradient(kl_batch, tau), gradient(adv_batch, 0.0)
        assert g_kl.norm() > 1e-3 and torch.allclose(g_kl, g_adv, rtol=1e-4, atol=1e-7), (g_kl - g_adv).norm()
        stale = student + 0.3 * torch.randn(student.shape, generator=torch.Generator().manual_seed(0))
        g_kl, g_adv = gradient(kl_batch | {"old_per_token_logps": stale}, tau), gradient(
            adv_batch | {"old_per_token_logps": stale}, 0.0)
        assert (g_kl - g_adv).norm() > 0.05 * g_adv.norm()
    finally:
        trainer.close()
