//! From a request to a compiled constraint: [`Spec`] (what the request asks for), the grammar
//! for tool calls, and [`CompileCache`] (an LRU of compiled constraints).
//!
//! # Tool calls
//!
//! A tool call is written the way Hermes and Qwen 2.5 models write one:
//!
//! ```text
//! <tool_call>
//! {"name": "get_weather", "arguments": {"city": "Paris"}}
//! </tool_call>
//! ```
//!
//! The object's `name` is one of the tools' names and its `arguments` the JSON Schema of that
//! tool's `parameters`, so the arguments of every returned call validate. Calls are separated
//! by a newline; `parallel_tool_calls: false` allows one, else up to
//! [`MAX_PARALLEL_TOOL_CALLS`]. By `tool_choice`:
//!
//! ```text
//! required / named   root ::= calls                          (named: that one tool only)
//! auto               root ::= text calls?                    text: any text without "<tool_call>"
//! auto + a format    root ::= format | calls                 (response_format, regex, ...)
//! ```
//!
//! So under `auto` the model may answer in text, but the moment it writes the marker, the
//! rest is a well-formed call. The text rule is the regular language of strings that do not
//! contain the marker ([`text_without`]), built by hand because regex syntax has no negation.
//!
//! # Invariants
//!
//! - The cache key is the canonical JSON of the [`Spec`] (the served vocabulary is fixed for
//!   the server's lifetime), compared in full, so two requests share a compiled constraint
//!   only when they ask for the same thing.
//! - Every library error while building or compiling is a 400 naming the request field.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::Value;

use super::error::ApiError;
use crate::automaton::{Compiled, Constraint};
use crate::grammar::json_schema::{self, JsonSchemaOptions};
use crate::grammar::{ebnf, regex, Expr, Grammar, Rule, RuleId};
use crate::vocab::Vocab;

/// The text that opens a tool call.
pub const TOOL_CALL_OPEN: &str = "<tool_call>";
/// The text that closes a tool call.
pub const TOOL_CALL_CLOSE: &str = "</tool_call>";
/// Most tool calls in one reply (with `parallel_tool_calls` on, the default).
pub const MAX_PARALLEL_TOOL_CALLS: u32 = 8;
/// Largest cache key kept (a bigger constraint is compiled every time).
const MAX_KEY_BYTES: usize = 1 << 20;

/// A constraint the user gives directly.
#[derive(Debug, Clone, Serialize)]
pub enum UserConstraint {
    Regex(String),
    /// EBNF/GBNF text.
    Grammar(String),
    Choice(Vec<String>),
    JsonSchema(Value),
}

#[derive(Debug, Clone, Serialize)]
pub struct Tool {
    pub name: String,
    pub parameters: Value,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum ToolMode {
    Auto,
    Required,
    Named(String),
}

#[derive(Debug, Clone, Serialize)]
pub struct ToolSpec {
    pub tools: Vec<Tool>,
    pub mode: ToolMode,
    /// 1, or [`MAX_PARALLEL_TOOL_CALLS`].
    pub max_calls: u32,
}

/// Everything a request asks of the output's shape.
#[derive(Debug, Clone, Serialize)]
pub struct Spec {
    pub user: Option<UserConstraint>,
    /// The request field the user constraint came from (for errors).
    #[serde(skip)]
    pub user_param: Option<String>,
    pub tools: Option<ToolSpec>,
}

impl Spec {
    /// Whether every output this allows is structured (so a budget-closed output is complete
    /// rather than cut prose): false only for `auto` tools over free text.
    pub fn structured(&self) -> bool {
        match &self.tools {
            Some(t) if t.mode == ToolMode::Auto => self.user.is_some(),
            _ => true,
        }
    }

    /// Whether the output may hold tool calls (and must be parsed for them).
    pub fn has_tools(&self) -> bool {
        self.tools.is_some()
    }

