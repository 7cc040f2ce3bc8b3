//! The decoding loop end to end, with scripted and seeded-random models and tiny vocabularies:
//! stops (tokens, strings across tokens, max_tokens), streaming, the UTF-8 detokenizer,
//! fast-forward, never-truncated constrained output, logprobs, beam search, determinism.

use std::sync::Arc;

use strictly::automaton::{Compiled, Constraint, Matcher, VocabEnv};
use strictly::decode::{
    beam_search, generate, generate_stream, BeamOptions, Event, FinishReason, GenerateOptions, Generation,
    LanguageModel, Output, RandomLogits, ScriptedModel, StoppedBy,
};
use strictly::sample::SamplingParams;
use strictly::{TokenId, Vocab};

pub(crate) fn vocab(tokens: &[&[u8]], eos: &[u32]) -> Arc<Vocab> {
    Arc::new(Vocab::from_byte_tokens(tokens.iter().map(|t| t.to_vec()).collect(), eos))
}

/// A model that says `script` (one token per position after the prompt), then `eos` forever.
fn says(width: usize, script: &[u32], eos: u32) -> ScriptedModel {
    let script = script.to_vec();
    ScriptedModel::new(width, move |h, l| {
        let t = script.get(h.len()).copied().unwrap_or(eos);
        l[t as usize] = 10.0;
    })
}

fn greedy(max_tokens: usize) -> GenerateOptions {
    GenerateOptions { max_tokens, sampling: SamplingParams::greedy(), ..GenerateOptions::default() }
}

fn with_stops(stops: &[&str]) -> GenerateOptions {
    GenerateOptions { stop: stops.iter().map(|s| s.to_string()).collect(), ..greedy(64) }
}

/// Runs a generation and returns (output, every event).
fn run(
    model: &mut dyn LanguageModel,
    v: &Vocab,
    m: Option<&mut Matcher>,
    opts: &GenerateOptions,
) -> (Output, Vec<Event>) {
    let mut events = Vec::new();
    let out = generate_stream(model, v, m, &[], opts, |e| events.push(e.clone())).unwrap();
    (out, events)
}

fn texts(events: &[Event]) -> Vec<String> {
    events.iter().filter_map(|e| if let Event::Text(t) = e { Some(t.clone()) } else { None }).collect()
}

/// Events in short form: `T<id>` for a token, the text itself for text, `end` for finish.
fn brief(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e {
            Event::Token(g) => format!("T{}", g.token.0),
            Event::Text(t) => t.clone(),
            Event::Finish { .. } => "end".into(),
        })
        .collect()
}

pub(crate) fn ids(out: &Output) -> Vec<u32> {
    out.tokens.iter().map(|t| t.0).collect()
}

/// Tokens for the stop-string tests. EOS is 6.
fn chat_vocab() -> Arc<Vocab> {
    vocab(&[b"Hi ", b"Us", b"er", b":", b" said", b"ok User: bye", b"</s>"], &[6])
}

// ---- stops ---------------------------------------------------------------------------------

#[test]
fn stop_string_split_across_tokens_is_never_emitted() {
    let v = chat_vocab();
    let mut model = says(7, &[0, 1, 2, 3, 4], 6);
    let (out, events) = run(&mut model, &v, None, &with_stops(&["User:"]));
    assert_eq!(out.text(), "Hi ");
    assert_eq!(out.finish_reason, FinishReason::Stop);
    assert_eq!(out.stopped_by, Some(StoppedBy::String("User:".into())));
    // Every generated token is kept, the stop string's included; the text stops before it.
    assert_eq!(ids(&out), vec![0, 1, 2, 3]);
    // "Us" and "er" were held back, and never released.
    assert_eq!(brief(&events), vec!["T0", "Hi ", "T1", "T2", "T3", "end"]);
}

#[test]
fn held_back_text_is_streamed_when_it_is_not_a_stop() {
    let v = chat_vocab();
    let mut model = says(7, &[1, 2, 4], 6);
    let (out, events) = run(&mut model, &v, None, &with_stops(&["User:"]));
    assert_eq!(out.text(), "User said");
    assert_eq!(out.stopped_by, Some(StoppedBy::Token(TokenId(6))));
    // Released as soon as " said" rules the stop out, before the end.
    assert_eq!(brief(&events), vec!["T1", "T2", "T4", "User said", "end"]);

    // Held text with no stop at all: flushed at the end.
    let mut model = says(7, &[0, 1], 6);
    let (out, events) = run(&mut model, &v, None, &with_stops(&["User:"]));
    assert_eq!(out.text(), "Hi Us");
    assert_eq!(brief(&events), vec!["T0", "Hi ", "T1", "Us", "end"]);
}

