//! `not`: rewritten into plain keywords where that is exact.
//!
//! JSON Schema has no complement of most keywords, so [`rewrite_not`] writes `not S` as what
//! fails `S`, keyword family by keyword family ([`rewrite_not_of`]): types removed, values
//! excluded, bounds flipped, "some required key missing", "some item fails", De Morgan over
//! `anyOf`/`allOf`, `not not S = S`, and a conjunction of independent keyword groups
//! ([`conjuncts`]) as a disjunction of their negations. Where the keywords constrain one JSON
//! type, [`negate_family`] keeps the other types' values apart: they satisfy `S` vacuously, so
//! `not S` rejects them. Internal keywords carry what JSON Schema cannot say: excluded strings
//! and numbers, non-integer numbers, a regular complement of string keywords, "some key outside
//! this list". [`with_not`] is `b ∧ not other` as one schema, for `oneOf` and `if`.
//!
//! Exact: every rewrite has the same valid instances as the `not` it replaces. Where no exact
//! rewrite is known the answer is `None` and the caller reports `not` (nothing is stricter
//! here). Excluding objects and arrays by value is bounded ([`MAX_EXCLUDED_MEMBERS`]).

use serde_json::{Map, Value};

use super::keywords::{add_to_all_of, keyword, type_list, without, VALIDATION};
use super::validate::is_of_type;

/// Rewrites `not` into plain keywords where that is exact; `None` if it cannot.
/// Handled: `not: {type}`; `not: {const/enum}` of strings, numbers, booleans or null
/// (excluded values); `not` of the keywords of one JSON type, with or without `type`
/// ([`negate_family`]): object keywords `required`/`properties` (some key missing, or present
/// with a value that fails), number bounds (flipped), string keywords (`pattern`, `format`,
/// lengths; a regular complement, [`super::keywords::NOT_STRING`]); `not` of `anyOf`/`allOf`
/// (De Morgan).
pub(super) fn rewrite_not(obj: &Map<String, Value>) -> Option<Map<String, Value>> {
    let not = super::keywords::get(obj, "not")?.as_object()?;
    let rest = without(obj, "not");
    rewrite_not_of(rest, not)
}