    fn key(&self) -> Option<String> {
        serde_json::to_string(self).ok().filter(|k| k.len() <= MAX_KEY_BYTES)
    }
}

fn user_grammar(u: &UserConstraint, param: &str) -> Result<Grammar, ApiError> {
    let lib = |e| ApiError::from_lib(e, Some(param));
    Ok(match u {
        UserConstraint::Regex(r) => Grammar::single(Expr::Regex(Box::new(regex::parse(r).map_err(lib)?))),
        UserConstraint::Choice(options) => Grammar::single(regex::choice(options)),
        UserConstraint::Grammar(text) => ebnf::parse(text).map_err(lib)?,
        UserConstraint::JsonSchema(schema) => {
            json_schema::compile(schema, &JsonSchemaOptions::default()).map_err(|e| schema_error(e, param))?.grammar
        }
    })
}

fn schema_error(e: crate::Error, param: &str) -> ApiError {
    let mut err = ApiError::from_lib(e, Some(param));
    err.message = format!("invalid JSON Schema in {param}: {}", err.message);
    err
}

fn user_constraint(u: &UserConstraint, param: &str) -> Result<Constraint, ApiError> {
    Ok(match u {
        UserConstraint::Regex(r) => Constraint::Regex(r.clone()),
        UserConstraint::Choice(c) => Constraint::Choice(c.clone()),
        UserConstraint::Grammar(text) => {
            Constraint::Grammar(ebnf::parse(text).map_err(|e| ApiError::from_lib(e, Some(param)))?)
        }
        UserConstraint::JsonSchema(_) => Constraint::Grammar(user_grammar(u, param)?),
    })
}

/// Appends `g`'s rules to `rules` (renumbering its references); returns its start rule.
fn import(rules: &mut Vec<Rule>, g: Grammar) -> RuleId {
    let off = rules.len() as u32;
    fn shift(e: Expr, off: u32) -> Expr {
        match e {
            Expr::Rule(r) => Expr::Rule(RuleId(r.0 + off)),
            Expr::Seq(xs) => Expr::Seq(xs.into_iter().map(|x| shift(x, off)).collect()),
            Expr::Alt(xs) => Expr::Alt(xs.into_iter().map(|x| shift(x, off)).collect()),
            Expr::Repeat { body, min, max } => Expr::Repeat { body: Box::new(shift(*body, off)), min, max },
            leaf => leaf,
        }
    }
    let start = RuleId(g.start.0 + off);
    for r in g.rules {
        rules.push(Rule { name: r.name, body: shift(r.body, off), span: r.span });
    }
    start
}

fn add_rule(rules: &mut Vec<Rule>, name: &str, body: Expr) -> RuleId {
    rules.push(Rule { name: name.to_string(), body, span: None });
    RuleId(rules.len() as u32 - 1)
}

fn re(pattern: &str) -> Expr {
    Expr::Regex(Box::new(regex::parse(pattern).expect("a valid built-in regex")))
}

/// The regex of all strings (any Unicode text) that do not contain `marker`. The marker's
/// first character must not occur again in it (true of `<tool_call>`), which keeps the
/// automaton simple: state j = the last j characters read are the marker's first j.
///
/// From state 1 (just read the first character), `B` = the marker's characters 1..j for some
/// j (reaching state j); a character that is neither the next one nor the first goes back to
/// state 0, the first character to state 1. So, with `m` the marker and `c = m[0]`:
///
/// ```text
/// text = ( [^c] | c (B c)* ( ∪_j m[1..j] [^m[j] c] ) )*  ( c (B c)* B )?
/// ```
pub fn text_without(marker: &str) -> String {
    let m: Vec<char> = marker.chars().collect();
    assert!(m.len() >= 2 && !m[1..].contains(&m[0]), "the marker's first character must be unique");
    let esc = |c: char| regex_syntax::escape(&c.to_string());
    let lit = |cs: &[char]| cs.iter().map(|&c| esc(c)).collect::<String>();
    let c = esc(m[0]);
    let k = m.len();
    // B: m[1..j] for j in 1..k (the empty string included).
    let b = format!("(?:{})", (1..k).map(|j| lit(&m[1..j])).collect::<Vec<_>>().join("|"));
    let back = (1..k).map(|j| format!("{}[^{}{}]", lit(&m[1..j]), esc(m[j]), c)).collect::<Vec<_>>().join("|");
    format!("(?:[^{c}]|{c}(?:{b}{c})*(?:{back}))*(?:{c}(?:{b}{c})*{b})?")
}

/// The grammar (or plain constraint) for a spec.
pub fn build(spec: &Spec) -> Result<Constraint, ApiError> {
    let param = spec.user_param.as_deref().unwrap_or("response_format");
    let Some(tools) = &spec.tools else {
        let user = spec.user.as_ref().expect("a spec has a user constraint or tools");
        return user_constraint(user, param);
    };
    let mut rules: Vec<Rule> = Vec::new();
    let root = add_rule(&mut rules, "root", Expr::Empty);
    let ws = || re(r"(?: ?|\n[ \t]{0,64})");
    let mut calls = Vec::new();
    for (i, t) in tools.tools.iter().enumerate() {
        if let ToolMode::Named(n) = &tools.mode {
            if n != &t.name {
                continue;
            }
        }
        let p = format!("tools[{i}].function.parameters");
        let g = json_schema::compile(&t.parameters, &JsonSchemaOptions::default())
            .map_err(|e| schema_error(e, &p))?
            .grammar;
        let args = import(&mut rules, g);
        let name = serde_json::to_string(&t.name).expect("a string serializes");
        calls.push(Expr::Seq(vec![
            Expr::Literal("{".into()),
            ws(),
            Expr::Literal("\"name\"".into()),
            ws(),
            Expr::Literal(":".into()),
            ws(),
            Expr::Literal(name),
            ws(),
            Expr::Literal(",".into()),
            ws(),
            Expr::Literal("\"arguments\"".into()),
            ws(),
            Expr::Literal(":".into()),
            ws(),
            Expr::Rule(args),
            ws(),
            Expr::Literal("}".into()),
        ]));
    }
    let object = add_rule(&mut rules, "tool_call_object", Expr::Alt(calls));
    let call = add_rule(
        &mut rules,
        "tool_call",
        Expr::Seq(vec![
            Expr::Literal(TOOL_CALL_OPEN.into()),
            re(r"\n?"),
            Expr::Rule(object),
            re(r"\n?"),
            Expr::Literal(TOOL_CALL_CLOSE.into()),
        ]),
    );
    let calls_body = if tools.max_calls <= 1 {
        Expr::Rule(call)
    } else {
        Expr::Seq(vec![
            Expr::Rule(call),
            Expr::Repeat {
                body: Box::new(Expr::Seq(vec![Expr::Literal("\n".into()), Expr::Rule(call)])),
                min: 0,
                max: Some(tools.max_calls - 1),
            },
        ])
    };
    let calls = add_rule(&mut rules, "tool_calls", calls_body);
    let body = match (&tools.mode, &spec.user) {
        (ToolMode::Auto, Some(user)) => {
            let g = user_grammar(user, param)?;
            let user_root = import(&mut rules, g);
            Expr::Alt(vec![Expr::Rule(user_root), Expr::Rule(calls)])
        }
        (ToolMode::Auto, None) => {
            let text = add_rule(&mut rules, "text", re(&text_without(TOOL_CALL_OPEN)));
            Expr::Seq(vec![Expr::Rule(text), Expr::Repeat { body: Box::new(Expr::Rule(calls)), min: 0, max: Some(1) }])
        }
        _ => Expr::Rule(calls),
    };
    rules[root.0 as usize].body = body;
    Ok(Constraint::Grammar(Grammar { rules, start: root }))
}

/// Compiles a spec for `vocab`; library errors become 400s naming the field.
pub fn compile(vocab: &Arc<Vocab>, spec: &Spec) -> Result<Arc<Compiled>, ApiError> {
    let constraint = build(spec)?;
    let param = if spec.tools.is_some() && spec.user.is_none() {
        "tools"
    } else {
        spec.user_param.as_deref().unwrap_or("tools")
    };
    Compiled::new(vocab.clone(), &constraint).map_err(|e| ApiError::from_lib(e, Some(param)))
}

/// A small LRU of compiled constraints, keyed by the spec's canonical JSON.
pub struct CompileCache {
    capacity: usize,
    inner: Mutex<CacheInner>,
}

#[derive(Default)]
struct CacheInner {
    tick: u64,
    map: HashMap<String, (Arc<Compiled>, u64)>,
}

impl CompileCache {
    pub fn new(capacity: usize) -> CompileCache {
        CompileCache { capacity, inner: Mutex::new(CacheInner::default()) }
    }

