//! A bounded repetition anywhere in a regex, counted through a marker
//! ([`Dfa::counted_by_marker`]): "at most a hundred words", `^(?:\S+\s+){0,99}\S+$`, whose unit
//! is not prefix-free (a word may go on), so [`Dfa::counted`] cannot count it, and whose
//! hundred copies took 50-100 ms to determinize.
//!
//! The repetition `unit{min,max}` is written `(?:unit m)*` with a marker byte `m` that the
//! regex never reads, and that regex is determinized (a few dozen states). Erasing the marker
//! gives a table over the regex's own bytes, some of whose transitions count a unit: a
//! [`Counter`]'s base. A unit is counted on the byte after which every way on passed the
//! marker, a byte or a few after its place (between words, a space and the first byte of a
//! two-byte character may be more space or a new word; the next byte decides), so each
//! string's count is that of its one way through the marked regex. The erasure refuses (`None`,
//! the regex path decides) where that count is in doubt: a way would pass a second marker
//! before the first is counted (`(?:a+){0,40}`: a unit may go on or start again), or a string
//! may end with a marker not yet counted.

use regex_syntax::hir::{Class, Hir, HirKind, Repetition};

use super::counter::Counter;
use super::explore::explore_keys;
use super::{Dfa, DfaLimits, StateId};
use crate::error::{Error, LimitKind, Result};
use crate::regular::regex::hir_weight;

impl Dfa {
    /// The language of `h` with its heaviest repetition (see [`heaviest_repetition`]: a
    /// weight of at least `min_weight`) counted: tabled up to `max_tabled` states, on the fly
    /// above.
    /// `None` where `h` has no such repetition, looks around, reads every byte (no marker is
    /// free), the marker's place can be in doubt (see the module docs), or a limit is met.
    pub(super) fn counted_by_marker(h: &Hir, limits: DfaLimits, min_weight: u64, max_tabled: usize) -> Option<Dfa> {
        if !h.properties().look_set().is_empty() {
            return None;
        }
        // Most regexes have no repetition heavy enough: that walk first.
        let found = heaviest_repetition(h, true, min_weight)?;
        let marker = free_byte(h)?;
        let (min, max) = (found.rep.min, found.rep.max);
        let marked = replace_at(h, &found.path, &|unit| {
            Hir::repetition(Repetition {
                min: 0,
                max: None,
                greedy: true,
                sub: Box::new(Hir::concat(vec![unit.clone(), Hir::literal([marker])])),
            })
        });
        // Past a limit (the marked regex, its erasure, the count) this shortcut does not help:
        // the regex path decides (another repetition expanded in the marked regex: `[0-9]{10000}
        // -[a-z]{0,10000}`).
        let d = Dfa::from_hir_nfa(&marked, limits).ok()?;
        let (base, completes) = erase(&d, marker, limits)?;
        if base.start == StateId::DEAD {
            return None;
        }
        let tabled = (max.unwrap_or(min) as usize + 1).saturating_mul(base.state_count() - 1) <= max_tabled;
        let bounds = (limits.states, limits.states);
        let counted = Counter::new(base, completes, (min, max), bounds, limits.states).ok()?.into_dfa();
        Some(match (tabled, &counted.counter) {
            (true, Some(c)) => counted.tabled(c),
            _ => counted,
        })
    }
}

/// Where the erasure is: the states of the marked table reached by the bytes read so far
/// along paths that passed as many markers as were counted (`here`), and along paths that
/// passed one more, not yet counted (`ahead`); each sorted. The unit is counted on the byte
/// after which only paths that passed the marker are left: between words, a space and the
/// first byte of a two-byte character may go on as more space or as a new word, and the next
/// byte decides.
type Erased = (Vec<StateId>, Vec<StateId>);

