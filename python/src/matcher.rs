//! `strictly.Matcher`: the state of one constrained sequence, and the batch fill.
//!
//! A matcher follows one output token by token: `fill_bitmask` writes the allowed tokens into
//! one row of the caller's bitmask, `accept_token(s)` commits, `rollback(n)` undoes exactly
//! (speculative decoding), `validate_tokens` says how much of a draft would be accepted without
//! changing anything. Every call that does automaton work releases the GIL.
//!
//! Threads: a `Compiled` is shared freely; a `Matcher` serves one sequence and is used from one
//! thread at a time. Its state sits behind a lock that is only ever *tried*: a second thread
//! calling into a matcher that is busy (or the same matcher listed twice in one batch) gets a
//! `StateError` saying so, never a data race and never a wait. `fill_bitmasks` fills many
//! matchers' rows in parallel on a pool of native threads (rayon's; one per core unless
//! `RAYON_NUM_THREADS` says otherwise) with the GIL released for the whole batch.
//!
//! `accept_tokens` is all or nothing: if a token is refused, the ones before it in the same call
//! are rolled back and the state is as before the call.

use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rayon::prelude::*;
use strictly::automaton::{Compiled, Matcher};
use strictly::error::Error;
use strictly::{TokenId, TokenSet};

use crate::bitmask::{write_row, Bitmask};
use crate::compile::PyCompiled;
use crate::errors::{param, to_py, StateError};

/// A matcher and the mask it fills before copying into a row.
pub struct State {
    m: Matcher,
    mask: TokenSet,
}

impl State {
    fn fill(&mut self, remaining: Option<usize>, row: &mut [u32]) {
        match remaining {
            None => self.m.fill_mask(&mut self.mask),
            Some(n) => self.m.fill_mask_within(&mut self.mask, n),
        }
        write_row(&self.mask, row);
    }

    /// Commits every token or none; `Ok(false)` when one is refused.
    fn accept_all(&mut self, ids: &[u32]) -> Result<bool, Error> {
        for (i, &id) in ids.iter().enumerate() {
            match self.m.commit(TokenId(id)) {
                Ok(()) => {}
                Err(Error::TokenNotAllowed { .. } | Error::TextNotAllowed { .. }) => {
                    self.m.rollback(i)?;
                    return Ok(false);
                }
                Err(e) => {
                    self.m.rollback(i)?;
                    return Err(e);
                }
            }
        }
        Ok(true)
    }
}

#[pyclass(name = "Matcher", module = "strictly", frozen)]
pub struct PyMatcher {
    state: Mutex<State>,
    compiled: Arc<Compiled>,
    vocab_size: usize,
}

impl PyMatcher {
    pub fn new(compiled: &PyCompiled, vocab_size: usize) -> PyMatcher {
        let m = compiled.inner.matcher();
        PyMatcher::from_matcher(m, compiled.inner.clone(), vocab_size)
    }

    fn from_matcher(m: Matcher, compiled: Arc<Compiled>, vocab_size: usize) -> PyMatcher {
        PyMatcher { state: Mutex::new(State { m, mask: TokenSet::new(vocab_size) }), compiled, vocab_size }
    }

    /// The state, or a `StateError` if another thread holds it.
    fn lock(&self) -> PyResult<MutexGuard<'_, State>> {
        match self.state.try_lock() {
            Ok(g) => Ok(g),
            Err(TryLockError::WouldBlock) => Err(StateError::new_err(
                "this Matcher is in use by another thread (a Matcher serves one sequence, from one thread at a time; \
                 or it is listed twice in one batch)",
            )),
            Err(TryLockError::Poisoned(_)) => {
                Err(StateError::new_err("this Matcher stopped in the middle of a call (a panic); make a new one"))
            }
        }
    }
}

