//! compute-mask and compile benchmarks (divan): `cargo bench --bench mask`.
//!
//! Uses the Llama-3.2 tokenizer from `../shared/data` (or `STRICTLY_SHARED_DATA`), falling back
//! to the embedded 512-token vocabulary. `compute_mask` times `fill_mask` again and again at a
//! fixed state of one sequence: after the first iteration that is the sequence's own memo (the
//! cost of every token inside one plain string). `compute_mask_new_sequence` times the first
//! mask of a fresh sequence at that state: the vocabulary's lexer-state cache is warm (as for
//! any state some earlier request has visited), the sequence's memo is not. `first_mask` times
//! compile + the first mask on a fresh constraint. `class_trie_build` times a class trie's build
//! over each string-content slice.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use serde_json::{json, Value};
use strictly::{
    automaton::{Compiled, Constraint, Matcher, VocabEnv},
    grammar::json_schema::JsonSchemaOptions,
    TokenSet, Vocab,
};

fn main() {
    divan::main();
}

/// One environment for the process, as a server keeps one per vocabulary.
fn env() -> Arc<VocabEnv> {
    static E: OnceLock<Arc<VocabEnv>> = OnceLock::new();
    E.get_or_init(|| VocabEnv::new(vocab())).clone()
}

fn vocab() -> Arc<Vocab> {
    static V: OnceLock<Arc<Vocab>> = OnceLock::new();
    V.get_or_init(|| {
        let dir = std::env::var_os("STRICTLY_SHARED_DATA")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data"));
        let path = dir.join("tokenizers/llama-3.2/tokenizer.json");
        Arc::new(Vocab::from_tokenizer_json(&path).unwrap_or_else(|_| Vocab::embedded()))
    })
    .clone()
}

/// (name, schema, a prefix of a valid instance to reach the state being measured).
fn cases() -> Vec<(&'static str, Value, &'static str)> {
    vec![
        (
            "object_start",
            json!({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name"]}),
            "",
        ),
        (
            "in_string",
            json!({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name"]}),
            r#"{"name":"Ada Lov"#,
        ),
        (
            "in_bounded_string",
            json!({"type": "object", "properties": {"code": {"type": "string", "maxLength": 40}}, "required": ["code"]}),
            r#"{"code":"abc"#,
        ),
        ("in_number", json!({"type": "object", "properties": {"n": {"type": "number"}}}), r#"{"n":12"#),
        (
            "after_value",
            json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "boolean"}, "c": {"type": "array", "items": {"type": "integer"}}}}),
            r#"{"a":"x""#,
        ),
    ]
}

fn compiled(schema: &Value) -> Arc<Compiled> {
    Compiled::new(&env(), &Constraint::JsonSchema(schema.clone(), JsonSchemaOptions::default())).expect("compiles")
}

fn at(c: &Arc<Compiled>, prefix: &str) -> Matcher {
    let mut m = c.matcher();
    if !prefix.is_empty() {
        m.commit_bytes(prefix.as_bytes()).expect("valid prefix");
    }
    m
}

const NAMES: &[&str] = &["object_start", "in_string", "in_bounded_string", "in_number", "after_value"];

fn case(name: &str) -> (Value, &'static str) {
    cases().into_iter().find(|c| c.0 == name).map(|c| (c.1, c.2)).expect("known case")
}

#[divan::bench(args = NAMES)]
fn compute_mask(bencher: divan::Bencher, name: &str) {
    let (schema, prefix) = case(name);
    let c = compiled(&schema);
    let mut m = at(&c, prefix);
    let mut mask = TokenSet::new(vocab().len());
    bencher.bench_local(|| m.fill_mask(divan::black_box(&mut mask)));
}

#[divan::bench(args = NAMES)]
fn compute_mask_new_sequence(bencher: divan::Bencher, name: &str) {
    let (schema, prefix) = case(name);
    let c = compiled(&schema);
    at(&c, prefix).fill_mask(&mut TokenSet::new(vocab().len()));
    let mut mask = TokenSet::new(vocab().len());
    bencher.with_inputs(|| at(&c, prefix)).bench_local_refs(|m| m.fill_mask(divan::black_box(&mut mask)));
}

#[divan::bench(args = NAMES)]
fn compile(bencher: divan::Bencher, name: &str) {
    let (schema, _) = case(name);
    env().slices();
    bencher.bench_local(|| compiled(divan::black_box(&schema)));
}

#[divan::bench(args = NAMES)]
fn first_mask(bencher: divan::Bencher, name: &str) {
    let (schema, prefix) = case(name);
    let mut mask = TokenSet::new(vocab().len());
    env().slices();
    bencher.bench_local(|| {
        let c = compiled(&schema);
        at(&c, prefix).fill_mask(&mut mask);
    });
}

/// 100 decode steps of free text under `tool_choice: auto` (Hermes tool calls, one tool): a
/// commit and a mask per step, from a fresh sequence whose first mask is already taken. Free
/// text may end after any byte, so the state after each token looks new; the sequence's memo
/// must see through that (see `Chart::same_row`).
#[divan::bench]
fn tools_auto_free_text_100_steps(bencher: divan::Bencher) {
    use strictly::tools::{calls_grammar, ToolFormat, ToolMode};
    let args = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    let g = strictly::grammar::json_schema::compile(&args, &JsonSchemaOptions::default()).unwrap().grammar;
    let grammar = calls_grammar(vec![("weather".into(), g)], &ToolMode::Auto, 8, ToolFormat::Hermes, None);
    let c = Compiled::new(&env(), &Constraint::Grammar(grammar)).unwrap();
    let text = "Sure, I can help with that. Let me think about the weather in Paris today and tomorrow. ".repeat(8);
    let tokens: Vec<_> = vocab().encode(text.as_bytes()).unwrap().into_iter().take(100).collect();
    let mut mask = TokenSet::new(vocab().len());
    c.matcher().fill_mask(&mut mask);
    bencher
        .with_inputs(|| {
            let mut m = c.matcher();
            m.fill_mask(&mut TokenSet::new(vocab().len()));
            m
        })
        .bench_local_refs(|m| {
            for &t in &tokens {
                m.commit(t).unwrap();
                m.fill_mask(divan::black_box(&mut mask));
            }
        });
}

/// Building the class trie of each string-content slice under a content-like map (printable
/// ASCII one class, UTF-8 continuation and lead bytes two more): a pass over every node of the
/// slice, as when a bounded string first walks near its bound (see `mask_cache::classes`).
#[divan::bench(args = [0, 1, 2, 3, 4, 5])]
fn class_trie_build(bencher: divan::Bencher, part: usize) {
    let env = env();
    let Some(slice) = env.slices().body.get(part) else { return };
    let map: [u8; 256] = std::array::from_fn(|b| match b as u8 {
        b'"' | b'\\' | 0..=0x1f => u8::MAX,
        0x20..=0x7f => 0,
        0x80..=0xbf => 1,
        _ => 2,
    });
    let most = slice.trie.node_count() / 8 + 1;
    bencher.bench_local(|| slice.trie.by_classes(divan::black_box(&map), most).map(|t| t.node_count()));
}
