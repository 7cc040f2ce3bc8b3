//! [`OutputParser`]: splits a reply, as it streams, into content and tool calls.
//!
//! The grammar of [`super::calls_grammar`] fixes the shape of every call in each
//! [`ToolFormat`] (Hermes: `<tool_call>` ws `{"name": "...", "arguments": VALUE}` ws
//! `</tool_call>`; Llama 3: the reply is `{"name": "...", "parameters": VALUE}`; List:
//! `[TOOL_CALLS]` ` `? `[` call (`,` call)* `]` (other markers, and a closing one, by dialect); Xml: `<tool_call>` and parameter elements, read
//! by [`super::xml`]'s reader, which writes the arguments as JSON), so this is a small state
//! machine, not a JSON parser: it finds where the calls begin (the marker, or for Llama 3 a reply that begins with
//! `{`), reads the name, then streams the arguments' text while tracking JSON nesting to see
//! where the value ends. Content is released as it comes, except a tail that could be the
//! start of the marker.
//!
//! In the code, each state has one method that reads what it can of the buffered text
//! (`text`, `header`, `args`, `after_call`, ...); [`OutputParser::feed`] steps until one says it
//! needs more text.
//!
//! Invariant: the [`Piece::ToolArgs`] texts of a call concatenate to exactly the arguments'
//! text in the output, so streamed and non-streamed calls agree.

use std::sync::Arc;

use super::harmony::HarmonyCall;
use super::pythonic::PyCalls;
use super::xml::read::XmlCall;
use super::xml::ValueKinds;
use super::{ToolFormat, TOOL_CALL_CLOSE};

/// What a reader of calls in a format of its own (XML, pythonic) found.
pub(super) enum Found {
    /// More text is needed.
    More,
    /// Text the format does not allow here.
    Bad,
    /// The call's name: it begins.
    Start(String),
    /// More of the arguments' JSON text.
    Args(String),
    /// The call is over (XML: its closing tag read) or the calls are (pythonic: the list).
    End,
}

/// Something the reply says, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Text of the reply's reasoning part (`<think>`…), before its content (the reasoning
    /// split comes before the calls parser: `model::reasoning::Splitter`).
    Reasoning(String),
    Content(String),
    ToolStart {
        index: usize,
        id: String,
        name: String,
    },
    ToolArgs {
        index: usize,
        text: String,
    },
}

/// What a stream of [`Piece`]s adds up to, as a reader of the stream rebuilds it: the
/// reasoning, the content, and each call's name and arguments in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Joined {
    pub reasoning: String,
    pub content: String,
    pub calls: Vec<(String, String)>,
}

impl Joined {
    /// Adds one piece.
    pub fn push(&mut self, piece: Piece) {
        match piece {
            Piece::Reasoning(s) => self.reasoning.push_str(&s),
            Piece::Content(s) => self.content.push_str(&s),
            Piece::ToolStart { name, .. } => self.calls.push((name, String::new())),
            Piece::ToolArgs { index, text } => self.calls[index].1.push_str(&text),
        }
    }
}

/// A finished call, its arguments as the text the output holds (for [`ToolFormat::Xml`], the
/// JSON object its parameter elements stand for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Content until a marker (Hermes, List, ...).
    Text,
    /// Llama 3, pythonic and harmony, nothing read yet: a reply that begins with `{` (`[`, a
    /// harmony call's header) is a call.
    Lead,
    /// Content to the end (no tools, or a Llama 3 reply that is not a call).
    Plain,
    /// List, after the marker: ` `? `[` before the first call.
    ListOpen,
    /// List, after its `]`: the dialect's closing marker (`</TOOLCALL>`).
    ListClose,
    /// Before a call object, up to the arguments' first character.
    Header,
    /// MistralArgs after `[TOOL_CALLS]`: the name, the id, `[ARGS]`; DeepSeek: a call's
    /// opening marker, the name and the separator.
    NamedHeader,
    /// DeepSeek, after a call: another, or the end of the calls.
    DeepSeekNext,
    Args,
    /// After the arguments: ws `}` closes the call object.
    Tail,
    /// After a call object: what the format puts between calls.
    AfterCall,
    /// Hermes and Xml after a closing marker, MistralArgs after the arguments: another call or
    /// the end.
    Between,
    /// Xml, inside a call (read by [`XmlCall`]).
    Xml,
    /// Pythonic, inside the list of calls (read by [`PyCalls`]).
    Py,
    /// Harmony, inside a call (read by [`HarmonyCall`]).
    Harmony,
    /// After the last call: only whitespace may follow.
    End,
    /// Something the grammar does not allow: kept as an error for `finish`.
    Broken,
}