    /// The cached compile of `spec`, if any (and marks it used).
    pub fn get(&self, spec: &Spec) -> Option<Arc<Compiled>> {
        let key = spec.key()?;
        let mut c = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        c.tick += 1;
        let tick = c.tick;
        let e = c.map.get_mut(&key)?;
        e.1 = tick;
        Some(e.0.clone())
    }

    pub fn insert(&self, spec: &Spec, compiled: Arc<Compiled>) {
        if self.capacity == 0 {
            return;
        }
        let Some(key) = spec.key() else { return };
        let mut c = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        c.tick += 1;
        let tick = c.tick;
        if c.map.len() >= self.capacity && !c.map.contains_key(&key) {
            if let Some(oldest) = c.map.iter().min_by_key(|(_, v)| v.1).map(|(k, _)| k.clone()) {
                c.map.remove(&oldest);
            }
        }
        c.map.insert(key, (compiled, tick));
    }

    pub fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(re: &str, s: &str) -> bool {
        let re = regex_automata::meta::Regex::new(&format!("^(?s:{re})$")).unwrap();
        re.is_match(s)
    }

    #[test]
    fn text_without_the_marker() {
        let r = text_without(TOOL_CALL_OPEN);
        for ok in [
            "",
            "hello",
            "a < b",
            "<tool",
            "<tool_cal",
            "x<<tool_calx>",
            "<tool_call",
            "<<tool_call",
            "tool_call>",
            "<\n",
        ] {
            assert!(matches(&r, ok), "{ok:?} should match");
        }
        for bad in ["<tool_call>", "hi <tool_call> x", "<<tool_call>", "<tool_<tool_call>", "a<tool_call>b"] {
            assert!(!matches(&r, bad), "{bad:?} should not match");
        }
    }
}
