//! Native tool-call formats beyond JSON objects, on the real templates of
//! `../shared/data/chat-templates`: Qwen3-Coder's and Qwen3.5's XML parameter elements, and
//! Mistral's newer `[TOOL_CALLS]NAME[ARGS]{..}` calls (Mistral Small 3.2 with `[CALL_ID]`,
//! Devstral, Ministral 3), DeepSeek V3.1's `<｜tool▁calls▁begin｜>` calls. For each: the tools and the history's calls render in the
//! template's own format, and random-logits samples of the calls grammar (after the reasoning,
//! where the template reasons) parse back, streamed in uneven chunks, into calls of the offered
//! tools whose arguments validate against each tool's schema.

use std::sync::Arc;

use serde_json::{json, Value};
use strictly::automaton::{Compiled, Constraint};
use strictly::model::{ChatMessage, ChatTemplate, ChatTool, PromptFormat};
use strictly::tools::xml::XmlDialect;
use strictly::tools::{arguments_grammar, calls_grammar, ListDialect, OutputParser, ToolFormat, ToolMode, ValueKinds};

use crate::common::{real_env, real_vocabs, shared_data};
use crate::tool_formats::{chat, read_with, tools, write_synthetic_dir};

/// The shared tools and one with a string, an array of enums, a boolean and a `$ref`'d date.
fn more_tools() -> Vec<ChatTool> {
    let mut tools = tools();
    tools.push(ChatTool::function(
        "note",
        Some("Save a note".into()),
        json!({"type": "object", "properties": {
            "text": {"type": "string", "minLength": 1},
            "tags": {"type": "array", "items": {"enum": ["home", "work"]}, "maxItems": 2},
            "urgent": {"type": "boolean"},
            "when": {"$ref": "#/$defs/day"}
        }, "required": ["text"], "$defs": {"day": {"type": "string", "format": "date"}}}),
    ));
    tools
}

/// Samples the calls grammar of `format` for `tools` under several modes, after the
/// template's reasoning when `p` has it, and checks each output read back; returns the calls
/// and the text-only replies seen.
fn sample_and_read(
    p: &PromptFormat,
    rendered: &str,
    env: &Arc<strictly::automaton::VocabEnv>,
    tools: &[ChatTool],
    format: ToolFormat,
    what: &str,
) -> (usize, usize) {
    let kinds = Arc::new(ValueKinds::new(tools.iter().map(|t| (t.function.name.as_str(), &t.function.parameters))));
    let args: Vec<_> = tools
        .iter()
        .map(|t| (t.function.name.clone(), arguments_grammar(&t.function.parameters, format).unwrap()))
        .collect();
    let reasoning = p.reasoning_after(rendered);
    let marker = format.marker();
    let (mut calls_seen, mut texts_seen) = (0, 0);
    for (mode, max_calls) in [(ToolMode::Required, 8), (ToolMode::Named("note".into()), 1), (ToolMode::Auto, 8)] {
        let calls = Constraint::Grammar(calls_grammar(args.clone(), &mode, max_calls, format, None));
        let constraint = match &reasoning {
            Some(r) => r.constrain_calls(calls),
            None => calls,
        };
        let compiled = Compiled::new(env, &constraint).unwrap();
        for seed in 0..3u64 {
            // Random logits never write the end marker by chance: reasoning ends where its
            // budget says (40 tokens), as `max_reasoning_tokens` makes it for a real model, so
            // the answer has room (without it, the reasoning runs to the end of the output).
            let budget = reasoning.as_ref().and_then(|r| r.budget(40));
            let text = crate::common::random_sample_reasoning(&compiled, seed, 160, budget).unwrap().text();
            let answer = match &reasoning {
                Some(r) => r.split(&text).1,
                None => text.clone(),
            };
            let what = format!("{what} {mode:?} seed {seed}: {text:?}");
            let (content, calls) = read_with(format, kinds.clone(), &answer, seed);
            if mode == ToolMode::Auto {
                assert!(marker.is_none_or(|m| !content.contains(m)), "{what}");
            } else {
                assert!(!calls.is_empty() && content.trim().is_empty(), "{what}");
            }
            assert!(calls.len() <= format.max_calls(max_calls) as usize, "{what}");
            for (name, arguments) in &calls {
                let t = tools.iter().find(|t| &t.function.name == name).unwrap_or_else(|| panic!("{what}"));
                let value: Value = serde_json::from_str(arguments).unwrap_or_else(|e| panic!("{what}: {e}"));
                let v = jsonschema::validator_for(&t.function.parameters).unwrap();
                assert!(v.is_valid(&value), "{what}: arguments {value} invalid");
            }
            calls_seen += calls.len();
            texts_seen += (calls.is_empty() && !content.trim().is_empty()) as usize;
        }
    }
    (calls_seen, texts_seen)
}

