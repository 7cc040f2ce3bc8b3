//! Counted repetitions `open · unit{min,max} · close` ([`Dfa::counted`]): tabled when small,
//! computed on the fly by a [`Counter`] above [`MAX_TABLED_COUNTED`] states.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use super::explore::explore;
use super::{next_id, Dfa, DfaLimits, StateId, UNREACHABLE};
use crate::error::{Error, LimitKind, Result};

impl Dfa {
    /// `open · unit{min,max} · close` with a counter: states are (phase, count, unit state),
    /// about `max × |unit|` of them, built directly instead of determinizing `max` copies.
    /// `None` (use the regex) unless the unit is prefix-free (an accepting state has no way
    /// on, so a unit ends exactly where it is complete), non-empty, and `close` cannot start
    /// a unit (so the end of the repetition is never in doubt).
    pub fn counted(
        open: &[u8],
        unit: &Dfa,
        min: u32,
        max: Option<u32>,
        close: &[u8],
        limits: DfaLimits,
    ) -> Result<Option<Dfa>> {
        Dfa::counted_with(open, unit, min, max, close, limits, MAX_TABLED_COUNTED)
    }

    /// [`counted`](Dfa::counted), tabled when it has at most `max_tabled` states and computed
    /// on the fly ([`Counter`]) above that: a string of at most 5,000 characters is 70,000
    /// states (about 14 per count: the states inside one escaped or multi-byte character),
    /// whose table took most of a compile to build and search.
    pub(super) fn counted_with(
        open: &[u8],
        unit: &Dfa,
        min: u32,
        max: Option<u32>,
        close: &[u8],
        limits: DfaLimits,
        max_tabled: usize,
    ) -> Result<Option<Dfa>> {
        if !countable(unit, min, max, close) {
            return Ok(None);
        }
        let (classes, reps) = counted_classes(unit, open, close);
        let c = Counting { open, unit, close, min, max, cap: max.unwrap_or(min), u0: unit.start };
        if c.slots() > max_tabled {
            let counter = Counter::new(open, unit, min, max, close, reps.clone(), limits.states)?;
            return Ok(Some(counter.into_dfa(classes)));
        }
        let start = if open.is_empty() { Pos::Unit(0, c.u0) } else { Pos::Open(0) };
        explore(
            classes,
            &reps,
            Some(start),
            limits.states,
            |&p, b| Ok(c.step(p, b)),
            |&p| c.accepting(p),
            || Error::limit(LimitKind::DfaStates, "DFA states for a counted repetition", limits.states),
            Some((c.slots(), &|p: &Pos| c.slot(*p))),
        )
        .map(Some)
    }
}

impl Dfa {
    /// Would [`counted`](Dfa::counted) count `open · unit{min,max} · close` (states linear in
    /// the count, or computed on the fly), rather than return `None`? (See [`countable`].)
    pub fn is_countable(unit: &Dfa, min: u32, max: Option<u32>, close: &[u8]) -> bool {
        countable(unit, min, max, close)
    }
}

/// Can `open · unit{min,max} · close` be counted: is the unit prefix-free (an accepting state
/// has no way on, so a unit ends exactly where it is complete) and non-empty, can `close` not
/// start a unit (so the end of the repetition is never in doubt), and is `min ≤ max`?
fn countable(unit: &Dfa, min: u32, max: Option<u32>, close: &[u8]) -> bool {
    let prefix_free = (1..unit.accept.len()).all(|s| !unit.accept[s] || !unit.open[s]);
    let u0 = unit.start;
    !(u0 == StateId::DEAD
        || unit.accept[u0.index()]
        || !prefix_free
        || close.first().is_some_and(|&b| unit.next(u0, b) != StateId::DEAD)
        || max.is_some_and(|m| m < min))
}

/// The byte classes of a counted repetition: the unit's, with every byte of `open`/`close`
/// set apart; one representative byte per class.
fn counted_classes(unit: &Dfa, open: &[u8], close: &[u8]) -> ([u8; 256], Vec<u8>) {
    let mut classes = [0u8; 256];
    let mut reps: Vec<u8> = Vec::new();
    let mut class_of: HashMap<(u8, i16), u8> = HashMap::new();
    for b in 0..=255u8 {
        let special = if open.contains(&b) || close.contains(&b) { b as i16 } else { -1 };
        classes[b as usize] = *class_of.entry((unit.classes[b as usize], special)).or_insert_with(|| {
            reps.push(b);
            (reps.len() - 1) as u8
        });
    }
    (classes, reps)
}

