//! [`LanguageModel`]: what the loop needs from a model, and two models that need no weights.
//!
//! A model is a stateful next-token scorer: [`forward`](LanguageModel::forward) appends tokens to
//! its sequence (a real model keeps a KV cache) and writes the logits for the next position.
//! [`fork`](LanguageModel::fork) copies that state, cache included, so that beam search can
//! extend one prefix in several ways without re-running it.
//!
//! Why `fork` and not `Clone` or "re-run from scratch": `Clone` would make the trait unusable
//! as `dyn LanguageModel`, and re-running every beam's whole history at every step costs
//! O(length²) forward tokens. A candle KV cache is a list of reference-counted tensors, so a
//! fork is cheap until the copies diverge. `fork` returns a `Result` so that a model can refuse
//! (out of memory, a backend that cannot copy its cache); beam search then fails with that
//! error, and plain generation, which never forks, is unaffected.
//!
//! [`checkpoint`](LanguageModel::checkpoint) and [`rewind`](LanguageModel::rewind) undo
//! forward passes: the loop runs a pass speculatively while it computes the mask on another
//! thread, and undoes it when the mask shows the pass was not needed (see
//! [overlap](super#overlap)). Both have defaults that opt out (`checkpoint` returns `false`), so
//! a model that cannot undo is simply never asked to speculate.
//!
//! - [`RandomLogits`]: seeded standard-normal logits, fresh each step, whatever the tokens:
//!   with a constraint this turns the loop into a grammar fuzzer (`strictly sample`).
//! - [`ScriptedModel`]: logits are a fixed function of the token history (prompt included),
//!   the right tool to test stops, streaming and beam search with exact expectations.

use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::error::{Error, Result};
use crate::vocab::TokenId;

/// Anything that produces next-token logits.
pub trait LanguageModel {
    /// The width of a logits row (may exceed the tokenizer's vocabulary; ids past the
    /// vocabulary are never allowed by a matcher).
    fn logits_width(&self) -> usize;

    /// Appends `tokens` to the sequence and writes the logits for the next position into
    /// `logits` (length [`logits_width`](Self::logits_width); every entry must be written).
    ///
    /// The loop calls it with the prompt (plus any forced tokens) first, then with the tokens
    /// appended since the previous call: one sampled token, or a run of fast-forwarded ones.
    /// `tokens` is empty only on the first call, when the prompt is empty and nothing is forced.
    fn forward(&mut self, tokens: &[TokenId], logits: &mut [f32]) -> Result<()>;

    /// An independent copy of this model with the same sequence so far (KV cache included):
    /// forwarding one afterwards does not affect the other. Beam search forks a model once per
    /// extra beam and step; nothing else does.
    fn fork(&self) -> Result<Box<dyn LanguageModel>>;

    /// Remembers the sequence state (KV cache included) so that [`rewind`](Self::rewind) can
    /// return to it, replacing any earlier checkpoint; returns whether it did. The default
    /// remembers nothing and returns `false`.
    fn checkpoint(&mut self) -> bool {
        false
    }

    /// Appends `tokens` (at least `n_rows`) and writes the logits after each of the last
    /// `n_rows` of them: `rows[i · w..(i + 1) · w]` (`w` = [`logits_width`](Self::logits_width))
    /// is the row after `tokens[..tokens.len() - n_rows + 1 + i]`. What speculative decoding
    /// verifies a draft with, in one pass. The default makes one [`forward`](Self::forward) per
    /// row (the same logits, no pass saved).
    fn forward_rows(&mut self, tokens: &[TokenId], n_rows: usize, rows: &mut [f32]) -> Result<()> {
        forward_rows_one_by_one(self, tokens, n_rows, rows)
    }

    /// [`forward_rows`](Self::forward_rows), writing only the first row now (into `first`):
    /// row `i` (`1 <= i < n_rows`) is computed by [`deferred_row`](Self::deferred_row) when it
    /// is wanted (a draft's rows past its first miss never are), until the sequence next
    /// changes. Returns `false`, running nothing, where the model cannot defer (the default).
    fn forward_rows_deferred(&mut self, tokens: &[TokenId], n_rows: usize, first: &mut [f32]) -> Result<bool> {
        let _ = (tokens, n_rows, first);
        Ok(false)
    }

    /// Row `i` of the last [`forward_rows_deferred`](Self::forward_rows_deferred).
    fn deferred_row(&mut self, i: usize, logits: &mut [f32]) -> Result<()> {
        let _ = (i, logits);
        Err(Error::state("this model keeps no deferred rows"))
    }

    /// Whether [`truncate`](Self::truncate) works. Default `false`.
    fn can_truncate(&self) -> bool {
        false
    }

    /// Forgets the last `n` tokens of the sequence (their cache entries included), as if they
    /// had never been forwarded. Errors (changing nothing) if the model cannot, or holds fewer.
    fn truncate(&mut self, n: usize) -> Result<()> {
        let _ = n;
        Err(Error::state("this model cannot forget the end of its sequence"))
    }

