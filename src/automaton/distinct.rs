//! Distinct items: JSON values in an output that must differ from each other (`uniqueItems`
//! over an infinite item set, no tool call repeated in one reply), which no grammar can say.
//!
//! The grammar marks where such items are ([`Mark`]): the `[` of an array whose items are
//! distinct, the `{` of an object whose keys are (keys the grammar cannot keep apart: those of
//! `additionalProperties`; each key is then an item, a string), or a literal (a tool-call tag)
//! after which an item follows. The Earley parser
//! reports where a marked terminal ends; from there a [`Distinct`] reads the output as JSON (a
//! stack of containers and one lexical state) to find where each item starts and ends, and
//! keeps, per list, each finished item's canonical form ([`canon`]: JSON equality as JSON
//! Schema defines it: numbers by value, objects in any key order, strings after unescaping).
//! A token that would finish an item equal to an earlier item of its list is refused.
//!
//! Masks do not run the parser per token, so they do not know whether a `[` or `{` inside a
//! token is marked: [`Marks::Guess`] treats every one (and every copy of a marked literal
//! outside the items) as marked. That only adds refusals, and only of a token that opens an
//! array or object and finishes two equal items or keys inside it; [`Marks::Exact`] (the parser's report) is what a commit
//! records. A committed token is refused exactly when the guess refuses it, so masks,
//! `allows` and `commit` agree. Masks read only the tokens that can finish a repeat where the
//! reader is ([`tokens`]: what a token can finish from its bytes alone; the rest are let through
//! unread).
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
    /// [`Mark::DistinctKeys`].
    Object,
    /// [`Mark::DistinctAfter`], by its index among the grammar's literals.
    After(u16),
}

impl MarkAt {
    /// `m` as the reader sees it, given the grammar's `DistinctAfter` literals in order.
    pub(super) fn of(m: &Mark, after: &[Arc<str>]) -> MarkAt {
        match m {
            Mark::DistinctArray => MarkAt::Array,
            Mark::DistinctKeys { .. } => MarkAt::Object,
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
    /// An object's keys (see [`Mark::DistinctKeys`]).
    pub keys: bool,
}

impl Level<'_> {
    /// Does the repeats filter look ahead for this list (see `CfgRun::filter_repeats`)? Where
    /// it has items (one without cannot be repeated) or is a text item's (what follows its end
    /// may be forced); for an object's keys only with `keys_ahead` (some marked object's keys
    /// can run out of completions part-way: [`Mark::DistinctKeys`]).
    pub(super) fn looked_ahead_from(&self, keys_ahead: bool) -> bool {
        (!self.keys || keys_ahead) && (self.text || !self.list.raws().is_empty())
    }
}

/// A list of items, by where it is: the one [`Distinct::finished`] counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Target {
    /// The marked literal's list (`None`: all of them).
    After(Option<u16>),
    /// The marked array (its items) or object (its keys) at this depth of the reader's stack.
    Container(usize),
}

/// What can finish a repeat (see [`Distinct::repeatable`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Repeatable {
    Pairs,
    Keys,
    Any,
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
    /// A JSON object; `keys` is `Some` when its keys must be distinct (they are that list's
    /// items); `at`: where in a member the reader is.
    Object { keys: Option<Arc<List>>, at: Member },
    /// A JSON array; `Some` when its items must be distinct.
    Array(Option<Arc<List>>),
    /// The value being read is an item: of the list of the frame below it (a marked array's
    /// items, a marked object's keys), or of `after[k]` when `after` is `Some(k)`. It started
    /// at byte `start`.
    Item { start: u32, after: Option<u16> },
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

/// Where the reader is in an object's member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Member {
    /// The next value to start is a key (after `{` or `,`).
    Key,
    /// Inside the key.
    InKey,
    /// The key is read; the next value to start is its value.
    Value,
    /// Inside the value.
    InValue,
    /// The value is read: a `,` or `}` comes next.
    After,
}

impl Member {
    /// Where the reader is once the key or value it is inside ends.
    fn done(self) -> Member {
        match self {
            Member::InKey => Member::Value,
            Member::InValue => Member::After,
            m => m,
        }
    }
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

