//! [`BatchNet`]: one forward pass of a llama-family network (llama, qwen2, mistral, phi3) over several
//! sequences, each with its own KV cache ([`KvCache`]) at its own position.
//!
//! The three architectures share one code path; what differs is described by a
//! [`BatchConfig`]: biases on the q/k/v projections (qwen2), the rotary frequencies (rope
//! theta, Llama 3 scaling), a head dimension other than `hidden / heads` (mistral), fused
//! `qkv_proj` and `gate_up_proj` weights (phi3: split into the same q/k/v and gate/up
//! projections at load time), and a tied output head. A sliding window is not implemented: a
//! config whose window is shorter than its context is refused (see [`BatchConfig::qwen2`]), so
//! a batch is never inexact.
//!
//! candle-transformers' `Llama` (like its qwen2 and mistral) keeps a single cache, so it can
//! only step one sequence (or a batch of sequences that all sit at the same position). This
//! module holds the same weights and runs a pass over any mix of sequences: a prefill of one, a
//! single sampled token of another, a fast-forwarded run of a third.
//!
//! How a pass is laid out: the new tokens of every sequence are stacked into one matrix of
//! rows, so everything that works token by token (the embedding, the RMS norms, the q/k/v/o
//! projections, the MLP) is one matmul per weight for the whole batch; that is where a batch
//! saves time. Attention is the only step that mixes tokens, and it runs per sequence: its
//! rows take their rotary angles from their own positions, are appended to their own cache,
//! and attend over that cache with a causal mask among the new rows. Off the CPU, the rows
//! that add one token to a non-empty cache (a decode step's) attend together instead, padded
//! to the longest cache ([`decode`]): per-row tensor ops are a kernel launch each on a GPU. The
//! final norm and the head run on the last row of each sequence only.
//!
//! Exactness: each sequence's logits are those of a single-sequence pass over the same tokens
//! (candle's `Llama`, `qwen2::ModelForCausalLM` and `mistral::Model`, which the tests compare
//! against, with one-token rows attended both ways); the only difference is the order in which
//! a matmul over more rows (or a padded attention) may sum, so rows agree to float tolerance,
//! not bit for bit.
//!
//! GGUF models ([`super::gguf`]) run on this network too: their projections are candle
//! `QMatMul`s that multiply straight from the quantized blocks ([`Linear`] is dense or
//! quantized), phi3's fused `attn_qkv` and gate/up weights stay fused (one matmul, its output
//! split), and llama GGUFs use the interleaved rotary layout llama.cpp's converter permuted
//! their q/k weights for. Cloning a [`BatchNet`] shares its weights (reference-counted), so the
//! single-sequence model and a batcher can run on one copy.
//!
//! Invariants:
//! - A cache's `pos` is the number of tokens it holds; `pos + new tokens` never exceeds
//!   `max_positions` (an [`Error::Limit`] before anything runs).
//! - A failed pass changes no cache: the new layers and position are committed only once
//!   every layer of every sequence has run (what a pass wrote in place past a cache's position
//!   is never read).
//! - A clone of a cache is an independent checkpoint: its layers are shared, and a pass
//!   appends to a shared layer in place only at positions no other holder can read (see
//!   `cache`); off the CPU it replaces the layer's tensors (concatenation makes new ones).

use std::sync::Arc;

use candle_core::quantized::QMatMul;
use candle_core::{DType, Device, Tensor};
use candle_nn::{Embedding, Module, RmsNorm, VarBuilder};
use candle_transformers::models::{llama, mistral, phi3, qwen2};

use super::candle_error::candle_err;
use super::device::run_pass;
use super::qblocks::QBlocks;
use crate::error::{Error, Result};
use crate::vocab::TokenId;

mod cache;
mod decode;

use cache::LayerKv;
pub use cache::{kv_cache_cpu_bytes, KvCache};

/// One sequence of a batched pass: its cache and the tokens to append to it.
pub struct BatchRow<'a> {
    pub cache: &'a mut KvCache,
    pub tokens: &'a [TokenId],
}

/// A linear layer (bias optional): a dense weight kept transposed, `(in, out)` and contiguous, so
/// that `x · W` multiplies straight from it (with the weight as stored, `(out, in)`, the
/// matmul of a few rows re-packs the whole transposed weight on every call, which made a pass
/// of two rows cost more than two passes of one); or a quantized `(out, in)` weight (GGUF).
#[derive(Clone)]
pub(super) struct Linear {
    weight: Weight,
    /// `(out,)`, added to every row.
    bias: Option<Tensor>,
}

#[derive(Clone)]
enum Weight {
    /// `(in, out)`.
    Dense(Tensor),
    Quantized(QMatMul),
    /// A 32-value block type on the CPU, multiplied by this crate's kernels.
    Blocks(Arc<QBlocks>),
}

