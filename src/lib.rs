//! # strictly
//!
//! Constrained decoding: regexes, grammars and JSON Schemas compiled into token-level automata,
//! so that every completed output of a language model is accepted by its constraint.
//!
//! ```text
//! regex / choice / grammar ──▶ grammar IR ──compile once──▶ Compiled (DFA, per vocabulary; Arc)
//!                                                               │
//!                                   Matcher (per sequence): fill_mask · commit · rollback ·
//!                                                           forced_tokens · is_accepting
//!                                                               │ allowed-token mask
//!            logits ──▶ mask (−∞) ──▶ penalties ──▶ temperature ──▶ top-k/p, min-p ──▶ sample
//! ```
//!
//! Key types: [`Vocab`] (token id → exact bytes, EOS ids, token trie), [`TokenSet`] (the mask),
//! [`automaton::Compiled`] and [`automaton::Matcher`].
//!
//! ```
//! use std::sync::Arc;
//! use strictly::{automaton::{Compiled, Constraint}, TokenId, TokenSet, Vocab};
//!
//! // A tiny vocabulary: ids 0..=4, id 4 is EOS.
//! let vocab = Arc::new(Vocab::from_byte_tokens(
//!     vec![b"a".to_vec(), b"b".to_vec(), b"ab".to_vec(), b"c".to_vec(), b"</s>".to_vec()], &[4]));
//! let compiled = Compiled::new(vocab, &Constraint::Regex("(ab)+".into())).unwrap();
//! let mut m = compiled.matcher();
//! let mut mask = TokenSet::new(5);
//! m.fill_mask(&mut mask);
//! assert_eq!(mask.iter().collect::<Vec<_>>(), vec![TokenId(0), TokenId(2)]); // "a", "ab"
//! m.commit(TokenId(2)).unwrap();
//! assert!(m.is_accepting());              // "ab" is complete, so EOS is allowed
//! assert!(m.commit(TokenId(3)).is_err()); // "abc" is not
//! ```
//!
//! Grammar-based fuzzing ([`fuzz`]): a coverage-guided generator over the same grammar IR
//! (`strictly sample --cover`), labelled near misses (`--mutate`), and, behind the `proptest`
//! and `arbitrary` features, a proptest `Strategy` and a cargo-fuzz entry for any constraint.
//!
//! Invariants that hold everywhere: the mask is applied before any truncation of the
//! distribution; EOS is allowed exactly when the output so far is complete; special tokens
//! are never produced by grammar text; limits surface as [`Error`]s, never as panics.

pub mod automaton;
pub mod bench;
pub mod decode;
pub mod error;
pub mod fuzz;
pub mod grammar;
#[cfg(feature = "model")]
pub mod model;
pub mod sample;
#[cfg(feature = "server")]
pub mod server;
pub mod vocab;

pub use error::{Error, Result};
pub use vocab::{TokenId, TokenSet, Vocab};
