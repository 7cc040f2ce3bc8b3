//! The OpenAI-compatible server (src/server) with the embedded stories260K model.
//!
//! - `oneshot` requests against `server::app`: every route, each constraint kind (the JSON
//!   Schema, regex, grammar and choice outputs are checked by independent means: serde_json and
//!   hand checks, the `regex` crate), tool calls, logprobs, `n`, completions, and the errors
//!   (400 with OpenAI's body naming the problem, 404, 405, 413, 429, timeouts).
//! - A real server on 127.0.0.1 (port 0) read by a small raw HTTP/1.1 client: the SSE chunk
//!   sequence, streamed text equal to the non-streamed text with the same seed, streamed tool
//!   calls, a client that disconnects mid-stream (its generation stops and frees the only slot),
//!   and parallel requests.
//! - Batched decoding (server/batch.rs): concurrent requests stepped together give the outputs
//!   they give one at a time with `max_batch` 1; a disconnect stops a batched sequence.
//! - The official `openai` Python client against `strictly serve` (tests/e2e/openai_e2e.py),
//!   when python3 can import `openai`; otherwise a loud SKIPPED.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use strictly::decode::LanguageModel;
use strictly::model::{CandleModel, LoadOptions, LoadedModel};
use strictly::server::{app, AppState, ModelSource, ServerConfig};
use strictly::TokenId;
use tower::ServiceExt;

mod batch;
pub mod tcp;
use tcp::{http_json, serve, sse, wait_until, Conn};

// ---- set-up ---------------------------------------------------------------------------------

fn state(config: ServerConfig) -> AppState {
    AppState::new(LoadedModel::embedded(&LoadOptions::default()).unwrap(), config)
}

/// The embedded model, slowed down by `delay` per forward pass, counting its passes.
struct Slow {
    model: CandleModel,
    delay: Duration,
    calls: Arc<AtomicUsize>,
}

struct SlowSeq {
    inner: CandleModel,
    delay: Duration,
    calls: Arc<AtomicUsize>,
}

impl LanguageModel for SlowSeq {
    fn logits_width(&self) -> usize {
        self.inner.logits_width()
    }
    fn forward(&mut self, tokens: &[TokenId], logits: &mut [f32]) -> strictly::Result<()> {
        std::thread::sleep(self.delay);
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.forward(tokens, logits)
    }
    fn fork(&self) -> strictly::Result<Box<dyn LanguageModel>> {
        Ok(Box::new(SlowSeq { inner: self.inner.clone(), delay: self.delay, calls: self.calls.clone() }))
    }
}

impl ModelSource for Slow {
    fn fresh(&self) -> strictly::Result<Box<dyn LanguageModel + Send>> {
        Ok(Box::new(SlowSeq { inner: self.model.restart(), delay: self.delay, calls: self.calls.clone() }))
    }
}

fn slow_state(delay: Duration, config: ServerConfig) -> (AppState, Arc<AtomicUsize>) {
    let LoadedModel { model, env, prompt, defaults, info } = LoadedModel::embedded(&LoadOptions::default()).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let source = Arc::new(Slow { model, delay, calls: calls.clone() });
    (AppState::with_source(source, env, prompt, defaults, info, config), calls)
}

async fn call_raw(app: &Router, method: &str, path: &str, body: Vec<u8>) -> (StatusCode, Vec<u8>) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes().to_vec();
    (status, bytes)
}

async fn call(app: &Router, method: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    let body = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    let (status, bytes) = call_raw(app, method, path, body).await;
    let v = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("{method} {path}: not JSON ({e}): {}", String::from_utf8_lossy(&bytes)));
    (status, v)
}

async fn post(app: &Router, path: &str, body: Value) -> (StatusCode, Value) {
    call(app, "POST", path, Some(body)).await
}

async fn chat_ok(app: &Router, mut body: Value) -> Value {
    if body.get("messages").is_none() {
        body["messages"] = json!([{"role": "user", "content": "Tell me a story about a cat."}]);
    }
    let (s, v) = post(app, "/v1/chat/completions", body).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    v
}

/// Asserts an OpenAI error body with this status, and returns its `error` object.
async fn expect_error(app: &Router, path: &str, body: Value, status: StatusCode) -> Value {
    let (s, v) = post(app, path, body.clone()).await;
    assert_eq!(s, status, "{body} → {v}");
    let e = v["error"].clone();
    assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
    assert!(e["type"].is_string(), "{v}");
    assert!(e.get("param").is_some() && e.get("code").is_some(), "{v}");
    e
}

fn msgs(text: &str) -> Value {
    json!([{"role": "user", "content": text}])
}

fn content(v: &Value, i: usize) -> String {
    v["choices"][i]["message"]["content"].as_str().unwrap_or_else(|| panic!("no content: {v}")).to_string()
}

fn check_usage(v: &Value) {
    let u = &v["usage"];
    let (p, c, t) = (
        u["prompt_tokens"].as_u64().unwrap(),
        u["completion_tokens"].as_u64().unwrap(),
        u["total_tokens"].as_u64().unwrap(),
    );
    assert!(p > 0, "{v}");
    assert_eq!(p + c, t, "{v}");
}

// ---- oneshot: routes ------------------------------------------------------------------------