#[test]
fn multiple_stop_strings_one_a_prefix_of_another() {
    let v = chat_vocab();
    // "User" completes one token before "User:" could.
    for stops in [["User:", "User"], ["User", "User:"]] {
        let mut model = says(7, &[0, 1, 2, 3], 6);
        let (out, _) = run(&mut model, &v, None, &with_stops(&stops));
        assert_eq!(out.text(), "Hi ");
        assert_eq!(ids(&out), vec![0, 1, 2]);
        assert_eq!(out.stopped_by, Some(StoppedBy::String("User".into())));
    }
    // Two ending on the same byte ("er:" is a suffix of "User:"): the longer one cuts.
    let mut model = says(7, &[0, 1, 2, 3], 6);
    let (out, _) = run(&mut model, &v, None, &with_stops(&["er:", "User:"]));
    assert_eq!(out.text(), "Hi ");
    assert_eq!(out.stopped_by, Some(StoppedBy::String("User:".into())));
}

#[test]
fn stop_string_inside_one_token_keeps_the_text_before_it() {
    let v = chat_vocab();
    let mut model = says(7, &[0, 5, 4], 6);
    let (out, events) = run(&mut model, &v, None, &with_stops(&["User:"]));
    assert_eq!(out.text(), "Hi ok ");
    assert_eq!(ids(&out), vec![0, 5]);
    assert_eq!(texts(&events), vec!["Hi ", "ok "]);
}

#[test]
fn every_eos_id_and_extra_stop_ids_stop() {
    let v = vocab(&[b"a", b"b", b".", b"</s>", b"<|eot|>"], &[3, 4]);
    for eos in [3, 4] {
        let mut model = says(5, &[0, 1], eos);
        let out = generate(&mut model, &v, None, &[], &greedy(10)).unwrap();
        assert_eq!((out.text().as_str(), out.finish_reason), ("ab", FinishReason::Stop));
        assert_eq!(out.stopped_by, Some(StoppedBy::Token(TokenId(eos))));
        assert_eq!(ids(&out), vec![0, 1], "the stop token is not part of the output");
    }
    // An extra stop id, here a text token: it stops, and adds no text.
    let mut model = says(5, &[0, 2, 1], 3);
    let opts = GenerateOptions { stop_token_ids: vec![TokenId(2)], ..greedy(10) };
    let out = generate(&mut model, &v, None, &[], &opts).unwrap();
    assert_eq!((out.text().as_str(), out.stopped_by), ("a", Some(StoppedBy::Token(TokenId(2)))));
}

#[test]
fn max_tokens_gives_length() {
    let v = chat_vocab();
    let mut model = says(7, &[0, 0, 0, 0, 0], 6);
    let out = generate(&mut model, &v, None, &[], &greedy(3)).unwrap();
    assert_eq!((out.tokens.len(), out.finish_reason, &out.stopped_by), (3, FinishReason::Length, &None));
    assert_eq!(out.text(), "Hi Hi Hi ");
    let out = generate(&mut says(7, &[0], 6), &v, None, &[], &greedy(0)).unwrap();
    assert_eq!((out.tokens.len(), out.finish_reason), (0, FinishReason::Length));
}

#[test]
fn bad_options_are_errors() {
    let v = chat_vocab();
    assert!(generate(&mut says(7, &[], 6), &v, None, &[], &with_stops(&[""])).is_err());
    let narrow = generate(&mut says(3, &[], 2), &v, None, &[], &greedy(5)).unwrap_err();
    assert!(narrow.to_string().contains("smaller than the vocabulary"), "{narrow}");
    let bad_temp =
        GenerateOptions { sampling: SamplingParams { temperature: -1.0, ..SamplingParams::default() }, ..greedy(5) };
    assert!(generate(&mut says(7, &[], 6), &v, None, &[], &bad_temp).is_err());
}

#[test]
fn dropping_the_generation_cancels_it() {
    let v = chat_vocab();
    let mut model = says(7, &[0, 0, 0, 0, 0], 6);
    {
        let mut g = Generation::new(&mut model, &v, None, &[], &greedy(100)).unwrap();
        assert!(matches!(g.next(), Some(Ok(Event::Token(_)))));
    }
    assert_eq!(model.calls(), 1);
}

// ---- the streaming detokenizer ---------------------------------------------------------------

#[test]
fn deltas_are_whole_characters_and_concatenate_to_the_text() {
    // € = E2 82 AC, one byte per token (byte fallback); é = C3 A9 split across two tokens.
    let v = vocab(&[&[0xE2], &[0x82], &[0xAC], b"a", &[0xC3], b"\xA9b", b"</s>"], &[6]);
    let mut model = says(7, &[3, 0, 1, 2, 4, 5], 6);
    let (out, events) = run(&mut model, &v, None, &greedy(20));
    assert_eq!(brief(&events), vec!["T3", "a", "T0", "T1", "T2", "€", "T4", "T5", "éb", "end"]);
    assert_eq!(texts(&events).concat(), out.text());
    assert_eq!(out.text(), "a€éb");

    // Unconstrained output that stops inside a character: the tail becomes U+FFFD, at the end.
    let mut model = says(7, &[3, 0, 1], 6);
    let (out, events) = run(&mut model, &v, None, &greedy(20));
    assert_eq!(brief(&events), vec!["T3", "a", "T0", "T1", "\u{FFFD}", "end"]);
    assert_eq!(out.text(), "a\u{FFFD}");
    assert_eq!(out.bytes, b"a\xE2\x82", "bytes stay exact");

    // A stop string made of a multi-byte character, split over tokens.
    let mut model = says(7, &[3, 0, 1, 2, 3], 6);
    let (out, events) = run(&mut model, &v, None, &GenerateOptions { stop: vec!["€".into()], ..greedy(20) });
    assert_eq!((out.text().as_str(), texts(&events).concat().as_str()), ("a", "a"));
}

