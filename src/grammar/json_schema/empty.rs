//! Schemas that provably accept nothing, seen without compiling them.
//!
//! Conditionals multiply out: six `if`/`then` pairs beside a large object (prometheus's
//! `auth`) are an `anyOf` of 64 branches, and each branch is compiled with the whole object
//! beside it, although most contradict themselves: a key one `if` requires with a non-null
//! value is `const: null` in another's `then`. [`provably_empty`] finds such a branch from a
//! look at its keywords, and the caller ([`super::one_of::any_one_of`]) leaves it out before
//! it is merged with the object (the object's own compile would find the contradiction too,
//! at its first empty required member, but only after the merge and the copies).
//!
//! A schema is read as a conjunction ([`conjuncts`]): its own keywords, its `allOf` parts, the
//! one branch of a one-branch `anyOf`, its `$ref`'s target (a `$ref` beside other keywords is
//! merged with them, so all hold), and a `not` rewritten exactly where it can be
//! ([`super::not::rewrite_not`]); one look collects at most [`MAX_CONJUNCTS`] in all, so its
//! work is bounded whatever the references share. It is empty when the conjuncts share
//! no JSON type, when every value a `const`/`enum` allows fails one of them
//! ([`simple_validate`], which answers only what it knows), or, where only objects are left,
//! when a key one of them requires is closed out by another or has property schemas that are
//! together empty. `false` means "not shown empty", never "not empty": the grammar decides the
//! rest, as before. Exact: only schemas without a valid instance are found.
//!
//! Also why a compiled language is empty: the compiler notes each subschema it makes the empty
//! language and why ([`Compiler::nothing_because`]), and drops the notes under a subschema that
//! turns out to accept something ([`Compiler::schema`]); what is left at the root are the
//! subschemas whose emptiness reaches it, which [`JsonGrammar::empty_language_error`] names.

use std::borrow::Cow;

use serde_json::Value;

use super::keywords::type_list;
use super::not::rewrite_not;
use super::validate::{is_of_type, simple_validate};
use super::values::value_set;
use super::{nothing, Compiler, JsonGrammar};
use crate::error::{Error, Location};
use crate::grammar::{Expr, Rule};

/// Most conjuncts one look collects, in all (a larger or more shared schema is not shown empty:
/// references may make a schema's tree far larger than its text).
const MAX_CONJUNCTS: usize = 256;
/// Deepest nesting one look follows (`allOf` parts, references, property schemas).
const MAX_DEPTH: usize = 16;
/// Most values of one `const`/`enum` checked (a long list of values that all fail is rare).
const MAX_VALUES: usize = 64;

/// Does `s` provably accept no value? See the module docs.
pub(super) fn provably_empty(c: &Compiler, s: &Value) -> bool {
    let mut budget = MAX_CONJUNCTS;
    empty_of(c, [Cow::Borrowed(s)], &mut budget, 0)
}

/// Does the conjunction of `starts` provably accept no value? Collecting conjuncts spends
/// `budget`.
fn empty_of<'a>(
    c: &Compiler<'a>,
    starts: impl IntoIterator<Item = Cow<'a, Value>>,
    budget: &mut usize,
    depth: usize,
) -> bool {
    let mut parts = Vec::new();
    if !starts.into_iter().all(|s| conjuncts(c, s, &mut parts, budget, depth)) {
        return false;
    }
    if parts.iter().any(|p| **p == Value::Bool(false)) {
        return true;
    }
    // The JSON types every conjunct allows.
    let mut types = Kinds::ALL;
    for p in &parts {
        if let Some(t) = p.get("type") {
            types &= Kinds::of(t);
        }
    }
    if types == 0 {
        return true;
    }
    // Values a conjunct lists, each failing some conjunct.
    let values_fail = parts.iter().filter_map(|p| value_set(p)).filter(|v| v.len() <= MAX_VALUES).any(|values| {
        values
            .iter()
            .all(|v| !Kinds::allows(types, v) || parts.iter().any(|p| simple_validate(v, p, &c.limits) == Some(false)))
    });
    values_fail || (types == Kinds::OBJECT && members_empty(c, &parts, budget, depth))
}

