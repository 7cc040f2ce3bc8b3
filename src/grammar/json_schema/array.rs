//! Arrays: `prefixItems` (and draft-07 array-form `items`), `items` / `additionalItems`,
//! `minItems` / `maxItems`, and `contains` with `minContains`/`maxContains` (without a prefix
//! or item-count bounds beside them).
//!
//! `B(j)` is "the items from position j on": `sep? P_j B(j+1)`, or the end once `j ≥ minItems`;
//! after the prefix, the rest repeats `(sep R){a,b}`.

use serde_json::{Map, Value};

use super::{join, string, Compiler, MAX_COUNT};
use crate::error::Result;
use crate::grammar::{Expr, Mark};

pub(super) fn array(c: &mut Compiler, obj: &Map<String, Value>, pointer: &str) -> Result<Expr> {
    let t = Value::Bool(true);
    // The prefix schemas and the schema for the rest.
    let (prefix, prefix_kw, rest, rest_kw): (Vec<&Value>, &str, &Value, &str) =
        match (super::keywords::get(obj, "prefixItems"), super::keywords::get(obj, "items")) {
            (Some(Value::Array(p)), items) => (p.iter().collect(), "prefixItems", items.unwrap_or(&t), "items"),
            (None, Some(Value::Array(p))) => (
                p.iter().collect(),
                "items",
                super::keywords::get(obj, "additionalItems").unwrap_or(&t),
                "additionalItems",
            ),
            (None, items) => (Vec::new(), "", items.unwrap_or(&t), "items"),
            (Some(_), _) => return Err(c.bad(&join(pointer, "prefixItems"), "`prefixItems` must be an array")),
        };
    let min = string::count(c, obj, pointer, "minItems")?.unwrap_or(0);
    let mut max = string::count(c, obj, pointer, "maxItems")?;
    let p = prefix.len() as u64;
    let f = Value::Bool(false);
    let rest = if asks_for_unnamed_items(c, obj, rest_kw, p, min) { rest } else { &f };
    // Distinct items over a small finite set are grammar (a rule per set of values used);
    // otherwise the array's `[` is marked and the matcher refuses a repeat where it would end
    // (see `automaton::distinct`).
    let mut distinct = false;
    if super::keywords::get(obj, "uniqueItems") == Some(&Value::Bool(true)) && max.is_none_or(|m| m > 1) {
        match unique_items(c, obj, &prefix, rest, min, max, pointer)? {
            Some(e) => return Ok(e),
            None => distinct = true,
        }
    }
    if rest == &Value::Bool(false) {
        max = Some(max.map_or(p, |m| m.min(p)));
    }
    if let Some(m) = max.filter(|m| *m < min) {
        let why = if super::keywords::get(obj, "maxItems").and_then(Value::as_u64).is_some_and(|x| x == m) {
            format!("`minItems` {min} is above `maxItems` {m}")
        } else {
            format!("`minItems` {min} asks for more items than the {m} the prefix allows (no items past it)")
        };
        return Ok(c.nothing_because(pointer, why));
    }
    if min > MAX_COUNT || max.is_some_and(|m| m > MAX_COUNT && m > p) {
        c.unenforced(pointer, "maxItems", format!("item-count bounds above {MAX_COUNT} are not unrolled"))?;
    }
    if let Some(body) = contains(c, obj, pointer, &prefix, rest, min, max)? {
        return Ok(Expr::seq(vec![open(&c.layout(), distinct), body]));
    }
    let l = c.layout();
    c.nested(|c| {
        let mut pexprs = Vec::new();
        for (j, s) in prefix.iter().enumerate() {
            let ptr = join(&join(pointer, prefix_kw), &j.to_string());
            let e = c.schema(s, &ptr)?;
            pexprs.push(c.share(&ptr, e));
        }
        let rexpr = if max.is_some_and(|m| m <= p) {
            None
        } else {
            let ptr = join(pointer, rest_kw);
            let e = c.schema(rest, &ptr)?;
            // Distinct items past the prefix from fewer values than `minItems` asks for there:
            // no array at all (the matcher would find it out only part-way).
            if distinct && min > p && fewer_values(c, rest, &e, min - p)? {
                let why = match p {
                    0 => format!("`uniqueItems` with `minItems` {min}: the items have fewer distinct values"),
                    p => format!(
                        "`uniqueItems` with `minItems` {min}: the items past the {p} of the prefix have fewer than {} \
                         distinct values",
                        min - p
                    ),
                };
                return Ok(c.nothing_because(pointer, why));
            }
            Some(c.share(&ptr, e))
        };
        // The rest after the prefix, then `]`: a = min - p (≥ 0), b = max - p.
        let rest_part = |first: bool| -> Expr {
            let Some(r) = &rexpr else { return l.end(!first, "]") };
            let a = min.saturating_sub(p).min(MAX_COUNT) as u32;
            let b = max.map(|m| (m.saturating_sub(p)).min(MAX_COUNT) as u32);
            if first {
                // No item yet: (R (sep R){a-1, b-1})?  with at least one when a ≥ 1.
                let tail = Expr::Repeat {
                    body: Box::new(l.item(false, r.clone())),
                    min: a.saturating_sub(1),
                    max: b.map(|b| b.saturating_sub(1)),
                };
                let one = Expr::seq(vec![l.item(true, r.clone()), tail, l.end(true, "]")]);
                match (a, b) {
                    (_, Some(0)) => l.end(false, "]"),
                    (0, _) => Expr::Alt(vec![one, l.end(false, "]")]),
                    _ => one,
                }
            } else {
                let items = Expr::Repeat { body: Box::new(l.item(false, r.clone())), min: a, max: b };
                Expr::seq(vec![items, l.end(true, "]")])
            }
        };
        // Build B(j) from the end of the prefix back to the start.
        let np = match max {
            Some(m) => (m.min(p)) as usize,
            None => p as usize,
        };
        let mut tail = rest_part(np == 0);
        for j in (0..np).rev() {
            let take = Expr::seq(vec![l.item(j == 0, pexprs[j].clone()), tail]);
            tail = if (j as u64) >= min { Expr::Alt(vec![take, l.end(j > 0, "]")]) } else { take };
        }
        Ok(Expr::seq(vec![open(&l, distinct), tail]))
    })
}

