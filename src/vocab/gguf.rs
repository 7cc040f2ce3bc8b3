//! GGUF tokenizers: a GGUF file's `tokenizer.ggml.*` metadata rebuilt as a Hugging Face
//! `tokenizer.json`, so that a single `.gguf` file is all a model needs.
//!
//! ```text
//!  tokenizer.ggml.model ── gpt2  → BPE over GPT-2 byte-level text: merges as given, the split
//!                       │          regexes of `tokenizer.ggml.pre` (llama.cpp's names), then
//!                       │          ByteLevel (no regex, no prefix space)
//!                       └─ llama → SentencePiece BPE: merges derived from the scores, byte
//!                                  fallback `<0xNN>` pieces, `▁` for spaces (and a prefix
//!                                  space unless `add_space_prefix` is false)
//!  tokenizer.ggml.tokens, token_type ─ CONTROL (and UNKNOWN) ids are special added tokens,
//!                                      USER_DEFINED ids are plain added tokens
//!  bos/eos/eot/eom_token_id, add_bos_token ─ the prompt's BOS and the EOS ids
//! ```
//!
//! The JSON goes through the same loader as a real `tokenizer.json` ([`Vocab`]'s byte-exact
//! spelling and encoder), and `crate::model` builds the prompt tokenizer from it. The file
//! format itself is read above this layer (`model::gguf`, with candle): this module only sees
//! the values, in a [`GgufTokenizer`].
//!
//! Pre-tokenizer names follow llama.cpp (`llama-vocab.cpp`); each maps to the split regexes of
//! the model's original tokenizer (the Hugging Face regex where llama.cpp rewrote one for its
//! own regex engine). An unknown name is an error naming it, never a silent fallback that would
//! tokenize prompts differently from the model's training.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::Vocab;
use crate::error::{Error, Result};

/// llama.cpp's token types (`tokenizer.ggml.token_type`).
pub mod token_type {
    pub const NORMAL: i32 = 1;
    pub const UNKNOWN: i32 = 2;
    pub const CONTROL: i32 = 3;
    pub const USER_DEFINED: i32 = 4;
    pub const UNUSED: i32 = 5;
    pub const BYTE: i32 = 6;
}

/// What a GGUF file's `tokenizer.ggml.*` keys say (absent keys: empty or `None`).
#[derive(Debug, Clone, Default)]
pub struct GgufTokenizer {
    /// `tokenizer.ggml.model`: `gpt2` or `llama`.
    pub model: String,
    /// `tokenizer.ggml.pre`: the pre-tokenizer's name (byte-level BPE only).
    pub pre: Option<String>,
    pub tokens: Vec<String>,
    /// `token_type`, one per token (empty: all normal).
    pub token_types: Vec<i32>,
    /// `scores`, one per token (SentencePiece models need them).
    pub scores: Vec<f32>,
    /// `merges`: `"left right"` strings, highest priority first.
    pub merges: Vec<String>,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    /// Further ids that end a turn (`eot_token_id`, `eom_token_id`).
    pub extra_eos: Vec<u32>,
    pub unk: Option<u32>,
    /// `add_bos_token` (absent: llama.cpp's default for the tokenizer, [`GgufTokenizer::add_bos`]).
    pub add_bos: Option<bool>,
    /// `add_space_prefix` (SentencePiece; absent: true).
    pub add_space_prefix: Option<bool>,
}