pub struct OutputParser {
    format: ToolFormat,
    state: State,
    buf: String,
    scan: ValueScanner,
    calls: Vec<RawCall>,
    content: String,
    /// Xml: the call being read, and how each tool's parameter values are written.
    xml: Option<XmlCall>,
    kinds: Arc<ValueKinds>,
    /// Pythonic: the reader, and the text it read before the first call began (content after
    /// all, if no call follows: an answer in a response format that begins with `[`).
    py: PyCalls,
    py_held: String,
    harmony: HarmonyCall,
}

fn ws(c: char) -> bool {
    matches!(c, ' ' | '\n' | '\r' | '\t')
}

/// What the start of a buffer says.
enum Read {
    Incomplete,
    Bad,
    /// The name (empty when none is read), and the byte length read.
    Done(String, usize),
}

/// Whitespace, then `lit`: `Some(Ok(n))` matched `n` bytes, `Some(Err(()))` cannot match,
/// `None` the text ends before it is known.
fn expect(s: &str, lit: &str) -> Option<Result<usize, ()>> {
    let i = s.len() - s.trim_start_matches(ws).len();
    let rest = &s.as_bytes()[i..];
    if rest.starts_with(lit.as_bytes()) {
        Some(Ok(i + lit.len()))
    } else if lit.as_bytes().starts_with(rest) {
        None
    } else {
        Some(Err(()))
    }
}

fn read_lit(s: &str, lit: &str) -> Read {
    match expect(s, lit) {
        None => Read::Incomplete,
        Some(Err(())) => Read::Bad,
        Some(Ok(n)) => Read::Done(String::new(), n),
    }
}

/// `ws { ws "name" ws : ws "NAME" ws , ws "KEY" ws : ws` followed by a non-space.
fn parse_header(s: &str, key: &str) -> Read {
    let b = s.as_bytes();
    let mut i = 0;
    macro_rules! lit {
        ($l:expr) => {
            match expect(&s[i..], $l) {
                Some(Ok(n)) => i += n,
                None => return Read::Incomplete,
                Some(Err(())) => return Read::Bad,
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
            return Read::Bad;
        }
        i += 1;
    }
    if i == b.len() {
        return Read::Incomplete;
    }
    let name = s[start..i].to_string();
    i += 1;
    lit!(",");
    lit!(&format!("\"{key}\""));
    lit!(":");
    i = s.len() - s[i..].trim_start_matches(ws).len();
    if i == b.len() {
        return Read::Incomplete;
    }
    Read::Done(name, i)
}

/// Where a JSON value ends, fed one character at a time (strings and nesting tracked).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ValueScanner {
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
    /// Feeds `s` until the value ends: the byte offset in `s` where it does, `None` if it goes
    /// on past `s`.
    pub(super) fn scan(&mut self, s: &str) -> Option<usize> {
        for (i, c) in s.char_indices() {
            match self.push(c) {
                Step::Continue => {}
                Step::EndsWith => return Some(i + c.len_utf8()),
                Step::EndedBefore => return Some(i),
            }
        }
        None
    }

    /// Whether the value's first character has been read.
    pub(super) fn started(&self) -> bool {
        self.started
    }

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
                if ws(c) || matches!(c, ',' | '}' | ']' | '[' | '<' | ')') {
                    return Step::EndedBefore;
                }
            }
        }
        Step::Continue
    }
}

