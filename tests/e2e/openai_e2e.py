#!/usr/bin/env python3
"""End-to-end check of `strictly serve` with the official `openai` Python client.

Starts the server (the embedded stories260K model, no files needed) on a free port of
127.0.0.1, drives it with `openai`, and stops it. Exit status 0 when every check passes.

    python3 -m pip install openai            # once (pydantic comes with it)
    python3 tests/e2e/openai_e2e.py --bin target/ci/strictly
    python3 tests/e2e/openai_e2e.py --base-url http://127.0.0.1:8080/v1   # a running server

Checks: models.list; chat.completions.create with a json_schema response_format (the
content parses and validates); chat.completions.parse(response_format=<Pydantic model>);
json_object; a streamed request (chunk sequence, [DONE] handled by the client, the text
equal to the non-streamed one with the same seed, usage with include_usage); tool_choice
required and named (arguments validate against the tool's parameters); a bad schema and an
unknown model (OpenAI errors, status 400 / 404); completions; many concurrent requests.
"""

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import time
from enum import Enum
from typing import List, Optional

import openai
from pydantic import BaseModel, Field

from server_process import free_port, wait_healthy

MODEL = None  # set from models.list()
FAILURES = []


def check(name):
    def wrap(fn):
        def run(client):
            t0 = time.time()
            try:
                fn(client)
                print(f"ok    {name} ({time.time() - t0:.2f} s)", flush=True)
            except Exception as e:  # noqa: BLE001 - report every failure, keep going
                FAILURES.append(name)
                print(f"FAIL  {name}: {type(e).__name__}: {e}", flush=True)

        run.__name__ = name
        return run

    return wrap


# ---- schemas -------------------------------------------------------------------------------

class Color(str, Enum):
    red = "red"
    green = "green"
    blue = "blue"


class Pet(BaseModel):
    name: str = Field(max_length=24)
    legs: int = Field(ge=0, le=8)
    color: Color


class Person(BaseModel):
    name: str = Field(max_length=32)
    age: int = Field(ge=0, le=150)
    pets: List[Pet] = Field(max_length=3)
    nickname: Optional[str] = Field(default=None, max_length=16)


RECIPE_SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 40},
        "servings": {"type": "integer", "minimum": 1, "maximum": 12},
        "vegetarian": {"type": "boolean"},
        "steps": {"type": "array", "items": {"type": "string", "maxLength": 30}, "minItems": 1, "maxItems": 3},
    },
    "required": ["title", "servings", "vegetarian", "steps"],
    "additionalProperties": False,
}


def validate_recipe(obj):
    assert set(obj) == {"title", "servings", "vegetarian", "steps"}, obj
    assert isinstance(obj["title"], str) and len(obj["title"]) <= 40, obj
    assert isinstance(obj["servings"], int) and not isinstance(obj["servings"], bool), obj
    assert 1 <= obj["servings"] <= 12, obj
    assert isinstance(obj["vegetarian"], bool), obj
    assert isinstance(obj["steps"], list) and 1 <= len(obj["steps"]) <= 3, obj
    assert all(isinstance(s, str) and len(s) <= 30 for s in obj["steps"]), obj


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 24},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
TIME_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Current time in a time zone",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string", "maxLength": 20}, "hours24": {"type": "boolean"}},
            "required": ["zone"],
        },
    },
}


def chat(client, **kw):
    kw.setdefault("model", MODEL)
    kw.setdefault("messages", [{"role": "user", "content": "Tell me about a person and their pets."}])
    return client.chat.completions.create(**kw)


# ---- checks --------------------------------------------------------------------------------

@check("models.list")
def models(client):
    global MODEL
    ids = [m.id for m in client.models.list().data]
    assert ids, "no models"
    MODEL = ids[0]


@check("json_schema response_format")
def json_schema(client):
    for seed in range(3):
        r = chat(client, seed=seed, max_tokens=300,
                 response_format={"type": "json_schema",
                                  "json_schema": {"name": "recipe", "schema": RECIPE_SCHEMA, "strict": True}})
        c = r.choices[0]
        assert c.finish_reason == "stop", c.finish_reason
        validate_recipe(json.loads(c.message.content))
        assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0, r.usage
        assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


@check("chat.completions.parse with a Pydantic model")
def parse(client):
    for seed in range(3):
        r = client.chat.completions.parse(model=MODEL, seed=seed, response_format=Person,
                                          messages=[{"role": "user", "content": "Describe a person."}])
        p = r.choices[0].message.parsed
        assert isinstance(p, Person), p
        Person.model_validate_json(r.choices[0].message.content)


@check("json_object")
def json_object(client):
    r = chat(client, seed=5, response_format={"type": "json_object"})
    assert isinstance(json.loads(r.choices[0].message.content), dict)


@check("streaming equals non-streaming")
def streaming(client):
    kw = dict(seed=11, max_tokens=60, temperature=0.8)
    whole = chat(client, **kw).choices[0].message.content
    stream = chat(client, stream=True, stream_options={"include_usage": True}, **kw)
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant", chunks[0]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole, (text, whole)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes in (["stop"], ["length"]), finishes
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0, chunks[-1]
    ids = {c.id for c in chunks}
    assert len(ids) == 1, ids


