//! Slices taken wholesale but for the tokens holding a few bytes ([`avoid_set`]).
//!
//! Where a key does not admit a whole body slice ([`wholesale`](super::wholesale)), it may
//! still admit every token of it that lacks certain bytes: string content without `/` keeps
//! `[^/]+` alive and ends no lexeme of the key, so only the subtrees holding a `/` need the
//! walk. Per scan, one breadth-first search over (DFA state, content state) pairs finds the
//! bytes that matter in strings up to each length ([`Hazards`]): those whose absence keeps the
//! scan alive and unfinished, and those after which it accepts. A slice is then taken whole
//! but for the tokens holding a byte that one scan must avoid to survive or that some other
//! scan accepts after.
//!
//! A count computed on the fly (`regular::dfa::counter`) has a state per (row, place), and a
//! byte of content moves it to a new row: its searches tell pairs apart by place where the rows
//! within reach read alike ([`PairKeys`]), and near its bound, where every token reaches a
//! state of its own, one search per place is kept and cut to what the bound lets it read
//! ([`Dfa::shared_reading`]).

use std::sync::Arc;

use super::content::{class_reps, content_dfa, content_reps, PairKeys, Visited};
use super::{MaskCache, ScanKey};
use crate::regular::{Dfa, StateId};
use crate::vocab::trie::ByteSet;

/// What string content can do to a scan from one of its states, for taking slices wholesale
/// but for the tokens holding certain bytes ([`avoid_set`]). Over the (DFA state, content
/// state) pairs string content reaches (searched breadth-first, so each byte is known by the
/// shortest string where it matters):
#[derive(Debug)]
pub(super) struct Hazards {
    /// Bytes whose absence keeps the scan alive with its lexeme unfinished: string content
    /// without them stays among pairs where only these bytes kill the DFA or make it accept.
    /// A byte into a pair where many bytes would ([`CUT_HAZARD_BYTES`]) counts too, and that
    /// pair is not explored: `[^:]+:[0-9a-f]+` needs `:` avoided, not every byte that kills a
    /// hex digit.
    pub survive: Depths,
    /// The bytes after which the DFA accepts.
    pub accept: Depths,
}

impl Hazards {
    /// The same for strings of at most `depth` bytes (unknown past it).
    pub fn within_depth(&self, depth: usize) -> Hazards {
        Hazards { survive: self.survive.within_depth(depth), accept: self.accept.within_depth(depth) }
    }

    /// Bytes held (for the cache bound): most are a few levels or none.
    pub fn bytes(&self) -> usize {
        96 + (self.survive.levels.len() + self.accept.levels.len()) * std::mem::size_of::<(usize, ByteSet)>()
    }
}

/// The bytes that matter (see [`Hazards`]) in strings of string content up to each length: a
/// byte is counted from the shortest string whose last byte it is and where it matters.
#[derive(Debug)]
pub(super) struct Depths {
    /// (length, the bytes that matter up to it), one per length where the set grows, ascending.
    levels: Vec<(usize, ByteSet)>,
    /// The search saw every string up to this many bytes ([`HAZARD_WORK`] stops it; a lexeme of
    /// counted length has pairs for every count): the bytes are known for strings that long.
    horizon: usize,
}

impl Depths {
    /// The same for strings of at most `depth` bytes (unknown past it).
    fn within_depth(&self, depth: usize) -> Depths {
        let levels = self.levels.iter().copied().filter(|&(len, _)| len <= depth).collect();
        Depths { levels, horizon: self.horizon.min(depth) }
    }

    /// The bytes that matter in strings of at most `hi` bytes; `None` past the horizon.
    pub fn within(&self, hi: usize) -> Option<ByteSet> {
        if hi > self.horizon {
            return None;
        }
        let n = self.levels.partition_point(|&(len, _)| len <= hi);
        Some(n.checked_sub(1).map_or(ByteSet::default(), |i| self.levels[i].1))
    }
}

/// Most (pair, byte class) steps each search of [`content_hazards`] takes: it stops at the end
/// of the depth it is in.
const HAZARD_WORK: usize = 1 << 16;

/// A pair where more bytes than this kill the DFA or make it accept is not explored for
/// [`Hazards::survive`]: the byte into it is avoided instead.
const CUT_HAZARD_BYTES: usize = 32;

