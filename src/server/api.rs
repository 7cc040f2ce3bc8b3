//! The request bodies of the OpenAI API as serde types, and the checks that turn one into
//! [`GenerateOptions`] and a [`Spec`] (the constraint).
//!
//! Key types: [`ChatRequest`] and [`CompletionRequest`], which share [`Common`] (the sampling
//! knobs, `n`, `stop`, streaming, `response_format` and the extension constraints); [`Plan`],
//! what a request turns into. The sampling fields are read as [`SamplingOverrides`]
//! ([`Common::sampling`]) and laid over the model's `generation_config.json` defaults, as
//! `strictly generate` lays its flags. `tool_choice` ([`ToolChoiceParam`], the wire form) is
//! read as the crate's one [`ToolChoice`].
//!
//! Unknown fields are ignored (clients send `user`, `metadata`, `store`, ...); fields that
//! would change the output but are not supported (`logit_bias`, `functions`, `suffix`, image
//! content, ...) are a 400 naming them, never silently dropped.

use std::collections::HashMap;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::constraint::{Spec, Tool, ToolFormat, ToolMode, ToolSpec, UserConstraint, MAX_PARALLEL_TOOL_CALLS};
use super::error::ApiError;
use crate::decode::GenerateOptions;
use crate::grammar::json_schema::{self, JsonSchemaOptions, Whitespace};
use crate::grammar::trigger::Trigger;
use crate::grammar::TokenRef;
use crate::model::{GenerationDefaults, TemplateVars};
use crate::sample::{SamplingOverrides, MAX_TOP_LOGPROBS};
use crate::tools::ToolChoice;
use crate::vocab::TokenId;

/// Most choices per request (`n`).
pub const MAX_N: usize = 16;
/// Most stop strings (OpenAI's limit).
pub const MAX_STOP: usize = 4;

/// Reads a field that may take several shapes: `read` picks the shape, or `None` for a value of
/// none of them, which is an error saying what was `expected` (serde's own message for an
/// untagged enum names the Rust type, not the field).
fn shapes<'de, D: Deserializer<'de>, T>(
    d: D,
    expected: &str,
    read: impl FnOnce(Value) -> Option<T>,
) -> Result<T, D::Error> {
    read(Value::deserialize(d)?).ok_or_else(|| D::Error::custom(expected))
}

/// `trigger`: one trigger, or several (the first the output writes starts the constraint); a
/// trigger is a string (text) or `{"token": NAME_OR_ID}` (one token: `"<|python_tag|>"`,
/// `"<[128010]>"` or `128010`).
#[derive(Debug, Clone)]
pub struct Triggers(pub Vec<Trigger>);

impl<'de> Deserialize<'de> for Triggers {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Triggers, D::Error> {
        fn one(v: Value) -> Option<Trigger> {
            match v {
                Value::String(s) => Some(Trigger::Text(s)),
                Value::Object(o) if o.len() == 1 => match o.get("token")? {
                    Value::String(s) => Some(Trigger::Token(TokenRef::parse(s))),
                    Value::Number(n) => Some(Trigger::Token(TokenRef::Id(u32::try_from(n.as_u64()?).ok()?))),
                    _ => None,
                },
                _ => None,
            }
        }
        shapes(d, "trigger must be a string, {\"token\": NAME_OR_ID}, or a non-empty array of them", |v| match v {
            Value::Array(xs) if !xs.is_empty() => xs.into_iter().map(one).collect::<Option<_>>().map(Triggers),
            v => one(v).map(|t| Triggers(vec![t])),
        })
    }
}

/// A seed: OpenAI's is a signed 64-bit integer; unsigned ones are taken too.
#[derive(Debug, Clone, Copy)]
pub enum Seed {
    U(u64),
    I(i64),
}

impl Seed {
    fn value(self) -> u64 {
        match self {
            Seed::U(u) => u,
            Seed::I(i) => i as u64,
        }
    }
}

impl<'de> Deserialize<'de> for Seed {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Seed, D::Error> {
        shapes(d, "seed must be an integer", |v| match v {
            Value::Number(n) => n.as_u64().map(Seed::U).or_else(|| n.as_i64().map(Seed::I)),
            _ => None,
        })
    }
}

