//! Products: intersections and complements of DFAs ([`Dfa::product`]) and unions
//! ([`Dfa::union`]), states numbered by a dense slot where the tuple space is small, else by
//! hash. A product's byte classes refine its parts' classes read alike (fewer columns per
//! row); a negated part that is also a positive one leaves its clause (`a ∧ ¬a` is empty
//! before any tuple is built).

use std::sync::OnceLock;

use super::explore::SlotIds;
use super::{next_id, number_bytes, Counter, Dfa, DfaLimits, StateId};
use crate::error::{Error, LimitKind, Result};
use crate::regular::fxhash::FxHasher;

impl Dfa {
    /// The product of `parts`: it accepts a string when every part accepts it, or, for a part
    /// flagged `true` (negated), does *not* accept it. States are the reachable tuples of part
    /// states, numbered breadth-first; byte classes are the common refinement of the parts'.
    ///
    /// A negated part in its dead state accepts every continuation, which is exactly the
    /// complement of "no continuation matches": the parts' dead-end pruning is what makes
    /// complementing by flipping acceptance correct. A tuple with a positive part dead is dead.
    pub fn product<D: std::ops::Deref<Target = Dfa>>(parts: &[(D, bool)], limits: DfaLimits) -> Result<Dfa> {
        let clauses: Vec<(&Dfa, Option<u32>)> =
            parts.iter().enumerate().map(|(i, (d, neg))| (&**d, neg.then_some(i as u32))).collect();
        Dfa::product_of_clauses(&clauses, limits)
    }

    /// The product of `parts` where those flagged with the same `Some(clause)` form one negated
    /// conjunction: it accepts a string when every `None` part accepts it and, for each clause,
    /// not all of the clause's parts do. `a ∧ ¬(b ∧ c)` is one product over `a`, `b` and `c`
    /// (only the tuples `a` lets through are built), not `b ∧ c` built in full first.
    ///
    /// Where a part of a clause is dead, the clause can never hold again, so all its parts are
    /// taken as dead (one tuple for all such states).
    pub fn product_of_clauses<D: std::ops::Deref<Target = Dfa>>(
        parts: &[(D, Option<u32>)],
        limits: DfaLimits,
    ) -> Result<Dfa> {
        // Where the tuple space is small enough, tuples are numbered by their slot (mixed
        // radix over the parts' state counts) instead of a hash.
        Dfa::product_numbered(parts, limits, 1 << 22, Combine::All)
    }

    /// The union of `parts`: it accepts a string when some part accepts it. The same
    /// construction as [`product`](Dfa::product) (reachable tuples, breadth first), where a
    /// tuple is dead only when every part is.
    pub fn union<D: std::ops::Deref<Target = Dfa>>(parts: &[D], limits: DfaLimits) -> Result<Dfa> {
        let parts: Vec<(&Dfa, Option<u32>)> = parts.iter().map(|d| (&**d, None)).collect();
        // A union reaches few of its tuples (mostly one part live at a time): a dense table
        // of slots, zeroed first, would cost more than it saves past a small tuple space.
        Dfa::product_numbered(&parts, limits, 1 << 12, Combine::Any)
    }

    /// [`product_of_clauses`](Dfa::product_of_clauses) or [`union`](Dfa::union) (`combine`;
    /// a union's parts are all `None`), numbering tuples by slot when there are at most
    /// `max_dense` of them (the same table either way: the numbering is breadth-first).
    pub(super) fn product_numbered<D: std::ops::Deref<Target = Dfa>>(
        parts: &[(D, Option<u32>)],
        limits: DfaLimits,
        max_dense: usize,
        combine: Combine,
    ) -> Result<Dfa> {
        Dfa::product_tuples(parts, limits, max_dense, combine).map(|(dfa, _)| dfa)
    }

