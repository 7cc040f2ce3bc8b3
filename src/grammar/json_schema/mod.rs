//! JSON Schema → grammar IR (being written).

use serde_json::Value;

use crate::error::{Error, Location, Result};
use crate::grammar::Grammar;

/// Whitespace the output may contain between JSON tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Whitespace {
    /// Bounded: at most one space, or one newline plus limited indentation, between tokens
    /// (accepts both compact and pretty-printed JSON; no runaway newlines).
    #[default]
    Bounded,
    /// No whitespace at all.
    Compact,
    /// Newlines and indentation only where a pretty printer puts them.
    Pretty,
}

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct JsonSchemaOptions {
    pub whitespace: Whitespace,
    /// Compile anyway when something cannot be enforced, and list it in
    /// [`JsonGrammar::unenforced`]; otherwise that is a compile error.
    pub lenient: bool,
}

/// Something a lenient compile could not enforce: the keyword and its JSON pointer.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Unenforced {
    pub pointer: String,
    pub keyword: String,
    pub reason: String,
}

#[derive(Debug, Clone)]
pub struct JsonGrammar {
    pub grammar: Grammar,
    pub unenforced: Vec<Unenforced>,
}

/// Compiles a schema into a grammar whose language is exactly the JSON texts (in the chosen
/// whitespace) that validate against it, or fails naming what cannot be enforced.
pub fn compile(schema: &Value, opts: &JsonSchemaOptions) -> Result<JsonGrammar> {
    let _ = (schema, opts);
    Err(Error::Schema { at: Location::Pointer(String::new()), msg: "JSON Schema compilation is not built yet".into() })
}
