//! Lark grammar text → a syntax tree ([`Ast`]): definitions and directives, in order.
//!
//! A definition ends at a newline unless the next line (blank and comment lines aside) starts
//! with `|`; inside `(...)`, `[...]` and `{...}` newlines are blanks. Regex and literal
//! terminals are turned into HIRs here, so their errors point at their text.
//!
//! Invariants: nesting deeper than [`Limits::max_depth`] is an [`Error::Limit`] (the parser
//! recurses once per level, so deep input cannot overflow the stack); a repetition count
//! above [`Limits::max_repeat`] is an [`Error::Limit`]; every other problem is an
//! [`Error::Grammar`] at its `line:col`.

use std::sync::Arc;

use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir};
use serde_json::Value;

use super::lexer::{Tok, Token};
use super::Source;
use crate::error::{Error, LimitKind, Result};
use crate::grammar::ebnf::Limits;
use crate::grammar::TokenRef;

/// An expression of a rule or terminal body.
#[derive(Debug, Clone)]
pub(super) enum Node {
    Empty,
    /// A string literal or `"a".."z"` range or `/regex/`, as a HIR (with the regex's own
    /// lazy quantifiers kept: they matter where the terminal is used, see `lower`).
    Term {
        hir: Arc<Hir>,
        at: usize,
    },
    /// A rule, terminal or template parameter by name; `args` for a template's use.
    Name {
        name: String,
        args: Vec<Node>,
        at: usize,
    },
    Json {
        value: Value,
        at: usize,
    },
    /// A special token, `<|eot_id|>` or `<[128000]>`: one token of the vocabulary.
    Token {
        token: TokenRef,
        at: usize,
    },
    Seq(Vec<Node>),
    Alt(Vec<Node>),
    Repeat {
        body: Box<Node>,
        min: u32,
        max: Option<u32>,
    },
    /// llguidance's `A & B` (terminals only).
    And {
        parts: Vec<Node>,
        at: usize,
    },
    /// llguidance's `~A` (terminals only).
    Not {
        body: Box<Node>,
        at: usize,
    },
    /// A regex that does not compile: the error's place and message, reported when the
    /// grammar is checked (after `%declare`, so an indentation grammar is named as such).
    Invalid {
        at: usize,
        msg: String,
    },
}

#[derive(Debug, Clone)]
pub(super) struct Attr {
    pub key: String,
    pub value: Option<AttrValue>,
    pub at: usize,
}

#[derive(Debug, Clone)]
pub(super) enum AttrValue {
    Str(String),
    Number,
    Name(String),
}

#[derive(Debug, Clone)]
pub(super) struct Def {
    pub name: String,
    pub at: usize,
    /// Template parameters (`name{a, b}: ...`).
    pub params: Vec<String>,
    /// llguidance's `name[lazy, suffix="x"]`.
    pub attrs: Vec<Attr>,
    pub body: Node,
}

impl Def {
    pub fn is_terminal(&self) -> bool {
        is_terminal_name(&self.name)
    }
}

/// Lark's rule: a name whose first letter (after leading `_`) is uppercase is a terminal.
pub(super) fn is_terminal_name(name: &str) -> bool {
    name.trim_start_matches('_').starts_with(|c: char| c.is_ascii_uppercase())
}

#[derive(Debug, Clone)]
pub(super) enum Item {
    Def(Def),
    Override(Def),
    Extend(Def),
    Ignore {
        body: Node,
        at: usize,
    },
    /// `%import module.NAME [-> ALIAS]` or `%import module (A, B)`: (name, alias, at) each.
    Import {
        module: String,
        module_at: usize,
        names: Vec<(String, String, usize)>,
    },
    Declare {
        names: Vec<(String, usize)>,
    },
    Llguidance {
        value: Value,
        at: usize,
    },
}

pub(super) fn parse(src: &Source, tokens: Vec<Token>, limits: Limits) -> Result<Vec<Item>> {
    let mut p = Parser { src, toks: tokens, pos: 0, limits };
    p.items()
}