    /// [`product_numbered`](Dfa::product_numbered), with the tuple each state stands for:
    /// `tuples[(i - 1) * parts.len()..i * parts.len()]` is state `i`'s, one state per part
    /// (pruning merges dead ends into the dead state but renumbers nothing).
    pub(super) fn product_tuples<D: std::ops::Deref<Target = Dfa>>(
        parts: &[(D, Option<u32>)],
        limits: DfaLimits,
        max_dense: usize,
        combine: Combine,
    ) -> Result<(Dfa, Vec<StateId>)> {
        let k = parts.len();
        // A negated part that is also a positive one (the same table) accepts wherever the
        // tuple does: it leaves its clause and stays in the tuple as a positive part (in
        // lockstep with its twin, it adds no tuple). A clause left with no part is `¬true`:
        // the product is empty, known before any tuple is built (`a ∧ ¬a`, which an `anyOf`
        // of `not`s distributed over an `allOf` of the same patterns makes).
        let positive: Vec<u64> = parts.iter().filter(|(_, c)| c.is_none()).map(|(d, _)| d.id()).collect();
        let clause_of: Vec<Option<u32>> =
            parts.iter().map(|(d, c)| c.filter(|_| !positive.contains(&d.id()))).collect();
        let vanished = parts.iter().filter_map(|(_, c)| *c).any(|c| !clause_of.contains(&Some(c)));
        // A counter computed on the fly is tabled first: the product reads each of its rows
        // once per tuple it appears in, and a table lookup is several times cheaper.
        let tabled: Vec<Option<Dfa>> = parts.iter().map(|(d, _)| d.counter.as_ref().map(|c| d.tabled(c))).collect();
        let parts: Vec<(&Dfa, bool)> = parts
            .iter()
            .zip(&tabled)
            .zip(&clause_of)
            .map(|(((d, _), t), c)| (t.as_ref().unwrap_or(&**d), c.is_some()))
            .collect();
        let parts = &parts[..];
        // The negated clauses, as part indices (a negated part alone is a clause of one).
        let mut negated: Vec<(u32, Vec<usize>)> = Vec::new();
        for (j, c) in clause_of.iter().enumerate() {
            let Some(c) = *c else { continue };
            match negated.iter_mut().find(|(id, _)| *id == c) {
                Some((_, members)) => members.push(j),
                None => negated.push((c, vec![j])),
            }
        }
        let negated: Vec<Vec<usize>> = negated.into_iter().map(|(_, m)| m).collect();
        // A clause with a part dead can never hold again: all its parts dead.
        let joint: Vec<&Vec<usize>> = negated.iter().filter(|m| m.len() > 1).collect();
        let settle = |t: &mut [StateId]| {
            for members in &joint {
                if members.iter().any(|&j| t[j] == StateId::DEAD) {
                    members.iter().for_each(|&j| t[j] = StateId::DEAD);
                }
            }
        };
        let (classes, reps) = product_classes(parts, combine);
        let too_many = || Error::Limit {
            kind: LimitKind::DfaStates,
            what: "DFA states for an intersection or complement of regexes".into(),
            limit: limits.states,
            hint: Some(
                "the combined constraints (pattern, length, format, excluded values) expand to too many states".into(),
            ),
        };
        // A tuple with a positive part dead is dead (a union's: with every part dead).
        let live = |t: &[StateId]| match combine {
            Combine::All => !parts.iter().zip(t).any(|((_, neg), &s)| !neg && s == StateId::DEAD),
            Combine::Any => t.iter().any(|&s| s != StateId::DEAD),
        };
        // The same breadth-first numbering as `explore`, with the tuples kept flat (state `i`
        // is `tuples[(i - 1) * k..i * k]`) and looked up by slice, so that a transition to a
        // known tuple allocates nothing (products are most of compile time).
        let mut ids = TupleIds::new(parts, max_dense);
        let mut tuples: Vec<StateId> = parts.iter().map(|(d, _)| d.start).collect();
        settle(&mut tuples);
        let start = if !vanished && live(&tuples) {
            if limits.states <= 1 {
                return Err(too_many());
            }
            ids.insert(&tuples, StateId(1));
            StateId(1)
        } else {
            tuples.clear();
            StateId::DEAD
        };
        let stride = reps.len();
        // Per part, its class of each product class: a tuple's successors are read from each
        // part's row by class, a whole row at a time (`next[c * k + j]`: part `j` on class `c`).
        let part_class: Vec<Vec<usize>> =
            parts.iter().map(|(d, _)| reps.iter().map(|&b| d.classes[b as usize] as usize).collect()).collect();
        let mut next = vec![StateId::DEAD; stride * k];
        let mut trans = vec![StateId::DEAD; stride];
        let mut accept = vec![false];
        let mut n = usize::from(start != StateId::DEAD);
        let mut i = 0;
        while i < n {
            for (j, ((d, _), classes)) in parts.iter().zip(&part_class).enumerate() {
                debug_assert!(d.counter.is_none(), "counters are tabled above");
                let row = &d.trans[tuples[i * k + j].index() * d.stride..][..d.stride];
                for (c, &pc) in classes.iter().enumerate() {
                    next[c * k + j] = row[pc];
                }
            }
            trans.reserve(stride);
            // (By index, not `chunks_exact_mut`: a product of no parts has empty tuples.)
            for c in 0..stride {
                let (before, buf) = next.split_at_mut(c * k);
                let buf = &mut buf[..k];
                settle(buf);
                // Neighbouring classes often lead to the same tuple (a part that tells them
                // apart is in a state that does not): the last class's answer, unhashed.
                let t = if c > 0 && before[(c - 1) * k..] == *buf {
                    trans[trans.len() - 1]
                } else if !live(buf) {
                    StateId::DEAD
                } else if let Some(id) = ids.get(buf, &tuples) {
                    id
                } else {
                    n += 1;
                    if n >= limits.states {
                        return Err(too_many());
                    }
                    tuples.extend_from_slice(buf);
                    ids.insert(&tuples, StateId(n as u32));
                    StateId(n as u32)
                };
                trans.push(t);
            }
            let t = &tuples[i * k..(i + 1) * k];
            accept.push(match combine {
                Combine::All => {
                    // Every positive part accepts, and no negated clause as a whole.
                    let accepts = |j: usize| parts[j].0.accept[t[j].index()];
                    (0..k).all(|j| clause_of[j].is_some() || accepts(j))
                        && negated.iter().all(|m| !m.iter().all(|&j| accepts(j)))
                }
                Combine::Any => parts.iter().zip(t).any(|((d, _), &s)| d.accept[s.index()]),
            });
            i += 1;
        }
        Ok((Dfa::from_rows(classes, stride, trans, accept, start), tuples))
    }