    /// Which tokens can finish a repeat at all, from what the lists hold: none of them has an
    /// item ([`Repeatable::Pairs`]: only a token that finishes two items of one list, which
    /// a `,` parts), or only objects' keys have ([`Repeatable::Keys`]: a token must end a key,
    /// with a `"`, or hold a `,`), or else any ([`Repeatable::Any`]).
    pub(super) fn repeatable(&self) -> Repeatable {
        let mut out = Repeatable::Pairs;
        if self.after.iter().any(|l| !l.keys.is_empty()) {
            return Repeatable::Any;
        }
        for f in &self.stack {
            match f {
                Frame::Array(Some(l)) if !l.keys.is_empty() => return Repeatable::Any,
                Frame::Object { keys: Some(l), .. } if !l.keys.is_empty() => out = Repeatable::Keys,
                _ => {}
            }
        }
        out
    }

    /// Inside a string's content where what a token can finish depends only on the containers
    /// and their lists, not on the text: no item, text item or pending literal is open (their
    /// forms are read from the text), no marked literal has items. Two such readers with
    /// [`same_containers`](Self::same_containers) judge every token alike.
    pub(super) fn is_settled_in_string(&self) -> bool {
        self.lex == Lex::Str
            && self.after.iter().all(|l| l.keys.is_empty())
            && self.stack.iter().all(|f| matches!(f, Frame::Object { .. } | Frame::Array(_)))
    }

    /// The same containers, in the same places, holding the very same lists.
    pub(super) fn same_containers(&self, other: &Distinct) -> bool {
        let same_list = |a: &Option<Arc<List>>, b: &Option<Arc<List>>| match (a, b) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        self.lex == other.lex
            && self.stack.len() == other.stack.len()
            && self.stack.iter().zip(&other.stack).all(|(a, b)| match (a, b) {
                (Frame::Object { keys: k, at: x }, Frame::Object { keys: l, at: y }) => x == y && same_list(k, l),
                (Frame::Array(k), Frame::Array(l)) => same_list(k, l),
                _ => false,
            })
    }

    /// Inside a string that is an item itself (a key of a marked object, a string of a marked
    /// array or after a marked literal): where it began (its opening quote) and its list.
    pub(super) fn string_item(&self) -> Option<(u32, &List)> {
        if !matches!(self.lex, Lex::Str | Lex::StrEscape) {
            return None;
        }
        self.open_item()
    }

