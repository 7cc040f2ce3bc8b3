//! [`beam_search`]: keep the `width` best partial outputs instead of one, and return the best
//! finished ones by length-normalised score.
//!
//! Each beam owns a fork of the model ([`LanguageModel::fork`]: its KV cache so far), its own
//! [`Matcher`] (a clone: matchers are cheap to clone), its own penalty counts and its own
//! stop-string scanner. One step:
//!
//! 1. Every live beam runs the constrained fast-forward (forced tokens, logprob 0) and the stop
//!    checks, exactly as [`generate`](super::generate) does; beams that end are finished.
//! 2. Each remaining beam makes one forward pass. Its logits go through the sampling chain
//!    without the draw ([`Sampler::process`]: the mask, penalties, temperature and truncation),
//!    and the log-softmax of what survives scores its `2 · width` best tokens.
//! 3. All candidates (beam, token) are ranked by cumulative logprob (ties: earlier beam, then
//!    more likely token, then lower id). A stop token among the first `width` ranks finishes
//!    that beam; the first `width` non-stop candidates become the next beams. A parent chosen
//!    `k` times is forked `k - 1` times and moved into its last child, so the model state is
//!    never re-run.
//!
//! In the code, a `Search` holds what is fixed and what is finished; its `expand` is steps 1-2,
//! `rank` and `branch` step 3, and `settled` the stopping test below.
//!
//! Scores. A finished output scores `sum of logprobs / len^alpha`, `alpha` =
//! [`BeamOptions::length_penalty`], default 1.0 (the mean logprob per token; 0 is the raw sum,
//! which favours short outputs). `len` counts the decisions in the sum: the generated tokens,
//! plus one for the stop token when a stop token ended the output (chosen, or the only thing the
//! constraint allowed: logprob 0). Forced tokens count in `len` with logprob 0.
//!
//! When it stops: when no beam is live, or once `width` outputs are finished and no live beam
//! can still beat the worst of them. That test is exact, not a heuristic: logprobs are `<= 0`,
//! so a live beam's sum can only fall, and its best possible score is its sum over the most
//! favourable length still reachable (up to `max_tokens + 1`).
//!
//! Determinism: no randomness at all (the sampler's RNG is never drawn from).
//!
//! Beam search is still a search with a fixed width: it finds outputs greedy decoding misses,
//! not necessarily the best output overall.

use super::seq::{append, prepare, Ctx, End, Next, Sequence};
use super::{FinishReason, GenerateOptions, GeneratedToken, LanguageModel, Output, StoppedBy};
use crate::automaton::Matcher;
use crate::error::{Error, Result};
use crate::sample::{Sampler, SamplingParams, TokenLogprob};
use crate::vocab::{TokenId, TokenSet, Vocab};

/// The widest beam accepted.
pub const MAX_BEAM_WIDTH: usize = 64;

/// Beam search's own knobs; the rest comes from [`GenerateOptions`].
#[derive(Debug, Clone, PartialEq)]
pub struct BeamOptions {
    /// How many beams to keep, and how many outputs to return: `1..=`[`MAX_BEAM_WIDTH`].
    /// Default 4.
    pub width: usize,
    /// `alpha` in `score = sum logprob / len^alpha`. Finite; default 1.0 (mean logprob per
    /// token); 0 scores by the raw sum; larger values favour longer outputs.
    pub length_penalty: f32,
}

impl Default for BeamOptions {
    fn default() -> BeamOptions {
        BeamOptions { width: 4, length_penalty: 1.0 }
    }
}

/// One finished output of beam search.
#[derive(Debug, Clone)]
pub struct Hypothesis {
    /// The output (its `forward_passes` are those along this beam's ancestry).
    pub output: Output,
    /// `sum_logprob / scored_len^alpha`: what the hypotheses are ranked by.
    pub score: f64,
    /// The sum of the logprobs of every decision, the stop token's included.
    pub sum_logprob: f64,
    /// The number of decisions in the sum (see the module docs).
    pub scored_len: usize,
}

struct Beam {
    model: Box<dyn LanguageModel>,
    matcher: Option<Matcher>,
    seq: Sequence,
    sum: f64,
}

#[derive(Clone, Copy)]
struct Candidate {
    parent: usize,
    token: TokenId,
    logprob: f32,
    score: f64,
}

/// One step's expansion (steps 1-2): the beams that made a forward pass, each one's top
/// tokens (by index), and every (beam, token) candidate.
struct Expansion {
    parents: Vec<Beam>,
    tops: Vec<Vec<TokenLogprob>>,
    cands: Vec<Candidate>,
}

