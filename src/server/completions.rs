//! `POST /v1/completions`: the legacy text completion API. A prompt is text (BOS + text, the
//! model's rule), a list of texts, token ids, or lists of token ids; each gets `n` choices
//! (choice index = prompt index · n + j). Constraints as for chats (`response_format`,
//! `regex`, `grammar`, `choice`; no tools). `echo` puts the prompt's text in front.
//! Streaming sends `text_completion` chunks, then `data: [DONE]`.
//!
//! The request becomes a scheduler [`Job`]; [`Completions`] is this endpoint's wire format
//! ([`Format`]): the choice's text (after the echo) and the legacy logprobs object
//! (`tokens`, `token_logprobs`, `top_logprobs`, `text_offset`), whole or chunk by chunk.

use axum::extract::State;
use axum::response::Response;
use serde_json::{json, Value};

use super::api::CompletionRequest;
use super::error::{ApiError, ApiJson};
use super::metrics::Metrics;
use super::reply::{alternatives, answer, finish, token_text, Chunks, Format, Reply};
use super::scheduler::Job;
use super::AppState;
use crate::decode::{GeneratedToken, Output};
use crate::vocab::Vocab;

pub async fn handle(State(st): State<AppState>, body: Result<ApiJson<CompletionRequest>, ApiError>) -> Response {
    Metrics::add(&st.inner.metrics.completion_requests, 1);
    let r = match body {
        Ok(ApiJson(req)) => run(&st, req).await,
        Err(e) => Err(e),
    };
    answer(&st, r)
}

async fn run(st: &AppState, req: CompletionRequest) -> Result<Response, ApiError> {
    st.check_model(req.common.model.as_deref())?;
    if req.suffix.as_deref().is_some_and(|s| !s.is_empty()) {
        return Err(ApiError::bad_request("suffix is not supported").param("suffix"));
    }
    let spec = req.spec()?;
    let lp = req.top_logprobs()?;
    let plan = req.common.plan(&st.inner.defaults, None, lp, st.draft())?;
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
            let width = st.inner.env.vocab().len();
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
    let vocab = &st.inner.env.vocab();
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
    let reply = Reply::new(st, "cmpl", &plan, total, structured, prompt_tokens);
    let format = Completions { n: plan.n, echoes, offsets: vec![0; total] };
    reply.respond(format, started, &plan).await
}

/// This endpoint's wire format (see the module docs).
struct Completions {
    n: usize,
    /// Per prompt, the text `echo` puts in front ("" without echo).
    echoes: Vec<String>,
    /// Bytes of text streamed so far per choice (for `text_offset`).
    offsets: Vec<usize>,
}

impl Completions {
    fn echo(&self, index: usize) -> &str {
        &self.echoes[index / self.n]
    }

    /// Streams `text` of choice `index`, with the logprobs of the tokens not sent yet.
    fn chunk(&mut self, chunks: &mut Chunks, index: usize, text: String, finish_reason: Value) {
        let logprobs = match chunks.take_logprobs(index) {
            Some((lps, k)) => legacy_logprobs(chunks.reply().st.inner.env.vocab(), &lps, k, self.offsets[index]),
            None => Value::Null,
        };
        self.offsets[index] += text.len();
        chunks.chunk(json!([{"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish_reason}]));
    }
}

impl Format for Completions {
    const OBJECT: &'static str = "text_completion";
    const CHUNK_OBJECT: &'static str = "text_completion";

    fn choice(&mut self, reply: &Reply, index: usize, output: &Output) -> Result<Value, ApiError> {
        let (reason, stop_reason) = finish(output, reply.structured, false);
        let echo = self.echo(index);
        let logprobs = match reply.logprobs {
            Some(k) => legacy_logprobs(reply.st.inner.env.vocab(), &output.logprobs, k, echo.len()),
            None => Value::Null,
        };
        Ok(json!({
            "index": index,
            "text": format!("{echo}{}", output.text()),
            "logprobs": logprobs,
            "finish_reason": reason,
            "stop_reason": stop_reason,
        }))
    }

    fn begin(&mut self, chunks: &mut Chunks, index: usize) {
        let echo = self.echo(index).to_string();
        if !echo.is_empty() {
            self.chunk(chunks, index, echo, Value::Null);
        }
    }

    fn text(&mut self, chunks: &mut Chunks, index: usize, text: String) {
        self.chunk(chunks, index, text, Value::Null);
    }

    fn done(&mut self, chunks: &mut Chunks, index: usize, output: &Output) -> Result<(), ApiError> {
        let (reason, _) = finish(output, chunks.reply().structured, false);
        self.chunk(chunks, index, String::new(), json!(reason));
        Ok(())
    }
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
