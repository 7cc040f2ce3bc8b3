//! [`Engine`]: the library's front door. A model and its vocabulary, loaded once; typed
//! generation, tool choice and streaming on top of the constrained decoding loop.
//!
//! ```text
//!  Engine::embedded() / Engine::load(dir)          (a LoadedModel: network, Vocab, PromptFormat)
//!     │
//!     ├─ generate::<T>(prompt, opts) ─▶ T's schema (schemars) ─▶ constrained JSON ─▶ T
//!     ├─ choose(messages, tools, choice, opts) ─▶ chat template + tool-call grammar
//!     │                                          ─▶ Reply { text, calls: [ToolCall] }
//!     └─ stream::<T>(..) / choose_stream(..) ─▶ Stream: StreamEvent::{Text, CallStart,
//!                                               CallArgs, ..., Done(value)}; drop to cancel
//! ```
//!
//! Every method takes `&self`: each generation runs on a fresh sequence over the shared
//! weights ([`CandleModel::restart`]), so one engine serves many threads.
//!
//! # Tool calls
//!
//! [`Tools`] is a set of functions, each with a name, a description and a parameter type that
//! derives [`schemars::JsonSchema`] and [`serde::Deserialize`]. [`Engine::choose`] offers them
//! to the model under a [`ToolChoice`] and returns a [`Reply`]: text, tool calls, or (under
//! `Auto`) text followed by calls. The calls are written in the format the model's chat
//! template teaches ([`ToolFormat`]: Hermes/Qwen `<tool_call>{"name": ..., "arguments":
//! ...}</tool_call>`, Llama 3.x's bare `{"name": ..., "parameters": ...}`, Mistral's
//! `[TOOL_CALLS] [...]`), enforced by a grammar whose arguments are each tool's schema, and
//! the tools reach the model through that template. A template that teaches no known format
//! (or renders no tools) gets the tools described in the system turn in the Hermes format, the
//! documented default (see [`crate::tools::format`] and [`crate::tools::ToolChat::render`]).
//! Every returned
//! [`ToolCall`]'s arguments have been checked to deserialize as the tool's parameter type, so
//! [`ToolCall::args`] with that type cannot fail.
//!
//! # Streaming and cancellation
//!
//! [`Engine::stream`] and [`Engine::choose_stream`] run the same generation as their blocking
//! twins on a worker thread and hand out [`StreamEvent`]s as they happen; with the same seed
//! the events add up to exactly the blocking result, which comes last as
//! [`StreamEvent::Done`]. Dropping the [`Stream`] (or [`Stream::cancel`]) stops the
//! generation at its next token and waits for the worker to finish.
//!
//! # Invariants
//!
//! - A method that returns `Ok` returned a value that parsed and deserialized; a failure of
//!   that (which the constraint rules out) is an [`Error`], never a panic.
//! - The [`Stream`] worker sends at most [`STREAM_AHEAD`] events ahead of the consumer.

use std::any::TypeId;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::automaton::{Compiled, Constraint, Matcher};
use crate::decode::{deserialize, schema_for, Event, GenerateOptions, Generation, Output, Typed};
use crate::error::{Error, Result};
use crate::grammar::json_schema::{self, JsonSchemaOptions};
use crate::grammar::Grammar;
use crate::model::{CandleModel, ChatMessage, ChatTool, LoadOptions, LoadedModel};
use crate::tools::{calls_grammar, OutputParser, Piece, ToolChat, ToolFormat, ToolMode, MAX_PARALLEL_TOOL_CALLS};
use crate::vocab::{TokenId, Vocab};

/// How many events a [`Stream`]'s worker may run ahead of the consumer.
pub const STREAM_AHEAD: usize = 8;
/// Most compiled constraints an [`Engine`] keeps (it forgets them all when full).
const CACHE_CAPACITY: usize = 64;

