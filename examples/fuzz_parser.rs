//! A grammar fuzzer feeding a small parser: `cargo run --example fuzz_parser`.
//!
//! Seeded random logits (`RandomLogits`) in place of a model turn the generation loop into a
//! fuzzer: every sample is a random string of the grammar's language, over a real tokenizer's
//! vocabulary (the embedded model's), cut nowhere (a sample that reaches `max_tokens` is
//! complete too). Each sample goes to a hand-written recursive-descent evaluator for
//! `grammars/arithmetic.gbnf`, which must accept it; a few mutated samples must be rejected.

use std::collections::HashSet;
use std::sync::Arc;

use strictly::automaton::{Compiled, Constraint, VocabEnv};
use strictly::decode::{generate, GenerateOptions, RandomLogits};
use strictly::grammar::ebnf;
use strictly::Vocab;

/// `expr = term (("+"|"-") term)*`, `term = factor (("*"|"/") factor)*`,
/// `factor = "-" factor | number | "(" expr ")"`, with at most one space around operators.
struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn parse(text: &str) -> Result<f64, String> {
        let mut p = Parser { s: text.as_bytes(), i: 0 };
        p.space();
        let v = p.expr()?;
        p.space();
        if p.i != p.s.len() {
            return Err(format!("trailing text at {}: {:?}", p.i, &text[p.i..]));
        }
        Ok(v)
    }

    fn space(&mut self) {
        if self.s.get(self.i) == Some(&b' ') {
            self.i += 1;
        }
    }

    /// The next operator among `ops` (after an optional space), consumed.
    fn op(&mut self, ops: &[u8]) -> Option<u8> {
        let save = self.i;
        self.space();
        match self.s.get(self.i) {
            Some(c) if ops.contains(c) => {
                self.i += 1;
                self.space();
                Some(*c)
            }
            _ => {
                self.i = save;
                None
            }
        }
    }

    fn expr(&mut self) -> Result<f64, String> {
        let mut v = self.term()?;
        while let Some(op) = self.op(b"+-") {
            let r = self.term()?;
            v = if op == b'+' { v + r } else { v - r };
        }
        Ok(v)
    }

    fn term(&mut self) -> Result<f64, String> {
        let mut v = self.factor()?;
        while let Some(op) = self.op(b"*/") {
            let r = self.factor()?;
            v = if op == b'*' { v * r } else { v / r };
        }
        Ok(v)
    }

    fn factor(&mut self) -> Result<f64, String> {
        match self.s.get(self.i) {
            Some(b'-') => {
                self.i += 1;
                Ok(-self.factor()?)
            }
            Some(b'(') => {
                self.i += 1;
                self.space();
                let v = self.expr()?;
                self.space();
                if self.s.get(self.i) != Some(&b')') {
                    return Err(format!("expected ')' at {}", self.i));
                }
                self.i += 1;
                Ok(v)
            }
            Some(c) if c.is_ascii_digit() => self.number(),
            _ => Err(format!("expected a number, '-' or '(' at {}", self.i)),
        }
    }

    fn number(&mut self) -> Result<f64, String> {
        let start = self.i;
        if self.s[self.i] == b'0' {
            self.i += 1;
        } else {
            while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
                self.i += 1;
            }
        }
        if self.s.get(self.i) == Some(&b'.') {
            self.i += 1;
            let frac = self.i;
            while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
                self.i += 1;
            }
            if self.i == frac {
                return Err(format!("no digits after the point at {frac}"));
            }
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).expect("ASCII");
        text.parse().map_err(|e| format!("{text:?}: {e}"))
    }
}

fn main() -> anyhow::Result<()> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/grammars/arithmetic.gbnf");
    let grammar = ebnf::parse(&std::fs::read_to_string(path)?)?;
    let vocab = Arc::new(Vocab::embedded());
    let env = VocabEnv::new(vocab.clone());
    let compiled = Compiled::new(&env, &Constraint::Grammar(grammar))?;
    let samples = 300;
    let mut distinct = HashSet::new();
    let mut longest = String::new();
    for seed in 0..samples {
        let mut model = RandomLogits::new(vocab.len(), seed);
        let mut matcher = compiled.matcher();
        let opts = GenerateOptions { max_tokens: 48, ..GenerateOptions::default() }.with_seed(seed);
        let text = generate(&mut model, &vocab, Some(&mut matcher), &[], &opts)?.text();
        let value = Parser::parse(&text).map_err(|e| anyhow::anyhow!("sample {seed} {text:?} rejected: {e}"))?;
        if text.len() > longest.len() {
            longest = format!("{text} = {value}");
        }
        // The parser is a real judge: breaking the sample makes it fail.
        for broken in [format!("{text}+"), format!("({text}"), format!("{text} 1")] {
            assert!(Parser::parse(&broken).is_err(), "{broken:?} should be rejected");
        }
        distinct.insert(text);
    }
    println!("{samples} samples, {} distinct, all parsed; longest: {longest}", distinct.len());
    assert!(distinct.len() > samples as usize / 2, "the fuzzer explores the language");
    println!("fuzz_parser: ok");
    Ok(())
}