/// A finished output, and the matcher that produced it (handed back for the best one).
type Finished = (Hypothesis, Option<Matcher>);

/// Beam search from `prompt`. Returns up to `beam.width` finished outputs, best first.
///
/// `model` is only forked, never advanced: every beam runs on its own fork. With a `matcher`,
/// every beam is constrained by its own clone, and afterwards `matcher` holds the best output.
/// `opts` as for [`generate`](super::generate), except that nothing is drawn: the seed is
/// unused, and the temperature and truncation knobs only reshape the scores. Beam search is
/// usually run with [`SamplingParams::greedy`] (no temperature, no truncation).
pub fn beam_search(
    model: &dyn LanguageModel,
    vocab: &Vocab,
    mut matcher: Option<&mut Matcher>,
    prompt: &[TokenId],
    opts: &GenerateOptions,
    beam: &BeamOptions,
) -> Result<Vec<Hypothesis>> {
    let b = beam.width;
    if b == 0 || b > MAX_BEAM_WIDTH {
        return Err(Error::param(format!("beam width must be in 1..={MAX_BEAM_WIDTH}, got {b}")));
    }
    let alpha = beam.length_penalty as f64;
    if !alpha.is_finite() {
        return Err(Error::param(format!("length_penalty must be finite, got {alpha}")));
    }
    let width = model.logits_width();
    let (ctx, stops) = Ctx::new(vocab, width, opts)?;
    let mut search = Search {
        ctx: &ctx,
        b,
        alpha,
        n_top: opts.sampling.top_logprobs,
        // Nothing is drawn, so a fixed seed spares the operating system's entropy source.
        sampler: Sampler::new(SamplingParams { seed: Some(0), ..opts.sampling.clone() })?,
        mask: TokenSet::new(width),
        logits: vec![0f32; width],
        finished: Vec::new(),
    };
    search.sampler.set_vocab(vocab);
    let mut root = Sequence::new(prompt, stops, matcher.as_deref(), opts);
    if let Some(m) = matcher.as_deref_mut() {
        ctx.check_completable(m, &mut search.mask, &mut root.masks)?;
    }
    let mut live = vec![Beam { model: model.fork()?, matcher: matcher.as_deref().cloned(), seq: root, sum: 0.0 }];
    loop {
        let mut step = search.expand(live)?;
        if step.parents.is_empty() {
            break;
        }
        let chosen = search.rank(&mut step);
        live = search.branch(step, chosen)?;
        if live.is_empty() || search.settled(&live) {
            break;
        }
    }

    // Stable: among equal scores, the one finished first stays first.
    let mut finished = search.finished;
    finished.sort_by(|(x, _), (y, _)| y.score.total_cmp(&x.score));
    finished.truncate(b);
    if let (Some(m), Some((_, Some(best)))) = (matcher, finished.first()) {
        *m = best.clone();
    }
    Ok(finished.into_iter().map(|(h, _)| h).collect())
}

/// A beam search in progress: its fixed settings, scratch space, and the outputs finished.
struct Search<'c, 'v> {
    ctx: &'c Ctx<'v>,
    /// The beam width.
    b: usize,
    /// The length penalty.
    alpha: f64,
    /// `top_logprobs` per generated token.
    n_top: usize,
    sampler: Sampler,
    mask: TokenSet,
    logits: Vec<f32>,
    finished: Vec<Finished>,
}

impl Search<'_, '_> {
    /// `sum / len^alpha`.
    fn norm(&self, sum: f64, len: usize) -> f64 {
        sum / (len.max(1) as f64).powf(self.alpha)
    }

    /// Finishes a beam's output as a [`Hypothesis`].
    fn close(&mut self, matcher: Option<Matcher>, seq: Sequence, sum: f64, end: End) {
        let ends_with_stop_token = matches!(end.1, Some(StoppedBy::Token(_) | StoppedBy::Constraint));
        let scored_len = seq.tokens.len() + ends_with_stop_token as usize;
        let hyp = Hypothesis {
            score: self.norm(sum, scored_len),
            sum_logprob: sum,
            scored_len,
            output: seq.finish(end, &mut |_| {}),
        };
        self.finished.push((hyp, matcher));
    }

