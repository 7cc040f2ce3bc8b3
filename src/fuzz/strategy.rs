//! A `proptest` [`Strategy`] for any constraint: strings in its language, shrinking toward
//! shorter ones (feature `proptest`).
//!
//! A value is a pure function of a list of choice numbers ([`StreamSource`]). The value tree
//! ([`ChoiceTree`]) shrinks the list, Hypothesis-style: cut its tail (the generator then
//! closes everything with the shortest completion), delete runs of choices, set single
//! choices to 0 (the shortest option: options are ordered shortest first and a number picks
//! `v·n / 2³²`, so smaller numbers never pick later options), halve them. Each candidate is a
//! valid string by construction, and every value is checked by the compiled matcher
//! ([`Checker`]) before proptest sees it.
//!
//! ```
//! use proptest::prelude::*;
//! use strictly::automaton::Constraint;
//!
//! let s = strictly::fuzz::strategy::GrammarStrategy::new(&Constraint::Regex("[a-c]{1,3}(,[a-c]{1,3})*".into())).unwrap();
//! proptest!(|(text in s)| {
//!     prop_assert!(text.split(',').all(|f| (1..=3).contains(&f.len())));
//! });
//! ```

use std::sync::{Arc, Mutex};

use proptest::prelude::any;
use proptest::strategy::{NewTree, Strategy, ValueTree};
use proptest::test_runner::TestRunner;

use super::{Checker, GenOptions, Generator, StreamSource};
use crate::automaton::Constraint;
use crate::error::Result;

/// Most choice numbers in one value's list.
pub const MAX_CHOICES: usize = 512;

struct Shared {
    gen: Mutex<Generator>,
    checker: Checker,
}

impl Shared {
    /// The text of a choice list and how many choices it used; `None` if it is not valid.
    fn text(&self, choices: &[u32]) -> Option<(String, usize)> {
        let mut src = StreamSource::new(choices);
        let d = self.gen.lock().ok()?.draw(&mut src).ok()?;
        let used = src.used().min(choices.len());
        let t = String::from_utf8(d.text).ok()?;
        self.checker.accepts(t.as_bytes()).then_some((t, used))
    }
}

/// Strings in a constraint's language (bounded as by [`GenOptions`]: default depth 24, about
/// 256 bytes).
#[derive(Clone)]
pub struct GrammarStrategy(Arc<Shared>);

impl std::fmt::Debug for GrammarStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GrammarStrategy")
    }
}

impl GrammarStrategy {
    pub fn new(constraint: &Constraint) -> Result<GrammarStrategy> {
        Self::with_options(constraint, GenOptions::default())
    }

    /// `opts.cover` is ignored: a value must depend on its choice list alone, or shrinking
    /// would not be repeatable.
    pub fn with_options(constraint: &Constraint, opts: GenOptions) -> Result<GrammarStrategy> {
        let g = Arc::new(super::fuzz_grammar(constraint)?);
        let gen = Generator::new(g, GenOptions { cover: false, ..opts })?;
        Ok(GrammarStrategy(Arc::new(Shared { gen: Mutex::new(gen), checker: Checker::new(constraint)? })))
    }
}

/// [`GrammarStrategy::new`], boxed.
pub fn strategy(constraint: &Constraint) -> Result<proptest::strategy::BoxedStrategy<String>> {
    Ok(GrammarStrategy::new(constraint)?.boxed())
}

impl Strategy for GrammarStrategy {
    type Tree = ChoiceTree;
    type Value = String;

    fn new_tree(&self, runner: &mut TestRunner) -> NewTree<Self> {
        for _ in 0..16 {
            let choices: Vec<u32> = proptest::collection::vec(any::<u32>(), 0..MAX_CHOICES).new_tree(runner)?.current();
            if let Some((text, used)) = self.0.text(&choices) {
                let choices = choices[..used].to_vec();
                return Ok(ChoiceTree {
                    shared: self.0.clone(),
                    accepted: (choices.clone(), text.clone()),
                    current: (choices, text),
                    pending: Vec::new(),
                });
            }
        }
        Err("the generator gave no valid string in 16 tries".into())
    }
}

/// A value and the choice list behind it, with the shrinking candidates still to try.
pub struct ChoiceTree {
    shared: Arc<Shared>,
    /// The last value known to fail the test (shrinking only moves from here).
    accepted: (Vec<u32>, String),
    current: (Vec<u32>, String),
    /// Candidate lists to try next, last first.
    pending: Vec<Vec<u32>>,
}

impl ChoiceTree {
    /// The candidates from `accepted`, the most promising (biggest cuts) tried first.
    fn candidates(c: &[u32]) -> Vec<Vec<u32>> {
        let mut out = Vec::new();
        let n = c.len();
        let mut keep = 0;
        while keep < n {
            out.push(c[..keep].to_vec());
            keep = if keep == 0 { 1 } else { keep * 2 };
        }
        for size in [8, 4, 2, 1] {
            for start in (0..n.saturating_sub(size - 1)).step_by(size) {
                let mut v = c[..start].to_vec();
                v.extend_from_slice(&c[start + size..]);
                out.push(v);
            }
        }
        for i in 0..n {
            if c[i] != 0 {
                let mut v = c.to_vec();
                v[i] = 0;
                out.push(v);
                if c[i] > 1 {
                    let mut v = c.to_vec();
                    v[i] /= 2;
                    out.push(v);
                }
            }
        }
        out.reverse();
        out
    }

    /// Moves to the next candidate that gives a valid value different from the accepted one.
    fn advance(&mut self) -> bool {
        while let Some(c) = self.pending.pop() {
            if let Some((text, used)) = self.shared.text(&c) {
                if text != self.accepted.1 {
                    self.current = (c[..used].to_vec(), text);
                    return true;
                }
            }
        }
        self.current = self.accepted.clone();
        false
    }
}

impl ValueTree for ChoiceTree {
    type Value = String;

    fn current(&self) -> String {
        self.current.1.clone()
    }

    /// Called when the current value still fails: it becomes the accepted one.
    fn simplify(&mut self) -> bool {
        self.accepted = self.current.clone();
        self.pending = Self::candidates(&self.accepted.0);
        self.advance()
    }

    /// Called when the current value passes: try the next candidate instead.
    fn complicate(&mut self) -> bool {
        self.advance()
    }
}