/// A loaded model, ready to generate. See the [module docs](self).
pub struct Engine {
    loaded: LoadedModel,
    /// Compiled constraints by a key naming what they constrain (a schema, a tool set).
    cache: Mutex<HashMap<String, Arc<Compiled>>>,
}

impl Engine {
    /// The embedded stories260K model (no files, no network; see [`crate::model`]).
    pub fn embedded() -> Result<Engine> {
        Ok(Engine::from_loaded(LoadedModel::embedded(&LoadOptions::default())?))
    }

    /// A Hugging Face model directory (config.json, safetensors, tokenizer.json, ...) on the CPU.
    pub fn load(dir: impl AsRef<Path>) -> Result<Engine> {
        Ok(Engine::from_loaded(LoadedModel::from_dir(dir, &LoadOptions::default())?))
    }

    /// A model loaded with your own [`LoadOptions`] (device, precision).
    pub fn from_loaded(loaded: LoadedModel) -> Engine {
        Engine { loaded, cache: Mutex::new(HashMap::new()) }
    }

    /// The model, its vocabulary, prompt format and defaults.
    pub fn loaded(&self) -> &LoadedModel {
        &self.loaded
    }

    /// The byte-exact vocabulary (for building your own [`Compiled`] constraints).
    pub fn vocab(&self) -> &Arc<Vocab> {
        &self.loaded.vocab
    }

    /// A prompt's tokens: as a user turn through the model's chat template when it has one,
    /// else the text itself after the BOS (a base model continues it).
    pub fn prompt_tokens(&self, prompt: &str) -> Result<Vec<TokenId>> {
        let p = &self.loaded.prompt;
        if p.has_chat_template() {
            p.encode_chat(&[ChatMessage::user(prompt)], &[], true)
        } else {
            p.encode(prompt)
        }
    }

    /// A value of type `T`, generated as JSON under the schema `schemars` derives for `T`.
    ///
    /// Errors only up front (a schema that cannot be enforced exactly, no complete value
    /// within `opts.max_tokens`, bad options) or if the model fails; never a parse error.
    /// Every method lowers `max_tokens` to what the model's context leaves after the prompt
    /// (a constrained output still ends complete: see [`crate::decode`]).
    pub fn generate<T: JsonSchema + DeserializeOwned>(&self, prompt: &str, opts: &GenerateOptions) -> Result<T> {
        Ok(self.generate_typed::<T>(prompt, opts)?.value)
    }

    /// [`generate`](Self::generate), with the [`Output`] it was read from (tokens, logprobs, ...).
    pub fn generate_typed<T: JsonSchema + DeserializeOwned>(
        &self,
        prompt: &str,
        opts: &GenerateOptions,
    ) -> Result<Typed<T>> {
        let job = self.typed_job::<T>(prompt, opts)?;
        let output = job.run(&mut |_| true)?.expect("never cancelled").0;
        Ok(Typed { value: deserialize(&output)?, output })
    }

    /// Text under any constraint (`None`: free text) from a prompt ([`prompt_tokens`](Self::prompt_tokens)).
    pub fn generate_text(
        &self,
        prompt: &str,
        constraint: Option<&Constraint>,
        opts: &GenerateOptions,
    ) -> Result<Output> {
        let compiled = constraint.map(|c| Compiled::new(self.vocab().clone(), c)).transpose()?;
        let job = self.job(self.prompt_tokens(prompt)?, compiled.map(|c| c.matcher()), opts, None)?;
        Ok(job.run(&mut |_| true)?.expect("never cancelled").0)
    }

