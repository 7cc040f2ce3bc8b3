//! The keyword vocabulary that the combinator files share, and small helpers that build
//! schemas as JSON values.
//!
//! - [`VALIDATION`]: every keyword that affects validation (drafts 4 to 2020-12, and the
//!   internal keywords the `not` rewrites make: [`EXCLUDE_STRINGS`], [`NOT_STRING`],
//!   [`EXCLUDE_NUMBERS`], [`NOT_INTEGER`], [`SOME_KEY_NOT_IN`]; and the one `allOf` merges
//!   make: [`ALSO_FORMATS`]); anything else is an annotation. [`ANNOTATIONS`] lists the
//!   well-known annotations, which the merges and `oneOf` checks skip by name.
//! - [`keyword_type`]: the one JSON type a keyword constrains (`None`: any value).
//! - [`keyword`], [`without`], [`add_to_all_of`], [`type_list`]: schema values built and read
//!   without copying more than needed.
//!
//! Invariant: every keyword a rewrite writes into a schema is in [`VALIDATION`], so no rewrite
//! can make a constraint disappear as an "unknown keyword".

use serde_json::{Map, Value};

// ---- the internal keywords the `not` rewrites write (see `not.rs`) --------------------------

/// An internal keyword (set by the `not` rewrite): string values that are excluded.
pub(super) const EXCLUDE_STRINGS: &str = "x-strictly-exclude-strings";

/// An internal keyword (set by the `not` rewrite): schemas of string keywords that string
/// values must *not* satisfy.
pub(super) const NOT_STRING: &str = "x-strictly-not-string";

/// An internal keyword (set by the `not` rewrite): numbers that are excluded.
pub(super) const EXCLUDE_NUMBERS: &str = "x-strictly-exclude-numbers";

/// Internal keyword (made by `not` rewrites): the number is not an integer. Such numbers are
/// written without exponent (stricter, documented: `1.5e1` is 15, an integer, and which
/// spellings with an exponent are whole is not a regular language), with a non-zero digit in
/// the fraction and at most 15 significant digits ([`not_integer_regex`]).
pub(super) const NOT_INTEGER: &str = "x-strictly-not-integer";

/// Internal keyword (made by `not` rewrites, see `not::rewrite_not`): the object has at
/// least one key that is not in this list of names. Tracked by the member rules as a flag
/// (`w` in [`Builder::build`]): set by a declared member outside the list, or an additional
/// member whose key is outside it.
pub(super) const SOME_KEY_NOT_IN: &str = "x-strictly-some-key-not-in";

/// Internal keyword (made by `allOf` merges, see `all_of::merge_formats`): further `format`
/// names that a value must satisfy beside its `format` (two different formats merged); read
/// with it through [`formats`].
pub(super) const ALSO_FORMATS: &str = "x-strictly-also-formats";

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
    EXCLUDE_STRINGS,
    NOT_STRING,
    EXCLUDE_NUMBERS,
    SOME_KEY_NOT_IN,
    NOT_INTEGER,
    ALSO_FORMATS,
];

pub(super) fn is_validation_keyword(k: &str) -> bool {
    VALIDATION.contains(&k)
}

/// The JSON type a keyword constrains (`None`: any value).
pub(super) fn keyword_type(k: &str) -> Option<&'static str> {
    Some(match k {
        "multipleOf" | "maximum" | "exclusiveMaximum" | "minimum" | "exclusiveMinimum" | EXCLUDE_NUMBERS
        | NOT_INTEGER => "number",
        "maxLength" | "minLength" | "pattern" | "format" | NOT_STRING | EXCLUDE_STRINGS | ALSO_FORMATS => "string",
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
        | SOME_KEY_NOT_IN => "object",
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

/// Does `obj` have any of `keywords`? A schema object has a few keys: reading them once costs
/// less than a SipHash lookup per keyword (serde_json's maps), which showed in the compile
/// profiles of large schemas (every subschema asks this several times).
pub(super) fn has_any(obj: &Map<String, Value>, keywords: &[&str]) -> bool {
    if obj.len() <= keywords.len() {
        obj.keys().any(|k| keywords.contains(&k.as_str()))
    } else {
        keywords.iter().any(|k| obj.contains_key(*k))
    }
}

/// `obj.get(key)`, read by scanning where `obj` is small (see [`has_any`]): the compiler asks
/// every subschema for a dozen keywords, most of which it does not have.
pub(super) fn get<'v>(obj: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    if obj.len() <= SCAN_KEYS {
        obj.iter().find_map(|(k, v)| (k == key).then_some(v))
    } else {
        obj.get(key)
    }
}

/// Every format a value must satisfy: `format` and the [`ALSO_FORMATS`] that merges added (a
/// name that is not a string is skipped here; `format` itself is checked where it is read).
pub(super) fn formats(obj: &Map<String, Value>) -> impl Iterator<Item = &str> {
    let also = get(obj, ALSO_FORMATS).and_then(Value::as_array).into_iter().flatten();
    get(obj, "format").into_iter().chain(also).filter_map(Value::as_str)
}

/// Up to this many keys, [`get`] scans.
const SCAN_KEYS: usize = 8;
