//! `allOf` (and a `$ref` with constraining siblings): merged into one schema.
//!
//! [`merge_all_of`] takes the parts through a worklist: each part's `$ref` resolved, its own
//! `unevaluated*`, conditionals and `not` rewritten first, its nested `allOf` flattened into
//! further parts. [`merge`] intersects two schemas keyword by keyword ([`merge_changes`]): types
//! intersect, bounds tighten, `required` unions, value sets intersect, `multipleOf`s take their
//! least common multiple, two `anyOf`s multiply out, array items merge position by position,
//! and object members merge with each side's `additionalProperties` applied to the other's keys
//! ([`merge_members`]).
//!
//! Two patterns become one with a lookahead (`both_patterns`). Exact: a pair of keywords that
//! cannot be merged exactly (two `contains`, two `not`s that cannot be rewritten, ...) is an
//! error with the reason, which the caller reports as `allOf` unenforceable. The running result
//! is moved, never copied: an `allOf` may have many parts; a part is read where it is unless it
//! must be rewritten first, and a merge patches only the properties that change.

use std::borrow::Cow;
use std::collections::VecDeque;

use serde_json::{Map, Value};

use super::conditional::rewrite_conditionals;
use super::keywords::{keyword, type_list, ALSO_FORMATS, ANNOTATIONS, VALIDATION};
use super::not::rewrite_not;
use super::validate::pattern_matches;
use super::{join, Compiler};
use crate::error::Result;
use crate::grammar::ir::Expr;
use crate::regular::DfaLimits;

/// `obj` with its `allOf` (and a `$ref` beside other keywords) merged into one schema,
/// compiled; `None` if it has neither.
///
/// Merging inlines a `$ref`'s target, so a recursive schema that merges at every level (a
/// `$ref` with siblings inside its own target: `children: {"type": "object", "$ref":
/// "#/defs/node"}`) would unfold without end. A schema met again while it is being merged
/// (the same JSON but for its own annotations, by a 128-bit hash, at the same indentation) is
/// a recursion: it becomes a rule, and the inner meeting refers to it. Same schema, same
/// language: the rule is exact.
///
/// A schema merged before is not merged again: meeting it compiles to what it compiled to then,
/// shared as a rule. (A `$ref: "#"` with siblings under every property of the root merged the
/// whole root once per path to it: renovate's schema took seconds.)
pub(super) fn merged(c: &mut Compiler, obj: &Map<String, Value>, pointer: &str) -> Result<Option<Expr>> {
    if !obj.contains_key("allOf") && (!ref_with_siblings(obj) || siblings_in_target(c, obj)) {
        return Ok(None);
    }
    let key = (schema_hash(obj), c.indent_key());
    if let Some(done) = c.merged.get(&key) {
        return Ok(Some(done.clone()));
    }
    if let Some(&known) = c.merging.get(&key) {
        let rule = known.unwrap_or_else(|| c.new_rule("allOf"));
        c.merging.insert(key, Some(rule));
        return Ok(Some(Expr::Rule(rule)));
    }
    c.merging.insert(key, None);
    let body = match merge_all_of(c, obj, pointer) {
        Ok(Some(m)) => c.schema(&m, pointer).map(Some),
        other => other.map(|_| None),
    };
    let rule = c.merging.remove(&key).flatten();
    let e = match (body?, rule) {
        (Some(body), Some(rule)) => {
            c.set_body(rule, body);
            Expr::Rule(rule)
        }
        (Some(body), None) => c.share("allOf", body),
        (None, _) => return Ok(None),
    };
    c.merged.insert(key, e.clone());
    Ok(Some(e))
}