/// Qwen3-Coder's and Qwen3.5's real templates (`../shared/data/chat-templates`) on Qwen 2.5's
/// tokenizer (the same family): the tools and the history's call render in the template's own
/// XML; random-logits samples of the XML calls grammar (after Qwen3.5's reasoning) parse back,
/// streamed in uneven chunks, into calls of the offered tools whose arguments (strings as bare
/// text, other values as JSON) validate against each tool's schema.
#[test]
fn qwen_xml_calls_parse_back_and_validate() {
    let Some(data) = shared_data() else { return };
    let (_, vocab) = real_vocabs().iter().find(|(n, _)| n == "qwen2.5").unwrap();
    let env = real_env(vocab);
    let tools = more_tools();
    for file in ["Qwen3-Coder.jinja", "Qwen3.5-4B.jinja"] {
        let mut p = PromptFormat::from_dir(&data.join("tokenizers/qwen2.5")).unwrap();
        let source = std::fs::read_to_string(data.join("chat-templates").join(file)).unwrap();
        p.set_chat_template(ChatTemplate::new(&source, file).unwrap());
        let mut c = chat(Some(ToolMode::Required));
        c.tools = tools.clone();
        let r = c.render(&p).unwrap();
        assert_eq!(r.format, ToolFormat::Xml(XmlDialect::Qwen), "{file}");
        assert!(r.text.contains("get_weather") && r.text.contains("note"), "{file}: {}", r.text);
        let history =
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>";
        assert!(r.text.contains(history), "{file}: {}", r.text);
        assert_eq!(p.reasoning_after(&r.text).is_some(), file.starts_with("Qwen3.5"), "{file}");
        let (calls_seen, texts_seen) =
            sample_and_read(&p, &r.text, &env, &tools, ToolFormat::Xml(XmlDialect::Qwen), file);
        assert!(calls_seen >= 6, "{file}: {calls_seen} calls");
        assert!(texts_seen >= 1, "{file}: no text-only replies under Auto");
    }
}

