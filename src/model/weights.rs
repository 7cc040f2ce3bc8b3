//! Safetensors weights: finding the files, checking them against the architecture, and handing
//! them to candle as a `VarBuilder`.
//!
//! Files: `model.safetensors.index.json` (its `weight_map` names the shards), else
//! `model.safetensors`, else every `*.safetensors` in the directory. Weights are memory-mapped,
//! not read, so a large model costs no copy until its tensors are converted to the device.
//!
//! Invariant: [`Weights::check`] has passed before any candle loader runs, so every tensor the
//! loader asks for exists with the shape it expects and a float dtype.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use candle_core::safetensors::{MmapedSafetensors, SliceSafetensors};
use candle_core::{DType, Device};
use candle_nn::var_builder::SimpleBackend;
use candle_nn::VarBuilder;

use super::config::ArchConfig;
use super::read_file;
use crate::error::{Error, Result};

/// One set of weights (one file or several shards), with an index of their names.
pub struct Weights {
    backend: Box<dyn SimpleBackend + 'static>,
    /// name → (shape, stored dtype).
    index: HashMap<String, (Vec<usize>, Option<DType>)>,
    /// What to call these weights in errors (a path, or `<embedded stories260K>`).
    pub name: String,
}

impl Weights {
    /// The weights of a model directory.
    pub fn open_dir(dir: &Path) -> Result<Weights> {
        let files = safetensors_files(dir)?;
        let name = if files.len() == 1 {
            files[0].display().to_string()
        } else {
            format!("{} ({} shards)", dir.display(), files.len())
        };
        // SAFETY: the files are memory-mapped read-only. As with every mmap, changing them on
        // disk while the model is loaded is undefined behaviour; model files are not edited in
        // place while a server reads them, and this is how candle (and safetensors) load.
        let st = unsafe { MmapedSafetensors::multi(&files) }.map_err(|e| {
            Error::model_from(
                format!("{name}: not a readable safetensors file: {}", super::candle_error::candle_msg(&e)),
                e,
            )
        })?;
        let index =
            st.tensors().into_iter().map(|(n, v)| (n, (v.shape().to_vec(), DType::try_from(v.dtype()).ok()))).collect();
        Ok(Weights { backend: Box::new(st), index, name })
    }

    /// Weights in a static buffer (the embedded model).
    pub fn from_static(bytes: &'static [u8], name: &str) -> Result<Weights> {
        let st = SliceSafetensors::new(bytes).map_err(|e| {
            Error::model_from(format!("{name}: not a safetensors buffer: {}", super::candle_error::candle_msg(&e)), e)
        })?;
        let index =
            st.tensors().into_iter().map(|(n, v)| (n, (v.shape().to_vec(), DType::try_from(v.dtype()).ok()))).collect();
        Ok(Weights { backend: Box::new(st), index, name: name.to_string() })
    }

    pub fn contains(&self, tensor: &str) -> bool {
        self.index.contains_key(tensor)
    }

    /// How many tensors the files hold.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Checks that every tensor `cfg` needs is present, with its shape and a float dtype. The
    /// error names the first few missing or mismatched tensors and how many there are.
    pub fn check(&self, cfg: &ArchConfig) -> Result<()> {
        let mut missing = Vec::new();
        let mut wrong = Vec::new();
        for (name, shape) in cfg.expected_tensors() {
            match self.index.get(&name) {
                None => missing.push(name),
                Some((got, _)) if *got != shape => wrong.push(format!("{name} has shape {got:?}, expected {shape:?}")),
                Some((_, dt)) if !matches!(dt, Some(DType::F32 | DType::F16 | DType::BF16 | DType::F64)) => {
                    wrong.push(format!("{name} has dtype {dt:?}; only float weights can be loaded (no quantized ones)"))
                }
                Some(_) => {}
            }
        }
        if missing.is_empty() && wrong.is_empty() {
            return Ok(());
        }
        let list = |v: &[String]| {
            let mut s = v.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
            if v.len() > 3 {
                s.push_str(&format!(", ... ({} in all)", v.len()));
            }
            s
        };
        let mut parts = Vec::new();
        if !missing.is_empty() {
            parts.push(format!("missing tensors: {}", list(&missing)));
        }
        if !wrong.is_empty() {
            parts.push(list(&wrong));
        }
        let hint = if !missing.is_empty()
            && self.index.keys().any(|k| k.starts_with("layers.") || k.starts_with("tok_embeddings"))
        {
            " (these look like Meta/llama2.c names; convert the checkpoint to the Hugging Face layout)"
        } else {
            ""
        };
        Err(Error::model(format!(
            "weights {} do not fit this {} config: {}{hint}",
            self.name,
            cfg.arch,
            parts.join("; ")
        )))
    }

    /// The `VarBuilder` candle's loaders read from, converting to `dtype` on `device`.
    /// `aliases` maps a requested name to the stored one (a tied output head).
    pub fn into_var_builder(self, dtype: DType, device: &Device, aliases: &[(&str, &str)]) -> VarBuilder<'static> {
        let vb = VarBuilder::from_backend(self.backend, dtype, device.clone());
        if aliases.is_empty() {
            return vb;
        }
        let map: HashMap<String, String> = aliases.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        vb.rename_f(move |name| map.get(name).cloned().unwrap_or_else(|| name.to_string()))
    }
}

/// The safetensors files of a model directory, in a stable order.
pub fn safetensors_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let index = dir.join("model.safetensors.index.json");
    if index.is_file() {
        let text = read_file(&index)?;
        let json: serde_json::Value = serde_json::from_slice(&text)
            .map_err(|e| Error::model_from(format!("{}: not valid JSON: {e}", index.display()), e))?;
        let map = json
            .get("weight_map")
            .and_then(|m| m.as_object())
            .ok_or_else(|| Error::model(format!("{}: no \"weight_map\" object", index.display())))?;
        let mut shards: BTreeMap<String, ()> = BTreeMap::new();
        for (tensor, file) in map {
            let file = file.as_str().ok_or_else(|| {
                Error::model(format!("{}: weight_map[{tensor:?}] is not a file name", index.display()))
            })?;
            if file.contains('/') || file.contains('\\') || file.starts_with('.') {
                return Err(Error::model(format!("{}: shard name {file:?} is not a plain file name", index.display())));
            }
            shards.insert(file.to_string(), ());
        }
        let files: Vec<PathBuf> = shards.into_keys().map(|f| dir.join(f)).collect();
        if let Some(f) = files.iter().find(|f| !f.is_file()) {
            return Err(Error::model(format!("{}: shard {} is missing", index.display(), f.display())));
        }
        if files.is_empty() {
            return Err(Error::model(format!("{}: weight_map is empty", index.display())));
        }
        return Ok(files);
    }
    let single = dir.join("model.safetensors");
    if single.is_file() {
        return Ok(vec![single]);
    }
    let entries = std::fs::read_dir(dir).map_err(|e| Error::Io { path: dir.display().to_string(), source: e })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    files.sort();
    if files.is_empty() {
        let other = ["pytorch_model.bin", "model.bin", "consolidated.00.pth"].iter().find(|f| dir.join(f).is_file());
        let hint = other.map_or(String::new(), |f| format!(" (found {f}: only safetensors weights are supported)"));
        return Err(Error::model(format!("{}: no *.safetensors weights{hint}", dir.display())));
    }
    Ok(files)
}