/// A 128-bit hash of `obj` but for its own annotations (a `description` per place of use does
/// not change the language), the key of [`merged`]'s recursions and of the merges it made:
/// hashing walks the schema once, into both halves at a time, without allocating (formatting
/// it as text made large merges a third slower).
fn schema_hash(obj: &Map<String, Value>) -> u128 {
    use std::hash::{BuildHasher, Hash, Hasher};
    fn walk(v: &Value, h: &mut impl Hasher) {
        match v {
            Value::Null => 0u8.hash(h),
            Value::Bool(b) => (1u8, b).hash(h),
            // As written: `1` and `1.0`, `0.0` and `-0.0` stay apart (their text does).
            Value::Number(n) => match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => (2u8, 0u8, u).hash(h),
                (None, Some(i)) => (2u8, 1u8, i).hash(h),
                (None, None) => (2u8, 2u8, n.as_f64().map(f64::to_bits)).hash(h),
            },
            Value::String(s) => (3u8, s).hash(h),
            Value::Array(xs) => {
                (4u8, xs.len()).hash(h);
                xs.iter().for_each(|x| walk(x, h));
            }
            Value::Object(o) => members(o, h, false),
        }
    }
    fn members(o: &Map<String, Value>, h: &mut impl Hasher, bare: bool) {
        (5u8, o.len()).hash(h);
        for (k, v) in o.iter().filter(|(k, _)| !bare || !ANNOTATIONS.contains(&k.as_str())) {
            k.hash(h);
            walk(v, h);
        }
    }
    /// Two hashers fed by one walk.
    struct Both<H>([H; 2]);
    impl<H: Hasher> Hasher for Both<H> {
        fn write(&mut self, bytes: &[u8]) {
            self.0[0].write(bytes);
            self.0[1].write(bytes);
        }
        fn finish(&self) -> u64 {
            self.0[0].finish()
        }
    }
    // Two SipHashes with keys of this process's own: a schema cannot be written to collide.
    static KEYS: std::sync::OnceLock<[std::hash::RandomState; 2]> = std::sync::OnceLock::new();
    let keys = KEYS.get_or_init(Default::default);
    let mut h = Both([keys[0].build_hasher(), keys[1].build_hasher()]);
    members(obj, &mut h, true);
    let [a, b] = h.0;
    (u128::from(a.finish()) << 64) | u128::from(b.finish())
}

/// A `$ref` with validation keywords beside it (they must hold too: merged with its target).
fn ref_with_siblings(obj: &Map<String, Value>) -> bool {
    obj.contains_key("$ref") && obj.keys().any(|k| k != "$ref" && !ANNOTATIONS.contains(&k.as_str()))
}

/// A `$ref` whose siblings its target has too, with the same values (`{"type": "object",
/// "$ref": "#"}` under a root of type object): they add nothing, so it is the `$ref` alone,
/// one shared rule per target instead of a merge per place.
fn siblings_in_target(c: &Compiler, obj: &Map<String, Value>) -> bool {
    let Some(Value::Object(target)) = obj.get("$ref").and_then(Value::as_str).and_then(|r| c.ref_value(r)) else {
        return false;
    };
    obj.iter().all(|(k, v)| k == "$ref" || !VALIDATION.contains(&k.as_str()) || target.get(k) == Some(v))
}

