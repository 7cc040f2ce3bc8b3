//! Grammar-based fuzzing: corpora of inputs that are valid by a grammar or a JSON Schema and
//! exercise every rule, and inputs one edit away from valid, each labelled with what breaks it.
//!
//! The generator ([`cover::Generator`]) expands the grammar IR top-down. Every choice it makes
//! (which alternative, how many copies, which character) is asked of a [`Source`]:
//! - [`RngSource`]: seeded random choices (`strictly sample --cover`), with weights that steer
//!   toward units earlier samples did not use;
//! - [`StreamSource`]: a list of numbers (the `proptest` strategy in `strategy`, whose
//!   shrinking shortens the list and lowers the numbers, and so shortens the value);
//! - `arbitrary::Unstructured`: fuzzer bytes (cargo-fuzz targets, in `arbitrary`).
//!
//! Stream sources answer 0 once they run out, and the generator orders options so that 0 is
//! the shortest: a short or all-zero stream gives a short valid value.
//!
//! A *unit* is one alternative of one `Alt`, or one boundary of one `Repeat` (exactly `min`
//! copies, more, exactly `max`): see [`plan`]. JSON Schema branches are IR alternatives: enum
//! values, `anyOf`/`oneOf` branches, optional properties present or absent, value types. A
//! regex constraint is laid out as IR first ([`regex_grammar`]: its alternations and
//! repetitions become units); [`fuzz_grammar`] gives the grammar to walk for any constraint.
//!
//! Nothing here trusts itself: callers verify each text with a [`Checker`] (the compiled
//! matcher, fed the bytes) before they count its coverage or print it; the tests check again
//! with the independent reference recognizer and, for schemas, an independent validator.
//! [`mutate`] builds near misses and keeps only those the checker rejects.

pub mod cover;
pub mod leaf;
pub mod mutate;
pub mod plan;
pub mod regex_ir;
#[cfg(feature = "proptest")]
pub mod strategy;
#[cfg(feature = "arbitrary")]
pub mod unstructured;

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub use cover::{Coverage, Derivation, GenOptions, Generator};
pub use regex_ir::regex_grammar;

use crate::automaton::{Compiled, Constraint, VocabEnv};
use crate::error::Result;
use crate::vocab::Vocab;

/// Where the generator's choices come from.
pub trait Source {
    /// An index in `0..n` (`n ≥ 1`). Options are ordered shortest first.
    fn below(&mut self, n: usize) -> usize;
    /// An index into `weights` (each ≥ 1), drawn in proportion where the source can.
    fn weighted(&mut self, weights: &[u32]) -> usize {
        self.below(weights.len())
    }
    /// No choices left: the generator closes everything with the shortest completions.
    fn exhausted(&self) -> bool {
        false
    }
}

/// Seeded random choices (ChaCha8): the same seed gives the same samples.
pub struct RngSource(ChaCha8Rng);

impl RngSource {
    pub fn new(seed: u64) -> RngSource {
        RngSource(ChaCha8Rng::seed_from_u64(seed))
    }
}

impl Source for RngSource {
    fn below(&mut self, n: usize) -> usize {
        if n <= 1 {
            0
        } else {
            self.0.random_range(0..n)
        }
    }
    fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u64 = weights.iter().map(|&w| w as u64).sum();
        if total == 0 {
            return 0;
        }
        let mut x = self.0.random_range(0..total);
        for (i, &w) in weights.iter().enumerate() {
            if x < w as u64 {
                return i;
            }
            x -= w as u64;
        }
        weights.len() - 1
    }
}

/// Choices read from a list of numbers (`v` picks option `v·n / 2³²`), then 0 forever.
pub struct StreamSource<'a> {
    data: &'a [u32],
    pos: usize,
}

impl<'a> StreamSource<'a> {
    pub fn new(data: &'a [u32]) -> StreamSource<'a> {
        StreamSource { data, pos: 0 }
    }
}

impl StreamSource<'_> {
    /// How many choices were asked for so far (past the end of the list included).
    pub fn used(&self) -> usize {
        self.pos
    }
}

impl Source for StreamSource<'_> {
    fn below(&mut self, n: usize) -> usize {
        let v = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        // Scaled, not modulo: a smaller number never gives a later option, so shrinking a
        // number toward 0 moves its choice monotonically toward the shortest option.
        ((v as u64 * n as u64) >> 32) as usize
    }
    fn exhausted(&self) -> bool {
        self.pos >= self.data.len()
    }
}

