//! Distinct items: JSON values in an output that must differ from each other (`uniqueItems`
//! over an infinite item set, no tool call repeated in one reply), which no grammar can say.
//!
//! The grammar marks where such items are ([`Mark`]): the `[` of an array whose items are
//! distinct, or a literal (a tool-call tag) after which an item follows. The Earley parser
//! reports where a marked terminal ends; from there a [`Distinct`] reads the output as JSON (a
//! stack of containers and one lexical state) to find where each item starts and ends, and
//! keeps, per list, each finished item's canonical form ([`canon`]: JSON equality as JSON
//! Schema defines it: numbers by value, objects in any key order, strings after unescaping).
//! A token that would finish an item equal to an earlier item of its list is refused.
//!
//! Masks do not run the parser per token, so they do not know whether a `[` inside a token is
//! marked: [`Marks::Guess`] treats every `[` (and every copy of a marked literal outside the
//! items) as marked. That only adds refusals, and only of a token that opens an array and
//! finishes two equal items inside it; [`Marks::Exact`] (the parser's report) is what a commit
//! records. A committed token is refused exactly when the guess refuses it, so masks,
//! `allows` and `commit` agree.
//!
//! Invariants:
//! - Positions are byte offsets into the whole output (`text`), which only grows by commits
//!   and shrinks by rollbacks; a [`Distinct`] is a value (cloned per position), lists are
//!   shared ([`Arc`]) and copied only when an item is added.
//! - With no marked terminal in the grammar nothing is read ([`Distinct::is_idle`] stays true).

use std::sync::Arc;

use crate::grammar::{Mark, TextEnd};

/// The most JSON nesting [`canon`] follows; deeper items are compared as raw bytes (outputs
/// are bounded far below this by the JSON Schema compiler's own depth limit).
const MAX_CANON_DEPTH: usize = 512;

/// Where marked terminals end in the bytes being read.
#[derive(Clone, Copy)]
pub(super) enum Marks<'a> {
    /// Reported by the parser: (byte offset into the output, which mark).
    Exact(&'a [(u32, MarkAt)]),
    /// Guessed from the text: every `[`, and every copy of one of these literals (indexed as
    /// [`MarkAt::After`] counts) while no item is open.
    Guess(&'a [Arc<str>]),
}

/// A marked terminal as the reader sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum MarkAt {
    /// [`Mark::DistinctArray`].
    Array,
    /// [`Mark::DistinctAfter`], by its index among the grammar's literals.
    After(u16),
}

impl MarkAt {
    /// `m` as the reader sees it, given the grammar's `DistinctAfter` literals in order.
    pub(super) fn of(m: &Mark, after: &[Arc<str>]) -> MarkAt {
        match m {
            Mark::DistinctArray => MarkAt::Array,
            Mark::DistinctAfter(s) | Mark::DistinctText { open: s, .. } => {
                MarkAt::After(after.iter().position(|a| a == s).expect("every literal is listed") as u16)
            }
        }
    }
}

/// Where the reader is (see [`Distinct::place`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Place {
    /// Outside everything it watches.
    Idle,
    /// Inside a string.
    String,
    /// Inside a number or `true`/`false`/`null`.
    Scalar,
    /// Inside a text item ([`Mark::DistinctText`]).
    Text,
    /// Between values.
    Between,
}

/// A list in reach of the reader (see [`Distinct::reach`]).
pub(super) struct Level<'a> {
    /// Where the item being read began (`None`: the next one has not begun).
    pub start: Option<u32>,
    pub list: &'a List,
    pub target: Target,
    /// A text item: whatever follows its end may be forced (fixed tags), so a token that ends
    /// even the list's first item is looked ahead from.
    pub text: bool,
}

/// A list of items, by where it is: the one [`Distinct::finished`] counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Target {
    /// The marked literal's list (`None`: all of them).
    After(Option<u16>),
    /// The marked array at this depth of the reader's stack.
    Array(usize),
}

/// An item finished equal to an earlier item of its list.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Repeated;

/// The finished items of one list. Shared between positions and copied (a pointer per item,
/// the items themselves shared) only when an item is added.
#[derive(Clone, Default, Debug)]
pub(super) struct List {
    /// Canonical forms ([`canon`]).
    keys: Vec<Arc<[u8]>>,
    /// The items as written but without whitespace outside strings ([`squeeze`]), for the
    /// look-ahead that steers away from a repeat.
    raws: Vec<Arc<[u8]>>,
}

