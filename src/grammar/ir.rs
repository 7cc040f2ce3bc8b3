//! The grammar IR shared by every front end (regex, EBNF/GBNF, JSON Schema, choices).
//!
//! A [`Grammar`] is a set of named rules, each with one [`Expr`] body. Expressions are regular
//! operators (sequence, alternation, bounded or unbounded repetition) over leaves that are
//! either terminals (a literal string or a regex, as a `regex_syntax` HIR over bytes/UTF-8) or
//! references to other rules. A rule reference is what makes the language context-free;
//! a body with no reference is regular and the compiler may fold it into a single lexeme.
//!
//! Invariants:
//! - `RuleId(i)` indexes `Grammar::rules`; every `Expr::Rule` names an existing rule.
//! - `Grammar::start` is the rule the whole output must derive (the GBNF `root`).
//! - Front ends attach a [`Span`] to each rule so later errors can point at the source.

use std::sync::Arc;

use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir, Repetition};

use crate::regular::Lexeme;

/// Index of a rule in [`Grammar::rules`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u32);

/// A 1-based position in the front end's source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    pub line: usize,
    pub col: usize,
}

#[derive(Debug, Clone)]
pub enum Expr {
    /// The empty string.
    Empty,
    /// A literal byte string (UTF-8 text in practice).
    Literal(String),
    /// A regular language given as a regex HIR (character classes, `/regex/` terminals, ...).
    /// Matched in full: no implicit `.*` around it.
    Regex(Arc<Hir>),
    /// A regular language built from regexes by intersection and complement: what one regex
    /// cannot say directly ("matches `pattern` *and* has at most 20 characters", "any key
    /// *except* these"). Always a terminal of its own, never merged with its neighbours.
    Lexeme(Arc<Lexeme>),
    /// A literal that also marks where items that must be pairwise distinct are (see
    /// [`Mark`]). Every consumer but the matcher reads it as [`Expr::Literal`] of
    /// [`Mark::text`]; lowered, it is a terminal of its own that the matcher watches.
    Mark(Mark),
    /// One token of the vocabulary, matched by its id rather than by its text (GBNF's `<[id]>`
    /// and `<name>`, Lark's `<|name|>`): resolved against the vocabulary when the grammar is
    /// compiled (see `automaton::tokens`). Consumers with no vocabulary read it as the token's
    /// name ([`TokenRef::text`]).
    Token(TokenRef),
    /// `min` to `max` tokens, none of them `but` (GBNF's `!<X>` repeated: `(!<X>)*`,
    /// `(!<X>)+`). Compiled, only the unbounded runs of `min` 0 or 1 are supported: as text,
    /// any text (at least one character for `min` 1), written by text tokens with `but` kept
    /// out (see `automaton::tokens`); `text` is that language, which consumers with no
    /// vocabulary read it as. Other counts are refused, naming the rule: one token but `but`
    /// is not a language of text.
    TokensBut { but: TokenRef, min: u32, max: Option<u32>, text: Arc<Hir> },
    /// A reference to another rule.
    Rule(RuleId),
    /// Each part in order.
    Seq(Vec<Expr>),
    /// Any one of the alternatives.
    Alt(Vec<Expr>),
    /// `min` to `max` (inclusive; `None` = unbounded) copies of the body.
    Repeat { body: Box<Expr>, min: u32, max: Option<u32> },
}

/// Items of an output that must differ from each other: JSON values compared as JSON (numbers
/// by value, objects without regard to key order, strings after unescaping), which a grammar
/// cannot say. The matcher enforces it (see `automaton::distinct`): it refuses a token that
/// would complete an item equal to an earlier item of the same list.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Mark {
    /// `[` opening a JSON array whose items must be pairwise distinct (`uniqueItems`).
    DistinctArray,
    /// `{` opening a JSON object whose keys must be pairwise distinct: keys that the grammar
    /// itself cannot keep apart (any key of `additionalProperties`), each compared as a string.
    /// `look_ahead`: some key can run out of completions part-way (`maxLength`, a pattern such
    /// as `^(xyz|c+)$`), so the matcher looks ahead from a token that spells on an earlier key,
    /// as it does for an array's items; without it a repeat is refused only where it ends (any
    /// other key is still open then).
    DistinctKeys { look_ahead: bool },
    /// A literal (a tool-call tag) after which one JSON value follows that must differ from
    /// the value after every earlier copy of the same literal in this output (one list per
    /// literal, for the whole output).
    DistinctAfter(Arc<str>),
    /// A literal (a tool call's opening tag) after which the text up to and including the next
    /// `end` is an item that must differ, as text, from the item after every earlier copy of
    /// the same literal in this output: for calls that are not JSON (XML elements, pythonic
    /// calls).
    DistinctText { open: Arc<str>, end: TextEnd },
}

/// Where a [`Mark::DistinctText`] item ends: at the next `close`, or with `quoted` the next one
/// outside double-quoted strings (JSON's escapes: pythonic calls, whose values are spelled as
/// JSON).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TextEnd {
    pub close: Arc<str>,
    pub quoted: bool,
}

impl Mark {
    /// The text the mark stands for.
    pub fn text(&self) -> &str {
        match self {
            Mark::DistinctArray => "[",
            Mark::DistinctKeys { .. } => "{",
            Mark::DistinctAfter(s) => s,
            Mark::DistinctText { open, .. } => open,
        }
    }
}

/// A token named by a grammar: by its id, or by its exact text (a special token's name).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub enum TokenRef {
    Id(u32),
    Name(String),
}