/// Most bytes an avoided set may hold: past it, too few subtrees are skipped to pay.
const MAX_AVOIDED: usize = 64;

impl MaskCache {
    /// [`content_hazards`] for each scan of `key` (the scans of `dfas`), for strings up to `hi`
    /// bytes: kept per (DFA id, state). Near a count's bound, where every token reaches a state
    /// of its own, they are kept for a state that reads alike as far as the bound lets
    /// ([`Dfa::shared_reading`]) and cut there.
    pub(super) fn hazards(&self, key: &[ScanKey], dfas: &[&Dfa], hi: usize) -> Vec<Arc<Hazards>> {
        let mut inner = self.lock();
        key.iter()
            .zip(dfas)
            .map(|(&(id, state), d)| {
                let (shared, depth) = d.shared_reading(state, u32::try_from(hi).unwrap_or(u32::MAX));
                let h = match inner.hazards.get(&(id, shared)) {
                    Some(h) => h.clone(),
                    None => {
                        let h = Arc::new(content_hazards(d, shared, hi));
                        inner.reserve(h.bytes());
                        inner.hazards.insert((id, shared), h.clone());
                        h
                    }
                };
                match (depth as usize) < hi {
                    true => Arc::new(h.within_depth(depth as usize)),
                    false => h,
                }
            })
            .collect()
    }
}

/// Per byte, the shortest string length at which a search found that it matters
/// ([`NOT_FOUND`]: at none).
type Found = [u16; 256];

/// A [`Found`] entry for a byte that matters nowhere.
const NOT_FOUND: u16 = u16::MAX;

/// One step of [`search_depths`]: told where a byte leads (DFA state, content state, the byte,
/// the depth), it notes the byte in [`Found`] if it matters there and says whether to go on
/// from that pair.
type Step<'a> = dyn FnMut(StateId, StateId, u8, u16, &mut Found) -> bool + 'a;

/// [`Hazards`] from DFA state `state`, for strings up to `max` bytes.
pub(super) fn content_hazards(dfa: &Dfa, state: StateId, max: usize) -> Hazards {
    content_hazards_by(dfa, state, max, PairKeys::new(dfa, state, max))
}

/// [`content_hazards`], its searches telling pairs apart by `keys`.
pub(super) fn content_hazards_by(dfa: &Dfa, state: StateId, max: usize, keys: PairKeys<'_>) -> Hazards {
    let q = content_dfa();
    let reps = content_reps(dfa);
    let rep_of = class_reps(dfa);
    // How many bytes each representative stands for.
    let mut size = [0usize; 256];
    rep_of.iter().for_each(|&r| size[r as usize] += 1);
    let ends = |d: StateId| d == StateId::DEAD || dfa.is_accepting(d);
    let hazard_bytes = |d: StateId, c: StateId| {
        reps[c.index()].iter().filter(|&&(b, _)| ends(dfa.next(d, b))).map(|&(b, _)| size[b as usize]).sum::<usize>()
    };
    let note = |found: &mut Found, b: u8, depth: u16| found[b as usize] = found[b as usize].min(depth);
    let survive = if hazard_bytes(state, q.start()) > MAX_AVOIDED {
        // More bytes end the scan at once than an avoided set may hold (a name's state): it
        // never survives for the others, so its search is skipped (known for no length).
        Depths { levels: Vec::new(), horizon: 0 }
    } else {
        let mut cut = Visited::new(keys.count, q.state_count());
        let mut judged = Visited::new(keys.count, q.state_count());
        search_depths(dfa, state, max, &reps, &rep_of, &keys, &mut |d2, c2, b, depth, found| {
            if ends(d2) {
                note(found, b, depth);
                return false;
            }
            if judged.insert(keys.of(d2), c2) && hazard_bytes(d2, c2) > CUT_HAZARD_BYTES {
                cut.insert(keys.of(d2), c2);
            }
            // A string may end in a cut pair (it is alive, unfinished): the byte into it
            // matters only to longer strings.
            if cut.contains(keys.of(d2), c2) {
                note(found, b, depth.saturating_add(1));
                return false;
            }
            true
        })
    };
    let accept = search_depths(dfa, state, max, &reps, &rep_of, &keys, &mut |d2, _, b, depth, found| {
        if d2 != StateId::DEAD && dfa.is_accepting(d2) {
            note(found, b, depth);
        }
        d2 != StateId::DEAD
    });
    Hazards { survive, accept }
}

