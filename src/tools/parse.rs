//! [`OutputParser`]: splits a reply, as it streams, into content and tool calls.
//!
//! The grammar of [`super::calls_grammar`] fixes the shape of every call
//! (`<tool_call>` ws `{"name": "...", "arguments": VALUE}` ws `</tool_call>`), so this is a
//! small state machine, not a JSON parser: it finds the marker, reads the name, then streams the
//! arguments' text while tracking JSON nesting to see where the value ends. Content is released
//! as it comes, except a tail that could be the start of the marker.
//!
//! Invariant: the [`Piece::ToolArgs`] texts of a call concatenate to exactly the arguments'
//! text in the output, so streamed and non-streamed calls agree.

use super::{TOOL_CALL_CLOSE, TOOL_CALL_OPEN};

/// Something the reply says, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Content(String),
    ToolStart { index: usize, id: String, name: String },
    ToolArgs { index: usize, text: String },
}

/// A finished call, its arguments as the text the output holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Content (or, with tools, content until a marker).
    Text,
    /// After the marker, before the arguments' first character.
    Header,
    Args,
    /// After the arguments, before the closing marker.
    Tail,
    /// After a closing marker: another call or the end.
    Between,
    /// Something the grammar does not allow: kept as an error for `finish`.
    Broken,
}

pub struct OutputParser {
    tools: bool,
    state: State,
    buf: String,
    scan: ValueScanner,
    calls: Vec<RawCall>,
    content: String,
}

fn ws(c: char) -> bool {
    matches!(c, ' ' | '\n' | '\r' | '\t')
}

enum Header {
    Incomplete,
    Bad,
    /// The name, and the byte length of the header (up to the arguments' first character).
    Done(String, usize),
}

/// `ws { ws "name" ws : ws "NAME" ws , ws "arguments" ws : ws` followed by a non-space.
fn parse_header(s: &str) -> Header {
    let b = s.as_bytes();
    let mut i = 0;
    let skip = |i: &mut usize| {
        while *i < b.len() && ws(b[*i] as char) {
            *i += 1;
        }
    };
    // Ok(true): matched; Ok(false): the text ends inside `lit`.
    let expect = |i: &mut usize, lit: &str| -> Result<bool, ()> {
        let rest = &b[*i..];
        if rest.starts_with(lit.as_bytes()) {
            *i += lit.len();
            Ok(true)
        } else if lit.as_bytes().starts_with(rest) {
            Ok(false)
        } else {
            Err(())
        }
    };
    macro_rules! lit {
        ($l:expr) => {
            skip(&mut i);
            match expect(&mut i, $l) {
                Ok(true) => {}
                Ok(false) => return Header::Incomplete,
                Err(()) => return Header::Bad,
            }
        };
    }
    lit!("{");
    lit!("\"name\"");
    lit!(":");
    lit!("\"");
    let start = i;
    while i < b.len() && b[i] != b'"' {
        if !(b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'-') {
            return Header::Bad;
        }
        i += 1;
    }
    if i == b.len() {
        return Header::Incomplete;
    }
    let name = s[start..i].to_string();
    i += 1;
    lit!(",");
    lit!("\"arguments\"");
    lit!(":");
    skip(&mut i);
    if i == b.len() {
        return Header::Incomplete;
    }
    Header::Done(name, i)
}

#[derive(Debug, Clone, Copy, Default)]
struct ValueScanner {
    started: bool,
    kind: u8, // b'{' container, b'"' string, b'0' scalar
    depth: u32,
    in_str: bool,
    esc: bool,
}

#[derive(PartialEq)]
enum Step {
    Continue,
    /// This character was the value's last.
    EndsWith,
    /// The value ended before this character.
    EndedBefore,
}

