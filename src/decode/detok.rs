//! The streaming detokenizer: token ids in, text deltas out, each delta complete UTF-8.
//!
//! ```text
//!  token ──▶ its exact bytes (special tokens: none) ──▶ StopStrings (holds back what could
//!           still start a stop string) ──▶ Utf8Stream (holds back an unfinished character) ──▶ delta
//! ```
//!
//! - [`Utf8Stream`]: bytes in, only whole characters out. A token may end inside a character:
//!   byte-fallback tokens (`<0xE2>` `<0x82>` `<0xAC>` spell `€` one byte at a time) and
//!   byte-level BPE pieces (GPT-2's byte alphabet cuts characters anywhere). The unfinished
//!   tail waits for the next token. A byte sequence that can never become a character is
//!   replaced by U+FFFD at once, exactly as [`String::from_utf8_lossy`] replaces it, so the
//!   deltas always concatenate to `from_utf8_lossy` of all the bytes.
//! - [`StreamDetokenizer`]: a token at a time, through the stop-string scanner and the UTF-8
//!   stage; it also keeps the final text's exact bytes ([`Output::bytes`](super::Output::bytes)).
//!
//! Bytes are exact because the [`Vocab`] already decoded every token to its bytes: GPT-2's
//! byte-level alphabet is undone, byte-fallback tokens are their byte, and the SentencePiece
//! metaspace `▁` is a space. So there is no tokenizer-specific decoding here. One consequence is
//! documented on purpose: the prefix space of a SentencePiece output's first token (`▁Hello`)
//! is kept as `" Hello"`. Hugging Face's decoder strips it, because it assumes the text starts
//! a document; here the output usually continues a prompt, where the space is real, and the
//! bytes are exactly what the model produced.
//!
//! Special tokens (BOS, EOS, chat markers; [`TokenKind::Special`]) and ids with no token add no
//! text, and so cannot complete or break a stop string; but for those a constraint's grammar
//! names ([`StreamDetokenizer::showing`]), which are part of the output it describes.
//!
//! At the end, an unfinished character (the output stopped between the bytes of one) is
//! emitted as U+FFFD. Only unconstrained output can end that way: a constrained output is a
//! complete member of a language of UTF-8 strings (every front end compiles to UTF-8-only
//! automata), and a stop string cuts it on a character boundary.

use super::stops::StopStrings;
use crate::vocab::{TokenId, TokenKind, Vocab};

/// Bytes in, whole UTF-8 characters out; see the module docs.
#[derive(Debug, Clone, Default)]
pub struct Utf8Stream {
    /// An unfinished character (at most 3 bytes) waiting for its next byte.
    pending: Vec<u8>,
}

impl Utf8Stream {
    pub fn new() -> Utf8Stream {
        Utf8Stream::default()
    }

    /// The bytes of an unfinished character waiting for more.
    pub fn pending(&self) -> &[u8] {
        &self.pending
    }

    /// Feeds `bytes`; appends every character they complete to `out` (invalid sequences as
    /// U+FFFD) and keeps an unfinished one for later.
    pub fn push(&mut self, bytes: &[u8], out: &mut String) {
        self.pending.extend_from_slice(bytes);
        let mut i = 0;
        loop {
            match std::str::from_utf8(&self.pending[i..]) {
                Ok(s) => {
                    out.push_str(s);
                    i = self.pending.len();
                    break;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    let s = std::str::from_utf8(&self.pending[i..i + valid]).expect("valid_up_to is valid");
                    out.push_str(s);
                    i += valid;
                    match e.error_len() {
                        // Never valid, whatever follows: replaced now, as from_utf8_lossy does.
                        Some(n) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            i += n;
                        }
                        // The start of a character that the next bytes may finish.
                        None => break,
                    }
                }
            }
        }
        self.pending.drain(..i);
        debug_assert!(self.pending.len() < 4);
    }

    /// The end of the stream: an unfinished character becomes one U+FFFD.
    pub fn finish(&mut self, out: &mut String) {
        if !self.pending.is_empty() {
            out.push_str(&String::from_utf8_lossy(&self.pending));
            self.pending.clear();
        }
    }
}

/// Token ids in, final text deltas out, stop strings applied; see the module docs.
#[derive(Debug, Clone, Default)]
pub struct StreamDetokenizer {
    stops: StopStrings,
    utf8: Utf8Stream,
    /// The final text so far, exact bytes (released by the stop scanner).
    bytes: Vec<u8>,
    finished: bool,
    /// Special tokens that add their text all the same: those a grammar names (token
    /// terminals), which are part of the output it describes.
    shown: Vec<TokenId>,
}

impl StreamDetokenizer {
    /// A detokenizer that stops at `stops` (use `StopStrings::default()` for none).
    pub fn new(stops: StopStrings) -> StreamDetokenizer {
        StreamDetokenizer { stops, ..StreamDetokenizer::default() }
    }

    /// Special tokens in `shown` add their text (see [`Compiled::named_tokens`](crate::automaton::Compiled::named_tokens)).
    pub fn showing(mut self, shown: Vec<TokenId>) -> StreamDetokenizer {
        self.shown = shown;
        self
    }

    /// Feeds one token: appends to `delta` the text that is now final (complete characters
    /// only) and returns the index of the stop string that matched, if one did. After a match
    /// nothing more is produced until [`finish`](Self::finish).
    pub fn push_token(&mut self, vocab: &Vocab, token: TokenId, delta: &mut String) -> Option<usize> {
        self.push_token_gated(vocab, token, delta, &mut |_, _| true)
    }

