//! `strictly.Vocab`: a tokenizer's exact token bytes, with the width of the model's logits.
//!
//! One per model, built once and shared by every constraint compiled for it: it holds the
//! library's [`VocabEnv`] (the vocabulary with its mask caches, which is what makes the second
//! schema's masks cheap). Four ways in: a `tokenizer.json` file, a transformers tokenizer
//! object, a GGUF file's metadata, or a list of token byte strings (any tokenizer at all).
//!
//! `vocab_size` is the width of the logits the masks are for; it may be larger than the
//! tokenizer's ids (models pad their embedding tables to a multiple of 64 or 128): ids past the
//! tokenizer are never allowed. A narrower width clips the masks to it, as the library does.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use strictly::automaton::VocabEnv;
use strictly::vocab::TokenKind;
use strictly::{TokenId, Vocab};

use crate::errors::{param, to_py};

#[pyclass(name = "Vocab", module = "strictly", frozen)]
pub struct PyVocab {
    pub env: Arc<VocabEnv>,
    pub vocab_size: usize,
}

impl PyVocab {
    fn new(py: Python<'_>, vocab: Vocab, vocab_size: Option<usize>) -> PyResult<PyVocab> {
        let vocab_size = vocab_size.unwrap_or(vocab.len());
        if vocab_size == 0 {
            return Err(param("vocab_size must be at least 1"));
        }
        let vocab = Arc::new(vocab);
        // The slices every first mask needs, built now rather than inside a request.
        let env = py.detach(|| {
            let env = VocabEnv::new(vocab);
            env.prepare();
            env
        });
        Ok(PyVocab { env, vocab_size })
    }

    pub fn vocab(&self) -> &Arc<Vocab> {
        self.env.vocab()
    }
}

#[pymethods]
impl PyVocab {
    /// A Hugging Face `tokenizer.json`; `tokenizer_config.json`, `generation_config.json` and
    /// `config.json` beside it add EOS declarations.
    #[staticmethod]
    #[pyo3(signature = (path, vocab_size=None))]
    fn from_tokenizer_json(py: Python<'_>, path: PathBuf, vocab_size: Option<usize>) -> PyResult<PyVocab> {
        let vocab = py.detach(|| Vocab::from_tokenizer_json(&path)).map_err(to_py)?;
        PyVocab::new(py, vocab, vocab_size)
    }

    /// A transformers tokenizer (`PreTrainedTokenizerFast`) or a `tokenizers.Tokenizer`. EOS:
    /// `eos_ids` when given, else the tokenizer's `eos_token_id`, plus the end tokens the file
    /// marks itself. `vocab_size`: the model's logits width (`model.config.vocab_size`),
    /// else the tokenizer's ids.
    #[staticmethod]
    #[pyo3(signature = (tokenizer, vocab_size=None, eos_ids=None))]
    fn from_hf_tokenizer(
        py: Python<'_>,
        tokenizer: &Bound<'_, PyAny>,
        vocab_size: Option<usize>,
        eos_ids: Option<Vec<u32>>,
    ) -> PyResult<PyVocab> {
        let backend = match tokenizer.getattr("backend_tokenizer") {
            Ok(b) => b,
            Err(_) => tokenizer.clone(),
        };
        let text: String = backend
            .call_method0("to_str")
            .map_err(|_| {
                param(format!(
                    "{} is not a fast Hugging Face tokenizer (no backend_tokenizer.to_str()); \
                     use Vocab.from_tokenizer_json or Vocab.from_token_bytes",
                    tokenizer.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                ))
            })?
            .extract()?;
        let eos = match eos_ids {
            Some(ids) => ids,
            None => match tokenizer.getattr("eos_token_id") {
                Ok(id) if !id.is_none() => vec![id.extract::<u32>()?],
                _ => Vec::new(),
            },
        };
        let vocab =
            py.detach(|| Vocab::from_tokenizer_json_text(&text, "<transformers tokenizer>", &eos)).map_err(to_py)?;
        PyVocab::new(py, vocab, vocab_size)
    }

    /// The tokenizer of a GGUF file (llama.cpp's format), read from its metadata only.
    #[staticmethod]
    #[pyo3(signature = (path, vocab_size=None))]
    fn from_gguf(py: Python<'_>, path: PathBuf, vocab_size: Option<usize>) -> PyResult<PyVocab> {
        let vocab = py.detach(|| crate::gguf::vocab(&path)).map_err(to_py)?;
        PyVocab::new(py, vocab, vocab_size)
    }

    /// Any tokenizer: `tokens[i]` is the exact bytes token `i` adds to the output; `eos_ids`
    /// end the output (allowed exactly when it is complete). Give `b""` for a token grammar
    /// text must never produce (BOS, chat markers, padding): it is never allowed.
    #[staticmethod]
    #[pyo3(signature = (tokens, eos_ids, vocab_size=None))]
    fn from_token_bytes(
        py: Python<'_>,
        tokens: Vec<Vec<u8>>,
        eos_ids: Vec<u32>,
        vocab_size: Option<usize>,
    ) -> PyResult<PyVocab> {
        if tokens.is_empty() {
            return Err(param("from_token_bytes needs at least one token"));
        }
        if let Some(&e) = eos_ids.iter().find(|&&e| e as usize >= tokens.len()) {
            return Err(param(format!("eos id {e} is past the {} tokens given", tokens.len())));
        }
        let vocab = py.detach(|| Vocab::from_byte_tokens(tokens, &eos_ids));
        PyVocab::new(py, vocab, vocab_size)
    }

    /// The width of the logits (and of the masks): at least the tokenizer's ids unless set lower.
    #[getter]
    fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// The tokenizer's ids (the highest id + 1).
    #[getter]
    fn n_tokens(&self) -> usize {
        self.vocab().len()
    }

    /// 32-bit words in one bitmask row: `ceil(vocab_size / 32)`.
    #[getter]
    fn bitmask_words(&self) -> usize {
        self.vocab_size.div_ceil(32)
    }

    #[getter]
    fn eos_ids(&self) -> Vec<u32> {
        self.vocab().eos().iter().map(|t| t.0).collect()
    }

    /// The exact bytes token `id` adds to the output (a special token's text; `b""` past the
    /// tokenizer).
    fn token_bytes<'py>(&self, py: Python<'py>, id: u32) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.vocab().bytes(TokenId(id)))
    }

    /// Is token `id` a control token (never produced by grammar text)?
    fn is_special(&self, id: u32) -> bool {
        self.vocab().kind(TokenId(id)) == TokenKind::Special
    }

    fn __repr__(&self) -> String {
        format!("Vocab(n_tokens={}, vocab_size={}, eos_ids={:?})", self.vocab().len(), self.vocab_size, self.eos_ids())
    }
}
