//! [`Sampler`]: the chain built from [`SamplingParams`], its RNG and its scratch space.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::candidates::{Candidate, Candidates};
use super::dry::Dry;
use super::mask::AllowedMask;
use super::penalty::{FrequencyPenalty, PresencePenalty, RepetitionPenalty};
use super::truncate::{LogitsProcessor, MinP, Temperature, TopK, TopNSigma, TopP};
use super::{SamplingParams, TokenCounts};
use crate::error::{Error, Result};
use crate::vocab::{TokenId, TokenSet, Vocab};

/// A token and its log-probability under the processed distribution.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenLogprob {
    pub token: TokenId,
    pub logprob: f32,
}

/// What one step chose.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    /// The chosen token; always one the mask allowed.
    pub token: TokenId,
    /// `ln P(token)` under the processed distribution (see the module docs). Never `-inf`.
    pub logprob: f32,
    /// The `params.top_logprobs` most likely tokens of the processed distribution, most likely
    /// first (ties: lower id first). Shorter when fewer tokens survived the chain.
    pub top_logprobs: Vec<TokenLogprob>,
}

/// The logits-processing chain and the RNG for one sequence.
///
/// Build it once per request with [`Sampler::new`] and call [`Sampler::sample`] each step.
/// The candidate list inside is reused across steps, so a step allocates nothing beyond the
/// small `top_logprobs` vector (and nothing at all when none are asked for).
///
/// A clone carries on the *same* random stream as the original; [`reseed`](Sampler::reseed) the
/// clones that must differ (e.g. `n > 1` completions of one prompt).
#[derive(Debug, Clone)]
pub struct Sampler {
    params: SamplingParams,
    repetition: Option<RepetitionPenalty>,
    frequency: Option<FrequencyPenalty>,
    presence: Option<PresencePenalty>,
    dry: Option<Dry>,
    temperature: Option<Temperature>,
    top_k: Option<TopK>,
    top_p: Option<TopP>,
    min_p: Option<MinP>,
    top_n_sigma: Option<TopNSigma>,
    rng: ChaCha8Rng,
    candidates: Candidates,
    /// Scratch: the candidates' softmax weights at a draw.
    weights: Vec<f32>,
}

impl Sampler {
    /// Validates `params` and builds the chain, leaving out every step that is off.
    /// The RNG is seeded from `params.seed`, or from the operating system when it is `None`.
    pub fn new(params: SamplingParams) -> Result<Sampler> {
        params.validate()?;
        let p = &params;
        let rng = match p.seed {
            Some(s) => ChaCha8Rng::seed_from_u64(s),
            // The OS's entropy source failing is rare, but is an error here, not a panic.
            None => ChaCha8Rng::try_from_os_rng().map_err(|e| Error::Io {
                path: "the operating system's random source".into(),
                source: std::io::Error::other(e.to_string()),
            })?,
        };
        Ok(Sampler {
            repetition: when(p.repetition_penalty != 1.0, || RepetitionPenalty::new(p.repetition_penalty))?,
            frequency: when(p.frequency_penalty != 0.0, || FrequencyPenalty::new(p.frequency_penalty))?,
            presence: when(p.presence_penalty != 0.0, || PresencePenalty::new(p.presence_penalty))?,
            dry: when(p.dry_multiplier != 0.0, || {
                Dry::new(
                    p.dry_multiplier,
                    p.dry_base,
                    p.dry_allowed_length,
                    p.dry_penalty_last_n,
                    &p.dry_sequence_breakers,
                )
            })?,
            // Greedy leaves the temperature out: logprobs are then those of temperature 1.
            temperature: when(p.temperature != 0.0 && p.temperature != 1.0, || Temperature::new(p.temperature))?,
            top_k: p.top_k().map(TopK::new).transpose()?,
            top_p: when(p.top_p < 1.0, || TopP::new(p.top_p))?,
            min_p: when(p.min_p > 0.0, || MinP::new(p.min_p))?,
            top_n_sigma: p.top_n_sigma.map(TopNSigma::new).transpose()?,
            rng,
            candidates: Candidates::new(),
            weights: Vec::new(),
            params,
        })
    }

    /// The (validated) parameters the chain was built from.
    pub fn params(&self) -> &SamplingParams {
        &self.params
    }

    /// Tells the chain the vocabulary its token ids belong to: [`Dry`] finds its sequence
    /// breakers there (without it, DRY sees no breakers). Call it once, before sampling.
    pub fn set_vocab(&mut self, vocab: &Vocab) {
        if let Some(d) = &mut self.dry {
            d.set_breakers(vocab);
        }
    }

