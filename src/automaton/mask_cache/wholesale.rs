//! Which body slices a lexer key admits without a walk ([`Wholesale`]).
//!
//! A body slice holds string content (and prefixes of it) up to `hi` bytes. The key admits the
//! whole slice when every such string keeps some scan alive and ends no lexeme: per scan, the
//! fewest bytes of string content to acceptance and to death ([`Reach`], from one search per
//! state, [`content_reach`], or a table for all states of a DFA at once,
//! [`content_reach_table`]) must both exceed `hi`, or, for a key of several scans, the fewest
//! bytes that kill them all at once ([`content_dead_all`], or a lower bound where its work runs
//! out). Where a slice is not admitted whole, [`hazards`](super::hazards) may find it admitted
//! but for the tokens holding a few bytes.
//!
//! Reaches and tables are kept in the cache per (DFA id, state) and per DFA id: they depend on
//! the DFA alone, and the same states recur across keys.

use std::collections::HashSet;
use std::sync::Arc;

use super::content::{content_dfa, content_reps, PairKeys, Visited, MAX_CHAR_BYTES};
use super::hazards::{avoid_set, Hazards};
use super::{Inner, MaskCache, ScanKey};
use crate::automaton::VocabEnv;
use crate::regular::{Dfa, FxBuild, StateId, UNREACHABLE};
use crate::vocab::trie::ByteSet;

/// What string content can do to a scan from one state ([`content_reach`]): the fewest bytes
/// of string content after which its DFA can be accepting, and after which it can be dead
/// ([`NEVER`]: not within the search).
pub(super) type Reach = (usize, usize);

/// A [`Reach`] (or [`content_dead_all`]) length that no string within the search reaches.
pub(super) const NEVER: usize = usize::MAX;

/// A DFA's [`content_reach_table`], shared by the cache and the entries being built.
type ReachTable = Arc<[Reach]>;

/// What a key admits of the body slices without a walk (see [`MaskCache::wholesale`]).
pub(super) struct Wholesale {
    /// Per scan, [`content_reach`]: the fewest bytes of string content to acceptance and to death.
    pub reach: Vec<Reach>,
    /// [`content_dead_all`] (0 when not searched).
    pub dead_all: usize,
    /// Per body slice not admitted whole: a scan that no string content without the bytes of
    /// the set kills (up to the slice's longest token), where no such string ends any scan's
    /// lexeme ([`avoid_set`]).
    pub avoid: Vec<Option<(usize, ByteSet)>>,
}

impl Wholesale {
    /// One scan survives every string of string content up to `hi` bytes.
    pub fn alone(&self, hi: usize) -> bool {
        self.reach.iter().any(|&(_, dead)| dead > hi)
    }

    /// Every string of string content up to `hi` bytes keeps some scan alive (one survives
    /// them all, or at least one survives each: `dead_all`) and none accepts within it.
    pub fn admits(&self, hi: usize) -> bool {
        self.reach.iter().all(|&(accept, _)| accept > hi) && (self.alone(hi) || self.dead_all > hi)
    }
}