impl ValueScanner {
    fn push(&mut self, c: char) -> Step {
        if !self.started {
            self.started = true;
            match c {
                '{' | '[' => {
                    self.kind = b'{';
                    self.depth = 1;
                }
                '"' => {
                    self.kind = b'"';
                    self.in_str = true;
                }
                _ => self.kind = b'0',
            }
            return Step::Continue;
        }
        if self.in_str {
            if self.esc {
                self.esc = false;
            } else if c == '\\' {
                self.esc = true;
            } else if c == '"' {
                self.in_str = false;
                if self.kind == b'"' {
                    return Step::EndsWith;
                }
            }
            return Step::Continue;
        }
        match self.kind {
            b'{' => match c {
                '"' => self.in_str = true,
                '{' | '[' => self.depth += 1,
                '}' | ']' => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        return Step::EndsWith;
                    }
                }
                _ => {}
            },
            _ => {
                if ws(c) || matches!(c, ',' | '}' | ']') {
                    return Step::EndedBefore;
                }
            }
        }
        Step::Continue
    }
}

/// The longest suffix of `s` that is a proper prefix of `marker` (its byte length).
fn marker_prefix_len(s: &str, marker: &str) -> usize {
    (1..marker.len().min(s.len() + 1))
        .rev()
        .find(|&n| s.is_char_boundary(s.len() - n) && marker.starts_with(&s[s.len() - n..]))
        .unwrap_or(0)
}

impl OutputParser {
    /// `tools`: whether the output may contain tool calls.
    pub fn new(tools: bool) -> OutputParser {
        OutputParser {
            tools,
            state: State::Text,
            buf: String::new(),
            scan: ValueScanner::default(),
            calls: Vec::new(),
            content: String::new(),
        }
    }

    pub fn calls(&self) -> &[RawCall] {
        &self.calls
    }

    /// All the content so far.
    pub fn content(&self) -> &str {
        &self.content
    }

    fn emit_content(&mut self, s: String, out: &mut Vec<Piece>) {
        if !s.is_empty() {
            self.content.push_str(&s);
            out.push(Piece::Content(s));
        }
    }

    /// Feeds the next text; returns what it completes.
    pub fn feed(&mut self, text: &str) -> Vec<Piece> {
        let mut out = Vec::new();
        if !self.tools {
            self.emit_content(text.to_string(), &mut out);
            return out;
        }
        self.buf.push_str(text);
        loop {
            match self.state {
                State::Text => {
                    if let Some(p) = self.buf.find(TOOL_CALL_OPEN) {
                        let before = self.buf[..p].to_string();
                        self.emit_content(before, &mut out);
                        self.buf.drain(..p + TOOL_CALL_OPEN.len());
                        self.state = State::Header;
                        continue;
                    }
                    let keep = marker_prefix_len(&self.buf, TOOL_CALL_OPEN);
                    let release: String = self.buf.drain(..self.buf.len() - keep).collect();
                    self.emit_content(release, &mut out);
                    break;
                }
                State::Header => match parse_header(&self.buf) {
                    Header::Incomplete => break,
                    Header::Bad => {
                        self.state = State::Broken;
                        break;
                    }
                    Header::Done(name, n) => {
                        self.buf.drain(..n);
                        let index = self.calls.len();
                        let id = call_id();
                        self.calls.push(RawCall { id: id.clone(), name: name.clone(), arguments: String::new() });
                        out.push(Piece::ToolStart { index, id, name });
                        self.scan = ValueScanner::default();
                        self.state = State::Args;
                    }
                },
                State::Args => {
                    let mut end = None; // byte offset where the value ends
                    for (i, c) in self.buf.char_indices() {
                        match self.scan.push(c) {
                            Step::Continue => {}
                            Step::EndsWith => {
                                end = Some(i + c.len_utf8());
                                break;
                            }
                            Step::EndedBefore => {
                                end = Some(i);
                                break;
                            }
                        }
                    }
                    let n = end.unwrap_or(self.buf.len());
                    let text: String = self.buf.drain(..n).collect();
                    let index = self.calls.len() - 1;
                    if !text.is_empty() {
                        self.calls[index].arguments.push_str(&text);
                        out.push(Piece::ToolArgs { index, text });
                    }
                    if end.is_none() {
                        break;
                    }
                    self.state = State::Tail;
                }
                State::Tail => match self.buf.find(TOOL_CALL_CLOSE) {
                    Some(p) => {
                        let between = &self.buf[..p];
                        if !between.chars().all(|c| ws(c) || c == '}') {
                            self.state = State::Broken;
                            break;
                        }
                        self.buf.drain(..p + TOOL_CALL_CLOSE.len());
                        self.state = State::Between;
                    }
                    None => break,
                },
                State::Between => {
                    let t = self.buf.trim_start_matches(ws);
                    if t.starts_with(TOOL_CALL_OPEN) {
                        let skip = self.buf.len() - t.len() + TOOL_CALL_OPEN.len();
                        self.buf.drain(..skip);
                        self.state = State::Header;
                    } else if TOOL_CALL_OPEN.starts_with(t) {
                        break;
                    } else {
                        self.state = State::Broken;
                        break;
                    }
                }
                State::Broken => break,
            }
        }
        out
    }

