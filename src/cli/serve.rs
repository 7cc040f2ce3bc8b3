//! `strictly serve`: the OpenAI-compatible HTTP server ([`strictly::server`]) on one loaded
//! model: the flags become a [`ServerConfig`] (every limit checked here, before the model
//! loads), then a tokio runtime serves [`strictly::server::app`] until Ctrl-C.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Context};
use clap::Args;
use strictly::model::{DeviceSpec, LoadOptions, LoadedModel, Precision};
use strictly::server::{AppState, ServerConfig};

#[derive(Args)]
pub struct ServeArgs {
    /// A GGUF file, a Hugging Face model directory, or a directory holding one .gguf file
    /// [default: the embedded stories260K model].
    #[arg(long)]
    model: Option<PathBuf>,
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// The model id clients send [default: the model directory's name, or stories260K].
    #[arg(long)]
    served_model_name: Option<String>,
    /// Generations running at once.
    #[arg(long, default_value_t = strictly::server::ServerConfig::default().max_concurrent)]
    max_concurrent: usize,
    /// Sequences stepped in one batched forward pass (safetensors models; GGUF models and 1:
    /// each generation runs its own passes).
    #[arg(long, default_value_t = strictly::server::ServerConfig::default().max_batch)]
    max_batch: usize,
    /// Requests waiting for a slot beyond those; more are refused with 429.
    #[arg(long, default_value_t = strictly::server::ServerConfig::default().max_queue)]
    max_queue: usize,
    /// Largest request body in bytes (larger: 413).
    #[arg(long, default_value_t = strictly::server::ServerConfig::default().max_body_bytes)]
    max_body_bytes: usize,
    /// Per-request time limit in seconds, queueing included.
    #[arg(long, default_value_t = strictly::server::ServerConfig::default().request_timeout.as_secs_f64())]
    request_timeout: f64,
    /// Per-constraint compile time limit in seconds.
    #[arg(long, default_value_t = strictly::server::ServerConfig::default().compile_timeout.as_secs_f64())]
    compile_timeout: f64,
    /// Seconds a connection may take to send its request headers (slower ones are closed).
    #[arg(long, default_value_t = strictly::server::ServerConfig::default().header_timeout.as_secs_f64())]
    header_timeout: f64,
    /// cpu, cuda or cuda:N (cuda needs a binary built with the `cuda` feature).
    #[arg(long, default_value = "cpu")]
    device: String,
    /// f32, bf16 or f16 [default: f32 on cpu, bf16 on cuda; GGUF models: f32].
    #[arg(long)]
    dtype: Option<String>,
    /// CPU threads for the forward pass [default: RAYON_NUM_THREADS, else the physical cores].
    #[arg(long)]
    threads: Option<usize>,
    #[command(flatten)]
    chat_template: super::ChatTemplateArgs,
    /// Speculative decoding for every request with drafts from this smaller model (a GGUF file
    /// or a model directory) of the same vocabulary, verified by the served model: the same
    /// output in fewer of its passes where the drafts are right (a request's `speculate`:
    /// "off" or "prompt-lookup" chooses otherwise).
    #[arg(long, value_name = "PATH")]
    draft_model: Option<PathBuf>,
    /// The most tokens a draft holds.
    #[arg(long, default_value_t = 8)]
    draft_tokens: usize,
}

impl ServeArgs {
    /// The limits of the flags, checked.
    fn config(&self) -> anyhow::Result<ServerConfig> {
        if self.max_batch == 0 {
            return Err(anyhow!("--max-batch must be at least 1 (1 turns batching off)"));
        }
        let seconds = |name: &str, v: f64| -> anyhow::Result<Duration> {
            Duration::try_from_secs_f64(v)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| anyhow!("--{name} must be a positive number of seconds, got {v}"))
        };
        Ok(ServerConfig {
            served_model_name: self.served_model_name.clone(),
            max_concurrent: self.max_concurrent.max(1),
            max_queue: self.max_queue,
            max_batch: self.max_batch,
            max_body_bytes: self.max_body_bytes,
            request_timeout: seconds("request-timeout", self.request_timeout)?,
            compile_timeout: seconds("compile-timeout", self.compile_timeout)?,
            header_timeout: seconds("header-timeout", self.header_timeout)?,
            ..ServerConfig::default()
        })
    }
}

pub fn run(a: ServeArgs) -> anyhow::Result<()> {
    let config = a.config()?;
    if a.draft_tokens == 0 {
        return Err(anyhow!("--draft-tokens must be at least 1"));
    }
    let device: DeviceSpec = a.device.parse()?;
    let precision = a.dtype.as_deref().map(str::parse::<Precision>).transpose()?;
    let load = LoadOptions { device, precision, threads: a.threads };
    let mut config = config;
    let mut loaded = LoadedModel::load(a.model.as_deref(), &load)?;
    a.chat_template.apply(&mut loaded)?;
    if let Some(path) = &a.draft_model {
        config.draft_model = Some(super::draft_model(path, loaded.vocab(), &load)?);
        config.draft_tokens = a.draft_tokens.max(1);
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,tower_http=warn")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let info = loaded.info.clone();
    let state = AppState::new(loaded, config);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let addr = format!("{}:{}", a.host, a.port);
        let listener =
            tokio::net::TcpListener::bind(&addr).await.with_context(|| format!("cannot listen on {addr}"))?;
        let local = listener.local_addr()?;
        let quant = info.quantization.as_deref().map(|q| format!(", {q}")).unwrap_or_default();
        eprintln!(
            "strictly: serving {} ({}{quant}, {:.2}M parameters, context {}, {} CPU threads) on http://{local}/v1",
            state.model_name(),
            info.arch,
            info.parameters as f64 / 1e6,
            info.max_positions,
            strictly::model::cpu_threads(),
        );
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
            eprintln!("strictly: shutting down");
        };
        let header_timeout = state.config().header_timeout;
        strictly::server::serve(listener, strictly::server::app(state), header_timeout, shutdown).await;
        Ok(())
    })
}
