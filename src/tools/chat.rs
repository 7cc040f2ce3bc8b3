//! [`ToolChat`]: a chat with tools, rendered through the model's chat template, or with the
//! tools described in the text when the template does not take them.

use serde_json::json;

use super::{ToolMode, TOOL_CALL_CLOSE, TOOL_CALL_OPEN};
use crate::error::{Error, Result};
use crate::model::{ChatMessage, ChatTool, PromptFormat};

/// A chat as templates take it: the messages (text content, OpenAI roles, tool calls and
/// results kept structured), the tools to offer, and what the caller demands of them (`None`:
/// no tools offered).
#[derive(Debug, Clone)]
pub struct ToolChat {
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ChatTool>,
    pub mode: Option<ToolMode>,
}

impl ToolChat {
    /// For a template that takes tools: the messages with what `tool_choice` demands added to
    /// the system turn (templates only list the tools).
    pub fn native(&self) -> Vec<ChatMessage> {
        let mut out = self.messages.clone();
        if let Some(note) = self.mode.as_ref().and_then(mode_note) {
            add_to_system(&mut out, &note);
        }
        out
    }

    /// For a template that does not take tools (and most such templates know no `tool` role
    /// either, and drop what they do not know): what Qwen 2.5's template would write, as plain
    /// turns. The tools are described in the system turn, each assistant's calls are written
    /// into its text in the format the tool constraint enforces, and each run of tool results
    /// becomes one user turn of `<tool_response>` blocks.
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
}

impl ToolChat {
    /// The prompt's text. A template that takes tools gets them as they are
    /// ([`native`](Self::native)); one that does not, or that fails on them, gets them written
    /// into the text ([`inlined`](Self::inlined)), and if it still refuses (no `system` role),
    /// the [`plainer`] chat. The error reported is the first one.
    pub fn render(&self, p: &PromptFormat) -> Result<String> {
        self.render_with(p, p.chat_takes_tools())
    }

    /// Like [`render`](Self::render), but the tools go to the template natively only when it
    /// also teaches the call format the tool constraint enforces ([`teaches_call_format`]);
    /// a template that takes tools but asks for calls in another shape (Llama 3.x's
    /// `{"name": ..., "parameters": ...}`) gets the tools described in the system turn
    /// instead, so that the prompt and the constraint agree. The library uses this.
    pub fn render_for_calls(&self, p: &PromptFormat) -> Result<String> {
        self.render_with(p, p.chat_takes_tools() && teaches_call_format(p))
    }

    fn render_with(&self, p: &PromptFormat, native: bool) -> Result<String> {
        let inlined = self.inlined();
        let plain = plainer(&inlined);
        let native = native.then(|| (self.native(), &self.tools[..]));
        let attempts = native.into_iter().chain([(inlined, &[][..]), (plain, &[][..])]);
        let mut first = None;
        for (msgs, tools) in attempts {
            match p.render_chat(&msgs, tools, true) {
                Ok(text) => return Ok(text),
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        let e = first.expect("at least one attempt");
        Err(Error::invalid(format!("the model's chat template refused these messages: {e}")))
    }
}

/// Whether the chat template in use writes tool calls in the format of [`super::calls_grammar`]
/// (its source mentions `<tool_call>`, as Qwen 2.5's, the Hermes templates and
/// [`PLAIN_TEMPLATE`](crate::model::chat::PLAIN_TEMPLATE) do).
pub fn teaches_call_format(p: &PromptFormat) -> bool {
    p.chat_template_source().contains(TOOL_CALL_OPEN)
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
    use crate::model::{ChatTemplate, ToolCall};

    fn prompt_format(template: &str) -> PromptFormat {
        let tok = tokenizers::Tokenizer::from_bytes(crate::model::embedded::TOKENIZER).unwrap();
        PromptFormat::new(tok, None, None, Some(ChatTemplate::new(template, "t").unwrap())).unwrap()
    }

    /// A template that takes tools gets them natively for the library only when it teaches the
    /// `<tool_call>` format; otherwise they are described in the system turn.
    #[test]
    fn native_tools_only_with_the_call_format() {
        let body = "{% for m in messages %}{{ m.role }}: {{ m.content }}\
                    {% for c in m.tool_calls %}[{{ c.function.name }}]{% endfor %}\n{% endfor %}";
        let other = prompt_format(&("{% for t in tools %}TOOL {{ t.function.name }};{% endfor %}".to_string() + body));
        let hermes = prompt_format(
            &("{% for t in tools %}TOOL {{ t.function.name }} <tool_call>;{% endfor %}".to_string() + body),
        );
        assert!(other.chat_takes_tools() && hermes.chat_takes_tools());
        assert!(!teaches_call_format(&other) && teaches_call_format(&hermes));
        let mut call = ChatMessage::new("assistant", "");
        call.tool_calls.push(ToolCall::function(None, "f", json!({"x": 1})));
        let chat = ToolChat {
            messages: vec![ChatMessage::new("user", "hi"), call],
            tools: vec![ChatTool::function("f", None, json!({"type": "object"}))],
            mode: Some(ToolMode::Required),
        };
        // Natively: the template lists the tool and the call its own way.
        let native = chat.render_for_calls(&hermes).unwrap();
        assert!(native.starts_with("TOOL f <tool_call>;") && native.contains("[f]"), "{native}");
        assert_eq!(native, chat.render(&hermes).unwrap());
        // Inlined: the tools and the call in the <tool_call> format, in the text.
        let inlined = chat.render_for_calls(&other).unwrap();
        assert!(!inlined.contains("TOOL f"), "{inlined}");
        assert!(inlined.contains("# Tools") && inlined.contains("<tool_call>\n{\"name\":\"f\""), "{inlined}");
        assert!(chat.render(&other).unwrap().starts_with("TOOL f;"));
    }
}
