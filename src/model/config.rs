//! `config.json`: which architecture, its dimensions, and the tensors its weights must hold.
//!
//! The architecture comes from `model_type` (or, failing that, `architectures[0]`). The
//! dimensions are read here once, independently of candle's own config structs, so that the
//! weights can be checked ([`ArchConfig::expected_tensors`]) before candle sees them: candle's
//! loaders assume every tensor is present (the llama one panics when one is not).

use serde_json::Value;

use crate::error::{Error, Result};

/// The architectures we can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// Llama 1/2/3, TinyLlama, the stories260K checkpoints: `LlamaForCausalLM`.
    Llama,
    /// Qwen2 and Qwen2.5: `Qwen2ForCausalLM` (biases on q/k/v).
    Qwen2,
    /// Mistral: `MistralForCausalLM` (sliding-window attention).
    Mistral,
    /// Phi-3: `Phi3ForCausalLM` (fused qkv and gate/up projections).
    Phi3,
}

impl Arch {
    pub const ALL: [Arch; 4] = [Arch::Llama, Arch::Qwen2, Arch::Mistral, Arch::Phi3];

    /// The `model_type` in config.json.
    pub fn model_type(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Mistral => "mistral",
            Arch::Phi3 => "phi3",
        }
    }

    /// The `architectures` entry in config.json.
    pub fn class_name(self) -> &'static str {
        match self {
            Arch::Llama => "LlamaForCausalLM",
            Arch::Qwen2 => "Qwen2ForCausalLM",
            Arch::Mistral => "MistralForCausalLM",
            Arch::Phi3 => "Phi3ForCausalLM",
        }
    }

    fn detect(cfg: &Value) -> Option<Arch> {
        let by_type = cfg.get("model_type").and_then(Value::as_str);
        let by_class = cfg.get("architectures").and_then(|a| a.get(0)).and_then(Value::as_str);
        Arch::ALL
            .into_iter()
            .find(|a| by_type == Some(a.model_type()))
            .or_else(|| Arch::ALL.into_iter().find(|a| by_class == Some(a.class_name())))
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.model_type())
    }
}

/// What config.json says, as far as loading needs it. `raw` is the file itself, handed on to
/// candle's config structs.
#[derive(Debug, Clone)]
pub struct ArchConfig {
    pub arch: Arch,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    pub vocab_size: usize,
    pub max_positions: usize,
    /// `tie_word_embeddings` (the output projection is the embedding matrix).
    pub tied: bool,
    pub raw: Value,
}

/// The most layers, heads and so on we believe (a typo'd config must not allocate the world).
const MAX_DIM: usize = 1 << 20;

impl ArchConfig {
    /// Reads config.json's text; `name` (a path) goes into error messages.
    pub fn parse(text: &[u8], name: &str) -> Result<ArchConfig> {
        let err = |msg: String| Error::model(format!("{name}: {msg}"));
        let raw: Value = serde_json::from_slice(text).map_err(|e| err(format!("not valid JSON: {e}")))?;
        if !raw.is_object() {
            return Err(err("not a JSON object".into()));
        }
        let arch = Arch::detect(&raw).ok_or_else(|| {
            let what = raw
                .get("model_type")
                .or_else(|| raw.get("architectures").and_then(|a| a.get(0)))
                .map_or_else(|| "no model_type".to_string(), |v| format!("model_type {v}"));
            err(format!(
                "unsupported architecture ({what}); supported: {}",
                Arch::ALL.iter().map(|a| a.model_type()).collect::<Vec<_>>().join(", ")
            ))
        })?;
        let get = |key: &str| -> Result<usize> {
            match raw.get(key) {
                Some(v) => match v.as_u64() {
                    Some(n) if n > 0 && (n as usize) <= MAX_DIM => Ok(n as usize),
                    _ => Err(err(format!("{key} must be a positive integer up to {MAX_DIM}, got {v}"))),
                },
                None => Err(err(format!("{key} is missing"))),
            }
        };
        let hidden_size = get("hidden_size")?;
        let num_heads = get("num_attention_heads")?;
        let num_kv_heads = if raw.get("num_key_value_heads").is_some_and(|v| !v.is_null()) {
            get("num_key_value_heads")?
        } else {
            num_heads
        };
        if num_heads % num_kv_heads != 0 {
            return Err(err(format!(
                "num_attention_heads ({num_heads}) is not a multiple of num_key_value_heads ({num_kv_heads})"
            )));
        }
        let natural = hidden_size / num_heads;
        let head_dim = if raw.get("head_dim").is_some_and(|v| !v.is_null()) { get("head_dim")? } else { natural };
        if head_dim != natural && arch != Arch::Mistral {
            return Err(err(format!(
                "head_dim {head_dim} differs from hidden_size / num_attention_heads = {natural}, which {arch} \
                 models here do not support"
            )));
        }
        if head_dim % 2 != 0 {
            return Err(err(format!("head_dim must be even for rotary embeddings, got {head_dim}")));
        }
        let tied = match raw.get("tie_word_embeddings") {
            Some(Value::Bool(b)) => *b,
            None | Some(Value::Null) => false,
            Some(v) => return Err(err(format!("tie_word_embeddings must be a boolean, got {v}"))),
        };
        Ok(ArchConfig {
            arch,
            hidden_size,
            intermediate_size: get("intermediate_size")?,
            num_layers: get("num_hidden_layers")?,
            num_heads,
            num_kv_heads,
            head_dim,
            vocab_size: get("vocab_size")?,
            max_positions: get("max_position_embeddings")?,
            tied,
            raw,
        })
    }

