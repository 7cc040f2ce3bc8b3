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
//!
//! The request becomes a [`ToolChat`] (messages and the tools offered) rendered through the
//! model's chat template, and a scheduler [`Job`]; [`Chat`] is this endpoint's wire format
//! ([`Format`]): each output read by an [`OutputParser`] into content and tool calls (in the
//! [`ToolFormat`] the prompt teaches), whole or delta by delta.

use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;
use serde_json::{json, Value};

use super::api::{ChatRequest, Content};
use super::constraint::Spec;
use super::error::{ApiError, ApiJson};
use super::metrics::Metrics;
use super::reply::{alternatives, answer, finish, token_text, Chunks, Format, Reply};
use super::scheduler::Job;
use super::AppState;
use crate::decode::{GeneratedToken, Output};
use crate::model::reasoning::{PromptReasoning, Splitter};
use crate::model::{ChatMessage, ChatTool, ChatToolCall, ContentTokens, PromptFormat};
use crate::tools::{OutputParser, Piece, ToolChat, ToolFormat, ValueKinds};
use crate::vocab::Vocab;

pub async fn handle(State(st): State<AppState>, body: Result<ApiJson<ChatRequest>, ApiError>) -> Response {
    Metrics::add(&st.inner.metrics.chat_requests, 1);
    let r = match body {
        Ok(ApiJson(req)) => run(&st, req).await,
        Err(e) => Err(e),
    };
    answer(&st, r)
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

/// The chat of a request: its messages (text content, OpenAI roles, tool calls with their
/// arguments parsed as JSON where they parse) and, when `spec` offers tools, the tools.
fn chat(req: &ChatRequest, spec: Option<&Spec>) -> Result<ToolChat, ApiError> {
    if req.messages.is_empty() {
        return Err(ApiError::bad_request("messages must not be empty").param("messages"));
    }
    let mut messages = Vec::with_capacity(req.messages.len() + 1);
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
        // OpenAI's rules: content is required, except an assistant's that makes calls.
        let calls = m.tool_calls.as_deref().unwrap_or(&[]);
        if m.content.is_none() && (role != "assistant" || calls.is_empty()) {
            return Err(ApiError::bad_request(format!(
                "messages[{i}].content is required for a {} message{}",
                m.role,
                if role == "assistant" { " without tool_calls" } else { "" }
            ))
            .param(format!("messages[{i}].content")));
        }
        let mut msg = ChatMessage::new(role, content_text(&m.content, i)?);
        if role == "assistant" {
            for (j, call) in calls.iter().enumerate() {
                let text = call.function.arguments.as_deref().unwrap_or("{}");
                let args: Value = serde_json::from_str(text).map_err(|e| {
                    let p = format!("messages[{i}].tool_calls[{j}].function.arguments");
                    ApiError::bad_request(format!("{p} is not valid JSON: {e}")).param(p)
                })?;
                msg.tool_calls.push(ChatToolCall::function(call.id.clone(), call.function.name.clone(), args));
            }
        }
        if role == "tool" {
            let p = format!("messages[{i}].tool_call_id");
            let Some(id) = &m.tool_call_id else {
                return Err(ApiError::bad_request(format!("{p} is required for a tool message")).param(p));
            };
            let answers = |prev: &ChatMessage| prev.tool_calls.iter().any(|c| c.id.as_deref() == Some(id.as_str()));
            if !messages.iter().any(answers) {
                return Err(ApiError::bad_request(format!(
                    "{p} {id:?} answers no tool call of an earlier assistant message"
                ))
                .param(p));
            }
            msg.tool_call_id = Some(id.clone());
        }
        messages.push(msg);
    }
    let mode = spec.and_then(|s| s.tools.as_ref()).map(|t| t.mode.clone());
    let tools = match mode {
        Some(_) => req
            .tools
            .iter()
            .flatten()
            .filter_map(|t| t.function.as_ref())
            .map(|f| {
                let params = f.parameters.clone().unwrap_or_else(|| json!({"type": "object", "properties": {}}));
                ChatTool::function(f.name.clone(), f.description.clone(), params)
            })
            .collect(),
        None => Vec::new(),
    };
    Ok(ToolChat { messages, tools, mode, vars: req.template_vars()? })
}

