//! Prompt-lookup speculative decoding: fewer forward passes per token where the output copies
//! its context (JSON fields taken from a paragraph, code edited in place).
//!
//! At a forward pass, [`PromptLookup`] looks for the context's last `n` tokens earlier in the
//! context (prompt and output so far, the longest `n` first, the latest place first) and takes
//! the tokens that followed as a draft; the draft is cut at the first token the constraint
//! forbids, and at the output's token budget. The model runs the pending tokens and the draft in
//! one pass ([`LanguageModel::forward_rows`]), which gives the logits after each draft token
//! too. The loop then goes on exactly as without a draft: it samples from the logits it has,
//! appends, fast-forwards, masks; when it next needs logits and its new tokens are the draft's
//! next ones, it takes the row the pass already computed instead of running the model. At the
//! first difference the rest of the draft is dropped from the model
//! ([`LanguageModel::truncate`]). A model that cannot truncate, and the first pass (the prompt),
//! carry no draft.
//!
//! So the output is the same token for token as without speculation, greedy or sampled, for the
//! same seed: a draft never decides a token, it only computes ahead the logits that deciding
//! needs, provided the model's rows do not depend on how tokens are grouped into passes (the
//! scripted models; strictly's batched network on the CPU, which attends each row of a later
//! pass on its own, see `model::batch`; a GGUF model or `CandleModel::on_batch_net`; on a GPU
//! a row agrees to float tolerance, as its matmuls already do with other rows beside it). For a draft of one fixed token `d` (which is what a lookup proposes) this is the
//! standard speculative acceptance rule: `d` is kept exactly when the token drawn from the
//! processed distribution `p` is `d` (probability `p(d)`, the rule's `min(1, p(d)/q(d))` with
//! `q(d) = 1`), and otherwise the token drawn is distributed as `p` without `d`, renormalized
//! (the rule's residual).
//!
//! Drafts can come from a smaller model of the same vocabulary instead ([`DraftModel`],
//! [`GenerateOptions::draft_model`](super::GenerateOptions::draft_model)): it catches up with
//! the context (its cache truncated to what it shares with the loop's tokens, the rest run in
//! one pass), then proposes its greedy tokens under the constraint's mask, one pass each, up to
//! the draft's length. The verification is the same, so the output is too: a draft model only
//! changes how many passes of the large model the output takes.
//!
//! Invariants: the model's sequence is the loop's tokens but `pending`, except while a
//! [`Lookahead`] is kept: then it is the loop's tokens but `pending`, then the unverified draft
//! (`pending`, the tokens appended since, is compared against the draft at the next pass).

use std::sync::Arc;

use crate::automaton::Matcher;
use crate::error::{Error, Result};
use crate::vocab::{TokenId, TokenSet};

use super::seq::{Sequence, StopTokens};
use super::LanguageModel;

/// A model that drafts for speculation ([`GenerateOptions::draft_model`](super::GenerateOptions::draft_model)):
/// made fresh (its own cache) for each generation. It must share the large model's vocabulary
/// (the same logits width, checked) and be able to truncate its cache (GGUF models and the
/// batched network can).
#[derive(Clone)]
pub struct DraftModel {
    make: Arc<dyn Fn() -> Result<Box<dyn LanguageModel>> + Send + Sync>,
}

impl DraftModel {
    /// A draft model made by `make` (e.g. `move || Ok(Box::new(loaded.model.restart()))`).
    pub fn new(make: impl Fn() -> Result<Box<dyn LanguageModel>> + Send + Sync + 'static) -> DraftModel {
        DraftModel { make: Arc::new(make) }
    }

    pub(crate) fn make(&self) -> Result<Box<dyn LanguageModel>> {
        (self.make)()
    }
}

impl std::fmt::Debug for DraftModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DraftModel")
    }
}

/// A draft model in use: its model, the tokens its cache holds, its logits and a mask.
struct Drafter {
    model: Box<dyn LanguageModel>,
    tokens: Vec<TokenId>,
    logits: Vec<f32>,
    mask: TokenSet,
}

impl Drafter {
    /// Up to `n` greedy tokens after `context` under the constraint (none past a stop token).
    fn draft(
        &mut self,
        context: &[TokenId],
        n: usize,
        mut matcher: Option<&mut Matcher>,
        stops: &StopTokens,
    ) -> Result<Vec<TokenId>> {
        if n == 0 || context.is_empty() {
            return Ok(Vec::new());
        }
        // Catch up: keep what the cache shares with the context (less one token at least, so
        // there is a pass to give the next logits), run the rest.
        let shared = self.tokens.iter().zip(context).take_while(|(a, b)| a == b).count().min(context.len() - 1);
        self.model.truncate(self.tokens.len() - shared)?;
        self.tokens.truncate(shared);
        self.model.forward(&context[shared..], &mut self.logits)?;
        self.tokens.extend_from_slice(&context[shared..]);
        let mut draft = Vec::with_capacity(n);
        while draft.len() < n {
            if let Some(m) = matcher.as_deref_mut() {
                m.fill_mask(&mut self.mask);
            }
            let allowed = |t: usize| matcher.is_none() || self.mask.contains(TokenId(t as u32));
            let best = (0..self.logits.len())
                .filter(|&t| allowed(t))
                .max_by(|&a, &b| self.logits[a].total_cmp(&self.logits[b]).then(b.cmp(&a)));
            let Some(t) = best.map(|t| TokenId(t as u32)) else { break };
            if stops.contains(t) || matcher.as_deref_mut().is_some_and(|m| m.commit(t).is_err()) {
                break;
            }
            draft.push(t);
            if draft.len() < n {
                self.model.forward(&[t], &mut self.logits)?;
                self.tokens.push(t);
            }
        }
        if let Some(m) = matcher {
            m.rollback(draft.len()).expect("committed here");
        }
        Ok(draft)
    }
}

