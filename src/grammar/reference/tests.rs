//! Tests of the reference recognizer: tables of accepted inputs and prefixes, left recursion
//! and epsilon cycles, and a property test against a brute-force enumeration of small
//! languages. (The shared corpus runs in `tests/corpus.rs`, with the reference as one judge.)

use super::*;
use crate::grammar::ebnf;
use crate::grammar::ir::{Rule, RuleId};
use proptest::prelude::*;
use std::collections::BTreeSet;

fn g(src: &str) -> Grammar {
    ebnf::parse(src).unwrap_or_else(|e| panic!("{src:?}: {e}"))
}

/// Checks `accepts` and `is_prefix` on a table of `(input, accepted, prefix)`.
fn table(src: &str, cases: &[(&str, bool, bool)]) {
    let gr = g(src);
    let r = Reference::new(&gr);
    for &(input, acc, pre) in cases {
        assert_eq!(r.accepts(input.as_bytes()), acc, "{src:?} accepts {input:?}");
        assert_eq!(r.is_prefix(input.as_bytes()), pre, "{src:?} is_prefix {input:?}");
    }
}

#[test]
fn reference_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Reference<'static>>();
}

#[test]
fn literals_and_prefixes() {
    table(
        "root ::= \"ab\" \"c\"?",
        &[
            ("", false, true),
            ("a", false, true),
            ("ab", true, true),
            ("abc", true, true),
            ("abcd", false, false),
            ("b", false, false),
        ],
    );
    table("root ::= \"\"", &[("", true, true), ("a", false, false)]);
    // Zero copies and empty sequences are the empty string, which is a prefix of itself.
    let zero = Expr::Repeat { body: Box::new(Expr::Literal("a".into())), min: 0, max: Some(0) };
    let star = Grammar::single(Expr::Repeat { body: Box::new(zero), min: 0, max: None });
    assert!(accepts(&star, b"") && is_prefix(&star, b"") && !is_prefix(&star, b"a"));
    assert!(is_prefix(&Grammar::single(Expr::Seq(vec![])), b""));
}

#[test]
fn left_recursion_and_epsilon_cycles() {
    let sum = "root ::= root \"+\" \"1\" | \"1\"";
    table(
        sum,
        &[("1", true, true), ("1+1+1", true, true), ("1+", false, true), ("+1", false, false), ("", false, true)],
    );
    // Epsilon cycles: a -> b -> a, with a way out.
    let cyc = "root ::= a\na ::= b | \"x\" a\nb ::= a | \"\"";
    table(cyc, &[("", true, true), ("xxx", true, true), ("y", false, false)]);
    // Indirect left recursion through a nullable prefix.
    let ind = "root ::= n root \"a\" | \"b\"\nn ::= \"\" | \"c\"";
    table(
        ind,
        &[("b", true, true), ("baa", true, true), ("cba", true, true), ("cb", false, true), ("ab", false, false)],
    );
    // Nullable bodies under star and counted repetition.
    table(
        "root ::= (\"a\"?)* (\"\" | \"b\"){3,5}",
        &[("", true, true), ("aab", true, true), ("bbbbb", true, true), ("bbbbbb", false, false)],
    );
}

#[test]
fn empty_languages_are_never_prefixes() {
    // `dead` derives no finite string, so nothing before it can be completed.
    let src = "root ::= \"a\" dead | \"b\"\ndead ::= \"x\" dead";
    table(src, &[("a", false, false), ("ax", false, false), ("", false, true), ("b", true, true)]);
    let never =
        Grammar::single(Expr::Seq(vec![Expr::Literal("a".into()), Expr::Regex(std::sync::Arc::new(Hir::fail()))]));
    assert!(!is_prefix(&never, b"") && !is_prefix(&never, b"a") && !accepts(&never, b"a"));
    let bad_bounds = Grammar::single(Expr::Repeat { body: Box::new(Expr::Literal("a".into())), min: 3, max: Some(2) });
    assert!(!is_prefix(&bad_bounds, b""));
}

#[test]
fn regex_leaves_match_in_full_and_by_prefix() {
    table(
        "root ::= /a|ab/ \"!\"",
        &[("a!", true, true), ("ab!", true, true), ("ab", false, true), ("abb", false, false)],
    );
    // Partial UTF-8: the first byte of "é" can still be completed.
    let gr = g("root ::= [^\"]+ \"\\\"\"");
    assert!(is_prefix(&gr, &[b'x', 0xC3]));
    assert!(!accepts(&gr, &[b'x', 0xC3, b'"']));
    assert!(accepts(&gr, "xé\"".as_bytes()));
    assert!(!is_prefix(&gr, &[0xFF]));
    table("root ::= \"x\"{10000}", &[("xxx", false, true), ("", false, true)]);
}

