//! Property-based fuzz targets, run for a fixed case budget (`STRICTLY_FUZZ_CASES` raises it).
//!
//! Each target feeds a front end both structure-aware inputs (generated from a small grammar of
//! the input language, so most of them compile and exercise the engines) and raw or mutated
//! text (so the parsers see garbage too). The rules checked:
//! - nothing panics, and every failure is a typed error with a non-empty one-line message;
//! - whatever compiles is judged by an independent oracle: the `regex` crate for regexes, the
//!   reference recognizer for grammars, the `jsonschema` crate for schemas;
//! - the matcher, driven by random operations (commits of allowed and of arbitrary tokens,
//!   `commit_bytes`, rollbacks past the start, forced tokens, masks), agrees with the reference
//!   recognizer after every operation, and a refused operation changes nothing.
//!
//! Crashers found here are minimized by proptest and committed under `corpus/` (see `corpus`).

use std::sync::{Arc, OnceLock};

use proptest::collection::vec;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use strictly::{
    automaton::{Compiled, Constraint, VocabEnv},
    grammar::{self, ebnf, json_schema::JsonSchemaOptions, reference::Reference, Grammar},
    vocab::TokenKind,
    Error, TokenId, TokenSet, Vocab,
};

use super::fuzz_cases;

/// The embedded 512-token vocabulary: byte fallback makes every byte spellable, so the language
/// the matcher enforces is exactly the grammar's and the reference can judge every token.
pub fn vocab() -> Arc<Vocab> {
    env().vocab().clone()
}

/// [`vocab`]'s environment, one for the tier (its caches shared, as a server's would be).
pub fn env() -> Arc<VocabEnv> {
    static E: OnceLock<Arc<VocabEnv>> = OnceLock::new();
    E.get_or_init(|| VocabEnv::new(Arc::new(Vocab::embedded()))).clone()
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig { cases: fuzz_cases(cases), failure_persistence: None, ..ProptestConfig::default() }
}

/// A compile (or parse) error must be typed and say something on one line.
pub fn assert_clear(e: &Error, input: &str) {
    let msg = e.to_string();
    assert!(!msg.trim().is_empty() && !msg.contains('\n'), "unclear error {msg:?} for {input:?}");
}

// ---- the matcher, judged by the reference recognizer ----------------------------------------

