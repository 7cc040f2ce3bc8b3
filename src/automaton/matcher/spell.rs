//! Spelling bytes in tokens: the fewest tokens of the vocabulary that spell a byte string
//! (a witness in bytes becomes a witness in tokens), and the rest of a UTF-8 character a token
//! ended inside, as tokens spell it.
//!
//! Invariant: the matcher is left as it was, but for [`Matcher::spell`] and
//! [`Matcher::spell_greedy`], which leave their tokens committed for the caller to roll back.

use super::{Backend, Matcher, Run};
use crate::vocab::{TokenId, TokenKind};

/// UTF-8 continuation bytes.
const CONTINUATION: std::ops::RangeInclusive<u8> = 0x80..=0xbf;

/// The most continuation bytes a character's rest has (after its lead byte).
const MAX_CHAR_TAIL: usize = 3;

impl Matcher {
    /// Calls `f(k, t)` for every token `t` that spells `bytes[..k]`: text tokens the constraint
    /// may use as text (not barred by token terminals), and named tokens by their bytes.
    pub(super) fn tokens_at(&self, bytes: &[u8], mut f: impl FnMut(usize, TokenId)) {
        let (vocab, named) = (self.compiled.vocab(), self.compiled.named.as_ref());
        vocab.trie().walk(
            0usize,
            |k, b| (bytes.get(k) == Some(&b)).then_some(k + 1),
            |k, ids| {
                let text = |t: &&TokenId| vocab.kind(**t) == TokenKind::Text && named.is_none_or(|n| !n.is_barred(**t));
                ids.iter().filter(text).for_each(|&t| f(k, t));
            },
        );
        for (t, b) in named.iter().flat_map(|n| n.tokens()) {
            if bytes.starts_with(b) {
                f(b.len(), *t);
            }
        }
    }

    /// Inside a UTF-8 character (a token ended inside one: every byte the lexemes can read
    /// next is a continuation byte), the rest of the character as the fewest tokens of
    /// continuation bytes spell it that the matcher takes: one token where one byte ends it,
    /// else the longest tokens first. `None` outside a character, or where no such tokens
    /// end it within [`MAX_CHAR_TAIL`] bytes. A function of the parse state; the matcher is
    /// left as it was.
    pub(super) fn char_tail(&mut self) -> Option<Vec<u8>> {
        self.char_tails(1).pop()
    }

    /// Up to `n` rests of the current UTF-8 character, each a different character, as
    /// [`char_tail`](Self::char_tail) finds them (the first is its answer): those the fewest
    /// tokens spell first. Empty outside a character.
    pub(super) fn char_tails(&mut self, n: usize) -> Vec<Vec<u8>> {
        let mut found = Vec::new();
        if !self.inside_char() {
            return found;
        }
        let vocab = self.compiled.vocab().clone();
        let mut tails: Vec<&[u8]> = Vec::new();
        vocab.trie().walk(
            0usize,
            |d, b| (d < MAX_CHAR_TAIL && CONTINUATION.contains(&b)).then_some(d + 1),
            |_, ids| {
                if let Some(&t) = ids.iter().find(|&&t| vocab.kind(t) == TokenKind::Text) {
                    tails.push(vocab.bytes(t));
                }
            },
        );
        tails.sort_unstable_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        self.char_tails_from(&tails, MAX_CHAR_TAIL, n, &[], &mut found);
        found
    }

