//! `Matcher`: the per-sequence state of one constrained output.
//!
//! It keeps one automaton state per committed token (a stack), so `rollback(n)` is exact and
//! O(n). The mask is "every token whose bytes keep the automaton alive, plus EOS exactly when
//! the output so far is complete". A token whose bytes end inside a UTF-8 character is fine:
//! the automaton runs on bytes.
//!
//! Invariants:
//! - `stack` is never empty; `stack[0]` is the start state; `stack.last()` is the current state.
//! - `ENDED` on top means EOS was committed: nothing more is allowed until it is rolled back.
//! - A committed state is never the dead state.

use std::sync::Arc;

use super::{dfa::DEAD, Compiled};
use crate::error::{Error, Result};
use crate::vocab::{TokenId, TokenKind, TokenSet};

const ENDED: u32 = u32::MAX;

/// The most bytes `forced_bytes` returns at once.
const MAX_FORCED_BYTES: usize = 4096;

#[derive(Clone)]
pub struct Matcher {
    compiled: Arc<Compiled>,
    stack: Vec<u32>,
}

impl Matcher {
    pub fn new(compiled: Arc<Compiled>) -> Matcher {
        let start = compiled.dfa.start();
        Matcher { compiled, stack: vec![start] }
    }

    pub fn compiled(&self) -> &Arc<Compiled> {
        &self.compiled
    }

    fn state(&self) -> u32 {
        *self.stack.last().expect("stack is never empty")
    }

    /// The number of tokens committed (EOS included).
    pub fn len(&self) -> usize {
        self.stack.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.stack.len() == 1
    }

    /// Has EOS been committed?
    pub fn is_ended(&self) -> bool {
        self.state() == ENDED
    }

    /// Is the output so far complete (EOS allowed now)?
    pub fn is_accepting(&self) -> bool {
        let s = self.state();
        s != ENDED && s != DEAD && self.compiled.dfa.is_accepting(s)
    }

    /// Is no continuation possible except EOS (the output is complete and cannot grow)?
    pub fn is_finished(&self) -> bool {
        let s = self.state();
        s == ENDED || (self.is_accepting() && (0..=255u8).all(|b| self.compiled.dfa.next(s, b) == DEAD))
    }

    /// Fills `mask` with the allowed tokens (cleared first). `mask.width()` may exceed the
    /// vocabulary: ids past it stay unset.
    pub fn fill_mask(&self, mask: &mut TokenSet) {
        self.fill(mask, u32::MAX);
    }

    /// Like [`fill_mask`](Self::fill_mask), but only tokens after which the output can still be
    /// completed within `remaining - 1` more tokens, so that an output limited to `remaining`
    /// tokens (this one included) always ends complete. With `remaining == 0` nothing is allowed.
    pub fn fill_mask_within(&self, mask: &mut TokenSet, remaining: usize) {
        if remaining == 0 {
            mask.clear();
            return;
        }
        self.fill(mask, (remaining - 1).min(u32::MAX as usize - 1) as u32);
    }

    fn fill(&self, mask: &mut TokenSet, after_budget: u32) {
        mask.clear();
        let s = self.state();
        if s == ENDED || s == DEAD {
            return;
        }
        let c = &*self.compiled;
        let dfa = &c.dfa;
        let width = mask.width();
        let budgeted = after_budget != u32::MAX;
        c.vocab.trie().walk(
            s,
            |s, b| {
                let t = dfa.next(s, b);
                (t != DEAD).then_some(t)
            },
            |s, ids| {
                if !budgeted || c.finish_tokens[s as usize] <= after_budget {
                    for &id in ids {
                        if (id.0 as usize) < width {
                            mask.insert(id);
                        }
                    }
                }
            },
        );
        self.add_eos(mask);
    }

    fn add_eos(&self, mask: &mut TokenSet) {
        if self.is_accepting() {
            for &e in self.compiled.vocab.eos() {
                if (e.0 as usize) < mask.width() {
                    mask.insert(e);
                }
            }
        }
    }

    /// The slow reference: tries every token id byte by byte. Must equal `fill_mask`.
    pub fn reference_mask(&self, mask: &mut TokenSet) {
        self.reference_mask_within(mask, usize::MAX);
    }