/// `stop`: one string or a list.
#[derive(Debug, Clone)]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

impl<'de> Deserialize<'de> for Stop {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Stop, D::Error> {
        shapes(d, "stop must be a string or an array of strings", |v| match v {
            Value::String(s) => Some(Stop::One(s)),
            v => serde_json::from_value(v).ok().map(Stop::Many),
        })
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: Option<bool>,
}

/// `response_format`.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseFormat {
    Text,
    JsonObject,
    JsonSchema { json_schema: JsonSchemaFormat },
}

#[derive(Debug, Clone, Deserialize)]
pub struct JsonSchemaFormat {
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// Absent: any JSON value.
    #[serde(default)]
    pub schema: Option<Value>,
    /// `true`: the schema must keep OpenAI's strict-mode rules (else 400 naming where it
    /// breaks them: [`json_schema::strict_violation`]). Either way the output is the schema's
    /// sensible language (or, with `x-strictly.exact`, its exact one).
    #[serde(default)]
    pub strict: Option<bool>,
}

/// `x-strictly`: how this crate compiles the request's JSON Schema (response format,
/// `guided_json`). Absent fields take [`JsonSchemaOptions`]'s defaults.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StrictlyExtension {
    /// `compact` (default), `pretty` or `flexible`.
    #[serde(default)]
    pub whitespace: Option<Whitespace>,
    /// The schema's exact language instead of the sensible one.
    #[serde(default)]
    pub exact: Option<bool>,
}

impl StrictlyExtension {
    pub fn options(&self) -> JsonSchemaOptions {
        let base = if self.exact == Some(true) { JsonSchemaOptions::exact() } else { JsonSchemaOptions::default() };
        match self.whitespace {
            Some(w) => base.with_whitespace(w),
            None => base,
        }
    }
}

/// The knobs `/v1/chat/completions` and `/v1/completions` share, with the extension fields
/// (`regex`, `grammar`, `choice`; vLLM's `guided_*` spellings are aliases).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Common {
    pub model: Option<String>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    /// vLLM's: `-1` or `0` is off.
    pub top_k: Option<i64>,
    pub min_p: Option<f32>,
    pub top_n_sigma: Option<f32>,
    pub frequency_penalty: Option<f32>,
    pub presence_penalty: Option<f32>,
    pub repetition_penalty: Option<f32>,
    /// DRY, as llama.cpp's server names it (`dry_penalty_last_n`: `-1` the whole context).
    pub dry_multiplier: Option<f32>,
    pub dry_base: Option<f32>,
    pub dry_allowed_length: Option<usize>,
    pub dry_penalty_last_n: Option<i64>,
    pub dry_sequence_breakers: Option<Vec<String>>,
    /// An extension: `"prompt-lookup"` decodes with prompt-lookup speculation (the same tokens
    /// in fewer forward passes where the reply copies the prompt), `"off"` (the default) not.
    pub speculate: Option<String>,
    pub seed: Option<Seed>,
    pub stop: Option<Stop>,
    pub max_tokens: Option<i64>,
    pub n: Option<i64>,
    pub stream: Option<bool>,
    pub stream_options: Option<StreamOptions>,
    pub response_format: Option<ResponseFormat>,
    #[serde(alias = "guided_regex")]
    pub regex: Option<String>,
    #[serde(alias = "guided_grammar")]
    pub grammar: Option<String>,
    /// The syntax of `grammar`: `gbnf` (also `ebnf`) or `lark`. Without it, a grammar that
    /// defines no rule with `::=` (GBNF's mark) is read as Lark.
    pub grammar_syntax: Option<String>,
    /// Free text until this string (or the first of these strings), then the request's
    /// constraint from it on (a lazy constraint; a strictly extension).
    pub trigger: Option<Triggers>,
    #[serde(alias = "guided_choice")]
    pub choice: Option<Vec<String>>,
    pub guided_json: Option<Value>,
    pub logit_bias: Option<HashMap<String, f32>>,
    /// How a JSON Schema constraint compiles (whitespace, exact language).
    #[serde(rename = "x-strictly", alias = "x_strictly")]
    pub x_strictly: Option<StrictlyExtension>,
}

