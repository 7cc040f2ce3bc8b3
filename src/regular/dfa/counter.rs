//! [`Counter`]: a count of units over a base table, computed on the fly.
//!
//! The base is a table for the language without its count (`"` unit* `"`; or a pattern ∧
//! `"` unit* `"`), some of whose transitions complete a unit. The counter's language is the
//! base's strings whose number of completed units lies within `min..=max`. Its states are (row
//! `k`, place `s`): `k` units complete (saturating at `min` where there is no maximum), the base
//! in its live state `s`, numbered by arithmetic: `1 + k × places + (s − 1)`, the dead state 0.
//! A row holds every place, whether or not a string reaches it there; what no string reaches
//! is never a transition's target.
//!
//! Nothing per state is written down: `next` is the base's transition and the row's
//! arithmetic, with liveness read off the distances by row ([`Rows`], computed from the top
//! row down, most rows shared); `accept` is local; `open` is tabled per pair of adjacent rows'
//! layers. `format: email` ∧ `maxLength` 254 has 50,491 states this way; its table (the
//! product of the pattern with a counted string) had 16,000 reachable ones and took 10-20 ms
//! to build, where the counter takes about 1 ms, most of it the pattern's own table.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use super::rows::{runs, Divisor, Rows, Shape, Work};
use super::{next_id, By, Dfa, Distances, Reverse, StateId, UNREACHABLE};
use crate::error::{Error, LimitKind, Result};

pub(super) struct Counter {
    /// The language without its count: a table, dead ends pruned; its states `1..` are a
    /// row's places.
    base: Dfa,
    /// `completes[s * stride + class]`: that transition of the base completes a unit.
    completes: Vec<bool>,
    min: u32,
    max: Option<u32>,
    /// The top row: the maximum, or the minimum where there is none (the count saturates).
    cap: u32,
    /// Places per row: the base's states but the dead one; and division by it.
    places: u32,
    by_places: Divisor,
    /// One byte per class.
    pub(super) reps: Vec<u8>,
    /// Distances over every byte, by row: what is live.
    rows: Arc<Rows>,
    /// Per row, its table in `opens` (one per pair of its layer and the next row's).
    open_of: Vec<u32>,
    opens: Vec<Box<[bool]>>,
    /// Per row, the first and last row of the run of rows around it that read alike: the
    /// same layer (the same places live) and the same `open` table.
    read_runs: Vec<(u32, u32)>,
    /// The number of states, the dead one included.
    states: usize,
}

impl Counter {
    /// The counter over `base` (a table, dead ends pruned, not empty) whose transitions
    /// `completes` marks; a limit error past `states` states (rows times places) or `cells`
    /// distances held by its rows (layers times places), reported as past `limit` states.
    pub(super) fn new(
        base: Dfa,
        completes: Vec<bool>,
        (min, max): (u32, Option<u32>),
        (states, cells): (usize, usize),
        limit: usize,
    ) -> Result<Counter> {
        debug_assert!(base.counter.is_none() && base.start != StateId::DEAD);
        let cap = max.unwrap_or(min);
        let places = base.state_count() as u64 - 1;
        let count = 1 + (cap as u64 + 1) * places;
        let too_many = || Error::limit(LimitKind::DfaStates, "DFA states for a counted repetition", limit);
        if count > states as u64 || count >= u32::MAX as u64 / 2 {
            return Err(too_many());
        }
        let mut counter = Counter {
            reps: base.class_reps(),
            base,
            completes,
            min,
            max,
            cap,
            places: places as u32,
            by_places: Divisor::new(places as u32),
            rows: Arc::new(Rows::empty()),
            open_of: Vec::new(),
            opens: Vec::new(),
            read_runs: Vec::new(),
            states: count as usize,
        };
        let rows = counter.rows(&[true; 256], cells).ok_or_else(too_many)?;
        counter.rows = Arc::new(rows);
        counter.tabulate_open();
        Ok(counter)
    }