/// Is some key that one of `parts` requires closed out by another, or given schemas by their
/// `properties` that are together empty?
fn members_empty(c: &Compiler, parts: &[Cow<'_, Value>], budget: &mut usize, depth: usize) -> bool {
    let required = parts.iter().filter_map(|p| p.get("required")?.as_array()).flatten().filter_map(Value::as_str);
    required.into_iter().any(|k| {
        let closed_out = parts.iter().any(|p| {
            p.get("additionalProperties") == Some(&Value::Bool(false))
                && p.get("patternProperties").is_none()
                && p.get("properties").and_then(|m| m.get(k)).is_none()
        });
        let mut schemas = parts.iter().filter_map(|p| p.get("properties")?.get(k)).map(Cow::Borrowed).peekable();
        closed_out || (schemas.peek().is_some() && empty_of(c, schemas, budget, depth + 1))
    })
}

/// Collects the conjuncts of `s` into `out` (see the module docs), each spending one of
/// `budget`; `false` when the budget runs out, they nest deeper than [`MAX_DEPTH`] or a
/// reference does not resolve (then nothing is concluded).
fn conjuncts<'a>(
    c: &Compiler<'a>,
    s: Cow<'a, Value>,
    out: &mut Vec<Cow<'a, Value>>,
    budget: &mut usize,
    depth: usize,
) -> bool {
    if *budget == 0 || depth > MAX_DEPTH {
        return false;
    }
    *budget -= 1;
    let s = match s.as_object().filter(|o| o.contains_key("not")).and_then(rewrite_not) {
        Some(rewritten) => Cow::Owned(Value::Object(rewritten)),
        None => s,
    };
    // The parts of `allOf` and a one-branch `anyOf`, borrowed as long as `s` is.
    fn parts(v: &Value) -> impl Iterator<Item = &Value> {
        let all = v.get("allOf").and_then(Value::as_array).into_iter().flatten();
        all.chain(v.get("anyOf").and_then(Value::as_array).filter(|a| a.len() == 1).into_iter().flatten())
    }
    let mut inner: Vec<Cow<'a, Value>> = match &s {
        Cow::Borrowed(b) => parts(b).map(Cow::Borrowed).collect(),
        Cow::Owned(o) => parts(o).map(|v| Cow::Owned(v.clone())).collect(),
    };
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        match c.ref_value(r) {
            Some(t) => inner.push(Cow::Borrowed(t)),
            None => return false,
        }
    }
    out.push(s);
    inner.into_iter().all(|p| conjuncts(c, p, out, budget, depth + 1))
}

/// JSON types as bits (integers apart from other numbers: `number` is both).
struct Kinds;

impl Kinds {
    const NAMES: [&'static str; 7] = ["null", "boolean", "object", "array", "string", "integer", "fraction"];
    const ALL: u8 = (1 << Self::NAMES.len()) - 1;
    const OBJECT: u8 = 1 << 2;

    /// The types a `type` keyword allows; every type where it names one JSON Schema does not
    /// know or is malformed (the compiler reports that, not this look).
    fn of(t: &Value) -> u8 {
        if !(t.is_string() || t.is_array()) {
            return Self::ALL;
        }
        type_list(t).iter().fold(0, |bits, t| {
            bits | match *t {
                "number" => 0b110_0000,
                "fraction" => Self::ALL,
                t => Self::NAMES.iter().position(|n| *n == t).map_or(Self::ALL, |i| 1 << i),
            }
        })
    }

    /// Is `v` of one of the types in `bits`?
    fn allows(bits: u8, v: &Value) -> bool {
        let bit = match v {
            Value::Null => 1,
            Value::Bool(_) => 1 << 1,
            Value::Object(_) => Self::OBJECT,
            Value::Array(_) => 1 << 3,
            Value::String(_) => 1 << 4,
            Value::Number(_) if is_of_type(v, "integer") => 1 << 5,
            Value::Number(_) => 1 << 6,
        };
        bits & bit != 0
    }
}

/// A subschema the compiler found to accept no value, and why (`minimum` above `maximum`,
/// `false`, a required property whose value nothing validates, ...).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EmptySubschema {
    pub pointer: String,
    pub reason: String,
}

