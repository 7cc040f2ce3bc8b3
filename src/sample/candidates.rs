//! [`Candidates`]: the tokens still in the running, with their logits.
//!
//! After the dense stage (mask and penalties, which index the logits by token id), the sampler
//! gathers the tokens whose logit is finite into a `Candidates` list, and the rest of the chain
//! (temperature and the truncation filters) works on that list. The list is usually far shorter
//! than the vocabulary: a constrained step allows a handful of tokens, and top-k or top-p cut an
//! unconstrained one down to tens.
//!
//! Order: candidates are ranked by logit, highest first, and among equal logits by token id,
//! lowest first. This is a total order (ids are distinct, `-0.0` is folded into `+0.0` on entry,
//! and no logit is NaN), so every filter that cuts by rank cuts the same way every time, and the
//! *top candidate* is well defined.
//!
//! Invariants:
//! - every logit is finite (`-inf` tokens never enter);
//! - the list is never empty once filled (filling an empty one is an error);
//! - `items[..sorted]` are the `sorted` top candidates in rank order.

use std::cmp::Ordering;

use crate::error::{Error, Result};
use crate::vocab::TokenId;

/// One token still in the running.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub id: TokenId,
    pub logit: f32,
}

/// Rank order: higher logit first, then lower id first.
#[inline]
pub(crate) fn rank(a: &Candidate, b: &Candidate) -> Ordering {
    b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id))
}

/// The tokens still in the running; see the module docs for the order and the invariants.
#[derive(Debug, Clone, Default)]
pub struct Candidates {
    items: Vec<Candidate>,
    /// `items[..sorted]` are the top `sorted` candidates, in rank order.
    sorted: usize,
}

impl Candidates {
    pub fn new() -> Candidates {
        Candidates::default()
    }

    /// Candidates from a dense logits vector (token id = index); see [`Candidates::fill`].
    pub fn from_logits(logits: &[f32]) -> Result<Candidates> {
        let mut c = Candidates::new();
        c.fill(logits)?;
        Ok(c)
    }

