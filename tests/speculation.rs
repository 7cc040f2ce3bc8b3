//! Prompt-lookup speculative decoding in the loop, with scripted models (issue 28): the same
//! tokens as without it, greedy or sampled, with or without a constraint and stop strings, in
//! fewer forward passes where the output copies its context; a model that cannot truncate gets
//! no drafts. (The embedded model and SmolLM2: `model`, `real_model`; the server: `server::batch`.)

use strictly::automaton::{Compiled, Constraint, VocabEnv};
use strictly::decode::{generate, GenerateOptions, LanguageModel, ScriptedModel};
use strictly::sample::SamplingParams;
use strictly::TokenId;

use crate::decode::{ids, vocab};

/// A scripted model that copies like an induction head (the token that followed the last
/// token's previous occurrence gets +3) over pseudo-random logits drawn from the history, so
/// sampling has real choices and drafts from the context are often right.
fn copier(h: &[TokenId], l: &mut [f32]) {
    let mut x = h.iter().fold(0xcbf2_9ce4_8422_2325u64, |a, t| (a ^ u64::from(t.0)).wrapping_mul(0x100_0000_01b3));
    for v in l.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *v = (x % 1000) as f32 / 400.0;
    }
    if let Some((&last, before)) = h.split_last() {
        if let Some(i) = before.iter().rposition(|&t| t == last) {
            l[h[i + 1].0 as usize] += 3.0;
        }
    }
}

/// A model that cannot truncate: it gets no drafts.
struct NoTruncate(ScriptedModel);

impl LanguageModel for NoTruncate {
    fn logits_width(&self) -> usize {
        self.0.logits_width()
    }
    fn forward(&mut self, tokens: &[TokenId], logits: &mut [f32]) -> strictly::Result<()> {
        self.0.forward(tokens, logits)
    }
    fn fork(&self) -> strictly::Result<Box<dyn LanguageModel>> {
        self.0.fork()
    }
    fn checkpoint(&mut self) -> bool {
        self.0.checkpoint()
    }
    fn rewind(&mut self) -> strictly::Result<()> {
        self.0.rewind()
    }
}

/// Prompt-lookup speculation changes no token, greedy or sampled, with or without a constraint
/// and stop strings; on a copying model it saves forward passes; a model that cannot truncate
/// decodes as without it.
#[test]
fn speculation_gives_the_same_tokens_in_fewer_passes() {
    use strictly::decode::PromptLookup;
    let v = vocab(&[b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"h", b"</s>"], &[8]);
    let prompt: Vec<TokenId> =
        [0, 1, 2, 3, 4, 5, 0, 1, 6, 7, 2, 3, 0, 1, 2, 5, 4, 3].iter().map(|&i| TokenId(i)).collect();
    let env = VocabEnv::new(v.clone());
    let compiled = Compiled::new(&env, &Constraint::Regex("[a-g]{6,40}(h|hh)".into())).unwrap();
    let (mut saved, mut kept) = (0usize, 0usize);
    for seed in 0..40u64 {
        for temperature in [0.0f32, 1.0] {
            for constrained in [false, true] {
                let base = GenerateOptions {
                    max_tokens: 48,
                    sampling: SamplingParams { temperature, seed: Some(seed), ..SamplingParams::default() },
                    stop: if seed % 3 == 0 { vec!["fa".into()] } else { Vec::new() },
                    ..GenerateOptions::default()
                };
                let spec = GenerateOptions { speculate: Some(PromptLookup::default()), ..base.clone() };
                let run = |model: &mut dyn LanguageModel, opts: &GenerateOptions| {
                    let mut m = compiled.matcher();
                    let m = constrained.then_some(&mut m);
                    generate(model, &v, m, &prompt, opts).unwrap()
                };
                let plain = run(&mut ScriptedModel::new(v.len(), copier), &base);
                let fast = run(&mut ScriptedModel::new(v.len(), copier), &spec);
                let slow = run(&mut NoTruncate(ScriptedModel::new(v.len(), copier)), &spec);
                let what = format!("seed {seed}, temperature {temperature}, constrained {constrained}");
                assert_eq!(ids(&fast), ids(&plain), "{what}: truncating model");
                assert_eq!(ids(&slow), ids(&plain), "{what}: a model that cannot truncate");
                assert_eq!((slow.speculation.passes, slow.forward_passes), (0, plain.forward_passes));
                assert_eq!(fast.finish_reason, plain.finish_reason, "{what}");
                assert_eq!(
                    fast.logprobs.iter().map(|g| g.logprob).collect::<Vec<_>>(),
                    plain.logprobs.iter().map(|g| g.logprob).collect::<Vec<_>>()
                );
                assert!(fast.forward_passes <= plain.forward_passes, "{what}");
                saved += plain.forward_passes - fast.forward_passes;
                kept += fast.speculation.accepted;
            }
        }
    }
    assert!(kept > 0 && saved >= kept / 2, "drafts kept {kept}, passes saved {saved}");
}

