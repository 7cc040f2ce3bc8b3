#!/usr/bin/env python3
"""Writes a random-weight llama model directory (config.json, model.safetensors, and a
tokenizer: the embedded stories260K one unless --tokenizer names another) for throughput
measurements where the forward pass dominates: `strictly serve --model DIR`. The text it
writes is noise.

    python3 scripts/random_llama.py OUT_DIR [--hidden 512] [--layers 8] [--heads 8]
        [--kv-heads 8] [--intermediate 1376] [--context 1024] [--seed 1]
        [--tokenizer tokenizer.json --vocab N --bos ID --eos ID] [--dtype f32|bf16]
        [--preset llama-3-8b]

Standard library only for small models. Gigabyte-sized ones (--preset llama-3-8b: 8.0B
parameters, 16 GB in bf16) need PyTorch, which draws the weights (on a GPU when there is one)
and is used whenever it can be imported; the safetensors file is written one tensor at a time.
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
ap.add_argument("--tokenizer", help="tokenizer.json to copy (default: the embedded stories260K)")
ap.add_argument("--vocab", type=int, default=512, help="rows of the embedding and the head")
ap.add_argument("--bos", type=int, default=1)
ap.add_argument("--eos", type=int, default=2)
ap.add_argument("--rope-theta", type=float, default=10000.0)
ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
ap.add_argument("--preset", choices=["llama-3-8b"], help="Llama-3-8B's shape with the Llama 3 vocabulary size")
a = ap.parse_args()
if a.preset == "llama-3-8b":
    a.hidden, a.layers, a.heads, a.kv_heads, a.intermediate = 4096, 32, 32, 8, 14336
    a.vocab, a.bos, a.eos, a.rope_theta, a.dtype = 128256, 128000, 128001, 500000.0, "bf16"
    a.context = max(a.context, 8192)
if a.hidden % a.heads or a.heads % a.kv_heads:
    sys.exit("random_llama: --heads must divide --hidden and --kv-heads must divide --heads")

here = os.path.dirname(os.path.abspath(__file__))
tokenizer = a.tokenizer or os.path.join(here, "..", "assets", "stories260K", "tokenizer.json")
vocab = a.vocab
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

try:
    import torch
except ImportError:
    torch = None
width = 2 if a.dtype == "bf16" else 4
if torch is None and a.dtype == "bf16":
    sys.exit("random_llama: --dtype bf16 needs PyTorch")


def draw(name, shape, n, rng):
    """One tensor's little-endian bytes: norms 1, the rest uniform in ±1/sqrt(fan-in) (which
    keeps activations of order 1 through the layers)."""
    scale = 1.0 / shape[-1] ** 0.5
    if torch is not None:
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        dt = torch.bfloat16 if a.dtype == "bf16" else torch.float32
        if name.endswith("norm.weight"):
            t = torch.ones(n, dtype=dt, device=dev)
        else:
            t = (torch.rand(n, generator=rng, device=dev) * 2 - 1).mul_(scale).to(dt)
        view = torch.int16 if a.dtype == "bf16" else torch.int32
        return t.view(view).cpu().numpy().tobytes()
    if name.endswith("norm.weight"):
        return (array.array("f", [1.0]) * n).tobytes()
    return array.array("f", (rng.uniform(-scale, scale) for _ in range(n))).tobytes()


if torch is not None:
    rng = torch.Generator(device="cuda" if torch.cuda.is_available() else "cpu").manual_seed(a.seed)
else:
    rng = random.Random(a.seed)
header, offset = {}, 0
for name, shape in shapes:
    size = math.prod(shape) * width
    header[name] = {"dtype": a.dtype.upper(), "shape": list(shape), "data_offsets": [offset, offset + size]}
    offset += size

os.makedirs(a.out, exist_ok=True)
head = json.dumps(header).encode()
head += b" " * (-len(head) % 8)
with open(os.path.join(a.out, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(head)))
    f.write(head)
    for name, shape in shapes:
        f.write(draw(name, shape, math.prod(shape), rng))
config = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab,
    "hidden_size": h, "intermediate_size": i, "num_hidden_layers": a.layers,
    "num_attention_heads": a.heads, "num_key_value_heads": a.kv_heads,
    "max_position_embeddings": a.context, "rms_norm_eps": 1e-5, "rope_theta": a.rope_theta,
    "hidden_act": "silu", "tie_word_embeddings": False, "bos_token_id": a.bos, "eos_token_id": a.eos,
}
with open(os.path.join(a.out, "config.json"), "w") as f:
    json.dump(config, f, indent=1)
shutil.copy(tokenizer, os.path.join(a.out, "tokenizer.json"))
params = sum(math.prod(s) for _, s in shapes)
print(f"random_llama: {a.out}: {params / 1e6:.1f}M parameters")
