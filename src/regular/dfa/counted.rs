//! Counted repetitions `open · unit{min,max} · close` ([`Dfa::counted`]), alone or
//! intersected with other languages ([`Dfa::counted_product`]: a pattern with a length):
//! tabled when small, computed on the fly by a [`Counter`] above [`MAX_TABLED_COUNTED`] states.

use super::counter::Counter;
use super::explore::explore_keys;
use super::product::Combine;
use super::{Dfa, DfaLimits, StateId};
use crate::error::{Error, LimitKind, Result};

/// `open · unit{min,max} · close`: a counted repetition between two literals.
#[derive(Clone, Copy)]
pub(super) struct Repeat<'a> {
    pub(super) open: &'a [u8],
    pub(super) unit: &'a Dfa,
    pub(super) min: u32,
    pub(super) max: Option<u32>,
    pub(super) close: &'a [u8],
}

impl Dfa {
    /// `open · unit{min,max} · close` with a counter: states are (phase, count, unit state),
    /// about `max × |unit|` of them, built directly instead of determinizing `max` copies.
    /// `None` (use the regex) unless the unit is prefix-free (an accepting state has no way
    /// on, so a unit ends exactly where it is complete), non-empty, and `close` cannot start
    /// a unit (so the end of the repetition is never in doubt).
    pub(super) fn counted(r: Repeat<'_>, limits: DfaLimits) -> Result<Option<Dfa>> {
        Dfa::counted_with(r, limits, MAX_TABLED_COUNTED)
    }

    /// [`counted`](Dfa::counted), tabled when it has at most `max_tabled` states and computed
    /// on the fly ([`Counter`]) above that: a string of at most 5,000 characters is 80,000
    /// states (about 16 per count: the states inside one escaped or multi-byte character, the
    /// quotes), whose table took most of a compile to build and search.
    pub(super) fn counted_with(r: Repeat<'_>, limits: DfaLimits, max_tabled: usize) -> Result<Option<Dfa>> {
        if !countable(r) {
            return Ok(None);
        }
        let c = Counting { r, cap: r.max.unwrap_or(r.min), u0: r.unit.start };
        if c.slots() > max_tabled {
            let (base, completes) = uncounted(r, limits)?;
            // As many states as its table would have, within the same limit.
            let bounds = (limits.states, limits.states);
            return Ok(Some(Counter::new(base, completes, (r.min, r.max), bounds, limits.states)?.into_dfa()));
        }
        c.table(limits, true).map(|(dfa, _)| Some(dfa))
    }

    /// `r ∧ parts`: the strings of the counted repetition `r` that the product of `parts`
    /// accepts (as [`product_of_clauses`](Dfa::product_of_clauses) reads them), counted on the
    /// fly ([`Counter`]) over the product of `parts` with the uncounted `open · unit* · close`:
    /// a pattern ∧ `maxLength` without its table. `None` where the repetition cannot be
    /// counted or the table would have at most `max_tabled` states (the caller builds the
    /// product).
    pub(super) fn counted_product<D: std::ops::Deref<Target = Dfa>>(
        parts: &[(D, Option<u32>)],
        r: Repeat<'_>,
        limits: DfaLimits,
        max_tabled: usize,
    ) -> Result<Option<Dfa>> {
        if !countable(r) {
            return Ok(None);
        }
        let (strings, completes) = uncounted(r, limits)?;
        let mut all: Vec<(&Dfa, Option<u32>)> = parts.iter().map(|(d, c)| (&**d, *c)).collect();
        all.push((&strings, None));
        let (base, tuples) = Dfa::product_tuples(&all, limits, 1 << 22, Combine::All)?;
        let rows = r.max.unwrap_or(r.min) as usize + 1;
        if base.start == StateId::DEAD || rows.saturating_mul(base.state_count() - 1) <= max_tabled {
            return Ok(None);
        }
        // A transition of the product completes a unit where its string part's does.
        let k = all.len();
        let mut class_in_strings = vec![0usize; base.stride];
        (0..256).for_each(|b| class_in_strings[base.classes[b] as usize] = strings.classes[b] as usize);
        let mut on = vec![false; base.stride];
        for s in 1..base.state_count() {
            let q = tuples[s * k - 1];
            on.extend(class_in_strings.iter().map(|&c| completes[q.index() * strings.stride + c]));
        }
        // Its table would have the reachable (count, state) pairs, far fewer than every pair
        // (an email of at most 254 characters: 50,491 pairs, where its table had 16,000 states):
        // the pairs are bounded loosely. The rows (what is held, and the work) are bounded
        // tightly: where rows do not settle into a few layers (a minimum of 100 characters
        // over a pattern of 3,897 states), the table is the better construction, and the
        // caller builds it.
        let bounds = (limits.states.saturating_mul(COUNTED_PRODUCT_PAIRS), limits.states / COUNTED_PRODUCT_ROWS);
        Ok(Some(Counter::new(base, on, (r.min, r.max), bounds, limits.states)?.into_dfa()))
    }
}

/// `open · unit* · close` as a table, and per transition (`s * stride + class`) whether it
/// completes a unit: the base of a [`Counter`] of that repetition.
fn uncounted(r: Repeat<'_>, limits: DfaLimits) -> Result<(Dfa, Vec<bool>)> {
    let c = Counting { r: Repeat { min: 0, max: None, ..r }, cap: 0, u0: r.unit.start };
    let (dfa, keys) = c.table(limits, false)?;
    let reps = counted_classes(r).1;
    let mut completes = vec![false; dfa.trans.len()];
    for (i, p) in keys.iter().enumerate() {
        let Pos::Unit(_, s) = *p else { continue };
        for (class, &b) in reps.iter().enumerate() {
            let t = r.unit.next(s, b);
            completes[(i + 1) * dfa.stride + class] = t != StateId::DEAD && r.unit.is_accepting(t);
        }
    }
    Ok((dfa, completes))
}

