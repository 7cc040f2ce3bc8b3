//! What both completion endpoints do with a started job: collect its choices into one JSON
//! body, or stream them as server-sent events, in the endpoint's wire format.
//!
//! ```text
//! Started { rx: Msg… } ─┬─ collect: wait for every Done ─▶ {"id", "object", "created", "model",
//!                       │            "system_fingerprint", "choices": [sorted by index], "usage"}
//!                       └─ stream:   Msg ─▶ Format::{begin, text, done} ─▶ chunks {"id", "object",
//!                                    ..., "choices": [one]} ─▶ [usage chunk] ─▶ data: [DONE]
//! ```
//!
//! # Key types
//!
//! - [`Reply`]: what every response of a request carries (id, creation time, the choice count,
//!   whether the output is structured, logprobs, prompt tokens), and [`Reply::respond`].
//! - [`Format`]: one endpoint's wire format: its `object` names, a finished choice in a whole
//!   body, and the chunks of a streamed choice. `chat.rs` and `completions.rs` each have one.
//! - [`Chunks`]: a streamed response in progress: the messages still to come, the SSE events
//!   queued from them, the tokens whose logprobs are not sent yet, and how many choices are done.
//!
//! Also here: the pieces both formats use: [`finish`] (`finish_reason` and `stop_reason`),
//! [`alternatives`] (a token's top logprobs), [`usage`], and [`answer`] (a handler's result as a
//! response, errors counted).
//!
//! # Invariants
//!
//! - The choices of a whole body are sorted by index (they may finish in any order when the
//!   model batches); a stream's chunks of one choice keep their order.
//! - A stream ends exactly once: after the last choice's `Done` (the usage chunk if asked for,
//!   then `[DONE]`), or with an error body; nothing is queued after it ends.
//! - With `stream_options.include_usage`, every chunk carries `"usage": null` and the last chunk
//!   before `[DONE]` the counts.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::api::Plan;
use super::error::ApiError;
use super::metrics::Metrics;
use super::scheduler::{Msg, Started};
use super::AppState;
use crate::decode::{Event, FinishReason, GeneratedToken, Output, StoppedBy};
use crate::vocab::{TokenId, Vocab};

/// What a response needs to know about its request, whichever the endpoint.
pub struct Reply {
    pub st: AppState,
    pub id: String,
    pub created: u64,
    /// Choices in all (`n` for each prompt).
    pub total: usize,
    /// Whether every output is structured (see [`finish`]).
    pub structured: bool,
    /// `Some(top_logprobs)` when logprobs are on.
    pub logprobs: Option<usize>,
    pub prompt_tokens: usize,
}

impl Reply {
    /// A reply with a fresh id (`prefix-` and 24 letters and digits), created now.
    pub fn new(
        st: &AppState,
        prefix: &str,
        plan: &Plan,
        total: usize,
        structured: bool,
        prompt_tokens: usize,
    ) -> Reply {
        let call = crate::tools::call_id();
        Reply {
            st: st.clone(),
            id: format!("{prefix}-{}", &call["call_".len()..]),
            created: SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
            total,
            structured,
            logprobs: plan.logprobs.then_some(plan.opts.sampling.top_logprobs),
            prompt_tokens,
        }
    }

    /// The started job's choices as the response `plan` asks for: streamed, or one body.
    pub async fn respond<F: Format>(self, mut format: F, started: Started, plan: &Plan) -> Result<Response, ApiError> {
        if plan.stream {
            let mut chunks = Chunks::new(self, F::CHUNK_OBJECT, started.rx, plan.include_usage);
            format.begin(&mut chunks, started.first);
            Ok(sse(chunks, format).into_response())
        } else {
            self.collect(format, started.rx).await.map(|v| Json(v).into_response())
        }
    }

