//! [`CandleModel`]: a candle-transformers network with its KV cache, as a [`LanguageModel`].
//!
//! One forward pass takes every token appended since the last one (the whole prompt on the
//! first call: the prefill; then one sampled token, or a run of fast-forwarded ones) and
//! returns the logits of the last position only. The network's KV cache grows by exactly those
//! tokens, so the sequence so far is never re-run.
//!
//! Invariants:
//! - `pos` is the number of tokens in the KV cache; it never exceeds `max_positions` (a longer
//!   sequence is an [`Error::Limit`], checked before the network runs).
//! - A fork is a clone: weights and caches are reference-counted, and the networks only ever
//!   replace their cache tensors (concatenation makes new ones) or, strictly's own on the CPU,
//!   append in place where no other holder can read (`batch::cache`), so two forks never see
//!   each other's tokens.
//! - After a failed forward pass the cache may hold part of the batch; the model then refuses
//!   every later call instead of predicting from a corrupt state (until a
//!   [`rewind`](LanguageModel::rewind) to a checkpoint taken before it).
//! - A GGUF model ([`super::gguf`]) runs on a [`BatchNet`] with quantized weights (shared by
//!   every copy through an `Arc`) and its own [`KvCache`]; the same rules hold.
//! - A checkpoint is a fork kept aside (the network, `pos`, `broken`), so it is as cheap as a
//!   fork; it keeps the cache tensors it saved alive until the next checkpoint, a rewind or a
//!   restart (at most one cache's worth of memory more). [`ForwardStats`] are not rewound: they
//!   count every pass made.

use std::sync::Arc;
use std::time::{Duration, Instant};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::{llama, mistral, phi3, qwen2};

use super::batch::{BatchConfig, BatchNet, BatchRow, KvCache};
use super::candle_error::candle_err;
use super::config::{Arch, ArchConfig};
use super::device::make_current;
use super::weights::Weights;
use crate::decode::{check_rows, forward_rows_one_by_one, LanguageModel};
use crate::error::{Error, Result};
use crate::vocab::TokenId;

/// Timing of a model's forward passes (this copy; forks start from their parent's figures).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ForwardStats {
    /// Forward passes made.
    pub calls: usize,
    /// Tokens fed, prompt included.
    pub tokens: usize,
    /// Tokens of the first pass (the prefill).
    pub prefill_tokens: usize,
    /// Wall time of the first pass.
    pub prefill: Duration,
    /// Wall time of all passes, the prefill included.
    pub total: Duration,
}

impl ForwardStats {
    /// Forward passes per second after the prefill (each yields one sampled token).
    pub fn decode_passes_per_sec(&self) -> f64 {
        let t = (self.total - self.prefill).as_secs_f64();
        if self.calls > 1 && t > 0.0 {
            (self.calls - 1) as f64 / t
        } else {
            0.0
        }
    }
}

#[derive(Clone)]
enum Net {
    Llama {
        model: llama::Llama,
        cache: llama::Cache,
        empty: llama::Cache,
    },
    Qwen2(qwen2::ModelForCausalLM),
    Mistral(mistral::Model),
    Phi3(phi3::Model),
    /// strictly's own batched network and one sequence's cache: every GGUF model (quantized
    /// weights), a safetensors model on a GPU (when the network covers its config), and one
    /// moved there by [`CandleModel::on_batch_net`].
    Batched {
        net: Arc<BatchNet>,
        cache: KvCache,
    },
}

impl Net {
    fn forward(&mut self, input: &Tensor, pos: usize) -> candle_core::Result<Tensor> {
        match self {
            Net::Llama { model, cache, .. } => model.forward(input, pos, cache),
            Net::Qwen2(m) => m.forward(input, pos),
            Net::Mistral(m) => m.forward(input, pos),
            Net::Phi3(m) => m.forward(input, pos),
            Net::Batched { .. } => candle_core::bail!("a batched network runs through CandleModel::pass"),
        }
    }

