//! The generation loop: logits → mask → sampling chain → commit, until a stop.
//!
//! Model-independent: it drives any [`LanguageModel`] (logits for the next position given new
//! tokens; the model keeps its own cache; [`LanguageModel::fork`] copies it for beam search).
//! [`RandomLogits`] is a "model" whose logits are seeded random numbers, which turns the loop
//! into a grammar fuzzer (`strictly sample`); [`ScriptedModel`] computes logits from the token
//! history, for exact tests.
//!
//! ```text
//!            ┌─ forced tokens? ── append them, no forward pass (fast-forward) ───────────┐
//!  matcher ──┤                                                                           │
//!            └─ mask within the remaining budget ── only one token / only EOS? ── append │
//!                   │ otherwise                                      or stop, no forward │
//!                   ▼                                                                    │
//!  model.forward(new tokens) ─▶ Sampler (mask first, penalties, temperature, top-k/p...) │
//!                   │ Choice: token, logprob, top logprobs                               │
//!                   ▼                                                                    ▼
//!  stop token? ─▶ end   else matcher.commit ─▶ StreamDetokenizer (stop strings, UTF-8) ─▶ Events
//! ```
//!
//! # Key types
//!
//! - [`generate`] runs to the end and returns an [`Output`]; [`generate_stream`] does the same
//!   and calls back with every [`Event`]; [`Generation`] is the loop itself as an iterator of
//!   events, for a server that pulls (drop it to cancel).
//! - [`GenerateOptions`]: `max_tokens`, the [`SamplingParams`], stop strings, extra stop token ids.
//! - [`Output`]: tokens, the text's exact bytes, [`FinishReason`], what stopped it
//!   ([`StoppedBy`]), per-token logprobs ([`GeneratedToken`]), how many tokens were forced, and
//!   the masks' cost ([`MaskStats`]).
//! - [`beam_search`] with [`BeamOptions`]: length-normalised beam search, each beam with its own
//!   matcher and its own fork of the model; returns [`Hypothesis`]es, best first.
//! - [`StopStrings`], [`Utf8Stream`], [`StreamDetokenizer`]: the streaming text stages, usable alone.
//! - [`PromptLookup`] ([`GenerateOptions::speculate`]): prompt-lookup speculative decoding, the
//!   same tokens in fewer forward passes (see [`speculate`]); [`SpecStats`] in the output.
//!   [`DraftModel`] ([`GenerateOptions::draft_model`]): drafts from a smaller model instead.
//!
//! # Stops
//!
//! The output ends at the first of:
//! - a stop token: any of the vocabulary's EOS ids ([`Vocab::eos`], gathered from the
//!   tokenizer's and the generation config's declarations) or of
//!   [`GenerateOptions::stop_token_ids`]. The stop token is not part of the output.
//! - a stop string completing in the decoded text, across token boundaries (see [`StopStrings`]
//!   for which one wins). The text stops just before it; the stop string and anything after it in
//!   the same token are never emitted. [`Output::tokens`] still holds every generated token,
//!   including the ones the stop string is made of, so `tokens` may decode to more than `text`.
//! - the constraint: nothing but a stop token is allowed (the output is complete and cannot
//!   grow). The loop stops without asking the model, since the choice is already made.
//! - `max_tokens` generated tokens: [`FinishReason::Length`].
//!
//! All but the last give [`FinishReason::Stop`].
//!
//! With a constraint, stop tokens (the extra ids too) are allowed exactly when the output is
//! complete, so a stop token never cuts a constrained output short. Stop strings likewise apply
//! only where the output may end: one that completes where the text before it is not a complete
//! output of the constraint is text like any other, and the output goes on (so the same request
//! gives the same kind of answer whatever the seed). [`StopStrings::push_gated`] takes the gate.
//!
//! # Never truncated
//!
//! With a constraint, each step's mask is [`Matcher::fill_mask_within`] the remaining budget:
//! only tokens after which the output can still be completed in time. So a constrained output
//! that reaches `max_tokens` is complete all the same; if no complete output fits at all,
//! [`generate`] says so up front with an error. Unconstrained output simply stops at `max_tokens`.
//!
//! # Fast-forward
//!
//! When the matcher forces the next tokens ([`Matcher::forced_tokens`]), or its mask allows a
//! single token, they are appended without a forward pass; the model sees them with the next
//! forward call, in one batch. [`Output::forced`] counts them (forward passes saved) and
//! [`Output::forward_passes`] counts the passes made. Forced tokens go through the same stop
//! checks (stop strings, `max_tokens`) as sampled ones. Their [`GeneratedToken::logprob`] is
//! `0.0` (probability 1: there was no choice) and they list no alternatives.
//!
//! # Overlap
//!
//! The mask for the next position does not depend on the model, and the model's forward pass
//! does not depend on the mask, so with [`GenerateOptions::overlap`] the loop computes the mask
//! on a second thread while the forward pass runs on the caller's (by default only where the
//! mask is slow enough for that to pay and the pass short, [`MAX_OVERLAP_TOKENS`] tokens at
//! most: [`Overlap::DEFAULT`]; a prefill undone would be fed again). The tokens
//! the pass must see are known first: the sampled token and the forced run
//! ([`Matcher::forced_tokens`], committed before the mask is computed). Only the mask can
//! show that the pass was not needed yet: when it allows a single token (appended without a
//! choice, and to be fed in the same batch as the tokens before it) or only a stop token. The
//! pass was then speculative, and the loop undoes it with [`LanguageModel::rewind`] to the
//! [`LanguageModel::checkpoint`] taken just before. So every forward pass the model keeps sees
//! exactly the batch it would see without overlap, and the output (tokens, logprobs, events,
//! [`Output::forward_passes`]; all but the [`Output::masks`] figures) is identical either way,
//! as is the model's state afterwards; only the time differs. A model whose
//! `checkpoint` returns `false` is never run speculatively (no overlap). Unconstrained output
//! has no mask to overlap; beam search does not overlap.
//!
//! [`Output::masks`] says how many masks were computed, how long they took, how many ran
//! during a forward pass and how many speculative passes were undone.
//!
//! # Logprobs
//!
//! Every generated token carries its logprob and the `sampling.top_logprobs` most likely
//! alternatives, under the distribution it was drawn from: after the mask, the penalties, the
//! temperature and the truncation filters (see [`crate::sample`]). A stop token is not a
//! generated token, so its logprob is not reported.
//!
//! # Determinism
//!
//! The loop adds no randomness of its own: with `sampling.seed` set, the same model, prompt,
//! matcher state and options give the same tokens, events and output.
//!
//! # Invariants
//!
//! - Every committed token was allowed by the matcher; stop tokens are never committed, so
//!   afterwards the matcher holds exactly the output's tokens.
//! - With a constraint, a `Length` finish leaves the matcher accepting.
//! - Text deltas are complete UTF-8 and concatenate to [`Output::text`].

