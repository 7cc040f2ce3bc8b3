//! [`Generation`]: the sampling loop as an iterator of [`Event`]s; [`generate`] and
//! [`generate_stream`] drive it to the end.
//!
//! One call to the iterator's `next` runs at most one step: the forced tokens and the
//! no-choice cases, then, if the model must choose, one forward pass and one draw. The events
//! a step produces are queued and handed out one at a time, so a server can pull them at its
//! own pace and cancel by dropping the `Generation`.
//!
//! A constrained step is [`fast_forward`], then the mask ([`fill_mask`]) and the forward pass
//! at once ([`mask_during_forward`], the pass speculative), then [`judge`]: if the mask leaves
//! a choice the pass is kept and the model draws; otherwise the pass is rewound and the step
//! goes on as [`prepare`] would (see [overlap](super#overlap)). Without overlap, the step is
//! exactly [`prepare`], then the pass.

use std::collections::VecDeque;
use std::time::Duration;

#[cfg(doc)]
use super::seq::prepare;
use super::seq::{append, append_forced, fast_forward, fill_mask, judge, Ahead, Ctx, End, Sequence, Verdict};
use super::speculate::{DraftModel, PromptLookup, Speculation};
use super::{Event, GenerateOptions, GeneratedToken, LanguageModel, Output, Overlap};
use crate::automaton::Matcher;
use crate::error::Result;
use crate::sample::Sampler;
use crate::vocab::{TokenId, TokenSet, Vocab};

/// Generates one output. `prompt` is fed to the model first; `matcher` (if any) constrains
/// every token and is left holding exactly the output's tokens.
///
/// Errors up front for a logits row narrower than the vocabulary, bad sampling parameters or
/// stop strings, and a constraint with no complete output within `max_tokens`; later only if
/// the model fails.
pub fn generate(
    model: &mut dyn LanguageModel,
    vocab: &Vocab,
    matcher: Option<&mut Matcher>,
    prompt: &[TokenId],
    opts: &GenerateOptions,
) -> Result<Output> {
    generate_stream(model, vocab, matcher, prompt, opts, |_| {})
}

/// [`generate`], calling `on_event` with every [`Event`] as it happens.
pub fn generate_stream(
    model: &mut dyn LanguageModel,
    vocab: &Vocab,
    matcher: Option<&mut Matcher>,
    prompt: &[TokenId],
    opts: &GenerateOptions,
    mut on_event: impl FnMut(&Event),
) -> Result<Output> {
    let mut g = Generation::new(model, vocab, matcher, prompt, opts)?;
    for ev in &mut g {
        on_event(&ev?);
    }
    Ok(g.into_output().expect("the events ran to Finish"))
}

/// One generation in progress: an iterator of [`Event`]s, ending with [`Event::Finish`] (or
/// with the first error, after which it yields nothing).
///
/// ```
/// use strictly::decode::{Event, GenerateOptions, Generation, ScriptedModel};
/// use strictly::{TokenId, Vocab};
/// let vocab = Vocab::from_byte_tokens(vec![b"Us".to_vec(), b"er".to_vec(), b" said".to_vec(), b"</s>".to_vec()], &[3]);
/// // Says "Us", "er", " said", then EOS.
/// let mut model = ScriptedModel::new(4, |h, l| l[h.len().min(3)] = 10.0);
/// let opts = GenerateOptions { stop: vec!["User:".into()], ..GenerateOptions::default() };
/// let mut g = Generation::new(&mut model, &vocab, None, &[], &opts).unwrap();
/// let texts: Vec<String> = g.by_ref().filter_map(|e| match e.unwrap() {
///     Event::Text(t) => Some(t),
///     _ => None,
/// }).collect();
/// // "Us" and "er" are held back while they could start "User:", then released together.
/// assert_eq!(texts, vec!["User said"]);
/// assert_eq!(g.into_output().unwrap().text(), "User said");
/// ```
pub struct Generation<'a> {
    model: &'a mut dyn LanguageModel,
    matcher: Option<&'a mut Matcher>,
    ctx: Ctx<'a>,
    sampler: Sampler,
    /// [`GenerateOptions::overlap`].
    overlap: Overlap,
    /// How long the last mask took (the up-front one, at first): what `overlap` decides on.
    last_mask: Duration,
    /// [`GenerateOptions::speculate`]'s state.
    spec: Option<Speculation>,
    max_tokens: usize,
    /// `None` once the output has ended.
    seq: Option<Sequence>,
    logits: Vec<f32>,
    mask: TokenSet,
    events: VecDeque<Event>,
    output: Option<Output>,
    failed: bool,
}