#[pymethods]
impl PyMatcher {
    /// Writes the allowed tokens into row `index` of `bitmask` (int32, `[batch, words]` or
    /// `[words]`; bit set = allowed), in place, with the GIL released. `remaining`: the tokens
    /// the output may still take (this one included); then only tokens after which it can be
    /// finished in time are allowed, so a `max_tokens`-limited output still ends complete.
    #[pyo3(signature = (bitmask, index=0, remaining=None))]
    fn fill_bitmask(
        &self,
        py: Python<'_>,
        bitmask: &Bound<'_, PyAny>,
        index: usize,
        remaining: Option<usize>,
    ) -> PyResult<()> {
        let b = Bitmask::of(bitmask)?;
        check_width(b.words, self.vocab_size)?;
        if index >= b.rows {
            return Err(param(format!("row {index} is past the bitmask's {} rows", b.rows)));
        }
        let mut guard = self.lock()?;
        let state = &mut *guard;
        let mut rows = b.rows();
        py.detach(|| {
            let mut all = rows.split();
            state.fill(remaining, all.swap_remove(index));
        });
        Ok(())
    }

    /// Commits one token; `False` (state unchanged) if it is not allowed here.
    fn accept_token(&self, py: Python<'_>, token: u32) -> PyResult<bool> {
        let mut guard = self.lock()?;
        let state = &mut *guard;
        py.detach(|| state.accept_all(&[token])).map_err(to_py)
    }

    /// Commits every token, or none: `False` (state unchanged) if one is not allowed.
    fn accept_tokens(&self, py: Python<'_>, tokens: Vec<u32>) -> PyResult<bool> {
        let mut guard = self.lock()?;
        let state = &mut *guard;
        py.detach(|| state.accept_all(&tokens)).map_err(to_py)
    }

    /// How many of `tokens`, from the first, would be accepted in a row; the state is unchanged.
    fn validate_tokens(&self, py: Python<'_>, tokens: Vec<u32>) -> PyResult<usize> {
        let mut guard = self.lock()?;
        let m = &mut guard.m;
        py.detach(|| {
            let n = tokens.iter().take_while(|&&t| m.commit(TokenId(t)).is_ok()).count();
            m.rollback(n).map(|()| n)
        })
        .map_err(to_py)
    }

    /// Undoes the last `n` commits (a `StateError` if fewer were made).
    fn rollback(&self, n: usize) -> PyResult<()> {
        self.lock()?.m.rollback(n).map_err(to_py)
    }

    /// Back to the start of the output.
    fn reset(&self) -> PyResult<()> {
        self.lock()?.m.reset();
        Ok(())
    }

    /// Has an end-of-sequence token been accepted?
    fn is_terminated(&self) -> PyResult<bool> {
        Ok(self.lock()?.m.is_ended())
    }

    /// Is the output so far complete (an end-of-sequence token allowed now)?
    fn is_accepting(&self) -> PyResult<bool> {
        Ok(self.lock()?.m.is_accepting())
    }

    /// Is `token` allowed now? (Judged on its own bytes, not through a mask.)
    fn is_allowed(&self, py: Python<'_>, token: u32) -> PyResult<bool> {
        let mut guard = self.lock()?;
        let m = &mut guard.m;
        Ok(py.detach(|| m.allows(TokenId(token))))
    }

    /// The allowed token ids, ascending (a convenience; servers use `fill_bitmask`).
    #[pyo3(signature = (remaining=None))]
    fn allowed_tokens(&self, py: Python<'_>, remaining: Option<usize>) -> PyResult<Vec<u32>> {
        let mut guard = self.lock()?;
        let state = &mut *guard;
        Ok(py.detach(|| {
            match remaining {
                None => state.m.fill_mask(&mut state.mask),
                Some(n) => state.m.fill_mask_within(&mut state.mask, n),
            }
            state.mask.iter().map(|t| t.0).collect()
        }))
    }

    /// The allowed token ids by the library's slow reference (every token tried byte by byte,
    /// no trie walk, no cache): what tests compare `fill_bitmask` with.
    #[pyo3(signature = (remaining=None))]
    fn reference_allowed_tokens(&self, py: Python<'_>, remaining: Option<usize>) -> PyResult<Vec<u32>> {
        let mut guard = self.lock()?;
        let state = &mut *guard;
        Ok(py.detach(|| {
            match remaining {
                None => state.m.reference_mask(&mut state.mask),
                Some(n) => state.m.reference_mask_within(&mut state.mask, n),
            }
            state.mask.iter().map(|t| t.0).collect()
        }))
    }

