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