    /// Distances by row using only bytes with `usable[b]`; `None` past `cells` layers × places.
    fn rows(&self, usable: &[bool; 256], cells: usize) -> Option<Rows> {
        let base = &self.base;
        let n = base.state_count();
        let mut class_ok = vec![false; base.stride];
        (0..256).for_each(|b| class_ok[base.classes[b] as usize] |= usable[b]);
        let (mut within, mut completing) = (Vec::new(), Vec::new());
        let mut seen = vec![0u32; n];
        for s in 1..n {
            for c in (0..base.stride).filter(|&c| class_ok[c]) {
                let i = s * base.stride + c;
                let t = base.trans[i];
                if t == StateId::DEAD {
                    continue;
                }
                if self.completes[i] {
                    completing.push((s as u32, t.0));
                } else if seen[t.index()] != s as u32 {
                    seen[t.index()] = s as u32;
                    within.push((t.0, s as u32));
                }
            }
        }
        let all: Vec<(u32, u32)> = within.iter().copied().chain(completing.iter().map(|&(s, t)| (t, s))).collect();
        let shape = Shape {
            accept: &base.accept,
            min: self.min,
            max: self.max,
            cap: self.cap,
            within: &Reverse::new(n, &within),
            all: &Reverse::new(n, &all),
            completing: &completing,
        };
        Rows::compute(&shape, Work { cells })
    }

    /// The `open` tables: one per pair (a row's layer, the next row's), the next row being
    /// the row itself at the top without a maximum, none at the maximum; equal tables are one.
    /// Then the runs of rows that read alike (the same layer and `open` table).
    fn tabulate_open(&mut self) {
        let mut by_layers: HashMap<(u32, u32), u32> = HashMap::new();
        let mut by_value: HashMap<Box<[bool]>, u32> = HashMap::new();
        let base = &self.base;
        let rows = &self.rows;
        let n = base.state_count();
        for k in 0..=self.cap {
            let here = rows.layer(k);
            let next = match self.max {
                Some(m) if m == k => u32::MAX,
                _ => rows.layer((k + 1).min(self.cap)),
            };
            let id = *by_layers.entry((here, next)).or_insert_with(|| {
                let live = |layer: u32, t: StateId| layer != u32::MAX && rows.layer_live(layer, t);
                let table: Box<[bool]> = (0..n)
                    .map(|s| {
                        s > 0
                            && (0..base.stride).any(|c| {
                                let i = s * base.stride + c;
                                let t = base.trans[i];
                                t != StateId::DEAD && live(if self.completes[i] { next } else { here }, t)
                            })
                    })
                    .collect();
                let fresh = self.opens.len() as u32;
                *by_value.entry(table.clone()).or_insert_with(|| {
                    self.opens.push(table);
                    fresh
                })
            });
            self.open_of.push(id);
        }
        let reads: Vec<(u32, u32)> = (0..=self.cap).map(|k| (rows.layer(k), self.open_of[k as usize])).collect();
        self.read_runs = runs(&reads);
    }

    pub(super) fn states(&self) -> usize {
        self.states
    }

    /// (row, place) of a live state number.
    #[inline]
    fn split(&self, state: u32) -> (u32, StateId) {
        let (k, p) = self.by_places.div_rem(state - 1);
        (k, StateId(p + 1))
    }

    #[inline]
    fn number(&self, k: u32, s: StateId) -> u32 {
        1 + k * self.places + (s.0 - 1)
    }

    /// The (row, place) after byte `b`, if it is live.
    #[inline]
    fn step(&self, state: StateId, b: u8) -> Option<(u32, StateId)> {
        if state == StateId::DEAD {
            return None;
        }
        let (k, s) = self.split(state.0);
        let i = s.index() * self.base.stride + self.base.classes[b as usize] as usize;
        let t = self.base.trans[i];
        if t == StateId::DEAD {
            return None;
        }
        let k = if self.completes[i] {
            if self.max == Some(k) {
                return None;
            }
            (k + 1).min(self.cap)
        } else {
            k
        };
        self.rows.live(k, t).then_some((k, t))
    }

    /// The state after byte `b`.
    #[inline]
    pub(super) fn next(&self, state: StateId, b: u8) -> StateId {
        self.step(state, b).map_or(StateId::DEAD, |(k, t)| StateId(self.number(k, t)))
    }

    /// [`next`](Self::next), with whether the state reached accepts and can go on.
    #[inline]
    pub(super) fn advance(&self, state: StateId, b: u8) -> (StateId, bool, bool) {
        let Some((k, t)) = self.step(state, b) else { return (StateId::DEAD, false, false) };
        let accepting = k >= self.min && self.base.accept[t.index()];
        let open = self.opens[self.open_of[k as usize] as usize][t.index()];
        (StateId(self.number(k, t)), accepting, open)
    }

    pub(super) fn is_accepting(&self, state: StateId) -> bool {
        if state == StateId::DEAD {
            return false;
        }
        let (k, s) = self.split(state.0);
        k >= self.min && self.base.accept[s.index()]
    }

