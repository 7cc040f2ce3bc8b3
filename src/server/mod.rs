//! An OpenAI-compatible HTTP server (axum on tokio) whose structured outputs are guaranteed.
//!
//! ```text
//! GET  /health                 {"status": "ok", "model", "running", "queued", ...}
//! GET  /metrics                Prometheus text: requests, tokens, forced tokens, mask and compile time, cache hits, batch sizes
//! GET  /v1/models              {"object": "list", "data": [{"id", "object": "model", "owned_by", "max_model_len"}]}
//! GET  /v1/models/{id}
//! POST /v1/chat/completions    messages → the model's chat template (or the plain one) → generate
//! POST /v1/completions         prompt (text, texts, token ids) → generate
//! ```
//!
//! The official `openai` client works unchanged. What a request may constrain, beyond OpenAI:
//! `response_format` (`text`, `json_object` = any JSON object, `json_schema` = exactly that
//! schema, `strict` or not), `tools` + `tool_choice` (`none`, `auto`, `required`, named; see
//! [`constraint`] for the grammar: the arguments of every call validate against the tool's
//! `parameters`, under `auto` too), and the extension fields `regex`, `grammar` (EBNF/GBNF
//! text) and `choice` (a list of strings), also spelled `guided_regex`, `guided_grammar`,
//! `guided_choice` (and `guided_json`) as vLLM does. At most one of them, plus tools.
//! Sampling: `temperature` (0..=2), `top_p`, `top_k`, `min_p`, `top_n_sigma`,
//! `frequency_penalty`, `presence_penalty`, `repetition_penalty`, DRY (`dry_multiplier`,
//! `dry_base`, `dry_allowed_length`, `dry_penalty_last_n`, `dry_sequence_breakers`, as
//! llama.cpp's server names them), `speculate` (`"prompt-lookup"`, `"draft-model"` (the default
//! when the server has one, [`ServerConfig::draft_model`]) or `"off"`: the same tokens in fewer
//! forward passes; an extension), `seed`, `stop` (≤ 4),
//! `max_tokens` / `max_completion_tokens`, `n` (≤ 16), `logprobs` + `top_logprobs` (≤ 20),
//! over the model's `generation_config.json` defaults.
//!
//! # Key types
//!
//! - [`AppState`]: the loaded model, its [`ModelSource`] (a fresh sequence per choice), the
//!   [`ServerConfig`] limits, generation slots, the compile cache and the metrics; [`app`] turns
//!   it into the `Router`.
//! - [`ApiError`]: every failure as `{"error": {"message", "type", "param", "code"}}`.
//!
//! # Layout
//!
//! A request flows `api` (the bodies as serde types, checked into a plan: sampling over the
//! model's defaults, a constraint [`Spec`]) ─▶ [`constraint`] (compiled,
//! cached) ─▶ `scheduler` (admission, slots, the generation loop on a blocking thread, its
//! messages on a channel) ─▶ `reply` (collected into one body or streamed as SSE, in the wire
//! format of `chat` or `completions`, the two endpoints). Beside them: `metrics`, `error`,
//! `listen` (the accept loop).
//!
//! # Behaviour worth knowing
//!
//! - **Never truncated, never invalid.** A structured output (any constraint but `auto` tools
//!   over free text) is complete even when it reaches `max_tokens` (the budget closes it), so it
//!   reports `finish_reason: "stop"`, with the extension `stop_reason: "max_tokens"`; the
//!   output is checked against its constraint before it is sent, and one that cannot fit at all
//!   is a 400 up front. A stop string ends a structured output only where it is complete
//!   (inside the structure it is text).
//! - **Chats** use the model's chat template; a model without one (the embedded default) gets
//!   [`crate::model::chat::PLAIN_TEMPLATE`]. The request's tools (unless `tool_choice` is
//!   `none`), the history's assistant `tool_calls` and `tool` results go to the template as
//!   transformers passes them (`tools`, `message.tool_calls`, role `tool`), and what
//!   `tool_choice` demands is added to the system turn. The calls are constrained and read in
//!   the format that template teaches ([`crate::tools::ToolFormat`]: Hermes `<tool_call>`,
//!   Llama 3's bare `{"name", "parameters"}`, Mistral's `[TOOL_CALLS]`). A template that does
//!   not render tools (probed once: [`crate::model::ChatTemplate::takes_tools`]), teaches no
//!   known format, or fails on them gets them written into the text the way Qwen 2.5's template
//!   writes them (the default format): a Hermes tools block in the system turn, calls as
//!   `<tool_call>` blocks, results as `<tool_response>` user turns.
//! - **Message content is text.** Special-token spellings in messages, tool results and tool
//!   calls (`<|im_end|>`, `</s>`) are encoded as text, so content cannot forge turns; only the
//!   template's markup gives control tokens ([`crate::model::content`]). A trusted caller opts
//!   in with the extension field `content_control_tokens: true`.
//! - **Concurrency.** One model in memory; each choice runs on a fresh sequence
//!   ([`ModelSource::fresh`], sharing weights, never a KV cache) on a blocking thread. With a
//!   llama model, the sequences' forward passes are batched (continuous batching, up to
//!   `max_batch` sequences per pass: [`Batcher`]); the mask, sampling and streaming stay on
//!   each generation's thread. At most `max_concurrent` generations run; `max_queue` more
//!   wait in FIFO order; beyond that, 429.
//!   Each request has `request_timeout` (queueing included: 503 while waiting, 504 once
//!   running). A client that disconnects stops its generation at the next token.
//!   The `n` choices of a request (and the prompts of a completions request) run in the
//!   request's slot, so `n` never takes more than one slot: one after another, or, when the
//!   model batches, all at once (their passes share batches; the outputs are the same).
//! - **Compiles** run on a blocking thread with `compile_timeout`, and are cached (LRU,
//!   `cache_capacity` entries) by the constraint's canonical JSON.
//! - Bodies over `max_body_bytes` are a 413; malformed JSON, unknown or mistyped fields'
//!   values, out-of-range knobs, schemas and grammars that do not compile (the message names
//!   the keyword and its JSON pointer, or the grammar's line:column) are 400s; an unknown
//!   model is a 404. Panics are caught and answered with a 500 body.
//!
//! Not done: batched passes for architectures other than llama; `logit_bias`; `echo` with
//! `logprobs`; prompt logprobs; images.

