//! gpt-oss's harmony format (issue 25 items 1 and 3) on its real chat template
//! (`../shared/data/chat-templates/openai-gpt-oss-120b.jinja`). No gpt-oss tokenizer is at
//! hand, so the vocabulary is TinyLlama's with harmony's control tokens added
//! (`tool_formats::write_synthetic_dir`): what matters is that they are single control tokens
//! with gpt-oss's names. The reply is an optional analysis message (the reasoning), then the
//! final answer's message or one call's message; samples with random logits have exactly that
//! shape, and split and parse back into reasoning, content and calls whose arguments validate.

use std::sync::Arc;

use serde_json::{json, Value};
use strictly::automaton::{Compiled, Constraint, VocabEnv};
use strictly::grammar::json_schema::{self, JsonSchemaOptions};
use strictly::model::reasoning::{Phase, HARMONY};
use strictly::model::{ChatTool, PromptFormat};
use strictly::tools::{arguments_grammar, calls_grammar, ToolFormat, ToolMode, ValueKinds};
use strictly::vocab::TokenKind;
use strictly::{TokenId, Vocab};

use crate::common::{random_sample, real_vocabs, shared_data};
use crate::tool_formats::{chat, read_with, tools, write_synthetic_dir};

const TEMPLATE: &str = "openai-gpt-oss-120b.jinja";

/// The prompt format and vocabulary of the synthetic gpt-oss model.
fn gpt_oss() -> Option<(PromptFormat, Arc<Vocab>)> {
    let data = shared_data()?;
    let source = std::fs::read_to_string(data.join("chat-templates").join(TEMPLATE)).unwrap();
    let dir = write_synthetic_dir(&data, "harmony", &source);
    let p = PromptFormat::from_dir(dir.path()).unwrap();
    let vocab = Arc::new(Vocab::from_tokenizer_json(dir.path().join("tokenizer.json")).unwrap());
    Some((p, vocab))
}

fn token(v: &Vocab, name: &str) -> TokenId {
    (0..v.len() as u32).map(TokenId).find(|&t| v.bytes(t) == name.as_bytes()).unwrap_or_else(|| panic!("{name}"))
}

/// The markers are one text token each (so grammars write them), `<|return|>` and `<|call|>`
/// end the reply and `<|end|>` does not (it ends a message); elsewhere (Phi-3) `<|end|>` is
/// still the end of the reply.
#[test]
fn a_harmony_vocabulary_keeps_its_markers_and_ends_at_return_or_call() {
    let Some((_, v)) = gpt_oss() else { return };
    for m in ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>"] {
        let t = token(&v, m);
        assert_eq!((v.kind(t), v.is_eos(t)), (TokenKind::Text, false), "{m}");
        assert_eq!(v.encode(m.as_bytes()).unwrap(), vec![t], "{m} is one token");
    }
    for m in ["<|return|>", "<|call|>"] {
        assert!(v.is_eos(token(&v, m)), "{m}");
    }
    let (_, phi) = real_vocabs().iter().find(|(n, _)| n == "phi-3-mini").unwrap();
    assert!(phi.is_eos(token(phi, "<|end|>")), "Phi-3's <|end|> ends its reply");
}

/// The tools, each tool's arguments grammar, and the readers' value kinds.
fn offered() -> (Vec<ChatTool>, Vec<(String, strictly::grammar::Grammar)>, Arc<ValueKinds>) {
    let tools = tools();
    let args = tools
        .iter()
        .map(|t| (t.function.name.clone(), arguments_grammar(&t.function.parameters, ToolFormat::Harmony).unwrap()))
        .collect();
    let kinds = Arc::new(ValueKinds::new(tools.iter().map(|t| (t.function.name.as_str(), &t.function.parameters))));
    (tools, args, kinds)
}

/// The shape of every reply: `(analysis)? (call | final answer)`.
fn shape() -> regex::Regex {
    regex::Regex::new(concat!(
        r"^(?s)(?:<\|channel\|>analysis<\|message\|>(?<reasoning>.*?)<\|end\|><\|start\|>assistant)?",
        r"(?:(?: to=functions\.(?<a>[a-z_]+)<\|channel\|>commentary|<\|channel\|>commentary to=functions\.(?<b>[a-z_]+))",
        r"(?: json| <\|constrain\|>json)?<\|message\|>(?<args>\{.*\})",
        r"|<\|channel\|>final<\|message\|>(?<answer>.*))$"
    ))
    .unwrap()
}

