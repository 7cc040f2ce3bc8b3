//! Real language models on candle: GGUF files, Hugging Face model directories and the
//! embedded default.
//!
//! ```text
//!  model.gguf ─── weights (quantized), tokenizer, chat template: see [`gguf`]
//!
//!  model dir ─┬─ config.json ───────────── ArchConfig (llama · qwen2 · mistral · phi3) ─┐
//!             ├─ *.safetensors (+ index) ─ Weights ── check names, shapes, dtypes ─────┤
//!             │                                                                         ▼
//!             │                                   CandleModel: candle network + KV cache
//!             │                                   (impl LanguageModel: prefill, then
//!             │                                    one pass per sampled token; fork = clone)
//!             ├─ tokenizer.json ───────┬─ Vocab (byte-exact, for the Matcher)
//!             ├─ tokenizer_config.json ┴─ PromptFormat (BOS + prompt; chat template, minijinja)
//!             └─ generation_config.json ─ GenerationDefaults (EOS ids, sampling defaults)
//! ```
//!
//! # Key types
//!
//! - [`LoadedModel`]: everything one model gives: the [`CandleModel`], its [`Vocab`], its
//!   [`PromptFormat`], its [`GenerationDefaults`] and a [`ModelInfo`] summary.
//!   [`LoadedModel::from_path`] loads a `.gguf` file or a directory (a Hugging Face one, or one
//!   holding a single `.gguf`); [`LoadedModel::embedded`] the default.
//! - [`CandleModel`]: the network and its sequence state, a [`LanguageModel`]. Forking clones
//!   the KV cache (reference-counted tensors: cheap until the copies diverge);
//!   [`CandleModel::restart`] gives the same network with an empty sequence.
//! - [`BatchNet`]: the llama, qwen2, mistral or phi3 weights again, stepping several
//!   sequences (each with its own [`KvCache`], at its own position) in one forward pass;
//!   [`Batcher`] runs one on a thread and hands out [`BatchedSequence`]s, [`LanguageModel`]s
//!   whose passes it batches (continuous batching, used by the server).
//!   [`CandleModel::batched`] builds one (or says why a config cannot be batched exactly).
//! - [`reasoning`]: a chat template's reasoning markers (`<think>`…`</think>`, ...), where a
//!   rendered prompt leaves them ([`PromptFormat::reasoning_after`]), the constraint after the
//!   reasoning, its token budget, and the split of a reply into reasoning and content.
//! - GGUF weights of ggml's 32-value block types are multiplied by this crate's own CPU kernels
//!   (`qblocks`); the rest by candle's `QMatMul`.
//! - [`LoadOptions`]: [`DeviceSpec`] (CPU by default; `cuda:N` with the `cuda` feature),
//!   [`Precision`] (f32 on the CPU, bf16 on CUDA unless asked otherwise; GGUF models: f32) and
//!   the CPU threads of the forward pass ([`set_cpu_threads`]: one setting per process).
//!
//! ```
//! use strictly::automaton::{Compiled, Constraint};
//! use strictly::decode::{generate, GenerateOptions};
//! use strictly::model::{LoadOptions, LoadedModel};
//! use strictly::sample::SamplingParams;
//!
//! let m = LoadedModel::embedded(&LoadOptions::default())?; // or LoadedModel::from_dir(dir, ..)
//! let prompt = m.prompt.encode("Once upon a time")?; // BOS + the prompt's tokens
//! let re = Constraint::Regex("[A-Z][a-z]+( [a-z]+){2,5}\\.".into());
//! let compiled = Compiled::new(&m.env, &re)?;
//! let mut matcher = compiled.matcher();
//! let mut model = m.model.restart(); // a fresh sequence on the shared weights
//! let sampling = SamplingParams { seed: Some(7), ..SamplingParams::default() };
//! let opts = GenerateOptions { max_tokens: 32, sampling, ..GenerateOptions::default() };
//! let out = generate(&mut model, m.vocab(), Some(&mut matcher), &prompt, &opts)?;
//! assert!(out.text().ends_with('.'));
//! # Ok::<(), strictly::Error>(())
//! ```
//!
//! # The embedded default
//!
//! The binary carries Andrej Karpathy's stories260K (MIT, from `karpathy/tinyllamas`; see
//! `assets/stories260K/README.md`): a 260K-parameter Llama trained on TinyStories, with a
//! 512-token SentencePiece vocabulary. It writes real (simple) English, so
//! `strictly generate --prompt "Once upon a time"` works with no files and no network. It has
//! no chat template; chats use [`chat::PLAIN_TEMPLATE`]. Its greedy output from BOS is pinned
//! by a test against reference ids computed by an independent implementation.
//!
//! # Invariants
//!
//! - Weights are checked against the architecture ([`Weights::check`]) before candle builds
//!   the network, so a missing or misshapen tensor is an [`Error`] naming it, never a panic.
//! - A sequence never exceeds the model's `max_position_embeddings`: that is an
//!   [`Error::Limit`] before the network runs.
//! - The logits row is `vocab_size` (config.json) wide, which may exceed the tokenizer's
//!   vocabulary; the matcher never allows the extra ids.

