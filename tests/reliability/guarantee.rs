//! The guarantee at scale: sample many outputs per constraint and validate every one with an
//! independent judge, counting zero failures.
//!
//! - JSON Schema: a deterministic, evenly spread subset of JSONSchemaBench (every schema that
//!   compiles), seeded random logits, with the embedded 512-token vocabulary (300 schemas) and
//!   the real 128k-token Llama-3.2 vocabulary (12 schemas: each of its steps costs far more);
//!   each output is parsed by serde_json and validated by the `jsonschema` crate with format
//!   assertion on (our compiler asserts `format`). `STRICTLY_GUARANTEE_SCHEMAS` (0 = all),
//!   `STRICTLY_GUARANTEE_SAMPLES` (default 2) and `STRICTLY_GUARANTEE_MAX_TOKENS` (default 160)
//!   scale it for long runs.
//! - The same with the real embedded model (stories260K) for a handful of schemas.
//! - Grammars: the shipped JSON grammar judged by serde_json, arithmetic by an evaluator, with
//!   the Llama-3.2 vocabulary.
//!
//! Counts are printed as `guarantee ...: schemas N samples M failures 0`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::Value;
use strictly::{
    automaton::{Compiled, Constraint, VocabEnv},
    decode::{self, GenerateOptions, LanguageModel, RandomLogits},
    grammar::json_schema::JsonSchemaOptions,
    sample::SamplingParams,
    Vocab,
};

use super::fuzz::validator;
use crate::common::{real_vocabs, shared_data};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

fn jsb_schemas(data: &Path) -> Vec<(PathBuf, Value)> {
    let mut files = Vec::new();
    for dir in std::fs::read_dir(data.join("jsonschemabench")).unwrap() {
        let dir = dir.unwrap().path();
        if dir.is_dir() {
            for f in std::fs::read_dir(&dir).unwrap() {
                files.push(f.unwrap().path());
            }
        }
    }
    files.sort();
    files
        .into_iter()
        .filter_map(|f| {
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&f).ok()?).ok()?;
            let schema = v.get("schema").cloned().unwrap_or(v);
            Some((f, schema))
        })
        .collect()
}

/// Every `k`-th of `items` so that about `n` are taken (all if `n` is 0).
fn spread<T: Clone>(items: &[T], n: usize) -> Vec<T> {
    if n == 0 || n >= items.len() {
        return items.to_vec();
    }
    let step = items.len() as f64 / n as f64;
    (0..n).map(|i| items[(i as f64 * step) as usize].clone()).collect()
}

#[derive(Default)]
struct Tally {
    schemas: AtomicU64,
    compiled: AtomicU64,
    judged: AtomicU64,
    samples: AtomicU64,
    stop: AtomicU64,
    no_budget: AtomicU64,
    failures: std::sync::Mutex<Vec<String>>,
}

fn opts(seed: u64, max_tokens: usize) -> GenerateOptions {
    GenerateOptions {
        max_tokens,
        sampling: SamplingParams { seed: Some(seed), ..SamplingParams::default() },
        ..GenerateOptions::default()
    }
}

/// How many outputs to sample per schema, and the token budget of each.
#[derive(Clone, Copy)]
struct Samples {
    n: u64,
    max_tokens: usize,
}