/// A position in `open · unit{min,max} · close`, the state of the tabled construction:
/// `Open(i)` for `i < |open|` bytes of `open` read; `Unit(k, s)` with `k` units complete and
/// the unit's DFA in `s`; `Close(i)` for `1 ≤ i ≤ |close|` bytes of `close` read.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Pos {
    Open(u32),
    Unit(u32, StateId),
    Close(u32),
}

/// The tabled construction of [`Dfa::counted_with`]: the step, acceptance and dense slot of
/// each [`Pos`].
struct Counting<'a> {
    open: &'a [u8],
    unit: &'a Dfa,
    close: &'a [u8],
    min: u32,
    max: Option<u32>,
    /// The most units counted: the maximum, or the minimum where there is none (the count
    /// saturates there).
    cap: u32,
    /// The unit's start: between units.
    u0: StateId,
}

impl Counting<'_> {
    /// Every position has a slot: open bytes, then (count, unit state), then close bytes.
    fn slots(&self) -> usize {
        self.open.len() + (self.cap as usize + 1) * self.unit.accept.len() + self.close.len() + 1
    }

    fn slot(&self, p: Pos) -> usize {
        let (n_open, n_unit) = (self.open.len(), self.unit.accept.len());
        match p {
            Pos::Open(i) => i as usize,
            Pos::Unit(k, s) => n_open + k as usize * n_unit + s.index(),
            Pos::Close(i) => n_open + (self.cap as usize + 1) * n_unit + i as usize,
        }
    }

    /// The position after byte `b` (`None`: dead).
    fn step(&self, p: Pos, b: u8) -> Option<Pos> {
        match p {
            Pos::Open(i) => (self.open.get(i as usize) == Some(&b)).then(|| {
                if i as usize + 1 == self.open.len() {
                    Pos::Unit(0, self.u0)
                } else {
                    Pos::Open(i + 1)
                }
            }),
            Pos::Unit(k, s) if s == self.u0 => {
                if self.close.first() == Some(&b) {
                    return (k >= self.min).then_some(Pos::Close(1));
                }
                if self.max.is_some_and(|m| k >= m) {
                    return None;
                }
                self.in_unit(k, s, b)
            }
            Pos::Unit(k, s) => self.in_unit(k, s, b),
            Pos::Close(i) => (self.close.get(i as usize) == Some(&b)).then_some(Pos::Close(i + 1)),
        }
    }

    /// Byte `b` inside a unit: a unit that completes moves to the next count.
    fn in_unit(&self, k: u32, s: StateId, b: u8) -> Option<Pos> {
        let t = self.unit.next(s, b);
        if t == StateId::DEAD {
            return None;
        }
        if self.unit.accept[t.index()] {
            Some(Pos::Unit((k + 1).min(self.cap), self.u0))
        } else {
            Some(Pos::Unit(k, t))
        }
    }

    fn accepting(&self, p: Pos) -> bool {
        match p {
            Pos::Close(i) => i as usize == self.close.len(),
            Pos::Unit(k, s) => self.close.is_empty() && s == self.u0 && k >= self.min,
            Pos::Open(_) => false,
        }
    }
}

/// Counted repetitions with more states than this are computed on the fly ([`Counter`]).
const MAX_TABLED_COUNTED: usize = 4_096;

/// [`Counter::place`] of a unit state that has no place in a row: an accepting state (a
/// completed unit moves to the next row's start) or the dead one.
const NOT_PLACED: u32 = u32::MAX;

