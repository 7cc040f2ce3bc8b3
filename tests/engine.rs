//! The library API ([`strictly::Engine`]) on the embedded model: typed generation, tool choice
//! under every [`ToolChoice`], streaming equal to blocking, cancellation, and clear errors.

use std::sync::OnceLock;

use schemars::JsonSchema;
use serde::Deserialize;
use strictly::{ChatMessage, Engine, GenerateOptions, StreamEvent, ToolChoice, Tools};

fn engine() -> &'static Engine {
    static E: OnceLock<Engine> = OnceLock::new();
    E.get_or_init(|| Engine::embedded().expect("the embedded model loads"))
}

fn opts(seed: u64, max_tokens: usize) -> GenerateOptions {
    GenerateOptions::default().with_seed(seed).with_max_tokens(max_tokens)
}

#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
struct Person {
    #[schemars(length(min = 1, max = 16))]
    name: String,
    #[schemars(range(min = 0, max = 120))]
    age: u8,
    tags: Vec<Tag>,
    nickname: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Tag {
    Kind,
    Brave,
    VerySleepy,
}

#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum Shape {
    Circle { r: f64 },
    Rect { w: u16, h: u16 },
}

#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
struct Scene {
    title: String,
    #[schemars(length(min = 1, max = 3))]
    shapes: Vec<Shape>,
    done: bool,
}

#[test]
fn generate_typed_values() {
    let e = engine();
    for seed in 0..4 {
        let p: Person = e.generate("Once upon a time", &opts(seed, 128)).unwrap();
        assert!((1..=16).contains(&p.name.chars().count()) && p.age <= 120, "{p:?}");
        let s: Scene = e.generate("Tom drew shapes.", &opts(seed, 160)).unwrap();
        assert!((1..=3).contains(&s.shapes.len()), "{s:?}");
        // The value is exactly the JSON it was read from (a list of i8, a bool).
        let n = e.generate_typed::<Vec<i8>>("Numbers:", &opts(seed, 64)).unwrap();
        assert_eq!(serde_json::from_str::<Vec<i8>>(&n.output.text()).unwrap(), n.value, "{}", n.output.text());
        let b = e.generate_typed::<bool>("Yes or no?", &opts(seed, 8)).unwrap();
        assert_eq!(b.output.text().trim(), if b.value { "true" } else { "false" }, "seed {seed}");
    }
    // The same seed, the same value; the output it was read from is exactly its JSON.
    let a = e.generate_typed::<Person>("Lily", &opts(3, 128)).unwrap();
    let b = e.generate_typed::<Person>("Lily", &opts(3, 128)).unwrap();
    assert_eq!(a.value, b.value);
    assert_eq!(serde_json::from_str::<Person>(&a.output.text()).unwrap(), a.value);
}

#[test]
fn generate_errors_are_clear() {
    // No complete value within the budget: an error up front, not a cut value.
    let e = engine().generate::<Person>("x", &opts(1, 3)).unwrap_err().to_string();
    assert!(e.contains("max_tokens") || e.contains("token"), "{e}");
    // A set (`uniqueItems` over 256 values, more than the grammar lists) is kept distinct by
    // the matcher: every seed reads back as a set of as many values as were written.
    for seed in 0..4 {
        let r = engine().generate_typed::<std::collections::HashSet<u8>>("x", &opts(seed, 48)).unwrap();
        let items: Vec<u8> = serde_json::from_str(&r.output.text()).unwrap();
        assert_eq!(items.len(), r.value.len(), "{items:?} repeats a value");
    }
}

/// Arithmetic for the calculator.
#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
struct Calc {
    #[schemars(regex(pattern = r"^[1-9][0-9]?( [-+*] [1-9][0-9]?){1,2}$"))]
    expression: String,
}

#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
struct Clock {}

#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
struct Weather {
    city: String,
    unit: Option<Unit>,
}

#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "lowercase")]
enum Unit {
    Celsius,
    Fahrenheit,
}

