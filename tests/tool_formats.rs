//! Tool-call formats per chat template (the library's `Engine::choose` and the server's
//! `tools` share this path): the real templates of `../shared/data/tokenizers` (Qwen 2.5:
//! Hermes; Llama 3.2: bare `{"name", "parameters"}`; TinyLlama: no tools, the documented
//! default) and a Mistral v3-style model (TinyLlama's SentencePiece tokenizer with Mistral's
//! control tokens added, and a template written here in the shape of Mistral's v3 ones) render
//! a chat with tools; then, for each, the calls grammar of the format the prompt teaches is
//! sampled with random logits over the model's real vocabulary, and every output is read back
//! with the parser: calls of offered tools only, arguments valid against the tool's schema
//! (checked by the `jsonschema` crate), text without the marker under `Auto`. Last, the
//! library end to end: `Engine::choose` on the embedded model with a template of each shape.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};
use strictly::automaton::{Compiled, Constraint, VocabEnv};
use strictly::decode::{self, FinishReason, GenerateOptions, RandomLogits, StoppedBy};
use strictly::grammar::json_schema::{self, JsonSchemaOptions};
use strictly::model::{ChatMessage, ChatTool, ChatToolCall, PromptFormat};
use strictly::sample::SamplingParams;
use strictly::tools::xml::XmlDialect;
use strictly::tools::{
    calls_grammar, native_format, Joined, ListDialect, OutputParser, ToolChat, ToolFormat, ToolMode, ValueKinds,
};
use strictly::vocab::TokenKind;
use strictly::Vocab;
use tempfile::TempDir;

use crate::common::{real_env, real_vocabs, shared_data};

pub(crate) fn tools() -> Vec<ChatTool> {
    vec![
        ChatTool::function(
            "get_weather",
            Some("The weather in a city".into()),
            json!({"type": "object", "properties": {
                "city": {"type": "string", "maxLength": 12},
                "unit": {"enum": ["C", "F"]}
            }, "required": ["city"], "additionalProperties": false}),
        ),
        ChatTool::function(
            "add",
            None,
            json!({"type": "object", "properties": {
                "a": {"type": "integer", "minimum": -100, "maximum": 100},
                "b": {"type": "integer", "minimum": -100, "maximum": 100}
            }, "required": ["a", "b"], "additionalProperties": false}),
        ),
    ]
}

/// Each tool's name and the grammar of its arguments (what `calls_grammar` takes).
fn argument_grammars(tools: &[ChatTool]) -> Vec<(String, strictly::grammar::Grammar)> {
    tools
        .iter()
        .map(|t| {
            let g = json_schema::compile(&t.function.parameters, &JsonSchemaOptions::default()).unwrap().grammar;
            (t.function.name.clone(), g)
        })
        .collect()
}

/// A chat with one earlier call (id `call_1`) and its result.
pub(crate) fn chat(mode: Option<ToolMode>) -> ToolChat {
    let mut call = ChatMessage::assistant("");
    call.tool_calls.push(ChatToolCall::function(Some("call_1".into()), "get_weather", json!({"city": "Oslo"})));
    ToolChat {
        messages: vec![
            ChatMessage::system("You help."),
            ChatMessage::user("Weather in Oslo?"),
            call,
            ChatMessage::tool("call_1", "-3 C"),
            ChatMessage::user("And 2 + 3?"),
        ],
        // Tools are offered only with a mode (as the engine and the server do).
        tools: if mode.is_some() { tools() } else { Vec::new() },
        mode,
        vars: Default::default(),
    }
}

/// A Mistral v3-style chat template, written for this test after the shape of Mistral's:
/// `[AVAILABLE_TOOLS] [...][/AVAILABLE_TOOLS]` before the last user turn, calls as
/// `[TOOL_CALLS] [{"name", "arguments", "id"}]</s>` with ids of 9 letters and digits (any other
/// id is an error, as in Mistral's), results as `[TOOL_RESULTS] {...}[/TOOL_RESULTS]`.
pub(crate) const MISTRAL_STYLE_TEMPLATE: &str = r#"{%- set ns = namespace(system='', last_user=-1) %}
{%- for m in messages %}{% if m.role == 'system' %}{% set ns.system = m.content %}{% elif m.role == 'user' %}{% set ns.last_user = loop.index0 %}{% endif %}{% endfor %}
{{- bos_token }}
{%- for m in messages %}
{%- if m.role == 'user' %}
{%- if tools and loop.index0 == ns.last_user %}[AVAILABLE_TOOLS] [{% for t in tools %}{{ t | tojson }}{% if not loop.last %}, {% endif %}{% endfor %}][/AVAILABLE_TOOLS]{% endif %}
{%- if ns.system and loop.index0 == ns.last_user %}[INST] {{ ns.system }}