/// A message's content: a string or a list of parts (text parts only).
#[derive(Debug, Clone)]
pub enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Content, D::Error> {
        shapes(
            d,
            "a message's content must be a string or an array of content parts ({\"type\": \"text\", \"text\": ...})",
            |v| match v {
                Value::String(s) => Some(Content::Text(s)),
                v => serde_json::from_value(v).ok().map(Content::Parts),
            },
        )
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct MessageIn {
    pub role: String,
    #[serde(default)]
    pub content: Option<Content>,
    #[serde(default)]
    pub tool_calls: Option<Vec<ToolCallIn>>,
    #[serde(default)]
    pub tool_call_id: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ToolCallIn {
    #[serde(default)]
    pub id: Option<String>,
    pub function: FunctionCallIn,
}

#[derive(Debug, Clone, Deserialize)]
pub struct FunctionCallIn {
    pub name: String,
    #[serde(default)]
    pub arguments: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ToolIn {
    #[serde(rename = "type")]
    pub kind: String,
    /// Required for (and only read from) a `function` tool: checked in `tool_spec`, so a
    /// tool of another type is refused for its type.
    #[serde(default)]
    pub function: Option<FunctionDef>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct FunctionDef {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub parameters: Option<Value>,
    #[serde(default)]
    pub strict: Option<bool>,
}

/// `tool_choice` as the request spells it: `"none"`, `"auto"`, `"required"` or
/// `{"type": "function", "function": {"name"}}`; [`ToolChoiceParam::choice`] reads it as the
/// crate's one [`ToolChoice`].
#[derive(Debug, Clone)]
pub enum ToolChoiceParam {
    Mode(String),
    Named {
        function: NamedFunction,
    },
    /// `{"type": "allowed_tools", "allowed_tools": {"mode": "auto" | "required", "tools":
    /// [{"type": "function", "function": {"name"}}, ...]}}`: every tool is described to the
    /// model, only these may be called.
    Allowed {
        mode: String,
        names: Vec<String>,
    },
}

impl<'de> Deserialize<'de> for ToolChoiceParam {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ToolChoiceParam, D::Error> {
        let expected = "tool_choice must be \"none\", \"auto\", \"required\", \
                        {\"type\": \"function\", \"function\": {\"name\": ...}} or \
                        {\"type\": \"allowed_tools\", \"allowed_tools\": {\"mode\": ..., \"tools\": [...]}}";
        shapes(d, expected, |v| match v {
            Value::String(s) => Some(ToolChoiceParam::Mode(s)),
            Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("allowed_tools") => {
                let allowed = o.get("allowed_tools")?;
                let mode = allowed.get("mode")?.as_str()?.to_string();
                let names = allowed
                    .get("tools")?
                    .as_array()?
                    .iter()
                    .map(|t| t.get("function")?.get("name")?.as_str().map(str::to_string))
                    .collect::<Option<Vec<String>>>()?;
                Some(ToolChoiceParam::Allowed { mode, names })
            }
            Value::Object(mut o) => {
                let function = serde_json::from_value(o.remove("function")?).ok()?;
                Some(ToolChoiceParam::Named { function })
            }
            _ => None,
        })
    }
}

impl ToolChoiceParam {
    /// The choice this names; a 400 for a mode OpenAI does not have.
    pub fn choice(&self) -> Result<ToolChoice, ApiError> {
        match self {
            ToolChoiceParam::Mode(m) => match m.as_str() {
                "none" => Ok(ToolChoice::None),
                "auto" => Ok(ToolChoice::Auto),
                "required" => Ok(ToolChoice::Required),
                other => Err(ApiError::bad_request(format!(
                    "tool_choice must be \"none\", \"auto\", \"required\" or a named function, got {other:?}"
                ))
                .param("tool_choice")),
            },
            ToolChoiceParam::Named { function } => Ok(ToolChoice::Named(function.name.clone())),
            ToolChoiceParam::Allowed { mode, names } => {
                if names.is_empty() {
                    return Err(ApiError::bad_request("tool_choice.allowed_tools.tools must not be empty")
                        .param("tool_choice.allowed_tools.tools"));
                }
                match mode.as_str() {
                    "auto" => Ok(ToolChoice::Auto),
                    "required" => Ok(ToolChoice::Required),
                    other => Err(ApiError::bad_request(format!(
                        "tool_choice.allowed_tools.mode must be \"auto\" or \"required\", got {other:?}"
                    ))
                    .param("tool_choice.allowed_tools.mode")),
                }
            }
        }
    }

    /// The tools `allowed_tools` lets the model call (`None`: every tool offered).
    pub fn allowed(&self) -> Option<&[String]> {
        match self {
            ToolChoiceParam::Allowed { names, .. } => Some(names),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct NamedFunction {
    pub name: String,
}

/// `POST /v1/chat/completions`.
#[derive(Debug, Clone, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<MessageIn>,
    #[serde(flatten)]
    pub common: Common,
    pub max_completion_tokens: Option<i64>,
    pub logprobs: Option<bool>,
    pub top_logprobs: Option<i64>,
    pub tools: Option<Vec<ToolIn>>,
    pub tool_choice: Option<ToolChoiceParam>,
    pub parallel_tool_calls: Option<bool>,
    /// Extension: `true` encodes special-token spellings in the messages (`<|im_end|>`) as the
    /// control tokens they spell. For trusted callers only; by default they are text.
    pub content_control_tokens: Option<bool>,
    pub functions: Option<Value>,
    pub function_call: Option<Value>,
    /// Extension (as vLLM and SGLang take it): more variables for the chat template, e.g.
    /// `{"enable_thinking": false}` for Qwen3, `{"thinking": true}` for DeepSeek V3.1.
    pub chat_template_kwargs: Option<Value>,
    /// OpenAI's; given to the chat template as `reasoning_effort` (gpt-oss's reads it).
    pub reasoning_effort: Option<String>,
    /// Extension: the most tokens a reasoning part (`<think>…`) may take; then its end marker
    /// is appended and the answer follows. Without one, only `max_tokens` bounds it.
    pub max_reasoning_tokens: Option<i64>,
}

/// `prompt` of `/v1/completions`: text, texts, token ids, or lists of token ids.
#[derive(Debug, Clone)]
pub enum PromptIn {
    Text(String),
    Texts(Vec<String>),
    Ids(Vec<u32>),
    IdLists(Vec<Vec<u32>>),
}

impl<'de> Deserialize<'de> for PromptIn {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<PromptIn, D::Error> {
        let expected = "prompt must be a string, an array of strings, an array of token ids or an array of \
                        arrays of token ids";
        shapes(d, expected, |v| match v {
            Value::String(s) => Some(PromptIn::Text(s)),
            v => serde_json::from_value(v.clone())
                .map(PromptIn::Texts)
                .or_else(|_| serde_json::from_value(v.clone()).map(PromptIn::Ids))
                .or_else(|_| serde_json::from_value(v).map(PromptIn::IdLists))
                .ok(),
        })
    }
}

/// `POST /v1/completions`.
#[derive(Debug, Clone, Deserialize)]
pub struct CompletionRequest {
    pub prompt: PromptIn,
    #[serde(flatten)]
    pub common: Common,
    /// The legacy API's: how many top alternatives per token (0..=20 here).
    pub logprobs: Option<i64>,
    pub echo: Option<bool>,
    pub best_of: Option<i64>,
    pub suffix: Option<String>,
}

/// What every request turns into before it is run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub n: usize,
    pub stream: bool,
    pub include_usage: bool,
    /// `max_tokens` as asked (None: up to the context's end).
    pub max_tokens: Option<usize>,
    pub opts: GenerateOptions,
    pub logprobs: bool,
}

fn nonneg(name: &str, v: i64) -> Result<usize, ApiError> {
    usize::try_from(v).map_err(|_| ApiError::bad_request(format!("{name} must be >= 0, got {v}")).param(name))
}

impl Common {
    /// The sampling fields the request sets (`top_k` `-1` or `0`: off).
    pub fn sampling(&self) -> SamplingOverrides {
        SamplingOverrides {
            temperature: self.temperature,
            top_k: self.top_k.map(|k| usize::try_from(k).unwrap_or(0)),
            top_p: self.top_p,
            min_p: self.min_p,
            top_n_sigma: self.top_n_sigma,
            repetition_penalty: self.repetition_penalty,
            frequency_penalty: self.frequency_penalty,
            presence_penalty: self.presence_penalty,
            dry_multiplier: self.dry_multiplier,
            dry_base: self.dry_base,
            dry_allowed_length: self.dry_allowed_length,
            dry_penalty_last_n: self.dry_penalty_last_n,
            dry_sequence_breakers: self.dry_sequence_breakers.clone(),
            seed: self.seed.map(Seed::value),
        }
    }

    /// The sampling knobs over the model's defaults, checked (OpenAI's ranges where OpenAI
    /// has the knob: temperature in [0, 2]).
    pub fn plan(
        &self,
        defaults: &GenerationDefaults,
        max_tokens: Option<i64>,
        (logprobs, top_logprobs): (bool, usize),
    ) -> Result<Plan, ApiError> {
        if let Some(b) = &self.logit_bias {
            if !b.is_empty() {
                return Err(ApiError::bad_request("logit_bias is not supported").param("logit_bias"));
            }
        }
        if let Some(t) = self.temperature {
            if !(0.0..=2.0).contains(&t) {
                return Err(
                    ApiError::bad_request(format!("temperature must be in [0, 2], got {t}")).param("temperature")
                );
            }
        }
        let mut s = self.sampling().over(defaults.sampling());
        s.top_logprobs = top_logprobs;
        if let Err(e) = s.validate() {
            let msg = e.to_string();
            let param = msg.split_whitespace().next().unwrap_or("").to_string();
            return Err(ApiError::bad_request(msg).param(param));
        }
        let n = match self.n {
            None => 1,
            Some(n) if n >= 1 && n as usize <= MAX_N => n as usize,
            Some(n) => return Err(ApiError::bad_request(format!("n must be in [1, {MAX_N}], got {n}")).param("n")),
        };
        let max_tokens = match max_tokens.or(self.max_tokens) {
            None => None,
            Some(m) if m < 1 => {
                return Err(ApiError::bad_request(format!("max_tokens must be at least 1, got {m}")).param("max_tokens"))
            }
            Some(m) => Some(nonneg("max_tokens", m)?),
        };
        let stop = match &self.stop {
            None => Vec::new(),
            Some(Stop::One(s)) => vec![s.clone()],
            Some(Stop::Many(v)) => v.clone(),
        };
        if stop.len() > MAX_STOP {
            return Err(
                ApiError::bad_request(format!("at most {MAX_STOP} stop strings, got {}", stop.len())).param("stop")
            );
        }
        if stop.iter().any(String::is_empty) {
            return Err(ApiError::bad_request("stop strings must not be empty").param("stop"));
        }
        let stream = self.stream.unwrap_or(false);
        let include_usage = self.stream_options.as_ref().and_then(|o| o.include_usage).unwrap_or(false);
        if self.stream_options.is_some() && !stream {
            return Err(
                ApiError::bad_request("stream_options is only allowed with stream: true").param("stream_options")
            );
        }
        let speculate = match self.speculate.as_deref() {
            None | Some("off") => None,
            Some("prompt-lookup") => Some(crate::decode::PromptLookup::default()),
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "speculate must be \"prompt-lookup\" or \"off\", got {other:?}"
                ))
                .param("speculate"))
            }
        };
        let opts = GenerateOptions {
            max_tokens: max_tokens.unwrap_or(0),
            sampling: s,
            stop,
            stop_token_ids: defaults.eos.clone(),
            speculate,
            ..GenerateOptions::default()
        };
        Ok(Plan { n, stream, include_usage, max_tokens, opts, logprobs })
    }

    /// The user's own constraint, if any: at most one of `response_format` (json_object or
    /// json_schema), `regex`, `grammar`, `choice`, `guided_json`; started by `trigger` when one
    /// is given.
    pub fn user_constraint(&self) -> Result<Option<(UserConstraint, &'static str)>, ApiError> {
        let mut found: Vec<(UserConstraint, &'static str)> = Vec::new();
        let json = self.x_strictly.as_ref().map(StrictlyExtension::options).unwrap_or_default();
        match &self.response_format {
            None | Some(ResponseFormat::Text) => {}
            Some(ResponseFormat::JsonObject) => {
                // Any object: keys the model chooses, in the sensible language too.
                let schema = serde_json::json!({"type": "object", "additionalProperties": true});
                found.push((UserConstraint::JsonSchema(schema, json.clone()), "response_format"))
            }
            Some(ResponseFormat::JsonSchema { json_schema }) => {
                if let Some(name) = &json_schema.name {
                    check_name(name, "response_format.json_schema.name")?;
                }
                let schema = json_schema.schema.clone().unwrap_or(Value::Bool(true));
                if json_schema.strict == Some(true) {
                    if let Some((at, why)) = json_schema::strict_violation(&schema) {
                        let at = if at.is_empty() { "the root".to_string() } else { at };
                        return Err(ApiError::bad_request(format!("invalid schema for strict mode at {at}: {why}"))
                            .param("response_format.json_schema.schema"));
                    }
                }
                found.push((UserConstraint::JsonSchema(schema, json.clone()), "response_format.json_schema.schema"));
            }
        }
        if let Some(r) = &self.regex {
            found.push((UserConstraint::Regex(r.clone()), "regex"));
        }
        if let Some(g) = &self.grammar {
            let lark = match self.grammar_syntax.as_deref() {
                None => crate::grammar::lark::looks_like_lark(g),
                Some("lark") => true,
                Some("gbnf" | "ebnf") => false,
                Some(other) => {
                    return Err(ApiError::bad_request(format!(
                        "grammar_syntax must be \"gbnf\" or \"lark\", not {other:?}"
                    ))
                    .param("grammar_syntax"))
                }
            };
            let u = if lark { UserConstraint::Lark(g.clone()) } else { UserConstraint::Grammar(g.clone()) };
            found.push((u, "grammar"));
        } else if self.grammar_syntax.is_some() {
            return Err(ApiError::bad_request("grammar_syntax needs a grammar").param("grammar_syntax"));
        }
        if let Some(c) = &self.choice {
            if c.is_empty() {
                return Err(ApiError::bad_request("choice needs at least one option").param("choice"));
            }
            found.push((UserConstraint::Choice(c.clone()), "choice"));
        }
        if let Some(s) = &self.guided_json {
            let schema = match s {
                Value::String(text) => serde_json::from_str(text).map_err(|e| {
                    ApiError::bad_request(format!("guided_json is not valid JSON: {e}")).param("guided_json")
                })?,
                v => v.clone(),
            };
            found.push((UserConstraint::JsonSchema(schema, json.clone()), "guided_json"));
        }
        if found.len() > 1 {
            let names: Vec<&str> = found.iter().map(|f| f.1.split('.').next().unwrap_or(f.1)).collect();
            return Err(ApiError::bad_request(format!(
                "at most one constraint per request; got {}",
                names.join(" and ")
            )));
        }
        match (found.pop(), &self.trigger) {
            (_, Some(t))
                if t.0
                    .iter()
                    .any(|t| matches!(t, Trigger::Text(s) | Trigger::Token(TokenRef::Name(s)) if s.is_empty())) =>
            {
                Err(ApiError::bad_request("trigger must not be empty").param("trigger"))
            }
            (None, Some(_)) => Err(ApiError::bad_request(
                "trigger needs a constraint to start: response_format, regex, grammar, choice or guided_json",
            )
            .param("trigger")),
            (Some((u, param)), Some(t)) => {
                Ok(Some((UserConstraint::Triggered { triggers: t.0.clone(), then: Box::new(u) }, param)))
            }
            (found, None) => Ok(found),
        }
    }
}

/// OpenAI's rule for function and schema names: `^[a-zA-Z0-9_-]{1,64}$`.
pub fn check_name(name: &str, param: &str) -> Result<(), ApiError> {
    if crate::tools::is_valid_name(name) {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "invalid name {name:?}: names must be 1 to 64 characters of a-z, A-Z, 0-9, _ and -"
        ))
        .param(param))
    }
}

