//! The shared data-driven corpus (`tests/corpus/*.json`; the format is in its README): one
//! runner for every case, every engine and every vocabulary.
//!
//! - [`the_corpus_is_right`] checks the cases themselves with judges that share no code with
//!   the engine: the `jsonschema` crate for JSON Schema cases (accepted inputs valid, rejected
//!   ones invalid or not JSON, `reject_valid` ones valid), the `regex` crate for regex cases,
//!   `serde_json` for `json.json`, the arithmetic evaluator for `values`; and the reference
//!   recognizer (`strictly::grammar::reference`) on the grammar IR every case compiles to
//!   (accepted inputs and all their prefixes viable, rejected inputs not accepted).
//! - One test per vocabulary (the byte-level one, the embedded one, the six shared tokenizers)
//!   runs every case through the compiled matcher, once with the automatic engine choice and once
//!   with the Earley engine forced, each compiled once per vocabulary: an input is encoded with
//!   the vocabulary (`Vocab::encode`) and committed token by token, each token checked against
//!   the mask; an accepted input must end accepting (EOS in the mask), a rejected one must be
//!   refused at some token (the mask and `commit` agreeing) or end not accepting.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde_json::Value;
use strictly::{
    automaton::{BackendChoice, CompileOptions, Compiled, Constraint, VocabEnv},
    grammar::{ebnf, json_schema::JsonSchemaOptions, reference::Reference, Grammar},
    TokenSet, Vocab,
};

use crate::common::{real_vocabs, TOKENIZERS};

/// One corpus file.
pub struct Case {
    /// The file name.
    pub name: String,
    pub constraint: Constraint,
    /// Must be in the language.
    pub accept: Vec<String>,
    /// Must not be.
    pub reject: Vec<String>,
    /// JSON Schema cases only: valid for the schema, outside what the engine writes by
    /// default (its documented narrowing): must be rejected.
    pub reject_valid: Vec<String>,
    /// The file, for the keys only some cases have (`values`, `schema`, `regex`).
    pub json: Value,
}

impl Case {
    /// Every input the engine must refuse.
    fn refused(&self) -> impl Iterator<Item = &String> {
        self.reject.iter().chain(&self.reject_valid)
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every case, read once.
pub fn cases() -> &'static [Case] {
    static CASES: OnceLock<Vec<Case>> = OnceLock::new();
    CASES.get_or_init(|| {
        let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("tests/corpus"))
            .expect("tests/corpus")
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        files.iter().map(|p| read_case(p)).collect()
    })
}

fn read_case(path: &Path) -> Case {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let text = std::fs::read_to_string(path).unwrap();
    let json: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    let keys = ["grammar_file", "grammar", "regex", "schema"];
    let given: Vec<&str> = keys.iter().copied().filter(|k| json.get(*k).is_some()).collect();
    assert_eq!(given.len(), 1, "{name}: exactly one of {keys:?}, not {given:?}");
    let constraint = match given[0] {
        "grammar_file" => {
            let file = json["grammar_file"].as_str().unwrap();
            let src = std::fs::read_to_string(root().join(file)).unwrap_or_else(|e| panic!("{name}: {file}: {e}"));
            Constraint::Grammar(ebnf::parse(&src).unwrap_or_else(|e| panic!("{name}: {e}")))
        }
        "grammar" => Constraint::Grammar(
            ebnf::parse(json["grammar"].as_str().unwrap()).unwrap_or_else(|e| panic!("{name}: {e}")),
        ),
        "regex" => Constraint::Regex(json["regex"].as_str().unwrap().to_string()),
        _ => {
            // `options`: the fields of `JsonSchemaOptions` that differ from the exact language's
            // (`JsonSchemaOptions::exact()`: the corpus checks the schema's language).
            let mut opts = serde_json::to_value(JsonSchemaOptions::exact()).unwrap();
            for (k, v) in json.get("options").and_then(Value::as_object).into_iter().flatten() {
                opts[k] = v.clone();
            }
            let opts: JsonSchemaOptions =
                serde_json::from_value(opts).unwrap_or_else(|e| panic!("{name}: options: {e}"));
            Constraint::JsonSchema(json["schema"].clone(), opts)
        }
    };
    let strings = |key: &str| -> Vec<String> {
        match json.get(key) {
            None => Vec::new(),
            Some(v) => v
                .as_array()
                .unwrap_or_else(|| panic!("{name}: {key} is not a list"))
                .iter()
                .map(|s| s.as_str().unwrap_or_else(|| panic!("{name}: {key}: {s} is not a string")).to_string())
                .collect(),
        }
    };
    let (accept, reject, reject_valid) = (strings("accept"), strings("reject"), strings("reject_valid"));
    assert!(accept.len() >= 4 && reject.len() >= 6, "{name}: at least 4 accepted and 6 rejected inputs");
    assert!(reject_valid.is_empty() || given[0] == "schema", "{name}: reject_valid is for JSON Schema cases");
    Case { name, constraint, accept, reject, reject_valid, json }
}