{{ m.content }}[/INST]{% else %}[INST] {{ m.content }}[/INST]{% endif %}
{%- elif m.tool_calls is defined %}[TOOL_CALLS] [{% for c in m.tool_calls %}
{%- if c.id is not defined or c.id | length != 9 %}{{ raise_exception('tool call ids must be 9 letters and digits') }}{% endif %}
{{- '{"name": ' ~ (c.function.name | tojson) ~ ', "arguments": ' ~ (c.function.arguments | tojson) ~ ', "id": ' ~ (c.id | tojson) ~ '}' }}{% if not loop.last %}, {% endif %}{% endfor %}]{{ eos_token }}
{%- elif m.role == 'assistant' %} {{ m.content }}{{ eos_token }}
{%- elif m.role == 'tool' %}[TOOL_RESULTS] {"content": {{ m.content | tojson }}, "call_id": {{ m.tool_call_id | tojson }}}[/TOOL_RESULTS]
{%- endif %}
{%- endfor %}"#;

/// A model directory like a Mistral v3 one: TinyLlama's tokenizer with Mistral's control
/// tokens added as special tokens, and the template above.
fn mistral_dir(data: &Path) -> TempDir {
    // One per test: each directory has a unique name, so tests running in parallel never see
    // each other's half-written files.
    write_synthetic_dir(data, "mistral", MISTRAL_STYLE_TEMPLATE)
}

/// A model directory like a Mistral one (see [`mistral_dir`]; DeepSeek's control tokens are
/// added too) with `template`, in a temporary directory named after `tag` and removed when the
/// returned guard drops.
pub(crate) fn write_synthetic_dir(data: &Path, tag: &str, template: &str) -> TempDir {
    let guard = tempfile::Builder::new().prefix(&format!("strictly-{tag}-")).tempdir().unwrap();
    let dir = guard.path();
    let src = data.join("tokenizers/tinyllama-1.1b-chat/tokenizer.json");
    let mut tok: Value = serde_json::from_str(&std::fs::read_to_string(src).unwrap()).unwrap();
    let added = tok["added_tokens"].as_array_mut().unwrap();
    let names = [
        "[INST]",
        "[/INST]",
        "[TOOL_CALLS]",
        "[AVAILABLE_TOOLS]",
        "[/AVAILABLE_TOOLS]",
        "[TOOL_RESULTS]",
        "[/TOOL_RESULTS]",
        "[ARGS]",
        "[CALL_ID]",
        "[SYSTEM_PROMPT]",
        "[/SYSTEM_PROMPT]",
        "[TOOL_CONTENT]",
        "[THINK]",
        "[/THINK]",
        "<｜User｜>",
        "<｜Assistant｜>",
        "<｜end▁of▁sentence｜>",
        "<｜tool▁calls▁begin｜>",
        "<｜tool▁calls▁end｜>",
        "<｜tool▁call▁begin｜>",
        "<｜tool▁call▁end｜>",
        "<｜tool▁sep｜>",
        "<｜tool▁output▁begin｜>",
        "<｜tool▁output▁end｜>",
    ];
    // gpt-oss's harmony markers, for its template only (its `<|end|>` is Phi-3's EOS).
    let harmony = ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>", "<|call|>"];
    let harmony = if template.contains("<|channel|>") { &harmony[..] } else { &[] };
    for (i, name) in names.iter().chain(harmony).enumerate() {
        added.push(json!({"id": 32000 + i, "content": name, "single_word": false, "lstrip": false,
                          "rstrip": false, "normalized": false, "special": true}));
    }
    std::fs::write(dir.join("tokenizer.json"), tok.to_string()).unwrap();
    let config = json!({"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": true,
                        "chat_template": template});
    std::fs::write(dir.join("tokenizer_config.json"), config.to_string()).unwrap();
    guard
}