    /// [`generate`](Self::generate) as a [`Stream`] of the JSON text as it comes, then
    /// [`StreamEvent::Done`] with the value.
    pub fn stream<T: JsonSchema + DeserializeOwned + Send + 'static>(
        &self,
        prompt: &str,
        opts: &GenerateOptions,
    ) -> Result<Stream<T>> {
        let job = self.typed_job::<T>(prompt, opts)?;
        Stream::spawn(job, |output, _| deserialize(&output))
    }

    /// Offers `tools` to the model after `messages`, under `choice`; see the
    /// [module docs](self#tool-calls).
    pub fn choose(
        &self,
        messages: &[ChatMessage],
        tools: &Tools,
        choice: &ToolChoice,
        opts: &GenerateOptions,
    ) -> Result<Reply> {
        let (job, tools) = self.choose_job(messages, tools, choice, opts)?;
        let (output, parser) = job.run(&mut |_| true)?.expect("never cancelled");
        reply(output, &parser, &tools)
    }

    /// [`choose`](Self::choose) as a [`Stream`]: text, each call's start and arguments as
    /// they come, then [`StreamEvent::Done`] with the [`Reply`].
    pub fn choose_stream(
        &self,
        messages: &[ChatMessage],
        tools: &Tools,
        choice: &ToolChoice,
        opts: &GenerateOptions,
    ) -> Result<Stream<Reply>> {
        let (job, tools) = self.choose_job(messages, tools, choice, opts)?;
        Stream::spawn(job, move |output, parser| reply(output, parser, &tools))
    }

    /// The prompt text [`choose`](Self::choose) gives the model for this chat.
    pub fn chat_prompt(&self, messages: &[ChatMessage], tools: &Tools, choice: &ToolChoice) -> Result<String> {
        Ok(tool_chat(messages, tools, choice)?.render(&self.loaded.prompt)?.text)
    }

    /// The tool-call format [`choose`](Self::choose) asks of the model for this chat (its chat
    /// template's, or the default).
    pub fn tool_format(&self, messages: &[ChatMessage], tools: &Tools, choice: &ToolChoice) -> Result<ToolFormat> {
        Ok(tool_chat(messages, tools, choice)?.render(&self.loaded.prompt)?.format)
    }

    fn typed_job<T: JsonSchema>(&self, prompt: &str, opts: &GenerateOptions) -> Result<Job> {
        let schema = schema_for::<T>();
        let key = format!("schema {schema}");
        let compiled =
            self.compiled(key, || Ok(Constraint::JsonSchema(schema.clone(), JsonSchemaOptions::default())))?;
        self.job(self.prompt_tokens(prompt)?, Some(compiled.matcher()), opts, None)
    }

    fn choose_job(
        &self,
        messages: &[ChatMessage],
        tools: &Tools,
        choice: &ToolChoice,
        opts: &GenerateOptions,
    ) -> Result<(Job, Tools)> {
        let chat = tool_chat(messages, tools, choice)?;
        let rendered = chat.render(&self.loaded.prompt)?;
        let format = rendered.format;
        let prompt = self.loaded.prompt.encode_raw(&rendered.text)?;
        let matcher = match &chat.mode {
            None => None,
            Some(mode) => {
                let max_calls = if tools.parallel { MAX_PARALLEL_TOOL_CALLS } else { 1 };
                let names: Vec<&str> = tools.list.iter().map(|t| t.tool.function.name.as_str()).collect();
                let key = format!("tools {names:?} {:?} {max_calls} {format:?} {}", mode, tools.key);
                let compiled = self.compiled(key, || {
                    let args = tools.list.iter().map(|t| (t.tool.function.name.clone(), t.grammar.clone())).collect();
                    Ok(Constraint::Grammar(calls_grammar(args, mode, max_calls, format, None)))
                })?;
                Some(compiled.matcher())
            }
        };
        let calls = matcher.is_some().then_some(format);
        Ok((self.job(prompt, matcher, opts, calls)?, tools.clone()))
    }

    /// The cached compile under `key`, or `make()` compiled for this vocabulary.
    fn compiled(&self, key: String, make: impl FnOnce() -> Result<Constraint>) -> Result<Arc<Compiled>> {
        if let Some(c) = self.cache.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(c.clone());
        }
        let compiled = Compiled::new(self.vocab().clone(), &make()?)?;
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= CACHE_CAPACITY {
            cache.clear();
        }
        cache.insert(key, compiled.clone());
        Ok(compiled)
    }

    /// A generation of `prompt`; `max_tokens` lowered to what the model's context has left
    /// after the prompt (a prompt that fills it is an error).
    fn job(
        &self,
        prompt: Vec<TokenId>,
        matcher: Option<Matcher>,
        opts: &GenerateOptions,
        tools: Option<ToolFormat>,
    ) -> Result<Job> {
        let context = self.loaded.info.max_positions;
        if prompt.len() >= context {
            return Err(Error::Limit {
                what: format!("prompt length ({} tokens)", prompt.len()),
                limit: context - 1,
                hint: Some("the model's context (max_position_embeddings) must leave room for the output".into()),
            });
        }
        let mut opts = opts.clone();
        opts.max_tokens = opts.max_tokens.min(context - prompt.len());
        Ok(Job {
            model: self.loaded.model.restart(),
            vocab: self.vocab().clone(),
            matcher,
            prompt,
            opts,
            tools,
            tokens: Arc::new(AtomicUsize::new(0)),
        })
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Engine({:?})", self.loaded.info)
    }
}

