//! `POST /v1/chat/completions`: messages → prompt, constraint → compiled, generate, and the
//! reply as one JSON body or as OpenAI's chunk stream:
//!
//! ```text
//! data: {"object":"chat.completion.chunk", "choices":[{"index":0,"delta":{"role":"assistant","content":""},...}]}
//! data: {... "delta":{"content":"Hel"} ...}                                   content deltas
//! data: {... "delta":{"tool_calls":[{"index":0,"id":"call_..","type":"function",
//!                                    "function":{"name":"f","arguments":""}}]} ...}
//! data: {... "delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\""}}]} ...}
//! data: {... "delta":{}, "finish_reason":"stop"|"length"|"tool_calls"}
//! data: {... "choices":[], "usage":{...}}                                     with include_usage
//! data: [DONE]
//! ```

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::State;
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::api::{ChatRequest, Content, ToolIn};
use super::constraint::{Spec, ToolMode, TOOL_CALL_CLOSE, TOOL_CALL_OPEN};
use super::engine::{Job, Msg};
use super::error::{ApiError, ApiJson};
use super::metrics::Metrics;
use super::toolparse::{OutputParser, Piece};
use super::{chat_logprobs, count_error, finish, now_secs, response_id, AppState};
use crate::decode::{Event, GeneratedToken};
use crate::model::ChatMessage;

pub async fn handle(State(st): State<AppState>, body: Result<ApiJson<ChatRequest>, ApiError>) -> Response {
    Metrics::add(&st.inner.metrics.chat_requests, 1);
    let r = match body {
        Ok(ApiJson(req)) => run(&st, req).await,
        Err(e) => Err(e),
    };
    match count_error(&st, r) {
        Ok(resp) => resp,
        Err(e) => e.into_response(),
    }
}

/// The Hermes-style description of the tools (what Qwen 2.5's template writes).
fn tools_block(tools: &[ToolIn], mode: &ToolMode) -> String {
    let mut s = String::from(
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n\
         You are provided with function signatures within <tools></tools> XML tags:\n<tools>",
    );
    for t in tools {
        let f = &t.function;
        let mut def = json!({"name": f.name});
        if let Some(d) = &f.description {
            def["description"] = json!(d);
        }
        def["parameters"] = f.parameters.clone().unwrap_or_else(|| json!({"type": "object", "properties": {}}));
        s.push('\n');
        s.push_str(&json!({"type": "function", "function": def}).to_string());
    }
    s.push_str(
        "\n</tools>\n\nFor each function call, return a json object with function name and arguments \
         within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \
         \"arguments\": <args-json-object>}\n</tool_call>",
    );
    match mode {
        ToolMode::Required => s.push_str("\n\nYou must call at least one function."),
        ToolMode::Named(n) => s.push_str(&format!("\n\nYou must call the function {n:?}.")),
        ToolMode::Auto => {}
    }
    s
}

fn content_text(c: &Option<Content>, i: usize) -> Result<String, ApiError> {
    match c {
        None => Ok(String::new()),
        Some(Content::Text(s)) => Ok(s.clone()),
        Some(Content::Parts(parts)) => {
            let mut s = String::new();
            for p in parts {
                match (p.kind.as_str(), &p.text) {
                    ("text", Some(t)) => s.push_str(t),
                    (kind, _) => {
                        return Err(ApiError::bad_request(format!(
                            "messages[{i}]: content parts of type {kind:?} are not supported (text only)"
                        ))
                        .param(format!("messages[{i}].content")))
                    }
                }
            }
            Ok(s)
        }
    }
}

/// The messages as the chat template takes them (text content, OpenAI roles).
fn messages(req: &ChatRequest, spec: Option<&Spec>, describe_tools: bool) -> Result<Vec<ChatMessage>, ApiError> {
    if req.messages.is_empty() {
        return Err(ApiError::bad_request("messages must not be empty").param("messages"));
    }
    let mut out = Vec::with_capacity(req.messages.len() + 1);
    for (i, m) in req.messages.iter().enumerate() {
        let role = match m.role.as_str() {
            "system" | "developer" => "system",
            "user" => "user",
            "assistant" => "assistant",
            "tool" => "tool",
            other => {
                return Err(ApiError::bad_request(format!(
                    "messages[{i}].role must be system, developer, user, assistant or tool, got {other:?}"
                ))
                .param(format!("messages[{i}].role")))
            }
        };
        let mut text = content_text(&m.content, i)?;
        if role == "assistant" {
            for call in m.tool_calls.iter().flatten() {
                let args = call.function.arguments.as_deref().unwrap_or("{}");
                let args: Value = serde_json::from_str(args).unwrap_or_else(|_| json!(args));
                let call = json!({"name": call.function.name, "arguments": args});
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&format!("{TOOL_CALL_OPEN}\n{call}\n{TOOL_CALL_CLOSE}"));
            }
        }
        out.push(ChatMessage::new(role, text));
    }
    let tools = spec.and_then(|s| s.tools.as_ref());
    if let (Some(t), true) = (tools, describe_tools) {
        let block = tools_block(req.tools.as_deref().unwrap_or(&[]), &t.mode);
        match out.first_mut() {
            Some(first) if first.role == "system" => first.content = format!("{}\n\n{block}", first.content),
            _ => out.insert(0, ChatMessage::new("system", block)),
        }
    }
    Ok(out)
}

