//! [`ToolChat`]: a chat with tools, rendered through the model's chat template when it
//! teaches a known call format ([`ToolFormat`]), or with the tools described in the text in
//! the default format otherwise.

use serde_json::json;

use super::format::mistral_id;
use super::{ListDialect, ToolFormat, ToolMode, TOOL_CALL_CLOSE, TOOL_CALL_OPEN};
use crate::error::{Error, Result};
use crate::model::{ChatMessage, ChatPrompt, ChatTool, ContentTokens, PromptFormat, TemplateVars};

/// A chat as templates take it: the messages (text content, OpenAI roles, tool calls and
/// results kept structured), the tools to offer, and what the caller demands of them (`None`:
/// no tools offered).
#[derive(Debug, Clone)]
pub struct ToolChat {
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ChatTool>,
    pub mode: Option<ToolMode>,
    /// More variables for the template (a request's `chat_template_kwargs`: `enable_thinking`,
    /// ...).
    pub vars: TemplateVars,
}

/// A rendered chat: the prompt's text and the format its tools were taught in (what the
/// constraint and the parser must follow).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub text: String,
    /// What to encode ([`PromptFormat::encode_prompt`]): the text, with the caller's
    /// special-token spellings marked as text (unless rendered with [`ContentTokens::Control`]).
    pub prompt: ChatPrompt,
    pub format: ToolFormat,
}

impl ToolChat {
    /// For a template that takes tools in `format`: the messages with what `tool_choice`
    /// demands added to the system turn (templates only list the tools), reshaped where the
    /// format asks: Llama 3 takes one call per assistant turn (a turn with several becomes
    /// several turns), Mistral takes 9-character call ids (others are mapped to such ids).
    pub fn native(&self, format: ToolFormat) -> Vec<ChatMessage> {
        let mut out = Vec::with_capacity(self.messages.len() + 1);
        for m in &self.messages {
            match format {
                ToolFormat::Llama3 if m.tool_calls.len() > 1 || (!m.tool_calls.is_empty() && !m.content.is_empty()) => {
                    if !m.content.is_empty() {
                        out.push(ChatMessage::new(m.role.clone(), m.content.clone()));
                    }
                    for c in &m.tool_calls {
                        let mut one = ChatMessage::new(m.role.clone(), "");
                        one.tool_calls.push(c.clone());
                        out.push(one);
                    }
                }
                ToolFormat::List(ListDialect::Mistral) | ToolFormat::MistralArgs { .. } => {
                    let mut m = m.clone();
                    for c in &mut m.tool_calls {
                        // A call without an id gets one too (the templates demand it).
                        let id = c.id.clone().unwrap_or_else(|| format!("call {}", out.len()));
                        c.id = Some(mistral_id(&id));
                    }
                    m.tool_call_id = m.tool_call_id.as_deref().map(mistral_id);
                    out.push(m);
                }
                ToolFormat::Harmony if !m.tool_calls.is_empty() => {
                    // Its template renders one call per assistant message (the first, with the
                    // message's text as its analysis), and writes the arguments with `tojson`:
                    // an object, not JSON text.
                    for (i, c) in m.tool_calls.iter().enumerate() {
                        let mut c = c.clone();
                        if let Some(v) = c.function.arguments.as_str().and_then(|t| serde_json::from_str(t).ok()) {
                            c.function.arguments = v;
                        }
                        let mut one = ChatMessage::new(m.role.clone(), if i == 0 { m.content.as_str() } else { "" });
                        one.tool_calls.push(c);
                        out.push(one);
                    }
                }
                ToolFormat::DeepSeek => {
                    // Its template joins the arguments as text.
                    let mut m = m.clone();
                    for c in &mut m.tool_calls {
                        if !c.function.arguments.is_string() {
                            c.function.arguments = json!(c.function.arguments.to_string());
                        }
                    }
                    out.push(m);
                }
                _ => out.push(m.clone()),
            }
        }
        if let (ToolFormat::DeepSeek, Some(_)) = (format, &self.mode) {
            // Its template lists no tools.
            add_to_system(&mut out, &deepseek_tools_block(&self.tools));
        }
        if let Some(note) = self.mode.as_ref().and_then(mode_note) {
            add_to_system(&mut out, &note);
        }
        out
    }

