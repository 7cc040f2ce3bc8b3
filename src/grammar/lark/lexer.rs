//! The tokens of Lark's grammar syntax: names, literals, regexes, punctuation, `%directives`,
//! newlines (they end a definition) and the JSON objects that follow `%json`, `%regex` and
//! `%llguidance`.
//!
//! Invariants: every token carries the char index where it starts ([`Token::at`]); comments
//! (`//` and `#` to the end of the line) and blanks are dropped; consecutive newlines are one
//! [`Tok::Newline`]. Lexing never panics: anything else is an [`Error::Grammar`] with its
//! `line:col`.

use crate::error::{Error, Result};

use super::Source;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    /// `[A-Za-z_][A-Za-z0-9_-]*` (llguidance allows `-` inside names).
    Name(String),
    /// A string literal, escapes decoded; `insensitive` for the `i` flag (`"abc"i`).
    Str {
        text: String,
        insensitive: bool,
    },
    /// A `/regex/flags` literal: the pattern with `\/` turned into `/`, and for each byte of
    /// the pattern the char index it came from (to place regex errors).
    Regex {
        pattern: String,
        flags: String,
        origin: Vec<usize>,
    },
    /// A number as written (`2`, `-1`, `0.7`).
    Number(String),
    /// `%name`, without the `%`.
    Directive(String),
    /// The JSON object after `%json`, `%regex` or `%llguidance`.
    Json(serde_json::Value),
    /// `<...>`: a special token (`<|eot_id|>`, `<[128000]>`).
    Special(String),
    /// `@name`: a reference to another grammar (llguidance).
    At(String),
    Colon,
    Pipe,
    Arrow,
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Comma,
    Dot,
    DotDot,
    Tilde,
    Bang,
    Amp,
    Equals,
    /// `?`, `*` or `+`.
    Op(char),
    Newline,
}

#[derive(Debug, Clone)]
pub(super) struct Token {
    pub tok: Tok,
    pub at: usize,
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Splits the source into tokens.
pub(super) fn tokens(src: &Source) -> Result<Vec<Token>> {
    let mut lx = Lexer { src, pos: 0, out: Vec::new() };
    lx.run()?;
    Ok(lx.out)
}

struct Lexer<'a> {
    src: &'a Source,
    pos: usize,
    out: Vec<Token>,
}

