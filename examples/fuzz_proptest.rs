//! Property-testing a small parser with inputs drawn from its own grammar (feature `proptest`).
//!
//! `cargo run --profile ci --features proptest --example fuzz_proptest`
//!
//! The parser is a recursive-descent evaluator for `grammars/arithmetic.gbnf`. Two properties:
//! 1. every string in the grammar's language parses and evaluates (256 cases);
//! 2. a deliberately buggy parser (it forgets unary minus inside parentheses) is caught, and
//!    proptest shrinks the failing input to a short one: the strategy shrinks toward shorter
//!    valid strings, so the report shows `(-0)` (measured: shrunk from 165 bytes) rather
//!    than a screenful.

use proptest::test_runner::{Config, RngAlgorithm, TestError, TestRng, TestRunner};
use strictly::automaton::Constraint;
use strictly::grammar::ebnf;

/// Evaluates an arithmetic expression; `None` if it does not parse. With `buggy`, a unary
/// minus right after `(` is rejected.
fn eval(s: &str, buggy: bool) -> Option<f64> {
    struct P<'a> {
        s: &'a [u8],
        i: usize,
        buggy: bool,
    }
    impl P<'_> {
        fn ws(&mut self) {
            if self.s.get(self.i) == Some(&b' ') {
                self.i += 1;
            }
        }
        fn op(&mut self, ops: &[u8]) -> Option<u8> {
            let save = self.i;
            self.ws();
            match self.s.get(self.i) {
                Some(&c) if ops.contains(&c) => {
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
        fn expr(&mut self) -> Option<f64> {
            let mut v = self.term()?;
            while let Some(op) = self.op(b"+-") {
                let r = self.term()?;
                v = if op == b'+' { v + r } else { v - r };
            }
            Some(v)
        }
        fn term(&mut self) -> Option<f64> {
            let mut v = self.factor()?;
            while let Some(op) = self.op(b"*/") {
                let r = self.factor()?;
                v = if op == b'*' { v * r } else { v / r };
            }
            Some(v)
        }
        fn factor(&mut self) -> Option<f64> {
            match *self.s.get(self.i)? {
                b'-' => {
                    self.i += 1;
                    Some(-self.factor()?)
                }
                b'(' => {
                    self.i += 1;
                    self.ws();
                    if self.buggy && self.s.get(self.i) == Some(&b'-') {
                        return None;
                    }
                    let v = self.expr()?;
                    self.ws();
                    (self.s.get(self.i) == Some(&b')')).then(|| self.i += 1)?;
                    Some(v)
                }
                _ => {
                    let start = self.i;
                    while self.s.get(self.i).is_some_and(|c| c.is_ascii_digit() || *c == b'.') {
                        self.i += 1;
                    }
                    std::str::from_utf8(&self.s[start..self.i]).ok()?.parse().ok()
                }
            }
        }
    }
    let mut p = P { s: s.as_bytes(), i: 0, buggy };
    p.ws();
    let v = p.expr()?;
    p.ws();
    (p.i == p.s.len()).then_some(v)
}

fn main() -> anyhow::Result<()> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/grammars/arithmetic.gbnf");
    let grammar = ebnf::parse(&std::fs::read_to_string(path)?)?;
    let strategy = strictly::fuzz::strategy::strategy(&Constraint::Grammar(grammar))?;

    // 1. The correct parser accepts every generated expression.
    // Deterministic runners, so CI sees the same cases every time.
    let rng = || TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let mut runner =
        TestRunner::new_with_rng(Config { cases: 256, failure_persistence: None, ..Config::default() }, rng());
    runner
        .run(&strategy, |text| {
            proptest::prop_assert!(eval(&text, false).is_some(), "{text:?} did not parse");
            Ok(())
        })
        .map_err(|e| anyhow::anyhow!("the parser failed: {e}"))?;
    println!("fuzz_proptest: 256 grammar-valid expressions parsed");

    // 2. The buggy parser is caught, and the counterexample shrinks to a short input.
    let mut runner =
        TestRunner::new_with_rng(Config { cases: 2048, failure_persistence: None, ..Config::default() }, rng());
    // The first failing input proptest meets, before it shrinks.
    let first = std::cell::RefCell::new(None::<String>);
    match runner.run(&strategy, |text| {
        if eval(&text, true).is_none() {
            first.borrow_mut().get_or_insert_with(|| text.clone());
        }
        proptest::prop_assert!(eval(&text, true).is_some(), "{text:?} did not parse");
        Ok(())
    }) {
        Err(TestError::Fail(_, text)) => {
            let first = first.borrow().clone().unwrap_or_default();
            println!(
                "fuzz_proptest: bug found in {first:?} ({} bytes), shrunk to {text:?} ({} bytes)",
                first.len(),
                text.len()
            );
            anyhow::ensure!(text.len() < first.len() && text.len() <= 8, "the counterexample {text:?} did not shrink");
            anyhow::ensure!(text.contains("(-") || text.contains("( -"), "unexpected counterexample {text:?}");
            anyhow::ensure!(eval(&text, false).is_some(), "the shrunk input {text:?} is not a valid expression");
        }
        other => anyhow::bail!("the bug was not found: {other:?}"),
    }
    Ok(())
}
