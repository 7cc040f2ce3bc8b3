//! [`Rows`]: a [`Counter`](super::counter::Counter)'s fewest bytes to acceptance, by row.
//!
//! A counter's state is (row `k`, place `s`): `k` units complete, the base table in `s`. The
//! distances of row `k` depend only on those of row `k + 1` (a transition that completes a unit
//! leads there) and on which regime `k` is in:
//! - the top row (`k` = the maximum: completing a unit is death; or, without a maximum, the
//!   minimum, where the count saturates and completing a unit stays in the row);
//! - accepting rows (minimum ≤ `k` < maximum): the base's accepting places accept;
//! - rows below the minimum: nothing accepts.
//!
//! Rows are computed from the top down, each by one multi-source breadth-first search over the
//! base's transitions that complete no unit, and most are not stored: in the accepting regime,
//! once a row equals the row above it every row below it down to the minimum does too (the
//! same function of an equal row); below the minimum, once a row is the row above it plus a
//! constant, every row below adds that constant again (the function commutes with adding a
//! constant when nothing accepts). A row is then a layer and an offset.

use super::{Reverse, StateId, UNREACHABLE};

/// Distances by row: `layers[of[k].0][s] + of[k].1` from (row `k`, place `s`)
/// ([`UNREACHABLE`] stays so). Rows of one layer in a row are a *run*: they read every string
/// alike (the same places are live), which is what [`run`](Rows::run) tells.
pub(crate) struct Rows {
    of: Vec<(u32, u32)>,
    layers: Vec<Box<[u32]>>,
    /// Per row, the first and last row of its run.
    runs: Vec<(u32, u32)>,
    /// Per row `k`, the largest finite distance of any place of rows `k` and up: a bound on
    /// the distance of every state reachable from row `k` (no transition lowers the row).
    far_from: Vec<u32>,
}

/// Which rows a computation may store before it gives up (see [`Rows::compute`]).
pub(super) struct Work {
    /// Most layers times places.
    pub(super) cells: usize,
}

/// What [`Rows::compute`] reads of a counter.
pub(super) struct Shape<'a> {
    /// Per base state, does it accept (index 0: the dead state).
    pub(super) accept: &'a [bool],
    pub(super) min: u32,
    pub(super) max: Option<u32>,
    /// The top row: the maximum, or the minimum where there is none.
    pub(super) cap: u32,
    /// Base transitions over usable bytes that complete no unit, backwards.
    pub(super) within: &'a Reverse,
    /// The same with those that complete one (the top row without a maximum: the count
    /// saturates, so they stay in the row).
    pub(super) all: &'a Reverse,
    /// Base transitions over usable bytes that complete a unit, as (from, to).
    pub(super) completing: &'a [(u32, u32)],
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Regime {
    Top,
    Accepting,
    Below,
}

impl Rows {
    /// No rows (a placeholder while a counter is made).
    pub(super) fn empty() -> Rows {
        Rows { of: Vec::new(), layers: Vec::new(), runs: Vec::new(), far_from: Vec::new() }
    }

