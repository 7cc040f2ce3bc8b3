"""Differential tests on the six real tokenizers: the bitmask filled from Python equals the
library's slow reference mask (every token tried byte by byte) and the token-by-token check,
along random paths through JSON Schema, regex, GBNF and Lark constraints; rollback restores
the earlier masks exactly; logits wider than the tokenizer stay clear past it."""

from __future__ import annotations

import json

import numpy as np
import pytest

import strictly
from conftest import REPO, TOKENIZERS, tokenizer_path

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "maxItems": 3},
    },
    "required": ["name", "age"],
}
CONSTRAINTS = {
    "json_schema": SCHEMA,
    "regex": r"(\+1 )?\(\d{3}\) \d{3}-\d{4}|[a-z]{1,6}@[a-z]{2,5}\.(com|org)",
    "grammar": (REPO / "grammars" / "arithmetic.gbnf").read_text(),
    "lark": 'start: item ("," item)*\nitem: WORD | "[" start "]"\nWORD: /[a-z]+/\n',
}

_vocabs = {}


def vocab(name):
    if name not in _vocabs:
        p = tokenizer_path(name)
        # Logits 64 ids wider than the tokenizer, as padded embedding tables are.
        n = strictly.Vocab.from_tokenizer_json(p).n_tokens
        _vocabs[name] = strictly.Vocab.from_tokenizer_json(p, vocab_size=n + 64)
    return _vocabs[name]


def row_ids(bitmask_row, vocab_size):
    return np.flatnonzero(strictly.bitmask_to_bool(bitmask_row[None, :], vocab_size)[0]).tolist()


@pytest.mark.parametrize("tok", TOKENIZERS)
@pytest.mark.parametrize("kind", list(CONSTRAINTS))
def test_bitmask_equals_reference_along_random_paths(tok, kind):
    v = vocab(tok)
    c = strictly.compile(v, **{kind: CONSTRAINTS[kind]})
    rng = np.random.default_rng(hash((tok, kind)) % 2**32)
    bm = np.zeros((3, v.bitmask_words), dtype=np.int32)
    for _ in range(2):
        m = c.matcher()
        history = []
        for step in range(24):
            m.fill_bitmask(bm, 1)
            got = row_ids(bm[1], v.vocab_size)
            assert got == m.reference_allowed_tokens(), (tok, kind, step)
            assert all(i < v.n_tokens for i in got), "nothing past the tokenizer"
            # The token-by-token check agrees on the allowed ids and on a sample of the others.
            others = rng.integers(0, v.vocab_size, 300)
            for t in got[:200]:
                assert m.is_allowed(t)
            allowed = set(got)
            for t in others.tolist():
                assert m.is_allowed(t) == (t in allowed), (tok, kind, step, t)
            history.append(got)
            if not got:
                break
            t = int(rng.choice(got))
            assert m.accept_token(t)
            if m.is_terminated():
                break
        m.fill_bitmask(bm, 1)
        history.append(row_ids(bm[1], v.vocab_size))
        history = history[: m.num_tokens + 1]
        # Rolling back to any point gives that point's mask again.
        k = int(rng.integers(0, m.num_tokens + 1))
        m.rollback(m.num_tokens - k)
        m.fill_bitmask(bm, 2)
        assert row_ids(bm[2], v.vocab_size) == history[k]


@pytest.mark.parametrize("tok", TOKENIZERS)
def test_batch_fill_equals_single_fills(tok):
    v = vocab(tok)
    c = strictly.compile(v, json_schema=SCHEMA)
    rng = np.random.default_rng(3)
    matchers = []
    for i in range(16):
        m = c.matcher()
        for _ in range(i):
            allowed = m.allowed_tokens()
            if not allowed or m.is_accepting():
                break
            assert m.accept_token(int(rng.choice(allowed)))
        matchers.append(m)
    batch = np.zeros((16, v.bitmask_words), dtype=np.int32)
    strictly.fill_bitmasks(matchers, batch)
    single = np.zeros((1, v.bitmask_words), dtype=np.int32)
    for i, m in enumerate(matchers):
        m.fill_bitmask(single)
        assert (single[0] == batch[i]).all(), i


def test_hf_tokenizer_object_gives_the_same_vocabulary():
    from conftest import need_module

    transformers = need_module("transformers")
    for name in TOKENIZERS:
        p = tokenizer_path(name)
        hf = transformers.PreTrainedTokenizerFast(tokenizer_file=str(p))
        from_file = strictly.Vocab.from_tokenizer_json(p)
        from_obj = strictly.Vocab.from_hf_tokenizer(hf, eos_ids=from_file.eos_ids)
        assert from_obj.n_tokens == from_file.n_tokens, name
        for i in range(from_file.n_tokens):
            assert from_obj.token_bytes(i) == from_file.token_bytes(i), (name, i)
        schema = json.dumps(SCHEMA)
        a = strictly.compile(from_file, json_schema=schema).matcher().allowed_tokens()
        b = strictly.compile(from_obj, json_schema=schema).matcher().allowed_tokens()
        assert a == b, name


def test_batch_fill_releases_the_gil():
    """`fill_bitmasks` leaves the GIL to other threads while it works."""
    from gil import runs_during

    v = vocab("llama-3.2")
    # Cold first masks: each sequence its own regex, so no mask is cached; a walk over most of
    # the vocabulary each.
    matchers = [strictly.compile(v, regex=f"( ?[a-z]{{1,{i + 4}}}| ?[0-9]+{i})+\\.").matcher() for i in range(256)]
    bm = np.zeros((256, v.bitmask_words), dtype=np.int32)
    inside, d = runs_during(lambda: strictly.fill_bitmasks(matchers, bm))
    assert d > 0.005, f"the batch took only {d * 1000:.1f} ms: too short to judge"
    assert inside > 0, f"no Python ran during {d * 1000:.0f} ms of filling 256 rows"


def test_a_matcher_shared_by_two_threads_errors_instead_of_racing():
    """Misuse: two threads on one matcher. The one that finds it busy gets a StateError; no
    other error, no crash, and the matcher's state is intact afterwards."""
    import threading

    v = vocab("qwen2.5")
    c = strictly.compile(v, json_schema=SCHEMA)
    m = c.matcher()
    assert m.accept_token(next(i for i in range(v.n_tokens) if v.token_bytes(i) == b'{"'))
    expected = m.allowed_tokens()
    errors, busy = [], [0]

    def hammer():
        bm = np.zeros((1, v.bitmask_words), dtype=np.int32)
        for _ in range(300):
            try:
                m.fill_bitmask(bm)
                assert row_ids(bm[0], v.vocab_size) == expected
                m.validate_tokens([expected[0], expected[0]])
            except strictly.StateError:
                busy[0] += 1
            except Exception as e:  # anything else is a failure
                errors.append(e)

    threads = [threading.Thread(target=hammer) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert m.num_tokens == 1 and m.allowed_tokens() == expected
    print(f"{busy[0]} calls found the matcher busy")
