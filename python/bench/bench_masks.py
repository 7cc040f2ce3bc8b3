"""Mask speed through Python: strictly's fill_bitmask against llguidance's and XGrammar's
Python packages, on the same JSON Schemas, the same tokenizer and the same token paths.

Method (every engine alike, interleaved in one process):
* Cases: JSONSchemaBench files (``{"schema", "tests"}``) from ``--cases``, sorted by name; a
  case is used when all three engines compile its schema and accept the token path of its first
  valid instance (serialized compactly, tokenized with the HF tokenizer, no special tokens).
* Single sequence: along each path, before every token, one timed ``fill`` call per engine into
  its own int32 ``[1, ceil(vocab/32)]`` row (numpy for strictly and llguidance, torch for XGrammar,
  which takes tensors); the order of the engines rotates per step. Then each engine commits the
  token (untimed). ``perf_counter_ns`` around the single Python call: the binding's overhead
  (argument checks, GIL release) is part of every figure, as it is in a server.
* Batch of 64: 64 sequences over the cases' paths, each starting at a different offset; per step
  one timed batch call per engine (``strictly.fill_bitmasks``; llguidance's
  ``fill_next_token_bitmask_par`` with an ``LLExecutor``; XGrammar's
  ``BatchGrammarMatcher.batch_fill_next_token_bitmask``), each with ``--threads`` threads, then
  every sequence commits its next token (a finished one starts its path over).
* Overhead: ``fill_bitmask`` on a three-token vocabulary (almost no mask work), numpy and torch.
* Language: each schema's exact language with flexible whitespace in every engine (strictly
  ``exact=True, whitespace="flexible"``; llguidance's defaults with ``whitespace_flexible``;
  XGrammar ``any_whitespace=True, strict_mode=False``). XGrammar's compile cache is off;
  strictly's per-vocabulary mask cache and llguidance's are on, as in a server.

Run: ``python bench_masks.py --tokenizer ../../../shared/data/tokenizers/llama-3.2/tokenizer.json
--cases ../../../shared/data/jsonschemabench/Github_medium --limit 40 --json out.json``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np


def version(dist):
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as v

    try:
        return v(dist)
    except PackageNotFoundError:
        return "?"


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def summary(us):
    return {
        "n": len(us),
        "mean": statistics.fmean(us),
        "p50": statistics.median(us),
        "p95": pct(us, 0.95),
        "p99": pct(us, 0.99),
        "max": max(us),
    }


class Strictly:
    name = "strictly"

    def __init__(self, tok_path, vocab_size, threads):
        import strictly

        self.s = strictly
        self.vocab = strictly.Vocab.from_tokenizer_json(tok_path, vocab_size=vocab_size)
        self.eos = self.vocab.eos_ids
        os.environ.setdefault("RAYON_NUM_THREADS", str(threads))

    def compile(self, schema):
        return self.s.compile(self.vocab, json_schema=schema, exact=True, whitespace="flexible")

    def matcher(self, c):
        return c.matcher()

    def bitmask(self, rows, words):
        return np.zeros((rows, words), dtype=np.int32)

    def fill(self, m, bm, i):
        m.fill_bitmask(bm, i)

    def fill_batch(self, ms, bm):
        self.s.fill_bitmasks(ms, bm)

    def accept(self, m, t):
        return m.accept_token(t)

    def reset(self, c, m):
        m.reset()
        return m


class Guidance:
    name = "llguidance"

    def __init__(self, hf_tok, vocab_size, eos, threads):
        import llguidance
        import llguidance.hf
        import llguidance.numpy

        self.g = llguidance
        self.np = llguidance.numpy
        self.tok = llguidance.hf.from_tokenizer(hf_tok, n_vocab=vocab_size, eos_token=eos)
        self.executor = llguidance.LLExecutor(num_threads=threads)

    def compile(self, schema):
        grammar = self.g.LLMatcher.grammar_from_json_schema(json.dumps(schema), defaults={"whitespace_flexible": True})
        err = self.g.LLMatcher.validate_grammar(grammar, self.tok)
        if err and not err.startswith("WARNING"):
            raise ValueError(err)
        return grammar

    def matcher(self, c):
        m = self.g.LLMatcher(self.tok, c, log_level=0)
        if m.is_error():
            raise ValueError(m.get_error())
        return m

    def bitmask(self, rows, words):
        return np.zeros((rows, words), dtype=np.int32)

    def fill(self, m, bm, i):
        self.np.fill_next_token_bitmask(m, bm, i)

    def fill_batch(self, ms, bm):
        self.np.fill_next_token_bitmask_par(self.executor, [(m, i) for i, m in enumerate(ms)], bm)

    def accept(self, m, t):
        return m.consume_token(t) and not m.is_error()

    def reset(self, c, m):
        return self.matcher(c)


class XGrammar:
    name = "xgrammar"

    def __init__(self, hf_tok, vocab_size, eos, threads):
        import torch
        import xgrammar as xgr

        self.torch = torch
        self.x = xgr
        info = xgr.TokenizerInfo.from_huggingface(hf_tok, vocab_size=vocab_size, stop_token_ids=eos)
        self.compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self.batch = xgr.BatchGrammarMatcher(max_threads=threads)

    def compile(self, schema):
        return self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=True, strict_mode=False)

    def matcher(self, c):
        return self.x.GrammarMatcher(c)

    def bitmask(self, rows, words):
        return self.torch.zeros((rows, words), dtype=self.torch.int32)

    def fill(self, m, bm, i):
        m.fill_next_token_bitmask(bm, i)

    def fill_batch(self, ms, bm):
        self.batch.batch_fill_next_token_bitmask(ms, bm)

    def accept(self, m, t):
        return m.accept_token(t)

    def reset(self, c, m):
        m.reset()
        return m


def load_cases(folder, limit):
    out = []
    for p in sorted(Path(folder).glob("*.json")):
        d = json.loads(p.read_text())
        valid = [t["data"] for t in d.get("tests", []) if t.get("valid")]
        if valid:
            out.append((p.stem, d["schema"], valid[0]))
    return out[: limit * 3]  # room for cases an engine refuses


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--cases", required=True)
    ap.add_argument("--limit", type=int, default=40)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--batch-steps", type=int, default=40)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--json", help="write the summary here")
    args = ap.parse_args()

    import transformers

    hf = transformers.PreTrainedTokenizerFast(tokenizer_file=args.tokenizer)
    vocab_size = len(hf)
    st = Strictly(args.tokenizer, vocab_size, args.threads)
    eos = st.eos
    engines = [st, Guidance(hf, vocab_size, eos, args.threads), XGrammar(hf, vocab_size, eos, args.threads)]
    words = (vocab_size + 31) // 32

    cases, skipped = [], []
    for name, schema, instance in load_cases(args.cases, args.limit):
        if len(cases) >= args.limit:
            break
        text = json.dumps(instance, separators=(",", ":"), ensure_ascii=False)
        ids = hf.encode(text, add_special_tokens=False)
        try:
            compiled = [e.compile(schema) for e in engines]
            ms = [e.matcher(c) for e, c in zip(engines, compiled)]
            for t in ids:
                for e, m in zip(engines, ms):
                    if not e.accept(m, t):
                        raise ValueError(f"{e.name} refuses the instance")
        except Exception as ex:  # one engine cannot run it: left out for all
            skipped.append((name, str(ex)[:120]))
            continue
        cases.append((name, compiled, ids))
    print(f"{len(cases)} cases ({len(skipped)} left out: an engine refused them)", file=sys.stderr)

    # Single sequence.
    single = {e.name: [] for e in engines}
    bms = [e.bitmask(1, words) for e in engines]
    step = 0
    for name, compiled, ids in cases:
        ms = [e.matcher(c) for e, c in zip(engines, compiled)]
        for t in ids:
            order = [(step + k) % 3 for k in range(3)]
            for k in order:
                e, m, bm = engines[k], ms[k], bms[k]
                t0 = time.perf_counter_ns()
                e.fill(m, bm, 0)
                single[e.name].append((time.perf_counter_ns() - t0) / 1000)
            for e, m in zip(engines, ms):
                e.accept(m, t)
            step += 1

    # Batch: args.batch sequences at staggered offsets, one token each per step.
    batch = {e.name: [] for e in engines}
    seqs = []
    for i in range(args.batch):
        name, compiled, ids = cases[i % len(cases)]
        seqs.append([compiled, ids, i % max(1, len(ids))])
    state = []
    for e_i, e in enumerate(engines):
        ms = []
        for compiled, ids, off in seqs:
            m = e.matcher(compiled[e_i])
            for t in ids[:off]:
                e.accept(m, t)
            ms.append(m)
        state.append(ms)
    pos = [off for _, _, off in seqs]
    bbms = [e.bitmask(args.batch, words) for e in engines]
    for s in range(args.batch_steps):
        for k in [(s + j) % 3 for j in range(3)]:
            e = engines[k]
            t0 = time.perf_counter_ns()
            e.fill_batch(state[k], bbms[k])
            batch[e.name].append((time.perf_counter_ns() - t0) / 1000)
        for i, (compiled, ids, _off) in enumerate(seqs):
            if pos[i] >= len(ids):
                for k, e in enumerate(engines):
                    state[k][i] = e.reset(compiled[k], state[k][i])
                pos[i] = 0
            for k, e in enumerate(engines):
                e.accept(state[k][i], ids[pos[i]])
            pos[i] += 1

    # Binding overhead: a three-token vocabulary, almost no mask work.
    import strictly

    tiny = strictly.Vocab.from_token_bytes([b"a", b"b", b"</s>"], [2])
    m = strictly.compile(tiny, regex="a+").matcher()
    overhead = {}
    import torch

    for kind, bm in (("numpy", np.zeros((1, 1), dtype=np.int32)), ("torch", torch.zeros((1, 1), dtype=torch.int32))):
        xs = []
        for _ in range(20000):
            t0 = time.perf_counter_ns()
            m.fill_bitmask(bm, 0)
            xs.append((time.perf_counter_ns() - t0) / 1000)
        overhead[kind] = summary(xs)
    xs = []
    for _ in range(20000):
        t0 = time.perf_counter_ns()
        m.num_tokens
        xs.append((time.perf_counter_ns() - t0) / 1000)
    overhead["attribute read (baseline)"] = summary(xs)

    out = {
        "tokenizer": args.tokenizer,
        "vocab_size": vocab_size,
        "cases": len(cases),
        "left_out": skipped,
        "threads": args.threads,
        "versions": {name: version(name) for name in ("strictly", "llguidance", "xgrammar", "torch")},
        "single_us": {k: summary(v) for k, v in single.items()},
        "batch64_us": {k: summary(v) for k, v in batch.items()},
        "overhead_us": overhead,
    }
    for part in ("single_us", "batch64_us"):
        s = out[part]["strictly"]
        for other in ("llguidance", "xgrammar"):
            o = out[part][other]
            out[part][f"strictly_vs_{other}"] = {"p50": s["p50"] / o["p50"], "mean": s["mean"] / o["mean"]}
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