pub mod api;
mod chat;
mod completions;
pub mod constraint;
mod error;
mod listen;
mod metrics;
mod reply;
mod scheduler;

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use tokio::sync::Semaphore;

pub use error::{ApiError, ApiJson};
pub use listen::serve;

use crate::automaton::Compiled;
use crate::automaton::VocabEnv;
use crate::decode::LanguageModel;
use crate::error::Result;
use crate::model::{
    BatchNet, BatchStats, Batcher, CandleModel, GenerationDefaults, LoadedModel, ModelInfo, PromptFormat,
};
use constraint::{CompileCache, Spec};
use metrics::Metrics;

/// Limits and names; every one has a default.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The model id clients use [default: the model's name, e.g. `stories260K`]. `default`
    /// is always accepted as well, and a request without `model` gets this one.
    pub served_model_name: Option<String>,
    /// Generations running at once [default 8: a full batch of `max_batch` can form].
    pub max_concurrent: usize,
    /// Requests waiting beyond those [default 1024]; more get 429.
    pub max_queue: usize,
    /// Largest request body [default 10 MiB]; larger is 413.
    pub max_body_bytes: usize,
    /// Per request, queueing included [default 600 s].
    pub request_timeout: Duration,
    /// Per constraint compile [default 60 s].
    pub compile_timeout: Duration,
    /// Compiled constraints kept [default 64].
    pub cache_capacity: usize,
    /// A connection must send its request headers within this [default 10 s], or it is closed
    /// (slowloris clients). Used by [`serve`].
    pub header_timeout: Duration,
    /// Sequences stepped in one batched forward pass [default 8]; `1` steps each generation
    /// on its own. Llama, qwen2, mistral and phi3 models batch (see [`AppState::new`]); the running generations
    /// (`max_concurrent`) bound it too.
    pub max_batch: usize,
    /// A smaller model of the same vocabulary that drafts tokens for every generation, verified
    /// by the served model (the same output in fewer of its passes; a request's `speculate`
    /// chooses) [default: none].
    pub draft_model: Option<crate::decode::DraftModel>,
    /// The most tokens one draft holds [default 8].
    pub draft_tokens: usize,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            served_model_name: None,
            max_concurrent: 8,
            max_queue: 1024,
            max_body_bytes: 10 << 20,
            request_timeout: Duration::from_secs(600),
            compile_timeout: Duration::from_secs(60),
            cache_capacity: 64,
            header_timeout: Duration::from_secs(10),
            max_batch: 8,
            draft_model: None,
            draft_tokens: 8,
        }
    }
}

/// Where each generation's model sequence comes from.
pub trait ModelSource: Send + Sync + 'static {
    /// A model with an empty sequence, sharing weights with every other.
    fn fresh(&self) -> Result<Box<dyn LanguageModel + Send>>;

    /// For a source whose sequences share batched forward passes: at most how many per pass,
    /// and what the passes were. `None` (the default) for a source that does not batch.
    fn batching(&self) -> Option<(usize, BatchStats)> {
        None
    }
}

impl ModelSource for CandleModel {
    fn fresh(&self) -> Result<Box<dyn LanguageModel + Send>> {
        Ok(Box::new(self.restart()))
    }
}

