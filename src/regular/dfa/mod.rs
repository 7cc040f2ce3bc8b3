//! `Dfa`: a compact byte DFA for one regular language, with the facts the matcher needs per
//! state (accepting? how far to acceptance?).
//!
//! Built from a `regex-automata` dense DFA (anchored, `MatchKind::All` so no alternative is
//! pruned, byte classes), then copied into our own table:
//! - states are renumbered densely in breadth-first order from the start state;
//! - every state from which no accepting state is reachable is merged into the dead state, so
//!   "not dead" means "this prefix can still be completed" — exactly what a mask needs;
//! - `accept[s]` says the bytes read so far are a complete match (regex-automata reports
//!   matches one byte late, so we ask its end-of-input transition);
//! - byte classes that every state reads alike are one class ([`Dfa::alike_classes`]):
//!   regex-automata's classes are ranges of bytes, and a product multiplies the classes it
//!   is given.
//!
//! Other constructions build the same kind of table directly (finite sets of strings as minimal
//! acyclic automata, splices, products for intersections, complements and an alternation's
//! branches, counters for length bounds), numbering tuples by a dense slot where the tuple space is
//! small. One kind is not a table: a length bound whose table would have more than
//! `MAX_TABLED_COUNTED` (4,096) states, alone (`"` unit{0,5000} `"`: 80,000) or with other
//! constraints (a pattern or `format` ∧ `maxLength`: (count, pattern state) pairs, 50,491 for
//! an email of at most 254 characters), is computed on the fly by a `Counter`: a base table without the count (`"` unit* `"`,
//! or its product with the pattern) whose transitions may complete a unit; `next` by arithmetic
//! over the base's table, liveness and `dist` by row (`rows`: most rows share one layer),
//! `accept` local, `open` tabled per pair of rows. It behaves exactly as its table would, and
//! its rows far from both bounds read every short string alike ([`Dfa::canonical`]: the mask
//! cache shares their entries). A product tables a counter before it reads it.
//!
//! States are [`StateId`]s, indices into the per-state tables of a table (`trans` holds them, a
//! row of `stride` per state; `accept`, `open`, `dist` one entry per state), numbers of (row,
//! place) for a counter. Distances under some usable bytes ([`Dfa::dist_using`]) are
//! [`Distances`]: per state for a table, by row for a counter.
//!
//! Invariants: the dead state is always [`StateId::DEAD`] (0) and maps every class to itself;
//! `start != DEAD` unless the language is empty; `dist(s)` is the fewest bytes from `s` to an
//! accepting state ([`UNREACHABLE`] only for the dead state, and for a counter's states that
//! no transition reaches); `next` never leads to an unreachable state other than the dead one.
//!
//! Files: the table and its per-state facts here; `build` (regex → table), `finite` (string
//! sets, splices), `product` (intersections, complements), `restrict` (an intersection's parts
//! over the bytes it can use), `counted` (length bounds: tabled,
//! or a counter's base), `marked` (a repetition anywhere in a regex, "at most N words",
//! counted through a marker byte), `counter` and `rows` (a count computed on the fly), `explore` (the
//! breadth-first construction they share), `shared` (the process-wide cache), `state`
//! ([`StateId`], [`UNREACHABLE`]).

mod build;
mod counted;
mod counter;
mod explore;
mod finite;
mod marked;
mod product;
mod restrict;
mod rows;
mod shared;
mod state;
#[cfg(test)]
mod tests;

use std::sync::{Arc, OnceLock};

pub use shared::SHARED_DFA_BYTES;
pub use state::{StateId, UNREACHABLE};

pub use counter::CountedBase;
use counter::Counter;

/// Default limits for building one DFA. Exponential regexes hit these and return an error.
#[derive(Debug, Clone, Copy)]
pub struct DfaLimits {
    /// Bytes of heap for the Thompson NFA.
    pub nfa_bytes: usize,
    /// Bytes of heap for the dense DFA and for determinization.
    pub dfa_bytes: usize,
    /// States in the final table.
    pub states: usize,
}

impl Default for DfaLimits {
    fn default() -> Self {
        DfaLimits { nfa_bytes: 8 << 20, dfa_bytes: 8 << 20, states: 200_000 }
    }
}