fn tools() -> Tools {
    Tools::new()
        .function::<Calc>("calculator", "Evaluates arithmetic")
        .unwrap()
        .function::<Clock>("clock", "The time")
        .unwrap()
        .function::<Weather>("get_weather", "The weather in a city")
        .unwrap()
}

fn chat() -> Vec<ChatMessage> {
    vec![ChatMessage::system("You help."), ChatMessage::user("What is 2 + 2, and the weather in Oslo?")]
}

#[test]
fn choose_under_every_tool_choice() {
    let (e, tools, msgs) = (engine(), tools(), chat());
    for seed in 0..3 {
        let r = e.choose(&msgs, &tools, &ToolChoice::Required, &opts(seed, 160)).unwrap();
        assert!(!r.calls.is_empty(), "required: {r:?}");
        assert_eq!(r.text, "");
        for c in &r.calls {
            match c.name.as_str() {
                "calculator" => assert!(c.args::<Calc>().unwrap().expression.contains(' ')),
                "clock" => assert_eq!(c.args::<Clock>().unwrap(), Clock {}),
                "get_weather" => drop(c.args::<Weather>().unwrap()),
                other => panic!("unknown tool {other}"),
            }
            assert!(c.id.starts_with("call_"));
        }
        for name in ["calculator", "clock", "get_weather"] {
            let r = e.choose(&msgs, &tools, &ToolChoice::Named(name.into()), &opts(seed, 160)).unwrap();
            assert!(!r.calls.is_empty() && r.calls.iter().all(|c| c.name == name), "named {name}: {r:?}");
        }
        let r = e.choose(&msgs, &tools, &ToolChoice::None, &opts(seed, 24)).unwrap();
        assert!(r.calls.is_empty());
        assert_eq!(r.text, r.output.text());
        let r = e.choose(&msgs, &tools, &ToolChoice::Auto, &opts(seed, 24)).unwrap();
        assert!(!r.text.contains("<tool_call>"), "auto text never holds the marker: {r:?}");
    }
    // One call only when parallel calls are off.
    let single = tools.clone().parallel(false);
    for seed in 0..3 {
        let r = e.choose(&msgs, &single, &ToolChoice::Required, &opts(seed, 160)).unwrap();
        assert_eq!(r.calls.len(), 1);
    }
}

#[test]
fn replies_go_back_into_the_chat() {
    let (e, tools) = (engine(), tools());
    let mut msgs = chat();
    let r = e.choose(&msgs, &tools, &ToolChoice::Named("get_weather".into()), &opts(5, 160)).unwrap();
    msgs.push(r.message());
    for c in &r.calls {
        msgs.push(c.result("-3 C and snowing"));
    }
    let prompt = e.chat_prompt(&msgs, &tools, &ToolChoice::Auto).unwrap();
    assert!(prompt.contains("get_weather(city, unit)"), "{prompt}");
    assert!(prompt.contains("<tool_call>{\"name\": \"get_weather\""), "{prompt}");
    assert!(prompt.contains("tool: -3 C and snowing"), "{prompt}");
    // The plain template teaches the default format.
    assert_eq!(e.tool_format(&msgs, &tools, &ToolChoice::Auto).unwrap(), strictly::ToolFormat::Hermes);
    // The chat with the call and its result goes on: a reply that is text or calls of known
    // tools with typed arguments, never the raw marker.
    let r = e.choose(&msgs, &tools, &ToolChoice::Auto, &opts(5, 16)).unwrap();
    assert!(!r.text.contains("<tool_call>"), "{r:?}");
    for c in &r.calls {
        assert!(["calculator", "clock", "get_weather"].contains(&c.name.as_str()), "{r:?}");
        assert!(c.args::<serde_json::Value>().unwrap().is_object(), "{r:?}");
    }
    // And the tool turn can be forced: a named call after the result is a well-typed call.
    let r = e.choose(&msgs, &tools, &ToolChoice::Named("clock".into()), &opts(5, 96)).unwrap();
    assert!(!r.calls.is_empty(), "{r:?}");
    for c in &r.calls {
        assert_eq!((c.name.as_str(), c.args::<Clock>().unwrap()), ("clock", Clock {}));
    }
}