/// `d` (over the regex's bytes and `marker`) with the marker erased: a table over the same
/// classes whose marker class is dead, and per transition whether it counts a unit (see
/// [`Erased`]). `None` where the count is in doubt (two markers not yet counted, a string
/// that may end with one not counted), or another byte shares the marker's class.
fn erase(d: &Dfa, marker: u8, limits: DfaLimits) -> Option<(Dfa, Vec<bool>)> {
    let mark_class = d.classes[marker as usize];
    if (0..=255u8).any(|b| b != marker && d.classes[b as usize] == mark_class) {
        return None;
    }
    let reps = d.class_reps();
    // Where the count is in doubt, a byte goes nowhere and the build is given up after.
    let in_doubt = std::cell::Cell::new(false);
    let step = |e: &Erased, b: u8| -> Result<Option<Erased>> {
        let (next, _, doubt) = erased_step(d, marker, e, b);
        in_doubt.set(in_doubt.get() || doubt);
        Ok(next)
    };
    let accepting = |(here, ahead): &Erased| {
        // A string ending here with a marker not counted (or just after one) would count one
        // more unit than its path.
        let ends_ahead = ahead.iter().any(|&q| d.is_accepting(q))
            || ahead.iter().chain(here).any(|&q| d.is_accepting(d.next(q, marker)));
        in_doubt.set(in_doubt.get() || ends_ahead);
        here.iter().any(|&q| d.is_accepting(q))
    };
    let start = (d.start != StateId::DEAD).then(|| (vec![d.start], Vec::new()));
    let (base, keys) = explore_keys(
        d.classes,
        &reps,
        start,
        limits.states,
        step,
        accepting,
        || Error::limit(LimitKind::DfaStates, "DFA states for a counted repetition", limits.states),
        None,
    )
    .ok()?;
    if in_doubt.get() {
        return None;
    }
    let mut completes = vec![false; base.trans.len()];
    for (i, e) in keys.iter().enumerate() {
        for (c, &b) in reps.iter().enumerate() {
            let at = (i + 1) * base.stride + c;
            completes[at] = base.trans[at] != StateId::DEAD && erased_step(d, marker, e, b).1;
        }
    }
    Some((base, completes))
}

/// One byte of the erased table: where it leads (`None`: dead), whether it counts a unit,
/// whether the count is in doubt (a path would pass a second marker not yet counted).
fn erased_step(d: &Dfa, marker: u8, (here, ahead): &Erased, b: u8) -> (Option<Erased>, bool, bool) {
    if b == marker {
        return (None, false, false);
    }
    let live = |q: StateId| (q != StateId::DEAD).then_some(q);
    let sorted = |mut v: Vec<StateId>| {
        v.sort_unstable();
        v.dedup();
        v
    };
    let next_here = sorted(here.iter().filter_map(|&q| live(d.next(q, b))).collect());
    let next_ahead = sorted(
        here.iter()
            .map(|&q| d.next(d.next(q, marker), b))
            .chain(ahead.iter().map(|&q| d.next(q, b)))
            .filter_map(live)
            .collect(),
    );
    let doubt = ahead.iter().any(|&q| d.next(d.next(q, marker), b) != StateId::DEAD);
    match (next_here.is_empty(), next_ahead.is_empty()) {
        (true, true) => (None, false, doubt),
        (true, false) => (Some((next_ahead, Vec::new())), true, doubt),
        _ => (Some((next_here, next_ahead)), false, doubt),
    }
}

/// A byte that no match of `h` reads (the highest such), to serve as the marker. A Unicode
/// class reads its ASCII members and, past them, any byte of a UTF-8 encoding (never
/// `0xF5..=0xFF`).
fn free_byte(h: &Hir) -> Option<u8> {
    let mut used = [false; 256];
    mark_used(h, &mut used);
    (0..=255u8).rev().find(|&b| !used[b as usize])
}

