//! [`StopStrings`]: stop strings matched on the output text as it streams, across tokens.
//!
//! The scanner sits between the tokens' bytes and the text the caller sees. It releases text
//! only once no stop string can still begin in it: after every push it holds back the longest
//! suffix of the text that is a proper prefix of some stop string ("Us", then "User" while
//! waiting for "User:"), and releases the rest. When a stop string completes, the text before
//! it is released, and the stop string and everything after it (the rest of that token, and
//! any held text) is dropped for good. When the output ends without a stop, the held text is
//! released ([`StopStrings::finish`]).
//!
//! Matching is on bytes. Stop strings are UTF-8, and so is the text they can match in, and
//! UTF-8 is self-synchronising, so a match always starts on a character boundary.
//!
//! Which stop wins: the text is scanned byte by byte and the output stops at the first byte
//! where some stop string *ends*; if several end there (one a suffix of another: `"er:"` and
//! `"User:"`), the longest, so the cut is the earliest. This makes the result independent of
//! how the text was split into tokens: with stops `"abcd"` and `"bc"`, text `abcd` stops at
//! `"bc"` (leaving `"a"`) whether it came as one token or four. The list's order never matters.
//!
//! A gate ([`StopStrings::push_gated`]) may refuse a match: a constrained output may end only
//! where its constraint is complete, so a stop string that completes where the text before it
//! is not a whole output is no stop there; it stays in the text and scanning goes on. (Among
//! stops ending at the same byte, the longest the gate accepts wins.)
//!
//! Cost: each byte is compared against every stop string's length at most, so a push of `n`
//! bytes costs `O(n · Σ|stop|)`; [`MAX_STOP_STRINGS`] and [`MAX_STOP_BYTES`] bound that.
//!
//! Invariant: between pushes, `held` is the longest suffix of the text so far that is a proper
//! prefix of some stop string (so it is shorter than the longest stop string).

use crate::error::{Error, Result};

/// The most stop strings one request may have (OpenAI allows 4; vLLM does not limit them).
pub const MAX_STOP_STRINGS: usize = 64;
/// The longest stop string accepted, in bytes.
pub const MAX_STOP_BYTES: usize = 1024;

/// Streaming stop-string matcher; see the module docs.
#[derive(Debug, Clone, Default)]
pub struct StopStrings {
    stops: Vec<Vec<u8>>,
    held: Vec<u8>,
    /// The index (into the list given to `new`) of the stop string that matched.
    matched: Option<usize>,
}

impl StopStrings {
    /// A scanner for `stops`. Errors on an empty stop string (it would match before any
    /// text) and on more than [`MAX_STOP_STRINGS`] strings or one longer than [`MAX_STOP_BYTES`].
    pub fn new<S: AsRef<str>>(stops: &[S]) -> Result<StopStrings> {
        if stops.len() > MAX_STOP_STRINGS {
            return Err(Error::Limit {
                kind: crate::error::LimitKind::StopStrings,
                what: format!("{} stop strings", stops.len()),
                limit: MAX_STOP_STRINGS,
                hint: None,
            });
        }
        let mut v = Vec::with_capacity(stops.len());
        for s in stops {
            let s = s.as_ref();
            if s.is_empty() {
                return Err(Error::param("a stop string must not be empty"));
            }
            if s.len() > MAX_STOP_BYTES {
                return Err(Error::Limit {
                    kind: crate::error::LimitKind::StopStrings,
                    what: format!("a stop string of {} bytes", s.len()),
                    limit: MAX_STOP_BYTES,
                    hint: None,
                });
            }
            v.push(s.as_bytes().to_vec());
        }
        Ok(StopStrings { stops: v, held: Vec::new(), matched: None })
    }

    /// Whether there are no stop strings at all.
    pub fn is_empty(&self) -> bool {
        self.stops.is_empty()
    }

    /// The index of the stop string that matched, if one did.
    pub fn matched(&self) -> Option<usize> {
        self.matched
    }

    /// Text received but not yet released: it might be the start of a stop string.
    pub fn held(&self) -> &[u8] {
        &self.held
    }

