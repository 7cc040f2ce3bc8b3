//! The tokens a budgeted mask refused by the lexeme-by-lexeme count ([`CfgRun::fill`]), for the
//! matcher to judge again by a witness and the search (see [`witness`](super::super::matcher)),
//! grouped by the parse state they reach so that each state is judged once.
//!
//! What the parse state after a token is a function of: where no lexeme that started inside the
//! token is still alive at its end (the parser walk below the token's lexeme ends did not reach
//! its end alive), the ways on after it are the current scans going on, at the lexer states
//! the token leaves them in, and the fresh scans of the row the lexemes ending at its last byte
//! build (a function of which lexemes those are: one boundary group of the
//! [`mask_cache`](crate::automaton::mask_cache) entry). Rows built at the bytes before hold no
//! live scan and are no row any way on reads (an item refers only to rows a live scan or the
//! boundary row reaches): they change the chart, not the language from there. So tokens with
//! the same [`Landing`] reach states with the same ways on, accepted and refused alike, and one
//! of them stands for all. Free text before a marker ends at every byte; its tokens were each
//! judged on their own (a 128k vocabulary: 250k commits a mask), now a few groups.
//!
//! Where a lexeme that started inside a token is alive at its end, the state depends on where it
//! started: such tokens stay [`singles`](Refused::singles). Where the grammar keeps items
//! distinct, the reader of the items also reads the token's bytes: every token that ends a
//! lexeme stays a single there (as before the groups).
//!
//! Invariant: outside [`CfgRun::fill`] `ending` and `at_end` are empty (`settle` moves them).

use std::cell::RefCell;

#[cfg(doc)]
use super::CfgRun;
use super::LexerStates;
use crate::regular::StateId;
use crate::vocab::{TokenId, TokenSet};

/// Where a refused token leaves the parse (see the module docs): the lexer states of the
/// current scans going on through it (scan index, state; empty where none does), and the
/// boundary group whose lexemes end at its last byte, plus one (0: none, or a group whose row
/// is dead: no way on either way).
pub(in crate::automaton) type Landing = (LexerStates, u32);

#[derive(Default, Clone)]
pub(in crate::automaton) struct Refused {
    /// Tokens by the [`Landing`] they reach: each key is one parse state. Few keys (a walk
    /// meets few lexer states and groups), so a list, the last one used first.
    pub grouped: Vec<(Landing, Vec<TokenId>)>,
    /// The others, one by one (see the module docs). A token may be listed though another way
    /// let it through (the caller skips those).
    pub singles: Vec<TokenId>,
    /// While filling: tokens the lexer-only walk refused where some lexeme may end within
    /// them, by the lexer states they leave the current scans in.
    ending: Vec<(LexerStates, Vec<TokenId>)>,
    /// While filling: tokens spelled by a boundary group's members that the budget refused,
    /// by the group's index.
    at_end: Vec<(u32, Vec<TokenId>)>,
}

/// Adds `ids` to the entry of `list` whose key is `is_key` (the last such, as the last used
/// is the likeliest), or to a new entry keyed `key()`.
fn add_to<K>(list: &mut Vec<(K, Vec<TokenId>)>, is_key: impl Fn(&K) -> bool, key: impl FnOnce() -> K, ids: &[TokenId]) {
    match list.iter().rposition(|(k, _)| is_key(k)) {
        Some(i) => list[i].1.extend_from_slice(ids),
        None => list.push((key(), ids.to_vec())),
    }
}

/// [`Refused::settle`]'s marks, per token id (0 where unmarked between calls).
const SINGLE: u32 = u32::MAX;
const TAKEN: u32 = u32::MAX - 1;