struct Parser<'a> {
    src: &'a Source,
    toks: Vec<Token>,
    pos: usize,
    limits: Limits,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.tok)
    }

    fn peek_at(&self, k: usize) -> Option<&Tok> {
        self.toks.get(self.pos + k).map(|t| &t.tok)
    }

    /// Where the next token starts (the end of the text when none).
    fn here(&self) -> usize {
        self.toks.get(self.pos).map_or(self.src.chars.len(), |t| t.at)
    }

    fn bump(&mut self) -> Option<Token> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn err(&self, at: usize, msg: impl Into<String>) -> Error {
        self.src.err(at, msg)
    }

    fn unexpected(&self, wanted: &str) -> Error {
        match self.peek() {
            None => self.err(self.here(), format!("expected {wanted}, found the end of the grammar")),
            Some(Tok::Newline) => self.err(self.here(), format!("expected {wanted}, found the end of the line")),
            Some(t) => self.err(self.here(), format!("expected {wanted}, found {}", show(t))),
        }
    }

    fn expect(&mut self, t: Tok, wanted: &str) -> Result<()> {
        if self.peek() == Some(&t) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.unexpected(wanted))
        }
    }

    fn skip_newlines(&mut self) {
        while self.peek() == Some(&Tok::Newline) {
            self.pos += 1;
        }
    }

    /// At the end of a definition or directive: a newline or the end.
    fn end_of_item(&mut self) -> Result<()> {
        match self.peek() {
            None | Some(Tok::Newline) => Ok(()),
            Some(Tok::RParen) => Err(self.err(self.here(), "unmatched `)`")),
            Some(Tok::RBracket) => Err(self.err(self.here(), "unmatched `]`")),
            Some(_) => Err(self.unexpected("the end of the line")),
        }
    }

    /// A special token: `<[id]>` by id, any other `<...>` by its text. Ranges and negations of
    /// ids (llguidance's `<[1-5]>`, `<[^2]>`) are refused.
    fn special(&self, text: &str, at: usize) -> Result<TokenRef> {
        let Some(inner) = text.strip_prefix("<[").and_then(|t| t.strip_suffix("]>")) else {
            return Ok(TokenRef::Name(text.to_string()));
        };
        match inner.parse::<u32>() {
            Ok(id) => Ok(TokenRef::Id(id)),
            Err(_) => Err(self.err(
                at,
                format!("`{text}`: only one token id fits in `<[...]>` (ranges and negations are not supported)"),
            )),
        }
    }

    fn depth_check(&self, depth: usize, at: usize) -> Result<()> {
        if depth >= self.limits.max_depth {
            let (line, col) = self.src.line_col(at);
            return Err(Error::Limit {
                kind: LimitKind::GrammarNesting,
                what: format!("nesting depth at {line}:{col}"),
                limit: self.limits.max_depth,
                hint: Some("raise ebnf::Limits::max_depth (LarkOptions::limits) or flatten the grammar".into()),
            });
        }
        Ok(())
    }

    // ---- items ----------------------------------------------------------------------------

    fn items(&mut self) -> Result<Vec<Item>> {
        let mut items = Vec::new();
        loop {
            self.skip_newlines();
            let Some(tok) = self.peek().cloned() else { break };
            let at = self.here();
            let item = match tok {
                Tok::Directive(d) => {
                    self.pos += 1;
                    self.directive(&d, at)?
                }
                Tok::Name(_) | Tok::Bang | Tok::Op('?') => Item::Def(self.definition()?),
                t => return Err(self.err(at, format!("expected a rule or terminal definition, found {}", show(&t)))),
            };
            self.end_of_item()?;
            items.push(item);
        }
        Ok(items)
    }

    fn directive(&mut self, d: &str, at: usize) -> Result<Item> {
        Ok(match d {
            "ignore" => Item::Ignore { body: self.alternates(0)?, at },
            "import" => self.import()?,
            "declare" => {
                let mut names = Vec::new();
                while let Some(Tok::Name(n)) = self.peek().cloned() {
                    names.push((n, self.here()));
                    self.pos += 1;
                }
                if names.is_empty() {
                    return Err(self.unexpected("names to declare"));
                }
                Item::Declare { names }
            }
            "override" => Item::Override(self.definition()?),
            "extend" => Item::Extend(self.definition()?),
            "llguidance" => match self.bump() {
                Some(Token { tok: Tok::Json(value), at }) => Item::Llguidance { value, at },
                _ => return Err(self.err(at, "expected a JSON object after %llguidance")),
            },
            "json" => return Err(self.err(at, "%json stands where an expression does, as in `name: %json {...}`")),
            "regex" => return Err(self.err(at, "%regex {...} is not supported (write the regex as /.../)")),
            _ => return Err(self.err(at, format!("unknown directive %{d}"))),
        })
    }

    /// `%import a.b.NAME [-> ALIAS]` or `%import a.b (N1, N2)`.
    fn import(&mut self) -> Result<Item> {
        let module_at = self.here();
        let mut path: Vec<(String, usize)> = Vec::new();
        if self.peek() == Some(&Tok::Dot) {
            return Err(self.err(module_at, "relative imports (`%import .file`) are not supported: only Lark's `common` and `unicode` libraries can be imported"));
        }
        loop {
            match self.peek().cloned() {
                Some(Tok::Name(n)) => {
                    path.push((n, self.here()));
                    self.pos += 1;
                }
                _ => return Err(self.unexpected("a module name")),
            }
            if self.peek() == Some(&Tok::Dot) {
                self.pos += 1;
            } else {
                break;
            }
        }
        if self.peek() == Some(&Tok::LParen) {
            self.pos += 1;
            let mut names = Vec::new();
            loop {
                self.skip_newlines();
                match self.bump() {
                    Some(Token { tok: Tok::Name(n), at }) => names.push((n.clone(), n, at)),
                    _ => {
                        self.pos -= 1;
                        return Err(self.unexpected("a name to import"));
                    }
                }
                self.skip_newlines();
                match self.bump().map(|t| t.tok) {
                    Some(Tok::Comma) => continue,
                    Some(Tok::RParen) => break,
                    _ => {
                        self.pos -= 1;
                        return Err(self.unexpected("`,` or `)`"));
                    }
                }
            }
            let module = path.iter().map(|p| p.0.as_str()).collect::<Vec<_>>().join(".");
            return Ok(Item::Import { module, module_at, names });
        }
        if path.len() < 2 {
            return Err(self.err(module_at, "expected `%import module.NAME` or `%import module (NAME, ...)`"));
        }
        let (name, name_at) = path.pop().unwrap_or_default();
        let module = path.iter().map(|p| p.0.as_str()).collect::<Vec<_>>().join(".");
        let mut alias = name.clone();
        if self.peek() == Some(&Tok::Arrow) {
            self.pos += 1;
            match self.bump().map(|t| t.tok) {
                Some(Tok::Name(a)) => alias = a,
                _ => {
                    self.pos -= 1;
                    return Err(self.unexpected("a name after `->`"));
                }
            }
        }
        Ok(Item::Import { module, module_at, names: vec![(name, alias, name_at)] })
    }

    /// `[!|?]name[{params}][.priority][[attrs]]: expansions`.
    fn definition(&mut self) -> Result<Def> {
        while matches!(self.peek(), Some(Tok::Bang | Tok::Op('?'))) {
            self.pos += 1;
        }
        let at = self.here();
        let name = match self.peek().cloned() {
            Some(Tok::Name(n)) => n,
            _ => return Err(self.unexpected("a rule or terminal name")),
        };
        self.pos += 1;
        let mut params = Vec::new();
        if self.peek() == Some(&Tok::LBrace) {
            self.pos += 1;
            loop {
                match self.bump().map(|t| t.tok) {
                    Some(Tok::Name(p)) => params.push(p),
                    _ => {
                        self.pos -= 1;
                        return Err(self.unexpected("a template parameter name"));
                    }
                }
                match self.bump().map(|t| t.tok) {
                    Some(Tok::Comma) => continue,
                    Some(Tok::RBrace) => break,
                    _ => {
                        self.pos -= 1;
                        return Err(self.unexpected("`,` or `}`"));
                    }
                }
            }
        }
        if self.peek() == Some(&Tok::Dot) {
            self.pos += 1;
            match self.peek() {
                Some(Tok::Number(_)) => self.pos += 1,
                _ => return Err(self.unexpected("a priority number after `.`")),
            }
        }
        let mut attrs = Vec::new();
        if self.peek() == Some(&Tok::LBracket) {
            self.pos += 1;
            attrs = self.attrs()?;
        }
        if self.peek() != Some(&Tok::Colon) {
            return Err(self.unexpected(&format!("`:` after `{name}`")));
        }
        self.pos += 1;
        let body = self.alternates(0)?;
        Ok(Def { name, at, params, attrs, body })
    }

    /// `key[=value], ...]` after the `[`.
    fn attrs(&mut self) -> Result<Vec<Attr>> {
        let mut out = Vec::new();
        loop {
            let at = self.here();
            let key = match self.bump().map(|t| t.tok) {
                Some(Tok::Name(k)) => k,
                _ => {
                    self.pos -= 1;
                    return Err(self.unexpected("an attribute name"));
                }
            };
            let mut value = None;
            if self.peek() == Some(&Tok::Equals) {
                self.pos += 1;
                value = Some(match self.bump().map(|t| t.tok) {
                    Some(Tok::Str { text, .. }) => AttrValue::Str(text),
                    Some(Tok::Number(_)) => AttrValue::Number,
                    Some(Tok::Name(n)) => AttrValue::Name(n),
                    _ => {
                        self.pos -= 1;
                        return Err(self.unexpected("an attribute value"));
                    }
                });
            }
            out.push(Attr { key, value, at });
            match self.bump().map(|t| t.tok) {
                Some(Tok::Comma) => continue,
                Some(Tok::RBracket) => return Ok(out),
                _ => {
                    self.pos -= 1;
                    return Err(self.unexpected("`,` or `]`"));
                }
            }
        }
    }

    // ---- expressions ----------------------------------------------------------------------

    /// `conj ('|' conj)*`; at depth 0 a newline ends it unless the next line starts with `|`.
    fn alternates(&mut self, depth: usize) -> Result<Node> {
        let mut alts = vec![self.conjunction(depth)?];
        loop {
            if depth > 0 {
                self.skip_newlines();
            } else if self.peek() == Some(&Tok::Newline) {
                let mut k = self.pos;
                while self.toks.get(k).is_some_and(|t| t.tok == Tok::Newline) {
                    k += 1;
                }
                if self.toks.get(k).is_some_and(|t| t.tok == Tok::Pipe) {
                    self.pos = k;
                }
            }
            if self.peek() != Some(&Tok::Pipe) {
                break;
            }
            self.pos += 1;
            alts.push(self.conjunction(depth)?);
        }
        Ok(if alts.len() == 1 { alts.pop().unwrap_or(Node::Empty) } else { Node::Alt(alts) })
    }

    /// `seq ('&' seq)*` (llguidance), then an optional alias `-> name` (dropped).
    fn conjunction(&mut self, depth: usize) -> Result<Node> {
        let at = self.here();
        let mut parts = vec![self.sequence(depth)?];
        while self.peek() == Some(&Tok::Amp) {
            self.pos += 1;
            parts.push(self.sequence(depth)?);
        }
        if self.peek() == Some(&Tok::Arrow) {
            self.pos += 1;
            match self.peek() {
                Some(Tok::Name(_)) => self.pos += 1,
                _ => return Err(self.unexpected("an alias name after `->`")),
            }
        }
        Ok(if parts.len() == 1 { parts.pop().unwrap_or(Node::Empty) } else { Node::And { parts, at } })
    }

    fn sequence(&mut self, depth: usize) -> Result<Node> {
        let mut items = Vec::new();
        loop {
            if depth > 0 {
                self.skip_newlines();
            }
            match self.peek() {
                None
                | Some(
                    Tok::Newline
                    | Tok::Pipe
                    | Tok::RParen
                    | Tok::RBracket
                    | Tok::RBrace
                    | Tok::Comma
                    | Tok::Arrow
                    | Tok::Amp
                    | Tok::Colon,
                ) => break,
                _ => {}
            }
            items.push(self.postfix(depth)?);
        }
        Ok(match items.len() {
            0 => Node::Empty,
            1 => items.pop().unwrap_or(Node::Empty),
            _ => Node::Seq(items),
        })
    }

    /// An atom and its operators: `?`, `*`, `+`, `~ n`, `~ n..m`, `{n}`, `{n,m}` (llguidance).
    fn postfix(&mut self, depth: usize) -> Result<Node> {
        let mut node = self.atom(depth)?;
        let mut levels = 0;
        loop {
            let at = self.here();
            let (min, max) = match self.peek() {
                Some(Tok::Op(c)) => {
                    let c = *c;
                    self.pos += 1;
                    match c {
                        '?' => (0, Some(1)),
                        '*' => (0, None),
                        _ => (1, None),
                    }
                }
                Some(Tok::Tilde) if matches!(self.peek_at(1), Some(Tok::Number(_))) => {
                    self.pos += 1;
                    let min = self.count()?;
                    let max = if self.peek() == Some(&Tok::DotDot) {
                        self.pos += 1;
                        self.count()?
                    } else {
                        min
                    };
                    self.bounds(at, min, Some(max))?
                }
                Some(Tok::LBrace) if matches!(self.peek_at(1), Some(Tok::Number(_) | Tok::Comma)) => {
                    self.pos += 1;
                    let min = if matches!(self.peek(), Some(Tok::Number(_))) { self.count()? } else { 0 };
                    let max = if self.peek() == Some(&Tok::Comma) {
                        self.pos += 1;
                        if matches!(self.peek(), Some(Tok::Number(_))) {
                            Some(self.count()?)
                        } else {
                            None
                        }
                    } else {
                        Some(min)
                    };
                    self.expect(Tok::RBrace, "`}`")?;
                    self.bounds(at, min, max)?
                }
                _ => break,
            };
            levels += 1;
            self.depth_check(depth + levels, at)?;
            node = Node::Repeat { body: Box::new(node), min, max };
        }
        Ok(node)
    }

    /// A repetition count: a non-negative integer, at most `max_repeat`.
    fn count(&mut self) -> Result<u64> {
        let at = self.here();
        match self.bump().map(|t| t.tok) {
            Some(Tok::Number(n)) => {
                if n.contains(['.', '-', '+']) {
                    return Err(self.err(at, format!("expected a whole number, found `{n}`")));
                }
                Ok(n.parse::<u64>().unwrap_or(u64::MAX))
            }
            _ => {
                self.pos -= 1;
                Err(self.unexpected("a number"))
            }
        }
    }

    fn bounds(&self, at: usize, min: u64, max: Option<u64>) -> Result<(u32, Option<u32>)> {
        let limit = self.limits.max_repeat as u64;
        if min > limit || max.is_some_and(|m| m > limit) {
            let (line, col) = self.src.line_col(at);
            return Err(Error::Limit {
                kind: LimitKind::Repetition,
                what: format!("repetition count at {line}:{col}"),
                limit: limit as usize,
                hint: Some("raise ebnf::Limits::max_repeat (LarkOptions::limits)".into()),
            });
        }
        if let Some(m) = max {
            if min > m {
                return Err(self.err(at, format!("repetition bounds {min}..{m}: minimum exceeds maximum")));
            }
        }
        Ok((min as u32, max.map(|m| m as u32)))
    }

    fn atom(&mut self, depth: usize) -> Result<Node> {
        let at = self.here();
        let Some(tok) = self.peek().cloned() else { return Err(self.unexpected("an expression")) };
        self.pos += 1;
        Ok(match tok {
            Tok::LParen | Tok::LBracket => {
                self.depth_check(depth, at)?;
                let inner = self.alternates(depth + 1)?;
                let (close, what) = if tok == Tok::LParen { (Tok::RParen, "`)`") } else { (Tok::RBracket, "`]`") };
                if self.peek() != Some(&close) {
                    return Err(match self.peek() {
                        None => self.err(at, format!("unclosed {}", show(&tok))),
                        _ => self.unexpected(what),
                    });
                }
                self.pos += 1;
                if tok == Tok::LParen {
                    inner
                } else {
                    Node::Repeat { body: Box::new(inner), min: 0, max: Some(1) }
                }
            }
            Tok::Str { text, insensitive } => {
                if self.peek() == Some(&Tok::DotDot) {
                    self.pos += 1;
                    let hi_at = self.here();
                    let hi = match self.bump().map(|t| t.tok) {
                        Some(Tok::Str { text, .. }) => text,
                        _ => {
                            self.pos -= 1;
                            return Err(self.unexpected("a string after `..`"));
                        }
                    };
                    return self.range(&text, at, &hi, hi_at);
                }
                Node::Term { hir: Arc::new(literal_hir(&text, insensitive)), at }
            }
            Tok::Regex { pattern, flags, origin } => match self.regex(&pattern, &flags, &origin, at) {
                Ok(hir) => Node::Term { hir: Arc::new(hir), at },
                Err((at, msg)) => Node::Invalid { at, msg },
            },
            Tok::Name(name) => {
                let mut args = Vec::new();
                if self.peek() == Some(&Tok::LBrace) && !matches!(self.peek_at(1), Some(Tok::Number(_) | Tok::Comma)) {
                    self.depth_check(depth, at)?;
                    self.pos += 1;
                    loop {
                        args.push(self.alternates(depth + 1)?);
                        match self.bump().map(|t| t.tok) {
                            Some(Tok::Comma) => continue,
                            Some(Tok::RBrace) => break,
                            _ => {
                                self.pos -= 1;
                                return Err(self.unexpected("`,` or `}` in the template's arguments"));
                            }
                        }
                    }
                }
                Node::Name { name, args, at }
            }
            Tok::Directive(d) if d == "json" => match self.bump() {
                Some(Token { tok: Tok::Json(value), .. }) => Node::Json { value, at },
                _ => return Err(self.err(at, "expected a JSON Schema object after %json")),
            },
            Tok::Tilde => {
                self.depth_check(depth, at)?;
                let body = self.postfix(depth + 1)?;
                Node::Not { body: Box::new(body), at }
            }
            Tok::Special(text) => Node::Token { token: self.special(&text, at)?, at },
            Tok::At(name) => {
                return Err(self.err(at, format!("references to other grammars (`@{name}`) are not supported")))
            }
            Tok::Directive(d) if d == "regex" => {
                return Err(self.err(at, "%regex {...} is not supported (write the regex as /.../)"))
            }
            t => {
                self.pos -= 1;
                return Err(self.err(at, format!("expected an expression, found {}", show(&t))));
            }
        })
    }

    fn range(&self, lo: &str, lo_at: usize, hi: &str, hi_at: usize) -> Result<Node> {
        let one = |s: &str, at: usize| -> Result<char> {
            let mut it = s.chars();
            match (it.next(), it.next()) {
                (Some(c), None) => Ok(c),
                _ => Err(self.err(at, format!("a range `\"a\"..\"z\"` needs single characters, found {s:?}"))),
            }
        };
        let (a, b) = (one(lo, lo_at)?, one(hi, hi_at)?);
        if a > b {
            return Err(self.err(lo_at, format!("reversed range {a:?}..{b:?}")));
        }
        let class = ClassUnicode::new([ClassUnicodeRange::new(a, b)]);
        Ok(Node::Term { hir: Arc::new(Hir::class(Class::Unicode(class))), at: lo_at })
    }

    /// A `/regex/flags` in Python's syntax, read by `regex-syntax` (the two agree on what Lark
    /// grammars use; lookarounds and anchors are refused: a terminal has no context).
    fn regex(
        &self,
        pattern: &str,
        flags: &str,
        origin: &[usize],
        at: usize,
    ) -> std::result::Result<Hir, (usize, String)> {
        let mut b = regex_syntax::ParserBuilder::new();
        b.utf8(true).unicode(true).nest_limit(self.limits.max_depth.min(u32::MAX as usize) as u32);
        for f in flags.chars() {
            match f {
                'i' => b.case_insensitive(true),
                's' => b.dot_matches_new_line(true),
                'x' => b.ignore_whitespace(true),
                // `m` changes only what `^` and `$` mean, and anchors are refused anyway;
                // `u` is Python 3's default.
                'm' => b.multi_line(true),
                'u' => &mut b,
                _ => return Err((at, format!("regex flag `{f}` is not supported (allowed: i, s, m, x, u)"))),
            };
        }
        let hir = b.build().parse(pattern).map_err(|e| {
            let (offset, msg) = match &e {
                regex_syntax::Error::Parse(e) => (e.span().start.offset, e.kind().to_string()),
                regex_syntax::Error::Translate(e) => (e.span().start.offset, e.kind().to_string()),
                _ => (0, e.to_string()),
            };
            let msg = if msg.contains("look-around") {
                "lookarounds (`(?=`, `(?!`, `(?<=`, `(?<!`) are not supported: a terminal is matched without context"
                    .to_string()
            } else {
                msg
            };
            (origin.get(offset).copied().unwrap_or(at), format!("invalid regex: {msg}"))
        })?;
        if !hir.properties().look_set().is_empty() {
            return Err((at, "anchors and word boundaries are not supported in regex terminals".into()));
        }
        Ok(hir)
    }
}

