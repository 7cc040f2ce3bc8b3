//! Products: intersections and complements of DFAs ([`Dfa::product`]), states numbered by a
//! dense slot where the tuple space is small, else by hash.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::explore::SlotIds;
use super::{next_id, Counter, Dfa, DfaLimits, StateId};
use crate::error::{Error, LimitKind, Result};
use crate::regular::FxBuild;

impl Dfa {
    /// The product of `parts`: it accepts a string when every part accepts it, or, for a part
    /// flagged `true` (negated), does *not* accept it. States are the reachable tuples of part
    /// states, numbered breadth-first; byte classes are the common refinement of the parts'.
    ///
    /// A negated part in its dead state accepts every continuation, which is exactly the
    /// complement of "no continuation matches": the parts' dead-end pruning is what makes
    /// complementing by flipping acceptance correct. A tuple with a positive part dead is dead.
    pub fn product<D: std::ops::Deref<Target = Dfa>>(parts: &[(D, bool)], limits: DfaLimits) -> Result<Dfa> {
        // Where the tuple space is small enough, tuples are numbered by their slot (mixed
        // radix over the parts' state counts) instead of a hash.
        Dfa::product_numbered(parts, limits, 1 << 22)
    }

    /// [`product`](Dfa::product), numbering tuples by slot when there are at most
    /// `max_dense` of them (the same table either way: the numbering is breadth-first).
    pub(super) fn product_numbered<D: std::ops::Deref<Target = Dfa>>(
        parts: &[(D, bool)],
        limits: DfaLimits,
        max_dense: usize,
    ) -> Result<Dfa> {
        let k = parts.len();
        // A counter computed on the fly is tabled first: the product reads each of its rows
        // once per tuple it appears in, and a table lookup is several times cheaper.
        let tabled: Vec<Option<Dfa>> = parts.iter().map(|(d, _)| d.counter.as_ref().map(|c| d.tabled(c))).collect();
        let parts: Vec<(&Dfa, bool)> =
            parts.iter().zip(&tabled).map(|((d, neg), t)| (t.as_ref().unwrap_or(&**d), *neg)).collect();
        let parts = &parts[..];
        // Bytes that a positive part refuses in every state make every tuple dead: one class.
        let mut dead_bytes = [false; 256];
        for (d, _) in parts.iter().filter(|(_, neg)| !neg) {
            let dead = d.dead_classes();
            for (b, slot) in dead_bytes.iter_mut().enumerate() {
                *slot |= dead[d.classes[b] as usize];
            }
        }
        let (classes, reps) = common_classes(parts.iter().map(|(d, _)| *d), &dead_bytes);
        let too_many = || Error::Limit {
            kind: LimitKind::DfaStates,
            what: "DFA states for an intersection or complement of regexes".into(),
            limit: limits.states,
            hint: Some(
                "the combined constraints (pattern, length, format, excluded values) expand to too many states".into(),
            ),
        };
        // A tuple with a positive part dead is dead.
        let live = |t: &[StateId]| !parts.iter().zip(t).any(|((_, neg), &s)| !neg && s == StateId::DEAD);
        // The same breadth-first numbering as `explore`, with the tuples kept flat (state `i`
        // is `tuples[(i - 1) * k..i * k]`) and looked up by slice, so that a transition to a
        // known tuple allocates nothing (products are most of compile time).
        let mut ids: HashMap<Box<[StateId]>, StateId, FxBuild> = HashMap::default();
        let dense: Option<SlotIds> = parts
            .iter()
            .try_fold(1usize, |acc, (d, _)| acc.checked_mul(d.accept.len()))
            .filter(|&n| n <= max_dense)
            .map(SlotIds::new);
        // The largest part is the slot's most significant digit: the tuples that share its
        // state are one run of slots, and where it moves a little per byte (a length counter:
        // the next count) so do the slots a state's transitions look up, which then stay in
        // cache (a quarter of the time of a pattern ∧ length product went to slot lookups).
        let mut radix: Vec<usize> = (0..k).collect();
        radix.sort_by_key(|&j| std::cmp::Reverse(parts[j].0.accept.len()));
        let slot = |t: &[StateId]| radix.iter().fold(0usize, |acc, &j| acc * parts[j].0.accept.len() + t[j].index());
        let mut slot_ids = dense;
        let mut tuples: Vec<StateId> = parts.iter().map(|(d, _)| d.start).collect();
        let start = if live(&tuples) {
            if limits.states <= 1 {
                return Err(too_many());
            }
            match slot_ids.as_mut() {
                Some(v) => v.set(slot(&tuples), StateId(1)),
                None => {
                    ids.insert(tuples.clone().into_boxed_slice(), StateId(1));
                }
            }
            StateId(1)
        } else {
            tuples.clear();
            StateId::DEAD
        };
        let stride = reps.len();
        let mut trans = vec![StateId::DEAD; stride];
        let mut accept = vec![false];
        let mut buf = vec![StateId::DEAD; k];
        let mut n = usize::from(start != StateId::DEAD);
        let mut i = 0;
        while i < n {
            for &rep in &reps {
                for j in 0..k {
                    buf[j] = parts[j].0.next(tuples[i * k + j], rep);
                }
                let known = || match slot_ids.as_ref() {
                    Some(v) => Some(v.get(slot(&buf))).filter(|&id| id != StateId::DEAD),
                    None => ids.get(&buf[..]).copied(),
                };
                let t = if !live(&buf) {
                    StateId::DEAD
                } else if let Some(id) = known() {
                    id
                } else {
                    n += 1;
                    if n >= limits.states {
                        return Err(too_many());
                    }
                    match slot_ids.as_mut() {
                        Some(v) => v.set(slot(&buf), StateId(n as u32)),
                        None => {
                            ids.insert(buf.clone().into_boxed_slice(), StateId(n as u32));
                        }
                    }
                    tuples.extend_from_slice(&buf);
                    StateId(n as u32)
                };
                trans.push(t);
            }
            let t = &tuples[i * k..(i + 1) * k];
            accept.push(parts.iter().zip(t).all(|((d, neg), &s)| d.accept[s.index()] != *neg));
            i += 1;
        }
        let mut dfa = Dfa {
            classes,
            stride,
            trans,
            accept,
            open: Vec::new(),
            dist: Vec::new(),
            start,
            dist_memo: OnceLock::new(),
            id: next_id(),
            counter: None,
        };
        dfa.prune_dead_ends();
        Ok(dfa)
    }

