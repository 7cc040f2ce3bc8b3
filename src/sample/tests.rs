//! Tests of the whole chain through [`Sampler`], with worked numbers computed by hand.

use super::*;
use crate::error::Error;
use crate::vocab::{TokenId, TokenSet};

const TOL: f64 = 1e-4;

fn params(f: impl FnOnce(&mut SamplingParams)) -> SamplingParams {
    let mut p = SamplingParams { seed: Some(7), ..SamplingParams::default() };
    f(&mut p);
    p
}

fn set(width: usize, ids: &[u32]) -> TokenSet {
    let mut s = TokenSet::new(width);
    ids.iter().for_each(|&i| s.insert(TokenId(i)));
    s
}

/// The processed distribution by token id (0 for tokens that did not survive), read from the
/// `top_logprobs` of one sampled step.
fn probs(p: SamplingParams, logits: &[f32], mask: Option<&TokenSet>) -> Vec<f64> {
    let mut s = Sampler::new(SamplingParams { top_logprobs: logits.len().min(MAX_TOP_LOGPROBS), ..p }).unwrap();
    let choice = s.sample(&mut logits.to_vec(), mask, &TokenCounts::new()).unwrap();
    let mut out = vec![0.0; logits.len()];
    for t in &choice.top_logprobs {
        out[t.token.0 as usize] = (t.logprob as f64).exp();
    }
    out
}

fn assert_close(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() < TOL, "token {i}: got {g:.6}, want {w:.6} (all: {got:?})");
    }
}

#[test]
fn temperature_worked_numbers() {
    // [8, 3]: T=1 -> 1/(1+e^-5); T=0.5 -> 1/(1+e^-10); T=2 -> 1/(1+e^-2.5).
    let at = |t| probs(params(|p| p.temperature = t), &[8.0, 3.0], None);
    assert_close(&at(1.0), &[0.993307, 0.006693]);
    assert_close(&at(0.5), &[0.999955, 0.000045]);
    assert_close(&at(2.0), &[0.924142, 0.075858]);
    // [5, 3, 2, 1, 0.5] at T=0.5 -> exp of [0, -4, -6, -8, -9], normalised (sum 1.021253).
    let got = probs(params(|p| p.temperature = 0.5), &[5.0, 3.0, 2.0, 1.0, 0.5], None);
    assert_close(&got, &[0.979189, 0.017934, 0.002427, 0.000328, 0.000121]);
    // The logprobs sum to 1 over the survivors.
    assert!((got.iter().sum::<f64>() - 1.0).abs() < 1e-6);
}

#[test]
fn penalties_through_the_sampler() {
    // Output so far: token 0 three times, tokens 1, 2, 3 once; token 4 only in the prompt.
    let mut counts = TokenCounts::from_prompt(&[TokenId(4)]);
    for t in [0, 0, 0, 1, 2, 3] {
        counts.add_output(TokenId(t));
    }
    let mut s = Sampler::new(params(|p| p.repetition_penalty = 1.5)).unwrap();
    let mut logits = vec![5.0, 3.0, 2.0, -1.0, 4.0, 0.5];
    s.process(&mut logits, None, &counts).unwrap();
    let want = [5.0 / 1.5, 2.0, 2.0 / 1.5, -1.5, 4.0, 0.5];
    for (g, w) in logits.iter().zip(want) {
        assert!((g - w).abs() < 1e-5, "{logits:?}");
    }

    // Scope Both also penalises the prompt's token 4.
    let mut s = Sampler::new(params(|p| {
        p.repetition_penalty = 2.0;
        p.penalty_scope = PenaltyScope::Both;
    }))
    .unwrap();
    let mut logits = vec![1.0; 6];
    s.process(&mut logits, None, &counts).unwrap();
    assert_eq!(logits, vec![0.5, 0.5, 0.5, 0.5, 0.5, 1.0]);

    // Frequency 0.5 and presence 0.25: token 0 loses 3*0.5 + 0.25, tokens 1-3 lose 0.75.
    let mut s = Sampler::new(params(|p| {
        p.frequency_penalty = 0.5;
        p.presence_penalty = 0.25;
    }))
    .unwrap();
    let mut logits = vec![2.0; 6];
    s.process(&mut logits, None, &counts).unwrap();
    assert_eq!(logits, vec![0.25, 1.25, 1.25, 1.25, 2.0, 2.0]);
}