/// One generation, owning all it needs (so it can move to a worker thread).
struct Job {
    model: CandleModel,
    vocab: Arc<Vocab>,
    matcher: Option<Matcher>,
    prompt: Vec<TokenId>,
    opts: GenerateOptions,
    /// The format of the tool calls the output may hold (`None`: no calls).
    tools: Option<ToolFormat>,
    /// Tokens generated so far (read by [`Stream::cancel`]).
    tokens: Arc<AtomicUsize>,
}

impl Job {
    /// Runs the generation, passing each [`Piece`] of the output to `on`; `Ok(None)` when
    /// `on` returned false (cancelled), else the output and the parser that read it.
    fn run(mut self, on: &mut dyn FnMut(Piece) -> bool) -> Result<Option<(Output, OutputParser)>> {
        let mut parser = OutputParser::new(self.tools);
        let mut g = Generation::new(&mut self.model, &self.vocab, self.matcher.as_mut(), &self.prompt, &self.opts)?;
        for ev in &mut g {
            match ev? {
                Event::Token(_) => {
                    self.tokens.fetch_add(1, Ordering::Relaxed);
                }
                Event::Text(t) => {
                    for piece in parser.feed(&t) {
                        if !on(piece) {
                            return Ok(None);
                        }
                    }
                }
                Event::Finish { .. } => {}
            }
        }
        let output = g.into_output().expect("the events ran to Finish");
        let rest = parser.finish().map_err(|e| Error::invalid(format!("cannot read the reply's tool calls: {e}")))?;
        for piece in rest {
            if !on(piece) {
                return Ok(None);
            }
        }
        Ok(Some((output, parser)))
    }
}

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
    list: Vec<ToolEntry>,
    parallel: bool,
    /// The canonical JSON of the tools' parameters, for the compile cache.
    key: String,
}

#[derive(Clone)]
struct ToolEntry {
    tool: ChatTool,
    /// The arguments' grammar (the parameters schema, compiled once).
    grammar: Grammar,
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
        let ok = !name.is_empty()
            && name.len() <= 64
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !ok {
            return Err(Error::invalid(format!(
                "invalid tool name {name:?}: names must be 1 to 64 characters of a-z, A-Z, 0-9, _ and -"
            )));
        }
        if self.list.iter().any(|t| t.tool.function.name == name) {
            return Err(Error::invalid(format!("two tools are named {name:?}")));
        }
        if parameters.get("type").and_then(Value::as_str) != Some("object") {
            return Err(Error::invalid(format!(
                "tool {name:?}: the parameters must be a JSON Schema with \"type\": \"object\" (a struct), got {parameters}"
            )));
        }
        let grammar = json_schema::compile(&parameters, &JsonSchemaOptions::default())
            .map_err(|e| Error::invalid(format!("tool {name:?}: invalid parameters schema: {e}")))?
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

/// What the model must do with the [`Tools`] (OpenAI's `tool_choice`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// No tools: the tools are not offered, the reply is free text.
    None,
    /// Free text (without the call marker), or calls.
    Auto,
    /// One or more calls.
    Required,
    /// One or more calls of this tool.
    Named(String),
}

