"""The transformers adapter in a real `generate` loop: a tiny random LlamaForCausalLM built
here (CPU), a real tokenizer (TinyLlama's SentencePiece vocabulary, logits padded wider than
it), batched prompts of different lengths, greedy and sampled. Every row's output is judged by
an independent checker (Python's `re`, `json`)."""

from __future__ import annotations

import json
import re

import numpy as np

import strictly
import strictly.transformers  # noqa: F401  (the adapter under test)
from conftest import need_module, tokenizer_path

EOS = 2
LOGITS = 32064  # TinyLlama's 32000 tokens, padded


def setup():
    torch = need_module("torch")
    transformers = need_module("transformers")
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(tokenizer_path("tinyllama-1.1b-chat")),
        bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="</s>", padding_side="left",
    )
    cfg = transformers.LlamaConfig(
        vocab_size=LOGITS, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, bos_token_id=1, eos_token_id=EOS, pad_token_id=EOS,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).eval()
    vocab = strictly.Vocab.from_hf_tokenizer(tok, vocab_size=model.config.vocab_size)
    return torch, transformers, tok, model, vocab


def outputs(vocab, sequences, prompt_len):
    """Each row's text up to its first EOS, and whether it ended with one."""
    out = []
    for row in sequences[:, prompt_len:].tolist():
        ended = EOS in row
        ids = row[: row.index(EOS)] if ended else row
        out.append((b"".join(vocab.token_bytes(t) for t in ids).decode("utf-8"), ended))
    return out


def generate(torch, transformers, tok, model, proc, prompts, **kw):
    enc = tok(prompts, return_tensors="pt", padding=True)
    with torch.no_grad():
        seq = model.generate(
            **enc, logits_processor=transformers.LogitsProcessorList([proc]), pad_token_id=EOS, **kw
        )
    return seq, enc["input_ids"].shape[1]


def test_regex_batched_greedy_and_sampled():
    torch, transformers, tok, model, vocab = setup()
    pattern = r"(yes|no|maybe)(, (yes|no|maybe)){0,3}\."
    compiled = strictly.compile(vocab, regex=pattern)
    prompts = ["Answer:", "Is the sky green? Answer briefly:", "Q"]
    for kw in ({"do_sample": False}, {"do_sample": True, "top_k": 0, "temperature": 1.0}):
        proc = strictly.transformers.StrictlyLogitsProcessor(compiled, max_new_tokens=24)
        seq, plen = generate(torch, transformers, tok, model, proc, prompts, max_new_tokens=24, **kw)
        for text, _ended in outputs(vocab, seq, plen):
            assert re.fullmatch(pattern, text), (kw, text)


def test_json_schema_sampled_rows_parse_and_validate():
    torch, transformers, tok, model, vocab = setup()
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 8}, "ok": {"type": "boolean"}},
        "required": ["name", "ok"],
        "additionalProperties": False,
    }
    compiled = strictly.compile(vocab, json_schema=schema)
    proc = strictly.transformers.StrictlyLogitsProcessor(compiled, max_new_tokens=40)
    torch.manual_seed(1)
    seq, plen = generate(
        torch, transformers, tok, model, proc, ["Make a person:"] * 4, max_new_tokens=40, do_sample=True, top_k=0
    )
    for text, _ended in outputs(vocab, seq, plen):
        value = json.loads(text)
        assert set(value) == {"name", "ok"} and isinstance(value["ok"], bool) and len(value["name"]) <= 8, text


def test_numpy_scores_are_masked_in_place():
    _torch, _transformers, _tok, _model, vocab = setup()
    compiled = strictly.compile(vocab, choice=["yes", "no"])
    proc = strictly.transformers.StrictlyLogitsProcessor(compiled)
    ids = np.array([[1, 22], [1, 22]])
    scores = np.zeros((2, LOGITS), dtype=np.float32)
    out = proc(ids, scores)
    allowed = compiled.matcher().allowed_tokens()
    for row in out:
        assert np.flatnonzero(np.isfinite(row)).tolist() == allowed
