//! Token distances: the fewest tokens of a vocabulary that take a lexeme's DFA from a state to
//! acceptance, every token read inside the lexeme ([`TokenDistances`]).
//!
//! A budget (`max_tokens`) is counted in tokens of the model's vocabulary, so the
//! never-truncated rule needs to know how many tokens finish an output. The cheap bound every
//! compile computes counts single-byte tokens (`Dfa::dist_using`): an upper bound, often several
//! times the real count (a JSON key is one or two tokens, not ten). Where that bound does not fit
//! the budget, the mask asks here for the exact count: a breadth-first search over the DFA's
//! states whose edges are tokens (from a state, each token of the trie that keeps the DFA alive
//! leads to the state at its end). A state's successors are found by one trie walk, kept (a
//! counted state far enough from its count's bounds shares the walk of its run and place); exact
//! distances are kept too, so a state is searched from once per vocabulary and DFA (lexeme DFAs
//! are shared across compiles, and this lives in the [`VocabEnv`](super::VocabEnv)).
//!
//! Bounded work: a search expands at most [`MAX_EXPANSIONS`] states, counted whether their
//! successors were kept or not; past the budget asked about it answers [`Reach::MoreThan`].
//! Past the expansions (a literal or a counted repetition of hundreds of bytes, whose states
//! the breadth-first levels all meet before the end) it walks greedily instead: from each
//! state the token whose end is fewest bytes from acceptance, while that strictly shrinks
//! (at most the budget's steps). The walk is a way to finish, so its length is an upper bound
//! ([`Reach::AtMost`]); for a literal, where every way spells the same bytes, it is the
//! longest-match spelling, near the true count. Where it fails too, [`Reach::Unknown`], and the
//! caller keeps the single-byte bound, which is sound.
//!
//! Invariants: an answer is a function of the vocabulary, the DFA, the state and the budget
//! only, never of what earlier searches kept (they make a search faster, not different): so the
//! fast mask and the reference mask, asking in different orders, agree. `Exact(d)` is the true
//! minimum over token sequences that stay inside the lexeme and end in an accepting state;
//! `AtMost(d)`, that such a sequence of `d` tokens exists; `MoreThan(k)`, that none of `k`
//! tokens or fewer does. Kept per state, each a function of the state alone: exact distances,
//! lower bounds, the level where the search ran out of expansions (for a larger budget it runs
//! out there again, so the walk answers without searching) and the walk's length.
//! [`TokenDistances::within`] asks the walk first: a way within the budget settles it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use crate::regular::{Dfa, FxBuild, StateId, UNREACHABLE};
use crate::vocab::Vocab;

/// Most states one search expands (a trie walk each, the first time) before it gives up.
pub const MAX_EXPANSIONS: usize = 1024;

/// A walk's end states are deduplicated by a mark per state past this many (else sorted),
/// where the DFA has at most [`MARK_STATES`] states.
const MARK_FROM: usize = 256;
const MARK_STATES: usize = 1 << 20;

/// Most states whose successors and distances one DFA keeps, before they are dropped.
const MAX_KEPT: usize = 1 << 16;

/// What a search knows about a state's token distance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Exactly this many tokens ([`UNREACHABLE`]: acceptance cannot be reached at all).
    Exact(u32),
    /// At most this many tokens (a way of this length was found; shorter ones may exist).
    AtMost(u32),
    /// More than this many tokens.
    MoreThan(u32),
    /// The search stopped before it could tell.
    Unknown,
}

impl Reach {
    /// Do `budget` tokens or fewer surely reach acceptance?
    pub fn within(self, budget: u32) -> bool {
        matches!(self, Reach::Exact(d) | Reach::AtMost(d) if d <= budget)
    }

    /// The token count where the search settled it, else `bound` (a count known to suffice,
    /// such as the single-byte one): never more than `bound`.
    pub fn or_bound(self, bound: u32) -> u32 {
        match self {
            Reach::Exact(d) | Reach::AtMost(d) => d.min(bound),
            Reach::MoreThan(_) | Reach::Unknown => bound,
        }
    }
}

/// The token distances of one DFA for one vocabulary, filled in as they are asked for.
#[derive(Default)]
pub struct TokenDistances {
    inner: Mutex<Inner>,
}

/// A counted state's successors relative to its row: (rows on, place), sorted.
type Shifted = Arc<[(u32, StateId)]>;

