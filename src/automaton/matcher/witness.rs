//! The witness: one complete way on from the current position, spelled in tokens of the
//! vocabulary and checked by committing it, for a context-free constraint near the end of a
//! token budget.
//!
//! A context-free constraint counts what finishing costs lexeme by lexeme (see
//! [`Cfg::token_costs`](crate::automaton::cfg::Cfg::token_costs)): an upper bound, since a token
//! that straddles two lexemes (`":"`, `"},{"`) is not counted as one. Under a tight budget that
//! bound may say nothing fits where something does. The witness settles it the other way: the
//! cheapest completion in usable bytes (each byte chosen so the byte cost drops by one), spelled
//! with the longest token the matcher takes at each point. It is a real token sequence the
//! matcher accepted, so when it fits, the output can be finished within the budget: its first
//! token is allowed, and the rest of it stays the witness while the output follows it.
//!
//! Invariants: a witness is only ever a sequence the matcher committed from the position it is
//! kept for (`Matcher::witness.0` = the tokens committed then), ending accepting.

use super::{Matcher, Run};
use crate::regular::UNREACHABLE;
use crate::vocab::{TokenId, TokenKind};

/// The longest completion a witness is looked for along, in bytes (also the search's depth).
const MAX_WITNESS_BYTES: usize = 1024;

/// Most bytes the search for a witness tries.
const MAX_WITNESS_COMMITS: usize = 16_384;

impl Matcher {
    /// The witness from here (cached along its own path), or `None` (a regular constraint,
    /// whose count is exact; nothing found within [`MAX_WITNESS_BYTES`]; after EOS).
    pub(super) fn witness(&mut self) -> Option<&[TokenId]> {
        if !matches!(self.run, Run::Cfg(_)) || self.is_ended() {
            return None;
        }
        let here = self.len();
        if self.witness.as_ref().is_none_or(|(at, _)| *at != here) {
            let path = self.find_witness()?;
            self.witness = Some((here, path));
        }
        self.witness.as_ref().map(|(_, p)| p.as_slice())
    }

    /// Keeps the witness when `token` is its next token (committed at `before` tokens).
    pub(super) fn follow_witness(&mut self, before: usize, token: TokenId) {
        self.witness = match self.witness.take() {
            Some((at, path)) if at == before && path.first() == Some(&token) => Some((at + 1, path[1..].to_vec())),
            _ => None,
        };
    }

    fn byte_cost(&mut self) -> u32 {
        match (&mut self.run, &self.compiled.backend) {
            (Run::Cfg(c), super::Backend::Earley(cfg)) => c.byte_cost(cfg),
            _ => UNREACHABLE,
        }
    }

    fn find_witness(&mut self) -> Option<Vec<TokenId>> {
        let start = self.len();
        let saved = self.witness.take();
        let bytes = self.cheapest_bytes();
        let path = bytes.and_then(|b| self.spell(&b));
        self.rollback(self.len() - start).expect("committed here");
        self.witness = saved;
        path
    }

    /// The cheapest completion in usable bytes (the caller rolls back): a depth-first search
    /// that takes, at each point, the first byte after which the byte cost drops by one (the
    /// usual way, found at once), and only where that way is refused further on (a repeat of a
    /// distinct item) the other bytes, cheapest first; at most [`MAX_WITNESS_COMMITS`] bytes tried.
    fn cheapest_bytes(&mut self) -> Option<Vec<u8>> {
        let start = self.len();
        let (mut bytes, mut budget) = (Vec::new(), MAX_WITNESS_COMMITS);
        let found = self.cheapest_from(&mut bytes, &mut budget);
        self.rollback(self.len() - start).expect("committed here");
        found.then_some(bytes)
    }

    fn cheapest_from(&mut self, out: &mut Vec<u8>, budget: &mut usize) -> bool {
        if self.is_accepting() {
            return true;
        }
        let cost = self.byte_cost();
        if cost == UNREACHABLE || cost == 0 || out.len() >= MAX_WITNESS_BYTES {
            return false;
        }
        // The bytes the lexemes can read, printable ASCII first: the usual way on.
        let mut order: Vec<u8> = match (&self.run, &self.compiled.backend) {
            (Run::Cfg(c), super::Backend::Earley(cfg)) => c.next_bytes(cfg).collect(),
            _ => return false,
        };
        order.sort_by_key(|&b| !(0x20..0x7f).contains(&b));
        let mut later = Vec::new();
        for b in order {
            if *budget == 0 {
                return false;
            }
            *budget -= 1;
            if self.commit_bytes(&[b]).is_err() {
                continue;
            }
            let after = self.byte_cost();
            if after == cost - 1 {
                out.push(b);
                if self.cheapest_from(out, budget) {
                    return true;
                }
                out.pop();
            } else if after != UNREACHABLE {
                later.push((after, b));
            }
            self.rollback(1).expect("committed just now");
        }
        later.sort_unstable();
        for (_, b) in later {
            if *budget == 0 || self.commit_bytes(&[b]).is_err() {
                return false;
            }
            out.push(b);
            if self.cheapest_from(out, budget) {
                return true;
            }
            out.pop();
            self.rollback(1).expect("committed just now");
        }
        false
    }

    /// `bytes` spelled with the longest token the matcher takes at each point, committed (the
    /// caller rolls back); `None` if some point takes none or the end is not complete.
    fn spell(&mut self, bytes: &[u8]) -> Option<Vec<TokenId>> {
        let vocab = self.compiled.vocab().clone();
        let mut path = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            let mut found: Vec<(usize, TokenId)> = Vec::new();
            vocab.trie().walk(
                0usize,
                |k, b| (bytes.get(i + k) == Some(&b)).then_some(k + 1),
                |k, ids| found.extend(ids.iter().map(|&t| (k, t))),
            );
            found.sort_unstable_by_key(|&(k, t)| (std::cmp::Reverse(k), t));
            let (k, t) = found
                .into_iter()
                .filter(|&(_, t)| vocab.kind(t) == TokenKind::Text)
                .find(|&(_, t)| self.commit(t).is_ok())?;
            path.push(t);
            i += k;
        }
        self.is_accepting().then_some(path)
    }
}
