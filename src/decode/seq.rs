//! Per-sequence bookkeeping shared by [`generate`](super::generate) and
//! [`beam_search`](super::beam_search): the tokens, their logprobs, penalty counts, the tokens
//! the model has not seen yet, and the streaming detokenizer; plus the constrained
//! fast-forward ([`prepare`]) and the handling of one chosen token ([`append`]).

use super::detok::StreamDetokenizer;
use super::stops::StopStrings;
use super::{Event, FinishReason, GenerateOptions, GeneratedToken, LanguageModel, Output, StoppedBy};
use crate::automaton::Matcher;
use crate::error::{Error, Result};
use crate::sample::TokenCounts;
use crate::vocab::{TokenId, TokenSet, Vocab};

/// How an output ended.
pub(crate) type End = (FinishReason, Option<StoppedBy>);

/// The stop token ids: the vocabulary's EOS ids and the extra ones, without repeats.
#[derive(Debug, Clone)]
pub(crate) struct StopTokens(Vec<TokenId>);

impl StopTokens {
    pub fn new(vocab: &Vocab, extra: &[TokenId]) -> StopTokens {
        let mut ids: Vec<TokenId> = vocab.eos().iter().chain(extra).copied().collect();
        ids.sort_unstable();
        ids.dedup();
        StopTokens(ids)
    }

    pub fn contains(&self, t: TokenId) -> bool {
        self.0.binary_search(&t).is_ok()
    }

    /// Makes the mask allow every stop token exactly when the output is complete: a stop token
    /// must never end a constrained output early, and an extra stop id that is also a text
    /// token is a stop, not text.
    pub fn apply_to_mask(&self, mask: &mut TokenSet, accepting: bool) {
        for &t in &self.0 {
            if (t.0 as usize) < mask.width() {
                if accepting {
                    mask.insert(t);
                } else {
                    mask.remove(t);
                }
            }
        }
    }

    /// How many stop tokens the mask allows.
    pub fn count_in(&self, mask: &TokenSet) -> usize {
        self.0.iter().filter(|&&t| mask.contains(t)).count()
    }
}

/// What stays the same for every sequence of one request.
pub(crate) struct Ctx<'v> {
    pub vocab: &'v Vocab,
    pub max_tokens: usize,
    pub stop_tokens: StopTokens,
    pub stop_strings: Vec<String>,
}

impl<'v> Ctx<'v> {
    /// Validates what does not depend on the sequence: the logits width, the stop strings.
    pub fn new(vocab: &'v Vocab, width: usize, opts: &GenerateOptions) -> Result<(Ctx<'v>, StopStrings)> {
        if width < vocab.len() {
            return Err(Error::invalid(format!(
                "model logits width {width} is smaller than the vocabulary ({})",
                vocab.len()
            )));
        }
        let stops = StopStrings::new(&opts.stop)?;
        let ctx = Ctx {
            vocab,
            max_tokens: opts.max_tokens,
            stop_tokens: StopTokens::new(vocab, &opts.stop_token_ids),
            stop_strings: opts.stop.clone(),
        };
        Ok((ctx, stops))
    }

    /// Errors unless the matcher can reach a complete output within `max_tokens`.
    pub fn check_completable(&self, m: &mut Matcher, mask: &mut TokenSet) -> Result<()> {
        if self.max_tokens == 0 {
            if m.is_accepting() {
                return Ok(());
            }
        } else {
            m.fill_mask_within(mask, self.max_tokens);
            if !mask.is_empty() || m.is_accepting() {
                return Ok(());
            }
        }
        m.fill_mask(mask);
        if mask.is_empty() && !m.is_accepting() {
            return Err(Error::invalid("the constraint matches no output at all (from this point)"));
        }
        Err(Error::invalid(format!(
            "max_tokens {} is too small: no output this constraint allows fits in it",
            self.max_tokens
        )))
    }

    fn stopped_by_string(&self, i: usize) -> End {
        (FinishReason::Stop, Some(StoppedBy::String(self.stop_strings[i].clone())))
    }
}

/// One sequence being generated.
#[derive(Debug, Clone)]
pub(crate) struct Sequence {
    pub tokens: Vec<TokenId>,
    pub logprobs: Vec<GeneratedToken>,
    pub counts: TokenCounts,
    /// Tokens appended since the model last saw the sequence (the prompt, at first).
    pub pending: Vec<TokenId>,
    pub detok: StreamDetokenizer,
    pub forced: usize,
    pub forward_passes: usize,
}

impl Sequence {
    pub fn new(prompt: &[TokenId], stops: StopStrings) -> Sequence {
        Sequence {
            tokens: Vec::new(),
            logprobs: Vec::new(),
            counts: TokenCounts::from_prompt(prompt),
            pending: prompt.to_vec(),
            detok: StreamDetokenizer::new(stops),
            forced: 0,
            forward_passes: 0,
        }
    }