impl List {
    pub(super) fn raws(&self) -> &[Arc<[u8]>] {
        &self.raws
    }

    /// The finished items' canonical forms ([`canon`]).
    pub(super) fn keys(&self) -> &[Arc<[u8]>] {
        &self.keys
    }
}

#[derive(Clone, Debug)]
enum Frame {
    Object,
    /// A JSON array; `Some` when its items must be distinct.
    Array(Option<Arc<List>>),
    /// The value being read is an item: of the `Array(Some)` frame below it, or of
    /// `after[k]` when `after` is `Some(k)`. It started at byte `start`.
    Item {
        start: u32,
        after: Option<u16>,
    },
    /// A marked literal `after[k]` was read: the next value is an item of that list.
    Pending(u16),
    /// A [`Mark::DistinctText`] literal `after[k]` was read: the text from byte `start` up to
    /// and including its close is an item of that list.
    Text {
        start: u32,
        k: u16,
        /// Inside a double-quoted string, after a backslash in one (a quoted end only).
        in_str: bool,
        esc: bool,
    },
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Lex {
    #[default]
    Normal,
    Str,
    StrEscape,
    /// A number or `true`/`false`/`null` that started at this byte.
    Scalar(u32),
}

/// The reader's state after some output (see the module doc).
#[derive(Clone, Default, Debug)]
pub(super) struct Distinct {
    /// One list per `DistinctAfter` literal, for the whole output.
    after: Vec<Arc<List>>,
    /// Per `after` list: what ends a text item (`None`: items are JSON values).
    closes: Arc<[Option<TextEnd>]>,
    stack: Vec<Frame>,
    lex: Lex,
}

impl Distinct {
    /// The state at the start of an output of a grammar with `after_literals` such literals
    /// (all of JSON items).
    #[cfg(test)]
    pub(super) fn new(after_literals: usize) -> Distinct {
        Distinct::with_closes(&vec![None; after_literals])
    }

    /// The state at the start of an output whose marked literals' items end as `closes` says
    /// (see [`Cfg::after_closes`](super::cfg::Cfg::after_closes)).
    pub(super) fn with_closes(closes: &[Option<TextEnd>]) -> Distinct {
        let after = closes.iter().map(|_| Arc::new(List::default())).collect();
        Distinct { after, closes: closes.into(), stack: Vec::new(), lex: Lex::Normal }
    }

    /// Not inside anything it watches (the bytes it reads now change nothing).
    pub(super) fn is_idle(&self) -> bool {
        self.stack.is_empty()
    }

    /// Idle and between values: its state is then the same whatever the output before it
    /// (the lexical state of a value holds the offset where the value started).
    pub(super) fn is_at_rest(&self) -> bool {
        self.stack.is_empty() && self.lex == Lex::Normal && self.after.iter().all(|l| l.keys.is_empty())
    }

    /// Where the reader is, for which tokens can finish anything (see
    /// [`DistinctTokens`](super::cfg::DistinctTokens)).
    pub(super) fn place(&self) -> Place {
        if let Some(Frame::Text { .. }) = self.stack.last() {
            return Place::Text;
        }
        match (self.stack.is_empty(), self.lex) {
            (true, _) => Place::Idle,
            (false, Lex::Str | Lex::StrEscape) => Place::String,
            (false, Lex::Scalar(_)) => Place::Scalar,
            (false, Lex::Normal) => Place::Between,
        }
    }

    /// Inside a JSON string of something it watches, and not just after a backslash: plain
    /// bytes read next are the string's content.
    pub(super) fn in_string_content(&self) -> bool {
        self.place() == Place::String && self.lex == Lex::Str
    }

    /// Whether some `DistinctAfter` list has an item (a repeat is possible after the next mark).
    pub(super) fn has_after_items(&self) -> bool {
        self.after.iter().any(|l| !l.keys.is_empty())
    }