/// Drives a matcher with `steps` random operations and checks it against `r` after each one.
pub fn op_walk(c: &Arc<Compiled>, r: &Reference, seed: u64, steps: usize) {
    let vocab = c.vocab().clone();
    let mut m = c.matcher();
    let width = vocab.len() + 3; // logits wider than the vocabulary
    let (mut fast, mut slow) = (TokenSet::new(width), TokenSet::new(width));
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    // Bytes of each committed token; None for EOS.
    let mut stack: Vec<Option<Vec<u8>>> = Vec::new();
    let text = |stack: &[Option<Vec<u8>>]| -> Vec<u8> { stack.iter().flatten().flatten().copied().collect() };
    let ended = |stack: &[Option<Vec<u8>>]| stack.last().is_some_and(|t| t.is_none());
    for step in 0..steps {
        let t = text(&stack);
        let ctx = || format!("seed {seed} step {step} after {:?}", String::from_utf8_lossy(&text(&stack)));
        assert_eq!(m.len(), stack.len(), "{}", ctx());
        let accepting = !ended(&stack) && r.accepts(&t);
        assert_eq!(m.is_accepting(), accepting, "is_accepting, {}", ctx());
        assert_eq!(m.is_ended(), ended(&stack), "{}", ctx());
        match rng.random_range(0..10) {
            // Commit an allowed token (the mask checked against the slow one and the oracle).
            0..=3 => {
                m.fill_mask(&mut fast);
                m.reference_mask(&mut slow);
                assert_eq!(fast, slow, "fast mask != reference mask, {}", ctx());
                let allowed: Vec<TokenId> = fast.iter().collect();
                for &id in &allowed {
                    assert!((id.0 as usize) < vocab.len(), "id past the vocabulary allowed, {}", ctx());
                }
                if allowed.is_empty() {
                    // The reference does not keep items distinct: where every way on would repeat
                    // an earlier item of a `uniqueItems` list (its items have run out of distinct
                    // values), the matcher says so and allows nothing.
                    assert!(ended(&stack) || !r.is_prefix(&t) || m.refused_repeats(), "nothing allowed, {}", ctx());
                    continue;
                }
                let id = allowed[rng.random_range(0..allowed.len())];
                assert!(oracle_allows(&vocab, r, &stack, id), "mask allows {:?}, {}", vocab.name(id), ctx());
                m.commit(id).unwrap_or_else(|e| panic!("commit of a masked token failed: {e}, {}", ctx()));
                stack.push(token_bytes(&vocab, id));
            }
            // Commit any id, past the vocabulary included: Ok exactly when the oracle allows it.
            4..=5 => {
                let id = TokenId(rng.random_range(0..width as u32));
                let want = oracle_allows(&vocab, r, &stack, id);
                assert_eq!(m.allows(id), want, "allows({:?}), {}", id, ctx());
                match m.commit(id) {
                    Ok(()) => {
                        assert!(want, "commit accepted {:?}, {}", id, ctx());
                        stack.push(token_bytes(&vocab, id));
                    }
                    Err(Error::Limit { .. }) => return,
                    Err(e) => {
                        assert!(!want, "commit refused {:?} ({e}), {}", id, ctx());
                        assert_clear(&e, "commit");
                        assert_eq!(m.len(), stack.len(), "a refused commit changed the length, {}", ctx());
                    }
                }
            }
            // Roll back 0..=len+1 tokens (one past the start must be refused, changing nothing).
            6..=7 => {
                let n = rng.random_range(0..=stack.len() + 1);
                match m.rollback(n) {
                    Ok(()) => {
                        assert!(n <= stack.len(), "{}", ctx());
                        stack.truncate(stack.len() - n);
                    }
                    Err(e) => {
                        assert!(n > stack.len(), "rollback({n}) refused: {e}, {}", ctx());
                        assert_eq!(m.len(), stack.len(), "{}", ctx());
                    }
                }
            }
            // Forced tokens: each one must be allowed when its turn comes.
            8 => {
                let forced = m.forced_tokens();
                let at = ctx();
                for id in forced {
                    assert!(oracle_allows(&vocab, r, &stack, id), "forced {:?} not allowed, {at}", vocab.name(id));
                    m.commit(id).unwrap_or_else(|e| panic!("forced token refused: {e}, {at}"));
                    stack.push(token_bytes(&vocab, id));
                }
            }
            // Raw bytes from a small alphabet.
            _ => {
                let len = rng.random_range(0..4);
                const ALPHABET: &[u8] = b"ab{}\":,[]0 9xn\xc3\xa9\xff";
                let bytes: Vec<u8> = (0..len).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())]).collect();
                let mut cand = t.clone();
                cand.extend_from_slice(&bytes);
                let want = !bytes.is_empty() && !ended(&stack) && r.is_prefix(&cand);
                match m.commit_bytes(&bytes) {
                    Ok(()) => {
                        assert!(want, "commit_bytes({bytes:?}) accepted, {}", ctx());
                        stack.push(Some(bytes));
                    }
                    Err(Error::Limit { .. }) => return,
                    Err(e) => {
                        assert!(!want, "commit_bytes({bytes:?}) refused ({e}), {}", ctx());
                        assert_eq!(m.len(), stack.len(), "{}", ctx());
                    }
                }
            }
        }
    }
}

fn token_bytes(vocab: &Vocab, id: TokenId) -> Option<Vec<u8>> {
    (vocab.kind(id) == TokenKind::Text).then(|| vocab.bytes(id).to_vec())
}

/// Does the reference say `id` may come next?
fn oracle_allows(vocab: &Vocab, r: &Reference, stack: &[Option<Vec<u8>>], id: TokenId) -> bool {
    if (id.0 as usize) >= vocab.len() || stack.last().is_some_and(|t| t.is_none()) {
        return false;
    }
    let mut t: Vec<u8> = stack.iter().flatten().flatten().copied().collect();
    match vocab.kind(id) {
        TokenKind::Text if !vocab.bytes(id).is_empty() => {
            t.extend_from_slice(vocab.bytes(id));
            r.is_prefix(&t)
        }
        TokenKind::Special => vocab.is_eos(id) && r.accepts(&t),
        _ => false,
    }
}