    fn clear(&mut self) {
        match self {
            Net::Llama { cache, empty, .. } => *cache = empty.clone(),
            Net::Qwen2(m) => m.clear_kv_cache(),
            Net::Mistral(m) => m.clear_kv_cache(),
            Net::Phi3(m) => m.clear_kv_cache(),
            Net::Batched { cache, .. } => *cache = KvCache::default(),
        }
    }
}

/// A loaded network and its sequence state. Cheap to [`fork`](LanguageModel::fork) and to
/// [`restart`](CandleModel::restart).
#[derive(Clone)]
pub struct CandleModel {
    net: Net,
    arch: Arch,
    /// Tokens in the KV cache.
    pos: usize,
    width: usize,
    max_positions: usize,
    device: Device,
    dtype: DType,
    /// Whether a multi-token pass after the prefill works (candle's qwen2 builds a mask of
    /// mixed dtypes for it unless it runs in f32; we then feed such runs one token at a time).
    batch_after_prefill: bool,
    /// The weights and config to build a [`BatchNet`] on, or why this model has none.
    batch: std::result::Result<BatchSource, String>,
    broken: bool,
    stats: ForwardStats,
    /// The sequence state at the last checkpoint: the network (its KV cache), `pos`, `broken`.
    saved: Option<Box<(Net, usize, bool)>>,
    /// The hidden states of the last [`forward_rows_deferred`]
    /// (LanguageModel::forward_rows_deferred), until the sequence next changes.
    deferred: Option<Tensor>,
}

impl Drop for CandleModel {
    /// Makes a CUDA device's context current before the tensors go (see `KvCache`'s drop): a
    /// fork or a finished request's model may be dropped on a thread that ran no pass.
    fn drop(&mut self) {
        let _ = make_current(&self.device);
    }
}