mod beam;
mod detok;
mod generate;
mod model;
mod reasoning;
mod seq;
pub mod speculate;
mod stops;
mod typed;

pub use beam::{beam_search, BeamOptions, Hypothesis, MAX_BEAM_WIDTH};
pub use detok::{StreamDetokenizer, Utf8Stream};
pub use generate::{generate, generate_stream, Generation};
pub use model::{check_rows, forward_rows_one_by_one, LanguageModel, RandomLogits, ScriptFn, ScriptedModel};
pub use reasoning::ReasoningBudget;
pub use speculate::{DraftModel, PromptLookup, SpecStats};
pub use stops::{StopStrings, MAX_STOP_BYTES, MAX_STOP_STRINGS};
#[cfg(feature = "model")]
pub(crate) use typed::deserialize;
pub use typed::{generate_typed, schema_for, Typed};

use std::time::Duration;

#[cfg(doc)]
use crate::automaton::Matcher;
use crate::sample::{SamplingParams, TokenLogprob};
use crate::vocab::TokenId;

/// The `max_tokens` of [`GenerateOptions::default`].
pub const DEFAULT_MAX_TOKENS: usize = 256;

/// Why the output ended (OpenAI's `finish_reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A stop token or stop string, or the constraint allows nothing more.
    Stop,
    /// `max_tokens` was reached.
    Length,
}

/// What exactly ended a [`FinishReason::Stop`] output (vLLM's `stop_reason`, and more).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoppedBy {
    /// This stop token was chosen (an EOS id or one of the extra stop ids).
    Token(TokenId),
    /// This stop string completed.
    String(String),
    /// The constraint allowed nothing but a stop token (or nothing at all).
    Constraint,
}

