//! Regular languages: the bottom layer that the grammar front ends and the automaton share.
//!
//! - [`regex`]: regex syntax to a `regex_syntax` HIR ([`regex::parse`] for user regexes, with
//!   errors naming the column; `regex::builtin` for the engine's own, memoized).
//! - [`Lexeme`]: a boolean combination of regexes (intersection, complement, counted
//!   repetition): what a front end asks for when one regex cannot say it.
//! - [`Dfa`]: a compact byte DFA for one regular language, its states [`StateId`]s, with the
//!   facts a mask needs per state (accepting? how far to acceptance? can it go on?). Built
//!   from a HIR, a finite set of strings, a product of other DFAs (intersection, complement)
//!   or a counter (length bounds); lexeme DFAs are shared process-wide ([`Dfa::shared`]).
//! - [`DfaLimits`]: the size limits every construction honours; hitting one is an
//!   [`Error::Limit`](crate::error::Error::Limit), never a hang or an abort. A front end that builds a DFA to
//!   decide something about a request (is this language empty? does this value match?) builds it
//!   under the request's limits.
//!
//! This module knows no grammar, no vocabulary and no matcher: data flows up from here
//! (regular ← grammar ← automaton).
//!
//! Invariants (see [`dfa`]): the dead state is [`StateId::DEAD`] (0) and maps every byte to
//! itself; every other state can still reach acceptance (its distance is not [`UNREACHABLE`]).

pub mod dfa;
mod fxhash;
pub mod lexeme;
pub mod regex;

pub use dfa::{CountedBase, Dfa, DfaLimits, Distances, StateId, UNREACHABLE};
pub(crate) use fxhash::{FxBuild, FxWordsBuild};
pub use lexeme::Lexeme;