/// Where drafts come from: the context itself (n-gram lookup, no draft model).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PromptLookup {
    /// The most tokens a draft holds (a draft starts at two and grows while drafts are kept
    /// whole). Default 8.
    pub max_draft: usize,
    /// The longest context suffix looked up. Default 3.
    pub max_ngram: usize,
    /// The shortest context suffix looked up. Default 1.
    pub min_ngram: usize,
}

impl Default for PromptLookup {
    fn default() -> PromptLookup {
        PromptLookup { max_draft: 8, max_ngram: 3, min_ngram: 1 }
    }
}

impl PromptLookup {
    /// Checks the sizes, naming the one out of range.
    pub fn validate(&self) -> Result<()> {
        if self.max_draft == 0 || self.max_draft > 64 {
            return Err(Error::param(format!("the draft length must be in [1, 64], got {}", self.max_draft)));
        }
        if self.min_ngram == 0 || self.min_ngram > self.max_ngram || self.max_ngram > 16 {
            return Err(Error::param(format!(
                "the looked-up n-gram sizes must satisfy 1 <= min <= max <= 16, got {}..{}",
                self.min_ngram, self.max_ngram
            )));
        }
        Ok(())
    }

    /// The draft after `context`: the tokens that followed the latest earlier occurrence of its
    /// last `n` tokens, for the largest `n` that has one (empty if none).
    pub fn draft(&self, context: &[TokenId]) -> Vec<TokenId> {
        let len = context.len();
        for n in (self.min_ngram..=self.max_ngram).rev() {
            if len <= n {
                continue;
            }
            let suffix = &context[len - n..];
            if let Some(i) = (0..len - n).rev().find(|&i| &context[i..i + n] == suffix) {
                let start = i + n;
                return context[start..(start + self.max_draft).min(len)].to_vec();
            }
        }
        Vec::new()
    }
}

/// What speculation did in one output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpecStats {
    /// Passes that carried a draft.
    pub passes: usize,
    /// Draft tokens run through the model.
    pub drafted: usize,
    /// Draft tokens the output kept (each a forward pass saved).
    pub accepted: usize,
}

/// A draft the model has run and the loop has not yet caught up with.
struct Lookahead {
    /// The draft's tokens not yet matched by the loop, in the model's sequence.
    draft: Vec<TokenId>,
    /// The logits after each of `draft`, one row of the model's width each; `None`: the model
    /// computes them when asked ([`LanguageModel::deferred_row`]).
    rows: Option<Vec<f32>>,
    /// Draft tokens matched before `draft[0]` (the model's deferred rows count from the pass).
    taken: usize,
}

/// The loop's speculation state (see the module doc).
pub(crate) struct Speculation {
    lookup: PromptLookup,
    /// Drafts from a model rather than from the context.
    drafter: Option<Drafter>,
    ahead: Option<Lookahead>,
    /// The next draft's length at most: doubled (up to `max_draft`) when a draft was kept
    /// whole, cut to what was kept (at least one) when one missed; every row of a pass costs
    /// whether it is kept or not.
    cap: usize,
    pub stats: SpecStats,
}

impl Speculation {
    /// Speculation with drafts of `lookup`'s sizes, from the context or from `draft` (which
    /// must match `width`, the large model's logits width, and truncate).
    pub fn new(lookup: PromptLookup, draft: Option<Box<dyn LanguageModel>>, width: usize) -> Result<Speculation> {
        let drafter = match draft {
            None => None,
            Some(model) => {
                if model.logits_width() != width {
                    return Err(Error::param(format!(
                        "the draft model's vocabulary ({} logits) is not the model's ({width})",
                        model.logits_width()
                    )));
                }
                if !model.can_truncate() {
                    return Err(Error::param("the draft model cannot truncate its cache (use a GGUF model)"));
                }
                Some(Drafter { model, tokens: Vec::new(), logits: vec![0.0; width], mask: TokenSet::new(width) })
            }
        };
        Ok(Speculation { lookup, drafter, ahead: None, cap: lookup.max_draft.min(2), stats: SpecStats::default() })
    }