/// The real template renders the tools in the developer turn and the history's call as a
/// commentary message to the function; the prompt ends where the reply's first message
/// begins, so the analysis is optional. Required calls, after an optional analysis, are one
/// call each, in either header order, that reads back into valid arguments; under `Auto`
/// with a response format, a reply is a call or the final answer in that format.
#[test]
fn harmony_replies_reason_then_call_or_answer() {
    let Some((p, vocab)) = gpt_oss() else { return };
    let env = VocabEnv::new(vocab.clone());
    let (tools, args, kinds) = offered();
    let mut c = chat(Some(ToolMode::Required));
    c.tools = tools.clone();
    let r = c.render(&p).unwrap();
    assert_eq!(r.format, ToolFormat::Harmony);
    assert!(r.text.contains("namespace functions") && r.text.contains("type get_weather"), "{}", r.text);
    assert!(r.text.ends_with("<|start|>assistant"), "{}", r.text);
    let reasoning = p.reasoning_after(&r.text).expect("harmony reasons");
    assert_eq!((reasoning.markers.start.as_str(), reasoning.markers.end.as_str()), (HARMONY.0, HARMONY.1));
    assert_eq!(reasoning.phase, Phase::Optional);
    let shape = shape();
    let answer_schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
                               "additionalProperties": false});
    let answer = json_schema::compile(&answer_schema, &JsonSchemaOptions::default()).unwrap().grammar;
    let (mut reasoned, mut called, mut answered) = (0, 0, 0);
    for mode in [ToolMode::Required, ToolMode::Named("add".into()), ToolMode::Auto] {
        let format = (mode == ToolMode::Auto).then(|| answer.clone());
        let calls = Constraint::Grammar(calls_grammar(args.clone(), &mode, 8, ToolFormat::Harmony, format));
        let compiled = Compiled::new(&env, &reasoning.constrain_calls(calls)).unwrap();
        for seed in 0..6u64 {
            let text = random_sample(&compiled, seed, 120).unwrap().text();
            let what = format!("{mode:?} seed {seed}: {text:?}");
            let m = shape.captures(&text).unwrap_or_else(|| panic!("{what}"));
            reasoned += m.name("reasoning").is_some() as usize;
            let (r, rest) = reasoning.split(&text);
            assert_eq!(r.is_some(), m.name("reasoning").is_some(), "{what}");
            let (content, calls) = read_with(ToolFormat::Harmony, kinds.clone(), &rest, seed);
            if let Some(a) = m.name("answer") {
                assert_eq!(mode, ToolMode::Auto, "{what}");
                assert!(calls.is_empty() && content == a.as_str(), "{what}: {content:?}");
                let v: Value = serde_json::from_str(&content).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(jsonschema::validator_for(&answer_schema).unwrap().is_valid(&v), "{what}");
                answered += 1;
                continue;
            }
            let name = m.name("a").or(m.name("b")).unwrap().as_str();
            assert!(content.trim().is_empty(), "{what}: {content:?}");
            assert_eq!(calls.len(), 1, "{what}");
            assert_eq!(calls[0].0, name, "{what}");
            assert!(!matches!(&mode, ToolMode::Named(n) if n != name), "{what}");
            assert_eq!(calls[0].1, m["args"], "{what}");
            let t = tools.iter().find(|t| t.function.name == name).unwrap();
            let v: Value = serde_json::from_str(&calls[0].1).unwrap();
            assert!(jsonschema::validator_for(&t.function.parameters).unwrap().is_valid(&v), "{what}");
            called += 1;
        }
    }
    assert!(reasoned >= 3 && called >= 12 && answered >= 1, "{reasoned} {called} {answered}");
}

/// A response format alone (no tools): the final answer's message, after an optional analysis;
/// the split gives the reasoning and the answer without its header. The reasoning budget
/// closes the analysis in time (the end marker forced) and the answer is still whole.
#[test]
fn a_response_format_is_the_final_answer() {
    let Some((p, vocab)) = gpt_oss() else { return };
    let env = VocabEnv::new(vocab.clone());
    let r = chat(None).render(&p).unwrap();
    let reasoning = p.reasoning_after(&r.text).unwrap();
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99}},
                        "required": ["n"], "additionalProperties": false});
    let c = reasoning.constrain(Constraint::JsonSchema(schema.clone(), JsonSchemaOptions::default()));
    let compiled = Compiled::new(&env, &c).unwrap();
    let shape = shape();
    for seed in 0..6u64 {
        let text = random_sample(&compiled, seed, 80).unwrap().text();
        let m = shape.captures(&text).unwrap_or_else(|| panic!("seed {seed}: {text:?}"));
        let answer = m.name("answer").unwrap_or_else(|| panic!("seed {seed}: {text:?}")).as_str();
        let (_, content) = reasoning.split(&text);
        assert_eq!(content, answer, "seed {seed}");
        let v: Value = serde_json::from_str(answer).unwrap();
        assert!(jsonschema::validator_for(&schema).unwrap().is_valid(&v), "seed {seed}: {answer}");
    }
    // The reasoning budget, in a prompt that opened the analysis: at most 5 tokens of it, then
    // the end marker forced, then the whole answer.
    let open = strictly::model::reasoning::PromptReasoning { markers: reasoning.markers.clone(), phase: Phase::Open };
    let c = open.constrain(Constraint::JsonSchema(schema, JsonSchemaOptions::default()));
    let compiled = Compiled::new(&env, &c).unwrap();
    for seed in 0..4 {
        let mut rl = strictly::decode::RandomLogits::new(vocab.len(), seed);
        let mut opts = strictly::decode::GenerateOptions { max_tokens: 60, ..Default::default() };
        opts.reasoning = open.budget(5);
        opts.sampling.seed = Some(seed);
        let mut m = compiled.matcher();
        let out = strictly::decode::generate(&mut rl, &vocab, Some(&mut m), &[], &opts).unwrap();
        let text = out.text();
        let (r, content) = open.split(&text);
        let at = text.find(HARMONY.1).unwrap_or_else(|| panic!("{text:?}"));
        assert!(r.is_some(), "{text:?}");
        // The tokens wholly before the end marker: at most the budget.
        let mut len = 0;
        let before = out.tokens.iter().take_while(|&&t| {
            len += vocab.bytes(t).len();
            len <= at
        });
        assert!(before.count() <= 5, "{text:?}");
        assert!(m.is_accepting(), "{text:?}");
        let v: Value = serde_json::from_str(&content).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert!(v["n"].is_u64(), "{text:?}");
        assert!(out.tokens.len() <= 60);
    }
}
