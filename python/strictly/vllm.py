"""strictly shaped as a vLLM structured-output backend.

vLLM (V1) asks a *backend* to compile each request's constraint and to allocate the int32
bitmask (``[max_num_seqs, ceil(vocab/32)]``), and a *grammar* per request to follow it: every
step the engine calls ``fill_bitmask(bitmask, i)`` for the request in row ``i``, applies the
bitmask to the logits, and calls ``accept_tokens(request_id, tokens)`` with what was sampled;
with speculative decoding, ``validate_tokens(draft)`` returns the prefix of a draft the
constraint accepts (state unchanged) and ``rollback(n)`` undoes rejected tokens;
``is_terminated()`` and ``reset()`` close the loop. ``StrictlyBackend`` and ``StrictlyGrammar``
implement exactly those methods (``compile_grammar``, ``allocate_token_bitmask``, ``destroy``;
``accept_tokens``, ``validate_tokens``, ``rollback``, ``fill_bitmask``, ``is_terminated``,
``reset``) and subclass vLLM's ``StructuredOutputBackend``/``StructuredOutputGrammar`` when vLLM
is installed.

**How vLLM would load it.** vLLM picks its backend from a fixed list
(``xgrammar``, ``guidance``, ``outlines``, ``lm-format-enforcer``) inside
``StructuredOutputManager``; there is no registry to add one to. A user who wants strictly there
today has two routes: (1) a small vLLM *general plugin* (a package with a ``vllm.general_plugins``
entry point, which vLLM imports in every process, engine core included) that wraps
``StructuredOutputManager.grammar_init`` so that requests with ``backend="strictly"`` get a
``StrictlyBackend(vllm_config, tokenizer, vocab_size)``, the rest of the manager (bitmask
batching, speculative decoding bookkeeping) being unchanged because the method contract is the
same; or (2) until vLLM opens the list, the same class used as-is by an engine fork. The tests
drive these classes through the contract above, as vLLM's manager calls them; in CI vLLM's wheel
is installed without its GPU stack, so they subclass vLLM's own abstract classes there (vLLM's
engine itself needs a GPU and is not run).

Request kinds map as vLLM's own backends map them: JSON → ``json_schema``, JSON_OBJECT → any
JSON object, REGEX → ``regex``, GRAMMAR → GBNF or Lark (recognised by its syntax), CHOICE → a JSON
list of strings; STRUCTURAL_TAG is not supported (a ``ValueError``, as vLLM's validation expects).
Compiled constraints are cached by ``(kind, spec)``, under a lock (vLLM compiles on a pool).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

import strictly

try:
    from vllm.v1.structured_output.backend_types import (
        StructuredOutputBackend as _BackendBase,
        StructuredOutputGrammar as _GrammarBase,
        StructuredOutputOptions,
    )
except Exception:  # vLLM absent
    import enum

    _BackendBase = object
    _GrammarBase = object

    class StructuredOutputOptions(enum.Enum):
        """The request kinds of vLLM's ``backend_types`` (used when vLLM is not installed)."""

        JSON = enum.auto()
        JSON_OBJECT = enum.auto()
        REGEX = enum.auto()
        GRAMMAR = enum.auto()
        CHOICE = enum.auto()
        STRUCTURAL_TAG = enum.auto()


class StrictlyGrammar(_GrammarBase):
    """One request's state: vLLM's ``StructuredOutputGrammar`` on a strictly ``Matcher``."""

    def __init__(self, compiled: "strictly.Compiled"):
        self.compiled = compiled
        self.matcher = compiled.matcher()

    def accept_tokens(self, request_id: str, tokens: List[int]) -> bool:
        """Accepts all of ``tokens`` or none of them (then ``False``)."""
        if self.matcher.is_terminated():
            return False
        return self.matcher.accept_tokens([int(t) for t in tokens])

    def validate_tokens(self, tokens: List[int]) -> List[int]:
        """The longest prefix of ``tokens`` the constraint accepts; the state is unchanged."""
        return list(tokens[: self.matcher.validate_tokens([int(t) for t in tokens])])

    def rollback(self, num_tokens: int) -> None:
        self.matcher.rollback(num_tokens)

    def fill_bitmask(self, bitmask, batch_index: int) -> None:
        self.matcher.fill_bitmask(bitmask, batch_index)

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    def reset(self) -> None:
        self.matcher.reset()


@dataclass
class StrictlyBackend(_BackendBase):
    """vLLM's engine-level backend: compiles requests for one tokenizer, allocates bitmasks."""

    vllm_config: Any
    tokenizer: Any
    vocab_size: int
    _cache: Dict[Tuple[Any, str], "strictly.Compiled"] = field(default_factory=dict, repr=False)
    _lock: Any = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self):
        self.vocab = strictly.Vocab.from_hf_tokenizer(self.tokenizer, vocab_size=self.vocab_size)

    def compile_grammar(self, request_type, grammar_spec: str) -> StrictlyGrammar:
        key = (getattr(request_type, "name", str(request_type)), grammar_spec)
        with self._lock:
            compiled = self._cache.get(key)
        if compiled is None:
            compiled = strictly.compile(self.vocab, **_inputs(key[0], grammar_spec))
            with self._lock:
                self._cache[key] = compiled
        return StrictlyGrammar(compiled)

    def allocate_token_bitmask(self, max_num_seqs: int):
        import torch

        return torch.full((max_num_seqs, (self.vocab_size + 31) // 32), -1, dtype=torch.int32)

    def destroy(self):
        with self._lock:
            self._cache.clear()


def _inputs(kind: str, spec: str) -> Dict[str, Any]:
    if kind == "JSON":
        return {"json_schema": spec}
    if kind == "JSON_OBJECT":
        return {"json_schema": {"type": "object"}}
    if kind == "REGEX":
        return {"regex": spec}
    if kind == "GRAMMAR":
        return {"grammar": spec}
    if kind == "CHOICE":
        return {"choice": [str(c) for c in json.loads(spec)]}
    raise ValueError(f"strictly's vLLM backend does not support {kind} requests")