#[test]
fn inputs_of_200_bytes_are_fine() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/grammars/json.gbnf");
    let gr = g(&std::fs::read_to_string(path).unwrap());
    let r = Reference::new(&gr);
    let doc = r#"{"name": "strictly", "tags": ["a", "b\u00e9", 1.5e-3, true, null], "nested": {"deep": [[[{"x": -0.25}]]]}, "text": "The quick brown fox jumps over the lazy dog!!", "n": 12345678901}"#;
    assert!(doc.len() >= 180);
    let t = std::time::Instant::now();
    assert!(r.accepts(doc.as_bytes()));
    assert!(r.is_prefix(&doc.as_bytes()[..doc.len() - 1]));
    assert!(!r.accepts(&doc.as_bytes()[..doc.len() - 1]));
    eprintln!("3 checks of {} bytes: {:?}", doc.len(), t.elapsed());
}

// ---- a second, brute-force oracle for random grammars ---------------------------------

/// Small regexes over {a, b}; every prefix of a match can be completed with at most 2 bytes.
const PATTERNS: [&str; 5] = ["[ab]", "a*", "(ab|b)+", "a?b?", "[^\\s\\S]"];
const MAX_LEN: usize = 6;
type Lang = BTreeSet<Vec<u8>>;

fn all_strings(max: usize) -> Vec<Vec<u8>> {
    let mut out = vec![Vec::new()];
    let mut k = 0;
    while k < out.len() {
        if out[k].len() < max {
            for c in [b'a', b'b'] {
                let mut s = out[k].clone();
                s.push(c);
                out.push(s);
            }
        }
        k += 1;
    }
    out
}

fn concat(x: &Lang, y: &Lang) -> Lang {
    let mut out = Lang::new();
    for u in x {
        for v in y {
            if u.len() + v.len() <= MAX_LEN {
                out.insert([u.as_slice(), v.as_slice()].concat());
            }
        }
    }
    out
}

/// Words (up to MAX_LEN over {a, b}) and prefixes of words, by fixpoint over string sets.
struct Brute {
    nonempty: Vec<bool>,
    words: Vec<Lang>,
    prefixes: Vec<Lang>,
    regex_words: HashMap<String, (Lang, Lang)>,
}

impl Brute {
    fn new(gr: &Grammar, patterns: &[&str]) -> Brute {
        let mut regex_words = HashMap::new();
        for p in patterns {
            let re = regex_automata::dfa::regex::Regex::new(&format!("^(?:{p})$")).unwrap();
            let words: Lang = all_strings(MAX_LEN + 2).into_iter().filter(|s| re.is_match(s)).collect();
            let prefixes = words.iter().flat_map(|w| (0..=w.len().min(MAX_LEN)).map(|k| w[..k].to_vec())).collect();
            let words = words.into_iter().filter(|w| w.len() <= MAX_LEN).collect();
            regex_words.insert(format!("{:?}", regex_syntax::parse(p).unwrap()), (words, prefixes));
        }
        let n = gr.rules.len();
        let mut b = Brute {
            nonempty: vec![false; n],
            words: vec![Lang::new(); n],
            prefixes: vec![Lang::new(); n],
            regex_words,
        };
        loop {
            let ne: Vec<bool> = gr.rules.iter().map(|r| b.ne(&r.body)).collect();
            let words: Vec<Lang> = gr.rules.iter().map(|r| b.lang(&r.body).0).collect();
            if ne == b.nonempty && words == b.words {
                break;
            }
            (b.nonempty, b.words) = (ne, words);
        }
        loop {
            let prefixes: Vec<Lang> = gr.rules.iter().map(|r| b.lang(&r.body).1).collect();
            if prefixes == b.prefixes {
                break;
            }
            b.prefixes = prefixes;
        }
        b
    }

    fn ne(&self, e: &Expr) -> bool {
        match e {
            Expr::Empty | Expr::Literal(_) => true,
            Expr::Regex(h) => !self.regex_words[&format!("{h:?}")].1.is_empty(),
            Expr::Lexeme(_) | Expr::Mark(_) | Expr::Token(_) | Expr::TokensBut { .. } => {
                unreachable!("the brute-force enumerator is not given lexemes, marks or tokens")
            }
            Expr::Rule(r) => self.nonempty[r.0 as usize],
            Expr::Seq(xs) => xs.iter().all(|x| self.ne(x)),
            Expr::Alt(xs) => xs.iter().any(|x| self.ne(x)),
            Expr::Repeat { body, min, max } => max.is_none_or(|m| m >= *min) && (*min == 0 || self.ne(body)),
        }
    }

