//! Per-sequence bookkeeping shared by [`generate`](super::generate) and
//! [`beam_search`](super::beam_search): the tokens, their logprobs, penalty counts, the tokens
//! the model has not seen yet, and the streaming detokenizer; plus the constrained
//! fast-forward ([`prepare`], in steps: [`fast_forward`], [`fill_mask`], [`judge`]) and the
//! handling of one chosen token ([`append`]).

use super::detok::StreamDetokenizer;
use super::reasoning::Track;
use super::stops::StopStrings;
use std::time::{Duration, Instant};

use super::{Event, FinishReason, GenerateOptions, GeneratedToken, LanguageModel, MaskStats, Output, StoppedBy};
use crate::automaton::Matcher;
use crate::error::{Error, Result};
use crate::sample::TokenCounts;
use crate::vocab::{TokenId, TokenKind, TokenSet, Vocab};

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
            return Err(Error::param(format!(
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

    /// Errors unless the matcher can reach a complete output within `max_tokens`. The mask it
    /// computes for that counts in `stats`.
    pub fn check_completable(&self, m: &mut Matcher, mask: &mut TokenSet, stats: &mut MaskStats) -> Result<()> {
        if self.max_tokens == 0 {
            if m.is_accepting() {
                return Ok(());
            }
        } else {
            let t0 = Instant::now();
            m.fill_mask_within(mask, self.max_tokens);
            stats.add(t0.elapsed());
            if !mask.is_empty() || m.is_accepting() {
                return Ok(());
            }
        }
        m.fill_mask(mask);
        if mask.is_empty() && !m.is_accepting() {
            return Err(Error::param(match m.compiled().why_empty() {
                Some(why) => format!("the constraint matches no output at all: {why}"),
                None => "the constraint matches no output at all (from this point)".into(),
            }));
        }
        // The error path: the count costs a search, once. Without one the search gave up.
        // Where items or keys must be distinct the grammar alone (which cannot count repeats)
        // may allow fewer tokens than any output that keeps them distinct: both are said.
        let grammar = m.grammar_tokens_to_finish();
        let fits = |n: u32| n as usize <= self.max_tokens;
        let shortest = match (m.min_tokens_to_finish(), grammar) {
            (Some(n), Some(g)) if g < n && fits(g) => format!(
                " (the shortest found takes {n} tokens; the grammar alone allows {g}, but only by repeating items or keys that must be distinct)"
            ),
            (Some(n), _) if fits(n) => format!(
                " (the shortest the grammar allows takes {n} tokens, but none that fits keeps its items or keys distinct)"
            ),
            (Some(n), _) => format!(" (the shortest found takes {n} tokens)"),
            (None, _) => String::new(),
        };
        Err(Error::param(format!(
            "max_tokens {} is too small: no output this constraint allows fits in it{shortest}",
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
    pub masks: MaskStats,
    /// With a constraint and stop strings: where a stop string may end the output.
    stop_check: Option<StopCheck>,
    /// With a reasoning budget: where the output stands with its reasoning.
    reasoning: Option<Track>,
}

/// Says whether a constrained output may end at a given point, for stop strings: a second
/// matcher, fed the released text once (lazily, when a stop string completes), then the held
/// text before the stop on trial (rolled back after). A stop string where the text before it
/// is not a complete output is no stop: the output goes on, so a request's answer does not
/// depend on whether its sampled text happened to contain a stop string mid-structure.
#[derive(Clone)]
struct StopCheck {
    m: Matcher,
    /// How many released bytes `m` holds.
    fed: usize,
    /// `m` refused bytes it should have taken (a limit): no stop string applies any more.
    broken: bool,
}

impl std::fmt::Debug for StopCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StopCheck").field("fed", &self.fed).field("broken", &self.broken).finish_non_exhaustive()
    }
}

impl StopCheck {
    fn may_end(&mut self, released: &[u8], before: &[u8]) -> bool {
        if self.broken {
            return false;
        }
        if released.len() > self.fed {
            if self.m.commit_bytes(&released[self.fed..]).is_err() {
                self.broken = true;
                return false;
            }
            self.fed = released.len();
        }
        if before.is_empty() {
            return self.m.is_accepting();
        }
        if self.m.commit_bytes(before).is_err() {
            return false;
        }
        let complete = self.m.is_accepting();
        self.m.rollback(1).expect("one commit to undo");
        complete
    }
}

impl Sequence {
    /// A sequence after `prompt`; with `matcher` (the constraint, as the output starts) a stop
    /// string ends the output only where the constraint is complete.
    pub fn new(prompt: &[TokenId], stops: StopStrings, matcher: Option<&Matcher>, opts: &GenerateOptions) -> Sequence {
        let stop_check =
            matcher.filter(|_| !stops.is_empty()).map(|m| StopCheck { m: m.clone(), fed: 0, broken: false });
        Sequence {
            tokens: Vec::new(),
            logprobs: Vec::new(),
            counts: TokenCounts::from_prompt(prompt),
            pending: prompt.to_vec(),
            detok: StreamDetokenizer::new(stops)
                .showing(matcher.map_or_else(Vec::new, |m| m.compiled().named_tokens())),
            forced: 0,
            forward_passes: 0,
            masks: MaskStats::default(),
            stop_check,
            reasoning: opts.reasoning.clone().map(Track::new),
        }
    }

    /// Feeds the pending tokens to the model; `logits` gets the next position's row.
    pub fn forward(&mut self, model: &mut dyn LanguageModel, logits: &mut [f32]) -> Result<()> {
        model.forward(&self.pending, logits)?;
        self.forwarded();
        Ok(())
    }

    /// Records that the model has seen the pending tokens (a pass made by the caller).
    pub fn forwarded(&mut self) {
        self.pending.clear();
        self.forward_passes += 1;
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
        let matched = match &mut self.stop_check {
            Some(check) => self.detok.push_token_gated(vocab, t, &mut delta, &mut |r, b| check.may_end(r, b)),
            None => self.detok.push_token(vocab, t, &mut delta),
        };
        if !delta.is_empty() {
            emit(Event::Text(delta));
        }
        if let Some(r) = &mut self.reasoning {
            if vocab.kind(t) == TokenKind::Text {
                r.update(vocab.bytes(t), self.tokens.len());
            }
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
            masks: self.masks,
            speculation: Default::default(),
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

/// Everything before the model is asked: [`fast_forward`], then (with a matcher) the mask and
/// the cases where it leaves no choice ([`judge`]), until the model must choose or the output
/// is over. The serial composition of the steps [`Generation`](super::Generation) overlaps
/// with the forward pass.
pub(crate) fn prepare(
    ctx: &Ctx,
    mut matcher: Option<&mut Matcher>,
    seq: &mut Sequence,
    mask: &mut TokenSet,
    emit: &mut dyn FnMut(Event),
) -> Result<Next> {
    loop {
        let remaining = match fast_forward(ctx, matcher.as_deref_mut(), seq, emit)? {
            Ahead::End(end) => return Ok(Next::End(end)),
            Ahead::Choose => return Ok(Next::Choose),
            Ahead::Mask { remaining } => remaining,
        };
        let m = matcher.as_deref_mut().expect("a mask is asked for only with a matcher");
        seq.masks.add(fill_mask(ctx, m, mask, remaining));
        match judge(ctx, mask, m)? {
            Verdict::End(end) => return Ok(Next::End(end)),
            Verdict::Choose => return Ok(Next::Choose),
            Verdict::Only(t) => {
                if let Some(end) = append_forced(ctx, m, seq, t, emit)? {
                    return Ok(Next::End(end));
                }
            }
        }
    }
}

/// What comes next after [`fast_forward`].
pub(crate) enum Ahead {
    /// The output is over.
    End(End),
    /// Unconstrained: the model chooses among all tokens.
    Choose,
    /// Constrained: the next step needs the mask within `remaining` tokens ([`fill_mask`]).
    Mask { remaining: usize },
}

/// The budget, then (with a matcher) the forced run: every token of
/// [`Matcher::forced_tokens`] is committed and pushed (with logprob 0) through the same stop
/// checks as chosen ones. Needs no mask, so afterwards `seq.pending` is what the next forward
/// pass sees unless the mask leaves no choice.
pub(crate) fn fast_forward(
    ctx: &Ctx,
    mut matcher: Option<&mut Matcher>,
    seq: &mut Sequence,
    emit: &mut dyn FnMut(Event),
) -> Result<Ahead> {
    loop {
        let len = seq.tokens.len();
        if len >= ctx.max_tokens {
            return Ok(Ahead::End((FinishReason::Length, None)));
        }
        let remaining = ctx.max_tokens - len;
        // The reasoning's end marker when its budget is spent, else the constraint's forced
        // run; either is committed already, then pushed, and the loop counts again.
        let run = match reasoning_end(ctx, matcher.as_deref_mut(), seq, remaining) {
            Some(run) => run,
            None => {
                let Some(m) = matcher.as_deref_mut() else { return Ok(Ahead::Choose) };
                let forced = m.forced_tokens();
                if forced.is_empty() || !commit_forced_run(m, &forced, remaining)? {
                    return Ok(Ahead::Mask { remaining });
                }
                forced
            }
        };
        if let Some(end) = push_forced_run(ctx, matcher.as_deref_mut(), seq, &run, emit)? {
            return Ok(Ahead::End(end));
        }
    }
}

/// Pushes `run` (committed to `m` already) into the output as forced tokens; a stop string
/// ending inside it takes `m` back to the tokens the output kept, and is the end returned.
fn push_forced_run(
    ctx: &Ctx,
    m: Option<&mut Matcher>,
    seq: &mut Sequence,
    run: &[TokenId],
    emit: &mut dyn FnMut(Event),
) -> Result<Option<End>> {
    for (k, &t) in run.iter().enumerate() {
        if let Some(i) = seq.push(ctx.vocab, GeneratedToken::forced(t), emit) {
            if let Some(m) = m {
                m.rollback(run.len() - k - 1)?;
            }
            return Ok(Some(ctx.stopped_by_string(i)));
        }
    }
    Ok(None)
}

/// With a reasoning budget spent: the reasoning's end marker in tokens, committed to
/// `matcher` (if any), when it fits in `remaining` tokens with a complete output after it;
/// else the budget is given up (the mask, which keeps room for a complete output, decides
/// from then on) and `None`.
fn reasoning_end(
    ctx: &Ctx,
    matcher: Option<&mut Matcher>,
    seq: &mut Sequence,
    remaining: usize,
) -> Option<Vec<TokenId>> {
    let track = seq.reasoning.as_mut()?;
    let end = track.overdue(seq.tokens.len())?;
    let tokens = ctx.vocab.encode(end.as_bytes()).filter(|t| !t.is_empty() && t.len() <= remaining);
    let fits = match (tokens.as_deref(), matcher) {
        (None, _) => false,
        // A marker the constraint refuses here (an error, the matcher left as it was) is not
        // forced either.
        (Some(t), Some(m)) => commit_forced_run(m, t, remaining).unwrap_or(false),
        (Some(_), None) => true,
    };
    if !fits {
        track.give_up();
        return None;
    }
    tokens
}

/// Commits `forced` to the matcher when the output can still be finished within `remaining`
/// tokens after it, and says whether it did (else, or on a token the constraint refuses, which
/// is the error, the matcher is left as it was). The forced
/// bytes are tokenized canonically, which may take more tokens than the way the budget counted
/// (a lexeme's fewest tokens); where the run does not fit, the mask chooses instead (it only
/// allows tokens after which a completion fits).
fn commit_forced_run(m: &mut Matcher, forced: &[TokenId], remaining: usize) -> Result<bool> {
    if forced.len() > remaining {
        return Ok(false);
    }
    for (done, &t) in forced.iter().enumerate() {
        if let Err(e) = m.commit(t) {
            m.rollback(done)?;
            return Err(e);
        }
    }
    if m.can_finish_within(remaining - forced.len()) {
        return Ok(true);
    }
    m.rollback(forced.len())?;
    Ok(false)
}

/// Fills `mask` with the tokens allowed next within `remaining` tokens, stop tokens exactly
/// when the output is complete; returns the time it took. Touches nothing but `m` (whose
/// observable state it leaves as it was) and `mask`, so it may run on another thread while
/// the model runs.
pub(crate) fn fill_mask(ctx: &Ctx, m: &mut Matcher, mask: &mut TokenSet, remaining: usize) -> Duration {
    let t0 = Instant::now();
    m.fill_mask_within(mask, remaining);
    ctx.stop_tokens.apply_to_mask(mask, m.is_accepting());
    t0.elapsed()
}

/// What a mask leaves.
pub(crate) enum Verdict {
    /// Nothing, or nothing but a stop token, may come next: the output is over.
    End(End),
    /// Exactly one token, not a stop token: it is appended without a choice.
    Only(TokenId),
    /// A choice for the model.
    Choose,
}

/// Reads a mask filled by [`fill_mask`] (`accepting`: whether the matcher is). A mask that
/// allows nothing where the output is not complete is an error, never an ending: the
/// never-truncated rule promises it cannot happen, and an output cut there would not be valid.
pub(crate) fn judge(ctx: &Ctx, mask: &TokenSet, m: &Matcher) -> Result<Verdict> {
    let (allowed, accepting) = (mask.len(), m.is_accepting());
    if allowed == 0 && !accepting && m.refused_repeats() {
        return Err(Error::output(
            "no way on without repeating an earlier item of a list whose items must be distinct \
             (a JSON Schema `uniqueItems` array, an object's keys, or the tool calls of one reply): \
             the items allow too few distinct values here",
        ));
    }
    if allowed == 0 && !accepting {
        return Err(Error::state(
            "the constraint allows no token here and the output is not complete (an engine fault: \
             please report the constraint and the request)",
        ));
    }
    Ok(if allowed == 0 || ctx.stop_tokens.count_in(mask) == allowed {
        Verdict::End((FinishReason::Stop, Some(StoppedBy::Constraint)))
    } else if allowed == 1 {
        Verdict::Only(mask.iter().next().expect("one token allowed"))
    } else {
        Verdict::Choose
    })
}

/// Commits and pushes a token appended without a choice; returns the end if a stop string
/// completed.
pub(crate) fn append_forced(
    ctx: &Ctx,
    m: &mut Matcher,
    seq: &mut Sequence,
    t: TokenId,
    emit: &mut dyn FnMut(Event),
) -> Result<Option<End>> {
    m.commit(t)?;
    Ok(seq.push(ctx.vocab, GeneratedToken::forced(t), emit).map(|i| ctx.stopped_by_string(i)))
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