/// (name, model dir, the format its template should give); `mistral` is [`mistral_dir`]'s.
fn models(data: &Path, mistral: &Path) -> Vec<(&'static str, PathBuf, ToolFormat)> {
    let t = |n: &str| data.join("tokenizers").join(n);
    vec![
        ("qwen2.5", t("qwen2.5"), ToolFormat::Hermes),
        ("llama-3.2", t("llama-3.2"), ToolFormat::Llama3),
        ("tinyllama-1.1b-chat", t("tinyllama-1.1b-chat"), ToolFormat::Hermes),
        ("mistral-style", mistral.to_path_buf(), ToolFormat::List(ListDialect::Mistral)),
    ]
}

#[test]
fn each_template_renders_tools_in_its_own_format() {
    let Some(data) = shared_data() else { return };
    let mistral = mistral_dir(&data);
    for (name, dir, format) in models(&data, mistral.path()) {
        let p = PromptFormat::from_dir(&dir).unwrap();
        let r = chat(Some(ToolMode::Required)).render(&p).unwrap();
        assert_eq!(r.format, format, "{name}");
        let text = &r.text;
        assert!(text.contains("get_weather") && text.contains("\"add\""), "{name}: {text}");
        match name {
            "qwen2.5" => {
                assert_eq!(native_format(&p), Some(ToolFormat::Hermes));
                assert!(text.contains("<tools>\n{\"type\": \"function\""), "{text}");
                assert!(text.contains("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}"));
            }
            "llama-3.2" => {
                assert!(text.contains("Respond in the format {\"name\": function name, \"parameters\""), "{text}");
                assert!(text.contains("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}<|eot_id|>"));
                assert!(!text.contains("<tool_call>"), "{text}");
            }
            "tinyllama-1.1b-chat" => {
                assert_eq!(native_format(&p), None);
                assert!(text.contains("# Tools") && text.contains("<tool_call>\n{\"name\":\"get_weather\""), "{text}");
            }
            _ => {
                assert!(text.contains("[AVAILABLE_TOOLS] [{\"type\": \"function\""), "{text}");
                // The history's call id (`call_1`) becomes 9 letters and digits, the same in
                // the call and in the result that answers it.
                let id = strictly::tools::format::mistral_id("call_1");
                assert!(text.contains(&format!("[TOOL_CALLS] [{{\"name\": \"get_weather\", \"arguments\": {{\"city\": \"Oslo\"}}, \"id\": \"{id}\"}}]</s>")), "{text}");
                assert!(
                    text.contains(&format!(
                        "[TOOL_RESULTS] {{\"content\": \"-3 C\", \"call_id\": \"{id}\"}}[/TOOL_RESULTS]"
                    )),
                    "{text}"
                );
                assert!(
                    text.contains("[INST] You help.\n\nYou must call at least one function.\n\nAnd 2 + 3?[/INST]"),
                    "{text}"
                );
            }
        }
        // Without tools offered, no tool list; the history still renders.
        let none = chat(None).render(&p).unwrap().text;
        assert!(!none.contains("\"add\""), "{name}: {none}");
    }
}

/// One sampled output: its text, split in chunks as a stream would bring it, read by the
/// parser; the calls, the content and the pieces checked against each other.
fn read(format: ToolFormat, text: &str, seed: u64) -> (String, Vec<(String, String)>) {
    read_with(format, Arc::default(), text, seed)
}

/// [`read`], with Xml parameter values read as `kinds` says.
pub(crate) fn read_with(
    format: ToolFormat,
    kinds: Arc<ValueKinds>,
    text: &str,
    seed: u64,
) -> (String, Vec<(String, String)>) {
    let mut p = OutputParser::new(Some(format)).with_kinds(kinds);
    let chars: Vec<char> = text.chars().collect();
    let mut pieces = Vec::new();
    let mut i = 0;
    let mut k = seed as usize;
    while i < chars.len() {
        k = (k * 7 + 3) % 11;
        let j = (i + 1 + k % 6).min(chars.len());
        pieces.extend(p.feed(&chars[i..j].iter().collect::<String>()));
        i = j;
    }
    pieces.extend(p.finish().unwrap_or_else(|e| panic!("{format:?}: {e}: {text:?}")));
    let mut joined = Joined::default();
    pieces.into_iter().for_each(|piece| joined.push(piece));
    assert!(joined.reasoning.is_empty(), "the calls parser wrote reasoning {:?}", joined.reasoning);
    let calls: Vec<(String, String)> = p.calls().iter().map(|c| (c.name.clone(), c.arguments.clone())).collect();
    assert_eq!(calls, joined.calls, "{text:?}");
    assert_eq!(joined.content, p.content());
    (joined.content, calls)
}

