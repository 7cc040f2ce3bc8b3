//! The generation loop: logits → mask → sampling chain → commit, until a stop.
//!
//! Model-independent: it drives any [`LanguageModel`] (logits for the next position given new
//! tokens; the model keeps its own cache). [`RandomLogits`] is a "model" whose logits are seeded
//! random numbers, which turns the loop into a grammar fuzzer (`strictly sample`).
//!
//! Per step: if the matcher forces tokens, they are appended without sampling (fast-forward);
//! otherwise the mask is computed with the remaining token budget, so an output cut by
//! `max_tokens` is still complete ("never truncated"), and the sampler picks a token.
//!
//! Invariants: every committed token was allowed by the matcher; with a constraint, a
//! `Length` finish still leaves the matcher accepting.

use crate::automaton::Matcher;
use crate::error::{Error, Result};
use crate::sample::{Sampler, SamplingParams, TokenCounts};
use crate::vocab::{TokenId, TokenSet, Vocab};

/// Anything that produces next-token logits.
pub trait LanguageModel {
    /// The width of a logits row (may exceed the tokenizer's vocabulary).
    fn logits_width(&self) -> usize;
    /// Appends `tokens` to the sequence and writes the logits for the next position.
    fn forward(&mut self, tokens: &[TokenId], logits: &mut [f32]) -> Result<()>;
}

/// Seeded random logits: a fuzzer's "model". Standard-normal logits, fresh each step.
pub struct RandomLogits {
    width: usize,
    rng: rand_chacha::ChaCha8Rng,
}

impl RandomLogits {
    pub fn new(width: usize, seed: u64) -> RandomLogits {
        use rand::SeedableRng;
        RandomLogits { width, rng: rand_chacha::ChaCha8Rng::seed_from_u64(seed) }
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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// EOS was chosen (or the constraint allows nothing more).
    Stop,
    /// `max_tokens` was reached.
    Length,
}

#[derive(Debug, Clone)]
pub struct GenerateOptions {
    pub max_tokens: usize,
    pub sampling: SamplingParams,
}

#[derive(Debug, Clone)]
pub struct Output {
    /// The generated tokens, EOS excluded.
    pub tokens: Vec<TokenId>,
    /// Their bytes.
    pub bytes: Vec<u8>,
    pub finish_reason: FinishReason,
    /// Tokens appended by fast-forward, without sampling.
    pub forced: usize,
}

impl Output {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// Generates one output. `prompt` is fed first; `matcher` (if any) constrains every token.
pub fn generate(
    model: &mut dyn LanguageModel,
    vocab: &Vocab,
    mut matcher: Option<&mut Matcher>,
    prompt: &[TokenId],
    opts: &GenerateOptions,
) -> Result<Output> {
    let width = model.logits_width();
    if width < vocab.len() {
        return Err(Error::invalid(format!("model logits width {width} is smaller than the vocabulary ({})", vocab.len())));
    }
    if let Some(m) = matcher.as_deref() {
        if m.compiled().is_empty_language() {
            return Err(Error::invalid("the constraint matches no output at all"));
        }
        if let Some(need) = m.compiled().min_tokens() {
            if need as usize > opts.max_tokens {
                return Err(Error::invalid(format!(
                    "max_tokens {} is too small: the shortest output this constraint allows needs up to {need} tokens",
                    opts.max_tokens
                )));
            }
        }
    }
    let mut sampler = Sampler::new(opts.sampling.clone())?;
    let mut counts = TokenCounts::from_prompt(prompt);
    let mut logits = vec![0f32; width];
    let mut mask = TokenSet::new(width);
    let mut out = Output { tokens: Vec::new(), bytes: Vec::new(), finish_reason: FinishReason::Length, forced: 0 };
    let mut pending: Vec<TokenId> = prompt.to_vec();

    while out.tokens.len() < opts.max_tokens {
        let remaining = opts.max_tokens - out.tokens.len();
        if let Some(m) = matcher.as_deref_mut() {
            let mut forced = m.forced_tokens();
            forced.truncate(remaining);
            if !forced.is_empty() {
                for &t in &forced {
                    m.commit(t)?;
                    counts.add_output(t);
                    out.bytes.extend_from_slice(vocab.bytes(t));
                }
                out.forced += forced.len();
                out.tokens.extend_from_slice(&forced);
                pending.extend_from_slice(&forced);
                continue;
            }
        }
        model.forward(&pending, &mut logits)?;
        pending.clear();
        let choice = match matcher.as_deref_mut() {
            Some(m) => {
                m.fill_mask_within(&mut mask, remaining);
                if mask.is_empty() {
                    out.finish_reason = FinishReason::Stop;
                    break;
                }
                sampler.sample(&mut logits, Some(&mask), &counts)?
            }
            None => sampler.sample(&mut logits, None, &counts)?,
        };
        let t = choice.token;
        if let Some(m) = matcher.as_deref_mut() {
            m.commit(t)?;
        }
        if vocab.is_eos(t) {
            out.finish_reason = FinishReason::Stop;
            break;
        }
        counts.add_output(t);
        out.tokens.push(t);
        out.bytes.extend_from_slice(vocab.bytes(t));
        pending.push(t);
    }
    Ok(out)
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions { max_tokens: 256, sampling: SamplingParams::default() }
    }
}
