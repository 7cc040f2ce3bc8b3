//! The arithmetic evaluator: a recursive-descent parser for `grammars/arithmetic.gbnf`, with
//! one function per rule (`expr`, `term`, `factor`; `number` and `ws` inline), returning the
//! value of an expression or `None` for a string outside the grammar's language.
//!
//! One copy, included by path wherever it is needed (`#[path = "..."] mod arithmetic;`): the
//! `agent` example's calculator tool, the `fuzz_proptest` example's parser under test (with its
//! deliberate bug switched on), and the tests (the corpus's `values`, sampled expressions).
//! Values are `f64`: exact for the whole numbers a calculator sees, up to 2^53.

#![allow(dead_code)] // each includer uses part of it

/// The value of `s`, or `None` if it is not an expression of `grammars/arithmetic.gbnf`.
pub fn eval(s: &str) -> Option<f64> {
    Evaluator::default().eval(s)
}

/// The evaluator, with a bug that can be switched on (for `fuzz_proptest`, which shows a
/// property test finding it).
#[derive(Debug, Default, Clone, Copy)]
pub struct Evaluator {
    /// The bug: a unary minus right after `(` is refused, so `(-1)` does not parse.
    pub forget_minus_after_paren: bool,
}

impl Evaluator {
    pub fn eval(self, s: &str) -> Option<f64> {
        let mut p = Parser { s: s.as_bytes(), i: 0, bug: self.forget_minus_after_paren };
        p.ws();
        let v = p.expr()?;
        p.ws();
        (p.i == s.len()).then_some(v)
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    bug: bool,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    /// `ws ::= " "?`
    fn ws(&mut self) {
        if self.peek() == Some(b' ') {
            self.i += 1;
        }
    }

    /// `ws [ops] ws`, or nothing consumed.
    fn op(&mut self, ops: &[u8]) -> Option<u8> {
        let save = self.i;
        self.ws();
        match self.peek() {
            Some(c) if ops.contains(&c) => {
                self.i += 1;
                self.ws();
                Some(c)
            }
            _ => {
                self.i = save;
                None
            }
        }
    }

    /// `expr ::= term (ws [-+] ws term)*`, left-associative.
    fn expr(&mut self) -> Option<f64> {
        let mut v = self.term()?;
        while let Some(op) = self.op(b"+-") {
            let r = self.term()?;
            v = if op == b'+' { v + r } else { v - r };
        }
        Some(v)
    }

    /// `term ::= factor (ws [*/] ws factor)*`, left-associative.
    fn term(&mut self) -> Option<f64> {
        let mut v = self.factor()?;
        while let Some(op) = self.op(b"*/") {
            let r = self.factor()?;
            v = if op == b'*' { v * r } else { v / r };
        }
        Some(v)
    }

    /// `factor ::= "-" factor | number | "(" ws expr ws ")"`, where
    /// `number ::= ("0" | [1-9] [0-9]*) ("." [0-9]+)?`.
    fn factor(&mut self) -> Option<f64> {
        match self.peek()? {
            b'-' => {
                self.i += 1;
                Some(-self.factor()?)
            }
            b'(' => {
                self.i += 1;
                self.ws();
                if self.bug && self.peek() == Some(b'-') {
                    return None;
                }
                let v = self.expr()?;
                self.ws();
                (self.peek()? == b')').then(|| self.i += 1)?;
                Some(v)
            }
            b'0'..=b'9' => {
                let start = self.i;
                let digits = |p: &mut Self| {
                    let from = p.i;
                    while p.peek().is_some_and(|c| c.is_ascii_digit()) {
                        p.i += 1;
                    }
                    p.i - from
                };
                let whole = digits(self);
                if whole > 1 && self.s[start] == b'0' {
                    return None; // no leading zeros
                }
                if self.peek() == Some(b'.') {
                    self.i += 1;
                    if digits(self) == 0 {
                        return None; // no trailing dot
                    }
                }
                std::str::from_utf8(&self.s[start..self.i]).ok()?.parse().ok()
            }
            _ => None,
        }
    }
}
