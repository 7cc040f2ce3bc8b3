//! Typed outputs for library users: a Rust type's JSON Schema (derived with `schemars`) is the
//! constraint, and the constrained output comes back deserialized as that type.
//!
//! ```no_run
//! # use strictly::{automaton::VocabEnv, decode::{generate_typed, GenerateOptions, RandomLogits}, Vocab};
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Call { name: String, count: u8 }
//! let env = VocabEnv::new(std::sync::Arc::new(Vocab::embedded()));
//! let mut model = RandomLogits::new(env.vocab().len(), 7);
//! let call = generate_typed::<Call>(&mut model, &env, &[], &GenerateOptions::default()).unwrap().value;
//! ```
//!
//! The schema compiles like any other (fail closed: a type whose schema cannot be enforced
//! exactly is a compile error), so the output always deserializes; if it ever did not, that is
//! reported as an error rather than papered over.

use std::sync::Arc;

use serde::de::DeserializeOwned;

use super::{generate, GenerateOptions, LanguageModel, Output};
use crate::automaton::{Compiled, Constraint, VocabEnv};
use crate::error::{Error, Result};
use crate::grammar::json_schema::JsonSchemaOptions;
use crate::vocab::TokenId;

/// The JSON Schema (draft 2020-12) that `schemars` derives for `T`, with the ranges of Rust's
/// integer types made explicit (`bound_integer_formats`) so that every value deserializes.
pub fn schema_for<T: schemars::JsonSchema>() -> serde_json::Value {
    let mut schema = schemars::schema_for!(T).to_value();
    bound_integer_formats(&mut schema);
    schema
}

/// The widest integer bound the grammar enforces (just under 9·10^15; below 2^53, so every
/// JSON client reads such integers exactly).
const SAFE_INT: i64 = 8_999_999_999_999_999;

/// `schemars` writes `i32`, `u32`, `i64`, `u64`, `isize`, `usize`, `i128` and `u128` as
/// `{"type": "integer", "format": "int32"}` (and so on) with no `maximum`, and the grammar
/// would then write integers of up to 100 digits, which the type cannot hold. So every
/// integer schema with one of those formats gets its range as `minimum`/`maximum` (kept where
/// the schema's own bound is tighter): exact for 32 bits, ±(9·10^15 − 1) for wider types
/// (stricter than the type, so every value still fits; and exact in every JSON client).
pub fn bound_integer_formats(schema: &mut serde_json::Value) {
    use serde_json::Value;
    match schema {
        Value::Object(o) => {
            let is_int = match o.get("type") {
                Some(Value::String(t)) => t == "integer",
                Some(Value::Array(ts)) => ts.iter().any(|t| t == "integer"),
                _ => false,
            };
            let range = match o.get("format").and_then(Value::as_str) {
                Some("int32") => Some((i32::MIN as i64, i32::MAX as i64)),
                Some("uint32") => Some((0, u32::MAX as i64)),
                Some("int64" | "int" | "int128") => Some((-SAFE_INT, SAFE_INT)),
                Some("uint64" | "uint" | "uint128") => Some((0, SAFE_INT)),
                _ => None,
            };
            if let (true, Some((lo, hi))) = (is_int, range) {
                let min = o.get("minimum").and_then(Value::as_f64).map_or(lo as f64, |m| m.max(lo as f64));
                let max = o.get("maximum").and_then(Value::as_f64).map_or(hi as f64, |m| m.min(hi as f64));
                if o.get("minimum").and_then(Value::as_f64) != Some(min) {
                    o.insert("minimum".into(), lo.into());
                }
                if o.get("maximum").and_then(Value::as_f64) != Some(max) {
                    o.insert("maximum".into(), hi.into());
                }
            }
            for v in o.values_mut() {
                bound_integer_formats(v);
            }
        }
        Value::Array(vs) => vs.iter_mut().for_each(bound_integer_formats),
        _ => {}
    }
}

impl Constraint {
    /// JSON that deserializes as `T`: the schema `schemars` derives for it.
    pub fn json_schema_for<T: schemars::JsonSchema>() -> Constraint {
        Constraint::JsonSchema(schema_for::<T>(), JsonSchemaOptions::default())
    }
}

/// A typed value with the output it was read from.
#[derive(Debug)]
pub struct Typed<T> {
    pub value: T,
    pub output: Output,
}

/// Generates JSON constrained by `T`'s schema and deserializes it.
pub fn generate_typed<T: schemars::JsonSchema + DeserializeOwned>(
    model: &mut dyn LanguageModel,
    env: &Arc<VocabEnv>,
    prompt: &[TokenId],
    opts: &GenerateOptions,
) -> Result<Typed<T>> {
    let compiled = Compiled::new(env, &Constraint::json_schema_for::<T>())?;
    let mut matcher = compiled.matcher();
    let output = generate(model, env.vocab(), Some(&mut matcher), prompt, opts)?;
    Ok(Typed { value: deserialize(&output)?, output })
}

/// `output`'s text as a `T`; an error (never expected under `T`'s schema) if it is not one.
pub(crate) fn deserialize<T: DeserializeOwned>(output: &Output) -> Result<T> {
    serde_json::from_slice(&output.bytes).map_err(|e| {
        Error::output(format!("the constrained output does not deserialize as {}: {e}", std::any::type_name::<T>()))
    })
}