/// The error for a schema whose language is empty where no subschema is seen to make it so.
pub fn no_value_error() -> Error {
    Error::Schema {
        at: Location::Pointer(String::new()),
        msg: "no JSON value validates against this schema (its constraints contradict each other, or every value \
              needs infinite nesting)"
            .into(),
    }
}

impl JsonGrammar {
    /// The error for a schema whose language is empty: the subschemas that make it so, the
    /// first one's pointer as the place.
    pub fn empty_language_error(&self) -> Error {
        const SHOWN: usize = 4;
        let Some(first) = self.empty.first() else { return no_value_error() };
        let mut msg = first.reason.clone();
        let also: Vec<String> = self.empty[1..]
            .iter()
            .take(SHOWN - 1)
            .map(|e| format!("at {}: {}", Location::Pointer(e.pointer.clone()), e.reason))
            .collect();
        if !also.is_empty() {
            let more = self.empty.len().saturating_sub(SHOWN);
            let more = if more > 0 { format!("; and {more} more") } else { String::new() };
            msg.push_str(&format!(" (also {}{more})", also.join("; ")));
        }
        msg.push_str(", so no JSON value validates against the schema");
        Error::Schema { at: Location::Pointer(first.pointer.clone()), msg }
    }
}

impl Compiler<'_> {
    /// The empty language, noted as accepting nothing at `pointer` because of `reason` (kept
    /// while the emptiness reaches the root, see [`JsonGrammar::empty`]).
    pub(super) fn nothing_because(&mut self, pointer: &str, reason: impl Into<String>) -> Expr {
        self.empty.push(EmptySubschema { pointer: pointer.to_string(), reason: reason.into() });
        nothing()
    }

    /// Is `e` seen to be the empty language by its shape: an alternation of nothing, a
    /// sequence with an empty part, a rule whose body is so? A cheap, partial test (an empty
    /// regular intersection reads as not empty). A rule's answer is kept once its body is set
    /// (see [`RuleShape`]): the test runs on every subschema's expression, and the rules below
    /// it, walked again at every question, made it quadratic in the schema's size.
    pub(super) fn is_nothing(&mut self, e: &Expr) -> bool {
        /// Nodes looked at per question, at most (a rule already answered counts one).
        const WORK: usize = 256;
        let mut work = WORK;
        nothing_in(&self.rules, &mut self.shapes, e, &mut work).0
    }
}

/// [`Compiler::is_nothing`] of `e` within `work` nodes, and whether a `false` is only for now
/// (the work ran out on the way: asked again, with work left, it may be `true`). A `true` is
/// always final: it is a proof. A rule without a body yet, or being answered (both are
/// recursions: into a schema still being compiled, or through the rule itself), reads as not
/// nothing, for good: the rule's own subschema reports its emptiness when it is compiled.
fn nothing_in(rules: &[Rule], shapes: &mut [RuleShape], e: &Expr, work: &mut usize) -> (bool, bool) {
    if *work == 0 {
        return (false, true);
    }
    *work -= 1;
    match e {
        Expr::Alt(xs) => {
            for x in xs {
                let (nothing, for_now) = nothing_in(rules, shapes, x, work);
                if !nothing {
                    return (false, for_now);
                }
            }
            (true, false)
        }
        Expr::Seq(xs) => {
            let mut for_now = false;
            for x in xs {
                let (nothing, tentative) = nothing_in(rules, shapes, x, work);
                if nothing {
                    return (true, false);
                }
                for_now |= tentative;
            }
            (false, for_now)
        }
        Expr::Repeat { body, min, .. } if *min > 0 => nothing_in(rules, shapes, body, work),
        Expr::Rule(r) => {
            let i = r.0 as usize;
            match shapes[i] {
                RuleShape::Known(nothing) => (nothing, false),
                RuleShape::Unset | RuleShape::Busy => (false, false),
                RuleShape::Set => {
                    shapes[i] = RuleShape::Busy;
                    let (nothing, for_now) = nothing_in(rules, shapes, &rules[i].body, work);
                    shapes[i] = if for_now { RuleShape::Set } else { RuleShape::Known(nothing) };
                    (nothing, for_now)
                }
            }
        }
        _ => (false, false),
    }
}