mod attention;
pub mod batch;
pub mod batcher;
mod candle_error;
pub mod chat;
pub mod config;
pub mod content;
mod device;
pub mod gguf;
mod net;
pub mod prompt;
mod qblocks;
pub mod reasoning;
pub mod weights;

use std::path::Path;
use std::sync::Arc;

pub use batch::{kv_cache_cpu_bytes, BatchConfig, BatchNet, BatchRow, KvCache};
pub use batcher::{BatchStats, BatchedSequence, Batcher, BATCH_BUCKETS};
pub use chat::{CalledFunction, ChatMessage, ChatTemplate, ChatTool, ChatToolCall, TemplateVars, ToolFunction};
pub use config::{Arch, ArchConfig};
pub use content::{ChatPrompt, ContentTokens};
pub use device::{cpu_threads, set_cpu_threads, DeviceSpec, LoadOptions, Precision};
pub use net::{CandleModel, ForwardStats};
pub use prompt::{GenerationDefaults, PromptFormat};
pub use weights::Weights;

use crate::automaton::VocabEnv;
#[cfg(doc)]
use crate::decode::LanguageModel;
use crate::error::{Error, Result};
use crate::vocab::Vocab;

/// The embedded stories260K files.
pub mod embedded {
    /// `config.json`.
    pub const CONFIG: &[u8] = include_bytes!("../../assets/stories260K/config.json");
    /// `model.safetensors` (fp32, tied embeddings, about 1 MB).
    pub const WEIGHTS: &[u8] = include_bytes!("../../assets/stories260K/model.safetensors");
    /// `tokenizer.json` (SentencePiece BPE with byte fallback, 512 tokens).
    pub const TOKENIZER: &[u8] = include_bytes!("../../assets/stories260K/tokenizer.json");
    /// The name the embedded model goes by.
    pub const NAME: &str = "stories260K";
}

/// A summary of a loaded model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    /// The directory's name, the GGUF file's name without `.gguf`, or `stories260K` for the
    /// embedded model.
    pub name: String,
    pub arch: Arch,
    pub parameters: usize,
    pub layers: usize,
    /// The logits row width (config.json's `vocab_size`).
    pub vocab_size: usize,
    pub max_positions: usize,
    pub device: DeviceSpec,
    pub precision: Precision,
    /// For a GGUF model, its tensor types, the main one first: `Q4_1 (Q4_1 ×210, Q8_0 ×1, F32 ×61)`.
    pub quantization: Option<String>,
}

/// Everything one model gives: network, vocabulary, prompt format, defaults.
pub struct LoadedModel {
    /// The network with an empty sequence; use [`CandleModel::restart`] (or clone it) for each
    /// new generation.
    pub model: CandleModel,
    /// The byte-exact vocabulary (its EOS ids include generation_config's) with its caches:
    /// compile constraints against it ([`Compiled::new`](crate::automaton::Compiled::new)).
    pub env: Arc<VocabEnv>,
    pub prompt: PromptFormat,
    pub defaults: GenerationDefaults,
    pub info: ModelInfo,
}

impl LoadedModel {
    /// The byte-exact vocabulary.
    pub fn vocab(&self) -> &Arc<Vocab> {
        self.env.vocab()
    }

    /// Loads a model from disk: a GGUF file, a Hugging Face model directory, or a directory
    /// holding one `.gguf` file (and no config.json).
    pub fn from_path(path: impl AsRef<Path>, opts: &LoadOptions) -> Result<LoadedModel> {
        let path = path.as_ref();
        if path.is_file() {
            if gguf::is_gguf(path) {
                return LoadedModel::from_gguf(path, opts);
            }
            return Err(Error::model(format!(
                "{} is neither a GGUF file nor a model directory (a Hugging Face directory holds config.json, \
                 *.safetensors and tokenizer.json)",
                path.display()
            )));
        }
        if path.is_dir() && !path.join("config.json").is_file() {
            if let Some(file) = gguf::find_in_dir(path)? {
                return LoadedModel::from_gguf(file, opts);
            }
        }
        LoadedModel::from_dir(path, opts)
    }