/// The same chat for templates that refuse `tool` and `system` roles: tool results become
/// user turns in `<tool_response>` tags, system text goes in front of the next user turn.
fn plainer(msgs: &[ChatMessage]) -> Vec<ChatMessage> {
    let mut out: Vec<ChatMessage> = Vec::new();
    let mut system = String::new();
    for m in msgs {
        match m.role.as_str() {
            "system" => {
                system.push_str(&m.content);
                system.push_str("\n\n");
            }
            "tool" => out.push(ChatMessage::new("user", format!("<tool_response>\n{}\n</tool_response>", m.content))),
            "user" if !system.is_empty() => {
                out.push(ChatMessage::new("user", format!("{}{}", std::mem::take(&mut system), m.content)))
            }
            _ => out.push(m.clone()),
        }
    }
    if !system.is_empty() {
        out.insert(0, ChatMessage::new("user", system.trim_end().to_string()));
    }
    out
}

fn render(st: &AppState, msgs: &[ChatMessage]) -> Result<Vec<crate::TokenId>, ApiError> {
    let p = &st.inner.prompt;
    let text = match p.render_chat(msgs, true) {
        Ok(t) => t,
        Err(first) => p.render_chat(&plainer(msgs), true).map_err(|_| {
            ApiError::bad_request(format!("the model's chat template refused these messages: {first}"))
                .param("messages")
        })?,
    };
    p.encode_raw(&text).map_err(|e| ApiError::from_lib(e, Some("messages")))
}

async fn run(st: &AppState, req: ChatRequest) -> Result<Response, ApiError> {
    st.check_model(req.common.model.as_deref())?;
    let spec = req.spec()?;
    let lp = req.top_logprobs()?;
    let plan = req.common.plan(&st.inner.defaults, req.max_completion_tokens, lp)?;
    let describe = st.inner.prompt.has_chat_template();
    let msgs = messages(&req, spec.as_ref(), describe)?;
    let deadline = st.deadline();
    let ticket = st.admit()?;
    let prompt = st.blocking(move |st| render(st, &msgs)).await?;
    let max_tokens = st.budget(prompt.len(), plan.max_tokens)?;
    let structured = spec.as_ref().is_some_and(Spec::structured);
    let tools = spec.as_ref().is_some_and(Spec::has_tools);
    let compiled = st.compile(spec).await?;
    Metrics::add(&st.inner.metrics.prompt_tokens, prompt.len() as u64);
    let prompt_tokens = prompt.len();
    let job = Job { prompts: vec![prompt], max_tokens: vec![max_tokens], n: plan.n, compiled, opts: plan.opts.clone() };
    let started = st.start(job, ticket, deadline).await?;
    let reply = Reply {
        st: st.clone(),
        id: response_id("chatcmpl"),
        created: now_secs(),
        n: plan.n,
        structured,
        tools,
        logprobs: plan.logprobs.then_some(plan.opts.sampling.top_logprobs),
        prompt_tokens,
    };
    if plan.stream {
        Ok(reply.stream(started.rx, started.first, plan.include_usage).into_response())
    } else {
        reply.collect(started.rx).await.map(|v| Json(v).into_response())
    }
}

/// What a reply needs to know about its request.
struct Reply {
    st: AppState,
    id: String,
    created: u64,
    n: usize,
    structured: bool,
    tools: bool,
    /// `Some(top_logprobs)` when logprobs are on.
    logprobs: Option<usize>,
    prompt_tokens: usize,
}

fn usage(prompt: usize, completion: usize) -> Value {
    json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion})
}

