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
//!
//! Files: `routes` and `tools` (oneshot, what works), `errors` (oneshot, what must fail),
//! `live` and `tcp` (a real server and its small client), `batch`, `openai`; the set-up and
//! the helpers they share are here.

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
mod errors;
mod json_options;
mod lark;
mod live;
mod openai;
mod reasoning;
mod routes;
pub mod tcp;
mod tools;
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

// ---- shared by the tiers below -----------------------------------------------------------

/// The value of an unlabelled metric in Prometheus text.
fn metric_value(text: &str, name: &str) -> f64 {
    let line = text.lines().find(|l| l.split(' ').next() == Some(name)).unwrap_or_else(|| panic!("no {name}: {text}"));
    line[name.len()..].trim().parse().unwrap()
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