#[test]
fn tool_errors_are_clear() {
    let (e, tools, msgs) = (engine(), tools(), chat());
    let err = |r: strictly::Result<strictly::Reply>| r.unwrap_err().to_string();
    let m = err(e.choose(&msgs, &tools, &ToolChoice::Named("nope".into()), &opts(1, 32)));
    assert!(m.contains("\"nope\"") && m.contains("calculator"), "{m}");
    let m = err(e.choose(&msgs, &Tools::new(), &ToolChoice::Required, &opts(1, 32)));
    assert!(m.contains("at least one tool"), "{m}");
    let m = err(e.choose(&[], &tools, &ToolChoice::Auto, &opts(1, 32)));
    assert!(m.contains("message"), "{m}");
    let m = Tools::new().function::<Clock>("bad name", "").unwrap_err().to_string();
    assert!(m.contains("invalid tool name"), "{m}");
    let m = tools.clone().function::<Clock>("clock", "").unwrap_err().to_string();
    assert!(m.contains("two tools are named \"clock\""), "{m}");
    let m = Tools::new().function::<u32>("n", "").unwrap_err().to_string();
    assert!(m.contains("\"type\": \"object\""), "{m}");
    let m = Tools::new()
        .function_schema(
            "s",
            "",
            // Cannot be enforced exactly (`contains` beside `maxItems`): fails closed.
            serde_json::json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"},
                "contains": {"const": "x"}, "maxItems": 3}}}),
        )
        .unwrap_err();
    assert!(m.to_string().contains("tool \"s\""), "{m}");
    // Reading a call's arguments as the wrong type names both.
    let r = e.choose(&msgs, &tools, &ToolChoice::Named("clock".into()), &opts(1, 96)).unwrap();
    let m = r.calls[0].args::<Calc>().unwrap_err().to_string();
    assert!(m.contains("Clock") && m.contains("Calc"), "{m}");
    assert_eq!(r.calls[0].args::<serde_json::Value>().unwrap(), serde_json::json!({}));
}

#[test]
fn streams_equal_the_blocking_results() {
    let (e, tools, msgs) = (engine(), tools(), chat());
    for seed in 0..3 {
        let o = opts(seed, 128);
        let blocking: Person = e.generate("Once", &o).unwrap();
        let mut text = String::new();
        let mut done = None;
        for ev in e.stream::<Person>("Once", &o).unwrap() {
            match ev.unwrap() {
                StreamEvent::Text(t) => text.push_str(&t),
                StreamEvent::Done(p) => done = Some(p),
                other => panic!("no calls in a typed stream: {other:?}"),
            }
        }
        assert_eq!(done.as_ref(), Some(&blocking));
        assert_eq!(serde_json::from_str::<Person>(&text).unwrap(), blocking);

        for choice in [ToolChoice::Required, ToolChoice::Auto, ToolChoice::Named("get_weather".into())] {
            let o = opts(seed, 160);
            let blocking = e.choose(&msgs, &tools, &choice, &o).unwrap();
            let (mut text, mut calls) = (String::new(), Vec::<(String, String, String)>::new());
            let mut done = None;
            for ev in e.choose_stream(&msgs, &tools, &choice, &o).unwrap() {
                match ev.unwrap() {
                    StreamEvent::Text(t) => text.push_str(&t),
                    StreamEvent::CallStart { index, id, name } => {
                        assert_eq!(index, calls.len());
                        calls.push((id, name, String::new()));
                    }
                    StreamEvent::CallArgs { index, text } => calls[index].2.push_str(&text),
                    StreamEvent::Done(r) => done = Some(r),
                    StreamEvent::Reasoning(r) => panic!("no reasoning without markers: {r:?}"),
                }
            }
            let done = done.expect("Done comes last");
            assert_eq!(done.output.tokens, blocking.output.tokens, "{choice:?} seed {seed}");
            assert_eq!((&text, &done.text), (&blocking.text, &blocking.text));
            let names = |cs: &[strictly::ToolCall]| {
                cs.iter().map(|c| (c.name.clone(), c.arguments.clone())).collect::<Vec<_>>()
            };
            assert_eq!(names(&done.calls), names(&blocking.calls));
            for ((id, name, args), c) in calls.iter().zip(&done.calls) {
                assert_eq!((id, name), (&c.id, &c.name));
                assert_eq!(serde_json::from_str::<serde_json::Value>(args).unwrap(), c.arguments);
            }
            assert_eq!(calls.len(), done.calls.len());
        }
    }
    // wait() is the blocking result too.
    let o = opts(9, 128);
    assert_eq!(e.stream::<Person>("Once", &o).unwrap().wait().unwrap(), e.generate::<Person>("Once", &o).unwrap());
}