    /// Feeds `bytes` and appends to `out` the text that is now final. Returns the index of the
    /// stop string that matched, if one did; the scanner then ignores further input.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Option<usize> {
        self.push_gated(bytes, out, &mut |_, _| true)
    }

    /// [`push`](Self::push), where a stop string ends the text only if `may_end(out, before)`
    /// says the text may end there: `out` as it stands (what was released) followed by
    /// `before` (the held text before the stop string). A refused match is text like any other.
    pub fn push_gated(
        &mut self,
        bytes: &[u8],
        out: &mut Vec<u8>,
        may_end: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Option<usize> {
        if self.matched.is_some() {
            return self.matched;
        }
        if self.stops.is_empty() {
            out.extend_from_slice(bytes);
            return None;
        }
        for &b in bytes {
            self.held.push(b);
            // The stop strings that end at this byte, longest first (ties: the first listed).
            let mut ending: Vec<usize> =
                (0..self.stops.len()).filter(|&i| self.held.ends_with(&self.stops[i])).collect();
            ending.sort_by_key(|&i| std::cmp::Reverse(self.stops[i].len()));
            for i in ending {
                let cut = self.held.len() - self.stops[i].len();
                if !may_end(out, &self.held[..cut]) {
                    continue;
                }
                out.extend_from_slice(&self.held[..cut]);
                self.held.clear();
                self.matched = Some(i);
                return Some(i);
            }
        }
        let keep = self.longest_pending_suffix();
        let release = self.held.len() - keep;
        out.extend_from_slice(&self.held[..release]);
        self.held.drain(..release);
        None
    }

    /// Releases the held text into `out` (the output ended without a stop). Does nothing after
    /// a match.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if self.matched.is_none() {
            out.append(&mut self.held);
        }
    }

    /// The length of the longest suffix of `held` that is a proper prefix of some stop string.
    fn longest_pending_suffix(&self) -> usize {
        let h = &self.held;
        (1..=h.len())
            .rev()
            .find(|&k| self.stops.iter().any(|s| k < s.len() && s.starts_with(&h[h.len() - k..])))
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pushes each piece; returns (released text after each push, matched index).
    fn run(stops: &[&str], pieces: &[&str]) -> (Vec<String>, Option<usize>, String) {
        let mut s = StopStrings::new(stops).unwrap();
        let mut out = Vec::new();
        let mut after = Vec::new();
        let mut matched = None;
        for p in pieces {
            matched = s.push(p.as_bytes(), &mut out);
            after.push(String::from_utf8(out.clone()).unwrap());
            if matched.is_some() {
                break;
            }
        }
        s.finish(&mut out);
        (after, matched, String::from_utf8(out).unwrap())
    }

    #[test]
    fn split_across_pushes() {
        let (after, m, text) = run(&["User:"], &["Hi ", "Us", "er", ":", " more"]);
        assert_eq!(after, vec!["Hi ", "Hi ", "Hi ", "Hi "]);
        assert_eq!(m, Some(0));
        assert_eq!(text, "Hi ");
    }

    #[test]
    fn held_text_is_released_when_it_turns_out_not_to_be_a_stop() {
        let (after, m, text) = run(&["User:"], &["Us", "er", " said"]);
        assert_eq!(after, vec!["", "", "User said"]);
        assert_eq!(m, None);
        assert_eq!(text, "User said");
        // Held at the end with no stop: released by finish.
        let (after, m, text) = run(&["User:"], &["ok Use"]);
        assert_eq!((after[0].as_str(), m, text.as_str()), ("ok ", None, "ok Use"));
    }

    #[test]
    fn inside_one_piece_keeps_text_before_and_drops_text_after() {
        let (_, m, text) = run(&["User:"], &["ok User: bye"]);
        assert_eq!((m, text.as_str()), (Some(0), "ok "));
    }

    #[test]
    fn first_to_end_wins_whatever_the_split() {
        for pieces in [&["abcd"][..], &["a", "b", "c", "d"], &["ab", "cd"]] {
            let (_, m, text) = run(&["abcd", "bc"], pieces);
            assert_eq!((m, text.as_str()), (Some(1), "a"), "{pieces:?}");
        }
        // A stop that is a prefix of another ends first.
        let (_, m, text) = run(&["User:", "User"], &["x Us", "er:"]);
        assert_eq!((m, text.as_str()), (Some(1), "x "));
        // Two ending at the same byte: the longer wins, whatever the order.
        for stops in [["er:", "User:"], ["User:", "er:"]] {
            let (_, _, text) = run(&stops, &["x User:"]);
            assert_eq!(text, "x ");
        }
    }

    #[test]
    fn overlapping_prefixes_are_held_correctly() {
        // "aab" with stop "ab": after "aa", only the last "a" can start the stop.
        let (after, m, text) = run(&["ab"], &["aa", "b"]);
        assert_eq!(after, vec!["a", "a"]);
        assert_eq!((m, text.as_str()), (Some(0), "a"));
        let (after, m, text) = run(&["abab"], &["aba", "abab"]);
        assert_eq!(after, vec!["", "aba"]);
        assert_eq!((m, text.as_str()), (Some(0), "aba"));
    }

    #[test]
    fn a_refused_match_is_text_and_scanning_goes_on() {
        // The gate allows an end only after an even number of bytes.
        let mut gate = |out: &[u8], before: &[u8]| (out.len() + before.len()) % 2 == 0;
        let mut s = StopStrings::new(&["\n", "x\n"]).unwrap();
        let mut out = Vec::new();
        // Before each "\n": "a", then "a\nb" (odd): refused, released as text.
        assert_eq!(s.push_gated(b"a\n", &mut out, &mut gate), None);
        assert_eq!(s.push_gated(b"b\n", &mut out, &mut gate), None);
        assert_eq!(out, b"a\nb\n");
        // Both end here; the longer ("x\n", after 4 bytes) is allowed and wins.
        assert_eq!(s.push_gated(b"x\nmore", &mut out, &mut gate), Some(1));
        assert_eq!(out, b"a\nb\n");
        // The longer refused (after 1 byte), the shorter allowed (after "ax": 2 bytes).
        let mut s = StopStrings::new(&["\n", "x\n"]).unwrap();
        let mut out = Vec::new();
        assert_eq!(s.push_gated(b"a", &mut out, &mut gate), None);
        assert_eq!(s.push_gated(b"x\n", &mut out, &mut gate), Some(0));
        assert_eq!(out, b"ax");
    }

    #[test]
    fn bad_stop_lists_are_errors() {
        assert!(matches!(StopStrings::new(&[""]), Err(Error::Param { .. })));
        assert!(matches!(StopStrings::new(&["x".repeat(MAX_STOP_BYTES + 1)]), Err(Error::Limit { .. })));
        let many: Vec<String> = (0..=MAX_STOP_STRINGS).map(|i| i.to_string()).collect();
        assert!(matches!(StopStrings::new(&many), Err(Error::Limit { .. })));
        let none: [&str; 0] = [];
        let mut s = StopStrings::new(&none).unwrap();
        let mut out = Vec::new();
        assert_eq!(s.push(b"anything", &mut out), None);
        assert_eq!(out, b"anything");
    }
}