    /// (words, prefixes) of `e`, from the current rule tables.
    fn lang(&self, e: &Expr) -> (Lang, Lang) {
        let eps = || Lang::from([Vec::new()]);
        match e {
            Expr::Empty => (eps(), eps()),
            Expr::Literal(s) => {
                let s = s.as_bytes();
                let words = if s.len() <= MAX_LEN { Lang::from([s.to_vec()]) } else { Lang::new() };
                (words, (0..=s.len().min(MAX_LEN)).map(|k| s[..k].to_vec()).collect())
            }
            Expr::Regex(h) => self.regex_words[&format!("{h:?}")].clone(),
            Expr::Lexeme(_) | Expr::Mark(_) | Expr::Token(_) | Expr::TokensBut { .. } => {
                unreachable!("the brute-force enumerator is not given lexemes, marks or tokens")
            }
            Expr::Rule(r) => (self.words[r.0 as usize].clone(), self.prefixes[r.0 as usize].clone()),
            Expr::Seq(xs) => {
                let (mut w, mut p) = (eps(), eps());
                for x in xs {
                    let (xw, xp) = self.lang(x);
                    // Prefixes of (w x): prefixes of w if x can follow, or a word of w then a prefix of x.
                    let mut np = if self.ne(x) { p } else { Lang::new() };
                    np.extend(concat(&w, &xp));
                    (w, p) = (concat(&w, &xw), np);
                }
                if !self.ne(e) {
                    p.clear();
                }
                (w, p)
            }
            Expr::Alt(xs) => {
                let (mut w, mut p) = (Lang::new(), Lang::new());
                for x in xs {
                    let (xw, xp) = self.lang(x);
                    w.extend(xw);
                    p.extend(xp);
                }
                (w, p)
            }
            Expr::Repeat { body, min, max } => {
                if max.is_some_and(|m| m < *min) {
                    return (Lang::new(), Lang::new());
                }
                let top = max.unwrap_or(*min + MAX_LEN as u32 + 1);
                let (bw, bp) = self.lang(body);
                let body_ne = self.ne(body);
                let (mut w, mut p) = (eps(), eps()); // body^0
                let (mut all_w, mut all_p) = (Lang::new(), Lang::new());
                for k in 0..=top {
                    if k >= *min && (k == 0 || body_ne) {
                        all_w.extend(w.iter().cloned());
                        all_p.extend(p.iter().cloned());
                    }
                    // body^(k+1) = body · body^k
                    let mut np = if k == 0 || body_ne { bp.clone() } else { Lang::new() };
                    np.extend(concat(&bw, &p));
                    (w, p) = (concat(&bw, &w), np);
                }
                (all_w, all_p)
            }
        }
    }
}

fn arb_expr(rules: u32) -> impl Strategy<Value = Expr> {
    let leaf = prop_oneof![
        Just(Expr::Empty),
        proptest::sample::select(vec!["a", "b", "ab", "ba"]).prop_map(|s| Expr::Literal(s.into())),
        proptest::sample::select(PATTERNS.to_vec())
            .prop_map(|p| Expr::Regex(std::sync::Arc::new(regex_syntax::parse(p).unwrap()))),
        (0..rules).prop_map(|r| Expr::Rule(RuleId(r))),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 1..4).prop_map(Expr::Seq),
            proptest::collection::vec(inner.clone(), 1..4).prop_map(Expr::Alt),
            (inner, 0u32..3, proptest::option::of(0u32..4)).prop_map(|(b, min, max)| Expr::Repeat {
                body: Box::new(b),
                min,
                max
            }),
        ]
    })
}

fn arb_grammar() -> impl Strategy<Value = Grammar> {
    (1u32..4).prop_flat_map(|n| {
        proptest::collection::vec(arb_expr(n), n as usize).prop_map(|bodies| Grammar {
            rules: bodies
                .into_iter()
                .enumerate()
                .map(|(i, body)| Rule { name: format!("r{i}"), body, span: None })
                .collect(),
            start: RuleId(0),
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn agrees_with_brute_force(gr in arb_grammar()) {
        let brute = Brute::new(&gr, &PATTERNS);
        let r = Reference::new(&gr);
        for s in all_strings(MAX_LEN - 1) {
            let (acc, pre) = (r.accepts(&s), r.is_prefix(&s));
            prop_assert_eq!(acc, brute.words[0].contains(&s), "accepts {:?} in {:#?}", s, gr);
            prop_assert_eq!(pre, brute.prefixes[0].contains(&s), "is_prefix {:?} in {:#?}", s, gr);
            prop_assert!(!acc || pre);
        }
    }
}
