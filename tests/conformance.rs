//! Conformance tier: the official JSON Schema Test Suite (draft 2020-12, `optional/` included)
//! and the shared JSONSchemaBench split, through the real Llama-3.2 tokenizer.
//!
//! Each instance is serialized compactly (serde_json, key order kept), tokenized canonically,
//! and committed token by token; it is accepted if every token is allowed and the matcher ends
//! accepting. Counts are printed; the checked-in ratchet (`tests/conformance-baseline.json`)
//! fails the test if agreement or the number of compiled schemas drops, and there must never be
//! a false accept. Set `STRICTLY_UPDATE_BASELINE=1` to record improvements.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};
use strictly::{
    automaton::{Compiled, Constraint, VocabEnv},
    grammar::json_schema::JsonSchemaOptions,
    Vocab,
};

use crate::common::{real_vocabs, shared_data};

#[derive(Debug, Default, Clone, Copy, serde::Serialize, serde::Deserialize, PartialEq)]
struct Counts {
    schemas: u64,
    compiled: u64,
    tests: u64,
    agree: u64,
    false_accept: u64,
    false_reject: u64,
    /// Tests whose schema did not compile.
    not_compiled: u64,
}

fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
        } else if p.extension().is_some_and(|e| e == "json") {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// (schema, [(instance, valid)]) groups of a test-suite or JSONSchemaBench file.
fn groups(file: &Path) -> Vec<(Value, Vec<(Value, bool)>)> {
    let Ok(d) = serde_json::from_str::<Value>(&std::fs::read_to_string(file).unwrap()) else { return Vec::new() };
    let tests = |t: &Value| -> Vec<(Value, bool)> {
        t.as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| Some((t.get("data")?.clone(), t.get("valid")?.as_bool()?)))
            .collect()
    };
    match &d {
        Value::Array(a) => a.iter().map(|g| (g["schema"].clone(), tests(&g["tests"]))).collect(),
        Value::Object(o) if o.contains_key("schema") => {
            vec![(o["schema"].clone(), o.get("tests").map(tests).unwrap_or_default())]
        }
        _ => Vec::new(),
    }
}

fn accepts(c: &Arc<Compiled>, vocab: &Vocab, text: &str) -> bool {
    let Some(tokens) = vocab.encode_canonical(text) else { return false };
    let mut m = c.matcher();
    tokens.iter().all(|&t| m.commit(t).is_ok()) && m.is_accepting()
}