impl Linear {
    fn new(w: &Tensor) -> candle_core::Result<Linear> {
        Ok(Linear { weight: Weight::Dense(w.t()?.contiguous()?), bias: None })
    }

    /// A quantized weight, with an optional `(out,)` bias.
    pub(super) fn quantized(w: QMatMul, bias: Option<Tensor>) -> Linear {
        Linear { weight: Weight::Quantized(w), bias }
    }

    /// A quantized weight multiplied by [`QBlocks`]' kernels, with an optional `(out,)` bias.
    pub(super) fn blocks(w: QBlocks, bias: Option<Tensor>) -> Linear {
        Linear { weight: Weight::Blocks(Arc::new(w)), bias }
    }

    fn load(inputs: usize, outputs: usize, vb: VarBuilder) -> candle_core::Result<Linear> {
        Linear::new(&vb.get((outputs, inputs), "weight")?)
    }

    fn load_biased(inputs: usize, outputs: usize, vb: VarBuilder) -> candle_core::Result<Linear> {
        let bias = vb.get(outputs, "bias")?;
        Ok(Linear { bias: Some(bias), ..Linear::load(inputs, outputs, vb)? })
    }

    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let y = match &self.weight {
            Weight::Dense(wt) => x.matmul(wt)?,
            Weight::Quantized(w) => w.forward(x)?,
            Weight::Blocks(w) => w.forward(x)?,
        };
        match &self.bias {
            Some(b) => y.broadcast_add(b),
            None => Ok(y),
        }
    }
}

/// The q, k and v projections: three weights, or one whose output rows are q, k, v in turn
/// (a GGUF phi3's `attn_qkv`).
#[derive(Clone)]
pub(super) enum Qkv {
    Split { q: Linear, k: Linear, v: Linear },
    Fused(Linear),
}

#[derive(Clone)]
pub(super) struct Attention {
    pub(super) qkv: Qkv,
    pub(super) o: Linear,
}

/// The gate and up projections: two weights, or one whose outputs are the gate, then up (a GGUF
/// phi3's `ffn_up`).
#[derive(Clone)]
pub(super) enum GateUp {
    Split { gate: Linear, up: Linear },
    Fused(Linear),
}

#[derive(Clone)]
pub(super) struct Mlp {
    pub(super) gate_up: GateUp,
    pub(super) down: Linear,
}

#[derive(Clone)]
pub(super) struct Layer {
    pub(super) attn_norm: RmsNorm,
    pub(super) attn: Attention,
    pub(super) mlp_norm: RmsNorm,
    pub(super) mlp: Mlp,
}

/// What a [`BatchNet`] needs to know of a llama-family config: its dimensions and the
/// per-architecture options. Built from candle's config structs by [`BatchConfig::llama`],
/// [`BatchConfig::qwen2`] and [`BatchConfig::mistral`].
#[derive(Debug, Clone)]
pub struct BatchConfig {
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub vocab_size: usize,
    pub max_positions: usize,
    pub rms_norm_eps: f64,
    /// Rotary frequencies, `head_dim / 2` of them.
    pub inv_freq: Vec<f32>,
    /// The output head is the embedding matrix (no `lm_head.weight` is read).
    pub tied: bool,
    /// The q/k/v projections have biases (qwen2).
    pub qkv_bias: bool,
    /// Phi-3's weight layout: `self_attn.qkv_proj` (q, k, v stacked by output) and
    /// `mlp.gate_up_proj` (gate, then up).
    pub fused: bool,
}

/// `1 / theta^(2i / head_dim)` for `i < head_dim / 2`, computed in f64.
pub(super) fn plain_inv_freq(theta: f64, head_dim: usize) -> Vec<f32> {
    (0..head_dim / 2).map(|i| (1.0 / theta.powf((2 * i) as f64 / head_dim as f64)) as f32).collect()
}

/// Errors unless the MLP activation is SiLU, the only one the batched pass computes.
fn check_silu(arch: &str, act: candle_nn::Activation) -> Result<()> {
    if matches!(act, candle_nn::Activation::Silu) {
        Ok(())
    } else {
        Err(Error::model(format!("no batched forward pass for a {arch} model with hidden_act {act:?} (only silu)")))
    }
}

/// Errors when a sliding window would cut attention short somewhere inside the context (a
/// position more than `window` behind another would be masked): batching it would need the
/// window in the pass, which is not implemented, and must never run inexactly.
fn check_window(arch: &str, window: usize, max_positions: usize) -> Result<()> {
    if window < max_positions {
        return Err(Error::model(format!(
            "no batched forward pass for a {arch} model whose sliding window ({window}) is shorter than its \
             context ({max_positions} positions); it runs unbatched"
        )));
    }
    Ok(())
}