    /// The lists in reach, innermost first: each with the item being read (its first byte)
    /// or `None` where its next item has not begun.
    pub(super) fn reach(&self) -> Vec<Level<'_>> {
        let mut out = Vec::new();
        for (k, f) in self.stack.iter().enumerate().rev() {
            let above_is_item = matches!(self.stack.get(k + 1), Some(Frame::Item { after: None, .. }));
            out.push(match f {
                Frame::Item { start, after: Some(a) } => Level {
                    start: Some(*start),
                    list: &self.after[*a as usize],
                    target: Target::After(Some(*a)),
                    text: false,
                },
                Frame::Item { start, after: None } => match &self.stack[k - 1] {
                    Frame::Array(Some(l)) => {
                        Level { start: Some(*start), list: l, target: Target::Array(k - 1), text: false }
                    }
                    _ => unreachable!("an array item sits on its array"),
                },
                Frame::Array(Some(l)) if !above_is_item => {
                    Level { start: None, list: l, target: Target::Array(k), text: false }
                }
                Frame::Pending(a) => {
                    Level { start: None, list: &self.after[*a as usize], target: Target::After(Some(*a)), text: false }
                }
                Frame::Text { start, k, .. } => Level {
                    start: Some(*start),
                    list: &self.after[*k as usize],
                    target: Target::After(Some(*k)),
                    text: true,
                },
                _ => continue,
            });
        }
        out
    }

    /// How many items `t`'s list has finished (`None`: the array is closed).
    pub(super) fn finished(&self, t: Target) -> Option<usize> {
        match t {
            Target::After(Some(a)) => Some(self.after[a as usize].keys.len()),
            Target::After(None) => Some(self.after.iter().map(|l| l.keys.len()).sum()),
            Target::Array(k) => match self.stack.get(k) {
                Some(Frame::Array(Some(l))) => Some(l.keys.len()),
                _ => None,
            },
        }
    }