/// Runs every file on `threads` threads; returns the counts and the false accepts found.
fn run(files: &[PathBuf], vocab: &Arc<Vocab>, threads: usize, opts: &JsonSchemaOptions) -> (Counts, Vec<String>) {
    let chunks: Vec<&[PathBuf]> = files.chunks(files.len().div_ceil(threads).max(1)).collect();
    // One environment for the run, as a server keeps one per vocabulary: its caches are shared.
    let env = VocabEnv::new(vocab.clone());
    let results: Vec<(Counts, Vec<String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .iter()
            .map(|chunk| {
                let env = env.clone();
                std::thread::Builder::new()
                    .stack_size(16 << 20)
                    .spawn_scoped(s, move || {
                        let mut n = Counts::default();
                        let mut bad = Vec::new();
                        for f in *chunk {
                            for (schema, tests) in groups(f) {
                                n.schemas += 1;
                                let compiled =
                                    Compiled::new(&env, &Constraint::JsonSchema(schema.clone(), opts.clone()));
                                let Ok(c) = compiled else {
                                    n.not_compiled += tests.len() as u64;
                                    n.tests += tests.len() as u64;
                                    continue;
                                };
                                n.compiled += 1;
                                for (data, valid) in tests {
                                    n.tests += 1;
                                    let text = serde_json::to_string(&data).unwrap();
                                    match (accepts(&c, env.vocab(), &text), valid) {
                                        (a, v) if a == v => n.agree += 1,
                                        (true, false) => {
                                            n.false_accept += 1;
                                            bad.push(format!(
                                                "{}: schema {schema} accepted invalid {text}",
                                                f.display()
                                            ));
                                        }
                                        _ => n.false_reject += 1,
                                    }
                                }
                            }
                        }
                        (n, bad)
                    })
                    .unwrap()
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut total = Counts::default();
    let mut bad = Vec::new();
    for (c, b) in results {
        total.schemas += c.schemas;
        total.compiled += c.compiled;
        total.tests += c.tests;
        total.agree += c.agree;
        total.false_accept += c.false_accept;
        total.false_reject += c.false_reject;
        total.not_compiled += c.not_compiled;
        bad.extend(b);
    }
    (total, bad)
}

fn baseline_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/conformance-baseline.json")
}

fn ratchet(name: &str, got: Counts, bad: &[String]) {
    eprintln!("conformance {name}: {got:?}");
    println!(
        "conformance {name}: schemas {} compiled {} | tests {} agree {} false_accept {} false_reject {} not_compiled {}",
        got.schemas, got.compiled, got.tests, got.agree, got.false_accept, got.false_reject, got.not_compiled
    );
    assert!(
        bad.is_empty(),
        "{name}: {} false accepts, e.g.:\n{}",
        bad.len(),
        bad.iter().take(5).cloned().collect::<Vec<_>>().join("\n")
    );
    let path = baseline_path();
    let mut all: Value =
        std::fs::read_to_string(&path).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_else(|| json!({}));
    let base: Option<Counts> = all.get(name).and_then(|v| serde_json::from_value(v.clone()).ok());
    if std::env::var_os("STRICTLY_UPDATE_BASELINE").is_some() {
        all[name] = serde_json::to_value(got).unwrap();
        std::fs::write(&path, serde_json::to_string_pretty(&all).unwrap() + "\n").unwrap();
        return;
    }
    let base = base
        .unwrap_or_else(|| panic!("no baseline for {name} in {}: run with STRICTLY_UPDATE_BASELINE=1", path.display()));
    assert!(got.agree >= base.agree, "{name}: agreement regressed {} → {} (baseline {base:?})", base.agree, got.agree);
    assert!(got.compiled >= base.compiled, "{name}: compiled schemas regressed {} → {}", base.compiled, got.compiled);
    if got.agree > base.agree || got.compiled > base.compiled {
        eprintln!("{name}: improved over the baseline; record it with STRICTLY_UPDATE_BASELINE=1");
    }
}

fn llama3() -> Option<Arc<Vocab>> {
    real_vocabs().iter().find(|(n, _)| n == "llama-3.2").map(|(_, v)| v.clone())
}

#[test]
fn json_schema_test_suite_draft2020_12() {
    let (Some(data), Some(vocab)) = (shared_data(), llama3()) else { return };
    let files = json_files(&data.join("json-schema-test-suite/tests/draft2020-12"));
    assert!(files.len() > 40);
    // The suite's `remotes/`, registered under the URIs its tests use (the suite serves them
    // at http://localhost:1234/); nothing is fetched.
    let remotes = data.join("json-schema-test-suite/remotes");
    // The schema's exact language: conformance is measured on it.
    let mut opts = JsonSchemaOptions::exact();
    for f in json_files(&remotes) {
        let rel = f.strip_prefix(&remotes).unwrap().to_string_lossy().replace('\\', "/");
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        opts.documents.insert(format!("http://localhost:1234/{rel}"), doc);
    }
    let (counts, bad) = run(&files, &vocab, 2, &opts);
    ratchet("draft2020-12", counts, &bad);
}

#[test]
fn jsonschemabench() {
    let (Some(data), Some(vocab)) = (shared_data(), llama3()) else { return };
    let files = json_files(&data.join("jsonschemabench"));
    assert!(files.len() > 7000);
    let (counts, bad) = run(&files, &vocab, 2, &JsonSchemaOptions::exact());
    ratchet("jsonschemabench", counts, &bad);
}

/// A schema whose rewrites multiply at every level of a recursion (the meta-schema for the
/// security assessment of JSON Schemas: `anyOf` and `dependencies` at every level) compiles
/// each distinct merge once, in bounded memory. It ran out of memory once recursions through
/// merged schemas stopped unfolding to the depth limit; then it stopped at the rules limit,
/// the same merges made again on every path to them.
#[test]
fn a_schema_that_multiplies_compiles_each_merge_once() {
    let Some(data) = shared_data() else { return };
    let path = data.join("jsonschemabench/Github_medium/o39217.json");
    let doc: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let g = strictly::grammar::json_schema::compile(&doc["schema"], &JsonSchemaOptions::exact()).unwrap();
    // 8,792 rules (the limit is 100,000).
    assert!(g.grammar.rules.len() < 20_000, "{} rules", g.grammar.rules.len());
}

/// A schema past the rules limit stops there with a clear error that says where, early (a
/// hundred objects of a hundred array members, each some ten rules).
#[test]
fn a_schema_past_the_rules_limit_stops_with_a_clear_error() {
    let leaf = json!({"type": "array", "items": {"type": "object", "properties": {"x": {"type": "integer"}}}});
    let inner: serde_json::Map<String, Value> = (0..100).map(|j| (format!("q{j}"), leaf.clone())).collect();
    let outer: serde_json::Map<String, Value> =
        (0..120).map(|i| (format!("p{i}"), json!({"type": "object", "properties": inner}))).collect();
    let schema = json!({"type": "object", "properties": outer});
    let e = strictly::grammar::json_schema::compile(&schema, &JsonSchemaOptions::exact()).err().unwrap().to_string();
    assert!(e.contains("grammar rules built for this schema") && e.contains("/properties/p"), "{e}");
}
