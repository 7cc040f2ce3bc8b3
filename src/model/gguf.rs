//! GGUF models, as llama.cpp, Ollama and LM Studio keep them: one file with the quantized
//! weights, the tokenizer and the chat template.
//!
//! ```text
//!  model.gguf ─┬─ general.architecture ──── llama (also Mistral's files) · qwen2 · phi3
//!              ├─ tensors (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, F16, F32, ...) ─▶ BatchNet:
//!              │    projections stay quantized (QBlocks or candle's QMatMul), activations f32
//!              ├─ tokenizer.ggml.* ───────── GgufTokenizer ─┬─ Vocab (byte-exact)
//!              │                                            └─ PromptFormat (BOS, add_bos)
//!              └─ tokenizer.chat_template ── ChatTemplate
//! ```
//!
//! The network is the crate's own [`BatchNet`] (the one the server batches with), loaded from
//! llama.cpp's tensor names: `token_embd`, `blk.N.attn_{q,k,v,output}` (or phi3's fused
//! `attn_qkv`), q/k/v biases where present (qwen2), `ffn_{gate,up,down}` (or phi3's fused
//! `ffn_up`), the norms, `output` (or the embedding, tied). Llama GGUFs rotate interleaved pairs
//! (llama.cpp's converter permuted their q/k rows for it), qwen2 and phi3 the halves; Llama
//! 3.1's `rope_freqs` factors divide the rotary frequencies, as llama.cpp applies them. So a
//! GGUF model forks and checkpoints like any other, and a server batches its sequences.
//!
//! [`load`] reads the header (metadata and tensor table) first and refuses, with an error that
//! names the problem, what it would not run exactly: another architecture, a tensor type candle
//! cannot read, mixture-of-experts, partial rotary embeddings, Phi-3's LongRoPE
//! (`rope_factors_*`) or a linear/YaRN `rope.scaling`.
//!
//! What differs from a safetensors model (see [`CandleModel`]):
//! - the precision is f32 (the weights stay in their quantized form; `--dtype` other than f32
//!   is an error), but the KV cache on the CPU holds half floats, as llama.cpp's does by
//!   default (`BatchNet::half_kv`: half the bytes for a long context's decode step to read);
//! - on the CPU, weights of ggml's 32-value block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) are
//!   multiplied as stored by this crate's own kernels ([`super::qblocks`]: candle has SIMD
//!   kernels for Q4_0 and Q8_0 only, and its fastest need inner sizes that are multiples of
//!   256); the K-quants and float types by candle's `QMatMul`;
//! - generation defaults (sampling knobs) are those of [`GenerationDefaults::default`]: a GGUF
//!   file carries no `generation_config.json`. Its EOS ids are `eos_token_id` and the
//!   end-of-turn ids.

use std::collections::BTreeMap;
use std::io::{BufReader, Read, Seek};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{DType, Device, Tensor};
use candle_nn::{Embedding, RmsNorm};

use super::batch::{plain_inv_freq, rotary_tables, Attention, BatchNet, GateUp, Layer, Linear, Mlp, Qkv};
use super::candle_error::candle_msg;
use super::chat::ChatTemplate;
use super::config::Arch;
use super::net::CandleModel;
use super::prompt::{GenerationDefaults, PromptFormat};
use super::qblocks::QBlocks;
use super::{LoadOptions, LoadedModel, ModelInfo, Precision};
use crate::error::{Error, Result};
use crate::vocab::GgufTokenizer;

/// Does `path` start with the GGUF magic?
pub fn is_gguf(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic)).is_ok() && &magic == b"GGUF"
}