/// Merges `allOf` (and `$ref` with constraining siblings) into one schema; `None` if there is
/// nothing to merge.
pub(super) fn merge_all_of(c: &mut Compiler, obj: &Map<String, Value>, pointer: &str) -> Result<Option<Value>> {
    let has_all_of = obj.contains_key("allOf");
    let ref_with_siblings = ref_with_siblings(obj);
    if !has_all_of && !ref_with_siblings {
        return Ok(None);
    }
    // The keywords beside `allOf` (and beside a `$ref` with siblings) are the first part, but
    // for annotations (a root's `definitions`: every `$ref` is absolute after preparation).
    let base: Map<String, Value> = obj
        .iter()
        .filter(|(k, _)| *k != "allOf" && !(ref_with_siblings && *k == "$ref") && !ANNOTATIONS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    // The parts, borrowed where they can be merged as they are (a part is copied only when it
    // must be rewritten first: merging a large object into each of many branches copied it
    // once more per branch).
    let mut queue: VecDeque<Cow<'_, Value>> = VecDeque::new();
    if let Some(all) = super::keywords::get(obj, "allOf") {
        let a = all.as_array().ok_or_else(|| c.bad(&join(pointer, "allOf"), "`allOf` must be an array"))?;
        if !has_common_type(c, obj, a) {
            // No value at all: nothing to merge (each part's copy, a large `$ref` target's
            // included, would be made only to find that out).
            return Ok(Some(keyword("type", Value::Array(vec![]))));
        }
        queue.extend(a.iter().map(Cow::Borrowed));
    }
    if ref_with_siblings {
        queue.push_back(Cow::Owned(serde_json::json!({"$ref": obj["$ref"].clone()})));
    }
    let mut merged = Value::Object(base);
    // A worklist: a part's own conditionals and `allOf` are flattened into further parts.
    let mut taken = 0;
    while let Some(part) = queue.pop_front() {
        taken += 1;
        if taken > 1000 {
            return Err(c.bad(pointer, "`allOf` expands to more than 1000 parts (a cycle of `$ref`s through `allOf`?)"));
        }
        let part = match part.get("$ref") {
            // A `$ref` alone is its target, read where it is (renovate's root, merged into
            // each of its members that refer back to it, was copied once per member).
            Some(r) if part.as_object().is_some_and(|o| o.len() == 1) => {
                match r.as_str().and_then(|r| c.ref_value(r)) {
                    Some(target) => Cow::Borrowed(target),
                    None => part,
                }
            }
            Some(_) => Cow::Owned(c.resolve_shallow_owned(part.into_owned())),
            None => part,
        };
        let rewritten = match &*part {
            Value::Object(o) => rewrite_part(c, o, &mut queue, pointer)?,
            _ => None,
        };
        match merge(merged, rewritten.as_ref().unwrap_or(&part), &c.limits) {
            Ok(m) => merged = m,
            Err((unchanged, why)) => {
                merged = unchanged;
                c.unenforced(pointer, "allOf", why)?;
            }
        }
    }
    Ok(Some(merged))
}

/// Is some JSON type allowed by `obj`'s own `type` and by every part of its `allOf`, as far as
/// reading them where they are tells (a part's `type`, else its `$ref` target's)? Only a
/// certain `false` counts: any type name this does not know, and any part it cannot read,
/// allows every type.
fn has_common_type(c: &Compiler, obj: &Map<String, Value>, parts: &[Value]) -> bool {
    const ALL: u8 = 0x7f;
    let bits = |t: &str| match t {
        "null" => Some(1),
        "boolean" => Some(2),
        "object" => Some(4),
        "array" => Some(8),
        "string" => Some(16),
        "integer" => Some(32),
        "number" => Some(32 | 64),
        _ => None,
    };
    // A list of known names; anything else (the compile reports it) allows every type.
    let types = |v: Option<&Value>| -> u8 {
        match v {
            Some(Value::String(t)) => bits(t).unwrap_or(ALL),
            Some(Value::Array(a)) => a.iter().try_fold(0, |m, t| Some(m | bits(t.as_str()?)?)).unwrap_or(ALL),
            _ => ALL,
        }
    };
    let part_types = |p: &Value| match p {
        Value::Bool(b) => [0, ALL][usize::from(*b)],
        Value::Object(o) => match (o.get("type"), o.get("$ref").and_then(Value::as_str)) {
            (Some(t), _) => types(Some(t)),
            (None, Some(r)) => types(c.ref_value(r).and_then(|t| t.get("type"))),
            (None, None) => ALL,
        },
        _ => ALL,
    };
    parts.iter().fold(types(obj.get("type")), |m, p| m & part_types(p)) != 0
}

/// An `allOf` part rewritten before it is merged (`None`: merged as it is): its own
/// `unevaluated*` closed (it sees only that part), its conditionals and `not` rewritten, its
/// `allOf` and `$ref` taken out as further parts (onto `queue`).
fn rewrite_part<'a>(
    c: &mut Compiler,
    o: &Map<String, Value>,
    queue: &mut VecDeque<Cow<'a, Value>>,
    pointer: &str,
) -> Result<Option<Value>> {
    let mut owned: Option<Map<String, Value>> = c.unevaluated(o, pointer)?;
    for kw in ["unevaluatedProperties", "unevaluatedItems"] {
        let cur = owned.as_ref().unwrap_or(o);
        if cur.get(kw).is_some_and(|v| v != &Value::Bool(true)) {
            c.unenforced(pointer, kw, "inside an `allOf` part with conditional applicators beside it")?;
        }
        if cur.contains_key(kw) {
            owned.get_or_insert_with(|| o.clone()).remove(kw);
        }
    }
    if let Some(rewritten) = rewrite_conditionals(c, owned.as_ref().unwrap_or(o), pointer)? {
        owned = Some(rewritten);
    }
    let cur = owned.as_ref().unwrap_or(o);
    if cur.contains_key("not") {
        if let Some(rewritten) = rewrite_not(cur) {
            owned = Some(rewritten);
        }
    }
    let cur = owned.as_ref().unwrap_or(o);
    if cur.contains_key("allOf") || cur.contains_key("$ref") {
        let m = owned.get_or_insert_with(|| o.clone());
        if let Some(all) = m.remove("allOf") {
            queue.extend(all.as_array().cloned().unwrap_or_default().into_iter().map(Cow::Owned));
        }
        if let Some(r) = m.remove("$ref") {
            queue.push_back(Cow::Owned(serde_json::json!({ "$ref": r })));
        }
    }
    Ok(owned.map(Value::Object))
}

