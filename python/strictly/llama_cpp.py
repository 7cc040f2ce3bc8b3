"""A llama-cpp-python logits processor that keeps a completion inside a constraint.

llama-cpp-python calls each logits processor once per sampled token with the whole sequence so
far (``input_ids``: prompt and output, numpy ``intc``) and the next token's scores (numpy
``single``, ``n_vocab`` wide), and samples from what it returns. ``StrictlyLogitsProcessor``
accepts the tokens generated since its last call and sets every score the constraint refuses
to ``-inf``, so the completion's tokens are always in the language; llama.cpp stops at EOS,
which is allowed exactly when the output is complete::

    from llama_cpp import Llama, LogitsProcessorList
    import strictly
    from strictly.llama_cpp import StrictlyLogitsProcessor

    llm = Llama(model_path="model.gguf")
    vocab = strictly.Vocab.from_gguf("model.gguf", vocab_size=llm.n_vocab())
    compiled = strictly.compile(vocab, json_schema=schema)
    out = llm("Describe a cat as JSON: ", max_tokens=64,
              logits_processor=LogitsProcessorList([StrictlyLogitsProcessor(compiled)]))

The vocabulary comes from the same GGUF file (its tokenizer metadata, rebuilt byte-exactly),
so ids agree with llama.cpp's. One processor follows one completion; make a new one (or call
``reset()``) for the next. The prompt length is taken from the first call.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

import strictly


class StrictlyLogitsProcessor:
    """Masks llama-cpp-python's scores to the constraint's tokens (see the module docs)."""

    def __init__(self, compiled: "strictly.Compiled", max_tokens: Optional[int] = None):
        self.compiled = compiled
        self.max_tokens = max_tokens
        self.reset()

    def reset(self) -> None:
        self.matcher = self.compiled.matcher()
        self.prompt_len: Optional[int] = None
        self.accepted = 0
        self.bitmask = strictly.allocate_token_bitmask(1, self.matcher.vocab_size)

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        if self.prompt_len is None:
            self.prompt_len = len(input_ids)
        new = [int(t) for t in input_ids[self.prompt_len + self.accepted:]]
        if new:
            if not self.matcher.accept_tokens(new):
                raise strictly.StateError(
                    f"tokens {new} were sampled outside the constraint: was the processor reused "
                    "across completions without reset()?"
                )
            self.accepted += len(new)
        remaining = None if self.max_tokens is None else max(self.max_tokens - self.accepted, 0)
        self.matcher.fill_bitmask(self.bitmask, 0, remaining=remaining)
        return strictly.apply_token_bitmask(scores, self.bitmask[0])
