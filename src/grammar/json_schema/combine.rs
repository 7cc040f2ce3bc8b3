//! `enum`/`const`, `anyOf`/`oneOf`, and `allOf` (merged into one schema).
//!
//! - `enum`/`const`: each allowed value becomes a literal (whitespace allowed inside arrays and
//!   objects); values that the schema's other keywords reject are dropped, checked by a small
//!   validator for the keywords it knows, else by the grammar of those keywords
//!   ([`accepted_by`]: sound, possibly stricter); anything else: not enforceable.
//! - `anyOf` is a union: exact. `oneOf` becomes a union of branches made pairwise disjoint
//!   ([`disjoint_branches`]): provably disjoint pairs stay, overlapping ones get `not` of the
//!   other branch where that rewrites exactly, else a declared discriminator is made required
//!   (stricter); otherwise it is reported.
//! - `not` is rewritten into plain keywords where exact ([`rewrite_not`]; internal keywords
//!   carry what JSON Schema cannot say: excluded strings and numbers, non-integer numbers,
//!   "some key outside this list"); `not` of a `$ref` is a rule per target; `if`/`then`/`else`
//!   and `dependentRequired`/`dependentSchemas`/`dependencies` become `anyOf`s
//!   ([`rewrite_conditionals`]); two `anyOf`s in one `allOf` multiply out.
//! - `allOf` merges keyword by keyword (types intersect, bounds tighten, required unions,
//!   properties merge with each side's `additionalProperties` applied to the other's keys).
//!   A pair of keywords that cannot be merged exactly (two different patterns, ...) is reported.

use serde_json::{Map, Value};

use super::{join, number, object, string, Compiler, MAX_ENUM};
use crate::error::Result;
use crate::grammar::Expr;
use crate::regular::DfaLimits;

