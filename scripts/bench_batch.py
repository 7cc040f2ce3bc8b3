#!/usr/bin/env python3
"""Throughput of a running `strictly serve` under C concurrent streaming chat requests:
completion tokens per second over all clients (from each stream's usage chunk). Standard
library only.

    python3 scripts/bench_batch.py [--url http://127.0.0.1:8080] [--clients 1,4,8]
        [--requests 4] [--max-tokens 64] [--constraint regex|schema|none] [--rounds 1]

Each client sends --requests requests one after another. --constraint regex (the default) asks
for lowercase text of at least --max-tokens/2 characters and no end, so it runs to --max-tokens
unless the model picks EOS (on a model with random weights, about never); schema, for
a JSON object whose `story` string has 50-400 characters; none, for free text (on a model with
random weights EOS is as likely as any token, so it runs to --max-tokens). With --rounds R the
whole sweep runs R times and each line is one round's figures.
"""
import argparse
import http.client
import json
import threading
import time
import urllib.parse

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--url", default="http://127.0.0.1:8080")
ap.add_argument("--clients", default="1,4,8")
ap.add_argument("--requests", type=int, default=4)
ap.add_argument("--max-tokens", type=int, default=64)
ap.add_argument("--constraint", choices=["regex", "schema", "none"], default="regex")
ap.add_argument("--rounds", type=int, default=1)
a = ap.parse_args()
STORY = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 40},
        "story": {"type": "string", "minLength": 50, "maxLength": 400},
    },
    "required": ["title", "story"],
    "additionalProperties": False,
}
u = urllib.parse.urlparse(a.url)


def one(seed, out):
    body = {
        "messages": [{"role": "user", "content": "Tell me a story."}],
        "max_tokens": a.max_tokens,
        "seed": seed,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if a.constraint == "regex":
        body["regex"] = "[a-z ]{%d,}" % (a.max_tokens // 2)
    elif a.constraint == "schema":
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "story", "schema": STORY}}
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        errors.append(f"status {r.status}: {r.read()[:300]!r}")
        c.close()
        return
    tokens = None
    for line in r:
        line = line.strip()
        if line.startswith(b"data: ") and line != b"data: [DONE]":
            chunk = json.loads(line[6:])
            if chunk.get("error"):
                errors.append(f"in the stream: {json.dumps(chunk['error'])[:300]}")
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
    c.close()
    if tokens is None:
        errors.append("the stream ended without a usage chunk")
    out.append(tokens or 0)


def client(k, out):
    for j in range(a.requests):
        one(1000 * k + j, out)


errors = []  # every failed request's answer: counted and the first shown, never dropped
one(0, [])  # warm up
for n in [int(x) for x in a.clients.split(",")] * a.rounds:
    out = []
    threads = [threading.Thread(target=client, args=(k, out)) for k in range(n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dt = time.perf_counter() - t0
    total = sum(out)
    row = {"constraint": a.constraint, "clients": n, "requests": len(out), "completion_tokens": total,
           "seconds": round(dt, 3), "tokens_per_s": round(total / dt, 1)}
    if errors:
        row |= {"failed": len(errors), "first_error": errors[0]}
        errors.clear()
    print(json.dumps(row))
