//! Tool calls: the grammar that makes a model's calls well-formed, and the parser that reads
//! them back out of its text. The server's `tools` and the library's [`Engine::choose`]
//! both use this one implementation.
//!
//! # The formats
//!
//! A model writes its calls the way its chat template teaches ([`ToolFormat`], detected from
//! the template's source: see [`format`](mod@format) for which template gets which format). The default,
//! for templates that teach none (or render no tools), is the Hermes / Qwen 2.5 format, which
//! this crate's plain template teaches too:
//!
//! ```text
//! <tool_call>
//! {"name": "get_weather", "arguments": {"city": "Paris"}}
//! </tool_call>
//! ```
//!
//! Llama 3.x writes a bare `{"name": "get_weather", "parameters": {"city": "Paris"}}` (one per
//! reply, ended by its end-of-turn token), Mistral `[TOOL_CALLS] [{"name": ..., "arguments":
//! ...}, ...]` (Granite `<|tool_call|>[...]`, Nemotron `<TOOLCALL>[...]</TOOLCALL>`) or (newer
//! Mistral templates) `[TOOL_CALLS]get_weather[ARGS]{...}`, DeepSeek V3.1
//! `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{...}...`, Qwen3-Coder,
//! Qwen3.5, Seed-OSS, GLM and MiniMax XML elements (values typed by the schema, read back into
//! JSON: see [`xml`]), Llama 4's pythonic template `[get_weather(city="Paris")]` (see
//! [`pythonic`]), gpt-oss's harmony messages ` to=functions.get_weather<|channel|>commentary
//! json<|message|>{"city": "Paris"}` (see [`harmony`]); [`format`](mod@format) says which
//! template gets which. In every format the
//! call names one of the tools and its arguments are the JSON Schema of that tool's
//! `parameters`, so the arguments of every returned call validate. At most
//! [`ToolSpec::max_calls`] calls (one, or up to [`MAX_PARALLEL_TOOL_CALLS`]; always one for
//! Llama 3). By [`ToolMode`]:
//!
//! ```text
//! Required / Named   root ::= calls                   (Named: that one tool only)
//! Auto               root ::= text calls?             text: any text without the marker
//!                                                     (<tool_call>, [TOOL_CALLS], ...)
//!                    root ::= call | text             Llama 3 (pythonic): text that does not
//!                                                     begin with { ([)
//!                    root ::= call | final            harmony: the final answer's message
//! Auto + a format    root ::= format | calls          (a response format, regex, ...)
//! ```
//!
//! So under `Auto` the model may answer in text, but the moment it writes the marker, the
//! rest is a well-formed call: a triggered constraint (see [`crate::grammar::trigger`]) whose
//! text is one lexeme, any text without the marker (the complement of "contains it").
//!
//! # Key items
//!
//! - [`ToolChoice`]: what the model must do with the tools (none, auto, required, named), and
//!   [`ToolMode`], the same less `None`, which the grammar takes.
//! - [`calls_grammar`]: the grammar above, from each offered tool's name and arguments grammar.
//! - [`OutputParser`]: splits an output, as it streams, into content and [`RawCall`]s, in any
//!   [`ToolFormat`].
//! - `ToolChat` (with the `model` feature): a chat with tools rendered through a model's chat
//!   template when it teaches a known format, else with the tools described in the system turn
//!   in the default format; it says which format the prompt asks for, and the constraint and
//!   the parser follow it.
//!
//! [`Engine::choose`]: crate::engine::Engine::choose

#[cfg(feature = "model")]
mod chat;
pub mod format;
pub mod harmony;
mod parse;
pub mod pythonic;
pub mod xml;

#[cfg(feature = "model")]
pub use chat::{native_format, plainer, Rendered, ToolChat};
pub use format::{ListDialect, ToolFormat};
pub use parse::{call_id, Joined, OutputParser, Piece, RawCall};
pub use xml::ValueKinds;

use serde::Serialize;
use serde_json::Value;

use crate::grammar::{Expr, Grammar, Mark, Rule, RuleId};

/// The text that opens a tool call.
pub const TOOL_CALL_OPEN: &str = "<tool_call>";
/// The text that closes a tool call.
pub const TOOL_CALL_CLOSE: &str = "</tool_call>";
/// Most tool calls in one reply (with parallel calls on, the default).
pub const MAX_PARALLEL_TOOL_CALLS: u32 = 8;

/// One offered tool: its name and the JSON Schema of its arguments.
#[derive(Debug, Clone, Serialize)]
pub struct Tool {
    pub name: String,
    pub parameters: Value,
}

