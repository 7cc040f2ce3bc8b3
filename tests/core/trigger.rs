//! Triggered (lazy) constraints (issue 25 item 2): free text until the trigger, then the
//! constraint; an output that never writes the trigger is free text.

use strictly::automaton::{Compiled, Constraint, VocabEnv};
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
        &Constraint::Triggered { triggers: vec![String::new()], then: Box::new(Constraint::Regex("a".into())) },
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
    let triggers = vec!["e".to_string(), "ou".to_string()];
    let c = Constraint::Triggered { triggers: triggers.clone(), then: Box::new(Constraint::Regex("[0-9]{2}!".into())) };
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