/// Where [`CandleModel::batched`] gets its network.
#[derive(Clone)]
enum BatchSource {
    /// Safetensors: load the weights again into a [`BatchNet`].
    Weights(VarBuilder<'static>, BatchConfig),
    /// GGUF: the model already runs on one; share it.
    Shared(Arc<BatchNet>),
}

/// Fills `key` with `value` where config.json leaves it out (or null), so that candle's config
/// structs, which require some fields that Hugging Face treats as optional, deserialize.
fn fill(raw: &mut serde_json::Value, key: &str, value: serde_json::Value) {
    if let Some(obj) = raw.as_object_mut() {
        if obj.get(key).is_none_or(|v| v.is_null()) {
            obj.insert(key.to_string(), value);
        }
    }
}

impl CandleModel {
    /// Builds the network for `cfg` from checked `weights` on `device` in `dtype`.
    pub(crate) fn build(cfg: &ArchConfig, weights: Weights, device: &Device, dtype: DType) -> Result<CandleModel> {
        weights.check(cfg)?;
        let name = weights.name.clone();
        let cfg_err = |e: serde_json::Error| Error::model_from(format!("config for {name}: {e}"), e);
        let mut raw = cfg.raw.clone();
        use serde_json::json;
        let aliases: &[(&str, &str)] = if cfg.arch == Arch::Mistral && cfg.tied && !weights.contains("lm_head.weight") {
            &[("lm_head.weight", "model.embed_tokens.weight")]
        } else {
            &[]
        };
        let vb = weights.into_var_builder(dtype, device, aliases);
        // Candle's loaders assume what `check` verified; catch_unwind is a second line of
        // defence so that a loader panic we did not foresee still surfaces as an error.
        let no_batch = |e: Error| e.to_string();
        // On a GPU a config strictly's network covers loads only that network: at one sequence
        // it is as fast as candle's own (BENCHMARKS.md "Session 41": 7.8-8.5 ms a step against
        // 8.0-10.9 on Llama-3-8B's shape), and a server's batches then share its weights
        // instead of loading them a second time (twice the GPU memory while it loads).
        let batched_first = !device.is_cpu();
        let on_batch_net = |bc: &BatchConfig| -> Result<Net> {
            Ok(Net::Batched {
                net: Arc::new(BatchNet::load(vb.clone(), bc, dtype, device)?),
                cache: KvCache::default(),
            })
        };
        let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> Result<(Net, _)> {
            let load_err = candle_err(&name);
            Ok(match cfg.arch {
                Arch::Llama => {
                    let lc: llama::LlamaConfig = serde_json::from_value(raw.clone()).map_err(cfg_err)?;
                    let c = lc.into_config(false);
                    let bc = BatchConfig::llama(&c);
                    let net = if batched_first {
                        on_batch_net(&bc)?
                    } else {
                        let model = llama::Llama::load(vb.clone(), &c).map_err(&load_err)?;
                        let empty = llama::Cache::new(true, dtype, &c, device).map_err(&load_err)?;
                        Net::Llama { model, cache: empty.clone(), empty }
                    };
                    (net, Ok(BatchSource::Weights(vb.clone(), bc)))
                }
                Arch::Qwen2 => {
                    fill(&mut raw, "sliding_window", json!(cfg.max_positions));
                    fill(&mut raw, "max_window_layers", json!(cfg.num_layers));
                    fill(&mut raw, "use_sliding_window", json!(false));
                    fill(&mut raw, "tie_word_embeddings", json!(false));
                    fill(&mut raw, "rope_theta", json!(10000.0));
                    fill(&mut raw, "hidden_act", json!("silu"));
                    let c: qwen2::Config = serde_json::from_value(raw).map_err(cfg_err)?;
                    let batch = BatchConfig::qwen2(&c, vb.contains_tensor("lm_head.weight")).map_err(no_batch);
                    let net = match &batch {
                        Ok(bc) if batched_first => on_batch_net(bc)?,
                        _ => Net::Qwen2(qwen2::ModelForCausalLM::new(&c, vb.clone()).map_err(&load_err)?),
                    };
                    (net, batch.map(|b| BatchSource::Weights(vb.clone(), b)))
                }
                Arch::Mistral => {
                    fill(&mut raw, "rope_theta", json!(10000.0));
                    fill(&mut raw, "num_key_value_heads", json!(cfg.num_kv_heads));
                    let c: mistral::Config = serde_json::from_value(raw).map_err(cfg_err)?;
                    // candle's mistral always reads `lm_head.weight` (aliased to the embedding
                    // when tied), so the batched net reads it too.
                    let batch = BatchConfig::mistral(&c, false).map_err(no_batch);
                    let net = match &batch {
                        Ok(bc) if batched_first => on_batch_net(bc)?,
                        _ => Net::Mistral(mistral::Model::new(&c, vb.clone()).map_err(&load_err)?),
                    };
                    (net, batch.map(|b| BatchSource::Weights(vb.clone(), b)))
                }
                Arch::Phi3 => {
                    fill(&mut raw, "rope_theta", json!(10000.0));
                    fill(&mut raw, "hidden_act", json!("silu"));
                    fill(&mut raw, "num_key_value_heads", json!(cfg.num_kv_heads));
                    fill(&mut raw, "tie_word_embeddings", json!(false));
                    if let Some(o) = raw.as_object_mut() {
                        // Not used by the network; candle wants single ids where configs may list several.
                        o.remove("bos_token_id");
                        o.remove("eos_token_id");
                    }
                    let c: phi3::Config = serde_json::from_value(raw).map_err(cfg_err)?;
                    let batch = BatchConfig::phi3(&c).map_err(no_batch);
                    let net = match &batch {
                        Ok(bc) if batched_first => on_batch_net(bc)?,
                        _ => Net::Phi3(phi3::Model::new(&c, vb.clone()).map_err(&load_err)?),
                    };
                    (net, batch.map(|b| BatchSource::Weights(vb.clone(), b)))
                }
            })
        }));
        let (net, batch) = match built {
            Ok(net) => net?,
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "unknown error".into());
                return Err(Error::model(format!("{name}: the {} loader failed: {msg}", cfg.arch)));
            }
        };
        // A network already batched is shared, not loaded again.
        let on_batch = matches!(net, Net::Batched { .. });
        let batch = match (&net, batch) {
            (Net::Batched { net, .. }, Ok(_)) => Ok(BatchSource::Shared(net.clone())),
            (_, batch) => batch,
        };
        Ok(CandleModel {
            net,
            arch: cfg.arch,
            pos: 0,
            width: cfg.vocab_size,
            max_positions: cfg.max_positions,
            device: device.clone(),
            dtype,
            batch_after_prefill: on_batch || !(cfg.arch == Arch::Qwen2 && dtype != DType::F32),
            batch,
            broken: false,
            stats: ForwardStats::default(),
            saved: None,
            deferred: None,
        })
    }

    /// A GGUF model (built by [`super::gguf`]) on `net`: f32, every pass through the batched
    /// network with this sequence's cache.
    pub(super) fn from_batch_net(net: BatchNet, arch: Arch) -> CandleModel {
        let net = Arc::new(net);
        CandleModel {
            arch,
            pos: 0,
            width: net.vocab_size(),
            max_positions: net.max_positions(),
            device: net.device().clone(),
            dtype: DType::F32,
            batch_after_prefill: true,
            batch: Ok(BatchSource::Shared(net.clone())),
            net: Net::Batched { net, cache: KvCache::default() },
            broken: false,
            stats: ForwardStats::default(),
            saved: None,
            deferred: None,
        }
    }

    /// The same model on strictly's batched network ([`BatchNet`]), with an empty sequence:
    /// what speculative decoding needs (one pass for a draft's rows, a cache that forgets its
    /// end, rows that do not depend on how tokens are grouped into passes). A GGUF model, and
    /// on a GPU a safetensors one the batched network covers, runs there already (a restart);
    /// a safetensors model on the CPU loads its weights again (the original may be dropped); an
    /// error says why for a config the batched network does not cover.
    pub fn on_batch_net(&self) -> Result<CandleModel> {
        if matches!(self.net, Net::Batched { .. }) {
            return Ok(self.restart());
        }
        let mut m = CandleModel::from_batch_net(self.batched()?, self.arch);
        m.dtype = self.dtype;
        Ok(m)
    }

    /// The same network with an empty sequence (KV cache cleared, statistics reset).
    pub fn restart(&self) -> CandleModel {
        let mut m = self.clone();
        m.net.clear();
        m.pos = 0;
        m.broken = false;
        m.stats = ForwardStats::default();
        m.saved = None;
        m.deferred = None;
        m
    }

    /// Tokens in the sequence so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// The longest sequence the network takes (`max_position_embeddings`).
    pub fn max_positions(&self) -> usize {
        self.max_positions
    }

    pub fn arch(&self) -> Arch {
        self.arch
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn stats(&self) -> ForwardStats {
        self.stats
    }

    /// The same weights as a [`BatchNet`], which steps several sequences in one pass; an
    /// error (saying why) for configs it does not cover exactly (a qwen2/mistral sliding window
    /// shorter than the context, phi3's longrope or partial rotary, an activation other than
    /// SiLU). Loads the weights again (a second copy in memory while this model is kept), except
    /// for a GGUF model, which runs on a `BatchNet` already: that one is shared.
    pub fn batched(&self) -> Result<BatchNet> {
        match &self.batch {
            Ok(BatchSource::Weights(vb, cfg)) => BatchNet::load(vb.clone(), cfg, self.dtype, &self.device),
            Ok(BatchSource::Shared(net)) => Ok(BatchNet::clone(net)),
            Err(why) => Err(Error::model(why.clone())),
        }
    }

    /// The checks every pass makes before it runs (nothing changes when one fails).
    fn check_input(&self, tokens: &[TokenId]) -> Result<()> {
        if self.broken {
            return Err(Error::model("the model's state is unusable after a failed forward pass; restart it"));
        }
        if tokens.is_empty() {
            return Err(Error::param(
                "the model needs at least one input token (a BOS or a prompt) before it can predict",
            ));
        }
        if let Some(t) = tokens.iter().find(|t| t.0 as usize >= self.width) {
            return Err(Error::param(format!("token id {} is outside the model's vocabulary ({})", t.0, self.width)));
        }
        let end = self.pos + tokens.len();
        if end > self.max_positions {
            return Err(Error::Limit {
                kind: crate::error::LimitKind::Context,
                what: format!("context length ({} tokens so far + {} new)", self.pos, tokens.len()),
                limit: self.max_positions,
                hint: Some("the model's max_position_embeddings; use a shorter prompt or fewer --max-tokens".into()),
            });
        }
        Ok(())
    }

    /// Counts a pass of `tokens` tokens that took `dt` (the first one is the prefill).
    fn count_pass(&mut self, tokens: usize, dt: std::time::Duration) {
        if self.stats.calls == 0 {
            self.stats.prefill = dt;
            self.stats.prefill_tokens = tokens;
        }
        self.stats.calls += 1;
        self.stats.tokens += tokens;
        self.stats.total += dt;
    }

    /// One pass over `ids` at the current position; the last position's logits as f32.
    fn pass(&mut self, ids: &[u32]) -> Result<Vec<f32>> {
        if let Net::Batched { net, cache } = &mut self.net {
            // The batched network checks the row and changes no cache when it fails.
            let tokens: Vec<TokenId> = ids.iter().map(|&i| TokenId(i)).collect();
            let mut rows = net.forward(&mut [BatchRow { cache, tokens: &tokens }])?;
            self.pos += ids.len();
            return rows.pop().ok_or_else(|| Error::model("the batched network returned no logits"));
        }
        let err = candle_err("forward pass");
        make_current(&self.device).map_err(&err)?;
        let input = Tensor::new(ids, &self.device).and_then(|t| t.unsqueeze(0)).map_err(&err)?;
        let out = self.net.forward(&input, self.pos).map_err(|e| {
            self.broken = true;
            err(e)
        })?;
        self.pos += ids.len();
        let row =
            out.flatten_all().and_then(|t| t.to_dtype(DType::F32)).and_then(|t| t.to_vec1::<f32>()).map_err(&err)?;
        Ok(row)
    }
}

