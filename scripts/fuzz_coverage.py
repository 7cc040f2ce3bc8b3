#!/usr/bin/env python3
"""Coverage and validity of `strictly sample --cover` / `--mutate` on JSONSchemaBench schemas.

For each schema: N samples with --cover (byte-level tokenizer), every sample checked with the
Python `jsonschema` package (an independent validator), then M near misses with --mutate (M = N
unless --mutants), each checked to be invalid JSON or invalid by that validator. Prints one
line per schema (with the number of samples it took to cover every unit, when they all were)
and totals.

  python3 scripts/fuzz_coverage.py [--bin target/ci/strictly] [--n 50] [--mutants M] \
      [--per-group 6] [--data ../shared/data/jsonschemabench] GROUP...
"""
import argparse, glob, json, os, subprocess, sys, tempfile

import jsonschema

ap = argparse.ArgumentParser()
ap.add_argument("--bin", default="target/ci/strictly")
ap.add_argument("--n", type=int, default=50)
ap.add_argument("--mutants", type=int, default=None, help="near misses per schema (default: --n)")
ap.add_argument("--per-group", type=int, default=6)
ap.add_argument("--max-tokens", type=int, default=None, help="byte budget per sample (default: strictly's, scaled to the grammar)")
ap.add_argument("--data", default="../shared/data/jsonschemabench")
ap.add_argument("groups", nargs="+")
a = ap.parse_args()

def run(path, mode):
    # --cover: strictly's budget (scaled to the grammar) unless one is given; --mutate: 512.
    budget = ["--max-tokens", str(a.max_tokens or 512)] if a.max_tokens or mode == "--mutate" else []
    n = a.n if mode == "--cover" else (a.mutants if a.mutants is not None else a.n)
    p = subprocess.run([a.bin, "sample", "--tokenizer", "bytes", "--schema", path, mode, "-n", str(n)] + budget,
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        return None, p.stderr.strip()
    # Lines end at "\n" only: str.splitlines also splits at U+2028, U+0085 and others, which
    # JSON strings may hold unescaped.
    cov = next(json.loads(l)["coverage"] for l in p.stderr.split("\n") if l.startswith('{"coverage"'))
    return [json.loads(l) for l in p.stdout.split("\n") if l], cov

tot = dict(schemas=0, compile_errors=0, full=0, covered=0, units=0, samples=0, invalid_samples=0, mutants=0, valid_mutants=0)
to_full = []
tmp = tempfile.mkdtemp()
for g in a.groups:
    for f in sorted(glob.glob(os.path.join(a.data, g, "*.json")))[: a.per_group]:
        schema = json.load(open(f))["schema"]
        path = os.path.join(tmp, "schema.json")
        json.dump(schema, open(path, "w"))
        lines, cov = run(path, "--cover")
        if lines is None:
            tot["compile_errors"] += 1
            continue
        v = jsonschema.validators.validator_for(schema)(schema)
        bad = 0
        for o in lines:
            try:
                ok = v.is_valid(json.loads(o["text"]))
            except ValueError:
                ok = False
            bad += not ok
        mutants, _ = run(path, "--mutate")
        valid_m = 0
        for o in mutants or []:
            try:
                valid_m += v.is_valid(json.loads(o["text"]))
            except ValueError:
                pass
        c, t = cov["units_covered"], cov["units_total"]
        # The sample that covered the last new unit (1-based): samples to full coverage.
        last = max((i + 1 for i, o in enumerate(lines) if o.get("new_units", 0) > 0), default=0)
        full = f", full after {last}" if c == t else ""
        if c == t:
            to_full.append(last)
        print(f"{g}/{os.path.basename(f)}: {c}/{t} units{full}, {len(lines)} samples ({bad} invalid), "
              f"{len(mutants or [])} near misses ({valid_m} valid)")
        tot["schemas"] += 1; tot["full"] += c == t; tot["covered"] += c; tot["units"] += t
        tot["samples"] += len(lines); tot["invalid_samples"] += bad
        tot["mutants"] += len(mutants or []); tot["valid_mutants"] += valid_m
to_full.sort()
tot["samples_to_full_median"] = to_full[len(to_full) // 2] if to_full else None
tot["samples_to_full_max"] = to_full[-1] if to_full else None
print(json.dumps(tot))
sys.exit(1 if tot["invalid_samples"] or tot["valid_mutants"] else 0)