    /// This counter's automaton as a table (the same states, transitions and facts).
    pub(super) fn tabled(&self, c: &Counter) -> Dfa {
        let n = self.accept.len();
        let mut trans = Vec::with_capacity(n * self.stride);
        for s in (0..n as u32).map(StateId) {
            trans.extend(c.reps.iter().map(|&b| c.next(s, b)));
        }
        Dfa {
            classes: self.classes,
            stride: self.stride,
            trans,
            accept: self.accept.clone(),
            open: self.open.clone(),
            dist: self.dist.clone(),
            start: self.start,
            dist_memo: OnceLock::new(),
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

/// The common refinement of the DFAs' byte classes, with one representative byte per class;
/// the `dead` bytes (which some positive part of a product refuses everywhere) form one class.
pub(super) fn common_classes<'a>(
    dfas: impl Iterator<Item = &'a Dfa> + Clone,
    dead: &[bool; 256],
) -> ([u8; 256], Vec<u8>) {
    let mut classes = [0u8; 256];
    let mut reps: Vec<u8> = Vec::new();
    let mut class_of: HashMap<Vec<u8>, u8> = HashMap::new();
    let mut key: Vec<u8> = Vec::new();
    for b in 0..=255u8 {
        key.clear();
        // `dead` bytes share one key that no other byte has (an empty one).
        if !dead[b as usize] {
            key.extend(dfas.clone().map(|d| d.classes[b as usize]));
        }
        classes[b as usize] = match class_of.get(&key) {
            Some(&c) => c,
            None => {
                reps.push(b);
                class_of.insert(key.clone(), (reps.len() - 1) as u8);
                (reps.len() - 1) as u8
            }
        };
    }
    (classes, reps)
}
