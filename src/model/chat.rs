//! Chat templates: a model's Jinja template (from `tokenizer_config.json` or
//! `chat_template.jinja`) rendered with `minijinja` the way Hugging Face's
//! `apply_chat_template` renders it.
//!
//! The environment matches transformers': `trim_blocks` and `lstrip_blocks` on, Python string
//! methods (`.strip()`, `.startswith()`, ...) through minijinja-contrib's pycompat, a
//! `raise_exception(msg)` function, and the variables `messages`, `add_generation_prompt`,
//! `bos_token` and `eos_token`. `strftime_now` is deliberately left undefined, so templates that
//! print today's date fall back to their fixed default and rendering stays deterministic.
//!
//! A model without a template (the embedded stories260K model, base models) gets
//! [`PLAIN_TEMPLATE`]: the BOS, then one `role: content` paragraph per message, then
//! `assistant:` when a reply is wanted.

use minijinja::{context, Environment, ErrorKind};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// One chat message (OpenAI's shape, text content only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant`, ...
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage { role: role.into(), content: content.into() }
    }
}

/// The template used for models that have none:
///
/// ```text
/// <bos>system: You write stories.
///
/// user: Once upon a time
///
/// assistant:
/// ```
pub const PLAIN_TEMPLATE: &str = "{{ bos_token }}{% for m in messages %}{{ m.role }}: {{ m.content }}\n\n{% endfor %}\
{% if add_generation_prompt %}assistant:{% endif %}";

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    source: String,
}

impl ChatTemplate {
    /// Compiles `source`; `name` (a file) goes into errors.
    pub fn new(source: &str, name: &str) -> Result<ChatTemplate> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        minijinja_contrib::add_to_environment(&mut env);
        env.add_function("raise_exception", |msg: String| -> std::result::Result<String, minijinja::Error> {
            Err(minijinja::Error::new(ErrorKind::InvalidOperation, msg))
        });
        env.add_template_owned("chat", source.to_string())
            .map_err(|e| Error::invalid(format!("chat template in {name}: {}", one_line(&e))))?;
        Ok(ChatTemplate { env, source: source.to_string() })
    }

    /// [`PLAIN_TEMPLATE`].
    pub fn plain() -> ChatTemplate {
        ChatTemplate::new(PLAIN_TEMPLATE, "the plain template").expect("the plain template compiles")
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// Renders `messages`; with `add_generation_prompt`, ends where the assistant's reply begins.
    pub fn render(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        bos_token: &str,
        eos_token: &str,
    ) -> Result<String> {
        let t = self.env.get_template("chat").expect("added in new");
        t.render(context! { messages, add_generation_prompt, bos_token, eos_token })
            .map_err(|e| Error::invalid(format!("chat template: {}", one_line(&e))))
    }
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ChatTemplate({} bytes)", self.source.len())
    }
}

fn one_line(e: &minijinja::Error) -> String {
    let mut s = e.kind().to_string();
    if let Some(d) = e.detail() {
        s.push_str(": ");
        s.push_str(d);
    }
    if let Some(l) = e.line() {
        s.push_str(&format!(" (line {l})"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_template() {
        let m = [ChatMessage::new("system", "Be brief."), ChatMessage::new("user", "Hi")];
        let s = ChatTemplate::plain().render(&m, true, "<s>", "</s>").unwrap();
        assert_eq!(s, "<s>system: Be brief.\n\nuser: Hi\n\nassistant:");
        let s = ChatTemplate::plain().render(&m[1..], false, "", "").unwrap();
        assert_eq!(s, "user: Hi\n\n");
    }

    #[test]
    fn python_methods_trim_blocks_and_raise_exception() {
        let t = ChatTemplate::new(
            "{% for m in messages %}\n{{ m.content.strip().upper() }}|\n{% endfor %}\
             {% if not add_generation_prompt %}{{ raise_exception('need a prompt') }}{% endif %}",
            "t",
        )
        .unwrap();
        assert_eq!(t.render(&[ChatMessage::new("user", "  hi ")], true, "", "").unwrap(), "HI|\n");
        let e = t.render(&[], false, "", "").unwrap_err().to_string();
        assert!(e.contains("need a prompt"), "{e}");
        assert!(ChatTemplate::new("{% if %}", "bad.json").unwrap_err().to_string().contains("bad.json"));
    }
}
