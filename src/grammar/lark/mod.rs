//! Lark front end: grammar text in the dialect of Python's `lark` (and of llguidance and
//! XGrammar, which read the same), [`Grammar`] IR out.
//!
//! ```text
//! // comments run to the end of the line (`#` too)
//! start: greeting name "!"?              // rules: lowercase; `?rule`, `!rule`, `_rule` marks allowed
//! greeting: "hello"i | "hi"               // literals, `i` = any case
//! name: WORD ("-" WORD)~0..2              // ( ) [ ] ? * + ~n ~n..m; `-> alias` ignored
//! list{item}: item ("," item)*            // templates, used as list{NUMBER}
//! ID.2: /[a-z_][a-z0-9_]*/i               // terminals: UPPERCASE, regular, may use terminals
//! DIGIT: "0".."9"                         // ranges of one character
//! %import common.WORD                     // Lark's `common` (and `unicode`) library
//! %import common (INT, WS) / %import common.INT -> N
//! %ignore WS                              // allowed before, between and after tokens
//! value: %json {"type": "integer"}        // an embedded JSON Schema (llguidance)
//! ```
//!
//! Key entry points: [`parse`] and [`parse_with_warnings`], with [`LarkOptions`] (the start
//! rule, limits, how `%json` compiles). [`looks_like_lark`] tells Lark text from GBNF.
//!
//! # What the text means
//!
//! The language is the one a recognizer of the grammar accepts: Lark's Earley parser with the
//! `dynamic_complete` lexer, where each terminal matches any string of its language at any
//! split. The IR keeps terminals as regex leaves, so the automaton's lexer sees the same
//! tokens. In particular:
//! - `%ignore X` lets any number of `X` come before, between and after tokens, never inside one
//!   (see `lower`); llguidance's `%llguidance {"skip_repetition": "once"}` allows one.
//!   With a `%llguidance {...}` header, llguidance's default holds: nothing ignored before the
//!   first token unless `"allow_initial_skip": true`.
//! - Priorities (`RULE.2`, `TERM.2`) and aliases (`-> name`) choose between parses or name tree
//!   nodes; they never change which texts parse, so they are read and dropped. So are the
//!   `?`, `!` and `_` marks of rules (tree shaping).
//! - A terminal with a lazy quantifier (`/.*?"/`) means what Lark's lexer reads: the shortest
//!   match, so its strings are those with no proper prefix in the terminal. Where greedy
//!   parts follow the lazy one (`/a+?b*/`), this is stricter than Python's backtracking
//!   (it never produces the `b`s), never looser.
//! - Regexes are read by `regex-syntax`, which agrees with Python's `re` on what grammars use
//!   (classes, `\d \w \s` as Unicode, `(?:...)`, counted repetition); flags `i`, `s`, `x`,
//!   `m` (meaningless without anchors), `u`.
//! - `%json {...}` compiles with [`LarkOptions::json`] (the crate's default JSON Schema
//!   options: compact, the sensible subset); its text is one token for `%ignore`.
//! - llguidance's `name[lazy]`, `[suffix="..."]` (lazy, the suffix kept in the output),
//!   `[capture]`, `[temperature=...]` (a warning: sampling, not language), `&` and `~` over
//!   terminals (`A: /[a-z]+/ & ~"if"`), and `expr{m,n}` for `expr~m..n` are supported.
//! - Special tokens in rules: `<|eot_id|>` (by its text) and `<[128000]>` (by id) match that
//!   one token of the vocabulary (see `automaton::tokens`); id ranges and negations
//!   (`<[1-5]>`, `<[^2]>`) and special tokens inside a terminal are refused.
//!
//! # What is refused, with an error naming it and its `line:col`
//!
//! - `%declare`d terminals that a rule uses: their tokens come from a postlexer or callback.
//!   Python's indentation grammars (`%declare _INDENT _DEDENT` with Lark's `Indenter`) are in
//!   this class: a context-free recognizer cannot count indentation.
//! - `stop=` (hides text from the output: needs backtracking) and `max_tokens=` (counts model
//!   tokens, not text) attributes; `%regex {...}`; `@grammar` references; imports other than
//!   `common` and `unicode`; lookarounds, anchors and word boundaries in regexes;
//!   `allow_invalid_utf8`.
//! - Malformed text: undefined or duplicate names (use `%override`/`%extend` to change a
//!   definition), recursive terminals, terminals using rules, a missing start rule, bad
//!   regexes, wrong template arity, bad JSON.
//!
//! Invariants: parsing never panics; every error is [`Error::Grammar`] with a `line:col`
//! (1-based, columns count characters) or [`Error::Limit`] (nesting depth, repetition counts:
//! [`crate::grammar::ebnf::Limits`]; template instances: [`lower::MAX_TEMPLATE_INSTANCES`]).
//! The output satisfies the IR invariants; its start rule derives exactly the language above.