#[test]
fn top_k_one_with_the_argmax_masked_picks_the_best_allowed() {
    // Token 0 is the model's favourite, but the mask only allows 1 and 3.
    let logits = [10.0, 5.0, 7.0, 1.0];
    let mask = set(4, &[1, 3]);
    for seed in 0..50 {
        let mut s = Sampler::new(params(|p| {
            p.top_k = Some(1);
            p.seed = Some(seed);
        }))
        .unwrap();
        let c = s.sample(&mut logits.to_vec(), Some(&mask), &TokenCounts::new()).unwrap();
        assert_eq!(c.token, TokenId(1));
        assert_eq!(c.logprob, 0.0);
    }
    // Greedy, and every truncation at its tightest, still give an allowed token.
    let mut s = Sampler::new(params(|p| {
        p.temperature = 0.0;
        p.top_p = 1e-6;
        p.min_p = 1.0;
        p.top_n_sigma = Some(1e-3);
    }))
    .unwrap();
    assert_eq!(s.sample(&mut logits.to_vec(), Some(&mask), &TokenCounts::new()).unwrap().token, TokenId(1));
}

#[test]
fn nothing_allowed_is_an_error_not_a_panic() {
    let mut s = Sampler::new(params(|_| ())).unwrap();
    let none = TokenSet::new(4);
    let r = s.sample(&mut [1.0; 4], Some(&none), &TokenCounts::new());
    assert!(matches!(r, Err(Error::Param { ref msg }) if msg.contains("no token is allowed")), "{r:?}");
    // An allowed token whose logit is NaN is an error; a masked NaN is harmless.
    let mask = set(3, &[0, 1]);
    assert!(s.sample(&mut [0.0, f32::NAN, 1.0], Some(&mask), &TokenCounts::new()).is_err());
    let c = s.sample(&mut [0.0, 1.0, f32::NAN], Some(&mask), &TokenCounts::new()).unwrap();
    assert!(c.token.0 < 2);
    // The sampler is still usable after an error.
    assert!(s.sample(&mut [1.0; 4], None, &TokenCounts::new()).is_ok());
}

#[test]
fn logits_wider_than_the_mask_are_never_chosen() {
    // The mask covers 3 ids; the model's row has 8, and the extra ids have the largest logits.
    let mask = set(3, &[0, 1, 2]);
    let mut s = Sampler::new(params(|_| ())).unwrap();
    for _ in 0..200 {
        let mut logits = vec![0.0, 0.0, 0.0, 50.0, 50.0, 50.0, 50.0, 50.0];
        assert!(s.sample(&mut logits, Some(&mask), &TokenCounts::new()).unwrap().token.0 < 3);
    }
}

#[test]
fn greedy_takes_the_argmax_with_temperature_one_logprobs() {
    let mut s = Sampler::new(params(|p| {
        p.temperature = 0.0;
        p.top_logprobs = 3;
    }))
    .unwrap();
    let c = s.sample(&mut [1.0, 3.0, 3.0, 2.0], None, &TokenCounts::new()).unwrap();
    assert_eq!(c.token, TokenId(1), "ties go to the lower id");
    // Softmax of [1, 3, 3, 2] at T=1: e^-2, 1, 1, e^-1 over 2.503214.
    assert!((c.logprob as f64 - (1.0f64 / 2.503214).ln()).abs() < TOL);
    let top: Vec<u32> = c.top_logprobs.iter().map(|t| t.token.0).collect();
    assert_eq!(top, vec![1, 2, 3]);
    assert!((c.top_logprobs[2].logprob as f64 - (0.367879f64 / 2.503214).ln()).abs() < TOL);
}

#[test]
fn truncation_runs_in_order_on_what_is_left() {
    // Probabilities 0.4, 0.3, 0.2, 0.1. top_k = 2 leaves 0.4/0.7 = 0.571 and 0.429, and
    // top_p = 0.5 then keeps token 0 alone. (top-p first would keep two: 0.4 < 0.5.)
    let logits: Vec<f32> = [0.4f32, 0.3, 0.2, 0.1].iter().map(|p| p.ln()).collect();
    let got = probs(
        params(|p| {
            p.top_k = Some(2);
            p.top_p = 0.5;
        }),
        &logits,
        None,
    );
    assert_close(&got, &[1.0, 0.0, 0.0, 0.0]);
    // top_p = 0.6 keeps two, renormalised: 4/7, 3/7.
    let got = probs(
        params(|p| {
            p.top_k = Some(2);
            p.top_p = 0.6;
        }),
        &logits,
        None,
    );
    assert_close(&got, &[0.571429, 0.428571, 0.0, 0.0]);
    // Top-p exact boundary: 0.4 + 0.3 = 0.7 keeps exactly tokens 0 and 1.
    let got = probs(params(|p| p.top_p = 0.7), &logits, None);
    assert_close(&got, &[0.571429, 0.428571, 0.0, 0.0]);
    // min_p = 0.5 drops 0.1 and keeps the boundary 0.2 (ratio exactly 0.5).
    let got = probs(params(|p| p.min_p = 0.5), &logits, None);
    assert_close(&got, &[0.444444, 0.333333, 0.222222, 0.0]);
}

