//! The cached mask path (context-independent tokens per lexer state, vocabulary slices taken
//! wholesale, boundary groups with merged subtrees) equals the byte-by-byte reference on random
//! walks over JSON Schema constraints whose strings are long, bounded, patterned or enumerated,
//! whose numbers and literals end lexemes inside tokens, and over grammars whose lexemes may end
//! after almost any byte (words, digits, free text), on every real tokenizer; walks prefer long
//! tokens so they dwell inside strings, and a second matcher on the same compiled constraint
//! replays the walk from the warm cache. Every state is also checked under token budgets (the
//! generation path), large then small, so the per-sequence memo is crossed with budgets. Walks
//! through class tries (a slice read through a lexeme's byte classes) give the masks the walks
//! of the slices' own tries do, on formats, patterns, numbers and word counts.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::json;
use strictly::{
    automaton::{BackendChoice, ClassPolicy, CompileOptions, Compiled, Constraint, Matcher, VocabEnv},
    grammar::json_schema::JsonSchemaOptions,
    TokenId, TokenSet, Vocab,
};

use crate::common::{real_env, real_vocabs};

fn schemas() -> Vec<serde_json::Value> {
    vec![
        json!({"type": "object", "properties": {"name": {"type": "string"}, "note": {"type": "string"}, "n": {"type": "integer"}},
               "required": ["name", "note"]}),
        json!({"type": "object", "properties": {"code": {"type": "string", "maxLength": 7}, "tags": {"type": "array", "items": {"type": "string", "minLength": 3}}},
               "required": ["code", "tags"]}),
        json!({"type": "array", "items": {"anyOf": [{"type": "string", "pattern": "^[a-z ]+$"}, {"type": "string", "enum": ["alpha beta", "gamma"]}, {"type": "number"}]}}),
        json!({"type": "object", "additionalProperties": {"type": "string"}}),
        // Declared keys beside additional ones: the key lexeme is "any string but these names".
        json!({"type": "object", "properties": {"name": {"type": "string"}, "namé": {"type": "integer"}, "n": {"type": "boolean"}},
               "additionalProperties": {"type": "string", "maxLength": 5}}),
        // Keys split between lexemes that each die on some string but not all together
        // (names, a pattern, any other name): every content token is a key prefix; and a split
        // that leaves some strings to no lexeme at all.
        json!({"type": "object", "properties": {"name": {"type": "string"}, "version": {"type": "integer"}},
               "patternProperties": {"^_": {"type": "boolean"}}, "additionalProperties": {"type": "string", "maxLength": 4}}),
        json!({"type": "object", "properties": {"id": {"type": "integer"}},
               "patternProperties": {"^x-": {"type": "string"}, "^[0-9]+$": {"type": "null"}}, "additionalProperties": false}),
        // Numbers, literals and nesting: lexemes that may end after every digit.
        json!({"type": "object", "properties": {"n": {"type": "number"}, "i": {"type": "integer", "minimum": -5}, "b": {"type": "boolean"},
               "z": {"type": "null"}, "m": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}}},
               "required": ["n", "i", "b", "z", "m"]}),
        json!({"enum": ["a", "ab", "abc", 1, 12, 123.5, true, null, {"k": "v"}, ["x"]]}),
        json!({"type": "array", "items": {"type": ["integer", "string", "boolean"]}, "minItems": 2}),
        // Strings that all of string content keeps alive but for a few bytes (`/`; U+2028 and
        // U+2029, which `.` refuses; `:` before a hex part): slices taken wholesale but for the
        // tokens holding them, with one scan and with several (a key name beside a key
        // pattern; `oneOf` patterns).
        json!({"type": "object", "properties": {"/": {"type": "integer"}, "h": {"type": "string", "pattern": "^([^:]+:[a-fA-F0-9]+|[a-fA-F0-9]{32})$"}}, "patternProperties": {"^(/[^/]+)+$": {"type": "string", "pattern": "^[^/ ]+$"}},
               "additionalProperties": false}),
        json!({"type": "array", "items": {"oneOf": [{"type": "string", "pattern": "^[a-f0-9]{8,16}-genotype-\\d+$"},
               {"type": "string", "pattern": "^.+?wild-type-genotype.*$"}, {"type": "string", "pattern": "^\\S+é$"}]}}),
        // The same inside length bounds: the bytes to avoid depend on the tokens' length.
        json!({"type": "object", "properties": {"p": {"type": "string", "pattern": "^[^<>]+$", "maxLength": 12},
               "q": {"type": "string", "pattern": "^[^ ]*$", "minLength": 2, "maxLength": 300}}, "required": ["p", "q"]}),
        // Long length bounds: counted strings computed on the fly instead of tabled.
        json!({"type": "object", "properties": {"long": {"type": "string", "minLength": 2, "maxLength": 2000}, "tag": {"type": "string", "maxLength": 600}},
               "required": ["long", "tag"]}),
        // Words in a long string, counted on the fly: each word a new place, its searches by
        // place (rows far from the bound read alike).
        json!({"type": "object", "properties": {"words": {"type": "string", "minLength": 1, "maxLength": 500, "pattern": "^(?:\\S+\\s+){0,49}\\S+$"}},
               "required": ["words"]}),
    ]
}

