//! The context-free engine: fast mask == reference mask on random reachable states of every
//! shipped grammar, and agreement with the independent reference recognizer
//! (`strictly::grammar::reference`). The shared corpus through both engines and every
//! vocabulary is the `corpus` tier.

use std::path::PathBuf;
use std::sync::Arc;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use strictly::{
    automaton::{BackendChoice, CompileOptions, Compiled, Constraint, VocabEnv},
    grammar::{ebnf, reference::Reference, Grammar},
    TokenId, TokenSet, Vocab,
};

use crate::common::{real_env, real_vocabs, tiny_vocab};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn shipped_grammar(name: &str) -> Grammar {
    let text = std::fs::read_to_string(root().join("grammars").join(name)).unwrap();
    ebnf::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

const SHIPPED: &[&str] = &["json.gbnf", "arithmetic.gbnf", "sql-select.gbnf", "csv.gbnf", "tool-call.gbnf"];

/// Random walk from the start: fast == reference at every state (plain and budgeted), with
/// rollbacks; `oracle` (if given) checks text tokens and EOS against the reference recognizer.
fn walk(vocab: &Arc<Vocab>, c: &Arc<Compiled>, seed: u64, steps: usize, oracle: Option<&Reference>) {
    let mut m = c.matcher();
    let width = vocab.len() + 3;
    let (mut fast, mut slow) = (TokenSet::new(width), TokenSet::new(width));
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut text: Vec<u8> = Vec::new();
    for step in 0..steps {
        m.fill_mask(&mut fast);
        m.reference_mask(&mut slow);
        assert_eq!(fast, slow, "seed {seed} step {step} after {:?}", String::from_utf8_lossy(&text));
        if let Some(r) = oracle {
            for id in (0..vocab.len() as u32).map(TokenId) {
                let want = if vocab.is_eos(id) {
                    r.accepts(&text)
                } else if vocab.kind(id) == strictly::vocab::TokenKind::Text {
                    let mut t = text.clone();
                    t.extend_from_slice(vocab.bytes(id));
                    r.is_prefix(&t)
                } else {
                    false
                };
                assert_eq!(
                    fast.contains(id),
                    want,
                    "oracle: token {:?} after {:?}",
                    vocab.name(id),
                    String::from_utf8_lossy(&text)
                );
            }
        }
        let budget = rng.random_range(1..40);
        m.fill_mask_within(&mut fast, budget);
        m.reference_mask_within(&mut slow, budget);
        assert_eq!(fast, slow, "budget {budget} seed {seed} step {step}");
        let allowed: Vec<TokenId> = fast.iter().filter(|t| !vocab.is_eos(*t)).collect();
        if allowed.is_empty() {
            break;
        }
        // Prefer short tokens sometimes so walks go deep into the structure.
        let t = allowed[rng.random_range(0..allowed.len())];
        m.commit(t).unwrap();
        text.extend_from_slice(vocab.bytes(t));
        if rng.random_bool(0.1) {
            m.rollback(1).unwrap();
            text.truncate(text.len() - vocab.bytes(t).len());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4, ..ProptestConfig::default() })]

    #[test]
    fn fast_mask_equals_reference_for_shipped_grammars(seed in any::<u64>(), which in 0..SHIPPED.len()) {
        let g = shipped_grammar(SHIPPED[which]);
        for (_, vocab) in real_vocabs() {
            let c = Compiled::new(&real_env(vocab), &Constraint::Grammar(g.clone())).unwrap();
            walk(vocab, &c, seed, 8, None);
        }
    }

    #[test]
    fn earley_agrees_with_the_reference_recognizer(seed in any::<u64>(), which in 0..SHIPPED.len()) {
        let g = shipped_grammar(SHIPPED[which]);
        let v = tiny_vocab();
        let c = Compiled::with_options(&VocabEnv::new(v.clone()), &Constraint::Grammar(g.clone()), &CompileOptions { backend: BackendChoice::Earley, ..Default::default() }).unwrap();
        let r = Reference::new(&g);
        walk(&v, &c, seed, 12, Some(&r));
    }
}

#[test]
fn hand_written_grammars_agree_with_the_reference() {
    let grammars = [
        // left recursion, nullable rules, nested repetition, ambiguity
        r#"root ::= e
           e ::= e "+" t | t
           t ::= t "*" f | f
           f ::= "(" e ")" | [0-9]+"#,
        r#"root ::= a b a
           a ::= "a"* | "ab"
           b ::= ("b" | a)?"#,
        r#"root ::= "{" (pair ("," pair)*)? "}"
           pair ::= "\"" [a-c]* "\"" ":" root | "\"e\":" [0-9]"#,
        r#"root ::= x{2,4} "c"
           x ::= "a" root? | "b""#,
    ];
    let v = tiny_vocab();
    for (i, text) in grammars.iter().enumerate() {
        let g = ebnf::parse(text).unwrap();
        let r = Reference::new(&g);
        let c = Compiled::with_options(
            &VocabEnv::new(v.clone()),
            &Constraint::Grammar(g.clone()),
            &CompileOptions { backend: BackendChoice::Earley, ..Default::default() },
        )
        .unwrap();
        for seed in 0..6 {
            walk(&v, &c, seed * 31 + i as u64, 14, Some(&r));
        }
    }
}