/// Does the item schema `schema` (its grammar `e`) allow fewer than `need` distinct values?
/// `false` where that is not known (see [`super::values::distinct_values`]).
fn fewer_values(c: &Compiler, schema: &Value, e: &Expr, need: u64) -> Result<bool> {
    let n = match super::values::finite_values(c, schema) {
        Some(vs) => {
            let mut distinct: Vec<&Value> = Vec::new();
            for v in &vs {
                if !distinct.iter().any(|d| super::validate::json_eq(d, v)) {
                    distinct.push(v);
                }
            }
            Some(distinct.len())
        }
        None => super::values::distinct_values(c, &[e])?,
    };
    Ok(n.is_some_and(|n| (n as u64) < need))
}

/// The opening bracket and its whitespace; the bracket marked when the items are distinct.
fn open(l: &super::Layout, distinct: bool) -> Expr {
    if distinct {
        Expr::seq(vec![Expr::Mark(Mark::DistinctArray), l.open.clone()])
    } else {
        l.start("[")
    }
}

/// Whether an array may have items past its prefix (`prefixItems`, or draft-07 array-form
/// `items`) when the schema does not say what they are (`items`, or `additionalItems` after an
/// array-form `items`, absent): always in the exact language; in the sensible one (the
/// default) only when it asks for them: a `minItems` above the prefix, or `contains`.
fn asks_for_unnamed_items(c: &Compiler, obj: &Map<String, Value>, rest_kw: &str, prefix: u64, min: u64) -> bool {
    c.opts.exact || obj.contains_key(rest_kw) || obj.contains_key("contains") || min > prefix
}