    /// Restarts the RNG from `seed`, as if the sampler had been built with it.
    pub fn reseed(&mut self, seed: u64) {
        self.rng = ChaCha8Rng::seed_from_u64(seed);
        self.params.seed = Some(seed);
    }

    /// Runs the chain and returns the processed distribution: the surviving candidates, whose
    /// softmax is what [`sample`](Sampler::sample) draws from. Draws nothing.
    ///
    /// `logits` is the model's row (token id = index) and is modified in place: on return it
    /// holds the masked and penalised logits; temperature and truncation act on the candidate
    /// list only. `mask: None` allows every token. Errors when no token is allowed, or when an
    /// allowed token's logit is NaN or `+inf`.
    pub fn process(
        &mut self,
        logits: &mut [f32],
        mask: Option<&TokenSet>,
        counts: &TokenCounts,
    ) -> Result<&Candidates> {
        if let Some(mask) = mask {
            AllowedMask::new(mask).apply(logits);
        }
        let scope = self.params.penalty_scope;
        if let Some(p) = &self.repetition {
            p.apply(logits, counts, scope);
        }
        if let Some(p) = &self.frequency {
            p.apply(logits, counts, scope);
        }
        if let Some(p) = &self.presence {
            p.apply(logits, counts, scope);
        }
        if let Some(d) = &self.dry {
            d.apply(logits, counts.history());
        }
        self.candidates.fill(logits)?;
        let steps: [Option<&dyn LogitsProcessor>; 5] = [
            self.temperature.as_ref().map(|p| p as &dyn LogitsProcessor),
            self.top_k.as_ref().map(|p| p as &dyn LogitsProcessor),
            self.top_p.as_ref().map(|p| p as &dyn LogitsProcessor),
            self.min_p.as_ref().map(|p| p as &dyn LogitsProcessor),
            self.top_n_sigma.as_ref().map(|p| p as &dyn LogitsProcessor),
        ];
        for step in steps.into_iter().flatten() {
            step.process(&mut self.candidates);
            debug_assert!(!self.candidates.is_empty(), "a filter emptied the candidates");
        }
        Ok(&self.candidates)
    }

    /// Runs the chain and picks a token: the top candidate when greedy, otherwise a draw from
    /// the softmax of the candidates. A non-greedy step draws exactly one `f64` from the RNG,
    /// whatever survived, so step `n` always uses the `n`-th number of the seed's stream.
    pub fn sample(&mut self, logits: &mut [f32], mask: Option<&TokenSet>, counts: &TokenCounts) -> Result<Choice> {
        self.process(logits, mask, counts)?;
        let (chosen, lse) =
            if self.params.is_greedy() { (self.candidates.top(), self.candidates.log_sum_exp()) } else { self.draw() };
        let logprob = |c: &Candidate| (c.logit as f64 - lse) as f32;
        let n = self.params.top_logprobs;
        // After the draw: sorting reorders the candidates, and the draw must not depend on it.
        let top_logprobs = if n == 0 {
            Vec::new()
        } else {
            self.candidates.sort_prefix(n).iter().map(|c| TokenLogprob { token: c.id, logprob: logprob(c) }).collect()
        };
        Ok(Choice { token: chosen.id, logprob: logprob(&chosen), top_logprobs })
    }

    /// Inverse-CDF draw over the candidates in their current (deterministic) order; and their
    /// log-sum-exp (the chosen token's logprob), from the same weights.
    fn draw(&mut self) -> (Candidate, f64) {
        let u: f64 = self.rng.random();
        let (max, z) = self.candidates.exp_weights(&mut self.weights);
        let lse = max as f64 + z.ln();
        let target = u * z; // in [0, z)
        let mut cum = 0.0f64;
        let mut last_positive = None;
        for (c, &w) in self.candidates.as_slice().iter().zip(&self.weights) {
            if w > 0.0 {
                cum += w as f64;
                last_positive = Some(*c);
                if cum > target {
                    return (*c, lse);
                }
            }
        }
        // Only rounding gets here (the sum came out a hair under z): the last token with weight.
        (last_positive.unwrap_or_else(|| self.candidates.top()), lse)
    }
}

/// A chain step that is built (and checked) only when its knob is on.
fn when<T>(on: bool, build: impl FnOnce() -> Result<T>) -> Result<Option<T>> {
    on.then(build).transpose()
}