/// `n` seeded random-logits samples: the output bytes of each (stop and length alike).
pub fn samples(c: &Arc<Compiled>, n: u64, max_tokens: usize) -> Vec<Vec<u8>> {
    (0..n)
        .filter_map(|seed| match crate::common::random_sample(c, seed, max_tokens) {
            Ok(out) => Some(out.bytes),
            // Refused up front, clearly: an empty language, or no output fits the budget.
            Err(e) if e.to_string().contains("no output") => None,
            // Refused on the way, clearly: a `uniqueItems` array whose items have too few
            // distinct values for its `minItems` (seen once the values run out).
            Err(e) if e.to_string().contains("no way on without repeating") => None,
            Err(e) => panic!("generate failed: {e}"),
        })
        .collect()
}

// ---- regex front end ---------------------------------------------------------------------------

fn regex_structured() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("a"),
        Just("b"),
        Just("ab"),
        Just("é"),
        Just("😀"),
        Just("."),
        Just("[a-c]"),
        Just("[^ab]"),
        Just(r"\d"),
        Just("[0-9]"),
        Just("(?i:a)"),
        Just(""),
        Just(r"\n"),
        Just("[α-γ]"),
        Just(r"\{"),
        Just(" "),
    ]
    .prop_map(String::from);
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 1..4).prop_map(|v| v.concat()),
            vec(inner.clone(), 1..4).prop_map(|v| format!("({})", v.join("|"))),
            inner.clone().prop_map(|s| format!("({s})*")),
            inner.clone().prop_map(|s| format!("({s})+")),
            inner.clone().prop_map(|s| format!("({s})??")),
            (inner.clone(), 0u32..4, 0u32..4).prop_map(|(s, a, b)| format!("({s}){{{},{}}}", a.min(b), a.max(b))),
            (inner, 0u32..3).prop_map(|(s, a)| format!("(?:{s}){{{a},}}")),
        ]
    })
}

/// Raw text from regex syntax characters: mostly invalid patterns.
fn regex_raw() -> impl Strategy<Value = String> {
    prop_oneof![r"[a-c()|*+?{}\[\]^$.0-9,\\dDwWsSpPxuU&~:-]{0,30}", ".{0,30}"]
}

/// The regex target: compile, then judge samples by the `regex` crate and walks by the reference.
pub fn check_regex(pattern: &str, seed: u64) {
    let vocab = vocab();
    let c = match Compiled::new(&VocabEnv::new(vocab.clone()), &Constraint::Regex(pattern.into())) {
        Ok(c) => c,
        Err(e) => {
            assert!(matches!(e, Error::Regex { .. } | Error::Limit { .. }), "{pattern:?}: {e:?}");
            return assert_clear(&e, pattern);
        }
    };
    // The `regex` crate as the judge, for patterns without look-around: our anchors are
    // implied and assertions inside a pattern do not constrain, which the reference models.
    let hir = strictly::regular::regex::parse(pattern).unwrap();
    let judge = hir
        .properties()
        .look_set()
        .is_empty()
        .then(|| regex::Regex::new(&format!(r"\A(?:{pattern})\z")).ok())
        .flatten();
    let g = Grammar::single(grammar::Expr::Regex(std::sync::Arc::new(hir)));
    let reference = Reference::new(&g);
    for out in samples(&c, 3, 24) {
        let text = String::from_utf8(out.clone()).unwrap_or_else(|_| panic!("{pattern:?}: output not UTF-8: {out:?}"));
        assert!(reference.accepts(&out), "{pattern:?}: reference refuses {text:?}");
        if let Some(j) = &judge {
            assert!(j.is_match(&text), "{pattern:?}: the regex crate refuses {text:?}");
        }
    }
    op_walk(&c, &reference, seed, 16);
}

proptest! {
    #![proptest_config(config(48))]

    #[test]
    fn fuzz_regex_structured(pattern in regex_structured(), seed in any::<u64>()) {
        check_regex(&pattern, seed);
    }

    #[test]
    fn fuzz_regex_raw(pattern in regex_raw(), seed in any::<u64>()) {
        check_regex(&pattern, seed);
    }
}