    /// Returns to the state of the last [`checkpoint`](Self::checkpoint) and uses it up,
    /// undoing every forward pass since, a failed one included: afterwards the model behaves
    /// exactly as if those passes had never run. Errors if there is no checkpoint to return to
    /// (always, by default).
    fn rewind(&mut self) -> Result<()> {
        Err(Error::state("this model has no checkpoint to rewind to"))
    }
}

/// [`LanguageModel::forward_rows`] by one [`forward`](LanguageModel::forward) per row: the
/// tokens before the last `n_rows - 1` in one call, then one call per token.
pub fn forward_rows_one_by_one<M: LanguageModel + ?Sized>(
    model: &mut M,
    tokens: &[TokenId],
    n_rows: usize,
    rows: &mut [f32],
) -> Result<()> {
    let w = model.logits_width();
    check_rows(tokens, n_rows, rows.len(), w)?;
    let first = tokens.len() - n_rows + 1;
    model.forward(&tokens[..first], &mut rows[..w])?;
    for (i, t) in tokens[first..].iter().enumerate() {
        model.forward(std::slice::from_ref(t), &mut rows[(i + 1) * w..(i + 2) * w])?;
    }
    Ok(())
}

/// Checks a [`LanguageModel::forward_rows`] request: at least one row, no more rows than
/// tokens, and a buffer of exactly `n_rows` rows of `width`.
pub fn check_rows(tokens: &[TokenId], n_rows: usize, buffer: usize, width: usize) -> Result<()> {
    if n_rows == 0 || n_rows > tokens.len() || buffer != n_rows * width {
        return Err(Error::param(format!(
            "forward_rows: {n_rows} rows of {width} for {} tokens into a buffer of {buffer}",
            tokens.len()
        )));
    }
    Ok(())
}

/// Seeded random logits: a fuzzer's "model". Standard-normal logits, fresh each step.
///
/// The tokens are ignored: step `n` always gets the `n`-th row of the seed's stream. A fork
/// continues the same stream, so forked beams see the same rows at the same steps.
#[derive(Debug, Clone)]
pub struct RandomLogits {
    width: usize,
    rng: ChaCha8Rng,
    /// The stream's position at the last checkpoint.
    saved: Option<ChaCha8Rng>,
}

impl RandomLogits {
    pub fn new(width: usize, seed: u64) -> RandomLogits {
        RandomLogits { width, rng: ChaCha8Rng::seed_from_u64(seed), saved: None }
    }
}

impl LanguageModel for RandomLogits {
    fn logits_width(&self) -> usize {
        self.width
    }

    fn forward(&mut self, _tokens: &[TokenId], logits: &mut [f32]) -> Result<()> {
        use rand::Rng;
        for pair in logits.chunks_mut(2) {
            // Box–Muller: two standard normals from two uniforms.
            let u1: f32 = self.rng.random::<f32>().max(f32::MIN_POSITIVE);
            let u2: f32 = self.rng.random();
            let r = (-2.0 * u1.ln()).sqrt();
            let t = std::f32::consts::TAU * u2;
            pair[0] = r * t.cos();
            if pair.len() > 1 {
                pair[1] = r * t.sin();
            }
        }
        Ok(())
    }

    fn fork(&self) -> Result<Box<dyn LanguageModel>> {
        Ok(Box::new(self.clone()))
    }

    fn checkpoint(&mut self) -> bool {
        self.saved = Some(self.rng.clone());
        true
    }

    fn rewind(&mut self) -> Result<()> {
        self.rng = self.saved.take().ok_or_else(|| Error::state("no checkpoint to rewind to"))?;
        Ok(())
    }
}

/// The function behind a [`ScriptedModel`]: `(history, logits)`, where `logits` arrives
/// filled with `0.0`.
pub type ScriptFn = dyn Fn(&[TokenId], &mut [f32]) + Send + Sync;

/// A model whose logits are a fixed function of the whole token history (prompt included).
///
/// Deterministic and cheap to fork (the function is shared; the history is copied), so tests
/// can state exact expectations for stops, streaming and beam search.
///
/// ```
/// use strictly::decode::{LanguageModel, ScriptedModel};
/// use strictly::TokenId;
/// // Always prefers the token after the last one, modulo 4.
/// let mut m = ScriptedModel::new(4, |h, logits| {
///     let next = h.last().map_or(0, |t| (t.0 as usize + 1) % 4);
///     logits[next] = 5.0;
/// });
/// let mut row = [0.0; 4];
/// m.forward(&[TokenId(2)], &mut row).unwrap();
/// assert_eq!(row, [0.0, 0.0, 0.0, 5.0]);
/// assert_eq!(m.history(), &[TokenId(2)]);
/// ```
#[derive(Clone)]
pub struct ScriptedModel {
    width: usize,
    history: Vec<TokenId>,
    /// How many times `forward` was called (rewound calls not counted).
    calls: usize,
    /// `(history length, calls)` at the last checkpoint.
    saved: Option<(usize, usize)>,
    f: Arc<ScriptFn>,
}