#[test]
fn real_sentencepiece_tokens_with_byte_fallback_round_trip() {
    // The embedded stories260K vocabulary: 512 tokens, so most non-ASCII text is byte fallback.
    let v = Vocab::embedded();
    let text = " Hello, naïve café: 5€ — ok";
    let tokens: Vec<u32> = v.encode(text.as_bytes()).expect("encodable").iter().map(|t| t.0).collect();
    assert!(
        tokens.iter().any(|&t| std::str::from_utf8(v.bytes(TokenId(t))).is_err()),
        "expected some token to end inside a character"
    );
    let eos = v.eos()[0].0;
    let mut model = says(v.len(), &tokens, eos);
    let (out, events) = run(&mut model, &v, None, &greedy(200));
    assert_eq!(out.text(), text, "the metaspace prefix space is kept: bytes are exact");
    assert_eq!(texts(&events).concat(), text);
    assert_eq!(out.stopped_by, Some(StoppedBy::Token(TokenId(eos))));
}

// ---- constraints: never truncated, fast-forward ---------------------------------------------

fn letters() -> Arc<Vocab> {
    vocab(&[b"a", b"b", b"c", b"d", b"e", b"ab", b"bc", b"</s>"], &[7])
}

fn matcher(v: &Arc<Vocab>, re: &str) -> Matcher {
    Compiled::new(&VocabEnv::new(v.clone()), &Constraint::Regex(re.into())).unwrap().matcher()
}

#[test]
fn constrained_output_with_small_max_tokens_still_matches() {
    let v = letters();
    let re = "(ab|c)+d";
    let full = regex::Regex::new(&format!("^(?:{re})$")).unwrap();
    let mut lengths = 0;
    for max_tokens in 2..7 {
        for seed in 0..40u64 {
            let mut model = RandomLogits::new(v.len(), seed * 31 + max_tokens as u64);
            let mut m = matcher(&v, re);
            let opts = GenerateOptions {
                max_tokens,
                sampling: SamplingParams { seed: Some(seed), ..SamplingParams::default() },
                ..GenerateOptions::default()
            };
            let out = generate(&mut model, &v, Some(&mut m), &[], &opts).unwrap();
            assert!(full.is_match(&out.text()), "max_tokens {max_tokens} seed {seed}: {:?}", out.text());
            assert!(out.tokens.len() <= max_tokens);
            assert!(m.is_accepting(), "the matcher holds exactly the output");
            lengths += (out.finish_reason == FinishReason::Length) as usize;
        }
    }
    assert!(lengths > 0, "some outputs should have run into max_tokens");
    // Too small for any output at all ("cd" needs two tokens): an error up front.
    let err =
        generate(&mut RandomLogits::new(v.len(), 0), &v, Some(&mut matcher(&v, re)), &[], &greedy(1)).unwrap_err();
    assert!(err.to_string().contains("max_tokens 1 is too small"), "{err}");
    assert!(err.to_string().contains("(the shortest found takes 2 tokens)"), "{err}");
}

/// Where the grammar's shortest output fits but repeats items that must be distinct, the error
/// says so rather than naming a count that fits (`["","",""]` is 10 tokens of the embedded
/// vocabulary; three distinct strings need 11).
#[test]
fn too_small_for_distinct_items_says_why() {
    let v = Arc::new(Vocab::embedded());
    let env = VocabEnv::new(v.clone());
    let schema = serde_json::json!({"type": "array", "items": {"type": "string"}, "minItems": 3, "uniqueItems": true});
    let c = Compiled::new(&env, &Constraint::JsonSchema(schema, Default::default())).unwrap();
    // The grammar alone allows `["","",""]`; three distinct strings take a token more. The
    // shortest count is of outputs that keep them distinct (what `strictly check` reports).
    let shortest = c.matcher().min_tokens_to_finish().unwrap() as usize;
    let grammar = c.matcher().grammar_tokens_to_finish().unwrap() as usize;
    assert!(grammar < shortest, "{grammar} {shortest}");
    let err = generate(&mut RandomLogits::new(v.len(), 0), &v, Some(&mut c.matcher()), &[], &greedy(shortest - 1))
        .unwrap_err()
        .to_string();
    assert!(err.contains(&format!("the shortest found takes {shortest} tokens")), "{err}");
    assert!(err.contains(&format!("the grammar alone allows {grammar}")), "{err}");
    assert!(err.contains("distinct"), "{err}");
    for seed in 0..4 {
        let out = generate(&mut RandomLogits::new(v.len(), seed), &v, Some(&mut c.matcher()), &[], &greedy(shortest));
        assert!(out.is_ok(), "{out:?}");
    }
}

