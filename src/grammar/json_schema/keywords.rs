//! The keyword vocabulary that the combinator files share, and small helpers that build
//! schemas as JSON values.
//!
//! - [`VALIDATION`]: every keyword that affects validation (drafts 4 to 2020-12, and the
//!   internal keywords the `not` rewrites make: [`string::EXCLUDE_STRINGS`],
//!   [`string::NOT_STRING`], [`number::EXCLUDE_NUMBERS`], [`number::NOT_INTEGER`],
//!   [`object::SOME_KEY_NOT_IN`]); anything else is an annotation. [`ANNOTATIONS`] lists the
//!   well-known annotations, which the merges and `oneOf` checks skip by name.
//! - [`keyword_type`]: the one JSON type a keyword constrains (`None`: any value).
//! - [`keyword`], [`without`], [`add_to_all_of`], [`type_list`]: schema values built and read
//!   without copying more than needed.
//!
//! Invariant: every keyword a rewrite writes into a schema is in [`VALIDATION`], so no rewrite
//! can make a constraint disappear as an "unknown keyword".

use serde_json::{Map, Value};

use super::{number, object, string};

/// Keywords with no effect on validation.
pub(super) const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "$comment",
    "readOnly",
    "writeOnly",
    "deprecated",
    "$schema",
    "$id",
    "id",
    "$anchor",
    "$defs",
    "definitions",
    "contentMediaType",
    "contentEncoding",
    "contentSchema",
    "$vocabulary",
    "$dynamicAnchor",
    "$recursiveAnchor",
    "discriminator",
    "nullable",
    "xml",
    "externalDocs",
    "example",
];

/// Every keyword that affects validation (drafts 4 to 2020-12); anything else is an annotation.
pub(super) const VALIDATION: &[&str] = &[
    "type",
    "enum",
    "const",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "format",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxContains",
    "minContains",
    "maxProperties",
    "minProperties",
    "required",
    "dependentRequired",
    "properties",
    "patternProperties",
    "additionalProperties",
    "propertyNames",
    "items",
    "prefixItems",
    "additionalItems",
    "contains",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "dependencies",
    "unevaluatedItems",
    "unevaluatedProperties",
    "$ref",
    "$dynamicRef",
    "$recursiveRef",
    string::EXCLUDE_STRINGS,
    string::NOT_STRING,
    number::EXCLUDE_NUMBERS,
    object::SOME_KEY_NOT_IN,
    number::NOT_INTEGER,
];

pub(super) fn is_validation_keyword(k: &str) -> bool {
    VALIDATION.contains(&k)
}

/// The JSON type a keyword constrains (`None`: any value).
pub(super) fn keyword_type(k: &str) -> Option<&'static str> {
    Some(match k {
        "multipleOf"
        | "maximum"
        | "exclusiveMaximum"
        | "minimum"
        | "exclusiveMinimum"
        | number::EXCLUDE_NUMBERS
        | number::NOT_INTEGER => "number",
        "maxLength" | "minLength" | "pattern" | "format" | string::NOT_STRING | string::EXCLUDE_STRINGS => "string",
        "maxItems" | "minItems" | "uniqueItems" | "maxContains" | "minContains" | "items" | "prefixItems"
        | "additionalItems" | "contains" | "unevaluatedItems" => "array",
        "maxProperties"
        | "minProperties"
        | "required"
        | "dependentRequired"
        | "properties"
        | "patternProperties"
        | "additionalProperties"
        | "propertyNames"
        | "dependentSchemas"
        | "dependencies"
        | "unevaluatedProperties"
        | object::SOME_KEY_NOT_IN => "object",
        _ => return None,
    })
}

/// Adds `parts` to `out`'s `allOf` (nothing if there are none).
pub(super) fn add_to_all_of(out: &mut Map<String, Value>, parts: impl IntoIterator<Item = Value>) {
    let mut parts = parts.into_iter().peekable();
    if parts.peek().is_none() {
        return;
    }
    match out.get_mut("allOf") {
        Some(Value::Array(all)) => all.extend(parts),
        _ => {
            out.insert("allOf".into(), Value::Array(parts.collect()));
        }
    }
}

/// A copy of `obj` without `key`.
pub(super) fn without(obj: &Map<String, Value>, key: &str) -> Map<String, Value> {
    obj.iter().filter(|(k, _)| *k != key).map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// `{key: value}`, moving `value` in (`json!` would copy it through serialization: a deep
/// copy of whole subschemas on the hot paths of `oneOf` and `allOf`).
pub(super) fn keyword(key: &str, value: Value) -> Value {
    Value::Object(Map::from_iter([(key.to_string(), value)]))
}

pub(super) fn type_list(v: &Value) -> Vec<&str> {
    match v {
        Value::String(s) => vec![s.as_str()],
        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    }
}