fn tool_chat(messages: &[ChatMessage], tools: &Tools, choice: &ToolChoice) -> Result<ToolChat> {
    if messages.is_empty() {
        return Err(Error::invalid("choose needs at least one message"));
    }
    let mode = match choice {
        ToolChoice::None => None,
        ToolChoice::Auto => Some(ToolMode::Auto),
        ToolChoice::Required => Some(ToolMode::Required),
        ToolChoice::Named(n) => {
            if tools.get(n).is_none() {
                return Err(Error::invalid(format!(
                    "ToolChoice::Named({n:?}) names no tool in the set (tools: {:?})",
                    tools.names()
                )));
            }
            Some(ToolMode::Named(n.clone()))
        }
    };
    if mode.is_some() && tools.is_empty() {
        return Err(Error::invalid(format!("ToolChoice::{choice:?} needs at least one tool")));
    }
    let offered = if mode.is_some() { tools.list.iter().map(|t| t.tool.clone()).collect() } else { Vec::new() };
    Ok(ToolChat { messages: messages.to_vec(), tools: offered, mode })
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
                return Err(Error::invalid(format!(
                    "tool {:?} takes {}, not {}",
                    self.name,
                    self.type_name,
                    std::any::type_name::<A>()
                )));
            }
        }
        A::deserialize(&self.arguments)
            .map_err(|e| Error::invalid(format!("tool {:?}: arguments do not deserialize: {e}", self.name)))
    }

    /// The `tool` message that answers this call, for the next turn.
    pub fn result(&self, content: impl Into<String>) -> ChatMessage {
        ChatMessage::tool(self.id.clone(), content)
    }
}

/// What [`Engine::choose`] got: text, calls, or both (under [`ToolChoice::Auto`], text may
/// come before the calls).
#[derive(Debug, Clone)]
pub struct Reply {
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
            m.tool_calls.push(crate::model::ToolCall::function(
                Some(c.id.clone()),
                c.name.clone(),
                c.arguments.clone(),
            ));
        }
        m
    }
}

/// The reply in `output`, whose calls `parser` read; every call checked against its tool.
fn reply(output: Output, parser: &OutputParser, tools: &Tools) -> Result<Reply> {
    let mut calls = Vec::new();
    for raw in parser.calls() {
        let tool = tools
            .get(&raw.name)
            .ok_or_else(|| Error::invalid(format!("the reply calls {:?}, which is not a tool", raw.name)))?;
        let arguments: Value = serde_json::from_str(&raw.arguments)
            .map_err(|e| Error::invalid(format!("tool {:?}: the arguments are not JSON: {e}", raw.name)))?;
        (tool.check)(&arguments).map_err(|e| {
            Error::invalid(format!("tool {:?}: the arguments do not deserialize as {}: {e}", raw.name, tool.type_name))
        })?;
        calls.push(ToolCall {
            id: raw.id.clone(),
            name: raw.name.clone(),
            arguments,
            type_id: tool.type_id,
            type_name: tool.type_name,
        });
    }
    Ok(Reply { text: parser.content().to_string(), calls, output })
}

/// What a [`Stream`] hands out, in order; the last is `Done`.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent<T> {
    /// Text (outside tool calls), complete UTF-8, never empty.
    Text(String),
    /// Call `index` (0, 1, ...) of `name` begins.
    CallStart { index: usize, id: String, name: String },
    /// More of call `index`'s arguments' JSON text.
    CallArgs { index: usize, text: String },
    /// The end: the finished value (what the blocking method returns).
    Done(T),
}

