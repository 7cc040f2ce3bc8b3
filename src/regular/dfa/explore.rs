//! [`explore`]: the breadth-first construction every table-building path shares (states of
//! any hashable type, numbered densely in discovery order, dead ends pruned at the end), and
//! [`SlotIds`], state ids by dense slot.

use std::collections::HashMap;

use super::{Dfa, StateId};
use crate::error::{Error, Result};
use crate::regular::FxBuild;

/// State ids by slot ([`StateId::DEAD`]: not numbered yet; no slot holds the dead state) for a
/// slot space too large to zero up front: pages of ids, each allocated when a slot in it is
/// first numbered. `format: uri` (476 states) ∧ `maxLength` 255 (a 3,843-state counter) has
/// 1.8 million slots of which 16,525 are reached; zeroing them all (7 MiB; up to 16 MiB) was a
/// fifth of that compile in a fresh process.
pub(super) struct SlotIds {
    pages: Vec<Option<Box<[StateId; SLOT_PAGE]>>>,
}

/// Slots per page: small, because reached slots are sparse where the largest part moves with
/// every byte (`multipleOf: 12` over an integer reached one slot per 1,024-slot page, 3,001
/// pages of zeros for a few thousand states).
const SLOT_PAGE: usize = 64;

impl SlotIds {
    pub(super) fn new(slots: usize) -> SlotIds {
        SlotIds { pages: std::iter::repeat_with(|| None).take(slots.div_ceil(SLOT_PAGE)).collect() }
    }

    #[inline]
    pub(super) fn get(&self, slot: usize) -> StateId {
        self.pages[slot / SLOT_PAGE].as_ref().map_or(StateId::DEAD, |p| p[slot % SLOT_PAGE])
    }

    #[inline]
    pub(super) fn set(&mut self, slot: usize, id: StateId) {
        self.pages[slot / SLOT_PAGE].get_or_insert_with(|| Box::new([StateId::DEAD; SLOT_PAGE]))[slot % SLOT_PAGE] = id;
    }
}

/// Keys numbered by a dense slot instead of a hash (`slots` slots, `slot(k) < slots`, one key
/// per slot): for constructions whose states can be indexed directly.
type DenseSlots<'a, K> = (usize, &'a dyn Fn(&K) -> usize);

/// Builds a [`Dfa`] by exploring states of type `K` breadth-first from `start` (`None`: the
/// empty language): `step(k, byte)` is the next state (`None`: dead), `accepting(k)` whether `k`
/// accepts. States are numbered densely in discovery order after the dead state 0; past
/// `limit` states the build fails with `too_many()`. Transitions are asked once per byte class,
/// of its representative byte in `reps`. Dead ends are pruned at the end.
#[allow(clippy::too_many_arguments)]
pub(super) fn explore<K: std::hash::Hash + Eq + Clone>(
    classes: [u8; 256],
    reps: &[u8],
    start: Option<K>,
    limit: usize,
    step: impl FnMut(&K, u8) -> Result<Option<K>>,
    accepting: impl Fn(&K) -> bool,
    too_many: impl Fn() -> Error,
    dense: Option<DenseSlots<'_, K>>,
) -> Result<Dfa> {
    explore_keys(classes, reps, start, limit, step, accepting, too_many, dense).map(|(dfa, _)| dfa)
}

/// [`explore`], with the state each id stands for: `keys[i - 1]` is state `i` (pruning merges
/// dead ends into the dead state but renumbers nothing).
#[allow(clippy::too_many_arguments)]
pub(super) fn explore_keys<K: std::hash::Hash + Eq + Clone>(
    classes: [u8; 256],
    reps: &[u8],
    start: Option<K>,
    limit: usize,
    mut step: impl FnMut(&K, u8) -> Result<Option<K>>,
    accepting: impl Fn(&K) -> bool,
    too_many: impl Fn() -> Error,
    dense: Option<DenseSlots<'_, K>>,
) -> Result<(Dfa, Vec<K>)> {
    let stride = reps.len();
    let mut ids: HashMap<K, StateId, FxBuild> = HashMap::default();
    let mut slot_ids = SlotIds::new(dense.map_or(0, |(n, _)| n));
    let mut order: Vec<K> = Vec::new(); // order[i - 1] is state i
    let mut number = |k: K, order: &mut Vec<K>| -> Result<StateId> {
        use std::collections::hash_map::Entry;
        if let Some((_, slot)) = dense {
            let at = slot(&k);
            if slot_ids.get(at) != StateId::DEAD {
                return Ok(slot_ids.get(at));
            }
            if order.len() + 1 >= limit {
                return Err(too_many());
            }
            order.push(k);
            slot_ids.set(at, StateId(order.len() as u32));
            return Ok(StateId(order.len() as u32));
        }
        match ids.entry(k) {
            Entry::Occupied(e) => Ok(*e.get()),
            Entry::Vacant(e) => {
                if order.len() + 1 >= limit {
                    return Err(too_many());
                }
                order.push(e.key().clone());
                Ok(*e.insert(StateId(order.len() as u32)))
            }
        }
    };
    let start = match start {
        Some(k) => number(k, &mut order)?,
        None => StateId::DEAD,
    };
    let mut trans = vec![StateId::DEAD; stride]; // the dead state's row
    let mut accept = vec![false];
    let mut i = 0;
    while i < order.len() {
        let k = order[i].clone();
        for &rep in reps {
            let t = match step(&k, rep)? {
                Some(next) => number(next, &mut order)?,
                None => StateId::DEAD,
            };
            trans.push(t);
        }
        accept.push(accepting(&k));
        i += 1;
    }
    Ok((Dfa::from_rows(classes, stride, trans, accept, start), order))
}