/// The `.gguf` file of a directory that holds exactly one (and no config.json); `None` if it
/// holds none; an error naming them if it holds several.
pub fn find_in_dir(dir: &Path) -> Result<Option<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::Io { path: dir.display().to_string(), source: e })?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x.eq_ignore_ascii_case("gguf")))
        .collect();
    found.sort();
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop()),
        _ => Err(Error::model(format!(
            "{} holds several GGUF files ({}): pass one of them with --model",
            dir.display(),
            found.iter().filter_map(|p| p.file_name()).map(|n| n.to_string_lossy()).collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// llama.cpp's name for a tensor type.
pub fn dtype_name(t: GgmlDType) -> &'static str {
    match t {
        GgmlDType::F32 => "F32",
        GgmlDType::F16 => "F16",
        GgmlDType::BF16 => "BF16",
        GgmlDType::Q4_0 => "Q4_0",
        GgmlDType::Q4_1 => "Q4_1",
        GgmlDType::Q5_0 => "Q5_0",
        GgmlDType::Q5_1 => "Q5_1",
        GgmlDType::Q8_0 => "Q8_0",
        GgmlDType::Q8_1 => "Q8_1",
        GgmlDType::Q2K => "Q2_K",
        GgmlDType::Q3K => "Q3_K",
        GgmlDType::Q4K => "Q4_K",
        GgmlDType::Q5K => "Q5_K",
        GgmlDType::Q6K => "Q6_K",
        GgmlDType::Q8K => "Q8_K",
    }
}

/// ggml's tensor type numbers candle does not read, by name (for the error).
fn unknown_type_name(n: u32) -> &'static str {
    match n {
        4 | 5 => "Q4_2/Q4_3 (removed from ggml)",
        16 => "IQ2_XXS",
        17 => "IQ2_XS",
        18 => "IQ3_XXS",
        19 => "IQ1_S",
        20 => "IQ4_NL",
        21 => "IQ3_S",
        22 => "IQ2_S",
        23 => "IQ4_XS",
        24 => "I8",
        25 => "I16",
        26 => "I32",
        27 => "I64",
        28 => "F64",
        29 => "IQ1_M",
        34 => "TQ1_0",
        35 => "TQ2_0",
        39 => "MXFP4",
        _ => "an unknown type",
    }
}

/// The longest context a GGUF may declare (its rotary tables are built for all of it).
pub const MAX_CONTEXT: usize = 1 << 20;

const SUPPORTED_TYPES: &str = "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K";

/// The architectures a GGUF may have, as `general.architecture` names them.
fn arch_of(name: &str) -> Option<Arch> {
    match name {
        // llama.cpp writes Mistral (7B) models as `llama`.
        "llama" => Some(Arch::Llama),
        "qwen2" => Some(Arch::Qwen2),
        "phi3" => Some(Arch::Phi3),
        _ => None,
    }
}

/// Reads the header; errors say what is wrong with the file.
fn read_content<R: Read + Seek>(reader: &mut R, name: &str) -> Result<Content> {
    Content::read(reader).map_err(|e| {
        let msg = candle_msg(&e);
        if let Some(n) = msg.strip_prefix("unknown dtype for tensor ").and_then(|n| n.trim().parse::<u32>().ok()) {
            return Error::model(format!(
                "{name}: unsupported tensor type {} (ggml type {n}); candle reads {SUPPORTED_TYPES} \
                 (re-quantize the model to one of them, e.g. Q4_K_M or Q8_0)",
                unknown_type_name(n)
            ));
        }
        if msg.contains("magic") {
            return Error::model(format!("{name}: not a GGUF file ({msg})"));
        }
        Error::model_from(format!("{name}: cannot read the GGUF header: {msg}"), e)
    })
}

fn meta_u32(v: &Value) -> Option<u32> {
    match v {
        Value::U8(x) => Some(*x as u32),
        Value::I8(x) => u32::try_from(*x).ok(),
        Value::U16(x) => Some(*x as u32),
        Value::I16(x) => u32::try_from(*x).ok(),
        Value::U32(x) => Some(*x),
        Value::I32(x) => u32::try_from(*x).ok(),
        Value::U64(x) => u32::try_from(*x).ok(),
        Value::I64(x) => u32::try_from(*x).ok(),
        _ => None,
    }
}

/// The metadata, read leniently (a key of the wrong type counts as absent, except where
/// [`GgufMeta::strings`] says otherwise).
struct GgufMeta<'a> {
    md: &'a std::collections::HashMap<String, Value>,
    name: &'a str,
}

