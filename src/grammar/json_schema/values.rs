//! `enum` and `const`: each allowed value becomes a literal ([`literal`]: whitespace allowed
//! between the tokens of arrays and objects).
//!
//! Values that the schema's other keywords reject are dropped ([`enum_const`]): checked by the
//! small validator ([`super::validate::simple_validate`]) for the keywords it knows, else by the
//! grammar of those keywords ([`accepted_by`]: the reference recognizer over the rules that
//! grammar reaches, under the compile's limits). The grammar check is sound but may be
//! stricter: a valid value the grammar does not write (keys out of order) is dropped, never an
//! invalid one kept. Values that neither check can decide make the keyword unenforceable.
//!
//! [`finite_values`] is the value set of a schema when it is small and known (`const`, `enum`,
//! `boolean`/`null`), for `uniqueItems` over finite item sets.
//!
//! Invariant: [`accepted_by`] leaves the compiler as it was (its rules are built inside an
//! attempt that is always rolled back); its answers are cached by (schema, values) text.

use serde_json::{Map, Value};

use super::keywords::type_list;
use super::validate::simple_validate;
use super::{join, string, Compiler, MAX_ENUM};
use crate::error::Result;
use crate::grammar::Expr;

pub(super) fn enum_const(c: &mut Compiler, obj: &Map<String, Value>, pointer: &str) -> Result<Option<Expr>> {
    let (values, kw): (Vec<&Value>, &str) = if let Some(v) = super::keywords::get(obj, "const") {
        (vec![v], "const")
    } else if let Some(e) = super::keywords::get(obj, "enum") {
        let a = e.as_array().ok_or_else(|| c.bad(&join(pointer, "enum"), "`enum` must be an array"))?;
        if a.len() > MAX_ENUM {
            return Err(crate::error::Error::Limit {
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
    if alts.is_empty() && !values.is_empty() {
        let what = if kw == "const" { "the `const` value" } else { "no `enum` value" };
        let verb = if kw == "const" { "does not validate" } else { "validates" };
        return Ok(Some(
            c.nothing_because(&join(pointer, kw), format!("{what} {verb} against the keywords beside it")),
        ));
    }
    if alts.is_empty() {
        return Ok(Some(c.nothing_because(&join(pointer, kw), "`enum` lists no value")));
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
            if let std::collections::hash_map::Entry::Vacant(slot) = index.entry(r.0) {
                if order.len() >= limit {
                    return None;
                }
                slot.insert(order.len() as u32);
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
    let texts: Vec<String> = values.iter().map(|v| c.value_text(v)).collect();
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
    // Always rolled back: the rules built here are only for the check, in the compact layout
    // of the texts (whatever the output's whitespace).
    let whitespace = std::mem::replace(&mut c.opts.whitespace, super::Whitespace::Compact);
    let _ = c.attempt(|c| {
        let before = c.unenforced.len();
        let start = c.new_rule("enum-check");
        let body = c.schema(schema, pointer)?;
        if c.unenforced.len() == before {
            c.set_body(start, body);
            if let Some(g) = reachable(&c.rules, start, MAX_CHECKED_RULES) {
                match crate::grammar::reference::Reference::within(&g, &c.limits) {
                    Ok(r) => out = Some(texts.iter().map(|t| r.accepts(t.as_bytes())).collect()),
                    Err(e) => limit = Some(e),
                }
            }
        }
        Err::<(), _>(crate::error::Error::state("rolled back"))
    });
    c.opts.whitespace = whitespace;
    if let Some(e) = limit {
        return Err(e);
    }
    c.value_checks.insert(key, out.clone());
    Ok(out)
}

/// A JSON value as a literal, laid out in the chosen whitespace at the current nesting level.
pub(super) fn literal(c: &Compiler, v: &Value) -> Expr {
    literal_at(c, v, c.level)
}

fn literal_at(c: &Compiler, v: &Value, level: usize) -> Expr {
    let l = super::Layout::new(c.opts.whitespace, level);
    match v {
        Value::Array(a) => {
            let mut parts = vec![l.start("[")];
            for (i, x) in a.iter().enumerate() {
                parts.push(l.item(i == 0, literal_at(c, x, level + 1)));
            }
            parts.push(l.end(!a.is_empty(), "]"));
            Expr::seq(parts)
        }
        Value::Object(o) => {
            let mut parts = vec![l.start("{")];
            for (i, (k, x)) in o.iter().enumerate() {
                let key = Expr::Literal(format!("\"{}\"", string::encode_str(k)));
                parts.push(l.item(i == 0, Expr::seq(vec![key, l.colon.clone(), literal_at(c, x, level + 1)])));
            }
            parts.push(l.end(!o.is_empty(), "}"));
            Expr::seq(parts)
        }
        other => Expr::Literal(c.value_text(other)),
    }
}

pub(super) fn value_set(s: &Value) -> Option<Vec<&Value>> {
    if let Some(v) = s.get("const") {
        return Some(vec![v]);
    }
    s.get("enum")?.as_array().map(|a| a.iter().collect())
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
        let types = type_list(super::keywords::get(o, "type")?);
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
        if simple_validate(&v, &s, &c.limits)? {
            out.push(v);
        }
    }
    Some(out)
}

/// Most spellings read to count a lexeme's values ([`distinct_values`]).
const MAX_COUNTED_SPELLINGS: usize = 4096;

/// The longest spelling read to count a lexeme's values.
const MAX_COUNTED_BYTES: usize = 256;

/// How many distinct JSON values the expressions `exprs` spell together, where each is a
/// finite language: a literal, a regex or lexeme with a finite language, or alternatives of
/// those (of [`MAX_COUNTED_SPELLINGS`] spellings at most in all, none longer than
/// [`MAX_COUNTED_BYTES`]): each spelling decoded, spellings of one value (`1` and `1.0`, `"a"`
/// and `"\u0061"`) counted once. `None` where that is not known (any other expression, an
/// infinite or larger language). For a `minItems` or `minProperties` that asks for more
/// distinct items than there are (no array or object at all).
pub(super) fn distinct_values(c: &Compiler, exprs: &[&Expr]) -> Result<Option<usize>> {
    let mut spellings = Vec::new();
    for e in exprs {
        if !spell_all(c, e, &mut spellings)? {
            return Ok(None);
        }
    }
    let mut strings = std::collections::HashSet::new();
    let mut others: Vec<Value> = Vec::new();
    for s in &spellings {
        match serde_json::from_slice::<Value>(s) {
            Ok(Value::String(s)) => {
                strings.insert(s);
            }
            Ok(v) => {
                if !others.iter().any(|o| super::validate::json_eq(o, &v)) {
                    others.push(v);
                }
            }
            Err(_) => return Ok(None),
        }
    }
    Ok(Some(strings.len() + others.len()))
}

/// Adds the spellings of `e` to `out` (see [`distinct_values`]); false where they are not
/// known.
fn spell_all(c: &Compiler, e: &Expr, out: &mut Vec<Vec<u8>>) -> Result<bool> {
    let lexeme = match e {
        Expr::Literal(l) => {
            out.push(l.as_bytes().to_vec());
            return Ok(out.len() <= MAX_COUNTED_SPELLINGS);
        }
        Expr::Alt(xs) => {
            for x in xs {
                if !spell_all(c, x, out)? {
                    return Ok(false);
                }
            }
            return Ok(true);
        }
        Expr::Regex(h) => &crate::regular::Lexeme::Regex((**h).clone()),
        Expr::Lexeme(l) => &**l,
        _ => return Ok(false),
    };
    let room = MAX_COUNTED_SPELLINGS.saturating_sub(out.len());
    match crate::regular::Dfa::shared(lexeme, c.limits)?.strings(room, MAX_COUNTED_BYTES) {
        Some(s) => {
            out.extend(s);
            Ok(true)
        }
        None => Ok(false),
    }
}
