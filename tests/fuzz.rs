//! Grammar fuzzing as users do it: sample many outputs (seeded random logits) from every shipped
//! grammar and every llama.cpp grammar, with several real vocabularies, and check each one with
//! an independent judge: the reference recognizer always, plus serde_json for JSON, a
//! recursive-descent evaluator for arithmetic, and serde_json for tool-call arguments.
//! Every sample must be complete, "length" ones too (never truncated).

use std::path::PathBuf;
use std::sync::Arc;

use strictly::{
    automaton::{Compiled, Constraint, VocabEnv},
    decode::FinishReason,
    grammar::{ebnf, reference::Reference, Grammar},
    Vocab,
};

use crate::common::{real_vocabs, shared_data};

fn vocabs() -> Vec<(String, Arc<Vocab>)> {
    let mut out = vec![("embedded".to_string(), Arc::new(Vocab::embedded()))];
    for (name, v) in real_vocabs() {
        if name == "llama-3.2" || name == "tinyllama-1.1b-chat" {
            out.push((name.clone(), v.clone()));
        }
    }
    out
}

/// `n` samples: (text, finish reason).
fn samples(g: &Grammar, vocab: &Arc<Vocab>, n: u64, max_tokens: usize) -> Vec<(String, FinishReason)> {
    let c = Compiled::new(&VocabEnv::new(vocab.clone()), &Constraint::Grammar(g.clone())).unwrap();
    (0..n)
        .map(|seed| {
            let out = crate::common::random_sample(&c, seed, max_tokens).unwrap();
            (String::from_utf8(out.bytes.clone()).expect("constrained output is UTF-8"), out.finish_reason)
        })
        .collect()
}

fn shipped(name: &str) -> Grammar {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("grammars").join(name);
    ebnf::parse(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn json_samples_parse_as_json() {
    let g = shipped("json.gbnf");
    let r = Reference::new(&g);
    for (name, v) in vocabs() {
        for (text, reason) in samples(&g, &v, 12, 48) {
            assert!(r.accepts(text.as_bytes()), "{name}: {text:?}");
            if let Err(e) = serde_json::from_str::<serde_json::Value>(&text) {
                // RFC 8259 puts no bound on numbers; serde_json (without arbitrary_precision)
                // refuses ones that overflow f64, which is not a syntax error.
                assert!(e.to_string().contains("number out of range"), "{name} ({reason:?}): {text:?}: {e}");
            }
        }
    }
}

#[test]
fn arithmetic_samples_evaluate() {
    let g = shipped("arithmetic.gbnf");
    let r = Reference::new(&g);
    for (name, v) in vocabs() {
        for (text, _) in samples(&g, &v, 12, 40) {
            assert!(r.accepts(text.as_bytes()), "{name}: {text:?}");
            assert!(crate::arithmetic::eval(&text).is_some(), "{name}: {text:?} does not evaluate");
        }
    }
}

#[test]
fn tool_call_arguments_are_json_objects() {
    let g = shipped("tool-call.gbnf");
    let r = Reference::new(&g);
    for (name, v) in vocabs() {
        for (text, _) in samples(&g, &v, 6, 120) {
            assert!(r.accepts(text.as_bytes()), "{name}: {text:?}");
            for call in text.split("</tool_call>").filter(|c| !c.trim().is_empty()) {
                let body = call.trim().strip_prefix("<tool_call>").expect("starts with the tag");
                let v: serde_json::Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{body:?}: {e}"));
                assert!(v["name"].is_string() && v["arguments"].is_object(), "{v}");
            }
        }
    }
}

#[test]
fn every_grammar_samples_inside_its_language() {
    let mut grammars: Vec<(String, Grammar)> =
        ["json.gbnf", "arithmetic.gbnf", "sql-select.gbnf", "csv.gbnf", "tool-call.gbnf"]
            .iter()
            .map(|n| (n.to_string(), shipped(n)))
            .collect();
    if let Some(data) = shared_data() {
        let dir = data.join("grammars/llama.cpp");
        let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        assert!(files.len() >= 9);
        for f in files {
            let g =
                ebnf::parse(&std::fs::read_to_string(&f).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            grammars.push((format!("llama.cpp/{}", f.file_name().unwrap().to_string_lossy()), g));
        }
    }
    for (gname, g) in &grammars {
        let r = Reference::new(g);
        for (vname, v) in vocabs() {
            for (text, reason) in samples(g, &v, 4, 64) {
                assert!(r.accepts(text.as_bytes()), "{gname} with {vname} ({reason:?}): {text:?}");
            }
        }
    }
}
