//! [`Engine`]: the library's front door. A model and its vocabulary, loaded once; typed
//! generation, tool choice and streaming on top of the constrained decoding loop.
//!
//! ```text
//!  Engine::embedded() / Engine::load(path)         (a LoadedModel: network, Vocab, PromptFormat;
//!                                                  path: a .gguf file or a model directory)
//!     │
//!     ├─ generate::<T>(prompt, opts) ─▶ T's schema (schemars) ─▶ constrained JSON ─▶ T
//!     ├─ choose(messages, tools, choice, opts) ─▶ chat template + tool-call grammar
//!     │                                          ─▶ Reply { reasoning, text, calls: [ToolCall] }
//!     └─ stream::<T>(..) / choose_stream(..) ─▶ Stream: StreamEvent::{Reasoning, Text,
//!                                               CallStart, CallArgs, ..., Done(value)}; drop to cancel
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
//! Every returned [`ToolCall`]'s arguments have been checked to deserialize as the tool's
//! parameter type, so [`ToolCall::args`] with that type cannot fail. ([`ToolChoice`] is
//! [`crate::tools::ToolChoice`], the one the server reads `tool_choice` into as well.)
//!
//! A reasoning model (its template writes `<think>`…`</think>` or another pair of
//! [`crate::model::reasoning`] markers) reasons first: the calls grammar starts after the end
//! marker, the reasoning comes back as [`Reply::reasoning`] ([`StreamEvent::Reasoning`] when
//! streamed), and [`Engine::with_max_reasoning_tokens`] bounds it.
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
//!
//! # Layout
//!
//! This file: [`Engine`] and its private `Job` (one generation, owning its model sequence,
//! matcher and options, run blocking or on a stream's worker). `tools.rs`: [`Tools`],
//! [`ToolCall`], [`Reply`]. `stream.rs`: [`Stream`] and [`StreamEvent`].

mod stream;
mod tools;

pub use crate::tools::ToolChoice;
pub use stream::{Stream, StreamEvent};
pub use tools::{Reply, ToolCall, Tools};

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use crate::automaton::{Compiled, Constraint, Matcher, VocabEnv};
use crate::decode::{deserialize, schema_for, Event, GenerateOptions, Generation, Output, Typed};
use crate::error::{Error, Result};
use crate::grammar::json_schema::JsonSchemaOptions;
use crate::model::reasoning::{PromptReasoning, Splitter};
use crate::model::{CandleModel, ChatMessage, ContentTokens, LoadOptions, LoadedModel};
use crate::tools::{
    arguments_grammar, calls_grammar, OutputParser, Piece, ToolFormat, ValueKinds, MAX_PARALLEL_TOOL_CALLS,
};
use crate::vocab::{TokenId, Vocab};
use tools::{reply, tool_chat};

/// How many events a [`Stream`]'s worker may run ahead of the consumer.
pub const STREAM_AHEAD: usize = 8;
/// Most compiled constraints an [`Engine`] keeps (it forgets them all when full).
const CACHE_CAPACITY: usize = 64;

/// A loaded model, ready to generate. See the [module docs](self).
pub struct Engine {
    loaded: LoadedModel,
    /// Compiled constraints by a key naming what they constrain (a schema, a tool set).
    cache: Mutex<HashMap<String, Arc<Compiled>>>,
    /// How special-token spellings in messages are encoded (text, unless trusted).
    content: ContentTokens,
    /// How typed generation compiles `T`'s schema (see [`Engine::with_json_options`]).
    json: JsonSchemaOptions,
    /// The most tokens a chat reply's reasoning may take ([`Engine::with_max_reasoning_tokens`]).
    max_reasoning_tokens: Option<usize>,
}

impl Engine {
    /// The embedded stories260K model (no files, no network; see [`crate::model`]).
    pub fn embedded() -> Result<Engine> {
        Ok(Engine::from_loaded(LoadedModel::embedded(&LoadOptions::default())?))
    }