#[test]
fn the_budget_steers_into_the_short_branch() {
    let v = letters();
    // "abcd" needs at least 3 tokens ("ab", "c", "d"), "e" one: with 2, only "e" fits.
    let mut model = says(v.len(), &[0, 1, 2, 3], 7);
    let mut m = matcher(&v, "abcd|e");
    let out = generate(&mut model, &v, Some(&mut m), &[], &greedy(2)).unwrap();
    assert_eq!(out.text(), "e");
    assert_eq!((out.forced, out.forward_passes), (1, 0), "the only allowed token needs no model");
}

#[test]
fn fast_forward_counts_and_forced_logprobs() {
    let v = vocab(&[b"a", b"b", b"c", b"d", b"e", b"</s>"], &[5]);
    // Everything forced: no forward pass at all, and no EOS decision either.
    let mut model = says(v.len(), &[], 5);
    let mut m = matcher(&v, "abcd");
    let out = generate(&mut model, &v, Some(&mut m), &[], &greedy(10)).unwrap();
    assert_eq!(out.text(), "abcd");
    assert_eq!((out.forced, out.forward_passes, model.calls()), (4, 0, 0));
    assert_eq!(out.stopped_by, Some(StoppedBy::Constraint));
    assert!(out.logprobs.iter().all(|g| g.forced && g.logprob == 0.0 && g.top_logprobs.is_empty()));

    // "ab" fast-forwarded, "c" the only allowed token, then a real choice between "d" and "e".
    let mut model = ScriptedModel::new(v.len(), |_, l| {
        l[3] = 1.0;
        l[4] = 0.0;
    });
    let mut m = matcher(&v, "abc(d|e)");
    let opts =
        GenerateOptions { sampling: SamplingParams { top_logprobs: 3, ..SamplingParams::greedy() }, ..greedy(10) };
    let out = generate(&mut model, &v, Some(&mut m), &[], &opts).unwrap();
    assert_eq!(out.text(), "abcd");
    assert_eq!((out.forced, out.forward_passes), (3, 1));
    // The model saw the three forced tokens in one batch, with the one forward pass.
    assert_eq!(model.history(), &[TokenId(0), TokenId(1), TokenId(2)]);
    assert_eq!(out.logprobs.len(), 4);
    let last = &out.logprobs[3];
    assert!(!last.forced);
    // Softmax of [1, 0] over the two allowed tokens only (after the mask).
    let p = 1.0f32 / (1.0 + (-1.0f32).exp());
    assert!((last.logprob - p.ln()).abs() < 1e-5);
    let top: Vec<(u32, f32)> = last.top_logprobs.iter().map(|t| (t.token.0, t.logprob)).collect();
    assert_eq!(top.len(), 2, "only the allowed tokens are listed: {top:?}");
    assert_eq!((top[0].0, top[1].0), (3, 4));
    assert!((top[1].1 - (1.0 - p).ln()).abs() < 1e-5);
}

#[test]
fn forced_tokens_respect_stop_strings() {
    let v = vocab(&[b"a", b"b", b"c", b"d", b"</s>"], &[4]);
    // "a" forced, "b" chosen, "c" and "d" forced; "bcd" completes on "d", after a complete "a".
    let mut model = says(v.len(), &[0, 1], 4);
    let mut m = matcher(&v, "a(bcd)?");
    let (out, events) = run(&mut model, &v, Some(&mut m), &GenerateOptions { stop: vec!["bcd".into()], ..greedy(10) });
    assert_eq!(out.text(), "a");
    assert_eq!(ids(&out), vec![0, 1, 2, 3], "forced tokens stop where the stop string completes");
    assert_eq!(out.stopped_by, Some(StoppedBy::String("bcd".into())));
    assert_eq!(brief(&events), vec!["T0", "a", "T1", "T2", "T3", "end"]);
}