impl MaskCache {
    /// What the scans of `dfas` in `states` (named by `key`) admit of the vocabulary's body
    /// slices without a walk: each scan's reach, whether they survive every string together,
    /// and per slice not admitted whole, the bytes whose tokens alone need the walk.
    pub(super) fn wholesale(&self, env: &VocabEnv, key: &[ScanKey], dfas: &[&Dfa], states: &[StateId]) -> Wholesale {
        // The shortest and the longest slice: every search below stops past the longest.
        let his = || env.slices().body.iter().map(|s| s.hi);
        let (hi_min, hi) = (his().min().unwrap_or(0), his().max().unwrap_or(0));
        let reach = self.reach(key, dfas, hi);
        // Several scans, none of which accepts within a slice: they may admit it together.
        let dead_all = if key.len() > 1 && reach.iter().all(|&(accept, dead)| accept > hi_min && dead <= hi) {
            // The search saves walks of the body slices, a step per node and scan: it may
            // cost about one such walk, no more (it gave up after a million steps, 100-400 ms
            // for the sixteen scans of a string under sixteen negated patterns, where a walk
            // costs a few).
            let nodes = env.slices().body.iter().map(|s| s.trie.node_count()).sum();
            content_dead_all(dfas, states, hi, nodes)
        } else {
            0
        };
        let mut wholesale = Wholesale { reach, dead_all, avoid: Vec::new() };
        // Some slice is not admitted whole: perhaps all of it but the tokens with a few bytes.
        // Bytes that kill a lexeme kill it within a character of where they come; a scan that
        // string content kills only later (a length bound) does not die of a few bytes, and
        // the search would cost more than it saves (a state of a 128-character string: 200 µs).
        let soon = wholesale.reach.iter().any(|&(_, dead)| dead <= MAX_CHAR_BYTES);
        if soon && !wholesale.admits(hi) {
            let hazards = self.hazards(key, dfas, hi);
            let hazards: Vec<&Hazards> = hazards.iter().map(|h| &**h).collect();
            wholesale.avoid = env
                .slices()
                .body
                .iter()
                .map(|slice| if wholesale.admits(slice.hi) { None } else { avoid_set(&hazards, slice.hi) })
                .collect();
        }
        wholesale
    }

    /// Per scan of `key` (the scans of `dfas`), its [`Reach`] within `hi` bytes.
    fn reach(&self, key: &[ScanKey], dfas: &[&Dfa], hi: usize) -> Vec<Reach> {
        let mut inner = self.lock();
        // One scan: a slice is admitted when both distances exceed its length, so only
        // the smaller one is needed, and the search may stop at the first event (a
        // product of a format and a length, with no table, explored every state within
        // the longest slice from each new state: milliseconds per mask).
        let single = key.len() == 1;
        key.iter().zip(dfas).map(|(&k, d)| inner.reach_of(k, d, hi, single)).collect()
    }
}

impl Inner {
    /// The [`Reach`] of the scan `k` of DFA `d` within `hi` bytes (with `single`, both
    /// distances are the smaller one): kept, from the DFA's table, or searched (and kept).
    fn reach_of(&mut self, k: ScanKey, d: &Dfa, hi: usize, single: bool) -> Reach {
        let cached = match single {
            true => self.reach_first.get(&k).map(|&m| (m, m)),
            false => self.reach.get(&k).copied(),
        };
        let search = |work: usize| {
            let r = content_reach(d, k.1, hi, single, work)?;
            Some(if single { (r.0.min(r.1), r.0.min(r.1)) } else { r })
        };
        // A DFA gets its table when a search from one of its states runs long: a short
        // search costs less than any table (a key pattern, a string that dies on a few
        // bytes), a state of a long bounded string that meets nothing within the
        // longest slice does not.
        let r = match (cached, self.reach_tables.get(&k.0)) {
            (Some(r), _) => r,
            (None, Some(Some(t))) => t[k.1.index()],
            (None, Some(None)) => search(usize::MAX).expect("no work bound"),
            (None, None) => match search(QUICK_REACH_WORK) {
                Some(r) => r,
                None => {
                    let t: Option<ReachTable> = content_reach_table(d).map(Arc::from);
                    self.reserve(t.as_ref().map_or(0, |t| t.len() * 16) + 32);
                    self.reach_tables.insert(k.0, t.clone());
                    match t {
                        Some(t) => t[k.1.index()],
                        None => search(usize::MAX).expect("no work bound"),
                    }
                }
            },
        };
        if cached.is_none() && !matches!(self.reach_tables.get(&k.0), Some(Some(_))) {
            self.reserve(32);
            if single {
                self.reach_first.insert(k, r.0);
            } else {
                self.reach.insert(k, r);
            }
        }
        r
    }
}

/// From DFA state `state`, over strings of string-content characters (and their prefixes) of
/// at most `max` bytes: the fewest bytes after which the DFA can be accepting, and after which
/// it can be dead ([`NEVER`]: not within `max`). A search from the one state; see
/// [`content_reach_table`] for all states at once.
///
/// With `first`, the search stops at the first depth where either is found (the other may
/// then be reported as not found): enough where only the smaller of the two matters. `None`
/// past `work` (pair, byte class) steps.
pub(super) fn content_reach(dfa: &Dfa, state: StateId, max: usize, first: bool, work: usize) -> Option<Reach> {
    content_reach_by(dfa, state, max, first, work, PairKeys::new(dfa, state, max))
}