    /// A model from disk on the CPU: a GGUF file (`model.Q4_K_M.gguf`: weights, tokenizer and
    /// chat template in one), a Hugging Face model directory (config.json, safetensors,
    /// tokenizer.json, ...), or a directory holding one `.gguf` file.
    pub fn load(path: impl AsRef<Path>) -> Result<Engine> {
        Engine::load_with(path, &LoadOptions::default())
    }

    /// [`load`](Self::load) with your own [`LoadOptions`]: device, precision, CPU threads
    /// (`LoadOptions { threads: Some(2), ..LoadOptions::default() }`; a process-wide setting,
    /// see [`crate::model::set_cpu_threads`]).
    pub fn load_with(path: impl AsRef<Path>, opts: &LoadOptions) -> Result<Engine> {
        Ok(Engine::from_loaded(LoadedModel::from_path(path, opts)?))
    }

    /// A model you loaded yourself ([`LoadedModel::from_path`] with your [`LoadOptions`]).
    pub fn from_loaded(loaded: LoadedModel) -> Engine {
        Engine {
            loaded,
            cache: Mutex::new(HashMap::new()),
            content: ContentTokens::Text,
            json: JsonSchemaOptions::default(),
            max_reasoning_tokens: None,
        }
    }

    /// For a reasoning model (its chat template writes `<think>`…`</think>` or another pair
    /// of `model::reasoning` markers): the most tokens a [`choose`](Self::choose) reply's
    /// reasoning may take before its end marker is appended and the answer follows. Without
    /// it, only `max_tokens` bounds the reasoning.
    pub fn with_max_reasoning_tokens(mut self, max_tokens: usize) -> Engine {
        self.max_reasoning_tokens = Some(max_tokens);
        self
    }

    /// For trusted callers: special-token spellings in prompts and messages (`<|im_end|>`)
    /// become the control tokens they spell ([`ContentTokens::Control`]). By default they are
    /// text, so a message cannot forge the chat template's turns.
    pub fn with_content_tokens(mut self, content: ContentTokens) -> Engine {
        self.content = content;
        self
    }

    /// This engine with typed generation ([`generate`](Self::generate), [`stream`](Self::stream))
    /// compiling schemas under `json`: [`Whitespace::Pretty`](crate::grammar::json_schema::Whitespace)
    /// output, or [`JsonSchemaOptions::exact`] for the schema's exact language. The default is
    /// compact JSON in the sensible language (see [`crate::grammar::json_schema`]).
    pub fn with_json_options(mut self, json: JsonSchemaOptions) -> Engine {
        self.json = json;
        self
    }

    /// The model, its vocabulary, prompt format and defaults.
    pub fn loaded(&self) -> &LoadedModel {
        &self.loaded
    }

    /// The byte-exact vocabulary.
    pub fn vocab(&self) -> &Arc<Vocab> {
        self.loaded.vocab()
    }

    /// The vocabulary with its caches, for building your own [`Compiled`] constraints.
    pub fn env(&self) -> &Arc<VocabEnv> {
        &self.loaded.env
    }

    /// A prompt's tokens: as a user turn through the model's chat template when it has one,
    /// else the text itself after the BOS (a base model continues it). Special-token spellings
    /// in it are text unless [`with_content_tokens`](Self::with_content_tokens) says otherwise.
    pub fn prompt_tokens(&self, prompt: &str) -> Result<Vec<TokenId>> {
        let p = &self.loaded.prompt;
        if p.has_chat_template() {
            p.encode_chat_with(&[ChatMessage::user(prompt)], &[], true, self.content)
        } else {
            p.encode_with(prompt, self.content)
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
        let output = job.run(&mut |_| true)?.expect("never cancelled").output;
        Ok(Typed { value: deserialize(&output)?, output })
    }

    /// Text under any constraint (`None`: free text) from a prompt ([`prompt_tokens`](Self::prompt_tokens)).
    pub fn generate_text(
        &self,
        prompt: &str,
        constraint: Option<&Constraint>,
        opts: &GenerateOptions,
    ) -> Result<Output> {
        let compiled = constraint.map(|c| Compiled::new(self.env(), c)).transpose()?;
        let job = self.job(self.prompt_tokens(prompt)?, compiled.map(|c| c.matcher()), opts, None, None)?;
        Ok(job.run(&mut |_| true)?.expect("never cancelled").output)
    }

    /// [`generate`](Self::generate) as a [`Stream`] of the JSON text as it comes, then
    /// [`StreamEvent::Done`] with the value.
    pub fn stream<T: JsonSchema + DeserializeOwned + Send + 'static>(
        &self,
        prompt: &str,
        opts: &GenerateOptions,
    ) -> Result<Stream<T>> {
        let job = self.typed_job::<T>(prompt, opts)?;
        Stream::spawn(job, |ran| deserialize(&ran.output))
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
        reply(job.run(&mut |_| true)?.expect("never cancelled"), &tools)
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
        Stream::spawn(job, move |ran| reply(ran, &tools))
    }