    /// For a template that does not take tools (and most such templates know no `tool` role
    /// either, and drop what they do not know): what Qwen 2.5's template would write, as plain
    /// turns. The tools are described in the system turn, each assistant's calls are written
    /// into its text in the default format, and each run of tool results becomes one user
    /// turn of `<tool_response>` blocks.
    pub fn inlined(&self) -> Vec<ChatMessage> {
        let mut out: Vec<ChatMessage> = Vec::with_capacity(self.messages.len() + 1);
        let mut in_results = false;
        for m in &self.messages {
            if m.role == "tool" {
                let block = format!("<tool_response>\n{}\n</tool_response>", m.content);
                match out.last_mut() {
                    Some(last) if in_results => last.content = format!("{}\n{block}", last.content),
                    _ => out.push(ChatMessage::new("user", block)),
                }
                in_results = true;
                continue;
            }
            in_results = false;
            let mut text = m.content.clone();
            for call in &m.tool_calls {
                let call = json!({"name": call.function.name, "arguments": call.function.arguments});
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&format!("{TOOL_CALL_OPEN}\n{call}\n{TOOL_CALL_CLOSE}"));
            }
            out.push(ChatMessage::new(m.role.clone(), text));
        }
        if let Some(mode) = &self.mode {
            add_to_system(&mut out, &tools_block(&self.tools, mode));
        }
        out
    }

    /// The prompt's text and the call format it teaches. A template that takes tools and
    /// teaches a known format ([`native_format`]) gets them as they are
    /// ([`native`](Self::native)); one that does not, or that fails on them, gets them written
    /// into the text in the default format ([`inlined`](Self::inlined)), and if it still
    /// refuses (no `system` role), the [`plainer`] chat. The error reported is the first one.
    pub fn render(&self, p: &PromptFormat) -> Result<Rendered> {
        self.render_with(p, ContentTokens::Text)
    }

    /// [`render`](Self::render), with the caller's special-token spellings encoded as
    /// `content` says.
    pub fn render_with(&self, p: &PromptFormat, content: ContentTokens) -> Result<Rendered> {
        let inlined = self.inlined();
        let plain = plainer(&inlined);
        // gpt-oss's template writes each tool's description unguarded: an empty one where none
        // was given.
        let format = native_format(p);
        let described: Vec<ChatTool>;
        let native_tools = match format {
            Some(ToolFormat::Harmony) if self.tools.iter().any(|t| t.function.description.is_none()) => {
                described = self
                    .tools
                    .iter()
                    .cloned()
                    .map(|mut t| {
                        t.function.description.get_or_insert_with(String::new);
                        t
                    })
                    .collect();
                &described[..]
            }
            _ => &self.tools[..],
        };
        let native = format.map(|f| (self.native(f), native_tools, f));
        let default = ToolFormat::Hermes;
        let attempts = native.into_iter().chain([(inlined, &[][..], default), (plain, &[][..], default)]);
        let mut first = None;
        for (msgs, tools, format) in attempts {
            match p.render_chat_prompt_with_vars(&msgs, tools, true, content, &self.vars) {
                Ok(prompt) => return Ok(Rendered { text: prompt.text(), prompt, format }),
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        let e = first.expect("at least one attempt");
        Err(Error::Template { name: None, msg: format!("it refused these messages: {e}") })
    }
}

/// The call format the chat template in use teaches, when it renders the tools
/// ([`crate::model::ChatTemplate::renders_tools`]; the history's calls too, or not: Granite's
/// drops them, as the model was trained) and its source shows a known format
/// ([`ToolFormat::detect`]); or teaches DeepSeek's (whose template renders calls but never the
/// tools: [`ToolChat::native`] describes them); `None` otherwise (then tools are described in
/// the system turn in the default format).
pub fn native_format(p: &PromptFormat) -> Option<ToolFormat> {
    let format = ToolFormat::detect(p.chat_template_source())?;
    (format == ToolFormat::DeepSeek || p.chat_renders_tools()).then_some(format)
}

/// The tools as DeepSeek V3.1's model card has them described in the system turn, with the
/// call format spelled out.
fn deepseek_tools_block(tools: &[ChatTool]) -> String {
    use super::format::{
        DEEPSEEK_CALLS_BEGIN, DEEPSEEK_CALLS_END, DEEPSEEK_CALL_BEGIN, DEEPSEEK_CALL_END, DEEPSEEK_SEP,
    };
    let mut s = String::from("## Tools\nYou have access to the following tools:\n");
    for t in tools {
        let f = &t.function;
        s.push_str(&format!("\n### {}\n", f.name));
        if let Some(d) = &f.description {
            s.push_str(&format!("Description: {d}\n"));
        }
        s.push_str(&format!("\nParameters: {}\n", f.parameters));
    }
    s.push_str(&format!(
        "\nIMPORTANT: ALWAYS adhere to this exact format for tool use:\n\
         {DEEPSEEK_CALLS_BEGIN}{DEEPSEEK_CALL_BEGIN}tool_call_name{DEEPSEEK_SEP}tool_call_arguments{DEEPSEEK_CALL_END}\
         {{additional_tool_calls}}{DEEPSEEK_CALLS_END}\n\n\
         Where:\n\
         - `tool_call_name` must be an exact match to one of the available tools\n\
         - `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters Schema\n\
         - For multiple tool calls, chain them directly without separators or spaces"
    ));
    s
}

/// Appends `text` to the first message if it is a system turn, else puts a system turn first.
fn add_to_system(msgs: &mut Vec<ChatMessage>, text: &str) {
    match msgs.first_mut() {
        Some(first) if first.role == "system" => first.content = format!("{}\n\n{text}", first.content),
        _ => msgs.insert(0, ChatMessage::new("system", text)),
    }
}

/// What `tool_choice` demands, in words (nothing for `auto`).
fn mode_note(mode: &ToolMode) -> Option<String> {
    match mode {
        ToolMode::Required => Some("You must call at least one function.".into()),
        ToolMode::Named(n) => Some(format!("You must call the function {n:?}.")),
        ToolMode::Auto => None,
    }
}

/// The Hermes-style description of the tools (what Qwen 2.5's template writes), for templates
/// that do not take tools.
fn tools_block(tools: &[ChatTool], mode: &ToolMode) -> String {
    let mut s = String::from(
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n\
         You are provided with function signatures within <tools></tools> XML tags:\n<tools>",
    );
    for t in tools {
        s.push('\n');
        s.push_str(&serde_json::to_string(t).expect("a tool serializes"));
    }
    s.push_str(
        "\n</tools>\n\nFor each function call, return a json object with function name and arguments \
         within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \
         \"arguments\": <args-json-object>}\n</tool_call>",
    );
    if let Some(note) = mode_note(mode) {
        s.push_str("\n\n");
        s.push_str(&note);
    }
    s
}

/// The same chat for templates that refuse a `system` role: system text goes in front of the
/// next user turn.
pub fn plainer(msgs: &[ChatMessage]) -> Vec<ChatMessage> {
    let mut out: Vec<ChatMessage> = Vec::new();
    let mut system = String::new();
    for m in msgs {
        match m.role.as_str() {
            "system" => {
                system.push_str(&m.content);
                system.push_str("\n\n");
            }
            "user" if !system.is_empty() => {
                out.push(ChatMessage::new("user", format!("{}{}", std::mem::take(&mut system), m.content)))
            }
            _ => out.push(m.clone()),
        }
    }
    if !system.is_empty() {
        out.insert(0, ChatMessage::new("user", system.trim_end().to_string()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ChatTemplate, ChatToolCall};

    fn prompt_format(template: &str) -> PromptFormat {
        let tok = tokenizers::Tokenizer::from_bytes(crate::model::embedded::TOKENIZER).unwrap();
        PromptFormat::new(tok, None, None, Some(ChatTemplate::new(template, "t").unwrap())).unwrap()
    }

    /// A template that takes tools gets them natively only when it teaches a known call
    /// format; otherwise they are described in the system turn in the default format.
    #[test]
    fn native_tools_only_with_a_known_call_format() {
        let body = "{% for m in messages %}{{ m.role }}: {{ m.content }}\
                    {% for c in m.tool_calls %}[{{ c.function.name }}]{% endfor %}\n{% endfor %}";
        let other = prompt_format(&("{% for t in tools %}TOOL {{ t.function.name }};{% endfor %}".to_string() + body));
        let hermes = prompt_format(
            &("{% for t in tools %}TOOL {{ t.function.name }} <tool_call>;{% endfor %}".to_string() + body),
        );
        assert!(other.chat_takes_tools() && hermes.chat_takes_tools());
        assert_eq!((native_format(&other), native_format(&hermes)), (None, Some(ToolFormat::Hermes)));
        let mut call = ChatMessage::new("assistant", "");
        call.tool_calls.push(ChatToolCall::function(None, "f", json!({"x": 1})));
        let chat = ToolChat {
            messages: vec![ChatMessage::new("user", "hi"), call],
            tools: vec![ChatTool::function("f", None, json!({"type": "object"}))],
            mode: Some(ToolMode::Required),
            vars: Default::default(),
        };
        // Natively: the template lists the tool and the call its own way.
        let native = chat.render(&hermes).unwrap();
        assert_eq!(native.format, ToolFormat::Hermes);
        assert!(native.text.starts_with("TOOL f <tool_call>;") && native.text.contains("[f]"), "{native:?}");
        // Inlined: the tools and the call in the <tool_call> format, in the text.
        let inlined = chat.render(&other).unwrap();
        assert_eq!(inlined.format, ToolFormat::Hermes);
        assert!(!inlined.text.contains("TOOL f"), "{inlined:?}");
        assert!(
            inlined.text.contains("# Tools") && inlined.text.contains("<tool_call>\n{\"name\":\"f\""),
            "{inlined:?}"
        );
    }
}
