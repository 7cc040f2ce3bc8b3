#!/usr/bin/env python3
"""One BENCHMARKS.md table row per engine run, from `strictly bench` / `peer-bench` outputs.

Usage: scripts/bench_table.py [--common] LABEL SUMMARY.json CASES.jsonl [LABEL SUMMARY.json CASES.jsonl ...]

--common: compile / time-to-first-mask percentiles over the cases that every run compiled
(engines that refuse the hard schemas otherwise look faster on the ones they keep).

Mask figures come from the summary (they need every step); compile and time-to-first-mask
percentiles (p50, p99: peer-bench's summary has no p99) and peak RSS come from the per-case
lines, nearest-rank like both harnesses.
"""
import json
import math
import sys


def pct(v, q):
    v = sorted(v)
    return v[max(0, math.ceil(q * len(v)) - 1)] if v else None


def load(lines):
    return [json.loads(l) for l in open(lines) if l.strip()]


def row(label, summary, lines, only=None):
    t = json.load(open(summary))["total"]
    cases = [c for c in load(lines) if only is None or c["id"] in only]
    comp = [c["compile_us"] / 1000 for c in cases if c.get("ttfm_us") is not None]
    ttfm = [c["ttfm_us"] / 1000 for c in cases if c.get("ttfm_us") is not None]
    rss = [c["peak_rss_mib"] for c in cases if c.get("peak_rss_mib") is not None]
    m = t["mask_us"]
    f = lambda x, d=1: "–" if x is None else f"{x:,.{d}f}"
    # With `strictly bench --recheck-max-ms`: the maximum once re-run cases count with their
    # smallest maximum (the maxima that came back).
    rechecked = f" (re-checked {f(t.get('mask_max_us_rechecked'))})" if t.get("rechecked_cases") else ""
    cells = [
        label,
        f"{t['compiled']} / {t['cases']}",
        f"{t['tests_agree']:,} / {t['tests_total_compiled']:,}",
        f"{t['masks']:,}",
        f(m["mean"]), f(m["p50"]), f(m["p95"]), f(m["p99"]), f(t.get("mask_us_p999")), f(m["max"]) + rechecked,
        f(pct(comp, 0.5), 2), f(pct(comp, 0.99), 1), f(pct(ttfm, 0.5), 2), f(pct(ttfm, 0.99), 1),
        f(max(rss) if rss else None),
    ]
    return "| " + " | ".join(cells) + " |"


if __name__ == "__main__":
    a = sys.argv[1:]
    common = bool(a) and a[0] == "--common"
    a = a[1:] if common else a
    if not a or len(a) % 3:
        sys.exit(__doc__)
    only = None
    if common:
        sets = [{c["id"] for c in load(a[i + 2]) if c.get("ttfm_us") is not None} for i in range(0, len(a), 3)]
        only = set.intersection(*sets)
        print(f"(compile and TTFM over the {len(only)} cases every run compiled)")
    print("| engine | compiled | tests agree | masks | mask mean µs | p50 | p95 | p99 | p99.9 | max | compile p50 ms | compile p99 | TTFM p50 ms | TTFM p99 | peak RSS max MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for i in range(0, len(a), 3):
        print(row(*a[i:i + 3], only))