    /// Reads `text[from..]`, the bytes just appended to the output `text`, with the marks that
    /// end in them. `Err` if an item finishes equal to an earlier one of its list (the state is
    /// then unspecified: the caller drops it).
    pub(super) fn read(&mut self, text: &[u8], from: usize, marks: Marks) -> Result<(), Repeated> {
        let mut exact = match marks {
            Marks::Exact(m) => m,
            Marks::Guess(_) => &[],
        };
        for i in from..text.len() {
            let b = text[i];
            let opens = b == b'[' && !self.stack.is_empty() && self.lex == Lex::Normal;
            self.byte(text, i as u32, b)?;
            let mark = |m: MarkAt, d: &mut Distinct| match m {
                MarkAt::Array if opens => {
                    if let Some(Frame::Array(l @ None)) = d.stack.last_mut() {
                        *l = Some(Arc::new(List::default()));
                    }
                }
                MarkAt::Array if d.stack.is_empty() => d.stack.push(Frame::Array(Some(Arc::new(List::default())))),
                MarkAt::After(k) if d.stack.is_empty() => d.stack.push(match d.closes[k as usize] {
                    Some(_) => Frame::Text { start: i as u32 + 1, k, in_str: false, esc: false },
                    None => Frame::Pending(k),
                }),
                _ => {}
            };
            match marks {
                Marks::Exact(_) => {
                    while let Some((&(at, m), rest)) = exact.split_first() {
                        if at as usize > i {
                            break;
                        }
                        if at as usize == i {
                            mark(m, self);
                        }
                        exact = rest;
                    }
                }
                Marks::Guess(literals) => {
                    if b == b'[' && (opens || self.stack.is_empty()) {
                        mark(MarkAt::Array, self);
                    }
                    if self.stack.is_empty() {
                        let upto = &text[..=i];
                        if let Some(k) = literals.iter().position(|l| upto.ends_with(l.as_bytes())) {
                            mark(MarkAt::After(k as u16), self);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn byte(&mut self, text: &[u8], i: u32, b: u8) -> Result<(), Repeated> {
        if self.stack.is_empty() {
            return Ok(());
        }
        if let Some(Frame::Text { start, k, in_str, esc }) = self.stack.last_mut() {
            // A text item ends with its close (read whole, past the item's start; with a quoted
            // end, outside strings).
            let end = self.closes[*k as usize].as_ref().expect("a text item has an end");
            if end.quoted {
                let was_in = *in_str;
                if *esc {
                    *esc = false;
                } else if *in_str && b == b'\\' {
                    *esc = true;
                } else if b == b'"' {
                    *in_str = !*in_str;
                }
                if was_in || *in_str {
                    return Ok(());
                }
            }
            let close = end.close.as_bytes();
            let at = i as usize + 1;
            if at >= *start as usize + close.len() && text[..at].ends_with(close) {
                self.value_done(text, at as u32)?;
            }
            return Ok(());
        }
        match self.lex {
            Lex::Str => match b {
                b'\\' => self.lex = Lex::StrEscape,
                b'"' => {
                    self.lex = Lex::Normal;
                    self.value_done(text, i + 1)?;
                }
                _ => {}
            },
            Lex::StrEscape => self.lex = Lex::Str,
            Lex::Scalar(start) => {
                // A zero's exponent cannot change its value: the item is 0 from here on.
                if matches!(b, b'e' | b'E') && is_zero(&text[start as usize..i as usize]) {
                    self.fixed(&text[start as usize..i as usize])?;
                }
                if is_scalar(b) {
                    if matches!(&text[start as usize..=i as usize], b"true" | b"false" | b"null") {
                        self.lex = Lex::Normal;
                        self.value_done(text, i + 1)?;
                    }
                } else {
                    self.lex = Lex::Normal;
                    self.value_done(text, i)?;
                    self.normal(text, i, b)?;
                }
            }
            Lex::Normal => self.normal(text, i, b)?,
        }
        Ok(())
    }

    fn normal(&mut self, text: &[u8], i: u32, b: u8) -> Result<(), Repeated> {
        match b {
            b'"' => {
                self.value_start(i);
                self.lex = Lex::Str;
            }
            b'{' => {
                self.value_start(i);
                self.stack.push(Frame::Object);
            }
            b'[' => {
                self.value_start(i);
                self.stack.push(Frame::Array(None));
            }
            b'}' | b']' => {
                if matches!(self.stack.last(), Some(Frame::Object | Frame::Array(_))) {
                    self.stack.pop();
                    self.value_done(text, i + 1)?;
                }
            }
            b if is_scalar(b) => {
                self.value_start(i);
                self.lex = Lex::Scalar(i);
            }
            // Whitespace, `,` and `:`, and text around the items (a tool call's tags).
            _ => {}
        }
        Ok(())
    }

    fn value_start(&mut self, i: u32) {
        match self.stack.last_mut() {
            Some(Frame::Array(Some(_))) => self.stack.push(Frame::Item { start: i, after: None }),
            Some(f @ Frame::Pending(_)) => {
                let Frame::Pending(k) = *f else { unreachable!("matched") };
                *f = Frame::Item { start: i, after: Some(k) };
            }
            _ => {}
        }
    }

    /// The item being read is a scalar whose value is already that of `raw` whatever follows:
    /// a repeat now if an earlier item of its list equals it (so the token that fixes it is
    /// refused, not the one after it, which would leave no way on).
    fn fixed(&self, raw: &[u8]) -> Result<(), Repeated> {
        let list = match self.stack.last() {
            Some(&Frame::Item { after: Some(k), .. }) => &self.after[k as usize],
            Some(&Frame::Item { after: None, .. }) => match self.stack.get(self.stack.len().wrapping_sub(2)) {
                Some(Frame::Array(Some(l))) => l,
                _ => unreachable!("an array item sits on its array"),
            },
            _ => return Ok(()),
        };
        let key = canon(raw);
        if list.keys.iter().any(|k| **k == *key) {
            return Err(Repeated);
        }
        Ok(())
    }

    fn value_done(&mut self, text: &[u8], end: u32) -> Result<(), Repeated> {
        let (start, after) = match self.stack.last() {
            Some(&Frame::Item { start, after }) => (start, after),
            Some(&Frame::Text { start, k, .. }) => (start, Some(k)),
            _ => return Ok(()),
        };
        self.stack.pop();
        let raw = &text[start as usize..end as usize];
        let key = canon(raw);
        let list = match after {
            Some(k) => &mut self.after[k as usize],
            None => match self.stack.last_mut() {
                Some(Frame::Array(Some(l))) => l,
                _ => unreachable!("an array item sits on its array"),
            },
        };
        if list.keys.iter().any(|k| **k == *key) {
            return Err(Repeated);
        }
        let list = Arc::make_mut(list);
        list.keys.push(key.into());
        list.raws.push(squeeze(raw).into());
        Ok(())
    }
}

/// JSON text without the whitespace outside its strings (which never makes two values differ).
pub(super) fn squeeze(text: &[u8]) -> Vec<u8> {
    let outside = outside_strings(text);
    text.iter().zip(&outside).filter(|&(&b, &out)| !(out && is_space(b))).map(|(&b, _)| b).collect()
}

/// Per position of JSON text (before each byte, and at the end): is it outside a string?
pub(super) fn outside_strings(text: &[u8]) -> Vec<bool> {
    let (mut out, mut in_str, mut esc) = (Vec::with_capacity(text.len() + 1), false, false);
    for &b in text {
        out.push(!in_str);
        if esc {
            esc = false;
        } else if in_str && b == b'\\' {
            esc = true;
        } else if b == b'"' {
            in_str = !in_str;
        }
    }
    out.push(!in_str);
    out
}

pub(super) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Is `mantissa` a number whose digits are all zeros (`0`, `-0`, `0.00`)? With an exponent
/// after it, its value is 0 whatever the exponent.
fn is_zero(mantissa: &[u8]) -> bool {
    let digits = mantissa.strip_prefix(b"-").unwrap_or(mantissa);
    digits.first() == Some(&b'0') && digits.iter().all(|&b| b == b'0' || b == b'.')
}

/// A byte of a number or of `true`/`false`/`null`.
fn is_scalar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.')
}

/// The canonical form of one JSON value: equal exactly when the values are equal as JSON
/// Schema compares them (numbers by mathematical value, `1` = `1.0` = `10e-1`; object members
/// in any order; strings after unescaping). Prefix-free, so forms concatenate unambiguously.
/// Text that is not one JSON value compares as its raw bytes.
pub(super) fn canon(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len() + 8);
    let mut c = Canon { s: raw, i: 0 };
    if c.value(&mut out, 0).is_some() {
        c.ws();
        if c.i == raw.len() {
            return out;
        }
    }
    let mut out = vec![0xff];
    out.extend_from_slice(raw);
    out
}

struct Canon<'a> {
    s: &'a [u8],
    i: usize,
}

impl Canon<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, b: u8) -> Option<()> {
        self.ws();
        (self.peek()? == b).then(|| self.i += 1)
    }

    fn value(&mut self, out: &mut Vec<u8>, depth: usize) -> Option<()> {
        if depth > MAX_CANON_DEPTH {
            return None;
        }
        self.ws();
        match self.peek()? {
            b'"' => {
                let s = self.string()?;
                out.push(b's');
                out.extend_from_slice(&(s.len() as u64).to_le_bytes());
                out.extend_from_slice(&s);
            }
            b'{' => {
                self.i += 1;
                let mut members: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
                if self.eat(b'}').is_none() {
                    loop {
                        self.ws();
                        let k = self.string()?;
                        self.eat(b':')?;
                        let mut v = Vec::new();
                        self.value(&mut v, depth + 1)?;
                        members.push((k, v));
                        if self.eat(b',').is_none() {
                            self.eat(b'}')?;
                            break;
                        }
                    }
                }
                members.sort();
                out.push(b'{');
                out.extend_from_slice(&(members.len() as u64).to_le_bytes());
                for (k, v) in members {
                    out.extend_from_slice(&(k.len() as u64).to_le_bytes());
                    out.extend_from_slice(&k);
                    out.extend_from_slice(&v);
                }
            }
            b'[' => {
                self.i += 1;
                out.push(b'[');
                if self.eat(b']').is_none() {
                    loop {
                        self.value(out, depth + 1)?;
                        if self.eat(b',').is_none() {
                            self.eat(b']')?;
                            break;
                        }
                    }
                }
                out.push(b']');
            }
            b't' | b'f' | b'n' => {
                for (word, code) in [(&b"true"[..], b't'), (b"false", b'f'), (b"null", b'z')] {
                    if self.s[self.i..].starts_with(word) {
                        self.i += word.len();
                        out.push(code);
                        return Some(());
                    }
                }
                return None;
            }
            _ => self.number(out)?,
        }
        Some(())
    }

    /// A string's content, unescaped (a lone surrogate as its 3-byte encoding).
    fn string(&mut self) -> Option<Vec<u8>> {
        (self.peek()? == b'"').then_some(())?;
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let b = self.peek()?;
            self.i += 1;
            match b {
                b'"' => return Some(out),
                b'\\' => push_code_point(&mut out, escape(self.s, &mut self.i)?),
                _ => out.push(b),
            }
        }
    }

