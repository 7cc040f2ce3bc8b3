//! [`StateId`]: a state of a [`Dfa`](super::Dfa), and [`UNREACHABLE`], the distance of a state
//! that cannot reach acceptance.
//!
//! A state id is the index of the state's row in its DFA's tables, numbered densely from the
//! dead state 0 (breadth-first from the start for a table; by arithmetic for a counter). It
//! means nothing without its DFA. `#[repr(transparent)]`: a table of ids is a table of `u32`s,
//! and the hot loops (the trie walk's `next`) compile as over bare words.

/// A state of a [`Dfa`](super::Dfa): an index into its per-state tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct StateId(pub u32);

impl StateId {
    /// The dead state is always 0 and maps every byte to itself: nothing read from it can be
    /// completed, so "not dead" means "this prefix can still be completed". It is also the
    /// start of an empty language.
    pub const DEAD: StateId = StateId(0);

    /// The state's row in its DFA's tables.
    #[inline(always)]
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl std::fmt::Display for StateId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The distance to acceptance of a state that cannot reach it (the dead state, a counter's
/// states that no transition reaches, or a state whose every way on needs a byte that is not
/// usable): the largest `u32`, so that the fewest-bytes minima and saturating sums over
/// distances need no special case.
pub const UNREACHABLE: u32 = u32::MAX;
