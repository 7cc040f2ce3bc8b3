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
        return Err(Error::invalid(format!("beam width must be in 1..={MAX_BEAM_WIDTH}, got {b}")));
    }
    let alpha = beam.length_penalty as f64;
    if !alpha.is_finite() {
        return Err(Error::invalid(format!("length_penalty must be finite, got {alpha}")));
    }
    let width = model.logits_width();
    let (ctx, stops) = Ctx::new(vocab, width, opts)?;
    // Nothing is drawn, so a fixed seed spares the operating system's entropy source.
    let mut sampler = Sampler::new(SamplingParams { seed: Some(0), ..opts.sampling.clone() })?;
    let mut mask = TokenSet::new(width);
    let mut root = Sequence::new(prompt, stops);
    if let Some(m) = matcher.as_deref_mut() {
        ctx.check_completable(m, &mut mask, &mut root.masks)?;
    }
    let mut logits = vec![0f32; width];
    let n_top = opts.sampling.top_logprobs;
    let per_beam = 2 * b;
    let norm = |sum: f64, len: usize| sum / (len.max(1) as f64).powf(alpha);
    let close = |matcher: Option<Matcher>, seq: Sequence, sum: f64, end: End| {
        let ends_with_stop_token = matches!(end.1, Some(StoppedBy::Token(_) | StoppedBy::Constraint));
        let scored_len = seq.tokens.len() + ends_with_stop_token as usize;
        let hyp = Hypothesis {
            score: norm(sum, scored_len),
            sum_logprob: sum,
            scored_len,
            output: seq.finish(end, &mut |_| {}),
        };
        (hyp, matcher)
    };

    let mut live = vec![Beam { model: model.fork()?, matcher: matcher.as_deref().cloned(), seq: root, sum: 0.0 }];
    let mut finished: Vec<(Hypothesis, Option<Matcher>)> = Vec::new();
    loop {
        // 1-2: fast-forward, stop checks, then one forward pass and the scores of each beam.
        let mut parents: Vec<Beam> = Vec::new();
        let mut tops: Vec<Vec<TokenLogprob>> = Vec::new();
        let mut cands: Vec<Candidate> = Vec::new();
        for mut beam in std::mem::take(&mut live) {
            match prepare(&ctx, beam.matcher.as_mut(), &mut beam.seq, &mut mask, &mut |_| {})? {
                Next::End(end) => finished.push(close(beam.matcher, beam.seq, beam.sum, end)),
                Next::Choose => {
                    beam.seq.forward(&mut *beam.model, &mut logits)?;
                    let m = beam.matcher.is_some().then_some(&mask);
                    let mut c = sampler.process(&mut logits, m, &beam.seq.counts)?.clone();
                    let lse = c.log_sum_exp();
                    let top: Vec<TokenLogprob> = c
                        .sort_prefix(per_beam.max(n_top))
                        .iter()
                        .map(|x| TokenLogprob { token: x.id, logprob: (x.logit as f64 - lse) as f32 })
                        .collect();
                    for t in top.iter().take(per_beam) {
                        cands.push(Candidate {
                            parent: parents.len(),
                            token: t.token,
                            logprob: t.logprob,
                            score: beam.sum + t.logprob as f64,
                        });
                    }
                    tops.push(top);
                    parents.push(beam);
                }
            }
        }
        if parents.is_empty() {
            break;
        }

        // 3: rank all candidates (a stable sort keeps beam order, then rank order, for ties).
        cands.sort_by(|x, y| y.score.total_cmp(&x.score));
        let mut chosen: Vec<Candidate> = Vec::with_capacity(b);
        for (rank, c) in cands.iter().enumerate() {
            if chosen.len() == b {
                break;
            }
            if ctx.stop_tokens.contains(c.token) {
                if rank < b {
                    let p = &parents[c.parent];
                    let end = (FinishReason::Stop, Some(StoppedBy::Token(c.token)));
                    finished.push(close(p.matcher.clone(), p.seq.clone(), c.score, end));
                }
            } else {
                chosen.push(*c);
            }
        }
        let mut uses = vec![0usize; parents.len()];
        chosen.iter().for_each(|c| uses[c.parent] += 1);
        let mut slots: Vec<Option<Beam>> = parents.into_iter().map(Some).collect();
        for c in chosen {
            uses[c.parent] -= 1;
            let mut child = if uses[c.parent] == 0 {
                slots[c.parent].take().expect("a parent is moved out once, last")
            } else {
                let p = slots[c.parent].as_ref().expect("still here");
                Beam { model: p.model.fork()?, matcher: p.matcher.clone(), seq: p.seq.clone(), sum: p.sum }
            };
            child.sum = c.score;
            let top = &tops[c.parent];
            let g = GeneratedToken {
                token: c.token,
                logprob: c.logprob,
                top_logprobs: top[..n_top.min(top.len())].to_vec(),
                forced: false,
            };
            match append(&ctx, child.matcher.as_mut(), &mut child.seq, g, &mut |_| {})? {
                Some(end) => finished.push(close(child.matcher, child.seq, child.sum, end)),
                None => live.push(child),
            }
        }

        // Stop once no live beam can still enter the best `b`.
        if finished.len() >= b && !live.is_empty() {
            let mut scores: Vec<f64> = finished.iter().map(|(h, _)| h.score).collect();
            scores.sort_by(|x, y| y.total_cmp(x));
            let worst = scores[b - 1];
            let best_possible = |beam: &Beam| {
                let shortest = beam.seq.tokens.len().max(1);
                let longest = ctx.max_tokens + 1;
                norm(beam.sum, if alpha > 0.0 { longest } else { shortest })
            };
            if live.iter().all(|beam| best_possible(beam) <= worst) {
                break;
            }
        }
        if live.is_empty() {
            break;
        }
    }

    // Stable: among equal scores, the one finished first stays first.
    finished.sort_by(|(x, _), (y, _)| y.score.total_cmp(&x.score));
    finished.truncate(b);
    if let (Some(m), Some((_, Some(best)))) = (matcher, finished.first()) {
        *m = best.clone();
    }
    Ok(finished.into_iter().map(|(h, _)| h).collect())
}
