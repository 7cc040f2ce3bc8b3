//! String content, the language the body slices are cut from, and the means the slice
//! searches share: the content DFA ([`content_dfa`]), one representative byte per pair of
//! byte classes ([`class_reps`], [`content_reps`]), and the set of (lexeme state, content
//! state) pairs a search has met ([`Visited`]), told apart by state or, for a count computed on
//! the fly, by place ([`PairKeys`]).
//!
//! Every search in [`wholesale`](super::wholesale) and [`hazards`](super::hazards) runs over
//! such pairs: a lexeme DFA and the content DFA side by side, over the bytes that are string
//! content where the content DFA is, so that states inside a multi-byte character count too.

use std::cell::RefCell;
use std::collections::HashSet;
use std::rc::Rc;
use std::sync::OnceLock;

use crate::regular::{CountedBase, Dfa, FxBuild, StateId};

/// The longest character in UTF-8.
pub(super) const MAX_CHAR_BYTES: usize = 4;

/// The DFA of string content (see [`slices`](crate::automaton::slices)): any run of characters
/// other than controls, `"` and `\`.
pub(super) fn content_dfa() -> &'static Dfa {
    static CONTENT: OnceLock<Dfa> = OnceLock::new();
    CONTENT.get_or_init(|| {
        let hir = crate::regular::regex::parse(r#"[^\x00-\x1f"\\]*"#).expect("valid regex");
        Dfa::from_hir(&hir, Default::default()).expect("small DFA")
    })
}

/// Each byte's representative: the first byte of its pair of (`dfa`'s class, content class).
/// Bytes of one pair step every (DFA state, content state) pair alike.
pub(super) fn class_reps(dfa: &Dfa) -> [u8; 256] {
    // A pair of classes whose first byte is not met yet.
    const NO_BYTE_YET: u16 = u16::MAX;
    let q = content_dfa();
    let width = |d: &Dfa| (0..=255u8).map(|b| d.class(b) as usize).max().unwrap_or(0) + 1;
    let nq = width(q);
    let mut first = vec![NO_BYTE_YET; width(dfa) * nq];
    let mut rep = [0u8; 256];
    for b in 0..=255u8 {
        let slot = &mut first[dfa.class(b) as usize * nq + q.class(b) as usize];
        if *slot == NO_BYTE_YET {
            *slot = b as u16;
        }
        rep[b as usize] = *slot as u8;
    }
    rep
}

/// [`content_reps`]' answer.
pub(super) type Reps = Rc<[Vec<(u8, StateId)>]>;

/// Per content state (by [`StateId::index`]), the representative bytes ([`class_reps`]) that
/// are string content there, with the content state after each. The last DFA's are kept per
/// thread: the searches of one entry, and of consecutive entries, are mostly of one DFA.
pub(super) fn content_reps(dfa: &Dfa) -> Reps {
    thread_local! {
        static LAST: RefCell<Option<(u64, Reps)>> = const { RefCell::new(None) };
    }
    LAST.with_borrow_mut(|last| match last {
        Some((id, reps)) if *id == dfa.id() => reps.clone(),
        _ => {
            let reps: Reps = content_reps_of(dfa).into();
            *last = Some((dfa.id(), reps.clone()));
            reps
        }
    })
}

fn content_reps_of(dfa: &Dfa) -> Vec<Vec<(u8, StateId)>> {
    let q = content_dfa();
    let rep = class_reps(dfa);
    let reps: Vec<u8> = (0..=255u8).filter(|&b| rep[b as usize] == b).collect();
    (0..q.state_count() as u32)
        .map(StateId)
        .map(|c| reps.iter().filter_map(|&b| Some((b, q.next(c, b))).filter(|&(_, c2)| c2 != StateId::DEAD)).collect())
        .collect()
}

