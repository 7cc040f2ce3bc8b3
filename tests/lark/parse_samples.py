"""Parses strictly's samples of Lark grammars with Python's own `lark` package.

stdin: a JSON list of {"name", "grammar" (text), "start", "samples": [text, ...]}.
stdout: a JSON object name -> {"refused": why} when lark cannot build the grammar, else
{"rejected": [[sample, error], ...]} (empty when lark parses every sample).

Lark reads each grammar with its Earley parser and the `dynamic_complete` lexer: every
terminal may match any string of its language at any split, the exact language of the
grammar (the plain `dynamic` lexer tries only each terminal's longest match).
"""
import json
import sys

import lark

out = {}
for case in json.load(sys.stdin):
    try:
        parser = lark.Lark(case["grammar"], start=case["start"], parser="earley", lexer="dynamic_complete")
    except Exception as e:  # lark refuses the grammar itself
        out[case["name"]] = {"refused": f"{type(e).__name__}: {e}".splitlines()[0]}
        continue
    rejected = []
    for s in case["samples"]:
        try:
            parser.parse(s)
        except Exception as e:
            rejected.append([s, f"{type(e).__name__}: {e}".splitlines()[0]])
    out[case["name"]] = {"rejected": rejected}
json.dump(out, sys.stdout)