/// A compact byte DFA for one regular language, with its per-state facts (see the module docs).
#[derive(Clone)]
pub struct Dfa {
    classes: [u8; 256],
    stride: usize,
    /// `trans[s * stride + class]`: the state after a byte of that class (empty for a counter).
    trans: Vec<StateId>,
    accept: Vec<bool>,
    /// `open[s]`: some byte leads from `s` to a live state.
    open: Vec<bool>,
    /// `dist[s]`: fewest bytes from `s` to acceptance ([`UNREACHABLE`]: none).
    dist: Vec<u32>,
    start: StateId,
    /// The last [`dist_using`](Dfa::dist_using) answer, with its `usable` bytes: a shared DFA
    /// is compiled again and again for the same vocabulary.
    dist_memo: OnceLock<([bool; 256], Distances)>,
    /// The bytes of each class, as four 64-bit words (see [`live_bytes`](Dfa::live_bytes)).
    class_bytes: OnceLock<Vec<[u64; 4]>>,
    /// Unique per built table (a clone keeps it: tables never change once built), so caches
    /// outside one compile can name a DFA (see [`id`](Dfa::id)).
    id: u64,
    /// A large counted repetition, computed on the fly: `trans` is empty and [`next`](Dfa::next)
    /// asks the counter ([`Dfa::counted`]).
    counter: Option<Arc<Counter>>,
}

