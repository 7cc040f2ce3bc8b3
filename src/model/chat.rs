//! Chat templates: a model's Jinja template (from `tokenizer_config.json` or
//! `chat_template.jinja`) rendered with `minijinja` the way Hugging Face's
//! `apply_chat_template` renders it.
//!
//! The environment matches transformers': `trim_blocks` and `lstrip_blocks` on, Python string
//! methods (`.strip()`, `.startswith()`, ...) through minijinja-contrib's pycompat, a
//! `raise_exception(msg)` function, transformers' `tojson` (Python's `json.dumps`: `", "` and
//! `": "` separators, keys in their given order, non-ASCII and `<>&'` as they are, `indent=`),
//! and the variables `messages`, `tools`, `add_generation_prompt`, `bos_token` and `eos_token`.
//! `strftime_now(format)` is today's date and time (UTC) as Python's `strftime` writes it (the
//! common directives: `%Y %y %m %d %e %j %B %b %A %a %H %I %M %S %p %%`), as transformers
//! defines it: Llama 3.x prints "Today Date", and Mistral Small 3.2's template calls it
//! unconditionally.
//!
//! Tools come the way transformers passes them (Qwen 2.5, Llama 3.x and Hermes templates read
//! them): `tools` is a list of [`ChatTool`]s, `{"type": "function", "function": {"name",
//! "description", "parameters"}}`, or none (never an empty list) when there are none; an
//! assistant [`ChatMessage`] may carry `tool_calls` ([`ChatToolCall`]: `{"id", "type": "function",
//! "function": {"name", "arguments"}}`, the arguments a JSON value, not a string), and a `tool`
//! message the `tool_call_id` it answers. Absent fields are left out of the message, so templates
//! that test `'tool_calls' in message` or `message.tool_calls is defined` see them only where
//! they are. Not every template reads them: [`ChatTemplate::takes_tools`] says whether this one
//! does.
//!
//! A model without a template (the embedded stories260K model, base models) gets
//! [`PLAIN_TEMPLATE`]: the BOS, a `tools:` paragraph when there are tools, then one
//! `role: content` paragraph per message (an assistant's tool calls in `<tool_call>` tags), then
//! `assistant:` when a reply is wanted.

use minijinja::value::{Kwargs, Value as JinjaValue};
use minijinja::{context, Environment, ErrorKind};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};

/// Variables a chat template reads beyond the chat itself (`enable_thinking`, ...).
pub type TemplateVars = serde_json::Map<String, Value>;

/// One chat message (OpenAI's shape, text content only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant`, `tool`, ...
    pub role: String,
    /// The text; empty for an assistant turn that only calls tools.
    pub content: String,
    /// The calls an assistant turn made (left out of the template's message when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ChatToolCall>,
    /// The call a `tool` message answers (left out when `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage { role: role.into(), content: content.into(), tool_calls: Vec::new(), tool_call_id: None }
    }

    /// A `system` turn.
    pub fn system(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new("system", content)
    }

    /// A `user` turn.
    pub fn user(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new("user", content)
    }

    /// An `assistant` turn with text only.
    pub fn assistant(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new("assistant", content)
    }

    /// A `tool` turn: the result of the call `call_id`.
    pub fn tool(call_id: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage { tool_call_id: Some(call_id.into()), ..ChatMessage::new("tool", content) }
    }
}

/// A tool the model may call, as chat templates read `tools`:
/// `{"type": "function", "function": {"name", "description", "parameters"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatTool {
    /// Always `"function"`.
    #[serde(rename = "type")]
    pub kind: String,
    pub function: ToolFunction,
}

/// The function of a [`ChatTool`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolFunction {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A JSON Schema of the arguments object.
    pub parameters: Value,
}

impl ChatTool {
    /// A function tool.
    pub fn function(name: impl Into<String>, description: Option<String>, parameters: Value) -> ChatTool {
        ChatTool { kind: "function".into(), function: ToolFunction { name: name.into(), description, parameters } }
    }
}

/// One call in a chat history's assistant message, as templates read it: `{"id", "type":
/// "function", "function": {"name", "arguments"}}`. (A call the model has just made, checked
/// against its tool, is the library's `engine::ToolCall`; `Reply::message` turns those into
/// these for the next turn.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatToolCall {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Always `"function"`.
    #[serde(rename = "type")]
    pub kind: String,
    pub function: CalledFunction,
}

/// The function of a [`ChatToolCall`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CalledFunction {
    pub name: String,
    /// The arguments as JSON (an object, for a well-formed call), as templates expect them.
    pub arguments: Value,
}