/// A [`BatchConfig`] from a candle config of the llama family: the dimensions are named alike
/// in all of them (llama, qwen2, mistral, phi3 configs are distinct types), the rest differs.
macro_rules! batch_config {
    ($cfg:expr, $head_dim:expr, inv_freq: $inv_freq:expr, tied: $tied:expr, qkv_bias: $bias:expr, fused: $fused:expr) => {
        BatchConfig {
            hidden_size: $cfg.hidden_size,
            intermediate_size: $cfg.intermediate_size,
            num_layers: $cfg.num_hidden_layers,
            heads: $cfg.num_attention_heads,
            kv_heads: $cfg.num_key_value_heads,
            head_dim: $head_dim,
            vocab_size: $cfg.vocab_size,
            max_positions: $cfg.max_position_embeddings,
            rms_norm_eps: $cfg.rms_norm_eps,
            inv_freq: $inv_freq,
            tied: $tied,
            qkv_bias: $bias,
            fused: $fused,
        }
    };
}

impl BatchConfig {
    /// A llama config (`tie_word_embeddings` as it says, Llama 3 rope scaling honoured).
    pub fn llama(cfg: &llama::Config) -> BatchConfig {
        let head_dim = cfg.hidden_size / cfg.num_attention_heads.max(1);
        batch_config!(cfg, head_dim, inv_freq: inv_freq(cfg), tied: cfg.tie_word_embeddings, qkv_bias: false, fused: false)
    }

    /// A qwen2 config: biased q/k/v, the head tied when the weights have no `lm_head.weight`
    /// (`has_head`, as candle's qwen2 decides). `sliding_window` must cover the whole context
    /// even when `use_sliding_window` is false: transformers then ignores it, but candle's
    /// qwen2 (the unbatched path) still masks by it inside a multi-token pass, and the two
    /// paths must agree.
    pub fn qwen2(cfg: &qwen2::Config, has_head: bool) -> Result<BatchConfig> {
        check_silu("qwen2", cfg.hidden_act)?;
        check_window("qwen2", cfg.sliding_window, cfg.max_position_embeddings)?;
        let head_dim = cfg.hidden_size / cfg.num_attention_heads.max(1);
        Ok(
            batch_config!(cfg, head_dim, inv_freq: plain_inv_freq(cfg.rope_theta, head_dim), tied: !has_head, qkv_bias: true, fused: false),
        )
    }

    /// A mistral config: `head_dim` as configured, the head tied when `tied` (the loader then
    /// serves `lm_head.weight` from the embedding, so either way reads the same matrix). A
    /// `sliding_window` must cover the whole context.
    pub fn mistral(cfg: &mistral::Config, tied: bool) -> Result<BatchConfig> {
        check_silu("mistral", cfg.hidden_act)?;
        if let Some(w) = cfg.sliding_window {
            check_window("mistral", w, cfg.max_position_embeddings)?;
        }
        let head_dim = cfg.head_dim.unwrap_or(cfg.hidden_size / cfg.num_attention_heads.max(1));
        Ok(
            batch_config!(cfg, head_dim, inv_freq: plain_inv_freq(cfg.rope_theta, head_dim), tied: tied, qkv_bias: false, fused: false),
        )
    }

    /// A phi3 config: fused weights, tied as `tie_word_embeddings` says (as candle's phi3).
    /// Partial rotary embeddings and `rope_scaling` (longrope) are refused. Like candle's phi3
    /// (the unbatched path), attention is causal over the whole context: a `sliding_window`
    /// in config.json is not applied by either.
    pub fn phi3(cfg: &phi3::Config) -> Result<BatchConfig> {
        check_silu("phi3", cfg.hidden_act)?;
        let head_dim = cfg.head_dim();
        let refuse = |what: &str| Err(Error::model(format!("no batched forward pass for a phi3 model with {what}")));
        if cfg.rope_scaling.is_some() {
            return refuse("rope_scaling (longrope)");
        }
        if cfg.partial_rotary_factor.is_some_and(|f| (f * head_dim as f64) as usize != head_dim) {
            return refuse("partial rotary embeddings (partial_rotary_factor < 1)");
        }
        Ok(
            batch_config!(cfg, head_dim, inv_freq: plain_inv_freq(cfg.rope_theta, head_dim), tied: cfg.tie_word_embeddings, qkv_bias: false, fused: true),
        )
    }
}

