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
//! # Three ways in
//!
//! 1. **Server.** `strictly serve` runs an OpenAI-compatible HTTP server (`server` module,
//!    with the `server` feature): `response_format`, `tools`, streaming, for any OpenAI client.
//! 2. **Library.** [`Engine`] (with the `model` feature, on by default): load a model once,
//!    then ask for typed values, tool calls and streams of either. The whole use:
//!
//! ```
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//! use strictly::{ChatMessage, Engine, GenerateOptions, ToolChoice, Tools};
//!
//! #[derive(Debug, Deserialize, JsonSchema)]
//! struct Character { name: String, age: u8 }
//!
//! /// Arguments of get_weather.
//! #[derive(Debug, Deserialize, JsonSchema)]
//! struct Weather { city: String }
//!
//! let engine = Engine::embedded()?; // or Engine::load("path/to/hf-model-dir")?
//! let opts = GenerateOptions::default().with_seed(1);
//!
//! // Typed extraction: the JSON Schema comes from the type; the value always deserializes.
//! let c: Character = engine.generate("Once upon a time, there was a girl.", &opts)?;
//! println!("{} is {}", c.name, c.age);
//!
//! // Tool calling: typed arguments, checked against the tool's type before they reach you.
//! let tools = Tools::new().function::<Weather>("get_weather", "The weather in a city")?;
//! let chat = vec![ChatMessage::user("What is the weather in Oslo?")];
//! let reply = engine.choose(&chat, &tools, &ToolChoice::Required, &opts)?;
//! for call in &reply.calls {
//!     let args: Weather = call.args()?;
//!     println!("{}({:?}) -> answer with call.result(...)", call.name, args.city);
//! }
//! assert!(!reply.calls.is_empty());
//! # Ok::<(), strictly::Error>(())
//! ```
//!
//!    [`Engine::stream`] and [`Engine::choose_stream`] give the same as a [`Stream`] of
//!    events (drop it to cancel). Examples that run in CI: `examples/extract.rs` (typed
//!    extraction), `examples/agent.rs` (a calculator-and-clock agent loop, tools executed and
//!    results fed back). See [`engine`] for the details and [`tools`] for the call format.
//! 3. **Matcher.** Bring your own model or inference engine: compile a constraint once per
//!    vocabulary ([`automaton::Compiled`]), then per sequence ask the [`automaton::Matcher`]
//!    for the allowed-token mask, apply it to your logits, and commit the chosen token. No
//!    model needed (`examples/mask_loop.rs`; `examples/fuzz_parser.rs` drives the loop with
//!    random logits as a grammar fuzzer):
//!
//! Key types: [`Vocab`] (token id → exact bytes, EOS ids, token trie), [`automaton::VocabEnv`]
//! (a vocabulary with its caches: one per vocabulary, shared by every constraint compiled for
//! it), [`TokenSet`] (the mask), [`automaton::Compiled`] and [`automaton::Matcher`].
//!
//! ```
//! use std::sync::Arc;
//! use strictly::{automaton::{Compiled, Constraint, VocabEnv}, TokenId, TokenSet, Vocab};
//!
//! // A tiny vocabulary: ids 0..=4, id 4 is EOS.
//! let vocab = Arc::new(Vocab::from_byte_tokens(
//!     vec![b"a".to_vec(), b"b".to_vec(), b"ab".to_vec(), b"c".to_vec(), b"</s>".to_vec()], &[4]));
//! let env = VocabEnv::new(vocab.clone()); // once per vocabulary
//! let compiled = Compiled::new(&env, &Constraint::Regex("(ab)+".into())).unwrap();
//! let mut m = compiled.matcher();
//! let mut mask = TokenSet::new(5);
//! m.fill_mask(&mut mask);
//! assert_eq!(mask.iter().collect::<Vec<_>>(), vec![TokenId(0), TokenId(2)]); // "a", "ab"
//! m.commit(TokenId(2)).unwrap();
//! assert!(m.is_accepting());              // "ab" is complete, so EOS is allowed
//! assert!(m.commit(TokenId(3)).is_err()); // "abc" is not
//!
//! // The mask loop: your model's logits, masked, then your sampler (here the argmax).
//! let (mut m, mut out) = (compiled.matcher(), Vec::new());
//! loop {
//!     let mut logits = vec![0.5, 1.0, 0.1, 2.0, 0.0]; // your model; it likes "c" best
//!     if out.len() >= 4 {
//!         logits[4] = 3.0; // and wants to stop after four bytes
//!     }
//!     m.fill_mask(&mut mask);
//!     mask.apply_to_logits(&mut logits); // disallowed tokens become -inf
//!     let best = (0..5).max_by(|&a, &b| logits[a].total_cmp(&logits[b])).unwrap();
//!     if best == 4 {
//!         break; // EOS: allowed only when the output is complete
//!     }
//!     m.commit(TokenId(best as u32)).unwrap();
//!     out.extend_from_slice(vocab.bytes(TokenId(best as u32)));
//! }
//! assert_eq!(out, b"abab"); // never the "c" the model liked
//! ```
//!
//! Grammar-based fuzzing ([`fuzz`]): a coverage-guided generator over the same grammar IR
//! (`strictly sample --cover`), labelled near misses (`--mutate`), and, behind the `proptest`
//! and `arbitrary` features, a proptest `Strategy` and a cargo-fuzz entry for any constraint.
//!
//! Invariants that hold everywhere: the mask is applied before any truncation of the
//! distribution; EOS is allowed exactly when the output so far is complete; special tokens
//! are never produced by grammar text; limits surface as [`Error`]s, never as panics.
//!
//! # Layout
//!
//! Data flows one way, bottom to top; a module never imports one above it:
//!
//! ```text
//! error, vocab        typed errors; token id ↔ exact bytes, EOS, the token trie, TokenSet
//! regular             regex → HIR, the Lexeme algebra, Dfa (products, complements, counters),
//!                     the shared DFA cache, DfaLimits
//! grammar             the grammar IR and its front ends: regex, GBNF, JSON Schema; the
//!                     reference recognizer (the test oracle)
//! automaton           a constraint compiled for a vocabulary: VocabEnv (the vocabulary with its
//!                     caches), Backend (one DFA, or lexer DFAs + Earley parser), Matcher
//! sample              logits processors and the seeded sampler
//! decode              the generation loop: stops, streaming detokenizer, forced tokens, beam
//! model               candle models, chat templates, prompt formats   (feature `model`)
//! engine, tools       the library front door; tool-call formats, grammars and parsers
//! server              the OpenAI-compatible HTTP API                 (feature `server`)
//! bench, fuzz         beside the pipeline: the mask benchmark and the grammar fuzzer
//! ```
//!
//! The binary (`src/main.rs`, `src/cli/`: one file per verb) sits on top of all of it.

pub mod automaton;
pub mod bench;
pub mod decode;
#[cfg(feature = "model")]
pub mod engine;
pub mod error;
pub mod fuzz;
pub mod grammar;
#[cfg(feature = "model")]
pub mod model;
pub mod regular;
pub mod sample;
#[cfg(feature = "server")]
pub mod server;
pub mod tools;
pub mod vocab;

pub use decode::GenerateOptions;
#[cfg(feature = "model")]
pub use engine::{Engine, Reply, Stream, StreamEvent, ToolCall, ToolChoice, Tools};
pub use error::{Error, Result};
#[cfg(feature = "model")]
pub use model::ChatMessage;
pub use tools::ToolFormat;
pub use vocab::{TokenId, TokenSet, Vocab};
