"""The SGLang adapter, driven the way SGLang's scheduler drives a grammar backend: dispatch
(cached, then `copy()` per request), allocate/fill/move/apply the vocab mask, sample,
`accept_token`, `is_terminated`, `rollback`, and jump-forward with re-tokenization. Registered
through SGLang's own `register_grammar_backend` where SGLang imports here."""

from __future__ import annotations

import json

import pytest

import strictly
from conftest import need_module, tokenizer_path
from strictly import sglang as sgl_adapter


def backend():
    transformers = need_module("transformers")
    need_module("torch")
    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_path("qwen2.5")), eos_token="<|im_end|>")
    return tok, sgl_adapter.StrictlyGrammarBackend(tok, vocab_size=151936, eos_token_ids={151643})


def run_requests(be, tok, key, n, seed, jump=False):
    import torch

    cached = getattr(be, f"dispatch_{key[0]}")(key[1])
    grammars = [cached.copy() for _ in range(n)]
    mask = grammars[0].allocate_vocab_mask(151936, n, "cpu")
    gen = torch.Generator().manual_seed(seed)
    outs = [[] for _ in range(n)]
    for _step in range(80):
        live = [i for i, g in enumerate(grammars) if not g.is_terminated()]
        if not live:
            break
        mask.fill_(-1)
        for i in live:
            grammars[i].fill_vocab_mask(mask, i)
        m = grammars[0].move_vocab_mask(mask, "cpu")
        logits = torch.randn(n, 151936, generator=gen)
        grammars[0].apply_vocab_mask(logits, m)
        picks = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=gen)[:, 0].tolist()
        for i in live:
            g = grammars[i]
            if jump and (helper := g.try_jump_forward(tok)) is not None:
                text, state = g.jump_forward_str_state(helper)
                old = list(outs[i])
                new = tok.encode(tok.decode(old) + text, add_special_tokens=False)
                g.jump_and_retokenize(old, new, state)
                outs[i] = new
                continue
            g.accept_token(picks[i])
            outs[i].append(picks[i])
    return grammars, outs


def test_scheduler_loop_json_and_regex():
    tok, be = backend()
    schema = {"type": "object", "properties": {"city": {"enum": ["Oslo", "Lima", "Pune"]}, "n": {"type": "integer", "minimum": 0, "maximum": 99}}, "required": ["city", "n"]}
    grammars, outs = run_requests(be, tok, ("json", json.dumps(schema)), 4, seed=5)
    for g, ids in zip(grammars, outs):
        assert g.is_terminated()
        text = tok.decode([t for t in ids if t not in (151643, 151645)])
        v = json.loads(text)
        assert v["city"] in ("Oslo", "Lima", "Pune") and 0 <= v["n"] <= 99
    grammars, outs = run_requests(be, tok, ("regex", r"[A-Z]{2}-\d{3}"), 3, seed=6)
    for ids in outs:
        text = tok.decode([t for t in ids if t not in (151643, 151645)])
        assert len(text) == 6 and text[2] == "-" and text[:2].isupper() and text[3:].isdigit(), text


def test_jump_forward_follows_the_forced_text():
    tok, be = backend()
    schema = {"type": "object", "properties": {"answer": {"enum": ["alpha-centauri", "betelgeuse"]}}, "required": ["answer"]}
    grammars, outs = run_requests(be, tok, ("json", json.dumps(schema)), 2, seed=2, jump=True)
    for g, ids in zip(grammars, outs):
        assert g.is_terminated()
        text = tok.decode([t for t in ids if t not in (151643, 151645)])
        assert json.loads(text)["answer"] in ("alpha-centauri", "betelgeuse")


def test_rollback_ebnf_and_invalid_keys():
    tok, be = backend()
    g = be.dispatch_ebnf('root ::= "(" [a-z]+ ")"')
    ids = tok.encode("(ab", add_special_tokens=False)
    for t in ids:
        g.accept_token(t)
    with pytest.raises(strictly.TokenNotAllowedError):
        g.accept_token(tok.encode("!", add_special_tokens=False)[0])
    g.rollback(len(ids))
    assert g.matcher.num_tokens == 0
    # Failures come back as SGLang's invalid-grammar marker (None without SGLang), not raised.
    assert sgl_adapter.is_invalid(be.dispatch_regex("(unclosed"))
    assert sgl_adapter.is_invalid(be.dispatch_structural_tag("{}"))
    # The same key compiles once: the cache hands out fresh grammars on one Compiled.
    a, b = be.dispatch_regex("x+"), be.dispatch_regex("x+")
    assert a.compiled is b.compiled and a.matcher is not b.matcher


def sglang_base():
    """SGLang's grammar-backend module, where SGLang imports (CI installs it without its GPU
    dependencies; STRICTLY_REQUIRE_SGLANG=1 makes its absence a failure)."""
    import os

    try:
        from sglang.srt.constrained import base_grammar_backend as base
    except Exception as e:
        if os.environ.get("STRICTLY_REQUIRE_SGLANG") == "1":
            pytest.fail(f"SGLang does not import ({type(e).__name__}: {e}) and STRICTLY_REQUIRE_SGLANG=1")
        pytest.skip(f"SKIPPED: SGLang is not importable here ({type(e).__name__}); the contract tests above ran")
    return base


def test_sglang_creates_the_registered_backend_and_runs_it():
    from types import SimpleNamespace

    base = sglang_base()
    transformers = need_module("transformers")
    sgl_adapter.register()
    assert "strictly" in base.GRAMMAR_BACKEND_REGISTRY
    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_path("qwen2.5")), eos_token="<|im_end|>")
    # The registered factory, called as SGLang's create_grammar_backend calls it when the
    # server runs with `--grammar-backend strictly` (it reads that name from its runtime config).
    factory = base.GRAMMAR_BACKEND_REGISTRY["strictly"]
    be = factory(SimpleNamespace(grammar_backend="strictly"), tok, 151936, {151643})
    assert isinstance(be, sgl_adapter.StrictlyGrammarBackend) and isinstance(be, base.BaseGrammarBackend)
    g = be.dispatch_regex(r"(red|blue) [0-9]{2}")
    assert isinstance(g, base.BaseGrammarObject)
    grammars = [g.copy() for _ in range(3)]
    mask = g.allocate_vocab_mask(151936, 4, "cpu")
    g.reset_vocab_mask(mask)
    rows = [SimpleNamespace(grammar=gr, row=i + 1) for i, gr in enumerate(grammars)]
    g.fill_vocab_mask_batched(rows, mask)
    assert (mask[0] == -1).all(), "an unlisted row is left as it is"
    single = g.allocate_vocab_mask(151936, 1, "cpu")
    grammars[0].fill_vocab_mask(single, 0)
    assert (mask[1] == single[0]).all()
    assert sgl_adapter.is_invalid(be.dispatch_json('{"type": "object", "properties": {"a": {"$dynamicRef": "#a"}}}'))
