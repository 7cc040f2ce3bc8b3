//! Token budgets that bind with many tokens left (issue 23): long outputs of large schemas,
//! where a refused token is judged by a join with the witness from here rather than by a
//! witness of its own (see `automaton::matcher::join`).
//!
//! The tightest budget an output can meet is its own length in tokens. The lexeme-by-lexeme
//! count overestimates what is left wherever the output's tokens straddle lexemes (`":`, `,"`),
//! so with hundreds of tokens left it binds: a number's next digits (`100` then `0`) or a key's
//! spelling are refused by it and must be let through by a way that is shown to fit.

use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use strictly::automaton::{Compiled, Constraint, VocabEnv};
use strictly::grammar::ebnf;
use strictly::grammar::json_schema::JsonSchemaOptions;
use strictly::{TokenId, TokenSet, Vocab};

/// An object with `n` required number properties (long keys) and a list of distinct strings.
fn wide_schema(n: usize) -> serde_json::Value {
    let mut props = serde_json::Map::new();
    let mut required = Vec::new();
    for k in 0..n {
        let name = format!("panelSetting{k}Duration");
        props.insert(name.clone(), serde_json::json!({"type": "number"}));
        required.push(serde_json::Value::String(name));
    }
    props.insert("tags".into(), serde_json::json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true}));
    required.push("tags".into());
    serde_json::json!({"type": "object", "properties": props, "required": required})
}

