//! Class tries for the lexer walk: a slice's trie read through the byte classes of the DFA that
//! walks it ([`ClassTrie`]), so tokens whose bytes the DFA cannot tell apart are walked once.
//!
//! The map is the DFA's own classes, or for a body slice (string content only: no `"`, `\` or
//! control byte) a coarser one: the classes that differ on no state the walk can reach from
//! its start over content bytes ([`content_classes`]). Inside a JSON string with escapes the
//! DFA's own classes split the letters (`\n` and `\q` differ), but after no content byte is a
//! backslash pending, so there the letters are one class again.
//!
//! A class trie costs about a pass over its slice to build and is kept per (slice, map) in
//! the cache ([`ClassPolicy`]). As in renting before buying, a DFA's walks of a slice go over
//! the slice's own trie and are counted until they have visited as many nodes as the slice
//! has; the next asks for the class trie of its map (walks of a few nodes, a key's name, never
//! pay for one, nor for a map). It is never built where it would keep more than an eighth of
//! the slice's nodes or under a map that splits the letters ([`Slot::Refused`]), nor for
//! slices of fewer than [`MIN_NODES`] nodes. Content maps are kept per DFA with the states
//! they cover (for a count computed on the fly, its places: every row alike).
//!
//! Invariant: a walk through a class trie builds the very entry the walk of the slice's own
//! trie would (the same ids, groups, members in the same order and distances).

use std::collections::HashMap;
use std::ops::Not;
use std::sync::Arc;

use super::{Inner, MaskCache};
use crate::automaton::VocabEnv;
use crate::regular::{Dfa, FxBuild, StateId};
use crate::vocab::class_trie::{ClassTrie, DEAD_CLASS};

/// A byte → class map.
pub(super) type ByteMap = [u8; 256];

/// The most states a content map's reach may cover.
const MAX_CONTENT_STATES: usize = 4096;

/// Slices with fewer nodes walk their own tries.
const MIN_NODES: usize = 2048;

/// A class trie is kept only if it has at most 1/`MIN_SHRINK` of its slice's nodes.
const MIN_SHRINK: usize = 8;

/// Does `map` split the ASCII letters into more than a few classes? Tokens are mostly letters:
/// under such a map the class strings are nearly as many as the tokens (no build is tried).
fn splits_letters(map: &ByteMap) -> bool {
    let mut seen = [false; 256];
    (b'a'..=b'z').chain(b'A'..=b'Z').for_each(|b| seen[map[b as usize] as usize] = true);
    seen.iter().filter(|&&s| s).count() > 6
}

/// A class trie, once asked for.
pub(super) enum Slot {
    Built(Arc<ClassTrie>),
    /// More than an eighth of the slice's nodes, or a map that splits the letters: the walk
    /// stays on the slice's trie.
    Refused,
}

/// A DFA's content map and the states it holds for ([`content_classes`]).
pub(super) struct ContentMap {
    covers: Vec<bool>,
    map: ByteMap,
}

/// Can `b` be a byte of a body slice's token (string content, or a prefix of some)?
fn content_byte(b: u8) -> bool {
    b >= 0x20 && b != b'"' && b != b'\\'
}

/// The DFA's own classes, as a map.
fn own_map(dfa: &Dfa) -> ByteMap {
    std::array::from_fn(|b| dfa.class(b as u8))
}

/// A map for walks of `dfa` from `from` over string content: content bytes that lead to the
/// same state from every state reachable from `from` over content bytes share a class (those
/// that lead nowhere, [`DEAD_CLASS`]); every other byte keeps its DFA class, apart from them.
/// With the states it holds for (a walk from any of them may use it: what they reach, `from`
/// reaches). `None` past [`MAX_CONTENT_STATES`] states.
///
/// A count computed on the fly has its rows for states: there the search is over its base's
/// places, and bytes share a class where they take every place reached to the same place,
/// completing a unit alike (see [`CountedBase`](crate::regular::CountedBase)); it holds for every row of those places.
pub(super) fn content_classes(dfa: &Dfa, from: StateId) -> Option<ContentMap> {
    match dfa.counted_base() {
        Some(base) => {
            let step = |q: StateId, b: u8| base.step(q, b);
            content_classes_by(dfa, base.table().state_count(), base.place(from), step)
        }
        None => content_classes_by(dfa, dfa.state_count(), from, |q, b| (dfa.next(q, b), false)),
    }
}