#[test]
fn a_stop_string_ends_a_constrained_output_only_where_it_is_complete() {
    let v = vocab(&[b"a", b"b", b"c", b"d", b"</s>"], &[4]);
    let stop = |s: &str| GenerateOptions { stop: vec![s.into()], ..greedy(10) };
    // "a" is not a complete "ab(cd)?": the stop "bc" there is text, and the output goes on.
    let mut model = says(v.len(), &[0, 1, 2, 3], 4);
    let mut m = matcher(&v, "ab(cd)?");
    let (out, events) = run(&mut model, &v, Some(&mut m), &stop("bc"));
    assert_eq!(out.text(), "abcd");
    assert_eq!(out.stopped_by, Some(StoppedBy::Constraint));
    assert_eq!(texts(&events).concat(), "abcd");
    // "ab" is complete: the stop "cd" ends it there.
    let mut model = says(v.len(), &[0, 1, 2, 3], 4);
    let mut m = matcher(&v, "ab(cd)?");
    let (out, _) = run(&mut model, &v, Some(&mut m), &stop("cd"));
    assert_eq!((out.text().as_str(), out.stopped_by), ("ab", Some(StoppedBy::String("cd".into()))));
    // A stop string the structure holds (a newline inside pretty JSON) never cuts it, whatever
    // is sampled; one after the end does end it.
    // (Every byte the language uses has a token of its own, as in real vocabularies: the budget
    // counts single-byte tokens.)
    let v = vocab(&[b"{", b"\n", b" ", b"\"", b"k", b":", b"1", b"}", b"\"k\"", b"</s>"], &[9]);
    let re = r#"\{\n? ?"k": ?1\n?\}\n?"#;
    let full = regex::Regex::new(&format!("^(?:{re})$")).unwrap();
    let mut stopped = 0;
    for seed in 0..40u64 {
        let mut model = RandomLogits::new(v.len(), seed);
        let mut m = matcher(&v, re);
        let opts = GenerateOptions {
            stop: vec!["\n".into()],
            sampling: SamplingParams { seed: Some(seed), ..SamplingParams::default() },
            ..greedy(20)
        };
        let out = generate(&mut model, &v, Some(&mut m), &[], &opts).unwrap();
        assert!(full.is_match(&out.text()), "seed {seed}: {:?}", out.text());
        assert!(out.text().ends_with('}'), "seed {seed}: {:?}", out.text());
        stopped += (out.stopped_by == Some(StoppedBy::String("\n".into()))) as usize;
    }
    assert!(stopped > 0, "some outputs should end at the newline after the object");
}

#[test]
fn extra_stop_ids_never_cut_a_constrained_output() {
    let v = letters();
    // The model loves "c" (id 2), which is also a stop id; "(ab|c)+d" must still complete.
    let mut model = ScriptedModel::new(v.len(), |_, l| l[2] = 5.0);
    let mut m = matcher(&v, "(ab|c)+d");
    let opts = GenerateOptions { stop_token_ids: vec![TokenId(2)], ..greedy(6) };
    let out = generate(&mut model, &v, Some(&mut m), &[], &opts).unwrap();
    let full = regex::Regex::new("^(?:(ab|c)+d)$").unwrap();
    assert!(full.is_match(&out.text()), "{:?}", out.text());
    assert!(!out.tokens.contains(&TokenId(2)));
}

// ---- logprobs ---------------------------------------------------------------------------------

#[test]
fn logprobs_for_every_sampled_token() {
    let v = chat_vocab();
    let mut model = RandomLogits::new(v.len(), 5);
    let opts = GenerateOptions {
        max_tokens: 12,
        sampling: SamplingParams { seed: Some(9), top_logprobs: 3, ..SamplingParams::default() },
        ..GenerateOptions::default()
    };
    let out = generate(&mut model, &v, None, &[], &opts).unwrap();
    assert_eq!(out.logprobs.len(), out.tokens.len());
    assert!(!out.tokens.is_empty());
    for (g, &t) in out.logprobs.iter().zip(&out.tokens) {
        assert_eq!(g.token, t);
        assert!(!g.forced && g.logprob <= 0.0 && g.logprob.is_finite());
        assert_eq!(g.top_logprobs.len(), 3);
        assert!(g.top_logprobs.windows(2).all(|w| w[0].logprob >= w[1].logprob));
        if let Some(same) = g.top_logprobs.iter().find(|x| x.token == t) {
            assert_eq!(same.logprob, g.logprob);
        }
    }
}

// ---- beam search --------------------------------------------------------------------------------

/// a=0 b=1 c=2 d=3 EOS=4. First "a" 0.6 / "b" 0.4; after "a": "c" 0.5 / "d" 0.5; after "b":
/// "c" 0.9 / "d" 0.1; after two tokens, EOS. Greedy says "ac" (0.30); the best is "bc" (0.36).
fn garden_path() -> (Arc<Vocab>, ScriptedModel) {
    let v = vocab(&[b"a", b"b", b"c", b"d", b"</s>"], &[4]);
    let model = ScriptedModel::new(5, |h, l| {
        l.fill(f32::NEG_INFINITY);
        let mut set = |t: usize, p: f32| l[t] = p.ln();
        match h {
            [] => {
                set(0, 0.6);
                set(1, 0.4)
            }
            [TokenId(0)] => {
                set(2, 0.5);
                set(3, 0.5)
            }
            [TokenId(1)] => {
                set(2, 0.9);
                set(3, 0.1)
            }
            _ => set(4, 1.0),
        }
    });
    (v, model)
}