/// The prompt's tokens and the tool-call format it teaches ([`ToolChat::render`]).
/// The caller's special-token spellings are text unless the request opts in
/// (`content_control_tokens: true`, for trusted callers).
fn render(p: &PromptFormat, chat: &ToolChat, content: ContentTokens) -> Result<Rendered, ApiError> {
    let r = chat.render_with(p, content).map_err(|e| ApiError::bad_request(e.to_string()).param("messages"))?;
    let reasoning = p.reasoning_after(&r.text);
    let tokens = p.encode_prompt(&r.prompt).map_err(|e| ApiError::from_lib(e, Some("messages")))?;
    Ok(Rendered { tokens, format: r.format, reasoning })
}

/// A request's prompt: its tokens, the tool-call format it teaches, and the reasoning markers
/// of the template with where the prompt leaves them.
struct Rendered {
    tokens: Vec<crate::vocab::TokenId>,
    format: ToolFormat,
    reasoning: Option<PromptReasoning>,
}

async fn run(st: &AppState, req: ChatRequest) -> Result<Response, ApiError> {
    st.check_model(req.common.model.as_deref())?;
    let mut spec = req.spec()?;
    let lp = req.top_logprobs()?;
    let mut plan = req.common.plan(&st.inner.defaults, req.max_completion_tokens, lp, st.draft())?;
    let chat = chat(&req, spec.as_ref())?;
    let max_reasoning = req.max_reasoning_tokens()?;
    let deadline = st.deadline();
    let ticket = st.admit()?;
    let content = if req.content_control_tokens == Some(true) { ContentTokens::Control } else { ContentTokens::Text };
    let Rendered { tokens: prompt, format, reasoning } =
        st.blocking(move |st| render(&st.inner.prompt, &chat, content)).await?;
    // The constraint and the parser follow the format the prompt teaches, after the reasoning.
    if let Some(s) = spec.as_mut() {
        if let Some(t) = s.tools.as_mut() {
            t.format = format;
        }
        s.reasoning = reasoning.clone();
    }
    if let (Some(n), Some(r)) = (max_reasoning, &reasoning) {
        plan.opts.reasoning = r.budget(n);
    }
    let max_tokens = st.budget(prompt.len(), plan.max_tokens)?;
    let structured = spec.as_ref().is_some_and(Spec::structured);
    let tools = spec.as_ref().and_then(|s| s.tools.as_ref()).map(|t| t.format);
    // How each tool's XML parameter values are written (read back by the parsers).
    let kinds = Arc::new(ValueKinds::new(
        spec.as_ref()
            .and_then(|s| s.tools.as_ref())
            .into_iter()
            .flat_map(|t| &t.tools)
            .map(|t| (t.name.as_str(), &t.parameters)),
    ));
    let compiled = st.compile(spec).await?;
    Metrics::add(&st.inner.metrics.prompt_tokens, prompt.len() as u64);
    let prompt_tokens = prompt.len();
    let job = Job { prompts: vec![prompt], max_tokens: vec![max_tokens], n: plan.n, compiled, opts: plan.opts.clone() };
    let started = st.start(job, ticket, deadline).await?;
    let reply = Reply::new(st, "chatcmpl", &plan, plan.n, structured, prompt_tokens);
    let splitters = (0..plan.n).map(|_| reasoning.as_ref().map(PromptReasoning::splitter)).collect();
    let parsers = (0..plan.n).map(|_| OutputParser::new(tools).with_kinds(kinds.clone())).collect();
    let format = Chat { tools, kinds, parsers, reasoning, splitters };
    reply.respond(format, started, &plan).await
}