impl GgufMeta<'_> {
    fn str(&self, key: &str) -> Option<&str> {
        match self.md.get(key) {
            Some(Value::String(s)) => Some(s),
            _ => None,
        }
    }

    fn u32(&self, key: &str) -> Option<u32> {
        self.md.get(key).and_then(meta_u32)
    }

    fn bool(&self, key: &str) -> Option<bool> {
        match self.md.get(key) {
            Some(Value::Bool(b)) => Some(*b),
            _ => None,
        }
    }

    fn f32(&self, key: &str) -> Option<f32> {
        match self.md.get(key) {
            Some(Value::F32(x)) => Some(*x),
            Some(Value::F64(x)) => Some(*x as f32),
            _ => None,
        }
    }

    fn array(&self, key: &str) -> Result<&[Value]> {
        match self.md.get(key) {
            None => Ok(&[]),
            Some(Value::Array(a)) => Ok(a),
            Some(_) => Err(Error::model(format!("{}: {key} is not an array", self.name))),
        }
    }

    fn strings(&self, key: &str) -> Result<Vec<String>> {
        self.array(key)?
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.clone()),
                _ => Err(Error::model(format!("{}: {key} holds a value that is not a string", self.name))),
            })
            .collect()
    }

    fn tokenizer(&self) -> Result<GgufTokenizer> {
        let k = |s: &str| format!("tokenizer.ggml.{s}");
        let token_types = self
            .array(&k("token_type"))?
            .iter()
            .map(|v| match v {
                Value::I32(x) => *x,
                other => meta_u32(other).map_or(0, |x| x as i32),
            })
            .collect();
        let scores = self
            .array(&k("scores"))?
            .iter()
            .map(|v| match v {
                Value::F32(x) => *x,
                Value::F64(x) => *x as f32,
                _ => 0.0,
            })
            .collect();
        Ok(GgufTokenizer {
            model: self.str(&k("model")).unwrap_or_default().to_string(),
            pre: self.str(&k("pre")).map(str::to_string),
            tokens: self.strings(&k("tokens"))?,
            token_types,
            scores,
            merges: self.strings(&k("merges"))?,
            bos: self.u32(&k("bos_token_id")),
            eos: self.u32(&k("eos_token_id")),
            extra_eos: ["eot_token_id", "eom_token_id"].iter().filter_map(|s| self.u32(&k(s))).collect(),
            unk: self.u32(&k("unknown_token_id")),
            add_bos: self.bool(&k("add_bos_token")),
            add_space_prefix: self.bool(&k("add_space_prefix")),
        })
    }
}

/// The vocabulary of a GGUF file's tokenizer (its metadata only; no tensor is read): for
/// compiling constraints against a model's tokens without loading the model.
pub fn vocab(path: &Path) -> Result<crate::vocab::Vocab> {
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| Error::Io { path: name.clone(), source: e })?;
    let content = read_content(&mut BufReader::new(file), &name)?;
    GgufMeta { md: &content.metadata, name: &name }.tokenizer()?.vocab(&name)
}