/// A prefill and a one-token step of a scratch sequence of `model` (see [`BatchNet::warm_up`]).
fn warm_up(model: &CandleModel) -> Result<()> {
    let mut m = model.restart();
    let mut row = vec![0.0; m.logits_width()];
    m.forward(&[crate::TokenId(0), crate::TokenId(0)], &mut row)?;
    m.forward(&[crate::TokenId(0)], &mut row)
}

/// Continuous batching: every sequence is stepped by the batch thread (see [`Batcher`]).
impl ModelSource for Batcher {
    fn fresh(&self) -> Result<Box<dyn LanguageModel + Send>> {
        Ok(Box::new(self.sequence()))
    }

    fn batching(&self) -> Option<(usize, BatchStats)> {
        Some((self.max_batch(), self.stats()))
    }
}

/// The server's shared state (cheap to clone).
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    info: ModelInfo,
    env: Arc<VocabEnv>,
    prompt: PromptFormat,
    defaults: GenerationDefaults,
    source: Arc<dyn ModelSource>,
    config: ServerConfig,
    slots: Arc<Semaphore>,
    admitted: AtomicUsize,
    cache: CompileCache,
    metrics: Metrics,
    created: u64,
}

impl AppState {
    /// Serves `loaded`. With `config.max_batch > 1` and a model [`CandleModel::batched`]
    /// covers (llama, qwen2, mistral, phi3; see there for the configs it refuses), generations
    /// share batched forward passes ([`Batcher`], on the model's weights); otherwise (a
    /// refused config, logged at startup with the reason; `max_batch` 1) each starts from
    /// `loaded.model.restart()` and runs its own passes.
    pub fn new(loaded: LoadedModel, config: ServerConfig) -> AppState {
        let LoadedModel { model, env, prompt, defaults, info } = loaded;
        // On a GPU the first pass loads the kernels and starts cuBLAS (seconds): paid here,
        // before the first request, not by it.
        let gpu = !model.device().is_cpu();
        let warm = |b: BatchNet| if gpu { b.warm_up().map(|()| b) } else { Ok(b) };
        let source: Arc<dyn ModelSource> = if config.max_batch > 1 {
            match model.batched().and_then(warm).and_then(|b| Batcher::new(b, config.max_batch)) {
                // The single-sequence network is dropped here: one copy of the weights stays.
                Ok(batcher) => Arc::new(batcher),
                Err(e) => {
                    tracing::warn!("batched decoding is off: {e}");
                    Arc::new(model)
                }
            }
        } else {
            if gpu {
                if let Err(e) = warm_up(&model) {
                    tracing::warn!("warming the model up failed: {e}");
                }
            }
            Arc::new(model)
        };
        AppState::with_source(source, env, prompt, defaults, info, config)
    }

    /// Serves a model given by parts, with any [`ModelSource`] (tests wrap the real model to
    /// slow it down or count its calls).
    pub fn with_source(
        source: Arc<dyn ModelSource>,
        env: Arc<VocabEnv>,
        prompt: PromptFormat,
        defaults: GenerationDefaults,
        info: ModelInfo,
        mut config: ServerConfig,
    ) -> AppState {
        config.max_concurrent = config.max_concurrent.max(1);
        let name = config.served_model_name.clone().unwrap_or_else(|| info.name.clone());
        let created = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        AppState {
            inner: Arc::new(Inner {
                name,
                info,
                env,
                prompt,
                defaults,
                source,
                slots: Arc::new(Semaphore::new(config.max_concurrent)),
                admitted: AtomicUsize::new(0),
                cache: CompileCache::new(config.cache_capacity),
                metrics: Metrics::default(),
                created,
                config,
            }),
        }
    }

    /// The model id clients use.
    pub fn model_name(&self) -> &str {
        &self.inner.name
    }

    pub fn config(&self) -> &ServerConfig {
        &self.inner.config
    }

    /// The draft model every generation may use, with its most tokens per draft.
    fn draft(&self) -> Option<(&crate::decode::DraftModel, usize)> {
        let c = &self.inner.config;
        c.draft_model.as_ref().map(|d| (d, c.draft_tokens.max(1)))
    }

    /// Checks a request's `model` (absent is fine).
    fn check_model(&self, model: Option<&str>) -> Result<(), ApiError> {
        match model {
            None => Ok(()),
            Some(m) if m == self.inner.name || m == "default" || m.is_empty() => Ok(()),
            Some(m) => Err(ApiError::not_found(format!(
                "the model {m:?} does not exist; this server serves {:?}",
                self.inner.name
            ))
            .param("model")
            .code("model_not_found")),
        }
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.inner.config.request_timeout
    }