    pub(super) fn can_continue(&self, state: StateId) -> bool {
        if state == StateId::DEAD {
            return false;
        }
        let (k, s) = self.split(state.0);
        self.opens[self.open_of[k as usize] as usize][s.index()]
    }

    pub(super) fn dist(&self, state: StateId) -> u32 {
        if state == StateId::DEAD {
            return UNREACHABLE;
        }
        let (k, s) = self.split(state.0);
        self.rows.get(k, s)
    }

    /// The start: row 0 at the base's start, or dead if no string is accepted.
    pub(super) fn start(&self) -> StateId {
        match self.rows.live(0, self.base.start) {
            true => StateId(self.number(0, self.base.start)),
            false => StateId::DEAD,
        }
    }

    /// Fewest bytes to acceptance using only bytes with `usable[b]`, by row.
    pub(super) fn distances(&self, usable: &[bool; 256]) -> Distances {
        // Usable bytes are fewer, so distances stabilize later; bounded by the states, as the
        // table would be.
        let rows = match usable.iter().all(|&u| u) {
            true => Some(self.rows.clone()),
            false => self.rows(usable, self.states.max(self.rows.heap_bytes())).map(Arc::new),
        };
        match rows {
            Some(rows) => Distances(By::Rows { rows, places: self.by_places }),
            // Past the bound: every state, one by one (a table of the states' distances).
            None => Distances::table(self.distance_table(usable)),
        }
    }

    /// [`distances`](Self::distances) written per state, by a breadth-first search backwards
    /// over the whole state space (the bound of last resort).
    fn distance_table(&self, usable: &[bool; 256]) -> Vec<u32> {
        let usable_reps: Vec<u8> = self
            .reps
            .iter()
            .copied()
            .filter(|&r| (0..256).any(|x| usable[x] && self.base.classes[x] == self.base.classes[r as usize]))
            .collect();
        let mut edges = Vec::new();
        for s in 1..self.states as u32 {
            for &b in &usable_reps {
                let t = self.next(StateId(s), b);
                if t != StateId::DEAD {
                    edges.push((t.0, s));
                }
            }
        }
        let accepting = (1..self.states).filter(|&s| self.is_accepting(StateId(s as u32)));
        super::backward_distances(self.states, &edges, accepting, 0)
    }

    /// A state that reads every string of at most `horizon` bytes as `state` does (the same
    /// deaths, acceptances and ends after every prefix), the same one for every state of its
    /// place in rows far from the bounds, with distances (`dist`: this counter's, for some
    /// usable bytes) at least `state`'s after every such string. One byte completes at most one
    /// unit, so such strings from row `k` visit rows `k..=k + horizon` only: another row whose
    /// `horizon + 1` rows read alike (the same layer and `open` table), with the same layers
    /// in `dist` at offsets no smaller, reads them alike.
    pub(super) fn canonical(&self, state: StateId, horizon: u32, dist: &Distances) -> StateId {
        let Some(using) = dist.rows() else { return state };
        if state == StateId::DEAD {
            return state;
        }
        let (k, s) = self.split(state.0);
        let (a1, b1) = self.read_runs[k as usize];
        let (a2, b2) = using.run(k);
        let (a, b) = (a1.max(a2), b1.min(b2));
        if k.saturating_add(horizon) > b {
            return state;
        }
        // Accepting rows of a run share a layer at offset 0: the last row whose window fits;
        // rows below the minimum grow by a constant per row down: the run's first.
        let row = if k >= self.min { b - horizon } else { a };
        if using.offset(row) < using.offset(k) || self.rows.offset(row) < self.rows.offset(k) {
            return state;
        }
        StateId(self.number(row, s))
    }

    /// A state that reads every string of at most `depth` bytes as `state` does, and `depth`
    /// (at most `horizon`): `state` itself with `horizon`, but near the bound of its count,
    /// where [`canonical`](Self::canonical) keeps every state, one state per place for the
    /// rows of a run within `horizon` of its end, read as far as the run goes. From row `k` of
    /// a run `a..=b`, strings of at most `b − k` bytes visit rows `k..=b` only (one byte
    /// completes at most one unit), and from row `max(a, b − horizon)` they stay in the run
    /// too: every row there reads alike. Rows below the minimum keep their own state.
    pub(super) fn shared_reading(&self, state: StateId, horizon: u32) -> (StateId, u32) {
        if state == StateId::DEAD {
            return (state, horizon);
        }
        let (k, s) = self.split(state.0);
        let (a, b) = self.read_runs[k as usize];
        let row = a.max(self.min).max(b.saturating_sub(horizon));
        if k < self.min || row >= k {
            return (state, horizon);
        }
        (StateId(self.number(row, s)), horizon.min(b - k))
    }