/// Loads a GGUF file (see the module docs).
pub fn load(path: &Path, opts: &LoadOptions) -> Result<LoadedModel> {
    let name = path.display().to_string();
    if let Some(p) = opts.precision.filter(|&p| p != Precision::F32) {
        return Err(Error::param(format!(
            "{name}: a GGUF model keeps its quantized weights and computes in f32; --dtype {p} applies to \
             safetensors models only"
        )));
    }
    let file = std::fs::File::open(path).map_err(|e| Error::Io { path: name.clone(), source: e })?;
    let mut reader = BufReader::new(file);
    let content = read_content(&mut reader, &name)?;
    let meta = GgufMeta { md: &content.metadata, name: &name };

    // What it is, and whether candle runs it exactly.
    let arch_name = meta.str("general.architecture").unwrap_or("(none)").to_string();
    let arch = arch_of(&arch_name).ok_or_else(|| {
        Error::model(format!(
            "{name}: unsupported GGUF architecture {arch_name:?} (general.architecture); supported: llama \
             (Llama, Mistral, SmolLM, TinyLlama, ...), qwen2, phi3"
        ))
    })?;
    let has = |t: &str| content.tensor_infos.contains_key(t);
    if arch == Arch::Phi3 && (has("rope_factors_long.weight") || has("rope_factors_short.weight")) {
        return Err(Error::model(format!(
            "{name}: this phi3 GGUF uses LongRoPE (rope_factors_*), which candle's quantized phi3 does not \
             apply here (Phi-3-mini-4k works)"
        )));
    }
    if let Some(kind) = meta.str(&format!("{arch_name}.rope.scaling.type")).filter(|k| *k != "none") {
        let factor = meta.f32(&format!("{arch_name}.rope.scaling.factor")).unwrap_or(1.0);
        if factor != 1.0 {
            return Err(Error::model(format!("{name}: rope scaling {kind:?} (factor {factor}) is not supported")));
        }
    }
    if !has("token_embd.weight") {
        return Err(Error::model(format!("{name}: no token_embd.weight tensor")));
    }
    let head = if has("output.weight") { "output.weight" } else { "token_embd.weight" };
    let width = content.tensor_infos[head].shape.dims().first().copied().unwrap_or(0);
    let context = meta.u32(&format!("{arch_name}.context_length")).map_or(usize::MAX, |c| c as usize);
    let max_positions = context;
    if max_positions == 0 || max_positions > MAX_CONTEXT {
        return Err(Error::model(format!(
            "{name}: {arch_name}.context_length must be between 1 and {MAX_CONTEXT}, got {}",
            meta.u32(&format!("{arch_name}.context_length")).map_or("none".into(), |c| c.to_string())
        )));
    }
    let dims = Dims::read(&meta, &arch_name)?;
    let layers = dims.layers;
    let parameters = content.tensor_infos.values().map(|t| t.shape.elem_count()).sum();
    let quantization = quantization(&content);

    // The tokenizer and chat template.
    let tok = meta.tokenizer()?;
    // Started first: the vocabulary's tables build while the weights load.
    let env = super::prepared_env(Arc::new(tok.vocab(&name)?));
    let tokenizer = tok.tokenizer(&name)?;
    let token_name = |id: Option<u32>| id.and_then(|i| tok.token(i)).map(str::to_string);
    let tokenizer_config = serde_json::json!({
        "bos_token": token_name(tok.bos),
        "eos_token": token_name(tok.eos),
        "add_bos_token": tok.add_bos(),
    });
    let template = match meta.str("tokenizer.chat_template") {
        Some(src) => Some(ChatTemplate::new(src, &format!("{name} (tokenizer.chat_template)"))?),
        None => None,
    };
    let prompt = PromptFormat::new(tokenizer, Some(&tokenizer_config), None, template)?;
    let defaults = GenerationDefaults {
        eos: tok.eos_ids().into_iter().map(crate::vocab::TokenId).collect(),
        ..GenerationDefaults::default()
    };

    // The network.
    let device = opts.device.open()?;
    let net = build_net(&content, &mut reader, arch, &dims, max_positions, &device, &name)?;
    debug_assert_eq!(net.vocab_size(), width);
    let model = CandleModel::from_batch_net(net, arch);
    let file_name = path.file_name().map_or_else(|| name.clone(), |n| n.to_string_lossy().into_owned());
    let model_name = file_name.strip_suffix(".gguf").unwrap_or(&file_name).to_string();
    let info = ModelInfo {
        name: model_name,
        arch,
        parameters,
        layers,
        vocab_size: width,
        max_positions,
        device: opts.device,
        precision: Precision::F32,
        quantization: Some(quantization),
    };
    Ok(LoadedModel { model, env, prompt, defaults, info })
}

/// The dimensions and options of a GGUF network, from its metadata.
struct Dims {
    hidden: usize,
    layers: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    eps: f64,
    theta: f64,
}