#[test]
fn beam_search_finds_what_greedy_misses() {
    let (v, model) = garden_path();
    let out = generate(&mut model.clone(), &v, None, &[], &greedy(10)).unwrap();
    assert_eq!(out.text(), "ac");

    let hyps = beam_search(&model, &v, None, &[], &greedy(10), &BeamOptions { width: 2, length_penalty: 1.0 }).unwrap();
    assert_eq!(hyps.len(), 2);
    assert_eq!(hyps[0].output.text(), "bc");
    assert!((hyps[0].sum_logprob - 0.36f64.ln()).abs() < 1e-5, "{}", hyps[0].sum_logprob);
    assert_eq!(hyps[0].scored_len, 3, "two tokens and EOS");
    assert!((hyps[0].score - 0.36f64.ln() / 3.0).abs() < 1e-5);
    assert!(hyps[1].score <= hyps[0].score);
    assert_eq!(hyps[0].output.finish_reason, FinishReason::Stop);
    assert_eq!(model.calls(), 0, "the model passed in is only forked");
}

#[test]
fn constrained_beams_only_produce_matches() {
    let (v, model) = garden_path();
    // After "a" only "d" is allowed (probability 1 after the mask), so "ad" (0.6) now wins.
    let mut m = matcher(&v, "ad|bc|bd");
    let hyps = beam_search(&model, &v, Some(&mut m), &[], &greedy(10), &BeamOptions { width: 3, length_penalty: 1.0 })
        .unwrap();
    let got: Vec<String> = hyps.iter().map(|h| h.output.text()).collect();
    assert_eq!(got, vec!["ad", "bc", "bd"]);
    assert!((hyps[0].sum_logprob - 0.6f64.ln()).abs() < 1e-5);
    assert!(m.is_accepting() && m.len() == 2, "the matcher holds the best output");

    // Seeded random logits, a richer language: every hypothesis matches.
    let v = letters();
    let re = "(ab|c)+d";
    let full = regex::Regex::new(&format!("^(?:{re})$")).unwrap();
    for seed in 0..10 {
        let model = RandomLogits::new(v.len(), seed);
        let mut m = matcher(&v, re);
        let hyps = beam_search(&model, &v, Some(&mut m), &[], &greedy(5), &BeamOptions::default()).unwrap();
        assert!(!hyps.is_empty());
        assert!(hyps.windows(2).all(|w| w[0].score >= w[1].score));
        for h in &hyps {
            assert!(full.is_match(&h.output.text()), "seed {seed}: {:?}", h.output.text());
        }
    }
}

#[test]
fn length_penalty_decides_between_short_and_long() {
    // a=0 b=1 c=2 EOS=3. "a" then EOS: 0.5 over 2 decisions. "b", "c" 0.9, EOS: 0.45 over 3.
    let v = vocab(&[b"a", b"b", b"c", b"</s>"], &[3]);
    let model = ScriptedModel::new(4, |h, l| {
        l.fill(f32::NEG_INFINITY);
        match h {
            [] => {
                l[0] = 0.5f32.ln();
                l[1] = 0.5f32.ln()
            }
            [TokenId(1)] => {
                l[2] = 0.9f32.ln();
                l[0] = 0.1f32.ln()
            }
            _ => l[3] = 0.0,
        }
    });
    let best = |alpha: f32| {
        let hyps =
            beam_search(&model, &v, None, &[], &greedy(10), &BeamOptions { width: 2, length_penalty: alpha }).unwrap();
        hyps[0].output.text()
    };
    assert_eq!(best(1.0), "bc"); // ln 0.45 / 3 = -0.27 beats ln 0.5 / 2 = -0.35
    assert_eq!(best(0.0), "a"); // ln 0.5 = -0.69 beats ln 0.45 = -0.80
}

#[test]
fn beam_search_rejects_bad_widths() {
    let (v, model) = garden_path();
    for width in [0, 65] {
        assert!(beam_search(&model, &v, None, &[], &greedy(5), &BeamOptions { width, length_penalty: 1.0 }).is_err());
    }
}

// ---- determinism ----------------------------------------------------------------------------------

#[test]
fn same_seed_same_tokens() {
    let v = letters();
    let sample = |model_seed: u64, sampler_seed: u64, constrained: bool| {
        let mut model = RandomLogits::new(v.len(), model_seed);
        let mut m = matcher(&v, "(ab|c)+d");
        let opts = GenerateOptions {
            max_tokens: 40,
            sampling: SamplingParams { seed: Some(sampler_seed), temperature: 1.5, ..SamplingParams::default() },
            ..GenerateOptions::default()
        };
        let (out, events) = run(&mut model, &v, constrained.then_some(&mut m), &opts);
        (ids(&out), events)
    };
    for constrained in [false, true] {
        assert_eq!(sample(1, 2, constrained), sample(1, 2, constrained));
    }
    // The sampler's seed matters on its own (the model's logits are the same).
    let a: Vec<Vec<u32>> = (0..5).map(|s| sample(1, s, false).0).collect();
    assert!(a.iter().any(|x| *x != a[0]), "{a:?}");

    let (v, model) = garden_path();
    let run_beam = || {
        beam_search(&model, &v, None, &[], &greedy(10), &BeamOptions { width: 3, length_penalty: 0.7 })
            .unwrap()
            .iter()
            .map(|h| (ids(&h.output), h.score))
            .collect::<Vec<_>>()
    };
    assert_eq!(run_beam(), run_beam());
}