impl<'a> Generation<'a> {
    /// Validates everything (see [`generate`]) and sets up; the model is not called yet.
    pub fn new(
        model: &'a mut dyn LanguageModel,
        vocab: &'a Vocab,
        mut matcher: Option<&'a mut Matcher>,
        prompt: &[TokenId],
        opts: &GenerateOptions,
    ) -> Result<Generation<'a>> {
        let width = model.logits_width();
        let (ctx, stops) = Ctx::new(vocab, width, opts)?;
        if let Some(l) = &opts.speculate {
            l.validate()?;
        }
        let speculate = opts.speculate.or(opts.draft_model.as_ref().map(|_| PromptLookup::default()));
        let spec = match speculate {
            None => None,
            Some(l) => Some(Speculation::new(l, opts.draft_model.as_ref().map(DraftModel::make).transpose()?, width)?),
        };
        let mut sampler = Sampler::new(opts.sampling.clone())?;
        sampler.set_vocab(vocab);
        let mut mask = TokenSet::new(width);
        let mut seq = Sequence::new(prompt, stops, matcher.as_deref(), opts);
        if let Some(m) = matcher.as_deref_mut() {
            ctx.check_completable(m, &mut mask, &mut seq.masks)?;
        }
        let last_mask = seq.masks.time;
        Ok(Generation {
            model,
            matcher,
            ctx,
            sampler,
            overlap: if spec.is_some() { Overlap::Off } else { opts.overlap },
            last_mask,
            spec,
            max_tokens: opts.max_tokens,
            seq: Some(seq),
            logits: vec![0.0; width],
            mask,
            events: VecDeque::new(),
            output: None,
            failed: false,
        })
    }

    /// The output, once the [`Event::Finish`] event has been produced.
    pub fn output(&self) -> Option<&Output> {
        self.output.as_ref()
    }

    /// The output, once the [`Event::Finish`] event has been produced.
    pub fn into_output(self) -> Option<Output> {
        self.output
    }

    /// One step; its events go to the queue.
    fn step(&mut self) -> Result<()> {
        let seq = self.seq.as_mut().expect("step after the end");
        let events = &mut self.events;
        let mut emit = |e: Event| events.push_back(e);
        let model = &mut *self.model;
        // Until the model must draw (`None`, its pass made) or the output is over.
        let over: Option<End> = loop {
            let remaining = match fast_forward(&self.ctx, self.matcher.as_deref_mut(), seq, &mut emit)? {
                Ahead::End(end) => break Some(end),
                Ahead::Choose => {
                    let budget = self.max_tokens.saturating_sub(seq.tokens.len());
                    match &mut self.spec {
                        Some(s) => s.forward(
                            model,
                            seq,
                            &mut self.logits,
                            self.matcher.as_deref_mut(),
                            budget,
                            &self.ctx.stop_tokens,
                        )?,
                        None => seq.forward(model, &mut self.logits)?,
                    }
                    break None;
                }
                Ahead::Mask { remaining } => remaining,
            };
            let m = self.matcher.as_deref_mut().expect("a mask is asked for only with a matcher");
            // The pass over `seq.pending` is speculative: kept only if the mask leaves a choice.
            let speculative = self.overlap.wants(self.last_mask, seq.pending.len()) && model.checkpoint();
            let pass = if speculative {
                let (took, pass) =
                    mask_during_forward(&self.ctx, m, &mut self.mask, remaining, model, &seq.pending, &mut self.logits);
                self.last_mask = took;
                seq.masks.overlapped += 1;
                Some(pass)
            } else {
                self.last_mask = fill_mask(&self.ctx, m, &mut self.mask, remaining);
                None
            };
            seq.masks.add(self.last_mask);
            let verdict = judge(&self.ctx, &self.mask, m)?;
            if let Verdict::Choose = verdict {
                match pass {
                    Some(pass) => {
                        pass?;
                        seq.forwarded();
                    }
                    None => {
                        let budget = self.max_tokens.saturating_sub(seq.tokens.len());
                        match &mut self.spec {
                            Some(s) => {
                                s.forward(model, seq, &mut self.logits, Some(&mut *m), budget, &self.ctx.stop_tokens)?
                            }
                            None => seq.forward(model, &mut self.logits)?,
                        }
                    }
                }
                break None;
            }
            if speculative {
                // Without overlap this pass would not have run (yet): undo it, failed or not.
                model.rewind()?;
                seq.masks.rewound += 1;
            }
            match verdict {
                Verdict::End(end) => break Some(end),
                Verdict::Only(t) => {
                    if let Some(end) = append_forced(&self.ctx, m, seq, t, &mut emit)? {
                        break Some(end);
                    }
                }
                Verdict::Choose => unreachable!("handled above"),
            }
        };
        let end = match over {
            Some(end) => Some(end),
            None => {
                let mask = self.matcher.is_some().then_some(&self.mask);
                let c = self.sampler.sample(&mut self.logits, mask, &seq.counts)?;
                let g =
                    GeneratedToken { token: c.token, logprob: c.logprob, top_logprobs: c.top_logprobs, forced: false };
                append(&self.ctx, self.matcher.as_deref_mut(), seq, g, &mut emit)?
            }
        };
        if let Some(end) = end {
            self.end(end);
        }
        Ok(())
    }

    fn end(&mut self, end: End) {
        let seq = self.seq.take().expect("ends once");
        let events = &mut self.events;
        let mut out = seq.finish(end, &mut |e| events.push_back(e));
        out.speculation = self.spec.as_ref().map(|s| s.stats).unwrap_or_default();
        self.output = Some(out);
    }
}

impl Iterator for Generation<'_> {
    type Item = Result<Event>;

    fn next(&mut self) -> Option<Result<Event>> {
        loop {
            if let Some(e) = self.events.pop_front() {
                return Some(Ok(e));
            }
            if self.seq.is_none() || self.failed {
                return None;
            }
            if let Err(e) = self.step() {
                self.failed = true;
                self.events.clear();
                return Some(Err(e));
            }
        }
    }
}

/// Computes the mask ([`fill_mask`]) on a scoped thread while `model` runs its forward pass
/// over `pending` on this one; returns the mask's time and the pass's result once both are
/// done. Only the matcher and the mask cross to the other thread, so the model need not be
/// `Send`. A panic in the mask thread is resumed here.
fn mask_during_forward(
    ctx: &Ctx,
    m: &mut Matcher,
    mask: &mut TokenSet,
    remaining: usize,
    model: &mut dyn LanguageModel,
    pending: &[TokenId],
    logits: &mut [f32],
) -> (Duration, Result<()>) {
    std::thread::scope(|s| {
        let masking = s.spawn(|| fill_mask(ctx, m, mask, remaining));
        let pass = model.forward(pending, logits);
        let took = masking.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (took, pass)
    })
}
