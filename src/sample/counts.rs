//! [`TokenCounts`]: how often each token has been seen, prompt and output kept apart.
//!
//! The penalties need, for each distinct token seen so far, how many times it was seen; which
//! tokens count is the request's [`PenaltyScope`]. The counts are sparse (a few thousand distinct
//! tokens against a vocabulary of 150k), so they live in a small table: the distinct ids in the
//! order they were first seen, a parallel vector of `(prompt, output)` counts, and a hash index
//! from id to slot. Iteration is in first-seen order, so it is deterministic.
//!
//! The tokens are also kept in order (`history`: the prompt's, then the output's), for the
//! penalty that looks at sequences, [DRY](super::Dry).
//!
//! Invariant: `ids`, `counts` and `index` describe the same slots; an id is never in two slots.
//! `history` holds `prompt_len` prompt tokens, then the output tokens counted now.
//! A slot whose counts have dropped to zero (after [`TokenCounts::remove_output`]) stays, and is
//! skipped by [`TokenCounts::iter`].

use std::collections::HashMap;

use super::PenaltyScope;
use crate::vocab::TokenId;

/// Seen-token counts for the penalties: prompt and output counted separately.
#[derive(Debug, Clone, Default)]
pub struct TokenCounts {
    ids: Vec<TokenId>,
    /// `(prompt count, output count)`, parallel to `ids`.
    counts: Vec<(u32, u32)>,
    index: HashMap<u32, u32>,
    /// Every counted token in order: the prompt's, then the output's.
    history: Vec<TokenId>,
    prompt_len: usize,
}

impl TokenCounts {
    /// No tokens seen.
    pub fn new() -> TokenCounts {
        TokenCounts::default()
    }

    /// Counts every token of `prompt` as a prompt token.
    pub fn from_prompt(prompt: &[TokenId]) -> TokenCounts {
        let mut c = TokenCounts::new();
        prompt.iter().for_each(|&t| c.add_prompt(t));
        c
    }

    fn slot(&mut self, t: TokenId) -> &mut (u32, u32) {
        let next = self.ids.len() as u32;
        let i = *self.index.entry(t.0).or_insert(next) as usize;
        if i == self.ids.len() {
            self.ids.push(t);
            self.counts.push((0, 0));
        }
        &mut self.counts[i]
    }

    /// Counts one more occurrence of `t` in the prompt.
    pub fn add_prompt(&mut self, t: TokenId) {
        let s = self.slot(t);
        s.0 = s.0.saturating_add(1);
        // Prompt tokens come before any output (`from_prompt`); one added later goes in
        // front of the output all the same.
        self.history.insert(self.prompt_len, t);
        self.prompt_len += 1;
    }

    /// Counts one more occurrence of `t` in the output (call it for every committed token).
    pub fn add_output(&mut self, t: TokenId) {
        let s = self.slot(t);
        s.1 = s.1.saturating_add(1);
        self.history.push(t);
    }

    /// Undoes one [`add_output`](TokenCounts::add_output) of `t` (for rollback). Returns `false`,
    /// changing nothing, when `t` has no output occurrence to undo.
    pub fn remove_output(&mut self, t: TokenId) -> bool {
        match self.index.get(&t.0) {
            Some(&i) if self.counts[i as usize].1 > 0 => {
                self.counts[i as usize].1 -= 1;
                let last =
                    self.history[self.prompt_len..].iter().rposition(|&x| x == t).expect("counted in the output");
                self.history.remove(self.prompt_len + last);
                true
            }
            _ => false,
        }
    }

    /// Forgets every output token, keeping the prompt's counts (to reuse a prompt).
    pub fn clear_output(&mut self) {
        self.counts.iter_mut().for_each(|c| c.1 = 0);
        self.history.truncate(self.prompt_len);
    }

    /// Every counted token in order: the prompt's, then the output's.
    pub fn history(&self) -> &[TokenId] {
        &self.history
    }

    /// How many times `t` was seen in the prompt.
    pub fn prompt_count(&self, t: TokenId) -> u32 {
        self.index.get(&t.0).map_or(0, |&i| self.counts[i as usize].0)
    }

    /// How many times `t` was seen in the output.
    pub fn output_count(&self, t: TokenId) -> u32 {
        self.index.get(&t.0).map_or(0, |&i| self.counts[i as usize].1)
    }

    /// How many times `t` counts under `scope`.
    pub fn count(&self, t: TokenId, scope: PenaltyScope) -> u32 {
        self.index.get(&t.0).map_or(0, |&i| scoped(self.counts[i as usize], scope))
    }

    /// Every distinct token with a nonzero count under `scope`, once each, with that count, in
    /// the order the tokens were first seen.
    pub fn iter(&self, scope: PenaltyScope) -> impl Iterator<Item = (TokenId, u32)> + '_ {
        self.ids.iter().zip(&self.counts).map(move |(&t, &c)| (t, scoped(c, scope))).filter(|&(_, n)| n > 0)
    }

    /// Whether no token counts under any scope.
    pub fn is_empty(&self) -> bool {
        self.counts.iter().all(|&c| c == (0, 0))
    }
}

fn scoped((prompt, output): (u32, u32), scope: PenaltyScope) -> u32 {
    match scope {
        PenaltyScope::Output => output,
        PenaltyScope::Prompt => prompt,
        PenaltyScope::Both => prompt.saturating_add(output),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_count_separately() {
        let mut c = TokenCounts::from_prompt(&[TokenId(7), TokenId(3), TokenId(7)]);
        c.add_output(TokenId(3));
        c.add_output(TokenId(9));
        c.add_output(TokenId(9));
        let all = |s| c.iter(s).map(|(t, n)| (t.0, n)).collect::<Vec<_>>();
        assert_eq!(all(PenaltyScope::Prompt), vec![(7, 2), (3, 1)]);
        assert_eq!(all(PenaltyScope::Output), vec![(3, 1), (9, 2)]);
        assert_eq!(all(PenaltyScope::Both), vec![(7, 2), (3, 2), (9, 2)]);
        assert_eq!(c.count(TokenId(3), PenaltyScope::Both), 2);
        assert_eq!(c.prompt_count(TokenId(9)), 0);
        assert_eq!(c.output_count(TokenId(9)), 2);
        assert_eq!(c.count(TokenId(1000), PenaltyScope::Both), 0);
    }

    #[test]
    fn remove_and_clear_output() {
        let mut c = TokenCounts::new();
        assert!(c.is_empty());
        c.add_prompt(TokenId(1));
        c.add_output(TokenId(2));
        c.add_output(TokenId(3));
        assert_eq!(c.history(), &[TokenId(1), TokenId(2), TokenId(3)]);
        assert!(c.remove_output(TokenId(2)));
        assert_eq!(c.history(), &[TokenId(1), TokenId(3)]);
        assert!(c.remove_output(TokenId(3)));
        assert!(!c.remove_output(TokenId(2)), "nothing left to undo");
        assert!(!c.remove_output(TokenId(1)), "a prompt token is not an output token");
        assert_eq!(c.iter(PenaltyScope::Output).count(), 0);
        c.add_output(TokenId(1));
        c.clear_output();
        assert_eq!(c.history(), &[TokenId(1)]);
        assert_eq!(c.output_count(TokenId(1)), 0);
        assert_eq!(c.prompt_count(TokenId(1)), 1);
        assert!(!c.is_empty());
    }
}