/// The cached path is the Earley engine's (some of these languages are regular).
fn earley() -> CompileOptions {
    CompileOptions { backend: BackendChoice::Earley, ..Default::default() }
}

/// Grammars whose lexemes may end after nearly any byte.
const GRAMMARS: &[&str] = &[
    "root ::= (word \" \")* word \".\"\nword ::= [a-zA-Z]+",
    "root ::= expr\nexpr ::= term ((\"+\" | \"-\" | \" \") term)*\nterm ::= [0-9]+ | \"(\" expr \")\"",
    "root ::= line line line\nline ::= [^\\n]* \"\\n\"",
];

/// A walk's tokens, and per step the budget it asked and the reference masks (without and
/// under that budget): a replay over the warm cache checks against them, as the reference
/// does not depend on the cache (and is the walk's dearest part).
struct Walked {
    tokens: Vec<TokenId>,
    steps: Vec<(usize, TokenSet, TokenSet)>,
}

/// Walks `steps` tokens from the start (fast == reference at every state), preferring long
/// tokens; or replays a walk (its tokens, budgets and reference masks).
fn walk(vocab: &Arc<Vocab>, c: &Arc<Compiled>, seed: u64, steps: usize, replay: Option<&Walked>) -> Walked {
    walk_from(vocab, c.matcher(), seed, steps, replay)
}

/// [`walk`] from where `m` stands.
fn walk_from(vocab: &Arc<Vocab>, mut m: Matcher, seed: u64, steps: usize, replay: Option<&Walked>) -> Walked {
    let width = vocab.len() + 5;
    let mut fast = TokenSet::new(width);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut walked = Walked { tokens: Vec::new(), steps: Vec::new() };
    for step in 0..steps {
        if replay.is_some_and(|r| step >= r.steps.len()) {
            break;
        }
        let (budget, slow, slow_within) = match replay {
            Some(r) => r.steps[step].clone(),
            None => {
                let budget = if rng.random_bool(0.5) { rng.random_range(1..12) } else { rng.random_range(12..80) };
                let (mut slow, mut slow_within) = (TokenSet::new(width), TokenSet::new(width));
                m.reference_mask(&mut slow);
                m.reference_mask_within(&mut slow_within, budget);
                (budget, slow, slow_within)
            }
        };
        let taken = &walked.tokens;
        let after = || String::from_utf8_lossy(&vocab.decode(taken)).into_owned();
        m.fill_mask(&mut fast);
        assert_eq!(fast, slow, "seed {seed} step {step} after {:?}", after());
        // Under a budget (how generation asks): one that never binds gives the same mask, and
        // a small one after it (the sequence's memo then holds a larger budget's mask) equals
        // the reference.
        m.fill_mask_within(&mut fast, 100_000);
        assert_eq!(fast, slow, "large budget, seed {seed} step {step} after {:?}", after());
        m.fill_mask_within(&mut fast, budget);
        assert_eq!(fast, slow_within, "budget {budget}, seed {seed} step {step} after {:?}", after());
        let t = match replay {
            Some(r) => match r.tokens.get(step) {
                Some(&t) => t,
                None => break,
            },
            None => {
                m.fill_mask(&mut fast);
                let allowed: Vec<TokenId> = fast.iter().filter(|t| !vocab.is_eos(*t)).collect();
                if allowed.is_empty() {
                    walked.steps.push((budget, slow, slow_within));
                    break;
                }
                let long: Vec<TokenId> = allowed.iter().copied().filter(|&t| vocab.bytes(t).len() >= 4).collect();
                let pool = if !long.is_empty() && rng.random_bool(0.6) { &long } else { &allowed };
                pool[rng.random_range(0..pool.len())]
            }
        };
        m.commit(t).unwrap();
        walked.tokens.push(t);
        walked.steps.push((budget, slow, slow_within));
    }
    walked
}