    /// Feeds the pending tokens to the model; `logits` gets the next position's row.
    pub fn forward(&mut self, model: &mut dyn LanguageModel, logits: &mut [f32]) -> Result<()> {
        model.forward(&self.pending, logits)?;
        self.pending.clear();
        self.forward_passes += 1;
        Ok(())
    }

    /// Appends a (committed) token and reports it; returns the index of a stop string that
    /// completed.
    fn push(&mut self, vocab: &Vocab, g: GeneratedToken, emit: &mut dyn FnMut(Event)) -> Option<usize> {
        let t = g.token;
        self.tokens.push(t);
        self.counts.add_output(t);
        self.pending.push(t);
        self.forced += g.forced as usize;
        emit(Event::Token(g.clone()));
        self.logprobs.push(g);
        let mut delta = String::new();
        let matched = self.detok.push_token(vocab, t, &mut delta);
        if !delta.is_empty() {
            emit(Event::Text(delta));
        }
        matched
    }

    /// Ends the sequence: flushes held text and reports the end.
    pub fn finish(mut self, (reason, stopped_by): End, emit: &mut dyn FnMut(Event)) -> Output {
        let mut delta = String::new();
        self.detok.finish(&mut delta);
        if !delta.is_empty() {
            emit(Event::Text(delta));
        }
        emit(Event::Finish { reason, stopped_by: stopped_by.clone() });
        Output {
            tokens: self.tokens,
            bytes: self.detok.into_bytes(),
            finish_reason: reason,
            stopped_by,
            logprobs: self.logprobs,
            forced: self.forced,
            forward_passes: self.forward_passes,
        }
    }
}

/// What comes next after [`prepare`].
pub(crate) enum Next {
    /// The output is over.
    End(End),
    /// The model must choose; with a matcher, `mask` holds the allowed tokens.
    Choose,
}

/// Everything before the model is asked: the budget, then (with a matcher) forced tokens,
/// the mask, and the cases where the mask leaves no choice. Forced tokens are committed and
/// pushed (with logprob 0) through the same stop checks as chosen ones.
pub(crate) fn prepare(
    ctx: &Ctx,
    mut matcher: Option<&mut Matcher>,
    seq: &mut Sequence,
    mask: &mut TokenSet,
    emit: &mut dyn FnMut(Event),
) -> Result<Next> {
    loop {
        let len = seq.tokens.len();
        if len >= ctx.max_tokens {
            return Ok(Next::End((FinishReason::Length, None)));
        }
        let remaining = ctx.max_tokens - len;
        let Some(m) = matcher.as_deref_mut() else { return Ok(Next::Choose) };
        let mut forced = m.forced_tokens();
        if !forced.is_empty() {
            // The budget rule keeps the forced run within `remaining`; the cut is a safety net.
            forced.truncate(remaining);
            for t in forced {
                m.commit(t)?;
                if let Some(i) = seq.push(ctx.vocab, GeneratedToken::forced(t), emit) {
                    return Ok(Next::End(ctx.stopped_by_string(i)));
                }
            }
            continue;
        }
        m.fill_mask_within(mask, remaining);
        ctx.stop_tokens.apply_to_mask(mask, m.is_accepting());
        let allowed = mask.len();
        if allowed == 0 || ctx.stop_tokens.count_in(mask) == allowed {
            // Nothing, or nothing but a stop token, may come next: the choice is made.
            return Ok(Next::End((FinishReason::Stop, Some(StoppedBy::Constraint))));
        }
        if allowed == 1 {
            let t = mask.iter().next().expect("one token allowed");
            m.commit(t)?;
            if let Some(i) = seq.push(ctx.vocab, GeneratedToken::forced(t), emit) {
                return Ok(Next::End(ctx.stopped_by_string(i)));
            }
            continue;
        }
        return Ok(Next::Choose);
    }
}

/// Applies the model's choice: a stop token ends the output (uncommitted); any other token is
/// committed and pushed. Returns the end, if this was it.
pub(crate) fn append(
    ctx: &Ctx,
    matcher: Option<&mut Matcher>,
    seq: &mut Sequence,
    g: GeneratedToken,
    emit: &mut dyn FnMut(Event),
) -> Result<Option<End>> {
    let t = g.token;
    if ctx.stop_tokens.contains(t) {
        return Ok(Some((FinishReason::Stop, Some(StoppedBy::Token(t)))));
    }
    if let Some(m) = matcher {
        m.commit(t)?;
    }
    Ok(seq.push(ctx.vocab, g, emit).map(|i| ctx.stopped_by_string(i)))
}
