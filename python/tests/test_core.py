"""The core API on a hand-made vocabulary: masks, commits, rollback, errors, bitmask checks."""

from __future__ import annotations

import itertools
import json
import re
import threading

import numpy as np
import pytest

import strictly


def tid(vocab, text: bytes) -> int:
    """The id of the token whose bytes are `text`."""
    return next(i for i in range(vocab.n_tokens) if vocab.token_bytes(i) == text)


def allowed_from_bitmask(bitmask_row, vocab_size):
    bits = strictly.bitmask_to_bool(bitmask_row[None, :], vocab_size)[0]
    return [int(i) for i in np.flatnonzero(bits)]


def test_mask_is_the_tokens_that_keep_the_regex_alive(tiny_vocab):
    c = strictly.compile(tiny_vocab, regex=r"ab(c|d)+")
    m = c.matcher()
    bm = strictly.allocate_token_bitmask(2, tiny_vocab.vocab_size)
    m.fill_bitmask(bm, 1)
    got = {tiny_vocab.token_bytes(i) for i in allowed_from_bitmask(bm[1], tiny_vocab.vocab_size)}
    assert got == {b"a", b"ab", b"abc"}
    assert (bm[0] == -1).all(), "row 0 was not touched"
    # The same through the token-by-token check and the slow reference.
    assert m.allowed_tokens() == m.reference_allowed_tokens() == allowed_from_bitmask(bm[1], tiny_vocab.vocab_size)
    assert [i for i in range(tiny_vocab.n_tokens) if m.is_allowed(i)] == m.allowed_tokens()


def test_accept_rollback_terminate(tiny_vocab):
    v = tiny_vocab
    eos = v.eos_ids[0]
    m = strictly.compile(v, regex=r"abc?").matcher()
    assert not m.is_accepting()
    assert m.accept_token(tid(v, b"ab"))
    assert m.is_accepting() and eos in m.allowed_tokens()
    assert not m.accept_token(tid(v, b"x")), "refused, state unchanged"
    assert m.num_tokens == 1
    assert m.accept_token(tid(v, b"c"))
    assert m.allowed_tokens() == [eos]
    assert m.accept_token(eos) and m.is_terminated()
    assert m.allowed_tokens() == [] and not m.accept_token(tid(v, b"a"))
    m.rollback(2)
    assert m.num_tokens == 1 and not m.is_terminated()
    with pytest.raises(strictly.StateError):
        m.rollback(5)
    m.reset()
    assert m.num_tokens == 0 and sorted(m.allowed_tokens()) == sorted([tid(v, b"a"), tid(v, b"ab"), tid(v, b"abc")])


def test_accept_tokens_is_all_or_nothing_and_validate_changes_nothing(tiny_vocab):
    v = tiny_vocab
    m = strictly.compile(v, regex=r"[a-c]+x").matcher()
    good = [tid(v, b"ab"), tid(v, b"c"), tid(v, b"x")]
    bad = [tid(v, b"ab"), tid(v, b"y"), tid(v, b"x")]
    assert m.validate_tokens(bad) == 1 and m.num_tokens == 0
    assert m.validate_tokens(good + [v.eos_ids[0]]) == 4 and m.num_tokens == 0
    assert not m.accept_tokens(bad) and m.num_tokens == 0
    assert m.accept_tokens(good) and m.num_tokens == 3 and m.is_accepting()


def test_forced_tokens_and_bytes(tiny_vocab):
    v = tiny_vocab
    m = strictly.compile(v, json_schema={"type": "object", "properties": {"ab": {"type": "boolean"}}, "required": ["ab"]}).matcher()
    assert m.forced_bytes() == b'{"ab":'
    forced = m.forced_tokens()
    text = b"".join(v.token_bytes(t) for t in forced)
    assert forced and b'{"ab":'.startswith(text) and text != b'{"ab":', "the last token is held back"
    assert m.accept_tokens(forced) and m.forced_bytes() == b'{"ab":'[len(text):]


