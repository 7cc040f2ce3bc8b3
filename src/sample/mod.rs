//! Logits processing and sampling: from the model's logits row to one token.
//!
//! Each step of decoding ends here. The model hands over a row of logits (token id = index,
//! possibly wider than the vocabulary), the matcher hands over the [`TokenSet`](crate::vocab::TokenSet) of tokens the
//! constraint allows, and a [`Sampler`] runs a fixed chain of small processors and picks a token:
//!
//! ```text
//!         dense, on the logits row (&mut [f32], indexed by token id):
//!  logits ─▶ AllowedMask ─▶ RepetitionPenalty ─▶ FrequencyPenalty ─▶ PresencePenalty
//!         ─▶ Dry (repeats of the token history, prompt included)
//!         ─▶ Candidates::fill (the finite logits only)
//!         sparse, on the Candidates list:
//!         ─▶ Temperature ─▶ TopK ─▶ TopP ─▶ MinP ─▶ TopNSigma
//!         ─▶ argmax (temperature 0) | seeded draw from the softmax ─▶ Choice
//! ```
//!
//! # Key types
//!
//! - [`SamplingParams`]: the knobs, serde-ready, OpenAI/vLLM names and ranges, every one off by
//!   default; [`SamplingParams::validate`] names the knob that is out of range.
//! - [`SamplingOverrides`]: the knobs a caller names, laid over a base `SamplingParams` (model
//!   defaults, command-line flags and request fields all go through it).
//! - [`TokenCounts`]: seen-token counts for the penalties, prompt and output apart, so that
//!   [`PenaltyScope`] can choose which count. The default scope is [`PenaltyScope::Output`]
//!   (OpenAI's rule for frequency/presence); see its docs for why, and for `Both` (HF/vLLM's
//!   rule for the repetition penalty).
//! - The processors, one small type each: [`AllowedMask`]; [`RepetitionPenalty`],
//!   [`FrequencyPenalty`], [`PresencePenalty`] (dense, indexed by id); [`Temperature`], [`TopK`],
//!   [`TopP`], [`MinP`], [`TopNSigma`] (each a [`LogitsProcessor`] over [`Candidates`]).
//! - [`Sampler`]: the chain built from the params, a seeded ChaCha8 RNG and reused scratch
//!   space; [`Sampler::sample`] returns a [`Choice`]: token, logprob, top logprobs.
//!
//! # The order, and why
//!
//! The mask comes first. Every later step then sees only allowed tokens, so truncation can never
//! remove the last allowed token: `top_k = 1` picks the best *allowed* token, not the model's
//! overall favourite (which the mask may forbid). Penalties come before temperature, as in
//! Hugging Face and vLLM, so a penalty means the same at every temperature. Truncation runs in
//! the order top-k, top-p, min-p, top-nσ, each on what the previous one left.
//!
//! # Invariants
//!
//! - After the mask, if no token has a finite logit, [`Sampler::sample`] returns
//!   [`Error::Param`](crate::error::Error::Param); it never panics and never picks a masked token.
//! - Every filter keeps the top candidate (highest logit, lowest id among equal logits), so the
//!   candidate list is never empty once filled.
//! - Ties are broken by token id, so every cut, and hence every step, is deterministic: the same
//!   seed, the same logits, mask and counts give the same tokens.
//! - A non-greedy step draws exactly one `f64` from the RNG; a greedy step draws none.
//!
//! # Which distribution the logprobs describe
//!
//! [`Choice::logprob`] and [`Choice::top_logprobs`] are the log-softmax of the *processed*
//! distribution, the one the token was drawn from: after the mask, the penalties, the
//! temperature and every truncation filter, renormalised over the survivors. Masked or truncated
//! tokens have probability 0 and are never listed. With temperature 0 (greedy) the temperature
//! step is left out, so the logprobs are those of temperature 1 after penalties and truncation.
//! These are not the model's raw logprobs; callers who want those can log-softmax the logits
//! row before calling the sampler.
//!
//! # Cost
//!
//! Vocabularies are 128k–150k wide and this runs every step, so: the mask goes a 32-bit word at a
//! time; penalties touch only the distinct tokens seen; [`Candidates`] reuses its allocation;
//! top-k is a selection, not a sort; top-p sorts only as long a prefix as the nucleus needs.

mod candidates;
mod counts;
mod dry;
mod mask;
mod overrides;
mod params;
mod penalty;
mod sampler;
mod truncate;

pub use candidates::{Candidate, Candidates};
pub use counts::TokenCounts;
pub use dry::Dry;
pub use mask::AllowedMask;
pub use overrides::SamplingOverrides;
pub use params::{PenaltyScope, SamplingParams, MAX_TOP_LOGPROBS};
pub use penalty::{FrequencyPenalty, PresencePenalty, RepetitionPenalty};
pub use sampler::{Choice, Sampler, TokenLogprob};
pub use truncate::{LogitsProcessor, MinP, Temperature, TopK, TopNSigma, TopP};

#[cfg(test)]
mod tests;