/// What [`Compiler::is_nothing`] knows of a rule (beside [`Compiler::rules`], by id).
#[derive(Clone, Copy, PartialEq, Debug)]
pub(super) enum RuleShape {
    /// Made, its body not set yet (a placeholder that a recursion refers to): not nothing.
    Unset,
    /// Its body set, not answered yet.
    Set,
    /// Being answered (a question met it again, a recursion): not nothing.
    Busy,
    /// Answered: its body is (or is not) seen to be nothing.
    Known(bool),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::json_schema::{prepare, JsonSchemaOptions};
    use crate::regular::DfaLimits;
    use serde_json::json;

    /// `f` of each schema in `cases`, prepared inside a document beside `definitions`.
    fn each(definitions: Value, cases: &[Value], f: impl Fn(&Compiler, &Value) -> bool) -> Vec<bool> {
        let doc = json!({"definitions": definitions, "cases": cases});
        let opts = JsonSchemaOptions::default();
        let (prepared, docs, index) = prepare(&doc, &opts).unwrap();
        let c = Compiler::new(&prepared, &docs, index, &opts, DfaLimits::default());
        (0..cases.len()).map(|i| f(&c, &prepared["cases"][i])).collect()
    }

    #[test]
    fn contradictions_are_empty_and_the_rest_is_not_shown() {
        let definitions = json!({"auth": {"type": ["object", "null"]}, "text": {"type": "string"}});
        let cases = [
            (json!(false), true),
            (json!({"allOf": [{"const": null}, {"not": {"const": null}}]}), true),
            (json!({"allOf": [{"$ref": "#/definitions/auth"}, {"type": "string"}]}), true),
            (json!({"allOf": [{"$ref": "#/definitions/text"}, {"enum": [1, null]}]}), true),
            (json!({"allOf": [{"type": "integer"}, {"const": 1.5}]}), true),
            (json!({"type": "number", "enum": [2, "x"], "maximum": 1}), true),
            (json!({"allOf": [{"$ref": "#/definitions/auth"}, {"const": null}]}), false),
            (json!({"allOf": [{"type": "number"}, {"type": "integer"}]}), false),
            (json!({"const": 1, "multipleOf": 1}), false),
            (json!({"enum": [1, 2], "not": {"const": 1}}), false),
            // Objects: the shape of a multiplied-out pair of exclusive conditionals.
            (
                json!({"allOf": [{"not": {"properties": {"a": {"const": null}}}}, {"properties": {"a": {"const": null}}}]}),
                true,
            ),
            (json!({"type": "object", "required": ["b"], "additionalProperties": false}), true),
            (
                json!({"type": "object", "required": ["a"], "allOf": [{"properties": {"a": {"$ref": "#/definitions/text"}}}, {"properties": {"a": {"type": "integer"}}}]}),
                true,
            ),
            (json!({"required": ["b"], "additionalProperties": false}), false),
            (
                json!({"type": "object", "required": ["b"], "additionalProperties": false, "patternProperties": {"^b$": {}}}),
                false,
            ),
            (
                json!({"allOf": [{"not": {"properties": {"a": {"const": null}}}}, {"properties": {"b": {"const": null}}}]}),
                false,
            ),
            // Malformed or unknown types are the compiler's to report, not grounds for empty.
            (json!({"allOf": [{"type": "strin"}, {"type": "integer"}]}), false),
            (json!({"allOf": [{"type": "fraction"}, {"type": "integer"}]}), false),
            (json!({"allOf": [{"type": 5}, {"type": "integer"}]}), false),
            (json!({}), false),
        ];
        let (schemas, expected): (Vec<Value>, Vec<bool>) = cases.into_iter().unzip();
        let found = each(definitions, &schemas, provably_empty);
        for ((s, want), got) in schemas.iter().zip(expected).zip(found) {
            assert_eq!(got, want, "{s}");
        }
    }
}