/// The one place the runner compiles a case.
fn compile(env: &Arc<VocabEnv>, constraint: &Constraint, engine: BackendChoice) -> strictly::Result<Arc<Compiled>> {
    Compiled::with_options(env, constraint, &CompileOptions { backend: engine, ..CompileOptions::default() })
}

// ---- the corpus itself, by independent judges ------------------------------------------------

/// Failures collected over a whole run, so one run shows every wrong input.
#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.0.push(what());
        }
    }

    #[track_caller]
    fn assert_none(self, what: &str) {
        assert!(self.0.is_empty(), "{what}: {} problems:\n{}", self.0.len(), self.0.join("\n"));
    }
}

#[test]
fn the_corpus_is_right() {
    let cases = cases();
    let kinds = |k: &str| cases.iter().filter(|c| c.json.get(k).is_some()).count();
    assert!(kinds("schema") >= 25 && kinds("regex") >= 3 && kinds("grammar_file") + kinds("grammar") >= 5);
    let mut p = Problems::default();
    let mut judged = 0;
    for case in cases {
        let name = &case.name;
        // The reference recognizer on the IR the case compiles to.
        let g: Grammar = match case.constraint.grammar() {
            Ok(g) => g,
            Err(e) => {
                p.0.push(format!("{name}: {e}"));
                continue;
            }
        };
        let r = Reference::new(&g);
        for s in &case.accept {
            p.check(r.accepts(s.as_bytes()), || format!("{name}: the reference refuses accepted {s:?}"));
            for k in 0..s.len() {
                let pre = &s.as_bytes()[..k];
                p.check(r.is_prefix(pre), || {
                    format!("{name}: {:?} (of {s:?}) is not viable", String::from_utf8_lossy(pre))
                });
            }
        }
        for s in case.refused() {
            p.check(!r.accepts(s.as_bytes()), || format!("{name}: the reference accepts rejected {s:?}"));
        }
        judged += case.accept.len() + case.refused().count();
        if let Some(schema) = case.json.get("schema") {
            json_schema_judge(&mut p, name, schema, case);
        }
        if let Some(re) = case.json["regex"].as_str() {
            let judge = regex::Regex::new(&format!(r"\A(?:{re})\z")).unwrap_or_else(|e| panic!("{name}: {e}"));
            for s in &case.accept {
                p.check(judge.is_match(s), || format!("{name}: the regex crate refuses accepted {s:?}"));
            }
            for s in &case.reject {
                p.check(!judge.is_match(s), || format!("{name}: the regex crate accepts rejected {s:?}"));
            }
        }
        if name == "json.json" {
            for s in &case.accept {
                p.check(serde_json::from_str::<Value>(s).is_ok(), || format!("{name}: not JSON: {s:?}"));
            }
            for s in &case.reject {
                // Refused only for exceeding the whitespace bound: still JSON.
                let bounded_ws = s.contains("\n\n") || s.contains("                ");
                let json = serde_json::from_str::<Value>(s).is_ok();
                p.check(bounded_ws || !json, || format!("{name}: rejected {s:?} is JSON"));
            }
        }
        if let Some(values) = case.json.get("values") {
            let values = values.as_array().unwrap();
            assert_eq!(values.len(), case.accept.len(), "{name}: one value per accepted input");
            for (s, v) in case.accept.iter().zip(values) {
                let got = crate::arithmetic::eval(s);
                let ok = got.is_some_and(|g| (g - v.as_f64().unwrap()).abs() < 1e-9);
                p.check(ok, || format!("{name}: {s:?} evaluates to {got:?}, expected {v}"));
            }
            for s in &case.reject {
                let got = crate::arithmetic::eval(s);
                p.check(got.is_none(), || format!("{name}: the evaluator accepts rejected {s:?} ({got:?})"));
            }
        }
    }
    p.assert_none("the corpus");
    println!("corpus: {} cases, {judged} inputs judged", cases.len());
}