/// The (DFA state, content state) pairs a search has met: a bitset over all pairs when that is
/// at most [`DENSE_VISITED_BITS`] bits (a hash set's inserts were most of a search), else a
/// hash set. The bitset is paged, each page of [`PAGE_BITS`] zeroed when first marked: a search
/// meets few of a large DFA's pairs, and zeroing megabytes per search was most of the first
/// mask inside a long counted string.
pub(super) enum Visited {
    Dense { pages: Vec<Option<Box<[u64; PAGE_WORDS]>>>, nq: usize },
    Sparse(HashSet<(StateId, StateId), FxBuild>),
}

/// Largest pair space [`Visited`] keeps as a bitset (2 MiB when every page is marked).
const DENSE_VISITED_BITS: usize = 1 << 24;

/// Words per page of a [`Visited`] bitset, and its bits.
const PAGE_WORDS: usize = 64;
const PAGE_BITS: usize = PAGE_WORDS * 64;

impl Visited {
    /// The empty set over `nd` DFA states and `nq` content states.
    pub(super) fn new(nd: usize, nq: usize) -> Visited {
        match nd.checked_mul(nq).filter(|&n| n <= DENSE_VISITED_BITS) {
            Some(n) => Visited::Dense { pages: vec![None; n.div_ceil(PAGE_BITS)], nq },
            None => Visited::Sparse(HashSet::default()),
        }
    }

    /// Is `(d, c)` marked?
    pub(super) fn contains(&self, d: StateId, c: StateId) -> bool {
        match self {
            Visited::Dense { pages, nq } => {
                let i = d.index() * *nq + c.index();
                pages[i / PAGE_BITS].as_ref().is_some_and(|p| p[i % PAGE_BITS / 64] >> (i % 64) & 1 == 1)
            }
            Visited::Sparse(set) => set.contains(&(d, c)),
        }
    }

    /// Marks `(d, c)`; `true` if it was new.
    pub(super) fn insert(&mut self, d: StateId, c: StateId) -> bool {
        match self {
            Visited::Dense { pages, nq } => {
                let i = d.index() * *nq + c.index();
                let page = pages[i / PAGE_BITS].get_or_insert_with(|| Box::new([0; PAGE_WORDS]));
                let word = &mut page[i % PAGE_BITS / 64];
                let new = *word >> (i % 64) & 1 == 0;
                *word |= 1 << (i % 64);
                new
            }
            Visited::Sparse(set) => set.insert((d, c)),
        }
    }
}

/// What a search tells its pairs apart by: the DFA state, or for a count computed on the fly
/// whose rows within the search's reach read alike, the place (every byte reaches a new row, so
/// by state nothing is met twice and the search runs to its work bound; by place it ends as
/// over a table). Exact: the first visit of a place is at the least depth, and a later one at
/// another row reads the rest of the search alike (the same deaths, acceptances and ends).
pub(super) struct PairKeys<'a> {
    base: Option<CountedBase<'a>>,
    /// The number of keys.
    pub(super) count: usize,
}

impl<'a> PairKeys<'a> {
    /// The keys of a search from `state` over strings of at most `max` bytes.
    pub(super) fn new(dfa: &'a Dfa, state: StateId, max: usize) -> PairKeys<'a> {
        let depth = u32::try_from(max).unwrap_or(u32::MAX);
        match dfa.counted_base().filter(|base| base.places_read_alike(state, depth)) {
            Some(base) => PairKeys { base: Some(base), count: base.table().state_count() },
            None => PairKeys::by_state(dfa),
        }
    }

    /// By state (what [`new`](Self::new) falls back to).
    pub(super) fn by_state(dfa: &Dfa) -> PairKeys<'a> {
        PairKeys { base: None, count: dfa.state_count() }
    }

    /// Are pairs told apart by place?
    #[cfg(test)]
    pub(super) fn by_place(&self) -> bool {
        self.base.is_some()
    }

    /// The key of a pair whose DFA state is `state`.
    #[inline]
    pub(super) fn of(&self, state: StateId) -> StateId {
        self.base.map_or(state, |base| base.place(state))
    }
}