/// Mistral's newer templates on TinyLlama's tokenizer with Mistral's control tokens added (no
/// Mistral tokenizer is at hand; `[TOOL_CALLS]`, `[ARGS]`, `[CALL_ID]` are kept as text so the
/// grammar writes them as one token each): the history's call in the template's own shape, then
/// sampled calls read back. Their templates demand alternating turns, so the chat has the
/// assistant's answer after the tool result.
#[test]
fn mistral_args_calls_parse_back_and_validate() {
    let Some(data) = shared_data() else { return };
    let tools = more_tools();
    for (file, call_id) in [
        ("Mistral-Small-3.2-24B-Instruct-2506.jinja", true),
        ("unsloth-mistral-Devstral-Small-2507.jinja", false),
        ("mistralai-Ministral-3-14B-Reasoning-2512.jinja", false),
    ] {
        let source = std::fs::read_to_string(data.join("chat-templates").join(file)).unwrap();
        let dir = write_synthetic_dir(&data, &file.replace('.', "-"), &source);
        let p = PromptFormat::from_dir(dir.path()).unwrap();
        let vocab = Arc::new(strictly::Vocab::from_tokenizer_json(dir.path().join("tokenizer.json")).unwrap());
        let env = strictly::automaton::VocabEnv::new(vocab.clone());
        for marker in ["[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"] {
            let ids = vocab.encode(marker.as_bytes()).unwrap();
            assert_eq!(ids.len(), 1, "{file}: {marker} is {ids:?}");
            assert_eq!(vocab.kind(ids[0]), strictly::vocab::TokenKind::Text, "{file}");
        }
        let mut c = chat(Some(ToolMode::Required));
        c.tools = tools.clone();
        c.messages.insert(4, ChatMessage::assistant("It is -3 C in Oslo."));
        let format = ToolFormat::MistralArgs { call_id };
        let r = c.render(&p).unwrap();
        assert_eq!(r.format, format, "{file}");
        let id = strictly::tools::format::mistral_id("call_1");
        let history = match call_id {
            true => format!("[TOOL_CALLS]get_weather[CALL_ID]{id}[ARGS]{{\"city\": \"Oslo\"}}"),
            false => "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\"}".to_string(),
        };
        assert!(r.text.contains(&history), "{file}: {}", r.text);
        let (calls_seen, texts_seen) = sample_and_read(&p, &r.text, &env, &tools, format, file);
        assert!(calls_seen >= 6, "{file}: {calls_seen} calls");
        assert!(texts_seen >= 1, "{file}: no text-only replies under Auto");
    }
}

/// DeepSeek V3.1's template on the same synthetic tokenizer with DeepSeek's control tokens: it
/// renders the history's call (arguments as JSON text) but no tools, so they are described in
/// the system turn; thinking off (its default) pre-fills `</think>`, and the calls follow.
#[test]
fn deepseek_calls_parse_back_and_validate() {
    let Some(data) = shared_data() else { return };
    let tools = more_tools();
    let file = "deepseek-ai-DeepSeek-V3.1.jinja";
    let source = std::fs::read_to_string(data.join("chat-templates").join(file)).unwrap();
    let dir = write_synthetic_dir(&data, "deepseek-v3-1", &source);
    let p = PromptFormat::from_dir(dir.path()).unwrap();
    let vocab = Arc::new(strictly::Vocab::from_tokenizer_json(dir.path().join("tokenizer.json")).unwrap());
    let env = strictly::automaton::VocabEnv::new(vocab.clone());
    for marker in ["<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>"] {
        let ids = vocab.encode(marker.as_bytes()).unwrap();
        assert_eq!(ids.len(), 1, "{marker} is {ids:?}");
        assert_eq!(vocab.kind(ids[0]), strictly::vocab::TokenKind::Text);
    }
    let mut c = chat(Some(ToolMode::Required));
    c.tools = tools.clone();
    let r = c.render(&p).unwrap();
    assert_eq!(r.format, ToolFormat::DeepSeek);
    let history = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\":\"Oslo\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    assert!(r.text.contains(history), "{}", r.text);
    assert!(r.text.contains("### note\nDescription: Save a note") && r.text.contains("You must call"), "{}", r.text);
    assert!(r.text.ends_with("<｜Assistant｜></think>"), "{}", r.text);
    let (calls_seen, texts_seen) = sample_and_read(&p, &r.text, &env, &tools, ToolFormat::DeepSeek, file);
    assert!(calls_seen >= 6, "{calls_seen} calls");
    assert!(texts_seen >= 1, "no text-only replies under Auto");
}

