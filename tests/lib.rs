//! Integration tests: one binary, tiers as modules.
//!
//! - `core`: vocabularies from every real tokenizer, fast mask == reference mask.
//! - `reliability`: fuzz targets, the crasher corpus, hostile inputs, the guarantee at scale
//!   (independent validators) and a server load test; figures in RELIABILITY.md.
//!
//! Tiers that need `../shared/data` say loudly when it is missing and skip.

mod common;
mod cli;
mod conformance;
mod core;
mod fuzz;
mod sampling;
mod decode;
mod bench;
mod reliability;
#[cfg(feature = "model")]
mod batch;
#[cfg(feature = "model")]
mod engine;
#[cfg(feature = "model")]
mod model;
#[cfg(feature = "model")]
mod overlap;
#[cfg(feature = "model")]
mod tool_formats;
#[cfg(feature = "server")]
pub mod server;