    /// This counter's automaton as a table (the same states, transitions and facts).
    pub(super) fn tabled(&self, c: &Counter) -> Dfa {
        let n = self.state_count();
        let mut trans = Vec::with_capacity(n * self.stride);
        for s in (0..n as u32).map(StateId) {
            trans.extend(c.reps.iter().map(|&b| c.next(s, b)));
        }
        let states = || (0..n as u32).map(StateId);
        Dfa {
            classes: self.classes,
            stride: self.stride,
            trans,
            accept: states().map(|s| c.is_accepting(s)).collect(),
            open: states().map(|s| c.can_continue(s)).collect(),
            dist: states().map(|s| c.dist(s)).collect(),
            start: self.start,
            dist_memo: OnceLock::new(),
            class_bytes: OnceLock::new(),
            id: next_id(),
            counter: None,
        }
    }

    /// Per byte class of a table (a product tables its counters first): does every state go
    /// dead on it?
    fn dead_classes(&self) -> Vec<bool> {
        debug_assert!(self.counter.is_none(), "a counter has no table to read");
        (0..self.stride).map(|c| self.trans.iter().skip(c).step_by(self.stride).all(|&t| t == StateId::DEAD)).collect()
    }
}

/// How a product's tuple accepts: every part as flagged ([`Dfa::product`]), or some part
/// ([`Dfa::union`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Combine {
    All,
    Any,
}

/// The byte classes of a product: the common refinement of the parts' ([`common_classes`]),
/// with the bytes that make every tuple dead as one class: those a positive part refuses in
/// every state (for a union: that every part refuses in every state).
fn product_classes(parts: &[(&Dfa, bool)], combine: Combine) -> ([u8; 256], Vec<u8>) {
    let mut dead_bytes = [combine == Combine::Any; 256];
    for (d, _) in parts.iter().filter(|(_, neg)| !neg) {
        let dead = d.dead_classes();
        for (b, slot) in dead_bytes.iter_mut().enumerate() {
            match combine {
                Combine::All => *slot |= dead[d.classes[b] as usize],
                Combine::Any => *slot &= dead[d.classes[b] as usize],
            }
        }
    }
    // Each part's classes with equal columns taken as one: a regex's classes are contiguous
    // ranges, so letters it treats alike on either side of one it tells apart are two classes
    // (`[a-b]`, `[d-z]` around `c`), and every class a product keeps multiplies its rows.
    let alike: Vec<[u8; 256]> = parts.iter().map(|(d, _)| d.alike_classes()).collect();
    refine(parts.iter().zip(&alike).map(|((d, _), a)| (a, d.stride)), &dead_bytes)
}