/// `open · unit{min,max} · close` computed on the fly: the same automaton as the table
/// [`Dfa::counted`] builds, with states numbered by arithmetic instead of breadth-first.
///
/// States (numbers here, [`StateId`]s outside): 0 is dead; `1 + i` is "read `open[..i]`" (`i < |open|`); then one row of `width`
/// states per count `k` in `0..=cap`, the unit's non-accepting states in `row` order (the
/// unit's start first: "between units"); then "read `close[..i]`" for `i` in `1..=|close|`.
/// A unit's accepting state is never a state here: completing a unit moves to the next row's
/// start (`cap` saturates when there is no maximum). States inside a unit on the row of the
/// maximum cannot be reached (no unit starts there) and are dead.
///
/// Every other state is live (the unit is pruned, so a started unit can complete, and counts
/// up to the maximum can reach the minimum), which is what lets `dist` and `open` be written
/// down directly instead of searched.
pub(super) struct Counter {
    unit: Dfa,
    open: Vec<u8>,
    close: Vec<u8>,
    min: u32,
    max: Option<u32>,
    cap: u32,
    /// Unit state → its place in a row ([`NOT_PLACED`]: accepting or dead, never a state here).
    place: Vec<u32>,
    /// Place in a row → unit state.
    row: Vec<StateId>,
    /// One byte per class of the counted automaton.
    pub(super) reps: Vec<u8>,
    /// The numbers of the first state of row 0 and of the first "close" state; the number of
    /// states.
    rows_at: u32,
    close_at: u32,
    states: usize,
}

impl Counter {
    /// The counter, or a limit error past `limit` states (counted before any state numbers).
    fn new(
        open: &[u8],
        unit: &Dfa,
        min: u32,
        max: Option<u32>,
        close: &[u8],
        reps: Vec<u8>,
        limit: usize,
    ) -> Result<Counter> {
        let cap = max.unwrap_or(min);
        let mut row = vec![unit.start];
        row.extend((1..unit.accept.len() as u32).map(StateId).filter(|&s| s != unit.start && !unit.accept[s.index()]));
        let states =
            (1 + open.len()).saturating_add((cap as usize + 1).saturating_mul(row.len())).saturating_add(close.len());
        if states > limit {
            return Err(Error::limit(LimitKind::DfaStates, "DFA states for a counted repetition", limit));
        }
        let mut place = vec![NOT_PLACED; unit.accept.len()];
        row.iter().enumerate().for_each(|(i, &s)| place[s.index()] = i as u32);
        let rows_at = 1 + open.len() as u32;
        let close_at = rows_at + (cap + 1) * row.len() as u32;
        Ok(Counter {
            unit: unit.clone(),
            open: open.to_vec(),
            close: close.to_vec(),
            min,
            max,
            cap,
            place,
            row,
            reps,
            rows_at,
            close_at,
            states,
        })
    }

    fn width(&self) -> u32 {
        self.row.len() as u32
    }

    /// The number of the start of row `k`.
    fn between(&self, k: u32) -> u32 {
        self.rows_at + k * self.width()
    }

    /// The state after byte `b`.
    #[inline]
    pub(super) fn next(&self, state: StateId, b: u8) -> StateId {
        StateId(self.next_number(state.0, b))
    }

    /// [`next`](Self::next) over state numbers, by the layout above.
    #[inline]
    fn next_number(&self, state: u32, b: u8) -> u32 {
        // The dead state's number.
        const DEAD: u32 = StateId::DEAD.0;
        if state == DEAD {
            return DEAD;
        }
        if state < self.rows_at {
            let i = (state - 1) as usize;
            return match self.open[i] == b {
                false => DEAD,
                true if i + 1 == self.open.len() => self.between(0),
                true => state + 1,
            };
        }
        if state >= self.close_at {
            let i = (state - self.close_at) as usize + 1; // close[..i] read
            return if self.close.get(i) == Some(&b) { state + 1 } else { DEAD };
        }
        let (k, p) = ((state - self.rows_at) / self.width(), (state - self.rows_at) % self.width());
        let at_max = self.max == Some(k);
        if p == 0 {
            if self.close.first() == Some(&b) {
                return if k >= self.min { self.close_at } else { DEAD };
            }
            if at_max {
                return DEAD;
            }
        } else if at_max {
            return DEAD; // unreachable: no unit starts on the maximum's row
        }
        let t = self.unit.next(self.row[p as usize], b);
        if t == StateId::DEAD {
            return DEAD;
        }
        if self.unit.accept[t.index()] {
            return self.between((k + 1).min(self.cap));
        }
        self.between(k) + self.place[t.index()]
    }