impl Lexer<'_> {
    fn peek(&self) -> Option<char> {
        self.src.chars.get(self.pos).copied()
    }

    fn peek_at(&self, k: usize) -> Option<char> {
        self.src.chars.get(self.pos + k).copied()
    }

    fn err(&self, at: usize, msg: impl Into<String>) -> Error {
        self.src.err(at, msg)
    }

    fn push(&mut self, tok: Tok, at: usize) {
        if tok == Tok::Newline && matches!(self.out.last(), Some(Token { tok: Tok::Newline, .. }) | None) {
            return;
        }
        self.out.push(Token { tok, at });
    }

    fn run(&mut self) -> Result<()> {
        while let Some(c) = self.peek() {
            let at = self.pos;
            match c {
                ' ' | '\t' | '\u{feff}' => self.pos += 1,
                '\r' | '\n' => {
                    self.pos += 1;
                    self.push(Tok::Newline, at);
                }
                '#' => self.comment(),
                '/' if self.peek_at(1) == Some('/') => self.comment(),
                '/' => {
                    let tok = self.regex()?;
                    self.push(tok, at);
                }
                '"' => {
                    let tok = self.string()?;
                    self.push(tok, at);
                }
                '%' => {
                    self.pos += 1;
                    let name = self.name();
                    if name.is_empty() {
                        return Err(self.err(at, "expected a directive name after `%`"));
                    }
                    let json = matches!(name.as_str(), "json" | "regex" | "llguidance");
                    self.push(Tok::Directive(name), at);
                    if json {
                        self.json_after_directive()?;
                    }
                }
                '<' => {
                    let tok = self.special()?;
                    self.push(tok, at);
                }
                '@' => {
                    self.pos += 1;
                    let name = self.name();
                    let name = if name.is_empty() { self.digits() } else { name };
                    self.push(Tok::At(name), at);
                }
                '-' if self.peek_at(1) == Some('>') => {
                    self.pos += 2;
                    self.push(Tok::Arrow, at);
                }
                '-' | '+' if self.peek_at(1).is_some_and(|d| d.is_ascii_digit()) => {
                    self.pos += 1;
                    let n = format!("{c}{}", self.number_text());
                    self.push(Tok::Number(n), at);
                }
                '0'..='9' => {
                    let n = self.number_text();
                    self.push(Tok::Number(n), at);
                }
                '.' if self.peek_at(1) == Some('.') => {
                    self.pos += 2;
                    self.push(Tok::DotDot, at);
                }
                c if is_name_start(c) => {
                    let name = self.name();
                    self.push(Tok::Name(name), at);
                }
                _ => {
                    let tok = match c {
                        ':' => Tok::Colon,
                        '|' => Tok::Pipe,
                        '(' => Tok::LParen,
                        ')' => Tok::RParen,
                        '[' => Tok::LBracket,
                        ']' => Tok::RBracket,
                        '{' => Tok::LBrace,
                        '}' => Tok::RBrace,
                        ',' => Tok::Comma,
                        '.' => Tok::Dot,
                        '~' => Tok::Tilde,
                        '!' => Tok::Bang,
                        '&' => Tok::Amp,
                        '=' => Tok::Equals,
                        '?' | '*' | '+' => Tok::Op(c),
                        c => return Err(self.err(at, format!("unexpected {}", describe(c)))),
                    };
                    self.pos += 1;
                    self.push(tok, at);
                }
            }
        }
        Ok(())
    }

    fn comment(&mut self) {
        while self.peek().is_some_and(|c| c != '\n' && c != '\r') {
            self.pos += 1;
        }
    }

    /// A name; `-` inside it only between name characters (so `a->b` is `a`, `->`, `b`).
    fn name(&mut self) -> String {
        let start = self.pos;
        if !self.peek().is_some_and(is_name_start) {
            return String::new();
        }
        while let Some(c) = self.peek() {
            if is_name_char(c) || (c == '-' && self.peek_at(1).is_some_and(is_name_char) && self.pos > start) {
                self.pos += 1;
            } else {
                break;
            }
        }
        self.src.chars[start..self.pos].iter().collect()
    }

    fn digits(&mut self) -> String {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        self.src.chars[start..self.pos].iter().collect()
    }

    /// Digits with an optional fraction (`0.7`); `2..5` stays `2`, `..`, `5`.
    fn number_text(&mut self) -> String {
        let mut n = self.digits();
        if self.peek() == Some('.') && self.peek_at(1).is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
            n.push('.');
            n.push_str(&self.digits());
        }
        n
    }

    /// `"..."` with Python's escapes, then an optional `i` flag.
    fn string(&mut self) -> Result<Tok> {
        let open = self.pos;
        self.pos += 1;
        let mut text = String::new();
        loop {
            let at = self.pos;
            match self.peek() {
                None | Some('\n' | '\r') => return Err(self.err(open, "unterminated string literal")),
                Some('"') => {
                    self.pos += 1;
                    break;
                }
                Some('\\') => {
                    self.pos += 1;
                    let Some(e) = self.peek().filter(|&e| e != '\n' && e != '\r') else {
                        return Err(self.err(open, "unterminated string literal"));
                    };
                    self.pos += 1;
                    let digits = match e {
                        'n' => Some('\n'),
                        'r' => Some('\r'),
                        't' => Some('\t'),
                        'f' => Some('\u{c}'),
                        'v' => Some('\u{b}'),
                        'a' => Some('\u{7}'),
                        'b' => Some('\u{8}'),
                        '0' => Some('\0'),
                        '\\' | '"' | '\'' => Some(e),
                        _ => None,
                    };
                    if let Some(c) = digits {
                        text.push(c);
                        continue;
                    }
                    let n = match e {
                        'x' => 2,
                        'u' => 4,
                        'U' => 8,
                        _ => {
                            // Python keeps an unknown escape as written: `"\d"` is `\d`.
                            text.push('\\');
                            text.push(e);
                            continue;
                        }
                    };
                    let mut v: u32 = 0;
                    for _ in 0..n {
                        let Some(d) = self.peek().and_then(|c| c.to_digit(16)) else {
                            return Err(self.err(at, format!("`\\{e}` needs {n} hex digits")));
                        };
                        v = v * 16 + d;
                        self.pos += 1;
                    }
                    let c = char::from_u32(v)
                        .ok_or_else(|| self.err(at, format!("`\\{e}{v:X}` is not a Unicode scalar value")))?;
                    text.push(c);
                }
                Some(c) if c.is_control() && c != '\t' => {
                    return Err(self.err(at, format!("raw {} in a string literal; use an escape", describe(c))))
                }
                Some(c) => {
                    self.pos += 1;
                    text.push(c);
                }
            }
        }
        let insensitive = self.peek() == Some('i') && !self.peek_at(1).is_some_and(is_name_char);
        if insensitive {
            self.pos += 1;
        }
        Ok(Tok::Str { text, insensitive })
    }

    /// `/pattern/flags`: the pattern runs to the first unescaped `/`.
    fn regex(&mut self) -> Result<Tok> {
        let open = self.pos;
        self.pos += 1;
        let mut pattern = String::new();
        let mut origin = Vec::new();
        loop {
            let at = self.pos;
            let c = match self.peek() {
                None | Some('\n' | '\r') => return Err(self.err(open, "unterminated regex")),
                Some('/') => {
                    self.pos += 1;
                    break;
                }
                Some('\\') if self.peek_at(1) == Some('/') => {
                    self.pos += 2;
                    pattern.push('/');
                    origin.push(at);
                    continue;
                }
                Some('\\') if self.peek_at(1).is_some_and(|c| c != '\n' && c != '\r') => {
                    self.pos += 1;
                    pattern.push('\\');
                    origin.push(at);
                    self.peek().unwrap_or('\\')
                }
                Some(c) => c,
            };
            if c.is_control() && c != '\t' {
                return Err(self.err(self.pos, format!("raw {} in a regex; use an escape", describe(c))));
            }
            pattern.push(c);
            origin.extend(std::iter::repeat_n(self.pos, c.len_utf8()));
            self.pos += 1;
        }
        if pattern.is_empty() {
            return Err(self.err(open, "empty regex"));
        }
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
            self.pos += 1;
        }
        let flags = self.src.chars[start..self.pos].iter().collect();
        Ok(Tok::Regex { pattern, flags, origin })
    }

    /// `<...>` on one line.
    fn special(&mut self) -> Result<Tok> {
        let open = self.pos;
        self.pos += 1;
        loop {
            match self.peek() {
                None | Some('\n' | '\r') => return Err(self.err(open, "unterminated special token `<...>`")),
                Some('>') => {
                    self.pos += 1;
                    break;
                }
                Some(_) => self.pos += 1,
            }
        }
        Ok(Tok::Special(self.src.chars[open..self.pos].iter().collect()))
    }

    /// After `%json` and kin: blanks, then a JSON object `{...}` (braces balanced outside
    /// JSON strings), parsed with serde_json. Without a `{`, nothing (the parser complains).
    fn json_after_directive(&mut self) -> Result<()> {
        let mut i = self.pos;
        while matches!(self.src.chars.get(i), Some(' ' | '\t' | '\r' | '\n')) {
            i += 1;
        }
        if self.src.chars.get(i) != Some(&'{') {
            return Ok(());
        }
        let open = i;
        let mut depth = 0usize;
        let mut in_string = false;
        loop {
            let Some(&c) = self.src.chars.get(i) else {
                return Err(self.err(open, "unterminated JSON object (no matching `}`)"));
            };
            i += 1;
            if in_string {
                match c {
                    '\\' => i += 1,
                    '"' => in_string = false,
                    _ => {}
                }
                continue;
            }
            match c {
                '"' => in_string = true,
                '{' | '[' => depth += 1,
                '}' | ']' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
        }
        let text: String = self.src.chars[open..i].iter().collect();
        let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            // serde_json counts lines and columns from the object's start.
            let (line, col) = (e.line(), e.column());
            let at = if line <= 1 {
                open + col.saturating_sub(1)
            } else {
                self.src.line_start_after(open, line - 1) + col.saturating_sub(1)
            };
            self.err(at.min(i), format!("invalid JSON: {e}"))
        })?;
        self.pos = i;
        self.push(Tok::Json(value), open);
        Ok(())
    }
}

pub(super) fn describe(c: char) -> String {
    if c.is_control() {
        format!("control character U+{:04X}", c as u32)
    } else {
        format!("`{c}`")
    }
}