impl ChatToolCall {
    /// A function call.
    pub fn function(id: Option<String>, name: impl Into<String>, arguments: Value) -> ChatToolCall {
        ChatToolCall { id, kind: "function".into(), function: CalledFunction { name: name.into(), arguments } }
    }
}

/// The template used for models that have none. Tools are listed by name and parameter names
/// only, to leave a small model's context to the conversation (a constraint forces the exact
/// shape of a call anyway); calls are written in the format the server's tool constraint
/// enforces:
///
/// ```text
/// <bos>tools: get_weather(city, unit), get_time(); to call one, write <tool_call>{"name": ..., "arguments": {...}}</tool_call>
///
/// system: You write stories.
///
/// user: Once upon a time
///
/// assistant: <tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>
///
/// tool: -3 C
///
/// assistant:
/// ```
pub const PLAIN_TEMPLATE: &str = "{{ bos_token }}\
{% if tools %}tools: {% for t in tools %}{{ t.function.name }}(\
{% for p in t.function.parameters.properties %}{{ p }}{% if not loop.last %}, {% endif %}{% endfor %})\
{% if not loop.last %}, {% endif %}{% endfor %}\
; to call one, write <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>{{ \"\\n\\n\" }}{% endif %}\
{% for m in messages %}{{ m.role }}: {{ m.content }}\
{% for c in m.tool_calls %}{% if m.content or not loop.first %} {% endif %}\
<tool_call>{{ {\"name\": c.function.name, \"arguments\": c.function.arguments} | tojson }}</tool_call>\
{% endfor %}{{ \"\\n\\n\" }}{% endfor %}\
{% if add_generation_prompt %}assistant:{% endif %}";

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    source: String,
    takes_tools: bool,
    renders_tools: bool,
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
        env.add_filter("tojson", tojson);
        env.add_function("strftime_now", |format: String| strftime(&format, unix_now()));
        env.add_template_owned("chat", source.to_string())
            .map_err(|e| Error::Template { name: Some(name.to_string()), msg: one_line(&e) })?;
        let mut t = ChatTemplate { env, source: source.to_string(), takes_tools: false, renders_tools: false };
        (t.renders_tools, t.takes_tools) = t.probe_tools();
        Ok(t)
    }

    /// [`PLAIN_TEMPLATE`].
    pub fn plain() -> ChatTemplate {
        ChatTemplate::new(PLAIN_TEMPLATE, "the plain template").expect("the plain template compiles")
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the template renders `tools` and assistants' `tool_calls`: a probe chat with a
    /// tool and a call renders without error and shows both names. A template that does not
    /// (TinyLlama's, Phi-3's) silently drops them, so callers describe tools in the text
    /// themselves.
    pub fn takes_tools(&self) -> bool {
        self.takes_tools
    }

    /// Whether the template renders `tools` (a probe chat with a tool shows its name), the
    /// history's calls or not: Granite 3.3's lists the tools and drops the calls.
    pub fn renders_tools(&self) -> bool {
        self.renders_tools
    }

    /// Whether the template renders the tools, and whether it renders both the tools and the
    /// history's calls (see [`takes_tools`](Self::takes_tools)).
    fn probe_tools(&self) -> (bool, bool) {
        // Parameters as real tools have them (some templates read `properties` unguarded).
        let params = serde_json::json!({"type": "object", "properties": {"x": {"type": "string"}}});
        // With a description: gpt-oss's template writes it unguarded.
        let tool = ChatTool::function("probe_tool_fn", Some("A probe.".into()), params);
        let mut call = ChatMessage::new("assistant", "");
        // An id of 9 letters and digits: Mistral's templates refuse any other.
        call.tool_calls.push(ChatToolCall::function(Some("probecall".into()), "probe_call_fn", serde_json::json!({})));
        let shows_both = |chat: &[ChatMessage]| {
            self.render(chat, std::slice::from_ref(&tool), true, "", "")
                .is_ok_and(|s| s.contains("probe_tool_fn") && s.contains("probe_call_fn"))
        };
        let (user, ok) = (ChatMessage::new("user", "hi"), ChatMessage::new("user", "ok"));
        // Templates that demand alternating user and assistant turns, counting neither calls
        // nor results (Mistral Small 3.2), need the result answered before the next user turn.
        let mut result = ChatMessage::new("tool", "done");
        result.tool_call_id = Some("probecall".into());
        let tools_shown = self
            .render(std::slice::from_ref(&user), std::slice::from_ref(&tool), true, "", "")
            .is_ok_and(|s| s.contains("probe_tool_fn"));
        let both = shows_both(&[user.clone(), call.clone(), ok.clone()])
            || shows_both(&[user, call, result, ChatMessage::new("assistant", "done"), ok]);
        (tools_shown || both, both)
    }

    /// Renders `messages` with `tools` (none if empty); with `add_generation_prompt`, ends where
    /// the assistant's reply begins.
    pub fn render(
        &self,
        messages: &[ChatMessage],
        tools: &[ChatTool],
        add_generation_prompt: bool,
        bos_token: &str,
        eos_token: &str,
    ) -> Result<String> {
        self.render_with_vars(messages, tools, add_generation_prompt, bos_token, eos_token, &TemplateVars::new())
    }

    /// [`render`](Self::render) with more variables for the template (`enable_thinking`,
    /// `reasoning_effort`, ...: a request's `chat_template_kwargs`); they cannot replace the
    /// ones above.
    pub fn render_with_vars(
        &self,
        messages: &[ChatMessage],
        tools: &[ChatTool],
        add_generation_prompt: bool,
        bos_token: &str,
        eos_token: &str,
        vars: &TemplateVars,
    ) -> Result<String> {
        let t = self.env.get_template("chat").expect("added in new");
        let tools = (!tools.is_empty()).then_some(tools);
        let extra = JinjaValue::from_serialize(vars);
        t.render(context! { messages, tools, add_generation_prompt, bos_token, eos_token, ..extra })
            .map_err(|e| Error::Template { name: None, msg: one_line(&e) })
    }
}

