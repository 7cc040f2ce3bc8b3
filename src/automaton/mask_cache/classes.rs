//! Class tries for the lexer walk: a slice's trie read through the byte classes of the DFA that
//! walks it ([`ClassTrie`]), so tokens whose bytes the DFA cannot tell apart are walked once.
//!
//! The map is the DFA's own classes, or for a body slice (string content only: no `"`, `\` or
//! control byte) a coarser one: the classes that differ on no state the walk can reach from
//! its start over content bytes ([`content_classes`]). Inside a JSON string with escapes the
//! DFA's own classes split the letters (`\n` and `\q` differ), but after no content byte is a
//! backslash pending, so there the letters are one class again.
//!
//! A class trie costs about a pass over its slice's live nodes to build (about twice a walk
//! of them) and is kept per (slice, map) in the cache ([`ClassPolicy`]). As in renting before
//! buying, a DFA's walks of a slice go over the slice's own trie and are counted until they
//! have visited as many nodes as the slice has, divided by how many walks from distinct
//! states the DFA is likely to make ([`likely_walks`]: a count or a bounded format such as
//! `email`, a new state per character, makes many, each as large as the first; a plain
//! string few); the next asks for the class trie of its map. Before a DFA's first walk the
//! nodes below the first bytes it reads stand for the walk (an upper bound), so a count that
//! reads every letter buys at once, while walks of a few nodes, a key's name, never pay for a
//! class trie, nor for a map. It is never built where it would keep more than an eighth of
//! the slice's nodes or under a map that splits the letters ([`Slot::Refused`]), nor for
//! slices of fewer than [`MIN_NODES`] nodes. Content maps are kept per DFA with the states
//! they cover (for a count computed on the fly, its places: every row alike); their classes
//! are numbered by least byte, so DFAs that split content bytes alike share class tries.
//! Those of plain string content (any string bounded by length alone) are built ahead by
//! [`VocabEnv::prepare`] ([`MaskCache::prepare_content_tries`]).
//!
//! One entry's builds together read at most as many nodes as the largest slice has: past that,
//! a build waits for a later entry and the walk rents meanwhile, so the first mask in a new
//! string does not pay for every slice's class trie at once.
//!
//! Invariant: a walk through a class trie builds the very entry the walk of the slice's own
//! trie would (the same ids, groups, members in the same order and distances).

use std::collections::HashMap;
use std::ops::Not;
use std::sync::Arc;

use super::content::content_dfa;
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
    /// How many states (a count's places) `covers` holds.
    reach: usize,
}

/// The most walks from distinct states that [`likely_walks`] expects.
const MAX_LIKELY_WALKS: usize = 8;

/// How many walks of a slice `dfa` is likely to make, from distinct states, for the rent-or-buy
/// of its class trie: for a body slice, the states its content map holds for (walks from
/// content states reach only those), at most [`MAX_LIKELY_WALKS`]; as many for a count (a row
/// per character) or a DFA too large for a content map (`reach`: the states of the content
/// map found, if any). For the rest slice, one: rent until the walks have paid for the build.
fn likely_walks(dfa: &Dfa, body: bool, reach: Option<usize>) -> usize {
    match reach {
        _ if !body => 1,
        _ if dfa.counted_base().is_some() => MAX_LIKELY_WALKS,
        Some(reach) => reach.clamp(1, MAX_LIKELY_WALKS),
        None => MAX_LIKELY_WALKS,
    }
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
/// that lead nowhere, [`DEAD_CLASS`]), numbered by their least byte; every other byte is in
/// no body slice's token and maps to [`DEAD_CLASS`] too. With the states it holds for (a walk
/// from any of them may use it: what they reach, `from` reaches). `None` past
/// [`MAX_CONTENT_STATES`] states.
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
    // Other bytes are in no body slice's token: dead too. Classes numbered in the order of
    // their least byte, so that DFAs that split the content bytes alike share class tries.
    let mut map = [DEAD_CLASS; 256];
    let mut renumber = [DEAD_CLASS; 256];
    let mut next = 0u8;
    for b in (0..=255u8).filter(|&b| content_byte(b)) {
        let c = class_of[dfa.class(b) as usize];
        if c != DEAD_CLASS {
            if renumber[c as usize] == DEAD_CLASS {
                renumber[c as usize] = next;
                next += 1;
            }
            map[b as usize] = renumber[c as usize];
        }
    }
    Some(ContentMap { covers, map, reach: reached.len() })
}