/// The state ids of a product's tuples: by a dense slot (mixed radix over the parts' state
/// counts) where there are at most `max_dense` tuples, else by hash. Hashed ids index the
/// product's flat tuple buffer (state `i`'s tuple is `tuples[(i - 1) * k..i * k]`): no copy of
/// a tuple per state, and a lookup compares against the buffer.
struct TupleIds {
    /// (part, its state count), the largest part first: the slot's digits, most significant
    /// first. The tuples that share the largest part's state are one run of slots, and where it
    /// moves a little per byte (a length counter: the next count) so do the slots a state's
    /// transitions look up, which then stay in cache (a quarter of the time of a pattern ∧
    /// length product went to slot lookups).
    radix: Vec<(usize, usize)>,
    slots: Option<SlotIds>,
    hashed: hashbrown::HashTable<StateId>,
}

impl TupleIds {
    fn new(parts: &[(&Dfa, bool)], max_dense: usize) -> TupleIds {
        let slots = parts
            .iter()
            .try_fold(1usize, |acc, (d, _)| acc.checked_mul(d.accept.len()))
            .filter(|&n| n <= max_dense)
            .map(SlotIds::new);
        let mut radix: Vec<(usize, usize)> = parts.iter().map(|(d, _)| d.accept.len()).enumerate().collect();
        radix.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
        TupleIds { radix, slots, hashed: hashbrown::HashTable::new() }
    }

    /// The slot of tuple `t`.
    #[inline]
    fn slot(radix: &[(usize, usize)], t: &[StateId]) -> usize {
        radix.iter().fold(0usize, |acc, &(j, n)| acc * n + t[j].index())
    }

    #[inline]
    fn hash(t: &[StateId]) -> u64 {
        use std::hash::Hasher;
        let mut h = FxHasher::default();
        t.iter().for_each(|s| h.write_u32(s.0));
        h.finish()
    }

    /// State `id`'s tuple in the flat buffer.
    #[inline]
    fn tuple(tuples: &[StateId], k: usize, id: StateId) -> &[StateId] {
        &tuples[(id.index() - 1) * k..id.index() * k]
    }

    /// The id of tuple `t`, if it has one; `tuples`: the numbered tuples so far.
    #[inline]
    fn get(&self, t: &[StateId], tuples: &[StateId]) -> Option<StateId> {
        match &self.slots {
            Some(v) => Some(v.get(Self::slot(&self.radix, t))).filter(|&id| id != StateId::DEAD),
            None => self.hashed.find(Self::hash(t), |&id| Self::tuple(tuples, t.len(), id) == t).copied(),
        }
    }

    /// Numbers the last tuple of `tuples` as `id`.
    #[inline]
    fn insert(&mut self, tuples: &[StateId], id: StateId) {
        let k = self.radix.len();
        let t = Self::tuple(tuples, k, id);
        match &mut self.slots {
            Some(v) => v.set(Self::slot(&self.radix, t), id),
            None => {
                self.hashed.insert_unique(Self::hash(t), id, |&other| Self::hash(Self::tuple(tuples, k, other)));
            }
        }
    }
}

/// The common refinement of the DFAs' byte classes, with one representative byte per class;
/// the `dead` bytes (which some positive part of a product refuses everywhere) form one class.
/// Classes are numbered in the order of their least byte (as the whole tuple of each byte's
/// classes would number them), refined one DFA at a time: a byte's class so far and its class
/// in the next DFA name its new class.
pub(super) fn common_classes<'a>(dfas: impl Iterator<Item = &'a Dfa>, dead: &[bool; 256]) -> ([u8; 256], Vec<u8>) {
    refine(dfas.map(|d| (&d.classes, d.stride)), dead)
}

/// [`common_classes`] of class tables (per byte a class below `stride`).
fn refine<'a>(tables: impl Iterator<Item = (&'a [u8; 256], usize)>, dead: &[bool; 256]) -> ([u8; 256], Vec<u8>) {
    // Before any DFA: the dead bytes, and the others.
    let mut refined = number_bytes(2, |b| usize::from(!dead[b as usize]));
    for (classes, stride) in tables {
        let (so_far, reps) = refined;
        refined = number_bytes(reps.len() * stride, |b| {
            // Dead bytes keep one class whatever the DFAs say.
            let next = if dead[b as usize] { 0 } else { classes[b as usize] as usize };
            so_far[b as usize] as usize * stride + next
        });
    }
    refined
}
