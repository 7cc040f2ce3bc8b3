//! A small JSON Schema validator for single values, used while compiling: to filter `enum`
//! and `const` values by their sibling keywords, to prove `oneOf` branches disjoint, and to
//! merge `patternProperties` with declared names.
//!
//! [`simple_validate`] knows the keywords that decide a value on their own (types, values,
//! bounds, lengths, `pattern`, the internal exclusion keywords, `anyOf`/`allOf`/`not`, counts,
//! `required`, `properties`, single-schema `items`, `prefixItems`) and answers `None` for any
//! other keyword: the caller then cannot decide, and never guesses. [`pattern_matches`] runs a
//! pattern over the canonical encoding, as the grammar does, with a bounded NFA simulation
//! under the compile's limits. [`json_eq`] is JSON Schema equality (`1 == 1.0`).

use serde_json::{Map, Value};

use super::keywords::{keyword_type, type_list, ANNOTATIONS, VALIDATION};
use super::string;
use crate::regular::DfaLimits;

/// Is `v` of the JSON Schema type `t`?
pub(super) fn is_of_type(v: &Value, t: &str) -> bool {
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

/// Validates `v` against the keywords of `schema` that it knows; `None` if the schema uses a
/// keyword it does not know (then the caller cannot decide).
pub(super) fn simple_validate(v: &Value, schema: &Value, limits: &DfaLimits) -> Option<bool> {
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
        if !keyword_holds(v, k, s, obj, limits)? {
            return Some(false);
        }
    }
    Some(true)
}

/// Does `v` satisfy the validation keyword `k: s` of schema `obj`, which applies to its type?
/// `None` if the keyword is not one this validator knows (or its value is malformed). Each
/// family is a step of its own.
fn keyword_holds(v: &Value, k: &str, s: &Value, obj: &Map<String, Value>, limits: &DfaLimits) -> Option<bool> {
    match k {
        _ if ANNOTATIONS.contains(&k) => Some(true),
        "type" => Some(type_list(s).iter().any(|t| is_of_type(v, t))),
        "enum" => Some(s.as_array()?.iter().any(|x| json_eq(x, v))),
        "const" => Some(json_eq(s, v)),
        "minLength" | "maxLength" | "pattern" | super::keywords::EXCLUDE_STRINGS | super::keywords::NOT_STRING => {
            string_holds(v, k, s, limits)
        }
        "minimum"
        | "maximum"
        | "exclusiveMinimum"
        | "exclusiveMaximum"
        | "multipleOf"
        | super::keywords::NOT_INTEGER
        | super::keywords::EXCLUDE_NUMBERS => number_holds(v, k, s),
        "not" => Some(!simple_validate(v, s, limits)?),
        "anyOf" => {
            let mut any = false;
            for b in s.as_array()? {
                any |= simple_validate(v, b, limits)?;
            }
            Some(any)
        }
        "allOf" => {
            let mut all = true;
            for b in s.as_array()? {
                all &= simple_validate(v, b, limits)?;
            }
            Some(all)
        }
        "minItems" | "maxItems" | "minProperties" | "maxProperties" => size_holds(v, k, s),
        "uniqueItems" | "items" | "prefixItems" => array_holds(v, k, s, obj, limits),
        "required" | "properties" | super::keywords::SOME_KEY_NOT_IN => object_holds(v, k, s, limits),
        _ => None,
    }
}

/// The string keywords: lengths (in characters), `pattern`, excluded strings, and the
/// internal `not` of string keywords. Non-strings pass.
fn string_holds(v: &Value, k: &str, s: &Value, limits: &DfaLimits) -> Option<bool> {
    Some(match k {
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
        "pattern" => match v.as_str() {
            None => true,
            Some(st) => pattern_matches(s.as_str()?, st, limits)?,
        },
        super::keywords::EXCLUDE_STRINGS => !s.as_array()?.contains(v),
        _ => {
            let mut ok = true;
            for x in s.as_array()? {
                ok &= !simple_validate(v, x, limits)?;
            }
            ok
        }
    })
}

/// The number keywords: bounds, integer `multipleOf`, the internal "not an integer" and
/// excluded numbers. Non-numbers pass.
fn number_holds(v: &Value, k: &str, s: &Value) -> Option<bool> {
    Some(match k {
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => match (v.as_f64(), s.as_f64()) {
            (None, _) => true,
            (Some(x), Some(b)) => match k {
                "minimum" => x >= b,
                "maximum" => x <= b,
                "exclusiveMinimum" => x > b,
                _ => x < b,
            },
            _ => return None,
        },
        "multipleOf" => match (v.as_i64(), s.as_u64()) {
            (None, _) if !v.is_number() => true,
            (Some(x), Some(m)) if m > 0 => x % m as i64 == 0,
            _ => return None,
        },
        super::keywords::NOT_INTEGER => v.as_f64().is_none_or(|f| f.fract() != 0.0),
        _ => !s.as_array()?.iter().any(|x| json_eq(x, v)),
    })
}

/// `minItems`/`maxItems`/`minProperties`/`maxProperties`: the number of items or members.
/// (Only called where the keyword applies, so `v` is an array or an object.)
fn size_holds(v: &Value, k: &str, s: &Value) -> Option<bool> {
    let n = match v {
        Value::Array(a) => a.len() as u64,
        Value::Object(o) => o.len() as u64,
        _ => return Some(true),
    };
    Some(if k.starts_with("min") { n >= s.as_u64()? } else { n <= s.as_u64()? })
}