#[test]
fn cached_mask_equals_reference_on_json_schemas() {
    for (name, vocab) in real_vocabs() {
        for (i, schema) in schemas().into_iter().enumerate() {
            let c = Compiled::with_options(
                &real_env(vocab),
                &Constraint::JsonSchema(schema, JsonSchemaOptions::default()),
                &earley(),
            )
            .unwrap();
            for seed in 0..2u64 {
                let seed = seed * 1000 + i as u64;
                let taken = walk(vocab, &c, seed, 10, None);
                // A fresh matcher over the warm cache, same states.
                let again = walk(vocab, &c, seed, 10, Some(&taken));
                assert_eq!(taken.tokens, again.tokens, "{name} schema {i}");
            }
        }
    }
}

#[test]
fn cached_mask_equals_reference_on_grammars() {
    for (name, vocab) in real_vocabs() {
        for (i, text) in GRAMMARS.iter().enumerate() {
            let g = strictly::grammar::ebnf::parse(text).unwrap_or_else(|e| panic!("grammar {i}: {e}"));
            let c = Compiled::with_options(&real_env(vocab), &Constraint::Grammar(g), &earley()).unwrap();
            for seed in 0..2u64 {
                let seed = seed * 1000 + i as u64;
                let taken = walk(vocab, &c, seed, 10, None);
                let again = walk(vocab, &c, seed, 10, Some(&taken));
                assert_eq!(taken.tokens, again.tokens, "{name} grammar {i}");
            }
        }
    }
}