/// [`content_reach`] with its pairs told apart by `keys`.
pub(super) fn content_reach_by(
    dfa: &Dfa,
    state: StateId,
    max: usize,
    first: bool,
    mut work: usize,
    keys: PairKeys<'_>,
) -> Option<Reach> {
    let q = content_dfa();
    let reps = content_reps(dfa);
    let (mut accept, mut dead) = (NEVER, NEVER);
    let mut visited = Visited::new(keys.count, q.state_count());
    let mut frontier = vec![(state, q.start())];
    let mut depth = 0;
    let done = |accept: usize, dead: usize| {
        if first {
            accept != NEVER || dead != NEVER
        } else {
            accept != NEVER && dead != NEVER
        }
    };
    while !frontier.is_empty() && depth < max && !done(accept, dead) {
        depth += 1;
        let mut next = Vec::new();
        for &(d, c) in &frontier {
            work = work.checked_sub(reps[c.index()].len())?;
            for &(b, c2) in &reps[c.index()] {
                let d2 = dfa.next(d, b);
                if d2 == StateId::DEAD {
                    dead = dead.min(depth);
                    continue;
                }
                if dfa.is_accepting(d2) {
                    accept = accept.min(depth);
                }
                if visited.insert(keys.of(d2), c2) {
                    next.push((d2, c2));
                }
            }
        }
        frontier = next;
    }
    Some((accept, dead))
}

/// Over strings of string-content characters of at most `max` bytes: the fewest bytes after
/// which the scans of `dfas` in `states` are all dead ([`NEVER`]: not within `max`), or a
/// lower bound on it. A key of several lexemes may admit every such string although each one
/// alone dies on some (the keys of an object: each name dies on most strings, the lexeme of
/// any other name on the names). Searched breadth-first over the tuples of the scans' states,
/// at most `work` (tuple, byte) steps: past them it answers the length it was searching, since
/// every shorter string was searched and left some scan alive (a lower bound: it admits the
/// slices of shorter tokens).
pub(super) fn content_dead_all(dfas: &[&Dfa], states: &[StateId], max: usize, work_max: usize) -> usize {
    let q = content_dfa();
    // One byte per distinct tuple of classes (every DFA's and the content DFA's).
    let mut seen: HashSet<Vec<u16>, FxBuild> = HashSet::default();
    let reps: Vec<u8> = (0..=255u8)
        .filter(|&b| seen.insert(dfas.iter().map(|d| d.class(b) as u16).chain([q.class(b) as u16]).collect()))
        .collect();
    // A tuple, packed in `u32`s so that it hashes and compares as one slice: the content
    // state, then (scan, state) for each live scan, in scan order. States are read back with
    // `StateId(..)` where they are stepped.
    let start: Box<[u32]> =
        [q.start().0].into_iter().chain(states.iter().enumerate().flat_map(|(k, &s)| [k as u32, s.0])).collect();
    let mut visited: HashSet<Box<[u32]>, FxBuild> = HashSet::default();
    visited.insert(start.clone());
    let mut frontier = vec![start];
    let (mut work, mut t2) = (0, Vec::new());
    for depth in 1..=max {
        let mut next = Vec::new();
        for t in &frontier {
            for &b in &reps {
                work += 1;
                if work > work_max {
                    return depth;
                }
                let c2 = q.next(StateId(t[0]), b);
                if c2 == StateId::DEAD {
                    continue;
                }
                t2.clear();
                t2.push(c2.0);
                for ks in t[1..].chunks_exact(2) {
                    let s2 = dfas[ks[0] as usize].next(StateId(ks[1]), b);
                    if s2 != StateId::DEAD {
                        t2.extend([ks[0], s2.0]);
                    }
                }
                if t2.len() == 1 {
                    return depth;
                }
                if !visited.contains(t2.as_slice()) {
                    let t2: Box<[u32]> = t2.as_slice().into();
                    visited.insert(t2.clone());
                    next.push(t2);
                }
            }
        }
        if next.is_empty() {
            break;
        }
        frontier = next;
    }
    NEVER
}

