//! gpt-oss's harmony format ([`ToolFormat::Harmony`](super::ToolFormat::Harmony)): a reply is
//! one or more messages, each headed by its channel, and a tool call is a message of the
//! `commentary` channel addressed to the function:
//!
//! ```text
//! prompt  …<|end|><|start|>assistant
//! reply   <|channel|>analysis<|message|>The user wants the weather.<|end|><|start|>assistant
//!         to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris"}   then <|call|>
//!    or   <|channel|>final<|message|>It is sunny.                                          then <|return|>
//! ```
//!
//! The analysis message is the reasoning (`model::reasoning::HARMONY`: its end marker is
//! `<|end|><|start|>assistant`, and the final answer's content begins with the header
//! `<|channel|>final<|message|>`); this module is what comes after it. A call's header names the
//! recipient before the channel, as gpt-oss's chat template renders the history's calls
//! (` to=functions.NAME<|channel|>commentary json<|message|>`), or after it, as OpenAI's harmony
//! guide shows a model writing them (`<|channel|>commentary to=functions.NAME
//! <|constrain|>json<|message|>`); both are allowed and read. The content type (` json` or
//! ` <|constrain|>json`) may be left out. The arguments are the JSON of the tool's
//! `parameters`. One call per reply: `<|call|>`, an end-of-sequence token in gpt-oss's
//! vocabulary, ends the reply after it (and `<|return|>` after a final answer).
//!
//! The markers are control tokens in gpt-oss's vocabulary that the vocabulary keeps as text
//! (`vocab::HARMONY_MARKERS`), so the grammar writes each as one token.

use super::parse::{Found, ValueScanner};

/// The header of the final answer's content.
pub const FINAL: &str = "<|channel|>final<|message|>";
/// What comes between a call's header and its arguments.
pub const MESSAGE: &str = "<|message|>";
/// The recipient of a call, before its tool's name.
pub const RECIPIENT: &str = "to=functions.";
/// The channel of tool calls.
pub const COMMENTARY: &str = "<|channel|>commentary";
/// The content types a call's header may give, after a space.
pub const CONTENT_TYPES: [&str; 2] = ["<|constrain|>json", "json"];

/// The two ways a call's header is written, for the tool `name`, up to its content type.
pub fn call_heads(name: &str) -> [String; 2] {
    [format!(" {RECIPIENT}{name}{COMMENTARY}"), format!("{COMMENTARY} {RECIPIENT}{name}")]
}

/// A header longer than this without `<|message|>` is no call's.
const MAX_HEADER: usize = 128;

/// How a reply (after its reasoning) begins.
pub(super) enum Lead {
    /// More text is needed to tell.
    More,
    /// Content, after this many bytes (whitespace and the final header, if any).
    Content(usize),
    /// A call.
    Call,
}

/// How the text after the reasoning begins: the final answer (its header taken out), a call's
/// header, or other text (content).
pub(super) fn lead(buf: &str) -> Lead {
    let rest = buf.trim_start();
    if let Some(after) = rest.strip_prefix(FINAL) {
        return Lead::Content(buf.len() - after.len());
    }
    if rest.starts_with(RECIPIENT) || rest.starts_with(&format!("{COMMENTARY} {RECIPIENT}")) {
        return Lead::Call;
    }
    let could_be = |lit: &str| lit.starts_with(rest);
    if could_be(FINAL) || could_be(RECIPIENT) || could_be(&format!("{COMMENTARY} {RECIPIENT}")) {
        Lead::More
    } else {
        Lead::Content(0)
    }
}

/// Reads one call: its header, then its arguments as they stream.
#[derive(Debug, Default)]
pub(super) struct HarmonyCall {
    started: bool,
    scan: ValueScanner,
    done: bool,
}

impl HarmonyCall {
    /// Reads from the front of `buf` what it can.
    pub(super) fn read(&mut self, buf: &mut String) -> Found {
        if self.done {
            return Found::End;
        }
        if !self.started {
            let Some(at) = buf.find(MESSAGE) else {
                return if buf.len() > MAX_HEADER { Found::Bad } else { Found::More };
            };
            let Some(name) = header_name(&buf[..at]) else { return Found::Bad };
            buf.drain(..at + MESSAGE.len());
            self.started = true;
            return Found::Start(name);
        }
        let end = self.scan.scan(buf);
        let text: String = buf.drain(..end.unwrap_or(buf.len())).collect();
        if end.is_some() {
            self.done = true;
        }
        match (text.is_empty(), self.done) {
            (false, _) => Found::Args(text),
            (true, true) => Found::End,
            (true, false) => Found::More,
        }
    }
}

/// The tool's name in a whole call header (before `<|message|>`), if it is one.
fn header_name(header: &str) -> Option<String> {
    let h = header.trim_start();
    let (name, rest) = if let Some(r) = h.strip_prefix(RECIPIENT) {
        let (name, rest) = split_name(r);
        (name, rest.strip_prefix(COMMENTARY)?)
    } else {
        let r = h.strip_prefix(COMMENTARY)?.strip_prefix(' ')?.strip_prefix(RECIPIENT)?;
        split_name(r)
    };
    let ok = rest.is_empty() || CONTENT_TYPES.iter().any(|t| rest.strip_prefix(' ') == Some(t));
    (ok && !name.is_empty()).then(|| name.to_string())
}

/// A tool name (`[A-Za-z0-9_-]`) at the start of `s`, and what follows it.
fn split_name(s: &str) -> (&str, &str) {
    let n = s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-')).unwrap_or(s.len());
    s.split_at(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_in_either_order_name_the_tool() {
        for h in [
            " to=functions.get_weather<|channel|>commentary json",
            "to=functions.get_weather<|channel|>commentary",
            "<|channel|>commentary to=functions.get_weather <|constrain|>json",
            "<|channel|>commentary to=functions.get_weather",
        ] {
            assert_eq!(header_name(h).as_deref(), Some("get_weather"), "{h:?}");
        }
        for h in [
            "to=functions.<|channel|>commentary",
            "to=functions.f<|channel|>analysis",
            "<|channel|>commentary to=functions.f xml",
            "to=functions.f<|channel|>commentary json extra",
        ] {
            assert_eq!(header_name(h), None, "{h:?}");
        }
    }

    #[test]
    fn the_lead_tells_content_from_calls() {
        assert!(matches!(lead("<|channel|>final<|message|>Hi"), Lead::Content(27)));
        assert!(matches!(lead(" to=functions.f"), Lead::Call));
        assert!(matches!(lead("<|channel|>commentary to=functions.f"), Lead::Call));
        assert!(matches!(lead("<|channel|>"), Lead::More));
        assert!(matches!(lead(" to=fun"), Lead::More));
        assert!(matches!(lead("Hello"), Lead::Content(0)));
    }

    #[test]
    fn a_call_streams_its_arguments() {
        let mut c = HarmonyCall::default();
        let mut buf = String::from(" to=functions.f<|channel|>commentary json<|mess");
        assert!(matches!(c.read(&mut buf), Found::More));
        buf.push_str("age|>{\"a\": \"}\"");
        assert!(matches!(c.read(&mut buf), Found::Start(n) if n == "f"));
        assert!(matches!(c.read(&mut buf), Found::Args(t) if t == "{\"a\": \"}\""));
        assert!(matches!(c.read(&mut buf), Found::More));
        buf.push('}');
        assert!(matches!(c.read(&mut buf), Found::Args(t) if t == "}"));
        assert!(matches!(c.read(&mut buf), Found::End));
    }
}
