//! # strictly for Python
//!
//! The Python extension `strictly._strictly`: strictly's vocabulary, compiler and matcher,
//! shaped for inference servers. A server compiles a constraint once per request shape and
//! shares it; each sequence gets a matcher; every decode step fills one row of an int32
//! bitmask (bit set = allowed) that the server applies to its logits on whatever device it
//! likes; the sampled token is accepted; speculative drafts are validated and rolled back.
//!
//! ```text
//! Vocab (per model) ──compile(json_schema | regex | grammar | lark | choice)──▶ Compiled (shared)
//!                                                                              │ .matcher()
//!   bitmask [batch, ceil(vocab/32)] int32 ◀── fill_bitmask / fill_bitmasks ── Matcher (per sequence)
//!                                              accept_tokens · validate_tokens · rollback
//! ```
//!
//! Files: `vocab` (`Vocab`), `compile` (`compile`, `Compiled`), `matcher` (`Matcher`,
//! `fill_bitmasks`), `bitmask` (reaching the caller's array), `gguf` (a GGUF file's tokenizer),
//! `errors` (exception classes with the problem's place as attributes). The Python package
//! beside this crate (`python/strictly/`) re-exports these and holds the engine adapters.
//!
//! The GIL: released while compiling, loading a tokenizer, filling masks (one or a batch) and
//! committing tokens, so other Python threads (the server's scheduler, the model) run
//! meanwhile. Invariants: no call writes outside the rows it was given; a `Matcher` is used by
//! one thread at a time, and a second one gets an error, not a race.

mod bitmask;
mod compile;
mod errors;
mod gguf;
mod matcher;
mod vocab;

use pyo3::prelude::*;

#[pymodule]
fn _strictly(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<vocab::PyVocab>()?;
    m.add_class::<compile::PyCompiled>()?;
    m.add_class::<matcher::PyMatcher>()?;
    m.add_function(wrap_pyfunction!(compile::compile, m)?)?;
    m.add_function(wrap_pyfunction!(matcher::fill_bitmasks, m)?)?;
    errors::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