@check("streamed json_schema")
def streamed_schema(client):
    stream = chat(client, seed=3, stream=True,
                  response_format={"type": "json_schema", "json_schema": {"name": "recipe", "schema": RECIPE_SCHEMA}})
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    validate_recipe(json.loads(text))


def check_weather_call(call):
    assert call.type == "function" and call.id.startswith("call_"), call
    assert call.function.name == "get_weather", call
    args = json.loads(call.function.arguments)
    assert set(args) == {"city", "unit"}, args
    assert isinstance(args["city"], str) and len(args["city"]) <= 24, args
    assert args["unit"] in ("celsius", "fahrenheit"), args


@check("tool_choice required")
def tools_required(client):
    for seed in range(3):
        r = chat(client, seed=seed, tools=[WEATHER_TOOL, TIME_TOOL], tool_choice="required",
                 messages=[{"role": "user", "content": "What is the weather in Paris?"}])
        c = r.choices[0]
        assert c.finish_reason == "tool_calls", c.finish_reason
        assert c.message.tool_calls, c.message
        for call in c.message.tool_calls:
            args = json.loads(call.function.arguments)
            if call.function.name == "get_weather":
                check_weather_call(call)
            else:
                assert call.function.name == "get_time", call
                assert "zone" in args and isinstance(args["zone"], str), args


@check("tool_choice named, parallel_tool_calls false, streamed")
def tools_named(client):
    r = chat(client, seed=4, tools=[WEATHER_TOOL, TIME_TOOL], parallel_tool_calls=False,
             tool_choice={"type": "function", "function": {"name": "get_weather"}})
    calls = r.choices[0].message.tool_calls
    assert len(calls) == 1, calls
    check_weather_call(calls[0])
    stream = chat(client, seed=4, tools=[WEATHER_TOOL, TIME_TOOL], parallel_tool_calls=False, stream=True,
                  tool_choice={"type": "function", "function": {"name": "get_weather"}})
    name, args = None, ""
    for chunk in stream:
        for d in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            if d.function.name:
                name = d.function.name
            args += d.function.arguments or ""
    assert name == "get_weather" and args == calls[0].function.arguments, (name, args)


@check("tool_choice auto")
def tools_auto(client):
    r = chat(client, seed=1, max_tokens=40, tools=[WEATHER_TOOL], tool_choice="auto")
    m = r.choices[0].message
    assert m.content is not None or m.tool_calls, m
    for call in m.tool_calls or []:
        check_weather_call(call)


@check("a bad schema is a 400 naming the keyword")
def bad_schema(client):
    try:
        chat(client, response_format={"type": "json_schema", "json_schema": {
            "name": "bad", "schema": {"type": "object", "properties": {"a": {"type": "strnig"}}}}})
    except openai.BadRequestError as e:
        assert e.status_code == 400
        assert "/properties/a" in str(e) and "strnig" in str(e), str(e)
        return
    raise AssertionError("no error")


@check("an unknown model is a 404")
def unknown_model(client):
    try:
        chat(client, model="no-such-model")
    except openai.NotFoundError as e:
        assert e.status_code == 404
        return
    raise AssertionError("no error")


@check("a bad parameter is a 400")
def bad_param(client):
    try:
        chat(client, temperature=5)
    except openai.BadRequestError as e:
        assert "temperature" in str(e), str(e)
        return
    raise AssertionError("no error")


@check("completions")
def completions(client):
    r = client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=20, seed=2, n=2)
    assert len(r.choices) == 2 and all(isinstance(c.text, str) for c in r.choices), r
    r = client.completions.create(model=MODEL, prompt="The answer is", max_tokens=10,
                                  extra_body={"choice": ["yes", "no", "maybe"]})
    assert r.choices[0].text in ("yes", "no", "maybe"), r.choices[0].text


@check("32 concurrent requests")
def many_concurrent(client):
    def one(i):
        r = chat(client, seed=100 + i, max_tokens=200,
                 response_format={"type": "json_schema", "json_schema": {"name": "recipe", "schema": RECIPE_SCHEMA}})
        validate_recipe(json.loads(r.choices[0].message.content))
        return True

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        results = list(pool.map(one, range(32)))
    assert all(results)


CHECKS = [models, json_schema, parse, json_object, streaming, streamed_schema, tools_required, tools_named,
          tools_auto, bad_schema, unknown_model, bad_param, completions, many_concurrent]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("STRICTLY_BIN", "target/release/strictly"))
    ap.add_argument("--base-url", help="test a running server instead of starting one")
    a = ap.parse_args()
    proc = None
    if a.base_url:
        base = a.base_url.rstrip("/")
        root = base[: -len("/v1")] if base.endswith("/v1") else base
    else:
        port = free_port()
        proc = subprocess.Popen([a.bin, "serve", "--host", "127.0.0.1", "--port", str(port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        root = f"http://127.0.0.1:{port}"
        base = root + "/v1"
    try:
        wait_healthy(root, proc)
        client = openai.OpenAI(base_url=base, api_key="none", timeout=120, max_retries=0)
        for c in CHECKS:
            c(client)
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
    if FAILURES:
        print(f"{len(FAILURES)} of {len(CHECKS)} checks failed: {', '.join(FAILURES)}")
        return 1
    print(f"all {len(CHECKS)} checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