#[test]
fn cancellation_stops_generation() {
    let e = engine();
    let long = strictly::automaton::Constraint::Regex("[a-z ]{300}".into());
    // Unstopped, this runs 300 tokens.
    let full = e.generate_text("Once", Some(&long), &opts(1, 400)).unwrap();
    assert_eq!(full.text().len(), 300);
    // A stream of a value that needs about as many tokens, cancelled after its first event.
    #[derive(Deserialize, JsonSchema, Debug)]
    struct Long {
        #[schemars(length(min = 300, max = 300))]
        text: String,
    }
    let whole = e.generate_typed::<Long>("Once", &opts(1, 500)).unwrap();
    assert_eq!(whole.value.text.chars().count(), 300);
    let whole = whole.output.tokens.len();
    assert!(whole > 60, "{whole}");
    let mut s = e.stream::<Long>("Once", &opts(1, 500)).unwrap();
    assert!(matches!(s.next(), Some(Ok(StreamEvent::Text(_)))));
    let generated = s.cancel();
    // The worker runs at most STREAM_AHEAD events ahead, and stops at its next token.
    assert!(generated <= 2 + 2 * strictly::engine::STREAM_AHEAD, "stopped early: {generated} of {whole} tokens");
    // Dropping a stream mid-way cancels it too (and joins its worker: this returns).
    let mut s = e.stream::<Long>("Once", &opts(2, 500)).unwrap();
    assert!(matches!(s.next(), Some(Ok(StreamEvent::Text(_)))));
    drop(s);
}

/// Rust integer types whose schemars schema has no maximum still always deserialize: random
/// logits (which love long digit strings) never produce a number the type cannot hold.
#[test]
fn wide_integers_always_fit_their_type() {
    use strictly::decode::{generate_typed, RandomLogits};
    #[derive(Debug, Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Counts {
        a: u32,
        b: i64,
        c: u64,
        d: usize,
        e: i32,
        #[schemars(range(min = 5))]
        f: u64,
    }
    let schema = strictly::decode::schema_for::<Counts>();
    assert_eq!(schema["properties"]["a"]["maximum"], serde_json::json!(u32::MAX));
    assert_eq!(schema["properties"]["f"]["minimum"], serde_json::json!(5));
    let env = engine().env().clone();
    for seed in 0..40 {
        let mut model = RandomLogits::new(env.vocab().len(), seed);
        let o = opts(seed, 200);
        let c = generate_typed::<Counts>(&mut model, &env, &[], &o).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert!(c.value.f >= 5 && c.value.c < 9_000_000_000_000_000, "{c:?}");
    }
}

