//! `POST /v1/completions`: the legacy text completion API. A prompt is text (BOS + text, the
//! model's rule), a list of texts, token ids, or lists of token ids; each gets `n` choices
//! (choice index = prompt index · n + j). Constraints as for chats (`response_format`,
//! `regex`, `grammar`, `choice`; no tools). `echo` puts the prompt's text in front.
//! Streaming sends `text_completion` chunks, then `data: [DONE]`.

use std::convert::Infallible;

use axum::extract::State;
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::api::CompletionRequest;
use super::engine::{Job, Msg};
use super::error::{ApiError, ApiJson};
use super::metrics::Metrics;
use super::{alternatives, count_error, finish, now_secs, response_id, token_text, AppState};
use crate::decode::{Event, GeneratedToken};
use crate::vocab::Vocab;

pub async fn handle(State(st): State<AppState>, body: Result<ApiJson<CompletionRequest>, ApiError>) -> Response {
    Metrics::add(&st.inner.metrics.completion_requests, 1);
    let r = match body {
        Ok(ApiJson(req)) => run(&st, req).await,
        Err(e) => Err(e),
    };
    match count_error(&st, r) {
        Ok(resp) => resp,
        Err(e) => e.into_response(),
    }
}

async fn run(st: &AppState, req: CompletionRequest) -> Result<Response, ApiError> {
    st.check_model(req.common.model.as_deref())?;
    if req.suffix.as_deref().is_some_and(|s| !s.is_empty()) {
        return Err(ApiError::bad_request("suffix is not supported").param("suffix"));
    }
    let spec = req.spec()?;
    let lp = req.top_logprobs()?;
    let plan = req.common.plan(&st.inner.defaults, None, lp)?;
    if let Some(b) = req.best_of {
        if b != plan.n as i64 {
            return Err(ApiError::bad_request("best_of is not supported (other than best_of = n)").param("best_of"));
        }
    }
    let echo = req.echo.unwrap_or(false);
    if echo && plan.logprobs {
        return Err(ApiError::bad_request("echo with logprobs is not supported (no prompt logprobs)").param("echo"));
    }
    let deadline = st.deadline();
    let ticket = st.admit()?;
    let prompts = st
        .blocking(move |st| {
            let width = st.inner.vocab.len();
            let p = &st.inner.prompt;
            req.prompts(|t| p.encode(t).map_err(|e| ApiError::from_lib(e, Some("prompt"))), width)
        })
        .await?;
    let mut budgets = Vec::with_capacity(prompts.len());
    for (_, ids) in &prompts {
        budgets.push(st.budget(ids.len(), plan.max_tokens)?);
    }
    let structured = spec.is_some();
    let compiled = st.compile(spec).await?;
    let prompt_tokens: usize = prompts.iter().map(|p| p.1.len()).sum();
    Metrics::add(&st.inner.metrics.prompt_tokens, prompt_tokens as u64);
    let vocab = &st.inner.vocab;
    // The echoed prompt: its text as given, or its tokens' text.
    let echoes: Vec<String> = prompts
        .iter()
        .map(|(text, ids)| {
            if !echo {
                String::new()
            } else if text.is_empty() {
                String::from_utf8_lossy(&vocab.decode(ids)).into_owned()
            } else {
                text.clone()
            }
        })
        .collect();
    let total = prompts.len() * plan.n;
    let job = Job {
        prompts: prompts.into_iter().map(|p| p.1).collect(),
        max_tokens: budgets,
        n: plan.n,
        compiled,
        opts: plan.opts.clone(),
    };
    let started = st.start(job, ticket, deadline).await?;
    let reply = Reply {
        st: st.clone(),
        id: response_id("cmpl"),
        created: now_secs(),
        n: plan.n,
        total,
        structured,
        logprobs: plan.logprobs.then_some(plan.opts.sampling.top_logprobs),
        echoes,
        prompt_tokens,
    };
    if plan.stream {
        Ok(reply.stream(started.rx, started.first, plan.include_usage).into_response())
    } else {
        reply.collect(started.rx).await.map(|v| Json(v).into_response())
    }
}

struct Reply {
    st: AppState,
    id: String,
    created: u64,
    n: usize,
    total: usize,
    structured: bool,
    logprobs: Option<usize>,
    echoes: Vec<String>,
    prompt_tokens: usize,
}

