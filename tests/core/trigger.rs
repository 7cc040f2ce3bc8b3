//! Triggered (lazy) constraints (issue 25 item 2): free text until the trigger, then the
//! constraint; an output that never writes the trigger is free text.

use strictly::automaton::{Compiled, Constraint, VocabEnv};
use strictly::grammar::trigger::Trigger;
use strictly::grammar::TokenRef;
use strictly::{TokenId, TokenSet};

use crate::common::{random_sample, real_env, real_vocabs, tiny_vocab, walk_checking_masks};

fn triggered(then: Constraint) -> Constraint {
    Constraint::Triggered { triggers: vec!["<json>".into()], then: Box::new(then) }
}

#[test]
fn free_text_until_the_trigger_then_the_constraint() {
    for (name, vocab) in real_vocabs() {
        let env = real_env(vocab);
        let c = Compiled::new(&env, &triggered(Constraint::Regex(r#"\{"n":[0-9]{1,3}\}"#.into()))).unwrap();
        let mut m = c.matcher();
        let mut mask = TokenSet::new(vocab.len());
        // Free text: nearly every token, and the output may end.
        m.commit_bytes("Hello, I think <js".as_bytes()).unwrap();
        m.fill_mask(&mut mask);
        assert!(mask.len() > vocab.len() / 2, "{name}: free text allows most tokens");
        assert!(m.is_accepting(), "{name}: free text may end");
        // The trigger: from here on, the constraint.
        m.commit_bytes(b"on>").unwrap();
        assert!(!m.is_accepting());
        m.fill_mask(&mut mask);
        let allowed: Vec<TokenId> = mask.iter().collect();
        assert!(!allowed.is_empty() && allowed.iter().all(|&t| vocab.bytes(t).starts_with(b"{")), "{name}");
        assert!(m.commit_bytes(b" {").is_err(), "{name}: the constraint starts right after the trigger");
        m.commit_bytes(br#"{"n":42}"#).unwrap();
        assert!(m.is_accepting() && m.is_finished(), "{name}: complete, and nothing may follow");
        let mut slow = TokenSet::new(vocab.len());
        m.fill_mask(&mut mask);
        m.reference_mask(&mut slow);
        assert_eq!(mask, slow);
        assert!(mask.iter().all(|t| vocab.is_eos(t)));
    }
}

#[test]
fn fast_and_reference_masks_agree_around_the_trigger() {
    let vocab = tiny_vocab();
    let env = VocabEnv::new(vocab.clone());
    let c = Constraint::Triggered { triggers: vec!["ab".into()], then: Box::new(Constraint::Regex("c{1,3}d".into())) };
    let c = Compiled::new(&env, &c).unwrap();
    for prefix in ["", "a", "ba", "b\u{e9}a", "ab", "abc", "abcc", "aab", "eeab"] {
        let mut m = c.matcher();
        m.commit_bytes(prefix.as_bytes()).unwrap_or(());
        let (mut fast, mut slow) = (TokenSet::new(vocab.len()), TokenSet::new(vocab.len()));
        m.fill_mask(&mut fast);
        m.reference_mask(&mut slow);
        assert_eq!(fast, slow, "after {prefix:?}");
    }
    // An output is free text, or free text, the trigger and the constraint: never two triggers.
    let mut m = c.matcher();
    m.commit_bytes(b"eab").unwrap();
    assert!(m.commit_bytes(b"ab").is_err());
}

#[test]
fn samples_are_free_text_or_text_then_the_constraint() {
    let (_, vocab) = &real_vocabs()[0];
    let env = real_env(vocab);
    // A trigger random logits write: a single common letter.
    let c = Compiled::new(
        &env,
        &Constraint::Triggered { triggers: vec!["e".into()], then: Box::new(Constraint::Regex("[0-9]{2}!".into())) },
    )
    .unwrap();
    let re = regex::Regex::new(r"^(?s)([^e]*)e[0-9]{2}!$").unwrap();
    let mut triggered = 0;
    for seed in 0..12 {
        let out = random_sample(&c, seed, 40).unwrap();
        let text = out.text();
        if text.contains('e') {
            assert!(re.is_match(&text), "seed {seed}: {text:?}");
            triggered += 1;
        }
    }
    assert!(triggered > 0, "some sample writes the trigger");
}

#[test]
fn an_empty_trigger_is_refused() {
    let (_, vocab) = &real_vocabs()[0];
    let e = Compiled::new(
        &real_env(vocab),
        &Constraint::Triggered {
            triggers: vec![Trigger::Text(String::new())],
            then: Box::new(Constraint::Regex("a".into())),
        },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("trigger"), "{e}");
}

/// Random walks through free text, the trigger and the constraint: the fast mask (whose memo
/// treats same-looking rows as one) equals the reference at every step.
#[test]
fn fast_equals_reference_on_walks_through_free_text() {
    use rand::SeedableRng;
    let cases: Vec<(std::sync::Arc<strictly::Vocab>, usize)> =
        vec![(tiny_vocab(), 60), (real_vocabs()[0].1.clone(), 8)];
    for (vocab, steps) in cases {
        let env = VocabEnv::new(vocab.clone());
        let c = Constraint::Triggered {
            triggers: vec!["ab".into()],
            then: Box::new(Constraint::Regex("c{1,3}d|e".into())),
        };
        let c = Compiled::new(&env, &c).unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        for walk in 0..3 {
            walk_checking_masks(&c, &mut rng, steps, &format!("walk {walk}"));
        }
    }
}

/// Several triggers: the text before the constraint holds none of them, and the first one the
/// output completes starts the constraint; fast masks equal the reference throughout.
#[test]
fn the_first_of_several_triggers_starts_the_constraint() {
    use rand::SeedableRng;
    let triggers = ["e", "ou"];
    let c = Constraint::Triggered {
        triggers: triggers.iter().map(|&t| t.into()).collect(),
        then: Box::new(Constraint::Regex("[0-9]{2}!".into())),
    };
    let re = regex::Regex::new(r"^(?s)(.*?)(e|ou)[0-9]{2}!$").unwrap();
    for (name, vocab) in real_vocabs().iter().take(2) {
        let env = real_env(vocab);
        let compiled = Compiled::new(&env, &c).unwrap();
        let mut by = [0, 0];
        for seed in 0..16 {
            let text = random_sample(&compiled, seed, 40).unwrap().text();
            match re.captures(&text) {
                Some(m) => {
                    assert!(!m[1].contains('e') && !m[1].contains("ou"), "{name}, seed {seed}: {text:?}");
                    by[usize::from(&m[2] == "ou")] += 1;
                }
                None => assert!(!text.contains('e') && !text.contains("ou"), "{name}, seed {seed}: {text:?}"),
            }
        }
        assert!(by[0] > 0, "{name}: some sample starts with \"e\": {by:?}");
        let mut m = compiled.matcher();
        m.commit_bytes(b"xo").unwrap();
        m.commit_bytes(b"u").unwrap();
        assert!(!m.is_accepting() && m.commit_bytes(b"e").is_err(), "{name}: \"ou\" started the constraint");
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        walk_checking_masks(&compiled, &mut rng, 8, name);
    }
    let (_, vocab) = &real_vocabs()[0];
    let none = Constraint::Triggered { triggers: vec![], then: Box::new(Constraint::Regex("a".into())) };
    assert!(Compiled::new(&real_env(vocab), &none).is_err());
}

/// A token trigger (Llama 3's `<|python_tag|>`, a control token): free text until that token,
/// then the constraint; its text spelled by text tokens is free text and starts nothing. With a
/// text trigger beside it, either starts the constraint. Fast == reference on walks.
#[test]
fn a_token_trigger_starts_the_constraint_only_as_that_token() {
    let Some((_, vocab)) = real_vocabs().iter().find(|(n, _)| n == "llama-3.2") else {
        assert!(crate::common::shared_data().is_none(), "llama-3.2 is a shared tokenizer");
        return;
    };
    let tag = (0..vocab.len() as u32).map(TokenId).find(|&t| vocab.bytes(t) == b"<|python_tag|>").unwrap();
    let env = real_env(vocab);
    let then = || Box::new(Constraint::Regex(r#"\{"n":[0-9]\}"#.into()));
    for trigger in [TokenRef::Name("<|python_tag|>".into()), TokenRef::parse(&format!("<[{}]>", tag.0))] {
        let c = Compiled::new(&env, &Constraint::Triggered { triggers: vec![Trigger::Token(trigger)], then: then() })
            .unwrap();
        let mut m = c.matcher();
        let mut mask = TokenSet::new(vocab.len());
        m.fill_mask(&mut mask);
        assert!(mask.contains(tag) && vocab.eos().iter().all(|&e| mask.contains(e)), "free text, or the tag");
        m.commit_bytes(b"Let me call <|python_tag|> spelled out. ").unwrap();
        assert!(m.is_accepting(), "its text started nothing");
        m.commit(tag).unwrap();
        m.fill_mask(&mut mask);
        assert!(!m.is_accepting() && !mask.contains(tag));
        assert!(m.commit_bytes(b"hello").is_err(), "the constraint runs after the token");
        m.commit_bytes(br#"{"n":7}"#).unwrap();
        assert!(m.is_accepting());
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(9);
        walk_checking_masks(&c, &mut rng, 8, "token trigger");
    }
    // A text trigger and a token trigger together.
    let both = Constraint::Triggered {
        triggers: vec!["CALL:".into(), Trigger::Token(TokenRef::Name("<|python_tag|>".into()))],
        then: then(),
    };
    let c = Compiled::new(&env, &both).unwrap();
    for start in [b"CALL:".as_slice(), b""] {
        let mut m = c.matcher();
        m.commit_bytes(b"ok ").unwrap();
        if start.is_empty() {
            m.commit(tag).unwrap();
        } else {
            m.commit_bytes(start).unwrap();
        }
        assert!(!m.is_accepting());
        m.commit_bytes(br#"{"n":1}"#).unwrap();
        assert!(m.is_accepting());
    }
    // A token no vocabulary entry is: an error naming it.
    let bad = Constraint::Triggered { triggers: vec![Trigger::Token(TokenRef::Name("<|nope|>".into()))], then: then() };
    let e = Compiled::new(&env, &bad).err().expect("refused").to_string();
    assert!(e.contains("no single token of the vocabulary is `<|nope|>`"), "{e}");
}