    /// Replaces the list with every token whose logit is finite, keeping the allocation.
    ///
    /// `-inf` means "not allowed" and is skipped. A NaN or `+inf` logit is an error (it would
    /// poison the softmax), and so is a vector with no finite logit: no token is allowed.
    pub fn fill(&mut self, logits: &[f32]) -> Result<()> {
        self.items.clear();
        self.sorted = 0;
        for (i, &l) in logits.iter().enumerate() {
            if l == f32::NEG_INFINITY {
                continue;
            }
            if !l.is_finite() {
                self.items.clear();
                return Err(Error::param(format!(
                    "logit of token {i} is {l}; logits must be finite, or -inf for a disallowed token"
                )));
            }
            // `+ 0.0` folds -0.0 into +0.0, so equal logits compare equal under `total_cmp`.
            self.items.push(Candidate { id: TokenId(i as u32), logit: l + 0.0 });
        }
        if self.items.is_empty() {
            return Err(Error::param(format!(
                "no token is allowed: all {} logits are -inf after the mask",
                logits.len()
            )));
        }
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The candidates, in an order that depends on which filters ran (but never on chance).
    pub fn as_slice(&self) -> &[Candidate] {
        &self.items
    }

    /// The candidate ranked first: highest logit, lowest id among equals.
    pub fn top(&self) -> Candidate {
        debug_assert!(!self.items.is_empty(), "Candidates used before fill");
        if self.sorted > 0 {
            return self.items[0];
        }
        *self.items.iter().min_by(|a, b| rank(a, b)).expect("candidates are never empty")
    }

    /// The highest logit.
    pub fn max_logit(&self) -> f32 {
        self.top().logit
    }

    /// `ln Σ exp(logit)`, so that a candidate's logprob is `logit - log_sum_exp()`.
    pub fn log_sum_exp(&self) -> f64 {
        let max = self.max_logit();
        let z: f64 = self.items.iter().map(|c| (c.logit - max).exp() as f64).sum();
        max as f64 + z.ln()
    }

    /// The softmax's weights before normalizing, `exp(logit - max)` per candidate in list
    /// order, into `out`; returns `max` and their sum (in `f64`, in order). A draw needs the
    /// weights twice and the chosen token's logprob needs the sum: over a whole vocabulary
    /// (128k tokens), one pass of `exp` instead of three is a millisecond a token. The sum is
    /// bit for bit the one [`log_sum_exp`](Self::log_sum_exp) takes.
    pub fn exp_weights(&self, out: &mut Vec<f32>) -> (f32, f64) {
        let max = self.max_logit();
        out.clear();
        out.extend(self.items.iter().map(|c| (c.logit - max).exp()));
        (max, out.iter().map(|&w| w as f64).sum())
    }

    /// The log-probability of `id` under the softmax of the candidates; `-inf` if it is not one.
    pub fn logprob(&self, id: TokenId) -> f32 {
        match self.items.iter().find(|c| c.id == id) {
            Some(c) => (c.logit as f64 - self.log_sum_exp()) as f32,
            None => f32::NEG_INFINITY,
        }
    }

    /// Applies `f` to every logit. `f` must be strictly increasing, so the rank order (and the
    /// sorted prefix) is unchanged, and must keep logits finite.
    pub fn map_logits(&mut self, f: impl Fn(f32) -> f32) {
        for c in &mut self.items {
            c.logit = f(c.logit) + 0.0;
            debug_assert!(c.logit.is_finite(), "map_logits made a logit non-finite");
        }
    }

    /// Makes `items[..m]` the top `m` candidates in rank order (`m` clamped to the length) and
    /// returns that prefix.
    pub fn sort_prefix(&mut self, m: usize) -> &[Candidate] {
        let m = m.min(self.items.len());
        if self.sorted < m {
            if m == self.items.len() {
                self.items.sort_unstable_by(rank);
            } else {
                // Partition around the m-th candidate, then sort the part in front.
                self.items.select_nth_unstable_by(m - 1, rank);
                self.items[..m].sort_unstable_by(rank);
            }
            self.sorted = m;
        }
        &self.items[..m]
    }

    /// Keeps the top `k` candidates (at least one: `k` is raised to 1).
    pub fn keep_top(&mut self, k: usize) {
        let k = k.max(1);
        if k >= self.items.len() {
            return;
        }
        if self.sorted < k {
            self.items.select_nth_unstable_by(k - 1, rank);
            self.sorted = if k == 1 { 1 } else { 0 };
        }
        self.items.truncate(k);
        self.sorted = self.sorted.min(k);
    }

    /// Keeps the candidates whose logit is `>= threshold`. The caller keeps `threshold` at or below
    /// the top logit, so the top candidate always stays.
    pub fn keep_at_least(&mut self, threshold: f32) {
        debug_assert!(threshold <= self.max_logit(), "threshold above the top logit");
        // A threshold cut keeps a prefix of the rank order, so the survivors of the sorted
        // prefix are still the top ones, still in order.
        let sorted_kept = self.items[..self.sorted].iter().filter(|c| c.logit >= threshold).count();
        self.items.retain(|c| c.logit >= threshold);
        self.sorted = sorted_kept;
        debug_assert!(!self.items.is_empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(c: &[Candidate]) -> Vec<u32> {
        c.iter().map(|c| c.id.0).collect()
    }

    #[test]
    fn fill_skips_neg_inf_and_rejects_nan() {
        let ninf = f32::NEG_INFINITY;
        let c = Candidates::from_logits(&[1.0, ninf, -0.0, 3.0]).unwrap();
        assert_eq!(ids(c.as_slice()), vec![0, 2, 3]);
        assert_eq!(c.top().id, TokenId(3));
        assert!(
            matches!(Candidates::from_logits(&[ninf, ninf]), Err(Error::Param { msg }) if msg.contains("no token"))
        );
        assert!(matches!(Candidates::from_logits(&[]), Err(Error::Param { .. })));
        assert!(
            matches!(Candidates::from_logits(&[0.0, f32::NAN]), Err(Error::Param { msg }) if msg.contains("token 1"))
        );
        assert!(Candidates::from_logits(&[f32::INFINITY]).is_err());
    }

    #[test]
    fn rank_breaks_ties_by_id() {
        // -0.0 and 0.0 tie, so the lower id wins.
        let mut c = Candidates::from_logits(&[0.0, 2.0, -0.0, 2.0, 1.0]).unwrap();
        assert_eq!(c.top().id, TokenId(1));
        assert_eq!(ids(c.sort_prefix(3)), vec![1, 3, 4]);
        assert_eq!(ids(c.sort_prefix(10)), vec![1, 3, 4, 0, 2]);
    }

    #[test]
    fn prefix_survives_threshold_cut() {
        let logits: Vec<f32> = (0..100).map(|i| ((i * 37) % 100) as f32).collect();
        let mut c = Candidates::from_logits(&logits).unwrap();
        c.sort_prefix(10);
        c.keep_at_least(95.0);
        assert_eq!(c.len(), 5);
        assert_eq!(c.sort_prefix(5).iter().map(|c| c.logit).collect::<Vec<_>>(), vec![99.0, 98.0, 97.0, 96.0, 95.0]);
        c.keep_top(2);
        assert_eq!(c.as_slice().iter().map(|c| c.logit).collect::<Vec<_>>(), vec![99.0, 98.0]);
    }

    #[test]
    fn exp_weights_sum_to_what_log_sum_exp_takes() {
        let c = Candidates::from_logits(&[0.5, -3.25, 7.0, f32::NEG_INFINITY, 7.0, -0.0, 1e-3]).unwrap();
        let mut w = vec![9.0];
        let (max, z) = c.exp_weights(&mut w);
        assert_eq!(max, 7.0);
        assert_eq!(w.len(), c.len());
        for (w, c) in w.iter().zip(c.as_slice()) {
            assert_eq!(*w, (c.logit - 7.0).exp());
        }
        assert_eq!((max as f64 + z.ln()).to_bits(), c.log_sum_exp().to_bits());
    }

    #[test]
    fn log_sum_exp_and_logprob() {
        let c = Candidates::from_logits(&[0.0, (3.0f32).ln(), f32::NEG_INFINITY]).unwrap();
        assert!((c.log_sum_exp() - 4.0f64.ln()).abs() < 1e-6);
        assert!((c.logprob(TokenId(1)) - 0.75f32.ln()).abs() < 1e-6);
        assert_eq!(c.logprob(TokenId(2)), f32::NEG_INFINITY);
    }
}