impl ChatRequest {
    /// The tools part of the constraint: `None` when no tool may be called.
    pub fn tool_spec(&self) -> Result<Option<ToolSpec>, ApiError> {
        if self.functions.as_ref().is_some_and(|v| !v.is_null())
            || self.function_call.as_ref().is_some_and(|v| !v.is_null())
        {
            return Err(ApiError::bad_request(
                "`functions` and `function_call` are deprecated and not supported; use `tools` and `tool_choice`",
            )
            .param("functions"));
        }
        let tools = self.tools.as_deref().unwrap_or(&[]);
        let mut functions = Vec::with_capacity(tools.len());
        for (i, t) in tools.iter().enumerate() {
            if t.kind != "function" {
                return Err(ApiError::bad_request(format!("tools[{i}].type must be \"function\", got {:?}", t.kind))
                    .param(format!("tools[{i}].type")));
            }
            let Some(f) = &t.function else {
                return Err(ApiError::bad_request(format!("tools[{i}].function is required"))
                    .param(format!("tools[{i}].function")));
            };
            functions.push(f);
        }
        let choice = match &self.tool_choice {
            // OpenAI's default: `auto` when there are tools, else `none`.
            None if tools.is_empty() => ToolChoice::None,
            None => ToolChoice::Auto,
            Some(param) => param.choice()?,
        };
        let Some(mode) = choice.mode() else { return Ok(None) };
        if tools.is_empty() {
            return Err(ApiError::bad_request("tool_choice needs tools").param("tool_choice"));
        }
        let mut out = Vec::new();
        for (i, f) in functions.into_iter().enumerate() {
            check_name(&f.name, &format!("tools[{i}].function.name"))?;
            if out.iter().any(|o: &Tool| o.name == f.name) {
                return Err(ApiError::bad_request(format!("two tools are named {:?}", f.name))
                    .param(format!("tools[{i}].function.name")));
            }
            // No parameters: a function with an empty parameter list (OpenAI's rule).
            let parameters = f.parameters.clone().unwrap_or_else(
                || serde_json::json!({"type": "object", "properties": {}, "additionalProperties": false}),
            );
            out.push(Tool { name: f.name.clone(), parameters });
        }
        if let ToolMode::Named(name) = &mode {
            if !out.iter().any(|t| &t.name == name) {
                return Err(ApiError::bad_request(format!("tool_choice names {name:?}, which is not in tools"))
                    .param("tool_choice"));
            }
        }
        // `allowed_tools`: the prompt still lists every tool (see `chat`); the calls' grammar
        // takes only the allowed ones.
        if let Some(allowed) = self.tool_choice.as_ref().and_then(ToolChoiceParam::allowed) {
            for (i, name) in allowed.iter().enumerate() {
                if !out.iter().any(|t| &t.name == name) {
                    let p = format!("tool_choice.allowed_tools.tools[{i}]");
                    return Err(ApiError::bad_request(format!("{p} names {name:?}, which is not in tools")).param(p));
                }
            }
            out.retain(|t| allowed.contains(&t.name));
        }
        let max_calls = if self.parallel_tool_calls == Some(false) { 1 } else { MAX_PARALLEL_TOOL_CALLS };
        Ok(Some(ToolSpec { tools: out, mode, max_calls, format: ToolFormat::default() }))
    }

