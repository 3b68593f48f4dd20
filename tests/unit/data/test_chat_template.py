"""Prefix stability of chat templates: the official Qwen3 template breaks token-in/token-out episodes, ours don't."""

from importlib.resources import files

import pytest

from arc_trl.chat_template import CHATML_TEMPLATE, env_turn_text, is_prefix_stable, resolve_chat_template


@pytest.fixture
def qwen3_tokenizer(tiny_tokenizer):
    import copy

    tok = copy.deepcopy(tiny_tokenizer)
    tok.chat_template = files("trl").joinpath("chat_templates/qwen3.jinja").read_text()
    return tok


def test_chatml_is_prefix_stable_and_env_text_is_exact(tiny_tokenizer):
    assert tiny_tokenizer.chat_template == CHATML_TEMPLATE
    assert is_prefix_stable(tiny_tokenizer)
    assert env_turn_text(tiny_tokenizer, "out") == "\n<|im_start|>user\nout<|im_end|>\n<|im_start|>assistant\n"


def test_official_qwen3_template_is_not_prefix_stable_and_auto_swaps_in_trls_training_variant(qwen3_tokenizer):
    assert not is_prefix_stable(qwen3_tokenizer)
    choice = resolve_chat_template(qwen3_tokenizer, "auto")
    assert choice == "trl-training-variant"
    assert is_prefix_stable(qwen3_tokenizer)
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}, {"role": "assistant", "content": "A"}]
    assert "<think>" in qwen3_tokenizer.apply_chat_template(messages, tokenize=False)


def test_explicit_template_choices(tiny_tokenizer, tmp_path):
    import copy

    tok = copy.deepcopy(tiny_tokenizer)
    assert resolve_chat_template(tok, "chatml") == "chatml"
    with pytest.raises(FileNotFoundError, match="neither 'auto', 'chatml' nor a template file"):
        resolve_chat_template(tok, "nope.jinja")
    unstable = tmp_path / "unstable.jinja"
    unstable.write_text(files("trl").joinpath("chat_templates/qwen3.jinja").read_text())
    with pytest.raises(ValueError, match="not prefix-stable"):
        resolve_chat_template(tok, str(unstable))


def test_base_tokenizer_whose_eos_is_not_the_end_of_turn_token(qwen3_tokenizer):
    """Qwen3-Base: eos_token is <|endoftext|> while the template ends turns with <|im_end|>. The template is resolved
    (the end-of-turn token is read from the template), and generation that does not stop on it fails clearly."""
    from arc_trl.chat_template import end_of_turn_id, end_of_turn_token

    base = qwen3_tokenizer
    base.eos_token = "<|endoftext|>"
    assert resolve_chat_template(base, "auto") == "trl-training-variant"
    assert end_of_turn_token(base) == "<|im_end|>"
    assert env_turn_text(base, "out") == "\n<|im_start|>user\nout<|im_end|>\n<|im_start|>assistant\n"
    im_end = base.convert_tokens_to_ids("<|im_end|>")
    with pytest.raises(ValueError, match=r"ends assistant turns with '<\|im_end\|>'.*\"eos_token\": \"<\|im_end\|>\""):
        end_of_turn_id(base, [base.eos_token_id])
    assert end_of_turn_id(base, [base.eos_token_id, im_end]) == im_end  # generation_config lists both: fine
