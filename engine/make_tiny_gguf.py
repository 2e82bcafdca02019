"""Write a tiny Llama model as one GGUF file that llama.cpp's llama-server can serve.

Nothing is downloaded. The vocabulary is the one the vLLM model has (tiny_tokenizer.py: byte-level BPE
trained on the standard library), stored as llama.cpp's `gpt2` tokenizer; the weights are random
(seeded, so the file is the same every time). llama.cpp's own converter is not used: it refuses a
pre-tokenizer it does not know and needs torch. Runs in an environment with `gguf` and `tokenizers`.

usage: python make_tiny_gguf.py OUT.gguf
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from gguf import GGUFWriter, LlamaFileType, TokenType
from tiny_tokenizer import BOS_ID, EOS_ID, SPECIAL_TOKENS, train

CONTEXT = 4096
EMBED, FEED_FORWARD, LAYERS, HEADS, KV_HEADS, HEAD_DIM = 512, 1024, 4, 8, 4, 64
SEED = 20261204


def vocabulary() -> tuple[list[str], list[int], list[str]]:
    """Tokens in id order, their llama.cpp types, and the BPE merges as "left right"."""
    saved = json.loads(train().to_str())
    by_id = sorted(saved["model"]["vocab"].items(), key=lambda item: item[1])
    tokens = [token for token, _ in by_id]
    types = [TokenType.CONTROL if token in SPECIAL_TOKENS else TokenType.NORMAL for token in tokens]
    # tokenizers writes a merge as [left, right] (newer releases) or "left right" (older ones).
    merges = [m if isinstance(m, str) else " ".join(m) for m in saved["model"]["merges"]]
    return tokens, [int(t) for t in types], merges


def weights(vocab_size: int) -> dict[str, np.ndarray]:
    """Llama's tensors by GGUF name, shaped as the framework's (out, in); GGUF stores them reversed."""
    draw = np.random.default_rng(SEED)

    def matrix(*shape: int) -> np.ndarray:
        return draw.normal(0.0, 0.02, size=shape).astype(np.float32)

    def ones(size: int) -> np.ndarray:
        return np.ones(size, dtype=np.float32)

    tensors = {"token_embd.weight": matrix(vocab_size, EMBED)}
    for layer in range(LAYERS):
        block = f"blk.{layer}"
        tensors |= {
            f"{block}.attn_norm.weight": ones(EMBED),
            f"{block}.attn_q.weight": matrix(HEADS * HEAD_DIM, EMBED),
            f"{block}.attn_k.weight": matrix(KV_HEADS * HEAD_DIM, EMBED),
            f"{block}.attn_v.weight": matrix(KV_HEADS * HEAD_DIM, EMBED),
            f"{block}.attn_output.weight": matrix(EMBED, HEADS * HEAD_DIM),
            f"{block}.ffn_norm.weight": ones(EMBED),
            f"{block}.ffn_gate.weight": matrix(FEED_FORWARD, EMBED),
            f"{block}.ffn_up.weight": matrix(FEED_FORWARD, EMBED),
            f"{block}.ffn_down.weight": matrix(EMBED, FEED_FORWARD),
        }
    return tensors | {"output_norm.weight": ones(EMBED), "output.weight": matrix(vocab_size, EMBED)}


def write(out: Path) -> None:
    tokens, types, merges = vocabulary()
    partial = out.with_name(out.name + ".partial")
    writer = GGUFWriter(partial, "llama")
    writer.add_name("fairwin tiny llama")
    writer.add_file_type(LlamaFileType.ALL_F32)
    writer.add_vocab_size(len(tokens))
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(EMBED)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FEED_FORWARD)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_dimension_count(HEAD_DIM)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")  # GPT-2's split regex, as the ByteLevel pre-tokenizer uses
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(BOS_ID)
    writer.add_eos_token_id(EOS_ID)
    writer.add_add_bos_token(False)
    for name, tensor in weights(len(tokens)).items():
        writer.add_tensor(name, tensor)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    partial.replace(out)  # a file that is there is whole


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_tiny_gguf.py OUT.gguf")
    write(Path(sys.argv[1]))
