//! [`SamplingParams`]: the knobs of the chain, as a request carries them.
//!
//! The field names and ranges follow the OpenAI API where it has the knob (`temperature`,
//! `top_p`, `frequency_penalty`, `presence_penalty`, `seed`, `top_logprobs`) and vLLM where it
//! does not (`top_k`, `min_p`, `repetition_penalty`); `top_n_sigma` is from Tang et al., 2024,
//! "Top-nσ: Not All Logits Are You Need". Every knob has an "off" value, and the default is off
//! for every one of them, so `SamplingParams::default()` samples from the plain softmax of the
//! masked logits.
//!
//! `#[serde(default)]` lets a request name only the knobs it sets; unknown fields are ignored so
//! the struct can be `#[serde(flatten)]`ed into a larger request body.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The most `top_logprobs` one step may ask for (OpenAI's and vLLM's default limit).
pub const MAX_TOP_LOGPROBS: usize = 20;

/// Which tokens the repetition, frequency and presence penalties count.
///
/// The default is [`PenaltyScope::Output`]: only the tokens generated so far. That is what
/// OpenAI's `frequency_penalty` and `presence_penalty` count (and vLLM's too). Hugging Face
/// and vLLM count the prompt as well for `repetition_penalty`; ask for [`PenaltyScope::Both`]
/// to get that. Output is the better default here for a second reason: in constrained decoding
/// the prompt usually holds the schema and its instructions, whose key names and punctuation are
/// exactly what the output must repeat. The mask keeps such tokens legal but cannot undo a
/// penalty that pushes probability away from them towards other legal, but wrong, tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PenaltyScope {
    /// Only tokens generated so far (OpenAI's frequency/presence penalties).
    #[default]
    Output,
    /// Only the prompt's tokens.
    Prompt,
    /// Prompt and output together (Hugging Face's and vLLM's repetition penalty).
    Both,
}

/// The sampling knobs. Build one, call [`validate`](SamplingParams::validate) (or hand it to
/// [`Sampler::new`](super::Sampler::new), which validates), and sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SamplingParams {
    /// Softmax temperature, `>= 0` and finite. `0` means greedy: the top allowed token after
    /// penalties is taken, and no random number is drawn. Default 1.
    pub temperature: f32,
    /// Keep only the `k` most likely tokens. `None` or `Some(0)` is off (the default).
    pub top_k: Option<usize>,
    /// Nucleus sampling: keep the smallest set of most likely tokens whose probability reaches
    /// `top_p`. In `(0, 1]`; `1` is off (the default).
    pub top_p: f32,
    /// Drop tokens whose probability is below `min_p` times the top token's. In `[0, 1]`;
    /// `0` is off (the default).
    pub min_p: f32,
    /// Top-nσ: drop logits below `max - n·σ` (σ the standard deviation of the finite logits).
    /// `> 0`; `None` is off (the default).
    pub top_n_sigma: Option<f32>,
    /// CTRL's repetition penalty: every distinct counted token's logit is divided by it when
    /// positive and multiplied by it when negative. `> 0`; `1` is off (the default).
    pub repetition_penalty: f32,
    /// `logit -= count · frequency_penalty` for every counted token. In `[-2, 2]`; `0` is off.
    pub frequency_penalty: f32,
    /// `logit -= presence_penalty` for every token counted at least once. In `[-2, 2]`; `0` is off.
    pub presence_penalty: f32,
    /// Which tokens the three penalties count. Default [`PenaltyScope::Output`].
    pub penalty_scope: PenaltyScope,
    /// DRY ("don't repeat yourself", see [`Dry`](super::Dry)): a token that would extend a
    /// repeat of `n >= dry_allowed_length` tokens of the context loses
    /// `dry_multiplier · dry_base^(n − dry_allowed_length)`. `>= 0`; `0` is off (the default).
    pub dry_multiplier: f32,
    /// DRY's base, `> 1`. Default 1.75.
    pub dry_base: f32,
    /// The longest repeat DRY lets pass, `>= 1`. Default 2.
    pub dry_allowed_length: usize,
    /// How many of the context's last tokens DRY looks at (prompt included); `None` (the
    /// default): all of them; `Some(0)`: none (DRY off).
    pub dry_penalty_last_n: Option<usize>,
    /// Strings that end a repeat (see [`Dry`](super::Dry)). Default `["\n", ":", "\"", "*"]`.
    pub dry_sequence_breakers: Vec<String>,
    /// Seed for the sampler's RNG; the same seed and the same inputs give the same tokens.
    /// `None` seeds from the operating system.
    pub seed: Option<u64>,
    /// How many of the most likely tokens to report with their logprobs at each step, at most
    /// [`MAX_TOP_LOGPROBS`]. Default 0.
    pub top_logprobs: usize,
}