#[derive(Default)]
struct Inner {
    /// The distinct live states one token leads to from a state.
    succ: HashMap<StateId, Arc<[StateId]>>,
    /// Of a counted repetition, the same by (first row of the run, place) for the states whose
    /// tokens stay within their run ([`run_within`](crate::regular::CountedBase::run_within)):
    /// (rows on, place), sorted.
    /// One walk serves every row of the run (a string of `maxLength` 200 has 200 rows).
    shifted: HashMap<(u32, StateId), Shifted>,
    /// Exact distances found so far.
    exact: HashMap<StateId, u32>,
    /// Lower bounds found so far: more than this many tokens.
    more_than: HashMap<StateId, u32>,
    /// The greedy walk's length from a state ([`UNREACHABLE`]: it gets stuck), where walked.
    greedy: HashMap<StateId, u32>,
    /// The level where a search from a state ran out of expansions.
    gave_up: HashMap<StateId, u32>,
}

impl TokenDistances {
    /// Do `budget` tokens or fewer surely reach acceptance from `state`? The greedy walk
    /// first (a way within the budget settles it, no search needed), then [`reach`](Self::reach).
    pub fn within(&self, vocab: &Vocab, dfa: &Dfa, state: StateId, budget: u32) -> bool {
        if state != StateId::DEAD && !dfa.is_accepting(state) {
            let mut inner = self.lock();
            if !inner.exact.contains_key(&state) && inner.greedy_walk(vocab, dfa, state, budget) <= budget {
                return true;
            }
        }
        self.reach(vocab, dfa, state, budget).within(budget)
    }

    /// What is kept, emptied first where it holds more than [`MAX_KEPT`] states.
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if inner.succ.len() > MAX_KEPT {
            *inner = Inner::default();
        }
        inner
    }

    /// The fewest tokens from `state` to acceptance, if `budget` or fewer (see [`Reach`]).
    pub fn reach(&self, vocab: &Vocab, dfa: &Dfa, state: StateId, budget: u32) -> Reach {
        if state == StateId::DEAD {
            return Reach::Exact(UNREACHABLE);
        }
        if dfa.is_accepting(state) {
            return Reach::Exact(0);
        }
        let mut inner = self.lock();
        if let Some(&d) = inner.exact.get(&state) {
            return Reach::Exact(d);
        }
        if inner.more_than.get(&state).is_some_and(|&k| k >= budget) {
            return Reach::MoreThan(budget);
        }
        // Past the level where the search gave up before, it gives up again: the walk.
        let r = match inner.gave_up.get(&state) {
            Some(&level) if budget > level => Reach::Unknown,
            _ => inner.search(vocab, dfa, state, budget),
        };
        match r {
            Reach::Exact(d) => {
                debug_assert!(inner.more_than.get(&state).is_none_or(|&k| d > k));
                inner.exact.insert(state, d);
                Reach::Exact(d)
            }
            Reach::MoreThan(k) => {
                let e = inner.more_than.entry(state).or_insert(k);
                *e = (*e).max(k);
                r
            }
            // The search never answers `AtMost`: it gave up.
            Reach::AtMost(_) | Reach::Unknown => match inner.greedy_walk(vocab, dfa, state, budget) {
                d if d <= budget => Reach::AtMost(d),
                _ => Reach::Unknown,
            },
        }
    }
}

impl Inner {
    /// Breadth-first over token edges from `from`, level by level, up to `budget` levels. The
    /// states met and the order they are expanded in depend on the DFA and the vocabulary
    /// alone (successor lists are sorted), so where it gives up does too.
    fn search(&mut self, vocab: &Vocab, dfa: &Dfa, from: StateId, budget: u32) -> Reach {
        let mut seen: HashSet<StateId, FxBuild> = HashSet::default();
        seen.insert(from);
        let mut frontier = vec![from];
        let mut expanded = 0usize;
        let mut level = 0u32;
        while !frontier.is_empty() {
            if level >= budget {
                return Reach::MoreThan(budget);
            }
            let mut next = Vec::new();
            for s in std::mem::take(&mut frontier) {
                if expanded >= MAX_EXPANSIONS {
                    // Levels up to this one were searched in full: none of `level` tokens or
                    // fewer accepts. For any budget past `level` the search stops here again.
                    self.gave_up.insert(from, level);
                    let e = self.more_than.entry(from).or_insert(level);
                    *e = (*e).max(level);
                    return Reach::Unknown;
                }
                expanded += 1;
                for &t in self.successors(vocab, dfa, s).iter() {
                    if dfa.is_accepting(t) {
                        return Reach::Exact(level + 1);
                    }
                    if seen.insert(t) {
                        next.push(t);
                    }
                }
            }
            frontier = next;
            level += 1;
        }
        // Every reachable state seen and none accepts.
        Reach::Exact(UNREACHABLE)
    }