/// A llama-family network that steps several sequences in one pass (see the module docs).
/// A clone shares the weights.
#[derive(Clone)]
pub struct BatchNet {
    pub(super) embed: Embedding,
    pub(super) layers: Vec<Layer>,
    pub(super) norm: RmsNorm,
    pub(super) head: Linear,
    /// Rotary tables, `(max_positions, head_dim / 2)`: row `p` holds the angles of position `p`.
    pub(super) cos: Tensor,
    pub(super) sin: Tensor,
    pub(super) heads: usize,
    pub(super) kv_heads: usize,
    pub(super) head_dim: usize,
    pub(super) vocab_size: usize,
    pub(super) max_positions: usize,
    pub(super) dtype: DType,
    /// Rotate pairs `(2i, 2i + 1)` (llama.cpp's layout of llama GGUFs) instead of `(i, i + d/2)`.
    pub(super) rope_interleaved: bool,
    /// A pass's one-token rows attend together (`decode`); off the CPU unless set.
    pub(super) batched_decode: bool,
    /// On the CPU, keep the keys and values as half floats (`cache`): a GGUF model's, as
    /// llama.cpp keeps them; a safetensors model's stay f32, the bits of candle's own model
    /// that runs it one sequence at a time.
    pub(super) half_kv: bool,
}

