//! Coverage-guided fuzzing (`strictly::fuzz`, `sample --cover/--mutate`), judged by checkers
//! that share no code with the generator: the reference recognizer over the IR for grammars,
//! serde_json for JSON, and the `jsonschema` crate for schemas.
//! - `--cover` reaches every reachable unit (alternative, repetition boundary) of every shipped
//!   grammar within a few dozen samples, and every sample is in the language;
//! - every near miss is outside the language (and, for schemas, invalid JSON or invalid by the
//!   independent validator);
//! - choice streams: an empty stream gives a shortest member, and the same stream the same text.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Value};
use strictly::automaton::Constraint;
use strictly::fuzz::{mutate, Checker, GenOptions, Generator, RngSource, StreamSource};
use strictly::grammar::{ebnf, reference::Reference, Grammar};

use crate::common::shared_data;

fn shipped(name: &str) -> Grammar {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("grammars").join(name);
    ebnf::parse(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Draws `n` verified samples with coverage steering; returns them and (covered, total).
fn cover(
    g: &Arc<Grammar>,
    checker: &Checker,
    n: usize,
    max_bytes: u32,
    seed: u64,
) -> (Vec<String>, usize, usize, Generator) {
    let mut gen = Generator::new(g.clone(), GenOptions { max_bytes, ..GenOptions::default() }).unwrap();
    let mut src = RngSource::new(seed);
    let mut out = Vec::new();
    for _ in 0..n {
        let d = gen.draw(&mut src).unwrap();
        let text = String::from_utf8(d.text.clone()).expect("samples are UTF-8");
        assert!(checker.accepts(text.as_bytes()), "the engine rejects {text:?}");
        gen.record(&d);
        out.push(text);
    }
    let c = gen.coverage();
    (out, c.covered, c.total, gen)
}

#[test]
fn cover_reaches_every_unit_of_every_shipped_grammar() {
    // name, samples allowed (measured: 3, 3, 10, 5, 30 with seed 0 at 256 bytes).
    for (name, budget) in
        [("arithmetic.gbnf", 10), ("csv.gbnf", 10), ("json.gbnf", 30), ("sql-select.gbnf", 20), ("tool-call.gbnf", 60)]
    {
        let g = Arc::new(shipped(name));
        let checker = Checker::new(&Constraint::Grammar((*g).clone())).unwrap();
        let r = Reference::new(&g);
        let (texts, covered, total, gen) = cover(&g, &checker, budget, 256, 0);
        assert!(total > 10, "{name}: only {total} units");
        assert_eq!(covered, total, "{name}: uncovered after {budget} samples: {:?}", gen.coverage().uncovered);
        for t in &texts {
            assert!(r.accepts(t.as_bytes()), "{name}: the reference rejects {t:?}");
            assert!(t.len() <= 256 + 64, "{name}: {} bytes is far past the bound", t.len());
            if name == "json.gbnf" {
                // RFC 8259's grammar (and json.gbnf's) allows numbers past f64 and any `\uXXXX`,
                // lone surrogates included; serde_json refuses those two and nothing else.
                if let Err(e) = serde_json::from_str::<Value>(t) {
                    let e = e.to_string();
                    assert!(e.contains("number out of range") || e.contains("surrogate"), "{t:?}: {e}");
                }
            }
        }
    }
}

#[test]
fn cover_beats_uniform_choices() {
    // Same draws without steering: coverage is lower (or at best equal) after few samples.
    let g = Arc::new(shipped("tool-call.gbnf"));
    let checker = Checker::new(&Constraint::Grammar((*g).clone())).unwrap();
    let (_, steered, total, _) = cover(&g, &checker, 12, 256, 3);
    let mut plain = Generator::new(g.clone(), GenOptions { cover: false, ..GenOptions::default() }).unwrap();
    let mut src = RngSource::new(3);
    for _ in 0..12 {
        let d = plain.draw(&mut src).unwrap();
        assert!(checker.accepts(&d.text));
        plain.record(&d);
    }
    let unsteered = plain.coverage().covered;
    assert!(steered > unsteered, "steered {steered} vs plain {unsteered} of {total}");
}

#[test]
fn llama_cpp_grammars_are_covered_and_valid() {
    let Some(data) = shared_data() else { return };
    let dir = data.join("grammars/llama.cpp");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    names.sort();
    for path in names {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let g = Arc::new(ebnf::parse(&std::fs::read_to_string(&path).unwrap()).unwrap());
        let checker = Checker::new(&Constraint::Grammar((*g).clone())).unwrap();
        let r = Reference::new(&g);
        let (texts, covered, total, gen) = cover(&g, &checker, 120, 256, 1);
        // Every sample is in the language by the independent recognizer.
        for t in &texts {
            assert!(r.accepts(t.as_bytes()), "{name}: the reference rejects {t:?}");
        }
        eprintln!("llama.cpp/{name}: {covered}/{total} units in 120 samples");
        assert_eq!(covered, total, "{name}: uncovered {:?}", gen.coverage().uncovered);
    }
}

#[test]
fn near_misses_of_shipped_grammars_are_rejected_by_the_reference() {
    for name in ["arithmetic.gbnf", "csv.gbnf", "json.gbnf", "sql-select.gbnf", "tool-call.gbnf"] {
        let g = Arc::new(shipped(name));
        let checker = Checker::new(&Constraint::Grammar((*g).clone())).unwrap();
        let r = Reference::new(&g);
        let mut gen = Generator::new(g.clone(), GenOptions { max_bytes: 96, ..GenOptions::default() }).unwrap();
        let mut src = RngSource::new(5);
        let mut kinds = std::collections::BTreeSet::new();
        for _ in 0..10 {
            let d = gen.draw(&mut src).unwrap();
            let ms = mutate::keep_invalid(mutate::structural(&g, &d, &mut src), &checker, false);
            for m in ms {
                assert!(
                    !r.accepts(m.text.as_bytes()),
                    "{name}: near miss {:?} ({}) is in the language",
                    m.text,
                    m.label
                );
                assert!(!m.label.is_empty());
                kinds.insert(m.kind);
            }
        }
        assert!(kinds.len() >= 4, "{name}: only {kinds:?}");
    }
}

/// A schema with every kind of branch the issue names: enum values, anyOf branches,
/// optional properties, bounded lengths and numbers.
fn branchy_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "integer", "minimum": 1, "maximum": 999},
            "kind": {"enum": ["book", "film", "song"]},
            "title": {"type": "string", "minLength": 2, "maxLength": 8},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "minItems": 1, "maxItems": 3},
            "rating": {"anyOf": [{"type": "number", "minimum": 0, "maximum": 5}, {"type": "null"}]},
            "draft": {"type": "boolean"}
        },
        "required": ["id", "kind"],
        "additionalProperties": false
    })
}

fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::validator_for(schema).unwrap()
}

#[test]
fn schema_cover_reaches_every_branch_and_validates() {
    let schema = branchy_schema();
    let c = Constraint::JsonSchema(schema.clone(), Default::default());
    let g = Arc::new(c.grammar().unwrap());
    let checker = Checker::new(&c).unwrap();
    let (texts, covered, total, gen) = cover(&g, &checker, 40, 256, 0);
    assert_eq!(covered, total, "uncovered: {:?}", gen.coverage().uncovered);
    let v = validator(&schema);
    let mut kinds = std::collections::HashSet::new();
    for t in &texts {
        let inst: Value = serde_json::from_str(t).unwrap_or_else(|e| panic!("{t:?}: {e}"));
        assert!(v.is_valid(&inst), "{t}");
        if let Some(k) = inst.get("kind") {
            kinds.insert(k.clone());
        }
    }
    assert_eq!(kinds.len(), 3, "every enum value appears: {kinds:?}");
}

/// A wide object (120 properties of four kinds, every third required; a few thousand bytes
/// when all are present): 256-byte samples show a few properties each, so 10 of them leave most
/// rules unused; the budget scaled to the grammar (`Generator::auto_max_bytes`, what
/// `sample --cover` uses by default) uses every rule within 10 samples and covers more than
/// twice the units, every sample valid. (Full unit coverage takes more samples: the object's
/// member chain has a stop/continue alternative per position.)
#[test]
fn wide_schema_rules_are_covered_with_the_scaled_budget() {
    let kinds = [
        json!({"type": "integer", "minimum": 0, "maximum": 9}),
        json!({"type": "boolean"}),
        json!({"enum": ["a", "b"]}),
        json!({"type": "string", "maxLength": 3}),
    ];
    let props: serde_json::Map<String, Value> = (0..120).map(|i| (format!("p{i}"), kinds[i % 4].clone())).collect();
    let required: Vec<String> = (0..120).step_by(3).map(|i| format!("p{i}")).collect();
    let schema = json!({"type": "object", "properties": props, "required": required});
    let c = Constraint::JsonSchema(schema.clone(), Default::default());
    let g = Arc::new(strictly::fuzz::fuzz_grammar(&c).unwrap());
    let checker = Checker::new(&c).unwrap();
    let (_, small, _, small_gen) = cover(&g, &checker, 10, 256, 0);
    let small = (small, small_gen.coverage());
    assert!(small.1.rules_covered < small.1.rules_total, "256-byte samples already use every rule");
    let units = Generator::new(g.clone(), GenOptions::default()).unwrap().units().len();
    let (texts, covered, total, gen) = cover(&g, &checker, 10, Generator::auto_max_bytes(units), 0);
    let cov = gen.coverage();
    assert_eq!(cov.rules_covered, cov.rules_total, "rules unused with the scaled budget");
    assert!(covered >= 2 * small.0, "scaled budget: {covered} of {total} units, 256 bytes: {}", small.0);
    let v = validator(&schema);
    for t in &texts {
        assert!(v.is_valid(&serde_json::from_str::<Value>(t).unwrap()), "{t}");
    }
    assert_eq!(Generator::auto_max_bytes(3), 256);
    assert_eq!(Generator::auto_max_bytes(1_000_000), 16_384);
}