/// Samples outputs of `c` with `model_for(seed)` and validates each one; records failures.
fn judge_samples(
    c: &Arc<Compiled>,
    v: &jsonschema::Validator,
    samples: Samples,
    prompt: &[strictly::TokenId],
    mut model_for: impl FnMut(u64) -> Box<dyn LanguageModel>,
    what: &str,
    t: &Tally,
) {
    for seed in 0..samples.n {
        let mut model = model_for(seed);
        let mut m = c.matcher();
        let opts = opts(seed, samples.max_tokens);
        let out = match decode::generate(model.as_mut(), c.vocab(), Some(&mut m), prompt, &opts) {
            Ok(out) => out,
            Err(e) => {
                // The only errors allowed up front: the schema admits no value at all, or no
                // complete output fits the token budget.
                assert!(e.to_string().contains("no output"), "{what}: {e}");
                t.no_budget.fetch_add(1, Ordering::Relaxed);
                continue;
            }
        };
        t.samples.fetch_add(1, Ordering::Relaxed);
        if out.finish_reason == decode::FinishReason::Stop {
            t.stop.fetch_add(1, Ordering::Relaxed);
        }
        let text = out.text();
        let problem = match serde_json::from_str::<Value>(&text) {
            Err(e) => Some(format!("not JSON: {e}")),
            Ok(value) => {
                let errors: Vec<String> =
                    v.iter_errors(&value).map(|e| format!("{} at {}", e, e.instance_path())).collect();
                (!errors.is_empty()).then(|| errors.join("; "))
            }
        };
        if let Some(p) = problem {
            t.failures.lock().unwrap().push(format!("{what} seed {seed} ({:?}): {text}: {p}", out.finish_reason));
        }
    }
}

fn report(name: &str, t: &Tally) {
    let failures = t.failures.lock().unwrap();
    let line = format!(
        "guarantee {name}: schemas {} compiled {} judged {} | samples {} (stop {}, empty language or no complete output within the budget {}) failures {}",
        t.schemas.load(Ordering::Relaxed),
        t.compiled.load(Ordering::Relaxed),
        t.judged.load(Ordering::Relaxed),
        t.samples.load(Ordering::Relaxed),
        t.stop.load(Ordering::Relaxed),
        t.no_budget.load(Ordering::Relaxed),
        failures.len()
    );
    println!("{line}");
    eprintln!("{line}");
    // A run that judged nothing proves nothing.
    assert!(t.judged.load(Ordering::Relaxed) > 0 && t.samples.load(Ordering::Relaxed) > 0, "nothing judged: {line}");
    assert!(
        failures.is_empty(),
        "{name}: {} invalid outputs, e.g.:\n{}",
        failures.len(),
        failures.iter().take(8).cloned().collect::<Vec<_>>().join("\n")
    );
}

/// `n` evenly spread JSONSchemaBench schemas (`$STRICTLY_GUARANTEE_SCHEMAS` overrides; 0 = all),
/// `$STRICTLY_GUARANTEE_SAMPLES` (default 2) random-logits samples of each, judged.
fn jsb_guarantee(name: &str, vocab: &Arc<Vocab>, n: usize) {
    let Some(data) = shared_data() else { return };
    let all = jsb_schemas(&data);
    assert!(all.len() > 7000, "{} schemas", all.len());
    let picked = spread(&all, env_usize("STRICTLY_GUARANTEE_SCHEMAS", n));
    let t0 = std::time::Instant::now();
    let samples = env_usize("STRICTLY_GUARANTEE_SAMPLES", 2) as u64;
    let t = Tally::default();
    let next = AtomicU64::new(0);
    let env = VocabEnv::new(vocab.clone());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                let Some((file, schema)) = picked.get(i) else { break };
                t.schemas.fetch_add(1, Ordering::Relaxed);
                let Ok(c) = Compiled::new(&env, &Constraint::JsonSchema(schema.clone(), JsonSchemaOptions::default()))
                else {
                    continue;
                };
                t.compiled.fetch_add(1, Ordering::Relaxed);
                // Schemas the independent validator cannot build (remote refs, ...) are not judged.
                let Some(v) = validator(schema) else { continue };
                t.judged.fetch_add(1, Ordering::Relaxed);
                let what = file.strip_prefix(&data).unwrap_or(file).display().to_string();
                let max_tokens = env_usize("STRICTLY_GUARANTEE_MAX_TOKENS", 160);
                judge_samples(
                    &c,
                    &v,
                    Samples { n: samples, max_tokens },
                    &[],
                    |seed| Box::new(RandomLogits::new(vocab.len(), seed ^ i as u64)),
                    &what,
                    &t,
                );
            });
        }
    });
    report(&format!("jsonschemabench/{name}/random ({:.0} s)", t0.elapsed().as_secs_f64()), &t);
}

/// Many schemas through the embedded 512-token vocabulary (cheap steps: breadth).
#[test]
fn jsonschemabench_samples_validate_embedded_vocab() {
    jsb_guarantee("embedded", &Arc::new(Vocab::embedded()), 300);
}

