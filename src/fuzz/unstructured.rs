//! Structure-aware fuzzing with `arbitrary` (feature `arbitrary`): fuzzer bytes in, a string in
//! the constraint's language out, so a cargo-fuzz target spends its time past the parser's
//! front door instead of on inputs it rejects at the first byte.
//!
//! - [`Valid<S>`]: an `Arbitrary` type for a constraint named by a [`Spec`] type, for
//!   `fuzz_target!(|input: Valid<MyGrammar>| ...)`;
//! - [`text`]: the same from an explicit [`Generator`] and an `Unstructured`.
//!
//! Each byte the fuzzer mutates changes one choice (an alternative, a count, a character);
//! when the bytes run out the generator closes with the shortest completion, so every input,
//! even an empty one, gives a valid string.
//!
//! ```
//! use strictly::automaton::Constraint;
//! use strictly::fuzz::unstructured::{Spec, Valid};
//!
//! struct Pairs;
//! impl Spec for Pairs {
//!     fn constraint() -> Constraint { Constraint::Regex("[a-z]+=[0-9]+(;[a-z]+=[0-9]+)*".into()) }
//! }
//! let mut u = arbitrary::Unstructured::new(&[7, 1, 200, 3, 9, 42]);
//! let v: Valid<Pairs> = u.arbitrary().unwrap();
//! assert!(v.text.split(';').all(|kv| kv.contains('=')));
//! ```

use std::any::TypeId;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, OnceLock};

use arbitrary::{Arbitrary, Unstructured};

use super::{Checker, GenOptions, Generator, Source};
use crate::automaton::Constraint;

impl Source for Unstructured<'_> {
    fn below(&mut self, n: usize) -> usize {
        if n <= 1 {
            return 0;
        }
        self.choose_index(n).unwrap_or(0)
    }
    fn exhausted(&self) -> bool {
        self.is_empty()
    }
}

/// A string in `gen`'s language, with every choice read from `u`.
pub fn text(gen: &mut Generator, u: &mut Unstructured) -> arbitrary::Result<String> {
    let d = gen.draw(u).map_err(|_| arbitrary::Error::IncorrectFormat)?;
    String::from_utf8(d.text).map_err(|_| arbitrary::Error::IncorrectFormat)
}

/// Names a constraint at the type level, for [`Valid`].
pub trait Spec: 'static {
    fn constraint() -> Constraint;
    /// Bounds (default: depth 24, about 256 bytes).
    fn options() -> GenOptions {
        GenOptions { cover: false, ..GenOptions::default() }
    }
}

/// A string in the language of `S::constraint()`, checked by the compiled matcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Valid<S: Spec> {
    pub text: String,
    _spec: PhantomData<S>,
}

type Entry = Arc<Mutex<(Generator, Checker)>>;

/// The generator and checker of each `Spec`, built on first use. A constraint that does not
/// compile is a bug in the fuzz target: it panics with the error, as a fuzzer should.
fn entry<S: Spec>() -> Entry {
    static ALL: OnceLock<Mutex<HashMap<TypeId, Entry>>> = OnceLock::new();
    let mut all = ALL.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    all.entry(TypeId::of::<S>())
        .or_insert_with(|| {
            let c = S::constraint();
            let g = Arc::new(super::fuzz_grammar(&c).unwrap_or_else(|e| panic!("Spec constraint: {e}")));
            let gen = Generator::new(g, GenOptions { cover: false, ..S::options() })
                .unwrap_or_else(|e| panic!("Spec constraint: {e}"));
            let checker = Checker::new(&c).unwrap_or_else(|e| panic!("Spec constraint: {e}"));
            Arc::new(Mutex::new((gen, checker)))
        })
        .clone()
}

impl<'a, S: Spec> Arbitrary<'a> for Valid<S> {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let e = entry::<S>();
        let mut guard = e.lock().unwrap_or_else(|e| e.into_inner());
        let (gen, checker) = &mut *guard;
        let t = text(gen, u)?;
        if !checker.accepts(t.as_bytes()) {
            return Err(arbitrary::Error::IncorrectFormat);
        }
        Ok(Valid { text: t, _spec: PhantomData })
    }
}