/// transformers' `tojson` filter: `json.dumps(x, ensure_ascii=False, indent=indent)`, keys in
/// their given order, nothing HTML-escaped. `ensure_ascii` and `sort_keys` are accepted only at
/// transformers' defaults.
fn tojson(value: &JinjaValue, kwargs: Kwargs) -> std::result::Result<JinjaValue, minijinja::Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let ensure_ascii: Option<bool> = kwargs.get("ensure_ascii")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    kwargs.assert_all_used()?;
    if ensure_ascii == Some(true) || sort_keys == Some(true) {
        return Err(minijinja::Error::new(
            ErrorKind::InvalidOperation,
            "tojson: ensure_ascii and sort_keys are not supported",
        ));
    }
    let mut out = Vec::new();
    let written = match indent {
        Some(n) => {
            let pad = " ".repeat(n);
            let mut ser = serde_json::Serializer::with_formatter(
                &mut out,
                serde_json::ser::PrettyFormatter::with_indent(pad.as_bytes()),
            );
            value.serialize(&mut ser)
        }
        None => value.serialize(&mut serde_json::Serializer::with_formatter(&mut out, PythonFormatter)),
    };
    written.map_err(|e| minijinja::Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    Ok(JinjaValue::from_safe_string(String::from_utf8(out).expect("serde_json writes UTF-8")))
}

/// Python's `json.dumps` layout without indent: `", "` between items, `": "` after keys.
struct PythonFormatter;

impl serde_json::ser::Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
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

