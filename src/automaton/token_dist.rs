//! Token distances: the fewest tokens of a vocabulary that take a lexeme's DFA from a state to
//! acceptance, every token read inside the lexeme ([`TokenDistances`]).
//!
//! A budget (`max_tokens`) is counted in tokens of the model's vocabulary, so the
//! never-truncated rule needs to know how many tokens finish an output. The cheap bound every
//! compile computes counts single-byte tokens (`Dfa::dist_using`): an upper bound, often several
//! times the real count (a JSON key is one or two tokens, not ten). Where that bound does not fit
//! the budget, the mask asks here for the exact count: a breadth-first search over the DFA's
//! states whose edges are tokens (from a state, each token of the trie that keeps the DFA alive
//! leads to the state at its end). A state's successors are found by one trie walk, kept; exact
//! distances are kept too, so a state is searched from once per vocabulary and DFA (lexeme DFAs
//! are shared across compiles, and this lives in the [`VocabEnv`](super::VocabEnv)).
//!
//! Bounded work: a search expands at most [`MAX_EXPANSIONS`] states, counted whether their
//! successors were kept or not; past that, or past the budget asked about, it answers
//! [`Reach::Unknown`] or [`Reach::MoreThan`] and the caller keeps the single-byte bound, which is
//! sound. Within the bound the answer is exact.
//!
//! Invariants: an answer is a function of the vocabulary, the DFA, the state and the budget
//! only, never of what earlier searches kept (they make a search faster, not different): so the
//! fast mask and the reference mask, asking in different orders, agree. `Exact(d)` is the true
//! minimum over token sequences that stay inside the lexeme and end in an accepting state;
//! `MoreThan(k)`, that none of `k` tokens or fewer does.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use crate::regular::{Dfa, FxBuild, StateId, UNREACHABLE};
use crate::vocab::Vocab;

/// Most states one search expands (a trie walk each, the first time) before it gives up.
pub const MAX_EXPANSIONS: usize = 1024;

/// Most states whose successors and distances one DFA keeps, before they are dropped.
const MAX_KEPT: usize = 1 << 16;

/// What a search knows about a state's token distance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Exactly this many tokens ([`UNREACHABLE`]: acceptance cannot be reached at all).
    Exact(u32),
    /// More than this many tokens.
    MoreThan(u32),
    /// The search stopped before it could tell.
    Unknown,
}

impl Reach {
    /// Do `budget` tokens or fewer surely reach acceptance?
    pub fn within(self, budget: u32) -> bool {
        matches!(self, Reach::Exact(d) if d <= budget)
    }

    /// The token count where the search settled it, else `bound` (a count known to suffice,
    /// such as the single-byte one): never more than `bound`.
    pub fn or_bound(self, bound: u32) -> u32 {
        match self {
            Reach::Exact(d) => d.min(bound),
            Reach::MoreThan(_) | Reach::Unknown => bound,
        }
    }
}

/// The token distances of one DFA for one vocabulary, filled in as they are asked for.
#[derive(Default)]
pub struct TokenDistances {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// The distinct live states one token leads to from a state.
    succ: HashMap<StateId, Arc<[StateId]>>,
    /// Exact distances found so far.
    exact: HashMap<StateId, u32>,
    /// Lower bounds found so far: more than this many tokens.
    more_than: HashMap<StateId, u32>,
}

impl TokenDistances {
    /// The fewest tokens from `state` to acceptance, if `budget` or fewer (see [`Reach`]).
    pub fn reach(&self, vocab: &Vocab, dfa: &Dfa, state: StateId, budget: u32) -> Reach {
        if state == StateId::DEAD {
            return Reach::Exact(UNREACHABLE);
        }
        if dfa.is_accepting(state) {
            return Reach::Exact(0);
        }
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&d) = inner.exact.get(&state) {
            return Reach::Exact(d);
        }
        if inner.more_than.get(&state).is_some_and(|&k| k >= budget) {
            return Reach::MoreThan(budget);
        }
        if inner.succ.len() > MAX_KEPT {
            *inner = Inner::default();
        }
        let r = inner.search(vocab, dfa, state, budget);
        if let Reach::Exact(d) = r {
            debug_assert!(inner.more_than.get(&state).is_none_or(|&k| d > k));
        }
        match r {
            Reach::Exact(d) => {
                inner.exact.insert(state, d);
            }
            Reach::MoreThan(k) => {
                let e = inner.more_than.entry(state).or_insert(k);
                *e = (*e).max(k);
            }
            Reach::Unknown => {}
        }
        r
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

    /// The distinct live states one token leads to from `s` (one trie walk, kept).
    fn successors(&mut self, vocab: &Vocab, dfa: &Dfa, s: StateId) -> Arc<[StateId]> {
        if let Some(v) = self.succ.get(&s) {
            return v.clone();
        }
        // Tokens next to each other in the trie mostly end in the same state: skip repeats of
        // the last one before hashing.
        let mut out: HashSet<StateId, FxBuild> = HashSet::default();
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
                    out.insert(t);
                }
            },
        );
        let mut v: Vec<StateId> = out.into_iter().collect();
        v.sort_unstable();
        let v: Arc<[StateId]> = v.into();
        self.succ.insert(s, v.clone());
        v
    }
}