/// `contains` with `minContains`/`maxContains` (default 1 and unbounded) over items that all
/// satisfy `rest` (`items`): with `X` = rest ∧ contains and `Y` = rest ∧ not contains, the
/// array is `Y* (X Y*){min,max}` (separators between). Without `maxContains` the other items
/// are just `rest` (`X` items among them only add matches), so no negation is needed.
/// Returns the array after its opening bracket (the caller writes that); `None` when there is
/// no effective `contains` (the plain array construction applies).
fn contains(
    c: &mut Compiler,
    obj: &Map<String, Value>,
    pointer: &str,
    prefix: &[&Value],
    rest: &Value,
    min: u64,
    max: Option<u64>,
) -> Result<Option<Expr>> {
    let Some(cs) = super::keywords::get(obj, "contains") else { return Ok(None) };
    let min_c = string::count(c, obj, pointer, "minContains")?.unwrap_or(1);
    let max_c = string::count(c, obj, pointer, "maxContains")?;
    if let Some(m) = max_c.filter(|m| *m < min_c) {
        return Ok(Some(c.nothing_because(pointer, format!("`minContains` {min_c} is above `maxContains` {m}"))));
    }
    // Always satisfied: no lower count, or `contains: true` with enough items anyway.
    if max_c.is_none() && (min_c == 0 || (cs == &Value::Bool(true) && min >= min_c)) {
        return Ok(None);
    }
    if !prefix.is_empty() || min > 0 || max.is_some() {
        c.unenforced(pointer, "contains", "supported only without prefixItems/minItems/maxItems beside it")?;
        return Ok(None);
    }
    if min_c > MAX_COUNT || max_c.is_some_and(|m| m > MAX_COUNT) {
        c.unenforced(pointer, "minContains", format!("counts above {MAX_COUNT} are not unrolled"))?;
        return Ok(None);
    }
    let l = c.layout();
    c.nested(|c| contains_items(c, &l, pointer, rest, cs, min_c, max_c)).map(Some)
}

/// The items and closing bracket of [`contains`]'s array (after its opening), one nesting
/// level down.
fn contains_items(
    c: &mut Compiler,
    l: &super::Layout,
    pointer: &str,
    rest: &Value,
    cs: &Value,
    min_c: u64,
    max_c: Option<u64>,
) -> Result<Expr> {
    let at = join(pointer, "contains");
    let x = c.schema(&serde_json::json!({"allOf": [rest, cs]}), &at)?;
    let x = c.share(&at, x);
    let y = match max_c {
        None => c.schema(rest, &join(pointer, "items"))?,
        Some(_) => c.schema(&serde_json::json!({"allOf": [rest, {"not": cs}]}), &at)?,
    };
    let y = c.share(&format!("{at}/others"), y);
    let sep = l.sep.clone();
    let star = |e: Expr| Expr::Repeat { body: Box::new(e), min: 0, max: None };
    // first (Y sep)* X (sep Y)* (sep X (sep Y)*){min_c-1, max_c-1}
    let ys_after = star(Expr::seq(vec![sep.clone(), y.clone()]));
    let group = Expr::seq(vec![sep.clone(), x.clone(), ys_after.clone()]);
    let with_x = Expr::seq(vec![
        l.first.clone(),
        star(Expr::seq(vec![y.clone(), sep.clone()])),
        x,
        ys_after.clone(),
        Expr::Repeat {
            body: Box::new(group),
            min: min_c.saturating_sub(1) as u32,
            max: max_c.map(|m| m.saturating_sub(1) as u32),
        },
        l.end(true, "]"),
    ]);
    // No match at all (only Y items, or none) when that is allowed; at least one X otherwise,
    // which `maxContains: 0` rules out.
    let none = Expr::Alt(vec![Expr::seq(vec![l.item(true, y), ys_after, l.end(true, "]")]), l.end(false, "]")]);
    Ok(match (min_c, max_c) {
        (_, Some(0)) => none,
        (0, _) => Expr::Alt(vec![with_x, none]),
        _ => with_x,
    })
}

/// Most distinct item values `uniqueItems` tracks (the grammar has a rule per subset).
const MAX_UNIQUE_VALUES: usize = 10;

