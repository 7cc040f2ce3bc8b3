//! OpenAI's Structured Outputs "strict mode" rules: what a schema sent with `"strict": true`
//! must look like ([`strict_violation`]). The server answers 400 naming the first place a
//! schema breaks them, as OpenAI does, so a request that works here works there and the other
//! way round. The rules checked (OpenAI's "Supported schemas"):
//! - the root is an object schema (not `anyOf` at the top);
//! - every object schema sets `"additionalProperties": false` and lists every key of
//!   `properties` in `required` (optional fields are written as a union with `null`);
//! - none of the keywords strict mode refuses: `allOf`, `not`, `if`/`then`/`else`,
//!   `dependentRequired`, `dependentSchemas`, `patternProperties`, `unevaluatedProperties`,
//!   `propertyNames`, `minProperties`/`maxProperties`, `uniqueItems`, `contains`;
//! - at most [`MAX_STRICT_DEPTH`] levels of object nesting.
//!
//! Sizes (5,000 properties, 120,000 characters of names and values) are left to this crate's
//! own limits, which are documented in `error.rs`.

use serde_json::{Map, Value};

use super::join;

/// Deepest object nesting strict mode allows.
pub const MAX_STRICT_DEPTH: usize = 10;

/// Keywords strict mode refuses.
const REFUSED: [&str; 13] = [
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "patternProperties",
    "unevaluatedProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "uniqueItems",
];

/// Where `schema` first breaks OpenAI's strict-mode rules: (JSON pointer, what is wrong);
/// `None` if it keeps them.
pub fn strict_violation(schema: &Value) -> Option<(String, String)> {
    let Some(root) = schema.as_object() else {
        return Some((String::new(), "the root must be an object schema".into()));
    };
    if root.contains_key("anyOf") || !is_object_schema(root) {
        return Some((String::new(), "the root must be an object schema (`\"type\": \"object\"`), not `anyOf`".into()));
    }
    check(schema, "", 0)
}

/// Does this schema describe objects (its `type` names `object`, or it has `properties`)?
fn is_object_schema(o: &Map<String, Value>) -> bool {
    let typed = match super::keywords::get(o, "type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => false,
    };
    typed || o.contains_key("properties")
}

fn check(schema: &Value, pointer: &str, depth: usize) -> Option<(String, String)> {
    let o = schema.as_object()?;
    if let Some(kw) = REFUSED.iter().find(|k| o.contains_key(**k)) {
        return Some((join(pointer, kw), format!("`{kw}` is not supported in strict mode")));
    }
    if o.contains_key("contains") {
        return Some((join(pointer, "contains"), "`contains` is not supported in strict mode".into()));
    }
    let mut depth = depth;
    if is_object_schema(o) {
        depth += 1;
        if depth > MAX_STRICT_DEPTH {
            return Some((pointer.to_string(), format!("objects nest deeper than {MAX_STRICT_DEPTH} levels")));
        }
        if super::keywords::get(o, "additionalProperties") != Some(&Value::Bool(false)) {
            return Some((
                join(pointer, "additionalProperties"),
                "strict mode needs `\"additionalProperties\": false` in every object".into(),
            ));
        }
        let required: Vec<&str> = o
            .get("required")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(Value::Object(props)) = super::keywords::get(o, "properties") {
            if let Some(k) = props.keys().find(|k| !required.contains(&k.as_str())) {
                return Some((
                    join(pointer, "required"),
                    format!("strict mode needs every property in `required`; {k:?} is missing (make it optional with a `null` type)"),
                ));
            }
        }
    }
    // Subschemas: by map (`properties`, `$defs`, `definitions`), by list (`anyOf`,
    // `prefixItems`), and single (`items`, `additionalProperties`).
    for kw in ["properties", "$defs", "definitions"] {
        if let Some(Value::Object(m)) = super::keywords::get(o, kw) {
            for (k, s) in m {
                let d = if kw == "properties" { depth } else { 0 };
                if let Some(v) = check(s, &join(&join(pointer, kw), k), d) {
                    return Some(v);
                }
            }
        }
    }
    for kw in ["anyOf", "oneOf", "prefixItems"] {
        if let Some(Value::Array(a)) = super::keywords::get(o, kw) {
            for (i, s) in a.iter().enumerate() {
                if let Some(v) = check(s, &join(&join(pointer, kw), &i.to_string()), depth) {
                    return Some(v);
                }
            }
        }
    }
    for kw in ["items", "additionalProperties"] {
        if let Some(s) = super::keywords::get(o, kw) {
            if let Some(v) = check(s, &join(pointer, kw), depth) {
                return Some(v);
            }
        }
    }
    None
}