/// The rotary frequencies, with Llama 3's long-context scaling when the config asks for it.
fn inv_freq(cfg: &llama::Config) -> Vec<f32> {
    let head_dim = cfg.hidden_size / cfg.num_attention_heads;
    let base: Vec<f32> =
        (0..head_dim / 2).map(|i| 1.0 / cfg.rope_theta.powf((2 * i) as f32 / head_dim as f32)).collect();
    let Some(s) = cfg.rope_scaling.as_ref().filter(|s| matches!(s.rope_type, llama::Llama3RopeType::Llama3)) else {
        return base;
    };
    let old = s.original_max_position_embeddings as f32;
    // Wavelengths shorter than `old / high` keep their frequency, longer than `old / low` are
    // slowed down by `factor`, and those between are interpolated.
    let (short, long) = (old / s.high_freq_factor, old / s.low_freq_factor);
    base.into_iter()
        .map(|f| {
            let wavelength = std::f32::consts::TAU / f;
            if wavelength < short {
                f
            } else if wavelength > long {
                f / s.factor
            } else {
                let t = (old / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
                (1.0 - t) * f / s.factor + t * f
            }
        })
        .collect()
}

/// Errors unless `tokens` can be appended to a sequence of `pos` tokens: at least one token,
/// every id below `width`, no more than `max_positions` in all.
pub(crate) fn check_row(pos: usize, tokens: &[TokenId], width: usize, max_positions: usize) -> Result<()> {
    if tokens.is_empty() {
        return Err(Error::param("the model needs at least one input token (a BOS or a prompt) before it can predict"));
    }
    if let Some(t) = tokens.iter().find(|t| t.0 as usize >= width) {
        return Err(Error::param(format!("token id {} is outside the model's vocabulary ({width})", t.0)));
    }
    if pos + tokens.len() > max_positions {
        return Err(Error::Limit {
            kind: crate::error::LimitKind::Context,
            what: format!("context length ({pos} tokens so far + {} new)", tokens.len()),
            limit: max_positions,
            hint: Some("the model's max_position_embeddings; use a shorter prompt or fewer --max-tokens".into()),
        });
    }
    Ok(())
}

impl BatchNet {
    /// Loads the weights of a Hugging Face llama, qwen2, mistral or phi3 (the names
    /// candle-transformers' models read) from `vb`, for `cfg`.
    pub fn load(vb: VarBuilder, cfg: &BatchConfig, dtype: DType, device: &Device) -> Result<BatchNet> {
        let e = candle_err("loading the batched network");
        let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
        let heads_fit = cfg.kv_heads > 0 && cfg.heads % cfg.kv_heads == 0;
        if cfg.heads == 0 || !heads_fit || cfg.head_dim == 0 || cfg.head_dim % 2 != 0 {
            return Err(Error::model(format!(
                "batched network: {} heads of {} and {} key/value heads do not fit (hidden size {h})",
                cfg.heads, cfg.head_dim, cfg.kv_heads
            )));
        }
        if cfg.inv_freq.len() != cfg.head_dim / 2 {
            return Err(Error::model(format!(
                "batched network: {} rotary frequencies for head_dim {}",
                cfg.inv_freq.len(),
                cfg.head_dim
            )));
        }
        let head_dim = cfg.head_dim;
        let q_size = head_dim * cfg.heads;
        let kv_size = head_dim * cfg.kv_heads;
        let lin = |a, b, vb: VarBuilder| Linear::load(a, b, vb).map_err(&e);
        let qkv = |a, b, vb: VarBuilder| {
            if cfg.qkv_bias { Linear::load_biased(a, b, vb) } else { Linear::load(a, b, vb) }.map_err(&e)
        };
        let embed = candle_nn::embedding(cfg.vocab_size, h, vb.pp("model.embed_tokens")).map_err(&e)?;
        let head = if cfg.tied {
            Linear::new(embed.embeddings()).map_err(&e)?
        } else {
            lin(h, cfg.vocab_size, vb.pp("lm_head"))?
        };
        let norm = candle_nn::rms_norm(h, cfg.rms_norm_eps, vb.pp("model.norm")).map_err(&e)?;
        let mut layers = Vec::with_capacity(cfg.num_layers);
        for n in 0..cfg.num_layers {
            let vb = vb.pp(format!("model.layers.{n}"));
            let a = vb.pp("self_attn");
            let m = vb.pp("mlp");
            let (q, k, v, gate, up) = if cfg.fused {
                // Rows `start..start + n` of a fused `(out, in)` weight are one projection.
                let part = |w: &Tensor, start, n| w.narrow(0, start, n).and_then(|w| Linear::new(&w)).map_err(&e);
                let qkv_w = a.pp("qkv_proj").get((q_size + 2 * kv_size, h), "weight").map_err(&e)?;
                let gate_up_w = m.pp("gate_up_proj").get((2 * i, h), "weight").map_err(&e)?;
                (
                    part(&qkv_w, 0, q_size)?,
                    part(&qkv_w, q_size, kv_size)?,
                    part(&qkv_w, q_size + kv_size, kv_size)?,
                    part(&gate_up_w, 0, i)?,
                    part(&gate_up_w, i, i)?,
                )
            } else {
                (
                    qkv(h, q_size, a.pp("q_proj"))?,
                    qkv(h, kv_size, a.pp("k_proj"))?,
                    qkv(h, kv_size, a.pp("v_proj"))?,
                    lin(h, i, m.pp("gate_proj"))?,
                    lin(h, i, m.pp("up_proj"))?,
                )
            };
            layers.push(Layer {
                attn_norm: candle_nn::rms_norm(h, cfg.rms_norm_eps, vb.pp("input_layernorm")).map_err(&e)?,
                attn: Attention { qkv: Qkv::Split { q, k, v }, o: lin(q_size, h, a.pp("o_proj"))? },
                mlp_norm: candle_nn::rms_norm(h, cfg.rms_norm_eps, vb.pp("post_attention_layernorm")).map_err(&e)?,
                mlp: Mlp { gate_up: GateUp::Split { gate, up }, down: lin(i, h, m.pp("down_proj"))? },
            });
        }
        let (cos, sin) = rotary_tables(&cfg.inv_freq, cfg.max_positions, dtype, device).map_err(&e)?;
        let max = cfg.max_positions;
        Ok(BatchNet {
            embed,
            layers,
            norm,
            head,
            cos,
            sin,
            heads: cfg.heads,
            kv_heads: cfg.kv_heads,
            head_dim,
            vocab_size: cfg.vocab_size,
            max_positions: max,
            dtype,
            rope_interleaved: false,
            batched_decode: !device.is_cpu(),
            half_kv: false,
        })
    }

    /// [`attend`](Self::attend) on the CPU: `q`, `k`, `v` `(heads or kv_heads, n, head_dim)`
    /// rotated, appended to the cache's rows of `T`; returns `(n, heads · head_dim)`.
    #[allow(clippy::too_many_arguments)]
    fn attend_rows<T: cache::Element>(
        &self,
        q: &[f32],
        k: &[f32],
        v: &[f32],
        n: usize,
        pos: usize,
        past: Option<&LayerKv>,
    ) -> candle_core::Result<(Vec<f32>, LayerKv)> {
        let (d, total) = (self.head_dim, pos + n);
        let rows = LayerKv::append::<T>(past, pos, k, v, self.kv_heads, d, self.max_positions)?;
        let keys: Vec<_> = (0..self.kv_heads).map(|h| rows.keys(h, total)).collect();
        let values: Vec<_> = (0..self.kv_heads).map(|h| rows.values(h, total)).collect();
        let pass = super::attention::Pass { q, keys: &keys, values: &values, heads: self.heads, d, n, pos };
        let y = pass.attend(super::qblocks::has_avx2());
        Ok((y, T::layer(rows)))
    }

    /// The width of a logits row.
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// The longest sequence the network takes.
    pub fn max_positions(&self) -> usize {
        self.max_positions
    }

    /// The device the weights are on.
    pub fn device(&self) -> &Device {
        self.cos.device()
    }

    /// Runs the kinds of pass a server runs (two prefills, their one-token steps together,
    /// one alone) on scratch caches and drops them: on a GPU the first pass loads the kernels
    /// and starts the matrix library, which a server pays here instead of in its first request.
    pub fn warm_up(&self) -> Result<()> {
        let (mut a, mut b) = (KvCache::default(), KvCache::default());
        let t = [TokenId(0), TokenId(0)];
        if self.max_positions < 4 {
            return Ok(());
        }
        self.forward(&mut [BatchRow { cache: &mut a, tokens: &t }, BatchRow { cache: &mut b, tokens: &t }])?;
        self.forward(&mut [BatchRow { cache: &mut a, tokens: &t[..1] }, BatchRow { cache: &mut b, tokens: &t[..1] }])?;
        self.forward(&mut [BatchRow { cache: &mut a, tokens: &t[..1] }]).map(drop)
    }

    /// Appends each row's tokens to its cache and returns, per row, the logits (f32) of the
    /// position after its last token. All rows are checked (at least one token each, ids inside the
    /// vocabulary, the context not overrun) before anything runs; on any error no cache changes.
    pub fn forward(&self, rows: &mut [BatchRow]) -> Result<Vec<Vec<f32>>> {
        self.forward_tail(rows, 1)
    }

    /// [`forward`](Self::forward), returning the logits after each of the last `tail` tokens of
    /// every row (each row holds at least `tail`), row by row in order: what verifies a
    /// speculative draft in one pass.
    pub fn forward_tail(&self, rows: &mut [BatchRow], tail: usize) -> Result<Vec<Vec<f32>>> {
        self.forward_tails(rows, &vec![tail; rows.len()])
    }

    /// [`forward`](Self::forward) with row `r`'s logits after each of its last `tails[r]` tokens,
    /// all rows' in order (a server's batch where some sequences verify drafts).
    pub fn forward_tails(&self, rows: &mut [BatchRow], tails: &[usize]) -> Result<Vec<Vec<f32>>> {
        if tails.len() != rows.len() {
            return Err(Error::param("one tail per row"));
        }
        for (r, &tail) in rows.iter().zip(tails) {
            check_row(r.cache.pos, r.tokens, self.vocab_size, self.max_positions)?;
            if r.tokens.len() < tail || tail == 0 {
                return Err(Error::param(format!("{} tokens cannot give {tail} rows of logits", r.tokens.len())));
            }
        }
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let e = candle_err("batched forward pass");
        let run = || self.pass(rows, tails).and_then(|(x, new)| Ok((self.head.forward(&x)?, new)));
        let (logits, new) = run_pass(self.device(), run).map_err(&e)?;
        let logits = logits.to_dtype(DType::F32).and_then(|t| t.to_vec2::<f32>()).map_err(&e)?;
        for (r, layers) in rows.iter_mut().zip(new) {
            r.cache.layers = layers;
            r.cache.pos += r.tokens.len();
        }
        Ok(logits)
    }

    /// [`forward_tail`](Self::forward_tail) for one row, stopping before the output head: the
    /// last `tail` positions' final hidden states `(tail, hidden)`, for
    /// [`head_row`](Self::head_row) to turn into logits when (and if) they are wanted.
    pub fn forward_hidden(&self, row: &mut BatchRow, tail: usize) -> Result<Tensor> {
        check_row(row.cache.pos, row.tokens, self.vocab_size, self.max_positions)?;
        if row.tokens.len() < tail || tail == 0 {
            return Err(Error::param(format!("{} tokens cannot give {tail} rows of logits", row.tokens.len())));
        }
        let e = candle_err("batched forward pass");
        let rows = std::slice::from_ref(row);
        let run = || self.pass(rows, &[tail]);
        let (x, mut new) = run_pass(self.device(), run).map_err(&e)?;
        row.cache.layers = new.pop().expect("one row");
        row.cache.pos += row.tokens.len();
        Ok(x)
    }

    /// The logits (f32) of row `i` of hidden states from [`forward_hidden`](Self::forward_hidden).
    pub fn head_row(&self, hidden: &Tensor, i: usize) -> Result<Vec<f32>> {
        let e = candle_err("output head");
        let run = || self.head.forward(&hidden.narrow(0, i, 1)?)?.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>();
        run_pass(self.device(), run).map_err(e)
    }

    /// The pass itself, up to the output head: the final hidden states (normed) of each row's
    /// last `tails[r]` positions, row after row, and each row's new cache layers.
    #[allow(clippy::type_complexity)]
    fn pass(&self, rows: &[BatchRow], tails: &[usize]) -> candle_core::Result<(Tensor, Vec<Vec<LayerKv>>)> {
        let device = self.cos.device();
        let ids: Vec<u32> = rows.iter().flat_map(|r| r.tokens.iter().map(|t| t.0)).collect();
        let ids = Tensor::new(ids.as_slice(), device)?;
        // (tokens of all rows, hidden): row r's tokens are rows `offsets[r]..offsets[r] + len`.
        let mut x = self.embed.forward(&ids)?;
        let mut offsets = Vec::with_capacity(rows.len());
        let mut total = 0;
        for r in rows {
            offsets.push(total);
            total += r.tokens.len();
        }
        let mut new: Vec<Vec<LayerKv>> = rows.iter().map(|_| Vec::with_capacity(self.layers.len())).collect();
        let decode = if self.batched_decode { decode::DecodeRows::new(self, rows, &offsets)? } else { None };
        let (q_size, kv_size) = (self.heads * self.head_dim, self.kv_heads * self.head_dim);
        for (l, layer) in self.layers.iter().enumerate() {
            let h = layer.attn_norm.forward(&x)?;
            let (q, k, v) = match &layer.attn.qkv {
                Qkv::Split { q, k, v } => (q.forward(&h)?, k.forward(&h)?, v.forward(&h)?),
                Qkv::Fused(qkv) => {
                    let y = qkv.forward(&h)?;
                    (y.narrow(1, 0, q_size)?, y.narrow(1, q_size, kv_size)?, y.narrow(1, q_size + kv_size, kv_size)?)
                }
            };
            // Attention output: the one-token rows' (together) first, then the others' in turn.
            let mut outs = Vec::with_capacity(rows.len());
            if let Some(dec) = &decode {
                let (y, kv) = self.attend_decode(&q, &k, &v, dec, rows, l)?;
                outs.push(y);
                for (&i, (k, v)) in dec.rows.iter().zip(kv) {
                    new[i].push(LayerKv::Tensors(k, v));
                }
            }
            for (i, r) in rows.iter().enumerate() {
                if decode.as_ref().is_some_and(|d| d.takes(i)) {
                    continue;
                }
                let (off, n) = (offsets[i], r.tokens.len());
                let past = r.cache.layers.get(l);
                let (y, kv) = self.attend(&q, &k, &v, off, n, r.cache.pos, past)?;
                outs.push(y);
                new[i].push(kv);
            }
            let y = Tensor::cat(&outs, 0)?;
            let y = match decode.as_ref().and_then(|d| d.order.as_ref()) {
                Some(order) => y.index_select(order, 0)?,
                None => y,
            };
            x = (layer.attn.o.forward(&y)? + &x)?;
            let h = layer.mlp_norm.forward(&x)?;
            let m = &layer.mlp;
            let (gate, up) = match &m.gate_up {
                GateUp::Split { gate, up } => (gate.forward(&h)?, up.forward(&h)?),
                GateUp::Fused(gate_up) => {
                    let y = gate_up.forward(&h)?;
                    let i = y.dim(1)? / 2;
                    (y.narrow(1, 0, i)?, y.narrow(1, i, i)?)
                }
            };
            let h = (candle_nn::ops::silu(&gate)? * up)?;
            x = (m.down.forward(&h)? + &x)?;
        }
        let last: Vec<u32> = rows
            .iter()
            .zip(&offsets)
            .zip(tails)
            .flat_map(|((r, &o), &tail)| (o + r.tokens.len() - tail..o + r.tokens.len()).map(|i| i as u32))
            .collect();
        let last = Tensor::new(last.as_slice(), device)?;
        Ok((self.norm.forward(&x.index_select(&last, 0)?)?, new))
    }

    /// Attention for one sequence: rows `off..off + n` of the projections, at positions
    /// `pos..pos + n`, over its `past` keys and values. Returns its output rows `(n, heads ·
    /// head_dim)` and its layer with the new keys and values appended.
    #[allow(clippy::too_many_arguments)]
    fn attend(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        off: usize,
        n: usize,
        pos: usize,
        past: Option<&LayerKv>,
    ) -> candle_core::Result<(Tensor, LayerKv)> {
        let d = self.head_dim;
        // (1, heads, n, head_dim)
        let split = |t: &Tensor, heads: usize| {
            t.narrow(0, off, n)?.contiguous()?.reshape((1, n, heads, d))?.transpose(1, 2)?.contiguous()
        };
        let cos = self.cos.narrow(0, pos, n)?;
        let sin = self.sin.narrow(0, pos, n)?;
        let rope = if self.rope_interleaved { candle_nn::rotary_emb::rope_i } else { candle_nn::rotary_emb::rope };
        let q = rope(&split(q, self.heads)?, &cos, &sin)?;
        let k = rope(&split(k, self.kv_heads)?, &cos, &sin)?;
        let v = split(v, self.kv_heads)?;
        let total = pos + n;
        if q.device().is_cpu() {
            // On the CPU: the new keys and values appended to the cache's own rows (in place,
            // see `cache`), and attention in plain loops (see `attention`: fewer ops than tensor
            // attention, only the keys a row sees, no `n × total` scores or mask held, and the
            // same bits however the tokens were grouped into passes).
            let f32s = |t: &Tensor| t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>();
            let (q, k, v) = (f32s(&q)?, f32s(&k)?, f32s(&v)?);
            let (y, kv) = if self.half_kv {
                self.attend_rows::<half::f16>(&q, &k, &v, n, pos, past)?
            } else {
                self.attend_rows::<f32>(&q, &k, &v, n, pos, past)?
            };
            let y = Tensor::from_vec(y, (n, self.heads * d), &Device::Cpu)?.to_dtype(self.dtype)?;
            return Ok((y, kv));
        }
        let (mut k, mut v) = (k, v);
        if let Some(past) = past {
            let (pk, pv) = past.tensors(pos, self.dtype, q.device())?;
            k = Tensor::cat(&[&pk, &k], 2)?;
            v = Tensor::cat(&[&pv, &v], 2)?;
        }
        let kv = LayerKv::Tensors(k.clone(), v.clone());
        // Grouped-query attention: query head h reads key/value head h / group. The `group`
        // query heads of one key/value head are stacked into one matrix of `group · n` rows,
        // so each key/value head is multiplied as it is, never copied `group` times.
        let group = self.heads / self.kv_heads;
        let (k, v) = (k.to_dtype(DType::F32)?, v.to_dtype(DType::F32)?);
        if n > 1 && pos > 0 {
            // After the first pass, each new row is attended on its own, exactly as a pass of
            // that one token would (the same shapes and strides within each matrix): a row's logits
            // then do not depend on how tokens were grouped into passes, so a speculative draft
            // verified in one pass gives the very logits of one-token steps (see
            // `decode::speculate`). A prefill from an empty cache is one masked matmul.
            let q = q.to_dtype(DType::F32)?;
            let mut ys = Vec::with_capacity(n);
            for i in 0..n {
                let len = pos + i + 1;
                let qi = q.narrow(2, i, 1)?.contiguous()?.reshape((1, self.kv_heads, group, d))?;
                // Views (the matrices' own strides are those of a one-token pass's cache).
                let ki = k.narrow(2, 0, len)?;
                let vi = v.narrow(2, 0, len)?;
                let att = (qi.matmul(&ki.t()?)? / (d as f64).sqrt())?;
                let att = candle_nn::ops::softmax_last_dim(&att)?;
                ys.push(att.matmul(&vi)?.to_dtype(self.dtype)?.reshape((1, self.heads, 1, d))?);
            }
            let y = Tensor::cat(&ys, 2)?.transpose(1, 2)?.reshape((n, self.heads * d))?;
            return Ok((y, kv));
        }
        let q = q.to_dtype(DType::F32)?.reshape((1, self.kv_heads, group * n, d))?;
        let mut att = (q.matmul(&k.t()?)? / (d as f64).sqrt())?;
        if n > 1 {
            // New row i (position pos + i) must not see keys past it; rows are (head, i) pairs.
            let mask: Vec<f32> = (0..group * n)
                .flat_map(|r| (0..total).map(move |j| if j > pos + r % n { f32::NEG_INFINITY } else { 0.0 }))
                .collect();
            let mask = Tensor::from_vec(mask, (group * n, total), att.device())?;
            att = att.broadcast_add(&mask)?;
        }
        let att = candle_nn::ops::softmax_last_dim(&att)?;
        let y = att.matmul(&v)?.to_dtype(self.dtype)?.reshape((1, self.heads, n, d))?;
        let y = y.transpose(1, 2)?.reshape((n, self.heads * d))?;
        Ok((y, kv))
    }
}

/// The rotary tables `(cos, sin)`, `(max_positions, frequencies)`: row `p` holds position `p`'s
/// angles.
pub(super) fn rotary_tables(
    freqs: &[f32],
    max_positions: usize,
    dtype: DType,
    device: &Device,
) -> candle_core::Result<(Tensor, Tensor)> {
    let half = freqs.len();
    let angles: Vec<f32> = (0..max_positions).flat_map(|p| freqs.iter().map(move |f| p as f32 * f)).collect();
    let angles = Tensor::from_vec(angles, (max_positions, half), device)?;
    Ok((angles.cos()?.to_dtype(dtype)?, angles.sin()?.to_dtype(dtype)?))
}

impl std::fmt::Debug for BatchNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "BatchNet({} layers, {} heads ({} kv) of {}, {:?})",
            self.layers.len(),
            self.heads,
            self.kv_heads,
            self.head_dim,
            self.dtype
        )
    }
}