#[test]
fn beams_apply_stop_strings_too() {
    let (v, model) = garden_path();
    let opts = GenerateOptions { stop: vec!["c".into()], ..greedy(10) };
    let hyps = beam_search(&model, &v, None, &[], &opts, &BeamOptions { width: 2, length_penalty: 1.0 }).unwrap();
    assert!(!hyps.is_empty());
    for h in &hyps {
        assert!(!h.output.text().contains('c'), "{:?}", h.output.text());
    }
    // "bc" still scores best; its text stops before the "c".
    assert_eq!(hyps[0].output.text(), "b");
    assert_eq!(hyps[0].output.stopped_by, Some(StoppedBy::String("c".into())));
}

#[test]
fn the_prompt_is_fed_first_and_every_token_once() {
    let v = chat_vocab();
    // Says "er" after "Us", then EOS.
    let mut model = ScriptedModel::new(7, |h, l| l[if h.last() == Some(&TokenId(1)) { 2 } else { 6 }] = 10.0);
    let out = generate(&mut model, &v, None, &[TokenId(0), TokenId(1)], &greedy(10)).unwrap();
    assert_eq!(out.text(), "er");
    assert_eq!(model.history(), &[TokenId(0), TokenId(1), TokenId(2)]);
    assert_eq!((model.calls(), out.forward_passes), (2, 2));
}

/// Typed outputs: a Rust type's schemars schema constrains random logits over the embedded
/// vocabulary, and every output deserializes as the type (structs, options, string enums,
/// internally tagged enums, bounded integers).
#[test]
fn typed_outputs_deserialize() {
    #[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Ticket {
        title: String,
        priority: u8,
        tags: Vec<Tag>,
        assignee: Option<String>,
        kind: Kind,
    }
    #[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
    #[serde(rename_all = "lowercase")]
    enum Tag {
        Bug,
        Feature,
        Docs,
    }
    #[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
    #[serde(tag = "type")]
    #[allow(dead_code)]
    enum Kind {
        Task { estimate: u32 },
        Incident { severity: i8 },
    }
    let v = std::sync::Arc::new(Vocab::embedded());
    let schema = strictly::decode::schema_for::<Ticket>();
    assert!(schema.get("$defs").is_some() || schema.get("properties").is_some(), "{schema}");
    for seed in 0..6 {
        let mut model = RandomLogits::new(v.len(), seed);
        let opts = GenerateOptions {
            max_tokens: 300,
            sampling: strictly::sample::SamplingParams { seed: Some(seed), ..Default::default() },
            ..Default::default()
        };
        let t = strictly::decode::generate_typed::<Ticket>(&mut model, &VocabEnv::new(v.clone()), &[], &opts)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let text = String::from_utf8(t.output.bytes.clone()).unwrap();
        assert!(serde_json::from_str::<serde_json::Value>(&text).is_ok(), "{text}");
    }
}

/// A forced run is spelled in the vocabulary's own split (here the longest match: `ab c d`),
/// which may take more tokens than the fewest (`a bcd`) that the budget counts. Under a budget
/// of exactly the fewest, the output must still come out whole: the mask chooses instead of
/// the forced run where the run would not fit.
#[test]
fn a_forced_run_that_would_overrun_the_budget_is_not_taken() {
    // ids: 0 a, 1 b, 2 c, 3 d, 4 ab, 5 bcd, 6 <eos>
    let v = vocab(&[b"a", b"b", b"c", b"d", b"ab", b"bcd", b"<eos>"], &[6]);
    let c = Compiled::new(&VocabEnv::new(v.clone()), &Constraint::Regex("abcd".into())).unwrap();
    assert_eq!(c.min_tokens(), Some(2));
    for max_tokens in [2, 3, 4] {
        let mut m = c.matcher();
        let mut model = RandomLogits::new(v.len(), 7);
        let (out, _) = run(&mut model, &v, Some(&mut m), &greedy(max_tokens));
        assert_eq!(out.text(), "abcd", "max_tokens {max_tokens}: {out:?}");
        assert!(out.tokens.len() <= max_tokens);
    }
}

