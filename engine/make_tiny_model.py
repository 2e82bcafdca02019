"""Build a tiny Llama model directory that vLLM can serve with --load-format dummy.

Runs inside the engine's own environment (it needs `tokenizers`, which vLLM brings).
Nothing is downloaded: the tokenizer is trained here on the Python standard library
(tiny_tokenizer.py, shared with the llama.cpp model); the weights are not
stored at all (vLLM fills them with `--load-format dummy`).

usage: python make_tiny_model.py OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tiny_tokenizer import BOS_ID, EOS_ID, train

MAX_POSITIONS = 40960


def build(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train()
    tokenizer.save(str(out / "tokenizer.json"))

    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "model_max_length": MAX_POSITIONS,
                "chat_template": (
                    "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                    "{% if add_generation_prompt %}assistant: {% endif %}"
                ),
            },
            indent=2,
        )
    )
    (out / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "hidden_size": 128,
                "intermediate_size": 256,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "head_dim": 32,
                "vocab_size": tokenizer.get_vocab_size(),
                "max_position_embeddings": MAX_POSITIONS,
                "rms_norm_eps": 1e-6,
                "rope_theta": 10000.0,
                "hidden_act": "silu",
                "tie_word_embeddings": False,
                "torch_dtype": "bfloat16",
                "bos_token_id": BOS_ID,
                "eos_token_id": EOS_ID,
            },
            indent=2,
        )
    )
    (out / "generation_config.json").write_text(json.dumps({"bos_token_id": BOS_ID, "eos_token_id": EOS_ID}))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_tiny_model.py OUT_DIR")
    build(Path(sys.argv[1]))