/// The next [`Dfa::id`].
fn next_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Dfa {
    /// A name for this table, unique in the process (clones share it).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Heap bytes of the tables (for cache bounds).
    pub fn heap_bytes(&self) -> usize {
        let counter = self.counter.as_ref().map_or(0, |c| c.heap_bytes());
        self.trans.len() * 4 + self.accept.len() * 2 + self.dist.len() * 4 + counter
    }

    /// A table from its rows (`trans[s * stride + class]`, the dead state's row first) and
    /// per-state acceptance, with dead ends pruned ([`prune_dead_ends`](Self::prune_dead_ends)).
    fn from_rows(classes: [u8; 256], stride: usize, trans: Vec<StateId>, accept: Vec<bool>, start: StateId) -> Dfa {
        let mut dfa = Dfa {
            classes,
            stride,
            trans,
            accept,
            open: Vec::new(),
            dist: Vec::new(),
            start,
            dist_memo: OnceLock::new(),
            class_bytes: OnceLock::new(),
            id: next_id(),
            counter: None,
        };
        dfa.prune_dead_ends();
        dfa
    }

    /// Merges states that cannot reach acceptance into the dead state and fills `dist`.
    fn prune_dead_ends(&mut self) {
        let n = self.accept.len();
        let dist = self.distances(&vec![true; self.stride]);
        // (The dead state's distance is unreachable: a pruned row is open where any of its
        // transitions is left.)
        let mut open = vec![false; n];
        for (s, row) in self.trans.chunks_exact_mut(self.stride).enumerate().skip(1) {
            for t in row {
                if dist[t.index()] == UNREACHABLE {
                    *t = StateId::DEAD;
                } else {
                    open[s] = true;
                }
            }
        }
        if dist[self.start.index()] == UNREACHABLE {
            self.start = StateId::DEAD;
        }
        self.open = open;
        self.dist = dist;
    }

    pub fn start(&self) -> StateId {
        self.start
    }

    #[inline(always)]
    pub fn next(&self, state: StateId, byte: u8) -> StateId {
        debug_assert!(state.index() < self.state_count());
        if let Some(c) = &self.counter {
            return c.next(state, byte);
        }
        self.trans[state.index() * self.stride + self.classes[byte as usize] as usize]
    }

    /// [`next`](Dfa::next), with whether the state reached [accepts](Dfa::is_accepting) and
    /// [can go on](Dfa::can_continue) (both false for the dead state): what a walk over the
    /// vocabulary asks at every byte, in one step.
    #[inline(always)]
    pub fn advance(&self, state: StateId, byte: u8) -> (StateId, bool, bool) {
        if let Some(c) = &self.counter {
            return c.advance(state, byte);
        }
        let t = self.trans[state.index() * self.stride + self.classes[byte as usize] as usize];
        (t, self.accept[t.index()], self.open[t.index()])
    }

    /// The bytes on which `state` goes on to a live state, as four 64-bit words (byte `b` is
    /// bit `b % 64` of word `b / 64`): one step per byte class.
    pub fn live_bytes(&self, state: StateId) -> [u64; 4] {
        let mut out = [0u64; 4];
        if self.counter.is_some() {
            for b in 0..=255u8 {
                if self.next(state, b) != StateId::DEAD {
                    out[b as usize / 64] |= 1 << (b % 64);
                }
            }
            return out;
        }
        let members = self.class_bytes.get_or_init(|| {
            let mut m = vec![[0u64; 4]; self.stride];
            for b in 0..=255u8 {
                m[self.classes[b as usize] as usize][b as usize / 64] |= 1 << (b % 64);
            }
            m
        });
        let row = &self.trans[state.index() * self.stride..][..self.stride];
        for (c, &t) in row.iter().enumerate() {
            if t != StateId::DEAD {
                for (o, m) in out.iter_mut().zip(&members[c]) {
                    *o |= m;
                }
            }
        }
        out
    }

    /// Per byte, the first class (of this table's) whose column equals its class's: every
    /// state goes to the same state on both.
    pub(super) fn alike_classes(&self) -> [u8; 256] {
        let stride = self.stride;
        // A hash of each column, in one pass over the rows; equal hashes are checked.
        let mut hashes = vec![0u64; stride];
        for row in self.trans.chunks_exact(stride) {
            for (h, t) in hashes.iter_mut().zip(row) {
                *h = (h.rotate_left(5) ^ u64::from(t.0)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
            }
        }
        let column = |c: usize| self.trans.iter().skip(c).step_by(stride);
        let first: Vec<u8> = (0..stride)
            .map(|c| (0..c).find(|&e| hashes[e] == hashes[c] && column(e).eq(column(c))).unwrap_or(c) as u8)
            .collect();
        self.classes.map(|c| first[c as usize])
    }

    /// This table with its classes [read alike](Dfa::alike_classes) merged: the same states
    /// and language over fewer, wider classes (a regex's classes are ranges, so letters it
    /// treats alike on either side of one it tells apart are two classes, `[a-b]` and `[d-z]`
    /// around `c`; every class is a column of every row, and a product multiplies them).
    fn with_alike_classes_merged(self) -> Dfa {
        if self.counter.is_some() {
            return self;
        }
        let alike = self.alike_classes();
        let (classes, reps) = number_bytes(self.stride, |b| alike[b as usize] as usize);
        if reps.len() == self.stride {
            return self;
        }
        let old: Vec<usize> = reps.iter().map(|&b| self.classes[b as usize] as usize).collect();
        let trans = self.trans.chunks_exact(self.stride).flat_map(|row| old.iter().map(|&c| row[c])).collect();
        Dfa { classes, stride: reps.len(), trans, dist_memo: OnceLock::new(), class_bytes: OnceLock::new(), ..self }
    }

    /// One byte per class, the least of each, in class order.
    pub(super) fn class_reps(&self) -> Vec<u8> {
        let mut reps = vec![None; self.stride];
        for b in 0..=255u8 {
            reps[self.classes[b as usize] as usize].get_or_insert(b);
        }
        reps.into_iter().map(|r| r.expect("every class has a byte")).collect()
    }

    /// The byte class of `byte` (bytes of one class have the same transitions everywhere).
    #[inline]
    pub fn class(&self, byte: u8) -> u8 {
        self.classes[byte as usize]
    }

    /// Runs `bytes` from `state`; [`StateId::DEAD`] as soon as the prefix cannot be completed.
    pub fn run(&self, mut state: StateId, bytes: &[u8]) -> StateId {
        for &b in bytes {
            state = self.next(state, b);
            if state == StateId::DEAD {
                break;
            }
        }
        state
    }

    #[inline]
    pub fn is_accepting(&self, state: StateId) -> bool {
        match &self.counter {
            Some(c) => c.is_accepting(state),
            None => self.accept[state.index()],
        }
    }

    /// A state that reads every string of at most `horizon` bytes as `state` does (the same
    /// deaths, acceptances and ends after every prefix), the same one for all such states of
    /// a count computed on the fly far from its bounds, else `state` itself. Its distances in
    /// `dist` (this DFA's [`dist_using`](Dfa::dist_using) for some bytes) are at least
    /// `state`'s, there and after every such string. The mask cache keys entries by it, so the
    /// tokens inside a long bounded string share one entry until its bound comes within reach.
    pub fn canonical(&self, state: StateId, horizon: u32, dist: &Distances) -> StateId {
        match &self.counter {
            Some(c) => c.canonical(state, horizon, dist),
            None => state,
        }
    }

    /// A state that reads every string of at most `depth` bytes as `state` does (the same
    /// deaths, acceptances and ends after every prefix), and `depth`, at most `horizon`: for a
    /// count computed on the fly near its bound, one state per place for the rows there, read
    /// as far as they read alike (fewer bytes the nearer the bound); else `state` and
    /// `horizon`. The mask cache's slice searches share their results by it where
    /// [`canonical`](Self::canonical) shares nothing.
    pub fn shared_reading(&self, state: StateId, horizon: u32) -> (StateId, u32) {
        match &self.counter {
            Some(c) => c.shared_reading(state, horizon),
            None => (state, horizon),
        }
    }

    /// For a count computed on the fly: what its states step by (see [`CountedBase`]).
    pub fn counted_base(&self) -> Option<CountedBase<'_>> {
        self.counter.as_deref().map(CountedBase)
    }

    /// Is this a counted repetition computed on the fly (see [`canonical`](Self::canonical))?
    pub fn is_counter(&self) -> bool {
        self.counter.is_some()
    }

    /// Can `state` read another byte (is some transition live)?
    #[inline]
    pub fn can_continue(&self, state: StateId) -> bool {
        match &self.counter {
            Some(c) => c.can_continue(state),
            None => self.open[state.index()],
        }
    }

    /// Fewest bytes from `state` to a complete match ([`UNREACHABLE`] for the dead state).
    pub fn dist(&self, state: StateId) -> u32 {
        match &self.counter {
            Some(c) => c.dist(state),
            None => self.dist[state.index()],
        }
    }

    /// The number of states, the dead state included.
    pub fn state_count(&self) -> usize {
        match &self.counter {
            Some(c) => c.states(),
            None => self.accept.len(),
        }
    }

    /// The one byte that may follow `state`, if exactly one byte value keeps it alive.
    pub fn only_byte(&self, state: StateId) -> Option<u8> {
        let step = |c: usize| match &self.counter {
            Some(k) => k.next(state, k.reps[c]),
            None => self.trans[state.index() * self.stride + c],
        };
        let mut live = (0..self.stride).map(step).enumerate().filter(|&(_, t)| t != StateId::DEAD);
        let (class, _) = live.next()?;
        if live.next().is_some() {
            return None;
        }
        let mut bytes = (0..=255u8).filter(|&b| self.classes[b as usize] as usize == class);
        let b = bytes.next()?;
        bytes.next().is_none().then_some(b)
    }

    /// Fewest bytes to acceptance when only bytes with `usable[b]` may be used (e.g. bytes that
    /// exist as single-byte tokens), by state ([`UNREACHABLE`]: none): an upper bound on the
    /// tokens needed to finish.
    pub fn dist_using(&self, usable: &[bool; 256]) -> Distances {
        if let Some((u, d)) = self.dist_memo.get() {
            if u == usable {
                return d.clone();
            }
        }
        let d = match &self.counter {
            Some(c) => c.distances(usable),
            None => Distances::table(self.dist_using_uncached(usable)),
        };
        let _ = self.dist_memo.set((*usable, d.clone()));
        d
    }

    /// [`dist_using`](Dfa::dist_using) of a table, per state.
    fn dist_using_uncached(&self, usable: &[bool; 256]) -> Vec<u32> {
        let mut usable_class = vec![false; self.stride];
        for b in 0..256 {
            usable_class[self.classes[b] as usize] |= usable[b];
        }
        // Every class usable: the distances over all bytes, already known.
        if usable_class.iter().all(|&u| u) && self.dist.len() == self.accept.len() {
            return self.dist.clone();
        }
        self.distances(&usable_class)
    }

    /// Fewest transitions over the byte classes with `classes[c]` from each state to an
    /// accepting one ([`UNREACHABLE`]: none), by a breadth-first search backwards from the
    /// accepting states.
    fn distances(&self, classes: &[bool]) -> Vec<u32> {
        debug_assert!(self.counter.is_none(), "a counter's distances are by row");
        let n = self.accept.len();
        let mut edges = Vec::with_capacity(2 * n);
        // One edge per distinct successor (most classes of a row share one): `seen[t] == s`
        // marks `t` as already linked from `s`.
        let mut seen = vec![0u32; n];
        let every_class = classes.iter().all(|&c| c);
        for (s, row) in self.trans.chunks_exact(self.stride).enumerate().skip(1) {
            for (c, &t) in row.iter().enumerate() {
                if t != StateId::DEAD && seen[t.index()] != s as u32 && (every_class || classes[c]) {
                    seen[t.index()] = s as u32;
                    edges.push((t.0, s as u32));
                }
            }
        }
        backward_distances(n, &edges, (1..n).filter(|&s| self.accept[s]), 0)
    }
}