/// The intersection of two schemas as one schema, or why it cannot be written exactly (with
/// `a` back, unchanged). `a` is taken, not copied: it is the running result of a whole `allOf`.
pub(super) fn merge(a: Value, b: &Value, limits: &DfaLimits) -> std::result::Result<Value, (Value, String)> {
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
            for (k, v) in changes.keywords {
                match v {
                    Some(v) => {
                        a.insert(k, v);
                    }
                    None => {
                        a.remove(&k);
                    }
                }
            }
            if let Some(patch) = changes.properties {
                match a.get_mut("properties") {
                    // A key already there keeps its place; new ones follow, in order.
                    Some(Value::Object(p)) => p.extend(patch),
                    _ => {
                        a.insert("properties".into(), Value::Object(patch));
                    }
                }
            }
            Ok(Value::Object(a))
        }
        Err(why) => Err((Value::Object(a), why)),
    }
}

/// Inserts (`Some`) and removals (`None`) of keywords, in order; then the properties whose
/// schemas change (or are new), applied to `properties` as it is after the keywords.
#[derive(Default)]
struct Changes {
    keywords: Vec<(String, Option<Value>)>,
    properties: Option<Map<String, Value>>,
}

impl Changes {
    fn insert(&mut self, k: String, v: Value) {
        self.keywords.push((k, Some(v)));
    }
    fn remove(&mut self, k: &str) {
        self.keywords.push((k.to_string(), None));
    }
}

/// What merging two object schemas gives: a new schema, or changes to the first.
enum Merged {
    Whole(Value),
    Changes(Changes),
}

/// The changes that merge object schema `b` into `a`: keywords only `b` has are added, those
/// both have merged one by one ([`merge_keyword`]), then array items ([`merge_items`]) and
/// object members ([`merge_members`]) together. A side with a `$ref` or an `allOf` is not
/// merged but wrapped ([`wrap_nested`]).
fn merge_changes(
    a: &Map<String, Value>,
    b: &Map<String, Value>,
    limits: &DfaLimits,
) -> std::result::Result<Merged, String> {
    if a.contains_key("$ref") || b.contains_key("$ref") || a.contains_key("allOf") || b.contains_key("allOf") {
        return wrap_nested(a, b).map(Merged::Whole);
    }
    let mut out = Changes::default();
    for (k, bv) in b {
        let Some(av) = a.get(k) else {
            out.insert(k.clone(), bv.clone());
            continue;
        };
        if av == bv || k == "format" || k == ALSO_FORMATS {
            continue; // formats are merged together below
        }
        merge_keyword(k, av, bv, &mut out)?;
    }
    merge_formats(a, b, &mut out)?;
    merge_items(a, b, &mut out);
    merge_members(a, b, &mut out, limits)?;
    Ok(Merged::Changes(out))
}