impl ScriptedModel {
    pub fn new(width: usize, f: impl Fn(&[TokenId], &mut [f32]) + Send + Sync + 'static) -> ScriptedModel {
        ScriptedModel { width, history: Vec::new(), calls: 0, saved: None, f: Arc::new(f) }
    }

    /// Every token fed so far, in order.
    pub fn history(&self) -> &[TokenId] {
        &self.history
    }

    /// How many times [`forward`](LanguageModel::forward) ran (on this copy, forks included
    /// from the moment they were made; rewound passes not counted).
    pub fn calls(&self) -> usize {
        self.calls
    }
}

impl std::fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ScriptedModel(width {}, {} tokens fed, {} calls)", self.width, self.history.len(), self.calls)
    }
}

impl LanguageModel for ScriptedModel {
    fn logits_width(&self) -> usize {
        self.width
    }

    fn forward(&mut self, tokens: &[TokenId], logits: &mut [f32]) -> Result<()> {
        self.history.extend_from_slice(tokens);
        self.calls += 1;
        logits.fill(0.0);
        (self.f)(&self.history, logits);
        Ok(())
    }

    fn fork(&self) -> Result<Box<dyn LanguageModel>> {
        Ok(Box::new(self.clone()))
    }

    fn checkpoint(&mut self) -> bool {
        self.saved = Some((self.history.len(), self.calls));
        true
    }

    fn rewind(&mut self) -> Result<()> {
        let (len, calls) = self.saved.take().ok_or_else(|| Error::state("no checkpoint to rewind to"))?;
        self.history.truncate(len);
        self.calls = calls;
        Ok(())
    }

    /// One call however many rows: a scripted model is its own batched pass.
    fn forward_rows(&mut self, tokens: &[TokenId], n_rows: usize, rows: &mut [f32]) -> Result<()> {
        let w = self.width;
        check_rows(tokens, n_rows, rows.len(), w)?;
        let first = tokens.len() - n_rows + 1;
        self.calls += 1;
        for (i, end) in (first..=tokens.len()).enumerate() {
            let row = &mut rows[i * w..(i + 1) * w];
            row.fill(0.0);
            let mut seen = self.history.clone();
            seen.extend_from_slice(&tokens[..end]);
            (self.f)(&seen, row);
        }
        self.history.extend_from_slice(tokens);
        Ok(())
    }

    fn can_truncate(&self) -> bool {
        true
    }

    fn truncate(&mut self, n: usize) -> Result<()> {
        if n > self.history.len() {
            return Err(Error::state(format!("cannot forget {n} tokens of {}", self.history.len())));
        }
        self.history.truncate(self.history.len() - n);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_logits_fork_continues_the_same_stream() {
        let mut a = RandomLogits::new(5, 7);
        let mut row = vec![0.0; 5];
        a.forward(&[], &mut row).unwrap();
        let mut b = a.fork().unwrap();
        let (mut ra, mut rb) = (vec![0.0; 5], vec![0.0; 5]);
        a.forward(&[TokenId(1)], &mut ra).unwrap();
        b.forward(&[TokenId(2)], &mut rb).unwrap();
        assert_eq!(ra, rb);
        assert_ne!(ra, row);
        assert!(ra.iter().all(|x| x.is_finite()));
    }

    #[test]
    fn scripted_fork_is_independent() {
        let mut a = ScriptedModel::new(3, |h, l| l[h.len() % 3] = 1.0);
        let mut row = [0.0; 3];
        a.forward(&[TokenId(0)], &mut row).unwrap();
        let mut b = a.fork().unwrap();
        b.forward(&[TokenId(1), TokenId(2)], &mut row).unwrap();
        assert_eq!(row, [1.0, 0.0, 0.0]); // history length 3
        a.forward(&[TokenId(1)], &mut row).unwrap();
        assert_eq!(row, [0.0, 0.0, 1.0]); // a's history is still its own: length 2
        assert_eq!(a.history(), &[TokenId(0), TokenId(1)]);
        assert_eq!(a.calls(), 2);
    }

    #[test]
    fn rewind_undoes_the_passes_since_the_checkpoint() {
        let mut r = RandomLogits::new(4, 3);
        let mut s = ScriptedModel::new(4, |h, l| l[h.len() % 4] = 1.0);
        let models: [&mut dyn LanguageModel; 2] = [&mut r, &mut s];
        for m in models {
            assert!(m.rewind().is_err(), "no checkpoint yet");
            let mut row = [0.0; 4];
            m.forward(&[TokenId(0)], &mut row).unwrap();
            assert!(m.checkpoint());
            let mut first = [0.0; 4];
            m.forward(&[TokenId(1), TokenId(2)], &mut first).unwrap();
            m.forward(&[TokenId(3)], &mut row).unwrap();
            m.rewind().unwrap();
            assert!(m.rewind().is_err(), "a checkpoint is used once");
            let mut again = [0.0; 4];
            m.forward(&[TokenId(1), TokenId(2)], &mut again).unwrap();
            assert_eq!(first, again);
        }
        assert_eq!(s.history(), &[TokenId(0), TokenId(1), TokenId(2)]);
        assert_eq!(s.calls(), 2);
    }
}
