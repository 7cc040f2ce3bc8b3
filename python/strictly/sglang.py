"""strictly as an SGLang grammar backend.

SGLang drives structured output through a *grammar backend* (compiles a request's constraint,
keyed by ``("json" | "regex" | "ebnf" | "structural_tag", text)``, caching the result and
handing each request a ``copy()``) and a *grammar object* per request, which its scheduler
calls every step: ``allocate_vocab_mask`` once per batch shape, ``fill_vocab_mask(mask, i)``
for row ``i``, ``move_vocab_mask`` to the GPU, ``apply_vocab_mask(logits, mask)``, then
``accept_token`` with the sampled token; ``rollback(k)`` for speculative decoding,
``is_terminated()`` to finish (newer releases fill a batch's rows with
``fill_vocab_mask_batched``, which here is one parallel call), and jump-forward (``try_jump_forward``,
``jump_forward_str_state``, ``jump_and_retokenize``) to append text only one continuation
can have without sampling it.

``StrictlyGrammarBackend`` and ``StrictlyGrammar`` implement those methods on strictly's
matcher (the bitmask is the int32 ``[batch, ceil(vocab/32)]`` one SGLang's XGrammar backend
uses). ``register()`` adds the backend to SGLang's registry
(``sglang.srt.constrained.base_grammar_backend.register_grammar_backend``) under the name
``strictly``, so ``--grammar-backend strictly`` selects it; call it in the server process before
the scheduler starts (for example from a launcher script that then calls SGLang's
``launch_server``). Without SGLang installed, the classes still work on their own (their base
classes are then plain ``object``), which is how the tests drive them when SGLang is absent.

GBNF and Lark both arrive as ``ebnf`` (Lark is recognised by its syntax); structural tags are
not supported (the backend says so, as SGLang's other backends do for what they lack).
"""

from __future__ import annotations

import json
import logging
import threading
from typing import List, Optional, Tuple

import strictly

logger = logging.getLogger(__name__)

try:
    from sglang.srt.constrained import base_grammar_backend as _sgl

    _GrammarBase = _sgl.BaseGrammarObject
    _BackendBase = _sgl.BaseGrammarBackend
except Exception:  # SGLang absent, or it does not import here
    _sgl = None
    _GrammarBase = object
    _BackendBase = object


def invalid():
    """What SGLang takes for a grammar that failed to compile: its ``InvalidGrammarObject``
    (newer releases), its ``INVALID_GRAMMAR_OBJ`` (older ones), or ``None`` without SGLang."""
    if _sgl is not None and hasattr(_sgl, "InvalidGrammarObject"):
        return _sgl.InvalidGrammarObject()
    return getattr(_sgl, "INVALID_GRAMMAR_OBJ", None)


def is_invalid(grammar) -> bool:
    return grammar is None or not isinstance(grammar, StrictlyGrammar)


