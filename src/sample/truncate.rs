//! The candidate stage: [`Temperature`], then the truncation filters [`TopK`], [`TopP`],
//! [`MinP`] and [`TopNSigma`], each a [`LogitsProcessor`] over [`Candidates`].
//!
//! Every filter keeps at least the top candidate (highest logit, lowest id among equals), so
//! after the mask has left at least one allowed token, no filter can leave none. Ties at a rank
//! cut (top-k, top-p) are broken by token id, lowest kept; threshold cuts (min-p, top-nσ) keep
//! every token at the threshold.

use super::candidates::Candidates;
use super::params::{check_min_p, check_top_n_sigma, check_top_p};
use crate::error::{Error, Result};

/// One step of the candidate stage.
pub trait LogitsProcessor {
    /// Rescales or drops candidates. Never empties a non-empty list.
    fn process(&self, candidates: &mut Candidates);
}

/// Divides logits by the temperature, after shifting them so the top one is 0: the softmax is
/// the same as for `logit / T`, and a tiny `T` cannot overflow to `+inf`.
///
/// Temperature 0 (greedy) is not a `Temperature`: the sampler takes the argmax instead.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Temperature {
    t: f32,
}

impl Temperature {
    /// `t` finite and `> 0`.
    pub fn new(t: f32) -> Result<Temperature> {
        if t.is_finite() && t > 0.0 {
            Ok(Temperature { t })
        } else {
            Err(Error::param(format!("Temperature needs a finite t > 0 (use greedy for 0), got {t}")))
        }
    }
}

impl LogitsProcessor for Temperature {
    fn process(&self, c: &mut Candidates) {
        let (max, t) = (c.max_logit(), self.t);
        // (l - max) <= 0, so dividing by t > 0 gives a value in [-inf, 0]; one that underflows
        // to -inf is clamped to f32::MIN, whose probability is 0 anyway.
        c.map_logits(|l| ((l - max) / t).max(f32::MIN));
    }
}

/// Keeps the `k` top-ranked candidates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TopK {
    k: usize,
}

impl TopK {
    /// `k >= 1`.
    pub fn new(k: usize) -> Result<TopK> {
        if k == 0 {
            return Err(Error::param("top_k must be at least 1 (use None for off)"));
        }
        Ok(TopK { k })
    }
}

impl LogitsProcessor for TopK {
    fn process(&self, c: &mut Candidates) {
        c.keep_top(self.k);
    }
}

/// Nucleus sampling (Holtzman et al., 2019): keeps the smallest rank-order prefix whose total
/// probability reaches `p`, i.e. the tokens up to and including the one whose cumulative
/// probability crosses `p`. The top candidate is always kept.
///
/// "Reaches" allows a rounding slack of [`TopP::EPSILON`]: a boundary that is exact in real
/// arithmetic (probabilities 0.5, 0.25, 0.25 with `p = 0.75`) keeps two tokens, not three, even
/// when the sum in floating point comes out a hair under `p`.
///
/// Only as much of the list is sorted as the nucleus needs: the top 64, then 4 times more until
/// the cumulative probability reaches `p`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TopP {
    p: f32,
}

impl TopP {
    /// Slack on "cumulative probability reaches p".
    pub const EPSILON: f64 = 1e-6;
    const FIRST_PREFIX: usize = 64;

    /// `p` in `(0, 1]`.
    pub fn new(p: f32) -> Result<TopP> {
        check_top_p(p)?;
        Ok(TopP { p })
    }
}

impl LogitsProcessor for TopP {
    fn process(&self, c: &mut Candidates) {
        let max = c.max_logit();
        let z: f64 = c.as_slice().iter().map(|x| (x.logit - max).exp() as f64).sum();
        let target = (self.p as f64 - TopP::EPSILON) * z;
        let (mut cum, mut walked, mut m) = (0.0f64, 0, TopP::FIRST_PREFIX);
        loop {
            // The rank order is total, so a longer sorted prefix starts with the shorter one and
            // the sum over `..walked` carries over.
            let prefix = c.sort_prefix(m);
            for x in &prefix[walked..] {
                cum += (x.logit - max).exp() as f64;
                walked += 1;
                if cum >= target {
                    c.keep_top(walked);
                    return;
                }
            }
            if prefix.len() == c.len() {
                return; // Rounding left the total a hair short of p: keep everything.
            }
            m = m.saturating_mul(4);
        }
    }
}