/// The grammar the generator walks for `constraint`: its grammar, with a regex laid out as IR
/// ([`regex_grammar`]) so that its alternatives and repetition boundaries are units.
pub fn fuzz_grammar(constraint: &Constraint) -> Result<crate::grammar::Grammar> {
    match constraint {
        Constraint::Regex(r) => regex_grammar(r),
        other => other.grammar(),
    }
}

/// Membership by the compiled engine: the text's bytes fed to a fresh matcher, which must
/// accept at the end. Works for any vocabulary (bytes are committed directly).
pub struct Checker {
    compiled: Arc<Compiled>,
}

impl Checker {
    pub fn new(constraint: &Constraint) -> Result<Checker> {
        Ok(Checker { compiled: Compiled::new(&VocabEnv::new(Arc::new(Vocab::byte_level())), constraint)? })
    }

    pub fn accepts(&self, text: &[u8]) -> bool {
        let mut m = self.compiled.matcher();
        (text.is_empty() || m.commit_bytes(text).is_ok()) && m.is_accepting()
    }
}

/// Does a JSON text hold, in some string or key, a character on which regex dialects disagree
/// about `\s` ([`leaf::contested`])? Such a sample may be judged differently by a Python and
/// an ECMA-262 validator, so schema fuzzing redraws it (the grammar itself is exact).
pub fn json_has_contested(text: &str) -> bool {
    fn walk(v: &serde_json::Value) -> bool {
        let bad = |s: &str| s.chars().any(|c| leaf::contested(c as u32));
        match v {
            serde_json::Value::String(s) => bad(s),
            serde_json::Value::Array(xs) => xs.iter().any(walk),
            serde_json::Value::Object(m) => m.iter().any(|(k, v)| bad(k) || walk(v)),
            _ => false,
        }
    }
    serde_json::from_str(text).is_ok_and(|v| walk(&v))
}

/// A JSON text with every key that repeats an earlier key of its object made distinct by
/// digits appended to its content (`"a"`, `"a"` becomes `"a"`, `"a1"`); `None` where nothing
/// repeats (or the text is not JSON). The generator walks the grammar and does not keep an
/// object's keys apart, which the matcher does in the sensible language: schema fuzzing repairs
/// such a sample this way and then verifies it like any other (a renamed key may fall outside
/// the key language, as a declared name or a pattern's: the checker then refuses it).
pub fn with_distinct_keys(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len() + 8);
    // Per open container: an object's keys so far and whether a key comes next; `None`: array.
    let mut stack: Vec<Option<(std::collections::HashSet<String>, bool)>> = Vec::new();
    let (mut i, mut changed) = (0, false);
    while i < b.len() {
        match b[i] {
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                let raw = text.get(i..=j)?;
                match stack.last_mut() {
                    Some(Some((keys, next @ true))) => {
                        *next = false;
                        let key: String = serde_json::from_str(raw).ok()?;
                        let (mut name, mut n) = (key.clone(), 0u32);
                        while keys.contains(&name) {
                            n += 1;
                            name = format!("{key}{n}");
                        }
                        if n == 0 {
                            out.push_str(raw);
                        } else {
                            changed = true;
                            out.push_str(&raw[..raw.len() - 1]);
                            out.push_str(&format!("{n}\""));
                        }
                        keys.insert(name);
                    }
                    _ => out.push_str(raw),
                }
                i = j + 1;
                continue;
            }
            b'{' => stack.push(Some((Default::default(), true))),
            b'[' => stack.push(None),
            b'}' | b']' => {
                stack.pop();
            }
            b',' => {
                if let Some(Some((_, next))) = stack.last_mut() {
                    *next = true;
                }
            }
            _ => {}
        }
        out.push(b[i] as char);
        i += 1;
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn repeated_keys_are_made_distinct_and_nothing_else_changes() {
        use super::with_distinct_keys as d;
        assert_eq!(
            d(r#"{"a":1,"b":{"a":2,"a":[{"a":3,"a":4}]}}"#).as_deref(),
            Some(r#"{"a":1,"b":{"a":2,"a1":[{"a":3,"a1":4}]}}"#)
        );
        // Equal by value, not by spelling; a suffix already taken is passed over; values stay.
        assert_eq!(
            d(r#"{"\u0061":"a","a":"a","a1":0,"a":0}"#).as_deref(),
            Some(r#"{"\u0061":"a","a1":"a","a11":0,"a2":0}"#)
        );
        assert_eq!(d(r#"{"a":"{\"a\":1,\"a\":2}","b":["a","a"]}"#), None);
        assert_eq!(d("not json {"), None);
    }
}