    /// The item the innermost frame is reading, if it is one: where it began and its list.
    fn open_item(&self) -> Option<(u32, &List)> {
        match *self.stack.last()? {
            Frame::Item { start, after: Some(k) } => Some((start, &self.after[k as usize])),
            Frame::Item { start, after: None } => {
                Some((start, self.list_at(self.stack.len() - 2).expect("an item sits on its container")))
            }
            _ => None,
        }
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
                    keys: false,
                },
                Frame::Item { start, after: None } => {
                    let list = self.list_at(k - 1).expect("an item sits on its container");
                    let keys = matches!(self.stack[k - 1], Frame::Object { .. });
                    Level { start: Some(*start), list, target: Target::Container(k - 1), text: false, keys }
                }
                Frame::Array(Some(l)) if !above_is_item => {
                    Level { start: None, list: l, target: Target::Container(k), text: false, keys: false }
                }
                // Not inside a key (then the item above is): the next key has not begun.
                Frame::Object { keys: Some(l), at } if *at != Member::InKey => {
                    Level { start: None, list: l, target: Target::Container(k), text: false, keys: true }
                }
                Frame::Pending(a) => Level {
                    start: None,
                    list: &self.after[*a as usize],
                    target: Target::After(Some(*a)),
                    text: false,
                    keys: false,
                },
                Frame::Text { start, k, .. } => Level {
                    start: Some(*start),
                    list: &self.after[*k as usize],
                    target: Target::After(Some(*k)),
                    text: true,
                    keys: false,
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
            Target::Container(k) => self.list_at(k).map(|l| l.keys.len()),
        }
    }

    /// The list of the frame at depth `k` of the stack: a marked array's items or a marked
    /// object's keys (`None`: no such frame there).
    fn list_at(&self, k: usize) -> Option<&Arc<List>> {
        match self.stack.get(k)? {
            Frame::Array(Some(l)) | Frame::Object { keys: Some(l), .. } => Some(l),
            _ => None,
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
            let opens = matches!(b, b'[' | b'{') && !self.stack.is_empty() && self.lex == Lex::Normal;
            self.byte(text, i as u32, b)?;
            let mark = |m: MarkAt, d: &mut Distinct| match m {
                MarkAt::Array if opens => {
                    if let Some(Frame::Array(l @ None)) = d.stack.last_mut() {
                        *l = Some(Arc::new(List::default()));
                    }
                }
                MarkAt::Object if opens => {
                    if let Some(Frame::Object { keys: l @ None, .. }) = d.stack.last_mut() {
                        *l = Some(Arc::new(List::default()));
                    }
                }
                MarkAt::Array if d.stack.is_empty() => d.stack.push(Frame::Array(Some(Arc::new(List::default())))),
                MarkAt::Object if d.stack.is_empty() => {
                    d.stack.push(Frame::Object { keys: Some(Arc::new(List::default())), at: Member::Key })
                }
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
                    if b == b'{' && (opens || self.stack.is_empty()) {
                        mark(MarkAt::Object, self);
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
                self.stack.push(Frame::Object { keys: None, at: Member::Key });
            }
            b'[' => {
                self.value_start(i);
                self.stack.push(Frame::Array(None));
            }
            b'}' | b']' => {
                if matches!(self.stack.last(), Some(Frame::Object { .. } | Frame::Array(_))) {
                    self.stack.pop();
                    self.value_done(text, i + 1)?;
                }
            }
            b',' => {
                if let Some(Frame::Object { at, .. }) = self.stack.last_mut() {
                    *at = Member::Key;
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
            Some(Frame::Object { keys, at }) => match *at {
                Member::Key => {
                    *at = Member::InKey;
                    if keys.is_some() {
                        self.stack.push(Frame::Item { start: i, after: None });
                    }
                }
                Member::Value => *at = Member::InValue,
                _ => {}
            },
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
        let Some((_, list)) = self.open_item() else { return Ok(()) };
        let key = canon(raw);
        if list.keys.iter().any(|k| **k == *key) {
            return Err(Repeated);
        }
        Ok(())
    }

    fn value_done(&mut self, text: &[u8], end: u32) -> Result<(), Repeated> {
        let (start, after) = match self.stack.last_mut() {
            Some(&mut Frame::Item { start, after }) => (start, after),
            Some(&mut Frame::Text { start, k, .. }) => (start, Some(k)),
            Some(Frame::Object { at, .. }) => {
                *at = at.done();
                return Ok(());
            }
            _ => return Ok(()),
        };
        self.stack.pop();
        let raw = &text[start as usize..end as usize];
        let key = canon(raw);
        let list = match after {
            Some(k) => &mut self.after[k as usize],
            None => match self.stack.last_mut() {
                Some(Frame::Array(Some(l)) | Frame::Object { keys: Some(l), .. }) => l,
                _ => unreachable!("an item sits on its container"),
            },
        };
        if list.keys.iter().any(|k| **k == *key) {
            return Err(Repeated);
        }
        let list = Arc::make_mut(list);
        list.keys.push(key.into());
        list.raws.push(squeeze(raw).into());
        if let Some(Frame::Object { at, .. }) = self.stack.last_mut() {
            *at = at.done();
        }
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

mod canon;
pub(super) use canon::{canon, unescape_all};
pub(super) mod tokens;
pub(super) use tokens::{finishes_a_key_or_two, in_string, opens_two_items, value_string_may_repeat, InString};
pub(super) mod key;
/// Reads `text` byte by byte with the marks at the given offsets (as a commit would).
#[cfg(test)]
pub(super) fn read_marked(text: &str, marks: &[(u32, MarkAt)]) -> Result<Distinct, Repeated> {
    let mut d = Distinct::new(0);
    let t = text.as_bytes();
    for i in 0..t.len() {
        let here: Vec<(u32, MarkAt)> = marks.iter().copied().filter(|&(at, _)| at as usize == i).collect();
        d.read(&t[..=i], i, Marks::Exact(&here))?;
    }
    Ok(d)
}

#[cfg(test)]
mod tests;
