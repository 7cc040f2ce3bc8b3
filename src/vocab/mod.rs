//! The vocabulary: token id ↔ exact bytes, special tokens, EOS, and the token trie.
//!
//! Key types:
//! - [`TokenId`]: a token as the model numbers it.
//! - [`Vocab`]: every id's bytes and [`TokenKind`], the EOS ids, a [`TokenTrie`] over the text
//!   tokens, and (when loaded from a tokenizer file) a byte-exact encoder.
//! - [`TokenSet`]: a bitmask over ids, the shape a GPU kernel takes.
//! - [`GgufTokenizer`]: a GGUF file's tokenizer metadata, turned into a `tokenizer.json` (and
//!   so into a [`Vocab`] and a prompt tokenizer): see [`gguf`].
//!
//! Invariants:
//! - Only [`TokenKind::Text`] tokens with at least one byte are in the trie; grammar text can
//!   never produce a special token. EOS is allowed by the matcher exactly when it accepts.
//!   The few control tokens that belong to a reply's syntax (Mistral's `[TOOL_CALLS]`, see
//!   `hf::REPLY_MARKERS`; in gpt-oss's vocabulary its harmony markers, `hf::HARMONY_MARKERS`)
//!   are text tokens.
//! - Ids at or past [`Vocab::len`] (a model's logits may be wider) are never allowed.

pub mod class_trie;
pub mod gguf;
mod hf;
pub mod tokenset;
pub mod trie;

use std::path::Path;

pub use gguf::GgufTokenizer;
pub use hf::REASONING_MARKERS;
pub use tokenset::{SparseWords, TokenSet};
pub use trie::TokenTrie;

use crate::error::Result;

/// A token id as the model and tokenizer number it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TokenId(pub u32);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// Ordinary text: its bytes may be produced by a grammar.
    Text,
    /// A control token (BOS, EOS, chat markers, ...): never matched by grammar text.
    Special,
    /// An id with no token behind it (a gap in the numbering).
    Unused,
}

pub struct Vocab {
    bytes: Vec<Vec<u8>>,
    kinds: Vec<TokenKind>,
    eos: Vec<TokenId>,
    bos: Option<TokenId>,
    trie: TokenTrie,
    /// The tokenizer's own token strings (for display); empty for hand-made vocabularies.
    names: Vec<String>,
    /// Byte-exact encoder (see `hf`), when loaded from a tokenizer file.
    encoder: Option<tokenizers::Tokenizer>,
}

impl Vocab {
    /// Loads a Hugging Face `tokenizer.json`; `tokenizer_config.json`, `generation_config.json`
    /// and `config.json` beside it, when present, add EOS/BOS declarations.
    pub fn from_tokenizer_json(path: impl AsRef<Path>) -> Result<Vocab> {
        hf::load(path.as_ref())
    }