thread_local! {
    /// Per token id, a mark for [`Refused::settle`] (all 0 between calls).
    static MARKS: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

impl Refused {
    pub fn clear(&mut self) {
        self.grouped.clear();
        self.singles.clear();
        self.ending.clear();
        self.at_end.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.grouped.is_empty() && self.singles.is_empty() && self.ending.is_empty() && self.at_end.is_empty()
    }

    /// Heap bytes, roughly.
    pub fn bytes(&self) -> usize {
        let grouped: usize = self.grouped.iter().map(|((k, _), ids)| k.len() * 8 + ids.len() * 4 + 52).sum();
        let ending: usize = self.ending.iter().map(|(k, ids)| k.len() * 8 + ids.len() * 4 + 48).sum();
        let at_end: usize = self.at_end.iter().map(|(_, ids)| ids.len() * 4 + 28).sum();
        self.singles.len() * 4 + grouped + ending + at_end
    }

    /// Tokens kept inside the current lexemes (no lexeme ends in them), reaching `top`.
    pub fn add_inside(&mut self, top: &[(u32, StateId)], ids: &[TokenId]) {
        self.add_grouped(top, 0, ids);
    }

    /// Tokens that reach `top` where some lexeme may end within them (settled later).
    pub fn add_ending(&mut self, top: &[(u32, StateId)], ids: &[TokenId]) {
        add_to(&mut self.ending, |k| k.as_slice() == top, || top.to_vec(), ids);
    }

    /// Tokens spelled by the members of boundary group `group` (settled later).
    pub fn add_at_end(&mut self, group: u32, ids: impl Iterator<Item = TokenId>) {
        match self.at_end.last_mut() {
            Some((g, list)) if *g == group => list.extend(ids),
            _ => self.at_end.push((group, ids.collect())),
        }
    }

    fn add_grouped(&mut self, top: &[(u32, StateId)], end: u32, ids: &[TokenId]) {
        add_to(&mut self.grouped, |(k, e)| *e == end && k.as_slice() == top, || (top.to_vec(), end), ids);
    }

    /// Sorts what the walks recorded (the lexer-only walk's `ending`, the groups' `at_end`; the
    /// parser walk's own refusals are `singles` already) into groups and singles, leaving out
    /// the tokens `mask` holds; `apart` (the grammar keeps items distinct): no groups of
    /// tokens that end a lexeme, every one a single. See the module docs.
    pub fn settle(&mut self, mask: &TokenSet, apart: bool) {
        if self.ending.is_empty() && self.at_end.is_empty() {
            return;
        }
        let (ending, at_end) = (std::mem::take(&mut self.ending), std::mem::take(&mut self.at_end));
        let open = |t: &TokenId| !mask.contains(*t);
        if apart {
            let ids = ending.iter().flat_map(|(_, ids)| ids).chain(at_end.iter().flat_map(|(_, ids)| ids));
            self.singles.extend(ids.copied().filter(open));
            return;
        }
        MARKS.with(|marks| {
            let mut marks = marks.borrow_mut();
            let most = ending
                .iter()
                .flat_map(|(_, ids)| ids)
                .chain(at_end.iter().flat_map(|(_, ids)| ids))
                .chain(&self.singles);
            let need = most.map(|t| t.0 as usize + 1).max().unwrap_or(0);
            if marks.len() < need {
                marks.resize(need, 0);
            }
            // The parser walk's refusals: a lexeme started inside them is alive at their end.
            for t in &self.singles {
                marks[t.0 as usize] = SINGLE;
            }
            // The group ending at each token's last byte (a token ends at one trie node, so at
            // most one group; two would make it a single, to be safe).
            for (g, ids) in &at_end {
                for t in ids {
                    let m = &mut marks[t.0 as usize];
                    *m = match *m {
                        0 => g + 1,
                        m if m == g + 1 || m == SINGLE => m,
                        _ => {
                            self.singles.push(*t);
                            SINGLE
                        }
                    };
                }
            }
            let mut buf = Vec::new();
            for (top, ids) in &ending {
                // By the group each ends at (the ids of one trie node mostly share it).
                let mut run: Option<u32> = None;
                for t in ids.iter().filter(|t| open(t)) {
                    let m = &mut marks[t.0 as usize];
                    let end = match *m {
                        SINGLE | TAKEN => continue,
                        m => m,
                    };
                    *m = TAKEN;
                    if run.is_some_and(|r| r != end) {
                        self.add_grouped(top, run.expect("checked"), &buf);
                        buf.clear();
                    }
                    run = Some(end);
                    buf.push(*t);
                }
                if let Some(end) = run {
                    self.add_grouped(top, end, &buf);
                    buf.clear();
                }
            }
            // Those no current scan goes on through: the group's fresh scans alone.
            for (g, ids) in &at_end {
                buf.clear();
                buf.extend(ids.iter().filter(|t| marks[t.0 as usize] == g + 1 && open(t)));
                if !buf.is_empty() {
                    self.add_grouped(&[], g + 1, &buf);
                }
            }
            let listed = ending.iter().flat_map(|(_, ids)| ids).chain(at_end.iter().flat_map(|(_, ids)| ids));
            for t in listed.chain(&self.singles) {
                marks[t.0 as usize] = 0;
            }
        });
    }
}