/// Byte classes from a key per byte (`key(b) < keys`): bytes with one key share a class,
/// classes numbered in the order of their least byte; and that byte of each, in class order.
pub(super) fn number_bytes(keys: usize, key: impl Fn(u8) -> usize) -> ([u8; 256], Vec<u8>) {
    let mut ids = vec![None::<u8>; keys];
    let (mut classes, mut reps) = ([0u8; 256], Vec::new());
    for b in 0..=255u8 {
        classes[b as usize] = *ids[key(b)].get_or_insert_with(|| {
            reps.push(b);
            (reps.len() - 1) as u8
        });
    }
    (classes, reps)
}

/// Fewest bytes to acceptance per state ([`Dfa::dist_using`]): a table, or a counter's rows.
#[derive(Clone)]
pub struct Distances(By);

#[derive(Clone)]
enum By {
    /// Per state, and the largest finite one (kept: masks under a budget ask for it).
    Table { dist: Arc<[u32]>, far: u32 },
    /// A [`Counter`]'s, by row (its states numbered `1 + row × places + place − 1`).
    Rows { rows: Arc<rows::Rows>, places: rows::Divisor },
}

impl Distances {
    /// A table's distances, one per state.
    pub(super) fn table(dist: Vec<u32>) -> Distances {
        let far = dist.iter().copied().filter(|&d| d != UNREACHABLE).max().unwrap_or(0);
        Distances(By::Table { dist: dist.into(), far })
    }

