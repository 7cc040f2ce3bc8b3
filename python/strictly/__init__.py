"""strictly: exact token masks for constrained decoding, from Python.

Compile a constraint (JSON Schema, regex, GBNF or Lark grammar, a choice of strings) once for
a model's vocabulary, give each sequence a ``Matcher``, and at every decode step fill one row
of an int32 bitmask (bit ``i % 32`` of word ``i // 32`` set = token ``i`` allowed) to apply to
the logits::

    import strictly
    vocab = strictly.Vocab.from_tokenizer_json("tokenizer.json")
    compiled = strictly.compile(vocab, json_schema={"type": "object", ...})   # share it
    matcher = compiled.matcher()                                             # per sequence
    bitmask = strictly.allocate_token_bitmask(1, vocab.vocab_size)
    matcher.fill_bitmask(bitmask, 0)          # GIL released while it works
    strictly.apply_token_bitmask(logits, bitmask)
    matcher.accept_token(token_id)

The native part (``strictly._strictly``) does all the work; the modules beside this one adapt
it to engines: ``strictly.transformers`` (a LogitsProcessor), ``strictly.llama_cpp`` (a
llama-cpp-python logits processor), ``strictly.sglang`` (a grammar backend) and
``strictly.vllm`` (a structured-output backend).

Threads and the GIL: ``Vocab`` and ``Compiled`` are immutable and shared freely across threads.
A ``Matcher`` serves one sequence and is used from one thread at a time; a second thread calling
into a busy matcher gets a ``StateError`` (never a race). Compiling, filling masks (one row, or a
batch with ``fill_bitmasks``, which fills rows in parallel on native threads) and accepting
tokens release the GIL.
"""

from __future__ import annotations

from ._strictly import (  # noqa: F401
    Compiled,
    GrammarError,
    LimitError,
    Matcher,
    RegexError,
    SchemaError,
    StateError,
    StrictlyError,
    TokenizerError,
    TokenNotAllowedError,
    Vocab,
    __version__,
    compile,
    fill_bitmasks,
)

__all__ = [
    "Compiled",
    "GrammarError",
    "LimitError",
    "Matcher",
    "RegexError",
    "SchemaError",
    "StateError",
    "StrictlyError",
    "TokenizerError",
    "TokenNotAllowedError",
    "Vocab",
    "allocate_token_bitmask",
    "apply_token_bitmask",
    "bitmask_to_bool",
    "compile",
    "fill_bitmasks",
]


def allocate_token_bitmask(batch: int, vocab_size: int):
    """A numpy int32 array ``[batch, ceil(vocab_size / 32)]`` with every token allowed."""
    import numpy as np

    return np.full((batch, (vocab_size + 31) // 32), -1, dtype=np.int32)


def bitmask_to_bool(bitmask, vocab_size: int):
    """The bitmask as booleans ``[batch, vocab_size]`` (numpy in, numpy out; torch in, torch out)."""
    if _is_torch(bitmask):
        import torch

        bits = torch.arange(32, dtype=torch.int32, device=bitmask.device)
        allowed = (bitmask.unsqueeze(-1) >> bits) & 1
        return allowed.reshape(*bitmask.shape[:-1], -1)[..., :vocab_size].bool()
    import numpy as np

    words = np.ascontiguousarray(bitmask).view(np.uint32)
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")
    return bits.reshape(*words.shape[:-1], -1)[..., :vocab_size].astype(bool)


def apply_token_bitmask(logits, bitmask, indices=None):
    """Sets ``logits[i, t] = -inf`` where the bit of token ``t`` in row ``i`` is clear, in place.

    ``logits``: ``[batch, vocab]`` (or ``[vocab]`` with a one-row bitmask), numpy or torch (any
    device; a CPU bitmask is moved to the logits' device). Logits wider than the bitmask's
    tokens are masked past it; ``indices`` picks the rows of ``logits`` the bitmask's rows are for.
    """
    vocab = logits.shape[-1]
    one_row = len(logits.shape) == 1
    if _is_torch(logits):
        import torch

        mask = bitmask_to_bool(_as_torch(bitmask).to(logits.device), vocab)
        if mask.shape[-1] < vocab:
            pad = torch.zeros(*mask.shape[:-1], vocab - mask.shape[-1], dtype=torch.bool, device=mask.device)
            mask = torch.cat([mask, pad], dim=-1)
        if one_row:
            logits.masked_fill_(~mask.reshape(-1)[:vocab], float("-inf"))
        elif indices is None:
            logits.masked_fill_(~mask[: logits.shape[0]], float("-inf"))
        else:
            rows = logits[indices]
            rows.masked_fill_(~mask[: len(indices)], float("-inf"))
            logits[indices] = rows
        return logits
    import numpy as np

    mask = bitmask_to_bool(np.asarray(bitmask), vocab)
    if mask.shape[-1] < vocab:
        pad = np.zeros((*mask.shape[:-1], vocab - mask.shape[-1]), dtype=bool)
        mask = np.concatenate([mask, pad], axis=-1)
    if one_row:
        logits[~mask.reshape(-1)[:vocab]] = -np.inf
    elif indices is None:
        logits[~mask[: logits.shape[0]]] = -np.inf
    else:
        rows = logits[indices]
        rows[~mask[: len(indices)]] = -np.inf
        logits[indices] = rows
    return logits


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")


def _as_torch(x):
    if _is_torch(x):
        return x
    import torch

    return torch.from_numpy(x)