#[tokio::test]
async fn health_models_metrics_and_unknown_routes() {
    let app = app(state(ServerConfig::default()));
    let (s, v) = call(&app, "GET", "/health", None).await;
    assert_eq!((s, v["status"].as_str()), (StatusCode::OK, Some("ok")), "{v}");
    let (s, v) = call(&app, "GET", "/v1/models", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["object"], "list");
    assert_eq!(v["data"][0]["id"], "stories260K");
    assert_eq!(v["data"][0]["object"], "model");
    assert_eq!(v["data"][0]["max_model_len"], 512);
    let (s, v) = call(&app, "GET", "/v1/models/stories260K", None).await;
    assert_eq!((s, v["id"].as_str()), (StatusCode::OK, Some("stories260K")));
    let (s, v) = call(&app, "GET", "/v1/models/gpt-4o", None).await;
    assert_eq!((s, v["error"]["code"].as_str()), (StatusCode::NOT_FOUND, Some("model_not_found")), "{v}");
    let (s, v) = call(&app, "GET", "/v2/nothing", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    assert!(v["error"]["message"].is_string());
    let (s, v) = call(&app, "GET", "/v1/chat/completions", None).await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED, "{v}");
    assert!(v["error"]["message"].is_string());

    chat_ok(&app, json!({"max_tokens": 5})).await;
    let (s, bytes) = call_raw(&app, "GET", "/metrics", Vec::new()).await;
    assert_eq!(s, StatusCode::OK);
    let text = String::from_utf8(bytes).unwrap();
    assert!(text.contains("strictly_requests_total{route=\"chat\"} 1"), "{text}");
    assert!(text.contains("# TYPE strictly_completion_tokens_total counter"), "{text}");
    // An unconstrained request computes no mask; a constrained one does, and its time counts.
    assert_eq!(metric_value(&text, "strictly_masks_total"), 0.0, "{text}");
    assert_eq!(metric_value(&text, "strictly_mask_seconds_total"), 0.0, "{text}");
    chat_ok(&app, json!({"max_tokens": 20, "response_format": {"type": "json_object"}})).await;
    let (_, bytes) = call_raw(&app, "GET", "/metrics", Vec::new()).await;
    let text = String::from_utf8(bytes).unwrap();
    assert!(text.contains("# TYPE strictly_mask_seconds_total counter"), "{text}");
    assert!(metric_value(&text, "strictly_masks_total") >= 2.0, "{text}");
    assert!(metric_value(&text, "strictly_mask_seconds_total") > 0.0, "{text}");
}

/// The value of an unlabelled metric in Prometheus text.
fn metric_value(text: &str, name: &str) -> f64 {
    let line = text.lines().find(|l| l.split(' ').next() == Some(name)).unwrap_or_else(|| panic!("no {name}: {text}"));
    line[name.len()..].trim().parse().unwrap()
}

#[tokio::test]
async fn chat_plain_text_usage_seed_and_n() {
    let app = app(state(ServerConfig::default()));
    let v = chat_ok(&app, json!({"model": "stories260K", "max_tokens": 20, "seed": 7})).await;
    assert_eq!(v["object"], "chat.completion");
    assert!(v["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    check_usage(&v);
    let c = v["usage"]["completion_tokens"].as_u64().unwrap();
    assert!((1..=20).contains(&c), "{v}");
    let reason = v["choices"][0]["finish_reason"].as_str().unwrap();
    assert!(reason == "stop" || (reason == "length" && c == 20), "{v}");
    // The same seed gives the same text; n choices get seeds seed, seed+1, ...
    let again = chat_ok(&app, json!({"max_tokens": 20, "seed": 7})).await;
    assert_eq!(content(&v, 0), content(&again, 0));
    let three = chat_ok(&app, json!({"max_tokens": 20, "seed": 7, "n": 3})).await;
    let choices = three["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 3);
    for (i, c) in choices.iter().enumerate() {
        assert_eq!(c["index"], i);
    }
    assert_eq!(content(&three, 0), content(&v, 0));
    // "default" and no model at all are accepted too.
    chat_ok(&app, json!({"model": "default", "max_tokens": 3})).await;
    // Greedy with a stop string: the text ends before it.
    let v = chat_ok(&app, json!({"max_tokens": 60, "temperature": 0, "stop": ["."]})).await;
    let t = content(&v, 0);
    assert!(!t.contains('.'), "{t:?}");
}

/// The schema the JSON tests use, and a hand check that a value satisfies it.
fn person_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 20},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "color": {"enum": ["red", "green", "blue"]},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 3},
            "pet": {
                "type": ["object", "null"],
                "properties": {"legs": {"type": "integer"}},
                "required": ["legs"],
                "additionalProperties": false
            }
        },
        "required": ["name", "age", "color", "tags", "pet"],
        "additionalProperties": false
    })
}

/// `response_format` for a JSON Schema.
fn schema_format(name: &str, schema: Value) -> Value {
    json!({"type": "json_schema", "json_schema": {"name": name, "schema": schema}})
}

fn check_person(v: &Value) {
    let o = v.as_object().unwrap_or_else(|| panic!("not an object: {v}"));
    let mut keys: Vec<&str> = o.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["age", "color", "name", "pet", "tags"], "{v}");
    assert!(o["name"].as_str().is_some_and(|s| s.chars().count() <= 20), "{v}");
    assert!(o["age"].as_u64().is_some_and(|a| a <= 120), "{v}");
    assert!(["red", "green", "blue"].contains(&o["color"].as_str().unwrap_or("")), "{v}");
    let tags = o["tags"].as_array().unwrap_or_else(|| panic!("{v}"));
    assert!(tags.len() <= 3 && tags.iter().all(|t| t.as_str().is_some_and(|s| s.chars().count() <= 10)), "{v}");
    match &o["pet"] {
        Value::Null => {}
        Value::Object(p) => {
            assert_eq!(p.len(), 1, "{v}");
            assert!(p["legs"].is_i64() || p["legs"].is_u64(), "{v}");
        }
        other => panic!("pet {other}"),
    }
}

#[tokio::test]
async fn json_schema_and_json_object_outputs_validate() {
    let app = app(state(ServerConfig::default()));
    for seed in 0..4 {
        let mut rf = schema_format("person", person_schema());
        rf["json_schema"]["strict"] = json!(true);
        let v = chat_ok(&app, json!({"seed": seed, "response_format": rf})).await;
        let text = content(&v, 0);
        let parsed: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        check_person(&parsed);
        assert_eq!(v["choices"][0]["finish_reason"], "stop", "{v}");
        check_usage(&v);
    }
    // A tight budget: still complete (the budget closes the structure), finish "stop".
    let rf = schema_format("p", person_schema());
    let v = chat_ok(&app, json!({"seed": 1, "max_tokens": 60, "response_format": rf})).await;
    check_person(&serde_json::from_str(&content(&v, 0)).unwrap());
    assert!(v["usage"]["completion_tokens"].as_u64().unwrap() <= 60);
    // json_object: any object.
    for seed in 0..3 {
        let v = chat_ok(
            &app,
            json!({"seed": seed, "max_completion_tokens": 100, "response_format": {"type": "json_object"}}),
        )
        .await;
        let parsed: Value = serde_json::from_str(&content(&v, 0)).unwrap();
        assert!(parsed.is_object(), "{parsed}");
    }
    // response_format text is no constraint.
    chat_ok(&app, json!({"max_tokens": 5, "response_format": {"type": "text"}})).await;
}