impl LanguageModel for CandleModel {
    fn logits_width(&self) -> usize {
        self.width
    }

    fn forward(&mut self, tokens: &[TokenId], logits: &mut [f32]) -> Result<()> {
        self.check_input(tokens)?;
        self.deferred = None;
        let t0 = Instant::now();
        let ids: Vec<u32> = tokens.iter().map(|t| t.0).collect();
        let row = if self.pos > 0 && !self.batch_after_prefill {
            let mut row = Vec::new();
            for &id in &ids {
                row = self.pass(&[id])?;
            }
            row
        } else {
            self.pass(&ids)?
        };
        if row.len() != self.width || logits.len() != self.width {
            self.broken = true;
            return Err(Error::model(format!(
                "logits row has {} entries, expected {} (buffer {})",
                row.len(),
                self.width,
                logits.len()
            )));
        }
        logits.copy_from_slice(&row);
        self.count_pass(tokens.len(), t0.elapsed());
        Ok(())
    }

    /// A GGUF model runs the rows in one pass of its batched network; others one pass per row
    /// (the trait's default).
    fn forward_rows(&mut self, tokens: &[TokenId], n_rows: usize, rows: &mut [f32]) -> Result<()> {
        if !matches!(self.net, Net::Batched { .. }) {
            return forward_rows_one_by_one(self, tokens, n_rows, rows);
        }
        let w = self.width;
        check_rows(tokens, n_rows, rows.len(), w)?;
        self.check_input(tokens)?;
        self.deferred = None;
        let t0 = Instant::now();
        let Net::Batched { net, cache } = &mut self.net else { unreachable!("checked above") };
        // The batched network checks the row again and changes no cache when it fails.
        let out = net.forward_tail(&mut [BatchRow { cache, tokens }], n_rows)?;
        for (i, row) in out.iter().enumerate() {
            rows[i * w..(i + 1) * w].copy_from_slice(row);
        }
        self.pos += tokens.len();
        self.count_pass(tokens.len(), t0.elapsed());
        Ok(())
    }

