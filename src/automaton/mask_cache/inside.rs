//! The tokens that keep some of a key's lexemes going, grouped by where they leave them
//! ([`InsideGroups`]), for the budgeted masks of counted strings.
//!
//! A budgeted mask where the budget binds judges each such token by its finish cost along the
//! lexemes it keeps alive ([`cfg_run::within`](crate::automaton::cfg_run)): a function of the
//! (scan, state) pairs at its end, and of whether some lexeme may end inside it. In a counted
//! string every token ends in its own state, so that walk judged the whole vocabulary at every
//! step. But where each scan's DFA is a count whose rows around the state read alike
//! ([`CountedBase::window`]), a token's end pairs are the same at every row of the window,
//! shifted by the row: so the groups are kept per (DFA, run, place, side of the minimum) as
//! (scan, rows on, place), built by one walk from the first state that asks, and shared by
//! every row after it. The caller adds each scan's row back and judges a group at a time.
//!
//! Invariant: the groups partition the tokens the walk from any qualifying state keeps going
//! (each id in one group), and a group's pairs shifted to that state's rows are exactly the
//! pairs that walk meets at the group's tokens, as is its `ends` (test
//! `shifted_groups_are_the_walks` below).

use std::collections::HashMap;
use std::sync::Arc;

use super::{MaskCache, ScanStack};
use crate::automaton::VocabEnv;
use crate::regular::{Dfa, FxBuild, StateId};
use crate::vocab::trie::TrieVisitor;
use crate::vocab::TokenId;

/// One scan's share of a key of [`InsideGroups`]: DFA id, the first row of the run, the place,
/// at or above the count's minimum.
pub(super) type ShiftKey = (u64, u32, StateId, bool);

/// A scan that goes on through a group's tokens: (scan index, rows on, place).
pub type Shifted = (u32, u32, StateId);

/// Tokens that keep some scan going, by the scans going on at their end (shifted) and whether
/// some lexeme may end inside them.
pub struct InsideGroup {
    pub top: Box<[Shifted]>,
    pub ends: bool,
    pub ids: Vec<TokenId>,
}

/// See the module docs.
pub struct InsideGroups {
    pub groups: Vec<InsideGroup>,
}

impl InsideGroups {
    /// Heap bytes, roughly (for the cache bound).
    pub(super) fn bytes(&self) -> usize {
        self.groups.iter().map(|g| 48 + g.top.len() * 12 + g.ids.len() * 4).sum::<usize>() + 32
    }
}

impl MaskCache {
    /// The [`InsideGroups`] of the scans of `dfas` in `states`, and each scan's row; `None`
    /// where some scan is not a count whose rows read alike within the longest token.
    pub fn inside_groups(
        &self,
        env: &VocabEnv,
        dfas: &[&Dfa],
        states: &[StateId],
    ) -> Option<(Arc<InsideGroups>, Vec<u32>)> {
        let depth = env.slices().longest.try_into().unwrap_or(u32::MAX);
        let mut key: Vec<ShiftKey> = Vec::with_capacity(dfas.len());
        let mut rows = Vec::with_capacity(dfas.len());
        for (d, &s) in dfas.iter().zip(states) {
            let base = d.counted_base()?;
            let (first, row, above) = base.window(s, depth)?;
            key.push((d.id(), first, base.place(s), above));
            rows.push(row);
        }
        if let Some(g) = self.lock().inside.get(key.as_slice()) {
            return Some((g.clone(), rows));
        }
        let groups = Arc::new(build(env, dfas, states, &rows));
        let mut inner = self.lock();
        inner.reserve(groups.bytes() + key.len() * 24);
        let groups = inner.inside.entry(key.into()).or_insert(groups).clone();
        Some((groups, rows))
    }
}

/// One lexer-only walk of the vocabulary from `states` (at `rows`), its tokens grouped.
fn build(env: &VocabEnv, dfas: &[&Dfa], states: &[StateId], rows: &[u32]) -> InsideGroups {
    let mut w = Grouping {
        dfas,
        rows,
        stack: ScanStack::default(),
        ends: vec![false],
        at: HashMap::default(),
        groups: Vec::new(),
    };
    w.stack.reset(states.iter().copied());
    env.vocab().trie().walk_visitor(&mut w);
    InsideGroups { groups: w.groups }
}

struct Grouping<'a> {
    dfas: &'a [&'a Dfa],
    rows: &'a [u32],
    stack: ScanStack,
    /// Per depth: whether some lexeme may end within the bytes so far.
    ends: Vec<bool>,
    /// Index into `groups` by (top, ends).
    at: HashMap<(Box<[Shifted]>, bool), usize, FxBuild>,
    groups: Vec<InsideGroup>,
}