/// [`content_classes`] over `states` states stepped by `step` (the next state, and whether the
/// step completes a unit), from `from`.
fn content_classes_by(
    dfa: &Dfa,
    states: usize,
    from: StateId,
    step: impl Fn(StateId, u8) -> (StateId, bool),
) -> Option<ContentMap> {
    // One content byte per DFA class that has one.
    let mut reps: Vec<Option<u8>> = vec![None; 256];
    for b in (0..=255u8).filter(|&b| content_byte(b)) {
        reps[dfa.class(b) as usize].get_or_insert(b);
    }
    let reps: Vec<(u8, u8)> = reps.iter().enumerate().filter_map(|(c, r)| r.map(|r| (c as u8, r))).collect();
    let mut covers = vec![false; states];
    let mut reached = vec![from];
    covers[from.index()] = true;
    let mut i = 0;
    while let Some(&q) = reached.get(i) {
        i += 1;
        for &(_, b) in &reps {
            let (t, _) = step(q, b);
            if t != StateId::DEAD && !covers[t.index()] {
                if reached.len() == MAX_CONTENT_STATES {
                    return None;
                }
                covers[t.index()] = true;
                reached.push(t);
            }
        }
    }
    // A content class's signature: where its bytes lead from every reached state. Bytes that
    // kill every reached state are of the dead class (their tokens are left out).
    let mut by_signature: HashMap<Vec<(StateId, bool)>, u8, FxBuild> = HashMap::default();
    let mut class_of = [DEAD_CLASS; 256];
    for &(c, b) in &reps {
        let signature: Vec<(StateId, bool)> = reached.iter().map(|&q| step(q, b)).collect();
        if signature.iter().all(|&(t, _)| t == StateId::DEAD) {
            continue;
        }
        let n = by_signature.len() as u8;
        class_of[c as usize] = *by_signature.entry(signature).or_insert(n);
    }
    // Other bytes keep their DFA class, numbered after the content classes.
    let base = by_signature.len();
    let mut map = [0u8; 256];
    for b in 0..=255u8 {
        let c = dfa.class(b);
        map[b as usize] = match content_byte(b) {
            true => class_of[c as usize],
            false => u8::try_from(base + c as usize).ok().filter(|&k| k != DEAD_CLASS)?,
        };
    }
    Some(ContentMap { covers, map })
}

/// A slice and a byte map: what a class trie is kept by.
pub(super) type ClassKey = (u32, ByteMap);

/// A slice and a DFA's [id](Dfa::id): what the walks of its own trie are counted by.
pub(super) type WalkKey = (u32, u64);

/// When the cache builds class tries.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ClassPolicy {
    /// Once a DFA's walks of a slice have visited as many nodes as the slice has (see the
    /// module docs).
    #[default]
    Measured,
    /// At the first ask (tests: every walk that can goes through a class trie).
    Eager,
    /// Never.
    Off,
}

impl MaskCache {
    /// The class trie for a walk of slice `part` with `dfa` from `state` (see the module
    /// docs), or the key to count the walk of the slice's own trie under
    /// ([`walked`](Self::walked); `None`: no class trie will be built for it).
    pub(super) fn class_trie(
        &self,
        env: &VocabEnv,
        part: usize,
        dfa: &Dfa,
        state: StateId,
    ) -> Result<Arc<ClassTrie>, Option<WalkKey>> {
        let slices = env.slices();
        let nodes = slices.trie(part).node_count();
        let rent = (part as u32, dfa.id());
        let policy = self.class_policy();
        {
            let inner = self.lock();
            // A small slice's walks cost little.
            let small = nodes < MIN_NODES && policy != ClassPolicy::Eager;
            if policy == ClassPolicy::Off || small {
                return Err(None);
            }
            let walked = inner.walked.get(&rent).copied().unwrap_or(0);
            if walked < nodes && policy != ClassPolicy::Eager {
                return Err(Some(rent));
            }
        }
        let map = match part < slices.body.len() {
            true => self.content_map(dfa, state).unwrap_or_else(|| own_map(dfa)),
            false => own_map(dfa),
        };
        let key: ClassKey = (part as u32, map);
        match self.lock().class_tries.get(&key) {
            Some(Slot::Built(t)) => return Ok(t.clone()),
            Some(Slot::Refused) => return Err(None),
            None => {}
        }
        // Built outside the lock (another matcher may build the same: the first kept wins).
        let trie = slices.trie(part);
        let built = splits_letters(&map)
            .not()
            .then(|| trie.by_classes(&map, trie.node_count() / MIN_SHRINK + 1))
            .flatten()
            .map(Arc::new);
        let mut inner = self.lock();
        inner.reserve(300 + built.as_ref().map_or(0, |t| t.heap_bytes()));
        match inner.class_tries.entry(key).or_insert(built.map_or(Slot::Refused, Slot::Built)) {
            Slot::Built(t) => Ok(t.clone()),
            Slot::Refused => Err(None),
        }
    }

    /// Counts a walk of `steps` nodes of slice `key.0`'s own trie with DFA `key.1`.
    pub(super) fn walked(&self, key: WalkKey, steps: usize) {
        let mut inner = self.lock();
        if !inner.walked.contains_key(&key) {
            inner.reserve(32);
        }
        let walked = inner.walked.entry(key).or_insert(0);
        *walked = walked.saturating_add(steps);
    }

    /// `dfa`'s content map for walks from `state`: one kept that covers it, or a new one.
    fn content_map(&self, dfa: &Dfa, state: StateId) -> Option<ByteMap> {
        // A map covers a counter's places, every row alike.
        let place = dfa.counted_base().map_or(state, |base| base.place(state));
        let covered = |inner: &Inner| {
            inner
                .content_maps
                .get(&dfa.id())?
                .iter()
                .find(|m| m.covers.get(place.index()) == Some(&true))
                .map(|m| m.map)
        };
        {
            let inner = self.lock();
            if inner.no_content_map.contains(&dfa.id()) {
                return None;
            }
            if let Some(map) = covered(&inner) {
                return Some(map);
            }
        }
        let Some(found) = content_classes(dfa, state) else {
            let mut inner = self.lock();
            inner.reserve(16);
            inner.no_content_map.insert(dfa.id());
            return None;
        };
        let map = found.map;
        let mut inner = self.lock();
        inner.reserve(found.covers.len() + 300);
        inner.content_maps.entry(dfa.id()).or_default().push(found);
        Some(map)
    }
}
