//! Vocabulary slices: the text tokens split into parts that a lexer state often admits
//! wholesale (llguidance's "slicer"), each with its own trie and precomputed mask.
//!
//! The parts: tokens that are plain JSON string content or a prefix of some (UTF-8 whose
//! characters are all at least U+0020 and neither `"` nor `\`, the last one possibly cut short:
//! byte-level vocabularies split many characters between tokens), bucketed by byte length, and
//! the rest. A lexer state that provably admits every prefix of string content up to a
//! bucket's longest token (see `mask_cache`: its searches run over the content
//! automaton's states, those inside a character included) takes that bucket's mask as is and
//! never walks its trie; only the other parts are walked. Built once per vocabulary, lazily
//! (the first cached mask), and kept in its [`VocabEnv`](super::VocabEnv).
//!
//! Invariants: every text token is in exactly one part; a body slice's tokens are all between
//! `lo` and `hi` bytes long.

use crate::vocab::trie::ByteSet;
use crate::vocab::{TokenId, TokenSet, TokenTrie};

/// Byte-length buckets of the string-content slices (inclusive upper bounds; the last is open).
const BUCKETS: &[usize] = &[2, 4, 6, 9, 13];

pub struct Slice {
    /// Length of the longest token in the slice, in bytes.
    pub hi: usize,
    pub mask: TokenSet,
    pub trie: TokenTrie,
    /// Per node of `trie`, the bytes of the tokens at or below it ([`TokenTrie::byte_sets`]).
    pub bytes: Vec<ByteSet>,
    /// Per byte, the nodes of `trie` whose `bytes` hold it: what a walk pruned to the
    /// subtrees holding that byte visits, at most.
    pub nodes_with: Box<[u32; 256]>,
}

impl Slice {
    fn new(hi: usize, mask: TokenSet, trie: TokenTrie) -> Slice {
        let bytes = trie.byte_sets();
        let mut nodes_with = Box::new([0u32; 256]);
        for set in &bytes {
            for (w, &word) in set.0.iter().enumerate() {
                let mut bits = word;
                while bits != 0 {
                    nodes_with[w * 64 + bits.trailing_zeros() as usize] += 1;
                    bits &= bits - 1;
                }
            }
        }
        Slice { hi, mask, trie, bytes, nodes_with }
    }

    /// At most how many nodes a walk pruned to the subtrees holding a byte of `avoid` visits.
    pub fn pruned_walk_nodes(&self, avoid: &ByteSet) -> usize {
        (0..=255u8).filter(|&b| avoid.contains(b)).map(|b| self.nodes_with[b as usize] as usize).sum()
    }
}

pub struct Slices {
    /// String-content tokens (and prefixes of it) by length, shortest first.
    pub body: Vec<Slice>,
    /// Every other text token.
    pub rest: TokenTrie,
    /// Length of the longest text token, in bytes: how far one token can move a lexer.
    pub longest: usize,
}

/// Is `bytes` a prefix of plain JSON string content (no quote, backslash or control character;
/// valid UTF-8 but for a last character that may be cut short)?
pub fn is_content_prefix(bytes: &[u8]) -> bool {
    let whole = match std::str::from_utf8(bytes) {
        Ok(s) => s,
        // `error_len() == None`: the input ends inside a character that could still be valid.
        Err(e) if e.error_len().is_none() => std::str::from_utf8(&bytes[..e.valid_up_to()]).expect("valid up to here"),
        Err(_) => return false,
    };
    whole.chars().all(|c| c >= ' ' && c != '"' && c != '\\')
}

impl Slices {
    pub fn build<'a>(width: usize, tokens: impl Iterator<Item = (&'a [u8], TokenId)>) -> Slices {
        let mut body: Vec<Vec<(&[u8], TokenId)>> = vec![Vec::new(); BUCKETS.len() + 1];
        let mut rest = Vec::new();
        let mut longest = 0;
        // Same filter as `TokenTrie::build`, so a slice mask never holds a token the trie lacks.
        for (b, id) in tokens.filter(|(b, _)| !b.is_empty() && b.len() <= u16::MAX as usize) {
            longest = longest.max(b.len());
            if is_content_prefix(b) {
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
                Slice::new(hi, mask, TokenTrie::build(part.into_iter()))
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
        assert!(is_content_prefix(b"hello world") && is_content_prefix("é😀".as_bytes()));
        assert!(!is_content_prefix(b"a\"") && !is_content_prefix(b"\\n") && !is_content_prefix(b"\n"));
        // A character cut short at the end is a prefix of content; anything else invalid is not.
        assert!(is_content_prefix(&[b'a', 0xC3]) && is_content_prefix(&[0xF0, 0x9F, 0x98]), "cut short");
        assert!(
            !is_content_prefix(&[0x98, b'a']) && !is_content_prefix(&[0xC3, b'a']),
            "continuation bytes out of place"
        );
        assert!(
            !is_content_prefix(&[0xED, 0xA0]) && !is_content_prefix(&[0xC0]),
            "never valid: a surrogate, an overlong lead"
        );
        assert!(!is_content_prefix(&[b'"', 0xC3]), "a quote before the cut");
    }
}