    /// The compiled constraint for `spec`, from the cache or compiled on a blocking thread
    /// within the compile timeout.
    async fn compile(&self, spec: Option<Spec>) -> Result<Option<Arc<Compiled>>, ApiError> {
        let Some(spec) = spec else { return Ok(None) };
        let m = &self.inner.metrics;
        if let Some(c) = self.inner.cache.get(&spec) {
            Metrics::add(&m.cache_hits, 1);
            return Ok(Some(c));
        }
        let st = self.clone();
        let task = tokio::task::spawn_blocking(move || {
            let t0 = Instant::now();
            let r = constraint::compile(&st.inner.env, &spec);
            if let Ok(c) = &r {
                st.inner.cache.insert(&spec, c.clone());
                Metrics::add(&st.inner.metrics.compiles, 1);
                Metrics::add(&st.inner.metrics.compile_micros, t0.elapsed().as_micros() as u64);
            }
            r
        });
        let limit = self.inner.config.compile_timeout;
        match tokio::time::timeout(limit, task).await {
            Ok(Ok(r)) => r.map(Some),
            Ok(Err(e)) => Err(ApiError::internal(format!("the constraint compiler failed: {e}"))),
            Err(_) => Err(ApiError::bad_request(format!(
                "the constraint did not compile within {} s; simplify it",
                limit.as_secs_f64()
            ))
            .code("compile_timeout")),
        }
    }

    /// Runs `f` on a blocking thread (prompt rendering and tokenizing can be slow).
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&AppState) -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let st = self.clone();
        tokio::task::spawn_blocking(move || f(&st))
            .await
            .map_err(|e| ApiError::internal(format!("a worker failed: {e}")))?
    }

    /// `max_tokens` for a prompt: as asked, or up to the context's end; 400 when it does not fit.
    fn budget(&self, prompt_len: usize, asked: Option<usize>) -> Result<usize, ApiError> {
        let ctx = self.inner.info.max_positions;
        let room = ctx.saturating_sub(prompt_len);
        match asked {
            Some(m) if prompt_len + m <= ctx => Ok(m),
            None if room > 0 => Ok(room),
            _ => Err(ApiError::bad_request(format!(
                "this model's maximum context length is {ctx} tokens; the prompt has {prompt_len}{}",
                asked.map(|m| format!(" and max_tokens asks for {m} more")).unwrap_or_default()
            ))
            .param(if asked.is_some() { "max_tokens" } else { "messages" })
            .code("context_length_exceeded")),
        }
    }
}

/// The router: every route of the module docs, the body limit, JSON 404/405, panics as 500s.
pub fn app(state: AppState) -> Router {
    let limit = state.inner.config.max_body_bytes;
    Router::new()
        .route("/health", get(health))
        .route("/metrics", get(metrics_text))
        .route("/v1/models", get(models))
        .route("/v1/models/{id}", get(model))
        .route("/v1/chat/completions", post(chat::handle))
        .route("/v1/completions", post(completions::handle))
        .fallback(|| async {
            ApiError::not_found(
                "no such route; the routes are GET /health, GET /metrics, GET /v1/models, GET /v1/models/{id}, \
                 POST /v1/chat/completions and POST /v1/completions",
            )
            .code("not_found")
        })
        .method_not_allowed_fallback(|| async {
            ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "invalid_request_error", "method not allowed for this route")
                .code("method_not_allowed")
        })
        .layer(DefaultBodyLimit::max(limit))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(panic_response))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(state)
}

fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    ApiError::internal("the server hit an internal error (a bug: please report it)").into_response()
}

async fn health(State(st): State<AppState>) -> Json<Value> {
    let c = &st.inner.config;
    Json(json!({
        "status": "ok",
        "model": st.inner.name,
        "running": st.running(),
        "queued": st.queued(),
        "max_concurrent": c.max_concurrent,
        "max_queue": c.max_queue,
        "max_batch": st.inner.source.batching().map_or(1, |(n, _)| n),
    }))
}

async fn metrics_text(State(st): State<AppState>) -> Response {
    let batching = st.inner.source.batching();
    let body = st.inner.metrics.render(st.running(), st.queued(), st.inner.cache.len(), batching.as_ref());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

fn model_card(st: &AppState) -> Value {
    let i = &st.inner.info;
    json!({
        "id": st.inner.name,
        "object": "model",
        "created": st.inner.created,
        "owned_by": "strictly",
        "max_model_len": i.max_positions,
        "architecture": i.arch.to_string(),
        "parameters": i.parameters,
    })
}

async fn models(State(st): State<AppState>) -> Json<Value> {
    Json(json!({"object": "list", "data": [model_card(&st)]}))
}

async fn model(State(st): State<AppState>, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    st.check_model(Some(&id))?;
    Ok(Json(model_card(&st)))
}
