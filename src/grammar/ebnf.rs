//! GBNF-compatible EBNF front end: grammar text in, [`Grammar`] IR out.
//!
//! The syntax is llama.cpp's GBNF, plus `/regex/` terminals:
//!
//! ```text
//! # a comment runs to the end of the line
//! root   ::= greeting ws name "!"?        # `root` is the start rule (required)
//! greeting ::= "hello" | "hi"             # literals, with \n \r \t \\ \" \' \[ \] \xHH \uHHHH \UHHHHHHHH
//! name   ::= [A-Z] [a-z]{1,15}            # classes [...] / [^...], ranges, postfix * + ? {m} {m,} {m,n} {,n}
//! ws     ::= ( " " | "\t" )*              # grouping, alternation, `.` = any character
//! id     ::= /[a-z_][a-z0-9_]*/i          # regex terminal (regex-syntax), flags i s x
//! ```
//!
//! llama.cpp's token terminals match one token of the vocabulary: `<[128000]>` by id,
//! `<think>` or `<|eot_id|>` by its text ([`Expr::Token`], resolved when the grammar is
//! compiled for a vocabulary, see `automaton::tokens`). A negated one repeated, `(!<think>)*`
//! or `!<[id]>+`, is a run of tokens none of which is that one ([`Expr::TokensBut`]: any text,
//! written without that token); a negated one alone or counted otherwise (one token but that)
//! is refused with an error naming the construct and its position.
//!
//! Key entry points: [`parse`] (default [`Limits`]), [`parse_with`] and [`parse_with_warnings`].
//!
//! Semantics and decisions:
//! - Rule names are `[A-Za-z0-9_-]+`. A rule body may span lines: a new rule starts where a
//!   line begins with `name ::=`. This reads every llama.cpp grammar the same way llama.cpp
//!   does, and accepts more: llama.cpp ends a top-level rule at a newline unless the line ends
//!   in `|` or sits inside parentheses. A `name ::=` that does not start a line is an error.
//!   Stricter than llama.cpp: the checks below (duplicates, raw control characters and raw
//!   newlines in literals) reject some grammars llama.cpp would take.
//! - Literals become [`Expr::Literal`] (`""` becomes [`Expr::Empty`]); classes, `.` and
//!   regexes become [`Expr::Regex`] over Unicode scalar values, UTF-8 encoded: `[^"]` matches
//!   any scalar except `"`. `\xHH` is the code point U+00HH (as in llama.cpp), not a raw byte.
//!   Inside classes `\-` and `\^` are also accepted. An empty class (`[]`, or a negation of
//!   everything) is an error: it would match nothing.
//! - Regex terminals run to the first unescaped `/`; write `\/` for a slash, also inside a
//!   class. Flags right after the closing slash: `i` (case-insensitive), `s` (`.` matches
//!   `\n`), `x` (verbose). Anchors and word boundaries are rejected: a lexeme has no context.
//!   The regex is matched in full, like every terminal.
//! - Postfix operators bind to the last element and may be stacked: `a+?` is `(a+)?`.
//! - Duplicate rule definitions are an error (llama.cpp silently keeps the last one, which is
//!   almost always a mistake), pointing at the second definition.
//! - Undefined references are an error pointing at the first reference (in any rule, used or
//!   not, as in llama.cpp); a missing `root` is an error at 1:1.
//! - A rule not reachable from `root` is a [`Warning`] at its definition, and is left out of the
//!   IR: llama.cpp loads such grammars, and its own `json_schema_to_grammar` writes them (for
//!   `maxItems: 0`, for optional properties). [`parse_with_warnings`] returns the warnings;
//!   [`parse`] and [`parse_with`] drop them.
//! - Control characters (other than tab, newline, carriage return) and NUL are errors, in
//!   literals too: use escapes. A raw newline inside a literal is an unterminated literal.
//!
//! Invariants: parsing never panics (a property test feeds it random text and mutations of
//! real grammars); every error is [`Error::Grammar`] with a `line:col` (1-based, columns count
//! characters) or [`Error::Limit`]. The output satisfies the IR invariants: every
//! [`Expr::Rule`] names an existing rule, rules are in definition order, `start` is `root`.