impl Default for SamplingParams {
    fn default() -> SamplingParams {
        SamplingParams {
            temperature: 1.0,
            top_k: None,
            top_p: 1.0,
            min_p: 0.0,
            top_n_sigma: None,
            repetition_penalty: 1.0,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            penalty_scope: PenaltyScope::Output,
            dry_multiplier: 0.0,
            dry_base: 1.75,
            dry_allowed_length: 2,
            dry_penalty_last_n: None,
            dry_sequence_breakers: super::dry::DEFAULT_BREAKERS.iter().map(|s| s.to_string()).collect(),
            seed: None,
            top_logprobs: 0,
        }
    }
}

impl SamplingParams {
    /// Greedy decoding: temperature 0, everything else off.
    pub fn greedy() -> SamplingParams {
        SamplingParams { temperature: 0.0, ..SamplingParams::default() }
    }

    /// Whether the sampler takes the argmax instead of drawing.
    pub fn is_greedy(&self) -> bool {
        self.temperature == 0.0
    }

    /// `top_k` with both "off" spellings (`None`, `Some(0)`) folded into `None`.
    pub fn top_k(&self) -> Option<usize> {
        self.top_k.filter(|&k| k > 0)
    }

    /// Checks every knob's range; the error names the knob, its range and the value given.
    pub fn validate(&self) -> Result<()> {
        check_temperature(self.temperature)?;
        check_top_p(self.top_p)?;
        check_min_p(self.min_p)?;
        if let Some(n) = self.top_n_sigma {
            check_top_n_sigma(n)?;
        }
        check_repetition_penalty(self.repetition_penalty)?;
        check_openai_penalty("frequency_penalty", self.frequency_penalty)?;
        check_openai_penalty("presence_penalty", self.presence_penalty)?;
        super::dry::check(self.dry_multiplier, self.dry_base, self.dry_allowed_length, &self.dry_sequence_breakers)?;
        if self.top_logprobs > MAX_TOP_LOGPROBS {
            return Err(Error::param(format!(
                "top_logprobs must be at most {MAX_TOP_LOGPROBS}, got {}",
                self.top_logprobs
            )));
        }
        Ok(())
    }
}

// The range checks live here, one per knob, and the processors' constructors call them too, so a
// processor built by hand is held to the same ranges as one built from parameters.

pub(crate) fn check_temperature(t: f32) -> Result<()> {
    if t.is_finite() && t >= 0.0 {
        Ok(())
    } else {
        Err(Error::param(format!("temperature must be a finite number >= 0 (0 means greedy), got {t}")))
    }
}

pub(crate) fn check_top_p(p: f32) -> Result<()> {
    if p > 0.0 && p <= 1.0 {
        Ok(())
    } else {
        Err(Error::param(format!("top_p must be in (0, 1], got {p}")))
    }
}

pub(crate) fn check_min_p(p: f32) -> Result<()> {
    if (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        Err(Error::param(format!("min_p must be in [0, 1], got {p}")))
    }
}

pub(crate) fn check_top_n_sigma(n: f32) -> Result<()> {
    if n.is_finite() && n > 0.0 {
        Ok(())
    } else {
        Err(Error::param(format!("top_n_sigma must be a finite number > 0, got {n}")))
    }
}

