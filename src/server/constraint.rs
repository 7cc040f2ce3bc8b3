//! From a request to a compiled constraint: [`Spec`] (what the request asks for), the grammar
//! for tool calls, and [`CompileCache`] (an LRU of compiled constraints).
//!
//! # Tool calls
//!
//! The tool-call grammar and format live in [`crate::tools`] (shared with the library's
//! [`crate::engine`]); this module compiles each tool's `parameters` with errors naming the
//! request field, and hands them over.
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
use crate::automaton::VocabEnv;
use crate::automaton::{Compiled, Constraint};
use crate::grammar::json_schema::{self, JsonSchemaOptions};
use crate::grammar::trigger::Trigger;
use crate::grammar::{ebnf, lark, regex, Grammar};
use crate::model::reasoning::PromptReasoning;

pub use crate::tools::{
    Tool, ToolFormat, ToolMode, ToolSpec, MAX_PARALLEL_TOOL_CALLS, TOOL_CALL_CLOSE, TOOL_CALL_OPEN,
};

/// Largest cache key kept (a bigger constraint is compiled every time).
const MAX_KEY_BYTES: usize = 1 << 20;

/// A constraint the user gives directly.
#[derive(Debug, Clone, Serialize)]
pub enum UserConstraint {
    Regex(String),
    /// EBNF/GBNF text.
    Grammar(String),
    /// Lark text (start rule `start`).
    Lark(String),
    Choice(Vec<String>),
    /// A schema and how it compiles (the request's `x-strictly`).
    JsonSchema(Value, JsonSchemaOptions),
    /// Free text until the first of `triggers`, then `then` (the request's `trigger`).
    Triggered {
        triggers: Vec<Trigger>,
        then: Box<UserConstraint>,
    },
}

impl UserConstraint {
    /// Whether its every output is structured (false for free text before a trigger).
    pub fn structured(&self) -> bool {
        !matches!(self, UserConstraint::Triggered { .. })
    }
}

/// Everything a request asks of the output's shape.
#[derive(Debug, Clone, Serialize)]
pub struct Spec {
    pub user: Option<UserConstraint>,
    /// The request field the user constraint came from (for errors).
    #[serde(skip)]
    pub user_param: Option<String>,
    pub tools: Option<ToolSpec>,
    /// The reasoning markers of the model's template and where the prompt leaves them: the
    /// output is a reasoning part, then the constraint (none when the prompt closed it).
    pub reasoning: Option<PromptReasoning>,
}

impl Spec {
    /// Whether every output this allows is structured (so a budget-closed output is complete
    /// rather than cut prose): false only for `auto` tools over free text.
    pub fn structured(&self) -> bool {
        match &self.tools {
            Some(t) if t.mode == ToolMode::Auto => self.user.as_ref().is_some_and(UserConstraint::structured),
            Some(_) => true,
            None => self.user.as_ref().is_none_or(UserConstraint::structured),
        }
    }

    fn key(&self) -> Option<String> {
        serde_json::to_string(self).ok().filter(|k| k.len() <= MAX_KEY_BYTES)
    }
}

fn user_grammar(u: &UserConstraint, param: &str) -> Result<Grammar, ApiError> {
    let lib = |e| ApiError::from_lib(e, Some(param));
    Ok(match u {
        UserConstraint::Regex(r) => regex::grammar(r).map_err(lib)?,
        UserConstraint::Choice(options) => Grammar::single(regex::choice(options)),
        UserConstraint::Grammar(text) => parse_grammar(text, param)?,
        UserConstraint::Lark(text) => parse_lark(text, param)?,
        UserConstraint::JsonSchema(schema, options) => {
            json_schema::compile(schema, options).map_err(|e| schema_error(e, param))?.grammar
        }
        UserConstraint::Triggered { triggers, then } => {
            crate::grammar::trigger::triggered(triggers, user_grammar(then, param)?).map_err(lib)?
        }
    })
}

/// A request's EBNF/GBNF grammar; what llama.cpp accepts with a warning (an unused rule) is
/// accepted here too, and the warning logged.
fn parse_grammar(text: &str, param: &str) -> Result<Grammar, ApiError> {
    let (g, warnings) =
        ebnf::parse_with_warnings(text, &Default::default()).map_err(|e| ApiError::from_lib(e, Some(param)))?;
    for w in warnings {
        tracing::info!("{param}: warning: {w}");
    }
    Ok(g)
}

/// A request's Lark grammar; warnings (unreachable rules) are logged, as for GBNF.
fn parse_lark(text: &str, param: &str) -> Result<Grammar, ApiError> {
    let (g, warnings) = lark::parse_with_warnings(text, &Default::default()).map_err(|e| {
        let mut err = ApiError::from_lib(e, Some(param));
        err.message = err.message.replacen("invalid grammar", "invalid Lark grammar", 1);
        err
    })?;
    for w in warnings {
        tracing::info!("{param}: warning: {w}");
    }
    Ok(g)
}

fn schema_error(e: crate::error::Error, param: &str) -> ApiError {
    let mut err = ApiError::from_lib(e, Some(param));
    err.message = format!("invalid JSON Schema in {param}: {}", err.message);
    err
}