    /// `{"id", "object", "created", "model", "system_fingerprint": null, "choices"}`: the
    /// fields every body and chunk begins with, in this order.
    fn envelope(&self, object: &str, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": object,
            "created": self.created,
            "model": self.st.model_name(),
            "system_fingerprint": null,
            "choices": choices,
        })
    }

    /// Waits for every choice and returns the whole body.
    async fn collect<F: Format>(self, mut format: F, mut rx: mpsc::Receiver<Msg>) -> Result<Value, ApiError> {
        let mut choices: Vec<Value> = Vec::with_capacity(self.total);
        let mut completion = 0;
        while choices.len() < self.total {
            match rx.recv().await {
                Some(Msg::Done { index, output }) => {
                    choices.push(format.choice(&self, index, &output)?);
                    completion += output.tokens.len();
                }
                Some(Msg::Error(e)) => return Err(e),
                Some(Msg::Begin { .. } | Msg::Event { .. }) => {}
                None => return Err(ApiError::internal("the generation ended early")),
            }
        }
        // Choices may finish in any order (they run at once when the model batches).
        choices.sort_by_key(|c| c["index"].as_u64());
        let mut body = self.envelope(F::OBJECT, json!(choices));
        body["usage"] = usage(self.prompt_tokens, completion);
        Ok(body)
    }
}

/// One endpoint's wire format (see the [module docs](self)).
pub trait Format: Send + 'static {
    /// The `object` of a whole response.
    const OBJECT: &'static str;
    /// The `object` of a streamed chunk.
    const CHUNK_OBJECT: &'static str;

    /// Finished choice `index` as an element of a whole response's `choices`.
    fn choice(&mut self, reply: &Reply, index: usize, output: &Output) -> Result<Value, ApiError>;

    /// Streaming: choice `index` has begun.
    fn begin(&mut self, chunks: &mut Chunks, index: usize);

    /// Streaming: more text of choice `index`.
    fn text(&mut self, chunks: &mut Chunks, index: usize, text: String);

    /// Streaming: choice `index` has finished; its last chunks. The usage chunk and `[DONE]`
    /// follow by themselves after the last choice; an error ends the stream with its body.
    fn done(&mut self, chunks: &mut Chunks, index: usize, output: &Output) -> Result<(), ApiError>;
}

/// A streamed response in progress (see the [module docs](self)). Invariant: once `ended`,
/// nothing more is queued.
pub struct Chunks {
    reply: Reply,
    chunk_object: &'static str,
    rx: mpsc::Receiver<Msg>,
    pending: VecDeque<SseEvent>,
    /// Per choice, the tokens whose logprobs have not been sent yet (with logprobs on).
    lps: Vec<Vec<GeneratedToken>>,
    /// Choices finished so far, and their completion tokens.
    done: usize,
    completion: usize,
    /// `stream_options.include_usage`.
    include_usage: bool,
    ended: bool,
}

impl Chunks {
    fn new(reply: Reply, chunk_object: &'static str, rx: mpsc::Receiver<Msg>, include_usage: bool) -> Chunks {
        Chunks {
            chunk_object,
            lps: vec![Vec::new(); reply.total],
            reply,
            rx,
            pending: VecDeque::new(),
            done: 0,
            completion: 0,
            include_usage,
            ended: false,
        }
    }

    pub fn reply(&self) -> &Reply {
        &self.reply
    }

    /// Queues one chunk with these `choices` (and `"usage": null` when usage was asked for).
    pub fn chunk(&mut self, choices: Value) {
        let mut c = self.reply.envelope(self.chunk_object, choices);
        if self.include_usage {
            c["usage"] = Value::Null;
        }
        self.pending.push_back(SseEvent::default().data(c.to_string()));
    }

    /// The tokens of choice `index` whose logprobs are not sent yet, with `top_logprobs`;
    /// `None` when logprobs are off or none are waiting.
    pub fn take_logprobs(&mut self, index: usize) -> Option<(Vec<GeneratedToken>, usize)> {
        let k = self.reply.logprobs?;
        let lps = &mut self.lps[index];
        (!lps.is_empty()).then(|| (std::mem::take(lps), k))
    }

    /// Turns one scheduler message (`None`: the scheduler hung up) into queued events.
    fn on_message<F: Format>(&mut self, format: &mut F, msg: Option<Msg>) {
        match msg {
            Some(Msg::Begin { index }) => format.begin(self, index),
            Some(Msg::Event { index, event: Event::Token(g) }) => {
                if self.reply.logprobs.is_some() {
                    self.lps[index].push(g);
                }
            }
            Some(Msg::Event { index, event: Event::Text(t) }) => format.text(self, index, t),
            Some(Msg::Event { event: Event::Finish { .. }, .. }) => {}
            Some(Msg::Done { index, output }) => match format.done(self, index, &output) {
                Ok(()) => self.choice_done(output.tokens.len()),
                Err(e) => self.fail(e),
            },
            Some(Msg::Error(e)) => self.fail(e),
            None => self.fail(ApiError::internal("the generation ended early")),
        }
    }