    /// The whole constraint of a chat request.
    pub fn spec(&self) -> Result<Option<Spec>, ApiError> {
        let user = self.common.user_constraint()?;
        let tools = self.tool_spec()?;
        Ok(match (user, tools) {
            (None, None) => None,
            (user, tools) => {
                let param = user.as_ref().map(|u| u.1);
                Some(Spec { user: user.map(|u| u.0), user_param: param.map(str::to_string), tools, reasoning: None })
            }
        })
    }

    /// The chat template's extra variables: `chat_template_kwargs`, and `reasoning_effort`.
    /// They may not name the variables the chat itself sets.
    pub fn template_vars(&self) -> Result<TemplateVars, ApiError> {
        const RESERVED: [&str; 5] = ["messages", "tools", "add_generation_prompt", "bos_token", "eos_token"];
        let mut vars = match &self.chat_template_kwargs {
            None | Some(Value::Null) => TemplateVars::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => {
                return Err(
                    ApiError::bad_request("chat_template_kwargs must be an object").param("chat_template_kwargs")
                )
            }
        };
        if let Some(k) = RESERVED.iter().find(|k| vars.contains_key(**k)) {
            let p = format!("chat_template_kwargs.{k}");
            return Err(ApiError::bad_request(format!("{p} cannot be set: the request's chat sets it")).param(p));
        }
        if let Some(e) = &self.reasoning_effort {
            vars.insert("reasoning_effort".into(), Value::String(e.clone()));
        }
        Ok(vars)
    }