fn mark_used(h: &Hir, used: &mut [bool; 256]) {
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => {}
        HirKind::Literal(l) => l.0.iter().for_each(|&b| used[b as usize] = true),
        HirKind::Class(Class::Bytes(c)) => {
            c.ranges().iter().for_each(|r| (r.start()..=r.end()).for_each(|b| used[b as usize] = true))
        }
        HirKind::Class(Class::Unicode(c)) => {
            for r in c.ranges() {
                let (lo, hi) = (r.start() as u32, r.end() as u32);
                (lo.min(0x80)..hi.min(0x7F) + 1).for_each(|b| used[b as usize] = true);
                if hi >= 0x80 {
                    (0x80..=0xF4).for_each(|b| used[b] = true);
                }
            }
        }
        HirKind::Repetition(r) => mark_used(&r.sub, used),
        HirKind::Capture(c) => mark_used(&c.sub, used),
        HirKind::Concat(xs) | HirKind::Alternation(xs) => xs.iter().for_each(|x| mark_used(x, used)),
    }
}

/// A repetition found in a regex: where (child indices from the root), what, and its
/// [weight](hir_weight).
struct Found<'a> {
    path: Vec<usize>,
    rep: &'a Repetition,
    weight: u64,
}

/// The heaviest repetition ([`hir_weight`]: its unit's weight times its count) of a weight of
/// at least `min_weight` and a count of at least 2, outside every other repetition, whose
/// unit cannot be empty; with a minimum only where `mandatory` (every match passes through
/// it: reached through sequences and groups only).
fn heaviest_repetition(h: &Hir, mandatory: bool, min_weight: u64) -> Option<Found<'_>> {
    fn pick<'a>(a: Option<Found<'a>>, b: Option<Found<'a>>) -> Option<Found<'a>> {
        match (a, b) {
            (Some(a), Some(b)) => Some(if b.weight > a.weight { b } else { a }),
            (a, b) => a.or(b),
        }
    }
    fn within(xs: &[Hir], mandatory: bool, min_weight: u64) -> Option<Found<'_>> {
        xs.iter().enumerate().fold(None, |best, (i, x)| {
            let found = heaviest_repetition(x, mandatory, min_weight).map(|mut f| {
                f.path.insert(0, i);
                f
            });
            pick(best, found)
        })
    }
    match h.kind() {
        HirKind::Repetition(r) => {
            let weight = hir_weight(h);
            let usable = weight >= min_weight
                && r.max.unwrap_or(r.min) >= 2
                && r.sub.properties().minimum_len().is_some_and(|n| n > 0)
                && (r.min == 0 || mandatory);
            usable.then(|| Found { path: Vec::new(), rep: r, weight })
        }
        HirKind::Capture(c) => heaviest_repetition(&c.sub, mandatory, min_weight).map(|mut f| {
            f.path.insert(0, 0);
            f
        }),
        HirKind::Concat(xs) => within(xs, mandatory, min_weight),
        HirKind::Alternation(xs) => within(xs, false, min_weight),
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) | HirKind::Look(_) => None,
    }
}

/// `h` with the repetition at `path` replaced by `with(its unit)`.
fn replace_at(h: &Hir, path: &[usize], with: &dyn Fn(&Hir) -> Hir) -> Hir {
    let Some((&i, rest)) = path.split_first() else {
        let HirKind::Repetition(r) = h.kind() else { unreachable!("the path leads to a repetition") };
        return with(&r.sub);
    };
    match h.kind() {
        HirKind::Capture(c) => replace_at(&c.sub, rest, with),
        HirKind::Concat(xs) | HirKind::Alternation(xs) => {
            let mut xs = xs.clone();
            xs[i] = replace_at(&xs[i], rest, with);
            if matches!(h.kind(), HirKind::Concat(_)) {
                Hir::concat(xs)
            } else {
                Hir::alternation(xs)
            }
        }
        _ => unreachable!("the path leads through groups, sequences and alternations"),
    }
}

/// The least [weight](hir_weight) of a repetition [`Dfa::counted_by_marker`] counts for
/// [`Dfa::from_regex_lexeme`]: "at most twenty words" of a JSON string (a unit of 250) is
/// 5,000 and took 18 ms to determinize; `\d{1,15}` is 16 and takes microseconds.
pub(super) const MIN_MARKED_WEIGHT: u64 = 1_000;