/// A generation running on a worker thread: an iterator of [`StreamEvent`]s (or the error
/// that ended it). Dropping it cancels the generation and waits for the worker.
///
/// ```
/// use strictly::{Engine, GenerateOptions, StreamEvent};
/// #[derive(serde::Deserialize, schemars::JsonSchema, Debug)]
/// struct Pet { name: String, legs: u8 }
/// let engine = Engine::embedded()?;
/// let mut text = String::new();
/// for ev in engine.stream::<Pet>("Once upon a time", &GenerateOptions::default().with_seed(1))? {
///     match ev? {
///         StreamEvent::Text(t) => text.push_str(&t),
///         StreamEvent::Done(pet) => assert_eq!(serde_json::from_str::<serde_json::Value>(&text)?["legs"], pet.legs),
///         _ => {}
///     }
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Stream<T> {
    rx: Option<Receiver<Result<StreamEvent<T>>>>,
    cancel: Arc<AtomicBool>,
    tokens: Arc<AtomicUsize>,
    worker: Option<JoinHandle<()>>,
}

impl<T: Send + 'static> Stream<T> {
    fn spawn(job: Job, finish: impl FnOnce(Output, &OutputParser) -> Result<T> + Send + 'static) -> Result<Stream<T>> {
        let (tx, rx) = sync_channel(STREAM_AHEAD);
        let cancel = Arc::new(AtomicBool::new(false));
        let tokens = job.tokens.clone();
        let stop = cancel.clone();
        let worker = std::thread::Builder::new()
            .name("strictly-stream".into())
            .spawn(move || {
                let mut on = |piece: Piece| {
                    let ev = match piece {
                        Piece::Content(t) => StreamEvent::Text(t),
                        Piece::ToolStart { index, id, name } => StreamEvent::CallStart { index, id, name },
                        Piece::ToolArgs { index, text } => StreamEvent::CallArgs { index, text },
                    };
                    !stop.load(Ordering::Relaxed) && tx.send(Ok(ev)).is_ok()
                };
                let last = match job.run(&mut on) {
                    Ok(Some((output, parser))) => finish(output, &parser).map(StreamEvent::Done),
                    Ok(None) => return,
                    Err(e) => Err(e),
                };
                let _ = tx.send(last);
            })
            .map_err(|e| Error::Io { path: "the stream's worker thread".into(), source: e })?;
        Ok(Stream { rx: Some(rx), cancel, tokens, worker: Some(worker) })
    }
}

impl<T> Stream<T> {
    /// Stops the generation (at its next token, or before its next event is handed out) and
    /// waits for the worker; returns how many tokens it had generated.
    pub fn cancel(mut self) -> usize {
        self.stop();
        self.tokens.load(Ordering::Relaxed)
    }

    /// Runs to the end and returns the [`StreamEvent::Done`] value (the other events dropped).
    pub fn wait(mut self) -> Result<T> {
        for ev in &mut self {
            if let StreamEvent::Done(v) = ev? {
                return Ok(v);
            }
        }
        Err(Error::invalid("the stream ended without a result"))
    }

    fn stop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
        self.rx = None; // a worker blocked on a full channel wakes with an error
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

impl<T> Iterator for Stream<T> {
    type Item = Result<StreamEvent<T>>;

    fn next(&mut self) -> Option<Self::Item> {
        let ev = self.rx.as_ref()?.recv().ok();
        if matches!(ev, None | Some(Ok(StreamEvent::Done(_))) | Some(Err(_))) {
            self.rx = None;
        }
        ev
    }
}

impl<T> Drop for Stream<T> {
    fn drop(&mut self) {
        self.stop();
    }
}

impl<T> std::fmt::Debug for Stream<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stream(running: {})", self.rx.is_some())
    }
}