/// The shortest output but for a few numbers of four digits (`100` then `0` in Llama 3.2's
/// tokens): the witness from after `100` ends the number, the output goes on with `0`.
fn wide_instance(n: usize) -> String {
    let value = |k: usize| if k % 20 == 0 { 1000 + k } else { 0 };
    let mut fields: Vec<String> = (0..n).map(|k| format!("\"panelSetting{k}Duration\":{}", value(k))).collect();
    fields.push(r#""tags":[]"#.into());
    format!("{{{}}}", fields.join(","))
}

/// A valid output of 400-odd tokens is accepted under the tightest budget at every step, on
/// real tokenizers.
#[test]
fn a_long_valid_output_fits_the_tightest_budget() {
    use crate::common::{real_env, real_vocabs};
    let (schema, text) = (wide_schema(60), wide_instance(60));
    assert!(!real_vocabs().is_empty() || crate::common::shared_data().is_none());
    for (name, v) in real_vocabs().iter().filter(|(name, _)| ["llama-3.2", "qwen2.5"].contains(&name.as_str())) {
        let env = real_env(v);
        let c = Compiled::new(&env, &Constraint::JsonSchema(schema.clone(), JsonSchemaOptions::default())).unwrap();
        let toks = v.encode(text.as_bytes()).unwrap();
        assert!(toks.len() > 300, "{name}: {} tokens", toks.len());
        super::budget::fits_its_own_length(name, v, &c, &toks);
    }
}

/// A small vocabulary where tokens straddle lexemes (`0,`, `]z`), so the count binds on a long
/// output: an output is accepted under its own length; random walks under the tightest budgets,
/// fast == reference at every step, never an empty mask, and every walk ends complete within
/// the budget (what a join lets through fits).
#[test]
fn random_walks_under_a_long_tight_budget_end_complete() {
    let mut toks: Vec<Vec<u8>> = b"0123456789,[]z".iter().map(|&b| vec![b]).collect();
    for t in ["0,", "00", "100", "],", "]z", "zz", "zzzz"] {
        toks.push(t.as_bytes().to_vec());
    }
    toks.push(b"</s>".to_vec());
    let eos = TokenId(toks.len() as u32 - 1);
    let v = Arc::new(Vocab::from_byte_tokens(toks, &[eos.0]));
    let env = VocabEnv::new(v.clone());
    let tail = "z".repeat(1200);
    let g = ebnf::parse(&format!(
        "root ::= list \"{tail}\"\nlist ::= \"[\" item (\",\" item)* \"]\"\nitem ::= num | list\nnum ::= [1-9] [0-9]* | \"0\""
    ))
    .unwrap();
    let c = Compiled::new(&env, &Constraint::Grammar(g)).unwrap();
    // An output under its own length: `100`, then `0` where the witness from after `100`
    // ends the number.
    let text = format!("[1000,100]{tail}");
    let toks = v.encode(text.as_bytes()).unwrap();
    assert!(toks.len() > 256, "{} tokens", toks.len());
    let mut m = c.matcher();
    let (mut fast, mut slow) = (TokenSet::new(v.len()), TokenSet::new(v.len()));
    for (k, &t) in toks.iter().enumerate() {
        m.fill_mask_within(&mut fast, toks.len() - k);
        m.reference_mask_within(&mut slow, toks.len() - k);
        let at = String::from_utf8_lossy(&v.decode(&toks[..k])).into_owned();
        assert_eq!(fast, slow, "fast == reference after {at:?}");
        assert!(fast.contains(t), "{:?} refused after {at:?}", String::from_utf8_lossy(v.bytes(t)));
        m.commit(t).unwrap();
    }
    let shortest = c.min_tokens().unwrap() as usize;
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for walk in 0..6 {
        // Mostly digits and commas first: the walk writes a list before the tail.
        super::budget::tight_walk(&c, &v, &mut rng, shortest + walk * 3);
    }
}

/// Regular constraints whose end lies a thousand bytes away (a long literal, a long counted
/// repetition): the breadth-first token distance gives up before it gets there, so the count
/// needs the greedy walk's way to finish (`token_dist`), else the single-byte bound (one token
/// per byte) refuses the output's own tokens under its own length, on real tokenizers.
#[test]
fn long_regular_outputs_fit_their_own_length() {
    use crate::common::{real_env, real_vocabs};
    let prose = "the quick brown fox jumps over the lazy dog and then ".repeat(25);
    let cases = [
        (format!("say: {prose}(yes|no)"), format!("say: {prose}no")),
        ("[a-z ]{1500}".to_string(), prose.repeat(2)[..1500].to_string()),
    ];
    assert!(!real_vocabs().is_empty() || crate::common::shared_data().is_none());
    for (name, v) in real_vocabs().iter().filter(|(name, _)| ["llama-3.2", "qwen2.5"].contains(&name.as_str())) {
        let env = real_env(v);
        for (regex, text) in &cases {
            let c = Compiled::new(&env, &Constraint::Regex(regex.clone())).unwrap();
            let toks = v.encode(text.as_bytes()).unwrap();
            let shortest = c.min_tokens().unwrap() as usize;
            assert!(shortest <= toks.len(), "{name} {regex:.20}: {shortest} > {} tokens", toks.len());
            super::budget::fits_its_own_length(&format!("{name} {regex:.20}"), v, &c, &toks);
        }
    }
}

/// An enum whose shortest value in tokens is not the shortest in bytes (`very active`, one
/// token fewer than `sedentary` on Llama 3.2), 12 tokens before the end of the tightest budget:
/// the exhaustive search's work runs out among the integer's digits before it reaches the way
/// through `very active`, so the parse states it could not settle get a descent each (the
/// count's own choices). BFCL_parallel_113 of the JSON Schema bench.
#[test]
fn an_enum_value_shorter_in_tokens_is_found_when_the_search_runs_out() {
    use crate::common::{real_env, real_vocabs};
    let schema = serde_json::json!({"type": "object", "properties": {"diabetes_prediction": {"type": "object", "properties": {
        "weight": {"type": "integer"}, "height": {"type": "integer"},
        "activity_level": {"type": "string", "enum": ["sedentary", "lightly active", "moderately active", "very active", "extra active"]}},
        "required": ["weight", "height", "activity_level"], "additionalProperties": false}},
        "required": ["diabetes_prediction"], "additionalProperties": false});
    let text = r#"{"diabetes_prediction":{"weight":180,"height":70,"activity_level":"lightly active"}}"#;
    assert!(!real_vocabs().is_empty() || crate::common::shared_data().is_none());
    for (name, v) in real_vocabs().iter().filter(|(name, _)| ["llama-3.2", "qwen2.5"].contains(&name.as_str())) {
        let c =
            Compiled::new(&real_env(v), &Constraint::JsonSchema(schema.clone(), JsonSchemaOptions::exact())).unwrap();
        super::budget::fits_its_own_length(name, v, &c, &v.encode(text.as_bytes()).unwrap());
    }
}
