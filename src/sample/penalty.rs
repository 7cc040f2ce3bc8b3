//! The penalties: [`RepetitionPenalty`], [`FrequencyPenalty`], [`PresencePenalty`].
//!
//! They work on the dense logits, after the mask, touching only the tokens that
//! [`TokenCounts::iter`] yields for the scope: each distinct counted token once. A masked token's
//! `-inf` stays `-inf` under every penalty. Token ids at or past the logits' length are skipped.

use super::params::{check_openai_penalty, check_repetition_penalty};
use super::{PenaltyScope, TokenCounts};
use crate::error::Result;

/// CTRL's repetition penalty (Keskar et al., 2019), as Hugging Face and vLLM apply it: for each
/// distinct counted token, a positive logit is divided by the penalty and a negative one is
/// multiplied by it. A token seen three times is penalised once, like a token seen once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RepetitionPenalty {
    penalty: f32,
}

impl RepetitionPenalty {
    /// `penalty > 0`; above 1 discourages repeats, below 1 encourages them, 1 does nothing.
    pub fn new(penalty: f32) -> Result<RepetitionPenalty> {
        check_repetition_penalty(penalty)?;
        Ok(RepetitionPenalty { penalty })
    }

    pub fn apply(&self, logits: &mut [f32], counts: &TokenCounts, scope: PenaltyScope) {
        for (t, _) in counts.iter(scope) {
            if let Some(l) = logits.get_mut(t.0 as usize) {
                *l = if *l > 0.0 { *l / self.penalty } else { *l * self.penalty };
            }
        }
    }
}

/// OpenAI's frequency penalty: `logit -= count · penalty`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FrequencyPenalty {
    penalty: f32,
}

impl FrequencyPenalty {
    /// `penalty` in `[-2, 2]`; negative values encourage repeats.
    pub fn new(penalty: f32) -> Result<FrequencyPenalty> {
        check_openai_penalty("frequency_penalty", penalty)?;
        Ok(FrequencyPenalty { penalty })
    }

    pub fn apply(&self, logits: &mut [f32], counts: &TokenCounts, scope: PenaltyScope) {
        for (t, n) in counts.iter(scope) {
            if let Some(l) = logits.get_mut(t.0 as usize) {
                *l -= n as f32 * self.penalty;
            }
        }
    }
}

/// OpenAI's presence penalty: `logit -= penalty` for every token counted at least once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PresencePenalty {
    penalty: f32,
}

impl PresencePenalty {
    /// `penalty` in `[-2, 2]`; negative values encourage repeats.
    pub fn new(penalty: f32) -> Result<PresencePenalty> {
        check_openai_penalty("presence_penalty", penalty)?;
        Ok(PresencePenalty { penalty })
    }

    pub fn apply(&self, logits: &mut [f32], counts: &TokenCounts, scope: PenaltyScope) {
        for (t, _) in counts.iter(scope) {
            if let Some(l) = logits.get_mut(t.0 as usize) {
                *l -= self.penalty;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::TokenId;

    fn close(a: &[f32], b: &[f32]) {
        assert_eq!(a.len(), b.len());
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(x == y || (x - y).abs() < 1e-4, "index {i}: {x} vs {y} (in {a:?} vs {b:?})");
        }
    }

    fn output(tokens: &[u32]) -> TokenCounts {
        let mut c = TokenCounts::new();
        tokens.iter().for_each(|&t| c.add_output(TokenId(t)));
        c
    }

    #[test]
    fn repetition_penalty_worked_numbers() {
        // Tokens 0..=3 seen (token 0 three times), token 4 unseen, token 5 masked.
        let counts = output(&[0, 0, 0, 1, 2, 3, 5]);
        let mut logits = vec![5.0, 3.0, 2.0, -1.0, 4.0, f32::NEG_INFINITY];
        RepetitionPenalty::new(1.5).unwrap().apply(&mut logits, &counts, PenaltyScope::Output);
        close(&logits, &[3.3333, 2.0, 1.3333, -1.5, 4.0, f32::NEG_INFINITY]);
        // Penalised once, not three times: 5 / 1.5^3 would be 1.48.
        assert!((logits[0] - 5.0 / 1.5).abs() < 1e-6);
    }

    #[test]
    fn repetition_penalty_respects_scope() {
        let mut counts = TokenCounts::from_prompt(&[TokenId(0)]);
        counts.add_output(TokenId(1));
        let p = RepetitionPenalty::new(2.0).unwrap();
        for (scope, want) in [
            (PenaltyScope::Output, [4.0, 2.0, 4.0]),
            (PenaltyScope::Prompt, [2.0, 4.0, 4.0]),
            (PenaltyScope::Both, [2.0, 2.0, 4.0]),
        ] {
            let mut logits = vec![4.0; 3];
            p.apply(&mut logits, &counts, scope);
            close(&logits, &want);
        }
    }

    #[test]
    fn frequency_and_presence_arithmetic() {
        // Token 0 seen 3 times, token 1 once, token 2 never; an id past the logits is ignored.
        let counts = output(&[0, 1, 0, 0, 99]);
        let mut logits = vec![1.0, 1.0, 1.0];
        FrequencyPenalty::new(0.5).unwrap().apply(&mut logits, &counts, PenaltyScope::Output);
        close(&logits, &[-0.5, 0.5, 1.0]);
        PresencePenalty::new(0.25).unwrap().apply(&mut logits, &counts, PenaltyScope::Output);
        close(&logits, &[-0.75, 0.25, 1.0]);
        // Negative penalties reward repeats.
        let mut logits = vec![0.0, 0.0, 0.0];
        FrequencyPenalty::new(-2.0).unwrap().apply(&mut logits, &counts, PenaltyScope::Output);
        PresencePenalty::new(-1.0).unwrap().apply(&mut logits, &counts, PenaltyScope::Output);
        close(&logits, &[7.0, 3.0, 0.0]);
        // Prompt tokens do not count under the Output scope.
        let prompt = TokenCounts::from_prompt(&[TokenId(2)]);
        let mut logits = vec![0.0, 0.0, 0.0];
        FrequencyPenalty::new(1.0).unwrap().apply(&mut logits, &prompt, PenaltyScope::Output);
        close(&logits, &[0.0, 0.0, 0.0]);
        FrequencyPenalty::new(1.0).unwrap().apply(&mut logits, &prompt, PenaltyScope::Both);
        close(&logits, &[0.0, 0.0, -1.0]);
    }

    #[test]
    fn constructors_validate() {
        assert!(RepetitionPenalty::new(0.0).is_err());
        assert!(FrequencyPenalty::new(2.5).is_err());
        assert!(PresencePenalty::new(f32::NAN).is_err());
    }
}