use std::collections::HashMap;

use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir};

use crate::error::{Error, LimitKind, Location, Result};
use crate::grammar::ir::{Expr, Grammar, Rule, RuleId, Span, TokenRef};

/// Default limit on parenthesis nesting (also the nest limit of regex terminals).
pub const DEFAULT_MAX_DEPTH: usize = 200;
/// Default limit on a repetition bound: `x{10001}` is an error.
pub const DEFAULT_MAX_REPEAT: u32 = 10_000;

/// Limits applied while parsing; hitting one returns [`Error::Limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Deepest allowed nesting of `(` (stacked postfix operators such as `a+?` count as one
    /// level each; regex terminals get it as their nest limit), default [`DEFAULT_MAX_DEPTH`].
    pub max_depth: usize,
    /// Largest allowed `m` or `n` in `{m,n}`, default [`DEFAULT_MAX_REPEAT`].
    pub max_repeat: u32,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_depth: DEFAULT_MAX_DEPTH, max_repeat: DEFAULT_MAX_REPEAT }
    }
}

/// Parses GBNF text with the default [`Limits`].
///
/// ```
/// use strictly::grammar::{ebnf, reference};
/// let g = ebnf::parse("root ::= \"id-\" [0-9]+ # a comment").unwrap();
/// assert!(reference::accepts(&g, b"id-42"));
/// assert!(reference::is_prefix(&g, b"id"));
/// ```
pub fn parse(src: &str) -> Result<Grammar> {
    parse_with(src, &Limits::default())
}

/// Parses GBNF text with the given limits.
pub fn parse_with(src: &str, limits: &Limits) -> Result<Grammar> {
    parse_with_warnings(src, limits).map(|(g, _)| g)
}

/// Parses GBNF text with the given limits, and says what in it loads but is likely a mistake
/// (today: rules not reachable from `root`, which are left out of the grammar).
///
/// ```
/// use strictly::grammar::ebnf;
/// let (g, warnings) = ebnf::parse_with_warnings("root ::= \"a\"\nspare ::= \"b\"", &Default::default()).unwrap();
/// assert_eq!(g.rules.len(), 1);
/// assert_eq!(warnings[0].to_string(), "2:1: rule `spare` is not reachable from `root` (ignored)");
/// ```
pub fn parse_with_warnings(src: &str, limits: &Limits) -> Result<(Grammar, Vec<Warning>)> {
    let mut p = Parser::new(src, *limits);
    p.grammar()?;
    p.finish()
}

/// Something in a grammar that loads but is likely a mistake, and where it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub at: Location,
    pub msg: String,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.at, self.msg)
    }
}

struct Parser {
    chars: Vec<char>,
    /// Char index of the first character of each line.
    line_starts: Vec<usize>,
    pos: usize,
    limits: Limits,
    /// Names by provisional id (order of first appearance, definition or reference).
    names: Vec<String>,
    ids: HashMap<String, u32>,
    /// Per provisional id: the definition (body and where its name stands).
    defs: Vec<Option<(Expr, usize)>>,
    /// Per provisional id: where it was first referenced.
    first_ref: Vec<Option<usize>>,
    /// Provisional ids in definition order.
    def_order: Vec<u32>,
    /// Where each negated token terminal of the rule being parsed stands, in source order.
    negated_at: Vec<usize>,
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

impl Parser {
    fn new(src: &str, limits: Limits) -> Parser {
        let mut chars: Vec<char> = src.chars().collect();
        if chars.first() == Some(&'\u{feff}') {
            chars[0] = ' '; // a byte order mark counts as a blank, keeping columns honest
        }
        let mut line_starts = vec![0];
        for (i, &c) in chars.iter().enumerate() {
            if c == '\n' {
                line_starts.push(i + 1);
            }
        }
        Parser {
            chars,
            line_starts,
            pos: 0,
            limits,
            names: Vec::new(),
            ids: HashMap::new(),
            defs: Vec::new(),
            first_ref: Vec::new(),
            def_order: Vec::new(),
            negated_at: Vec::new(),
        }
    }

