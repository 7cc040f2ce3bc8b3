//! Vocabulary slices: the text tokens split into parts that a lexer state often admits
//! wholesale (llguidance's "slicer"), each with its own trie and precomputed mask.
//!
//! The parts: tokens that are plain JSON string content (valid UTF-8, every character at least
//! U+0020 and neither `"` nor `\`), bucketed by byte length, and the rest. A lexer state that
//! provably admits every string of string-content characters up to a bucket's longest token
//! (see `automaton::mask_cache`) takes that bucket's mask as is and never walks its trie; only
//! the other parts are walked. Built once per vocabulary, lazily (the first cached mask).
//!
//! Invariants: every text token is in exactly one part; a body slice's tokens are all between
//! `lo` and `hi` bytes long.

use super::{TokenId, TokenSet, TokenTrie};

/// Byte-length buckets of the string-content slices (inclusive upper bounds; the last is open).
const BUCKETS: &[usize] = &[2, 4, 6, 9, 13];

pub struct Slice {
    /// Length of the longest token in the slice, in bytes.
    pub hi: usize,
    pub mask: TokenSet,
    pub trie: TokenTrie,
}

pub struct Slices {
    /// String-content tokens by length, shortest first.
    pub body: Vec<Slice>,
    /// Every other text token.
    pub rest: TokenTrie,
    /// Length of the longest text token, in bytes: how far one token can move a lexer.
    pub longest: usize,
}

/// Is `bytes` plain JSON string content (no quote, backslash or control character, whole
/// UTF-8 characters only)?
pub fn is_string_content(bytes: &[u8]) -> bool {
    std::str::from_utf8(bytes).is_ok_and(|s| s.chars().all(|c| c >= ' ' && c != '"' && c != '\\'))
}

impl Slices {
    pub fn build<'a>(width: usize, tokens: impl Iterator<Item = (&'a [u8], TokenId)>) -> Slices {
        let mut body: Vec<Vec<(&[u8], TokenId)>> = vec![Vec::new(); BUCKETS.len() + 1];
        let mut rest = Vec::new();
        let mut longest = 0;
        // Same filter as `TokenTrie::build`, so a slice mask never holds a token the trie lacks.
        for (b, id) in tokens.filter(|(b, _)| !b.is_empty() && b.len() <= u16::MAX as usize) {
            longest = longest.max(b.len());
            if is_string_content(b) {
                body[BUCKETS.iter().position(|&hi| b.len() <= hi).unwrap_or(BUCKETS.len())].push((b, id));
            } else {
                rest.push((b, id));
            }
        }
        let body = body
            .into_iter()
            .filter(|part| !part.is_empty())
            .map(|part| {
                let mut mask = TokenSet::new(width);
                part.iter().for_each(|&(_, id)| mask.insert(id));
                let hi = part.iter().map(|(b, _)| b.len()).max().unwrap_or(0);
                Slice { hi, mask, trie: TokenTrie::build(part.into_iter()) }
            })
            .collect();
        Slices { body, rest: TokenTrie::build(rest.into_iter()), longest }
    }

    /// The trie of part `i`: body slices first, then the rest.
    pub fn trie(&self, i: usize) -> &TokenTrie {
        self.body.get(i).map_or(&self.rest, |s| &s.trie)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_content() {
        assert!(is_string_content(b"hello world") && is_string_content("é😀".as_bytes()));
        assert!(!is_string_content(b"a\"") && !is_string_content(b"\\n") && !is_string_content(b"\n"));
        assert!(!is_string_content(&[0xC3]), "half a character");
    }
}
