//! Typed outputs for library users: a Rust type's JSON Schema (derived with `schemars`) is the
//! constraint, and the constrained output comes back deserialized as that type.
//!
//! ```no_run
//! # use strictly::{decode::{generate_typed, GenerateOptions, RandomLogits}, Vocab};
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Call { name: String, count: u8 }
//! let vocab = std::sync::Arc::new(Vocab::embedded());
//! let mut model = RandomLogits::new(vocab.len(), 7);
//! let call = generate_typed::<Call>(&mut model, &vocab, &[], &GenerateOptions::default()).unwrap().value;
//! ```
//!
//! The schema compiles like any other (fail closed: a type whose schema cannot be enforced
//! exactly is a compile error), so the output always deserializes; if it ever did not, that is
//! reported as an error rather than papered over.

use std::sync::Arc;

use serde::de::DeserializeOwned;

use super::{generate, GenerateOptions, LanguageModel, Output};
use crate::automaton::{Compiled, Constraint};
use crate::error::{Error, Result};
use crate::grammar::json_schema::JsonSchemaOptions;
use crate::vocab::{TokenId, Vocab};

/// The JSON Schema (draft 2020-12) that `schemars` derives for `T`.
pub fn schema_for<T: schemars::JsonSchema>() -> serde_json::Value {
    schemars::schema_for!(T).to_value()
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
    vocab: &Arc<Vocab>,
    prompt: &[TokenId],
    opts: &GenerateOptions,
) -> Result<Typed<T>> {
    let compiled = Compiled::new(vocab.clone(), &Constraint::json_schema_for::<T>())?;
    let mut matcher = compiled.matcher();
    let output = generate(model, vocab, Some(&mut matcher), prompt, opts)?;
    Ok(Typed { value: deserialize(&output)?, output })
}

/// `output`'s text as a `T`; an error (never expected under `T`'s schema) if it is not one.
pub(crate) fn deserialize<T: DeserializeOwned>(output: &Output) -> Result<T> {
    serde_json::from_slice(&output.bytes).map_err(|e| {
        Error::invalid(format!("the constrained output does not deserialize as {}: {e}", std::any::type_name::<T>()))
    })
}