/// This endpoint's wire format (see the module docs).
struct Chat {
    /// The format of the calls the output may hold (`None`: no tools).
    tools: Option<ToolFormat>,
    /// How the tools' XML parameter values are written.
    kinds: Arc<ValueKinds>,
    /// Per choice, the parser that splits the streamed text into content and tool calls.
    parsers: Vec<OutputParser>,
    /// The template's reasoning markers and where the prompt left them: the text before the
    /// end marker is `reasoning_content`.
    reasoning: Option<PromptReasoning>,
    /// Per choice, what splits its streamed text into reasoning and the rest.
    splitters: Vec<Option<Splitter>>,
}

impl Chat {
    fn delta(chunks: &mut Chunks, index: usize, delta: Value, finish_reason: Value, logprobs: Value) {
        chunks.chunk(json!([{"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish_reason}]));
    }

    /// The logprobs not sent yet for choice `index`, as a chunk's `logprobs`.
    fn take_logprobs(chunks: &mut Chunks, index: usize) -> Value {
        match chunks.take_logprobs(index) {
            Some((lps, k)) => {
                json!({"content": chat_logprobs(chunks.reply().st.inner.env.vocab(), &lps, k), "refusal": null})
            }
            None => Value::Null,
        }
    }

    /// A delta chunk of reasoning text, if there is any.
    fn reasoning(chunks: &mut Chunks, index: usize, text: String) {
        if !text.is_empty() {
            let lp = Chat::take_logprobs(chunks, index);
            Chat::delta(chunks, index, json!({"reasoning_content": text}), Value::Null, lp);
        }
    }

    /// One delta chunk per piece: content, a call's start, or more of its arguments.
    fn pieces(chunks: &mut Chunks, index: usize, pieces: Vec<Piece>) {
        for p in pieces {
            let delta = match p {
                Piece::Reasoning(s) => json!({"reasoning_content": s}),
                Piece::Content(s) => json!({"content": s}),
                Piece::ToolStart { index: i, id, name } => json!({"tool_calls": [{
                    "index": i, "id": id, "type": "function", "function": {"name": name, "arguments": ""}
                }]}),
                Piece::ToolArgs { index: i, text } => {
                    json!({"tool_calls": [{"index": i, "function": {"arguments": text}}]})
                }
            };
            let lp = Chat::take_logprobs(chunks, index);
            Chat::delta(chunks, index, delta, Value::Null, lp);
        }
    }
}

impl Format for Chat {
    const OBJECT: &'static str = "chat.completion";
    const CHUNK_OBJECT: &'static str = "chat.completion.chunk";

    fn choice(&mut self, reply: &Reply, index: usize, output: &Output) -> Result<Value, ApiError> {
        let text = output.text();
        let (reasoning, text) = match &self.reasoning {
            Some(r) => r.split(&text),
            None => (None, text.to_string()),
        };
        let mut parser = OutputParser::new(self.tools).with_kinds(self.kinds.clone());
        parser.feed(&text);
        parser.finish().map_err(|e| ApiError::internal(format!("cannot read the reply's tool calls: {e}")))?;
        let calls: Vec<Value> = parser
            .calls()
            .iter()
            .map(|c| {
                let function = json!({"name": c.name, "arguments": c.arguments});
                json!({"id": c.id, "type": "function", "function": function})
            })
            .collect();
        let (reason, stop_reason) = finish(output, reply.structured, !calls.is_empty());
        let content = parser.content();
        let content = if calls.is_empty() || !content.trim().is_empty() { json!(content) } else { Value::Null };
        let mut message = json!({"role": "assistant", "content": content, "refusal": null});
        if let Some(r) = reasoning {
            message["reasoning_content"] = json!(r);
        }
        if !calls.is_empty() {
            message["tool_calls"] = json!(calls);
        }
        let logprobs = match reply.logprobs {
            Some(k) => {
                let content = chat_logprobs(reply.st.inner.env.vocab(), &output.logprobs, k);
                json!({"content": content, "refusal": null})
            }
            None => Value::Null,
        };
        Ok(json!({
            "index": index,
            "message": message,
            "logprobs": logprobs,
            "finish_reason": reason,
            "stop_reason": stop_reason,
        }))
    }

    fn begin(&mut self, chunks: &mut Chunks, index: usize) {
        let delta = json!({"role": "assistant", "content": "", "refusal": null});
        Chat::delta(chunks, index, delta, Value::Null, Value::Null);
    }

    fn text(&mut self, chunks: &mut Chunks, index: usize, text: String) {
        let text = match &mut self.splitters[index] {
            Some(s) => {
                let (reasoning, content) = s.feed(&text);
                Chat::reasoning(chunks, index, reasoning);
                content
            }
            None => text,
        };
        let pieces = self.parsers[index].feed(&text);
        Chat::pieces(chunks, index, pieces);
    }

    fn done(&mut self, chunks: &mut Chunks, index: usize, output: &Output) -> Result<(), ApiError> {
        if let Some(s) = &mut self.splitters[index] {
            let (reasoning, content) = s.finish();
            Chat::reasoning(chunks, index, reasoning);
            let pieces = self.parsers[index].feed(&content);
            Chat::pieces(chunks, index, pieces);
        }
        let parser = &mut self.parsers[index];
        let rest =
            parser.finish().map_err(|e| ApiError::internal(format!("cannot read the reply's tool calls: {e}")))?;
        let calls = !parser.calls().is_empty();
        Chat::pieces(chunks, index, rest);
        let (reason, _) = finish(output, chunks.reply().structured, calls);
        let lp = Chat::take_logprobs(chunks, index);
        Chat::delta(chunks, index, json!({}), json!(reason), lp);
        Ok(())
    }
}

/// Chat-style logprobs entries (`{"token", "logprob", "bytes", "top_logprobs"}`).
fn chat_logprobs(vocab: &Vocab, tokens: &[GeneratedToken], k: usize) -> Vec<Value> {
    tokens
        .iter()
        .map(|g| {
            let (t, b) = token_text(vocab, g.token);
            let tops: Vec<Value> = alternatives(vocab, g, k)
                .into_iter()
                .map(|(t, b, lp)| json!({"token": t, "logprob": lp, "bytes": b}))
                .collect();
            json!({"token": t, "logprob": g.logprob, "bytes": b, "top_logprobs": tops})
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::plainer;

    fn request(v: Value) -> ChatRequest {
        serde_json::from_value(v).unwrap()
    }

    fn template(name: &str) -> Option<PromptFormat> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/tokenizers").join(name);
        if !dir.join("tokenizer_config.json").is_file() {
            eprintln!("!!! SKIPPED: {} not found", dir.display());
            return None;
        }
        Some(PromptFormat::from_dir(&dir).unwrap())
    }

    /// A tool, a system turn, a question, `calls` calls to it and their results.
    fn tool_request(calls: &[&str], tool_choice: &str) -> ChatRequest {
        let mut msgs = vec![
            json!({"role": "system", "content": "You help."}),
            json!({"role": "user", "content": "Weather in Oslo?"}),
        ];
        let call = |i: usize, city: &str| {
            json!({"id": format!("call_{i}"), "type": "function",
                   "function": {"name": "get_weather", "arguments": format!("{{\"city\": \"{city}\"}}")}})
        };
        let list: Vec<Value> = calls.iter().enumerate().map(|(i, c)| call(i + 1, c)).collect();
        msgs.push(json!({"role": "assistant", "content": null, "tool_calls": list}));
        for (i, c) in calls.iter().enumerate() {
            let temp = if *c == "Oslo" { "-3 C" } else { "2 C" };
            msgs.push(json!({"role": "tool", "tool_call_id": format!("call_{}", i + 1), "content": temp}));
        }
        request(json!({
            "messages": msgs,
            "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
            "tool_choice": tool_choice
        }))
    }

    fn rendered(p: &PromptFormat, req: &ChatRequest) -> String {
        let spec = req.spec().unwrap();
        chat(req, spec.as_ref()).unwrap().render(p).unwrap().text
    }

    /// Templates that take tools get them natively: the prompt equals what transformers'
    /// `apply_chat_template` renders (computed with Python's jinja2 in transformers' environment)
    /// for the same messages, tools and `tool_choice` note.
    #[test]
    fn tools_and_calls_go_into_templates_that_take_them() {
        let cases = [
            ("qwen2.5", "<|im_start|>system\nYou help.\n\nYou must call at least one function.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nWeather in Oslo?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n-3 C\n</tool_response><|im_end|>\n<|im_start|>assistant\n"),
            ("llama-3.2", "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nYou help.\n\nYou must call at least one function.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\",\n        \"description\": \"Weather\",\n        \"parameters\": {\n            \"type\": \"object\",\n            \"properties\": {\n                \"city\": {\n                    \"type\": \"string\"\n                }\n            },\n            \"required\": [\n                \"city\"\n            ]\n        }\n    }\n}\n\nWeather in Oslo?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n\"-3 C\"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"),
        ];
        for (name, expected) in cases {
            let Some(p) = template(name) else { return };
            assert!(p.chat_takes_tools(), "{name}");
            // (Computed on a day when transformers' `strftime_now` said 26 Jul 2024.)
            let expected = expected.replace("26 Jul 2024", &crate::model::chat::today("%d %b %Y"));
            assert_eq!(rendered(&p, &tool_request(&["Oslo"], "required")), expected, "{name}");
        }
    }

    /// A template that does not take tools (TinyLlama's) gets them written into the text: the
    /// tools in the system turn, the calls in the assistant's text, the results as one user
    /// turn. Llama 3.2's, which takes one call per turn, gets a turn per call natively.
    #[test]
    fn tools_are_written_into_the_text_for_other_templates() {
        let Some(p) = template("tinyllama-1.1b-chat") else { return };
        assert!(!p.chat_takes_tools());
        let text = rendered(&p, &tool_request(&["Oslo", "Bergen"], "required"));
        for part in [
            "You help.\n\n# Tools",
            "<tools>\n{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather\",\"parameters\":{\"type\":\"object\"",
            "You must call at least one function.",
            "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}\n</tool_call>\n<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Bergen\"}}\n</tool_call>",
            "<tool_response>\n-3 C\n</tool_response>\n<tool_response>\n2 C\n</tool_response>",
        ] {
            assert!(text.contains(part), "{part:?} not in {text:?}");
        }
        let Some(p) = template("llama-3.2") else { return };
        let text = rendered(&p, &tool_request(&["Oslo", "Bergen"], "required"));
        let turn = |city: &str| {
            format!("<|start_header_id|>assistant<|end_header_id|>\n\n{{\"name\": \"get_weather\", \"parameters\": {{\"city\": \"{city}\"}}}}<|eot_id|>")
        };
        let expected = format!(
            "{}{}<|start_header_id|>ipython<|end_header_id|>\n\n\"-3 C\"<|eot_id|>",
            turn("Oslo"),
            turn("Bergen")
        );
        assert!(text.contains(&expected), "{text}");
        assert!(!text.contains("<tool_call>"), "{text}");
        // The plain fallback keeps every message's text.
        let req = tool_request(&["Oslo"], "auto");
        let plain = plainer(&chat(&req, req.spec().unwrap().as_ref()).unwrap().inlined());
        assert!(plain.iter().all(|m| m.role == "user" || m.role == "assistant"));
        assert!(plain[0].content.starts_with("You help.\n\n# Tools"), "{plain:?}");
        assert!(plain.iter().any(|m| m.content.ends_with("<tool_response>\n-3 C\n</tool_response>")), "{plain:?}");
    }

    /// `tool_choice: none` offers no tools; the history's calls and results still render.
    #[test]
    fn no_tools_with_tool_choice_none() {
        let Some(p) = template("qwen2.5") else { return };
        let text = rendered(&p, &tool_request(&["Oslo"], "none"));
        assert!(!text.contains("<tools>") && !text.contains("You must call"), "{text}");
        assert!(
            text.contains("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}"),
            "{text}"
        );
        assert!(text.contains("<tool_response>\n-3 C\n</tool_response>"), "{text}");
    }
}