    /// The distances of every row, or `None` past `work`.
    pub(super) fn compute(shape: &Shape<'_>, work: Work) -> Option<Rows> {
        let n = shape.accept.len();
        let cap = shape.cap;
        let regime = |k: u32| {
            if k == cap {
                Regime::Top
            } else if k >= shape.min {
                Regime::Accepting
            } else {
                Regime::Below
            }
        };
        let mut rows =
            Rows { of: vec![(0, 0); cap as usize + 1], layers: Vec::new(), runs: Vec::new(), far_from: Vec::new() };
        let mut cand: Vec<(u32, u32)> = Vec::new();
        let mut spare: Vec<(u32, u32)> = Vec::new();
        let mut k = cap as i64;
        while k >= 0 {
            let row = k as u32;
            cand.clear();
            if row >= shape.min {
                cand.extend((1..n).filter(|&s| shape.accept[s]).map(|s| (0, s as u32)));
            }
            let top_saturates = row == cap && shape.max.is_none();
            if row < cap {
                for &(from, to) in shape.completing {
                    let d = rows.get(row + 1, StateId(to));
                    if d != UNREACHABLE {
                        cand.push((d + 1, from));
                    }
                }
            }
            sort_by_distance(&mut cand, &mut spare);
            let layer = settle(if top_saturates { shape.all } else { shape.within }, &cand, n);
            // The row above, if it is of the same regime: a fixed point or a shift.
            let same = row < cap && regime(row + 1) == regime(row);
            if same && regime(row) == Regime::Accepting && *layer == *rows.layers[rows.of[row as usize + 1].0 as usize]
            {
                let above = rows.of[row as usize + 1];
                (shape.min..=row).for_each(|j| rows.of[j as usize] = above);
                k = shape.min as i64 - 1;
                continue;
            }
            if same && regime(row) == Regime::Below {
                let above = rows.of[row as usize + 1];
                if let Some(c) = shift(&rows.layers[above.0 as usize], above.1, &layer) {
                    for j in 0..=row {
                        let rows_up = (row + 1 - j) as u64;
                        let off = (above.1 as u64 + c as u64 * rows_up).min(u32::MAX as u64 / 2) as u32;
                        rows.of[j as usize] = (above.0, off);
                    }
                    break;
                }
            }
            if (rows.layers.len() + 1).saturating_mul(n) > work.cells {
                return None;
            }
            rows.of[row as usize] = (rows.layers.len() as u32, 0);
            rows.layers.push(layer);
            k -= 1;
        }
        rows.runs = runs(&rows.of.iter().map(|&(layer, _)| layer).collect::<Vec<u32>>());
        rows.far_from = rows.row_tops();
        for k in (0..rows.far_from.len().saturating_sub(1)).rev() {
            rows.far_from[k] = rows.far_from[k].max(rows.far_from[k + 1]);
        }
        Some(rows)
    }

    /// Per row, the largest finite distance of its places (0 where none is finite).
    fn row_tops(&self) -> Vec<u32> {
        let top: Vec<u32> =
            self.layers.iter().map(|l| l.iter().copied().filter(|&d| d != UNREACHABLE).max().unwrap_or(0)).collect();
        self.of.iter().map(|&(l, off)| top[l as usize].saturating_add(off).min(UNREACHABLE - 1)).collect()
    }

    /// Fewest bytes from place `s` of row `k`.
    #[inline]
    pub(super) fn get(&self, k: u32, s: StateId) -> u32 {
        let (layer, off) = self.of[k as usize];
        let d = self.layers[layer as usize][s.index()];
        if d == UNREACHABLE {
            UNREACHABLE
        } else {
            d.saturating_add(off).min(UNREACHABLE - 1)
        }
    }

    /// Is place `s` of row `k` live (some accepted string goes on from it)?
    #[inline]
    pub(super) fn live(&self, k: u32, s: StateId) -> bool {
        self.layers[self.of[k as usize].0 as usize][s.index()] != UNREACHABLE
    }

    /// Is place `s` live in `layer`?
    #[inline]
    pub(super) fn layer_live(&self, layer: u32, s: StateId) -> bool {
        self.layers[layer as usize][s.index()] != UNREACHABLE
    }

    /// The layer of row `k` (rows of one layer have the same places live).
    pub(super) fn layer(&self, k: u32) -> u32 {
        self.of[k as usize].0
    }

    /// The offset of row `k` over its layer.
    pub(super) fn offset(&self, k: u32) -> u32 {
        self.of[k as usize].1
    }

    /// The first and last row of row `k`'s run (its layer's rows next to it).
    pub(super) fn run(&self, k: u32) -> (u32, u32) {
        self.runs[k as usize]
    }

    /// The largest finite distance of any row.
    pub(super) fn farthest(&self) -> u32 {
        self.far_from.first().copied().unwrap_or(0)
    }

    /// The largest finite distance of any place of row `k` or a later one.
    pub(super) fn farthest_from(&self, k: u32) -> u32 {
        self.far_from.get(k as usize).copied().unwrap_or(0)
    }

    /// Heap bytes.
    pub(super) fn heap_bytes(&self) -> usize {
        self.of.len() * 16 + self.far_from.len() * 4 + self.layers.iter().map(|l| l.len() * 4).sum::<usize>()
    }
}