#[tokio::test]
async fn regex_grammar_and_choice_extensions() {
    let app = app(state(ServerConfig::default()));
    let re = regex::Regex::new(r"^[A-Z][a-z]{2,8}-[0-9]{3}$").unwrap();
    let arith = regex::Regex::new(r"^\([0-9]{1,3}( [+*] [0-9]{1,3})*\)$").unwrap();
    for seed in 0..3 {
        let v = chat_ok(&app, json!({"seed": seed, "regex": "[A-Z][a-z]{2,8}-[0-9]{3}"})).await;
        assert!(re.is_match(&content(&v, 0)), "{v}");
        let v = chat_ok(&app, json!({"seed": seed, "choice": ["yes", "no", "not sure"]})).await;
        assert!(["yes", "no", "not sure"].contains(&content(&v, 0).as_str()), "{v}");
        let g = "root ::= \"(\" num (op num)* \")\"\nnum ::= [0-9]{1,3}\nop ::= \" + \" | \" * \"";
        let v = chat_ok(&app, json!({"seed": seed, "max_tokens": 40, "grammar": g})).await;
        assert!(arith.is_match(&content(&v, 0)), "{v}");
        // vLLM's spellings.
        let v = chat_ok(&app, json!({"seed": seed, "guided_choice": ["up", "down"]})).await;
        assert!(["up", "down"].contains(&content(&v, 0).as_str()), "{v}");
    }
}

fn weather_tool() -> Value {
    json!({"type": "function", "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 16},
                "unit": {"enum": ["c", "f"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 7}
            },
            "required": ["city", "unit"],
            "additionalProperties": false
        }
    }})
}

fn time_tool() -> Value {
    json!({"type": "function", "function": {"name": "get_time", "parameters": {
        "type": "object", "properties": {"zone": {"type": "string", "maxLength": 12}}, "required": ["zone"]
    }}})
}

/// Checks one returned call and returns its name.
fn check_call(call: &Value) -> String {
    assert!(call["id"].as_str().unwrap().starts_with("call_"), "{call}");
    assert_eq!(call["type"], "function");
    let name = call["function"]["name"].as_str().unwrap().to_string();
    let args: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap())
        .unwrap_or_else(|e| panic!("arguments are not JSON ({e}): {call}"));
    let o = args.as_object().unwrap_or_else(|| panic!("{call}"));
    match name.as_str() {
        "get_weather" => {
            assert!(o["city"].as_str().is_some_and(|c| c.chars().count() <= 16), "{call}");
            assert!(["c", "f"].contains(&o["unit"].as_str().unwrap_or("")), "{call}");
            assert!(o.keys().all(|k| ["city", "unit", "days"].contains(&k.as_str())), "{call}");
            if let Some(d) = o.get("days") {
                assert!(d.as_u64().is_some_and(|d| (1..=7).contains(&d)), "{call}");
            }
        }
        "get_time" => assert!(o["zone"].as_str().is_some_and(|z| z.chars().count() <= 12), "{call}"),
        other => panic!("unknown tool {other}"),
    }
    name
}

#[tokio::test]
async fn tool_calls_required_named_auto_and_none() {
    let app = app(state(ServerConfig::default()));
    let tools = json!([weather_tool(), time_tool()]);
    for seed in 0..3 {
        let v = chat_ok(
            &app,
            json!({"seed": seed, "messages": msgs("Weather in Paris?"), "tools": tools, "tool_choice": "required"}),
        )
        .await;
        let c = &v["choices"][0];
        assert_eq!(c["finish_reason"], "tool_calls", "{v}");
        let calls = c["message"]["tool_calls"].as_array().unwrap_or_else(|| panic!("{v}"));
        assert!(!calls.is_empty() && calls.len() <= 8, "{v}");
        for call in calls {
            check_call(call);
        }
        // Named, one call.
        let v = chat_ok(
            &app,
            json!({"seed": seed, "messages": msgs("Time?"), "tools": tools, "parallel_tool_calls": false,
            "tool_choice": {"type": "function", "function": {"name": "get_time"}}}),
        )
        .await;
        let calls = v["choices"][0]["message"]["tool_calls"].as_array().unwrap();
        assert_eq!(calls.len(), 1, "{v}");
        assert_eq!(check_call(&calls[0]), "get_time");
        assert!(v["choices"][0]["message"]["content"].is_null(), "{v}");
        // Auto: text or calls, each call valid.
        let v = chat_ok(&app, json!({"seed": seed, "max_tokens": 40, "tools": tools})).await;
        let m = &v["choices"][0]["message"];
        for call in m["tool_calls"].as_array().into_iter().flatten() {
            check_call(call);
        }
        // None: plain text, never parsed for calls.
        let v = chat_ok(&app, json!({"seed": seed, "max_tokens": 10, "tools": tools, "tool_choice": "none"})).await;
        assert!(v["choices"][0]["message"].get("tool_calls").is_none(), "{v}");
    }
    // A tool without parameters takes none: the arguments are exactly {}.
    let bare = json!([{"type": "function", "function": {"name": "ping"}}]);
    let v = chat_ok(&app, json!({"tools": bare, "tool_choice": "required", "parallel_tool_calls": false})).await;
    let call = &v["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "ping");
    assert_eq!(serde_json::from_str::<Value>(call["function"]["arguments"].as_str().unwrap()).unwrap(), json!({}));
    // The history may hold calls and their results.
    let history = json!([
        {"role": "system", "content": "You help."},
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"unit\": \"c\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "-3 C"},
        {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]}
    ]);
    chat_ok(&app, json!({"messages": history, "tools": tools, "max_tokens": 10})).await;
}

