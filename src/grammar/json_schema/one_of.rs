//! `anyOf` and `oneOf`.
//!
//! `anyOf` is a union of its branches, each intersected with the sibling keywords: exact
//! ([`any_one_of`]). An `anyOf` of bare `pattern`s is one `pattern`, their alternation
//! ([`any_of_patterns`]).
//!
//! `oneOf` ("exactly one") is a union only when no two branches overlap, so its branches are
//! first made pairwise disjoint ([`disjoint_branches`]), each way tried in turn until one
//! compiles exactly:
//! - provably disjoint pairs ([`pair_disjoint`]: types, values, a discriminating property, a key
//!   one requires and the other forbids) stay as they are; a JSON type two branches accept in
//!   full is removed from all; an overlapping pair gets `not <other>` in one branch
//!   ([`super::not::with_not`]: rewritten at once, or left to the compiler, which rewrites it
//!   level by level or fails this way): exact;
//! - (stricter, documented) a property every branch declares with pairwise disjoint values is
//!   made required, so every output names its branch.
//!
//! Otherwise `oneOf` is reported. [`one_of_as_any_of`] is the cheap case for `not`: provably
//! disjoint branches make `oneOf` an `anyOf`. Branches are compared as seen through their plain
//! `allOf` ([`merged_view`]). A budget ([`MAX_ONE_OF_ATTEMPTS`]) bounds the nested attempts.

use serde_json::{Map, Value};

use super::all_of::merge;
use super::empty::provably_empty;
use super::keywords::{keyword, keyword_type, type_list, without, ANNOTATIONS, VALIDATION};
use super::not::with_not;
use super::validate::simple_validate;
use super::values::value_set;
use super::{join, Compiler};
use crate::error::Result;
use crate::grammar::Expr;

/// Most compile attempts of rewritten `oneOf` branches in one schema.
const MAX_ONE_OF_ATTEMPTS: usize = 500;

pub(super) fn any_one_of(c: &mut Compiler, obj: &Map<String, Value>, pointer: &str) -> Result<Option<Expr>> {
    let (kw, branches) = match (super::keywords::get(obj, "anyOf"), super::keywords::get(obj, "oneOf")) {
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
    // A malformed `type` in a branch is reported here: the rewrites below (`oneOf`'s negations)
    // would replace it.
    for (i, b) in branches.iter().enumerate() {
        if let Some(o) = b.as_object() {
            c.types(o, &join(&join(pointer, kw), &i.to_string()))?;
        }
    }
    // Branches that provably accept nothing add nothing to either (multiplied-out
    // conditionals are mostly such): left out before they are merged and compiled.
    let empty: Vec<bool> = branches.iter().map(|b| provably_empty(c, b)).collect();
    let kept: Vec<Value>;
    let branches: &[Value] = match empty.iter().filter(|e| **e).count() {
        0 => branches,
        n if n == branches.len() => {
            return Ok(Some(c.nothing_because(&join(pointer, kw), format!("every branch of `{kw}` accepts no value"))))
        }
        _ => {
            kept = branches.iter().zip(&empty).filter(|(_, e)| !**e).map(|(b, _)| b.clone()).collect();
            &kept
        }
    };
    if kw == "anyOf" {
        if let Some(e) = any_of_patterns(c, obj, branches, pointer) {
            return Ok(Some(e));
        }
    }
    // The sibling keywords, without the branches (cloned only when they constrain: each
    // branch is then intersected with them), and without annotations: a root's `definitions`
    // (every `$ref` is absolute after preparation) were copied into every branch and through
    // every merge, 40% of compiling a schema whose root is `anyOf` beside `type`.
    let constraining = obj.iter().any(|(k, _)| k != kw && !ANNOTATIONS.contains(&k.as_str()));
    let siblings: Map<String, Value> = match constraining {
        true => obj
            .iter()
            .filter(|(k, _)| *k != kw && !ANNOTATIONS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
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
    let branches = super::keywords::get(o, "oneOf")?.as_array()?;
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
///    ([`super::not::rewrite_not`]).
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
    for (i, branch) in exact.iter_mut().enumerate() {
        for j in (0..n).filter(|&j| j != i && overlapping(&resolved, i, j)) {
            match with_not(branch, &resolved[j]) {
                Some((v, d)) => {
                    *branch = v;
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
        if part.as_object().is_some_and(|o| super::keywords::has_any(o, &HARD)) {
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
            let mut req = super::keywords::get(o, "required").and_then(Value::as_array).cloned().unwrap_or_default();
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
    let current: Vec<String> = match super::keywords::get(o, "type") {
        None => ALL.iter().map(|s| s.to_string()).collect(),
        Some(v) => type_list(v).iter().map(|s| s.to_string()).collect(),
    };
    let keep: Vec<Value> =
        current.into_iter().filter(|x| x != t && !(t == "number" && x == "integer")).map(Value::String).collect();
    o.insert("type".into(), Value::Array(keep));
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