    /// Tokens of the greedy walk from `from` to acceptance (see the module docs), if `budget`
    /// or fewer; else more than `budget` or [`UNREACHABLE`]. A walk is a function of its
    /// start: its length is kept for every state it passes through (the rest of the walk is
    /// the walk from there), but not where it stops unfinished at `budget` steps.
    fn greedy_walk(&mut self, vocab: &Vocab, dfa: &Dfa, from: StateId, budget: u32) -> u32 {
        let mut path = Vec::new();
        let mut s = from;
        let end = loop {
            if dfa.is_accepting(s) {
                break 0;
            }
            if let Some(&d) = self.greedy.get(&s) {
                break d;
            }
            if path.len() as u32 >= budget {
                // Unfinished within the budget: not kept (a larger budget walks on).
                return budget.saturating_add(1);
            }
            path.push(s);
            // The successor fewest bytes from acceptance (ties: the smallest state).
            let here = dfa.dist(s);
            match self.successors(vocab, dfa, s).iter().copied().min_by_key(|&t| (dfa.dist(t), t)) {
                Some(t) if dfa.dist(t) < here => s = t,
                _ => break UNREACHABLE,
            }
        };
        for (k, s) in path.iter().rev().enumerate() {
            let d = if end == UNREACHABLE { UNREACHABLE } else { end + k as u32 + 1 };
            self.greedy.insert(*s, d);
        }
        self.greedy.get(&from).copied().unwrap_or(end)
    }

    /// The distinct live states one token leads to from `s` (one trie walk, kept).
    fn successors(&mut self, vocab: &Vocab, dfa: &Dfa, s: StateId) -> Arc<[StateId]> {
        if let Some(v) = self.succ.get(&s) {
            return v.clone();
        }
        // A counted state whose tokens stay in its run: the run's list, shifted to its row.
        let base = dfa.counted_base();
        let run = base.and_then(|c| c.run_within(s, vocab.trie().max_token_len().try_into().unwrap_or(u32::MAX)));
        if let (Some(c), Some((first, row))) = (base, run) {
            let key = (first, c.place(s));
            let shifted: Shifted = match self.shifted.get(&key) {
                Some(v) => v.clone(),
                None => {
                    let v: Shifted = Self::walk(vocab, dfa, s).iter().map(|&t| (c.row(t) - row, c.place(t))).collect();
                    self.shifted.insert(key, v.clone());
                    v
                }
            };
            // Sorted by (rows on, place) is sorted by state number (row-major).
            let v: Arc<[StateId]> = shifted.iter().map(|&(on, p)| c.state_at(row + on, p)).collect();
            self.succ.insert(s, v.clone());
            return v;
        }
        let v: Arc<[StateId]> = Self::walk(vocab, dfa, s).into();
        self.succ.insert(s, v.clone());
        v
    }

