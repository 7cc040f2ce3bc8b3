#!/usr/bin/env python3
"""Coverage and validity of `strictly sample --cover` / `--mutate` on JSONSchemaBench schemas.

For each schema: N samples with --cover (byte-level tokenizer), every sample checked with the
Python `jsonschema` package (an independent validator), then N near misses with --mutate, each
checked to be invalid JSON or invalid by that validator. Prints one line per schema and totals.

  python3 scripts/fuzz_coverage.py [--bin target/ci/strictly] [--n 50] [--per-group 6] \
      [--data ../shared/data/jsonschemabench] GROUP...
"""
import argparse, glob, json, os, subprocess, sys, tempfile

import jsonschema

ap = argparse.ArgumentParser()
ap.add_argument("--bin", default="target/ci/strictly")
ap.add_argument("--n", type=int, default=50)
ap.add_argument("--per-group", type=int, default=6)
ap.add_argument("--max-tokens", type=int, default=None, help="byte budget per sample (default: strictly's, scaled to the grammar)")
ap.add_argument("--data", default="../shared/data/jsonschemabench")
ap.add_argument("groups", nargs="+")
a = ap.parse_args()

def run(path, mode):
    # --cover: strictly's budget (scaled to the grammar) unless one is given; --mutate: 512.
    budget = ["--max-tokens", str(a.max_tokens or 512)] if a.max_tokens or mode == "--mutate" else []
    p = subprocess.run([a.bin, "sample", "--tokenizer", "bytes", "--schema", path, mode, "-n", str(a.n)] + budget,
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        return None, p.stderr.strip()
    cov = next(json.loads(l)["coverage"] for l in p.stderr.splitlines() if l.startswith('{"coverage"'))
    return [json.loads(l) for l in p.stdout.splitlines()], cov

tot = dict(schemas=0, compile_errors=0, full=0, covered=0, units=0, samples=0, invalid_samples=0, mutants=0, valid_mutants=0)
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
        print(f"{g}/{os.path.basename(f)}: {c}/{t} units, {len(lines)} samples ({bad} invalid), "
              f"{len(mutants or [])} near misses ({valid_m} valid)")
        tot["schemas"] += 1; tot["full"] += c == t; tot["covered"] += c; tot["units"] += t
        tot["samples"] += len(lines); tot["invalid_samples"] += bad
        tot["mutants"] += len(mutants or []); tot["valid_mutants"] += valid_m
print(json.dumps(tot))
sys.exit(1 if tot["invalid_samples"] or tot["valid_mutants"] else 0)
