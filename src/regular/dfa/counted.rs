//! Counted repetitions `open · unit{min,max} · close` ([`Dfa::counted`]), alone or
//! intersected with other languages ([`Dfa::counted_product`]: a pattern with a length):
//! tabled when small, computed on the fly by a [`Counter`] above [`MAX_TABLED_COUNTED`] states.

use std::collections::HashMap;

use super::counter::Counter;
use super::explore::{explore, explore_keys};
use super::product::Combine;
use super::{Dfa, DfaLimits, StateId};
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
    /// on the fly ([`Counter`]) above that: a string of at most 5,000 characters is 80,000
    /// states (about 16 per count: the states inside one escaped or multi-byte character, the
    /// quotes), whose table took most of a compile to build and search.
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
            let (base, completes) = uncounted(open, unit, close, limits)?;
            // As many states as its table would have, within the same limit.
            let bounds = (limits.states, limits.states);
            return Ok(Some(Counter::new(base, completes, (min, max), bounds, limits.states)?.into_dfa()));
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

    /// `counted ∧ parts`: the strings of the counted repetition `open · unit{min,max} · close`
    /// that the product of `parts` accepts (as [`product_of_clauses`](Dfa::product_of_clauses)
    /// reads them), counted on the fly ([`Counter`]) over the product of `parts` with the
    /// uncounted `open · unit* · close`: a pattern ∧ `maxLength` without its table. `None`
    /// where the repetition cannot be counted or the table would be small (the caller builds
    /// the product).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn counted_product<D: std::ops::Deref<Target = Dfa>>(
        parts: &[(D, Option<u32>)],
        open: &[u8],
        unit: &Dfa,
        min: u32,
        max: Option<u32>,
        close: &[u8],
        limits: DfaLimits,
    ) -> Result<Option<Dfa>> {
        Dfa::counted_product_with(parts, open, unit, min, max, close, limits, MAX_TABLED_COUNTED)
    }

    /// [`counted_product`](Dfa::counted_product), counted where the table would have more than
    /// `max_tabled` states.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn counted_product_with<D: std::ops::Deref<Target = Dfa>>(
        parts: &[(D, Option<u32>)],
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
        let (strings, completes) = uncounted(open, unit, close, limits)?;
        let mut all: Vec<(&Dfa, Option<u32>)> = parts.iter().map(|(d, c)| (&**d, *c)).collect();
        all.push((&strings, None));
        let (base, tuples) = Dfa::product_tuples(&all, limits, 1 << 22, Combine::All)?;
        let rows = max.unwrap_or(min) as usize + 1;
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
        Ok(Some(Counter::new(base, on, (min, max), bounds, limits.states)?.into_dfa()))
    }
}

/// `open · unit* · close` as a table, and per transition (`s * stride + class`) whether it
/// completes a unit: the base of a [`Counter`] of that repetition.
fn uncounted(open: &[u8], unit: &Dfa, close: &[u8], limits: DfaLimits) -> Result<(Dfa, Vec<bool>)> {
    let (classes, reps) = counted_classes(unit, open, close);
    let c = Counting { open, unit, close, min: 0, max: None, cap: 0, u0: unit.start };
    let start = if open.is_empty() { Pos::Unit(0, c.u0) } else { Pos::Open(0) };
    let (dfa, keys) = explore_keys(
        classes,
        &reps,
        Some(start),
        limits.states,
        |&p, b| Ok(c.step(p, b)),
        |&p| c.accepting(p),
        || Error::limit(LimitKind::DfaStates, "DFA states for a counted repetition", limits.states),
        None,
    )?;
    let mut completes = vec![false; dfa.trans.len()];
    for (i, p) in keys.iter().enumerate() {
        let Pos::Unit(_, s) = *p else { continue };
        for (class, &b) in reps.iter().enumerate() {
            let t = unit.next(s, b);
            completes[(i + 1) * dfa.stride + class] = t != StateId::DEAD && unit.is_accepting(t);
        }
    }
    Ok((dfa, completes))
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

/// How many (count, state) pairs a [`Dfa::counted_product`] may number, per state its table
/// may have; and the share of that limit its rows may hold.
const COUNTED_PRODUCT_PAIRS: usize = 16;
const COUNTED_PRODUCT_ROWS: usize = 8;