/// Every chat template in the shared folder (on the synthetic tokenizer, which knows the
/// control tokens of Mistral and DeepSeek): a chat with tools, a call and its result renders,
/// natively in the format the template teaches or with the tools described in the system turn
/// in the default format (where a template teaches none this crate writes, or refuses the
/// chat); the format is the one expected of it; and random-logits samples of that format's
/// calls grammar, after the template's reasoning, parse back into valid calls (once per
/// distinct format and reasoning).
#[test]
fn every_shared_template_renders_tools_and_reads_calls_back() {
    let Some(data) = shared_data() else { return };
    let native: &[(&str, ToolFormat)] = &[
        ("Qwen-Qwen2.5-7B-Instruct.jinja", ToolFormat::Hermes),
        ("Qwen-Qwen3-0.6B.jinja", ToolFormat::Hermes),
        ("Qwen-QwQ-32B.jinja", ToolFormat::Hermes),
        ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", ToolFormat::Hermes),
        ("meta-llama-Llama-3.2-3B-Instruct.jinja", ToolFormat::Llama3),
        ("meta-llama-Llama-3.3-70B-Instruct.jinja", ToolFormat::Llama3),
        ("Mistral-Small-3.2-24B-Instruct-2506.jinja", ToolFormat::MistralArgs { call_id: true }),
        ("unsloth-mistral-Devstral-Small-2507.jinja", ToolFormat::MistralArgs { call_id: false }),
        ("mistralai-Ministral-3-14B-Reasoning-2512.jinja", ToolFormat::MistralArgs { call_id: false }),
        ("mistralai-Mistral-Nemo-Instruct-2407.jinja", ToolFormat::List(ListDialect::Mistral)),
        ("ibm-granite-granite-3.3-2B-Instruct.jinja", ToolFormat::List(ListDialect::Granite)),
        ("NVIDIA-Nemotron-Nano-v2.jinja", ToolFormat::List(ListDialect::Nemotron)),
        ("deepseek-ai-DeepSeek-V3.1.jinja", ToolFormat::DeepSeek),
        ("Qwen3-Coder.jinja", ToolFormat::Xml(XmlDialect::Qwen)),
        ("Qwen3.5-4B.jinja", ToolFormat::Xml(XmlDialect::Qwen)),
        ("ByteDance-Seed-OSS.jinja", ToolFormat::Xml(XmlDialect::Seed)),
        ("GLM-4.6.jinja", ToolFormat::Xml(XmlDialect::Glm)),
        ("MiniMax-M2.jinja", ToolFormat::Xml(XmlDialect::MiniMax)),
        ("vllm-tool_chat_template_llama4_pythonic.jinja", ToolFormat::Pythonic),
        ("openai-gpt-oss-120b.jinja", ToolFormat::Harmony),
    ];
    let tools = more_tools();
    let mut files: Vec<_> = std::fs::read_dir(data.join("chat-templates"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|f| f.ends_with(".jinja"))
        .collect();
    files.sort();
    assert!(files.len() >= 30, "{files:?}");
    let mut sampled = std::collections::HashSet::new();
    let mut env_of_dir = None;
    for file in &files {
        let source = std::fs::read_to_string(data.join("chat-templates").join(file)).unwrap();
        let dir = write_synthetic_dir(&data, &format!("every-{}", file.replace('.', "-")), &source);
        let p = PromptFormat::from_dir(dir.path()).unwrap();
        let mut c = chat(Some(ToolMode::Required));
        c.tools = tools.clone();
        c.messages.insert(4, ChatMessage::assistant("It is -3 C in Oslo."));
        let r = match c.render(&p) {
            Ok(r) => r,
            // Firefunction's template needs variables of its own (`functions`, `datetime`): a
            // clear error naming what is missing.
            Err(e) if file.contains("firefunction") => {
                assert!(e.to_string().contains("undefined") || e.to_string().contains("unknown"), "{file}: {e}");
                continue;
            }
            Err(e) => panic!("{file}: {e}"),
        };
        let expected = native.iter().find(|(f, _)| f == file).map_or(ToolFormat::Hermes, |(_, f)| *f);
        assert_eq!(r.format, expected, "{file}");
        for t in &tools {
            assert!(r.text.contains(&t.function.name), "{file}: no {} in {}", t.function.name, r.text);
        }
        if let Some((call, reply)) = history_call(r.format) {
            // The history's call as the template wrote it is what the grammar writes and what
            // the parser reads back (harmony's arguments spelled compact, as the grammar writes
            // JSON).
            assert!(r.text.contains(&call), "{file}: no {call:?} in {}", r.text);
            history_round_trip(&r.format, &reply, &tools, file);
        }
        let key = format!("{:?} {:?}", r.format, p.reasoning_after(&r.text));
        if sampled.insert(key) {
            // The synthetic tokenizer is the same for every directory: one vocabulary.
            let env = env_of_dir
                .get_or_insert_with(|| {
                    let v = Arc::new(strictly::Vocab::from_tokenizer_json(dir.path().join("tokenizer.json")).unwrap());
                    strictly::automaton::VocabEnv::new(v)
                })
                .clone();
            let (calls, _) = sample_and_read(&p, &r.text, &env, &tools, r.format, file);
            assert!(calls >= 4, "{file}: {calls} calls");
        }
    }
    assert!(sampled.len() >= 8, "{sampled:?}");
}

/// The history's call (`get_weather` with `{"city": "Oslo"}`) as the template writes it and as
/// a reply of the grammar writes it, where the arguments' spelling does not depend on the
/// template's JSON (the XML dialects: a bare string; pythonic: a quoted one; DeepSeek: the
/// arguments' text as given, compact) or only by its spaces (harmony's `tojson`).
fn history_call(format: ToolFormat) -> Option<(String, String)> {
    if format == ToolFormat::Harmony {
        let head = " to=functions.get_weather<|channel|>commentary json<|message|>";
        return Some((format!("{head}{{\"city\": \"Oslo\"}}"), format!("{head}{{\"city\":\"Oslo\"}}")));
    }
    let same = |s: String| Some((s.clone(), s));
    match format {
        ToolFormat::Xml(d) => {
            let s = d.syntax();
            same(format!(
                "{}{}get_weather{}{}city{}Oslo{}{}{}",
                s.call_open, s.name_open, s.name_close, s.key_open, s.key_close, s.value_end, s.after_value, s.call_end
            ))
        }
        ToolFormat::Pythonic => same("[get_weather(city=\"Oslo\")]".into()),
        ToolFormat::DeepSeek => same(
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\":\"Oslo\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>".into(),
        ),
        // (Granite's template renders no calls in the history.)
        ToolFormat::List(ListDialect::Nemotron) => Some((
            "<TOOLCALL>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]</TOOLCALL>".into(),
            "<TOOLCALL>[{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Oslo\"}}]</TOOLCALL>".into(),
        )),
        _ => None,
    }
}

/// `call` is a whole reply of the calls grammar (required calls), and the parser reads it as
/// `get_weather` with `{"city": "Oslo"}`.
fn history_round_trip(format: &ToolFormat, call: &str, tools: &[ChatTool], what: &str) {
    let (_, vocab) = real_vocabs().iter().find(|(n, _)| n == "gpt2").unwrap();
    let env = real_env(vocab);
    let args: Vec<_> = tools
        .iter()
        .map(|t| (t.function.name.clone(), arguments_grammar(&t.function.parameters, *format).unwrap()))
        .collect();
    let g = calls_grammar(args, &ToolMode::Required, 8, *format, None);
    let mut m = Compiled::new(&env, &Constraint::Grammar(g)).unwrap().matcher();
    m.commit_bytes(call.as_bytes()).unwrap_or_else(|e| panic!("{what}: {call:?}: {e}"));
    assert!(m.is_accepting(), "{what}: {call:?}");
    let kinds = Arc::new(ValueKinds::new(tools.iter().map(|t| (t.function.name.as_str(), &t.function.parameters))));
    let mut p = OutputParser::new(Some(*format)).with_kinds(kinds);
    p.feed(call);
    p.finish().unwrap_or_else(|e| panic!("{what}: {e}"));
    let read: Vec<(String, Value)> =
        p.calls().iter().map(|c| (c.name.clone(), serde_json::from_str(&c.arguments).unwrap())).collect();
    assert_eq!(read, vec![("get_weather".to_string(), json!({"city": "Oslo"}))], "{what}");
}
