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
    fn native(&self) -> Vec<ChatMessage> {
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
    fn inlined(&self) -> Vec<ChatMessage> {
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
        let inlined = self.inlined();
        let plain = plainer(&inlined);
        let native = p.chat_takes_tools().then(|| (self.native(), &self.tools[..]));
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
fn plainer(msgs: &[ChatMessage]) -> Vec<ChatMessage> {
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