/// Division by a fixed `u32` by one multiplication (Lemire, Kaser & Kurz, "Faster remainder by
/// direct computation", 2019: `⌊n / d⌋ = ⌊M·n / 2⁶⁴⌋` for every 32-bit `n`, with
/// `M = ⌊(2⁶⁴ − 1) / d⌋ + 1`): a counter splits a state number into (row, place) on every
/// step of a mask's walk, where a hardware division costs as much as the rest of the step.
#[derive(Clone, Copy)]
pub(super) struct Divisor {
    d: u32,
    m: u128,
}

impl Divisor {
    pub(super) fn new(d: u32) -> Divisor {
        assert!(d > 0, "division by zero");
        Divisor { d, m: u64::MAX as u128 / d as u128 + 1 }
    }

    /// `(n / d, n % d)`.
    #[inline(always)]
    pub(super) fn div_rem(self, n: u32) -> (u32, u32) {
        let q = ((self.m * n as u128) >> 64) as u32;
        (q, n - q * self.d)
    }
}

/// Sorts `(distance, state)` pairs by distance: counted into buckets where the distances span
/// a range not much wider than their number (they mostly do: one row's distances), else by
/// comparison. `spare` is scratch space.
fn sort_by_distance(cand: &mut Vec<(u32, u32)>, spare: &mut Vec<(u32, u32)>) {
    let (Some(lo), Some(hi)) = (cand.iter().map(|c| c.0).min(), cand.iter().map(|c| c.0).max()) else { return };
    let span = (hi - lo) as usize + 1;
    if span > 4 * cand.len() + 64 {
        cand.sort_unstable();
        return;
    }
    let mut start = vec![0u32; span + 1];
    cand.iter().for_each(|c| start[(c.0 - lo) as usize + 1] += 1);
    for i in 0..span {
        start[i + 1] += start[i];
    }
    spare.clear();
    spare.resize(cand.len(), (0, 0));
    for &c in cand.iter() {
        let at = &mut start[(c.0 - lo) as usize];
        spare[*at as usize] = c;
        *at += 1;
    }
    std::mem::swap(cand, spare);
}

/// `b - (a + off)` if it is one constant `c ≥ 0` wherever either is finite (and both are
/// finite in the same places).
fn shift(a: &[u32], off: u32, b: &[u32]) -> Option<u32> {
    let mut c: Option<u32> = None;
    for (&x, &y) in a.iter().zip(b) {
        match (x == UNREACHABLE, y == UNREACHABLE) {
            (true, true) => {}
            (false, false) => {
                let d = y.checked_sub(x.checked_add(off)?)?;
                if *c.get_or_insert(d) != d {
                    return None;
                }
            }
            _ => return None,
        }
    }
    Some(c.unwrap_or(0))
}

/// Per row, the first and last row of the run around it of rows with the same key.
pub(super) fn runs<T: PartialEq>(key: &[T]) -> Vec<(u32, u32)> {
    let mut runs = vec![(0, 0); key.len()];
    let mut start = 0;
    for k in 0..key.len() {
        if k + 1 == key.len() || key[k + 1] != key[k] {
            (start..=k).for_each(|j| runs[j] = (start as u32, k as u32));
            start = k + 1;
        }
    }
    runs
}

/// Fewest steps backwards over `rev` from sources at their own distances (`sources`, sorted
/// by distance): the sources and the breadth-first queue are merged in order of distance, so
/// each state is settled once, at its fewest.
pub(super) fn settle(rev: &Reverse, sources: &[(u32, u32)], n: usize) -> Box<[u32]> {
    let mut dist = vec![UNREACHABLE; n].into_boxed_slice();
    let mut queue: std::collections::VecDeque<u32> = std::collections::VecDeque::new();
    let mut next = 0;
    loop {
        // A source settles before the queue's front at the same distance.
        let from_queue = match (queue.front(), sources.get(next)) {
            (Some(&q), Some(&(d, _))) => dist[q as usize] < d,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let s = if from_queue {
            queue.pop_front().expect("checked")
        } else {
            let (d, s) = sources[next];
            next += 1;
            if dist[s as usize] <= d {
                continue;
            }
            dist[s as usize] = d;
            s
        };
        let d = dist[s as usize] + 1;
        for &p in rev.preds(StateId(s)) {
            if dist[p as usize] > d {
                dist[p as usize] = d;
                queue.push_back(p);
            }
        }
    }
    dist
}