#[test]
fn rules_deep_in_a_cycle_of_refs_are_covered_with_the_scaled_depth() {
    // d0 -> d1 -> ... -> d15 -> d0, each with an enum of its own: every level is about three
    // recursive entries, so the later levels are out of reach at the old fixed depth of 24.
    const N: usize = 16;
    let defs: serde_json::Map<String, Value> = (0..N)
        .map(|i| {
            let next = json!({"$ref": format!("#/$defs/d{}", (i + 1) % N)});
            (format!("d{i}"), json!({"type": "object", "properties": {"next": next, format!("k{i}"): {"enum": [format!("x{i}"), format!("y{i}")]}}, "additionalProperties": false}))
        })
        .collect();
    let schema = json!({"$defs": defs, "$ref": "#/$defs/d0"});
    let c = Constraint::JsonSchema(schema.clone(), Default::default());
    let g = Arc::new(strictly::fuzz::fuzz_grammar(&c).unwrap());
    let checker = Checker::new(&c).unwrap();
    let v = validator(&schema);
    let run = |max_depth: u32| {
        let mut gen = Generator::new(g.clone(), GenOptions { max_depth, max_bytes: 768, cover: true }).unwrap();
        let mut src = RngSource::new(0);
        for _ in 0..80 {
            let d = gen.draw(&mut src).unwrap();
            let text = String::from_utf8(d.text.clone()).unwrap();
            assert!(
                checker.accepts(text.as_bytes()) && v.is_valid(&serde_json::from_str::<Value>(&text).unwrap()),
                "{text}"
            );
            gen.record(&d);
        }
        gen.coverage()
    };
    let auto = Generator::new(g.clone(), GenOptions::default()).unwrap().auto_max_depth();
    assert!(auto > 24 && auto <= 1024, "auto depth {auto}");
    let shallow = run(24);
    assert!(shallow.rules_covered < shallow.rules_total, "depth 24 already reaches every rule");
    let deep = run(auto);
    assert_eq!(
        (deep.covered, deep.rules_covered),
        (deep.total, deep.rules_total),
        "uncovered at depth {auto}: {:?}",
        deep.uncovered
    );
}