/// `uniqueItems` over finite item sets: a rule per set `S` of values used so far (the position
/// is `|S|`, every item being new), offering each value of the next position's set that is not
/// in `S`; the array may close at `S` when `minItems` and, with `contains`, the number of
/// values in `S` that satisfy it (each value is in `S` once) allow. `None` if some position's
/// values are not a small finite set, or `contains` cannot be decided for one of them.
fn unique_items(
    c: &mut Compiler,
    obj: &Map<String, Value>,
    prefix: &[&Value],
    rest: &Value,
    min: u64,
    max: Option<u64>,
    pointer: &str,
) -> Result<Option<Expr>> {
    let mut sets: Vec<Vec<Value>> = Vec::new();
    for s in prefix {
        let Some(v) = super::values::finite_values(c, s) else { return Ok(None) };
        sets.push(v);
    }
    let rest_set = if max.is_some_and(|m| m <= prefix.len() as u64) {
        Vec::new() // no item past the prefix
    } else {
        let Some(v) = super::values::finite_values(c, rest) else { return Ok(None) };
        v
    };
    // All values that can occur, without JSON-equal repeats; items are indices into it.
    let mut all: Vec<Value> = Vec::new();
    for v in sets.iter().flatten().chain(&rest_set) {
        if !all.iter().any(|x| super::validate::json_eq(x, v)) {
            all.push(v.clone());
        }
    }
    if all.len() > MAX_UNIQUE_VALUES {
        return Ok(None);
    }
    if min > all.len() as u64 {
        let why = format!("`uniqueItems` with `minItems` {min}: the items have only {} distinct values", all.len());
        return Ok(Some(c.nothing_because(pointer, why)));
    }
    // `contains`: which values satisfy it, and how many of those the array must hold.
    let mut counted: Option<(Vec<bool>, u64, Option<u64>)> = None;
    if let Some(cs) = super::keywords::get(obj, "contains") {
        let min_c = string::count(c, obj, pointer, "minContains")?.unwrap_or(1);
        let max_c = string::count(c, obj, pointer, "maxContains")?;
        let always = max_c.is_none() && (min_c == 0 || (cs == &Value::Bool(true) && min >= min_c));
        if !always {
            let holds: Option<Vec<bool>> =
                all.iter().map(|v| super::validate::simple_validate(v, cs, &c.limits)).collect();
            let Some(holds) = holds else { return Ok(None) };
            counted = Some((holds, min_c, max_c));
        }
    }
    let closes = |m: usize| {
        counted.as_ref().is_none_or(|(holds, min_c, max_c)| {
            let k = holds.iter().enumerate().filter(|&(v, &h)| h && m >> v & 1 == 1).count() as u64;
            k >= *min_c && max_c.is_none_or(|x| k <= x)
        })
    };
    let index = |v: &Value| all.iter().position(|x| super::validate::json_eq(x, v)).expect("collected");
    let allowed: Vec<Vec<usize>> = sets.iter().map(|s| s.iter().map(index).collect()).collect();
    let rest_allowed: Vec<usize> = rest_set.iter().map(index).collect();
    let at = |k: usize| -> &[usize] { allowed.get(k).map_or(&rest_allowed, |v| v) };
    let max = max.unwrap_or(u64::MAX);
    let n = all.len();
    let rules: Vec<crate::grammar::RuleId> =
        (0..1usize << n).map(|m| c.new_rule(&format!("{pointer}/unique[{m:b}]"))).collect();
    let l = c.layout();
    let literals: Vec<Expr> = c.nested(|c| Ok(all.iter().map(|v| super::values::literal(c, v)).collect()))?;
    for m in 0..1usize << n {
        let k = m.count_ones() as usize;
        let mut alts = Vec::new();
        if k as u64 >= min && closes(m) {
            alts.push(l.end(k > 0, "]"));
        }
        if (k as u64) < max {
            for &v in at(k) {
                if m >> v & 1 == 0 {
                    let item = l.item(k == 0, literals[v].clone());
                    alts.push(Expr::seq(vec![item, Expr::Rule(rules[m | 1 << v])]));
                }
            }
        }
        c.set_body(rules[m], Expr::Alt(alts));
    }
    Ok(Some(Expr::seq(vec![l.start("["), Expr::Rule(rules[0])])))
}