def test_wider_logits_never_allow_ids_past_the_tokenizer():
    tokens = [b"a", b"b", b"</s>"]
    v = strictly.Vocab.from_token_bytes(tokens, [2], vocab_size=100)
    assert (v.n_tokens, v.vocab_size, v.bitmask_words) == (3, 100, 4)
    m = strictly.compile(v, regex="a*").matcher()
    bm = strictly.allocate_token_bitmask(1, 100)
    m.fill_bitmask(bm)
    assert allowed_from_bitmask(bm[0], 100) == [0, 2]
    assert not m.accept_token(50)
    # Rows wider than needed are zero past the vocabulary's words.
    wide = np.full((1, 10), -1, dtype=np.int32)
    m.fill_bitmask(wide)
    assert (wide[0, 4:] == 0).all() and wide[0, 0] == 0b101


def test_schema_errors_carry_pointer_and_keyword(tiny_vocab):
    with pytest.raises(strictly.SchemaError) as e:
        strictly.compile(tiny_vocab, json_schema={"type": "object", "properties": {"a": {"$dynamicRef": "#x"}}})
    err = e.value
    assert isinstance(err, ValueError) and isinstance(err, strictly.StrictlyError)
    assert (err.kind, err.pointer, err.keyword) == ("schema", "/properties/a/$dynamicRef", "$dynamicRef")
    assert err.pointer in str(err) and err.message in str(err) and err.line is None
    with pytest.raises(strictly.SchemaError) as e:
        strictly.compile(tiny_vocab, json_schema={"type": "object", "properties": {"a": {"type": "strin"}}})
    assert (e.value.pointer, e.value.keyword, e.value.message) == ("/properties/a/type", "type", 'unknown type "strin"')
    # A schema no value validates: a regular one compiles empty and says why, a context-free one
    # is the error, naming the subschema that accepts nothing.
    c = strictly.compile(tiny_vocab, json_schema={"type": "integer", "minimum": 5, "maximum": 3})
    assert c.is_empty_language() and "no integer is at least 5 and at most 3" in c.why_empty
    assert strictly.compile(tiny_vocab, json_schema={"type": "integer"}).why_empty is None
    with pytest.raises(strictly.SchemaError) as e:
        strictly.compile(tiny_vocab, json_schema={"type": "object", "required": ["a"],
                                                  "properties": {"a": {"pattern": "^x$", "type": "string", "maxLength": 0}}})
    assert e.value.pointer == "/properties/a" and "no string satisfies" in e.value.message


def test_regex_and_grammar_errors_carry_their_place(tiny_vocab):
    with pytest.raises(strictly.RegexError) as e:
        strictly.compile(tiny_vocab, regex="ab(c")
    assert (e.value.column, e.value.line, e.value.kind) == (3, None, "regex")
    with pytest.raises(strictly.GrammarError) as e:
        strictly.compile(tiny_vocab, grammar='root ::= "a" item\n\nitem ::= ( "b" \n')
    assert (e.value.line, e.value.column) == (3, 10) and "3:10" in str(e.value)
    with pytest.raises(strictly.LimitError) as e:
        strictly.compile(tiny_vocab, regex="(a|b)*a(a|b){24}")  # 2^24 DFA states
    assert e.value.limit_kind in ("DfaBytes", "DfaStates") and e.value.limit > 0
    with pytest.raises(strictly.TokenizerError) as e:
        strictly.Vocab.from_tokenizer_json("/nonexistent/tokenizer.json")
    assert e.value.path == "/nonexistent/tokenizer.json"
    with pytest.raises(strictly.StrictlyError):
        strictly.compile(tiny_vocab, regex="a", choice=["a"])
    with pytest.raises(strictly.StrictlyError):
        strictly.compile(tiny_vocab, regex="a", whitespace="pretty")


def test_every_input_kind_compiles_and_generates_in_language(tiny_vocab):
    v = tiny_vocab
    cases = {
        "json_schema": ({"type": "object", "properties": {"ab": {"enum": [True, None]}}, "required": ["ab"]}, lambda s: json.loads(s)["ab"] in (True, None)),
        "regex": (r"(ab|c)+!", lambda s: re.fullmatch(r"(ab|c)+!", s)),
        "grammar": ('root ::= "(" root ")" | "ab"', lambda s: re.fullmatch(r"\(*ab\)*", s) and s.count("(") == s.count(")")),
        "lark": ('start: "x" NUM ("," NUM)*\nNUM: /[0-9]+/', lambda s: re.fullmatch(r"x[0-9]+(,[0-9]+)*", s)),
        "choice": (["true", "false", "maybe"], lambda s: s in ("true", "false", "maybe")),
    }
    rng = np.random.default_rng(7)
    for kind, (spec, ok) in cases.items():
        c = strictly.compile(v, **{kind: spec})
        assert c.kind == kind
        for _ in range(5):
            m, out = c.matcher(), b""
            for _step in range(60):
                allowed = m.allowed_tokens(remaining=60 - _step)
                t = int(rng.choice(allowed))
                assert m.accept_token(t)
                if t in v.eos_ids:
                    break
                out += v.token_bytes(t)
            assert m.is_terminated(), (kind, out)
            assert ok(out.decode()), (kind, out)