#[test]
fn units_behind_long_chains_of_choices_are_reached() {
    // A real schema whose objects' "the first member is member i" units sit behind i skips in a
    // row while emitting keeps leading somewhere new (nested values): choices that weigh both
    // alike left 44 of its 524 units uncovered after 300 samples; the nearest-unit draws cover
    // everything (after 48 with this seed).
    let Some(data) = shared_data() else { return };
    let case: Value = serde_json::from_str(
        &std::fs::read_to_string(data.join("jsonschemabench/Snowplow/sp_0_Normalized.json")).unwrap(),
    )
    .unwrap();
    let schema = case["schema"].clone();
    let c = Constraint::JsonSchema(schema.clone(), Default::default());
    let g = Arc::new(strictly::fuzz::fuzz_grammar(&c).unwrap());
    let checker = Checker::new(&c).unwrap();
    let v = validator(&schema);
    let mut gen = Generator::new(g.clone(), GenOptions::default()).unwrap();
    gen.set_max_depth(gen.auto_max_depth());
    gen.set_max_bytes(Generator::auto_max_bytes(gen.units().len()));
    let mut src = RngSource::new(0);
    for _ in 0..300 {
        let d = gen.draw(&mut src).unwrap();
        let text = String::from_utf8(d.text.clone()).unwrap();
        // A key twice in one object is made distinct, as the command line does (the generator
        // does not keep keys apart; the matcher does).
        let text = strictly::fuzz::with_distinct_keys(&text).unwrap_or(text);
        // Samples with characters on which validators disagree about `\s` are skipped, as the
        // command line does.
        if strictly::fuzz::json_has_contested(&text) {
            continue;
        }
        assert!(
            checker.accepts(text.as_bytes()) && v.is_valid(&serde_json::from_str::<Value>(&text).unwrap()),
            "{text}"
        );
        gen.record(&d);
    }
    let cov = gen.coverage();
    assert_eq!(cov.covered, cov.total, "uncovered after 300 samples: {:?}", cov.uncovered);
}

#[test]
fn schema_near_misses_are_invalid() {
    let schema = branchy_schema();
    let c = Constraint::JsonSchema(schema.clone(), Default::default());
    let g = Arc::new(c.grammar().unwrap());
    let checker = Checker::new(&c).unwrap();
    let v = validator(&schema);
    let mut gen = Generator::new(g.clone(), GenOptions::default()).unwrap();
    let mut src = RngSource::new(9);
    let mut kinds = std::collections::BTreeSet::new();
    for _ in 0..20 {
        let d = gen.draw(&mut src).unwrap();
        let text = String::from_utf8(d.text.clone()).unwrap();
        let mut ms = mutate::keep_invalid(mutate::structural(&g, &d, &mut src), &checker, true);
        ms.extend(mutate::keep_invalid(mutate::schema(&schema, &text), &checker, false));
        for m in ms {
            if let Ok(inst) = serde_json::from_str::<Value>(&m.text) {
                assert!(!v.is_valid(&inst), "near miss {} ({}) is valid", m.text, m.label);
            }
            kinds.insert(m.kind);
        }
    }
    for k in ["required", "range", "length", "enum", "additional", "type", "escape", "items"] {
        assert!(kinds.contains(k), "no {k:?} near miss in {kinds:?}");
    }
}