/// Two different formats: the value must satisfy both, so `a`'s `format` stays and `b`'s
/// joins [`ALSO_FORMATS`] (with both sides' own), which the string and number rules read with
/// it. A format is a language of its own like a pattern; two are its intersection.
fn merge_formats(a: &Map<String, Value>, b: &Map<String, Value>, out: &mut Changes) -> std::result::Result<(), String> {
    if a.get("format").is_none() || b.get("format").is_none() {
        return Ok(()); // one side has none: taken over as it is by the loop
    }
    if [a, b].iter().any(|o| o.get("format").is_some_and(|f| !f.is_string())) {
        return Err("`format` must be a string".into());
    }
    let mut all: Vec<&str> = super::keywords::formats(a).collect();
    let ours = all.len();
    for f in super::keywords::formats(b) {
        if !all.contains(&f) {
            all.push(f);
        }
    }
    if all.len() > ours {
        out.insert(ALSO_FORMATS.into(), all[1..].iter().map(|&f| Value::from(f)).collect());
    }
    Ok(())
}

/// Nested references or `allOf` on one side: the other side with an `allOf` of that side's
/// parts, for the caller to resolve level by level. On both sides: an error.
fn wrap_nested(a: &Map<String, Value>, b: &Map<String, Value>) -> std::result::Result<Value, String> {
    let both_have = |k: &str| a.contains_key(k) && b.contains_key(k);
    if both_have("$ref") || both_have("allOf") {
        return Err("nested `$ref`/`allOf` on both sides".into());
    }
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
    Ok(Value::Object(out))
}

/// Merges keyword `k`, which both sides have with different values `av` and `bv`, into `out`;
/// or why it cannot be merged exactly. Array item and object member keywords are left to
/// [`merge_items`] and [`merge_members`]; annotations and unknown keywords are left as `a` has
/// them.
fn merge_keyword(k: &str, av: &Value, bv: &Value, out: &mut Changes) -> std::result::Result<(), String> {
    let merged = match k {
        "type" => intersect_types(av, bv),
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
            return Ok(());
        }
        // Object member keywords are merged together by `merge_members`.
        "properties" | "patternProperties" => return Ok(()),
        "additionalProperties" | "propertyNames" => both(av.clone(), bv.clone()),
        super::keywords::NOT_STRING | super::keywords::EXCLUDE_STRINGS | super::keywords::EXCLUDE_NUMBERS => {
            let mut all = av.as_array().cloned().unwrap_or_default();
            all.extend(bv.as_array().into_iter().flatten().cloned());
            Value::Array(all)
        }
        "items" | "prefixItems" | "additionalItems" => return Ok(()), // merged by `merge_items`
        // Each part's `not` is rewritten before merging where it can be; two that cannot
        // would need `not (A ∨ B)`, which could only be rewritten back into the same two.
        "not" => return Err("two `not` keywords that cannot be rewritten cannot be merged".into()),
        "contains" => return Err("two `contains` keywords (each needs its own item) cannot be merged".into()),
        "anyOf" => multiply_any_of(av, bv)?,
        _ if ANNOTATIONS.contains(&k) => return Ok(()),
        "multipleOf" => match (av.as_u64(), bv.as_u64()) {
            (Some(x), Some(y)) => Value::from(lcm(x, y)),
            _ => return Err("two different non-integer `multipleOf` values".into()),
        },
        "pattern" => match (av.as_str(), bv.as_str()) {
            (Some(a), Some(b)) => Value::String(both_patterns(a, b)),
            _ => return Err("`pattern` must be a string".into()),
        },
        "$defs" | "definitions" => return Ok(()),
        // Unknown keywords are annotations: no effect on validation.
        _ if !VALIDATION.contains(&k) => return Ok(()),
        _ => return Err(format!("two different `{k}` values cannot be merged exactly")),
    };
    out.insert(k.to_string(), merged);
    Ok(())
}