    /// Steps 1-2: each live beam's fast-forward and stop checks (ended beams are finished),
    /// then one forward pass, and the scores of its `2 · width` best tokens.
    fn expand(&mut self, live: Vec<Beam>) -> Result<Expansion> {
        let per_beam = 2 * self.b;
        let mut step = Expansion { parents: Vec::new(), tops: Vec::new(), cands: Vec::new() };
        for mut beam in live {
            match prepare(self.ctx, beam.matcher.as_mut(), &mut beam.seq, &mut self.mask, &mut |_| {})? {
                Next::End(end) => self.close(beam.matcher, beam.seq, beam.sum, end),
                Next::Choose => {
                    beam.seq.forward(&mut *beam.model, &mut self.logits)?;
                    let m = beam.matcher.is_some().then_some(&self.mask);
                    let mut c = self.sampler.process(&mut self.logits, m, &beam.seq.counts)?.clone();
                    let lse = c.log_sum_exp();
                    let top: Vec<TokenLogprob> = c
                        .sort_prefix(per_beam.max(self.n_top))
                        .iter()
                        .map(|x| TokenLogprob { token: x.id, logprob: (x.logit as f64 - lse) as f32 })
                        .collect();
                    for t in top.iter().take(per_beam) {
                        step.cands.push(Candidate {
                            parent: step.parents.len(),
                            token: t.token,
                            logprob: t.logprob,
                            score: beam.sum + t.logprob as f64,
                        });
                    }
                    step.tops.push(top);
                    step.parents.push(beam);
                }
            }
        }
        Ok(step)
    }

    /// Step 3: ranks all candidates (a stable sort keeps beam order, then rank order, for
    /// ties); a stop token among the first `width` ranks finishes its beam; returns the first
    /// `width` non-stop candidates.
    fn rank(&mut self, step: &mut Expansion) -> Vec<Candidate> {
        let mut cands = std::mem::take(&mut step.cands);
        cands.sort_by(|x, y| y.score.total_cmp(&x.score));
        let mut chosen: Vec<Candidate> = Vec::with_capacity(self.b);
        for (rank, c) in cands.iter().enumerate() {
            if chosen.len() == self.b {
                break;
            }
            if self.ctx.stop_tokens.contains(c.token) {
                if rank < self.b {
                    let p = &step.parents[c.parent];
                    let end = (FinishReason::Stop, Some(StoppedBy::Token(c.token)));
                    self.close(p.matcher.clone(), p.seq.clone(), c.score, end);
                }
            } else {
                chosen.push(*c);
            }
        }
        chosen
    }

    /// The next beams: each chosen candidate appended to its parent. A parent chosen `k` times
    /// is forked `k - 1` times and moved into its last child, so no model state is re-run.
    fn branch(&mut self, step: Expansion, chosen: Vec<Candidate>) -> Result<Vec<Beam>> {
        let mut uses = vec![0usize; step.parents.len()];
        chosen.iter().for_each(|c| uses[c.parent] += 1);
        let mut slots: Vec<Option<Beam>> = step.parents.into_iter().map(Some).collect();
        let mut live = Vec::with_capacity(chosen.len());
        for c in chosen {
            uses[c.parent] -= 1;
            let mut child = if uses[c.parent] == 0 {
                slots[c.parent].take().expect("a parent is moved out once, last")
            } else {
                let p = slots[c.parent].as_ref().expect("still here");
                Beam { model: p.model.fork()?, matcher: p.matcher.clone(), seq: p.seq.clone(), sum: p.sum }
            };
            child.sum = c.score;
            let top = &step.tops[c.parent];
            let g = GeneratedToken {
                token: c.token,
                logprob: c.logprob,
                top_logprobs: top[..self.n_top.min(top.len())].to_vec(),
                forced: false,
            };
            match append(self.ctx, child.matcher.as_mut(), &mut child.seq, g, &mut |_| {})? {
                Some(end) => self.close(child.matcher, child.seq, child.sum, end),
                None => live.push(child),
            }
        }
        Ok(live)
    }

    /// Whether the search is over: `width` outputs are finished and no live beam can still
    /// enter the best `width` (see the module docs: exact, since logprobs are `<= 0`).
    fn settled(&self, live: &[Beam]) -> bool {
        if self.finished.len() < self.b {
            return false;
        }
        let mut scores: Vec<f64> = self.finished.iter().map(|(h, _)| h.score).collect();
        scores.sort_by(|x, y| y.total_cmp(x));
        let worst = scores[self.b - 1];
        let best_possible = |beam: &Beam| {
            let shortest = beam.seq.tokens.len().max(1);
            let longest = self.ctx.max_tokens + 1;
            self.norm(beam.sum, if self.alpha > 0.0 { longest } else { shortest })
        };
        live.iter().all(|beam| best_possible(beam) <= worst)
    }
}