// ---- EBNF parser -------------------------------------------------------------------------------

/// A random grammar: `root` and up to three more rules referring to each other.
fn ebnf_structured() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("\"a\""),
        Just("\"bc\""),
        Just("[a-c]"),
        Just("[^a]"),
        Just("\"\""),
        Just("\"é\""),
        Just("r1"),
        Just("r2"),
        Just("r3"),
        Just("[0-9]"),
        Just("\"{\""),
    ]
    .prop_map(String::from);
    let expr = leaf.prop_recursive(3, 16, 3, |inner| {
        prop_oneof![
            vec(inner.clone(), 1..4).prop_map(|v| v.join(" ")),
            vec(inner.clone(), 2..4).prop_map(|v| format!("({})", v.join(" | "))),
            inner.clone().prop_map(|s| format!("({s})*")),
            inner.clone().prop_map(|s| format!("({s})+")),
            inner.clone().prop_map(|s| format!("({s})?")),
            (inner, 0u32..3, 0u32..3).prop_map(|(s, a, b)| format!("({s}){{{},{}}}", a.min(b), a.max(b))),
        ]
    });
    vec(expr, 4..5).prop_map(|bodies| {
        let names = ["root", "r1", "r2", "r3"];
        names.iter().zip(bodies).map(|(n, b)| format!("{n} ::= {b}\n")).collect()
    })
}

fn shipped_texts() -> &'static [String] {
    static T: OnceLock<Vec<String>> = OnceLock::new();
    T.get_or_init(|| {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("grammars");
        ["json.gbnf", "arithmetic.gbnf", "csv.gbnf", "sql-select.gbnf", "tool-call.gbnf"]
            .iter()
            .map(|n| std::fs::read_to_string(dir.join(n)).unwrap())
            .collect()
    })
}

/// A shipped grammar with a few random edits (deletions, insertions, duplications).
fn ebnf_mutated() -> impl Strategy<Value = String> {
    (0..5usize, vec((any::<u8>(), any::<usize>(), any::<usize>()), 1..6)).prop_map(|(which, edits)| {
        let mut chars: Vec<char> = shipped_texts()[which].chars().collect();
        const ALPHABET: &[char] = &[
            '(', ')', '|', '*', '+', '?', '{', '}', '[', ']', '"', '\\', ':', '=', '\n', ' ', '-', '^', '#', 'x', '1',
            ',', 'é',
        ];
        for (op, a, b) in edits {
            let n = chars.len().max(1);
            let (i, j) = (a % n, b % n);
            let (lo, hi) = (i.min(j), i.max(j).min(i.min(j) + 8));
            match op % 3 {
                0 if !chars.is_empty() => {
                    chars.drain(lo..hi.min(chars.len()));
                }
                1 => chars.insert(lo.min(chars.len()), ALPHABET[b % ALPHABET.len()]),
                _ if !chars.is_empty() => {
                    let piece: Vec<char> = chars[lo..hi.min(chars.len())].to_vec();
                    let at = (b / 7) % chars.len();
                    chars.splice(at..at, piece);
                }
                _ => {}
            }
        }
        chars.into_iter().collect()
    })
}

pub fn check_ebnf(src: &str, seed: u64) {
    let g = match ebnf::parse(src) {
        Ok(g) => g,
        Err(e) => {
            assert!(matches!(e, Error::Grammar { .. } | Error::Limit { .. } | Error::Regex { .. }), "{src:?}: {e:?}");
            return assert_clear(&e, src);
        }
    };
    let c = match Compiled::new(&env(), &Constraint::Grammar(g.clone())) {
        Ok(c) => c,
        Err(e) => return assert_clear(&e, src),
    };
    let reference = Reference::new(&g);
    for out in samples(&c, 2, 24) {
        assert!(reference.accepts(&out), "{src:?}: the reference refuses {:?}", String::from_utf8_lossy(&out));
    }
    op_walk(&c, &reference, seed, 12);
}

