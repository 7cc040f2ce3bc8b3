//! Reliability tier (issue 9): the promise is that every completed output is in the language,
//! or there is a clear error, under hostile input and load.
//!
//! - `fuzz`: property-based fuzz targets (proptest, a fixed case budget; `STRICTLY_FUZZ_CASES`
//!   raises it for long runs) for the regex front end, the EBNF parser, the JSON Schema
//!   compiler, tokenizer loading and the matcher (random op sequences judged by the reference).
//! - `corpus`: every minimized crasher the fuzzers found, replayed as a regression test.
//! - `hostile`: hostile inputs, each answered by a clear error (times printed; asserted only
//!   with `$STRICTLY_HOSTILE_BOUND_MS`).
//! - `limits`: schemas whose checks once built automata past the request's limits (peak bytes
//!   counted per thread, not timed).
//! - `guarantee`: many sampled outputs per schema of JSONSchemaBench, each validated by the
//!   independent `jsonschema` crate (formats asserted); grammars judged by independent parsers.
//! - `load`: a bounded loopback load test of the server (streaming clients, some leaving
//!   mid-stream): zero errors, no leaked slots, flat memory.
//!
//! RELIABILITY.md records the long-run figures and the commands that produced them.

use std::time::{Duration, Instant};

mod corpus;
mod fuzz;
mod guarantee;
mod hostile;
mod limits;
#[cfg(feature = "server")]
mod load;

/// The case budget of a fuzz target: `default`, or `$STRICTLY_FUZZ_CASES` for long runs.
pub fn fuzz_cases(default: u32) -> u32 {
    std::env::var("STRICTLY_FUZZ_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// The time bound for answering one hostile input, only when asked for with
/// `$STRICTLY_HOSTILE_BOUND_MS` (`=1000` for the one-second bound, on a quiet machine:
/// RELIABILITY.md's figures). By default no test asserts a wall-clock time: a hostile input
/// must be answered by its typed error (or compile), and the time is printed.
pub fn hostile_bound() -> Option<Duration> {
    std::env::var("STRICTLY_HOSTILE_BOUND_MS").ok().and_then(|s| s.parse().ok()).map(Duration::from_millis)
}

/// With `$STRICTLY_HOSTILE_BOUND_MS` set, asserts that `what` took at most `factor` times the
/// bound; otherwise nothing (the caller prints the time).
#[track_caller]
pub fn within_bound(what: &str, dt: Duration, factor: u32) {
    if let Some(bound) = hostile_bound() {
        assert!(dt < bound * factor, "{what}: answered in {dt:?} (STRICTLY_HOSTILE_BOUND_MS: {:?})", bound * factor);
    }
}

/// Runs `f`, returning its result and how long it took.
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t0 = Instant::now();
    let out = f();
    (out, t0.elapsed())
}