#[test]
fn jsonschemabench_samples_validate_and_near_misses_do_not() {
    let Some(data) = shared_data() else { return };
    let mut checked = 0;
    for group in ["Github_easy", "Glaiveai2K", "Snowplow", "Kubernetes", "MCPspec"] {
        let mut files: Vec<PathBuf> =
            std::fs::read_dir(data.join("jsonschemabench").join(group)).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        for f in files.iter().take(3) {
            let case: Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
            let schema = case["schema"].clone();
            let c = Constraint::JsonSchema(schema.clone(), Default::default());
            let Ok(checker) = Checker::new(&c) else { continue };
            let g = Arc::new(c.grammar().unwrap());
            let Ok(v) = jsonschema::validator_for(&schema) else { continue };
            let mut gen = Generator::new(g.clone(), GenOptions { max_bytes: 384, ..GenOptions::default() }).unwrap();
            let mut src = RngSource::new(2);
            for _ in 0..8 {
                let d = gen.draw(&mut src).unwrap();
                let text = String::from_utf8(d.text.clone()).unwrap();
                // The generator does not keep an object's keys apart; the matcher does (the
                // sensible language): such a draw is refused, and made distinct as `sample
                // --cover` makes it.
                let text = match strictly::fuzz::with_distinct_keys(&text) {
                    Some(fixed) => {
                        assert!(!checker.accepts(text.as_bytes()), "{}: {text}", f.display());
                        fixed
                    }
                    None => text,
                };
                assert!(checker.accepts(text.as_bytes()), "{}: {text}", f.display());
                let inst: Value = serde_json::from_str(&text).unwrap();
                assert!(v.is_valid(&inst), "{}: sample {text} is invalid", f.display());
                gen.record(&d);
                for m in mutate::keep_invalid(mutate::schema(&schema, &text), &checker, false) {
                    let inst: Value = serde_json::from_str(&m.text).unwrap();
                    assert!(!v.is_valid(&inst), "{}: near miss {} ({}) is valid", f.display(), m.text, m.label);
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} schemas compiled");
}

/// Big schemas: steering by what is reachable within each part's bytes covers far more of a
/// Kubernetes list schema (2,977 units) in 50 samples of 512 bytes than knowing only whether
/// something uncovered is reachable at all did (182 units; now about 1,000, see BENCHMARKS.md),
/// and every sample stays valid.
#[test]
fn big_schema_coverage_in_fifty_samples() {
    let Some(data) = shared_data() else { return };
    let case: Value = serde_json::from_str(
        &std::fs::read_to_string(data.join("jsonschemabench/Kubernetes/kb_1004_Normalized.json")).unwrap(),
    )
    .unwrap();
    let schema = case["schema"].clone();
    // The exact language (as bench and conformance measure): the steering over all of it.
    let c = Constraint::JsonSchema(schema.clone(), strictly::grammar::json_schema::JsonSchemaOptions::exact());
    let checker = Checker::new(&c).unwrap();
    let v = validator(&schema);
    let g = Arc::new(c.grammar().unwrap());
    let mut gen = Generator::new(g, GenOptions { max_bytes: 512, ..GenOptions::default() }).unwrap();
    let mut src = RngSource::new(0);
    let mut samples = 0;
    while samples < 50 {
        let d = gen.draw(&mut src).unwrap();
        let text = String::from_utf8(d.text.clone()).unwrap();
        if strictly::fuzz::json_has_contested(&text) {
            continue;
        }
        assert!(checker.accepts(text.as_bytes()), "{text}");
        assert!(v.is_valid(&serde_json::from_str(&text).unwrap()), "invalid sample {text}");
        assert!(text.len() <= 512 + 64, "{} bytes", text.len());
        gen.record(&d);
        samples += 1;
    }
    let cov = gen.coverage();
    assert!(cov.total > 2500 && cov.covered >= 700, "{} of {} units", cov.covered, cov.total);
}

#[test]
fn choice_streams_are_deterministic_and_shrink_to_shortest() {
    let g = Arc::new(shipped("json.gbnf"));
    let mut gen = Generator::new(g.clone(), GenOptions { cover: false, ..GenOptions::default() }).unwrap();
    // The empty stream: a shortest member of the language.
    let d = gen.draw(&mut StreamSource::new(&[])).unwrap();
    assert!(Reference::new(&g).accepts(&d.text));
    assert!(d.text.len() <= 1, "{:?}", String::from_utf8_lossy(&d.text));
    // The same stream, the same text; a longer stream, a longer text (here).
    let stream: Vec<u32> = (0..200u64).map(|i| (i.wrapping_mul(2654435761) % (1 << 32)) as u32).collect();
    let a = gen.draw(&mut StreamSource::new(&stream)).unwrap().text;
    let b = gen.draw(&mut StreamSource::new(&stream)).unwrap().text;
    assert_eq!(a, b);
    assert!(Reference::new(&g).accepts(&a));
}

#[test]
fn seeded_draws_are_reproducible() {
    let g = Arc::new(shipped("sql-select.gbnf"));
    let run = || {
        let mut gen = Generator::new(g.clone(), GenOptions::default()).unwrap();
        let mut src = RngSource::new(42);
        (0..5)
            .map(|_| {
                let d = gen.draw(&mut src).unwrap();
                gen.record(&d);
                d.text
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(run(), run());
}

#[test]
fn a_grammar_with_no_finite_string_is_an_error() {
    use strictly::grammar::{Expr, Rule, RuleId};
    let body = Expr::Seq(vec![Expr::Literal("a".into()), Expr::Rule(RuleId(0))]);
    let g = Grammar { rules: vec![Rule { name: "root".into(), body, span: None }], start: RuleId(0) };
    let err = Generator::new(Arc::new(g), GenOptions::default()).err().expect("no finite string");
    assert!(err.to_string().contains("no finite string"), "{err}");
}

// ---- the command line ----

fn strictly(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_strictly")).args(args).output().expect("run strictly");
    (out.status.code().unwrap_or(-1), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

fn grammar_path(name: &str) -> String {
    format!("{}/grammars/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn coverage_line(stderr: &str) -> Value {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("{\"coverage\""))
        .unwrap_or_else(|| panic!("no coverage line in {stderr}"));
    serde_json::from_str::<Value>(line).unwrap()["coverage"].clone()
}

#[test]
fn cli_cover_reports_full_coverage_and_valid_samples() {
    let g = shipped("arithmetic.gbnf");
    let r = Reference::new(&g);
    let args = [
        "sample",
        "--tokenizer",
        "bytes",
        "--grammar",
        &grammar_path("arithmetic.gbnf"),
        "--cover",
        "-n",
        "12",
        "--seed",
        "4",
        "--unique",
        "--max-tokens",
        "48",
    ];
    let (code, out, err) = strictly(&args);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 12);
    let mut seen = std::collections::HashSet::new();
    for l in &lines {
        let t = l["text"].as_str().unwrap();
        assert!(r.accepts(t.as_bytes()), "{t:?}");
        assert!(seen.insert(t.to_string()), "--unique printed {t:?} twice");
        assert_eq!(l["finish_reason"], "stop");
        // Byte-level tokens: one per byte, and the size bound holds.
        assert_eq!(l["tokens"].as_u64().unwrap() as usize, t.len());
        assert!(t.len() <= 48, "{t:?}");
    }
    let cov = coverage_line(&err);
    assert_eq!(cov["units_covered"], cov["units_total"], "{cov}");
    assert_eq!(cov["rejected_by_checker"], 0);
    // The same seed, the same output.
    assert_eq!(strictly(&args).1, out);
}

/// A regex constraint has units too: each alternative and each repetition boundary of its
/// HIR. `--cover` reaches them all, and every sample matches (the `regex` crate judges).
#[test]
fn cli_regex_cover_reaches_alternatives_and_repetition_bounds() {
    let pattern = r"^(red|green|blue|[a-f]{2,4})-[0-9]{1,3}(x|yz|(?:ab)*)?$";
    let judge = regex::Regex::new(pattern).unwrap();
    let args = ["sample", "--tokenizer", "bytes", "--regex", pattern, "--cover", "-n", "16", "--coverage-json"];
    let tmp = tempfile::Builder::new().prefix("strictly-regex-cover-").tempdir().unwrap();
    let report = tmp.path().join("coverage.json");
    let mut args: Vec<&str> = args.to_vec();
    args.push(report.to_str().unwrap());
    let (code, out, err) = strictly(&args);
    assert_eq!(code, 0, "{err}");
    let mut texts = std::collections::HashSet::new();
    for l in out.lines() {
        let t = serde_json::from_str::<Value>(l).unwrap()["text"].as_str().unwrap().to_string();
        assert!(judge.is_match(&t), "{t:?}");
        texts.insert(t);
    }
    let cov = coverage_line(&err);
    // 4 alternatives; {2,4}: min, more, max; {1,3}: the same; 3 alternatives; ?: absent or
    // present; *: none or some.
    assert_eq!(cov["units_total"], 4 + 3 + 3 + 3 + 2 + 2, "{cov}");
    assert_eq!(cov["units_covered"], cov["units_total"], "{cov}");
    assert_eq!(cov["rejected_by_checker"], 0);
    assert!(texts.iter().any(|t| t.starts_with("green-")) && texts.iter().any(|t| t.ends_with("yz")), "{texts:?}");
    let full: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(full["uncovered"], json!([]));
}

#[test]
fn cli_mutate_prints_labelled_near_misses() {
    let g = shipped("json.gbnf");
    let r = Reference::new(&g);
    let (code, out, err) = strictly(&[
        "sample",
        "--tokenizer",
        "bytes",
        "--grammar",
        &grammar_path("json.gbnf"),
        "--mutate",
        "-n",
        "15",
        "--max-tokens",
        "64",
    ]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 15);
    for l in &lines {
        let t = l["text"].as_str().unwrap();
        assert_eq!(l["valid"], false);
        assert!(!l["label"].as_str().unwrap().is_empty() && l["mutation"].is_string(), "{l}");
        assert!(!r.accepts(t.as_bytes()), "near miss {t:?} ({}) is in the language", l["label"]);
        assert!(r.accepts(l["from"].as_str().unwrap().as_bytes()));
    }
}

#[test]
fn cli_schema_cover_with_a_real_tokenizer() {
    let Some(data) = shared_data() else { return };
    let dir = tempfile::Builder::new().prefix("strictly-sampling-").tempdir().unwrap();
    let schema_path = dir.path().join("branchy.json");
    std::fs::write(&schema_path, branchy_schema().to_string()).unwrap();
    let tok = data.join("tokenizers/llama-3.2/tokenizer.json");
    let report = dir.path().join("coverage.json");
    let (code, out, err) = strictly(&[
        "sample",
        "--tokenizer",
        tok.to_str().unwrap(),
        "--schema",
        schema_path.to_str().unwrap(),
        "--cover",
        "-n",
        "40",
        "--coverage-json",
        report.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let v = validator(&branchy_schema());
    for l in out.lines() {
        let l: Value = serde_json::from_str(l).unwrap();
        let t = l["text"].as_str().unwrap();
        assert!(v.is_valid(&serde_json::from_str(t).unwrap()), "{t}");
        assert!(l["tokens"].as_u64().unwrap() <= t.len() as u64);
    }
    let cov = coverage_line(&err);
    assert_eq!(cov["units_covered"], cov["units_total"], "{cov}");
    let full: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert!(full["per_rule"].as_array().is_some_and(|r| !r.is_empty()));
    assert_eq!(full["uncovered"], json!([]));
}

#[test]
fn cli_rejects_bad_fuzz_flags() {
    let (code, _, err) = strictly(&["sample", "--tokenizer", "bytes", "--regex", "a", "--cover", "--mutate"]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot be used with"), "{err}");
    let (code, _, err) = strictly(&["sample", "--tokenizer", "bytes", "--regex", "[", "--cover"]);
    assert_eq!(code, 2);
    assert!(err.lines().count() == 1 && err.contains("regex"), "{err}");
}