#[test]
fn sampled_calls_parse_back_and_validate_in_every_format() {
    let Some(data) = shared_data() else { return };
    let tools = tools();
    let validators: Vec<(String, jsonschema::Validator)> = tools
        .iter()
        .map(|t| (t.function.name.clone(), jsonschema::validator_for(&t.function.parameters).unwrap()))
        .collect();
    let args = argument_grammars(&tools);
    let mistral = mistral_dir(&data);
    for (name, dir, format) in models(&data, mistral.path()) {
        // The shared tokenizers are loaded once per test binary.
        let (vocab, env) = match real_vocabs().iter().find(|(n, _)| n == name) {
            Some((_, v)) => (v.clone(), real_env(v)),
            None => {
                let v = Arc::new(Vocab::from_tokenizer_json(dir.join("tokenizer.json")).unwrap());
                (v.clone(), VocabEnv::new(v))
            }
        };
        let p = PromptFormat::from_dir(&dir).unwrap();
        assert_eq!(chat(Some(ToolMode::Auto)).render(&p).unwrap().format, format);
        let marker = format.marker();
        if let Some(m) = marker.filter(|_| name != "tinyllama-1.1b-chat") {
            // The marker is one text token, which grammars can write.
            let ids = vocab.encode(m.as_bytes()).unwrap();
            assert_eq!(ids.len(), 1, "{name}: {m} is {ids:?}");
            assert_eq!(vocab.kind(ids[0]), TokenKind::Text, "{name}");
        }
        let modes =
            [(ToolMode::Required, 8), (ToolMode::Required, 1), (ToolMode::Named("add".into()), 8), (ToolMode::Auto, 8)];
        let (mut calls_seen, mut texts_seen) = (0, 0);
        for (mode, max_calls) in modes {
            let g = calls_grammar(args.clone(), &mode, max_calls, format, None);
            let compiled = Compiled::new(&env, &Constraint::Grammar(g)).unwrap();
            for seed in 0..3u64 {
                let mut m = compiled.matcher();
                let opts = GenerateOptions {
                    max_tokens: 100,
                    sampling: SamplingParams { seed: Some(seed), ..SamplingParams::default() },
                    ..GenerateOptions::default()
                };
                let mut model = RandomLogits::new(vocab.len(), seed);
                let out = decode::generate(&mut model, &vocab, Some(&mut m), &[], &opts).unwrap();
                let text = String::from_utf8(out.bytes.clone()).unwrap();
                let what = format!("{name} {mode:?} max {max_calls} seed {seed}: {text:?}");
                let (content, calls) = read(format, &text, seed);
                if mode == ToolMode::Auto {
                    if let Some(m) = marker {
                        assert!(!content.contains(m), "{what}");
                    }
                } else {
                    assert!(!calls.is_empty() && content.trim().is_empty(), "{what}");
                    if let Some(m) = marker {
                        // The marker's own token may open the reply.
                        assert!(compiled.matcher().allows(vocab.encode(m.as_bytes()).unwrap()[0]), "{what}");
                    }
                }
                let most = if format == ToolFormat::Llama3 { 1 } else { max_calls as usize };
                assert!(calls.len() <= most, "{what}");
                if let ToolMode::Named(n) = &mode {
                    assert!(calls.iter().all(|c| &c.0 == n), "{what}");
                }
                for (call, arguments) in &calls {
                    let v = &validators.iter().find(|(n, _)| n == call).unwrap_or_else(|| panic!("{what}")).1;
                    let value: Value = serde_json::from_str(arguments).unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert!(v.is_valid(&value), "{what}: arguments {value} invalid");
                }
                if format == ToolFormat::Llama3 && out.finish_reason == FinishReason::Stop {
                    // The call ends where the model's end-of-turn token goes.
                    if let Some(StoppedBy::Token(t)) = out.stopped_by {
                        assert!(vocab.is_eos(t), "{what}");
                    }
                }
                calls_seen += calls.len();
                texts_seen += (calls.is_empty() && !content.is_empty()) as usize;
            }
        }
        assert!(calls_seen >= 9, "{name}: {calls_seen} calls");
        assert!(texts_seen >= 1, "{name}: no text-only replies under Auto");
    }
}