/// Keywords with no effect on validation.
const ANNOTATIONS: &[&str] = &[
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
const VALIDATION: &[&str] = &[
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
fn keyword_type(k: &str) -> Option<&'static str> {
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

/// Rewrites `not` into plain keywords where that is exact; `None` if it cannot.
/// Handled: `not: {type}`; `not: {const/enum}` of strings, numbers, booleans or null
/// (excluded values); `not` of the keywords of one JSON type, with or without `type`
/// ([`negate_family`]): object keywords `required`/`properties` (some key missing, or present
/// with a value that fails), number bounds (flipped), string keywords (`pattern`, `format`,
/// lengths; a regular complement, [`string::NOT_STRING`]); `not` of `anyOf`/`allOf`
/// (De Morgan).
pub(super) fn rewrite_not(obj: &Map<String, Value>) -> Option<Map<String, Value>> {
    let not = obj.get("not")?.as_object()?;
    let rest = without(obj, "not");
    rewrite_not_of(rest, not)
}

/// [`rewrite_not`] of `obj` (without its `not`) and the `not`'s schema `not`: the copy of
/// `obj` is the caller's (no copy of the `not` is made to remove it again).
fn rewrite_not_of(obj: Map<String, Value>, not: &Map<String, Value>) -> Option<Map<String, Value>> {
    let keys: Vec<&str> =
        not.iter().filter(|(k, v)| VALIDATION.contains(&k.as_str()) && !no_op(k, v)).map(|(k, _)| k.as_str()).collect();
    let mut out = obj;
    const ALL: [&str; 6] = ["null", "boolean", "object", "array", "string", "number"];
    let current: Vec<String> = match out.get("type") {
        None => ALL.iter().map(|s| s.to_string()).collect(),
        Some(t) => type_list(t).iter().map(|s| s.to_string()).collect(),
    };
    let has_type = keys.contains(&"type");
    let others: Vec<&str> = keys.iter().copied().filter(|k| *k != "type").collect();
    let integers_only = has_type && {
        let t = type_list(&not["type"]);
        t.contains(&"integer") && !t.contains(&"number")
    };
    if integers_only && !others.is_empty() && current.iter().any(|c| c == "number") {
        // not (integer ∧ K) = not integer ∨ not K, where the schema allows other numbers.
        let mut rest = not.clone();
        let t = rest.remove("type").expect("has a type");
        add_to_all_of(&mut out, [serde_json::json!({ "anyOf": [{"not": {"type": t}}, {"not": rest}] })]);
        return Some(out);
    }
    match others.as_slice() {
        // `not {}`: nothing is valid.
        [] if !has_type => {
            out.insert("type".into(), Value::Array(Vec::new()));
            Some(out)
        }
        [] => {
            let ex = type_list(&not["type"]);
            let mut keep: Vec<Value> = Vec::new();
            for t in &current {
                if ex.contains(&t.as_str()) || (t == "integer" && ex.contains(&"number")) {
                    continue;
                }
                if t == "number" && ex.contains(&"integer") {
                    // Numbers that are not integers.
                    out.insert(number::NOT_INTEGER.into(), Value::Bool(true));
                }
                keep.push(Value::String(t.clone()));
            }
            out.insert("type".into(), Value::Array(keep));
            Some(out)
        }
        _ if others.iter().all(|k| matches!(*k, "required" | "properties" | "additionalProperties"))
            && not
                .get("additionalProperties")
                .is_none_or(|a| a == &Value::Bool(false) || no_op("additionalProperties", a)) =>
        {
            // not (required R ∧ properties P [∧ additionalProperties false]) on objects: some
            // key of R is missing, or some key of P is present with a value its schema
            // rejects [, or some key outside P is present].
            let mut alts: Vec<Value> = Vec::new();
            if others.contains(&"additionalProperties") {
                let names: Vec<Value> = not
                    .get("properties")
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                    .map(|(k, _)| Value::String(k.clone()))
                    .collect();
                alts.push(serde_json::json!({ object::SOME_KEY_NOT_IN: names }));
            }
            for r in not.get("required").and_then(Value::as_array).into_iter().flatten() {
                alts.push(serde_json::json!({"properties": {r.as_str()?: false}}));
            }
            for (k, s) in not.get("properties").and_then(Value::as_object).into_iter().flatten() {
                alts.push(serde_json::json!({"required": [k], "properties": {k: {"not": s}}}));
            }
            negate_family(out, &current, not, "object", |out| push_any_of(out, alts))
        }
        _ if others.iter().all(|k| matches!(*k, "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum")) => {
            // not (x ≥ a ∧ x ≤ b) on numbers: x < a or x > b.
            let mut alts: Vec<Value> = Vec::new();
            for k in &others {
                let v = not[*k].as_f64()?; // draft-04 boolean exclusives: not handled
                let flipped = match *k {
                    "minimum" => "exclusiveMaximum",
                    "exclusiveMinimum" => "maximum",
                    "maximum" => "exclusiveMinimum",
                    _ => "minimum",
                };
                alts.push(serde_json::json!({ flipped: v }));
            }
            negate_family(out, &current, not, "number", |out| push_any_of(out, alts))
        }
        _ if others.iter().all(|k| matches!(*k, "minItems" | "maxItems"))
            || (others == ["items"] && !not["items"].is_array()) =>
        {
            // not (items S ∧ minItems a ∧ maxItems b) on arrays: some item fails S, or fewer
            // than a items, or more than b.
            let mut alts: Vec<Value> = Vec::new();
            for k in &others {
                match *k {
                    "items" => alts.push(serde_json::json!({"contains": {"not": not["items"]}})),
                    "minItems" => match not[*k].as_u64()? {
                        0 => {}
                        n => alts.push(serde_json::json!({ "maxItems": n - 1 })),
                    },
                    _ => alts.push(serde_json::json!({ "minItems": not[*k].as_u64()? + 1 })),
                }
            }
            negate_family(out, &current, not, "array", |out| push_any_of(out, alts))
        }
        // not (A ∨ B) = not A ∧ not B; not (A ∧ B) = not A ∨ not B.
        ["anyOf"] | ["allOf"] if !has_type => {
            let parts: Vec<Value> = not[others[0]].as_array()?.iter().map(|p| keyword("not", p.clone())).collect();
            if others[0] == "anyOf" {
                add_to_all_of(&mut out, parts);
            } else {
                push_any_of(&mut out, parts);
            }
            Some(out)
        }
        ["const"] | ["enum"] => {
            // With `type` beside, only the values of that type are excluded.
            let values: Vec<&Value> = match not.get("const") {
                Some(v) => vec![v],
                None => not["enum"].as_array()?.iter().collect(),
            };
            let values: Vec<&Value> = match not.get("type") {
                Some(t) => values.into_iter().filter(|v| type_list(t).iter().any(|t| is_of_type(v, t))).collect(),
                None => values,
            };
            let mut strings = Vec::new();
            let mut numbers = Vec::new();
            let mut types: Vec<String> = current.clone();
            // Parts for values that no keyword excludes directly (structured ones, one boolean).
            let mut parts: Vec<Value> = Vec::new();
            let both_bools = values.contains(&&Value::Bool(true)) && values.contains(&&Value::Bool(false));
            let mut structured = 0;
            for v in values {
                match v {
                    Value::String(s) => strings.push(Value::String(s.clone())),
                    Value::Number(_) => numbers.push(v.clone()),
                    Value::Null => types.retain(|t| t != "null"),
                    Value::Bool(_) if both_bools => types.retain(|t| t != "boolean"),
                    Value::Bool(b) => {
                        parts.push(serde_json::json!({"anyOf": [{"not": {"type": "boolean"}}, {"const": !b}]}))
                    }
                    Value::Object(_) | Value::Array(_) => {
                        // Each member becomes alternatives: keep the rewrite small.
                        structured += members(v);
                        if structured > MAX_EXCLUDED_MEMBERS {
                            return None;
                        }
                        parts.push(differs_from(v));
                    }
                }
            }
            add_to_all_of(&mut out, parts);
            out.insert("type".into(), Value::Array(types.into_iter().map(Value::String).collect()));
            if !strings.is_empty() {
                let mut all = out.get(string::EXCLUDE_STRINGS).and_then(Value::as_array).cloned().unwrap_or_default();
                all.extend(strings);
                out.insert(string::EXCLUDE_STRINGS.into(), Value::Array(all));
            }
            if !numbers.is_empty() {
                let mut all = out.get(number::EXCLUDE_NUMBERS).and_then(Value::as_array).cloned().unwrap_or_default();
                all.extend(numbers);
                out.insert(number::EXCLUDE_NUMBERS.into(), Value::Array(all));
            }
            Some(out)
        }
        _ if others.iter().all(|k| matches!(*k, "pattern" | "format" | "minLength" | "maxLength")) => {
            let mut excluded = not.clone();
            excluded.remove("type");
            negate_family(out, &current, not, "string", |out| {
                let mut all = out.get(string::NOT_STRING).and_then(Value::as_array).cloned().unwrap_or_default();
                all.push(Value::Object(excluded));
                out.insert(string::NOT_STRING.into(), Value::Array(all));
            })
        }
        // not (contains S) on arrays: every item fails S.
        ["contains"] => negate_family(out, &current, not, "array", |out| {
            add_to_all_of(out, [serde_json::json!({"items": {"not": not["contains"]}})])
        }),
        // not (min ≤ #properties ≤ max) on objects: fewer, or more.
        _ if others.iter().all(|k| matches!(*k, "minProperties" | "maxProperties")) => {
            let mut alts: Vec<Value> = Vec::new();
            if let Some(n) = not.get("minProperties") {
                match n.as_u64()? {
                    0 => {}
                    n => alts.push(serde_json::json!({"maxProperties": n - 1})),
                }
            }
            if let Some(n) = not.get("maxProperties") {
                alts.push(serde_json::json!({"minProperties": n.as_u64()? + 1}));
            }
            negate_family(out, &current, not, "object", |out| push_any_of(out, alts))
        }
        // not (dependencies) on objects: some key is present whose dependency fails.
        _ if others.iter().all(|k| matches!(*k, "dependencies" | "dependentSchemas" | "dependentRequired")) => {
            let mut alts: Vec<Value> = Vec::new();
            for k in &others {
                for (key, dep) in not[*k].as_object()? {
                    match dep {
                        Value::Array(names) => {
                            let missing: Vec<Value> = names
                                .iter()
                                .map(|m| Some(serde_json::json!({"properties": {m.as_str()?: false}})))
                                .collect::<Option<_>>()?;
                            if !missing.is_empty() {
                                alts.push(serde_json::json!({"required": [key], "anyOf": missing}));
                            }
                        }
                        schema => alts.push(serde_json::json!({"required": [key], "not": schema})),
                    }
                }
            }
            negate_family(out, &current, not, "object", |out| push_any_of(out, alts))
        }
        // not not Y = Y
        ["not"] if !has_type => {
            add_to_all_of(&mut out, [not["not"].clone()]);
            Some(out)
        }
        // not (A ∧ B ∧ ...) = not A ∨ not B ∨ ..., over independent groups of keywords.
        _ => {
            let parts = conjuncts(not)?;
            push_any_of(&mut out, parts.into_iter().map(|p| keyword("not", p)).collect());
            Some(out)
        }
    }
}

/// Adds `parts` to `out`'s `allOf` (nothing if there are none).
fn add_to_all_of(out: &mut Map<String, Value>, parts: impl IntoIterator<Item = Value>) {
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
fn without(obj: &Map<String, Value>, key: &str) -> Map<String, Value> {
    obj.iter().filter(|(k, _)| *k != key).map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// `{key: value}`, moving `value` in (`json!` would copy it through serialization: a deep
/// copy of whole subschemas on the hot paths of `oneOf` and `allOf`).
pub(super) fn keyword(key: &str, value: Value) -> Value {
    Value::Object(Map::from_iter([(key.to_string(), value)]))
}

/// Adds `anyOf: alts` to `out`'s `allOf` (`false` when there are no alternatives).
fn push_any_of(out: &mut Map<String, Value>, alts: Vec<Value>) {
    add_to_all_of(out, [if alts.is_empty() { Value::Bool(false) } else { serde_json::json!({ "anyOf": alts }) }]);
}

/// Most members (at every depth) of the objects and arrays one `not` may exclude.
const MAX_EXCLUDED_MEMBERS: usize = 256;

/// Members of `v` at every depth.
fn members(v: &Value) -> usize {
    match v {
        Value::Object(o) => o.len() + o.values().map(members).sum::<usize>(),
        Value::Array(a) => a.len() + a.iter().map(members).sum::<usize>(),
        _ => 0,
    }
}

/// A schema for the values that differ from the object or array `v` (JSON Schema equality:
/// numbers by value, objects regardless of key order): another type, another length or set of
/// keys, or a member that differs (recursively, through `not: {const}`).
fn differs_from(v: &Value) -> Value {
    let mut alts: Vec<Value> = Vec::new();
    match v {
        Value::Object(o) => {
            alts.push(serde_json::json!({"not": {"type": "object"}}));
            let keys: Vec<Value> = o.keys().map(|k| Value::String(k.clone())).collect();
            alts.push(serde_json::json!({ object::SOME_KEY_NOT_IN: keys }));
            for (k, x) in o {
                alts.push(serde_json::json!({"type": "object", "properties": {k: false}}));
                alts.push(
                    serde_json::json!({"type": "object", "required": [k], "properties": {k: {"not": {"const": x}}}}),
                );
            }
        }
        Value::Array(a) => {
            let n = a.len();
            alts.push(serde_json::json!({"not": {"type": "array"}}));
            alts.push(serde_json::json!({"type": "array", "minItems": n + 1}));
            if n > 0 {
                alts.push(serde_json::json!({"type": "array", "maxItems": n - 1}));
            }
            for (i, x) in a.iter().enumerate() {
                let mut prefix = vec![Value::Bool(true); i];
                prefix.push(serde_json::json!({"not": {"const": x}}));
                alts.push(serde_json::json!({"type": "array", "minItems": i + 1, "prefixItems": prefix}));
            }
        }
        _ => return serde_json::json!({"not": {"const": v}}),
    }
    serde_json::json!({ "anyOf": alts })
}

/// Does keyword `k` with value `v` accept every instance (`additionalProperties: true`,
/// `properties: {}`, `minItems: 0`, ...)?
fn no_op(k: &str, v: &Value) -> bool {
    let accepts_all = |v: &Value| {
        v == &Value::Bool(true) || v.as_object().is_some_and(|o| !o.keys().any(|k| VALIDATION.contains(&k.as_str())))
    };
    match k {
        "additionalProperties"
        | "additionalItems"
        | "items"
        | "unevaluatedProperties"
        | "unevaluatedItems"
        | "propertyNames" => accepts_all(v),
        "properties" | "patternProperties" | "dependentSchemas" => {
            v.as_object().is_some_and(|o| o.values().all(accepts_all))
        }
        "dependentRequired" | "dependencies" => v.as_object().is_some_and(|o| o.is_empty()),
        "required" => v.as_array().is_some_and(|a| a.is_empty()),
        "minLength" | "minItems" | "minProperties" => v.as_u64() == Some(0),
        _ => false,
    }
}

/// A schema as the conjunction of independent parts: keywords that read each other stay
/// together (`properties` with `additionalProperties`/`patternProperties`/
/// `unevaluatedProperties`, the item keywords, `contains` with its counts, `if`/`then`/
/// `else`); every other validation keyword is a part of its own. `None` if fewer than two.
fn conjuncts(schema: &Map<String, Value>) -> Option<Vec<Value>> {
    const GROUPS: [&[&str]; 4] = [
        &["properties", "additionalProperties", "patternProperties", "unevaluatedProperties"],
        &["items", "prefixItems", "additionalItems", "unevaluatedItems"],
        &["contains", "minContains", "maxContains"],
        &["if", "then", "else"],
    ];
    let mut parts: Vec<Map<String, Value>> = Vec::new();
    let mut grouped: Vec<Option<usize>> = vec![None; GROUPS.len()];
    for (k, v) in schema.iter().filter(|(k, _)| VALIDATION.contains(&k.as_str())) {
        match GROUPS.iter().position(|g| g.contains(&k.as_str())) {
            Some(g) => {
                let at = *grouped[g].get_or_insert_with(|| {
                    parts.push(Map::new());
                    parts.len() - 1
                });
                parts[at].insert(k.clone(), v.clone());
            }
            None => parts.push(Map::from_iter([(k.clone(), v.clone())])),
        }
    }
    (parts.len() >= 2).then(|| parts.into_iter().map(Value::Object).collect())
}

/// Rewrites the conditional keywords into `allOf` parts, exactly:
/// - `dependentRequired {k: [a, b]}` (and `dependencies` with an array): `k` absent, or `k`,
///   `a` and `b` all present;
/// - `dependentSchemas {k: S}` (and `dependencies` with a schema): `k` absent, or present and
///   `S` holds;
/// - `if I then T else E`: `(I ∧ T) ∨ (not I ∧ E)`, where `not I` must rewrite exactly
///   ([`rewrite_not`]); otherwise `if` is reported.
///
/// `None` when the schema has none of them.
pub(super) fn rewrite_conditionals(
    c: &mut Compiler,
    obj: &Map<String, Value>,
    pointer: &str,
) -> Result<Option<Map<String, Value>>> {
    const KEYWORDS: [&str; 6] = ["dependentRequired", "dependentSchemas", "dependencies", "if", "then", "else"];
    if !KEYWORDS.iter().any(|k| obj.contains_key(*k)) {
        return Ok(None);
    }
    let mut out = obj.clone();
    let mut parts: Vec<Value> = Vec::new();
    for kw in ["dependentRequired", "dependentSchemas", "dependencies"] {
        let Some(v) = out.remove(kw) else { continue };
        let deps = v.as_object().ok_or_else(|| c.bad(&join(pointer, kw), format!("`{kw}` must be an object")))?;
        for (k, dep) in deps {
            let absent = serde_json::json!({"properties": {k: false}});
            let present = match dep {
                Value::Array(names) => {
                    // The dependencies first: undeclared required keys are generated in this
                    // order, and instances tend to name what `k` depends on before `k`.
                    let mut req: Vec<Value> = names.to_vec();
                    req.push(Value::String(k.clone()));
                    serde_json::json!({ "required": req })
                }
                schema => serde_json::json!({"allOf": [{"required": [k]}, schema]}),
            };
            parts.push(serde_json::json!({"anyOf": [absent, present]}));
        }
    }
    let (then, els) = (out.remove("then"), out.remove("else"));
    if let Some(cond) = out.remove("if") {
        let then = then.unwrap_or(Value::Bool(true));
        let els = els.unwrap_or(Value::Bool(true));
        match with_not(&Value::Bool(true), &c.resolve_shallow(&cond)) {
            Some((not_cond, _)) => {
                parts.push(serde_json::json!({"anyOf": [{"allOf": [cond, then]}, {"allOf": [not_cond, els]}]}))
            }
            None => c.unenforced(pointer, "if", "the negation of this `if` schema cannot be written exactly")?,
        }
    }
    add_to_all_of(&mut out, parts);
    Ok(Some(out))
}

/// `not (T ∧ K)` where the keywords `K` constrain only values of the JSON type `family` and `T`
/// is the `not`'s `type` (all types if absent): values of the other types in `T` satisfy the
/// inner schema vacuously, so they are rejected; values of `family` must fail `K`, which
/// `negate` adds to `out` (only if `T` includes `family`); values outside `T` pass.
fn negate_family(
    mut out: Map<String, Value>,
    current: &[String],
    not: &Map<String, Value>,
    family: &str,
    negate: impl FnOnce(&mut Map<String, Value>),
) -> Option<Map<String, Value>> {
    const ALL: [&str; 7] = ["null", "boolean", "object", "array", "string", "number", "integer"];
    let mut t: Vec<&str> = match not.get("type") {
        None => ALL.to_vec(),
        Some(t) => type_list(t),
    };
    // Where the schema allows no non-integer numbers, "integer" in the `not` means every
    // number it allows.
    if !current.iter().any(|c| c == "number") && t.contains(&"integer") && !t.contains(&"number") {
        t.push("number");
    }
    if family == "number" && t.contains(&"integer") && !t.contains(&"number") {
        return None; // the complement would be "non-integer numbers, or ..."
    }
    let mut keep: Vec<Value> = Vec::new();
    for c in current {
        let in_t = t.contains(&c.as_str()) || (c == "integer" && t.contains(&"number"));
        let rejected = c != family && in_t && !(family == "number" && c == "integer");
        if c == "number" && family != "number" && t.contains(&"integer") && !t.contains(&"number") {
            return None; // integers rejected, other numbers not: not a type
        }
        if !rejected {
            keep.push(Value::String(c.clone()));
        }
    }
    out.insert("type".into(), Value::Array(keep));
    if t.contains(&family) {
        negate(&mut out);
    }
    Some(out)
}

pub(super) fn enum_const(c: &mut Compiler, obj: &Map<String, Value>, pointer: &str) -> Result<Option<Expr>> {
    let (values, kw): (Vec<&Value>, &str) = if let Some(v) = obj.get("const") {
        (vec![v], "const")
    } else if let Some(e) = obj.get("enum") {
        let a = e.as_array().ok_or_else(|| c.bad(&join(pointer, "enum"), "`enum` must be an array"))?;
        if a.len() > MAX_ENUM {
            return Err(crate::Error::Limit {
                kind: crate::error::LimitKind::EnumValues,
                what: format!("`enum` values at {}", join(pointer, "enum")),
                limit: MAX_ENUM,
                hint: None,
            });
        }
        (a.iter().collect(), "enum")
    } else {
        return Ok(None);
    };
    // Other constraining keywords filter the values (an `enum` beside a `const` included).
    let mut rest = obj.clone();
    rest.remove(kw);
    let rest = Value::Object(rest);
    let mut alts = Vec::new();
    let mut by_grammar: Option<Vec<bool>> = None;
    for (i, v) in values.iter().enumerate() {
        let valid = match simple_validate(v, &rest, &c.limits) {
            Some(valid) => Some(valid),
            None => {
                if by_grammar.is_none() {
                    by_grammar = Some(accepted_by(c, &rest, &values, pointer)?.unwrap_or_default());
                }
                by_grammar.as_ref().and_then(|a| a.get(i).copied())
            }
        };
        match valid {
            Some(true) => alts.push(literal(c, v)),
            Some(false) => {}
            None => {
                c.unenforced(pointer, kw, "the other keywords beside it cannot be checked against its values")?;
                alts.push(literal(c, v));
            }
        }
    }
    Ok(Some(Expr::Alt(alts)))
}

/// Most values, longest value and most bytes in all (compact JSON) that [`accepted_by`]
/// checks: the reference recognizer is polynomial in the length, not linear.
const MAX_CHECKED_VALUES: usize = 256;
const MAX_CHECKED_BYTES: usize = 128;
const MAX_CHECKED_TOTAL: usize = 2048;

/// Most rules in a grammar that [`accepted_by`] checks with (the reference recognizer builds
/// an automaton for every regex it holds: cheap for a few rules, not for a whole large schema).
const MAX_CHECKED_RULES: usize = 64;

/// The rules reachable from `start`, renumbered into a grammar of their own; `None` if there
/// are more than `limit`.
fn reachable(
    rules: &[crate::grammar::Rule],
    start: crate::grammar::RuleId,
    limit: usize,
) -> Option<crate::grammar::Grammar> {
    use crate::grammar::{Grammar, Rule, RuleId};
    let mut index: std::collections::HashMap<u32, u32> = std::collections::HashMap::new();
    let mut order = vec![start];
    index.insert(start.0, 0);
    let mut i = 0;
    while i < order.len() {
        let mut found = Vec::new();
        rules[order[i].0 as usize].body.for_each_rule(&mut |r| found.push(r));
        for r in found {
            if !index.contains_key(&r.0) {
                if order.len() >= limit {
                    return None;
                }
                index.insert(r.0, order.len() as u32);
                order.push(r);
            }
        }
        i += 1;
    }
    let rules = order.iter().map(|r| {
        let rule = &rules[r.0 as usize];
        let mut body = rule.body.clone();
        body.for_each_rule_mut(&mut |r| *r = RuleId(index[&r.0]));
        Rule { name: rule.name.clone(), body, span: None }
    });
    Some(Grammar { rules: rules.collect(), start: RuleId(0) })
}

/// Which of `values` the grammar of `schema` accepts (compact JSON), checked by the reference
/// recognizer; `None` if the schema does not compile exactly or the values are too many or
/// too long to check. Sound for filtering: the grammar accepts only valid JSON texts, so a
/// value it accepts is valid (one it rejects may be valid but outside what the grammar
/// writes, e.g. keys out of order: dropping it is stricter, never wrong). The compiler is
/// left as it was. The recognizer's automata are built under the compile's limits: past them,
/// the limit error.
fn accepted_by(c: &mut Compiler, schema: &Value, values: &[&Value], pointer: &str) -> Result<Option<Vec<bool>>> {
    let texts: Vec<String> = values.iter().map(|v| serde_json::to_string(v).expect("JSON serializes")).collect();
    if texts.len() > MAX_CHECKED_VALUES
        || texts.iter().any(|t| t.len() > MAX_CHECKED_BYTES)
        || texts.iter().map(String::len).sum::<usize>() > MAX_CHECKED_TOTAL
    {
        return Ok(None);
    }
    let key = format!("{schema}\u{0}{}", texts.join("\u{0}"));
    if let Some(known) = c.value_checks.get(&key) {
        return Ok(known.clone());
    }
    let mut out = None;
    let mut limit = None;
    // Always rolled back: the rules built here are only for the check.
    let _ = c.attempt(|c| {
        let before = c.unenforced.len();
        let start = c.new_rule("enum-check");
        let body = c.schema(schema, pointer)?;
        if c.unenforced.len() == before {
            c.rules[start.0 as usize].body = body;
            if let Some(g) = reachable(&c.rules, start, MAX_CHECKED_RULES) {
                match crate::grammar::reference::Reference::within(&g, &c.limits) {
                    Ok(r) => out = Some(texts.iter().map(|t| r.accepts(t.as_bytes())).collect()),
                    Err(e) => limit = Some(e),
                }
            }
        }
        Err::<(), _>(crate::error::Error::state("rolled back"))
    });
    if let Some(e) = limit {
        return Err(e);
    }
    c.value_checks.insert(key, out.clone());
    Ok(out)
}

/// A JSON value as a literal, with whitespace allowed between the tokens of arrays/objects.
pub(super) fn literal(c: &Compiler, v: &Value) -> Expr {
    match v {
        Value::Array(a) => {
            let mut parts = vec![Expr::Literal("[".into()), c.ws()];
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    parts.push(c.punct(","));
                }
                parts.push(literal(c, x));
            }
            parts.extend([c.ws(), Expr::Literal("]".into())]);
            Expr::Seq(parts)
        }
        Value::Object(o) => {
            let mut parts = vec![Expr::Literal("{".into()), c.ws()];
            for (i, (k, x)) in o.iter().enumerate() {
                if i > 0 {
                    parts.push(c.punct(","));
                }
                parts.push(Expr::Literal(format!("\"{}\"", string::encode_str(k))));
                parts.push(c.punct(":"));
                parts.push(literal(c, x));
            }
            parts.extend([c.ws(), Expr::Literal("}".into())]);
            Expr::Seq(parts)
        }
        other => Expr::Literal(serde_json::to_string(other).expect("JSON serializes")),
    }
}

/// Most compile attempts of rewritten `oneOf` branches in one schema.
const MAX_ONE_OF_ATTEMPTS: usize = 500;

pub(super) fn any_one_of(c: &mut Compiler, obj: &Map<String, Value>, pointer: &str) -> Result<Option<Expr>> {
    let (kw, branches) = match (obj.get("anyOf"), obj.get("oneOf")) {
        (Some(_), Some(_)) => {
            // Both: anyOf ∧ oneOf — split into allOf of the two.
            let mut a = obj.clone();
            let one = a.remove("oneOf").unwrap();
            let any = a.remove("anyOf").unwrap();
            let merged =
                keyword("allOf", Value::Array(vec![Value::Object(a), keyword("anyOf", any), keyword("oneOf", one)]));
            return Ok(Some(c.schema(&merged, pointer)?));
        }
        (Some(b), None) => ("anyOf", b),
        (None, Some(b)) => ("oneOf", b),
        (None, None) => return Ok(None),
    };
    let branches = branches
        .as_array()
        .filter(|a| !a.is_empty())
        .ok_or_else(|| c.bad(&join(pointer, kw), format!("`{kw}` must be a non-empty array")))?;
    if kw == "anyOf" {
        if let Some(e) = any_of_patterns(c, obj, branches, pointer) {
            return Ok(Some(e));
        }
    }
    // The sibling keywords, without the branches (cloned only when they constrain: each
    // branch is then intersected with them).
    let constraining = obj.iter().any(|(k, _)| k != kw && !ANNOTATIONS.contains(&k.as_str()));
    let siblings: Map<String, Value> = match constraining {
        true => without(obj, kw),
        false => Map::new(),
    };
    let with_siblings = |b: &Value| keyword("allOf", Value::Array(vec![Value::Object(siblings.clone()), b.clone()]));
    let compile_all = |c: &mut Compiler, full: &[Value]| -> Result<Expr> {
        let mut alts = Vec::new();
        for (i, b) in full.iter().enumerate() {
            alts.push(c.schema(b, &join(&join(pointer, kw), &i.to_string()))?);
        }
        Ok(Expr::Alt(alts))
    };
    if kw == "oneOf" && branches.len() > 1 {
        // Each way of making the branches disjoint, best first; the first that compiles wins.
        let mut why: Option<String> = None;
        for rewritten in disjoint_branches(c, branches) {
            // Attempts nest (a branch's own `oneOf`s try their ways too): a budget per schema
            // keeps that from growing without bound.
            c.one_of_attempts += 1;
            if c.one_of_attempts > MAX_ONE_OF_ATTEMPTS {
                break;
            }
            let full: Vec<Value> = if constraining { rewritten.iter().map(with_siblings).collect() } else { rewritten };
            // (Lenient compiles too: a way that leaves something unenforced does not count.)
            let exact = c.attempt(|c| {
                let before = c.unenforced.len();
                let e = compile_all(c, &full)?;
                if c.unenforced.len() > before {
                    return Err(crate::error::Error::state("not exact"));
                }
                Ok(e)
            });
            match exact {
                Ok(e) => return Ok(Some(e)),
                Err(e) => {
                    why.get_or_insert_with(|| e.to_string());
                }
            }
        }
        let mut reason =
            "its branches may overlap (exactly-one cannot be enforced); use anyOf if overlap is fine".to_string();
        if let Some(why) = why {
            reason.push_str(&format!(" (keeping them apart failed: {why})"));
        }
        c.unenforced(pointer, "oneOf", reason)?;
    }
    if constraining {
        let full: Vec<Value> = branches.iter().map(with_siblings).collect();
        return Ok(Some(compile_all(c, &full)?));
    }
    Ok(Some(compile_all(c, branches)?))
}

/// An `anyOf` whose branches are only `pattern`s is one `pattern`, their alternation: a
/// string matches one of them iff it matches `(?:P1)|(?:P2)|…` (a pattern matches anywhere, and
/// each alternative keeps its own anchors), and both accept every non-string. One lexeme then
/// stands where there were one per branch, scanned side by side at every token (a string with
/// three such patterns took 7 ms per first mask, 2 ms as one). `None` (compile the branches as
/// they are) unless every branch is such, or if the alternation does not compile.
fn any_of_patterns(c: &mut Compiler, obj: &Map<String, Value>, branches: &[Value], pointer: &str) -> Option<Expr> {
    let patterns: Vec<&str> = branches
        .iter()
        .map(|b| {
            let b = b.as_object()?;
            b.keys().all(|k| k == "pattern" || ANNOTATIONS.contains(&k.as_str())).then_some(())?;
            b.get("pattern")?.as_str()
        })
        .collect::<Option<_>>()?;
    if patterns.len() < 2 {
        return None;
    }
    // Beside a `pattern` of its own the schema would need two patterns intersected: left as is.
    if obj.contains_key("pattern") {
        return None;
    }
    let alternation = patterns.iter().map(|p| format!("(?:{p})")).collect::<Vec<_>>().join("|");
    let mut merged = without(obj, "anyOf");
    merged.insert("pattern".into(), Value::String(alternation));
    c.attempt(|c| c.schema(&Value::Object(merged), pointer)).ok()
}

/// `s` with its `oneOf` turned into `anyOf`, where the branches are provably pairwise disjoint
/// (then exactly one holds if and only if one does); `None` otherwise or without a `oneOf`.
pub(super) fn one_of_as_any_of(c: &Compiler, s: &Value) -> Option<Value> {
    let o = s.as_object()?;
    let branches = o.get("oneOf")?.as_array()?;
    if o.contains_key("anyOf") || branches.len() > 64 {
        return None;
    }
    let views: Vec<Value> = branches.iter().map(|b| merged_view(c, &c.resolve_shallow(b))).collect();
    let disjoint = (0..views.len()).all(|i| (i + 1..views.len()).all(|j| pair_disjoint(c, &views[i], &views[j])));
    if !disjoint {
        return None;
    }
    let mut out = o.clone();
    out.remove("oneOf");
    out.insert("anyOf".into(), Value::Array(branches.clone()));
    Some(Value::Object(out))
}

/// Ways to rewrite `oneOf` branches to be pairwise disjoint, so that "exactly one" is their
/// union, best first (none if no way is known):
/// 1. (exact) A JSON type that two branches accept in full (no `type`, no keyword for it) has
///    no valid value under `oneOf`: it is removed from every branch.
/// 2. (exact) A pair that is provably disjoint (types, `const`/`enum` values, a discriminating
///    required property; branches seen with their plain `allOf` merged) is left alone;
///    otherwise `not <other>` is added to the branch where that `not` rewrites exactly
///    ([`rewrite_not`]).
/// 3. (stricter, documented) A property that every branch declares with pairwise disjoint
///    `const`/`enum` values is made required in every branch: outputs always name their
///    branch, and only instances that omit the property are lost. Tried before 2. when 2.
///    would more than triple the branches' size.
/// 4. (exact) As 2., with the `not`s that do not rewrite at once (of `$ref`s, nested
///    applicators) left to the compiler, which rewrites them level by level (`not` of a
///    `$ref` becomes a rule of its own). Last, since it may cost much more to compile.
fn disjoint_branches(c: &Compiler, branches: &[Value]) -> Vec<Vec<Value>> {
    let unchanged: Vec<Value> = branches.iter().map(|b| merged_view(c, &c.resolve_shallow(b))).collect();
    let mut resolved = unchanged.clone();
    const TYPES: [&str; 6] = ["null", "boolean", "object", "array", "string", "number"];
    let shared: Vec<&str> =
        TYPES.into_iter().filter(|t| resolved.iter().filter(|b| accepts_every(b, t)).count() >= 2).collect();
    for t in shared {
        for b in resolved.iter_mut() {
            remove_type(b, t);
        }
    }
    let n = resolved.len();
    let overlapping = |r: &[Value], i: usize, j: usize| !pair_disjoint(c, &r[i], &r[j]);
    let mut exact = resolved.clone();
    let mut ok = true;
    let mut deferred = false;
    for i in 0..n {
        for j in (0..n).filter(|&j| j != i && overlapping(&resolved, i, j)) {
            match with_not(&exact[i], &resolved[j]) {
                Some((v, d)) => {
                    exact[i] = v;
                    deferred |= d;
                }
                None => ok = false,
            }
        }
    }
    // A deferred negation is compiled level by level, and a long one multiplies the
    // branches' members: either can cost much more to compile than the discriminator
    // (stricter), so they come after it.
    let size = |w: &[Value]| w.iter().map(|v| v.to_string().len()).sum::<usize>();
    let costly = deferred || size(&exact) > 3 * size(&resolved);
    let strict = discriminated(&resolved, &overlapping);
    let exact = ok.then_some(exact);
    let (first, second) = if costly { (strict, exact) } else { (exact, strict) };
    let mut out: Vec<Vec<Value>> = first.into_iter().chain(second).collect();
    // A branch left as it was keeps its `$ref` (inlined, a recursive branch would be compiled
    // again and again instead of becoming a recursive rule).
    for way in out.iter_mut() {
        for (i, b) in way.iter_mut().enumerate() {
            if *b == unchanged[i] {
                *b = branches[i].clone();
            }
        }
    }
    out
}

/// `s` with a plain `allOf` merged into it (each part's top-level `$ref` resolved), so that
/// disjointness checks see its keywords; `s` itself when that is not simple (conditionals,
/// `not`, `unevaluated*` in a part, or keywords that do not merge exactly).
fn merged_view(c: &Compiler, s: &Value) -> Value {
    let Some(Value::Array(parts)) = s.get("allOf") else { return s.clone() };
    let mut base = s.as_object().cloned().unwrap_or_default();
    base.remove("allOf");
    if base.contains_key("$ref") || parts.len() > 16 {
        return s.clone();
    }
    let mut merged = Value::Object(base);
    const HARD: [&str; 10] = [
        "allOf",
        "not",
        "if",
        "dependentSchemas",
        "dependentRequired",
        "dependencies",
        "unevaluatedProperties",
        "unevaluatedItems",
        "$ref",
        "$dynamicRef",
    ];
    for part in parts {
        let part = c.resolve_shallow(part);
        if part.as_object().is_some_and(|o| HARD.iter().any(|k| o.contains_key(*k))) {
            return s.clone();
        }
        match merge(merged, &part, &c.limits) {
            Ok(m) => merged = m,
            Err(_) => return s.clone(),
        }
    }
    merged
}

/// A discriminator that every branch declares but not all require: require it, if that makes
/// the branches pairwise disjoint.
fn discriminated(resolved: &[Value], overlapping: &dyn Fn(&[Value], usize, usize) -> bool) -> Option<Vec<Value>> {
    let n = resolved.len();
    let first = resolved[0].get("properties").and_then(Value::as_object)?;
    'key: for key in first.keys() {
        let mut strict = resolved.to_vec();
        for b in strict.iter_mut() {
            let Value::Object(o) = b else { break 'key };
            let mut req = o.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
            if !req.iter().any(|r| r == key.as_str()) {
                req.push(Value::String(key.clone()));
            }
            o.insert("required".into(), Value::Array(req));
        }
        if (0..n).all(|i| (i + 1..n).all(|j| !overlapping(&strict, i, j))) {
            return Some(strict);
        }
    }
    None
}

/// Does schema `b` accept every value of JSON type `t` (it has no `type` and no keyword that
/// could reject such a value)?
fn accepts_every(b: &Value, t: &str) -> bool {
    match b {
        Value::Bool(v) => *v,
        Value::Object(o) => o.iter().all(|(k, v)| {
            (k == "type" && type_list(v).contains(&t))
                || ANNOTATIONS.contains(&k.as_str())
                || !VALIDATION.contains(&k.as_str())
                || matches!(keyword_type(k), Some(kt) if kt != t && !(kt == "number" && t == "integer"))
        }),
        _ => false,
    }
}

/// Narrows schema `b` to values that are not of type `t` (`number` takes `integer` with it).
fn remove_type(b: &mut Value, t: &str) {
    const ALL: [&str; 6] = ["null", "boolean", "object", "array", "string", "number"];
    if let Value::Bool(true) = b {
        *b = Value::Object(Map::new());
    }
    let Value::Object(o) = b else { return };
    let current: Vec<String> = match o.get("type") {
        None => ALL.iter().map(|s| s.to_string()).collect(),
        Some(v) => type_list(v).iter().map(|s| s.to_string()).collect(),
    };
    let keep: Vec<Value> =
        current.into_iter().filter(|x| x != t && !(t == "number" && x == "integer")).map(Value::String).collect();
    o.insert("type".into(), Value::Array(keep));
}

/// `b ∧ not other` as one schema, and whether it was deferred: rewritten here where the `not`
/// rewrites at once, else an `allOf` left for the compiler (which resolves `$ref`s inside the
/// `not` and rewrites level by level, or reports what it cannot write).
fn with_not(b: &Value, other: &Value) -> Option<(Value, bool)> {
    let deferred = || (keyword("allOf", Value::Array(vec![b.clone(), keyword("not", other.clone())])), true);
    match (b, other) {
        (Value::Bool(false), _) | (_, Value::Bool(true)) => Some((Value::Bool(false), false)),
        (_, Value::Bool(false)) => Some((b.clone(), false)),
        (Value::Bool(true), _) => Some(
            rewrite_not(&Map::from_iter([("not".to_string(), other.clone())]))
                .map_or_else(|| (keyword("not", other.clone()), true), |v| (Value::Object(v), false)),
        ),
        (Value::Object(o), _) => {
            let direct = || {
                let m = if o.contains_key("not") { rewrite_not(o)? } else { o.clone() };
                rewrite_not_of(m, other.as_object()?).map(Value::Object)
            };
            Some(direct().map_or_else(deferred, |v| (v, false)))
        }
        _ => None,
    }
}

/// Are two schemas provably disjoint: no shared type, disjoint `const`/`enum` values, values of
/// one that the other rejects, or (both objects only) a discriminating property that both
/// require with disjoint values, or a key that one requires and the other forbids?
fn pair_disjoint(c: &Compiler, a: &Value, b: &Value) -> bool {
    pair_disjoint_within(c, a, b, 8)
}

fn pair_disjoint_within(c: &Compiler, a: &Value, b: &Value, depth: usize) -> bool {
    let (ta, tb) = (type_set(a), type_set(b));
    if let (Some(x), Some(y)) = (&ta, &tb) {
        let shared = x.iter().any(|t| {
            y.contains(t) || (*t == "integer" && y.contains(&"number")) || (*t == "number" && y.contains(&"integer"))
        });
        if !shared {
            return true;
        }
    }
    for (p, q) in [(a, b), (b, a)] {
        if let Some(values) = value_set(p) {
            if values.iter().all(|v| simple_validate(v, q, &c.limits) == Some(false)) {
                return true;
            }
        }
    }
    // Object keywords only separate objects: both must be objects only.
    let objects_only = |t: &Option<Vec<&str>>| t.as_ref().is_some_and(|t| t.iter().all(|x| *x == "object"));
    if !objects_only(&ta) || !objects_only(&tb) {
        return false;
    }
    let required = |s: &Value| -> Vec<String> {
        s.get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect()
    };
    let prop = |s: &Value, k: &str| s.get("properties").and_then(|p| p.get(k)).map(|p| c.resolve_shallow(p));
    let (ra, rb) = (required(a), required(b));
    for k in ra.iter().filter(|k| rb.contains(k)) {
        if let (Some(pa), Some(pb)) = (prop(a, k), prop(b, k)) {
            if depth > 0 && pair_disjoint_within(c, &pa, &pb, depth - 1) {
                return true;
            }
        }
    }
    // A key one side requires and the other forbids (`false`, or closed without it).
    let forbids = |s: &Value, k: &str| match prop(s, k) {
        Some(p) => p == Value::Bool(false),
        None => s.get("additionalProperties") == Some(&Value::Bool(false)) && s.get("patternProperties").is_none(),
    };
    ra.iter().any(|k| forbids(b, k)) || rb.iter().any(|k| forbids(a, k))
}

fn type_set(s: &Value) -> Option<Vec<&str>> {
    match s.get("type")? {
        Value::String(t) => Some(vec![t.as_str()]),
        Value::Array(a) => a.iter().map(Value::as_str).collect(),
        _ => None,
    }
}

fn value_set(s: &Value) -> Option<Vec<&Value>> {
    if let Some(v) = s.get("const") {
        return Some(vec![v]);
    }
    s.get("enum")?.as_array().map(|a| a.iter().collect())
}

/// Merges `allOf` (and `$ref` with constraining siblings) into one schema; `None` if there is
/// nothing to merge.
pub(super) fn merge_all_of(c: &mut Compiler, obj: &Map<String, Value>, pointer: &str) -> Result<Option<Value>> {
    let has_all_of = obj.contains_key("allOf");
    let ref_with_siblings =
        obj.contains_key("$ref") && obj.keys().any(|k| k != "$ref" && !ANNOTATIONS.contains(&k.as_str()));
    if !has_all_of && !ref_with_siblings {
        return Ok(None);
    }
    // The keywords beside `allOf` (and beside a `$ref` with siblings) are the first part.
    let base: Map<String, Value> = obj
        .iter()
        .filter(|(k, _)| *k != "allOf" && !(ref_with_siblings && *k == "$ref"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut parts: Vec<Value> = Vec::new();
    if let Some(all) = obj.get("allOf") {
        let a = all.as_array().ok_or_else(|| c.bad(&join(pointer, "allOf"), "`allOf` must be an array"))?;
        parts.extend(a.iter().cloned());
    }
    if ref_with_siblings {
        parts.push(serde_json::json!({"$ref": obj["$ref"].clone()}));
    }
    let mut merged = Value::Object(base);
    // A worklist: a part's own conditionals and `allOf` are flattened into further parts.
    let mut queue: std::collections::VecDeque<Value> = parts.into();
    let mut taken = 0;
    while let Some(part) = queue.pop_front() {
        taken += 1;
        if taken > 1000 {
            return Err(c.bad(pointer, "`allOf` expands to more than 1000 parts (a cycle of `$ref`s through `allOf`?)"));
        }
        let mut part = c.resolve_shallow_owned(part);
        if let Value::Object(o) = part {
            // A part's own `unevaluated*` sees only that part: close it before merging.
            let mut o = match c.unevaluated(&o, pointer)? {
                Some(closed) => closed,
                None => o,
            };
            for kw in ["unevaluatedProperties", "unevaluatedItems"] {
                if o.get(kw).is_some_and(|v| v != &Value::Bool(true)) {
                    c.unenforced(pointer, kw, "inside an `allOf` part with conditional applicators beside it")?;
                }
                o.remove(kw);
            }
            let o = match rewrite_conditionals(c, &o, pointer)? {
                Some(rewritten) => rewritten,
                None => o,
            };
            let mut o = if o.contains_key("not") { rewrite_not(&o).unwrap_or(o) } else { o };
            if let Some(all) = o.remove("allOf") {
                queue.extend(all.as_array().cloned().unwrap_or_default());
            }
            if o.contains_key("$ref") {
                queue.push_back(serde_json::json!({"$ref": o.remove("$ref").unwrap()}));
            }
            part = Value::Object(o);
        }
        match merge(merged, &part, &c.limits) {
            Ok(m) => merged = m,
            Err((unchanged, why)) => {
                merged = unchanged;
                c.unenforced(pointer, "allOf", why)?;
            }
        }
    }
    Ok(Some(merged))
}

/// The intersection of two schemas as one schema, or why it cannot be written exactly (with
/// `a` back, unchanged). `a` is taken, not copied: it is the running result of a whole `allOf`.
fn merge(a: Value, b: &Value, limits: &DfaLimits) -> std::result::Result<Value, (Value, String)> {
    match (&a, b) {
        (Value::Bool(false), _) | (_, Value::Bool(false)) => return Ok(Value::Bool(false)),
        (Value::Bool(true), x) => return Ok(x.clone()),
        (_, Value::Bool(true)) => return Ok(a),
        (Value::Object(_), Value::Object(_)) => {}
        _ => return Err((a, "a subschema is neither an object nor a boolean".into())),
    }
    let (Value::Object(mut a), Value::Object(b)) = (a, b) else { unreachable!("both objects") };
    // Every change is worked out against `a` as it is, then applied to it in order.
    match merge_changes(&a, b, limits) {
        Ok(Merged::Whole(v)) => Ok(v),
        Ok(Merged::Changes(changes)) => {
            for (k, v) in changes.0 {
                match v {
                    Some(v) => {
                        a.insert(k, v);
                    }
                    None => {
                        a.remove(&k);
                    }
                }
            }
            Ok(Value::Object(a))
        }
        Err(why) => Err((Value::Object(a), why)),
    }
}

/// Inserts (`Some`) and removals (`None`) of keywords, in order.
#[derive(Default)]
struct Changes(Vec<(String, Option<Value>)>);

impl Changes {
    fn insert(&mut self, k: String, v: Value) {
        self.0.push((k, Some(v)));
    }
    fn remove(&mut self, k: &str) {
        self.0.push((k.to_string(), None));
    }
}

/// What merging two object schemas gives: a new schema, or changes to the first.
enum Merged {
    Whole(Value),
    Changes(Changes),
}

fn merge_changes(
    a: &Map<String, Value>,
    b: &Map<String, Value>,
    limits: &DfaLimits,
) -> std::result::Result<Merged, String> {
    if a.contains_key("$ref") || b.contains_key("$ref") || a.contains_key("allOf") || b.contains_key("allOf") {
        // Nested references/allOf: wrap and let the caller resolve level by level.
        if !(a.contains_key("$ref") && b.contains_key("$ref")) && !(a.contains_key("allOf") && b.contains_key("allOf"))
        {
            let (with, without) = if a.contains_key("$ref") || a.contains_key("allOf") { (a, b) } else { (b, a) };
            let mut out = without.clone();
            let mut all = vec![];
            let mut w = with.clone();
            if let Some(x) = w.remove("allOf") {
                all.extend(x.as_array().cloned().unwrap_or_default());
            }
            if let Some(r) = w.remove("$ref") {
                all.push(serde_json::json!({"$ref": r}));
            }
            all.push(Value::Object(w));
            out.insert("allOf".into(), Value::Array(all));
            return Ok(Merged::Whole(Value::Object(out)));
        }
        return Err("nested `$ref`/`allOf` on both sides".into());
    }
    let mut out = Changes::default();
    for (k, bv) in b {
        let Some(av) = a.get(k) else {
            out.insert(k.clone(), bv.clone());
            continue;
        };
        if av == bv {
            continue;
        }
        let merged = match k.as_str() {
            "type" => {
                let ta: Vec<&str> = type_list(av);
                let tb: Vec<&str> = type_list(bv);
                let mut t: Vec<Value> = Vec::new();
                for x in &ta {
                    for y in &tb {
                        let m = if x == y {
                            Some(*x)
                        } else if (*x, *y) == ("integer", "number") || (*x, *y) == ("number", "integer") {
                            Some("integer")
                        } else {
                            None
                        };
                        if let Some(m) = m {
                            if !t.iter().any(|v| v == m) {
                                t.push(Value::String(m.into()));
                            }
                        }
                    }
                }
                Value::Array(t)
            }
            "required" => {
                let mut r = av.as_array().cloned().unwrap_or_default();
                for x in bv.as_array().into_iter().flatten() {
                    if !r.contains(x) {
                        r.push(x.clone());
                    }
                }
                Value::Array(r)
            }
            "minimum" | "minLength" | "minItems" | "minProperties" | "exclusiveMinimum"
                if av.is_number() && bv.is_number() =>
            {
                if av.as_f64() >= bv.as_f64() {
                    av.clone()
                } else {
                    bv.clone()
                }
            }
            "maximum" | "maxLength" | "maxItems" | "maxProperties" | "exclusiveMaximum"
                if av.is_number() && bv.is_number() =>
            {
                if av.as_f64() <= bv.as_f64() {
                    av.clone()
                } else {
                    bv.clone()
                }
            }
            "enum" | "const" => {
                let ea = value_set_of(k, av);
                let eb = value_set_of(k, bv);
                let both: Vec<Value> = ea.into_iter().filter(|v| eb.contains(v)).collect();
                out.remove(k);
                out.insert("enum".into(), Value::Array(both));
                continue;
            }
            // Object member keywords are merged together below.
            "properties" | "patternProperties" => continue,
            "additionalProperties" | "propertyNames" => both(av.clone(), bv.clone()),
            string::NOT_STRING | string::EXCLUDE_STRINGS | number::EXCLUDE_NUMBERS => {
                let mut all = av.as_array().cloned().unwrap_or_default();
                all.extend(bv.as_array().into_iter().flatten().cloned());
                Value::Array(all)
            }
            "items" | "prefixItems" | "additionalItems" => continue, // merged below
            // Each part's `not` is rewritten before merging where it can be; two that cannot
            // would need `not (A ∨ B)`, which could only be rewritten back into the same two.
            "not" => return Err("two `not` keywords that cannot be rewritten cannot be merged".into()),
            "contains" => return Err("two `contains` keywords (each needs its own item) cannot be merged".into()),
            // (a1 ∨ a2) ∧ (b1 ∨ b2) = ∨ (ai ∧ bj)
            "anyOf" => {
                let (xa, xb) = (av.as_array().cloned().unwrap_or_default(), bv.as_array().cloned().unwrap_or_default());
                if xa.len() * xb.len() > 64 {
                    return Err("two `anyOf` keywords with more than 64 branch pairs cannot be merged".into());
                }
                Value::Array(
                    xa.iter()
                        .flat_map(|x| {
                            xb.iter().map(move |y| keyword("allOf", Value::Array(vec![x.clone(), y.clone()])))
                        })
                        .collect(),
                )
            }
            _ if ANNOTATIONS.contains(&k.as_str()) => continue,
            "multipleOf" => match (av.as_u64(), bv.as_u64()) {
                (Some(x), Some(y)) => Value::from(lcm(x, y)),
                _ => return Err("two different non-integer `multipleOf` values".into()),
            },
            "$defs" | "definitions" => continue,
            // Unknown keywords are annotations: no effect on validation.
            _ if !VALIDATION.contains(&k.as_str()) => continue,
            _ => return Err(format!("two different `{k}` values cannot be merged exactly")),
        };
        out.insert(k.clone(), merged);
    }
    // Array items: each side as (prefix schemas, schema for the rest); position by position.
    let arrays = |o: &Map<String, Value>| {
        o.contains_key("items") || o.contains_key("prefixItems") || o.contains_key("additionalItems")
    };
    if arrays(a) && arrays(b) {
        let (pa, ra) = item_schemas(a);
        let (pb, rb) = item_schemas(b);
        let n = pa.len().max(pb.len());
        let prefix: Vec<Value> = (0..n)
            .map(|i| {
                both(pa.get(i).cloned().unwrap_or_else(|| ra.clone()), pb.get(i).cloned().unwrap_or_else(|| rb.clone()))
            })
            .collect();
        for k in ["items", "prefixItems", "additionalItems"] {
            out.remove(k);
        }
        if n > 0 {
            out.insert("prefixItems".into(), Value::Array(prefix));
        }
        out.insert("items".into(), both(ra, rb));
    }
    merge_members(a, b, &mut out, limits)?;
    Ok(Merged::Changes(out))
}

/// Merges the member keywords of two object schemas into `out`: each declared key gets what
/// *each* side says of it (its own schema and matching patterns, or its
/// `additionalProperties`); patterns are united. Exact unless a side's
/// `additionalProperties` would have to hold for keys that only the *other* side's patterns
/// match (the merged schema cannot say that): then it is an error.
fn merge_members(
    a: &Map<String, Value>,
    b: &Map<String, Value>,
    out: &mut Changes,
    limits: &DfaLimits,
) -> std::result::Result<(), String> {
    let members = |o: &Map<String, Value>| {
        o.contains_key("properties") || o.contains_key("patternProperties") || o.contains_key("additionalProperties")
    };
    if !members(a) || !members(b) {
        return Ok(()); // one side has nothing to say about members: `out` already has the other's
    }
    let patterns =
        |o: &Map<String, Value>| o.get("patternProperties").and_then(Value::as_object).cloned().unwrap_or_default();
    let additional = |o: &Map<String, Value>| o.get("additionalProperties").cloned().unwrap_or(Value::Bool(true));
    let (qa, qb) = (patterns(a), patterns(b));
    if (!qb.is_empty() && additional(a) != Value::Bool(true)) || (!qa.is_empty() && additional(b) != Value::Bool(true))
    {
        return Err(
            "merging `additionalProperties` with another schema's `patternProperties` is not supported yet".into()
        );
    }
    // What side `o` requires of the value of key `k`.
    let view = |o: &Map<String, Value>, q: &Map<String, Value>, k: &str| -> std::result::Result<Value, String> {
        let mut parts: Vec<Value> = Vec::new();
        if let Some(s) = o.get("properties").and_then(|p| p.get(k)) {
            parts.push(s.clone());
        }
        for (pat, s) in q {
            match pattern_matches(pat, k, limits) {
                Some(true) => parts.push(s.clone()),
                Some(false) => {}
                None => return Err(format!("cannot tell whether pattern {pat:?} matches {k:?}")),
            }
        }
        if parts.is_empty() {
            parts.push(additional(o));
        }
        Ok(parts.into_iter().reduce(both).expect("at least one part"))
    };
    let mut props = Map::new();
    for key in
        [a, b].iter().flat_map(|o| o.get("properties").and_then(Value::as_object).into_iter().flatten().map(|(k, _)| k))
    {
        if !props.contains_key(key) {
            props.insert(key.clone(), both(view(a, &qa, key)?, view(b, &qb, key)?));
        }
    }
    if !props.is_empty() {
        out.insert("properties".into(), Value::Object(props));
    }
    let mut q = qa;
    for (pat, s) in qb {
        let merged = match q.remove(&pat) {
            Some(x) => both(x, s),
            None => s,
        };
        q.insert(pat, merged);
    }
    if !q.is_empty() {
        out.insert("patternProperties".into(), Value::Object(q));
    }
    Ok(())
}

/// An array schema's (prefix item schemas, schema for the other items), either draft.
fn item_schemas(o: &Map<String, Value>) -> (Vec<Value>, Value) {
    let t = Value::Bool(true);
    match (o.get("prefixItems"), o.get("items")) {
        (Some(Value::Array(p)), items) => (p.clone(), items.cloned().unwrap_or(t)),
        (None, Some(Value::Array(p))) => (p.clone(), o.get("additionalItems").cloned().unwrap_or(t)),
        (_, items) => (Vec::new(), items.cloned().unwrap_or(t)),
    }
}

fn both(a: Value, b: Value) -> Value {
    match (&a, &b) {
        (Value::Bool(true), _) => b,
        (_, Value::Bool(true)) => a,
        _ if a == b => a,
        _ => keyword("allOf", Value::Array(vec![a, b])),
    }
}

fn type_list(v: &Value) -> Vec<&str> {
    match v {
        Value::String(s) => vec![s.as_str()],
        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    }
}

fn value_set_of(k: &str, v: &Value) -> Vec<Value> {
    if k == "const" {
        vec![v.clone()]
    } else {
        v.as_array().cloned().unwrap_or_default()
    }
}

fn lcm(a: u64, b: u64) -> u64 {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    a / gcd(a, b).max(1) * b
}

/// Validates `v` against the keywords of `schema` that it knows; `None` if the schema uses a
/// keyword it does not know (then the caller cannot decide).
/// Is `v` of the JSON Schema type `t`?
fn is_of_type(v: &Value, t: &str) -> bool {
    match t {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.as_f64().is_some_and(|f| f.fract() == 0.0),
        "array" => v.is_array(),
        "object" => v.is_object(),
        _ => false,
    }
}

pub(crate) fn simple_validate(v: &Value, schema: &Value, limits: &DfaLimits) -> Option<bool> {
    let obj = match schema {
        Value::Bool(b) => return Some(*b),
        Value::Object(o) => o,
        _ => return None,
    };
    for (k, s) in obj {
        // Keywords for another JSON type, and unknown keywords, have no effect on `v`.
        let applies = match keyword_type(k) {
            Some("number") => v.is_number(),
            Some("string") => v.is_string(),
            Some("array") => v.is_array(),
            Some("object") => v.is_object(),
            _ => true,
        };
        if !applies || !VALIDATION.contains(&k.as_str()) {
            continue;
        }
        let ok = match k.as_str() {
            _ if ANNOTATIONS.contains(&k.as_str()) => true,
            "type" => type_list(s).iter().any(|t| is_of_type(v, t)),
            "enum" => s.as_array()?.iter().any(|x| json_eq(x, v)),
            "const" => json_eq(s, v),
            "minLength" | "maxLength" => match v.as_str() {
                None => true,
                Some(st) => {
                    let n = st.chars().count() as u64;
                    if k == "minLength" {
                        n >= s.as_u64()?
                    } else {
                        n <= s.as_u64()?
                    }
                }
            },
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => match (v.as_f64(), s.as_f64()) {
                (None, _) => true,
                (Some(x), Some(b)) => match k.as_str() {
                    "minimum" => x >= b,
                    "maximum" => x <= b,
                    "exclusiveMinimum" => x > b,
                    _ => x < b,
                },
                _ => return None,
            },
            "pattern" => match v.as_str() {
                None => true,
                Some(st) => pattern_matches(s.as_str()?, st, limits)?,
            },
            "not" => !simple_validate(v, s, limits)?,
            string::EXCLUDE_STRINGS => !s.as_array()?.contains(v),
            number::NOT_INTEGER => v.as_f64().is_none_or(|f| f.fract() != 0.0),
            object::SOME_KEY_NOT_IN => match v.as_object() {
                None => true,
                Some(o) => {
                    let names = s.as_array()?;
                    o.keys().any(|k| !names.iter().any(|n| n == k.as_str()))
                }
            },
            number::EXCLUDE_NUMBERS => !s.as_array()?.iter().any(|x| json_eq(x, v)),
            string::NOT_STRING => {
                let mut ok = true;
                for x in s.as_array()? {
                    ok &= !simple_validate(v, x, limits)?;
                }
                ok
            }
            "anyOf" => {
                let mut any = false;
                for b in s.as_array()? {
                    any |= simple_validate(v, b, limits)?;
                }
                any
            }
            "allOf" => {
                let mut all = true;
                for b in s.as_array()? {
                    all &= simple_validate(v, b, limits)?;
                }
                all
            }
            "minItems" | "maxItems" | "minProperties" | "maxProperties" => {
                let n = match v {
                    Value::Array(a) => a.len() as u64,
                    Value::Object(o) => o.len() as u64,
                    _ => return Some(true),
                };
                if k.starts_with("min") {
                    n >= s.as_u64()?
                } else {
                    n <= s.as_u64()?
                }
            }
            "uniqueItems" => match v.as_array() {
                Some(a) if s == &Value::Bool(true) => {
                    (0..a.len()).all(|i| (i + 1..a.len()).all(|j| !json_eq(&a[i], &a[j])))
                }
                _ => true,
            },
            // (Array-form `items` is draft-07 tuple validation: not checked here.)
            "items" if !s.is_array() => match v.as_array() {
                None => true,
                Some(a) => {
                    let from = obj.get("prefixItems").and_then(Value::as_array).map_or(0, Vec::len);
                    let mut ok = true;
                    for x in a.iter().skip(from) {
                        ok &= simple_validate(x, s, limits)?;
                    }
                    ok
                }
            },
            "prefixItems" => match v.as_array() {
                None => true,
                Some(a) => {
                    let mut ok = true;
                    for (x, p) in a.iter().zip(s.as_array()?) {
                        ok &= simple_validate(x, p, limits)?;
                    }
                    ok
                }
            },
            "multipleOf" => match (v.as_i64(), s.as_u64()) {
                (None, _) if !v.is_number() => true,
                (Some(x), Some(m)) if m > 0 => x % m as i64 == 0,
                _ => return None,
            },
            "required" => match v.as_object() {
                None => true,
                Some(o) => s.as_array()?.iter().all(|k| k.as_str().is_some_and(|k| o.contains_key(k))),
            },
            "properties" => match v.as_object() {
                None => true,
                Some(o) => {
                    let mut ok = true;
                    for (k, ps) in s.as_object()? {
                        if let Some(x) = o.get(k) {
                            ok &= simple_validate(x, ps, limits)?;
                        }
                    }
                    ok
                }
            },
            _ => return None,
        };
        if !ok {
            return Some(false);
        }
    }
    Some(true)
}

/// Does `pattern` match `text`? The pattern runs over the canonical encoding, as the grammar
/// does. Not a DFA: a bounded NFA simulation (`regex-automata`'s meta regex, whose lazy DFA keeps
/// a cache of bounded size and falls back to the PikeVM), so a pattern whose DFA is exponential
/// (`(a|b)*a(a|b){20}`) is still checked against a few values quickly and in bounded memory.
/// The NFA honours `limits.nfa_bytes` (past it: `None`, the caller cannot decide); the lazy
/// DFA's cache is at most `limits.dfa_bytes`. Compiled patterns are cached per thread (enums
/// check many values).
fn pattern_matches(pattern: &str, text: &str, limits: &DfaLimits) -> Option<bool> {
    use regex_automata::meta;
    use regex_syntax::hir::{Hir, Look};
    use std::cell::RefCell;
    use std::collections::HashMap;
    type Cache = HashMap<(String, usize, usize), Option<std::rc::Rc<meta::Regex>>>;
    thread_local! {
        static CACHE: RefCell<Cache> = RefCell::new(HashMap::new());
    }
    let re = CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() > 256 {
            c.clear();
        }
        c.entry((pattern.to_string(), limits.nfa_bytes, limits.dfa_bytes))
            .or_insert_with(|| {
                let h = string::pattern_content(pattern).ok()?;
                let whole = Hir::concat(vec![Hir::look(Look::Start), h, Hir::look(Look::End)]);
                let config = meta::Config::new()
                    .nfa_size_limit(Some(limits.nfa_bytes))
                    .hybrid_cache_capacity(limits.dfa_bytes)
                    .dfa_size_limit(Some(limits.dfa_bytes))
                    .dfa_state_limit(Some(limits.states));
                meta::Builder::new().configure(config).build_from_hir(&whole).ok().map(std::rc::Rc::new)
            })
            .clone()
    })?;
    Some(re.is_match(string::encode_str(text).as_bytes()))
}

/// The values a schema allows when they are few and known: `const`/`enum` (checked against
/// the other keywords), or the types `boolean`/`null` alone. `None` otherwise.
pub(super) fn finite_values(c: &Compiler, schema: &Value) -> Option<Vec<Value>> {
    let s = c.resolve_shallow(schema);
    let o = match &s {
        Value::Bool(false) => return Some(Vec::new()),
        Value::Object(o) => o,
        _ => return None,
    };
    let candidates: Vec<Value> = if let Some(v) = value_set(&s) {
        v.into_iter().cloned().collect()
    } else {
        let types = type_list(o.get("type")?);
        if types.iter().any(|t| !matches!(*t, "boolean" | "null")) {
            return None;
        }
        types
            .iter()
            .flat_map(|t| if *t == "null" { vec![Value::Null] } else { vec![Value::Bool(true), Value::Bool(false)] })
            .collect()
    };
    let mut out = Vec::new();
    for v in candidates {
        match simple_validate(&v, &s, &c.limits)? {
            true => out.push(v),
            false => {}
        }
    }
    Some(out)
}

/// JSON equality as JSON Schema defines it (1 == 1.0).
pub(super) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, p)| y.get(k).is_some_and(|q| json_eq(p, q)))
        }
        _ => a == b,
    }
}