/// Seconds since the Unix epoch, now.
fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// `format` with Python's `strftime` directives filled in for the UTC time `unix` (seconds
/// since the epoch); a directive it does not know is written as it is.
pub fn strftime(format: &str, unix: i64) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const DAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    let (h, min, sec) = (secs / 3600, secs % 3600 / 60, secs % 60);
    // The civil date of a day count (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy_march = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy_march + 2) / 153;
    let d = doy_march - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    const BEFORE: [i64; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let yday = BEFORE[(m - 1) as usize] + d + (leap && m > 2) as i64;
    let weekday = (days + 3).rem_euclid(7) as usize; // 1970-01-01 was a Thursday
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('Y') => out.push_str(&y.to_string()),
            Some('y') => out.push_str(&format!("{:02}", y.rem_euclid(100))),
            Some('m') => out.push_str(&format!("{m:02}")),
            Some('d') => out.push_str(&format!("{d:02}")),
            Some('e') => out.push_str(&format!("{d:2}")),
            Some('j') => out.push_str(&format!("{yday:03}")),
            Some('B') => out.push_str(MONTHS[(m - 1) as usize]),
            Some('b') => out.push_str(&MONTHS[(m - 1) as usize][..3]),
            Some('A') => out.push_str(DAYS[weekday]),
            Some('a') => out.push_str(&DAYS[weekday][..3]),
            Some('H') => out.push_str(&format!("{h:02}")),
            Some('I') => out.push_str(&format!("{:02}", if h % 12 == 0 { 12 } else { h % 12 })),
            Some('M') => out.push_str(&format!("{min:02}")),
            Some('S') => out.push_str(&format!("{sec:02}")),
            Some('p') => out.push_str(if h < 12 { "AM" } else { "PM" }),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// Today's date (UTC) in `format`, as `strftime_now` writes it in a chat template.
pub fn today(format: &str) -> String {
    strftime(format, unix_now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_template() {
        let m = [ChatMessage::new("system", "Be brief."), ChatMessage::new("user", "Hi")];
        let s = ChatTemplate::plain().render(&m, &[], true, "<s>", "</s>").unwrap();
        assert_eq!(s, "<s>system: Be brief.\n\nuser: Hi\n\nassistant:");
        let s = ChatTemplate::plain().render(&m[1..], &[], false, "", "").unwrap();
        assert_eq!(s, "user: Hi\n\n");
    }

    #[test]
    fn plain_template_with_tools_calls_and_results() {
        let tools = [
            ChatTool::function(
                "get_weather",
                Some("Weather".into()),
                serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}, "unit": {}}}),
            ),
            ChatTool::function("get_time", None, serde_json::json!({"type": "object"})),
        ];
        let mut call = ChatMessage::new("assistant", "");
        call.tool_calls.push(ChatToolCall::function(
            Some("c1".into()),
            "get_weather",
            serde_json::json!({"city": "Oslo"}),
        ));
        call.tool_calls.push(ChatToolCall::function(None, "get_weather", serde_json::json!({"city": "Bergen"})));
        let mut result = ChatMessage::new("tool", "-3 C");
        result.tool_call_id = Some("c1".into());
        let chat = [ChatMessage::new("user", "Weather in Oslo?"), call, result];
        let s = ChatTemplate::plain().render(&chat, &tools, true, "<s>", "").unwrap();
        assert_eq!(
            s,
            "<s>tools: get_weather(city, unit), get_time(); to call one, write \
             <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>\n\n\
             user: Weather in Oslo?\n\n\
             assistant: <tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call> \
             <tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Bergen\"}}</tool_call>\n\n\
             tool: -3 C\n\nassistant:"
        );
        assert!(ChatTemplate::plain().takes_tools());
    }

    #[test]
    fn tojson_is_pythons_json_dumps() {
        let t2 =
            ChatTemplate::new("{% for t in tools %}{{ t.function.parameters | tojson }}{% endfor %}", "t2").unwrap();
        let p = serde_json::json!({"b": [1, 2.5, null], "a": {}});
        let s = t2.render(&[], &[ChatTool::function("f", None, p)], false, "", "").unwrap();
        assert_eq!(s, r#"{"b": [1, 2.5, null], "a": {}}"#);
        let t3 = ChatTemplate::new("{{ {'k': [1, 'é<']} | tojson(indent=2) }}", "t3").unwrap();
        assert_eq!(t3.render(&[], &[], false, "", "").unwrap(), "{\n  \"k\": [\n    1,\n    \"é<\"\n  ]\n}");
        assert!(!t3.takes_tools());
    }

    #[test]
    fn strftime_writes_pythons_directives() {
        // 2024-07-26 13:25:09 UTC (as Python writes it), a Friday; 2000-02-29; the epoch.
        assert_eq!(strftime("%d %b %Y", 1_722_000_309), "26 Jul 2024");
        assert_eq!(
            strftime("%Y-%m-%d %H:%M:%S %A %a %B %j %I%p %y %e %q %%", 1_722_000_309),
            "2024-07-26 13:25:09 Friday Fri July 208 01PM 24 26 %q %"
        );
        assert_eq!(strftime("%Y-%m-%d %j", 951_782_400), "2000-02-29 060");
        assert_eq!(strftime("%Y-%m-%d %A", 0), "1970-01-01 Thursday");
        assert_eq!(strftime("%Y-%m-%d", -86_400), "1969-12-31");
    }

    #[test]
    fn python_methods_trim_blocks_and_raise_exception() {
        let t = ChatTemplate::new(
            "{% for m in messages %}\n{{ m.content.strip().upper() }}|\n{% endfor %}\
             {% if not add_generation_prompt %}{{ raise_exception('need a prompt') }}{% endif %}",
            "t",
        )
        .unwrap();
        assert_eq!(t.render(&[ChatMessage::new("user", "  hi ")], &[], true, "", "").unwrap(), "HI|\n");
        let e = t.render(&[], &[], false, "", "").unwrap_err().to_string();
        assert!(e.contains("need a prompt"), "{e}");
        assert!(ChatTemplate::new("{% if %}", "bad.json").unwrap_err().to_string().contains("bad.json"));
    }
}