/// The array keywords: `uniqueItems`, single-schema `items` (after `prefixItems`) and
/// `prefixItems`. Array-form `items` (draft-07 tuples) is not known here: `None`.
fn array_holds(v: &Value, k: &str, s: &Value, obj: &Map<String, Value>, limits: &DfaLimits) -> Option<bool> {
    Some(match k {
        "uniqueItems" => match v.as_array() {
            Some(a) if s == &Value::Bool(true) => {
                (0..a.len()).all(|i| (i + 1..a.len()).all(|j| !json_eq(&a[i], &a[j])))
            }
            _ => true,
        },
        "items" if !s.is_array() => match v.as_array() {
            None => true,
            Some(a) => {
                let from = super::keywords::get(obj, "prefixItems").and_then(Value::as_array).map_or(0, Vec::len);
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
        _ => return None,
    })
}

/// The object keywords: `required`, `properties`, and the internal "some key outside this
/// list". Non-objects pass.
fn object_holds(v: &Value, k: &str, s: &Value, limits: &DfaLimits) -> Option<bool> {
    let Some(o) = v.as_object() else { return Some(true) };
    Some(match k {
        "required" => s.as_array()?.iter().all(|k| k.as_str().is_some_and(|k| o.contains_key(k))),
        "properties" => {
            let mut ok = true;
            for (k, ps) in s.as_object()? {
                if let Some(x) = o.get(k) {
                    ok &= simple_validate(x, ps, limits)?;
                }
            }
            ok
        }
        _ => {
            let names = s.as_array()?;
            o.keys().any(|k| !names.iter().any(|n| n == k.as_str()))
        }
    })
}

/// Does `pattern` match `text`? The pattern runs over the canonical encoding, as the grammar
/// does. Not a DFA: a bounded NFA simulation (`regex-automata`'s meta regex, whose lazy DFA keeps
/// a cache of bounded size and falls back to the PikeVM), so a pattern whose DFA is exponential
/// (`(a|b)*a(a|b){20}`) is still checked against a few values quickly and in bounded memory.
/// The NFA honours `limits.nfa_bytes` (past it: `None`, the caller cannot decide); the lazy
/// DFA's cache is at most `limits.dfa_bytes`. Compiled patterns are cached per thread (enums
/// check many values).
pub(super) fn pattern_matches(pattern: &str, text: &str, limits: &DfaLimits) -> Option<bool> {
    use regex_automata::meta;
    use regex_syntax::hir::{Hir, Look};
    use std::cell::RefCell;
    use std::collections::HashMap;
    /// A pattern's parts: each regex must match, or not match where its flag says so.
    type Parts = std::rc::Rc<Vec<(bool, meta::Regex)>>;
    type Cache = HashMap<(String, usize, usize), Option<Parts>>;
    thread_local! {
        static CACHE: RefCell<Cache> = RefCell::new(HashMap::new());
    }
    let build = |pattern: &str| -> Option<meta::Regex> {
        let h = string::pattern_content(pattern).ok()?;
        let whole = Hir::concat(vec![Hir::look(Look::Start), h, Hir::look(Look::End)]);
        let config = meta::Config::new()
            .nfa_size_limit(Some(limits.nfa_bytes))
            .hybrid_cache_capacity(limits.dfa_bytes)
            .dfa_size_limit(Some(limits.dfa_bytes))
            .dfa_state_limit(Some(limits.states));
        meta::Builder::new().configure(config).build_from_hir(&whole).ok()
    };
    let parts = CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() > 256 {
            c.clear();
        }
        c.entry((pattern.to_string(), limits.nfa_bytes, limits.dfa_bytes))
            .or_insert_with(|| {
                let parts = super::ecma::pattern_parts(pattern);
                let built = parts.iter().map(|(negative, p)| Some((*negative, build(p)?))).collect::<Option<Vec<_>>>();
                built.map(std::rc::Rc::new)
            })
            .clone()
    })?;
    let text = string::encode_str(text);
    Some(parts.iter().all(|(negative, re)| re.is_match(text.as_bytes()) != *negative))
}

/// Exact numeric equality: integers (`i64`/`u64`) as integers; an integer and a float equal
/// when the float is that whole number exactly; two floats as `f64`s.
fn number_eq(x: &serde_json::Number, y: &serde_json::Number) -> bool {
    let int = |n: &serde_json::Number| n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from));
    let float_is = |f: f64, i: i128| f.fract() == 0.0 && f.abs() < 1.7e38 && f as i128 == i;
    match (int(x), int(y)) {
        (Some(i), Some(j)) => i == j,
        (Some(i), None) => y.as_f64().is_some_and(|f| float_is(f, i)),
        (None, Some(j)) => x.as_f64().is_some_and(|f| float_is(f, j)),
        (None, None) => x.as_f64() == y.as_f64(),
    }
}

/// JSON equality as JSON Schema defines it (1 == 1.0), numbers compared by their exact
/// values: 9007199254740992 and 9007199254740993 differ although their `f64`s are equal.
pub(super) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => number_eq(x, y),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, p)| y.get(k).is_some_and(|q| json_eq(p, q)))
        }
        _ => a == b,
    }
}