impl Dims {
    fn read(meta: &GgufMeta, arch: &str) -> Result<Dims> {
        let get = |k: &str| -> Result<usize> {
            match meta.u32(&format!("{arch}.{k}")) {
                Some(n) if n > 0 && n <= 1 << 20 => Ok(n as usize),
                Some(n) => Err(Error::model(format!("{}: {arch}.{k} = {n} is out of range", meta.name))),
                None => Err(Error::model(format!("{}: no {arch}.{k} in the metadata", meta.name))),
            }
        };
        let hidden = get("embedding_length")?;
        let heads = get("attention.head_count")?;
        let kv_heads = if meta.u32(&format!("{arch}.attention.head_count_kv")).is_some() {
            get("attention.head_count_kv")?
        } else {
            heads
        };
        let head_dim = if meta.u32(&format!("{arch}.attention.key_length")).is_some() {
            get("attention.key_length")?
        } else {
            hidden / heads
        };
        let bad = |msg: String| Err(Error::model(format!("{}: {msg}", meta.name)));
        if heads % kv_heads != 0 || head_dim % 2 != 0 {
            return bad(format!("{heads} heads of {head_dim} with {kv_heads} key/value heads do not fit"));
        }
        if let Some(rope) = meta.u32(&format!("{arch}.rope.dimension_count")).filter(|&r| r as usize != head_dim) {
            return bad(format!("partial rotary embeddings ({rope} of {head_dim} dimensions) are not supported"));
        }
        if meta.u32(&format!("{arch}.expert_count")).is_some_and(|n| n > 1) {
            return bad("mixture-of-experts models are not supported".into());
        }
        Ok(Dims {
            hidden,
            layers: get("block_count")?,
            heads,
            kv_heads,
            head_dim,
            eps: meta.f32(&format!("{arch}.attention.layer_norm_rms_epsilon")).unwrap_or(1e-5) as f64,
            theta: meta.f32(&format!("{arch}.rope.freq_base")).unwrap_or(10_000.0) as f64,
        })
    }
}