    /// `n`, the sign, the significant digits (no leading or trailing zeros) and the exponent
    /// of the last digit; zero is `n0` whatever its sign.
    fn number(&mut self, out: &mut Vec<u8>) -> Option<()> {
        let neg = self.peek() == Some(b'-');
        if neg {
            self.i += 1;
        }
        let digits_of = |c: &mut Canon| {
            let start = c.i;
            while c.peek().is_some_and(|b| b.is_ascii_digit()) {
                c.i += 1;
            }
            c.s[start..c.i].to_vec()
        };
        let int = digits_of(self);
        if int.is_empty() {
            return None;
        }
        let frac = if self.peek() == Some(b'.') {
            self.i += 1;
            digits_of(self)
        } else {
            Vec::new()
        };
        let mut exp: i64 = 0;
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            let eneg = match self.peek() {
                Some(b'-') => {
                    self.i += 1;
                    true
                }
                Some(b'+') => {
                    self.i += 1;
                    false
                }
                _ => false,
            };
            let e = digits_of(self);
            if e.is_empty() {
                return None;
            }
            exp = e.iter().fold(0i64, |a, &d| a.saturating_mul(10).saturating_add(i64::from(d - b'0')));
            if eneg {
                exp = -exp;
            }
        }
        let mut digits: Vec<u8> = int.iter().chain(&frac).copied().collect();
        exp = exp.saturating_sub(frac.len() as i64);
        let lead = digits.iter().take_while(|&&d| d == b'0').count();
        digits.drain(..lead);
        while digits.last() == Some(&b'0') {
            digits.pop();
            exp = exp.saturating_add(1);
        }
        if digits.is_empty() {
            out.extend_from_slice(b"n0");
            return Some(());
        }
        out.push(b'n');
        out.push(if neg { b'-' } else { b'+' });
        out.extend_from_slice(&digits);
        out.push(b'e');
        out.extend_from_slice(exp.to_string().as_bytes());
        out.push(b';');
        Some(())
    }
}