proptest! {
    #![proptest_config(config(48))]

    #[test]
    fn fuzz_ebnf_structured(src in ebnf_structured(), seed in any::<u64>()) {
        check_ebnf(&src, seed);
    }

    #[test]
    fn fuzz_ebnf_mutated(src in ebnf_mutated(), seed in any::<u64>()) {
        check_ebnf(&src, seed);
    }

    #[test]
    fn fuzz_ebnf_raw(src in r#"[a-z0-9 :=|()*+?{}\[\]"\\^#\n.-]{0,60}"#, seed in any::<u64>()) {
        check_ebnf(&src, seed);
    }
}

// ---- JSON Schema compiler ------------------------------------------------------------------------

fn schema_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({})),
        Just(json!(true)),
        Just(json!(false)),
        Just(json!({"type": "integer"})),
        Just(json!({"type": "number"})),
        Just(json!({"type": "string"})),
        Just(json!({"type": "boolean"})),
        Just(json!({"type": "null"})),
        Just(json!({"type": ["string", "null"]})),
        (0u64..4, 0u64..6).prop_map(|(a, b)| json!({"type": "string", "minLength": a, "maxLength": a + b})),
        (-5i64..5, 0i64..20).prop_map(|(a, b)| json!({"type": "integer", "minimum": a, "maximum": a + b})),
        (-5i64..5).prop_map(|a| json!({"type": "number", "exclusiveMinimum": a, "maximum": 100})),
        (1i64..5).prop_map(|m| json!({"type": "integer", "multipleOf": m})),
        Just(json!({"enum": [1, "a", null, [1], {"x": 1}, 2.5]})),
        Just(json!({"const": "x"})),
        Just(json!({"const": {"a": [true]}})),
        Just(json!({"type": "string", "pattern": "^[a-c]+$"})),
        Just(json!({"type": "string", "pattern": "b"})),
        prop_oneof![
            Just("date"),
            Just("time"),
            Just("date-time"),
            Just("email"),
            Just("ipv4"),
            Just("ipv6"),
            Just("uuid"),
            Just("hostname"),
            Just("uri"),
            Just("duration")
        ]
        .prop_map(|f| json!({"type": "string", "format": f})),
        Just(json!({"$ref": "#/$defs/d"})),
    ]
}

fn schema_structured() -> impl Strategy<Value = Value> {
    let schema = schema_leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            (vec((prop_oneof![Just("a"), Just("b"), Just("c")], inner.clone()), 0..3), any::<u8>(), prop_oneof![Just(json!(true)), Just(json!(false)), inner.clone()], 0u64..4)
                .prop_map(|(props, req, extra, min)| {
                    let names: Vec<&str> = props.iter().map(|(n, _)| *n).collect();
                    let required: Vec<&str> = names.iter().enumerate().filter(|(i, _)| req >> i & 1 == 1).map(|(_, n)| *n).collect();
                    let props: serde_json::Map<String, Value> = props.into_iter().map(|(n, s)| (n.to_string(), s)).collect();
                    json!({"type": "object", "properties": props, "required": required, "additionalProperties": extra, "minProperties": min, "maxProperties": 4})
                }),
            (inner.clone(), 0u64..3, 0u64..3, any::<bool>())
                .prop_map(|(items, a, b, u)| json!({"type": "array", "items": items, "minItems": a, "maxItems": a + b, "uniqueItems": u})),
            (vec(inner.clone(), 1..3), inner.clone()).prop_map(|(p, rest)| json!({"type": "array", "prefixItems": p, "items": rest, "maxItems": 4})),
            (inner.clone(), 0u64..3).prop_map(|(c, n)| json!({"type": "array", "contains": c, "minContains": n, "maxItems": 4})),
            vec(inner.clone(), 1..4).prop_map(|v| json!({"anyOf": v})),
            vec(inner.clone(), 1..4).prop_map(|v| json!({"oneOf": v})),
            vec(inner.clone(), 1..3).prop_map(|v| json!({"allOf": v})),
            inner.clone().prop_map(|v| json!({"not": v})),
            (inner.clone(), inner.clone()).prop_map(|(i, t)| json!({"if": i, "then": t})),
            // Keys few enough to spell out, and keys that can run out part-way (looked ahead from).
            (inner.clone(), prop_oneof![Just("^[ab]{1,2}$"), Just("^[a-z]{1,2}$")], 0u64..3)
                .prop_map(|(v, keys, min)| json!({"type": "object", "additionalProperties": v, "minProperties": min, "maxProperties": 2, "propertyNames": {"pattern": keys}})),
        ]
    });
    let defs = prop_oneof![
        Just(json!({"type": "integer", "maximum": 3})),
        Just(json!({"anyOf": [{"type": "null"}, {"type": "array", "items": {"$ref": "#/$defs/d"}, "maxItems": 2}]})),
        Just(json!({"type": "object", "properties": {"next": {"$ref": "#/$defs/d"}}})),
    ];
    (schema, defs).prop_map(|(s, d)| match s {
        Value::Object(mut o) => {
            o.insert("$defs".into(), json!({"d": d}));
            Value::Object(o)
        }
        other => other,
    })
}

