//! The tokenizer of a GGUF file, read without the model.
//!
//! A GGUF file starts with its metadata: a header, then typed key/value pairs. This reads that
//! part only (the tensors that follow are never touched), keeps the `tokenizer.ggml.*` keys, and
//! hands them to the library's [`GgufTokenizer`], which rebuilds the byte-exact vocabulary the
//! way `strictly generate --model file.gguf` does. The library's own reader lives with the
//! models (it needs candle); this one is the few lines the binding needs without it.
//!
//! Format (little-endian, versions 2 and 3): `GGUF`, version `u32`, tensor count `u64`, pair
//! count `u64`; each pair is a string key (`u64` length, bytes), a `u32` type and the value.
//! Types: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool, 8 string, 9 array (item type
//! `u32`, count `u64`, items), 10 u64, 11 i64, 12 f64.

use std::io::{BufReader, Read};
use std::path::Path;

use strictly::error::{Error, Result};
use strictly::vocab::GgufTokenizer;
use strictly::Vocab;

/// A metadata value, as far as the tokenizer needs one.
enum Value {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    Array(Vec<Value>),
    /// An array of a type the tokenizer never reads, skipped.
    Skipped,
}

/// Most bytes one string may take, and most items one array: far above any real tokenizer,
/// below what a corrupt length would make us allocate.
const MAX_STRING: u64 = 1 << 24;
const MAX_ITEMS: u64 = 1 << 24;

struct Reader<R> {
    r: R,
    name: String,
}

impl<R: Read> Reader<R> {
    fn err(&self, msg: impl Into<String>) -> Error {
        Error::Tokenizer { path: self.name.clone(), msg: msg.into() }
    }

    fn bytes<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut b = [0u8; N];
        self.r.read_exact(&mut b).map_err(|e| self.err(format!("the GGUF metadata ends early: {e}")))?;
        Ok(b)
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.bytes()?))
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.bytes()?))
    }

    fn string(&mut self) -> Result<String> {
        let n = self.u64()?;
        if n > MAX_STRING {
            return Err(self.err(format!("a metadata string of {n} bytes")));
        }
        let mut b = vec![0u8; n as usize];
        self.r.read_exact(&mut b).map_err(|e| self.err(format!("the GGUF metadata ends early: {e}")))?;
        // Token texts are UTF-8 in every GGUF writer; a stray invalid byte is kept visible.
        Ok(String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
    }

    /// A value of type `t`; arrays of items the tokenizer never reads are skipped unless `keep`.
    fn value(&mut self, t: u32, keep: bool) -> Result<Value> {
        Ok(match t {
            0 => Value::Int(i64::from(self.bytes::<1>()?[0])),
            1 => Value::Int(i64::from(self.bytes::<1>()?[0] as i8)),
            2 => Value::Int(i64::from(u16::from_le_bytes(self.bytes()?))),
            3 => Value::Int(i64::from(i16::from_le_bytes(self.bytes()?))),
            4 => Value::Int(i64::from(self.u32()?)),
            5 => Value::Int(i64::from(i32::from_le_bytes(self.bytes()?))),
            6 => Value::Float(f64::from(f32::from_le_bytes(self.bytes()?))),
            7 => Value::Bool(self.bytes::<1>()?[0] != 0),
            8 => Value::Str(self.string()?),
            9 => {
                let item = self.u32()?;
                let n = self.u64()?;
                if n > MAX_ITEMS {
                    return Err(self.err(format!("a metadata array of {n} items")));
                }
                if item == 9 {
                    return Err(self.err("nested metadata arrays are not supported"));
                }
                let mut items = Vec::with_capacity(if keep { n as usize } else { 0 });
                for _ in 0..n {
                    let v = self.value(item, keep)?;
                    if keep {
                        items.push(v);
                    }
                }
                if keep {
                    Value::Array(items)
                } else {
                    Value::Skipped
                }
            }
            10 => Value::Int(self.u64()? as i64),
            11 => Value::Int(i64::from_le_bytes(self.bytes()?)),
            12 => Value::Float(f64::from_le_bytes(self.bytes()?)),
            other => return Err(self.err(format!("unknown metadata value type {other}"))),
        })
    }
}

/// The vocabulary of the GGUF file at `path` (its metadata only).
pub fn vocab(path: &Path) -> Result<Vocab> {
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| Error::Io { path: name.clone(), source: e })?;
    let mut r = Reader { r: BufReader::new(file), name: name.clone() };
    if &r.bytes::<4>()? != b"GGUF" {
        return Err(r.err("not a GGUF file (no GGUF magic)"));
    }
    let version = r.u32()?;
    if !(2..=3).contains(&version) {
        return Err(r.err(format!("GGUF version {version}; versions 2 and 3 are read")));
    }
    let _tensors = r.u64()?;
    let pairs = r.u64()?;
    let mut tok = GgufTokenizer::default();
    for _ in 0..pairs {
        let key = r.string()?;
        let t = r.u32()?;
        let Some(k) = key.strip_prefix("tokenizer.ggml.") else {
            r.value(t, false)?;
            continue;
        };
        let v = r.value(t, true)?;
        let id = |v: &Value| match v {
            Value::Int(i) => u32::try_from(*i).ok(),
            _ => None,
        };
        let strings = |v: Value| match v {
            Value::Array(items) => {
                items.into_iter().map(|i| if let Value::Str(s) = i { s } else { String::new() }).collect()
            }
            _ => Vec::new(),
        };
        match k {
            "model" => tok.model = if let Value::Str(s) = v { s } else { String::new() },
            "pre" => tok.pre = if let Value::Str(s) = v { Some(s) } else { None },
            "tokens" => tok.tokens = strings(v),
            "merges" => tok.merges = strings(v),
            "token_type" => {
                if let Value::Array(items) = v {
                    tok.token_types = items.iter().map(|i| id(i).map_or(0, |x| x as i32)).collect();
                }
            }
            "scores" => {
                if let Value::Array(items) = v {
                    tok.scores = items.iter().map(|i| if let Value::Float(f) = i { *f as f32 } else { 0.0 }).collect();
                }
            }
            "bos_token_id" => tok.bos = id(&v),
            "eos_token_id" => tok.eos = id(&v),
            "eot_token_id" | "eom_token_id" => tok.extra_eos.extend(id(&v)),
            "unknown_token_id" => tok.unk = id(&v),
            "add_bos_token" => tok.add_bos = if let Value::Bool(b) = v { Some(b) } else { None },
            "add_space_prefix" => tok.add_space_prefix = if let Value::Bool(b) = v { Some(b) } else { None },
            _ => {}
        }
    }
    tok.vocab(&name)
}
