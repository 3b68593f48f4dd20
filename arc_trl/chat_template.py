"""Chat templates and the token-level helpers of the multi-turn rollout.

Multi-turn RL appends environment messages to a conversation *token by token* (no re-tokenization). That is only
equivalent to rendering the whole conversation with the chat template if the template is **prefix-stable**: rendering
messages[:k] must be a prefix of rendering messages[:k+1]. The official Qwen3 template is not (it drops the
`<think>` block of earlier assistant turns once a new user query arrives; see docs/chat_template.md), so for Qwen3
we swap in TRL's own training variant (`trl.chat_template_utils.get_training_chat_template`), and the tiny model
ships the plain ChatML template below.
"""

from __future__ import annotations

from arc_trl.config import defaults

# Plain ChatML, prefix-stable. `{% generation %}` marks assistant tokens for SFT's assistant-only loss.
CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['role'] == 'assistant' %}"
    "{%- generation %}{{- message['content'] + '<|im_end|>' }}{%- endgeneration %}{{- '\\n' }}"
    "{%- else %}"
    "{{- message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def resolve_chat_template(tokenizer, setting: str = defaults.CHAT_TEMPLATE) -> str:
    """Install the chat template a run uses on `tokenizer` and return a short description of the choice.

    auto: keep the model's template when it is prefix-stable for REPL turns; otherwise use TRL's training variant of
    it (prefix-preserving; known models only) and fail clearly when there is none. chatml: the plain ChatML template
    above. Anything else is a path to a Jinja file.
    """
    from pathlib import Path

    if setting == "chatml":
        tokenizer.chat_template = CHATML_TEMPLATE
        return "chatml"
    if setting != "auto":
        path = Path(setting)
        if not path.is_file():
            raise FileNotFoundError(f"chat_template: {setting!r} is neither 'auto', 'chatml' nor a template file")
        tokenizer.chat_template = path.read_text()
        if not is_prefix_stable(tokenizer):
            raise ValueError(f"chat_template {setting}: the template is not prefix-stable for REPL turns")
        return str(path)
    if tokenizer.chat_template is None:
        tokenizer.chat_template = CHATML_TEMPLATE
        return "chatml (the model has no chat template)"
    if is_prefix_stable(tokenizer):
        return "model"
    from trl.chat_template_utils import get_training_chat_template

    patched = get_training_chat_template(tokenizer)
    if patched is None:
        raise ValueError(
            "The model's chat template is not prefix-stable for multi-turn REPL episodes and TRL has no training "
            "variant for it. Set chat_template: chatml, or pass a prefix-stable .jinja file "
            "(see docs/chat_template.md)."
        )
    tokenizer.chat_template = patched
    if not is_prefix_stable(tokenizer):
        raise ValueError(
            "TRL's training chat template is still not prefix-stable for REPL turns. Set chat_template: chatml, or "
            "pass a prefix-stable .jinja file (see docs/chat_template.md)."
        )
    return "trl-training-variant"


def _render(tokenizer, messages: list[dict], add_generation_prompt: bool, **kwargs) -> str:
    return tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=add_generation_prompt, **kwargs
    )


_CONTENT = "A1"


def end_of_turn_token(tokenizer, **template_kwargs) -> str:
    """The token the chat template closes an assistant turn with: the special token right after the assistant's
    content (ChatML/Qwen: `<|im_end|>`, Llama 3: `<|eot_id|>`). Falls back to the tokenizer's EOS token.

    Read from the template, not from `tokenizer.eos_token`: a base model's tokenizer (Qwen3-Base) has `eos_token`
    `<|endoftext|>` while its chat template ends turns with `<|im_end|>`."""
    turn = [{"role": "user", "content": "U1"}, {"role": "assistant", "content": _CONTENT}]
    try:
        text = _render(tokenizer, turn, False, **template_kwargs)
    except Exception:
        return tokenizer.eos_token
    suffix = text[text.rfind(_CONTENT) + len(_CONTENT) :]
    ids = tokenizer(suffix, add_special_tokens=False)["input_ids"] if suffix else []
    if ids and ids[0] in tokenizer.added_tokens_decoder:
        return tokenizer.convert_ids_to_tokens(ids[0])
    return tokenizer.eos_token