    /// A Hugging Face `tokenizer.json` from its text, with the EOS ids given (for a caller that
    /// holds the tokenizer in memory, as a Python `PreTrainedTokenizerFast` does, with no
    /// config files beside it); `name` goes into errors. The tokens the file itself marks as
    /// end-of-sequence (`</s>`, `<|endoftext|>`, ...) are EOS too, as in
    /// [`from_tokenizer_json`](Self::from_tokenizer_json); ids past the vocabulary are dropped.
    pub fn from_tokenizer_json_text(text: &str, name: &str, eos: &[u32]) -> Result<Vocab> {
        let json: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| crate::error::Error::Tokenizer { path: name.to_string(), msg: format!("not JSON: {e}") })?;
        hf::load_synthesized(json, name, eos.to_vec(), None)
    }

    /// The embedded default: the 512-token vocabulary of the stories260K model built into the
    /// binary, so nothing needs to be downloaded.
    pub fn embedded() -> Vocab {
        hf::embedded()
    }

    /// A hand-made vocabulary: every entry is a text token, plus the given EOS ids (which are
    /// made special). Used by unit tests and by callers that bring their own tokenizer.
    pub fn from_byte_tokens(tokens: Vec<Vec<u8>>, eos: &[u32]) -> Vocab {
        let mut kinds: Vec<TokenKind> = tokens.iter().map(|_| TokenKind::Text).collect();
        for &e in eos {
            kinds[e as usize] = TokenKind::Special;
        }
        Vocab::from_parts(tokens, kinds, eos.iter().map(|&e| TokenId(e)).collect(), None)
    }

    /// A small vocabulary for tests and fuzzing: each byte of `alphabet` as a token, then the
    /// `extra` tokens not already in it, then the EOS `</s>` (the last id).
    pub fn from_alphabet(alphabet: &[u8], extra: &[Vec<u8>]) -> Vocab {
        let mut toks: Vec<Vec<u8>> = alphabet.iter().map(|&b| vec![b]).collect();
        for t in extra {
            if !toks.contains(t) {
                toks.push(t.clone());
            }
        }
        toks.push(b"</s>".to_vec());
        let eos = toks.len() as u32 - 1;
        Vocab::from_byte_tokens(toks, &[eos])
    }

    /// The byte-level vocabulary: token `b` is the single byte `b` (ids 0..=255), and id 256
    /// is the EOS `</s>`. Every byte string tokenizes, one token per byte, so sampling and
    /// fuzzing need no model tokenizer (`--tokenizer bytes` on the command line).
    pub fn byte_level() -> Vocab {
        let mut toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        toks.push(b"</s>".to_vec());
        Vocab::from_byte_tokens(toks, &[256])
    }

    fn from_parts(bytes: Vec<Vec<u8>>, kinds: Vec<TokenKind>, eos: Vec<TokenId>, bos: Option<TokenId>) -> Vocab {
        debug_assert_eq!(bytes.len(), kinds.len());
        let text = bytes
            .iter()
            .zip(&kinds)
            .enumerate()
            .filter(|(_, (b, k))| **k == TokenKind::Text && !b.is_empty())
            .map(|(i, (b, _))| (b.as_slice(), TokenId(i as u32)));
        let trie = TokenTrie::build(text);
        Vocab { bytes, kinds, eos, bos, trie, names: Vec::new(), encoder: None }
    }

    /// The number of token ids (the highest id + 1).
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The exact bytes a token adds to the output (for special tokens: their text, which
    /// detokenizers normally skip).
    pub fn bytes(&self, id: TokenId) -> &[u8] {
        self.bytes.get(id.0 as usize).map_or(&[], Vec::as_slice)
    }

    pub fn kind(&self, id: TokenId) -> TokenKind {
        self.kinds.get(id.0 as usize).copied().unwrap_or(TokenKind::Unused)
    }

    pub fn is_eos(&self, id: TokenId) -> bool {
        self.eos.contains(&id)
    }

    pub fn eos(&self) -> &[TokenId] {
        &self.eos
    }

    pub fn bos(&self) -> Option<TokenId> {
        self.bos
    }

    pub fn trie(&self) -> &TokenTrie {
        &self.trie
    }

    /// The tokenizer's own spelling of a token (e.g. `Ġthe`), or its bytes shown lossily.
    pub fn name(&self, id: TokenId) -> String {
        match self.names.get(id.0 as usize) {
            Some(n) if !n.is_empty() => n.clone(),
            _ => String::from_utf8_lossy(self.bytes(id)).into_owned(),
        }
    }

    /// The concatenated bytes of `tokens`, special tokens skipped.
    pub fn decode(&self, tokens: &[TokenId]) -> Vec<u8> {
        let mut out = Vec::new();
        for &t in tokens {
            if self.kind(t) == TokenKind::Text {
                out.extend_from_slice(self.bytes(t));
            }
        }
        out
    }

    /// Tokenizes `text` into text tokens whose bytes concatenate to exactly `text`: the
    /// tokenizer's own (canonical) split when it is byte-exact, else greedy longest match
    /// over the trie. Returns `None` if some byte has no token at all.
    pub fn encode(&self, text: &[u8]) -> Option<Vec<TokenId>> {
        if let Some(ids) = std::str::from_utf8(text).ok().and_then(|s| self.encode_canonical(s)) {
            if ids.iter().all(|&t| self.kind(t) == TokenKind::Text) && self.decode(&ids) == text {
                return Some(ids);
            }
        }
        self.trie.greedy_encode(text)
    }

    /// The tokenizer's own split of `text` (prefix-space and normalization behaviours removed,
    /// special-token spellings treated as text); `None` for hand-made vocabularies.
    pub fn encode_canonical(&self, text: &str) -> Option<Vec<TokenId>> {
        let e = self.encoder.as_ref()?.encode(text, false).ok()?;
        Some(e.get_ids().iter().map(|&i| TokenId(i)).collect())
    }
}

impl std::fmt::Debug for Vocab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Vocab({} tokens, eos {:?})", self.len(), self.eos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenizer_json_text_loads_as_the_file_does() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/stories260K/tokenizer.json");
        let text = std::fs::read_to_string(path).unwrap();
        let from_text = Vocab::from_tokenizer_json_text(&text, "stories", &[2]).unwrap();
        let embedded = Vocab::embedded();
        assert_eq!(from_text.len(), embedded.len());
        for id in (0..embedded.len() as u32).map(TokenId) {
            assert_eq!(from_text.bytes(id), embedded.bytes(id), "token {}", id.0);
            assert_eq!(from_text.kind(id), embedded.kind(id), "token {}", id.0);
        }
        assert_eq!(from_text.eos(), &[TokenId(2)]);
        let err = Vocab::from_tokenizer_json_text("{not json", "mine", &[]).unwrap_err();
        assert!(matches!(&err, crate::Error::Tokenizer { path, .. } if path == "mine"), "{err}");
    }
}
