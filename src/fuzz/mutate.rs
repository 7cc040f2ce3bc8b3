//! Near misses: texts one edit away from the language, each labelled with what breaks it.
//!
//! Two families of candidates, both built from a valid sample:
//! - *structural* ([`structural`]), from the sample's derivation: a required rule's text
//!   dropped, a repetition one copy over its `max` or under its `min`, a literal misspelt, a
//!   terminal with a byte too few or too many or a broken escape, the text truncated, a byte
//!   inserted;
//! - *semantic* ([`schema`]), for JSON Schemas, from the schema and the parsed sample: a
//!   required property dropped, a number just past its bound, a string one character too long
//!   or too short, a value outside its `enum`/`const`, a value of the wrong type, an extra
//!   property where none are allowed, an array one item too long or too short.
//!
//! Candidates are not trusted: [`keep_invalid`] drops every one the [`Checker`] still accepts.
//! For a schema, whose grammar is stricter than the schema in documented ways (canonical
//! strings, property order), a structural candidate is only kept when it is not JSON at all,
//! and a semantic one only when the checker rejects it, so "invalid" never rests on a
//! formatting detail.

use serde_json::{Map, Value};

use super::cover::{Derivation, TraceKind};
use super::{Checker, Source};
use crate::grammar::Grammar;

/// A near miss: the text, a short kind and a label saying what makes it invalid.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Mutant {
    pub text: String,
    pub kind: &'static str,
    pub label: String,
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn clip(s: &str) -> String {
    let mut t: String = s.chars().take(24).collect();
    if t.len() < s.len() {
        t.push('…');
    }
    t
}

fn splice(text: &[u8], start: usize, end: usize, with: &[u8]) -> Vec<u8> {
    let mut v = text[..start].to_vec();
    v.extend_from_slice(with);
    v.extend_from_slice(&text[end..]);
    v
}

/// Structural candidates from a derivation (unchecked). `src` picks positions and bytes.
pub fn structural(g: &Grammar, d: &Derivation, src: &mut dyn Source) -> Vec<Mutant> {
    let t = &d.text;
    let mut out = Vec::new();
    let mut push = |bytes: Vec<u8>, kind: &'static str, label: String| {
        if let Ok(text) = String::from_utf8(bytes) {
            out.push(Mutant { text, kind, label });
        }
    };
    for tr in &d.trace {
        let span = &t[tr.start..tr.end];
        match &tr.kind {
            TraceKind::Rule(r) if !span.is_empty() => {
                let name = &g.rule(*r).name;
                push(
                    splice(t, tr.start, tr.end, b""),
                    "drop",
                    format!("dropped the text {:?} of rule `{name}`", clip(&lossy(span))),
                );
            }
            TraceKind::Repeat { rule, min, max, copies } => {
                let name = &g.rule(*rule).name;
                let n = copies.len() as u32;
                if let (Some(m), Some(&(s, e))) = (max, copies.last()) {
                    if n == *m && e > s {
                        push(
                            splice(t, e, e, &t[s..e]),
                            "repeat-over",
                            format!(
                                "{} copies of {:?} in rule `{name}`, where at most {m} are allowed",
                                m + 1,
                                clip(&lossy(&t[s..e]))
                            ),
                        );
                    }
                }
                if n == *min && n > 0 {
                    let (s, e) = copies[src.below(copies.len())];
                    push(
                        splice(t, s, e, b""),
                        "repeat-under",
                        format!(
                            "{} copies in rule `{name}` (dropped {:?}), where at least {min} are required",
                            n - 1,
                            clip(&lossy(&t[s..e]))
                        ),
                    );
                }
            }
            TraceKind::Literal if !span.is_empty() => {
                let k = src.below(span.len());
                let mut bad = span.to_vec();
                bad.remove(k);
                push(
                    splice(t, tr.start, tr.end, &bad),
                    "literal",
                    format!("the literal {:?} misspelt as {:?}", lossy(span), lossy(&bad)),
                );
            }
            TraceKind::Terminal => {
                if !span.is_empty() {
                    let cut = &span[..span.len() - 1];
                    push(
                        splice(t, tr.start, tr.end, cut),
                        "terminal-short",
                        format!("the token {:?} cut to {:?}", clip(&lossy(span)), clip(&lossy(cut))),
                    );
                }
                let extra = [b'x', b'"', b'\\', b'-', b'.', b'0', b' '][src.below(7)];
                let mut long = span.to_vec();
                long.push(extra);
                push(
                    splice(t, tr.start, tr.end, &long),
                    "terminal-long",
                    format!("the token {:?} with {:?} appended", clip(&lossy(span)), extra as char),
                );
                if span.len() >= 2 && span[0] == b'"' && span[span.len() - 1] == b'"' {
                    let k = 1 + src.below(span.len() - 1);
                    let bad = splice(span, k, k, b"\\q");
                    push(
                        splice(t, tr.start, tr.end, &bad),
                        "escape",
                        format!("the string {:?} with the invalid escape \\q", clip(&lossy(span))),
                    );
                }
            }
            _ => {}
        }
    }
    if t.len() > 1 {
        let k = 1 + src.below(t.len() - 1);
        push(t[..k].to_vec(), "truncate", format!("truncated after {k} of {} bytes", t.len()));
    }
    let k = src.below(t.len() + 1);
    let b = [b'{', b'}', b'[', b']', b',', b':', b'"', b'(', b')', b'#', b'\\', b'\n'][src.below(12)];
    push(splice(t, k, k, &[b]), "insert", format!("the byte {:?} inserted at offset {k}", b as char));
    out
}