pub(crate) fn check_repetition_penalty(p: f32) -> Result<()> {
    if p.is_finite() && p > 0.0 {
        Ok(())
    } else {
        Err(Error::param(format!("repetition_penalty must be a finite number > 0 (1 is off), got {p}")))
    }
}

pub(crate) fn check_openai_penalty(name: &str, v: f32) -> Result<()> {
    if (-2.0..=2.0).contains(&v) {
        Ok(())
    } else {
        Err(Error::param(format!("{name} must be in [-2, 2], got {v}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(p: SamplingParams) -> String {
        match p.validate() {
            Err(Error::Param { msg }) => msg,
            other => panic!("expected Error::Param, got {other:?}"),
        }
    }

    #[test]
    fn defaults_are_valid_and_off() {
        let p = SamplingParams::default();
        p.validate().unwrap();
        assert_eq!(p.temperature, 1.0);
        assert_eq!(p.top_k(), None);
        assert_eq!(p.penalty_scope, PenaltyScope::Output);
        assert!(!p.is_greedy());
        assert!(SamplingParams::greedy().is_greedy());
        assert_eq!(SamplingParams { top_k: Some(0), ..p.clone() }.top_k(), None);
        assert_eq!(SamplingParams { top_k: Some(3), ..p }.top_k(), Some(3));
    }

    #[test]
    fn validation_names_the_knob() {
        let d = SamplingParams::default;
        assert!(err(SamplingParams { temperature: -0.1, ..d() }).starts_with("temperature"));
        assert!(err(SamplingParams { temperature: f32::NAN, ..d() }).starts_with("temperature"));
        assert!(err(SamplingParams { temperature: f32::INFINITY, ..d() }).starts_with("temperature"));
        assert!(err(SamplingParams { top_p: 0.0, ..d() }).starts_with("top_p"));
        assert!(err(SamplingParams { top_p: 1.01, ..d() }).starts_with("top_p"));
        assert!(err(SamplingParams { top_p: f32::NAN, ..d() }).starts_with("top_p"));
        assert!(err(SamplingParams { min_p: -0.01, ..d() }).starts_with("min_p"));
        assert!(err(SamplingParams { min_p: 1.5, ..d() }).starts_with("min_p"));
        assert!(err(SamplingParams { top_n_sigma: Some(0.0), ..d() }).starts_with("top_n_sigma"));
        assert!(err(SamplingParams { top_n_sigma: Some(-1.0), ..d() }).starts_with("top_n_sigma"));
        assert!(err(SamplingParams { repetition_penalty: 0.0, ..d() }).starts_with("repetition_penalty"));
        assert!(err(SamplingParams { repetition_penalty: -1.0, ..d() }).starts_with("repetition_penalty"));
        assert!(err(SamplingParams { frequency_penalty: 2.5, ..d() }).starts_with("frequency_penalty"));
        assert!(err(SamplingParams { presence_penalty: -2.01, ..d() }).starts_with("presence_penalty"));
        assert!(err(SamplingParams { top_logprobs: 21, ..d() }).starts_with("top_logprobs"));
        // The edges of each range are accepted.
        for ok in [
            SamplingParams { temperature: 0.0, top_p: 1.0, min_p: 1.0, ..d() },
            SamplingParams { frequency_penalty: -2.0, presence_penalty: 2.0, top_logprobs: 20, ..d() },
            SamplingParams { top_n_sigma: Some(1e-3), repetition_penalty: 1e-3, top_p: 1e-6, ..d() },
        ] {
            ok.validate().unwrap();
        }
    }

    #[test]
    fn serde_fills_defaults_and_uses_lowercase_scope() {
        let p: SamplingParams =
            serde_json::from_str(r#"{"temperature": 0.5, "penalty_scope": "both", "model": "x"}"#).unwrap();
        assert_eq!(p.temperature, 0.5);
        assert_eq!(p.penalty_scope, PenaltyScope::Both);
        assert_eq!(p.top_p, 1.0);
        let back: SamplingParams = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(back, p);
        assert!(serde_json::from_str::<SamplingParams>(r#"{"penalty_scope": "all"}"#).is_err());
    }
}