    /// The prompt text [`choose`](Self::choose) gives the model for this chat.
    pub fn chat_prompt(&self, messages: &[ChatMessage], tools: &Tools, choice: &ToolChoice) -> Result<String> {
        Ok(tool_chat(messages, tools, choice)?.render_with(&self.loaded.prompt, self.content)?.text)
    }

    /// The tool-call format [`choose`](Self::choose) asks of the model for this chat (its chat
    /// template's, or the default).
    pub fn tool_format(&self, messages: &[ChatMessage], tools: &Tools, choice: &ToolChoice) -> Result<ToolFormat> {
        Ok(tool_chat(messages, tools, choice)?.render(&self.loaded.prompt)?.format)
    }

    fn typed_job<T: JsonSchema>(&self, prompt: &str, opts: &GenerateOptions) -> Result<Job> {
        let schema = schema_for::<T>();
        let json = serde_json::to_string(&self.json).expect("options serialize");
        let key = format!("schema {schema} {json}");
        let compiled = self.compiled(key, || Ok(Constraint::JsonSchema(schema.clone(), self.json.clone())))?;
        self.job(self.prompt_tokens(prompt)?, Some(compiled.matcher()), opts, None, None)
    }

    fn choose_job(
        &self,
        messages: &[ChatMessage],
        tools: &Tools,
        choice: &ToolChoice,
        opts: &GenerateOptions,
    ) -> Result<(Job, Tools)> {
        let chat = tool_chat(messages, tools, choice)?;
        let rendered = chat.render_with(&self.loaded.prompt, self.content)?;
        let format = rendered.format;
        let prompt = self.loaded.prompt.encode_prompt(&rendered.prompt)?;
        // A reasoning model reasons first: the calls come after its reasoning.
        let reasoning = self.loaded.prompt.reasoning_after(&rendered.text);
        let matcher = match &chat.mode {
            None => None,
            Some(mode) => {
                let max_calls = if tools.parallel { MAX_PARALLEL_TOOL_CALLS } else { 1 };
                let names: Vec<&str> = tools.list.iter().map(|t| t.tool.function.name.as_str()).collect();
                let key = format!("tools {names:?} {:?} {max_calls} {format:?} {} {reasoning:?}", mode, tools.key);
                let compiled = self.compiled(key, || {
                    let args = tools
                        .list
                        .iter()
                        .map(|t| {
                            let name = t.tool.function.name.clone();
                            // Elements or keyword arguments: not the JSON grammar compiled with the tool.
                            Ok(match format.json_arguments() {
                                true => (name, t.grammar.clone()),
                                false => (name, arguments_grammar(&t.tool.function.parameters, format)?),
                            })
                        })
                        .collect::<Result<_>>()?;
                    let calls = Constraint::Grammar(calls_grammar(args, mode, max_calls, format, None));
                    Ok(match &reasoning {
                        Some(r) => r.constrain_calls(calls),
                        None => calls,
                    })
                })?;
                Some(compiled.matcher())
            }
        };
        let calls = matcher.is_some().then_some(format);
        let mut opts = opts.clone();
        if let (Some(n), Some(r)) = (self.max_reasoning_tokens, &reasoning) {
            opts.reasoning = r.budget(n);
        }
        let mut job = self.job(prompt, matcher, &opts, calls, reasoning.as_ref())?;
        job.kinds = Arc::new(ValueKinds::new(
            tools.list.iter().map(|t| (t.tool.function.name.as_str(), &t.tool.function.parameters)),
        ));
        Ok((job, tools.clone()))
    }