/// Drafts from a draft model (issue 28 item 2) change no token either, greedy or sampled, with
/// or without a constraint: a draft model that is the model itself (its greedy drafts are what
/// greedy decoding takes) saves passes; one that guesses otherwise (another script) saves fewer
/// and changes nothing; one of another vocabulary, or one that cannot truncate, is refused.
#[test]
fn a_draft_model_gives_the_same_tokens_in_fewer_passes() {
    use strictly::decode::DraftModel;
    let v = vocab(&[b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"h", b"</s>"], &[8]);
    let prompt: Vec<TokenId> = [0, 1, 2, 3, 4, 5, 0, 1, 6, 7].iter().map(|&i| TokenId(i)).collect();
    let env = VocabEnv::new(v.clone());
    let compiled = Compiled::new(&env, &Constraint::Regex("[a-g]{6,40}(h|hh)".into())).unwrap();
    let width = v.len();
    let same = DraftModel::new(move || Ok(Box::new(ScriptedModel::new(width, copier))));
    // Another script: the copier's logits reversed in part, so its guesses are right now and then.
    let other = DraftModel::new(move || {
        Ok(Box::new(ScriptedModel::new(width, |h, l| {
            copier(h, l);
            l.reverse();
        })))
    });
    let (mut saved_same, mut saved_other) = (0usize, 0usize);
    let mut greedy_plain_passes = 0;
    for seed in 0..20u64 {
        for temperature in [0.0f32, 1.0] {
            for constrained in [false, true] {
                let base = GenerateOptions {
                    max_tokens: 40,
                    sampling: SamplingParams { temperature, seed: Some(seed), ..SamplingParams::default() },
                    ..GenerateOptions::default()
                };
                let run = |draft: Option<&DraftModel>| {
                    let mut m = compiled.matcher();
                    let m = constrained.then_some(&mut m);
                    let opts = GenerateOptions { draft_model: draft.cloned(), ..base.clone() };
                    generate(&mut ScriptedModel::new(v.len(), copier), &v, m, &prompt, &opts).unwrap()
                };
                let plain = run(None);
                let what = format!("seed {seed}, temperature {temperature}, constrained {constrained}");
                for (draft, saved) in [(&same, &mut saved_same), (&other, &mut saved_other)] {
                    let out = run(Some(draft));
                    assert_eq!(ids(&out), ids(&plain), "{what}");
                    assert_eq!(out.finish_reason, plain.finish_reason, "{what}");
                    assert!(out.forward_passes <= plain.forward_passes, "{what}");
                    *saved += plain.forward_passes - out.forward_passes;
                }
                if temperature == 0.0 {
                    greedy_plain_passes += plain.forward_passes;
                }
            }
        }
    }
    // Greedy with itself as the draft: nearly every pass but one per draft is saved.
    assert!(saved_same * 2 > greedy_plain_passes, "saved {saved_same} of {greedy_plain_passes} greedy passes");
    assert!(saved_same > saved_other, "{saved_same} vs {saved_other}");
    // Refused drafts: another width, a model that cannot truncate.
    let narrow = DraftModel::new(|| Ok(Box::new(ScriptedModel::new(3, copier))));
    let stiff = DraftModel::new(move || Ok(Box::new(NoTruncate(ScriptedModel::new(width, copier)))));
    for (bad, says) in [(narrow, "vocabulary"), (stiff, "truncate")] {
        let opts = GenerateOptions { draft_model: Some(bad), ..GenerateOptions::default() };
        let e = generate(&mut ScriptedModel::new(v.len(), copier), &v, None, &prompt, &opts).unwrap_err();
        assert!(e.to_string().contains(says), "{e}");
    }
}