/// What the model must do with the tools offered (OpenAI's `tool_choice`): the one meaning of
/// a tool choice, for the library ([`Engine::choose`](crate::engine::Engine::choose)) and the
/// server (which reads the request's `tool_choice` into one). [`mode`](Self::mode) gives the
/// grammar's [`ToolMode`].
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

impl ToolChoice {
    /// The mode of the calls' grammar; `None` when no tool is offered ([`ToolChoice::None`]).
    pub fn mode(&self) -> Option<ToolMode> {
        match self {
            ToolChoice::None => None,
            ToolChoice::Auto => Some(ToolMode::Auto),
            ToolChoice::Required => Some(ToolMode::Required),
            ToolChoice::Named(n) => Some(ToolMode::Named(n.clone())),
        }
    }
}

/// How the calls' grammar treats the tools offered: a [`ToolChoice`] other than `None`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum ToolMode {
    /// Text, or calls.
    Auto,
    /// At least one call.
    Required,
    /// Calls of this tool only.
    Named(String),
}

/// The tools offered and how.
#[derive(Debug, Clone, Serialize)]
pub struct ToolSpec {
    pub tools: Vec<Tool>,
    pub mode: ToolMode,
    /// 1, or [`MAX_PARALLEL_TOOL_CALLS`].
    pub max_calls: u32,
    /// How the calls are written (the format the prompt teaches).
    pub format: ToolFormat,
}

/// Whether `name` is a valid tool (or schema) name, OpenAI's rule: `^[a-zA-Z0-9_-]{1,64}$`.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn add_rule(rules: &mut Vec<Rule>, name: &str, body: Expr) -> RuleId {
    rules.push(Rule { name: name.to_string(), body, span: None });
    RuleId(rules.len() as u32 - 1)
}

fn re(pattern: &str) -> Expr {
    Expr::Regex(std::sync::Arc::new(crate::regular::regex::parse(pattern).expect("a valid built-in regex")))
}

/// The grammar of a tool's arguments in `format` ([`calls_grammar`] takes it): its
/// `parameters` schema compiled as JSON, or for [`ToolFormat::Xml`] as argument elements
/// ([`xml::arguments_grammar`]). Tools get the default (sensible) JSON language.
pub fn arguments_grammar(parameters: &Value, format: ToolFormat) -> crate::error::Result<Grammar> {
    let opts = crate::grammar::json_schema::JsonSchemaOptions::default();
    match format {
        ToolFormat::Xml(dialect) => xml::arguments_grammar(parameters, dialect, &opts),
        ToolFormat::Pythonic => pythonic::arguments_grammar(parameters, &opts),
        _ => {
            // A tool no arguments validate against could never be called: an error naming
            // why, in the schema's terms (not a grammar that matches nothing).
            let g = crate::grammar::json_schema::compile(parameters, &opts)?;
            match g.empty.is_empty() {
                true => Ok(g.grammar),
                false => Err(g.empty_language_error()),
            }
        }
    }
}