#[test]
fn non_productive_and_recursive_errors() {
    let v = tiny_vocab();
    let g = ebnf::parse("root ::= a\na ::= a \"x\"").unwrap();
    let e = Compiled::new(&VocabEnv::new(v.clone()), &Constraint::Grammar(g)).err().unwrap().to_string();
    assert!(e.contains("derives no finite string") && e.contains("1:1"), "{e}");
    // A non-productive alternative is dropped; the rest still works.
    let g = ebnf::parse("root ::= \"a\" | b\nb ::= b \"c\"").unwrap();
    let c = Compiled::new(&VocabEnv::new(v.clone()), &Constraint::Grammar(g)).unwrap();
    let mut mask = TokenSet::new(v.len());
    c.matcher().fill_mask(&mut mask);
    let got: Vec<&[u8]> = mask.iter().map(|t| v.bytes(t)).collect();
    assert_eq!(got, vec![&b"a"[..]]);
}

#[test]
fn grammar_outputs_are_complete_under_a_budget() {
    let v = tiny_vocab();
    let g = ebnf::parse(r#"root ::= "{" (root ("," root)*)? "}" | "a""#).unwrap();
    let c = Compiled::new(&VocabEnv::new(v.clone()), &Constraint::Grammar(g.clone())).unwrap();
    let r = Reference::new(&g);
    for seed in 0..20u64 {
        let mut m = c.matcher();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut mask = TokenSet::new(v.len());
        let max = 6 + seed as usize % 10;
        let mut text = Vec::new();
        for used in 0..max {
            m.fill_mask_within(&mut mask, max - used);
            let ids: Vec<TokenId> = mask.iter().filter(|t| !v.is_eos(*t)).collect();
            if ids.is_empty() {
                break;
            }
            let t = ids[rng.random_range(0..ids.len())];
            m.commit(t).unwrap();
            text.extend_from_slice(v.bytes(t));
        }
        assert!(m.is_accepting(), "seed {seed}: {:?} is not complete", String::from_utf8_lossy(&text));
        assert!(r.accepts(&text));
    }
}

#[test]
fn limits_surface_as_errors() {
    use strictly::automaton::CfgLimits;
    let v = tiny_vocab();
    // A chain of 5,000 rules (each one regular) must neither overflow the stack nor fail.
    let mut text = String::from("root ::= r0 \"a\"\n");
    for i in 0..5000 {
        text.push_str(&format!("r{i} ::= r{} | \"b\"\n", i + 1));
    }
    text.push_str("r5000 ::= \"c\"\n");
    let g = ebnf::parse(&text).unwrap();
    let c = Compiled::new(&VocabEnv::new(v.clone()), &Constraint::Grammar(g)).unwrap();
    let mut m = c.matcher();
    m.commit(v.trie().lookup(b"c")[0]).unwrap();
    m.commit(v.trie().lookup(b"a")[0]).unwrap();
    assert!(m.is_accepting());
    // A highly ambiguous grammar under a tiny row limit: commit reports the limit.
    let g = ebnf::parse("root ::= x\nx ::= x x | x x x | \"a\"").unwrap();
    let opts = CompileOptions {
        limits: CfgLimits { max_row_items: 40, ..CfgLimits::default() },
        backend: BackendChoice::Earley,
    };
    let c = Compiled::with_options(&VocabEnv::new(v.clone()), &Constraint::Grammar(g), &opts).unwrap();
    let mut m = c.matcher();
    let a = v.trie().lookup(b"a")[0];
    let err = (0..50).find_map(|_| m.commit(a).err()).expect("the row limit is hit");
    assert!(err.to_string().contains("Earley items"), "{err}");
    // Counted repetition of a recursive rule beyond the unroll limit.
    let g = ebnf::parse("root ::= x{5000}\nx ::= \"(\" x \")\" | \"a\"").unwrap();
    let e = Compiled::new(&VocabEnv::new(v), &Constraint::Grammar(g)).err().unwrap().to_string();
    assert!(e.contains("limit exceeded"), "{e}");
}

/// A counted repetition of a regular expression (a class, a group, a regular rule) is regular
/// however large the count: it compiles to one lexeme instead of hitting the unroll limit,
/// and its masks are the reference masks.
#[test]
fn counted_regular_repetitions_compile_at_any_count() {
    let grammars = [
        // Countable units (prefix-free): a counter.
        "root ::= [a-zа-я一-龥]{0,2048}",
        "root ::= ([a-z] | [а-я] | \"一\"){0,2048} \".\"",
        "root ::= \"<\" hex{2500,} \">\"\nhex ::= [0-9a-f]",
        // Not countable (a unit may go on after it is complete): the repeated regex.
        "root ::= word{2,3000}\nword ::= [a-z] [0-9]?",
    ];
    let tiny = tiny_vocab();
    for text in grammars {
        let g = ebnf::parse(text).unwrap();
        let c = Compiled::new(&VocabEnv::new(tiny.clone()), &Constraint::Grammar(g.clone()))
            .unwrap_or_else(|e| panic!("{text:?}: {e}"));
        for seed in 0..3 {
            walk(&tiny, &c, seed, 12, None);
        }
        for (_, vocab) in real_vocabs() {
            let c = Compiled::new(&real_env(vocab), &Constraint::Grammar(g.clone())).unwrap();
            walk(vocab, &c, 1, 8, None);
        }
    }
    // The count is exact.
    let g = ebnf::parse("root ::= [a-zа-я一-龥]{0,2048}").unwrap();
    let c = Compiled::new(&VocabEnv::new(tiny.clone()), &Constraint::Grammar(g)).unwrap();
    let mut m = c.matcher();
    m.commit_bytes("я一".repeat(1024).as_bytes()).unwrap();
    assert!(m.is_accepting());
    assert!(m.commit_bytes(b"a").is_err());
    // A repeated non-regular body keeps the unroll limit.
    let g = ebnf::parse("root ::= x{2001}\nx ::= \"(\" x \")\" | \"a\"").unwrap();
    let e = Compiled::new(&VocabEnv::new(tiny), &Constraint::Grammar(g)).err().unwrap().to_string();
    assert!(e.contains("copies of a repeated non-regular expression"), "{e}");
}

/// JSON Schemas whose strings and keys compile to lexemes (intersections and complements of
/// regexes): the engine's product automata against the reference recognizer, which runs the
/// regexes side by side on its own; and the fast mask against the slow one on real tokenizers.
#[test]
fn lexeme_schemas_agree_with_the_reference() {
    use strictly::grammar::json_schema::{compile, JsonSchemaOptions};
    let schemas = [
        serde_json::json!({"type": "string", "pattern": "^[a-c]+$", "minLength": 2, "maxLength": 4}),
        serde_json::json!({"type": "string", "pattern": "b", "maxLength": 3, "not": {"enum": ["abc", "b"]}}),
        serde_json::json!({"type": "object", "patternProperties": {"^a": {"type": "integer"}, "b$": {"type": "boolean"}},
                           "properties": {"ab": {}}, "additionalProperties": {"type": "null"}}),
        serde_json::json!({"type": "object", "propertyNames": {"pattern": "^[a-c]{1,2}$"}, "additionalProperties": {"enum": [1, 2]}}),
        serde_json::json!({"type": "array", "items": {"not": {"pattern": "^a"}}}),
    ];
    let opts =
        JsonSchemaOptions { whitespace: strictly::grammar::json_schema::Whitespace::Compact, ..Default::default() };
    // The tiny vocabulary plus what JSON structure needs.
    let mut toks: Vec<Vec<u8>> =
        (0..tiny_vocab().len() as u32 - 1).map(|i| tiny_vocab().bytes(TokenId(i)).to_vec()).collect();
    toks.extend(
        ["[", "]", ",", "n", "u", "l", "t", "r", "f", "s", "0", "null", "\"a", "\","].map(|t| t.as_bytes().to_vec()),
    );
    toks.push(b"</s>".to_vec());
    let v = Arc::new(Vocab::from_byte_tokens(toks.clone(), &[toks.len() as u32 - 1]));
    for (i, s) in schemas.iter().enumerate() {
        let g = compile(s, &opts).unwrap_or_else(|e| panic!("{s}: {e}")).grammar;
        let r = Reference::new(&g);
        for engine in [BackendChoice::Auto, BackendChoice::Earley] {
            let c = Compiled::with_options(
                &VocabEnv::new(v.clone()),
                &Constraint::Grammar(g.clone()),
                &CompileOptions { backend: engine, ..Default::default() },
            )
            .unwrap();
            for seed in 0..4 {
                walk(&v, &c, seed * 17 + i as u64, 14, Some(&r));
            }
        }
        for (_, vocab) in real_vocabs() {
            let c = Compiled::new(&real_env(vocab), &Constraint::Grammar(g.clone())).unwrap();
            walk(vocab, &c, i as u64, 6, None);
        }
    }
}