    /// The cached compile under `key`, or `make()` compiled for this vocabulary.
    fn compiled(&self, key: String, make: impl FnOnce() -> Result<Constraint>) -> Result<Arc<Compiled>> {
        if let Some(c) = self.cache.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(c.clone());
        }
        let compiled = Compiled::new(self.env(), &make()?)?;
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
        reasoning: Option<&PromptReasoning>,
    ) -> Result<Job> {
        let context = self.loaded.info.max_positions;
        if prompt.len() >= context {
            return Err(Error::Limit {
                kind: crate::error::LimitKind::Context,
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
            kinds: Arc::default(),
            reasoning: reasoning.map(PromptReasoning::splitter),
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
pub(super) struct Job {
    model: CandleModel,
    vocab: Arc<Vocab>,
    matcher: Option<Matcher>,
    prompt: Vec<TokenId>,
    opts: GenerateOptions,
    /// The format of the tool calls the output may hold (`None`: no calls).
    tools: Option<ToolFormat>,
    /// How the tools' XML parameter values are written (read back by the parser).
    kinds: Arc<ValueKinds>,
    /// For a reasoning model's chat reply: what splits the reasoning from the rest.
    reasoning: Option<Splitter>,
    /// Tokens generated so far (read by [`Stream::cancel`]).
    pub(super) tokens: Arc<AtomicUsize>,
}

impl Job {
    /// Runs the generation, passing each [`Piece`] of the output to `on`; `Ok(None)` when
    /// `on` returned false (cancelled), else what it made.
    pub(super) fn run(mut self, on: &mut dyn FnMut(Piece) -> bool) -> Result<Option<Ran>> {
        let mut parser = OutputParser::new(self.tools).with_kinds(self.kinds.clone());
        let mut reasoning = self.reasoning.as_ref().map(|_| String::new());
        // The text's reasoning (if it has any) goes out as such; the rest to the calls parser.
        let mut pieces = |(r, text): (String, String)| -> Vec<Piece> {
            let mut out = Vec::new();
            if let (Some(all), false) = (reasoning.as_mut(), r.is_empty()) {
                all.push_str(&r);
                out.push(Piece::Reasoning(r));
            }
            out.extend(parser.feed(&text));
            out
        };
        let mut g = Generation::new(&mut self.model, &self.vocab, self.matcher.as_mut(), &self.prompt, &self.opts)?;
        for ev in &mut g {
            match ev? {
                Event::Token(_) => {
                    self.tokens.fetch_add(1, Ordering::Relaxed);
                }
                Event::Text(t) => {
                    let split = match &mut self.reasoning {
                        Some(s) => s.feed(&t),
                        None => (String::new(), t),
                    };
                    for piece in pieces(split) {
                        if !on(piece) {
                            return Ok(None);
                        }
                    }
                }
                Event::Finish { .. } => {}
            }
        }
        let output = g.into_output().expect("the events ran to Finish");
        let split = self.reasoning.as_mut().map(Splitter::finish).unwrap_or_default();
        let mut rest = pieces(split);
        rest.extend(parser.finish().map_err(|e| Error::output(format!("cannot read the reply's tool calls: {e}")))?);
        for piece in rest {
            if !on(piece) {
                return Ok(None);
            }
        }
        let reasoning = reasoning.filter(|_| self.reasoning.as_ref().is_some_and(Splitter::had_reasoning));
        Ok(Some(Ran { output, parser, reasoning: reasoning.map(|r| r.trim().to_string()) }))
    }
}

/// What a [`Job`] made: the output, the parser that read its calls, and its reasoning (a
/// reasoning model's, trimmed; `None` if the reply had none).
pub(super) struct Ran {
    pub output: Output,
    pub parser: OutputParser,
    pub reasoning: Option<String>,
}
