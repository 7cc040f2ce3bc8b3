//! Overlap (the mask computed on a second thread during the forward pass, the pass rewound when
//! the mask leaves no choice) never changes the output: the embedded stories260K model and
//! seeded random logits, constrained by a JSON schema and regexes, with forced tokens and stop
//! strings, give the same tokens, logprobs, events and forward passes with overlap on and off.

use std::sync::Arc;

use strictly::automaton::{Compiled, Constraint, VocabEnv};
use strictly::decode::{
    generate, generate_stream, Event, GenerateOptions, LanguageModel, Output, Overlap, RandomLogits, ScriptedModel,
    StoppedBy,
};
use strictly::model::{CandleModel, LoadOptions, LoadedModel};
use strictly::sample::SamplingParams;
use strictly::{TokenId, Vocab};

fn embedded() -> LoadedModel {
    LoadedModel::embedded(&LoadOptions::default()).expect("the embedded model loads")
}

fn story_schema() -> Constraint {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/story.schema.json")).unwrap();
    Constraint::JsonSchema(serde_json::from_str(&text).unwrap(), Default::default())
}

/// The constraints and stop strings the runs go through: a JSON schema (long forced runs: keys,
/// punctuation), the same with stop strings inside the constrained text (text there, never a
/// stop), and regexes, one with a stop (a space) that may end it after any word.
fn cases() -> Vec<(&'static str, Constraint, Vec<String>)> {
    let stops = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        ("schema", story_schema(), vec![]),
        ("schema, stops", story_schema(), stops(&["\"mood\"", "ed\""])),
        ("regex", Constraint::Regex(r"(Once|One day) [a-z]+( [a-z]+){1,5}\.".into()), vec![]),
        ("regex, stop", Constraint::Regex(r"\{name: [a-z]{1,8}, age: [0-9]\}".into()), stops(&["age"])),
        ("words, stop", Constraint::Regex(r"[a-z]{1,8}( [a-z]{1,8}){0,5}".into()), stops(&[" "])),
    ]
}

fn opts(seed: u64, max_tokens: usize, stop: &[String], overlap: Overlap) -> GenerateOptions {
    GenerateOptions {
        max_tokens,
        sampling: SamplingParams {
            temperature: 1.0,
            top_p: 0.95,
            top_logprobs: 2,
            seed: Some(seed),
            ..SamplingParams::default()
        },
        stop: stop.to_vec(),
        overlap,
        ..GenerateOptions::default()
    }
}

/// Runs one generation; returns the output and every event.
fn run(
    model: &mut dyn LanguageModel,
    vocab: &Vocab,
    compiled: &Arc<Compiled>,
    prompt: &[TokenId],
    opts: &GenerateOptions,
) -> (Output, Vec<Event>) {
    let mut matcher = compiled.matcher();
    let mut events = Vec::new();
    let out = generate_stream(model, vocab, Some(&mut matcher), prompt, opts, |e| events.push(e.clone())).unwrap();
    assert_eq!(matcher.len(), out.tokens.len(), "the matcher holds exactly the output");
    (out, events)
}

/// What the two runs must share: everything but the mask figures.
fn assert_same(on: &(Output, Vec<Event>), off: &(Output, Vec<Event>), what: &str) {
    let ((a, ea), (b, eb)) = (on, off);
    assert_eq!(a.tokens, b.tokens, "{what}: tokens");
    assert_eq!(a.bytes, b.bytes, "{what}: text");
    assert_eq!(a.logprobs, b.logprobs, "{what}: logprobs");
    assert_eq!((a.finish_reason, &a.stopped_by), (b.finish_reason, &b.stopped_by), "{what}: end");
    assert_eq!((a.forced, a.forward_passes), (b.forced, b.forward_passes), "{what}: forced, passes");
    assert_eq!(ea, eb, "{what}: events");
    assert_eq!(a.masks.count, b.masks.count, "{what}: the same masks");
    assert_eq!((b.masks.overlapped, b.masks.rewound), (0, 0), "{what}: off means off");
    assert!(a.masks.overlapped > 0, "{what}: on means on");
    assert!(a.masks.time > std::time::Duration::ZERO && b.masks.time > std::time::Duration::ZERO);
}

/// What the runs covered, so a test cannot pass by never reaching the interesting paths.
#[derive(Default, Debug)]
struct Seen {
    forced: usize,
    rewound: usize,
    stop_strings: usize,
}

impl Seen {
    fn add(&mut self, out: &Output) {
        self.forced += out.forced;
        self.rewound += out.masks.rewound;
        self.stop_strings += matches!(out.stopped_by, Some(StoppedBy::String(_))) as usize;
    }
}

