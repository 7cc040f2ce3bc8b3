//! Subschemas compiled one by one ([`compile_parts`]), for formats that write an object's
//! values apart (XML and pythonic tool calls), strings as JSON or as bare text ([`PartForm`]).

use serde_json::{Map, Value};

use super::{join, nothing, prepare, string, Compiler, JsonSchemaOptions};
use crate::error::{Error, Location, Result};
use crate::grammar::{Expr, Rule};
use crate::regular::DfaLimits;

/// How [`compile_parts`] writes one part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartForm {
    /// The value as JSON text (in the options' whitespace).
    Json,
    /// A string as its bare text: the decoded characters, no quotes, no escapes. For a
    /// subschema of strings only (`type: "string"` and string keywords, or an `enum`/`const` of
    /// strings): other keywords beside those are not read, and a listed value that is not a
    /// string is not produced.
    Text,
}

/// Subschemas of one document compiled each on its own, for formats that write an object's
/// values one by one rather than as a JSON object (Qwen's XML tool calls): each part is the
/// subschema at a JSON pointer (`""` is the root; `$ref`s resolve against the whole document),
/// written as [`PartForm`] says. Returns the rules the parts share and one expression per part,
/// in order (referring to those rules).
pub fn compile_parts(
    schema: &Value,
    opts: &JsonSchemaOptions,
    parts: &[(&str, PartForm)],
) -> Result<(Vec<Rule>, Vec<Expr>)> {
    let (prepared, docs, index) = prepare(schema, opts)?;
    let mut c = Compiler::new(&prepared, &docs, index, opts, DfaLimits::default());
    let mut exprs = Vec::with_capacity(parts.len());
    for &(pointer, form) in parts {
        let sub = prepared.pointer(pointer).ok_or_else(|| Error::Schema {
            at: Location::Pointer(pointer.to_string()),
            msg: "no subschema here".into(),
        })?;
        exprs.push(match form {
            PartForm::Json => c.schema(sub, pointer)?,
            PartForm::Text => c.text_part(sub, pointer)?,
        });
    }
    Ok((c.rules, exprs))
}

impl Compiler<'_> {
    /// A string subschema's values as bare text ([`PartForm::Text`]).
    pub(super) fn text_part(&mut self, schema: &Value, pointer: &str) -> Result<Expr> {
        let mut obj = match schema {
            Value::Object(o) => o.clone(),
            Value::Bool(true) => Map::new(),
            _ => return Ok(nothing()),
        };
        let listed: Option<Vec<String>> = match (obj.remove("enum"), obj.remove("const")) {
            (_, Some(c)) => Some(c.as_str().into_iter().map(str::to_string).collect()),
            (Some(Value::Array(vs)), None) => Some(vs.iter().filter_map(Value::as_str).map(str::to_string).collect()),
            (Some(_), None) => return Err(self.bad(&join(pointer, "enum"), "`enum` must be an array")),
            (None, None) => None,
        };
        let Some(text) = string::string_lexeme_as(self, &obj, pointer, string::Form::Text)? else {
            return Ok(nothing());
        };
        let mut parts = vec![text];
        if let Some(values) = listed {
            let literals = values.iter().map(|v| regex_syntax::hir::Hir::literal(v.as_bytes())).collect();
            parts.push(crate::regular::Lexeme::Regex(regex_syntax::hir::Hir::alternation(literals)));
        }
        Ok(Expr::Lexeme(std::sync::Arc::new(crate::regular::Lexeme::and(parts))))
    }
}