/// Options of one generation.
#[derive(Debug, Clone)]
pub struct GenerateOptions {
    /// The most tokens to generate (stop tokens not counted). Default [`DEFAULT_MAX_TOKENS`].
    pub max_tokens: usize,
    /// The sampling chain's knobs (and the seed).
    pub sampling: SamplingParams,
    /// Stop strings, matched on the decoded text; see [`StopStrings`] for limits and which one
    /// wins. Default none.
    pub stop: Vec<String>,
    /// Stop token ids in addition to the vocabulary's EOS ids. Default none.
    pub stop_token_ids: Vec<TokenId>,
    /// When to compute a constrained mask on a second thread while the model's forward pass
    /// runs (see [overlap](self#overlap)). Never changes the output, only the time. Default
    /// [`Overlap::DEFAULT`].
    pub overlap: Overlap,
    /// A reasoning part at the output's start and its token budget: once it has taken
    /// `max_tokens` tokens without its end marker, the marker is appended (forced), so the answer
    /// after it still comes (see [`ReasoningBudget`]). Default none.
    pub reasoning: Option<ReasoningBudget>,
    /// Prompt-lookup speculative decoding (see [`speculate`](self::speculate)): the same
    /// output in fewer forward passes where it copies its context. Turns overlap off (a pass
    /// then often has no mask to wait for). Default none.
    pub speculate: Option<PromptLookup>,
    /// Drafts for speculation from this model instead of from the context (see
    /// [`speculate`](self::speculate)): the same output in fewer passes of the large model
    /// where the small one guesses right. Its sizes are `speculate`'s (the defaults if none).
    /// Default none.
    pub draft_model: Option<DraftModel>,
}

/// When [`Generation`] computes a mask during the forward pass ([overlap](self#overlap)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlap {
    /// Never: the mask, then the pass.
    Off,
    /// At every constrained step (with a model that can rewind).
    On,
    /// At a step whose previous mask took at least this long, and whose pass feeds at most
    /// [`MAX_OVERLAP_TOKENS`] tokens. A second thread costs tens of microseconds to start and
    /// join, more when the cores are busy (as they are while a CPU model runs), so overlapping
    /// a cheaper mask loses more than it hides; and a speculative pass is undone when the mask
    /// allows one token, so a long one (a prefill, a long forced run) risks a whole pass again
    /// to hide one mask (a tool call under a tight `max_tokens`, SmolLM2 on two cores: the
    /// 253-token prompt fed five times, 12 s where 4 s do).
    IfMaskTakes(Duration),
}

/// The most tokens a pass that [`Overlap::IfMaskTakes`] runs speculatively feeds.
pub const MAX_OVERLAP_TOKENS: usize = 8;

impl Overlap {
    /// `IfMaskTakes(100 µs)`: small vocabularies' masks (stories260K's take about 10 µs) stay
    /// on the loop's thread, large ones' (a 128k vocabulary's JSON mask takes hundreds of
    /// microseconds) overlap.
    pub const DEFAULT: Overlap = Overlap::IfMaskTakes(Duration::from_micros(100));

    /// Whether to overlap a step whose previous mask took `last` and whose pass feeds
    /// `tokens` tokens.
    pub fn wants(self, last: Duration, tokens: usize) -> bool {
        match self {
            Overlap::Off => false,
            Overlap::On => true,
            Overlap::IfMaskTakes(min) => last >= min && tokens <= MAX_OVERLAP_TOKENS,
        }
    }
}

impl Default for Overlap {
    fn default() -> Overlap {
        Overlap::DEFAULT
    }
}

impl std::str::FromStr for Overlap {
    type Err = crate::error::Error;

    /// `off`, `on`, or `auto` ([`Overlap::DEFAULT`]).
    fn from_str(s: &str) -> crate::error::Result<Overlap> {
        match s {
            "off" => Ok(Overlap::Off),
            "on" => Ok(Overlap::On),
            "auto" => Ok(Overlap::DEFAULT),
            _ => Err(crate::error::Error::param(format!("overlap must be off, on or auto, got {s:?}"))),
        }
    }
}