/// A JSON Schema case judged by the `jsonschema` crate (formats asserted): accepted inputs are
/// valid JSON instances; rejected ones are not JSON or are invalid; `reject_valid` ones are valid.
fn json_schema_judge(p: &mut Problems, name: &str, schema: &Value, case: &Case) {
    let v = jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(schema)
        .unwrap_or_else(|e| panic!("{name}: jsonschema cannot build the schema: {e}"));
    let parse = |s: &str| serde_json::from_str::<Value>(s);
    for s in &case.accept {
        match parse(s) {
            Err(e) => p.0.push(format!("{name}: accepted {s:?} is not JSON: {e}")),
            Ok(inst) => {
                let errors: Vec<String> = v.iter_errors(&inst).map(|e| e.to_string()).collect();
                p.check(errors.is_empty(), || format!("{name}: accepted {s} is invalid: {errors:?}"));
            }
        }
    }
    for s in &case.reject {
        if let Ok(inst) = parse(s) {
            p.check(!v.is_valid(&inst), || format!("{name}: rejected {s} is valid (reject_valid, if intended)"));
        }
    }
    for s in &case.reject_valid {
        let valid = parse(s).is_ok_and(|inst| v.is_valid(&inst));
        p.check(valid, || format!("{name}: reject_valid {s:?} is not valid JSON for the schema"));
    }
}

// ---- the matcher, per vocabulary and engine ------------------------------------------------

/// Runs every case with `vocab`, both engines; returns the number of inputs run.
fn run_vocab(vname: &str, vocab: &Arc<Vocab>) -> usize {
    // One environment per vocabulary, shared by every case (as a server keeps one).
    let env = VocabEnv::new(vocab.clone());
    let mut mask = TokenSet::new(vocab.len());
    let mut p = Problems::default();
    let mut inputs = 0;
    for case in cases() {
        for engine in [BackendChoice::Auto, BackendChoice::Earley] {
            let what = format!("{} with {vname} ({engine:?})", case.name);
            let c = match compile(&env, &case.constraint, engine) {
                Ok(c) => c,
                Err(e) => {
                    p.0.push(format!("{what}: does not compile: {e}"));
                    continue;
                }
            };
            for s in &case.accept {
                if let Err(e) = run_input(&c, &mut mask, s, true) {
                    p.0.push(format!("{what}: must accept {s:?}: {e}"));
                }
            }
            for s in case.refused() {
                if let Err(e) = run_input(&c, &mut mask, s, false) {
                    p.0.push(format!("{what}: must reject {s:?}: {e}"));
                }
            }
            inputs += case.accept.len() + case.refused().count();
        }
    }
    p.assert_none(&format!("the corpus with {vname}"));
    println!("corpus with {vname}: {} cases x 2 engines, {inputs} inputs", cases().len());
    inputs
}