/// Min-p (Nguyen et al., 2024): drops candidates whose probability is below `min_p` times the
/// top candidate's, i.e. whose logit is below `max + ln(min_p)`. A candidate at the threshold
/// stays, with a rounding slack of [`MinP::EPSILON`] in logit units (so probabilities 8, 4, 2
/// with `min_p = 0.25` keep the 2, however `ln` rounds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MinP {
    min_p: f32,
}

impl MinP {
    /// Slack, in logit units, on "at or above the threshold".
    pub const EPSILON: f32 = 1e-5;

    /// `min_p` in `(0, 1]`; 1 keeps only the candidates tied with the top one.
    pub fn new(min_p: f32) -> Result<MinP> {
        check_min_p(min_p)?;
        if min_p == 0.0 {
            return Err(Error::param("MinP needs min_p > 0 (0 is off)"));
        }
        Ok(MinP { min_p })
    }
}

impl LogitsProcessor for MinP {
    fn process(&self, c: &mut Candidates) {
        // ln(min_p) <= 0, so the threshold is at or below the top logit.
        let max = c.max_logit();
        c.keep_at_least((max + self.min_p.ln() - MinP::EPSILON).min(max));
    }
}

/// Top-nσ (Tang et al., 2024), in logit space: drops candidates whose logit is below
/// `max - n·σ`, where σ is the population standard deviation of the candidates' logits (the
/// finite logits left by the steps before it). It is temperature-invariant: scaling the logits
/// scales `max` and σ alike.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TopNSigma {
    n: f32,
}

impl TopNSigma {
    /// `n` finite and `> 0`.
    pub fn new(n: f32) -> Result<TopNSigma> {
        check_top_n_sigma(n)?;
        Ok(TopNSigma { n })
    }
}