    /// The end of the output: releases held-back content; an error if a call is unfinished
    /// or malformed (which the grammar rules out, unless a stop string cut the output).
    pub fn finish(&mut self) -> Result<Vec<Piece>, String> {
        let mut out = Vec::new();
        match self.state {
            State::Text => {
                let rest = std::mem::take(&mut self.buf);
                self.emit_content(rest, &mut out);
                Ok(out)
            }
            State::Between if self.buf.trim_matches(ws).is_empty() => Ok(out),
            State::Broken => Err("a tool call in the output is malformed".into()),
            _ => Err("the output ends inside a tool call".into()),
        }
    }
}

/// A fresh tool-call id: `call_` and 24 letters and digits.
pub fn call_id() -> String {
    use rand::Rng;
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    let s: String = (0..24).map(|_| CHARS[rng.random_range(0..CHARS.len())] as char).collect();
    format!("call_{s}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(chunks: &[&str]) -> (String, Vec<(String, String)>, Result<(), String>) {
        let mut p = OutputParser::new(true);
        let mut content = String::new();
        let mut streamed: Vec<(String, String)> = Vec::new();
        let mut pieces = Vec::new();
        for c in chunks {
            pieces.extend(p.feed(c));
        }
        let end = p.finish().map(|rest| pieces.extend(rest));
        for piece in pieces {
            match piece {
                Piece::Content(s) => content.push_str(&s),
                Piece::ToolStart { name, .. } => streamed.push((name, String::new())),
                Piece::ToolArgs { index, text } => streamed[index].1.push_str(&text),
            }
        }
        let calls: Vec<(String, String)> = p.calls().iter().map(|c| (c.name.clone(), c.arguments.clone())).collect();
        assert_eq!(calls, streamed);
        (content, calls, end)
    }

    #[test]
    fn content_and_calls_in_any_chunking() {
        let text = concat!(
            "Let me see. <tool_call>\n{\"name\": \"get_weather\", \"arguments\": ",
            "{\"city\": \"P}a\\\"ris\", \"n\": [1, {\"x\": 2}]}}\n</tool_call>\n",
            "<tool_call>\n{\"name\":\"f-2\",\"arguments\":7}\n</tool_call>"
        );
        let whole = run(&[text]);
        assert_eq!(whole.0, "Let me see. ");
        assert_eq!(
            whole.1,
            vec![
                ("get_weather".to_string(), "{\"city\": \"P}a\\\"ris\", \"n\": [1, {\"x\": 2}]}".to_string()),
                ("f-2".to_string(), "7".to_string())
            ]
        );
        assert_eq!(whole.2, Ok(()));
        let chars: Vec<String> = text.chars().map(|c| c.to_string()).collect();
        let by_char = run(&chars.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(by_char, whole);
    }

    #[test]
    fn marker_prefixes_are_held_back_then_released() {
        let mut p = OutputParser::new(true);
        assert_eq!(p.feed("a <tool"), vec![Piece::Content("a ".into())]);
        assert_eq!(p.feed("_cal"), vec![]);
        assert_eq!(p.finish().unwrap(), vec![Piece::Content("<tool_cal".into())]);
        assert_eq!(run(&["x <tool_call>{\"name\": \"f\""]).2, Err("the output ends inside a tool call".into()));
        let (c, calls, ok) = run(&["no tools <tool_cal> here"]);
        assert_eq!((c.as_str(), calls.len(), ok), ("no tools <tool_cal> here", 0, Ok(())));
    }
}