class StrictlyGrammar(_GrammarBase):
    """One request's constraint state: SGLang's grammar object on a strictly ``Matcher``."""

    def __init__(self, compiled: "strictly.Compiled", vocab_size: int, matcher=None):
        if _GrammarBase is not object:
            super().__init__()
        self.compiled = compiled
        self.matcher = matcher if matcher is not None else compiled.matcher()
        self.vocab_size = vocab_size
        self.finished = False

    def accept_token(self, token: int) -> None:
        if not self.matcher.accept_token(int(token)):
            raise strictly.TokenNotAllowedError(f"token {token} is not allowed by the constraint here")

    def rollback(self, k: int) -> None:
        self.matcher.rollback(k)

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device):
        import torch

        return torch.full((batch_size, (vocab_size + 31) // 32), -1, dtype=torch.int32)

    def fill_vocab_mask(self, vocab_mask, idx: int) -> None:
        self.matcher.fill_bitmask(vocab_mask, idx)

    @staticmethod
    def fill_vocab_mask_batched(entries, vocab_mask) -> None:
        """Fills the listed rows (``entry.grammar``, ``entry.row``) in one parallel call with the
        GIL released; rows not listed are left as they are."""
        mine = [e for e in entries if isinstance(e.grammar, StrictlyGrammar)]
        strictly.fill_bitmasks([e.grammar.matcher for e in mine], vocab_mask, indices=[e.row for e in mine])
        for e in entries:
            if not isinstance(e.grammar, StrictlyGrammar):
                e.grammar.fill_vocab_mask(vocab_mask, e.row)

    @staticmethod
    def reset_vocab_mask(vocab_mask) -> None:
        """Every token allowed: the unconstrained row."""
        vocab_mask.fill_(-1)

    @staticmethod
    def move_vocab_mask(vocab_mask, device):
        return vocab_mask.to(device, non_blocking=True)

    @staticmethod
    def apply_vocab_mask(logits, vocab_mask) -> None:
        strictly.apply_token_bitmask(logits, vocab_mask)

    def copy(self) -> "StrictlyGrammar":
        """A fresh grammar for a new request (SGLang copies the cached, unused one)."""
        return StrictlyGrammar(self.compiled, self.vocab_size)

    # Jump-forward: text that is the only possible continuation.
    def try_jump_forward(self, tokenizer) -> Optional[Tuple[List[int], str]]:
        forced = self.matcher.forced_bytes()
        if not forced:
            return None
        return [], forced.decode("utf-8", errors="replace")

    def jump_forward_str_state(self, helper: Tuple[List[int], str]) -> Tuple[str, int]:
        return helper[1], -1

    def jump_and_retokenize(self, old_output_ids: List[int], new_output_ids: List[int], next_state: int) -> None:
        """The output was re-tokenized after a jump: follow the new ids from where they differ."""
        k = 0
        while k < min(len(old_output_ids), len(new_output_ids)) and old_output_ids[k] == new_output_ids[k]:
            k += 1
        self.matcher.rollback(len(old_output_ids) - k)
        if not self.matcher.accept_tokens([int(t) for t in new_output_ids[k:]]):
            raise strictly.TokenNotAllowedError("the re-tokenized output leaves the constraint")


class StrictlyGrammarBackend(_BackendBase):
    """SGLang's grammar backend: compiles ``json``/``regex``/``ebnf`` keys with strictly."""

    def __init__(self, tokenizer, vocab_size: int, eos_token_ids=None, whitespace: Optional[str] = None):
        if _BackendBase is not object:
            super().__init__()
        else:
            self.cache = {}
        eos = sorted(set(eos_token_ids or ()) | ({tokenizer.eos_token_id} if getattr(tokenizer, "eos_token_id", None) is not None else set()))
        self.vocab = strictly.Vocab.from_hf_tokenizer(tokenizer, vocab_size=vocab_size, eos_ids=eos or None)
        self.vocab_size = vocab_size
        self.whitespace = whitespace
        self._compiled = {}
        self._lock = threading.Lock()

    def _compile(self, key: Tuple[str, str], **kwargs):
        with self._lock:
            hit = self._compiled.get(key)
        if hit is None:
            try:
                hit = strictly.compile(self.vocab, **kwargs)
            except strictly.StrictlyError as e:
                logger.warning("strictly cannot compile %s: %s", key[0], e)
                return invalid()
            with self._lock:
                self._compiled[key] = hit
        return StrictlyGrammar(hit, self.vocab_size)

    def dispatch_json(self, key_string: str):
        if key_string == "$$ANY$$":  # SGLang's key for "any JSON" (response_format json_object)
            key_string = "{}"
        opts = {"whitespace": self.whitespace} if self.whitespace else {}
        return self._compile(("json", key_string), json_schema=key_string, **opts)

    def dispatch_regex(self, key_string: str):
        return self._compile(("regex", key_string), regex=key_string)

    def dispatch_ebnf(self, key_string: str):
        return self._compile(("ebnf", key_string), grammar=key_string)

    def dispatch_choice(self, key_string: str):
        return self._compile(("choice", key_string), choice=json.loads(key_string))

    def dispatch_structural_tag(self, key_string: str):
        logger.warning("strictly's SGLang backend does not support structural tags")
        return invalid()

    def reset(self):
        self.cache.clear()
        with self._lock:
            self._compiled.clear()


def _factory(*args, **kwargs):
    """SGLang calls a registered backend's factory as ``(server_args, tokenizer, vocab_size,
    eos_token_ids)``; the tokenizer is found by what it is, so a release that passes its
    arguments in another order still works."""
    values = list(args) + list(kwargs.values())
    tok_at = next(i for i, v in enumerate(values) if hasattr(v, "backend_tokenizer") or hasattr(v, "convert_ids_to_tokens"))
    rest = values[tok_at + 1:]
    vocab_size = next(v for v in rest if isinstance(v, int) and not isinstance(v, bool))
    eos = next((v for v in rest if isinstance(v, (set, list, tuple))), None)
    return StrictlyGrammarBackend(values[tok_at], vocab_size, eos)


def register(name: str = "strictly") -> None:
    """Registers the backend with SGLang as ``name`` (``--grammar-backend strictly``)."""
    if _sgl is None or not hasattr(_sgl, "register_grammar_backend"):
        raise ImportError("SGLang with register_grammar_backend is not importable here")
    _sgl.register_grammar_backend(name, _factory)