def test_bitmask_checks_name_the_problem(tiny_vocab):
    m = strictly.compile(tiny_vocab, regex="a+").matcher()
    words = tiny_vocab.bitmask_words
    with pytest.raises(strictly.StrictlyError, match="int32"):
        m.fill_bitmask(np.zeros((1, words), dtype=np.int64))
    with pytest.raises(strictly.StrictlyError, match="needs"):
        m.fill_bitmask(np.zeros((1, words - 1), dtype=np.int32))
    with pytest.raises(strictly.StrictlyError, match="past"):
        m.fill_bitmask(np.zeros((2, words), dtype=np.int32), 2)
    ro = np.zeros((1, words), dtype=np.int32)
    ro.flags.writeable = False
    with pytest.raises(strictly.StrictlyError, match="read-only"):
        m.fill_bitmask(ro)
    with pytest.raises(strictly.StrictlyError, match="contiguous"):
        m.fill_bitmask(np.zeros((2, words * 2), dtype=np.int32)[:, ::2])
    with pytest.raises(strictly.StrictlyError, match="numpy array or torch tensor"):
        m.fill_bitmask([0] * words)
    # A one-row view of a bigger array is contiguous and fine.
    big = np.zeros((3, words), dtype=np.int32)
    m.fill_bitmask(big[1])
    assert big[1].any() and not big[0].any() and not big[2].any()


def test_fill_bitmasks_fills_rows_in_parallel_and_refuses_a_matcher_twice(tiny_vocab):
    v = tiny_vocab
    specs = [r"a+", r"b+", r"(ab)+", r"c"]
    ms = [strictly.compile(v, regex=r).matcher() for r in specs]
    bm = np.full((6, v.bitmask_words), -1, dtype=np.int32)
    strictly.fill_bitmasks([ms[0], None, ms[1], ms[2], ms[3]], bm, indices=[5, 0, 1, 2, 3])
    assert (bm[0] == -1).all() and (bm[4] == -1).all(), "None rows and unlisted rows untouched"
    for m, row in zip(ms, [5, 1, 2, 3]):
        assert allowed_from_bitmask(bm[row], v.vocab_size) == m.allowed_tokens()
    with pytest.raises(strictly.StateError, match="in use"):
        strictly.fill_bitmasks([ms[0], ms[0]], bm)
    with pytest.raises(strictly.StrictlyError, match="twice"):
        strictly.fill_bitmasks([ms[0], ms[1]], bm, indices=[2, 2])
    # Budgets: with 1 token left only complete outputs' last tokens are allowed.
    m = strictly.compile(v, regex=r"abc").matcher()
    strictly.fill_bitmasks([m], bm, remaining=[1])
    assert allowed_from_bitmask(bm[0], v.vocab_size) == [tid(v, b"abc")]


def test_copy_is_independent(tiny_vocab):
    v = tiny_vocab
    m = strictly.compile(v, regex=r"a+b").matcher()
    assert m.accept_token(tid(v, b"a"))
    c = m.copy()
    assert c.accept_token(tid(v, b"b")) and c.is_accepting()
    assert not m.is_accepting() and m.num_tokens == 1


def test_compiled_is_shared_across_threads(tiny_vocab):
    v = tiny_vocab
    c = strictly.compile(v, json_schema={"type": "array", "items": {"type": "boolean"}, "maxItems": 3})
    expected = []
    m = c.matcher()
    path = [tid(v, b"["), tid(v, b"true"), tid(v, b","), tid(v, b"false"), tid(v, b"]")]
    for t in path:
        expected.append(m.allowed_tokens())
        assert m.accept_token(t)
    results, errors = {}, []

    def run(k):
        try:
            mm, bm, seen = c.matcher(), strictly.allocate_token_bitmask(1, v.vocab_size), []
            for _ in range(50):
                mm.reset()
                for t in path:
                    mm.fill_bitmask(bm)
                    seen.append(allowed_from_bitmask(bm[0], v.vocab_size))
                    assert mm.accept_token(t)
            results[k] = seen
        except Exception as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for seen in results.values():
        assert seen == expected * 50