impl TokenRef {
    /// A token as llama.cpp's token terminals write it: `<[128010]>` by id, any other text
    /// (`<|python_tag|>`) by name.
    pub fn parse(text: &str) -> TokenRef {
        text.strip_prefix("<[")
            .and_then(|r| r.strip_suffix("]>"))
            .and_then(|id| id.parse().ok())
            .map_or_else(|| TokenRef::Name(text.to_string()), TokenRef::Id)
    }

    /// How the grammar wrote it (`<[128000]>`, `<think>`), for messages and for consumers
    /// without a vocabulary.
    pub fn text(&self) -> String {
        match self {
            TokenRef::Id(id) => format!("<[{id}]>"),
            TokenRef::Name(name) => name.clone(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    pub body: Expr,
    /// Where the rule was defined in the source, if it came from text.
    pub span: Option<Span>,
}

#[derive(Debug, Clone)]
pub struct Grammar {
    pub rules: Vec<Rule>,
    pub start: RuleId,
}

impl Grammar {
    pub fn rule(&self, id: RuleId) -> &Rule {
        &self.rules[id.0 as usize]
    }

    /// Appends this grammar's rules to `rules` (its rule references renumbered to match);
    /// returns its start rule there. For grammars built from others (tool calls, triggers).
    pub fn append_to(self, rules: &mut Vec<Rule>) -> RuleId {
        let off = rules.len() as u32;
        let start = RuleId(self.start.0 + off);
        for mut r in self.rules {
            r.body.for_each_rule_mut(&mut |id| id.0 += off);
            rules.push(r);
        }
        start
    }

    /// A grammar with a single rule `root ::= body`.
    pub fn single(body: Expr) -> Grammar {
        Grammar { rules: vec![Rule { name: "root".into(), body, span: None }], start: RuleId(0) }
    }
}

impl Expr {
    /// The sequence of `parts`, flat: sequences among them spliced in, empty strings left out,
    /// neighbouring literals joined; one part is itself, none is [`Expr::Empty`]. The language
    /// of `Expr::Seq(parts)` in fewer nodes (a large schema's IR is mostly the short sequences
    /// of its punctuation and whitespace: each node is built, walked and dropped).
    pub fn seq(mut parts: Vec<Expr>) -> Expr {
        let flat = parts.iter().all(|x| !matches!(x, Expr::Seq(_) | Expr::Empty))
            && !parts.windows(2).any(|w| matches!(w, [Expr::Literal(_), Expr::Literal(_)]));
        if flat {
            // Already flat (most are): kept as it is, no second vector.
            return match parts.len() {
                0 => Expr::Empty,
                1 => parts.pop().expect("one part"),
                _ => Expr::Seq(parts),
            };
        }
        let mut out: Vec<Expr> = Vec::with_capacity(parts.len() + 2);
        let push = |out: &mut Vec<Expr>, x: Expr| match (out.last_mut(), x) {
            (_, Expr::Empty) => {}
            (Some(Expr::Literal(a)), Expr::Literal(b)) => a.push_str(&b),
            (_, x) => out.push(x),
        };
        for x in parts {
            match x {
                Expr::Seq(xs) => xs.into_iter().for_each(|y| push(&mut out, y)),
                x => push(&mut out, x),
            }
        }
        match out.len() {
            0 => Expr::Empty,
            1 => out.pop().expect("one part"),
            _ => Expr::Seq(out),
        }
    }

    /// `min` to `max` tokens, none of them `but` ([`Expr::TokensBut`]), with its text.
    pub fn tokens_but(but: TokenRef, min: u32, max: Option<u32>) -> Expr {
        let any = Hir::class(Class::Unicode(ClassUnicode::new([ClassUnicodeRange::new('\0', char::MAX)])));
        let text = Hir::repetition(Repetition { min: min.min(1), max: None, greedy: true, sub: Box::new(any) });
        Expr::TokensBut { but, min, max, text: Arc::new(text) }
    }

    /// Is this a run of tokens that compiling supports ([`Expr::TokensBut`]: unbounded, `min`
    /// 0 or 1)? `true` for every other expression.
    pub fn is_supported_tokens_but(&self) -> bool {
        match self {
            Expr::TokensBut { min, max, .. } => *min <= 1 && max.is_none(),
            _ => true,
        }
    }

    /// Calls `f` on every rule this expression references directly.
    pub fn for_each_rule(&self, f: &mut impl FnMut(RuleId)) {
        match self {
            Expr::Empty
            | Expr::Literal(_)
            | Expr::Regex(_)
            | Expr::Lexeme(_)
            | Expr::Mark(_)
            | Expr::Token(_)
            | Expr::TokensBut { .. } => {}
            Expr::Rule(r) => f(*r),
            Expr::Seq(xs) | Expr::Alt(xs) => xs.iter().for_each(|x| x.for_each_rule(f)),
            Expr::Repeat { body, .. } => body.for_each_rule(f),
        }
    }

    /// Calls `f` on every rule reference in this expression, to renumber them.
    pub fn for_each_rule_mut(&mut self, f: &mut impl FnMut(&mut RuleId)) {
        match self {
            Expr::Empty
            | Expr::Literal(_)
            | Expr::Regex(_)
            | Expr::Lexeme(_)
            | Expr::Mark(_)
            | Expr::Token(_)
            | Expr::TokensBut { .. } => {}
            Expr::Rule(r) => f(r),
            Expr::Seq(xs) | Expr::Alt(xs) => xs.iter_mut().for_each(|x| x.for_each_rule_mut(f)),
            Expr::Repeat { body, .. } => body.for_each_rule_mut(f),
        }
    }
}
