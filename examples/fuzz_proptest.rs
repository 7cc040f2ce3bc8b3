//! Property-testing a small parser with inputs drawn from its own grammar (feature `proptest`).
//!
//! `cargo run --profile ci --features proptest --example fuzz_proptest`
//!
//! The parser is the recursive-descent evaluator for `grammars/arithmetic.gbnf` in
//! `examples/shared/arithmetic.rs` (the one the tests use too). Two properties:
//! 1. every string in the grammar's language parses and evaluates (256 cases);
//! 2. a deliberately buggy parser (it forgets unary minus inside parentheses) is caught, and
//!    proptest shrinks the failing input to a short one: the strategy shrinks toward shorter
//!    valid strings, so the report shows `(-0)` (measured: shrunk from 165 bytes) rather
//!    than a screenful.

use proptest::test_runner::{Config, RngAlgorithm, TestError, TestRng, TestRunner};
use strictly::automaton::Constraint;
use strictly::grammar::ebnf;

// The parser under test: the shared arithmetic evaluator (one copy for the examples and the
// tests), whose deliberate bug this example switches on in part 2.
#[path = "shared/arithmetic.rs"]
mod arithmetic;

/// Evaluates an arithmetic expression; `None` if it does not parse. With `buggy`, a unary
/// minus right after `(` is rejected.
fn eval(s: &str, buggy: bool) -> Option<f64> {
    arithmetic::Evaluator { forget_minus_after_paren: buggy }.eval(s)
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