impl Reply {
    async fn collect(self, mut rx: mpsc::Receiver<Msg>) -> Result<Value, ApiError> {
        let mut choices: Vec<Value> = Vec::with_capacity(self.n);
        let mut completion = 0;
        while choices.len() < self.n {
            match rx.recv().await {
                Some(Msg::Done { index, output }) => {
                    let mut parser = OutputParser::new(self.tools);
                    parser.feed(&output.text());
                    parser
                        .finish()
                        .map_err(|e| ApiError::internal(format!("cannot read the reply's tool calls: {e}")))?;
                    let calls: Vec<Value> = parser
                        .calls()
                        .iter()
                        .map(|c| {
                            let function = json!({"name": c.name, "arguments": c.arguments});
                            json!({"id": c.id, "type": "function", "function": function})
                        })
                        .collect();
                    let (reason, stop_reason) = finish(&output, self.structured, !calls.is_empty());
                    let content = parser.content();
                    let content =
                        if calls.is_empty() || !content.trim().is_empty() { json!(content) } else { Value::Null };
                    let mut message = json!({"role": "assistant", "content": content, "refusal": null});
                    if !calls.is_empty() {
                        message["tool_calls"] = json!(calls);
                    }
                    let logprobs = match self.logprobs {
                        Some(k) => {
                            let content = chat_logprobs(&self.st.inner.vocab, &output.logprobs, k);
                            json!({"content": content, "refusal": null})
                        }
                        None => Value::Null,
                    };
                    completion += output.tokens.len();
                    choices.push(json!({
                        "index": index,
                        "message": message,
                        "logprobs": logprobs,
                        "finish_reason": reason,
                        "stop_reason": stop_reason,
                    }));
                }
                Some(Msg::Error(e)) => return Err(e),
                Some(Msg::Begin { .. } | Msg::Event { .. }) => {}
                None => return Err(ApiError::internal("the generation ended early")),
            }
        }
        Ok(json!({
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.st.model_name(),
            "system_fingerprint": null,
            "choices": choices,
            "usage": usage(self.prompt_tokens, completion),
        }))
    }

    fn stream(
        self,
        rx: mpsc::Receiver<Msg>,
        first: usize,
        include_usage: bool,
    ) -> Sse<impl futures_util::Stream<Item = Result<SseEvent, Infallible>>> {
        let mut s = ChatStream {
            choices: (0..self.n)
                .map(|_| StreamChoice { parser: OutputParser::new(self.tools), lps: Vec::new() })
                .collect(),
            reply: Arc::new(self),
            rx,
            pending: VecDeque::new(),
            done: 0,
            completion: 0,
            include_usage,
            ended: false,
        };
        s.begin(first);
        super::engine::sse(s)
    }
}

struct StreamChoice {
    parser: OutputParser,
    /// Tokens whose logprobs have not been sent yet.
    lps: Vec<GeneratedToken>,
}

struct ChatStream {
    reply: Arc<Reply>,
    rx: mpsc::Receiver<Msg>,
    choices: Vec<StreamChoice>,
    pending: VecDeque<SseEvent>,
    done: usize,
    completion: usize,
    include_usage: bool,
    ended: bool,
}

impl super::engine::Pump for ChatStream {
    fn pop(&mut self) -> Option<SseEvent> {
        self.pending.pop_front()
    }

    fn ended(&self) -> bool {
        self.ended
    }

    fn receiver(&mut self) -> &mut mpsc::Receiver<Msg> {
        &mut self.rx
    }

    fn on_message(&mut self, msg: Option<Msg>) {
        self.handle(msg);
    }
}

impl ChatStream {
    fn chunk(&mut self, choices: Value) {
        let r = &self.reply;
        let mut c = json!({
            "id": r.id,
            "object": "chat.completion.chunk",
            "created": r.created,
            "model": r.st.model_name(),
            "system_fingerprint": null,
            "choices": choices,
        });
        if self.include_usage {
            c["usage"] = Value::Null;
        }
        self.pending.push_back(SseEvent::default().data(c.to_string()));
    }