    /// On the batched network: the layers for every row now, the output head for the first
    /// (a 49k-token head costs a fifth of a small model's pass per row), the others' when asked.
    fn forward_rows_deferred(&mut self, tokens: &[TokenId], n_rows: usize, first: &mut [f32]) -> Result<bool> {
        if !matches!(self.net, Net::Batched { .. }) {
            return Ok(false);
        }
        // The rows asked for, and the one buffer of the first.
        check_rows(tokens, n_rows, n_rows * self.width, self.width)?;
        check_rows(tokens, 1, first.len(), self.width)?;
        self.check_input(tokens)?;
        self.deferred = None;
        let t0 = Instant::now();
        let Net::Batched { net, cache } = &mut self.net else { unreachable!("checked above") };
        let hidden = net.forward_hidden(&mut BatchRow { cache, tokens }, n_rows)?;
        self.pos += tokens.len();
        let row = net.head_row(&hidden, 0)?;
        if row.len() != self.width {
            return Err(Error::model(format!("logits row has {} entries, expected {}", row.len(), self.width)));
        }
        first.copy_from_slice(&row);
        self.deferred = Some(hidden);
        self.count_pass(tokens.len(), t0.elapsed());
        Ok(true)
    }

    fn deferred_row(&mut self, i: usize, logits: &mut [f32]) -> Result<()> {
        let (Net::Batched { net, .. }, Some(hidden)) = (&self.net, &self.deferred) else {
            return Err(Error::state("no deferred rows to compute"));
        };
        let row = net.head_row(hidden, i)?;
        if row.len() != logits.len() {
            return Err(Error::model(format!("logits row has {} entries, expected {}", row.len(), logits.len())));
        }
        logits.copy_from_slice(&row);
        Ok(())
    }