/// The grammar of a reply under `mode` with calls written in `format` (see the module docs).
/// `tools` holds each tool that may be called, by name, with the grammar of its arguments in
/// that format ([`arguments_grammar`]); under [`ToolMode::Named`] only the named one is used.
/// `format_grammar` is the grammar of a non-call answer under [`ToolMode::Auto`] (when `None`:
/// any text without the format's marker, or for Llama 3 any text that does not begin with
/// `{`); other modes ignore it. Llama 3 replies hold one call whatever `max_calls` says.
pub fn calls_grammar(
    tools: Vec<(String, Grammar)>,
    mode: &ToolMode,
    max_calls: u32,
    format: ToolFormat,
    format_grammar: Option<Grammar>,
) -> Grammar {
    let mut rules: Vec<Rule> = Vec::new();
    let root = add_rule(&mut rules, "root", Expr::Empty);
    // One optional space between the calls of a JSON list (as `json.dumps` writes it, or
    // compact): never whitespace soup.
    let ws = || re(r" ?");
    let key = serde_json::to_string(format.arguments_key()).expect("a string serializes");
    let mut objects = Vec::new();
    let mut xml_calls = Vec::new();
    let mut named_args = Vec::new();
    for (name, g) in tools {
        if let ToolMode::Named(n) = mode {
            if n != &name {
                continue;
            }
        }
        let args = g.append_to(&mut rules);
        if let ToolFormat::Xml(d) = format {
            let syn = d.syntax();
            let open = format!("{}{name}{}", syn.name_open, syn.name_close);
            xml_calls.push(Expr::Seq(vec![Expr::Literal(open), Expr::Rule(args)]));
            continue;
        }
        if let ToolFormat::MistralArgs { .. } | ToolFormat::DeepSeek | ToolFormat::Pythonic | ToolFormat::Harmony =
            format
        {
            named_args.push((name, args));
            continue;
        }
        // Compact, or spaced as `json.dumps` writes it: one layout per call, never a mix (and
        // two spellings of the call's head, where independent optional spaces made 128).
        let name = serde_json::to_string(&name).expect("a string serializes");
        let compact = format!("{{\"name\":{name},{key}:");
        let spaced = format!("{{\"name\": {name}, {key}: ");
        objects.push(Expr::Seq(vec![
            Expr::Alt(vec![Expr::Literal(compact), Expr::Literal(spaced)]),
            Expr::Rule(args),
            Expr::Literal("}".into()),
        ]));
    }
    let object = add_rule(&mut rules, "tool_call_object", Expr::Alt(objects));
    // `first` then up to `max - 1` more, each after `sep`: with parallel calls off (`max` 1),
    // exactly one call; on, one or more. No call repeats an earlier one of the same reply (a
    // real model otherwise writes the same call several times): the tag before each call, or
    // the bracket of the list, is a [`Mark`] and the matcher refuses a repeat (see
    // `automaton::distinct`), steering away from a call that could only end as one.
    let list = |first: Expr, sep: Expr, max: u32| {
        if max <= 1 {
            first
        } else {
            let more = Expr::Seq(vec![sep, first.clone()]);
            Expr::Seq(vec![first, Expr::Repeat { body: Box::new(more), min: 0, max: Some(max - 1) }])
        }
    };
    let max_calls = format.max_calls(max_calls);
    let calls_body = match format {
        ToolFormat::Hermes => {
            let call = add_rule(
                &mut rules,
                "tool_call",
                Expr::Seq(vec![
                    Expr::Mark(Mark::DistinctAfter(TOOL_CALL_OPEN.into())),
                    re(r"\n?"),
                    Expr::Rule(object),
                    re(r"\n?"),
                    Expr::Literal(TOOL_CALL_CLOSE.into()),
                ]),
            );
            list(Expr::Rule(call), Expr::Literal("\n".into()), max_calls)
        }
        ToolFormat::Xml(d) => {
            // Not a JSON object per call: the arguments are elements (the grammar given is
            // `xml::arguments_grammar`'s). The opening tag is marked: a call whose text (up to
            // its closing tags) repeats an earlier one's is refused; the grammar writes one text
            // per call and arguments.
            let syn = d.syntax();
            let close = syn.call_end;
            let end = crate::grammar::TextEnd { close: close.into(), quoted: false };
            let mark = Mark::DistinctText { open: syn.call_open.into(), end };
            let body = Expr::Seq(vec![Expr::Mark(mark), Expr::Alt(xml_calls), Expr::Literal(close.into())]);
            let call = add_rule(&mut rules, "tool_call", body);
            list(Expr::Rule(call), Expr::Literal("\n".into()), max_calls)
        }
        ToolFormat::MistralArgs { call_id } => {
            // `[TOOL_CALLS]NAME` (`[CALL_ID]` id)? `[ARGS]` arguments, per call. Without ids the
            // name and `[ARGS]` are one marked literal per tool, so repeats are refused per tool;
            // with ids between them, not.
            let calls: Vec<Expr> = named_args
                .into_iter()
                .map(|(name, args)| {
                    let mut seq = vec![Expr::Literal(format::MISTRAL_CALLS.into())];
                    if call_id {
                        seq.push(Expr::Literal(format!("{name}{}", format::MISTRAL_CALL_ID)));
                        seq.push(re("[A-Za-z0-9]{9}"));
                        seq.push(Expr::Literal(format::MISTRAL_ARGS.into()));
                    } else {
                        seq.push(Expr::Mark(Mark::DistinctAfter(format!("{name}{}", format::MISTRAL_ARGS).into())));
                    }
                    seq.push(Expr::Rule(args));
                    Expr::Seq(seq)
                })
                .collect();
            let call = add_rule(&mut rules, "tool_call", Expr::Alt(calls));
            list(Expr::Rule(call), Expr::Empty, max_calls)
        }
        ToolFormat::DeepSeek => {
            // Each call's name and separator is one marked literal per tool: repeats are
            // refused per tool.
            let calls: Vec<Expr> = named_args
                .into_iter()
                .map(|(name, args)| {
                    Expr::Seq(vec![
                        Expr::Literal(format::DEEPSEEK_CALL_BEGIN.into()),
                        Expr::Mark(Mark::DistinctAfter(format!("{name}{}", format::DEEPSEEK_SEP).into())),
                        Expr::Rule(args),
                        Expr::Literal(format::DEEPSEEK_CALL_END.into()),
                    ])
                })
                .collect();
            let call = add_rule(&mut rules, "tool_call", Expr::Alt(calls));
            Expr::Seq(vec![
                Expr::Literal(format::DEEPSEEK_CALLS_BEGIN.into()),
                list(Expr::Rule(call), Expr::Empty, max_calls),
                Expr::Literal(format::DEEPSEEK_CALLS_END.into()),
            ])
        }
        ToolFormat::Pythonic => {
            let calls: Vec<Expr> = named_args
                .into_iter()
                .map(|(name, args)| {
                    // A call repeats an earlier one of the same tool when its text does (the
                    // grammar writes one per call); `)` in a string does not end it.
                    let end = crate::grammar::TextEnd { close: ")".into(), quoted: true };
                    let mark = Mark::DistinctText { open: format!("{name}(").into(), end };
                    Expr::Seq(vec![Expr::Mark(mark), Expr::Rule(args), Expr::Literal(")".into())])
                })
                .collect();
            let call = add_rule(&mut rules, "tool_call", Expr::Alt(calls));
            Expr::Seq(vec![
                Expr::Literal("[".into()),
                list(Expr::Rule(call), Expr::Literal(", ".into()), max_calls),
                Expr::Literal("]".into()),
            ])
        }
        ToolFormat::Harmony => {
            // One call (`<|call|>` ends the reply): its header, in either order, an optional
            // content type, then the arguments.
            let content_type = Expr::Repeat {
                body: Box::new(Expr::Alt(
                    harmony::CONTENT_TYPES.iter().map(|t| Expr::Literal(format!(" {t}"))).collect(),
                )),
                min: 0,
                max: Some(1),
            };
            let calls: Vec<Expr> = named_args
                .into_iter()
                .map(|(name, args)| {
                    let heads = harmony::call_heads(&name).into_iter().map(Expr::Literal).collect();
                    Expr::Seq(vec![
                        Expr::Alt(heads),
                        content_type.clone(),
                        Expr::Literal(harmony::MESSAGE.into()),
                        Expr::Rule(args),
                    ])
                })
                .collect();
            Expr::Alt(calls)
        }
        ToolFormat::Llama3 => Expr::Rule(object),
        ToolFormat::List(d) => {
            let (open, close) = d.markers();
            let mut seq = vec![
                Expr::Literal(open.into()),
                re(" ?"),
                Expr::Mark(Mark::DistinctArray),
                ws(),
                list(Expr::Rule(object), Expr::Seq(vec![ws(), Expr::Literal(",".into()), ws()]), max_calls),
                ws(),
                Expr::Literal("]".into()),
            ];
            seq.extend(close.map(|c| Expr::Literal(c.into())));
            Expr::Seq(seq)
        }
    };
    let calls = add_rule(&mut rules, "tool_calls", calls_body);
    let body = match (mode, format_grammar, format.marker()) {
        // Harmony: a call, or the final answer (its header, then text or the format's output).
        (ToolMode::Auto, g, _) if format == ToolFormat::Harmony => {
            let answer = match g {
                Some(g) => Expr::Rule(g.append_to(&mut rules)),
                None => re("(?s:.*)"),
            };
            let final_answer = Expr::Seq(vec![Expr::Literal(harmony::FINAL.into()), answer]);
            Expr::Alt(vec![Expr::Rule(calls), final_answer])
        }
        (ToolMode::Auto, Some(g), _) => {
            let user_root = g.append_to(&mut rules);
            Expr::Alt(vec![Expr::Rule(user_root), Expr::Rule(calls)])
        }
        (ToolMode::Auto, None, Some(marker)) => {
            // A trigger: text until the marker, then the calls (which begin with it).
            crate::grammar::trigger::text_then(marker, Expr::Rule(calls))
        }
        (ToolMode::Auto, None, None) => {
            // Llama 3 and pythonic: the calls, or text that does not begin as they do (`{`,
            // `[`: how the parser tells them apart).
            let lead = format.lead().expect("a format without a marker has a lead");
            let text = add_rule(
                &mut rules,
                "text",
                re(&format!(r"(?s:(?:[^{}].*)?)", regex_syntax::escape(&lead.to_string()))),
            );
            Expr::Alt(vec![Expr::Rule(calls), Expr::Rule(text)])
        }
        _ => Expr::Rule(calls),
    };
    rules[root.0 as usize].body = body;
    Grammar { rules, start: root }
}