    /// The distance from `state` ([`UNREACHABLE`]: none).
    #[inline]
    pub fn at(&self, state: StateId) -> u32 {
        match &self.0 {
            By::Table { dist, .. } => dist[state.index()],
            By::Rows { rows, places } => match state.0.checked_sub(1) {
                None => UNREACHABLE,
                Some(i) => {
                    let (k, p) = places.div_rem(i);
                    rows.get(k, StateId(p + 1))
                }
            },
        }
    }

    /// The largest finite distance of any state.
    pub fn farthest(&self) -> u32 {
        match &self.0 {
            By::Table { far, .. } => *far,
            By::Rows { rows, .. } => rows.farthest(),
        }
    }

    /// A bound on the finite distances of the states reachable from `state` (one that cannot
    /// reach acceptance is not bounded: its distance is [`UNREACHABLE`]): a counter's, that
    /// of any place of its row or a later one (no transition lowers the row: inside a string of
    /// `minLength` 50 that has 60 characters, a few bytes, where [`farthest`](Self::farthest)
    /// counts the 50 of the empty string); a table's, [`farthest`](Self::farthest).
    pub fn farthest_from(&self, state: StateId) -> u32 {
        match &self.0 {
            By::Table { far, .. } => *far,
            By::Rows { rows, places } => match state.0.checked_sub(1) {
                None => 0,
                Some(i) => rows.farthest_from(places.div_rem(i).0),
            },
        }
    }

    /// Are these the very same distances (one memoized answer)?
    #[cfg(test)]
    pub(crate) fn is(&self, other: &Distances) -> bool {
        match (&self.0, &other.0) {
            (By::Table { dist: a, .. }, By::Table { dist: b, .. }) => Arc::ptr_eq(a, b),
            (By::Rows { rows: a, .. }, By::Rows { rows: b, .. }) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// A counter's rows, if these are.
    fn rows(&self) -> Option<&rows::Rows> {
        match &self.0 {
            By::Rows { rows, .. } => Some(rows),
            By::Table { .. } => None,
        }
    }
}

/// A graph's edges backwards, kept flat (counted, then filled), not one `Vec` per node.
pub(crate) struct Reverse {
    start: Vec<u32>,
    from: Vec<u32>,
}

impl Reverse {
    /// The reverse of a graph of `n` nodes given by its `(node, predecessor)` edges.
    pub(crate) fn new(n: usize, edges: &[(u32, u32)]) -> Reverse {
        let mut start = vec![0u32; n + 1];
        for &(t, _) in edges {
            start[t as usize + 1] += 1;
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut from = vec![0u32; edges.len()];
        for &(t, p) in edges {
            from[fill[t as usize] as usize] = p;
            fill[t as usize] += 1;
        }
        Reverse { start, from }
    }

    /// The predecessors of `t`.
    #[inline]
    pub(crate) fn preds(&self, t: StateId) -> &[u32] {
        &self.from[self.start[t.index()] as usize..self.start[t.index() + 1] as usize]
    }
}

/// Breadth-first distances over a graph of `n` nodes given by its `(node, predecessor)` edges,
/// backwards from `sources` (at distance `first`): for each node, the fewest edges to a source
/// plus `first` ([`UNREACHABLE`]: none reaches one).
pub(crate) fn backward_distances(
    n: usize,
    edges: &[(u32, u32)],
    sources: impl Iterator<Item = usize>,
    first: u32,
) -> Vec<u32> {
    let sources: Vec<(u32, u32)> = sources.map(|s| (first, s as u32)).collect();
    rows::settle(&Reverse::new(n, edges), &sources, n).into_vec()
}