/// Most steps of the first search from a state of a DFA without a table: past it the DFA gets
/// one (see [`Inner::reach_of`]).
const QUICK_REACH_WORK: usize = 4096;

/// DFAs with fewer states than this get no reach table (see [`content_reach_table`]).
const SMALL_DFA_STATES: usize = 64;

/// Most (pair, byte class) steps [`content_reach_table`] takes: a table costs about 4 ns a
/// step, paid by the first mask that needs it (a `maxLength` of 1,000 would be ~1.1M steps:
/// searched per state instead).
const REACH_TABLE_WORK: usize = 1 << 19;

/// [`content_reach`] for every state of `dfa` (without the `max` cut-off), by two
/// breadth-first searches backwards over the pairs (DFA state, content state) reachable from a
/// live state and the content DFA's start (both DFAs decode UTF-8, so few of all pairs are);
/// `None` when those are too many (then states are searched one by one, as they are met).
fn content_reach_table(dfa: &Dfa) -> Option<Vec<Reach>> {
    // A counter's keys are few canonical states, and a small DFA's searches are short (the key
    // of an object with hundreds of names built a table per name, ~15 µs each): searched one
    // by one, as they are met.
    if dfa.is_counter() || dfa.state_count() < SMALL_DFA_STATES {
        return None;
    }
    reach_table(dfa)
}

/// [`content_reach_table`] for any DFA, `None` only past [`REACH_TABLE_WORK`].
pub(super) fn reach_table(dfa: &Dfa) -> Option<Vec<Reach>> {
    let q = content_dfa();
    let reps = content_reps(dfa);
    let most_reps = reps.iter().map(Vec::len).max().unwrap_or(0);
    let nd = dfa.state_count();
    let nq = q.state_count();
    // Pairs are numbered as they are found: the starts (d, start) are 0..nd (the dead state's
    // too, never stepped), the rest after them; `index` by d * nq + c, 0 for not yet found
    // (no pair but the dead state's start is numbered 0, and nothing steps to it).
    let mut index = vec![0u32; nd.checked_mul(nq)?];
    let mut pairs: Vec<(StateId, StateId)> = (0..nd as u32).map(|d| (StateId(d), q.start())).collect();
    for (i, &(d, c)) in pairs.iter().enumerate() {
        index[d.index() * nq + c.index()] = i as u32;
    }
    // Edges between live pairs (one per distinct successor: `seen[t] == i` marks `t` as
    // already linked from `i`; most bytes of a row lead to one pair), and the pairs one byte
    // from the goals.
    let (mut to_accept, mut to_dead) = (vec![false; nd], vec![false; nd]);
    let mut seen = vec![0u32; nd];
    let mut edges: Vec<(u32, u32)> = Vec::new();
    let mut i = 1;
    while i < pairs.len() {
        if pairs.len().saturating_mul(most_reps) > REACH_TABLE_WORK {
            return None;
        }
        let (d, c) = pairs[i];
        for &(b, c2) in &reps[c.index()] {
            let next = (dfa.next(d, b), c2);
            if next.0 == StateId::DEAD {
                to_dead[i] = true;
                continue;
            }
            to_accept[i] |= dfa.is_accepting(next.0);
            let slot = &mut index[next.0.index() * nq + next.1.index()];
            if *slot == 0 {
                *slot = pairs.len() as u32;
                pairs.push(next);
                to_accept.push(false);
                to_dead.push(false);
                seen.push(0);
            }
            if seen[*slot as usize] != i as u32 {
                seen[*slot as usize] = i as u32;
                edges.push((*slot, i as u32));
            }
        }
        i += 1;
    }
    let n = pairs.len();
    let far = |d: u32| if d == UNREACHABLE { NEVER } else { d as usize };
    let accept = crate::regular::dfa::backward_distances(n, &edges, (1..n).filter(|&i| to_accept[i]), 1);
    let dead = crate::regular::dfa::backward_distances(n, &edges, (1..n).filter(|&i| to_dead[i]), 1);
    Some((0..nd).map(|d| (far(accept[d]), far(dead[d]))).collect())
}