/// Constraints whose lexemes read few byte classes (formats, patterns, numbers, word counts):
/// the walks that class tries stand in for.
fn class_constraints() -> Vec<Constraint> {
    let schema = |s: serde_json::Value| Constraint::JsonSchema(s, JsonSchemaOptions::default());
    let mut out: Vec<Constraint> = ["email", "date", "date-time", "uuid", "ipv4", "hostname", "uri"]
        .iter()
        .map(|f| {
            schema(json!({"type": "object", "properties": {"v": {"type": "string", "format": f}}, "required": ["v"]}))
        })
        .collect();
    out.extend([
        schema(json!({"type": "array", "items": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"}, "minItems": 2})),
        schema(json!({"type": "object", "properties": {"s": {"type": "string", "pattern": "^(?:\\S+\\s+){0,5}\\S+$"},
                      "n": {"type": "number"}, "i": {"type": "integer", "minimum": -40, "maximum": 90000}},
                      "required": ["s", "n", "i"]})),
        schema(json!({"type": "object", "properties": {"w": {"type": "string", "maxLength": 9, "pattern": "^[a-z0-9_]+$"}}, "required": ["w"]})),
        // Counted on the fly (class tries over a count's places): words in at most 300
        // characters, an address in at most 254.
        schema(json!({"type": "array", "items": {"type": "string", "maxLength": 300, "pattern": "^(?:\\S+\\s+){0,4}\\S+$"}})),
        schema(json!({"type": "object", "properties": {"e": {"type": "string", "format": "email", "maxLength": 254}}, "required": ["e"]})),
        Constraint::Regex("[a-z0-9.]{1,12}@[a-z]{2,8}\\.(com|org)".into()),
        Constraint::Regex("(?:[0-9]{1,3}\\.){3}[0-9]{1,3}".into()),
    ]);
    out
}

#[test]
fn class_tries_give_the_masks_the_tries_do() {
    for (name, vocab) in real_vocabs() {
        // Every walk that can goes through a class trie, against none.
        let (eager, off) = (VocabEnv::new(vocab.clone()), VocabEnv::new(vocab.clone()));
        eager.set_class_policy(ClassPolicy::Eager);
        off.set_class_policy(ClassPolicy::Off);
        for (i, constraint) in class_constraints().iter().enumerate() {
            let compile = |env: &Arc<VocabEnv>| Compiled::with_options(env, constraint, &Default::default()).unwrap();
            let (a, b) = (compile(&eager), compile(&off));
            for seed in 0..2u64 {
                let mut rng = ChaCha8Rng::seed_from_u64(seed * 1000 + i as u64);
                let (mut ma, mut mb) = (a.matcher(), b.matcher());
                let (mut fa, mut fb) = (TokenSet::new(vocab.len()), TokenSet::new(vocab.len()));
                let mut taken = Vec::new();
                for step in 0..30 {
                    let after = || String::from_utf8_lossy(&vocab.decode(&taken)).into_owned();
                    let budget = rng.random_range(1..60);
                    ma.fill_mask_within(&mut fa, budget);
                    mb.fill_mask_within(&mut fb, budget);
                    assert_eq!(
                        fa,
                        fb,
                        "{name} constraint {i} seed {seed} step {step} budget {budget} after {:?}",
                        after()
                    );
                    ma.fill_mask(&mut fa);
                    mb.fill_mask(&mut fb);
                    assert_eq!(fa, fb, "{name} constraint {i} seed {seed} step {step} after {:?}", after());
                    let allowed: Vec<TokenId> = fa.iter().filter(|t| !vocab.is_eos(*t)).collect();
                    if allowed.is_empty() {
                        break;
                    }
                    // Mostly one-byte tokens, so the walk dwells inside the lexemes.
                    let short: Vec<TokenId> = allowed.iter().copied().filter(|&t| vocab.bytes(t).len() == 1).collect();
                    let pool = if !short.is_empty() && rng.random_bool(0.6) { &short } else { &allowed };
                    let t = pool[rng.random_range(0..pool.len())];
                    ma.commit(t).unwrap();
                    mb.commit(t).unwrap();
                    taken.push(t);
                }
            }
        }
    }
}

/// Strings counted on the fly near their bound, where every token reaches a state of its own:
/// the slice searches are shared by place and cut where the bound comes within reach, and
/// walks go through class tries over the count's places (or, without them, pruned). Walks
/// start a few characters before the bound and go past it.
#[test]
fn counts_near_their_bound_give_the_reference_masks() {
    let cases = [
        // In the fifth and last word of at most 300 characters.
        (
            json!({"type": "array", "items": {"type": "string", "maxLength": 300, "pattern": "^(?:\\S+\\s+){0,4}\\S+$"}}),
            "[\"ab cd ef gh ",
            12,
            300,
        ),
        (
            json!({"type": "object", "properties": {"t": {"type": "string", "maxLength": 400}}, "required": ["t"]}),
            "{\"t\":\"",
            0,
            400,
        ),
    ];
    for (name, vocab) in real_vocabs() {
        for policy in [ClassPolicy::Eager, ClassPolicy::Off] {
            let env = VocabEnv::new(vocab.clone());
            env.set_class_policy(policy);
            // `open` ends inside the string, `typed` characters into it.
            for (i, (schema, open, typed, bound)) in cases.iter().enumerate() {
                let constraint = Constraint::JsonSchema(schema.clone(), JsonSchemaOptions::default());
                let c = Compiled::with_options(&env, &constraint, &earley()).unwrap();
                for (j, before) in [40usize, 6].into_iter().enumerate() {
                    let mut m = c.matcher();
                    let text = format!("{open}{}", "x".repeat(bound - before - typed));
                    m.commit_bytes(text.as_bytes()).unwrap_or_else(|e| panic!("{name} case {i}: {e}"));
                    walk_from(vocab, m, (i * 10 + j) as u64, 8, None);
                }
            }
        }
    }
}