    /// Makes `logits` the row after the sequence's pending tokens, as [`Sequence::forward`]
    /// does, from a draft the model already ran where it can, else with a pass that carries a
    /// new draft. `budget`: the tokens the output may still append.
    pub fn forward(
        &mut self,
        model: &mut dyn LanguageModel,
        seq: &mut Sequence,
        logits: &mut [f32],
        matcher: Option<&mut Matcher>,
        budget: usize,
        stops: &StopTokens,
    ) -> Result<()> {
        let w = logits.len();
        if let Some(mut a) = self.ahead.take() {
            // Invariant: the model holds the loop's tokens up to `pending`, then `a.draft`.
            let p = a.draft.iter().zip(&seq.pending).take_while(|(x, y)| x == y).count();
            self.stats.accepted += p;
            if p > 0 && p == seq.pending.len() {
                // Every new token is the draft's: the pass computed what comes next.
                match &mut a.rows {
                    Some(rows) => {
                        logits.copy_from_slice(&rows[(p - 1) * w..p * w]);
                        rows.drain(..p * w);
                    }
                    None => model.deferred_row(a.taken + p, logits)?,
                }
                seq.pending.clear();
                if p < a.draft.len() {
                    a.draft.drain(..p);
                    a.taken += p;
                    self.ahead = Some(a);
                } else {
                    self.cap = (self.cap * 2).min(self.lookup.max_draft);
                }
                return Ok(());
            }
            // The loop went elsewhere: the draft's rest leaves the model.
            if p < a.draft.len() {
                self.cap = (a.taken + p).max(1);
            } else {
                self.cap = (self.cap * 2).min(self.lookup.max_draft);
            }
            model.truncate(a.draft.len() - p)?;
            seq.pending.drain(..p);
        }
        if seq.forward_passes == 0 || !model.can_truncate() {
            return seq.forward(model, logits);
        }
        let n = budget.saturating_sub(1).min(self.cap);
        let draft = match &mut self.drafter {
            Some(d) => d.draft(seq.counts.history(), n, matcher, stops)?,
            None => self.cut(self.lookup.draft(seq.counts.history()), matcher, budget),
        };
        if draft.is_empty() {
            return seq.forward(model, logits);
        }
        let mut tokens = seq.pending.clone();
        tokens.extend_from_slice(&draft);
        let n = draft.len() + 1;
        let ran = match model.forward_rows_deferred(&tokens, n, logits) {
            Ok(true) => Ok(None),
            Ok(false) => {
                let mut rows = vec![0f32; n * w];
                model.forward_rows(&tokens, n, &mut rows).map(|()| {
                    logits.copy_from_slice(&rows[..w]);
                    rows.drain(..w);
                    Some(rows)
                })
            }
            Err(e) => Err(e),
        };
        let rows = match ran {
            Ok(rows) => rows,
            // The context cannot take the draft: no draft then (nothing ran).
            Err(Error::Limit { .. }) => return seq.forward(model, logits),
            Err(e) => return Err(e),
        };
        self.stats.passes += 1;
        self.stats.drafted += draft.len();
        seq.forwarded();
        self.ahead = Some(Lookahead { draft, rows, taken: 0 });
        Ok(())
    }

    /// `draft` cut at the first token the constraint forbids (checked by committing and rolling
    /// back) and to `budget` tokens less the one the pass's own logits decide.
    fn cut(&self, mut draft: Vec<TokenId>, matcher: Option<&mut Matcher>, budget: usize) -> Vec<TokenId> {
        draft.truncate(budget.saturating_sub(1).min(self.cap));
        if let Some(m) = matcher {
            let n = draft.iter().take_while(|&&t| m.commit(t).is_ok()).count();
            m.rollback(n).expect("committed here");
            draft.truncate(n);
        }
        draft
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[u32]) -> Vec<TokenId> {
        v.iter().map(|&i| TokenId(i)).collect()
    }

    #[test]
    fn the_longest_suffix_found_latest_gives_the_draft() {
        let l = PromptLookup { max_draft: 3, ..PromptLookup::default() };
        // `1 2` occurred twice; the latest is followed by 7 8 9.
        assert_eq!(l.draft(&ids(&[1, 2, 5, 6, 1, 2, 7, 8, 9, 9, 1, 2])), ids(&[7, 8, 9]));
        // `3 1 2` beats `1 2`.
        assert_eq!(l.draft(&ids(&[3, 1, 2, 4, 1, 2, 5, 3, 1, 2])), ids(&[4, 1, 2]));
        // The draft stops at the context's end; nothing found: empty.
        assert_eq!(l.draft(&ids(&[5, 6, 5])), ids(&[6, 5]));
        assert_eq!(l.draft(&ids(&[1, 2, 3])), ids(&[]));
        assert_eq!(l.draft(&ids(&[])), ids(&[]));
    }

    #[test]
    fn sizes_are_checked() {
        assert!(PromptLookup::default().validate().is_ok());
        assert!(PromptLookup { max_draft: 0, ..PromptLookup::default() }.validate().is_err());
        assert!(PromptLookup { min_ngram: 4, max_ngram: 3, ..PromptLookup::default() }.validate().is_err());
    }
}