impl TrieVisitor for Grouping<'_> {
    #[inline]
    fn push(&mut self, _node: u32, byte: u8) -> bool {
        let dfas = self.dfas;
        self.stack.push_byte(&mut self.ends, byte, |k| dfas[k as usize])
    }

    #[inline]
    fn pop(&mut self) {
        self.stack.pop();
        self.ends.pop();
    }

    fn tokens(&mut self, ids: &[TokenId]) {
        let top: Box<[Shifted]> = self
            .stack
            .top()
            .iter()
            .map(|&(k, s)| {
                let base = self.dfas[k as usize].counted_base().expect("a count");
                (k, base.row(s) - self.rows[k as usize], base.place(s))
            })
            .collect();
        let ends = *self.ends.last().expect("base level");
        let groups = &mut self.groups;
        let i = *self.at.entry((top.clone(), ends)).or_insert_with(|| {
            groups.push(InsideGroup { top, ends, ids: Vec::new() });
            groups.len() - 1
        });
        self.groups[i].ids.extend_from_slice(ids);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashSet};
    use std::sync::Arc;

    use super::*;
    use crate::regular::Lexeme;
    use crate::vocab::Vocab;

    /// Absolute groups: (pairs at the end, ends) -> sorted ids.
    type Absolute = BTreeMap<(Vec<(u32, StateId)>, bool), Vec<TokenId>>;

    fn absolute(groups: &InsideGroups, dfa: &Dfa, row: u32) -> Absolute {
        let base = dfa.counted_base().unwrap();
        let mut out = Absolute::new();
        for g in &groups.groups {
            let top = g.top.iter().map(|&(k, on, p)| (k, base.state_at(row + on, p))).collect();
            let ids = out.entry((top, g.ends)).or_default();
            ids.extend(&g.ids);
            ids.sort_unstable();
        }
        out
    }

    /// Every reachable state of a count (below its minimum, above it, near its maximum): where
    /// the cache answers, the shared groups shifted to the state's row are those of a walk from
    /// the state itself, asked in either order; most states share. A quoted count (its lexeme
    /// ends at the quote) and a bare one (it may end inside a token, past the minimum).
    #[test]
    fn shifted_groups_are_the_walks() {
        shifted_groups_are_the_walks_of(b"\"", b"\"");
        shifted_groups_are_the_walks_of(b"", b"");
    }

    fn shifted_groups_are_the_walks_of(open: &[u8], close: &[u8]) {
        let unit = crate::regular::regex::parse("[a-c]|xy").unwrap();
        let lexeme = Lexeme::counted(open, unit, 40, Some(5000), close);
        let dfa = Dfa::shared(&lexeme, Default::default()).unwrap();
        assert!(dfa.is_counter());
        let toks: [&[u8]; 13] =
            [b"a", b"b", b"c", b"x", b"y", b"\"", b"ab", b"xy", b"axy", b"yx", b"abcabc", b"c\"", b"xyxyxabcab"];
        let env = crate::automaton::VocabEnv::new(Arc::new(Vocab::from_byte_tokens(
            toks.iter().map(|t| t.to_vec()).collect(),
            &[],
        )));
        let mut states = vec![dfa.run(dfa.start(), open)];
        let mut seen: HashSet<StateId> = states.iter().copied().collect();
        let mut i = 0;
        while i < states.len() {
            for b in [b'a', b'x', b'y'] {
                let t = dfa.next(states[i], b);
                if t != StateId::DEAD && dfa.can_continue(t) && seen.insert(t) {
                    states.push(t);
                }
            }
            i += 1;
        }
        let base = dfa.counted_base().unwrap();
        for order in [states.clone(), states.iter().rev().copied().collect()] {
            let cache = MaskCache::default();
            let (mut shared, mut ending) = (0, 0);
            for &s in &order {
                let Some((groups, rows)) = cache.inside_groups(&env, &[&dfa], &[s]) else { continue };
                shared += 1;
                ending += usize::from(groups.groups.iter().any(|g| g.ends));
                assert_eq!(rows, [base.row(s)]);
                let own = build(&env, &[&dfa], &[s], &rows);
                assert_eq!(absolute(&groups, &dfa, rows[0]), absolute(&own, &dfa, rows[0]), "state {s:?}");
            }
            assert!(shared * 10 > order.len() * 9, "{shared} of {} states share", order.len());
            // Bare, the lexeme may end inside a token past the minimum: such groups are met.
            assert_eq!(ending > 0, close.is_empty(), "{ending} states with tokens a lexeme ends in");
            assert!(cache.lock().inside.len() < 16, "a walk per run, place and side");
        }
    }
}