/// The legacy logprobs object for tokens whose text starts at `offset` of the choice's text.
fn legacy_logprobs(vocab: &Vocab, tokens: &[GeneratedToken], k: usize, mut offset: usize) -> Value {
    let mut texts = Vec::new();
    let mut lps = Vec::new();
    let mut tops = Vec::new();
    let mut offsets = Vec::new();
    for g in tokens {
        let (t, _) = token_text(vocab, g.token);
        offsets.push(offset);
        offset += t.len();
        texts.push(t);
        lps.push(g.logprob);
        let mut m = serde_json::Map::new();
        for (t, _, lp) in alternatives(vocab, g, k) {
            m.entry(t).or_insert(json!(lp));
        }
        tops.push(Value::Object(m));
    }
    json!({"tokens": texts, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offsets})
}

fn usage(prompt: usize, completion: usize) -> Value {
    json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion})
}

impl Reply {
    fn echo(&self, index: usize) -> &str {
        &self.echoes[index / self.n]
    }

    async fn collect(self, mut rx: mpsc::Receiver<Msg>) -> Result<Value, ApiError> {
        let mut choices = Vec::with_capacity(self.total);
        let mut completion = 0;
        while choices.len() < self.total {
            match rx.recv().await {
                Some(Msg::Done { index, output }) => {
                    let (reason, stop_reason) = finish(&output, self.structured, false);
                    let echo = self.echo(index);
                    let logprobs = match self.logprobs {
                        Some(k) => legacy_logprobs(&self.st.inner.vocab, &output.logprobs, k, echo.len()),
                        None => Value::Null,
                    };
                    completion += output.tokens.len();
                    choices.push(json!({
                        "index": index,
                        "text": format!("{echo}{}", output.text()),
                        "logprobs": logprobs,
                        "finish_reason": reason,
                        "stop_reason": stop_reason,
                    }));
                }
                Some(Msg::Error(e)) => return Err(e),
                Some(_) => {}
                None => return Err(ApiError::internal("the generation ended early")),
            }
        }
        // Choices may finish in any order (they run at once when the model batches).
        choices.sort_by_key(|c| c["index"].as_u64());
        Ok(json!({
            "id": self.id,
            "object": "text_completion",
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
        let mut s = Stream {
            lps: vec![Vec::new(); self.total],
            offsets: vec![0; self.total],
            reply: self,
            core: super::engine::StreamCore::new(rx, include_usage),
        };
        s.begin(first);
        super::engine::sse(s)
    }
}

struct Stream {
    reply: Reply,
    lps: Vec<Vec<GeneratedToken>>,
    /// Bytes of text sent so far per choice (for `text_offset`).
    offsets: Vec<usize>,
    core: super::engine::StreamCore,
}

impl super::engine::Pump for Stream {
    fn core(&mut self) -> &mut super::engine::StreamCore {
        &mut self.core
    }

    fn on_message(&mut self, msg: Option<Msg>) {
        self.handle(msg);
    }
}

impl Stream {
    fn chunk(&mut self, index: usize, text: String, finish_reason: Value) {
        let r = &self.reply;
        let logprobs = match r.logprobs {
            Some(k) if !self.lps[index].is_empty() => {
                let lps = std::mem::take(&mut self.lps[index]);
                legacy_logprobs(&r.st.inner.vocab, &lps, k, self.offsets[index])
            }
            _ => Value::Null,
        };
        self.offsets[index] += text.len();
        let c = json!({
            "id": r.id,
            "object": "text_completion",
            "created": r.created,
            "model": r.st.model_name(),
            "system_fingerprint": null,
            "choices": [{"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish_reason}],
        });
        self.core.chunk(c);
    }

    fn begin(&mut self, index: usize) {
        let echo = self.reply.echo(index).to_string();
        if !echo.is_empty() {
            self.chunk(index, echo, Value::Null);
        }
    }

    fn handle(&mut self, msg: Option<Msg>) {
        match msg {
            Some(Msg::Begin { index }) => self.begin(index),
            Some(Msg::Event { index, event: Event::Token(g) }) => {
                if self.reply.logprobs.is_some() {
                    self.lps[index].push(g);
                }
            }
            Some(Msg::Event { index, event: Event::Text(t) }) => self.chunk(index, t, Value::Null),
            Some(Msg::Event { .. }) => {}
            Some(Msg::Done { index, output }) => {
                let (reason, _) = finish(&output, self.reply.structured, false);
                self.chunk(index, String::new(), json!(reason));
                let r = &self.reply;
                self.core.choice_done(output.tokens.len(), r.total, |completion| {
                    json!({
                        "id": r.id, "object": "text_completion", "created": r.created,
                        "model": r.st.model_name(), "system_fingerprint": null, "choices": [],
                        "usage": usage(r.prompt_tokens, completion),
                    })
                });
            }
            Some(Msg::Error(e)) => self.core.fail(e),
            None => self.core.fail(ApiError::internal("the generation ended early")),
        }
    }
}
