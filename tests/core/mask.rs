//! The fast trie-walk mask equals the slow byte-by-byte reference mask on random reachable
//! states, for every real tokenizer; and matcher behaviour on a tiny vocabulary.

use std::sync::Arc;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use strictly::{
    automaton::{Compiled, Constraint, VocabEnv},
    TokenId, TokenSet, Vocab,
};

use crate::common::{real_vocabs, tiny_vocab};

const REGEXES: &[&str] = &[
    r"[a-z]+( [a-z]+)*",
    r"\p{Han}{1,4}|[α-ω]+|[😀-🙏]{2}",
    r"\d{3}-\d{4}",
    r"(January|February|March|April|May|June|July|August) [1-9][0-9]?",
    r#"\{"name": "[^"\\]{0,12}", "age": [1-9][0-9]?\}"#,
    r".{0,6}",
    r"[A-Za-z0-9._%+-]{1,10}@[a-z]{2,8}\.(com|org)",
];

/// Walks `steps` random tokens from the start, checking fast == reference at every state
/// (plain and budgeted), with occasional rollbacks.
fn check_random_walk(vocab: &Arc<Vocab>, regex: &str, seed: u64, steps: usize) {
    let c = Compiled::new(&VocabEnv::new(vocab.clone()), &Constraint::Regex(regex.into())).unwrap();
    let mut m = c.matcher();
    let width = vocab.len() + 7; // logits wider than the vocabulary
    let (mut fast, mut slow) = (TokenSet::new(width), TokenSet::new(width));
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for step in 0..steps {
        m.fill_mask(&mut fast);
        m.reference_mask(&mut slow);
        assert_eq!(fast, slow, "regex {regex:?} seed {seed} step {step}");
        assert!(fast.iter().all(|t| (t.0 as usize) < vocab.len()));
        assert_eq!(fast.iter().any(|t| vocab.is_eos(t)), m.is_accepting());
        let budget = rng.random_range(1..12);
        m.fill_mask_within(&mut fast, budget);
        m.reference_mask_within(&mut slow, budget);
        assert_eq!(fast, slow, "budget {budget}, regex {regex:?} seed {seed} step {step}");
        let allowed: Vec<TokenId> = fast.iter().filter(|t| !vocab.is_eos(*t)).collect();
        if allowed.is_empty() {
            break;
        }
        let t = allowed[rng.random_range(0..allowed.len())];
        m.commit(t).unwrap();
        if rng.random_bool(0.15) {
            m.rollback(1).unwrap();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn fast_mask_equals_reference_on_real_tokenizers(seed in any::<u64>(), which in 0..REGEXES.len()) {
        for (_, vocab) in real_vocabs() {
            check_random_walk(vocab, REGEXES[which], seed, 6);
        }
    }

    #[test]
    fn fast_mask_equals_reference_on_tiny_vocab(seed in any::<u64>(), which in 0..REGEXES.len()) {
        check_random_walk(&tiny_vocab(), REGEXES[which], seed, 20);
        check_random_walk(&tiny_vocab(), "(ab|é|c)*d|e{2,3}", seed, 20);
    }
}

fn ids(set: &TokenSet) -> Vec<u32> {
    set.iter().map(|t| t.0).collect()
}

fn tiny(regex: &str) -> (Arc<Vocab>, strictly::automaton::Matcher) {
    let v = tiny_vocab();
    let c = Compiled::new(&VocabEnv::new(v.clone()), &Constraint::Regex(regex.into())).unwrap();
    (v, c.matcher())
}

fn token(v: &Vocab, s: &[u8]) -> TokenId {
    v.trie().lookup(s)[0]
}

#[test]
fn eos_exactly_when_accepting() {
    let (v, mut m) = tiny("ab(c)?");
    let eos = v.eos()[0];
    let mut mask = TokenSet::new(v.len());
    m.fill_mask(&mut mask);
    assert!(!mask.contains(eos));
    m.commit(token(&v, b"ab")).unwrap();
    m.fill_mask(&mut mask);
    assert!(mask.contains(eos) && mask.contains(token(&v, b"c")));
    assert_eq!(ids(&mask).len(), 2);
    m.commit(eos).unwrap();
    assert!(m.is_ended());
    m.fill_mask(&mut mask);
    assert!(mask.is_empty());
    assert!(m.commit(token(&v, b"c")).is_err());
    m.rollback(1).unwrap();
    m.commit(token(&v, b"c")).unwrap();
    assert!(m.is_finished());
}

#[test]
fn tokens_split_inside_utf8_characters() {
    let (v, mut m) = tiny("é+");
    m.commit(token(&v, &[0xC3])).unwrap();
    assert!(!m.is_accepting());
    assert!(m.commit(token(&v, b"a")).is_err(), "rejected token leaves the state unchanged");
    m.commit(token(&v, &[0xA9])).unwrap();
    assert!(m.is_accepting());
    m.commit(token(&v, "é".as_bytes())).unwrap();
    assert!(m.is_accepting());
}

#[test]
fn rollback_is_exact() {
    let (v, mut m) = tiny("(ab|c)*");
    let mut before = TokenSet::new(v.len());
    let mut after = TokenSet::new(v.len());
    m.commit(token(&v, b"a")).unwrap();
    m.fill_mask(&mut before);
    m.commit(token(&v, b"b")).unwrap();
    m.commit(token(&v, b"c")).unwrap();
    m.rollback(2).unwrap();
    m.fill_mask(&mut after);
    assert_eq!(before, after);
    assert!(m.rollback(5).is_err());
    assert_eq!(m.len(), 1);
}

#[test]
fn forced_tokens_hold_back_the_last_token() {
    let (v, mut m) = tiny(r#"\{"a":[12]+\}"#);
    assert_eq!(m.forced_bytes(), br#"{"a":"#.to_vec());
    // `{"a":` has no single token; greedy split is { " a " : and the last one is held back.
    let forced: Vec<Vec<u8>> = m.forced_tokens().iter().map(|&t| v.bytes(t).to_vec()).collect();
    assert_eq!(forced, vec![b"{".to_vec(), b"\"".to_vec(), b"a".to_vec(), b"\"".to_vec()]);
    // When the forced text finishes the output, every token is forced.
    let (v, mut m) = tiny("abcab");
    let forced: Vec<Vec<u8>> = m.forced_tokens().iter().map(|&t| v.bytes(t).to_vec()).collect();
    assert_eq!(forced, vec![b"abc".to_vec(), b"ab".to_vec()]);
}

#[test]
fn budget_steers_into_a_complete_output() {
    // With 3 tokens left, "a" leaves "bc" (2 tokens) to finish: fine; with 2 left it is not
    // (b, c needed after it... "ab" then "c" still fits), with 1 left only "abc" finishes.
    let (v, mut m) = tiny("abc");
    let mut mask = TokenSet::new(v.len());
    m.fill_mask_within(&mut mask, 1);
    assert_eq!(ids(&mask), vec![token(&v, b"abc").0]);
    m.fill_mask_within(&mut mask, 2);
    let mut want = vec![token(&v, b"abc").0, token(&v, b"ab").0];
    want.sort();
    assert_eq!(ids(&mask), want);
    m.fill_mask_within(&mut mask, 0);
    assert!(mask.is_empty());
}

#[test]
fn choice_and_empty_language() {
    let v = tiny_vocab();
    let c = Compiled::new(&VocabEnv::new(v.clone()), &Constraint::Choice(vec!["abc".into(), "ba".into()])).unwrap();
    let mut mask = TokenSet::new(v.len());
    c.matcher().fill_mask(&mut mask);
    let got: Vec<&[u8]> = mask.iter().map(|t| v.bytes(t)).collect();
    assert_eq!(got, vec![&b"a"[..], b"b", b"ab", b"abc", b"ba"]);
    let empty = Compiled::new(&VocabEnv::new(v), &Constraint::Regex(r"[^\s\S]".into())).unwrap();
    assert!(empty.is_empty_language());
    assert!(Compiled::new(&VocabEnv::new(tiny_vocab()), &Constraint::Choice(vec![])).is_err());
}