/// A slice and a byte map: what a class trie is kept by.
pub(super) type ClassKey = (u32, ByteMap);

/// A slice and a DFA's [id](Dfa::id): what the walks of its own trie are counted by.
pub(super) type WalkKey = (u32, u64);

/// When the cache builds class tries.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ClassPolicy {
    /// Once a DFA's walks of a slice have visited as many nodes as the slice has, divided by
    /// the walks it is likely to make (see the module docs).
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
    /// ([`walked`](Self::walked); `None`: no class trie will be built for it). `pruned`: at
    /// most how many nodes the walk visits, pruned to the tokens holding a few bytes.
    /// `budget`: the slice nodes that builds for this entry may still read; a build takes its
    /// slice's nodes from it, and one past it waits for a later entry (the walk is rented
    /// meanwhile), so that no one mask pays for the tries of every slice at once.
    pub(super) fn class_trie(
        &self,
        env: &VocabEnv,
        part: usize,
        dfa: &Dfa,
        state: StateId,
        pruned: Option<usize>,
        budget: &mut usize,
    ) -> Result<Arc<ClassTrie>, Option<WalkKey>> {
        let slices = env.slices();
        let trie = slices.trie(part);
        let nodes = trie.node_count();
        let rent = (part as u32, dfa.id());
        let policy = self.class_policy();
        let body = part < slices.body.len();
        let walked = {
            let inner = self.lock();
            // A small slice's walks cost little.
            let small = nodes < MIN_NODES && policy != ClassPolicy::Eager;
            if policy == ClassPolicy::Off || small {
                return Err(None);
            }
            inner.walked.get(&rent).copied().unwrap_or(0)
        };
        // What one walk costs: as the walks so far measured it, or before the first, the
        // nodes below the first bytes the DFA reads, or where it is pruned the nodes holding
        // the bytes it keeps to (upper bounds). Rented while even the most walks expected
        // would not pay for the build.
        let walk = match walked {
            0 => {
                let reads = trie.first_bytes().filter(|&(b, _)| dfa.next(state, b) != StateId::DEAD).map(|(_, n)| n);
                reads.sum::<usize>().min(pruned.unwrap_or(usize::MAX))
            }
            w => w,
        };
        if policy != ClassPolicy::Eager && walk.saturating_mul(MAX_LIKELY_WALKS) < nodes {
            return Err(Some(rent));
        }
        let content = body.then(|| self.content_map(dfa, state)).flatten();
        let likely = likely_walks(dfa, body, content.map(|(_, reach)| reach));
        let map = content.map_or_else(|| own_map(dfa), |(map, _)| map);
        let key: ClassKey = (part as u32, map);
        match self.lock().class_tries.get(&key) {
            Some(Slot::Built(t)) => return Ok(t.clone()),
            Some(Slot::Refused) => return Err(None),
            None => {}
        }
        if policy != ClassPolicy::Eager && (walk.saturating_mul(likely) < nodes || nodes > *budget) {
            return Err(Some(rent));
        }
        *budget = budget.saturating_sub(nodes);
        match self.build_class_trie(env, key) {
            Slot::Built(t) => Ok(t),
            Slot::Refused => Err(None),
        }
    }

    /// Builds the class trie of `key` and keeps it (or that it was refused), outside the lock:
    /// another matcher may build the same, and the first kept wins.
    fn build_class_trie(&self, env: &VocabEnv, key: ClassKey) -> Slot {
        let (part, map) = (key.0 as usize, &key.1);
        let trie = env.slices().trie(part);
        let built = splits_letters(map)
            .not()
            .then(|| trie.by_classes(map, trie.node_count() / MIN_SHRINK + 1))
            .flatten()
            .map(Arc::new);
        let mut inner = self.lock();
        inner.reserve(300 + built.as_ref().map_or(0, |t| t.heap_bytes()));
        match inner.class_tries.entry(key).or_insert(built.map_or(Slot::Refused, Slot::Built)) {
            Slot::Built(t) => Slot::Built(t.clone()),
            Slot::Refused => Slot::Refused,
        }
    }

    /// Builds the class tries of plain string content ([`content_dfa`]'s content map) for the
    /// body slices large enough to have one: the map of every string whose length alone is
    /// bounded (`maxLength`, `minLength`), whose rows near the bound each walk the slices that
    /// their longest tokens no longer fit whole. What [`VocabEnv::prepare`] builds ahead of the
    /// first request; a cache emptied later builds them again on demand.
    pub(in crate::automaton) fn prepare_content_tries(&self, env: &VocabEnv) {
        let dfa = content_dfa();
        let Some(found) = content_classes(dfa, dfa.start()) else { return };
        let slices = env.slices();
        for part in (0..slices.body.len()).filter(|&p| slices.trie(p).node_count() >= MIN_NODES) {
            let key: ClassKey = (part as u32, found.map);
            if !self.lock().class_tries.contains_key(&key) {
                self.build_class_trie(env, key);
            }
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

    /// `dfa`'s content map for walks from `state` (one kept that covers it, or a new one),
    /// and how many states it holds for.
    fn content_map(&self, dfa: &Dfa, state: StateId) -> Option<(ByteMap, usize)> {
        // A map covers a counter's places, every row alike.
        let place = dfa.counted_base().map_or(state, |base| base.place(state));
        let covered = |inner: &Inner| {
            inner
                .content_maps
                .get(&dfa.id())?
                .iter()
                .find(|m| m.covers.get(place.index()) == Some(&true))
                .map(|m| (m.map, m.reach))
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
        let kept = (found.map, found.reach);
        let mut inner = self.lock();
        inner.reserve(found.covers.len() + 300);
        inner.content_maps.entry(dfa.id()).or_default().push(found);
        Some(kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::trie::ByteSet;
    use crate::vocab::Vocab;

    fn dfa(re: &str) -> Dfa {
        Dfa::from_hir(&crate::regular::regex::parse(re).unwrap(), Default::default()).unwrap()
    }

    /// A vocabulary whose three-letter slice is large enough for class tries: every
    /// lowercase triple, with a few multi-byte characters and a quote.
    fn env() -> Arc<VocabEnv> {
        let mut toks: Vec<Vec<u8>> = vec!["é".into(), "日".into(), b"a\"".to_vec()];
        toks.extend((0x20..0x7f).map(|b| vec![b]));
        for a in b'a'..=b'z' {
            for b in b'a'..=b'z' {
                toks.extend((b'a'..=b'z').map(|c| vec![a, b, c]));
            }
        }
        VocabEnv::new(Arc::new(Vocab::from_byte_tokens(toks, &[])))
    }

    /// The slice of [`env`]'s three-byte tokens.
    fn three_byte_part(env: &VocabEnv) -> usize {
        (0..env.slices().body.len()).find(|&p| env.slices().body[p].hi == 3).unwrap()
    }

    /// A string bounded by length alone splits content bytes as plain content does (the
    /// numbering by least byte makes the maps equal), so near its bound it walks the class
    /// tries `prepare` built: none is built or rented for it. A pattern splits them otherwise.
    #[test]
    fn bounded_strings_use_the_prepared_content_tries() {
        let plain = content_classes(content_dfa(), content_dfa().start()).unwrap().map;
        let bounded = dfa(r#""(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4}){0,40}""#);
        let near = bounded.run(bounded.start(), &[b"\"".as_slice(), &[b'a'; 38]].concat());
        assert_eq!(content_classes(&bounded, near).unwrap().map, plain);
        let letters = dfa(r#""[a-z]{0,40}""#);
        let in_letters = letters.run(letters.start(), b"\"a");
        assert_ne!(content_classes(&letters, in_letters).unwrap().map, plain);

        let env = env();
        env.prepare();
        let cache = env.mask_cache();
        let part = three_byte_part(&env);
        let built = cache.lock().class_tries.len();
        assert!(built >= 1, "prepare builds the content tries");
        assert!(
            cache.class_trie(&env, part, &bounded, near, None, &mut { usize::MAX }).is_ok(),
            "the prepared trie, at once"
        );
        assert_eq!(cache.lock().class_tries.len(), built, "no other built");
        assert!(cache.lock().walked.is_empty(), "no walk rented");
    }

    /// `prepare` takes the first mask inside an e-mail string: a schema's e-mail masks then
    /// build no class trie (the format's lexeme and its tries are shared).
    #[test]
    fn prepared_formats_leave_nothing_to_build() {
        use crate::automaton::{Compiled, Constraint};
        let env = env();
        env.prepare();
        let built = env.mask_cache().lock().class_tries.len();
        assert!(built >= 2, "plain content's tries and the e-mail's: {built}");
        let schema = serde_json::json!({"type": "object", "properties": {"to": {"type": "string", "format": "email"}}});
        let c = Compiled::new(&env, &Constraint::JsonSchema(schema, Default::default())).unwrap();
        let mut m = c.matcher();
        let mut mask = crate::vocab::TokenSet::new(env.vocab().len());
        for t in env.vocab().encode(br#"{"to":"abcdefghi@abcdef.org"}"#).unwrap() {
            m.fill_mask(&mut mask);
            assert!(mask.contains(t));
            m.commit(t).unwrap();
        }
        assert!(m.is_accepting());
        assert_eq!(env.mask_cache().lock().class_tries.len(), built, "nothing built for the request");
    }

    /// Before its first walk a DFA is rented unless what it may walk would pay for a build:
    /// a key read by a few first bytes rents, a count over all the letters buys at once.
    #[test]
    fn the_first_walk_rents_unless_it_would_pay() {
        let env = env();
        let cache = env.mask_cache();
        let part = three_byte_part(&env);
        let key = dfa(r#"abc"|abd""#);
        let walk = cache.class_trie(&env, part, &key, key.start(), None, &mut { usize::MAX });
        assert!(matches!(walk, Err(Some(_))), "a key's first walk is rented");
        let letters = dfa(r#""[a-z]{0,40}""#);
        let s = letters.run(letters.start(), b"\"");
        assert!(
            cache.class_trie(&env, part, &letters, s, None, &mut { usize::MAX }).is_ok(),
            "a count over every letter buys"
        );
    }

    /// A walk pruned to the tokens holding a few bytes rents, though the DFA reads every
    /// letter: the slice's nodes that hold those bytes bound it.
    #[test]
    fn a_pruned_walk_rents() {
        let env = env();
        let cache = env.mask_cache();
        let part = three_byte_part(&env);
        let slice = &env.slices().body[part];
        let mut avoid = ByteSet::default();
        avoid.insert("日".as_bytes()[0]);
        let pruned = slice.pruned_walk_nodes(&avoid);
        assert!(pruned > 0 && pruned * 8 < slice.trie.node_count(), "{pruned} of {}", slice.trie.node_count());
        let letters = dfa(r#""[a-z]{0,40}""#);
        let s = letters.run(letters.start(), b"\"");
        assert!(
            matches!(cache.class_trie(&env, part, &letters, s, Some(pruned), &mut { usize::MAX }), Err(Some(_))),
            "rented"
        );
        assert!(cache.class_trie(&env, part, &letters, s, None, &mut { usize::MAX }).is_ok(), "unpruned, it buys");
    }

    /// A build takes its slice's nodes from the entry's budget; one past what is left waits
    /// (the walk rents) for an entry with budget to spare.
    #[test]
    fn builds_past_the_budget_wait() {
        let env = env();
        let cache = env.mask_cache();
        let part = three_byte_part(&env);
        let nodes = env.slices().body[part].trie.node_count();
        let letters = dfa(r#""[a-z]{0,40}""#);
        let s = letters.run(letters.start(), b"\"");
        let mut budget = nodes - 1;
        assert!(matches!(cache.class_trie(&env, part, &letters, s, None, &mut budget), Err(Some(_))), "waits");
        assert_eq!(budget, nodes - 1, "nothing built, nothing taken");
        let mut budget = nodes + 5;
        assert!(cache.class_trie(&env, part, &letters, s, None, &mut budget).is_ok(), "built");
        assert_eq!(budget, 5);
    }
}
