#!/usr/bin/env python3
"""Writes a random-weight llama model directory (config.json, model.safetensors, and the
embedded stories260K tokenizer) for throughput measurements where the forward pass dominates:
`strictly serve --model DIR`. Standard library only. The text it writes is noise.

    python3 scripts/random_llama.py OUT_DIR [--hidden 512] [--layers 8] [--heads 8]
        [--kv-heads 8] [--intermediate 1376] [--context 1024] [--seed 1]
"""
import argparse
import array
import json
import math
import os
import random
import shutil
import struct
import sys

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("out")
ap.add_argument("--hidden", type=int, default=512)
ap.add_argument("--layers", type=int, default=8)
ap.add_argument("--heads", type=int, default=8)
ap.add_argument("--kv-heads", type=int, default=8)
ap.add_argument("--intermediate", type=int, default=1376)
ap.add_argument("--context", type=int, default=1024)
ap.add_argument("--seed", type=int, default=1)
a = ap.parse_args()
if a.hidden % a.heads or a.heads % a.kv_heads:
    sys.exit("random_llama: --heads must divide --hidden and --kv-heads must divide --heads")

here = os.path.dirname(os.path.abspath(__file__))
tokenizer = os.path.join(here, "..", "assets", "stories260K", "tokenizer.json")
vocab = 512
h, i, d = a.hidden, a.intermediate, a.hidden // a.heads
kv = d * a.kv_heads
shapes = [("model.embed_tokens.weight", (vocab, h)), ("model.norm.weight", (h,)), ("lm_head.weight", (vocab, h))]
for n in range(a.layers):
    p = f"model.layers.{n}."
    shapes += [
        (p + "input_layernorm.weight", (h,)),
        (p + "post_attention_layernorm.weight", (h,)),
        (p + "self_attn.q_proj.weight", (h, h)),
        (p + "self_attn.k_proj.weight", (kv, h)),
        (p + "self_attn.v_proj.weight", (kv, h)),
        (p + "self_attn.o_proj.weight", (h, h)),
        (p + "mlp.gate_proj.weight", (i, h)),
        (p + "mlp.up_proj.weight", (i, h)),
        (p + "mlp.down_proj.weight", (h, i)),
    ]

rng = random.Random(a.seed)
header, blobs, offset = {}, [], 0
for name, shape in shapes:
    n = 1
    for s in shape:
        n *= s
    if name.endswith("norm.weight"):
        data = array.array("f", [1.0]) * n
    else:
        scale = 1.0 / shape[-1] ** 0.5  # keeps activations of order 1 through the layers
        data = array.array("f", (rng.uniform(-scale, scale) for _ in range(n)))
    raw = data.tobytes()  # little-endian on every machine this runs on
    header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
    blobs.append(raw)
    offset += len(raw)

os.makedirs(a.out, exist_ok=True)
head = json.dumps(header).encode()
head += b" " * (-len(head) % 8)
with open(os.path.join(a.out, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(head)))
    f.write(head)
    for b in blobs:
        f.write(b)
config = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab,
    "hidden_size": h, "intermediate_size": i, "num_hidden_layers": a.layers,
    "num_attention_heads": a.heads, "num_key_value_heads": a.kv_heads,
    "max_position_embeddings": a.context, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "hidden_act": "silu", "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
}
with open(os.path.join(a.out, "config.json"), "w") as f:
    json.dump(config, f, indent=1)
shutil.copy(tokenizer, os.path.join(a.out, "tokenizer.json"))
params = sum(math.prod(s) for _, s in shapes)
print(f"random_llama: {a.out}: {params / 1e6:.1f}M parameters")