    /// The slow reference for [`fill_mask_within`](Self::fill_mask_within).
    pub fn reference_mask_within(&self, mask: &mut TokenSet, remaining: usize) {
        mask.clear();
        let s = self.state();
        if s == ENDED || remaining == 0 {
            return;
        }
        let c = &*self.compiled;
        let limit = n_minus_one(remaining);
        let n = c.vocab.len().min(mask.width());
        for id in (0..n as u32).map(TokenId) {
            let bytes = c.vocab.bytes(id);
            if c.is_text(id) && !bytes.is_empty() {
                let t = c.dfa.run(s, bytes);
                if t != DEAD && c.finish_tokens[t as usize] as usize <= limit {
                    mask.insert(id);
                }
            }
        }
        self.add_eos(mask);
    }

    /// Is `token` allowed now?
    pub fn allows(&self, token: TokenId) -> bool {
        let s = self.state();
        if s == ENDED {
            return false;
        }
        let c = &*self.compiled;
        match c.vocab.kind(token) {
            TokenKind::Text => {
                let b = c.vocab.bytes(token);
                !b.is_empty() && c.dfa.run(s, b) != DEAD
            }
            TokenKind::Special => c.vocab.is_eos(token) && self.is_accepting(),
            TokenKind::Unused => false,
        }
    }

    /// Appends `token`. Errors (and changes nothing) if it is not allowed.
    pub fn commit(&mut self, token: TokenId) -> Result<()> {
        if !self.allows(token) {
            let text = String::from_utf8_lossy(self.compiled.vocab.bytes(token)).into_owned();
            return Err(Error::TokenNotAllowed { token: token.0, text });
        }
        let next = if self.compiled.vocab.is_eos(token) {
            ENDED
        } else {
            self.compiled.dfa.run(self.state(), self.compiled.vocab.bytes(token))
        };
        debug_assert_ne!(next, DEAD);
        self.stack.push(next);
        Ok(())
    }

    /// Appends raw bytes as if a token spelled them (for forced text). Errors if not allowed.
    pub fn commit_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        let s = self.state();
        let next = if s == ENDED { DEAD } else { self.compiled.dfa.run(s, bytes) };
        if next == DEAD {
            return Err(Error::invalid(format!("text {:?} is not allowed here", String::from_utf8_lossy(bytes))));
        }
        self.stack.push(next);
        Ok(())
    }

    /// Undoes the last `n` commits. Errors if fewer than `n` were made.
    pub fn rollback(&mut self, n: usize) -> Result<()> {
        if n > self.len() {
            return Err(Error::invalid(format!("cannot roll back {n} tokens: only {} committed", self.len())));
        }
        self.stack.truncate(self.stack.len() - n);
        Ok(())
    }

    /// Back to the start of the output.
    pub fn reset(&mut self) {
        self.stack.truncate(1);
    }

    /// The bytes that must come next whatever is chosen (empty if there is a choice, or if
    /// the output may end here).
    pub fn forced_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut s = self.state();
        if s == ENDED {
            return out;
        }
        let dfa = &self.compiled.dfa;
        while out.len() < MAX_FORCED_BYTES && !dfa.is_accepting(s) {
            let Some(b) = dfa.only_byte(s) else { break };
            out.push(b);
            s = dfa.next(s, b);
        }
        out
    }

    /// Tokens that are the only sensible continuation: the forced bytes, tokenized canonically.
    /// The last token is held back unless the forced text finishes the output, since the text
    /// after it might merge with it into a longer token.
    pub fn forced_tokens(&self) -> Vec<TokenId> {
        let bytes = self.forced_bytes();
        if bytes.is_empty() {
            return Vec::new();
        }
        let Some(mut tokens) = self.compiled.vocab.encode(&bytes) else { return Vec::new() };
        let mut probe = self.clone();
        if probe.commit_bytes(&bytes).is_err() || !probe.is_finished() {
            tokens.pop();
        }
        tokens
    }
}

fn n_minus_one(remaining: usize) -> usize {
    if remaining == usize::MAX {
        u32::MAX as usize
    } else {
        remaining - 1
    }
}