mod common;
mod hir;
mod lexer;
pub mod lower;
mod parser;
#[cfg(test)]
mod tests;

use crate::error::{Error, Location, Result};
use crate::grammar::ebnf::Limits;
pub use crate::grammar::ebnf::Warning;
use crate::grammar::json_schema::JsonSchemaOptions;
use crate::grammar::Grammar;

/// How a Lark grammar is read.
#[derive(Debug, Clone, Default)]
pub struct LarkOptions {
    /// Nesting and repetition limits (the same as the GBNF front end's).
    pub limits: Limits,
    /// The start rule; `start` when `None` (Lark's default).
    pub start: Option<String>,
    /// How `%json {...}` schemas compile.
    pub json: JsonSchemaOptions,
}

/// Parses Lark text.
///
/// ```
/// use strictly::grammar::{lark, reference};
/// let g = lark::parse("start: NAME (\",\" NAME)*\nNAME: /[a-z]+/\n%ignore \" \"", &Default::default()).unwrap();
/// assert!(reference::accepts(&g, b"ab, cd ,e"));
/// assert!(!reference::accepts(&g, b"a b"));
/// ```
pub fn parse(text: &str, opts: &LarkOptions) -> Result<Grammar> {
    parse_with_warnings(text, opts).map(|(g, _)| g)
}

/// Parses Lark text, and says what in it loads but is likely a mistake (rules not reachable
/// from the start rule, which are left out; attributes that change nothing).
pub fn parse_with_warnings(text: &str, opts: &LarkOptions) -> Result<(Grammar, Vec<Warning>)> {
    let src = Source::new(text);
    let tokens = lexer::tokens(&src)?;
    let items = parser::parse(&src, tokens, opts.limits)?;
    lower::lower(&src, items, opts)
}

/// Is this grammar text Lark rather than GBNF? GBNF defines every rule with `::=`, which Lark
/// never uses; so: Lark when no line defines a rule with `::=` (outside comments), or when
/// the text starts with `%llguidance`.
pub fn looks_like_lark(text: &str) -> bool {
    let first = text.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with("//") && !l.starts_with('#'));
    if first.is_some_and(|l| l.starts_with("%llguidance")) {
        return true;
    }
    !text.lines().any(|l| {
        let l = l.trim_start();
        !l.starts_with('#') && !l.starts_with("//") && l.contains("::=")
    })
}

/// The text as characters, with line starts for `line:col`.
pub(crate) struct Source {
    chars: Vec<char>,
    line_starts: Vec<usize>,
}

impl Source {
    fn new(text: &str) -> Source {
        let chars: Vec<char> = text.chars().collect();
        let mut line_starts = vec![0];
        for (i, &c) in chars.iter().enumerate() {
            if c == '\n' {
                line_starts.push(i + 1);
            }
        }
        Source { chars, line_starts }
    }

    fn line_col(&self, pos: usize) -> (usize, usize) {
        let line = self.line_starts.partition_point(|&s| s <= pos); // >= 1: line_starts[0] == 0
        (line, pos - self.line_starts[line - 1] + 1)
    }

    /// The char index where the line `k` lines after the one holding `pos` starts.
    fn line_start_after(&self, pos: usize, k: usize) -> usize {
        let line = self.line_starts.partition_point(|&s| s <= pos);
        self.line_starts.get(line - 1 + k).copied().unwrap_or(self.chars.len())
    }

    fn err(&self, pos: usize, msg: impl Into<String>) -> Error {
        let (line, col) = self.line_col(pos);
        Error::Grammar { at: Location::LineCol { line, col }, msg: msg.into() }
    }
}