/// The server follows the chat template's tool-call format too: with a Llama 3-shaped
/// template the calls are constrained and read as bare `{"name", "parameters"}` objects (one
/// per reply), with a Mistral-shaped one as `[TOOL_CALLS] [...]`; either way they come out as
/// OpenAI `tool_calls`, blocking and streamed.
#[tokio::test]
async fn tool_calls_follow_the_templates_format() {
    use crate::tool_formats::{LLAMA3_STYLE_TEMPLATE, MISTRAL_STYLE_TEMPLATE};
    use strictly::model::{embedded, ChatTemplate, PromptFormat};
    let tools = json!([{"type": "function", "function": {"name": "move_to", "parameters":
        {"type": "object", "properties": {"x": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["x"]}}}]);
    for (template, most) in [(LLAMA3_STYLE_TEMPLATE, 1), (MISTRAL_STYLE_TEMPLATE, 8)] {
        let mut loaded = LoadedModel::embedded(&LoadOptions::default()).unwrap();
        let tok = tokenizers::Tokenizer::from_bytes(embedded::TOKENIZER).unwrap();
        let config = json!({"bos_token": "<s>", "eos_token": "</s>"});
        loaded.prompt =
            PromptFormat::new(tok, Some(&config), None, Some(ChatTemplate::new(template, "t").unwrap())).unwrap();
        let app = app(AppState::new(loaded, ServerConfig::default()));
        for seed in 0..3 {
            let body = json!({"seed": seed, "max_tokens": 64, "messages": [{"role": "user", "content": "Go"}],
                              "tools": tools, "tool_choice": "required"});
            let v = chat_ok(&app, body.clone()).await;
            let c = &v["choices"][0];
            assert_eq!(c["finish_reason"], "tool_calls", "{v}");
            assert!(c["message"]["content"].is_null(), "{v}");
            let calls = c["message"]["tool_calls"].as_array().unwrap_or_else(|| panic!("{v}"));
            assert!(!calls.is_empty() && calls.len() <= most, "{v}");
            for call in calls {
                assert_eq!(call["function"]["name"], "move_to", "{v}");
                let args: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
                assert!(args["x"].as_u64().is_some_and(|x| x <= 9), "{v}");
            }
            // Streamed: the same calls, in OpenAI's chunks.
            let mut stream = body.clone();
            stream["stream"] = json!(true);
            let (s, bytes) = call_raw(&app, "POST", "/v1/chat/completions", stream.to_string().into_bytes()).await;
            assert_eq!(s, StatusCode::OK);
            let text = String::from_utf8(bytes).unwrap();
            let mut args = vec![String::new(); calls.len()];
            for line in text.lines().filter_map(|l| l.strip_prefix("data: ")).filter(|l| *l != "[DONE]") {
                let chunk: Value = serde_json::from_str(line).unwrap();
                for d in chunk["choices"][0]["delta"]["tool_calls"].as_array().into_iter().flatten() {
                    args[d["index"].as_u64().unwrap() as usize]
                        .push_str(d["function"]["arguments"].as_str().unwrap_or(""));
                }
            }
            let blocking: Vec<&str> = calls.iter().map(|c| c["function"]["arguments"].as_str().unwrap()).collect();
            assert_eq!(args, blocking, "{text}");
        }
    }
}

/// The embedded model has no chat template: the plain one lists the offered tools (names and
/// parameter names), so the prompt is longer with tools than with `tool_choice: none`.
#[tokio::test]
async fn the_plain_template_lists_the_tools() {
    let app = app(state(ServerConfig::default()));
    let tools = json!([weather_tool(), time_tool()]);
    let prompt_tokens = |v: &Value| v["usage"]["prompt_tokens"].as_u64().unwrap();
    let none = chat_ok(&app, json!({"max_tokens": 1, "tools": tools, "tool_choice": "none"})).await;
    let auto = chat_ok(&app, json!({"max_tokens": 1, "tools": tools})).await;
    let listed = "tools: get_weather(city, unit), get_time(zone); to call one, write \
                  <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>\n\n";
    let loaded = LoadedModel::embedded(&LoadOptions::default()).unwrap();
    let extra = loaded.prompt.encode_raw(listed).unwrap().len() as u64;
    assert!(prompt_tokens(&auto) >= prompt_tokens(&none) + extra - 2, "{auto} vs {none}");
}

#[tokio::test]
async fn logprobs_chat_and_completions() {
    let app = app(state(ServerConfig::default()));
    let v = chat_ok(&app, json!({"max_tokens": 12, "seed": 3, "logprobs": true, "top_logprobs": 3})).await;
    let entries = v["choices"][0]["logprobs"]["content"].as_array().unwrap();
    assert_eq!(entries.len() as u64, v["usage"]["completion_tokens"].as_u64().unwrap(), "{v}");
    let mut text = Vec::new();
    for e in entries {
        assert!(e["logprob"].as_f64().unwrap() <= 0.0, "{e}");
        let tops = e["top_logprobs"].as_array().unwrap();
        assert!(!tops.is_empty() && tops.len() <= 3, "{e}");
        let lps: Vec<f64> = tops.iter().map(|t| t["logprob"].as_f64().unwrap()).collect();
        assert!(lps.windows(2).all(|w| w[0] >= w[1]), "{e}");
        text.extend(e["bytes"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap() as u8));
    }
    assert_eq!(String::from_utf8_lossy(&text), content(&v, 0));
    // Without logprobs: null.
    let v = chat_ok(&app, json!({"max_tokens": 3})).await;
    assert!(v["choices"][0]["logprobs"].is_null());
    // Legacy completions logprobs.
    let (s, v) =
        post(&app, "/v1/completions", json!({"prompt": "Once upon a time", "max_tokens": 8, "logprobs": 2, "seed": 1}))
            .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let lp = &v["choices"][0]["logprobs"];
    let n = lp["tokens"].as_array().unwrap().len();
    assert_eq!(n as u64, v["usage"]["completion_tokens"].as_u64().unwrap());
    assert_eq!(lp["token_logprobs"].as_array().unwrap().len(), n);
    assert_eq!(lp["top_logprobs"].as_array().unwrap().len(), n);
    assert_eq!(lp["text_offset"][0], 0);
}

#[tokio::test]
async fn completions_prompts_n_echo_and_constraints() {
    let app = app(state(ServerConfig::default()));
    let (s, v) = post(
        &app,
        "/v1/completions",
        json!({"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 10, "seed": 1}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["object"], "text_completion");
    assert!(v["choices"][0]["text"].is_string());
    check_usage(&v);
    // Two prompts × n = 2: four choices, indexed prompt · n + j.
    let (s, v) =
        post(&app, "/v1/completions", json!({"prompt": ["A cat", "A dog"], "n": 2, "max_tokens": 5, "seed": 4})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let idx: Vec<u64> = v["choices"].as_array().unwrap().iter().map(|c| c["index"].as_u64().unwrap()).collect();
    assert_eq!(idx, [0, 1, 2, 3]);
    // Token ids, echo: the prompt's tokens' text comes first, and they are the prompt.
    let (s, v) = post(&app, "/v1/completions", json!({"prompt": [1, 403, 261], "max_tokens": 5, "echo": true})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let ids = [TokenId(1), TokenId(403), TokenId(261)];
    let echoed = String::from_utf8(strictly::Vocab::embedded().decode(&ids)).unwrap();
    assert!(!echoed.is_empty());
    assert!(v["choices"][0]["text"].as_str().unwrap().starts_with(&echoed), "{echoed:?}: {v}");
    assert_eq!(v["usage"]["prompt_tokens"], 3, "{v}");
    let (s, v2) = post(&app, "/v1/completions", json!({"prompt": "Lily", "max_tokens": 4, "echo": true})).await;
    assert_eq!(s, StatusCode::OK, "{v2}");
    assert!(v2["choices"][0]["text"].as_str().unwrap().starts_with("Lily"), "{v2}");
    // A constraint.
    let (s, v) = post(&app, "/v1/completions", json!({"prompt": "Pick:", "regex": "(red|green) [0-9]{2}"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let re = regex::Regex::new(r"^(red|green) [0-9]{2}$").unwrap();
    assert!(re.is_match(v["choices"][0]["text"].as_str().unwrap()), "{v}");
    let rf = schema_format("p", person_schema());
    let (s, v) = post(&app, "/v1/completions", json!({"prompt": "{", "response_format": rf, "seed": 2})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    check_person(&serde_json::from_str(v["choices"][0]["text"].as_str().unwrap()).unwrap());
}

// ---- oneshot: errors ------------------------------------------------------------------------

#[tokio::test]
async fn bad_requests_are_openai_errors() {
    let app = app(state(ServerConfig::default()));
    let chat = "/v1/chat/completions";
    let m = msgs("hi");
    // Malformed JSON and wrong types.
    let (s, bytes) = call_raw(&app, "POST", chat, b"{\"messages\": [".to_vec()).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["error"]["code"], "invalid_json", "{v}");
    let (s, _) = call_raw(&app, "POST", chat, Vec::new()).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let e = expect_error(&app, chat, json!({"messages": m, "temperature": "hot"}), StatusCode::BAD_REQUEST).await;
    assert!(e["message"].as_str().unwrap().contains("invalid type"), "{e}");
    expect_error(&app, chat, json!({"messages": "hi"}), StatusCode::BAD_REQUEST).await;
    expect_error(&app, chat, json!({"model": "stories260K"}), StatusCode::BAD_REQUEST).await;
    // Unknown model.
    let e = expect_error(&app, chat, json!({"model": "gpt-4o", "messages": m}), StatusCode::NOT_FOUND).await;
    assert_eq!((e["param"].as_str(), e["code"].as_str()), (Some("model"), Some("model_not_found")));
    // Knobs out of range name the knob.
    for (k, bad) in [
        ("temperature", json!(2.5)),
        ("temperature", json!(-1)),
        ("top_p", json!(0)),
        ("top_p", json!(1.5)),
        ("min_p", json!(2)),
        ("frequency_penalty", json!(3)),
        ("presence_penalty", json!(-3)),
        ("repetition_penalty", json!(0)),
        ("n", json!(0)),
        ("n", json!(100)),
        ("max_tokens", json!(0)),
        ("top_logprobs", json!(50)),
    ] {
        let mut body = json!({"messages": m, "logprobs": true});
        body[k] = bad.clone();
        let e = expect_error(&app, chat, body, StatusCode::BAD_REQUEST).await;
        assert_eq!(e["param"].as_str(), Some(k), "{k}={bad}: {e}");
        assert!(e["message"].as_str().unwrap().contains(k), "{e}");
    }
    // Schemas: the message names the keyword and the JSON pointer.
    let bad = |schema: Value| json!({"messages": m, "response_format": schema_format("x", schema)});
    let e = expect_error(
        &app,
        chat,
        bad(json!({"type": "object", "properties": {"a": {"type": "strnig"}}})),
        StatusCode::BAD_REQUEST,
    )
    .await;
    let msg = e["message"].as_str().unwrap();
    assert!(msg.contains("/properties/a") && msg.contains("strnig"), "{e}");
    assert_eq!(e["code"], "invalid_schema");
    let e = expect_error(&app, chat, bad(json!({"type": "string", "pattern": "(?=x)"})), StatusCode::BAD_REQUEST).await;
    assert!(e["message"].as_str().unwrap().contains("pattern"), "{e}");
    expect_error(&app, chat, bad(json!({"$ref": "#/$defs/missing"})), StatusCode::BAD_REQUEST).await;
    expect_error(&app, chat, bad(json!(42)), StatusCode::BAD_REQUEST).await;
    let body = json!({"messages": m, "response_format": schema_format("bad name!", json!({}))});
    let e = expect_error(&app, chat, body, StatusCode::BAD_REQUEST).await;
    assert!(e["param"].as_str().unwrap().contains("name"), "{e}");
    expect_error(&app, chat, json!({"messages": m, "response_format": {"type": "xml"}}), StatusCode::BAD_REQUEST).await;
    // Grammars and regexes say where.
    let e =
        expect_error(&app, chat, json!({"messages": m, "grammar": "root ::= item\n"}), StatusCode::BAD_REQUEST).await;
    assert!(e["message"].as_str().unwrap().contains("1:10"), "{e}");
    assert_eq!((e["param"].as_str(), e["code"].as_str()), (Some("grammar"), Some("invalid_grammar")));
    let e = expect_error(&app, chat, json!({"messages": m, "regex": "a(b"}), StatusCode::BAD_REQUEST).await;
    assert_eq!(e["param"], "regex");
    expect_error(&app, chat, json!({"messages": m, "choice": []}), StatusCode::BAD_REQUEST).await;
    expect_error(&app, chat, json!({"messages": m, "regex": "a", "choice": ["a"]}), StatusCode::BAD_REQUEST).await;
    // A tool parameter schema that does not compile names the tool.
    let params = json!({"type": "object", "properties": {"x": {"type": 5}}});
    let tool = json!([{"type": "function", "function": {"name": "f", "parameters": params}}]);
    let e = expect_error(
        &app,
        chat,
        json!({"messages": m, "tools": tool, "tool_choice": "required"}),
        StatusCode::BAD_REQUEST,
    )
    .await;
    assert!(e["message"].as_str().unwrap().contains("tools[0].function.parameters"), "{e}");
    // Tools misuse.
    let tools = json!([weather_tool()]);
    expect_error(&app, chat, json!({"messages": m, "tool_choice": "required"}), StatusCode::BAD_REQUEST).await;
    expect_error(
        &app,
        chat,
        json!({"messages": m, "tools": tools, "tool_choice": "sometimes"}),
        StatusCode::BAD_REQUEST,
    )
    .await;
    expect_error(
        &app,
        chat,
        json!({"messages": m, "tools": tools, "tool_choice": {"type": "function", "function": {"name": "nope"}}}),
        StatusCode::BAD_REQUEST,
    )
    .await;
    expect_error(
        &app,
        chat,
        json!({"messages": m, "tools": [weather_tool(), weather_tool()]}),
        StatusCode::BAD_REQUEST,
    )
    .await;
    expect_error(&app, chat, json!({"messages": m, "functions": [{"name": "f"}]}), StatusCode::BAD_REQUEST).await;
    // Messages.
    expect_error(&app, chat, json!({"messages": []}), StatusCode::BAD_REQUEST).await;
    expect_error(&app, chat, json!({"messages": [{"role": "wizard", "content": "x"}]}), StatusCode::BAD_REQUEST).await;
    let img = json!([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x"}}]}]);
    expect_error(&app, chat, json!({"messages": img}), StatusCode::BAD_REQUEST).await;
    expect_error(&app, chat, json!({"messages": m, "logit_bias": {"5": 10}}), StatusCode::BAD_REQUEST).await;
    expect_error(&app, chat, json!({"messages": m, "stop": ["a", "b", "c", "d", "e"]}), StatusCode::BAD_REQUEST).await;
    expect_error(
        &app,
        chat,
        json!({"messages": m, "stream_options": {"include_usage": true}}),
        StatusCode::BAD_REQUEST,
    )
    .await;
    // Budgets: a constraint that cannot fit, a prompt past the context.
    let body = json!({"messages": m, "max_tokens": 2, "response_format": schema_format("p", person_schema())});
    let e = expect_error(&app, chat, body, StatusCode::BAD_REQUEST).await;
    assert_eq!(e["param"], "max_tokens", "{e}");
    let e = expect_error(&app, chat, json!({"messages": m, "max_tokens": 600}), StatusCode::BAD_REQUEST).await;
    assert_eq!(e["code"], "context_length_exceeded", "{e}");
    let long = "word ".repeat(2000);
    let e = expect_error(&app, chat, json!({"messages": msgs(&long)}), StatusCode::BAD_REQUEST).await;
    assert_eq!(e["code"], "context_length_exceeded", "{e}");
    // A stop string that would cut a structured output is an error, not a broken success.
    let body = json!({"messages": m, "stop": ["\""], "response_format": schema_format("p", person_schema())});
    let e = expect_error(&app, chat, body, StatusCode::BAD_REQUEST).await;
    assert_eq!(e["param"], "stop", "{e}");
    // Completions.
    let c = "/v1/completions";
    expect_error(&app, c, json!({"prompt": []}), StatusCode::BAD_REQUEST).await;
    expect_error(&app, c, json!({"prompt": [99999]}), StatusCode::BAD_REQUEST).await;
    expect_error(&app, c, json!({"prompt": "x", "suffix": "y"}), StatusCode::BAD_REQUEST).await;
    expect_error(&app, c, json!({"prompt": "x", "best_of": 3}), StatusCode::BAD_REQUEST).await;
    expect_error(&app, c, json!({"prompt": "x", "model": "davinci"}), StatusCode::NOT_FOUND).await;
    // Still healthy after all that.
    chat_ok(&app, json!({"max_tokens": 3})).await;
}

#[tokio::test]
async fn oversized_body_is_413() {
    let config = ServerConfig { max_body_bytes: 4096, ..ServerConfig::default() };
    let app = app(state(config));
    let body = json!({"messages": msgs(&"x".repeat(5000))}).to_string().into_bytes();
    let (s, bytes) = call_raw(&app, "POST", "/v1/chat/completions", body).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["error"]["code"], "request_too_large", "{v}");
    // Just under the limit is read (and then refused for its length in tokens, not bytes).
    let body = json!({"messages": msgs(&"x".repeat(3000))}).to_string().into_bytes();
    let (s, _) = call_raw(&app, "POST", "/v1/chat/completions", body).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_queue_is_429_and_timeouts_are_errors() {
    let config = ServerConfig { max_concurrent: 1, max_queue: 0, ..ServerConfig::default() };
    let (st, _) = slow_state(Duration::from_millis(20), config);
    let app = app(st.clone());
    let busy = {
        let app = app.clone();
        tokio::spawn(async move {
            post(&app, "/v1/chat/completions", json!({"messages": msgs("hi"), "max_tokens": 40})).await
        })
    };
    wait_until("the first request to take the only slot", || st.running() > 0).await;
    let e = expect_error(
        &app,
        "/v1/chat/completions",
        json!({"messages": msgs("hi"), "max_tokens": 5}),
        StatusCode::TOO_MANY_REQUESTS,
    )
    .await;
    assert_eq!(e["type"], "rate_limit_error", "{e}");
    let (s, v) = busy.await.unwrap();
    assert_eq!(s, StatusCode::OK, "{v}");
    // Now free again.
    chat_ok(&app, json!({"max_tokens": 3})).await;

    // A request that runs past its timeout is a 504, and frees its slot.
    let config = ServerConfig { request_timeout: Duration::from_millis(300), ..ServerConfig::default() };
    let (st, calls) = slow_state(Duration::from_millis(50), config);
    let app = app_of(st.clone());
    let e = expect_error(
        &app,
        "/v1/chat/completions",
        json!({"messages": msgs("hi"), "max_tokens": 100}),
        StatusCode::GATEWAY_TIMEOUT,
    )
    .await;
    assert_eq!(e["code"], "timeout", "{e}");
    wait_until("the timed-out generation to free its slot", || st.running() == 0).await;
    // It stopped at the timeout, well before its 100 tokens (a pass takes 50 ms, the limit is 300 ms).
    let passes = calls.load(Ordering::SeqCst);
    assert!(passes < 100, "{passes} forward passes: the timed-out generation ran to max_tokens");
    let (_, text) = call_raw(&app, "GET", "/metrics", Vec::new()).await;
    let text = String::from_utf8(text).unwrap();
    assert_eq!(metric_value(&text, "strictly_request_errors_total"), 1.0, "the 504 is counted as an error");
    assert_eq!(metric_value(&text, "strictly_generations_running"), 0.0);
}

fn app_of(st: AppState) -> Router {
    app(st)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_oneshot_requests_all_succeed() {
    let app = app(state(ServerConfig { max_concurrent: 3, ..ServerConfig::default() }));
    let mut tasks = Vec::new();
    for i in 0..12u64 {
        let app = app.clone();
        tasks.push(tokio::spawn(async move {
            let rf = schema_format("p", person_schema());
            chat_ok(&app, json!({"seed": i, "max_tokens": 200, "response_format": rf})).await
        }));
    }
    for t in tasks {
        let v = t.await.unwrap();
        check_person(&serde_json::from_str(&content(&v, 0)).unwrap());
    }
}

// ---- a real server on 127.0.0.1 -------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_chat_matches_non_streaming() {
    let addr = serve(state(ServerConfig::default())).await;
    for (seed, extra) in [
        (1u64, json!({})),
        (2, json!({"response_format": {"type": "json_object"}, "max_tokens": 80})),
        (3, json!({"temperature": 0.7, "top_k": 40, "top_p": 0.9})),
    ] {
        let mut body =
            json!({"model": "stories260K", "messages": msgs("Tell me a story."), "seed": seed, "max_tokens": 50});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let (s, whole) = http_json(addr, "POST", "/v1/chat/completions", body.clone()).await;
        assert_eq!(s, 200, "{whole}");
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
        let chunks = sse(addr, "/v1/chat/completions", body).await;
        // The sequence: role chunk, content deltas, one finish chunk, the usage chunk.
        let first = &chunks[0];
        assert_eq!(first["object"], "chat.completion.chunk");
        assert_eq!(first["choices"][0]["delta"]["role"], "assistant", "{first}");
        let id = first["id"].as_str().unwrap();
        let (last, body_chunks) = chunks.split_last().unwrap();
        assert_eq!(last["choices"], json!([]), "{last}");
        assert_eq!(last["usage"], whole["usage"], "{last}");
        let mut text = String::new();
        let mut finishes = Vec::new();
        for c in body_chunks {
            assert_eq!(c["id"], id);
            assert!(c["usage"].is_null(), "{c}");
            let ch = &c["choices"][0];
            if let Some(t) = ch["delta"]["content"].as_str() {
                text.push_str(t);
            }
            if let Some(f) = ch["finish_reason"].as_str() {
                finishes.push(f.to_string());
                assert_eq!(ch["delta"], json!({}), "{c}");
            }
        }
        assert_eq!(finishes, [whole["choices"][0]["finish_reason"].as_str().unwrap()]);
        assert_eq!(body_chunks.last().unwrap()["choices"][0]["finish_reason"], whole["choices"][0]["finish_reason"]);
        assert_eq!(text, content(&whole, 0), "seed {seed}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_tool_calls_and_completions() {
    let addr = serve(state(ServerConfig::default())).await;
    let tools = json!([weather_tool(), time_tool()]);
    let body = json!({"messages": msgs("Weather?"), "seed": 5, "tools": tools, "tool_choice": "required"});
    let (_, whole) = http_json(addr, "POST", "/v1/chat/completions", body.clone()).await;
    let want = whole["choices"][0]["message"]["tool_calls"].as_array().unwrap().clone();
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let chunks = sse(addr, "/v1/chat/completions", streamed).await;
    let mut calls: Vec<(String, String, String)> = Vec::new(); // id, name, arguments
    let mut finish = None;
    for c in &chunks {
        let ch = &c["choices"][0];
        for d in ch["delta"]["tool_calls"].as_array().into_iter().flatten() {
            let i = d["index"].as_u64().unwrap() as usize;
            if let Some(id) = d["id"].as_str() {
                assert_eq!(i, calls.len(), "{d}");
                assert_eq!(d["type"], "function");
                calls.push((id.to_string(), d["function"]["name"].as_str().unwrap().to_string(), String::new()));
            }
            calls[i].2.push_str(d["function"]["arguments"].as_str().unwrap_or(""));
        }
        if let Some(f) = ch["finish_reason"].as_str() {
            finish = Some(f.to_string());
        }
    }
    assert_eq!(finish.as_deref(), Some("tool_calls"));
    assert_eq!(calls.len(), want.len(), "{chunks:?}");
    for ((id, name, args), w) in calls.iter().zip(&want) {
        assert!(id.starts_with("call_"));
        assert_eq!(name, w["function"]["name"].as_str().unwrap());
        assert_eq!(args, w["function"]["arguments"].as_str().unwrap());
        check_call(&json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}));
    }
    // Completions stream: text chunks, a finish chunk, [DONE].
    let body = json!({"prompt": "Once upon a time", "max_tokens": 30, "seed": 9});
    let (_, whole) = http_json(addr, "POST", "/v1/completions", body.clone()).await;
    let mut streamed = body;
    streamed["stream"] = json!(true);
    let chunks = sse(addr, "/v1/completions", streamed).await;
    let text: String = chunks.iter().map(|c| c["choices"][0]["text"].as_str().unwrap_or("")).collect();
    assert_eq!(text, whole["choices"][0]["text"].as_str().unwrap());
    assert!(chunks.iter().all(|c| c["object"] == "text_completion"));
    assert_eq!(chunks.last().unwrap()["choices"][0]["finish_reason"], whole["choices"][0]["finish_reason"]);
    // An error before the stream starts is a plain JSON error, not a stream.
    let (s, v) =
        http_json(addr, "POST", "/v1/chat/completions", json!({"messages": msgs("x"), "stream": true, "regex": "("}))
            .await;
    assert_eq!(s, 400, "{v}");
    assert!(v["error"]["message"].is_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_disconnect_stops_the_generation_and_frees_the_slot() {
    let config = ServerConfig { max_concurrent: 1, max_queue: 0, ..ServerConfig::default() };
    let (st, calls) = slow_state(Duration::from_millis(25), config);
    let addr = serve(st.clone()).await;
    // 400 tokens at 25 ms each would take 10 s.
    let body = json!({"messages": msgs("Tell me a long story."), "max_tokens": 400, "stream": true, "seed": 1,
        "regex": "[a-z ]{400}"});
    let mut c = Conn::open(addr, "POST", "/v1/chat/completions", &body.to_string()).await;
    assert_eq!(c.status, 200);
    for _ in 0..3 {
        c.next_event().await.expect("an event");
    }
    assert_eq!(st.running(), 1);
    drop(c);
    wait_until("the generation to free its slot after its client left", || st.running() == 0).await;
    let stopped_at = calls.load(Ordering::SeqCst);
    assert!(stopped_at < 100, "{stopped_at} forward passes: the generation was not stopped early");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(calls.load(Ordering::SeqCst), stopped_at, "forward passes went on after the slot was freed");
    // The only slot is free: a new request succeeds (the queue is 0, so it would be a 429 otherwise).
    let (s, v) =
        http_json(addr, "POST", "/v1/chat/completions", json!({"messages": msgs("hi"), "max_tokens": 3})).await;
    assert_eq!(s, 200, "{v}");
    let (s, h) = http_json(addr, "GET", "/health", Value::Null).await;
    assert_eq!((s, h["running"].as_u64(), h["queued"].as_u64()), (200, Some(0), Some(0)), "{h}");
    // The server saw the disconnect as a cancellation (and the second request as none).
    let (_, text) = Conn::open(addr, "GET", "/metrics", "").await.whole_body().await;
    assert_eq!(metric_value(&text, "strictly_generations_cancelled_total"), 1.0, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_requests_over_tcp_all_succeed() {
    let addr = serve(state(ServerConfig { max_concurrent: 2, ..ServerConfig::default() })).await;
    let mut tasks = Vec::new();
    for i in 0..10u64 {
        tasks.push(tokio::spawn(async move {
            let tools = json!([weather_tool()]);
            let body = if i % 2 == 0 {
                json!({"messages": msgs("Weather?"), "seed": i, "tools": tools, "tool_choice": "required"})
            } else {
                json!({"messages": msgs("Hi"), "seed": i, "stream": true, "max_tokens": 20})
            };
            if i % 2 == 0 {
                let (s, v) = http_json(addr, "POST", "/v1/chat/completions", body).await;
                assert_eq!(s, 200, "{v}");
                for call in v["choices"][0]["message"]["tool_calls"].as_array().unwrap() {
                    check_call(call);
                }
            } else {
                let chunks = sse(addr, "/v1/chat/completions", body).await;
                assert!(chunks.len() >= 2);
            }
        }));
    }
    for t in tasks {
        tokio::time::timeout(crate::common::WATCHDOG, t).await.expect("hung: a request never finished").unwrap();
    }
    // Over TCP, too, an oversized body is a 413 with a JSON body.
    let addr = serve(state(ServerConfig { max_body_bytes: 1000, ..ServerConfig::default() })).await;
    let (s, v) = http_json(addr, "POST", "/v1/chat/completions", json!({"messages": msgs(&"y".repeat(2000))})).await;
    assert_eq!(s, 413, "{v}");
    assert_eq!(v["error"]["code"], "request_too_large");
}

// ---- the official openai client ---------------------------------------------------------------

#[test]
fn openai_python_client_end_to_end() {
    let has_openai = std::process::Command::new("python3")
        .args(["-c", "import openai, pydantic"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_openai {
        eprintln!("!!! SKIPPED: python3 cannot import openai (python3 -m pip install openai)");
        return;
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/openai_e2e.py");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .args(["--bin", env!("CARGO_BIN_EXE_strictly")])
        .output()
        .unwrap();
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the openai client checks failed:\n{report}");
    assert!(report.contains("checks passed"), "{report}");
}
