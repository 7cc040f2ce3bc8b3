//! A `proptest` [`Strategy`] for any constraint: strings in its language, shrinking toward
//! shorter ones (feature `proptest`).
//!
//! The value is a pure function of a list of choice numbers ([`StreamSource`]): proptest
//! generates and shrinks the list (fewer numbers, smaller numbers), and since the generator
//! orders every option shortest first and closes everything with the shortest completion once
//! the list runs out, a shrunk list gives a shorter valid string. Every value is checked by
//! the compiled matcher ([`Checker`]) before proptest sees it.
//!
//! ```
//! use proptest::prelude::*;
//! use strictly::automaton::Constraint;
//!
//! let s = strictly::fuzz::strategy::strategy(&Constraint::Regex("[a-c]{1,3}(,[a-c]{1,3})*".into())).unwrap();
//! proptest!(|(text in s)| {
//!     prop_assert!(text.split(',').all(|f| (1..=3).contains(&f.len())));
//! });
//! ```

use std::sync::{Arc, Mutex};

use proptest::prelude::*;

use super::{Checker, GenOptions, Generator, StreamSource};
use crate::automaton::Constraint;
use crate::error::Result;

/// Most choice numbers in one value's list.
pub const MAX_CHOICES: usize = 512;

/// A strategy for the strings in `constraint`'s language (bounded as by [`GenOptions`]'s
/// defaults: depth 24, about 256 bytes).
pub fn strategy(constraint: &Constraint) -> Result<BoxedStrategy<String>> {
    strategy_with(constraint, GenOptions { cover: false, ..GenOptions::default() })
}

/// [`strategy`] with explicit bounds. `opts.cover` is ignored: a value must depend on its
/// choice list alone, or shrinking would not be repeatable.
pub fn strategy_with(constraint: &Constraint, opts: GenOptions) -> Result<BoxedStrategy<String>> {
    let g = Arc::new(constraint.grammar()?);
    let gen = Arc::new(Mutex::new(Generator::new(g, GenOptions { cover: false, ..opts })?));
    let checker = Arc::new(Checker::new(constraint)?);
    Ok(proptest::collection::vec(any::<u32>(), 0..MAX_CHOICES)
        .prop_filter_map("a string the constraint accepts", move |choices| {
            let d = gen.lock().ok()?.draw(&mut StreamSource::new(&choices)).ok()?;
            let text = String::from_utf8(d.text).ok()?;
            checker.accepts(text.as_bytes()).then_some(text)
        })
        .boxed())
}