/// Reads the tensors into a [`BatchNet`]: projections stay quantized (on the CPU, the block
/// types in [`QBlocks`], the rest in candle's `QMatMul`), the embedding and the norms are
/// dequantized to f32.
#[allow(clippy::too_many_arguments)]
fn build_net<R: Read + Seek>(
    content: &Content,
    reader: &mut R,
    arch: Arch,
    dims: &Dims,
    max_positions: usize,
    device: &Device,
    name: &str,
) -> Result<BatchNet> {
    let err =
        |what: &str, e: candle_core::Error| Error::model_from(format!("{name}: tensor {what}: {}", candle_msg(&e)), e);
    let reader = std::cell::RefCell::new(reader);
    let qtensor = |t: &str| -> Result<QTensor> {
        if !content.tensor_infos.contains_key(t) {
            return Err(Error::model(format!("{name}: no tensor {t} (a {arch} GGUF has one)")));
        }
        content.tensor(&mut *reader.borrow_mut(), t, device).map_err(|e| err(t, e))
    };
    let Dims { hidden, layers, heads, kv_heads, head_dim, eps, theta } = *dims;
    let (q_size, kv_size) = (heads * head_dim, kv_heads * head_dim);
    // (out, in) as candle reads GGUF shapes.
    let check = |t: &str, q: &QTensor, shape: &[usize]| -> Result<()> {
        if q.shape().dims() != shape {
            return Err(Error::model(format!(
                "{name}: tensor {t} has shape {:?}, expected {shape:?}",
                q.shape().dims()
            )));
        }
        Ok(())
    };
    let has = |t: &str| content.tensor_infos.contains_key(t);
    let dense = |t: &str, q: QTensor| q.dequantize(device).map_err(|e| err(t, e));
    let matmul = |t: &str, w: QTensor, bias: Option<Tensor>| -> Result<Linear> {
        if device.is_cpu() {
            if let Some(blocks) = QBlocks::from_qtensor(&w).map_err(|e| err(t, e))? {
                return Ok(Linear::blocks(blocks, bias));
            }
        }
        Ok(Linear::quantized(QMatMul::from_qtensor(w).map_err(|e| err(t, e))?, bias))
    };
    let linear = |t: &str, outputs: usize, inputs: usize, bias: Option<&str>| -> Result<Linear> {
        let w = qtensor(t)?;
        check(t, &w, &[outputs, inputs])?;
        let bias = match bias.filter(|b| has(b)) {
            Some(b) => {
                let q = qtensor(b)?;
                check(b, &q, &[outputs])?;
                Some(dense(b, q)?)
            }
            None => None,
        };
        matmul(t, w, bias)
    };
    let norm = |t: &str| -> Result<RmsNorm> {
        let q = qtensor(t)?;
        check(t, &q, &[hidden])?;
        Ok(RmsNorm::new(dense(t, q)?, eps))
    };

    let embd = qtensor("token_embd.weight")?;
    let vocab = embd.shape().dims().first().copied().unwrap_or(0);
    check("token_embd.weight", &embd, &[vocab, hidden])?;
    let embed = Embedding::new(dense("token_embd.weight", embd)?, hidden);
    let head = if has("output.weight") { "output.weight" } else { "token_embd.weight" };
    let head = linear(head, vocab, hidden, None)?;
    let final_norm = norm("output_norm.weight")?;
    let mut blocks = Vec::with_capacity(layers);
    for n in 0..layers {
        let p = |s: &str| format!("blk.{n}.{s}");
        let qkv = if has(&p("attn_qkv.weight")) {
            Qkv::Fused(linear(&p("attn_qkv.weight"), q_size + 2 * kv_size, hidden, Some(&p("attn_qkv.bias")))?)
        } else {
            Qkv::Split {
                q: linear(&p("attn_q.weight"), q_size, hidden, Some(&p("attn_q.bias")))?,
                k: linear(&p("attn_k.weight"), kv_size, hidden, Some(&p("attn_k.bias")))?,
                v: linear(&p("attn_v.weight"), kv_size, hidden, Some(&p("attn_v.bias")))?,
            }
        };
        let down = qtensor(&p("ffn_down.weight"))?;
        let inter = down.shape().dims().get(1).copied().unwrap_or(0);
        check(&p("ffn_down.weight"), &down, &[hidden, inter])?;
        let down = matmul(&p("ffn_down.weight"), down, None)?;
        let gate_up = if has(&p("ffn_gate.weight")) {
            GateUp::Split {
                gate: linear(&p("ffn_gate.weight"), inter, hidden, None)?,
                up: linear(&p("ffn_up.weight"), inter, hidden, None)?,
            }
        } else {
            // Phi-3: ffn_up holds the gate's rows, then up's.
            GateUp::Fused(linear(&p("ffn_up.weight"), 2 * inter, hidden, None)?)
        };
        blocks.push(Layer {
            attn_norm: norm(&p("attn_norm.weight"))?,
            attn: Attention { qkv, o: linear(&p("attn_output.weight"), hidden, q_size, None)? },
            mlp_norm: norm(&p("ffn_norm.weight"))?,
            mlp: Mlp { gate_up, down },
        });
    }
    let mut inv_freq = plain_inv_freq(theta, head_dim);
    if has("rope_freqs.weight") {
        // Llama 3.1's long-context scaling, as factors that divide the frequencies.
        let t = "rope_freqs.weight";
        let factors = qtensor(t)?;
        check(t, &factors, &[head_dim / 2])?;
        let factors = dense(t, factors)?.to_vec1::<f32>().map_err(|e| err(t, e))?;
        for (f, d) in inv_freq.iter_mut().zip(factors) {
            *f /= d;
        }
    }
    let (cos, sin) =
        rotary_tables(&inv_freq, max_positions, DType::F32, device).map_err(|e| err("rotary tables", e))?;
    Ok(BatchNet {
        embed,
        layers: blocks,
        norm: final_norm,
        head,
        cos,
        sin,
        heads,
        kv_heads,
        head_dim,
        vocab_size: vocab,
        max_positions,
        dtype: DType::F32,
        // llama.cpp's converter permutes llama's q/k rows for the interleaved rotation.
        rope_interleaved: arch == Arch::Llama,
        batched_decode: !device.is_cpu(),
        // Half the bytes for a long context's decode step to read; llama.cpp's default too.
        half_kv: true,
    })
}

/// The weights' types, most parameters first: `Q4_1 (Q4_1 ×210, Q8_0 ×1, F32 ×61)`.
fn quantization(content: &Content) -> String {
    let mut by_type: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for t in content.tensor_infos.values() {
        let e = by_type.entry(dtype_name(t.ggml_dtype)).or_default();
        e.0 += 1;
        e.1 += t.shape.elem_count();
    }
    let mut list: Vec<(&str, (usize, usize))> = by_type.into_iter().collect();
    list.sort_by_key(|e| std::cmp::Reverse(e.1 .1));
    let main = list.iter().find(|(n, _)| !n.starts_with('F')).or(list.first()).map_or("?", |(n, _)| n);
    let all: Vec<String> = list.iter().map(|(n, (c, _))| format!("{n} ×{c}")).collect();
    format!("{main} ({})", all.join(", "))
}