/// A compact template in Llama 3's shape (headers, `<|eot_id|>`, calls as bare
/// `{"name", "parameters"}` objects), written for the engine test below: the real one spells
/// the tools out at a length the embedded model's 512-token context cannot hold.
pub(crate) const LLAMA3_STYLE_TEMPLATE: &str = r#"{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>
{% if tools and loop.last %}Call one of {% for t in tools %}{{ t.function.name }}{% endfor %} as {"name": name, "parameters": {...}}.
{% endif %}{% if m.tool_calls is defined %}{% for c in m.tool_calls %}{"name": "{{ c.function.name }}", "parameters": {{ c.function.arguments | tojson }}}{% endfor %}{% else %}{{ m.content }}{% endif %}<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>
{% endif %}"#;

/// A compact template in the Hermes shape, for the same reason.
pub(crate) const HERMES_STYLE_TEMPLATE: &str = r#"{{ bos_token }}{% if tools %}Tools: {% for t in tools %}{{ t.function.name }} {% endfor %}; call as <tool_call>{"name": .., "arguments": ..}</tool_call>
{% endif %}{% for m in messages %}{{ m.role }}: {{ m.content }}{% for c in m.tool_calls %}<tool_call>{{ {"name": c.function.name, "arguments": c.function.arguments} | tojson }}</tool_call>{% endfor %}
{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}"#;

/// A compact template in the Qwen3-Coder XML shape, for the same reason.
pub(crate) const XML_STYLE_TEMPLATE: &str = r#"{{ bos_token }}{% if tools %}Tools: {% for t in tools %}{{ t.function.name }} {% endfor %}; call as <tool_call>
<function=NAME>
<parameter=KEY>
VALUE
</parameter>
</function>
</tool_call>
{% endif %}{% for m in messages %}{{ m.role }}: {{ m.content }}{% for c in m.tool_calls %}<tool_call>
<function={{ c.function.name }}>
{% for k, v in c.function.arguments|items %}<parameter={{ k }}>
{{ v }}
</parameter>
{% endfor %}</function>
</tool_call>{% endfor %}
{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}"#;

/// A compact template in the shape of Llama 4's pythonic tool template, for the same reason.
pub(crate) const PYTHONIC_STYLE_TEMPLATE: &str = r#"{{ bos_token }}{% if tools %}Tools: {% for t in tools %}{{ t.function.name }} {% endfor %}; call as [func_name1(param1=value1)]
{% endif %}{% for m in messages %}{{ m.role }}: {{ m.content }}{% for c in m.tool_calls %}[{{ c.function.name }}()]{% endfor %}
{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}"#;

/// A template in the shape of gpt-oss's (harmony messages; reasoning in the analysis channel).
pub(crate) const HARMONY_STYLE_TEMPLATE: &str = r#"{{ bos_token }}{% if tools %}Tools: {% for t in tools %}{{ t.function.name }} {% endfor %}; think in <|channel|>analysis<|message|>, call in <|channel|>commentary, then <|call|>
{% endif %}{% for m in messages %}<|start|>{{ m.role }}{% for c in m.tool_calls %} to=functions.{{ c.function.name }}<|channel|>commentary json<|message|>{{ c.function.arguments|tojson }}<|call|>{% else %}<|message|>{{ m.content }}<|end|>{% endfor %}{% endfor %}{% if add_generation_prompt %}<|start|>assistant{% endif %}"#;

