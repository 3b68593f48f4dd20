"""Chat templates and the token-level helpers of the multi-turn rollout.

Multi-turn RL appends environment messages to a conversation *token by token* (no re-tokenization). That is only
equivalent to rendering the whole conversation with the chat template if the template is **prefix-stable**: rendering
messages[:k] must be a prefix of rendering messages[:k+1]. The official Qwen3 template is not (it drops the
`<think>` block of earlier assistant turns once a new user query arrives; see docs/chat_template.md), so for Qwen3
we swap in TRL's own training variant (`trl.chat_template_utils.get_training_chat_template`), and the tiny model
ships the plain ChatML template below.
"""

from __future__ import annotations

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
