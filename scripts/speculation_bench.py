#!/usr/bin/env python3
"""Prompt-lookup speculation on an extraction task (issue 28): `strictly generate --verbose` with
`--speculate off` and `--speculate prompt-lookup`, alternating, on prompts whose JSON answer copies
the paragraph; prints forward passes per output token and decode tokens/s (after the prefill),
medians over the repeats, and checks the two outputs are the same text.

    python3 scripts/speculation_bench.py MODEL.gguf [--bin target/release/strictly] [--repeats 3]
        [--draft-model SMALL.gguf]

With `--draft-model`, the second arm drafts from that model (`generate --draft-model`) instead
of the prompt.
"""

import argparse
import json
import re
import statistics
import subprocess
import tempfile

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "email": {"type": "string"},
        "company": {"type": "string"},
        "city": {"type": "string"},
        "title": {"type": "string"},
    },
    "required": ["name", "email", "company", "city", "title"],
    "additionalProperties": False,
}

PARAGRAPHS = [
    "Dr. Margaret Okonkwo-Fitzgerald is the Principal Research Scientist at Brightwater Analytics "
    "Incorporated in San Francisco. Reach her at margaret.okonkwo-fitzgerald@brightwater-analytics.example.com.",
    "Our new hire, Jonathan Abernathy-Whitfield, joins Northwind Logistics Holdings in Rotterdam as "
    "Senior Supply Chain Coordinator; his address is jonathan.abernathy@northwind-logistics.example.org.",
    "Contact Priyanka Venkataraman, Head of Regulatory Affairs at Helios Biopharmaceuticals Limited "
    "(Cambridge), by writing to priyanka.venkataraman@helios-biopharma.example.co.uk.",
    "The keynote is given by Alejandro Castellanos-Rivera, Chief Technology Officer of Quetzal Cloud "
    "Systems, based in Guadalajara: alejandro.castellanos@quetzal-cloud.example.mx.",
    "Send the invoice to Wilhelmina van der Berg-Hoogendijk, Accounts Payable Manager, Zuiderzee Maritime "
    "Insurance Group, Amsterdam, wilhelmina.vanderberg@zuiderzee-maritime.example.nl.",
]


def run(binary, model, schema_path, paragraph, speculate, draft=None):
    cmd = [
        binary, "generate", "--model", model, "--chat", "--greedy", "--max-tokens", "160",
        "--schema", schema_path, "--verbose", "--prompt", f"Extract the person as JSON. Text: {paragraph}",
    ]
    cmd += ["--speculate", speculate] if speculate == "off" or draft is None else ["--draft-model", draft]
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    rate = float(re.search(r"([0-9.]+) tokens/s after the prefill", p.stderr).group(1))
    tokens = int(re.search(r"; ([0-9]+) tokens in", p.stderr).group(1))
    passes = int(re.search(r"([0-9]+) forward passes", p.stderr).group(1))
    return p.stdout, rate, passes / max(tokens, 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--bin", default="target/release/strictly")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--draft-model", default=None)
    a = ap.parse_args()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(SCHEMA, f)
        schema_path = f.name
    rows = []
    for i, par in enumerate(PARAGRAPHS):
        got = {"off": [], "prompt-lookup": []}
        texts = {}
        for _ in range(a.repeats):
            for mode in ("off", "prompt-lookup"):
                text, rate, ppt = run(a.bin, a.model, schema_path, par, mode, a.draft_model)
                got[mode].append((rate, ppt))
                texts.setdefault(mode, text)
        same = texts["off"] == texts["prompt-lookup"]
        off = statistics.median(r for r, _ in got["off"])
        on = statistics.median(r for r, _ in got["prompt-lookup"])
        rows.append((i, got["off"][0][1], got["prompt-lookup"][0][1], off, on, on / off, same))
    print("| prompt | passes/token off | passes/token on | tok/s off | tok/s on | speedup | same output |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for i, p0, p1, off, on, sp, same in rows:
        print(f"| {i} | {p0:.2f} | {p1:.2f} | {off:.1f} | {on:.1f} | {sp:.2f}x | {'yes' if same else 'NO'} |")
    print(f"median speedup {statistics.median(r[5] for r in rows):.2f}x")


if __name__ == "__main__":
    main()