/// A literal's HIR, folded for case when `insensitive` (`"select"i`).
pub(super) fn literal_hir(text: &str, insensitive: bool) -> Hir {
    if !insensitive {
        return Hir::literal(text.as_bytes());
    }
    let mut b = regex_syntax::ParserBuilder::new();
    b.case_insensitive(true).unicode(true).utf8(true);
    // An escaped literal always parses.
    b.build().parse(&regex_syntax::escape(text)).unwrap_or_else(|_| Hir::literal(text.as_bytes()))
}

fn show(t: &Tok) -> String {
    match t {
        Tok::Name(n) => format!("`{n}`"),
        Tok::Str { text, .. } => format!("string {text:?}"),
        Tok::Regex { pattern, .. } => format!("regex /{pattern}/"),
        Tok::Number(n) => format!("number {n}"),
        Tok::Directive(d) => format!("%{d}"),
        Tok::Json(_) => "a JSON object".into(),
        Tok::Special(s) => format!("`{s}`"),
        Tok::At(s) => format!("`@{s}`"),
        Tok::Newline => "the end of the line".into(),
        Tok::Colon => "`:`".into(),
        Tok::Pipe => "`|`".into(),
        Tok::Arrow => "`->`".into(),
        Tok::LParen => "`(`".into(),
        Tok::RParen => "`)`".into(),
        Tok::LBracket => "`[`".into(),
        Tok::RBracket => "`]`".into(),
        Tok::LBrace => "`{`".into(),
        Tok::RBrace => "`}`".into(),
        Tok::Comma => "`,`".into(),
        Tok::Dot => "`.`".into(),
        Tok::DotDot => "`..`".into(),
        Tok::Tilde => "`~`".into(),
        Tok::Bang => "`!`".into(),
        Tok::Amp => "`&`".into(),
        Tok::Equals => "`=`".into(),
        Tok::Op(c) => format!("`{c}`"),
    }
}