/// [`rewrite_not`] of `obj` (without its `not`) and the `not`'s schema `not`: the copy of
/// `obj` is the caller's (no copy of the `not` is made to remove it again). Dispatches on the
/// validation keywords of the `not` (those that constrain something) to one step per family.
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
        return Some(not_integer_and_rest(out, not));
    }
    let all_in = |family: &[&str]| others.iter().all(|k| family.contains(k));
    match others.as_slice() {
        // `not {}`: nothing is valid.
        [] if !has_type => {
            out.insert("type".into(), Value::Array(Vec::new()));
            Some(out)
        }
        [] => Some(not_types(out, &current, not)),
        _ if all_in(&["required", "properties", "additionalProperties"])
            && not
                .get("additionalProperties")
                .is_none_or(|a| a == &Value::Bool(false) || no_op("additionalProperties", a)) =>
        {
            not_members(out, &current, not, &others)
        }
        _ if all_in(&["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]) => {
            not_bounds(out, &current, not, &others)
        }
        _ if all_in(&["minItems", "maxItems"]) || (others == ["items"] && !not["items"].is_array()) => {
            not_items(out, &current, not, &others)
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
        ["const"] | ["enum"] => not_values(out, &current, not),
        _ if all_in(&["pattern", "format", "minLength", "maxLength"]) => {
            let mut excluded = not.clone();
            excluded.remove("type");
            negate_family(out, &current, not, "string", |out| {
                let mut all =
                    out.get(super::keywords::NOT_STRING).and_then(Value::as_array).cloned().unwrap_or_default();
                all.push(Value::Object(excluded));
                out.insert(super::keywords::NOT_STRING.into(), Value::Array(all));
            })
        }
        // not (contains S) on arrays: every item fails S.
        ["contains"] => negate_family(out, &current, not, "array", |out| {
            add_to_all_of(out, [serde_json::json!({"items": {"not": not["contains"]}})])
        }),
        _ if all_in(&["minProperties", "maxProperties"]) => not_property_counts(out, &current, not),
        _ if all_in(&["dependencies", "dependentSchemas", "dependentRequired"]) => {
            not_dependencies(out, &current, not, &others)
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

/// `not (integer ∧ K)` where the schema allows other numbers too: `not integer ∨ not K`.
fn not_integer_and_rest(mut out: Map<String, Value>, not: &Map<String, Value>) -> Map<String, Value> {
    let mut rest = not.clone();
    let t = rest.remove("type").expect("has a type");
    add_to_all_of(&mut out, [serde_json::json!({ "anyOf": [{"not": {"type": t}}, {"not": rest}] })]);
    out
}

/// `not {type: T}`: the schema's types less those in `T` (numbers less integers: the
/// non-integer numbers).
fn not_types(mut out: Map<String, Value>, current: &[String], not: &Map<String, Value>) -> Map<String, Value> {
    let ex = type_list(&not["type"]);
    let mut keep: Vec<Value> = Vec::new();
    for t in current {
        if ex.contains(&t.as_str()) || (t == "integer" && ex.contains(&"number")) {
            continue;
        }
        if t == "number" && ex.contains(&"integer") {
            // Numbers that are not integers.
            out.insert(super::keywords::NOT_INTEGER.into(), Value::Bool(true));
        }
        keep.push(Value::String(t.clone()));
    }
    out.insert("type".into(), Value::Array(keep));
    out
}

/// not (required R ∧ properties P [∧ additionalProperties false]) on objects: some key of R is
/// missing, or some key of P is present with a value its schema rejects [, or some key outside
/// P is present].
fn not_members(
    out: Map<String, Value>,
    current: &[String],
    not: &Map<String, Value>,
    others: &[&str],
) -> Option<Map<String, Value>> {
    let mut alts: Vec<Value> = Vec::new();
    if others.contains(&"additionalProperties") {
        let names: Vec<Value> = not
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(k, _)| Value::String(k.clone()))
            .collect();
        alts.push(serde_json::json!({ super::keywords::SOME_KEY_NOT_IN: names }));
    }
    for r in not.get("required").and_then(Value::as_array).into_iter().flatten() {
        alts.push(serde_json::json!({"properties": {r.as_str()?: false}}));
    }
    for (k, s) in not.get("properties").and_then(Value::as_object).into_iter().flatten() {
        alts.push(serde_json::json!({"required": [k], "properties": {k: {"not": s}}}));
    }
    negate_family(out, current, not, "object", |out| push_any_of(out, alts))
}

/// not (x ≥ a ∧ x ≤ b) on numbers: x < a or x > b (each bound flipped).
fn not_bounds(
    out: Map<String, Value>,
    current: &[String],
    not: &Map<String, Value>,
    others: &[&str],
) -> Option<Map<String, Value>> {
    let mut alts: Vec<Value> = Vec::new();
    for k in others {
        let v = not[*k].as_f64()?; // draft-04 boolean exclusives: not handled
        let flipped = match *k {
            "minimum" => "exclusiveMaximum",
            "exclusiveMinimum" => "maximum",
            "maximum" => "exclusiveMinimum",
            _ => "minimum",
        };
        alts.push(serde_json::json!({ flipped: v }));
    }
    negate_family(out, current, not, "number", |out| push_any_of(out, alts))
}

/// not (items S ∧ minItems a ∧ maxItems b) on arrays: some item fails S, or fewer than a
/// items, or more than b.
fn not_items(
    out: Map<String, Value>,
    current: &[String],
    not: &Map<String, Value>,
    others: &[&str],
) -> Option<Map<String, Value>> {
    let mut alts: Vec<Value> = Vec::new();
    for k in others {
        match *k {
            "items" => alts.push(serde_json::json!({"contains": {"not": not["items"]}})),
            "minItems" => match not[*k].as_u64()? {
                0 => {}
                n => alts.push(serde_json::json!({ "maxItems": n - 1 })),
            },
            _ => alts.push(serde_json::json!({ "minItems": not[*k].as_u64()? + 1 })),
        }
    }
    negate_family(out, current, not, "array", |out| push_any_of(out, alts))
}

/// `not {const}` / `not {enum}` (with `type` beside, only the values of that type): strings and
/// numbers excluded through the internal keywords, `null` and both booleans by type, one
/// boolean by the other, objects and arrays by what differs from them ([`differs_from`],
/// bounded by [`MAX_EXCLUDED_MEMBERS`]).
fn not_values(mut out: Map<String, Value>, current: &[String], not: &Map<String, Value>) -> Option<Map<String, Value>> {
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
    let mut types: Vec<String> = current.to_vec();
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
            Value::Bool(b) => parts.push(serde_json::json!({"anyOf": [{"not": {"type": "boolean"}}, {"const": !b}]})),
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
        let mut all = out.get(super::keywords::EXCLUDE_STRINGS).and_then(Value::as_array).cloned().unwrap_or_default();
        all.extend(strings);
        out.insert(super::keywords::EXCLUDE_STRINGS.into(), Value::Array(all));
    }
    if !numbers.is_empty() {
        let mut all = out.get(super::keywords::EXCLUDE_NUMBERS).and_then(Value::as_array).cloned().unwrap_or_default();
        all.extend(numbers);
        out.insert(super::keywords::EXCLUDE_NUMBERS.into(), Value::Array(all));
    }
    Some(out)
}

/// not (min ≤ #properties ≤ max) on objects: fewer, or more.
fn not_property_counts(
    out: Map<String, Value>,
    current: &[String],
    not: &Map<String, Value>,
) -> Option<Map<String, Value>> {
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
    negate_family(out, current, not, "object", |out| push_any_of(out, alts))
}

/// not (dependencies) on objects: some key is present whose dependency fails (a name it needs
/// is missing, or its schema fails).
fn not_dependencies(
    out: Map<String, Value>,
    current: &[String],
    not: &Map<String, Value>,
    others: &[&str],
) -> Option<Map<String, Value>> {
    let mut alts: Vec<Value> = Vec::new();
    for k in others {
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
    negate_family(out, current, not, "object", |out| push_any_of(out, alts))
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
            alts.push(serde_json::json!({ super::keywords::SOME_KEY_NOT_IN: keys }));
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

/// `b ∧ not other` as one schema, and whether it was deferred: rewritten here where the `not`
/// rewrites at once, else an `allOf` left for the compiler (which resolves `$ref`s inside the
/// `not` and rewrites level by level, or reports what it cannot write).
pub(super) fn with_not(b: &Value, other: &Value) -> Option<(Value, bool)> {
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