    /// [`push_token`](Self::push_token), where a stop string ends the text only where
    /// `may_end(text before it)` allows (the text in two parts, see
    /// [`StopStrings::push_gated`]): a constrained output ends only where it is complete.
    pub fn push_token_gated(
        &mut self,
        vocab: &Vocab,
        token: TokenId,
        delta: &mut String,
        may_end: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Option<usize> {
        if vocab.kind(token) != TokenKind::Text && !self.shown.contains(&token) {
            return self.stops.matched();
        }
        self.push_bytes_gated(vocab.bytes(token), delta, may_end)
    }

    /// Feeds text bytes; see [`push_token`](Self::push_token).
    pub fn push_bytes(&mut self, bytes: &[u8], delta: &mut String) -> Option<usize> {
        self.push_bytes_gated(bytes, delta, &mut |_, _| true)
    }

    fn push_bytes_gated(
        &mut self,
        bytes: &[u8],
        delta: &mut String,
        may_end: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Option<usize> {
        debug_assert!(!self.finished, "push after finish");
        if self.stops.matched().is_some() {
            return self.stops.matched();
        }
        let start = self.bytes.len();
        let matched = self.stops.push_gated(bytes, &mut self.bytes, may_end);
        self.utf8.push(&self.bytes[start..], delta);
        matched
    }

    /// The end of the output: releases held text (when no stop matched) and an unfinished
    /// character (as U+FFFD) into `delta`. Idempotent.
    pub fn finish(&mut self, delta: &mut String) {
        if self.finished {
            return;
        }
        self.finished = true;
        let start = self.bytes.len();
        self.stops.finish(&mut self.bytes);
        self.utf8.push(&self.bytes[start..], delta);
        self.utf8.finish(delta);
    }

    /// The index of the stop string that matched, if one did.
    pub fn matched(&self) -> Option<usize> {
        self.stops.matched()
    }

    /// The final text's exact bytes so far (everything released; held text not included).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(pieces: &[&[u8]]) -> Vec<String> {
        let mut u = Utf8Stream::new();
        let mut deltas: Vec<String> = pieces
            .iter()
            .map(|p| {
                let mut s = String::new();
                u.push(p, &mut s);
                s
            })
            .collect();
        let mut tail = String::new();
        u.finish(&mut tail);
        deltas.push(tail);
        deltas
    }

    #[test]
    fn characters_split_across_pieces_wait_for_their_last_byte() {
        let euro = "€".as_bytes(); // E2 82 AC
        assert_eq!(stream(&[b"a", &euro[..1], &euro[1..2], &euro[2..], b"b"]), vec!["a", "", "", "€", "b", ""]);
        assert_eq!(stream(&[&[b'x', euro[0], euro[1]], &[euro[2], b'y']]), vec!["x", "€y", ""]);
    }

    #[test]
    fn unfinished_tail_and_invalid_bytes_become_replacement_characters() {
        assert_eq!(stream(&[b"a", &[0xE2, 0x82]]), vec!["a", "", "\u{FFFD}"]);
        // 0xFF can never start a character: replaced at once, not held.
        assert_eq!(stream(&[&[b'a', 0xFF], b"b"]), vec!["a\u{FFFD}", "b", ""]);
        // An unfinished character broken by a non-continuation byte.
        assert_eq!(stream(&[&[0xE2], b"z"]), vec!["", "\u{FFFD}z", ""]);
    }

    #[test]
    fn deltas_equal_from_utf8_lossy_for_every_split() {
        // Every byte sequence over a small alphabet of awkward bytes, split everywhere.
        let alphabet: [u8; 7] = [b'a', 0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0xFF];
        let mut seq = [0usize; 5];
        loop {
            let bytes: Vec<u8> = seq.iter().map(|&i| alphabet[i]).collect();
            let want = String::from_utf8_lossy(&bytes).into_owned();
            for cut_mask in 0u32..16 {
                let mut pieces: Vec<&[u8]> = Vec::new();
                let mut start = 0;
                for i in 1..bytes.len() {
                    if cut_mask & (1 << (i - 1)) != 0 {
                        pieces.push(&bytes[start..i]);
                        start = i;
                    }
                }
                pieces.push(&bytes[start..]);
                assert_eq!(stream(&pieces).concat(), want, "{bytes:x?} cut {cut_mask:b}");
            }
            // Next sequence (odometer).
            let mut k = 0;
            while k < seq.len() {
                seq[k] += 1;
                if seq[k] < alphabet.len() {
                    break;
                }
                seq[k] = 0;
                k += 1;
            }
            if k == seq.len() {
                break;
            }
        }
    }

    #[test]
    fn detokenizer_skips_specials_and_applies_stops() {
        let vocab = Vocab::from_byte_tokens(
            vec![b"Us".to_vec(), b"er".to_vec(), b":".to_vec(), vec![0xC3], vec![0xA9], b"<s>".to_vec()],
            &[5],
        );
        let mut d = StreamDetokenizer::new(StopStrings::new(&["User:"]).unwrap());
        let mut deltas = Vec::new();
        for t in [3u32, 4, 0, 5, 1, 2, 0] {
            let mut s = String::new();
            let m = d.push_token(&vocab, TokenId(t), &mut s);
            deltas.push(s);
            if m.is_some() {
                break;
            }
        }
        let mut tail = String::new();
        d.finish(&mut tail);
        // The special token between "Us" and "er" adds no text, so "User:" still matches.
        assert_eq!(deltas, vec!["", "é", "", "", "", ""]);
        assert_eq!(tail, "");
        assert_eq!(d.matched(), Some(0));
        assert_eq!(d.bytes(), "é".as_bytes());
    }
}