fn sequence(seed: u64, top_logprobs: usize, n: usize) -> Vec<u32> {
    let mut s = Sampler::new(params(|p| {
        p.seed = Some(seed);
        p.top_logprobs = top_logprobs;
        p.top_p = 0.95;
        p.temperature = 1.3;
    }))
    .unwrap();
    let mut counts = TokenCounts::new();
    let mut out = Vec::new();
    for step in 0..n {
        // A wide row of varied logits, different every step, with a mask.
        let mut logits: Vec<f32> = (0..1000).map(|i| (((i * 7919 + step * 31) % 997) as f32) / 200.0).collect();
        let mask = set(1000, &(0..1000).filter(|i| i % 3 != 0).collect::<Vec<_>>());
        let c = s.sample(&mut logits, Some(&mask), &counts).unwrap();
        counts.add_output(c.token);
        out.push(c.token.0);
    }
    out
}

#[test]
fn determinism() {
    let a = sequence(42, 0, 60);
    assert_eq!(a, sequence(42, 0, 60), "same seed, same tokens");
    assert_eq!(a, sequence(42, 5, 60), "asking for logprobs does not change the draws");
    assert_ne!(a, sequence(43, 0, 60), "another seed, other tokens");
    assert!(a.iter().all(|t| t % 3 != 0), "only allowed tokens");
    // reseed restarts the stream.
    let mut s = Sampler::new(params(|p| p.seed = Some(1))).unwrap();
    let draw = |s: &mut Sampler| -> Vec<u32> {
        (0..30).map(|_| s.sample(&mut [0.0; 16], None, &TokenCounts::new()).unwrap().token.0).collect()
    };
    let first = draw(&mut s);
    s.reseed(1);
    assert_eq!(draw(&mut s), first);
}

#[test]
fn sampled_frequencies_match_the_filtered_distribution() {
    // Six tokens. The mask forbids token 4 (the model's favourite), top_k = 4 then drops token 5
    // (the lowest allowed), and T = 0.8 sharpens what is left: softmax([2, 1.5, 1, 0.5] / 0.8).
    let logits = [2.0f32, 1.5, 1.0, 0.5, 3.0, 0.0];
    let mask = set(6, &[0, 1, 2, 3, 5]);
    let w: Vec<f64> = [2.0f64, 1.5, 1.0, 0.5].iter().map(|l| (l / 0.8).exp()).collect();
    let z: f64 = w.iter().sum();
    let expected: Vec<f64> = w.iter().map(|x| x / z).collect();
    // Hand check of the expected distribution: 0.5063, 0.2710, 0.1451, 0.0776.
    assert_close(&expected, &[0.506298, 0.271002, 0.145057, 0.077643]);

    let mut s = Sampler::new(params(|p| {
        p.seed = Some(2024);
        p.temperature = 0.8;
        p.top_k = Some(4);
    }))
    .unwrap();
    let n = 20_000;
    let mut seen = [0usize; 6];
    let mut row = logits.to_vec();
    for _ in 0..n {
        row.copy_from_slice(&logits);
        let c = s.sample(&mut row, Some(&mask), &TokenCounts::new()).unwrap();
        seen[c.token.0 as usize] += 1;
        let want = expected[c.token.0 as usize].ln();
        assert!((c.logprob as f64 - want).abs() < TOL, "logprob of {:?}", c.token);
    }
    assert_eq!(seen[4], 0, "masked token sampled");
    assert_eq!(seen[5], 0, "top-k-dropped token sampled");
    for (i, &p) in expected.iter().enumerate() {
        let mean = n as f64 * p;
        let sigma = (n as f64 * p * (1.0 - p)).sqrt();
        let dev = (seen[i] as f64 - mean).abs();
        let (got, bound) = (seen[i], 5.0 * sigma);
        assert!(dev <= bound, "token {i}: {got} draws, expected {mean:.0} ± {sigma:.0} (5σ = {bound:.0})");
    }
}

#[test]
fn sampler_new_validates() {
    for bad in [
        params(|p| p.temperature = -1.0),
        params(|p| p.top_p = 0.0),
        params(|p| p.min_p = 2.0),
        params(|p| p.top_n_sigma = Some(0.0)),
        params(|p| p.repetition_penalty = 0.0),
        params(|p| p.frequency_penalty = 3.0),
        params(|p| p.presence_penalty = f32::NAN),
        params(|p| p.top_logprobs = MAX_TOP_LOGPROBS + 1),
    ] {
        assert!(matches!(Sampler::new(bad.clone()), Err(Error::Param { .. })), "{bad:?} accepted");
    }
    // top_k = Some(0) means off, not an error.
    assert!(Sampler::new(params(|p| p.top_k = Some(0))).is_ok());
}