/// The code point of the escape at `s[*i..]` (after its backslash), moving `i` past it, as
/// JSON reads it: a surrogate pair as one code point, a lone surrogate as itself. `None`: not
/// an escape (or cut short).
fn escape(s: &[u8], i: &mut usize) -> Option<u32> {
    let hex4 = |i: &mut usize| -> Option<u32> {
        let v = u32::from_str_radix(std::str::from_utf8(s.get(*i..*i + 4)?).ok()?, 16).ok()?;
        *i += 4;
        Some(v)
    };
    let e = *s.get(*i)?;
    *i += 1;
    Some(match e {
        b'"' | b'\\' | b'/' => e as u32,
        b'b' => 8,
        b'f' => 12,
        b'n' => 10,
        b'r' => 13,
        b't' => 9,
        b'u' => {
            let hi = hex4(i)?;
            if (0xD800..0xDC00).contains(&hi) && s[*i..].starts_with(b"\\u") {
                let save = *i;
                *i += 2;
                match hex4(i) {
                    Some(lo) if (0xDC00..0xE000).contains(&lo) => 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00),
                    _ => {
                        *i = save;
                        hi
                    }
                }
            } else {
                hi
            }
        }
        _ => return None,
    })
}

/// `raw` with every escape decoded as [`canon`] decodes those in strings (a backslash that
/// starts none kept as it is): the content of each string of `raw` appears in it as `canon`
/// reads it, wherever the string starts.
pub(super) fn unescape_all(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        i += 1;
        if b == b'\\' {
            let mut j = i;
            if let Some(c) = escape(raw, &mut j) {
                push_code_point(&mut out, c);
                i = j;
                continue;
            }
        }
        out.push(b);
    }
    out
}

fn push_code_point(out: &mut Vec<u8>, c: u32) {
    match char::from_u32(c) {
        Some(ch) => out.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes()),
        // A lone surrogate: its generalized UTF-8 bytes (distinct per code unit).
        None => {
            out.extend_from_slice(&[0xE0 | (c >> 12) as u8, 0x80 | ((c >> 6) & 0x3F) as u8, 0x80 | (c & 0x3F) as u8])
        }
    }
}

pub(super) mod key;
#[cfg(test)]
mod tests;
