//! Reasoning, then the constraint (issue 25 item 1): the markers of the shared chat templates
//! and where their prompts leave them; the grammar (free text up to the end marker, then the
//! constraint) on every real vocabulary, fast masks equal to the reference; the reasoning
//! budget, which forces the end marker.

use serde_json::{json, Value};
use strictly::automaton::{Compiled, Constraint, VocabEnv};
use strictly::decode::{self, GenerateOptions, ReasoningBudget, ScriptedModel};
use strictly::model::reasoning::{Phase, Reasoning};
use strictly::model::{ChatMessage, ChatTemplate, TemplateVars};
use strictly::sample::SamplingParams;
use strictly::Vocab;

use crate::common::{random_sample, real_env, real_vocabs, shared_data, walk_checking_masks};

fn schema() -> Constraint {
    let s = json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99}},
                   "required": ["n"], "additionalProperties": false});
    Constraint::JsonSchema(s, Default::default())
}

fn after_reasoning(start: Option<&str>, then: Constraint) -> Constraint {
    Constraint::AfterReasoning {
        start: start.map(String::from),
        end: "</think>".into(),
        header: None,
        then: Box::new(then),
    }
}

#[test]
fn the_shared_templates_markers_and_phases() {
    let Some(dir) = shared_data() else { return };
    let dir = dir.join("chat-templates");
    let render = |file: &str, vars: Value| {
        let source = std::fs::read_to_string(dir.join(file)).unwrap();
        let t = ChatTemplate::new(&source, file).unwrap();
        let vars: TemplateVars = serde_json::from_value(vars).unwrap();
        let text = t.render_with_vars(&[ChatMessage::user("Hi")], &[], true, "<s>", "</s>", &vars).unwrap();
        let r = Reasoning::detect(&source).unwrap_or_else(|| panic!("{file}: no reasoning markers found"));
        (r.start.clone(), r.phase(&text))
    };
    let think = || "<think>".to_string();
    for (file, vars, expected) in [
        ("Qwen-Qwen3-0.6B.jinja", json!({}), (think(), Phase::Optional)),
        ("Qwen-Qwen3-0.6B.jinja", json!({"enable_thinking": false}), (think(), Phase::Closed)),
        ("Qwen3.5-4B.jinja", json!({}), (think(), Phase::Open)),
        ("Qwen3.5-4B.jinja", json!({"enable_thinking": false}), (think(), Phase::Closed)),
        ("Qwen-QwQ-32B.jinja", json!({}), (think(), Phase::Open)),
        ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", json!({}), (think(), Phase::Open)),
        ("deepseek-ai-DeepSeek-V3.1.jinja", json!({"thinking": true}), (think(), Phase::Open)),
        ("deepseek-ai-DeepSeek-V3.1.jinja", json!({"thinking": false}), (think(), Phase::Closed)),
        ("MiniMax-M2.jinja", json!({}), (think(), Phase::Open)),
        ("mistralai-Ministral-3-14B-Reasoning-2512.jinja", json!({}), ("[THINK]".into(), Phase::Optional)),
        ("ByteDance-Seed-OSS.jinja", json!({}), ("<seed:think>".into(), Phase::Optional)),
        // Harmony: the analysis channel, optional after `<|start|>assistant` (whose `<|end|>`
        // before it ends the user's turn, not a reasoning part).
        ("openai-gpt-oss-120b.jinja", json!({}), ("<|channel|>analysis<|message|>".into(), Phase::Optional)),
        (
            "openai-gpt-oss-120b.jinja",
            json!({"reasoning_effort": "low"}),
            ("<|channel|>analysis<|message|>".into(), Phase::Optional),
        ),
    ] {
        assert_eq!(render(file, vars.clone()), expected, "{file} with {vars}");
    }
    for file in [
        "Qwen-Qwen2.5-7B-Instruct.jinja",
        "meta-llama-Llama-3.2-3B-Instruct.jinja",
        "microsoft-Phi-3.5-mini-instruct.jinja",
    ] {
        assert_eq!(Reasoning::detect(&std::fs::read_to_string(dir.join(file)).unwrap()), None, "{file}");
    }
}

/// The answer after the reasoning: `</think>`, at most 4 whitespace characters, then JSON
/// whose `n` is in range.
fn check_answer(text: &str, what: &str) {
    let (reasoning, answer) = text.split_once("</think>").unwrap_or_else(|| panic!("{what}: no end marker: {text:?}"));
    assert!(!reasoning.contains("</think>"));
    let json = answer.trim_start();
    assert!(answer.len() - json.len() <= 4, "{what}: {answer:?}");
    let v: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{what}: {json:?}: {e}"));
    assert!(v["n"].as_u64().is_some_and(|n| n <= 99) && v.as_object().unwrap().len() == 1, "{what}: {v}");
}

#[test]
fn samples_reason_then_answer_on_every_vocabulary() {
    for (name, vocab) in real_vocabs() {
        let env = real_env(vocab);
        let open = Compiled::new(&env, &after_reasoning(None, schema())).unwrap();
        let optional = Compiled::new(&env, &after_reasoning(Some("<think>"), schema())).unwrap();
        for seed in 0..4 {
            let out = random_sample(&open, seed, 120).unwrap();
            check_answer(&out.text(), &format!("{name}, open, seed {seed}"));
            let text = random_sample(&optional, seed, 120).unwrap().text();
            if text.trim_start().starts_with('{') {
                let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {text:?}: {e}"));
                assert!(v["n"].is_u64(), "{name}: {text:?}");
            } else {
                assert!(text.starts_with("<think>"), "{name}, optional, seed {seed}: {text:?}");
                check_answer(&text, &format!("{name}, optional, seed {seed}"));
            }
        }
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(7);
        walk_checking_masks(&optional, &mut rng, 12, &format!("{name}, optional reasoning"));
    }
}