def test_compiling_releases_the_gil(tiny_vocab):
    from gil import runs_during

    calls = itertools.count()

    def compile_big():
        # A fresh schema each time (nothing cached): tens of milliseconds of native work.
        k = next(calls)
        strictly.compile(tiny_vocab, json_schema={"enum": [f"v{k}-{i}-{i * 7919 % 10007}" for i in range(6000)]})

    inside, d = runs_during(compile_big)
    while d < 0.04:  # a machine fast enough to finish early: make the call longer
        inside, d = runs_during(lambda: [compile_big() for _ in range(4)])
    assert inside > 0, f"no Python ran during {d * 1000:.0f} ms of compiling"


def test_torch_tensors_and_other_array_interfaces_are_filled_in_place(tiny_vocab):
    from conftest import need_module

    torch = need_module("torch")
    m = strictly.compile(tiny_vocab, regex="(ab|c)+").matcher()
    ref = strictly.allocate_token_bitmask(2, tiny_vocab.vocab_size)
    m.fill_bitmask(ref, 1)
    t = torch.zeros((2, tiny_vocab.bitmask_words), dtype=torch.int32)
    m.fill_bitmask(t, 1)
    assert (t.numpy() == np.where(np.arange(2)[:, None] == 1, ref, 0)).all()
    with pytest.raises(strictly.StrictlyError, match="int32"):
        m.fill_bitmask(torch.zeros((1, tiny_vocab.bitmask_words), dtype=torch.int64))
    with pytest.raises(strictly.StrictlyError, match="contiguous"):
        m.fill_bitmask(torch.zeros((tiny_vocab.bitmask_words, 2), dtype=torch.int32).t())

    class Wrapped:  # any object with numpy's Python-level array interface
        def __init__(self, a):
            self.a = a
            self.__array_interface__ = a.__array_interface__

    w = Wrapped(np.zeros((2, tiny_vocab.bitmask_words), dtype=np.int32))
    m.fill_bitmask(w, 1)
    assert (w.a[1] == ref[1]).all() and not w.a[0].any()
    # The batch call takes tensors too.
    t.zero_()
    strictly.fill_bitmasks([m], t, indices=[1])
    assert (t.numpy()[1] == ref[1]).all()


def test_triggers_leave_text_free_until_one_is_written(tiny_vocab):
    v = tiny_vocab
    m = strictly.compile(v, regex="ab", triggers=["<x>"]).matcher()
    assert len(m.allowed_tokens()) > 50, "free text before the trigger"
    assert m.is_accepting(), "an output that never writes the trigger is free text"
    for ch in b"hi <x>":
        assert m.accept_token(tid(v, bytes([ch])))
    assert sorted(m.allowed_tokens()) == sorted([tid(v, b"a"), tid(v, b"ab")])


def test_a_token_trigger_starts_the_constraint_only_as_that_token(tiny_vocab):
    v = tiny_vocab
    abc = tid(v, b"abc")
    for trig in [{"token": "abc"}, {"token": abc}, [{"token": f"<[{abc}]>"}, "<x>"]]:
        m = strictly.compile(v, regex="[0-9]", triggers=trig).matcher()
        for ch in b"abc":  # its text spelled by other tokens: free text, no trigger
            assert m.accept_token(tid(v, bytes([ch])))
        assert m.is_accepting()
        assert m.accept_token(abc), "the token starts the constraint"
        assert not m.is_accepting()
        assert not m.accept_token(tid(v, b"x"))
        assert m.accept_token(tid(v, b"7")) and m.is_accepting()
    with pytest.raises(strictly.StrictlyError, match="nope"):
        strictly.compile(v, regex="a", triggers=[{"token": "<|nope|>"}])
    with pytest.raises(strictly.StrictlyError, match="trigger"):
        strictly.compile(v, regex="a", triggers=[{"tok": 1}])