    fn delta(&mut self, index: usize, delta: Value, finish_reason: Value, logprobs: Value) {
        self.chunk(json!([{"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish_reason}]));
    }

    fn begin(&mut self, index: usize) {
        self.delta(index, json!({"role": "assistant", "content": "", "refusal": null}), Value::Null, Value::Null);
    }

    /// The logprobs not sent yet for choice `index`, as a chunk's `logprobs`.
    fn take_logprobs(&mut self, index: usize) -> Value {
        match self.reply.logprobs {
            Some(k) if !self.choices[index].lps.is_empty() => {
                let lps = std::mem::take(&mut self.choices[index].lps);
                json!({"content": chat_logprobs(&self.reply.st.inner.vocab, &lps, k), "refusal": null})
            }
            _ => Value::Null,
        }
    }

    fn pieces(&mut self, index: usize, pieces: Vec<Piece>) {
        for p in pieces {
            let delta = match p {
                Piece::Content(s) => json!({"content": s}),
                Piece::ToolStart { index: i, id, name } => json!({"tool_calls": [{
                    "index": i, "id": id, "type": "function", "function": {"name": name, "arguments": ""}
                }]}),
                Piece::ToolArgs { index: i, text } => {
                    json!({"tool_calls": [{"index": i, "function": {"arguments": text}}]})
                }
            };
            let lp = self.take_logprobs(index);
            self.delta(index, delta, Value::Null, lp);
        }
    }

    fn fail(&mut self, e: ApiError) {
        self.pending.push_back(SseEvent::default().data(e.body().to_string()));
        self.ended = true;
    }

    fn handle(&mut self, msg: Option<Msg>) {
        match msg {
            Some(Msg::Begin { index }) => self.begin(index),
            Some(Msg::Event { index, event: Event::Token(g) }) => {
                if self.reply.logprobs.is_some() {
                    self.choices[index].lps.push(g);
                }
            }
            Some(Msg::Event { index, event: Event::Text(t) }) => {
                let pieces = self.choices[index].parser.feed(&t);
                self.pieces(index, pieces);
            }
            Some(Msg::Event { event: Event::Finish { .. }, .. }) => {}
            Some(Msg::Done { index, output }) => {
                let rest = match self.choices[index].parser.finish() {
                    Ok(rest) => rest,
                    Err(e) => return self.fail(ApiError::internal(format!("cannot read the reply's tool calls: {e}"))),
                };
                self.pieces(index, rest);
                let calls = !self.choices[index].parser.calls().is_empty();
                let (reason, _) = finish(&output, self.reply.structured, calls);
                let lp = self.take_logprobs(index);
                self.delta(index, json!({}), json!(reason), lp);
                self.completion += output.tokens.len();
                self.done += 1;
                if self.done == self.reply.n {
                    if self.include_usage {
                        let r = &self.reply;
                        let u = json!({
                            "id": r.id, "object": "chat.completion.chunk", "created": r.created,
                            "model": r.st.model_name(), "system_fingerprint": null, "choices": [],
                            "usage": usage(r.prompt_tokens, self.completion),
                        });
                        self.pending.push_back(SseEvent::default().data(u.to_string()));
                    }
                    self.pending.push_back(SseEvent::default().data("[DONE]"));
                    self.ended = true;
                }
            }
            Some(Msg::Error(e)) => self.fail(e),
            None => self.fail(ApiError::internal("the generation ended early")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PromptFormat;

    fn request(v: Value) -> ChatRequest {
        serde_json::from_value(v).unwrap()
    }

    /// With a real chat template (Qwen 2.5's, from ../shared/data when present), the tools
    /// are described in the system turn and a history with calls and results renders.
    #[test]
    fn tools_render_with_a_real_chat_template() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/tokenizers/qwen2.5");
        if !dir.join("tokenizer_config.json").is_file() {
            eprintln!("!!! SKIPPED: {} not found", dir.display());
            return;
        }
        let p = PromptFormat::from_dir(&dir).unwrap();
        assert!(p.has_chat_template());
        let req = request(json!({
            "messages": [
                {"role": "system", "content": "You help."},
                {"role": "user", "content": "Weather in Oslo?"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "-3 C"}
            ],
            "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
            "tool_choice": "required"
        }));
        let spec = req.spec().unwrap();
        let msgs = messages(&req, spec.as_ref(), true).unwrap();
        let text = p.render_chat(&msgs, true).unwrap();
        assert!(text.starts_with("<|im_start|>system\nYou help.\n\n# Tools"), "{text}");
        assert!(text.contains("<tools>\n{\"type\":\"function\",\"function\":{\"name\":\"get_weather\""), "{text}");
        assert!(text.contains("You must call at least one function."), "{text}");
        assert!(
            text.contains("<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}\n</tool_call>"),
            "{text}"
        );
        assert!(text.contains("-3 C"), "{text}");
        assert!(text.ends_with("<|im_start|>assistant\n"), "{text}");
        // The plain fallback keeps every message's text.
        let plain = plainer(&msgs);
        assert!(plain.iter().all(|m| m.role == "user" || m.role == "assistant"));
        assert!(plain[0].content.starts_with("You help."));
        assert!(plain.iter().any(|m| m.content == "<tool_response>\n-3 C\n</tool_response>"));
    }
}