    fn can_truncate(&self) -> bool {
        matches!(self.net, Net::Batched { .. })
    }

    fn truncate(&mut self, n: usize) -> Result<()> {
        match &mut self.net {
            Net::Batched { cache, .. } => {
                cache.truncate(n)?;
                self.pos -= n;
                self.deferred = None;
                Ok(())
            }
            _ => Err(Error::state(
                "only a model on the batched network forgets the end of its sequence (see CandleModel::on_batch_net)",
            )),
        }
    }

    fn fork(&self) -> Result<Box<dyn LanguageModel>> {
        if self.broken {
            return Err(Error::state("cannot fork a model whose last forward pass failed"));
        }
        let mut fork = self.clone();
        fork.saved = None;
        fork.deferred = None;
        Ok(Box::new(fork))
    }

    fn checkpoint(&mut self) -> bool {
        self.saved = Some(Box::new((self.net.clone(), self.pos, self.broken)));
        true
    }

    fn rewind(&mut self) -> Result<()> {
        let saved = self.saved.take().ok_or_else(|| Error::state("no checkpoint to rewind to"))?;
        (self.net, self.pos, self.broken) = *saved;
        self.deferred = None;
        Ok(())
    }
}

impl std::fmt::Debug for CandleModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CandleModel({}, {:?} on {:?}, {} of {} positions used)",
            self.arch, self.dtype, self.device, self.pos, self.max_positions
        )
    }
}
