//! Reading one XML call as it streams ([`XmlCall`], driven by [`crate::tools::OutputParser`]):
//! the name's element, then each argument's key and value, written out as the JSON object of
//! the arguments piece by piece (`{"key": `, the value, `, `, ..., `}`), so the pieces
//! concatenate to the call's arguments. A text value is held back only as far as it could be
//! the start of its element's end; a JSON value is read with the JSON scanner, so an end tag
//! inside one of its strings does not end it.

use super::{Syntax, ValueKind, ValueKinds, XmlDialect};
use crate::tools::parse::{marker_prefix_len, Found, ValueScanner};

/// Where a reader of one call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    /// After the call's opening tag: the name's element.
    Function,
    /// Another argument's key, or the end of the call.
    Element,
    /// A value.
    Value(ValueKind),
    /// After a JSON value: the element's end.
    ValueEnd,
    /// The call's closing tags read, the arguments closed.
    Done,
}

/// Reads one call out of a buffer, as it streams.
#[derive(Debug, Clone)]
pub(in crate::tools) struct XmlCall {
    syntax: &'static Syntax,
    at: At,
    name: String,
    params: usize,
    scan: ValueScanner,
}

fn is_ws(c: char) -> bool {
    matches!(c, ' ' | '\n' | '\r' | '\t')
}

/// Whitespace, then `lit` less its own leading whitespace, at the start of `s`: its end, or
/// `Err(true)` if more text is needed, `Err(false)` if it cannot match.
fn lit(s: &str, lit: &str) -> Result<usize, bool> {
    let i = s.len() - s.trim_start_matches(is_ws).len();
    let lit = lit.trim_start_matches(is_ws);
    let rest = &s[i..];
    if rest.starts_with(lit) {
        Ok(i + lit.len())
    } else {
        Err(lit.starts_with(rest))
    }
}

/// `open`, a name up to `close`, then `close`: the name and the bytes read. A name holds none of
/// `<`, `>`, `"` and no newline.
fn tag(s: &str, open: &str, close: &str) -> Result<(String, usize), bool> {
    let start = lit(s, open)?;
    let rest = &s[start..];
    let bad = |c: char| matches!(c, '<' | '>' | '"' | '\n' | '\r');
    match rest.find(close) {
        Some(n) if n > 0 && !rest[..n].contains(bad) => Ok((rest[..n].to_string(), start + n + close.len())),
        Some(_) => Err(false),
        None => {
            let held = marker_prefix_len(rest, close);
            Err(!rest[..rest.len() - held].contains(bad))
        }
    }
}

impl XmlCall {
    pub(in crate::tools) fn new(dialect: XmlDialect) -> XmlCall {
        XmlCall {
            syntax: dialect.syntax(),
            at: At::Function,
            name: String::new(),
            params: 0,
            scan: ValueScanner::default(),
        }
    }

    /// Reads what it can from the start of `buf`, draining what it read.
    pub(in crate::tools) fn read(&mut self, buf: &mut String, kinds: &ValueKinds) -> Found {
        let syn = self.syntax;
        let failed = |more: bool| if more { Found::More } else { Found::Bad };
        match self.at {
            At::Function => match tag(buf, syn.name_open, syn.name_close) {
                Ok((name, n)) => {
                    buf.drain(..n);
                    self.name = name.clone();
                    self.at = At::Element;
                    Found::Start(name)
                }
                Err(more) => failed(more),
            },
            At::Element => {
                let end = syn.call_end;
                if let Ok(n) = lit(buf, end) {
                    buf.drain(..n);
                    self.at = At::Done;
                    return Found::Args(if self.params == 0 { "{}" } else { "}" }.into());
                }
                match tag(buf, syn.key_open, syn.key_close) {
                    Ok((key, n)) => {
                        buf.drain(..n);
                        let kind = kinds.kind(&self.name, &key);
                        let mut text = String::from(if self.params == 0 { "{" } else { ", " });
                        text.push_str(&serde_json::to_string(&key).expect("a string serializes"));
                        text.push_str(": ");
                        if kind == ValueKind::Text {
                            text.push('"');
                        }
                        self.params += 1;
                        self.scan = ValueScanner::default();
                        self.at = At::Value(kind);
                        Found::Args(text)
                    }
                    // Neither: more text may still make the end of the call.
                    Err(more) => failed(more || lit(buf, end) == Err(true)),
                }
            }
            At::Value(ValueKind::Text) => {
                let (n, end) = match buf.find(syn.value_end) {
                    Some(p) => (p, true),
                    None => (buf.len() - marker_prefix_len(buf, syn.value_end), false),
                };
                let value: String = buf.drain(..n).collect();
                let quoted = serde_json::to_string(&value).expect("a string serializes");
                let mut text = quoted[1..quoted.len() - 1].to_string();
                if end {
                    buf.drain(..syn.value_end.len());
                    text.push('"');
                    self.at = At::Element;
                }
                if text.is_empty() {
                    return Found::More;
                }
                Found::Args(text)
            }
            At::Value(ValueKind::Json) => {
                // A leading newline (Qwen's) is the element's, not the value's.
                if !self.scan.started() {
                    let skip = buf.len() - buf.trim_start_matches(is_ws).len();
                    buf.drain(..skip);
                }
                let end = self.scan.scan(buf);
                let n = end.unwrap_or(buf.len());
                let text: String = buf.drain(..n).collect();
                if end.is_some() {
                    self.at = At::ValueEnd;
                }
                if text.is_empty() {
                    return if end.is_some() { self.read(buf, kinds) } else { Found::More };
                }
                Found::Args(text)
            }
            At::Done => Found::End,
            At::ValueEnd => match lit(buf, syn.value_end) {
                Ok(n) => {
                    buf.drain(..n);
                    self.at = At::Element;
                    self.read(buf, kinds)
                }
                Err(more) => failed(more),
            },
        }
    }
}