/// Commits `s`'s tokens one at a time through a fresh matcher, checking each against the mask.
/// `Ok` when the outcome is the wanted one (all in, accepting at the end; or refused somewhere).
fn run_input(c: &Arc<Compiled>, mask: &mut TokenSet, s: &str, want: bool) -> Result<(), String> {
    let vocab = c.vocab();
    let tokens = match vocab.encode(s.as_bytes()) {
        Some(t) => t,
        // A byte no token spells cannot be produced at all.
        None if !want => return Ok(()),
        None => return Err("the vocabulary cannot spell it".into()),
    };
    let mut m = c.matcher();
    let eos = vocab.eos().first().copied();
    for (i, &t) in tokens.iter().enumerate() {
        let at = || {
            format!("token {i} {:?} after {:?}", vocab.name(t), String::from_utf8_lossy(&vocab.decode(&tokens[..i])))
        };
        m.fill_mask(mask);
        let allowed = mask.contains(t);
        if allowed != m.allows(t) {
            return Err(format!("the mask and allows() disagree on {}", at()));
        }
        if !allowed {
            // The matcher refuses what the mask leaves out, and stays usable.
            if m.commit(t).is_ok() {
                return Err(format!("commit took {} which the mask refused", at()));
            }
            if m.len() != i {
                return Err(format!("a refused commit changed the matcher ({} tokens, {i} expected)", m.len()));
            }
            return if want { Err(format!("refused {}", at())) } else { Ok(()) };
        }
        m.commit(t).map_err(|e| format!("commit of masked {} failed: {e}", at()))?;
    }
    m.fill_mask(mask);
    let accepting = m.is_accepting();
    if let Some(eos) = eos {
        if mask.contains(eos) != accepting {
            return Err(format!("EOS in the mask: {}, accepting: {accepting}", mask.contains(eos)));
        }
    }
    match (accepting, want) {
        (true, true) | (false, false) => Ok(()),
        (false, true) => Err(format!("all {} tokens in, but not accepting at the end", tokens.len())),
        (true, false) => Err(format!("accepted as {} tokens", tokens.len())),
    }
}

#[test]
fn byte_level_vocabulary() {
    let v = Arc::new(Vocab::byte_level());
    // One token per byte: every input is its bytes, in order.
    assert_eq!(v.encode(b"{\"a\":1}").map(|t| t.len()), Some(7));
    assert!(run_vocab("byte-level", &v) > 0);
}

#[test]
fn embedded_vocabulary() {
    assert!(run_vocab("embedded", &Arc::new(Vocab::embedded())) > 0);
}

/// A shared tokenizer by name, through the one data lookup (`common::real_vocabs`).
fn shared(name: &str) -> Option<Arc<Vocab>> {
    assert!(TOKENIZERS.contains(&name), "{name} is not one of the shared tokenizers");
    let vocabs = real_vocabs();
    if vocabs.is_empty() {
        return None; // no data: real_vocabs said SKIPPED (or failed, with STRICTLY_REQUIRE_DATA)
    }
    let v = vocabs.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{name} was not loaded"));
    Some(v.1.clone())
}

macro_rules! tokenizer_tests {
    ($($test:ident: $name:literal,)*) => {
        $(
            #[test]
            fn $test() {
                let Some(v) = shared($name) else { return };
                assert!(run_vocab($name, &v) > 0);
            }
        )*
        /// Every shared tokenizer has its test above.
        #[test]
        fn every_shared_tokenizer_is_run() {
            let mut names = [$($name),*];
            names.sort();
            assert_eq!(names, TOKENIZERS);
        }
    };
}

tokenizer_tests! {
    gpt2: "gpt2",
    llama_3_2: "llama-3.2",
    phi_2: "phi-2",
    phi_3_mini: "phi-3-mini",
    qwen2_5: "qwen2.5",
    tinyllama: "tinyllama-1.1b-chat",
}