def end_of_turn_id(tokenizer, stop_token_ids: list[int], **template_kwargs) -> int:
    """Id of `end_of_turn_token`, checked to be one of the ids generation stops on (TRL's `eos_token_ids`: the
    tokenizer's EOS plus the generation config's). Otherwise a turn would not end where the template ends it."""
    token = end_of_turn_token(tokenizer, **template_kwargs)
    token_id = tokenizer.convert_tokens_to_ids(token)
    if token_id not in stop_token_ids:
        stops = [tokenizer.convert_ids_to_tokens(i) for i in stop_token_ids]
        raise ValueError(
            f"The chat template ends assistant turns with {token!r} (id {token_id}), but generation stops only on "
            f"{stops} (the tokenizer's eos_token {tokenizer.eos_token!r} plus generation_config.eos_token_id), so a "
            f"turn would run on past its end. This is the case of base checkpoints such as Qwen3-Base. Use a copy "
            f"of the checkpoint whose tokenizer_config.json has \"eos_token\": \"{token}\" and whose "
            f"generation_config.json lists {token_id} in \"eos_token_id\" (as the instruct checkpoints do), or pick "
            f"a chat_template that ends turns with the EOS token (see docs/chat_template.md)."
        )
    return token_id


def _cut_after_last(text: str, marker: str) -> str:
    index = text.rfind(marker)
    if index < 0:
        raise ValueError(f"rendered assistant turn does not contain the end-of-turn token {marker!r}")
    return text[: index + len(marker)]


def is_prefix_stable(tokenizer, **template_kwargs) -> bool:
    """True when appending a user message after an assistant turn never re-renders the earlier messages.

    Precisely: render [system, user, assistant] and cut it after the assistant's end-of-turn token (the last token
    the model generates); that text must be a prefix of [system, user, assistant, user] rendered with the generation
    prompt, and the generation prompt of the first user turn must be a prefix of the assistant turn's rendering.
    """
    eos = end_of_turn_token(tokenizer, **template_kwargs)
    base = [{"role": "system", "content": "S"}, {"role": "user", "content": "U1"}]
    turn = base + [{"role": "assistant", "content": "A1"}]
    try:
        prompt = _render(tokenizer, base, True, **template_kwargs)
        first = _cut_after_last(_render(tokenizer, turn, False, **template_kwargs), eos)
        second = _render(tokenizer, turn + [{"role": "user", "content": "U2"}], True, **template_kwargs)
    except Exception:
        return False
    return first.startswith(prompt) and second.startswith(first)


def env_turn_text(tokenizer, content: str, **template_kwargs) -> str:
    """The text that follows the model's end-of-turn token when the environment replies with `content`.

    For ChatML this is "\\n<|im_start|>user\\n{content}<|im_end|>\\n<|im_start|>assistant\\n": the closing newline of
    the assistant turn, the user message and the next generation prompt. Derived from the chat template itself.
    """
    eos = end_of_turn_token(tokenizer, **template_kwargs)
    turn = [{"role": "user", "content": "U1"}, {"role": "assistant", "content": "A1"}]
    prefix = _cut_after_last(_render(tokenizer, turn, False, **template_kwargs), eos)
    full = _render(tokenizer, turn + [{"role": "user", "content": content}], True, **template_kwargs)
    if not full.startswith(prefix):
        raise ValueError("chat template is not prefix-stable; see resolve_chat_template")
    return full[len(prefix) :]


def env_turn_ids(tokenizer, content: str, **template_kwargs) -> list[int]:
    """Token ids of `env_turn_text`. It starts right after a special token, so tokenizing it alone is exact."""
    return tokenizer(env_turn_text(tokenizer, content, **template_kwargs), add_special_tokens=False)["input_ids"]


def prompt_ids(tokenizer, messages: list[dict], **template_kwargs) -> list[int]:
    """Token ids of a prompt (chat template with the generation prompt)."""
    text = _render(tokenizer, messages, True, **template_kwargs)
    return tokenizer(text, add_special_tokens=False)["input_ids"]