    /// Appends to `found` (up to `n` in all) the rests of the character after `so_far`, of at
    /// most `left` more bytes, made of `tails`.
    fn char_tails_from(&mut self, tails: &[&[u8]], left: usize, n: usize, so_far: &[u8], found: &mut Vec<Vec<u8>>) {
        if !self.inside_char() {
            found.push(so_far.to_vec());
            return;
        }
        // Every byte ends the character or none does (the lead byte said how many follow):
        // then the one-byte tails, as many as are wanted, end it.
        let ones = tails.iter().rev().take_while(|t| t.len() == 1);
        let mut ended = false;
        for &one in ones {
            if found.len() >= n {
                return;
            }
            if self.commit_bytes(one).is_ok() {
                ended = !self.inside_char();
                self.rollback(1).expect("committed just now");
                if !ended {
                    break;
                }
                found.push([so_far, one].concat());
            }
        }
        if ended {
            return;
        }
        for &t in tails.iter().filter(|t| t.len() <= left) {
            if found.len() >= n {
                return;
            }
            if self.commit_bytes(t).is_ok() {
                self.char_tails_from(tails, left - t.len(), n, &[so_far, t].concat(), found);
                self.rollback(1).expect("committed just now");
            }
        }
    }

    /// Is every byte the current lexemes can read next a UTF-8 continuation byte (some can)?
    /// The other bytes are asked first, printable ASCII first: outside a character one of
    /// them is almost always readable.
    fn inside_char(&self) -> bool {
        let (Run::Cfg(c), Backend::Earley(cfg)) = (&self.run, &self.compiled.backend) else { return false };
        // Continuation bytes are 0x80..=0xbf: the low half of the third word.
        let set = c.next_byte_set(cfg);
        let continuation = set[2] != 0;
        let outside = set[0] != 0 || set[1] != 0 || set[3] != 0;
        continuation && !outside
    }

    /// `bytes` spelled in the fewest tokens (text tokens; ties to the longer first token),
    /// committed (the caller rolls back). Any spelling of bytes the matcher takes is taken,
    /// but for the distinct-items guess, which may refuse one: then [`spell_greedy`]
    /// (Self::spell_greedy). `None` if no spelling commits or the end is not complete.
    pub(super) fn spell(&mut self, bytes: &[u8]) -> Option<Vec<TokenId>> {
        let n = bytes.len();
        let best = self.fewest_tokens(bytes);
        let start = self.len();
        let mut path = Vec::new();
        let mut i = 0;
        while i < n {
            let Some((_, t, k)) = best[i] else { break };
            if self.commit(t).is_err() {
                break;
            }
            path.push(t);
            i += k;
        }
        if i == n && self.is_accepting() {
            return Some(path);
        }
        self.rollback(self.len() - start).expect("committed here");
        self.spell_greedy(bytes)
    }

    /// The fewest tokens spelling `bytes` exactly, from each offset: `best[i]` = (tokens that
    /// spell `bytes[i..]`, the first of them, its length); ties to the longer first token.
    pub(super) fn fewest_tokens(&self, bytes: &[u8]) -> Vec<Option<(u32, TokenId, usize)>> {
        let n = bytes.len();
        let mut best: Vec<Option<(u32, TokenId, usize)>> = vec![None; n + 1];
        best[n] = Some((0, TokenId(0), 0));
        for i in (0..n).rev() {
            let mut pick: Option<(u32, TokenId, usize)> = None;
            self.tokens_at(&bytes[i..], |k, t| {
                let Some((rest, _, _)) = best[i + k] else { return };
                let c = (rest + 1, t, k);
                if pick.is_none_or(|p| (c.0, std::cmp::Reverse(c.2), c.1) < (p.0, std::cmp::Reverse(p.2), p.1)) {
                    pick = Some(c);
                }
            });
            best[i] = pick;
        }
        best
    }

    /// `bytes` spelled with the longest token the matcher takes at each point, committed (the
    /// caller rolls back); `None` if some point takes none or the end is not complete.
    fn spell_greedy(&mut self, bytes: &[u8]) -> Option<Vec<TokenId>> {
        let mut path = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            let mut found: Vec<(usize, TokenId)> = Vec::new();
            self.tokens_at(&bytes[i..], |k, t| found.push((k, t)));
            found.sort_unstable_by_key(|&(k, t)| (std::cmp::Reverse(k), t));
            let (k, t) = found.into_iter().find(|&(_, t)| self.commit(t).is_ok())?;
            path.push(t);
            i += k;
        }
        self.is_accepting().then_some(path)
    }
}