    /// Every tensor the architecture loads, with its shape. `lm_head.weight` is listed only
    /// when the model is not tied; [`crate::model`]'s loader handles a missing head on a tied
    /// model.
    pub fn expected_tensors(&self) -> Vec<(String, Vec<usize>)> {
        let (h, i, v) = (self.hidden_size, self.intermediate_size, self.vocab_size);
        let q = self.num_heads * self.head_dim;
        let kv = self.num_kv_heads * self.head_dim;
        let mut out: Vec<(String, Vec<usize>)> =
            vec![("model.embed_tokens.weight".into(), vec![v, h]), ("model.norm.weight".into(), vec![h])];
        if !self.tied {
            out.push(("lm_head.weight".into(), vec![v, h]));
        }
        for l in 0..self.num_layers {
            let p = |s: &str| format!("model.layers.{l}.{s}");
            out.push((p("input_layernorm.weight"), vec![h]));
            out.push((p("post_attention_layernorm.weight"), vec![h]));
            out.push((p("self_attn.o_proj.weight"), vec![h, q]));
            out.push((p("mlp.down_proj.weight"), vec![h, i]));
            match self.arch {
                Arch::Phi3 => {
                    out.push((p("self_attn.qkv_proj.weight"), vec![q + 2 * kv, h]));
                    out.push((p("mlp.gate_up_proj.weight"), vec![2 * i, h]));
                }
                Arch::Llama | Arch::Qwen2 | Arch::Mistral => {
                    out.push((p("self_attn.q_proj.weight"), vec![q, h]));
                    out.push((p("self_attn.k_proj.weight"), vec![kv, h]));
                    out.push((p("self_attn.v_proj.weight"), vec![kv, h]));
                    out.push((p("mlp.gate_proj.weight"), vec![i, h]));
                    out.push((p("mlp.up_proj.weight"), vec![i, h]));
                    if self.arch == Arch::Qwen2 {
                        out.push((p("self_attn.q_proj.bias"), vec![q]));
                        out.push((p("self_attn.k_proj.bias"), vec![kv]));
                        out.push((p("self_attn.v_proj.bias"), vec![kv]));
                    }
                }
            }
        }
        out
    }

    /// Parameters, counted from the expected shapes (the head counted once when tied).
    pub fn parameter_count(&self) -> usize {
        self.expected_tensors().iter().map(|(_, s)| s.iter().product::<usize>()).sum()
    }
}

/// Reads a token id (or the first of a list) from a config value: `eos_token_id: 2` or `[2, 7]`.
pub(crate) fn token_ids(v: Option<&Value>) -> Vec<u32> {
    match v {
        Some(Value::Number(n)) => n.as_u64().map(|n| vec![n as u32]).unwrap_or_default(),
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_u64).map(|n| n as u32).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(extra: &str) -> Result<ArchConfig> {
        let text = format!(
            r#"{{"model_type": "llama", "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 2,
                "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 512,
                "max_position_embeddings": 512 {extra}}}"#
        );
        ArchConfig::parse(text.as_bytes(), "config.json")
    }

    #[test]
    fn reads_dimensions_and_lists_tensors() {
        let c = cfg("").unwrap();
        assert_eq!((c.arch, c.head_dim, c.num_kv_heads, c.tied), (Arch::Llama, 8, 4, false));
        let t = c.expected_tensors();
        assert_eq!(t.len(), 3 + 2 * 9);
        assert!(t.contains(&("model.layers.1.self_attn.k_proj.weight".into(), vec![32, 64])));
        assert!(t.contains(&("lm_head.weight".into(), vec![512, 64])));
        let tied = cfg(r#", "tie_word_embeddings": true"#).unwrap();
        assert!(!tied.expected_tensors().iter().any(|(n, _)| n == "lm_head.weight"));
    }

    #[test]
    fn bad_configs_are_errors_that_say_why() {
        let e = |extra: &str| cfg(extra).unwrap_err().to_string();
        assert!(e(r#", "model_type": "gpt_neox""#).contains("unsupported architecture"));
        assert!(e(r#", "num_key_value_heads": 3"#).contains("not a multiple"));
        assert!(e(r#", "hidden_size": 0"#).contains("hidden_size"));
        assert!(e(r#", "head_dim": 16"#).contains("head_dim"));
        assert!(ArchConfig::parse(b"[1]", "c").unwrap_err().to_string().contains("object"));
        assert!(ArchConfig::parse(b"{", "c").unwrap_err().to_string().contains("JSON"));
    }

    #[test]
    fn token_id_lists() {
        assert_eq!(token_ids(Some(&serde_json::json!(2))), vec![2]);
        assert_eq!(token_ids(Some(&serde_json::json!([2, 7]))), vec![2, 7]);
        assert!(token_ids(None).is_empty());
    }
}
