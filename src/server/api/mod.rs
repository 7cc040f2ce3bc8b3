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
//! The types are here; the checks that read them into a [`Plan`] are in [`plan`].
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

impl crate::server::error::RequestBody for ChatRequest {
    type Flattened = Common;
}

impl crate::server::error::RequestBody for CompletionRequest {
    type Flattened = Common;
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

mod plan;

pub use plan::check_name;