/// The longest suffix of `s` that is a proper prefix of `marker` (its byte length).
pub(super) fn marker_prefix_len(s: &str, marker: &str) -> usize {
    (1..marker.len().min(s.len() + 1))
        .rev()
        .find(|&n| s.is_char_boundary(s.len() - n) && marker.starts_with(&s[s.len() - n..]))
        .unwrap_or(0)
}

impl OutputParser {
    /// `tools`: the format of the calls the output may contain (`None`: no calls, all content).
    pub fn new(tools: Option<ToolFormat>) -> OutputParser {
        let (format, state) = match tools {
            None => (ToolFormat::default(), State::Plain),
            Some(f @ (ToolFormat::Llama3 | ToolFormat::Pythonic | ToolFormat::Harmony)) => (f, State::Lead),
            Some(f) => (f, State::Text),
        };
        OutputParser {
            format,
            state,
            buf: String::new(),
            scan: ValueScanner::default(),
            calls: Vec::new(),
            content: String::new(),
            xml: None,
            kinds: Arc::default(),
            py: PyCalls::default(),
            py_held: String::new(),
            harmony: HarmonyCall::default(),
        }
    }

    /// This parser, reading [`ToolFormat::Xml`] parameter values as `kinds` says (without
    /// them every value is read as text).
    pub fn with_kinds(mut self, kinds: Arc<ValueKinds>) -> OutputParser {
        self.kinds = kinds;
        self
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

    /// Reads a literal at the start of the buffer (after whitespace) and moves to `next`;
    /// false when more text is needed or it cannot match (then `Broken`).
    fn step_lit(&mut self, lit: &str, next: State) -> bool {
        match read_lit(&self.buf, lit) {
            Read::Done(_, n) => {
                self.buf.drain(..n);
                self.state = next;
                true
            }
            Read::Incomplete => false,
            Read::Bad => {
                self.state = State::Broken;
                false
            }
        }
    }

    /// Feeds the next text; returns what it completes.
    pub fn feed(&mut self, text: &str) -> Vec<Piece> {
        let mut out = Vec::new();
        self.buf.push_str(text);
        while self.step(&mut out) {}
        out
    }

    /// Reads what it can of the buffer in the current state; true when the state changed and
    /// there may be more to read, false when it needs more text (or the output is broken).
    fn step(&mut self, out: &mut Vec<Piece>) -> bool {
        match self.state {
            State::Plain => self.plain(out),
            State::Lead => self.lead(),
            State::Text => self.text(out),
            State::ListOpen => self.step_lit("[", State::Header),
            State::ListClose => {
                let ToolFormat::List(d) = self.format else { unreachable!("ListClose is List's") };
                self.step_lit(d.markers().1.expect("a dialect with a closing marker"), State::End)
            }
            State::Header => self.header(out),
            State::NamedHeader => self.named_header(out),
            State::DeepSeekNext => self.deepseek_next(),
            State::Args => self.args(out),
            State::Tail => self.step_lit("}", State::AfterCall),
            State::AfterCall => self.after_call(),
            State::Between => self.between(),
            State::Xml => self.xml(out),
            State::Py => self.pythonic(out),
            State::Harmony => {
                let found = self.harmony.read(&mut self.buf);
                self.found(found, State::End, out)
            }
            State::End => self.end(),
            State::Broken => false,
        }
    }

    /// Content to the end: all of the buffer.
    fn plain(&mut self, out: &mut Vec<Piece>) -> bool {
        let all = std::mem::take(&mut self.buf);
        self.emit_content(all, out);
        false
    }

    /// Llama 3's and pythonic's first character: `{` (`[`) begins the calls, anything else is
    /// content; harmony's call header begins a call, its final answer's header content.
    fn lead(&mut self) -> bool {
        if self.format == ToolFormat::Harmony {
            return match super::harmony::lead(&self.buf) {
                super::harmony::Lead::More => false,
                super::harmony::Lead::Call => {
                    self.state = State::Harmony;
                    true
                }
                super::harmony::Lead::Content(n) => {
                    self.buf.drain(..n);
                    self.state = State::Plain;
                    true
                }
            };
        }
        match self.buf.chars().next() {
            None => false,
            Some(c) if Some(c) == self.format.lead() => {
                self.state = if self.format == ToolFormat::Pythonic { State::Py } else { State::Header };
                true
            }
            Some(_) => {
                self.state = State::Plain;
                true
            }
        }
    }

    /// Content up to the marker; a tail that could be the marker's start is held back.
    fn text(&mut self, out: &mut Vec<Piece>) -> bool {
        let marker = self.format.marker().expect("Text is for formats with a marker");
        if let Some(p) = self.buf.find(marker) {
            let before = self.buf[..p].to_string();
            self.emit_content(before, out);
            self.buf.drain(..p + marker.len());
            self.state = self.call_state();
            return true;
        }
        let keep = marker_prefix_len(&self.buf, marker);
        let release: String = self.buf.drain(..self.buf.len() - keep).collect();
        self.emit_content(release, out);
        false
    }

    /// A call object's header, up to its arguments: the call begins.
    fn header(&mut self, out: &mut Vec<Piece>) -> bool {
        match parse_header(&self.buf, self.format.arguments_key()) {
            Read::Incomplete => false,
            // A Llama 3 reply that begins with `{` but is no call: an answer in a response
            // format (under `Auto`), all content.
            Read::Bad if self.format == ToolFormat::Llama3 && self.calls.is_empty() => {
                self.state = State::Plain;
                true
            }
            Read::Bad => {
                self.state = State::Broken;
                false
            }
            Read::Done(name, n) => {
                self.buf.drain(..n);
                self.start_call(name, None, out);
                self.scan = ValueScanner::default();
                self.state = State::Args;
                true
            }
        }
    }

    /// The arguments' text, as far as the buffer goes or to the value's end.
    fn args(&mut self, out: &mut Vec<Piece>) -> bool {
        let end = self.scan.scan(&self.buf); // byte offset where the value ends
        let n = end.unwrap_or(self.buf.len());
        let text: String = self.buf.drain(..n).collect();
        let index = self.calls.len() - 1;
        if !text.is_empty() {
            self.calls[index].arguments.push_str(&text);
            out.push(Piece::ToolArgs { index, text });
        }
        if end.is_none() {
            return false;
        }
        // Only a call object has a `}` to close after its arguments.
        self.state = match self.format {
            ToolFormat::MistralArgs { .. } | ToolFormat::DeepSeek => State::AfterCall,
            _ => State::Tail,
        };
        true
    }

    /// MistralArgs: `NAME` (`[CALL_ID]` id)? `[ARGS]`; DeepSeek: `<｜tool▁call▁begin｜>` `NAME`
    /// `<｜tool▁sep｜>`. Then the arguments: the call begins.
    fn named_header(&mut self, out: &mut Vec<Piece>) -> bool {
        use super::format::{DEEPSEEK_CALL_BEGIN, DEEPSEEK_SEP, MISTRAL_ARGS, MISTRAL_CALL_ID};
        let (open, sep, call_id) = match self.format {
            ToolFormat::MistralArgs { call_id } => ("", MISTRAL_ARGS, call_id),
            ToolFormat::DeepSeek => (DEEPSEEK_CALL_BEGIN, DEEPSEEK_SEP, false),
            _ => unreachable!("NamedHeader is MistralArgs's and DeepSeek's"),
        };
        // `lit` at byte `i` of the buffer: its end, `Err(true)` if more text is needed,
        // `Err(false)` if it cannot match.
        let at = |buf: &str, i: usize, lit: &str| -> Result<usize, bool> {
            let rest = &buf[i..];
            if rest.starts_with(lit) {
                Ok(i + lit.len())
            } else {
                Err(lit.starts_with(rest))
            }
        };
        let read = |buf: &str| -> Result<(String, Option<String>, usize), bool> {
            let start = at(buf, 0, open)?;
            let name_ok = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
            let end = start + buf[start..].find(|c: char| !name_ok(c)).ok_or(true)?;
            if end == start {
                return Err(false);
            }
            let name = buf[start..end].to_string();
            let mut i = end;
            let mut id = None;
            if call_id {
                i = at(buf, i, MISTRAL_CALL_ID)?;
                let n = buf[i..].find(|c: char| !c.is_ascii_alphanumeric()).ok_or(true)?;
                id = Some(buf[i..i + n].to_string());
                i += n;
            }
            i = at(buf, i, sep)?;
            // The arguments' first character decides how they are read.
            if i == buf.len() {
                return Err(true);
            }
            Ok((name, id, i))
        };
        match read(&self.buf) {
            Err(true) => false,
            Err(false) => {
                self.state = State::Broken;
                false
            }
            Ok((name, id, n)) => {
                self.buf.drain(..n);
                self.start_call(name, id, out);
                self.scan = ValueScanner::default();
                self.state = State::Args;
                true
            }
        }
    }

    /// DeepSeek, after a call: another call, or `<｜tool▁calls▁end｜>`.
    fn deepseek_next(&mut self) -> bool {
        use super::format::{DEEPSEEK_CALLS_END, DEEPSEEK_CALL_BEGIN};
        // (The next call's opening marker is read with its name.)
        self.one_of((DEEPSEEK_CALLS_END, State::End, true), (DEEPSEEK_CALL_BEGIN, State::NamedHeader, false))
    }

    /// One of two literals next (after whitespace): the one read moves to its state, its text
    /// drained if its flag says so; false when more text is needed or neither can come (then
    /// `Broken`).
    fn one_of(&mut self, first: (&str, State, bool), second: (&str, State, bool)) -> bool {
        let reads = [read_lit(&self.buf, first.0), read_lit(&self.buf, second.0)];
        for (read, (_, next, drain)) in reads.iter().zip([first, second]) {
            if let Read::Done(_, n) = read {
                if drain {
                    self.buf.drain(..*n);
                }
                self.state = next;
                return true;
            }
        }
        if reads.iter().all(|r| matches!(r, Read::Bad)) {
            self.state = State::Broken;
        }
        false
    }

    /// What the format puts after a call object: Hermes' closing marker, nothing for Llama 3,
    /// a list's `,` (another call) or `]` (the end, or its closing marker).
    fn after_call(&mut self) -> bool {
        match self.format {
            ToolFormat::Hermes => self.step_lit(TOOL_CALL_CLOSE, State::Between),
            ToolFormat::Xml(_) | ToolFormat::Pythonic | ToolFormat::Harmony => {
                unreachable!("its reader reads a call to its end")
            }
            ToolFormat::MistralArgs { .. } => {
                self.state = State::Between;
                true
            }
            ToolFormat::DeepSeek => self.step_lit(super::format::DEEPSEEK_CALL_END, State::DeepSeekNext),
            ToolFormat::Llama3 => {
                self.state = State::End;
                true
            }
            ToolFormat::List(d) => {
                let end = if d.markers().1.is_some() { State::ListClose } else { State::End };
                self.one_of((",", State::Header, true), ("]", end, true))
            }
        }
    }

    /// The state after the format's marker.
    fn call_state(&mut self) -> State {
        match self.format {
            ToolFormat::List(_) => State::ListOpen,
            ToolFormat::MistralArgs { .. } | ToolFormat::DeepSeek => State::NamedHeader,
            ToolFormat::Xml(dialect) => {
                self.xml = Some(XmlCall::new(dialect));
                State::Xml
            }
            _ => State::Header,
        }
    }

    /// Xml, inside a call.
    fn xml(&mut self, out: &mut Vec<Piece>) -> bool {
        let call = self.xml.as_mut().expect("Xml reads a call");
        let found = call.read(&mut self.buf, &self.kinds);
        self.found(found, State::Between, out)
    }

    /// What a format's own reader found: a call begins, more of its arguments, the end (then
    /// `end`); false when it needs more text or the text is broken.
    fn found(&mut self, found: Found, end: State, out: &mut Vec<Piece>) -> bool {
        match found {
            Found::More => false,
            Found::Bad => {
                self.state = State::Broken;
                false
            }
            Found::Start(name) => {
                self.start_call(name, None, out);
                true
            }
            Found::Args(text) => {
                let index = self.calls.len() - 1;
                self.calls[index].arguments.push_str(&text);
                out.push(Piece::ToolArgs { index, text });
                true
            }
            Found::End => {
                self.state = end;
                true
            }
        }
    }

    /// A call begins: `id` or a fresh one in the format's shape.
    fn start_call(&mut self, name: String, id: Option<String>, out: &mut Vec<Piece>) {
        let index = self.calls.len();
        let id = id.unwrap_or_else(|| self.format.call_id());
        self.calls.push(RawCall { id: id.clone(), name: name.clone(), arguments: String::new() });
        out.push(Piece::ToolStart { index, id, name });
    }

    /// Pythonic, inside the list.
    fn pythonic(&mut self, out: &mut Vec<Piece>) -> bool {
        // Before the first call, what the reader drains (from the front) is kept.
        let snapshot = self.calls.is_empty().then(|| self.buf.clone());
        let found = self.py.read(&mut self.buf);
        if let Some(old) = snapshot {
            self.py_held.push_str(&old[..old.len() - self.buf.len()]);
        }
        match found {
            // Text that begins with `[` but is no list of calls: content (see `py_held`).
            Found::Bad if self.calls.is_empty() => {
                let held = std::mem::take(&mut self.py_held);
                self.buf.insert_str(0, &held);
                self.state = State::Plain;
                true
            }
            found => {
                if let Found::Start(_) = found {
                    self.py_held.clear();
                }
                self.found(found, State::End, out)
            }
        }
    }

    /// Hermes, Xml and MistralArgs, between calls: another marker (`<tool_call>`, `[TOOL_CALLS]`).
    fn between(&mut self) -> bool {
        let marker = self.format.marker().expect("formats with calls in a row have a marker");
        match read_lit(&self.buf, marker) {
            Read::Done(_, n) => {
                self.buf.drain(..n);
                self.state = self.call_state();
                true
            }
            Read::Incomplete => false,
            Read::Bad => {
                self.state = State::Broken;
                false
            }
        }
    }

    /// After the last call: anything but whitespace breaks the output.
    fn end(&mut self) -> bool {
        if !self.buf.trim_start_matches(ws).is_empty() {
            self.state = State::Broken;
        }
        false
    }

    /// The end of the output: releases held-back content; an error if a call is unfinished
    /// or malformed (which the grammar rules out, unless a stop string cut the output).
    pub fn finish(&mut self) -> Result<Vec<Piece>, String> {
        let mut out = Vec::new();
        match self.state {
            State::Text | State::Plain | State::Lead => {
                let rest = std::mem::take(&mut self.buf);
                self.emit_content(rest, &mut out);
                Ok(out)
            }
            State::Between | State::End if self.buf.trim_matches(ws).is_empty() => Ok(out),
            // MistralArgs's last arguments end with the output: a number or literal ends there.
            State::Args if matches!(self.format, ToolFormat::MistralArgs { .. }) && self.scan.kind == b'0' => Ok(out),
            State::Broken | State::Between | State::End => Err("a tool call in the output is malformed".into()),
            _ => Err("the output ends inside a tool call".into()),
        }
    }
}

/// A fresh tool-call id: `call_` and 24 letters and digits.
pub fn call_id() -> String {
    ToolFormat::Hermes.call_id()
}

#[cfg(test)]
mod tests;