    /// Loads a GGUF file: weights, tokenizer and chat template (see [`gguf`]).
    pub fn from_gguf(path: impl AsRef<Path>, opts: &LoadOptions) -> Result<LoadedModel> {
        opts.apply_threads()?;
        gguf::load(path.as_ref(), opts)
    }

    /// Loads a Hugging Face model directory (see the module docs for the files read).
    pub fn from_dir(dir: impl AsRef<Path>, opts: &LoadOptions) -> Result<LoadedModel> {
        let dir = dir.as_ref();
        if !dir.is_dir() {
            let what = if dir.exists() { "is not a directory" } else { "does not exist" };
            return Err(Error::model(format!("model directory {} {what}", dir.display())));
        }
        let cfg_path = dir.join("config.json");
        if !cfg_path.is_file() {
            return Err(Error::model(format!(
                "{}: no config.json (expected a Hugging Face model directory)",
                dir.display()
            )));
        }
        opts.apply_threads()?;
        let text = read_file(&cfg_path)?;
        let cfg = ArchConfig::parse(&text, &cfg_path.display().to_string())?;
        let tok_path = dir.join("tokenizer.json");
        if !tok_path.is_file() {
            return Err(Error::model(format!(
                "{}: no tokenizer.json (only fast tokenizers are supported)",
                dir.display()
            )));
        }
        // Started first: the vocabulary's tables build while the weights load.
        let env = prepared_env(Arc::new(Vocab::from_tokenizer_json(&tok_path)?));
        let weights = Weights::open_dir(dir)?;
        let device = opts.device.open()?;
        let model = CandleModel::build(&cfg, weights, &device, opts.precision().dtype())?;
        let prompt = PromptFormat::from_dir(dir)?;
        let defaults = GenerationDefaults::from_dir(dir)?;
        let name = dir
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| dir.display().to_string());
        Ok(LoadedModel { info: info(name, &cfg, opts), model, env, prompt, defaults })
    }

    /// The embedded stories260K model (see the module docs).
    pub fn embedded(opts: &LoadOptions) -> Result<LoadedModel> {
        opts.apply_threads()?;
        let name = format!("<embedded {}>", embedded::NAME);
        let cfg = ArchConfig::parse(embedded::CONFIG, &name)?;
        let weights = Weights::from_static(embedded::WEIGHTS, &name)?;
        let device = opts.device.open()?;
        let model = CandleModel::build(&cfg, weights, &device, opts.precision().dtype())?;
        let tokenizer = tokenizers::Tokenizer::from_bytes(embedded::TOKENIZER)
            .map_err(|e| Error::Tokenizer { path: name.clone(), msg: e.to_string() })?;
        let prompt = PromptFormat::new(tokenizer, None, Some(&cfg.raw), None)?;
        let defaults = GenerationDefaults::default();
        Ok(LoadedModel {
            info: info(embedded::NAME.to_string(), &cfg, opts),
            model,
            env: prepared_env(Arc::new(Vocab::embedded())),
            prompt,
            defaults,
        })
    }

    /// [`from_path`](Self::from_path) with `Some(path)`, else [`embedded`](Self::embedded).
    pub fn load(path: Option<&Path>, opts: &LoadOptions) -> Result<LoadedModel> {
        match path {
            Some(p) => LoadedModel::from_path(p, opts),
            None => LoadedModel::embedded(opts),
        }
    }
}

/// The environment of a model's vocabulary, its per-vocabulary tables building in the
/// background ([`VocabEnv::prepare_in_background`]) so that the first request's first mask does
/// not wait for them.
fn prepared_env(vocab: Arc<Vocab>) -> Arc<VocabEnv> {
    let env = VocabEnv::new(vocab);
    env.prepare_in_background();
    env
}

/// Reads a whole file; the error names it (one line, no nested source).
pub(crate) fn read_file(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::Io { path: path.display().to_string(), source: e })
}

fn info(name: String, cfg: &ArchConfig, opts: &LoadOptions) -> ModelInfo {
    ModelInfo {
        name,
        arch: cfg.arch,
        parameters: cfg.parameter_count(),
        layers: cfg.num_layers,
        vocab_size: cfg.vocab_size,
        max_positions: cfg.max_positions,
        device: opts.device,
        precision: opts.precision(),
        quantization: None,
    }
}

impl std::fmt::Debug for LoadedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LoadedModel({:?}, {:?})", self.info, self.vocab())
    }
}

// A server moves models between threads and shares the loaded one.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<CandleModel>();
    send_sync::<LoadedModel>();
};