/// The candidates that `checker` rejects (and, for `json_only`, that are not JSON at all),
/// without duplicates.
pub fn keep_invalid(cands: Vec<Mutant>, checker: &Checker, json_only: bool) -> Vec<Mutant> {
    let mut seen = std::collections::HashSet::new();
    cands
        .into_iter()
        .filter(|m| seen.insert(m.text.clone()))
        .filter(|m| !json_only || serde_json::from_str::<Value>(&m.text).is_err())
        .filter(|m| !checker.accepts(m.text.as_bytes()))
        .collect()
}

/// Semantic candidates for a JSON Schema: edits of the parsed `text` that break one keyword
/// the schema applies to a value (unchecked; texts are compact JSON).
pub fn schema(schema: &Value, text: &str) -> Vec<Mutant> {
    let Ok(inst) = serde_json::from_str::<Value>(text) else { return Vec::new() };
    let mut edits = Vec::new();
    walk(schema, schema, &inst, String::new(), &mut edits, 0);
    edits
        .into_iter()
        .filter_map(|(ptr, kind, label, new)| {
            let mut doc = inst.clone();
            match new {
                Edit::Set(v) => *doc.pointer_mut(&ptr)? = v,
                Edit::Remove(key) => {
                    doc.pointer_mut(&ptr)?.as_object_mut()?.shift_remove(&key)?;
                }
                Edit::Insert(key, v) => {
                    doc.pointer_mut(&ptr)?.as_object_mut()?.insert(key, v);
                }
            }
            let at = if ptr.is_empty() { "/".to_string() } else { ptr };
            Some(Mutant { text: serde_json::to_string(&doc).ok()?, kind, label: format!("{label} at {at}") })
        })
        .collect()
}

enum Edit {
    Set(Value),
    Remove(String),
    Insert(String, Value),
}