/// Fewer through the real 128k-token Llama-3.2 vocabulary (each step walks 128k tokens).
#[test]
fn jsonschemabench_samples_validate_llama3() {
    let Some((_, vocab)) = real_vocabs().iter().find(|(n, _)| n == "llama-3.2") else { return };
    jsb_guarantee("llama-3.2", vocab, 12);
}

#[cfg(feature = "model")]
#[test]
fn schema_samples_of_the_real_model_validate() {
    use strictly::model::{LoadOptions, LoadedModel};
    let m = LoadedModel::embedded(&LoadOptions::default()).unwrap();
    let prompt = m.prompt.encode("Once upon a time").unwrap();
    let mut schemas: Vec<(String, Value)> = vec![
        (
            "person".into(),
            serde_json::json!({"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 120}, "email": {"type": "string", "format": "email"}}, "required": ["name", "age"], "additionalProperties": false}),
        ),
        (
            "list".into(),
            serde_json::json!({"type": "array", "items": {"enum": ["cat", "dog", 3, null]}, "minItems": 1, "maxItems": 4, "uniqueItems": true}),
        ),
        (
            "date".into(),
            serde_json::json!({"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}, "id": {"type": "string", "format": "uuid"}}, "required": ["when", "id"]}),
        ),
        (
            "oneOf".into(),
            serde_json::json!({"oneOf": [{"type": "integer", "multipleOf": 3}, {"type": "integer", "multipleOf": 5}, {"type": "string", "pattern": "^[a-z]{2,4}$"}]}),
        ),
    ];
    if let Some(data) = shared_data() {
        schemas.extend(spread(&jsb_schemas(&data), 12).into_iter().map(|(f, s)| (f.display().to_string(), s)));
    }
    let t = Tally::default();
    for (what, schema) in &schemas {
        t.schemas.fetch_add(1, Ordering::Relaxed);
        let Ok(c) = Compiled::new(&m.env, &Constraint::JsonSchema(schema.clone(), JsonSchemaOptions::default())) else {
            continue;
        };
        t.compiled.fetch_add(1, Ordering::Relaxed);
        let Some(v) = validator(schema) else { continue };
        t.judged.fetch_add(1, Ordering::Relaxed);
        let samples = Samples { n: 2, max_tokens: 160 };
        judge_samples(&c, &v, samples, &prompt, |_| Box::new(m.model.restart()), what, &t);
    }
    report("embedded stories260K model", &t);
}

#[test]
fn grammar_samples_pass_independent_parsers_at_scale() {
    let Some((_, vocab)) = real_vocabs().iter().find(|(n, _)| n == "llama-3.2") else { return };
    let n = env_usize("STRICTLY_GUARANTEE_GRAMMAR_SAMPLES", 60) as u64;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("grammars");
    let mut failures = Vec::new();
    let mut count = 0;
    let env = VocabEnv::new(vocab.clone());
    for name in ["json.gbnf", "arithmetic.gbnf"] {
        let g = strictly::grammar::ebnf::parse(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap();
        let c = Compiled::new(&env, &Constraint::Grammar(g)).unwrap();
        for seed in 0..n {
            let mut model = RandomLogits::new(vocab.len(), seed);
            let mut m = c.matcher();
            let out = decode::generate(&mut model, vocab, Some(&mut m), &[], &opts(seed, 64)).unwrap();
            let text = out.text();
            count += 1;
            let ok = match name {
                "json.gbnf" => match serde_json::from_str::<Value>(&text) {
                    Ok(_) => true,
                    // RFC 8259 puts no bound on numbers; serde_json refuses ones past f64.
                    Err(e) => e.to_string().contains("number out of range"),
                },
                _ => crate::arithmetic::eval(&text).is_some(),
            };
            if !ok {
                failures.push(format!("{name} seed {seed}: {text:?}"));
            }
        }
    }
    println!("guarantee grammars/llama-3.2/random: samples {count} failures {}", failures.len());
    assert!(failures.is_empty(), "{failures:?}");
}