impl LogitsProcessor for TopNSigma {
    fn process(&self, c: &mut Candidates) {
        let xs = c.as_slice();
        let len = xs.len() as f64;
        let mean = xs.iter().map(|x| x.logit as f64).sum::<f64>() / len;
        let var = xs.iter().map(|x| (x.logit as f64 - mean).powi(2)).sum::<f64>() / len;
        let max = c.max_logit();
        // n·σ >= 0, so the threshold is at or below the top logit (max is exact in f32).
        let threshold = (max as f64 - self.n as f64 * var.sqrt()) as f32;
        c.keep_at_least(threshold.min(max));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::TokenId;

    fn kept(c: &Candidates) -> Vec<u32> {
        let mut v: Vec<u32> = c.as_slice().iter().map(|c| c.id.0).collect();
        v.sort();
        v
    }

    fn run(p: &dyn LogitsProcessor, logits: &[f32]) -> Vec<u32> {
        let mut c = Candidates::from_logits(logits).unwrap();
        p.process(&mut c);
        kept(&c)
    }

    #[test]
    fn temperature_shifts_and_scales() {
        let mut c = Candidates::from_logits(&[8.0, 3.0]).unwrap();
        Temperature::new(0.5).unwrap().process(&mut c);
        assert_eq!(c.as_slice().iter().map(|c| c.logit).collect::<Vec<_>>(), vec![0.0, -10.0]);
        // A tiny temperature stays finite.
        let mut c = Candidates::from_logits(&[1.0, 0.0]).unwrap();
        Temperature::new(1e-30).unwrap().process(&mut c);
        assert!(c.as_slice().iter().all(|c| c.logit.is_finite()));
        assert_eq!(c.top().id, TokenId(0));
        assert!(Temperature::new(0.0).is_err());
    }

    #[test]
    fn top_k_keeps_k_ties_by_id() {
        let logits = [1.0, 5.0, 3.0, 5.0, 3.0, f32::NEG_INFINITY];
        assert_eq!(run(&TopK::new(1).unwrap(), &logits), vec![1]);
        assert_eq!(run(&TopK::new(2).unwrap(), &logits), vec![1, 3]);
        assert_eq!(run(&TopK::new(3).unwrap(), &logits), vec![1, 2, 3]);
        assert_eq!(run(&TopK::new(100).unwrap(), &logits), vec![0, 1, 2, 3, 4]);
        assert!(TopK::new(0).is_err());
    }

    #[test]
    fn top_p_exact_boundaries() {
        // Probabilities 0.5, 0.25, 0.25 (logits ln 2, 0, 0), listed out of rank order.
        let logits = [0.0, std::f32::consts::LN_2, 0.0];
        let top_p = |p| run(&TopP::new(p).unwrap(), &logits);
        assert_eq!(top_p(0.5), vec![1], "0.5 is reached by the top token alone");
        assert_eq!(top_p(0.5001), vec![0, 1], "crossing 0.5 needs the next token, the lower id of the tie");
        assert_eq!(top_p(0.75), vec![0, 1], "0.75 is reached exactly by two tokens");
        assert_eq!(top_p(0.7501), vec![0, 1, 2]);
        assert_eq!(top_p(1.0), vec![0, 1, 2]);
        assert_eq!(top_p(0.01), vec![1], "the top token is always kept");
        // 0.6f32 is 0.60000002: without the slack, 0.4 + 0.2 would fall short and keep a third.
        let logits = [0.4f32.ln(), 0.2f32.ln(), 0.2f32.ln(), 0.2f32.ln()];
        assert_eq!(run(&TopP::new(0.6).unwrap(), &logits), vec![0, 1]);
    }

    #[test]
    fn top_p_on_a_long_list_sorts_past_the_first_prefix() {
        // 1000 equal tokens: p = 0.5 needs exactly 500 of them, the 500 lowest ids.
        let logits = vec![0.25f32; 1000];
        assert_eq!(run(&TopP::new(0.5).unwrap(), &logits), (0..500).collect::<Vec<_>>());
        // One dominant token among 1000 reaches p on its own.
        let mut logits = vec![0.0f32; 1000];
        logits[777] = 20.0;
        assert_eq!(run(&TopP::new(0.9).unwrap(), &logits), vec![777]);
    }

    #[test]
    fn min_p_threshold() {
        // Probabilities proportional to 8, 4, 2, 1: min_p 0.25 keeps ratios >= 0.25.
        let logits = [8f32.ln(), 4f32.ln(), 2f32.ln(), 0.0];
        assert_eq!(run(&MinP::new(0.25).unwrap(), &logits), vec![0, 1, 2], "the boundary token stays");
        assert_eq!(run(&MinP::new(0.26).unwrap(), &logits), vec![0, 1]);
        assert_eq!(run(&MinP::new(0.2).unwrap(), &logits), vec![0, 1, 2]);
        assert_eq!(run(&MinP::new(0.1).unwrap(), &logits), vec![0, 1, 2, 3]);
        assert_eq!(run(&MinP::new(0.6).unwrap(), &logits), vec![0]);
        assert_eq!(run(&MinP::new(1.0).unwrap(), &[1.0, 3.0, 3.0]), vec![1, 2]);
        assert!(MinP::new(0.0).is_err());
    }

    #[test]
    fn top_n_sigma_threshold() {
        // Logits 0, 2, 4, 6, 8: mean 4, population σ = sqrt(8) = 2.828.
        let logits = [0.0, 2.0, 4.0, 6.0, 8.0];
        // n = 1: threshold 8 - 2.83 = 5.17 keeps 6 and 8.
        assert_eq!(run(&TopNSigma::new(1.0).unwrap(), &logits), vec![3, 4]);
        // n = 1.5: threshold 8 - 4.24 = 3.76 keeps 4, 6, 8.
        assert_eq!(run(&TopNSigma::new(1.5).unwrap(), &logits), vec![2, 3, 4]);
        // n = 1.3: threshold 8 - 3.68 = 4.32 keeps 6 and 8 (the sample σ, 3.16, would keep 4 too).
        assert_eq!(run(&TopNSigma::new(1.3).unwrap(), &logits), vec![3, 4]);
        // n = 3: threshold 8 - 8.49 < 0 keeps everything.
        assert_eq!(run(&TopNSigma::new(3.0).unwrap(), &logits), vec![0, 1, 2, 3, 4]);
        // -inf (masked) logits are not in the statistics: σ over 0, 2, 4, 6, 8 again.
        let masked = [0.0, 2.0, f32::NEG_INFINITY, 4.0, 6.0, 8.0];
        assert_eq!(run(&TopNSigma::new(1.0).unwrap(), &masked), vec![4, 5]);
        // One candidate: σ = 0, it stays.
        assert_eq!(run(&TopNSigma::new(1.0).unwrap(), &[f32::NEG_INFINITY, -3.0]), vec![1]);
    }
}