    /// Heap bytes of the tables.
    pub(super) fn heap_bytes(&self) -> usize {
        self.base.heap_bytes()
            + self.completes.len()
            + self.rows.heap_bytes()
            + self.open_of.len() * 4
            + self.opens.iter().map(|t| t.len()).sum::<usize>()
            + self.read_runs.len() * 8
    }

    /// The automaton: no table of its own.
    pub(super) fn into_dfa(self) -> Dfa {
        Dfa {
            classes: self.base.classes,
            stride: self.base.stride,
            trans: Vec::new(),
            accept: Vec::new(),
            open: Vec::new(),
            dist: Vec::new(),
            start: self.start(),
            dist_memo: OnceLock::new(),
            class_bytes: OnceLock::new(),
            id: next_id(),
            counter: Some(Arc::new(self)),
        }
    }
}

/// The base of a count computed on the fly ([`Dfa::counted_base`]): a state is (row, place),
/// and a byte steps it by the base table's transition from the place, into the next row where
/// that transition completes a unit. Invariant: two bytes with the same transition and
/// completion from a place step every state of that place alike.
#[derive(Clone, Copy)]
pub struct CountedBase<'a>(pub(super) &'a Counter);

impl CountedBase<'_> {
    /// The base table (its states are the places; classes are the counter's).
    pub fn table(&self) -> &Dfa {
        &self.0.base
    }

    /// The place of `state` (the dead state for the dead one).
    pub fn place(&self, state: StateId) -> StateId {
        match state == StateId::DEAD {
            true => state,
            false => self.0.split(state.0).1,
        }
    }

    /// Do the states `state` reaches within `depth` bytes read alike, place by place, every
    /// string that keeps them within `depth` bytes of it? Yes where the rows `k..=k + depth`
    /// lie in one run at or above the minimum (one byte completes at most one unit, so no such
    /// string leaves them): a search of that depth may then take each place once, as over a
    /// table (far from the count's bounds).
    pub fn places_read_alike(&self, state: StateId, depth: u32) -> bool {
        let c = self.0;
        if state == StateId::DEAD {
            return true;
        }
        let (k, _) = c.split(state.0);
        k >= c.min && k.saturating_add(depth) <= c.read_runs[k as usize].1
    }

    /// Where every string of at most `depth` bytes steps `state` within one run of rows that
    /// read alike (its rows `k..=k + depth` lie in one run; one byte completes at most one
    /// unit): the run's first row and `state`'s row `k`. Two states of one place and one run
    /// that both qualify then step alike, their rows shifted by the same amounts (the rows of
    /// a run have the same live places and the same `open` table).
    pub fn run_within(&self, state: StateId, depth: u32) -> Option<(u32, u32)> {
        if state == StateId::DEAD {
            return None;
        }
        let (k, _) = self.0.split(state.0);
        let (a, b) = self.0.read_runs[k as usize];
        (k.saturating_add(depth) <= b).then_some((a, k))
    }

    /// [`run_within`](Self::run_within) where, besides, the rows `k..=k + depth` lie on one
    /// side of the minimum, so that acceptance too is the place's alone: every string of at most
    /// `depth` bytes steps `state` as it steps any state of the same place, run and side that
    /// qualifies, rows shifted alike, accepting and going on alike. (The run's first row, the
    /// row, at or above the minimum.)
    pub fn window(&self, state: StateId, depth: u32) -> Option<(u32, u32, bool)> {
        let (first, k) = self.run_within(state, depth)?;
        let min = self.0.min;
        let above = k >= min;
        (above || k.saturating_add(depth) < min).then_some((first, k, above))
    }

    /// The (live) state at `row` and `place`.
    pub fn state_at(&self, row: u32, place: StateId) -> StateId {
        StateId(self.0.number(row, place))
    }

    /// The row of a live state.
    pub fn row(&self, state: StateId) -> u32 {
        self.0.split(state.0).0
    }

    /// From `place` on `b`: the next place and whether the step completes a unit.
    pub fn step(&self, place: StateId, b: u8) -> (StateId, bool) {
        let base = &self.0.base;
        let i = place.index() * base.stride + base.classes[b as usize] as usize;
        (base.trans[i], self.0.completes[i])
    }
}