/// One breadth-first search of [`content_hazards`] from `state` over strings of string content
/// up to `max` bytes (`reps`, `rep_of`: [`content_reps`] and [`class_reps`] of `dfa`), `step`
/// judging each byte where it leads: the bytes it noted, by the shortest length where they
/// matter.
fn search_depths(
    dfa: &Dfa,
    state: StateId,
    max: usize,
    reps: &[Vec<(u8, StateId)>],
    rep_of: &[u8; 256],
    keys: &PairKeys<'_>,
    step: &mut Step<'_>,
) -> Depths {
    let q = content_dfa();
    let mut found: Box<Found> = Box::new([NOT_FOUND; 256]);
    let mut seen = Visited::new(keys.count, q.state_count());
    seen.insert(keys.of(state), q.start());
    let (mut frontier, mut work, mut depth) = (vec![(state, q.start())], 0, 0);
    while !frontier.is_empty() && depth < max && work <= HAZARD_WORK {
        depth += 1;
        let mut next = Vec::new();
        for &(d, c) in &frontier {
            for &(b, c2) in &reps[c.index()] {
                work += 1;
                let d2 = dfa.next(d, b);
                if step(d2, c2, b, depth.min(usize::from(NOT_FOUND - 1)) as u16, &mut found)
                    && seen.insert(keys.of(d2), c2)
                {
                    work += reps[c2.index()].len();
                    next.push((d2, c2));
                }
            }
        }
        frontier = next;
    }
    // With the frontier empty every pair was met: longer strings add nothing.
    let horizon = if frontier.is_empty() { usize::MAX } else { depth };
    // The representatives stand for every byte of their (DFA class, content class) pair.
    let mut by_len: Vec<(u16, u8)> =
        (0..=255u8).map(|b| (found[rep_of[b as usize] as usize], b)).filter(|&(len, _)| len != NOT_FOUND).collect();
    by_len.sort_unstable();
    let mut levels: Vec<(usize, ByteSet)> = Vec::new();
    for (len, b) in by_len {
        let mut set = levels.last().map_or(ByteSet::default(), |l| l.1);
        set.insert(b);
        match levels.last_mut() {
            Some(l) if l.0 == len as usize => l.1 = set,
            _ => levels.push((len as usize, set)),
        }
    }
    Depths { levels, horizon }
}

/// For tokens of at most `hi` bytes, the scan to keep alive and the bytes to avoid: string
/// content without them keeps scan `k` alive with its lexeme unfinished (its `survive`) and
/// ends no other scan's lexeme (their `accept`). The scan needing the fewest such bytes; `None`
/// if no scan can do with at most [`MAX_AVOIDED`].
pub(super) fn avoid_set(hazards: &[&Hazards], hi: usize) -> Option<(usize, ByteSet)> {
    // The union of every other scan's accepting bytes, from unions before and after each scan
    // (a key of a hundred names would otherwise take ten thousand unions per slice).
    let accepts: Vec<Option<ByteSet>> = hazards.iter().map(|h| h.accept.within(hi)).collect();
    let union = |a: Option<ByteSet>, b: Option<ByteSet>| {
        let (mut a, b) = (a?, b?);
        a.union(&b);
        Some(a)
    };
    let mut after = vec![Some(ByteSet::default()); accepts.len() + 1];
    for k in (0..accepts.len()).rev() {
        after[k] = union(after[k + 1], accepts[k]);
    }
    let mut before = Some(ByteSet::default());
    let mut best: Option<(usize, ByteSet)> = None;
    for (k, h) in hazards.iter().enumerate() {
        if let Some(avoid) = union(union(h.survive.within(hi), before), after[k + 1]) {
            if best.is_none_or(|(_, b)| avoid.len() < b.len()) {
                best = Some((k, avoid));
            }
        }
        before = union(before, accepts[k]);
    }
    best.filter(|(_, avoid)| avoid.len() <= MAX_AVOIDED)
}
