#!/usr/bin/env python3
"""Builds a tiny random-weight Llama (BF16 safetensors) with a locally trained byte-level BPE tokenizer and
a chat template, so a real vLLM can serve it with no download. Deterministic: same seed, same bytes.

Run inside the vLLM venv (it has torch, transformers and tokenizers):
    .venvs/vllm/bin/python scripts/build_tiny_model.py .cache/tiny-llama

Shape choices: vLLM's CPU attention supports head sizes 32/64/80/96/112/128, so hidden 128 = 2 heads of 64
(1 KV head: grouped-query attention, like the real Llamas); 2 layers keep start-up and RSS small.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

SEED = 1234
VOCAB_SIZE = 1024
SPECIAL = ["<s>", "</s>", "<pad>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
# Llama-3-like turn markers; the generation prompt ends with the assistant marker.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
WORDS = ("the router sends each request to a node of the tier its policy allows; a session keeps its tier. "
         "quantized weights read fewer bytes per token, so int4 decodes faster than fp16 on the same card. "
         "write a python function that returns the sum of a list of numbers and explain it step by step. "
         "JSON: {\"model\": \"llama\", \"tier\": \"fp8\", \"tokens\": 128} 0 1 2 3 4 5 6 7 8 9 + - * / = ( ) "
         "hello how are you today? tell me a short story about a cat, a dog and a cache of keys and values.").split()


def corpus(seed: int, lines: int = 3000) -> list[str]:
    """Sentences of shuffled domain words: enough for BPE to learn merges; no external text needed."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 25))) for _ in range(lines)]


def build_tokenizer(out: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(SEED), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                   additional_special_tokens=SPECIAL[3:], model_max_length=512)
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return fast


def build_model(out: Path, tokenizer) -> None:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, head_dim=64, max_position_embeddings=512,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False, dtype="bfloat16",
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    GenerationConfig(bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id,
                     pad_token_id=config.pad_token_id).save_pretrained(out)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(f"usage: {argv[0]} OUT_DIR", file=sys.stderr)
        return 2
    out = Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(out)
    build_model(out, tokenizer)
    print(f"built tiny Llama into {out} (vocab {len(tokenizer)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
