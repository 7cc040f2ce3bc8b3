"""A transformers ``LogitsProcessor`` that keeps ``generate`` inside a constraint.

``StrictlyLogitsProcessor`` masks the scores of every row of a batch with its sequence's
matcher, before any warper (temperature, top-k/p) sees them, so greedy, sampled and batched
generation all stay in the language::

    from transformers import AutoModelForCausalLM, AutoTokenizer, LogitsProcessorList
    import strictly
    from strictly.transformers import StrictlyLogitsProcessor

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    vocab = strictly.Vocab.from_hf_tokenizer(tok, vocab_size=model.config.vocab_size)
    compiled = strictly.compile(vocab, json_schema=schema)       # compile once, reuse
    proc = StrictlyLogitsProcessor(compiled)
    out = model.generate(**tok(prompts, return_tensors="pt", padding=True),
                         logits_processor=LogitsProcessorList([proc]), max_new_tokens=64)

How it follows the sequences: the first call records the prompt length (the width of
``input_ids`` then, the same for every row of a padded batch); every later call compares each
row's generated ids with what its matcher has accepted and accepts the new ones. A row whose
history changed (beam search reorders rows) is replayed from the start, so the state is always
the row's own. A row that has ended (its EOS accepted) is left unmasked: ``generate`` pads it.
Pass ``max_new_tokens`` here too and every row is also kept finishable in time (the "never
truncated" budget). One processor serves one ``generate`` call; ``reset()`` readies it for another.

Works on torch tensors (what ``generate`` passes) and numpy arrays alike.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Union

import strictly

try:  # Subclass transformers' base when it is installed (generate checks nothing more).
    from transformers import LogitsProcessor as _Base
except Exception:  # pragma: no cover - transformers absent: still usable on numpy arrays
    _Base = object


class StrictlyLogitsProcessor(_Base):
    """Masks each row's scores to the tokens its constraint allows (see the module docs)."""

    def __init__(
        self,
        compiled: Union["strictly.Compiled", Sequence["strictly.Compiled"]],
        max_new_tokens: Optional[int] = None,
    ):
        self.compiled = compiled
        self.max_new_tokens = max_new_tokens
        self.reset()

    def reset(self) -> None:
        """Forget the sequences: the next call starts a new batch."""
        self.matchers: Optional[List[strictly.Matcher]] = None
        self.accepted: List[List[int]] = []
        self.prompt_len = 0
        self._bitmask = None

    def _start(self, batch: int, prompt_len: int) -> None:
        if isinstance(self.compiled, strictly.Compiled):
            compiled = [self.compiled] * batch
        else:
            compiled = list(self.compiled)
            if len(compiled) != batch:
                raise ValueError(f"{len(compiled)} constraints for a batch of {batch} rows")
        self.matchers = [c.matcher() for c in compiled]
        self.accepted = [[] for _ in range(batch)]
        self.prompt_len = prompt_len
        self._bitmask = strictly.allocate_token_bitmask(batch, max(m.vocab_size for m in self.matchers))

    def _follow(self, row: int, generated: List[int]) -> bool:
        """Brings row's matcher to `generated`; False when the row has ended."""
        m, done = self.matchers[row], self.accepted[row]
        if generated[: len(done)] != done:
            m.reset()
            done.clear()
        for t in generated[len(done):]:
            if m.is_terminated() or not m.accept_token(t):
                # Past the end (padding after EOS), or a token the caller forced in.
                return False
            done.append(t)
        return not m.is_terminated()

    def __call__(self, input_ids, scores):
        batch, width = input_ids.shape[0], input_ids.shape[1]
        if self.matchers is None:
            self._start(batch, width)
        rows = input_ids[:, self.prompt_len:]
        rows = rows.tolist()
        active = [m if self._follow(i, rows[i]) else None for i, m in enumerate(self.matchers)]
        self._bitmask.fill(-1)
        budgets = None
        if self.max_new_tokens is not None:
            left = self.max_new_tokens - (width - self.prompt_len)
            budgets = [max(left, 0) if m is not None else None for m in active]
        strictly.fill_bitmasks(active, self._bitmask, remaining=budgets)
        return strictly.apply_token_bitmask(scores, self._bitmask)