/// The library end to end: the embedded model, given a template of each shape in turn, is
/// offered a tool through [`Engine::choose`]; the prompt, the constraint and the reader all
/// follow the template's format, and the calls come back as `ToolCall`s, streamed and
/// blocking alike.
#[test]
fn engine_choose_follows_each_template_format() {
    use strictly::model::{embedded, ChatTemplate, LoadOptions, LoadedModel};
    use strictly::{Engine, GenerateOptions, StreamEvent, ToolChoice, Tools};
    #[derive(serde::Deserialize, Debug)]
    struct Move {
        x: u8,
    }
    let cases = [
        (LLAMA3_STYLE_TEMPLATE, ToolFormat::Llama3, "{\"name\""),
        (MISTRAL_STYLE_TEMPLATE, ToolFormat::List(ListDialect::Mistral), "[TOOL_CALLS]"),
        (HERMES_STYLE_TEMPLATE, ToolFormat::Hermes, "<tool_call>"),
        (XML_STYLE_TEMPLATE, ToolFormat::Xml(XmlDialect::Qwen), "<tool_call><function=move_to>"),
        (PYTHONIC_STYLE_TEMPLATE, ToolFormat::Pythonic, "[move_to(x="),
        // After an optional analysis message.
        (HARMONY_STYLE_TEMPLATE, ToolFormat::Harmony, "to=functions.move_to<|channel|>commentary"),
    ];
    // A small schema: the embedded model's context is 512 tokens, and Llama's template spells
    // the tools out with indent=4.
    let schema = json!({"type": "object", "properties": {"x": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["x"]});
    let tools = Tools::new().function_schema("move_to", "", schema).unwrap();
    let msgs = [ChatMessage::user("Go")];
    for (template, format, start) in cases {
        let mut loaded = LoadedModel::embedded(&LoadOptions::default()).unwrap();
        let tok = tokenizers::Tokenizer::from_bytes(embedded::TOKENIZER).unwrap();
        let config = json!({"bos_token": "<s>", "eos_token": "</s>"});
        loaded.prompt =
            PromptFormat::new(tok, Some(&config), None, Some(ChatTemplate::new(template, "t").unwrap())).unwrap();
        let engine = Engine::from_loaded(loaded);
        assert_eq!(engine.tool_format(&msgs, &tools, &ToolChoice::Required).unwrap(), format);
        for seed in 0..3 {
            let opts = GenerateOptions::default().with_seed(seed).with_max_tokens(128);
            let r = engine.choose(&msgs, &tools, &ToolChoice::Required, &opts).unwrap();
            let text = r.output.text();
            let bare = text.replace([' ', '\n', '\t'], "");
            assert!(bare.starts_with(start) || (format == ToolFormat::Harmony && text.contains(start)), "{text:?}");
            assert!(!r.calls.is_empty() && r.text.trim().is_empty(), "{format:?}: {r:?}");
            assert!(format != ToolFormat::Llama3 || r.calls.len() == 1, "{r:?}");
            for c in &r.calls {
                assert_eq!(c.name, "move_to");
                let m: Move = c.args().unwrap();
                assert_eq!(json!(m.x), c.arguments["x"]);
            }
            // Streamed: the same calls.
            let mut streamed: Vec<(String, String)> = Vec::new();
            let mut done = None;
            for ev in engine.choose_stream(&msgs, &tools, &ToolChoice::Required, &opts).unwrap() {
                match ev.unwrap() {
                    StreamEvent::CallStart { name, .. } => streamed.push((name, String::new())),
                    StreamEvent::CallArgs { index, text } => streamed[index].1.push_str(&text),
                    StreamEvent::Done(reply) => done = Some(reply),
                    StreamEvent::Text(_) | StreamEvent::Reasoning(_) => {}
                }
            }
            let done = done.unwrap();
            assert_eq!(done.output.text(), text);
            let args: Vec<Value> = streamed.iter().map(|(_, a)| serde_json::from_str(a).unwrap()).collect();
            assert_eq!(args, r.calls.iter().map(|c| c.arguments.clone()).collect::<Vec<_>>());
            // Auto: text without the format's marker, or calls.
            let a = engine.choose(&msgs, &tools, &ToolChoice::Auto, &opts).unwrap();
            if let Some(m) = format.marker() {
                assert!(!a.text.contains(m), "{a:?}");
            } else if a.calls.is_empty() && format.lead().is_some() {
                assert!(!a.text.starts_with('{'), "{a:?}");
            }
        }
    }
}

/// Qwen3's real template (`../shared/data/chat-templates`) on Qwen 2.5's tokenizer (the same
/// family): Hermes `<tool_call>` JSON after an optional `<think>` part, or, with
/// `enable_thinking: false`, the calls alone (the template pre-fills an empty reasoning part).
/// Random-logits samples of the calls grammar after the reasoning parse back into calls whose
/// arguments validate, once the reasoning is split off.
#[test]
fn qwen3_calls_tools_after_its_thinking() {
    use strictly::model::reasoning::Phase;
    use strictly::model::ChatTemplate;
    let Some(data) = shared_data() else { return };
    let mut p = PromptFormat::from_dir(&data.join("tokenizers/qwen2.5")).unwrap();
    let source = std::fs::read_to_string(data.join("chat-templates/Qwen-Qwen3-0.6B.jinja")).unwrap();
    p.set_chat_template(ChatTemplate::new(&source, "Qwen3").unwrap());
    let (_, vocab) = real_vocabs().iter().find(|(n, _)| n == "qwen2.5").unwrap();
    let env = real_env(vocab);
    let tools = tools();
    let args = argument_grammars(&tools);
    for (vars, phase) in [(json!({}), Phase::Optional), (json!({"enable_thinking": false}), Phase::Closed)] {
        let mut c = chat(Some(ToolMode::Required));
        c.vars = serde_json::from_value(vars.clone()).unwrap();
        let r = c.render(&p).unwrap();
        assert_eq!(r.format, ToolFormat::Hermes, "{vars}");
        assert!(r.text.contains("<tools>") && r.text.contains("get_weather"), "{}", r.text);
        let reasoning = p.reasoning_after(&r.text).unwrap();
        assert_eq!(reasoning.phase, phase, "{vars}: {:?}", &r.text[r.text.len().saturating_sub(60)..]);
        let calls = Constraint::Grammar(calls_grammar(args.clone(), &ToolMode::Required, 8, ToolFormat::Hermes, None));
        let compiled = Compiled::new(&env, &reasoning.constrain_calls(calls)).unwrap();
        let mut thought = 0;
        for seed in 0..6u64 {
            let text = crate::common::random_sample(&compiled, seed, 120).unwrap().text();
            let (thinking, answer) = reasoning.split(&text);
            assert!(phase == Phase::Optional || thinking.is_none(), "{vars} seed {seed}: {text:?}");
            thought += thinking.is_some() as usize;
            let (content, calls) = read(ToolFormat::Hermes, &answer, seed);
            assert!(!calls.is_empty() && content.trim().is_empty(), "{vars} seed {seed}: {text:?}");
            for (name, arguments) in calls {
                let t = tools.iter().find(|t| t.function.name == name).unwrap();
                let value: Value = serde_json::from_str(&arguments).unwrap();
                assert!(jsonschema::validator_for(&t.function.parameters).unwrap().is_valid(&value), "{text:?}");
            }
        }
        if phase == Phase::Optional {
            // Random logits take the `<think>` branch now and then.
            assert!(thought > 0, "no sample reasoned");
        }
    }
}

/// The formats detected in the shared chat templates: Hermes only where `<tool_call>` holds
/// Hermes's JSON; Qwen3-Coder's and Qwen3.5's XML and GLM's `<arg_key>` bodies are XML
/// dialects; templates that teach none of the known formats get none.
#[test]
fn the_shared_templates_formats() {
    let Some(data) = shared_data() else { return };
    let dir = data.join("chat-templates");
    let detect = |f: &str| ToolFormat::detect(&std::fs::read_to_string(dir.join(f)).unwrap());
    for (file, format) in [
        ("Qwen-Qwen2.5-7B-Instruct.jinja", Some(ToolFormat::Hermes)),
        ("Qwen-Qwen3-0.6B.jinja", Some(ToolFormat::Hermes)),
        ("Qwen-QwQ-32B.jinja", Some(ToolFormat::Hermes)),
        ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", Some(ToolFormat::Hermes)),
        ("meta-llama-Llama-3.2-3B-Instruct.jinja", Some(ToolFormat::Llama3)),
        ("meta-llama-Llama-3.3-70B-Instruct.jinja", Some(ToolFormat::Llama3)),
        ("Qwen3.5-4B.jinja", Some(ToolFormat::Xml(XmlDialect::Qwen))),
        ("Qwen3-Coder.jinja", Some(ToolFormat::Xml(XmlDialect::Qwen))),
        ("GLM-4.6.jinja", Some(ToolFormat::Xml(XmlDialect::Glm))),
        ("google-gemma-2-2b-it.jinja", None),
    ] {
        assert_eq!(detect(file), format, "{file}");
    }
}
