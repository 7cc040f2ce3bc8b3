//! The tools side of [`Engine::choose`](super::Engine::choose): [`Tools`] (the functions
//! offered, each with its arguments' grammar and a check of its parameter type), the
//! [`ToolChoice`] it is offered under, and what comes back: a [`Reply`] of text and
//! [`ToolCall`]s.
//!
//! Invariant: every [`ToolCall`] in a [`Reply`] names a tool of the set, and its arguments
//! deserialize as that tool's parameter type (checked in [`reply`] before the reply is
//! returned), so [`ToolCall::args`] with that type cannot fail.

use std::any::TypeId;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::Ran;
use crate::decode::{schema_for, Output};
use crate::error::{Error, Result};
use crate::grammar::json_schema::{self, JsonSchemaOptions};
use crate::grammar::Grammar;
use crate::model::{ChatMessage, ChatTool, ChatToolCall, TemplateVars};
#[cfg(doc)]
use crate::tools::MAX_PARALLEL_TOOL_CALLS;
use crate::tools::{is_valid_name, ToolChat, ToolChoice};

/// The functions a model may call. Each has a name (1 to 64 of `a-z A-Z 0-9 _ -`, unique),
/// a description, and parameters: a schemars type, or a JSON Schema of an object.
///
/// ```
/// use strictly::Tools;
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Weather { city: String }
/// let tools = Tools::new().function::<Weather>("get_weather", "The weather in a city")?;
/// assert_eq!(tools.names(), vec!["get_weather"]);
/// assert!(Tools::new().function::<Weather>("get weather", "").is_err()); // a space
/// # Ok::<(), strictly::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Tools {
    pub(super) list: Vec<ToolEntry>,
    pub(super) parallel: bool,
    /// The canonical JSON of the tools' parameters, for the compile cache.
    pub(super) key: String,
}

#[derive(Clone)]
pub(super) struct ToolEntry {
    pub(super) tool: ChatTool,
    /// The arguments' grammar (the parameters schema, compiled once).
    pub(super) grammar: Grammar,
    /// The parameter type, if the tool was added with one.
    type_id: Option<TypeId>,
    type_name: &'static str,
    /// Whether a JSON value deserializes as the parameter type.
    check: fn(&Value) -> std::result::Result<(), String>,
}

impl std::fmt::Debug for ToolEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}({})", self.tool.function.name, self.type_name)
    }
}

fn check_as<A: DeserializeOwned>(v: &Value) -> std::result::Result<(), String> {
    A::deserialize(v).map(|_| ()).map_err(|e| e.to_string())
}

impl Default for Tools {
    fn default() -> Tools {
        Tools::new()
    }
}

impl Tools {
    /// No tools; parallel calls on (up to [`MAX_PARALLEL_TOOL_CALLS`] per reply).
    pub fn new() -> Tools {
        Tools { list: Vec::new(), parallel: true, key: String::new() }
    }

    /// Adds a function whose arguments are an `A` (a struct deriving `JsonSchema` and
    /// `Deserialize`). Its doc comments become the schema's descriptions.
    pub fn function<A: JsonSchema + DeserializeOwned + 'static>(self, name: &str, description: &str) -> Result<Tools> {
        let mut schema = schema_for::<A>();
        if let Some(o) = schema.as_object_mut() {
            o.remove("$schema");
        }
        self.add(name, description, schema, Some(TypeId::of::<A>()), std::any::type_name::<A>(), check_as::<A>)
    }

    /// Adds a function whose arguments are given by a JSON Schema (read them with
    /// [`ToolCall::args`] as any type that accepts every value of the schema, or use
    /// [`ToolCall::arguments`]).
    pub fn function_schema(self, name: &str, description: &str, parameters: Value) -> Result<Tools> {
        self.add(name, description, parameters, None, "serde_json::Value", check_as::<Value>)
    }

    /// At most one call per reply (`false`), or up to [`MAX_PARALLEL_TOOL_CALLS`] (the default).
    pub fn parallel(mut self, parallel: bool) -> Tools {
        self.parallel = parallel;
        self
    }

    pub fn names(&self) -> Vec<&str> {
        self.list.iter().map(|t| t.tool.function.name.as_str()).collect()
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    fn add(
        mut self,
        name: &str,
        description: &str,
        parameters: Value,
        type_id: Option<TypeId>,
        type_name: &'static str,
        check: fn(&Value) -> std::result::Result<(), String>,
    ) -> Result<Tools> {
        if !is_valid_name(name) {
            return Err(Error::param(format!(
                "invalid tool name {name:?}: names must be 1 to 64 characters of a-z, A-Z, 0-9, _ and -"
            )));
        }
        if self.list.iter().any(|t| t.tool.function.name == name) {
            return Err(Error::param(format!("two tools are named {name:?}")));
        }
        if parameters.get("type").and_then(Value::as_str) != Some("object") {
            return Err(Error::param(format!(
                "tool {name:?}: the parameters must be a JSON Schema with \"type\": \"object\" (a struct), got {parameters}"
            )));
        }
        let grammar = json_schema::compile(&parameters, &JsonSchemaOptions::default())
            .map_err(|e| Error::param(format!("tool {name:?}: invalid parameters schema: {e}")))?
            .grammar;
        self.key.push_str(&format!("{name}={parameters};"));
        let description = (!description.is_empty()).then(|| description.to_string());
        let tool = ChatTool::function(name, description, parameters);
        self.list.push(ToolEntry { tool, grammar, type_id, type_name, check });
        Ok(self)
    }

    fn get(&self, name: &str) -> Option<&ToolEntry> {
        self.list.iter().find(|t| t.tool.function.name == name)
    }
}