/// DRY as text-generation-webui writes it (quadratic, for checking): for every earlier
/// occurrence of the last token, how far the tokens before it repeat the context's end (not over
/// a breaker), and the token that followed it there loses `mult · base^(len − allowed)`.
fn naive_dry(h: &[TokenId], l: &mut [f32], (mult, base, allowed): (f32, f32, usize), breakers: &[u32]) {
    let h: Vec<u32> = h.iter().map(|t| t.0).collect();
    let n = h.len();
    if n == 0 || breakers.contains(&h[n - 1]) {
        return;
    }
    let mut best: Vec<(u32, usize)> = Vec::new();
    for idx in 0..n - 1 {
        let next = h[idx + 1];
        if h[idx] != h[n - 1] || breakers.contains(&next) {
            continue;
        }
        let mut len = 1;
        while len <= idx && h[idx - len] == h[n - 1 - len] && !breakers.contains(&h[n - 1 - len]) {
            len += 1;
        }
        match best.iter_mut().find(|(t, _)| *t == next) {
            Some(e) => e.1 = e.1.max(len),
            None => best.push((next, len)),
        }
    }
    for (t, len) in best {
        if len >= allowed {
            l[t as usize] -= mult * base.powi((len - allowed) as i32);
        }
    }
}

/// DRY with scripted logits: a model that prefers to go on with the cycle `a b c` (and `d`, `:`
/// less) writes `abcabcabc…` greedily. With DRY in the chain the greedy output equals that of
/// the same model applying webui's quadratic DRY to its own logits (prompt included, breakers
/// `:`), over several settings and prompts; `dry_penalty_last_n: 0` turns it off; a breaker
/// after every cycle lets a cycle shorter than the allowed length recur.
#[test]
fn dry_breaks_repeats_in_the_decoding_loop() {
    let v = vocab(&[b"a", b"b", b"c", b"d", b":", b"</s>"], &[5]);
    let cycle = |h: &[TokenId], l: &mut [f32]| {
        let next = match h.last().map(|t| t.0) {
            Some(0) => 1,
            Some(1) => 2,
            _ => 0,
        };
        l[next] = 5.0;
        l[3] = 3.0;
        l[4] = 2.5;
    };
    let opts = |sampling| GenerateOptions { max_tokens: 24, sampling, ..GenerateOptions::default() };
    let plain =
        generate(&mut ScriptedModel::new(v.len(), cycle), &v, None, &[], &opts(SamplingParams::greedy())).unwrap();
    assert_eq!(plain.text(), "abcabcabcabcabcabcabcabc");
    let prompts: [&[TokenId]; 2] = [&[], &[TokenId(0), TokenId(1), TokenId(2), TokenId(0)]];
    for (mult, base, allowed) in [(4.0f32, 2.0f32, 2usize), (0.8, 1.75, 2), (1.5, 1.5, 3), (3.0, 2.0, 1)] {
        for prompt in prompts {
            let p = SamplingParams {
                dry_multiplier: mult,
                dry_base: base,
                dry_allowed_length: allowed,
                dry_sequence_breakers: vec![":".into()],
                ..SamplingParams::greedy()
            };
            let got = generate(&mut ScriptedModel::new(v.len(), cycle), &v, None, prompt, &opts(p)).unwrap();
            let mut by_hand = ScriptedModel::new(v.len(), move |h, l| {
                cycle(h, l);
                naive_dry(h, l, (mult, base, allowed), &[4]);
            });
            let want = generate(&mut by_hand, &v, None, prompt, &opts(SamplingParams::greedy())).unwrap();
            assert_eq!(ids(&got), ids(&want), "{mult} {base} {allowed} {prompt:?}: {:?}", got.text());
            assert_ne!(got.text(), plain.text(), "DRY changed nothing");
        }
    }
    // Off with a window of none.
    let off = SamplingParams { dry_multiplier: 4.0, dry_penalty_last_n: Some(0), ..SamplingParams::greedy() };
    assert_eq!(
        generate(&mut ScriptedModel::new(v.len(), cycle), &v, None, &[], &opts(off)).unwrap().text(),
        plain.text()
    );
    // A model that says `:` after every `c`: no repeat reaches back over it, the cycle goes on.
    let with_colon = |h: &[TokenId], l: &mut [f32]| {
        let next = match h.last().map(|t| t.0) {
            Some(0) => 1,
            Some(1) => 2,
            Some(2) => 4,
            _ => 0,
        };
        l[next] = 5.0;
        l[3] = 3.0;
    };
    let p = |breakers: Vec<String>| SamplingParams {
        dry_multiplier: 4.0,
        dry_allowed_length: 3,
        dry_sequence_breakers: breakers,
        ..SamplingParams::greedy()
    };
    let out =
        generate(&mut ScriptedModel::new(v.len(), with_colon), &v, None, &[], &opts(p(vec![":".into()]))).unwrap();
    assert_eq!(out.text(), "abc:".repeat(6));
    let out =
        generate(&mut ScriptedModel::new(v.len(), with_colon), &v, None, &[], &opts(p(vec!["*".into()]))).unwrap();
    assert_ne!(out.text(), "abc:".repeat(6), "without `:` as a breaker the cycle is a repeat");
}