    /// Tokens that are the only sensible continuation (jump-forward), tokenized canonically;
    /// the last is held back unless the text finishes the output. Not committed.
    fn forced_tokens(&self, py: Python<'_>) -> PyResult<Vec<u32>> {
        let mut guard = self.lock()?;
        let m = &mut guard.m;
        Ok(py.detach(|| m.forced_tokens().into_iter().map(|t| t.0).collect()))
    }

    /// The bytes that must come next whatever is chosen (empty when there is a choice).
    fn forced_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.lock()?.m.forced_bytes();
        Ok(PyBytes::new(py, &bytes))
    }

    /// Fewest tokens that finish the output from here (`None`: it cannot be finished).
    fn min_tokens_to_finish(&self, py: Python<'_>) -> PyResult<Option<u32>> {
        let mut guard = self.lock()?;
        let m = &mut guard.m;
        Ok(py.detach(|| m.min_tokens_to_finish()))
    }

    /// Tokens committed so far (an accepted end-of-sequence token included).
    #[getter]
    fn num_tokens(&self) -> PyResult<usize> {
        Ok(self.lock()?.m.len())
    }

    /// An independent copy at the same point (for forking a sequence, as beam search does).
    fn copy(&self) -> PyResult<PyMatcher> {
        let m = self.lock()?.m.clone();
        Ok(PyMatcher::from_matcher(m, self.compiled.clone(), self.vocab_size))
    }

    #[getter]
    fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    fn __repr__(&self) -> String {
        match self.state.try_lock() {
            Ok(s) => format!(
                "Matcher(tokens={}, accepting={}, terminated={})",
                s.m.len(),
                s.m.is_accepting(),
                s.m.is_ended()
            ),
            Err(_) => "Matcher(<in use>)".to_string(),
        }
    }
}

fn check_width(words: usize, vocab_size: usize) -> PyResult<()> {
    let need = vocab_size.div_ceil(32);
    if words < need {
        return Err(param(format!(
            "the bitmask's rows have {words} words; a vocab_size of {vocab_size} needs {need} (ceil(vocab_size/32))"
        )));
    }
    Ok(())
}

/// `strictly.fill_bitmasks(matchers, bitmask, indices=None, remaining=None)`: row `indices[i]`
/// (default `i`) of `bitmask` gets `matchers[i]`'s mask, in parallel with the GIL released.
/// A `None` matcher leaves its row as it is (an unconstrained sequence in the batch);
/// `remaining[i]` is that sequence's token budget (`None`: none).
#[pyfunction]
#[pyo3(signature = (matchers, bitmask, indices=None, remaining=None))]
pub fn fill_bitmasks(
    py: Python<'_>,
    matchers: Vec<Option<Bound<'_, PyMatcher>>>,
    bitmask: &Bound<'_, PyAny>,
    indices: Option<Vec<usize>>,
    remaining: Option<Vec<Option<usize>>>,
) -> PyResult<()> {
    let b = Bitmask::of(bitmask)?;
    let n = matchers.len();
    let indices = indices.unwrap_or_else(|| (0..n).collect());
    let remaining = remaining.unwrap_or_else(|| vec![None; n]);
    if indices.len() != n || remaining.len() != n {
        return Err(param(format!(
            "{n} matchers but {} indices and {} budgets: give one of each per matcher",
            indices.len(),
            remaining.len()
        )));
    }
    let mut guards = Vec::with_capacity(n);
    for (i, m) in matchers.iter().enumerate() {
        let Some(m) = m else { continue };
        let m = m.get();
        check_width(b.words, m.vocab_size)?;
        if indices[i] >= b.rows {
            return Err(param(format!("row {} is past the bitmask's {} rows", indices[i], b.rows)));
        }
        guards.push((i, m.lock()?));
    }
    let mut rows = b.rows();
    let mut all: Vec<Option<&mut [u32]>> = rows.split().into_iter().map(Some).collect();
    let mut work: Vec<(&mut State, &mut [u32], Option<usize>)> = Vec::with_capacity(guards.len());
    for (i, g) in guards.iter_mut() {
        let row = all[indices[*i]].take().ok_or_else(|| param(format!("row {} is given twice", indices[*i])))?;
        work.push((&mut **g, row, remaining[*i]));
    }
    py.detach(|| work.into_par_iter().for_each(|(state, row, budget)| state.fill(budget, row)));
    Ok(())
}