/// One pattern that a string matches exactly when it matches both `a` and `b` (JSON Schema
/// patterns match anywhere unless anchored): `b` as a lookahead that looks through the whole
/// string, `^(?=[\s\S]*(?:b))[\s\S]*(?:a)`, which `string.rs` compiles as an intersection (see
/// `ecma::lookahead_parts`). A pattern that already begins with lookaheads after its `^` gets
/// the other's in front of them; a pattern with lookaheads elsewhere stays refused there.
fn both_patterns(a: &str, b: &str) -> String {
    let leading = |p: &str| p.starts_with("^(?=") || p.starts_with("^(?!");
    let (a, b) = if leading(b) && !leading(a) { (b, a) } else { (a, b) };
    let look = format!("^(?=[\\s\\S]*(?:{b}))");
    match a.strip_prefix('^').filter(|_| leading(a)) {
        Some(rest) => format!("{look}{rest}"),
        None => format!("{look}[\\s\\S]*(?:{a})"),
    }
}

/// The types both `type` values allow (`integer` and `number` meet in `integer`).
fn intersect_types(av: &Value, bv: &Value) -> Value {
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

/// (a1 ∨ a2) ∧ (b1 ∨ b2) = ∨ (ai ∧ bj): the branches of two `anyOf`s multiplied out, or an
/// error past 64 pairs.
fn multiply_any_of(av: &Value, bv: &Value) -> std::result::Result<Value, String> {
    let (xa, xb) = (av.as_array().cloned().unwrap_or_default(), bv.as_array().cloned().unwrap_or_default());
    if xa.len() * xb.len() > 64 {
        return Err("two `anyOf` keywords with more than 64 branch pairs cannot be merged".into());
    }
    Ok(Value::Array(
        xa.iter()
            .flat_map(|x| xb.iter().map(move |y| keyword("allOf", Value::Array(vec![x.clone(), y.clone()]))))
            .collect(),
    ))
}

/// Merges the item keywords of two array schemas into `out` when both have some: each side as
/// (prefix schemas, schema for the rest), intersected position by position.
fn merge_items(a: &Map<String, Value>, b: &Map<String, Value>, out: &mut Changes) {
    let arrays = |o: &Map<String, Value>| {
        o.contains_key("items") || o.contains_key("prefixItems") || o.contains_key("additionalItems")
    };
    if !(arrays(a) && arrays(b)) {
        return;
    }
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
    let patterns = |o: &Map<String, Value>| {
        super::keywords::get(o, "patternProperties").and_then(Value::as_object).cloned().unwrap_or_default()
    };
    let additional =
        |o: &Map<String, Value>| super::keywords::get(o, "additionalProperties").cloned().unwrap_or(Value::Bool(true));
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
        if let Some(s) = super::keywords::get(o, "properties").and_then(|p| p.get(k)) {
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
    // `b` says nothing of key `k`: no property, no pattern matching it, any additional value.
    let silent = |k: &str| -> std::result::Result<bool, String> {
        if b.get("properties").and_then(|p| p.get(k)).is_some() || additional(b) != Value::Bool(true) {
            return Ok(false);
        }
        for pat in qb.keys() {
            match pattern_matches(pat, k, limits) {
                Some(false) => {}
                Some(true) => return Ok(false),
                None => return Err(format!("cannot tell whether pattern {pat:?} matches {k:?}")),
            }
        }
        Ok(true)
    };
    // The declared keys of both sides, each with what both sides require of it; a key of
    // `a`'s that `b` says nothing of keeps its schema as it is (not copied: `a`'s patterns,
    // which still apply to it, stay in the merged `patternProperties`).
    let a_props = a.get("properties").and_then(Value::as_object);
    let mut props = Map::new();
    for key in [a, b].iter().flat_map(|o| {
        super::keywords::get(o, "properties").and_then(Value::as_object).into_iter().flatten().map(|(k, _)| k)
    }) {
        if props.contains_key(key) || (a_props.is_some_and(|p| p.contains_key(key)) && silent(key)?) {
            continue;
        }
        props.insert(key.clone(), both(view(a, &qa, key)?, view(b, &qb, key)?));
    }
    if !props.is_empty() {
        out.properties = Some(props);
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
    match (super::keywords::get(o, "prefixItems"), super::keywords::get(o, "items")) {
        (Some(Value::Array(p)), items) => (p.clone(), items.cloned().unwrap_or(t)),
        (None, Some(Value::Array(p))) => (p.clone(), super::keywords::get(o, "additionalItems").cloned().unwrap_or(t)),
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