/// An independent validator (formats asserted, as our compiler does).
pub fn validator(schema: &Value) -> Option<jsonschema::Validator> {
    jsonschema::draft202012::options().should_validate_formats(true).build(schema).ok()
}

pub fn check_schema(schema: &Value, seed: u64) {
    let text = schema.to_string();
    let c = match Compiled::new(&env(), &Constraint::JsonSchema(schema.clone(), JsonSchemaOptions::default())) {
        Ok(c) => c,
        Err(e) => {
            assert!(
                matches!(e, Error::Schema { .. } | Error::Limit { .. } | Error::Regex { .. } | Error::Grammar { .. }),
                "{text}: {e:?}"
            );
            return assert_clear(&e, &text);
        }
    };
    let Some(v) = validator(schema) else { return };
    for out in samples(&c, 3, 64) {
        let s = String::from_utf8(out).expect("UTF-8");
        let value: Value =
            serde_json::from_str(&s).unwrap_or_else(|e| panic!("schema {text}: output {s:?} is not JSON: {e}"));
        let errors: Vec<String> = v.iter_errors(&value).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "schema {text} (seed {seed}): output {s} is invalid: {errors:?}");
    }
    let g = strictly::grammar::json_schema::compile(schema, &JsonSchemaOptions::default()).unwrap().grammar;
    op_walk(&c, &Reference::new(&g), seed, 10);
}

/// Found by `fuzz_json_schema_structured`: distinct UUIDs under 64 tokens of the embedded
/// vocabulary. After the first item the count let `,` in (a second UUID fits in hex pairs),
/// then the repeats' check refused every token after it (its witness, the cheapest in bytes,
/// spells one character a token) and no descent ran where items must be distinct: an empty
/// mask, an engine fault, for seed 2. The descent now runs there, through the repeats' check.
#[test]
fn distinct_uuids_under_a_budget_that_binds() {
    let schema =
        json!({"type": "array", "items": {"type": "string", "format": "uuid"}, "maxItems": 2, "uniqueItems": true});
    check_schema(&schema, 0);
}

/// Found by `fuzz_json_schema_structured`: distinct arrays of any JSON under 64 tokens of the
/// embedded vocabulary. Two engine faults, each an empty mask: `[0e46,0E87` (a zero's exponent
/// fixes its value, so the item was a repeat before it ended: now refused where it becomes
/// one), and `[…],` with 19-22 tokens left, where the witness after `[` ran down `[0,0.000…`
/// (each byte refused as a repeat further on) until its bytes ran out: it now looks among the
/// short ways first (`[0,1]]`).
#[test]
fn distinct_arrays_of_any_json_under_a_budget_that_binds() {
    let schema = json!({"type": "array", "prefixItems": [{"type": "number", "exclusiveMinimum": 0, "maximum": 100}],
        "items": {"type": "array", "items": {}, "minItems": 2, "maxItems": 3, "uniqueItems": true}, "maxItems": 4});
    check_schema(&schema, 0);
    let c = Compiled::new(&env(), &Constraint::JsonSchema(schema, JsonSchemaOptions::default())).unwrap();
    assert!(samples(&c, 200, 64).len() > 150);
}