#[test]
fn overlap_gives_identical_output_on_the_embedded_model() {
    let m = embedded();
    let prompt = m.prompt.encode("Once upon a time").unwrap();
    let mut seen = Seen::default();
    for (what, constraint, stop) in cases() {
        let compiled = Compiled::new(&m.env, &constraint).unwrap();
        for seed in 0..4 {
            let what = format!("{what}, seed {seed}");
            let mut on_model = m.model.restart();
            let mut off_model = m.model.restart();
            let on = run(&mut on_model, m.vocab(), &compiled, &prompt, &opts(seed, 64, &stop, Overlap::On));
            let off = run(&mut off_model, m.vocab(), &compiled, &prompt, &opts(seed, 64, &stop, Overlap::Off));
            assert_same(&on, &off, &what);
            // The model is left where it would be without overlap: every kept pass, nothing more.
            assert_eq!(on_model.position(), off_model.position(), "{what}: model position");
            seen.add(&on.0);
        }
    }
    assert!(seen.forced > 0 && seen.rewound > 0 && seen.stop_strings > 0, "paths not covered: {seen:?}");
}

#[test]
fn overlap_gives_identical_output_with_random_logits() {
    let env = embedded().env;
    let vocab = env.vocab().clone();
    let mut seen = Seen::default();
    for (what, constraint, stop) in cases() {
        let compiled = Compiled::new(&env, &constraint).unwrap();
        for seed in 0..16 {
            let what = format!("{what}, seed {seed}");
            let on =
                run(&mut RandomLogits::new(512, seed), &vocab, &compiled, &[], &opts(seed, 48, &stop, Overlap::On));
            let off =
                run(&mut RandomLogits::new(512, seed), &vocab, &compiled, &[], &opts(seed, 48, &stop, Overlap::Off));
            assert_same(&on, &off, &what);
            seen.add(&on.0);
        }
    }
    assert!(seen.forced > 0 && seen.rewound > 0 && seen.stop_strings > 0, "paths not covered: {seen:?}");
}

/// `a`, `b`, `c` and EOS only: after `a` is forced by the regex `a[bc]`, the mask allows `a`
/// alone (no token spans `a` and what follows), then `b` or `c`, then only EOS.
fn abc() -> (Arc<Vocab>, Arc<Compiled>) {
    let vocab =
        Arc::new(Vocab::from_byte_tokens(vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec(), b"</s>".to_vec()], &[3]));
    let compiled = Compiled::new(&VocabEnv::new(vocab.clone()), &Constraint::Regex("a[bc]".into())).unwrap();
    (vocab, compiled)
}

#[test]
fn a_pass_the_mask_makes_unneeded_is_rewound() {
    let (vocab, compiled) = abc();
    let mut models = Vec::new();
    let mut outs = Vec::new();
    for overlap in [Overlap::On, Overlap::Off] {
        let mut model = ScriptedModel::new(4, |h, l| l[2] = h.len() as f32);
        let mut matcher = compiled.matcher();
        let o = GenerateOptions { overlap, sampling: SamplingParams::greedy(), ..GenerateOptions::default() };
        outs.push(generate(&mut model, &vocab, Some(&mut matcher), &[TokenId(0)], &o).unwrap());
        models.push(model);
    }
    assert_eq!(outs[0].text(), "ac");
    assert_eq!(outs[1].text(), "ac");
    // One pass kept: the prompt and the single allowed `a` in one batch. Two undone: the one
    // the single `a` made unneeded, and the one after `c`, when only EOS is left.
    assert_eq!((outs[0].forward_passes, outs[0].masks.overlapped, outs[0].masks.rewound), (1, 3, 2));
    assert_eq!((outs[1].forward_passes, outs[1].masks.overlapped, outs[1].masks.rewound), (1, 0, 0));
    assert_eq!(models[0].history(), models[1].history());
    assert_eq!(models[0].history(), &[TokenId(0), TokenId(0)]);
    assert_eq!(models[0].calls(), 1);
}

/// The default overlap (`IfMaskTakes`) runs no pass speculatively that feeds more than
/// `MAX_OVERLAP_TOKENS` tokens: undone when the mask allows one token, a prefill would be fed
/// again (a tool call under a tight `max_tokens` on SmolLM2 fed its 253-token prompt five
/// times). `On` still overlaps every step; the output is the same either way.
#[test]
fn a_long_pass_is_not_run_speculatively() {
    use strictly::decode::MAX_OVERLAP_TOKENS;
    let (vocab, compiled) = abc();
    let zero = Overlap::IfMaskTakes(std::time::Duration::ZERO);
    let long = [TokenId(1); MAX_OVERLAP_TOKENS + 12];
    let mut seen = Vec::new();
    for (overlap, prompt) in [(zero, &long[..]), (zero, &long[..1]), (Overlap::On, &long[..])] {
        let mut model = ScriptedModel::new(4, |h, l| l[2] = h.len() as f32);
        let mut matcher = compiled.matcher();
        let o = GenerateOptions { overlap, sampling: SamplingParams::greedy(), ..GenerateOptions::default() };
        let out = generate(&mut model, &vocab, Some(&mut matcher), prompt, &o).unwrap();
        assert_eq!(out.text(), "ac");
        seen.push((out.forward_passes, out.masks.overlapped, out.masks.rewound));
    }
    // A long prompt: neither the step with the prompt pending nor the one with the prompt and
    // the single allowed `a` is overlapped; the step after `c` (one token pending) is, and
    // undone (only EOS is left). A one-token prompt, or `On`: every step is.
    assert_eq!(seen, [(1, 1, 1), (1, 3, 2), (1, 3, 2)]);
}