    /// `max_reasoning_tokens`, checked.
    pub fn max_reasoning_tokens(&self) -> Result<Option<usize>, ApiError> {
        self.max_reasoning_tokens.map(|n| nonneg("max_reasoning_tokens", n)).transpose()
    }

    /// `top_logprobs` when `logprobs` is on; errors for the combinations OpenAI refuses.
    pub fn top_logprobs(&self) -> Result<(bool, usize), ApiError> {
        let on = self.logprobs.unwrap_or(false);
        let k = match self.top_logprobs {
            None => 0,
            Some(k) => nonneg("top_logprobs", k)?,
        };
        if k > MAX_TOP_LOGPROBS {
            return Err(ApiError::bad_request(format!("top_logprobs must be in [0, {MAX_TOP_LOGPROBS}], got {k}"))
                .param("top_logprobs"));
        }
        if k > 0 && !on {
            return Err(ApiError::bad_request("top_logprobs needs logprobs: true").param("top_logprobs"));
        }
        Ok((on, k))
    }
}

impl CompletionRequest {
    /// The prompts: texts (encoded with the model's BOS rule) or token ids, checked against
    /// the vocabulary width.
    pub fn prompts(
        &self,
        encode: impl Fn(&str) -> Result<Vec<TokenId>, ApiError>,
        width: usize,
    ) -> Result<Vec<(String, Vec<TokenId>)>, ApiError> {
        let ids = |v: &[u32]| -> Result<Vec<TokenId>, ApiError> {
            if let Some(t) = v.iter().find(|&&t| t as usize >= width) {
                return Err(
                    ApiError::bad_request(format!("token id {t} is outside the vocabulary ({width})")).param("prompt")
                );
            }
            Ok(v.iter().map(|&t| TokenId(t)).collect())
        };
        let out: Vec<(String, Vec<TokenId>)> = match &self.prompt {
            PromptIn::Text(t) => vec![(t.clone(), encode(t)?)],
            PromptIn::Texts(ts) => ts.iter().map(|t| Ok((t.clone(), encode(t)?))).collect::<Result<_, ApiError>>()?,
            PromptIn::Ids(v) => vec![(String::new(), ids(v)?)],
            PromptIn::IdLists(vs) => {
                vs.iter().map(|v| Ok((String::new(), ids(v)?))).collect::<Result<_, ApiError>>()?
            }
        };
        if out.is_empty() {
            return Err(ApiError::bad_request("prompt must not be an empty list").param("prompt"));
        }
        if out.iter().any(|p| p.1.is_empty()) {
            return Err(ApiError::bad_request(
                "the prompt is empty (and the model adds no BOS): give it at least one token",
            )
            .param("prompt"));
        }
        Ok(out)
    }

    pub fn spec(&self) -> Result<Option<Spec>, ApiError> {
        Ok(self.common.user_constraint()?.map(|(u, p)| Spec {
            user: Some(u),
            user_param: Some(p.to_string()),
            tools: None,
            reasoning: None,
        }))
    }

    pub fn top_logprobs(&self) -> Result<(bool, usize), ApiError> {
        match self.logprobs {
            None => Ok((false, 0)),
            Some(k) => {
                let k = nonneg("logprobs", k)?;
                if k > MAX_TOP_LOGPROBS {
                    return Err(ApiError::bad_request(format!("logprobs must be in [0, {MAX_TOP_LOGPROBS}], got {k}"))
                        .param("logprobs"));
                }
                Ok((true, k))
            }
        }
    }
}