type Edits = Vec<(String, &'static str, String, Edit)>;

fn resolve<'s>(root: &'s Value, mut s: &'s Value) -> &'s Value {
    for _ in 0..16 {
        match s.get("$ref").and_then(Value::as_str) {
            Some(r) if r.starts_with('#') => match root.pointer(&r[1..]) {
                Some(t) => s = t,
                None => break,
            },
            _ => break,
        }
    }
    s
}

fn esc(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn type_names(s: &Value) -> Option<Vec<&str>> {
    match s.get("type")? {
        Value::String(t) => Some(vec![t.as_str()]),
        Value::Array(ts) => Some(ts.iter().filter_map(Value::as_str).collect()),
        _ => None,
    }
}

fn num_plus(n: &Value, delta: i64) -> Option<Value> {
    if let Some(i) = n.as_i64() {
        return Some(Value::from(i.checked_add(delta)?));
    }
    if let Some(u) = n.as_u64() {
        return Some(Value::from(if delta >= 0 {
            u.checked_add(delta as u64)?
        } else {
            u.checked_sub((-delta) as u64)?
        }));
    }
    let f = n.as_f64()? + delta as f64;
    serde_json::Number::from_f64(f).map(Value::Number)
}

/// Collects into `out` the edits that break one keyword of schema `s` at the instance value
/// `inst` (at JSON pointer `ptr`), then recurses into the items and properties `s` describes.
fn walk(root: &Value, s: &Value, inst: &Value, ptr: String, out: &mut Edits, depth: usize) {
    if depth > 32 {
        return;
    }
    let s = resolve(root, s);
    let Some(obj) = s.as_object() else { return };
    if let Some(types) = type_names(s) {
        wrong_type(&types, &ptr, out);
    }
    if let Some(Value::Array(vals)) = obj.get("enum") {
        outside_enum(vals, inst, &ptr, out);
    }
    if let Some(c) = obj.get("const") {
        not_const(c, &ptr, out);
    }
    match inst {
        Value::Number(_) => past_bounds(s, obj, &ptr, out),
        Value::String(x) => wrong_length(obj, x, &ptr, out),
        Value::Array(items) => {
            array_edits(obj, items, &ptr, out);
            let prefix = obj.get("prefixItems").and_then(Value::as_array);
            for (i, v) in items.iter().enumerate() {
                let sub = match prefix {
                    Some(p) if i < p.len() => Some(&p[i]),
                    _ => obj.get("items").filter(|x| x.is_object()),
                };
                if let Some(sub) = sub {
                    walk(root, sub, v, format!("{ptr}/{i}"), out, depth + 1);
                }
            }
        }
        Value::Object(map) => {
            object_edits(obj, map, &ptr, out);
            if let Some(props) = obj.get("properties").and_then(Value::as_object) {
                for (k, v) in map {
                    if let Some(sub) = props.get(k) {
                        walk(root, sub, v, format!("{ptr}/{}", esc(k)), out, depth + 1);
                    }
                }
            }
        }
        _ => {}
    }
}

/// A value of the first JSON type that `types` does not allow.
fn wrong_type(types: &[&str], ptr: &str, out: &mut Edits) {
    let wrong = [
        ("string", Value::from("x")),
        ("integer", Value::from(7)),
        ("number", Value::from(0.5)),
        ("boolean", Value::from(true)),
        ("null", Value::Null),
        ("array", Value::Array(vec![])),
        ("object", Value::Object(Default::default())),
    ];
    let allowed = |t: &str| types.contains(&t) || (t == "integer" && types.contains(&"number"));
    if let Some((t, v)) = wrong.iter().find(|(t, _)| !allowed(t)) {
        out.push((
            ptr.to_string(),
            "type",
            format!("a {t} where the schema wants {}", types.join(" or ")),
            Edit::Set(v.clone()),
        ));
    }
}

/// A value outside the `enum` values `vals`, of the instance's kind where that is easy (a
/// string with a suffix, a number past the largest).
fn outside_enum(vals: &[Value], inst: &Value, ptr: &str, out: &mut Edits) {
    let bad = match inst {
        Value::String(x) => Value::from(format!("{x}_not_in_enum")),
        Value::Number(_) => vals
            .iter()
            .filter_map(|v| v.as_f64())
            .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x))))
            .and_then(|m| serde_json::Number::from_f64(m.floor() + 1.0))
            .map(Value::Number)
            .unwrap_or(Value::from("x")),
        _ => Value::from("not_in_enum"),
    };
    if !vals.contains(&bad) {
        out.push((ptr.to_string(), "enum", format!("{bad} is not one of the enum values"), Edit::Set(bad)));
    }
}

/// A value next to the `const` `c` (a string with a suffix, the number plus one, ...).
fn not_const(c: &Value, ptr: &str, out: &mut Edits) {
    let bad = match c {
        Value::String(x) => Value::from(format!("{x}_")),
        Value::Number(_) => num_plus(c, 1).unwrap_or(Value::Null),
        Value::Bool(b) => Value::from(!b),
        Value::Null => Value::from(0),
        _ => Value::Null,
    };
    out.push((ptr.to_string(), "const", format!("{bad} instead of the const {c}"), Edit::Set(bad)));
}