    /// Records a finished choice of `tokens` tokens; after the last, queues the usage chunk
    /// (if asked for) and `[DONE]`.
    fn choice_done(&mut self, tokens: usize) {
        self.completion += tokens;
        self.done += 1;
        if self.done == self.reply.total {
            if self.include_usage {
                let mut u = self.reply.envelope(self.chunk_object, json!([]));
                u["usage"] = usage(self.reply.prompt_tokens, self.completion);
                self.pending.push_back(SseEvent::default().data(u.to_string()));
            }
            self.pending.push_back(SseEvent::default().data("[DONE]"));
            self.ended = true;
        }
    }

    /// Queues an error body and ends the stream.
    fn fail(&mut self, e: ApiError) {
        self.pending.push_back(SseEvent::default().data(e.body().to_string()));
        self.ended = true;
    }
}

/// An SSE response that drains `chunks`: queued events first, then the next message.
fn sse<F: Format>(chunks: Chunks, format: F) -> Sse<impl futures_util::Stream<Item = Result<SseEvent, Infallible>>> {
    let stream = futures_util::stream::unfold((chunks, format), |(mut c, mut f)| async move {
        loop {
            if let Some(e) = c.pending.pop_front() {
                return Some((Ok(e), (c, f)));
            }
            if c.ended {
                return None;
            }
            let msg = c.rx.recv().await;
            c.on_message(&mut f, msg);
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// `usage`: prompt, completion and total tokens.
pub fn usage(prompt: usize, completion: usize) -> Value {
    json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion})
}

/// A handler's result as the response, an error counted and logged.
pub fn answer(st: &AppState, r: Result<Response, ApiError>) -> Response {
    match r {
        Ok(resp) => resp,
        Err(e) => {
            Metrics::add(&st.inner.metrics.errors, 1);
            tracing::info!(status = e.status.as_u16(), "request failed: {}", e.message);
            e.into_response()
        }
    }
}

/// A token's text (lossy UTF-8) and exact bytes.
pub fn token_text(vocab: &Vocab, t: TokenId) -> (String, Vec<u8>) {
    let bytes = vocab.bytes(t).to_vec();
    (String::from_utf8_lossy(&bytes).into_owned(), bytes)
}

/// The top `k` alternatives of one token (the token itself, at its logprob, for a forced one).
pub fn alternatives(vocab: &Vocab, g: &GeneratedToken, k: usize) -> Vec<(String, Vec<u8>, f32)> {
    if k == 0 {
        return Vec::new();
    }
    if g.forced || g.top_logprobs.is_empty() {
        let (t, b) = token_text(vocab, g.token);
        return vec![(t, b, g.logprob)];
    }
    g.top_logprobs
        .iter()
        .filter(|a| a.logprob.is_finite())
        .take(k)
        .map(|a| {
            let (t, b) = token_text(vocab, a.token);
            (t, b, a.logprob)
        })
        .collect()
}

/// `finish_reason` and the extension `stop_reason` of an output. A structured output that
/// reached `max_tokens` is complete (the budget closed it): `"stop"`, with `stop_reason`
/// `"max_tokens"`; one with tool calls is `"tool_calls"`.
pub fn finish(out: &Output, structured: bool, tool_calls: bool) -> (&'static str, Value) {
    let stop_reason = match (&out.stopped_by, out.finish_reason) {
        (Some(StoppedBy::String(s)), _) => json!(s),
        (_, FinishReason::Length) if structured => json!("max_tokens"),
        _ => Value::Null,
    };
    let reason = if tool_calls {
        "tool_calls"
    } else {
        match out.finish_reason {
            FinishReason::Stop => "stop",
            FinishReason::Length if structured => "stop",
            FinishReason::Length => "length",
        }
    };
    (reason, stop_reason)
}