fn user_constraint(u: &UserConstraint, param: &str) -> Result<Constraint, ApiError> {
    Ok(match u {
        UserConstraint::Regex(r) => Constraint::Regex(r.clone()),
        UserConstraint::Choice(c) => Constraint::Choice(c.clone()),
        UserConstraint::Grammar(text) => Constraint::Grammar(parse_grammar(text, param)?),
        UserConstraint::Lark(text) => Constraint::Grammar(parse_lark(text, param)?),
        UserConstraint::JsonSchema(..) | UserConstraint::Triggered { .. } => {
            Constraint::Grammar(user_grammar(u, param)?)
        }
    })
}

/// The grammar (or plain constraint) for a spec: the user's or the tools', after a reasoning
/// part where the model reasons ([`Spec::reasoning`]).
pub fn build(spec: &Spec) -> Result<Constraint, ApiError> {
    let answer = build_answer(spec)?;
    Ok(match &spec.reasoning {
        // Tool calls in the template's format write their own headers (harmony's).
        Some(r) if spec.tools.is_some() => r.constrain_calls(answer),
        Some(r) => r.constrain(answer),
        None => answer,
    })
}

fn build_answer(spec: &Spec) -> Result<Constraint, ApiError> {
    let param = spec.user_param.as_deref().unwrap_or("response_format");
    let Some(tools) = &spec.tools else {
        let user = spec.user.as_ref().expect("a spec has a user constraint or tools");
        return user_constraint(user, param);
    };
    let mut args = Vec::new();
    for (i, t) in tools.tools.iter().enumerate() {
        if let ToolMode::Named(n) = &tools.mode {
            if n != &t.name {
                continue;
            }
        }
        let p = format!("tools[{i}].function.parameters");
        let g = crate::tools::arguments_grammar(&t.parameters, tools.format).map_err(|e| schema_error(e, &p))?;
        args.push((t.name.clone(), g));
    }
    let format = match (&tools.mode, &spec.user) {
        (ToolMode::Auto, Some(user)) => Some(user_grammar(user, param)?),
        _ => None,
    };
    Ok(Constraint::Grammar(crate::tools::calls_grammar(args, &tools.mode, tools.max_calls, tools.format, format)))
}

/// A 400 naming `trigger` for a token trigger that is no token of `vocab`, or an
/// end-of-sequence token (which ends the output rather than starting a constraint).
fn check_token_triggers(vocab: &crate::vocab::Vocab, triggers: &[Trigger]) -> Result<(), ApiError> {
    for t in triggers {
        let Trigger::Token(t) = t else { continue };
        let msg = match crate::automaton::tokens::find(vocab, t) {
            None => format!("trigger: no single token of the vocabulary is `{}`", t.text()),
            Some(id) if vocab.is_eos(id) => format!("trigger: `{}` is an end-of-sequence token", t.text()),
            Some(_) => continue,
        };
        return Err(ApiError::bad_request(msg).param("trigger"));
    }
    Ok(())
}

/// Compiles a spec for the vocabulary of `env`; library errors become 400s naming the field.
pub fn compile(env: &Arc<VocabEnv>, spec: &Spec) -> Result<Arc<Compiled>, ApiError> {
    if let Some(UserConstraint::Triggered { triggers, .. }) = &spec.user {
        check_token_triggers(env.vocab(), triggers)?;
    }
    let constraint = build(spec)?;
    let param = if spec.tools.is_some() && spec.user.is_none() {
        "tools"
    } else {
        spec.user_param.as_deref().unwrap_or("tools")
    };
    // A JSON Schema that accepts nothing: which subschema and why, in the schema's terms (the
    // compile sees a grammar; asked only on the error paths), or where no subschema shows it
    // (a `$ref` cycle without a way out) that no value validates, never the grammar's words.
    let empty_schema = || match (&spec.user, &spec.tools) {
        (Some(UserConstraint::JsonSchema(schema, o)), None) => Some(schema_error(
            json_schema::why_empty(schema, o, Default::default()).unwrap_or_else(json_schema::no_value_error),
            param,
        )),
        _ => None,
    };
    // (Only the empty-language error is a grammar error here: a limit is not compiled again.)
    let compiled = Compiled::new(env, &constraint).map_err(|e| match e {
        crate::error::Error::Grammar { .. } => empty_schema().unwrap_or_else(|| ApiError::from_lib(e, Some(param))),
        e => ApiError::from_lib(e, Some(param)),
    })?;
    // A constraint no output satisfies (`"schema": false`) is the request's fault, named here
    // rather than by the decoding loop, which does not know the field.
    let mut m = compiled.matcher();
    let mut mask = crate::vocab::TokenSet::new(env.vocab().len());
    m.fill_mask(&mut mask);
    if mask.is_empty() && !m.is_accepting() {
        if let Some(e) = empty_schema() {
            return Err(e);
        }
        let why = compiled.why_empty().map(|w| format!(": {w}")).unwrap_or_default();
        return Err(
            ApiError::bad_request(format!("the constraint in {param} matches no output at all{why}")).param(param)
        );
    }
    Ok(compiled)
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