/// Found by `fuzz_json_schema_structured`: a false accept. `uniqueItems` over a small finite
/// item set is written as a rule per set of values used, and that construction dropped a
/// `contains` beside it: `[null,1]` under `contains` an integer in [3, 15] (twice). The sets
/// the array may close at now hold what `contains` asks for; here none does, so the schema is
/// refused as empty.
#[test]
fn contains_beside_distinct_items_of_a_finite_set() {
    let schema = json!({"allOf": [
        {"type": "array", "contains": {"type": "integer", "minimum": 3, "maximum": 15}, "minContains": 2, "maxItems": 4},
        {"type": "array", "items": {"enum": [1, "a", null, [1], {"x": 1}, 2.5]}, "minItems": 2, "maxItems": 3, "uniqueItems": true}]});
    check_schema(&schema, 0);
    let schema = json!({"type": "array", "contains": {"enum": [2, 3]}, "minContains": 2,
        "items": {"enum": [1, 2, 3, "a"]}, "maxItems": 3, "uniqueItems": true});
    check_schema(&schema, 0);
}

/// Found by `fuzz_json_schema_structured`: `not` of a format strictly writes a regular subset
/// of (hostname labels of at most 29 characters) complemented that subset, and so let through
/// a 38-character label, a hostname: a false accept. Such a `not` is now refused by name.
#[test]
fn not_of_a_format_written_as_a_subset_is_refused() {
    let schema =
        json!({"allOf": [{"type": "string", "format": "duration"}, {"not": {"type": "string", "format": "hostname"}}]});
    check_schema(&schema, 0);
    let e =
        Compiled::new(&env(), &Constraint::JsonSchema(schema, JsonSchemaOptions::default())).err().expect("refused");
    assert!(e.to_string().contains("hostname"), "{e}");
    // An exact format is negated: every string but a UUID.
    let schema = json!({"type": "string", "not": {"format": "uuid"}});
    check_schema(&schema, 0);
    assert!(Compiled::new(&env(), &Constraint::JsonSchema(schema, JsonSchemaOptions::default())).is_ok());
}