impl Dfa {
    /// Would [`counted`](Dfa::counted) count `open · unit{min,max} · close` (states linear in
    /// the count, or computed on the fly), rather than return `None`? (See [`countable`].)
    pub fn is_countable(unit: &Dfa, min: u32, max: Option<u32>, close: &[u8]) -> bool {
        countable(Repeat { open: b"", unit, min, max, close })
    }
}

/// Can `open · unit{min,max} · close` be counted: is the unit prefix-free (an accepting state
/// has no way on, so a unit ends exactly where it is complete) and non-empty, can `close` not
/// start a unit (so the end of the repetition is never in doubt), and is `min ≤ max`?
fn countable(Repeat { unit, min, max, close, .. }: Repeat<'_>) -> bool {
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
fn counted_classes(Repeat { open, unit, close, .. }: Repeat<'_>) -> ([u8; 256], Vec<u8>) {
    // Key: the unit's class, and the byte itself where `open` or `close` has it (else 0).
    super::number_bytes(unit.stride * 257, |b| {
        let special = if open.contains(&b) || close.contains(&b) { b as usize + 1 } else { 0 };
        unit.classes[b as usize] as usize * 257 + special
    })
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
    r: Repeat<'a>,
    /// The most units counted: the maximum, or the minimum where there is none (the count
    /// saturates there).
    cap: u32,
    /// The unit's start: between units.
    u0: StateId,
}

impl Counting<'_> {
    /// The table, states numbered breadth-first (by slot, with `by_slot`), and the position
    /// each state stands for.
    fn table(&self, limits: DfaLimits, by_slot: bool) -> Result<(Dfa, Vec<Pos>)> {
        let (classes, reps) = counted_classes(self.r);
        let start = if self.r.open.is_empty() { Pos::Unit(0, self.u0) } else { Pos::Open(0) };
        let slot = |p: &Pos| self.slot(*p);
        explore_keys(
            classes,
            &reps,
            Some(start),
            limits.states,
            |&p, b| Ok(self.step(p, b)),
            |&p| self.accepting(p),
            || Error::limit(LimitKind::DfaStates, "DFA states for a counted repetition", limits.states),
            by_slot.then_some((self.slots(), &slot as &dyn Fn(&Pos) -> usize)),
        )
    }

    /// Every position has a slot: open bytes, then (count, unit state), then close bytes.
    fn slots(&self) -> usize {
        self.r.open.len() + (self.cap as usize + 1) * self.r.unit.accept.len() + self.r.close.len() + 1
    }

    fn slot(&self, p: Pos) -> usize {
        let (n_open, n_unit) = (self.r.open.len(), self.r.unit.accept.len());
        match p {
            Pos::Open(i) => i as usize,
            Pos::Unit(k, s) => n_open + k as usize * n_unit + s.index(),
            Pos::Close(i) => n_open + (self.cap as usize + 1) * n_unit + i as usize,
        }
    }

    /// The position after byte `b` (`None`: dead).
    fn step(&self, p: Pos, b: u8) -> Option<Pos> {
        match p {
            Pos::Open(i) => (self.r.open.get(i as usize) == Some(&b)).then(|| {
                if i as usize + 1 == self.r.open.len() {
                    Pos::Unit(0, self.u0)
                } else {
                    Pos::Open(i + 1)
                }
            }),
            Pos::Unit(k, s) if s == self.u0 => {
                if self.r.close.first() == Some(&b) {
                    return (k >= self.r.min).then_some(Pos::Close(1));
                }
                if self.r.max.is_some_and(|m| k >= m) {
                    return None;
                }
                self.in_unit(k, s, b)
            }
            Pos::Unit(k, s) => self.in_unit(k, s, b),
            Pos::Close(i) => (self.r.close.get(i as usize) == Some(&b)).then_some(Pos::Close(i + 1)),
        }
    }

    /// Byte `b` inside a unit: a unit that completes moves to the next count.
    fn in_unit(&self, k: u32, s: StateId, b: u8) -> Option<Pos> {
        let t = self.r.unit.next(s, b);
        if t == StateId::DEAD {
            return None;
        }
        if self.r.unit.accept[t.index()] {
            Some(Pos::Unit((k + 1).min(self.cap), self.u0))
        } else {
            Some(Pos::Unit(k, t))
        }
    }

    fn accepting(&self, p: Pos) -> bool {
        match p {
            Pos::Close(i) => i as usize == self.r.close.len(),
            Pos::Unit(k, s) => self.r.close.is_empty() && s == self.u0 && k >= self.r.min,
            Pos::Open(_) => false,
        }
    }
}

/// Counted repetitions with more states than this are computed on the fly ([`Counter`]).
pub(super) const MAX_TABLED_COUNTED: usize = 4_096;

/// How many (count, state) pairs a [`Dfa::counted_product`] may number, per state its table
/// may have; and the share of that limit its rows may hold.
const COUNTED_PRODUCT_PAIRS: usize = 16;
const COUNTED_PRODUCT_ROWS: usize = 8;