    // ---- positions and errors -------------------------------------------------------------

    fn line_col(&self, pos: usize) -> (usize, usize) {
        let line = self.line_starts.partition_point(|&s| s <= pos); // >= 1: line_starts[0] == 0
        (line, pos - self.line_starts[line - 1] + 1)
    }

    fn err_at(&self, pos: usize, msg: impl Into<String>) -> Error {
        let (line, col) = self.line_col(pos);
        Error::Grammar { at: Location::LineCol { line, col }, msg: msg.into() }
    }

    fn limit_at(&self, pos: usize, kind: LimitKind, what: &str, limit: usize, hint: &str) -> Error {
        let (line, col) = self.line_col(pos);
        Error::Limit { kind, what: format!("{what} at {line}:{col}"), limit, hint: Some(hint.to_string()) }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, k: usize) -> Option<char> {
        self.chars.get(self.pos + k).copied()
    }

    fn describe(c: char) -> String {
        if c.is_control() {
            format!("control character U+{:04X}", c as u32)
        } else {
            format!("`{c}`")
        }
    }

    /// Skips blanks, newlines and comments. Returns whether a newline was crossed.
    fn skip_space(&mut self) -> Result<bool> {
        let mut newline = false;
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' => self.pos += 1,
                '\n' | '\r' => {
                    newline = true;
                    self.pos += 1;
                }
                '#' => {
                    while let Some(c) = self.peek() {
                        if c == '\n' || c == '\r' {
                            break;
                        }
                        if c.is_control() && c != '\t' {
                            return Err(self.err_at(self.pos, format!("{} in a comment", Self::describe(c))));
                        }
                        self.pos += 1;
                    }
                }
                c if c.is_control() => return Err(self.err_at(self.pos, format!("unexpected {}", Self::describe(c)))),
                _ => break,
            }
        }
        Ok(newline)
    }

    /// If a rule definition `name ::=` starts here, returns the name's end position.
    fn rule_start_here(&self) -> Option<usize> {
        let mut i = self.pos;
        while self.chars.get(i).is_some_and(|&c| is_name_char(c)) {
            i += 1;
        }
        if i == self.pos {
            return None;
        }
        let end = i;
        while matches!(self.chars.get(i), Some(' ' | '\t')) {
            i += 1;
        }
        let op: String = self.chars.get(i..i + 3)?.iter().collect();
        (op == "::=").then_some(end)
    }

    fn id_of(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), id);
        self.defs.push(None);
        self.first_ref.push(None);
        id
    }

    // ---- grammar structure ----------------------------------------------------------------

    fn grammar(&mut self) -> Result<()> {
        self.skip_space()?;
        while self.pos < self.chars.len() {
            let start = self.pos;
            let Some(name_end) = self.rule_start_here() else {
                let c = self.chars[self.pos];
                let msg = if is_name_char(c) {
                    "expected `::=` after the rule name".to_string()
                } else {
                    format!("expected a rule definition `name ::= ...`, found {}", Self::describe(c))
                };
                let at = if is_name_char(c) {
                    let mut i = self.pos;
                    while self.chars.get(i).is_some_and(|&c| is_name_char(c)) {
                        i += 1;
                    }
                    while matches!(self.chars.get(i), Some(' ' | '\t')) {
                        i += 1;
                    }
                    i
                } else {
                    self.pos
                };
                return Err(self.err_at(at, msg));
            };
            let name: String = self.chars[start..name_end].iter().collect();
            self.pos = name_end;
            while matches!(self.peek(), Some(' ' | '\t')) {
                self.pos += 1;
            }
            self.pos += 3; // "::=", checked by rule_start_here
            let id = self.id_of(&name);
            if let Some((_, prev)) = &self.defs[id as usize] {
                let (l, c) = self.line_col(*prev);
                return Err(self.err_at(start, format!("rule `{name}` is already defined at {l}:{c}")));
            }
            self.negated_at.clear();
            let body = self.alternates(0)?;
            self.check_negated(&body)?;
            match self.peek() {
                None => {}
                Some(_) if self.rule_start_here().is_some() => {}
                Some(')') => return Err(self.err_at(self.pos, "unmatched `)`")),
                Some(c) => return Err(self.err_at(self.pos, format!("unexpected {}", Self::describe(c)))),
            }
            self.defs[id as usize] = Some((body, start));
            self.def_order.push(id);
        }
        Ok(())
    }

    /// `seq ('|' seq)*`. Stops before `)`, at end of input, or before a new rule.
    fn alternates(&mut self, depth: usize) -> Result<Expr> {
        let mut alts = vec![self.sequence(depth)?];
        while self.peek() == Some('|') {
            self.pos += 1;
            alts.push(self.sequence(depth)?);
        }
        Ok(if alts.len() == 1 { alts.pop().unwrap_or(Expr::Empty) } else { Expr::Alt(alts) })
    }

    fn sequence(&mut self, depth: usize) -> Result<Expr> {
        let mut items: Vec<Expr> = Vec::new();
        // Postfix operators stacked on the last item (`a+?*`): each one nests, like a group.
        let mut stacked = 0;
        loop {
            let newline = self.skip_space()?;
            let Some(c) = self.peek() else { break };
            let item = match c {
                '"' => self.literal()?,
                '[' => self.class()?,
                '/' => self.regex()?,
                '<' | '!' => self.token_terminal()?,
                '.' => {
                    self.pos += 1;
                    Expr::Regex(std::sync::Arc::new(any_char()))
                }
                '(' => {
                    let open = self.pos;
                    if depth >= self.limits.max_depth {
                        return Err(self.limit_at(
                            open,
                            LimitKind::GrammarNesting,
                            "parenthesis nesting depth",
                            self.limits.max_depth,
                            "raise ebnf::Limits::max_depth or flatten the grammar",
                        ));
                    }
                    self.pos += 1;
                    let inner = self.alternates(depth + 1)?;
                    if self.peek() != Some(')') {
                        return Err(match self.peek() {
                            Some(c) if self.rule_start_here().is_none() => {
                                self.err_at(self.pos, format!("unexpected {} inside `(`", Self::describe(c)))
                            }
                            _ => self.err_at(open, "unclosed `(`"),
                        });
                    }
                    self.pos += 1;
                    inner
                }
                '*' | '+' | '?' | '{' => {
                    let at = self.pos;
                    let (min, max) = self.repetition()?;
                    let Some(last) = items.pop() else {
                        return Err(self.err_at(at, format!("`{c}` has nothing to repeat")));
                    };
                    stacked += 1;
                    if depth + stacked > self.limits.max_depth {
                        return Err(self.limit_at(
                            at,
                            LimitKind::GrammarNesting,
                            "nesting depth (stacked repetition operators)",
                            self.limits.max_depth,
                            "raise ebnf::Limits::max_depth",
                        ));
                    }
                    items.push(match last {
                        // `!<X>` repeated is one run of tokens but X (see `Expr::TokensBut`).
                        Expr::TokensBut { but, min: 1, max: Some(1), .. } => Expr::tokens_but(but, min, max),
                        last => Expr::Repeat { body: Box::new(last), min, max },
                    });
                    continue;
                }
                c if is_name_char(c) => {
                    if self.rule_start_here().is_some() {
                        if !newline {
                            return Err(self.err_at(self.pos, "a new rule must start on its own line"));
                        }
                        break;
                    }
                    let start = self.pos;
                    while self.peek().is_some_and(is_name_char) {
                        self.pos += 1;
                    }
                    let name: String = self.chars[start..self.pos].iter().collect();
                    let id = self.id_of(&name);
                    self.first_ref[id as usize].get_or_insert(start);
                    Expr::Rule(RuleId(id))
                }
                _ => break,
            };
            stacked = 0;
            items.push(item);
        }
        Ok(match items.len() {
            0 => Expr::Empty,
            1 => items.pop().unwrap_or(Expr::Empty),
            _ => Expr::Seq(items),
        })
    }

    /// Parses `*`, `+`, `?` or `{m}`, `{m,}`, `{m,n}`, `{,n}` at `self.pos`.
    fn repetition(&mut self) -> Result<(u32, Option<u32>)> {
        let at = self.pos;
        let c = self.chars[at];
        self.pos += 1;
        match c {
            '*' => return Ok((0, None)),
            '+' => return Ok((1, None)),
            '?' => return Ok((0, Some(1))),
            _ => {}
        }
        // `{` ... `}`; blanks allowed around the numbers.
        self.blanks();
        let min = self.number();
        self.blanks();
        let (min, max) = match self.peek() {
            Some('}') => {
                let Some(m) = min else { return Err(self.err_at(self.pos, "expected a number")) };
                (m, Some(m))
            }
            Some(',') => {
                self.pos += 1;
                self.blanks();
                let max = self.number();
                self.blanks();
                if min.is_none() && max.is_none() {
                    return Err(self.err_at(self.pos, "expected a number"));
                }
                (min.unwrap_or(0), max)
            }
            _ => return Err(self.err_at(self.pos, "expected a number, `,` or `}`")),
        };
        if self.peek() != Some('}') {
            return Err(self.err_at(self.pos, "expected `}`"));
        }
        self.pos += 1;
        let limit = self.limits.max_repeat as u64;
        if min > limit || max.is_some_and(|n| n > limit) {
            return Err(self.limit_at(
                at,
                LimitKind::Repetition,
                "repetition count",
                limit as usize,
                "raise ebnf::Limits::max_repeat",
            ));
        }
        if let Some(n) = max {
            if min > n {
                return Err(self.err_at(at, format!("repetition bounds {{{min},{n}}}: minimum exceeds maximum")));
            }
        }
        // Both fit in u32: they are at most `limit`, a u32.
        Ok((min as u32, max.map(|n| n as u32)))
    }

    fn blanks(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.pos += 1;
        }
    }

    /// An optional decimal number, saturating at u64::MAX.
    fn number(&mut self) -> Option<u64> {
        let mut n: Option<u64> = None;
        while let Some(d) = self.peek().and_then(|c| c.to_digit(10)) {
            n = Some(n.unwrap_or(0).saturating_mul(10).saturating_add(d as u64));
            self.pos += 1;
        }
        n
    }

    // ---- terminals ------------------------------------------------------------------------

    /// One character of a literal or class, decoding escapes. `self.pos` is at it.
    fn char_or_escape(&mut self, in_class: bool, what: &str) -> Result<char> {
        let at = self.pos;
        let c = self.chars[at];
        self.pos += 1;
        if c != '\\' {
            if c.is_control() && c != '\t' {
                return Err(self.err_at(at, format!("raw {} in {what}; use an escape", Self::describe(c))));
            }
            return Ok(c);
        }
        let Some(e) = self.peek() else { return Err(self.err_at(at, format!("unterminated {what}"))) };
        self.pos += 1;
        let digits = match e {
            'n' => return Ok('\n'),
            'r' => return Ok('\r'),
            't' => return Ok('\t'),
            '\\' | '"' | '\'' | '[' | ']' => return Ok(e),
            '-' | '^' if in_class => return Ok(e),
            'x' => 2,
            'u' => 4,
            'U' => 8,
            _ => return Err(self.err_at(at, format!("unknown escape `\\{}`", e.escape_debug()))),
        };
        let mut v: u32 = 0;
        for _ in 0..digits {
            let Some(d) = self.peek().and_then(|c| c.to_digit(16)) else {
                return Err(self.err_at(at, format!("`\\{e}` needs {digits} hex digits")));
            };
            v = v * 16 + d;
            self.pos += 1;
        }
        char::from_u32(v).ok_or_else(|| self.err_at(at, format!("`\\{e}{v:X}` is not a Unicode scalar value")))
    }

    fn literal(&mut self) -> Result<Expr> {
        let open = self.pos;
        self.pos += 1;
        let mut s = String::new();
        loop {
            match self.peek() {
                None | Some('\n' | '\r') => return Err(self.err_at(open, "unterminated string literal")),
                Some('"') => {
                    self.pos += 1;
                    break;
                }
                Some(_) => s.push(self.char_or_escape(false, "string literal")?),
            }
        }
        Ok(if s.is_empty() { Expr::Empty } else { Expr::Literal(s) })
    }

    fn class(&mut self) -> Result<Expr> {
        let open = self.pos;
        self.pos += 1;
        let negated = self.peek() == Some('^');
        if negated {
            self.pos += 1;
        }
        let mut ranges = Vec::new();
        loop {
            match self.peek() {
                None | Some('\n' | '\r') => return Err(self.err_at(open, "unterminated character class")),
                Some(']') => {
                    self.pos += 1;
                    break;
                }
                Some(_) => {
                    let at = self.pos;
                    let lo = self.char_or_escape(true, "character class")?;
                    let mut hi = lo;
                    if self.peek() == Some('-') && !matches!(self.peek_at(1), Some(']') | None) {
                        self.pos += 1;
                        if matches!(self.peek(), Some('\n' | '\r')) {
                            return Err(self.err_at(open, "unterminated character class"));
                        }
                        hi = self.char_or_escape(true, "character class")?;
                        if hi < lo {
                            return Err(self.err_at(at, format!("reversed range {lo:?}-{hi:?}")));
                        }
                    }
                    ranges.push(ClassUnicodeRange::new(lo, hi));
                }
            }
        }
        let mut class = ClassUnicode::new(ranges);
        if negated {
            class.negate();
        }
        if class.ranges().is_empty() {
            return Err(self.err_at(open, "character class matches nothing"));
        }
        Ok(Expr::Regex(std::sync::Arc::new(Hir::class(Class::Unicode(class)))))
    }

    /// A token terminal as llama.cpp writes it: `<[id]>` (a token by its id), `<think>` (a
    /// token by its text, brackets included: a special token's name), either negated with `!`
    /// (any one token but that). A token terminal matches that one token ([`Expr::Token`],
    /// resolved against the vocabulary when compiled); a negated one is refused at its
    /// position (any one token is not a language of text).
    fn token_terminal(&mut self) -> Result<Expr> {
        let at = self.pos;
        let negated = self.peek() == Some('!');
        if negated {
            self.pos += 1;
            if self.peek() != Some('<') {
                return Err(self.err_at(at, "`!` must be followed by a token terminal `<[id]>` or `<name>`"));
            }
        }
        let open = self.pos;
        self.pos += 1;
        let mut id = None;
        if self.peek() == Some('[') {
            self.pos += 1;
            id = self.number();
            if id.is_none() {
                return Err(self.err_at(self.pos, "expected a token id in `<[...]>`"));
            }
            if self.peek() != Some(']') || self.peek_at(1) != Some('>') {
                return Err(self.err_at(self.pos, "expected `]>` after the token id"));
            }
            self.pos += 2;
        } else {
            loop {
                match self.peek() {
                    None | Some('\n' | '\r') => return Err(self.err_at(open, "unterminated token terminal `<...>`")),
                    Some('>') => break,
                    Some(c) if c.is_control() && c != '\t' => {
                        return Err(self.err_at(self.pos, format!("raw {} in a token terminal", Self::describe(c))))
                    }
                    Some(_) => self.pos += 1,
                }
            }
            self.pos += 1;
            if self.pos - open == 2 {
                return Err(self.err_at(open, "empty token terminal `<>`"));
            }
        }
        let text: String = self.chars[open..self.pos].iter().collect();
        let token = match id {
            Some(id) => TokenRef::Id(u32::try_from(id).unwrap_or(u32::MAX)),
            None => TokenRef::Name(text),
        };
        if negated {
            // One token but that, until a repetition makes it a run (see `sequence`).
            self.negated_at.push(at);
            return Ok(Expr::tokens_but(token, 1, Some(1)));
        }
        Ok(Expr::Token(token))
    }

    /// Refuses, at its position, a negated token terminal of the rule just parsed (`body`)
    /// that is not an unbounded run (`(!<X>)*`, `(!<X>)+`): the rest is not a language of text.
    fn check_negated(&self, body: &Expr) -> Result<()> {
        fn runs<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
            match e {
                Expr::TokensBut { .. } => out.push(e),
                Expr::Seq(xs) | Expr::Alt(xs) => xs.iter().for_each(|x| runs(x, out)),
                Expr::Repeat { body, .. } => runs(body, out),
                _ => {}
            }
        }
        let mut found = Vec::new();
        runs(body, &mut found);
        for (e, &at) in found.iter().zip(&self.negated_at) {
            if !e.is_supported_tokens_but() {
                let text: String = self.chars[at..].iter().take_while(|&&c| c != '>').chain(Some(&'>')).collect();
                return Err(self.err_at(
                    at,
                    format!(
                        "`{text}` (one token but that) is supported only as a run of any length: `({text})*` \
                         or `({text})+`, any text without that token"
                    ),
                ));
            }
        }
        Ok(())
    }

    fn regex(&mut self) -> Result<Expr> {
        let open = self.pos;
        self.pos += 1;
        let mut pattern = String::new();
        // Source char index of each byte of `pattern`, to map regex-syntax errors back.
        let mut origin: Vec<usize> = Vec::new();
        let mut push = |pattern: &mut String, c: char, at: usize| {
            pattern.push(c);
            origin.extend(std::iter::repeat_n(at, c.len_utf8()));
        };
        loop {
            let at = self.pos;
            match self.peek() {
                None | Some('\n' | '\r') => return Err(self.err_at(open, "unterminated regex")),
                Some('/') => {
                    self.pos += 1;
                    break;
                }
                Some('\\') if self.peek_at(1) == Some('/') => {
                    self.pos += 2;
                    push(&mut pattern, '/', at);
                }
                Some('\\') if self.peek_at(1).is_some_and(|c| c != '\n' && c != '\r') => {
                    let e = self.chars[at + 1];
                    if e.is_control() && e != '\t' {
                        return Err(self.err_at(at + 1, format!("raw {} in regex", Self::describe(e))));
                    }
                    self.pos += 2;
                    push(&mut pattern, '\\', at);
                    push(&mut pattern, e, at + 1);
                }
                Some(c) if c.is_control() && c != '\t' => {
                    return Err(self.err_at(at, format!("raw {} in regex; use an escape", Self::describe(c))))
                }
                Some(c) => {
                    self.pos += 1;
                    push(&mut pattern, c, at);
                }
            }
        }
        if pattern.is_empty() {
            return Err(self.err_at(open, "empty regex `//`"));
        }
        let mut builder = regex_syntax::ParserBuilder::new();
        builder.utf8(true).unicode(true).nest_limit(self.limits.max_depth.min(u32::MAX as usize) as u32);
        while let Some(f) = self.peek().filter(|c| c.is_ascii_alphabetic()) {
            match f {
                'i' => builder.case_insensitive(true),
                's' => builder.dot_matches_new_line(true),
                'x' => builder.ignore_whitespace(true),
                _ => return Err(self.err_at(self.pos, format!("unknown regex flag `{f}` (allowed: i, s, x)"))),
            };
            self.pos += 1;
        }
        let hir = builder.build().parse(&pattern).map_err(|e| {
            let (offset, msg) = match &e {
                regex_syntax::Error::Parse(e) => (e.span().start.offset, e.kind().to_string()),
                regex_syntax::Error::Translate(e) => (e.span().start.offset, e.kind().to_string()),
                _ => (0, e.to_string()),
            };
            self.err_at(origin.get(offset).copied().unwrap_or(open), format!("invalid regex: {msg}"))
        })?;
        if !hir.properties().look_set().is_empty() {
            return Err(self.err_at(open, "anchors and word boundaries are not supported in regex terminals"));
        }
        Ok(Expr::Regex(std::sync::Arc::new(hir)))
    }

    // ---- resolution -----------------------------------------------------------------------

    fn finish(self) -> Result<(Grammar, Vec<Warning>)> {
        // Undefined references, reported at the earliest reference in the text.
        let undefined = (0..self.names.len())
            .filter(|&i| self.defs[i].is_none())
            .filter_map(|i| self.first_ref[i].map(|at| (at, i)))
            .min();
        if let Some((at, i)) = undefined {
            return Err(self.err_at(at, format!("undefined rule `{}`", self.names[i])));
        }
        let Some(&root) = self.ids.get("root") else {
            return Err(self.err_at(0, "no `root` rule (the start rule must be called `root`)"));
        };
        // Reachability from root, over provisional ids (every one is defined by now).
        let mut seen = vec![false; self.names.len()];
        let mut stack = vec![root];
        seen[root as usize] = true;
        while let Some(r) = stack.pop() {
            if let Some((body, _)) = &self.defs[r as usize] {
                body.for_each_rule(&mut |s| {
                    if !seen[s.0 as usize] {
                        seen[s.0 as usize] = true;
                        stack.push(s.0);
                    }
                });
            }
        }
        let mut warnings = Vec::new();
        // Final ids: definition order, unreachable rules left out (with a warning each).
        let mut new_id = vec![0u32; self.names.len()];
        let mut kept = Vec::with_capacity(self.def_order.len());
        for &old in &self.def_order {
            if seen[old as usize] {
                new_id[old as usize] = kept.len() as u32;
                kept.push(old);
            } else {
                let at = self.defs[old as usize].as_ref().map_or(0, |(_, at)| *at);
                let (line, col) = self.line_col(at);
                warnings.push(Warning {
                    at: Location::LineCol { line, col },
                    msg: format!("rule `{}` is not reachable from `root` (ignored)", self.names[old as usize]),
                });
            }
        }
        let mut rules = Vec::with_capacity(kept.len());
        let mut defs = self.defs;
        for &old in &kept {
            let (mut body, at) = defs[old as usize].take().unwrap_or((Expr::Empty, 0));
            body.for_each_rule_mut(&mut |r| r.0 = new_id[r.0 as usize]);
            let (line, col) = {
                let line = self.line_starts.partition_point(|&s| s <= at);
                (line, at - self.line_starts[line - 1] + 1)
            };
            rules.push(Rule { name: self.names[old as usize].clone(), body, span: Some(Span { line, col }) });
        }
        Ok((Grammar { rules, start: RuleId(new_id[root as usize]) }, warnings))
    }
}

/// `.`: any Unicode scalar value.
fn any_char() -> Hir {
    Hir::class(Class::Unicode(ClassUnicode::new([ClassUnicodeRange::new('\0', '\u{10FFFF}')])))
}

#[cfg(test)]
mod tests;