/// The GPT-2 split (also the regex inside Hugging Face's `ByteLevel` pre-tokenizer).
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
/// Llama 3 (and DBRX, Smaug, ChatGLM4): numbers in runs of up to three digits.
const LLAMA3: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2 (and StableLM2, Hunyuan): single digits.
const QWEN2: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Mistral's tekken.
const TEKKEN: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The split regexes (applied in turn, each match isolated) and whether whole words found in
/// the vocabulary skip the merges (`ignore_merges`), for a `tokenizer.ggml.pre` name.
fn pre_tokenizer(name: &str) -> Option<(Vec<&'static str>, bool)> {
    Some(match name {
        "gpt-2" | "phi-2" | "mpt" | "olmo" | "jais" | "trillion" | "exaone4" | "granite-docling" => (vec![GPT2], false),
        "starcoder" | "refact" | "command-r" | "smollm" | "codeshell" | "exaone" | "minerva-7b" => {
            (vec![r"\p{N}", GPT2], false)
        }
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0" | "lfm2" => {
            (vec![LLAMA3], true)
        }
        "dbrx" | "smaug-bpe" | "chatglm-bpe" | "glm4" => (vec![LLAMA3], false),
        "qwen2" | "deepseek-r1-qwen" | "megrez" | "stablelm2" | "hunyuan" => (vec![QWEN2], false),
        "tekken" => (vec![TEKKEN], true),
        "falcon" => (vec![r"[\p{P}\$\+<=>\^~\|`]+", GPT2, "[0-9][0-9][0-9]"], false),
        // llama.cpp's own fallback for files that name no pre-tokenizer.
        "default" => (vec![r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", "[0-9][0-9][0-9]"], false),
        _ => return None,
    })
}

/// The pre-tokenizer names [`GgufTokenizer::tokenizer_json`] understands.
pub const SUPPORTED_PRE: &[&str] = &[
    "default",
    "gpt-2",
    "phi-2",
    "mpt",
    "olmo",
    "jais",
    "trillion",
    "exaone4",
    "granite-docling",
    "starcoder",
    "refact",
    "command-r",
    "smollm",
    "codeshell",
    "exaone",
    "minerva-7b",
    "llama3",
    "llama-v3",
    "llama-bpe",
    "falcon3",
    "falcon-h1",
    "pixtral",
    "midm-2.0",
    "lfm2",
    "dbrx",
    "smaug-bpe",
    "chatglm-bpe",
    "glm4",
    "qwen2",
    "deepseek-r1-qwen",
    "megrez",
    "stablelm2",
    "hunyuan",
    "tekken",
    "falcon",
];

impl GgufTokenizer {
    fn err(&self, name: &str, msg: impl Into<String>) -> Error {
        Error::Tokenizer { path: name.to_string(), msg: msg.into() }
    }

    fn token_type(&self, id: usize) -> i32 {
        self.token_types.get(id).copied().unwrap_or(token_type::NORMAL)
    }

    /// The text of token `id`.
    pub fn token(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }

    /// Whether prompts start with the BOS: `add_bos_token` where the file says; else
    /// llama.cpp's defaults (SentencePiece and Llama 3 / tekken pre-tokenizers: yes).
    pub fn add_bos(&self) -> bool {
        let default = match self.model.as_str() {
            "llama" => true,
            _ => matches!(
                self.pre.as_deref(),
                Some("llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "tekken")
            ),
        };
        self.add_bos.unwrap_or(default) && self.bos.is_some_and(|b| (b as usize) < self.tokens.len())
    }

    /// The ids that end generation: `eos_token_id` and the end-of-turn ids.
    pub fn eos_ids(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self.eos.into_iter().chain(self.extra_eos.iter().copied()).collect();
        ids.retain(|&i| (i as usize) < self.tokens.len());
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// The byte-exact [`Vocab`] (`name`, a file, goes into errors).
    pub fn vocab(&self, name: &str) -> Result<Vocab> {
        let bos = self.bos.and_then(|b| self.token(b)).map(str::to_string);
        super::hf::load_synthesized(self.tokenizer_json(name)?, name, self.eos_ids(), bos)
    }

    /// The tokenizer as Hugging Face would load it (prompts: special tokens recognised, the
    /// prefix space of SentencePiece models kept).
    pub fn tokenizer(&self, name: &str) -> Result<tokenizers::Tokenizer> {
        let text = self.tokenizer_json(name)?.to_string();
        text.parse::<tokenizers::Tokenizer>().map_err(|e| self.err(name, format!("cannot build the tokenizer: {e}")))
    }

    /// The `tokenizer.json` this metadata describes (see the module docs).
    pub fn tokenizer_json(&self, name: &str) -> Result<Value> {
        if self.tokens.is_empty() {
            return Err(self.err(name, "no tokenizer.ggml.tokens in the GGUF metadata"));
        }
        if !self.token_types.is_empty() && self.token_types.len() != self.tokens.len() {
            return Err(
                self.err(name, format!("{} token types for {} tokens", self.token_types.len(), self.tokens.len()))
            );
        }
        for (what, id) in [("bos", self.bos), ("eos", self.eos), ("unknown", self.unk)] {
            if let Some(id) = id.filter(|&i| i as usize >= self.tokens.len()) {
                return Err(
                    self.err(name, format!("{what}_token_id {id} is past the vocabulary ({})", self.tokens.len()))
                );
            }
        }
        let mut vocab = serde_json::Map::with_capacity(self.tokens.len());
        for (id, t) in self.tokens.iter().enumerate() {
            // A repeated token string keeps its first id (later ones are never produced).
            vocab.entry(t.clone()).or_insert(json!(id));
        }
        let added: Vec<Value> = self
            .tokens
            .iter()
            .enumerate()
            .filter_map(|(id, t)| {
                let special = match self.token_type(id) {
                    token_type::CONTROL | token_type::UNKNOWN => true,
                    token_type::USER_DEFINED => false,
                    _ => return None,
                };
                Some(json!({"id": id, "content": t, "single_word": false, "lstrip": false, "rstrip": false,
                            "normalized": false, "special": special}))
            })
            .collect();
        let (model, normalizer, pre_tokenizer, decoder) = match self.model.as_str() {
            "gpt2" => self.byte_level_bpe(name, vocab)?,
            "llama" => self.sentencepiece_bpe(name, vocab)?,
            other => {
                return Err(self.err(
                    name,
                    format!(
                        "unsupported tokenizer.ggml.model {other:?}: supported are gpt2 (byte-level BPE) and \
                         llama (SentencePiece BPE)"
                    ),
                ))
            }
        };
        Ok(json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": added,
            "normalizer": normalizer,
            "pre_tokenizer": pre_tokenizer,
            "post_processor": null,
            "decoder": decoder,
            "model": model,
        }))
    }

    /// `gpt2`: merges as given; the pre-tokenizer's regexes, then GPT-2's byte-level mapping.
    fn byte_level_bpe(
        &self,
        name: &str,
        vocab: serde_json::Map<String, Value>,
    ) -> Result<(Value, Value, Value, Value)> {
        let pre = self.pre.as_deref().unwrap_or("default");
        let (regexes, ignore_merges) = pre_tokenizer(pre).ok_or_else(|| {
            self.err(
                name,
                format!(
                    "unsupported pre-tokenizer {pre:?} (tokenizer.ggml.pre); supported: {}",
                    SUPPORTED_PRE.join(", ")
                ),
            )
        })?;
        if self.merges.is_empty() {
            return Err(self.err(name, "a gpt2 tokenizer without tokenizer.ggml.merges"));
        }
        let mut merges = Vec::with_capacity(self.merges.len());
        for m in &self.merges {
            let (l, r) = m
                .split_once(' ')
                .ok_or_else(|| self.err(name, format!("merge {m:?} is not two tokens separated by a space")))?;
            merges.push(json!([l, r]));
        }
        let mut pretokenizers: Vec<Value> = regexes
            .iter()
            .map(|r| json!({"type": "Split", "pattern": {"Regex": r}, "behavior": "Isolated", "invert": false}))
            .collect();
        pretokenizers
            .push(json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}));
        let model = json!({
            "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
            "ignore_merges": ignore_merges, "vocab": vocab, "merges": merges,
        });
        let decoder = json!({"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true});
        Ok((model, Value::Null, json!({"type": "Sequence", "pretokenizers": pretokenizers}), decoder))
    }

    /// `llama`: SentencePiece BPE. SentencePiece merges the adjacent pair whose joined piece
    /// scores highest; as BPE merges, every split of a normal piece into two pieces of the
    /// vocabulary, ranked by the joined piece's score (as transformers converts them).
    fn sentencepiece_bpe(
        &self,
        name: &str,
        vocab: serde_json::Map<String, Value>,
    ) -> Result<(Value, Value, Value, Value)> {
        if self.scores.len() != self.tokens.len() {
            return Err(self.err(
                name,
                format!(
                    "a llama tokenizer needs one score per token ({} scores, {} tokens)",
                    self.scores.len(),
                    self.tokens.len()
                ),
            ));
        }
        let index: HashMap<&str, usize> = self.tokens.iter().enumerate().rev().map(|(i, t)| (t.as_str(), i)).collect();
        let mergeable = |id: usize| matches!(self.token_type(id), token_type::NORMAL | token_type::USER_DEFINED | 0);
        let mut merges: Vec<(f32, usize, usize)> = Vec::new();
        for (id, piece) in self.tokens.iter().enumerate() {
            if !mergeable(id) {
                continue;
            }
            for (cut, _) in piece.char_indices().skip(1) {
                let (l, r) = piece.split_at(cut);
                if let (Some(&li), Some(&ri)) = (index.get(l), index.get(r)) {
                    if mergeable(li) && mergeable(ri) {
                        merges.push((self.scores[id], li, ri));
                    }
                }
            }
        }
        merges.sort_by(|a, b| b.0.total_cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
        let merges: Vec<Value> = merges.iter().map(|&(_, l, r)| json!([self.tokens[l], self.tokens[r]])).collect();
        let unk = self.unk.and_then(|u| self.token(u)).or_else(|| index.get("<unk>").map(|_| "<unk>"));
        let model = json!({
            "type": "BPE", "dropout": null, "unk_token": unk, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
            "vocab": vocab, "merges": merges,
        });
        let replace = json!({"type": "Replace", "pattern": {"String": " "}, "content": "\u{2581}"});
        let normalizer = if self.add_space_prefix.unwrap_or(true) {
            json!({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u{2581}"}, replace]})
        } else {
            replace
        };
        let decoder = json!({"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u{2581}"}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0},
        ]});
        Ok((model, normalizer, Value::Null, decoder))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{TokenId, TokenKind};

    /// A tiny byte-level BPE: the 256 byte symbols, two merges, and two control tokens.
    fn tiny_gpt2(pre: &str) -> GgufTokenizer {
        let table = super::super::hf::byte_to_unicode_for_tests();
        let mut tokens: Vec<String> = vec!["<|end|>".into(), "<|start|>".into()];
        tokens.extend((0..=255u8).map(|b| table[b as usize].to_string()));
        tokens.extend(["Ġt".into(), "Ġth".into(), "12".into()]);
        let mut types = vec![token_type::CONTROL; 2];
        types.resize(tokens.len(), token_type::NORMAL);
        GgufTokenizer {
            model: "gpt2".into(),
            pre: Some(pre.into()),
            token_types: types,
            merges: vec!["Ġ t".into(), "Ġt h".into(), "1 2".into()],
            tokens,
            bos: Some(1),
            eos: Some(0),
            ..GgufTokenizer::default()
        }
    }

    #[test]
    fn byte_level_bpe_from_metadata() {
        let t = tiny_gpt2("smollm");
        let v = t.vocab("tiny.gguf").unwrap();
        assert_eq!(v.eos(), &[TokenId(0)]);
        assert_eq!(v.bos(), Some(TokenId(1)));
        assert_eq!(v.kind(TokenId(1)), TokenKind::Special);
        assert_eq!(v.bytes(TokenId(259)), b" th");
        // smollm splits digits one by one, so the merge "1 2" never applies.
        let ids = v.encode_canonical(" th 12").unwrap();
        assert_eq!(v.decode(&ids), b" th 12");
        assert_eq!(ids[0], TokenId(259));
        assert!(!ids.contains(&TokenId(260)), "{ids:?}");
        // gpt-2 keeps digit runs together.
        let v2 = tiny_gpt2("gpt-2").vocab("tiny.gguf").unwrap();
        assert!(v2.encode_canonical("12").unwrap().contains(&TokenId(260)));
        // The prompt tokenizer reads the control tokens' spellings.
        let tok = t.tokenizer("tiny.gguf").unwrap();
        let e = tok.encode("<|start|> th", false).unwrap();
        assert_eq!(e.get_ids()[0], 1);
        assert!(!t.add_bos());
    }

    #[test]
    fn unknown_models_and_pre_tokenizers_are_named() {
        let e = tiny_gpt2("klingon").vocab("x.gguf").unwrap_err().to_string();
        assert!(e.contains("\"klingon\"") && e.contains("tokenizer.ggml.pre"), "{e}");
        let mut t = tiny_gpt2("gpt-2");
        t.model = "t5".into();
        let e = t.vocab("x.gguf").unwrap_err().to_string();
        assert!(e.contains("\"t5\""), "{e}");
        let mut t = tiny_gpt2("gpt-2");
        t.eos = Some(9999);
        assert!(t.vocab("x.gguf").unwrap_err().to_string().contains("past the vocabulary"));
    }

    #[test]
    fn sentencepiece_from_scores() {
        // <unk> <s> </s>, byte pieces for '\n' and 'é' (two bytes), then pieces with scores.
        let tokens: Vec<String> =
            ["<unk>", "<s>", "</s>", "<0x0A>", "<0xC3>", "<0xA9>", "▁", "a", "b", "▁a", "ab", "▁ab"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        let types = vec![2, 3, 3, 6, 6, 6, 1, 1, 1, 1, 1, 1];
        let scores = vec![0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0, -2.0, -3.0, -4.0, -5.0, -6.0];
        let t = GgufTokenizer {
            model: "llama".into(),
            tokens,
            token_types: types,
            scores,
            bos: Some(1),
            eos: Some(2),
            unk: Some(0),
            ..GgufTokenizer::default()
        };
        assert!(t.add_bos());
        let v = t.vocab("spm.gguf").unwrap();
        assert_eq!(v.bytes(TokenId(11)), b" ab");
        assert_eq!(v.bytes(TokenId(3)), b"\n");
        // Byte-exact: no prefix space; bytes with no piece fall back to <0xNN>.
        let ids = v.encode_canonical("ab\né").unwrap();
        assert_eq!(ids, vec![TokenId(10), TokenId(3), TokenId(4), TokenId(5)]);
        // The prompt tokenizer adds SentencePiece's prefix space.
        let e = t.tokenizer("spm.gguf").unwrap().encode("ab ab", false).unwrap();
        assert_eq!(e.get_ids(), &[11, 11]);
    }
}