impl Default for GenerateOptions {
    fn default() -> GenerateOptions {
        GenerateOptions {
            max_tokens: DEFAULT_MAX_TOKENS,
            sampling: SamplingParams::default(),
            stop: Vec::new(),
            stop_token_ids: Vec::new(),
            overlap: Overlap::DEFAULT,
            reasoning: None,
            speculate: None,
            draft_model: None,
        }
    }
}

impl GenerateOptions {
    /// These options with `sampling.seed` set: the same inputs then give the same output.
    pub fn with_seed(mut self, seed: u64) -> GenerateOptions {
        self.sampling.seed = Some(seed);
        self
    }

    /// These options with `max_tokens` set.
    pub fn with_max_tokens(mut self, max_tokens: usize) -> GenerateOptions {
        self.max_tokens = max_tokens;
        self
    }

    /// These options with `sampling.temperature` set (`0` is greedy).
    pub fn with_temperature(mut self, temperature: f32) -> GenerateOptions {
        self.sampling.temperature = temperature;
        self
    }
}

/// One generated token, with its logprobs.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratedToken {
    pub token: TokenId,
    /// `ln P(token)` under the distribution it was drawn from; `0.0` for a forced token.
    pub logprob: f32,
    /// The most likely tokens of that distribution, most likely first
    /// (`sampling.top_logprobs` of them); empty for a forced token.
    pub top_logprobs: Vec<TokenLogprob>,
    /// Appended without sampling (fast-forward, or the only token the constraint allowed).
    pub forced: bool,
}

impl GeneratedToken {
    /// A token appended without a choice: probability 1, no alternatives.
    pub fn forced(token: TokenId) -> GeneratedToken {
        GeneratedToken { token, logprob: 0.0, top_logprobs: Vec::new(), forced: true }
    }
}

/// What [`Generation`] reports as it goes. For each token: a `Token` event, then a `Text` event
/// if that token made text final. The last event is always `Finish`.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A token was appended to the output. Its text may come later (held back while it could
    /// be part of a stop string or of an unfinished character), or never (a stop string).
    Token(GeneratedToken),
    /// Final text: complete UTF-8, never empty, never part of a stop string. All of them
    /// together are [`Output::text`].
    Text(String),
    /// The end.
    Finish { reason: FinishReason, stopped_by: Option<StoppedBy> },
}

/// One finished output.
#[derive(Debug, Clone)]
pub struct Output {
    /// Every generated token, stop tokens excluded (tokens of a stop string included).
    pub tokens: Vec<TokenId>,
    /// The text's exact bytes: special tokens skipped, cut before a stop string.
    pub bytes: Vec<u8>,
    pub finish_reason: FinishReason,
    /// What ended a `Stop` output; `None` for `Length`.
    pub stopped_by: Option<StoppedBy>,
    /// Per token of `tokens`: its logprob and alternatives.
    pub logprobs: Vec<GeneratedToken>,
    /// Tokens appended without sampling (fast-forward): forward passes saved.
    pub forced: usize,
    /// Forward passes made (undone speculative ones not counted: see [`MaskStats::rewound`]).
    pub forward_passes: usize,
    /// The masks computed for this output and their cost.
    pub masks: MaskStats,
    /// What speculative decoding did (all zero without it).
    pub speculation: SpecStats,
}

/// What the masks of one output cost. All zero for unconstrained output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MaskStats {
    /// Masks computed, the up-front check that a complete output fits in `max_tokens`
    /// included.
    pub count: usize,
    /// Wall time spent computing them, on whichever thread computed them (with overlap, this
    /// time was spent while the model ran, not added to it).
    pub time: Duration,
    /// Of `count`, the masks computed while a forward pass ran ([overlap](self#overlap)).
    pub overlapped: usize,
    /// Speculative forward passes undone because the mask they overlapped left no choice.
    pub rewound: usize,
}

impl MaskStats {
    /// Counts one mask computed in `time`.
    pub(crate) fn add(&mut self, time: Duration) {
        self.count += 1;
        self.time += time;
    }
}

impl Output {
    /// The text: `bytes` as UTF-8, an unfinished last character (unconstrained output only)
    /// as U+FFFD. Equal to the concatenated [`Event::Text`] deltas.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}