/// `tool_choice: required` with parallel calls on (issue 23 item 9): the embedded model writes
/// several calls, never the same call twice (same name, JSON-equal arguments), each valid.
#[test]
fn required_tool_calls_never_repeat() {
    let weather = serde_json::json!({"type": "object",
        "properties": {"city": {"type": "string", "maxLength": 24}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": false});
    let time = serde_json::json!({"type": "object",
        "properties": {"zone": {"type": "string", "maxLength": 20}, "hours24": {"type": "boolean"}}, "required": ["zone"]});
    let tools = Tools::new()
        .function_schema("get_weather", "Current weather for a city", weather.clone())
        .unwrap()
        .function_schema("get_time", "Current time in a time zone", time.clone())
        .unwrap();
    let msgs = vec![ChatMessage::user("What is the weather in Paris?")];
    let mut several = false;
    for seed in 0..4 {
        let r = engine().choose(&msgs, &tools, &ToolChoice::Required, &opts(seed, 400)).unwrap();
        assert!(!r.calls.is_empty(), "seed {seed}");
        let calls: Vec<(String, serde_json::Value)> =
            r.calls.iter().map(|c| (c.name.clone(), c.arguments.clone())).collect();
        for (i, (name, args)) in calls.iter().enumerate() {
            let schema = if name == "get_weather" { &weather } else { &time };
            assert!(jsonschema::validator_for(schema).unwrap().is_valid(args), "seed {seed}: {name} {args}");
            assert!(!calls[..i].contains(&calls[i]), "seed {seed}: {name} {args} repeated in {calls:?}");
        }
        several |= calls.len() > 1;
    }
    assert!(several, "the story model writes more than one call somewhere");
}

/// A reasoning model through [`Engine::choose`]: the embedded model under a template that opens
/// `<think>` reasons first, at most 6 tokens here, then
/// calls; the reasoning comes back apart (`Reply::reasoning`, `StreamEvent::Reasoning` before
/// any call) and never reaches the calls' reader.
#[test]
fn a_reasoning_model_reasons_then_calls() {
    use strictly::model::{embedded, ChatTemplate, LoadOptions, LoadedModel, PromptFormat};
    let mut loaded = LoadedModel::embedded(&LoadOptions::default()).unwrap();
    let tok = tokenizers::Tokenizer::from_bytes(embedded::TOKENIZER).unwrap();
    let config = serde_json::json!({"bos_token": "<s>", "eos_token": "</s>"});
    // Compact (the embedded model's context is 512 tokens): the tools by name, Hermes calls.
    let hermes = crate::tool_formats::HERMES_STYLE_TEMPLATE;
    // As QwQ's and R1's: the prompt opens `<think>`, history drops the reasoning.
    let source = hermes
        .replace("assistant: {% endif %}", "assistant: <think>\n{% endif %}")
        .replace("{{ m.content }}", "{{ m.content.split('</think>')[-1] }}");
    assert_ne!(source, hermes);
    let template = ChatTemplate::new(&source, "thinking").unwrap();
    loaded.prompt = PromptFormat::new(tok, Some(&config), None, Some(template)).unwrap();
    let engine = Engine::from_loaded(loaded).with_max_reasoning_tokens(6);
    let schema = serde_json::json!({"type": "object", "properties": {"x": {"type": "integer", "minimum": 0, "maximum": 9}},
                                    "required": ["x"], "additionalProperties": false});
    let tools = Tools::new().function_schema("move_to", "", schema).unwrap().parallel(false);
    let msgs = [ChatMessage::user("Go")];
    for seed in 0..3 {
        let r = engine.choose(&msgs, &tools, &ToolChoice::Required, &opts(seed, 80)).unwrap();
        let reasoning = r.reasoning.clone().unwrap_or_else(|| panic!("seed {seed}: no reasoning: {r:?}"));
        assert!(!reasoning.is_empty() && !reasoning.contains("</think>"), "{r:?}");
        assert_eq!(r.calls.len(), 1, "{r:?}");
        assert!(r.calls[0].arguments["x"].as_u64().is_some_and(|x| x <= 9), "{r:?}");
        let mut seen_call = false;
        let mut streamed = String::new();
        for ev in engine.choose_stream(&msgs, &tools, &ToolChoice::Required, &opts(seed, 80)).unwrap() {
            match ev.unwrap() {
                StreamEvent::Reasoning(t) => {
                    assert!(!seen_call, "reasoning after a call");
                    streamed.push_str(&t);
                }
                StreamEvent::CallStart { .. } => seen_call = true,
                StreamEvent::Done(done) => assert_eq!((done.reasoning, done.calls.len()), (Some(reasoning.clone()), 1)),
                _ => {}
            }
        }
        assert!(seen_call && streamed.trim() == reasoning, "{streamed:?} vs {reasoning:?}");
    }
}