/// A model whose every forward pass fails, and which can rewind.
struct Failing(usize);

impl LanguageModel for Failing {
    fn logits_width(&self) -> usize {
        4
    }
    fn forward(&mut self, _: &[TokenId], _: &mut [f32]) -> strictly::Result<()> {
        self.0 += 1;
        Err(strictly::Error::model("out of context"))
    }
    fn fork(&self) -> strictly::Result<Box<dyn LanguageModel>> {
        Ok(Box::new(Failing(self.0)))
    }
    fn checkpoint(&mut self) -> bool {
        true
    }
    fn rewind(&mut self) -> strictly::Result<()> {
        Ok(())
    }
}

#[test]
fn a_failed_pass_that_was_not_needed_is_no_error() {
    let vocab = Arc::new(Vocab::from_byte_tokens(vec![b"ab".to_vec(), b"c".to_vec(), b"</s>".to_vec()], &[2]));
    // "ab" is forced and completes the output: no pass is needed, so none may fail it.
    let compiled = Compiled::new(&VocabEnv::new(vocab.clone()), &Constraint::Regex("ab".into())).unwrap();
    for overlap in [Overlap::On, Overlap::Off] {
        let mut model = Failing(0);
        let mut matcher = compiled.matcher();
        let o = GenerateOptions { overlap, ..GenerateOptions::default() };
        let out = generate(&mut model, &vocab, Some(&mut matcher), &[], &o).unwrap();
        assert_eq!((out.text().as_str(), out.forward_passes), ("ab", 0));
        assert_eq!(
            model.0,
            (overlap == Overlap::On) as usize,
            "the speculative pass ran (and was undone) only with overlap"
        );
    }
    // A pass that is needed still fails the generation.
    let compiled = Compiled::new(&VocabEnv::new(vocab.clone()), &Constraint::Regex("ab(c)?".into())).unwrap();
    let mut matcher = compiled.matcher();
    let err = generate(&mut Failing(0), &vocab, Some(&mut matcher), &[], &GenerateOptions::default()).unwrap_err();
    assert!(err.to_string().contains("out of context"), "{err}");
}

/// `IfMaskTakes` decides on the previous mask's time: a threshold no mask reaches never
/// overlaps, a zero one always does, and the output is the same.
#[test]
fn overlap_if_the_mask_takes_long_enough() {
    let m = embedded();
    let compiled = Compiled::new(&m.env, &story_schema()).unwrap();
    let prompt = m.prompt.encode("Once upon a time").unwrap();
    let hour = std::time::Duration::from_secs(3600);
    let mut outs = Vec::new();
    for overlap in [Overlap::IfMaskTakes(hour), Overlap::IfMaskTakes(std::time::Duration::ZERO), Overlap::Off] {
        outs.push(run(&mut m.model.restart(), m.vocab(), &compiled, &prompt, &opts(5, 64, &[], overlap)));
    }
    assert_eq!(outs[0].0.masks.overlapped, 0);
    assert_same(&outs[1], &outs[0], "a zero threshold is always");
    assert_same(&outs[1], &outs[2], "a zero threshold is always");
    assert_eq!("auto".parse::<Overlap>().unwrap(), Overlap::DEFAULT);
    assert_eq!(GenerateOptions::default().overlap, Overlap::DEFAULT);
    assert!("sometimes".parse::<Overlap>().is_err());
}

#[test]
fn the_candle_model_rewinds_to_its_checkpoint() {
    let m = embedded();
    let mut model: CandleModel = m.model.restart();
    let mut row = vec![0.0; 512];
    model.forward(&[TokenId(1), TokenId(403)], &mut row).unwrap();
    assert!(model.checkpoint());
    let mut first = vec![0.0; 512];
    model.forward(&[TokenId(407), TokenId(261)], &mut first).unwrap();
    model.forward(&[TokenId(378)], &mut row).unwrap();
    model.rewind().unwrap();
    assert_eq!(model.position(), 2);
    let mut again = vec![0.0; 512];
    model.forward(&[TokenId(407), TokenId(261)], &mut again).unwrap();
    assert_eq!(first, again);
    assert!(model.rewind().is_err(), "the checkpoint was used up");
}
