"""The tiny models' tokenizer: a byte-level BPE trained here on the Python standard library.

Shared by the vLLM model directory (make_tiny_model.py) and the llama.cpp GGUF (make_tiny_gguf.py), so
both engines see the same vocabulary. Nothing is downloaded: every Python install carries the texts.
Needs `tokenizers` (vLLM brings it; the GGUF writer's environment installs it).
"""

from __future__ import annotations

import sysconfig
from pathlib import Path
from typing import Any

VOCAB_SIZE = 2048
SPECIAL_TOKENS = ["<unk>", "<s>", "</s>"]  # ids 0, 1, 2: unknown, begin, end
BOS_ID, EOS_ID = 1, 2


def stdlib_texts(limit_bytes: int = 8_000_000) -> list[str]:
    root = Path(sysconfig.get_paths()["stdlib"])
    texts: list[str] = []
    total = 0
    for path in sorted(root.glob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        texts.append(text)
        total += len(text)
        if total >= limit_bytes:
            break
    return texts


def train() -> Any:
    """A `tokenizers.Tokenizer`: GPT-2 style byte-level BPE with the three special tokens first."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(stdlib_texts(), trainer=trainer)
    return tokenizer