    /// Fewest bytes to acceptance from every state, using only bytes with `usable[b]`
    /// ([`UNREACHABLE`]: none), written down from the unit's own distances.
    pub(super) fn distances(&self, usable: &[bool; 256]) -> Vec<u32> {
        let inf = UNREACHABLE;
        let unit_dist: Vec<u32> = self.unit.dist_using_uncached(usable);
        let unit_min = unit_dist[self.unit.start.index()];
        let close_ok = self.close.iter().all(|&b| usable[b as usize]);
        let add = |a: u32, b: u32| if a == inf || b == inf { inf } else { a.saturating_add(b) };
        // From the start of row k: the units still needed, then `close`.
        let between = |k: u32| -> u32 {
            if !close_ok {
                return inf;
            }
            let needed = self.min.saturating_sub(k);
            if needed == 0 {
                return self.close.len() as u32;
            }
            if unit_min == inf {
                return inf;
            }
            needed.saturating_mul(unit_min).saturating_add(self.close.len() as u32)
        };
        let mut d = vec![inf; self.states];
        for (i, slot) in d.iter_mut().enumerate().take(self.rows_at as usize).skip(1) {
            let rest = self.open.len() - (i - 1);
            *slot =
                if self.open[i - 1..].iter().all(|&b| usable[b as usize]) { add(rest as u32, between(0)) } else { inf };
        }
        for k in 0..=self.cap {
            for (p, &s) in self.row.iter().enumerate() {
                let at = (self.between(k) + p as u32) as usize;
                d[at] = if p == 0 {
                    between(k)
                } else if self.max == Some(k) {
                    inf
                } else {
                    add(unit_dist[s.index()], between((k + 1).min(self.cap)))
                };
            }
        }
        for i in 1..=self.close.len() {
            let at = self.close_at as usize + i - 1;
            d[at] =
                if self.close[i..].iter().all(|&b| usable[b as usize]) { (self.close.len() - i) as u32 } else { inf };
        }
        d
    }

    /// The state of the same place (open, close, or unit place) on the row that reads every
    /// string of at most `horizon` bytes the way `state` does: one byte completes at most one
    /// unit, so a row matters only within `horizon` units of the minimum (acceptance) and of
    /// the maximum (the end). Rows further than that below the minimum read like row 0, rows
    /// at or past the minimum and further than that below the maximum like the minimum's.
    /// (Distances differ: the row chosen needs at least as many units as `state`'s.)
    pub(super) fn canonical(&self, state: StateId, horizon: u32) -> StateId {
        let state = state.0;
        if state < self.rows_at || state >= self.close_at {
            return StateId(state);
        }
        let (k, p) = ((state - self.rows_at) / self.width(), (state - self.rows_at) % self.width());
        let far_from_max = self.max.is_none_or(|m| m - k > horizon);
        let row = if self.min.saturating_sub(k) > horizon {
            0
        } else if k >= self.min && far_from_max {
            self.min
        } else {
            k
        };
        StateId(self.between(row) + p)
    }

    /// The automaton: no table, `accept`, `open` and `dist` written down.
    fn into_dfa(self, classes: [u8; 256]) -> Dfa {
        let n = self.states;
        let dist = self.distances(&[true; 256]);
        let mut accept = vec![false; n];
        let mut open = vec![false; n];
        for s in 1..n as u32 {
            let at = s as usize;
            if s >= self.close_at {
                // Read `close[..i]`: done at its end, else its next byte.
                let i = (s - self.close_at) as usize + 1;
                accept[at] = i == self.close.len();
                open[at] = i < self.close.len();
            } else if s >= self.rows_at {
                let (k, p) = ((s - self.rows_at) / self.width(), (s - self.rows_at) % self.width());
                let at_max = self.max == Some(k);
                accept[at] = self.close.is_empty() && p == 0 && k >= self.min;
                // Between units: another unit below the maximum, or `close` (k ≥ min there,
                // since min ≤ max). Inside a unit (never on the maximum's row): its next byte.
                open[at] = if p == 0 { !at_max || !self.close.is_empty() } else { !at_max };
            } else {
                open[at] = true; // reading `open`
            }
        }
        let start = StateId(if self.open.is_empty() { self.between(0) } else { 1 });
        let start = if dist[start.index()] == UNREACHABLE { StateId::DEAD } else { start };
        let stride = self.reps.len();
        Dfa {
            classes,
            stride,
            trans: Vec::new(),
            accept,
            open,
            dist,
            start,
            dist_memo: OnceLock::new(),
            id: next_id(),
            counter: Some(Arc::new(self)),
        }
    }
}