/// A small vocabulary for a model that thinks (`hm `) and answers `{"n":5}`; EOS last.
fn thinking_vocab() -> std::sync::Arc<Vocab> {
    let toks: Vec<Vec<u8>> = ["hm ", "</think>", "{", "}", "\"n\"", ":", "5", " ", "\n", "</s>"]
        .iter()
        .map(|t| t.as_bytes().to_vec())
        .collect();
    std::sync::Arc::new(Vocab::from_byte_tokens(toks, &[9]))
}

#[test]
fn the_reasoning_budget_forces_the_end_marker() {
    // A model that would reason forever: it always prefers "hm " (then "{"; greedy).
    let vocab = thinking_vocab();
    let env = VocabEnv::new(vocab.clone());
    let budget = |start: Option<&str>, max| ReasoningBudget {
        start: start.map(String::from),
        end: "</think>".into(),
        max_tokens: max,
    };
    for max in [0, 1, 5] {
        let opts = GenerateOptions {
            max_tokens: 40,
            sampling: SamplingParams::greedy(),
            reasoning: Some(budget(None, max)),
            ..GenerateOptions::default()
        };
        // Free: `max` tokens of reasoning, the marker, then the model goes on.
        let mut model = ScriptedModel::new(vocab.len(), |_, l| l[0] = 10.0);
        let out = decode::generate(&mut model, &vocab, None, &[], &opts).unwrap();
        assert!(out.text().starts_with(&format!("{}</think>hm ", "hm ".repeat(max))), "{max}: {:?}", out.text());
        // Constrained: the same, then the JSON.
        let c = Compiled::new(&env, &after_reasoning(None, Constraint::Regex(r#"\{"n":5\}"#.into()))).unwrap();
        let mut model = ScriptedModel::new(vocab.len(), |_, l| {
            l[0] = 10.0;
            l[2] = 5.0;
        });
        let mut m = c.matcher();
        let out = decode::generate(&mut model, &vocab, Some(&mut m), &[], &opts).unwrap();
        assert_eq!(out.text(), format!("{}</think>{{\"n\":5}}", "hm ".repeat(max)), "{max}");
    }
    // Without a budget, `max_tokens` still leaves room for the marker and a complete answer.
    let c = Compiled::new(&env, &after_reasoning(None, Constraint::Regex(r#"\{"n":5\}"#.into()))).unwrap();
    for max_tokens in [7, 9] {
        let opts = GenerateOptions { max_tokens, sampling: SamplingParams::greedy(), ..GenerateOptions::default() };
        let mut model = ScriptedModel::new(vocab.len(), |_, l| {
            l[0] = 10.0;
            l[2] = 5.0;
        });
        let mut m = c.matcher();
        let out = decode::generate(&mut model, &vocab, Some(&mut m), &[], &opts).unwrap();
        assert!(out.tokens.len() <= max_tokens && out.text().ends_with("</think>{\"n\":5}"), "{:?}", out.text());
        assert!(out.text().starts_with("hm "), "it reasoned while there was room: {:?}", out.text());
    }
    // A stop string that begins with the marker holds the marker's text back a while; the
    // budget still sees the marker at once (it is forced once, not again).
    // (Greedy: a draw at temperature 1 takes another token about once in a hundred runs.)
    let opts = GenerateOptions {
        max_tokens: 8,
        stop: vec!["</think>!".into()],
        reasoning: Some(budget(None, 2)),
        sampling: SamplingParams::greedy(),
        ..GenerateOptions::default()
    };
    let mut model = ScriptedModel::new(vocab.len(), |_, l| l[0] = 10.0);
    let out = decode::generate(&mut model, &vocab, None, &[], &opts).unwrap();
    assert_eq!(out.text().matches("</think>").count(), 1, "{:?}", out.text());
    // An optional part counts only once the output has begun it.
    let opts = GenerateOptions {
        max_tokens: 12,
        reasoning: Some(budget(Some("<think>"), 2)),
        sampling: SamplingParams::greedy(),
        ..GenerateOptions::default()
    };
    let mut model = ScriptedModel::new(vocab.len(), |_, l| l[0] = 10.0);
    let out = decode::generate(&mut model, &vocab, None, &[], &opts).unwrap();
    assert_eq!(out.text(), "hm ".repeat(12), "no reasoning part, no marker");
}

/// The marker forced, the answer must still fit in what is left *after* it: over every budget
/// and `max_tokens`, a model that prefers whitespace and more digits after the marker ends
/// with a complete answer within `max_tokens`.
#[test]
fn a_forced_marker_leaves_room_for_the_answer() {
    let vocab = thinking_vocab();
    let env = VocabEnv::new(vocab.clone());
    let c = Compiled::new(&env, &after_reasoning(None, Constraint::Regex(r#"\{"n":5+\}"#.into()))).unwrap();
    for max_tokens in 6..14 {
        for budget in 0..10 {
            let opts = GenerateOptions {
                max_tokens,
                sampling: SamplingParams::greedy(),
                reasoning: Some(ReasoningBudget { start: None, end: "</think>".into(), max_tokens: budget }),
                ..GenerateOptions::default()
            };
            let mut model = ScriptedModel::new(vocab.len(), |_, l| {
                l[0] = 10.0;
                l[8] = 6.0;
                l[6] = 5.0;
            });
            let mut m = c.matcher();
            let out = decode::generate(&mut model, &vocab, Some(&mut m), &[], &opts).unwrap();
            let what = format!("max_tokens {max_tokens}, budget {budget}: {:?}", out.text());
            assert!(out.tokens.len() <= max_tokens && m.is_accepting(), "{what}");
            assert!(out.text().ends_with("5}"), "{what}");
        }
    }
}