/// Arbitrary JSON (mostly not sensible schemas): must compile or fail clearly, never panic.
fn json_value() -> impl Strategy<Value = Value> {
    let keys = prop_oneof![
        Just("type"),
        Just("properties"),
        Just("items"),
        Just("enum"),
        Just("const"),
        Just("minLength"),
        Just("maxItems"),
        Just("pattern"),
        Just("anyOf"),
        Just("$ref"),
        Just("not"),
        Just("required"),
        Just("format"),
        Just("minimum"),
        Just("multipleOf"),
        Just("$defs"),
        Just("additionalProperties"),
        Just("prefixItems"),
        Just("x"),
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        prop_oneof![
            Just("string"),
            Just("integer"),
            Just("object"),
            Just("#"),
            Just("#/$defs/a"),
            Just("[a"),
            Just("email"),
            Just("")
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 5, move |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            vec((keys.clone(), inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
        ]
    })
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn fuzz_json_schema_structured(schema in schema_structured(), seed in any::<u64>()) {
        check_schema(&schema, seed);
    }

    #[test]
    fn fuzz_json_schema_arbitrary(schema in json_value(), seed in any::<u64>()) {
        check_schema(&schema, seed);
    }
}

// ---- tokenizer-vocabulary loading --------------------------------------------------------------------

fn embedded_tokenizer_json() -> Value {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/stories260K/tokenizer.json"),
    )
    .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Replaces, removes or retypes the value at a random path of `v`.
fn mutate_json(v: &mut Value, path: &[usize], op: u8) {
    let replacement = match op % 6 {
        0 => Value::Null,
        1 => json!(-1),
        2 => json!("\u{0}x"),
        3 => json!([]),
        4 => json!({}),
        _ => json!(4294967296u64),
    };
    let remove = op % 7 == 6;
    let Some((&i, rest)) = path.split_first() else {
        *v = replacement;
        return;
    };
    match v {
        Value::Object(o) if !o.is_empty() => {
            let key = o.keys().nth(i % o.len()).unwrap().clone();
            if rest.is_empty() {
                if remove {
                    o.shift_remove(&key);
                } else {
                    o[key.as_str()] = replacement;
                }
            } else {
                mutate_json(o.get_mut(&key).unwrap(), rest, op);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            let n = a.len();
            if rest.is_empty() {
                if remove {
                    a.remove(i % n);
                } else {
                    a[i % n] = replacement;
                }
            } else {
                mutate_json(&mut a[i % n], rest, op);
            }
        }
        other => *other = replacement,
    }
}

pub fn check_tokenizer_bytes(bytes: &[u8], tag: &str) {
    let dir = tempfile::Builder::new().prefix(&format!("strictly-fuzz-tok-{tag}-")).tempdir().unwrap();
    let path = dir.path().join("tokenizer.json");
    std::fs::write(&path, bytes).unwrap();
    let r = std::panic::catch_unwind(|| Vocab::from_tokenizer_json(&path));
    drop(dir);
    match r {
        Err(_) => panic!(
            "loading a mutated tokenizer.json panicked: {}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(300)])
        ),
        Ok(Ok(v)) => {
            // What loads must be usable: text encodes, and a mask over it is computable.
            let encoded = std::panic::catch_unwind(|| {
                (v.encode(b"Once upon a time, 42 {\"x\"}"), v.encode_canonical("h\u{e9}llo \u{1F600}"))
            });
            assert!(encoded.is_ok(), "encoding with a loaded tokenizer panicked");
            let c = Compiled::new(&VocabEnv::new(Arc::new(v)), &Constraint::Regex("[a-z]{1,3}".into()));
            if let Ok(c) = c {
                let mut m = c.matcher();
                let mut mask = TokenSet::new(c.vocab().len());
                m.fill_mask(&mut mask);
            }
        }
        Ok(Err(e)) => assert_clear(&e, "tokenizer.json"),
    }
}

proptest! {
    #![proptest_config(config(48))]

    #[test]
    fn fuzz_tokenizer_json_structure(edits in vec((vec(any::<usize>(), 1..5), any::<u8>()), 1..4)) {
        let mut v = embedded_tokenizer_json();
        for (path, op) in &edits {
            mutate_json(&mut v, path, *op);
        }
        check_tokenizer_bytes(serde_json::to_string(&v).unwrap().as_bytes(), "s");
    }

    #[test]
    fn fuzz_tokenizer_json_bytes(cut in any::<usize>(), flips in vec((any::<usize>(), any::<u8>()), 0..4)) {
        let mut bytes = serde_json::to_vec(&embedded_tokenizer_json()).unwrap();
        for (at, b) in flips {
            let n = bytes.len();
            bytes[at % n] = b;
        }
        let keep = if cut % 3 == 0 { cut % bytes.len() } else { bytes.len() };
        bytes.truncate(keep);
        check_tokenizer_bytes(&bytes, "b");
    }
}

// ---- the matcher on the shipped grammars ----------------------------------------------------------

proptest! {
    #![proptest_config(config(24))]

    #[test]
    fn fuzz_matcher_ops_on_shipped_grammars(which in 0..5usize, seed in any::<u64>()) {
        let g = ebnf::parse(&shipped_texts()[which]).unwrap();
        let c = Compiled::new(&env(), &Constraint::Grammar(g.clone())).unwrap();
        op_walk(&c, &Reference::new(&g), seed, 24);
    }
}

/// Found by `fuzz_json_schema_structured`: an object of lists of distinct recursive objects
/// (`{}`, `{"next":{}}`, ...) under 64 tokens of the embedded vocabulary. With 21 tokens left
/// after `…]` the output could end at once (`}`), so the masks did not judge tokens by what
/// keeping items distinct costs, and `,` was let through: the next list's cheapest items by
/// the count, `[{},{}]`, repeat, and the cheapest distinct ones, `[{},{"next":{}}]`, take 21
/// tokens of the 20 left: an empty mask. Each token whose count leaves less than the slack is
/// judged now, wherever the output could end.
#[test]
fn distinct_items_after_a_point_where_the_output_could_end() {
    let schema = json!({"type": "object", "additionalProperties": {"type": "array", "items": {"$ref": "#/$defs/d"},
        "minItems": 2, "maxItems": 3, "uniqueItems": true}, "maxProperties": 2, "propertyNames": {"pattern": "^[ab]{1,2}$"},
        "$defs": {"d": {"type": "object", "properties": {"next": {"$ref": "#/$defs/d"}}}}});
    check_schema(&schema, 0);
    let c = Compiled::new(&env(), &Constraint::JsonSchema(schema, JsonSchemaOptions::default())).unwrap();
    assert!(samples(&c, 100, 64).len() > 80);
}