/// The chat [`Engine::choose`](super::Engine::choose) renders: the messages, and the tools
/// unless `choice` is [`ToolChoice::None`]; an error for no messages, a named tool not in the
/// set, or a choice that needs tools with none.
pub(super) fn tool_chat(messages: &[ChatMessage], tools: &Tools, choice: &ToolChoice) -> Result<ToolChat> {
    if messages.is_empty() {
        return Err(Error::param("choose needs at least one message"));
    }
    if let ToolChoice::Named(n) = choice {
        if tools.get(n).is_none() {
            return Err(Error::param(format!(
                "ToolChoice::Named({n:?}) names no tool in the set (tools: {:?})",
                tools.names()
            )));
        }
    }
    let mode = choice.mode();
    if mode.is_some() && tools.is_empty() {
        return Err(Error::param(format!("ToolChoice::{choice:?} needs at least one tool")));
    }
    let offered = if mode.is_some() { tools.list.iter().map(|t| t.tool.clone()).collect() } else { Vec::new() };
    Ok(ToolChat { messages: messages.to_vec(), tools: offered, mode, vars: TemplateVars::new() })
}

/// One call the model made. Its arguments validate against the tool's schema and
/// deserialize as the tool's parameter type.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// A fresh id (`call_` and 24 letters and digits), for the tool's answer.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as JSON.
    pub arguments: Value,
    type_id: Option<TypeId>,
    type_name: &'static str,
}

impl ToolCall {
    /// The arguments as an `A`. For a tool added with [`Tools::function::<A>`](Tools::function)
    /// this cannot fail; asking for another type is an error naming both.
    pub fn args<A: DeserializeOwned + 'static>(&self) -> Result<A> {
        if let Some(t) = self.type_id {
            if t != TypeId::of::<A>() && TypeId::of::<A>() != TypeId::of::<Value>() {
                return Err(Error::param(format!(
                    "tool {:?} takes {}, not {}",
                    self.name,
                    self.type_name,
                    std::any::type_name::<A>()
                )));
            }
        }
        A::deserialize(&self.arguments)
            .map_err(|e| Error::output(format!("tool {:?}: arguments do not deserialize: {e}", self.name)))
    }

    /// The `tool` message that answers this call, for the next turn.
    pub fn result(&self, content: impl Into<String>) -> ChatMessage {
        ChatMessage::tool(self.id.clone(), content)
    }
}

/// What [`Engine::choose`](super::Engine::choose) got: text, calls, or both (under [`ToolChoice::Auto`], text may
/// come before the calls).
#[derive(Debug, Clone)]
pub struct Reply {
    /// A reasoning model's reasoning before its answer (`<think>`…, without the markers;
    /// `None` if the reply has none). Not part of [`message`](Self::message).
    pub reasoning: Option<String>,
    /// The text outside the calls (empty when the reply is only calls).
    pub text: String,
    pub calls: Vec<ToolCall>,
    /// The generation's output (tokens, logprobs, finish reason).
    pub output: Output,
}

impl Reply {
    /// The assistant turn this reply makes, for the chat's next turn.
    pub fn message(&self) -> ChatMessage {
        let mut m = ChatMessage::assistant(self.text.clone());
        for c in &self.calls {
            m.tool_calls.push(ChatToolCall::function(Some(c.id.clone()), c.name.clone(), c.arguments.clone()));
        }
        m
    }
}

/// The reply in `output`, whose calls `parser` read; every call checked against its tool.
pub(super) fn reply(ran: Ran, tools: &Tools) -> Result<Reply> {
    let Ran { output, parser, reasoning } = ran;
    let mut calls = Vec::new();
    for raw in parser.calls() {
        let tool = tools
            .get(&raw.name)
            .ok_or_else(|| Error::output(format!("the reply calls {:?}, which is not a tool", raw.name)))?;
        let arguments: Value = serde_json::from_str(&raw.arguments)
            .map_err(|e| Error::output(format!("tool {:?}: the arguments are not JSON: {e}", raw.name)))?;
        (tool.check)(&arguments).map_err(|e| {
            Error::output(format!("tool {:?}: the arguments do not deserialize as {}: {e}", raw.name, tool.type_name))
        })?;
        calls.push(ToolCall {
            id: raw.id.clone(),
            name: raw.name.clone(),
            arguments,
            type_id: tool.type_id,
            type_name: tool.type_name,
        });
    }
    Ok(Reply { reasoning, text: parser.content().to_string(), calls, output })
}