/// Numbers just past each bound of `obj` (integral for an integer schema `s`).
fn past_bounds(s: &Value, obj: &Map<String, Value>, ptr: &str, out: &mut Edits) {
    let bounds = [
        ("maximum", 1i64, false),
        ("exclusiveMaximum", 0, true),
        ("minimum", -1, false),
        ("exclusiveMinimum", 0, true),
    ];
    for (kw, delta, _) in bounds {
        let Some(b) = obj.get(kw).filter(|b| b.is_number()) else { continue };
        let Some(v) = num_plus(b, delta) else { continue };
        // An integer schema stays integral: only the bound is broken.
        if type_names(s).is_some_and(|t| t == ["integer"]) && !(v.is_i64() || v.is_u64()) {
            continue;
        }
        out.push((ptr.to_string(), "range", format!("{v}, just past {kw} {b}"), Edit::Set(v)));
    }
}

/// The string `x` one character over `maxLength` and one under `minLength`.
fn wrong_length(obj: &Map<String, Value>, x: &str, ptr: &str, out: &mut Edits) {
    let n = x.chars().count() as u64;
    if let Some(max) = obj.get("maxLength").and_then(Value::as_u64).filter(|&m| m < 10_000) {
        let mut long: String = x.chars().take(max as usize).collect();
        while (long.chars().count() as u64) <= max {
            long.push(long.chars().last().unwrap_or('a'));
        }
        out.push((
            ptr.to_string(),
            "length",
            format!("a string of {} characters, over maxLength {max}", max + 1),
            Edit::Set(Value::from(long)),
        ));
    }
    if let Some(min) = obj.get("minLength").and_then(Value::as_u64).filter(|&m| m > 0 && m <= n) {
        let short: String = x.chars().take(min as usize - 1).collect();
        out.push((
            ptr.to_string(),
            "length",
            format!("a string of {} characters, under minLength {min}", min - 1),
            Edit::Set(Value::from(short)),
        ));
    }
}

/// The array `items` one item over `maxItems` or under `minItems` (where it is at the bound),
/// and with a repeated item where `uniqueItems` is true.
fn array_edits(obj: &Map<String, Value>, items: &[Value], ptr: &str, out: &mut Edits) {
    if let Some(max) = obj.get("maxItems").and_then(Value::as_u64).filter(|&m| m as usize == items.len() && m > 0) {
        let mut more = items.to_vec();
        more.push(items[items.len() - 1].clone());
        out.push((
            ptr.to_string(),
            "items",
            format!("{} items, over maxItems {max}", max + 1),
            Edit::Set(Value::Array(more)),
        ));
    }
    if let Some(min) = obj.get("minItems").and_then(Value::as_u64).filter(|&m| m as usize == items.len() && m > 0) {
        let fewer = items[..items.len() - 1].to_vec();
        out.push((
            ptr.to_string(),
            "items",
            format!("{} items, under minItems {min}", min - 1),
            Edit::Set(Value::Array(fewer)),
        ));
    }
    if obj.get("uniqueItems") == Some(&Value::Bool(true)) && !items.is_empty() {
        let mut dup = items.to_vec();
        dup.push(items[0].clone());
        out.push((
            ptr.to_string(),
            "unique",
            "a repeated item where uniqueItems is true".into(),
            Edit::Set(Value::Array(dup)),
        ));
    }
}

/// The object `map` without each required property it has, and with an extra property where
/// `additionalProperties` is false (and no patterns).
fn object_edits(obj: &Map<String, Value>, map: &Map<String, Value>, ptr: &str, out: &mut Edits) {
    if let Some(Value::Array(req)) = obj.get("required") {
        for k in req.iter().filter_map(Value::as_str).filter(|k| map.contains_key(*k)) {
            out.push((
                ptr.to_string(),
                "required",
                format!("the required property {k:?} dropped"),
                Edit::Remove(k.to_string()),
            ));
        }
    }
    if obj.get("additionalProperties") == Some(&Value::Bool(false)) && obj.get("patternProperties").is_none() {
        let key = (0..)
            .map(|i| format!("extra{i}"))
            .find(|k| !map.contains_key(k) && obj.get("properties").and_then(|p| p.get(k)).is_none())
            .unwrap();
        out.push((
            ptr.to_string(),
            "additional",
            format!("the extra property {key:?} where additionalProperties is false"),
            Edit::Insert(key, Value::Null),
        ));
    }
}