    /// The distinct live states one token leads to from `s`, sorted: one trie walk.
    fn walk(vocab: &Vocab, dfa: &Dfa, s: StateId) -> Vec<StateId> {
        // Tokens next to each other in the trie mostly end in the same state: skip repeats of
        // the last one; the rest deduplicated by a mark per state where there are many (most
        // of the vocabulary from inside a count near its bound: a few hundred distinct rows,
        // tens of thousands of tokens) and the DFA is not too large to mark, then sorted.
        let mut v: Vec<StateId> = Vec::new();
        let mut last = StateId::DEAD;
        vocab.trie().walk(
            s,
            |s, b| {
                let t = dfa.next(s, b);
                (t != StateId::DEAD).then_some(t)
            },
            |t, _| {
                if t != last {
                    last = t;
                    v.push(t);
                }
            },
        );
        if v.len() > MARK_FROM && dfa.state_count() <= MARK_STATES {
            let mut seen = vec![false; dfa.state_count()];
            v.retain(|t| !std::mem::replace(&mut seen[t.index()], true));
        }
        v.sort_unstable();
        v.dedup();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::regular::DfaLimits;

    fn dfa(re: &str) -> Dfa {
        Dfa::from_hir(&crate::regular::regex::parse(re).unwrap(), DfaLimits::default()).unwrap()
    }

    /// Single bytes and runs of `a` up to eight: the fewest tokens for `a` × n are ⌈n/8⌉.
    fn vocab() -> Vocab {
        let mut toks: Vec<Vec<u8>> = (b'a'..=b'z').map(|b| vec![b]).collect();
        toks.extend((2..=8).map(|n| vec![b'a'; n]));
        Vocab::from_byte_tokens(toks, &[])
    }

    /// Past the search's expansions (a long literal: every state is met before the end) the
    /// greedy walk answers; the answers do not depend on the order questions come in.
    #[test]
    fn the_walk_answers_where_the_search_gives_up() {
        let (v, d) = (vocab(), dfa(&format!("b{}c", "a".repeat(3 * MAX_EXPANSIONS))));
        let s = d.next(d.start(), b'b');
        let n = 3 * MAX_EXPANSIONS as u32;
        let fewest = n.div_ceil(8) + 1;
        let asks = [(s, fewest), (s, fewest - 1), (s, 5), (s, n + 1)];
        let fresh: Vec<Reach> = asks.iter().map(|&(s, b)| TokenDistances::default().reach(&v, &d, s, b)).collect();
        let warm = TokenDistances::default();
        let mut again: Vec<Reach> = asks.iter().rev().map(|&(s, b)| warm.reach(&v, &d, s, b)).collect();
        again.reverse();
        assert_eq!(fresh, again);
        // Here the longest match at each step is the fewest tokens.
        assert_eq!(fresh[0], Reach::AtMost(fewest));
        assert!(!fresh[1].within(fewest - 1));
        assert_eq!(fresh[2], Reach::MoreThan(5));
        assert!(TokenDistances::default().within(&v, &d, s, fewest));
        assert!(!TokenDistances::default().within(&v, &d, s, fewest - 1));
        // Near the end the search settles it exactly.
        let near = d.run(s, &vec![b'a'; n as usize - 20]);
        assert_eq!(TokenDistances::default().reach(&v, &d, near, 10), Reach::Exact(4));
    }

    /// A count on the fly: the successors a run's shared list gives, shifted to a state's row,
    /// are those its own walk finds, for every reachable state, near the bounds as far from
    /// them, asked in either order.
    #[test]
    fn shifted_successors_are_the_walks() {
        let unit = crate::regular::regex::parse("[a-c]|xy").unwrap();
        let lexeme = crate::regular::Lexeme::counted(b"\"", unit, 3, Some(5000), b"\"");
        let d = Dfa::shared(&lexeme, DfaLimits::default()).unwrap();
        assert!(d.is_counter(), "a count on the fly ({} states)", d.state_count());
        let toks: [&[u8]; 12] =
            [b"a", b"b", b"x", b"y", b"\"", b"ab", b"xy", b"axy", b"yx", b"abcabc", b"c\"", b"xyxyx"];
        let v = Vocab::from_byte_tokens(toks.iter().map(|t| t.to_vec()).collect(), &[]);
        // Every state reachable byte by byte.
        let mut states = vec![d.start()];
        let mut seen: HashSet<StateId> = states.iter().copied().collect();
        let mut i = 0;
        while i < states.len() {
            for b in [b'a', b'b', b'c', b'x', b'y', b'"'] {
                let t = d.next(states[i], b);
                if t != StateId::DEAD && seen.insert(t) {
                    states.push(t);
                }
            }
            i += 1;
        }
        let depth = v.trie().max_token_len() as u32;
        let shifted = states.iter().filter(|&&s| d.counted_base().unwrap().run_within(s, depth).is_some()).count();
        assert!(shifted > 300, "most rows read alike: {shifted} of {}", states.len());
        for order in [states.clone(), states.iter().rev().copied().collect()] {
            let mut inner = Inner::default();
            for &s in &order {
                assert_eq!(&*inner.successors(&v, &d, s), Inner::walk(&v, &d, s).as_slice(), "state {s:?}");
            }
            assert!(inner.shifted.len() < 20, "a list per run and place: {}", inner.shifted.len());
        }
    }
}
