//! `MaskCache`: per set of lexer states, the part of the mask that does not depend on the
//! parser, and the few places where it does.
//!
//! Between lexeme boundaries the Earley parser's position is a list of scans (terminal, DFA
//! state, origin row). While a token's bytes keep some scan alive, the token is allowed
//! whatever the rows are: a live scan can always be completed (see [`earley`](super::earley)).
//! So per *lexer key* (the scans' (DFA, state) pairs, in order) we walk the token trie once
//! with the DFAs alone (XGrammar's "context-independent tokens") and keep:
//! - `inside`: the tokens after which some scan of the key is still alive — copied into the
//!   mask wholesale (whole vocabulary slices at once where the key admits all string content
//!   up to the slice's length: one lexeme survives every such string, or each is survived by
//!   some lexeme — the keys of an object split between names, patterns and "any other name";
//!   or all of a slice but the tokens holding a few bytes, where string content without them
//!   keeps one lexeme alive and ends none: `[^/]+`, `.` refusing U+2028; the walk then visits
//!   only the subtrees holding such a byte, by the slice trie's per-node byte sets);
//! - `groups`: the trie nodes after whose byte some lexeme of the key may end, grouped by which
//!   of the key's lexemes end there. Every member of a group ends the same lexemes (with the
//!   same origins) and so builds the same boundary row; what follows the boundary depends only
//!   on the bytes after the member's node. So a group keeps the subtrees
//!   below its members merged into one trie where that is small (`below`: a path is a suffix,
//!   its ids the tokens that end with it), and [`CfgRun::fill`](super::cfg_run) builds the
//!   group's row once and walks what follows its members with the full Earley walker, from that
//!   row's fresh scans only (once over a merged trie). The ids of members where no scan goes on
//!   (`at`) are allowed iff that row is alive; under a token budget those of the other members
//!   (`at_going`, in `inside` too) are judged by that row's finish cost as well.
//!
//! Why this is the exact mask: a token is allowed iff some way of reading it survives. A way
//! either never ends a lexeme of the key (then some scan is alive after the last byte: `inside`)
//! or ends one for the first time after some byte; from there on it is a way from the row that
//! boundary builds, over the rest of the bytes (the group walk). Lexemes of the key ending
//! later on the same path are later members of other groups. Splitting the lexemes that end at
//! one byte into separate rows loses nothing: an Earley row closed from a union of completed
//! items is the union of the rows closed from each part (closure adds items from one premise
//! in the row at a time, or from a completed item and a partner in an earlier row, or — for
//! empty derivations — from items the same part already predicts).
//!
//! Under a token budget (how generation asks) an entry also bounds the finish cost of its
//! `inside` tokens (`inside_dist`, per scan: the farthest rest its lexeme may still need); when
//! the budget covers the bound the cached mask is used with the budget checked in the group
//! walks only, else the caller walks the whole trie. The DFA backend (a regular constraint)
//! uses the entry of its one DFA: its mask is `inside` and the groups' `at` ids.
//!
//! Entries are built lazily, on the first mask at a key, so compiling stays cheap. An entry
//! depends only on the vocabulary and the key's DFAs, which are shared across compiles
//! ([`Dfa::shared`]), so the cache lives in the [`Vocab`] and is keyed by DFA ids: every
//! constraint compiled for that vocabulary uses it (the state inside a plain JSON string is
//! the same in every schema). Merged subtrees depend on the vocabulary alone and are shared
//! between entries. Bounded by [`MAX_CACHE_BYTES`]: past it the cache is emptied and fills
//! again (entries in use live on in their `Arc`s).
//!
//! Invariant: an entry's `inside` has the vocabulary's width; `ends[g.start..g.end]` are
//! indices into the key, ascending, not empty.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use super::cfg::Cfg;
use super::earley::Scan;
use super::slices::Slices;
use super::VocabEnv;
use crate::regular::{Dfa, StateId, UNREACHABLE};
use crate::vocab::{trie::ByteSet, trie::TrieVisitor, TokenId, TokenSet, TokenTrie};

/// Most bytes all entries of one cache may take together.
pub const MAX_CACHE_BYTES: usize = 64 << 20;

/// Trie nodes where the same lexemes end (see the module docs).
pub struct Group {
    /// `Entry::ends[start..end]`: the scans (indices into the key) whose lexemes end.
    pub start: u32,
    pub end: u32,
    /// The ids spelled by members after which no scan goes on: allowed iff the row is alive.
    pub at: Vec<TokenId>,
    /// The ids spelled by the other members: in `inside` already, but under a token budget the
    /// way that ends the lexemes there may be the only one cheap enough.
    pub at_going: Vec<TokenId>,
    pub below: Below,
}

/// What follows a group's members.
pub enum Below {
    /// The members' strict subtrees merged into one trie: paths are the bytes after a member.
    /// Shared by every entry with the same members (e.g. every state inside a string that
    /// admits the same characters ends at the same closing quotes).
    Merged(Arc<TokenTrie>),
    /// The members themselves, (slice, trie node): a lone member, or subtrees too large to copy.
    Nodes(Vec<(u32, u32)>),
}

/// A group's subtrees are merged when it has several members and they hold at most this many
/// ids together; otherwise its walks start at the members in the vocabulary's own tries.
const MERGE_MAX_IDS: usize = 8192;

pub struct Entry {
    pub inside: TokenSet,
    /// Per scan of the key: the most usable bytes its lexeme still needs after a token of
    /// `inside` that it survives (`None`: it survives none). With the scan's wait cost this
    /// bounds the finish cost after every `inside` token, for masks under a token budget.
    pub inside_dist: Vec<Option<u32>>,
    pub groups: Vec<Group>,
    pub ends: Vec<u32>,
}

impl Entry {
    fn bytes(&self) -> usize {
        let below = |b: &Below| match b {
            Below::Merged(_) => 8,
            Below::Nodes(n) => n.len() * 8,
        };
        let groups: usize =
            self.groups.iter().map(|g| 64 + (g.at.len() + g.at_going.len()) * 4 + below(&g.below)).sum();
        self.inside.words().len() * 4 + groups + self.ends.len() * 4 + self.inside_dist.len() * 8 + 64
    }

    /// The entry for the scans of `dfas` in `states`; `merged` gives the merged trie of a list
    /// of members.
    fn build(
        dfas: &[&Dfa],
        dists: &[&[u32]],
        states: &[StateId],
        env: &VocabEnv,
        wholesale: &Wholesale,
        mut merged: impl FnMut(&[(u32, u32)]) -> Arc<TokenTrie>,
    ) -> Entry {
        let slices = env.slices();
        let reach = &wholesale.reach;
        let mut w = LexWalk {
            dfas,
            dists,
            inside_dist: vec![None; dfas.len()],
            slices,
            stack: ScanStack::default(),
            part: 0,
            inside: TokenSet::new(env.vocab().len()),
            ends: Vec::new(),
            index: HashMap::default(),
            ending: Vec::new(),
            members: Vec::new(),
            prune: None,
            dropped: Vec::new(),
        };
        // Per scan, the farthest rest of any live state of its DFA (computed when first needed).
        let mut far: Vec<Option<u32>> = vec![None; dists.len()];
        let mut note_far = |w: &mut LexWalk, k: usize| {
            let f = *far[k]
                .get_or_insert_with(|| dists[k].iter().copied().filter(|&d| d != UNREACHABLE).max().unwrap_or(0));
            w.note_dist(k, f);
        };
        for part in 0..=slices.body.len() {
            w.prune = None;
            if let Some(slice) = slices.body.get(part) {
                // Every string-content string up to `hi` bytes keeps some scan alive and ends no lexeme.
                if wholesale.admits(slice.hi) {
                    w.inside.union_clipped(&slice.mask);
                    // The scans no such string kills survive every token of the slice, in
                    // states unknown here: bound their rest by the farthest live state. (With
                    // none such, each token is survived by one scan or another: bound them all.)
                    let alone = wholesale.alone(slice.hi);
                    for (k, &(_, dead)) in reach.iter().enumerate() {
                        if dead > slice.hi || !alone {
                            note_far(&mut w, k);
                        }
                    }
                    continue;
                }
                // The slice's tokens without an avoided byte keep the survivor alive and end no
                // lexeme: taken wholesale; the walk visits only subtrees holding some avoided
                // byte and takes back the tokens it finds dead or ending.
                if let Some(&Some((k, avoid))) = wholesale.avoid.get(part) {
                    w.inside.union_clipped(&slice.mask);
                    note_far(&mut w, k);
                    w.prune = Some((avoid, &slice.bytes));
                }
            }
            w.part = part as u32;
            let trie = slices.trie(part);
            if let [dfa] = dfas {
                w.walk_one(dfa, states[0], trie);
            } else {
                w.stack.reset(states.iter().copied());
                trie.walk_visitor(&mut w);
            }
            for node in w.dropped.drain(..) {
                trie.node_ids(node).iter().chain(trie.ids_below(node)).for_each(|&id| w.inside.remove(id));
            }
        }
        let groups = w
            .members
            .into_iter()
            .map(|m| {
                let ids = || {
                    m.nodes.iter().map(|&(part, node)| slices.trie(part as usize).ids_below(node).len()).sum::<usize>()
                };
                let below = if m.nodes.len() > 1 && ids() <= MERGE_MAX_IDS {
                    Below::Merged(merged(&m.nodes))
                } else {
                    Below::Nodes(m.nodes)
                };
                Group { start: m.start, end: m.end, at: m.at, at_going: m.at_going, below }
            })
            .collect();
        Entry { inside: w.inside, inside_dist: w.inside_dist, groups, ends: w.ends }
    }
}

/// What a key admits of the body slices without a walk (see [`Entry::build`]).
struct Wholesale {
    /// Per scan, [`content_reach`]: the fewest bytes of string content to acceptance and to death.
    reach: Vec<(usize, usize)>,
    /// [`content_dead_all`] (0 when not searched).
    dead_all: usize,
    /// Per body slice not admitted whole: a scan that no string content without the bytes of
    /// the set kills (up to the slice's longest token), where no such string ends any scan's
    /// lexeme ([`avoid_set`]).
    avoid: Vec<Option<(usize, ByteSet)>>,
}

impl Wholesale {
    /// One scan survives every string of string content up to `hi` bytes.
    fn alone(&self, hi: usize) -> bool {
        self.reach.iter().any(|&(_, dead)| dead > hi)
    }

    /// Every string of string content up to `hi` bytes keeps some scan alive (one survives
    /// them all, or at least one survives each: `dead_all`) and none accepts within it.
    fn admits(&self, hi: usize) -> bool {
        self.reach.iter().all(|&(accept, _)| accept > hi) && (self.alone(hi) || self.dead_all > hi)
    }
}

/// What string content can do to a scan from one of its states, for taking slices wholesale
/// but for the tokens holding certain bytes ([`avoid_set`]). Over the (DFA state, content
/// state) pairs string content reaches (searched breadth-first, so each byte is known by the
/// shortest string where it matters):
#[derive(Debug)]
struct Hazards {
    /// Bytes whose absence keeps the scan alive with its lexeme unfinished: string content
    /// without them stays among pairs where only these bytes kill the DFA or make it accept.
    /// A byte into a pair where many bytes would ([`CUT_HAZARD_BYTES`]) counts too, and that
    /// pair is not explored: `[^:]+:[0-9a-f]+` needs `:` avoided, not every byte that kills a
    /// hex digit.
    survive: Depths,
    /// The bytes after which the DFA accepts.
    accept: Depths,
}

impl Hazards {
    /// Bytes held (for the cache bound): most are a few levels or none.
    fn bytes(&self) -> usize {
        96 + (self.survive.levels.len() + self.accept.levels.len()) * std::mem::size_of::<(usize, ByteSet)>()
    }
}

/// The bytes that matter (see [`Hazards`]) in strings of string content up to each length: a
/// byte is counted from the shortest string whose last byte it is and where it matters.
#[derive(Debug)]
struct Depths {
    /// (length, the bytes that matter up to it), one per length where the set grows, ascending.
    levels: Vec<(usize, ByteSet)>,
    /// The search saw every string up to this many bytes ([`HAZARD_WORK`] stops it; a lexeme of
    /// counted length has pairs for every count): the bytes are known for strings that long.
    horizon: usize,
}

impl Depths {
    /// The bytes that matter in strings of at most `hi` bytes; `None` past the horizon.
    fn within(&self, hi: usize) -> Option<ByteSet> {
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

/// [`Hazards`] from DFA state `state`, for strings up to `max` bytes.
fn content_hazards(dfa: &Dfa, state: StateId, max: usize) -> Hazards {
    let q = content_dfa();
    let reps = content_reps(dfa);
    // How many bytes each representative stands for.
    let rep_of = class_reps(dfa);
    let mut size = [0usize; 256];
    rep_of.iter().for_each(|&r| size[r as usize] += 1);
    let ends = |d: StateId| d == StateId::DEAD || dfa.is_accepting(d);
    let hazard_bytes = |d: StateId, c: StateId| {
        reps[c.index()].iter().filter(|&&(b, _)| ends(dfa.next(d, b))).map(|&(b, _)| size[b as usize]).sum::<usize>()
    };
    // One breadth-first search: `step(DFA state, content state, byte, depth, found)` is told
    // where a byte leads, notes the byte in `found` if it matters there, and says whether to go
    // on from that pair.
    let search = |step: &mut dyn FnMut(StateId, StateId, u8, u16, &mut [u16; 256]) -> bool| {
        let mut found = Box::new([u16::MAX; 256]);
        let mut seen = Visited::new(dfa.state_count(), q.state_count());
        seen.insert(state, q.start());
        let (mut frontier, mut work, mut depth) = (vec![(state, q.start())], 0, 0);
        while !frontier.is_empty() && depth < max && work <= HAZARD_WORK {
            depth += 1;
            let mut next = Vec::new();
            for &(d, c) in &frontier {
                for &(b, c2) in &reps[c.index()] {
                    work += 1;
                    let d2 = dfa.next(d, b);
                    if step(d2, c2, b, depth.min(usize::from(u16::MAX - 1)) as u16, &mut found) && seen.insert(d2, c2) {
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
            (0..=255u8).map(|b| (found[rep_of[b as usize] as usize], b)).filter(|&(len, _)| len != u16::MAX).collect();
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
    };
    let note = |found: &mut [u16; 256], b: u8, depth: u16| found[b as usize] = found[b as usize].min(depth);
    let survive = if hazard_bytes(state, q.start()) > MAX_AVOIDED {
        // More bytes end the scan at once than an avoided set may hold (a name's state): it
        // never survives for the others, so its search is skipped (known for no length).
        Depths { levels: Vec::new(), horizon: 0 }
    } else {
        let mut cut = Visited::new(dfa.state_count(), q.state_count());
        let mut judged = Visited::new(dfa.state_count(), q.state_count());
        search(&mut |d2, c2, b, depth, found| {
            if ends(d2) {
                note(found, b, depth);
                return false;
            }
            if judged.insert(d2, c2) && hazard_bytes(d2, c2) > CUT_HAZARD_BYTES {
                cut.insert(d2, c2);
            }
            // A string may end in a cut pair (it is alive, unfinished): the byte into it
            // matters only to longer strings.
            if cut.contains(d2, c2) {
                note(found, b, depth.saturating_add(1));
                return false;
            }
            true
        })
    };
    let accept = search(&mut |d2, _, b, depth, found| {
        if d2 != StateId::DEAD && dfa.is_accepting(d2) {
            note(found, b, depth);
        }
        d2 != StateId::DEAD
    });
    Hazards { survive, accept }
}

/// The longest character in UTF-8.
const MAX_CHAR_BYTES: usize = 4;

/// Most bytes an avoided set may hold: past it, too few subtrees are skipped to pay.
const MAX_AVOIDED: usize = 64;

/// For tokens of at most `hi` bytes, the scan to keep alive and the bytes to avoid: string
/// content without them keeps scan `k` alive with its lexeme unfinished (its `survive`) and
/// ends no other scan's lexeme (their `accept`). The scan needing the fewest such bytes; `None`
/// if no scan can do with at most [`MAX_AVOIDED`].
fn avoid_set(hazards: &[&Hazards], hi: usize) -> Option<(usize, ByteSet)> {
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

/// The strict subtrees below `nodes` ((slice, trie node) pairs) merged into one walk-only trie.
fn merge_subtrees(env: &VocabEnv, nodes: &[(u32, u32)]) -> TokenTrie {
    let slices = env.slices();
    let mut pairs = Vec::new();
    for &(part, node) in nodes {
        let trie = slices.trie(part as usize);
        let depth = trie.node_depth(node);
        pairs.extend(trie.ids_below(node).iter().map(|&id| (&env.vocab().bytes(id)[depth..], id)));
    }
    TokenTrie::build_walk_only(pairs)
}

/// The DFA of string content (see [`slices`](crate::vocab::slices)): any run of characters
/// other than controls, `"` and `\`.
fn content_dfa() -> &'static Dfa {
    static CONTENT: OnceLock<Dfa> = OnceLock::new();
    CONTENT.get_or_init(|| {
        let hir = crate::regular::regex::parse(r#"[^\x00-\x1f"\\]*"#).expect("valid regex");
        Dfa::from_hir(&hir, Default::default()).expect("small DFA")
    })
}

/// Each byte's representative: the first byte of its pair of (`dfa`'s class, content class).
/// Bytes of one pair step every (DFA state, content state) pair alike.
fn class_reps(dfa: &Dfa) -> [u8; 256] {
    let q = content_dfa();
    let width = |d: &Dfa| (0..=255u8).map(|b| d.class(b) as usize).max().unwrap_or(0) + 1;
    let nq = width(q);
    let mut first = vec![u16::MAX; width(dfa) * nq];
    let mut rep = [0u8; 256];
    for b in 0..=255u8 {
        let slot = &mut first[dfa.class(b) as usize * nq + q.class(b) as usize];
        if *slot == u16::MAX {
            *slot = b as u16;
        }
        rep[b as usize] = *slot as u8;
    }
    rep
}

/// Per content state, the representative bytes ([`class_reps`]) that are string content
/// there, with the content state after each.
fn content_reps(dfa: &Dfa) -> Vec<Vec<(u8, StateId)>> {
    let q = content_dfa();
    let rep = class_reps(dfa);
    let reps: Vec<u8> = (0..=255u8).filter(|&b| rep[b as usize] == b).collect();
    (0..q.state_count() as u32)
        .map(StateId)
        .map(|c| reps.iter().filter_map(|&b| Some((b, q.next(c, b))).filter(|&(_, c2)| c2 != StateId::DEAD)).collect())
        .collect()
}

/// From DFA state `state`, over strings of string-content characters (and their prefixes) of
/// at most `max` bytes: the fewest bytes after which the DFA can be accepting, and after which
/// it can be dead (`usize::MAX`: not within `max`). A search from the one state; see
/// [`content_reach_table`] for all states at once.
///
/// With `first`, the search stops at the first depth where either is found (the other may
/// then be reported as not found): enough where only the smaller of the two matters. `None`
/// past `work` (pair, byte class) steps.
fn content_reach(dfa: &Dfa, state: StateId, max: usize, first: bool, mut work: usize) -> Option<(usize, usize)> {
    let q = content_dfa();
    let reps = content_reps(dfa);
    let (mut accept, mut dead) = (usize::MAX, usize::MAX);
    let mut visited = Visited::new(dfa.state_count(), q.state_count());
    let mut frontier = vec![(state, q.start())];
    let mut depth = 0;
    let done = |accept: usize, dead: usize| {
        if first {
            accept != usize::MAX || dead != usize::MAX
        } else {
            accept != usize::MAX && dead != usize::MAX
        }
    };
    while !frontier.is_empty() && depth < max && !done(accept, dead) {
        depth += 1;
        let mut next = Vec::new();
        for &(d, c) in &frontier {
            work = work.checked_sub(reps[c.index()].len())?;
            for &(b, c2) in &reps[c.index()] {
                let d2 = dfa.next(d, b);
                if d2 == StateId::DEAD {
                    dead = dead.min(depth);
                    continue;
                }
                if dfa.is_accepting(d2) {
                    accept = accept.min(depth);
                }
                if visited.insert(d2, c2) {
                    next.push((d2, c2));
                }
            }
        }
        frontier = next;
    }
    Some((accept, dead))
}

/// The (DFA state, content state) pairs a search has met: a bitset over all pairs when that is
/// at most [`DENSE_VISITED_BITS`] bits (a hash set's inserts were most of a search), else a
/// hash set.
enum Visited {
    Dense { bits: Vec<u64>, nq: usize },
    Sparse(HashSet<(StateId, StateId), FxBuild>),
}

/// Largest pair space [`Visited`] keeps as a bitset (2 MiB).
const DENSE_VISITED_BITS: usize = 1 << 24;

impl Visited {
    fn new(nd: usize, nq: usize) -> Visited {
        match nd.checked_mul(nq).filter(|&n| n <= DENSE_VISITED_BITS) {
            Some(n) => Visited::Dense { bits: vec![0; n.div_ceil(64)], nq },
            None => Visited::Sparse(HashSet::default()),
        }
    }

    /// Is `(d, c)` marked?
    fn contains(&self, d: StateId, c: StateId) -> bool {
        match self {
            Visited::Dense { bits, nq } => {
                let i = d.index() * *nq + c.index();
                bits[i / 64] >> (i % 64) & 1 == 1
            }
            Visited::Sparse(set) => set.contains(&(d, c)),
        }
    }

    /// Marks `(d, c)`; `true` if it was new.
    fn insert(&mut self, d: StateId, c: StateId) -> bool {
        match self {
            Visited::Dense { bits, nq } => {
                let i = d.index() * *nq + c.index();
                let new = bits[i / 64] >> (i % 64) & 1 == 0;
                bits[i / 64] |= 1 << (i % 64);
                new
            }
            Visited::Sparse(set) => set.insert((d, c)),
        }
    }
}

/// Most (tuple, byte) steps [`content_dead_all`] takes before it gives up.
const DEAD_ALL_WORK: usize = 1 << 20;

/// Over strings of string-content characters of at most `max` bytes: the fewest bytes after
/// which the scans of `dfas` in `states` are all dead (`usize::MAX`: not within `max`). A key
/// of several lexemes may admit every such string although each one alone dies on some (the
/// keys of an object: each name dies on most strings, the lexeme of any other name on the
/// names). Searched breadth-first over the tuples of the scans' states; past
/// [`DEAD_ALL_WORK`] it gives up with 0, the answer that admits nothing.
fn content_dead_all(dfas: &[&Dfa], states: &[StateId], max: usize) -> usize {
    let q = content_dfa();
    // One byte per distinct tuple of classes (every DFA's and the content DFA's).
    let mut seen: HashSet<Vec<u16>, FxBuild> = HashSet::default();
    let reps: Vec<u8> = (0..=255u8)
        .filter(|&b| seen.insert(dfas.iter().map(|d| d.class(b) as u16).chain([q.class(b) as u16]).collect()))
        .collect();
    // A tuple, packed in `u32`s so that it hashes and compares as one slice: the content
    // state, then (scan, state) for each live scan, in scan order. States are read back with
    // `StateId(..)` where they are stepped.
    let start: Box<[u32]> =
        [q.start().0].into_iter().chain(states.iter().enumerate().flat_map(|(k, &s)| [k as u32, s.0])).collect();
    let mut visited: HashSet<Box<[u32]>, FxBuild> = HashSet::default();
    visited.insert(start.clone());
    let mut frontier = vec![start];
    let (mut work, mut t2) = (0, Vec::new());
    for depth in 1..=max {
        let mut next = Vec::new();
        for t in &frontier {
            for &b in &reps {
                work += 1;
                if work > DEAD_ALL_WORK {
                    return 0;
                }
                let c2 = q.next(StateId(t[0]), b);
                if c2 == StateId::DEAD {
                    continue;
                }
                t2.clear();
                t2.push(c2.0);
                for ks in t[1..].chunks_exact(2) {
                    let s2 = dfas[ks[0] as usize].next(StateId(ks[1]), b);
                    if s2 != StateId::DEAD {
                        t2.extend([ks[0], s2.0]);
                    }
                }
                if t2.len() == 1 {
                    return depth;
                }
                if !visited.contains(t2.as_slice()) {
                    let t2: Box<[u32]> = t2.as_slice().into();
                    visited.insert(t2.clone());
                    next.push(t2);
                }
            }
        }
        if next.is_empty() {
            break;
        }
        frontier = next;
    }
    usize::MAX
}

/// Most steps of the first search from a state of a DFA without a table: past it the DFA gets
/// one (see [`MaskCache::build`]).
const QUICK_REACH_WORK: usize = 4096;

/// DFAs with fewer states than this get no reach table (see [`content_reach_table`]).
const SMALL_DFA_STATES: usize = 64;

/// Most (pair, byte class) steps [`content_reach_table`] takes: a table costs about 4 ns a
/// step, paid by the first mask that needs it (a `maxLength` of 1,000 would be ~1.1M steps:
/// searched per state instead).
const REACH_TABLE_WORK: usize = 1 << 19;

/// [`content_reach`] for every state of `dfa` (without the `max` cut-off), by two
/// breadth-first searches backwards over the pairs (DFA state, content state) reachable from a
/// live state and the content DFA's start (both DFAs decode UTF-8, so few of all pairs are);
/// `None` when those are too many (then states are searched one by one, as they are met).
fn content_reach_table(dfa: &Dfa) -> Option<Vec<(usize, usize)>> {
    // A counter's keys are few canonical states, and a small DFA's searches are short (the key
    // of an object with hundreds of names built a table per name, ~15 µs each): searched one
    // by one, as they are met.
    if dfa.is_counter() || dfa.state_count() < SMALL_DFA_STATES {
        return None;
    }
    reach_table(dfa)
}

/// [`content_reach_table`] for any DFA, `None` only past [`REACH_TABLE_WORK`].
fn reach_table(dfa: &Dfa) -> Option<Vec<(usize, usize)>> {
    let q = content_dfa();
    let reps = content_reps(dfa);
    let most_reps = reps.iter().map(Vec::len).max().unwrap_or(0);
    let nd = dfa.state_count();
    let nq = q.state_count();
    // Pairs are numbered as they are found: the starts (d, start) are 0..nd (the dead state's
    // too, never stepped), the rest after them; `index` by d * nq + c, 0 for not yet found
    // (no pair but the dead state's start is numbered 0, and nothing steps to it).
    let mut index = vec![0u32; nd.checked_mul(nq)?];
    let mut pairs: Vec<(StateId, StateId)> = (0..nd as u32).map(|d| (StateId(d), q.start())).collect();
    for (i, &(d, c)) in pairs.iter().enumerate() {
        index[d.index() * nq + c.index()] = i as u32;
    }
    // Edges between live pairs (one per distinct successor: `seen[t] == i` marks `t` as
    // already linked from `i`; most bytes of a row lead to one pair), and the pairs one byte
    // from the goals.
    let (mut to_accept, mut to_dead) = (vec![false; nd], vec![false; nd]);
    let mut seen = vec![0u32; nd];
    let mut edges: Vec<(u32, u32)> = Vec::new();
    let mut i = 1;
    while i < pairs.len() {
        if pairs.len().saturating_mul(most_reps) > REACH_TABLE_WORK {
            return None;
        }
        let (d, c) = pairs[i];
        for &(b, c2) in &reps[c.index()] {
            let next = (dfa.next(d, b), c2);
            if next.0 == StateId::DEAD {
                to_dead[i] = true;
                continue;
            }
            to_accept[i] |= dfa.is_accepting(next.0);
            let slot = &mut index[next.0.index() * nq + next.1.index()];
            if *slot == 0 {
                *slot = pairs.len() as u32;
                pairs.push(next);
                to_accept.push(false);
                to_dead.push(false);
                seen.push(0);
            }
            if seen[*slot as usize] != i as u32 {
                seen[*slot as usize] = i as u32;
                edges.push((*slot, i as u32));
            }
        }
        i += 1;
    }
    let n = pairs.len();
    let far = |d: u32| if d == UNREACHABLE { usize::MAX } else { d as usize };
    let accept = crate::regular::dfa::backward_distances(n, &edges, (1..n).filter(|&i| to_accept[i]), 1);
    let dead = crate::regular::dfa::backward_distances(n, &edges, (1..n).filter(|&i| to_dead[i]), 1);
    Some((0..nd).map(|d| (far(accept[d]), far(dead[d]))).collect())
}

#[derive(Default)]
pub struct MaskCache {
    inner: Mutex<Inner>,
}

/// How far one token can move a lexer: the longest token, in bytes. Keys hold each state as
/// [`Dfa::canonical`] for it: states that read every token alike share one entry, built from
/// the canonical state (whose distances are at least theirs, so `inside_dist` stays a bound).
fn horizon(env: &VocabEnv) -> u32 {
    env.slices().longest.try_into().unwrap_or(u32::MAX)
}

/// A lexer key: the scans' (DFA id, [canonical](horizon) state) pairs, in order.
type Key = Box<[(u64, StateId)]>;

#[derive(Default)]
struct Inner {
    map: HashMap<Key, Arc<Entry>, FxBuild>,
    /// Merged subtrees by their members.
    merged: HashMap<Box<[(u32, u32)]>, Arc<TokenTrie>, FxBuild>,
    /// [`content_reach_table`] per DFA id.
    reach_tables: HashMap<u64, Option<Arc<[(usize, usize)]>>, FxBuild>,
    /// [`content_reach`] per (DFA id, state), for DFAs without a table.
    reach: HashMap<(u64, StateId), (usize, usize), FxBuild>,
    /// The same stopped at the first event (`first`), for keys of one scan: the smaller of
    /// the two distances.
    reach_first: HashMap<(u64, StateId), usize, FxBuild>,
    /// [`content_hazards`] per (DFA id, state).
    hazards: HashMap<(u64, StateId), Arc<Hazards>, FxBuild>,
    bytes: usize,
    /// What an emptying dropped, freed a little per call (see [`Inner::reserve`]).
    retired: Retired,
}

#[derive(Default)]
struct Retired {
    entries: Vec<Arc<Entry>>,
    tries: Vec<Arc<TokenTrie>>,
    tables: Vec<Arc<[(usize, usize)]>>,
}

/// Retired values freed per cache call.
const FREE_PER_CALL: usize = 8;

impl Inner {
    /// Makes room for `bytes` more: past [`MAX_CACHE_BYTES`] everything is dropped (entries in
    /// use live on in their `Arc`s) and the cache fills again with what is used now. Freeing
    /// tens of MiB at once would stall that one mask for milliseconds, so the dropped values
    /// are retired and freed a few per call instead.
    fn reserve(&mut self, bytes: usize) {
        if self.bytes + bytes > MAX_CACHE_BYTES {
            let old = std::mem::take(self);
            self.retired = old.retired;
            self.retired.entries.extend(old.map.into_values());
            self.retired.tries.extend(old.merged.into_values());
            self.retired.tables.extend(old.reach_tables.into_values().flatten());
        }
        self.bytes += bytes;
    }

    fn free_some(&mut self) {
        let r = &mut self.retired;
        for _ in 0..FREE_PER_CALL {
            if r.entries.pop().is_none() && r.tries.pop().is_none() && r.tables.pop().is_none() {
                break;
            }
        }
    }
}

impl MaskCache {
    /// Drops every entry now (entries in use live on in their `Arc`s): the next masks start
    /// cold. For measurements that must replay a first mask; a server never needs it.
    pub(crate) fn clear(&self) {
        *self.inner.lock().unwrap_or_else(|e| e.into_inner()) = Inner::default();
    }

    /// The entry for the lexer key of `scans` (terms of `cfg`), built now if it is new.
    pub fn get_or_build(&self, cfg: &Cfg, env: &VocabEnv, scans: &[Scan]) -> Arc<Entry> {
        let term = |sc: &Scan| cfg.term(sc.term);
        let horizon = horizon(env);
        let key: Vec<(u64, StateId)> =
            scans.iter().map(|sc| (term(sc).dfa.id(), term(sc).dfa.canonical(sc.state, horizon))).collect();
        if let Some(e) = self.get(&key) {
            return e;
        }
        let dfas: Vec<&Dfa> = scans.iter().map(|sc| &*term(sc).dfa).collect();
        let dists: Vec<&[u32]> = scans.iter().map(|sc| &*term(sc).dist).collect();
        let states: Vec<StateId> = key.iter().map(|&(_, s)| s).collect();
        self.build(env, key, &dfas, &dists, &states)
    }

    /// The entry for the scans of `dfas` in `states` (`dists`: each DFA's fewest usable bytes
    /// to acceptance, [`Dfa::dist_using`] for this vocabulary). The DFA backend asks with its one
    /// DFA: its mask is `inside` and the groups' `at` ids (nothing may follow its lexeme).
    pub fn get_or_build_for(&self, env: &VocabEnv, dfas: &[&Dfa], dists: &[&[u32]], states: &[StateId]) -> Arc<Entry> {
        let horizon = horizon(env);
        let key: Vec<(u64, StateId)> =
            dfas.iter().zip(states).map(|(d, &s)| (d.id(), d.canonical(s, horizon))).collect();
        match self.get(&key) {
            Some(e) => e,
            None => {
                let states: Vec<StateId> = key.iter().map(|&(_, s)| s).collect();
                self.build(env, key, dfas, dists, &states)
            }
        }
    }

    /// The cached entry for `key` (and a few retired values freed on the way).
    fn get(&self, key: &[(u64, StateId)]) -> Option<Arc<Entry>> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.free_some();
        inner.map.get(key).cloned()
    }

    /// Builds and keeps the entry for `key` (the scans of `dfas` in `states`).
    fn build(
        &self,
        env: &VocabEnv,
        key: Vec<(u64, StateId)>,
        dfas: &[&Dfa],
        dists: &[&[u32]],
        states: &[StateId],
    ) -> Arc<Entry> {
        // The shortest and the longest slice: every search below stops past the longest.
        let his = || env.slices().body.iter().map(|s| s.hi);
        let (hi_min, hi) = (his().min().unwrap_or(0), his().max().unwrap_or(0));
        let reach: Vec<(usize, usize)> = {
            let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            let mut reach = Vec::with_capacity(key.len());
            // One scan: a slice is admitted when both distances exceed its length, so only
            // the smaller one is needed, and the search may stop at the first event (a
            // product of a format and a length, with no table, explored every state within
            // the longest slice from each new state: milliseconds per mask).
            let single = key.len() == 1;
            for (&k, d) in key.iter().zip(dfas) {
                let cached = match single {
                    true => inner.reach_first.get(&k).map(|&m| (m, m)),
                    false => inner.reach.get(&k).copied(),
                };
                let search = |work: usize| {
                    let r = content_reach(d, k.1, hi, single, work)?;
                    Some(if single { (r.0.min(r.1), r.0.min(r.1)) } else { r })
                };
                // A DFA gets its table when a search from one of its states runs long: a short
                // search costs less than any table (a key pattern, a string that dies on a few
                // bytes), a state of a long bounded string that meets nothing within the
                // longest slice does not.
                let r = match (cached, inner.reach_tables.get(&k.0)) {
                    (Some(r), _) => r,
                    (None, Some(Some(t))) => t[k.1.index()],
                    (None, Some(None)) => search(usize::MAX).expect("no work bound"),
                    (None, None) => match search(QUICK_REACH_WORK) {
                        Some(r) => r,
                        None => {
                            let t: Option<Arc<[(usize, usize)]>> = content_reach_table(d).map(Arc::from);
                            inner.reserve(t.as_ref().map_or(0, |t| t.len() * 16) + 32);
                            inner.reach_tables.insert(k.0, t.clone());
                            match t {
                                Some(t) => t[k.1.index()],
                                None => search(usize::MAX).expect("no work bound"),
                            }
                        }
                    },
                };
                if cached.is_none() && !matches!(inner.reach_tables.get(&k.0), Some(Some(_))) {
                    inner.reserve(32);
                    if single {
                        inner.reach_first.insert(k, r.0);
                    } else {
                        inner.reach.insert(k, r);
                    }
                }
                reach.push(r);
            }
            reach
        };
        // Built outside the lock: another matcher may build the same entry meanwhile (same value).
        let merged = |nodes: &[(u32, u32)]| {
            if let Some(t) = self.inner.lock().unwrap_or_else(|e| e.into_inner()).merged.get(nodes) {
                return t.clone();
            }
            let t = Arc::new(merge_subtrees(env, nodes));
            let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            inner.reserve(t.node_count() * 12 + t.id_count() * 4 + nodes.len() * 8 + 32);
            inner.merged.entry(nodes.into()).or_insert(t).clone()
        };
        // Several scans, none of which accepts within a slice: they may admit it together.
        let dead_all = if key.len() > 1 && reach.iter().all(|&(accept, dead)| accept > hi_min && dead <= hi) {
            content_dead_all(dfas, states, hi)
        } else {
            0
        };
        let mut wholesale = Wholesale { reach, dead_all, avoid: Vec::new() };
        // Some slice is not admitted whole: perhaps all of it but the tokens with a few bytes.
        // Bytes that kill a lexeme kill it within a character of where they come; a scan that
        // string content kills only later (a length bound) does not die of a few bytes, and
        // the search would cost more than it saves (a state of a 128-character string: 200 µs).
        let soon = wholesale.reach.iter().any(|&(_, dead)| dead <= MAX_CHAR_BYTES);
        if soon && !wholesale.admits(hi) {
            let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            let hazards: Vec<Arc<Hazards>> = key
                .iter()
                .zip(dfas)
                .map(|(&k, d)| match inner.hazards.get(&k) {
                    Some(h) => h.clone(),
                    None => {
                        let h = Arc::new(content_hazards(d, k.1, hi));
                        inner.reserve(h.bytes());
                        inner.hazards.insert(k, h.clone());
                        h
                    }
                })
                .collect();
            let hazards: Vec<&Hazards> = hazards.iter().map(|h| &**h).collect();
            wholesale.avoid = env
                .slices()
                .body
                .iter()
                .map(|slice| if wholesale.admits(slice.hi) { None } else { avoid_set(&hazards, slice.hi) })
                .collect();
        }
        let entry = Arc::new(Entry::build(dfas, dists, states, env, &wholesale, merged));
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.reserve(entry.bytes() + key.len() * 12 + 32);
        inner.map.entry(key.into()).or_insert(entry).clone()
    }
}

/// A group while it is being collected.
struct Members {
    start: u32,
    end: u32,
    at: Vec<TokenId>,
    at_going: Vec<TokenId>,
    /// (part, trie node).
    nodes: Vec<(u32, u32)>,
}

use crate::regular::FxBuild;

/// The (scan index, DFA state) pairs of a lexer-only trie walk, per depth: one flat buffer,
/// with each depth's range in `levels` (the base level holds the scans' starting states).
#[derive(Default)]
pub(super) struct ScanStack {
    buf: Vec<(u32, StateId)>,
    levels: Vec<(u32, u32)>,
}

impl ScanStack {
    pub fn reset(&mut self, states: impl Iterator<Item = StateId>) {
        self.buf.clear();
        self.buf.extend(states.enumerate().map(|(k, s)| (k as u32, s)));
        self.levels.clear();
        self.levels.push((0, self.buf.len() as u32));
    }

    /// The pairs of the deepest level.
    pub fn top(&self) -> &[(u32, StateId)] {
        let (start, end) = *self.levels.last().expect("base level");
        &self.buf[start as usize..end as usize]
    }

    /// Steps the deepest level's pairs by `next` (`None`: the scan does not go on); keeps the
    /// results as a new level and returns `true`, or keeps nothing and returns `false` if none
    /// goes on.
    #[inline]
    pub fn descend(&mut self, mut next: impl FnMut(u32, StateId) -> Option<StateId>) -> bool {
        let (start, end) = *self.levels.last().expect("base level");
        for i in start as usize..end as usize {
            let (k, s) = self.buf[i];
            if let Some(t) = next(k, s) {
                self.buf.push((k, t));
            }
        }
        if self.buf.len() == end as usize {
            return false;
        }
        self.levels.push((end, self.buf.len() as u32));
        true
    }

    #[inline]
    pub fn pop(&mut self) {
        let (start, _) = self.levels.pop().expect("pushed level");
        self.buf.truncate(start as usize);
    }
}

/// The lexer-only trie walk that builds an [`Entry`].
struct LexWalk<'a> {
    /// The key's DFAs and their distances to acceptance (the terms' `dist`), by key index.
    dfas: &'a [&'a Dfa],
    dists: &'a [&'a [u32]],
    inside_dist: Vec<Option<u32>>,
    slices: &'a Slices,
    stack: ScanStack,
    /// The slice being walked.
    part: u32,
    inside: TokenSet,
    ends: Vec<u32>,
    /// A group's ending scans → its index in `members`.
    index: HashMap<Box<[u32]>, u32, FxBuild>,
    /// The scans ending at the current node.
    ending: Vec<u32>,
    members: Vec<Members>,
    /// While a slice is taken wholesale but for tokens holding an avoided byte: those bytes,
    /// and the slice trie's [byte sets](TokenTrie::byte_sets). Subtrees without one are skipped.
    prune: Option<(ByteSet, &'a [ByteSet])>,
    /// Nodes where no scan goes on, while pruning: their tokens and those below them leave
    /// `inside` after the walk.
    dropped: Vec<u32>,
}

impl LexWalk<'_> {
    fn note_dist(&mut self, k: usize, d: u32) {
        let m = &mut self.inside_dist[k];
        *m = Some(m.map_or(d, |m| m.max(d)));
    }

    /// The walk for a key of one scan (most keys): the same result as the visitor walk, with
    /// the state on the trie walk's own stack.
    fn walk_one(&mut self, dfa: &Dfa, state: StateId, trie: &TokenTrie) {
        let (mut nodes, mut at, mut at_going) = (Vec::new(), Vec::new(), Vec::new());
        let part = self.part;
        let inside = &mut self.inside;
        let dist = self.dists[0];
        let mut far: Option<u32> = None;
        let (prune, dropped) = (self.prune, &mut self.dropped);
        trie.walk_nodes(
            state,
            |s, byte, node| {
                if prune.is_some_and(|(avoid, sets)| !sets[node as usize].meets(&avoid)) {
                    return None;
                }
                let next = dfa.next(s, byte);
                let goes_on = next != StateId::DEAD && dfa.can_continue(next);
                if next != StateId::DEAD && dfa.is_accepting(next) {
                    nodes.push((part, node));
                    if goes_on { &mut at_going } else { &mut at }.extend_from_slice(trie.node_ids(node));
                }
                if !goes_on && prune.is_some() {
                    dropped.push(node);
                }
                goes_on.then_some(next)
            },
            |s: StateId, ids| {
                far = Some(far.map_or(dist[s.index()], |f| f.max(dist[s.index()])));
                ids.iter().for_each(|&id| inside.insert(id));
            },
        );
        if let Some(f) = far {
            self.note_dist(0, f);
        }
        if !nodes.is_empty() {
            self.ending.clear();
            self.ending.push(0);
            let m = self.group();
            m.nodes.extend(nodes);
            m.at.extend(at);
            m.at_going.extend(at_going);
        }
    }

    /// The group of the nodes where the scans `self.ending` end.
    fn group(&mut self) -> &mut Members {
        let g = match self.index.get(self.ending.as_slice()) {
            Some(&g) => g,
            None => {
                let g = self.members.len() as u32;
                let st = self.ends.len() as u32;
                self.ends.extend_from_slice(&self.ending);
                self.members.push(Members {
                    start: st,
                    end: self.ends.len() as u32,
                    at: Vec::new(),
                    at_going: Vec::new(),
                    nodes: Vec::new(),
                });
                self.index.insert(self.ending.as_slice().into(), g);
                g
            }
        };
        &mut self.members[g as usize]
    }
}

impl TrieVisitor for LexWalk<'_> {
    #[inline]
    fn push(&mut self, node: u32, byte: u8) -> bool {
        if self.prune.is_some_and(|(avoid, sets)| !sets[node as usize].meets(&avoid)) {
            return false;
        }
        self.ending.clear();
        let (dfas, ending) = (self.dfas, &mut self.ending);
        let goes_on = self.stack.descend(|k, s| {
            let dfa = dfas[k as usize];
            let next = dfa.next(s, byte);
            if next == StateId::DEAD {
                return None;
            }
            if dfa.is_accepting(next) {
                ending.push(k);
            }
            // As in `Chart::step`: a scan that cannot read another byte lives on only as the
            // lexeme's end.
            dfa.can_continue(next).then_some(next)
        });
        if !self.ending.is_empty() {
            let (part, slices) = (self.part, self.slices);
            let m = self.group();
            m.nodes.push((part, node));
            if goes_on { &mut m.at_going } else { &mut m.at }
                .extend_from_slice(slices.trie(part as usize).node_ids(node));
        }
        if !goes_on && self.prune.is_some() {
            self.dropped.push(node);
        }
        goes_on
    }

    #[inline]
    fn pop(&mut self) {
        self.stack.pop();
    }

    fn tokens(&mut self, ids: &[TokenId]) {
        for &id in ids {
            self.inside.insert(id);
        }
        for i in 0..self.stack.top().len() {
            let (k, s) = self.stack.top()[i];
            let d = self.dists[k as usize][s.index()];
            self.note_dist(k as usize, d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reach_table_equals_the_search_from_each_state() {
        let lexemes = [
            r#""(?:[^"\\]|\\["\\/bfnrtu]){0,5}""#,
            r#""[a-z]{2,4}é""#,
            r#"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?"#,
            r#"[ \t\n]{0,3}"x\\y" ?:"#,
        ];
        for re in lexemes {
            let dfa = Dfa::from_hir(&crate::regular::regex::parse(re).unwrap(), Default::default()).unwrap();
            let table = reach_table(&dfa).expect("small");
            for s in (1..dfa.state_count() as u32).map(StateId) {
                assert_eq!(
                    Some(table[s.index()]),
                    content_reach(&dfa, s, usize::MAX, false, usize::MAX),
                    "{re} state {s}"
                );
                // Stopped at the first event: the smaller distance, whatever the cut-off.
                for max in [1, 3, usize::MAX] {
                    let (a, d) = content_reach(&dfa, s, max, false, usize::MAX).unwrap();
                    let (fa, fd) = content_reach(&dfa, s, max, true, usize::MAX).unwrap();
                    assert_eq!(a.min(d), fa.min(fd), "{re} state {s} max {max}");
                }
            }
        }
    }

    #[test]
    fn scans_together_survive_what_each_alone_dies_on() {
        let dfa = |re: &str| Dfa::from_hir(&crate::regular::regex::parse(re).unwrap(), Default::default()).unwrap();
        let dead_all = |res: &[&str], max: usize| {
            let dfas: Vec<Dfa> = res.iter().map(|re| dfa(re)).collect();
            let refs: Vec<&Dfa> = dfas.iter().collect();
            let states: Vec<StateId> = dfas.iter().map(|d| d.start()).collect();
            content_dead_all(&refs, &states, max)
        };
        // A name, names starting with `_`, and every other name: no content string kills all.
        let keys = [r#"name""#, r#"_[^"\\]*""#, r#"[^_"\\][^"\\]*""#];
        for &re in &keys {
            let alone = content_reach(&dfa(re), dfa(re).start(), 50, false, usize::MAX).unwrap().1;
            assert!(alone <= 1, "{re} alone dies at once on some byte: {alone}");
        }
        assert_eq!(dead_all(&keys, 50), usize::MAX);
        // Without the last: a string of one other byte kills both.
        assert_eq!(dead_all(&keys[..2], 50), 1);
        // Up to three other characters, or `_` then anything: "abcd" kills both after four bytes.
        let short = [r#"[^_"\\][^"\\]{0,2}"#, r#"_[^"\\]*"#];
        assert_eq!(dead_all(&short, 50), 4);
        assert_eq!(dead_all(&short, 3), usize::MAX);
    }

    #[test]
    fn hazards_are_the_bytes_that_kill_or_accept() {
        let dfa = |re: &str| Dfa::from_hir(&crate::regular::regex::parse(re).unwrap(), Default::default()).unwrap();
        let set = |bytes: &[u8]| {
            let mut s = ByteSet::default();
            bytes.iter().for_each(|&b| s.insert(b));
            s
        };
        let hz = |d: &Dfa| content_hazards(d, d.start(), 64);
        // Inside a string of anything but `/`, `a`-`c` and U+2029 (E2 80 A9): those kill it (a
        // class's representative stands for the whole class), and no content byte ends it.
        let h = hz(&dfa("[^/a-c\u{2029}\"\\\\]*\""));
        assert_eq!(h.survive.within(64), Some(set(b"/abc\xa9")));
        assert_eq!(h.survive.within(1), Some(set(b"/abc")), "U+2029 is three bytes");
        assert_eq!(h.accept.within(1000), Some(ByteSet::default()), "every pair was searched");
        // Free text accepts after any byte that ends a character, and dies on none.
        let free = dfa("[^\\n]*");
        let h = hz(&free);
        let accept = h.accept.within(64).expect("small");
        assert!(accept.contains(b'a') && accept.contains(0xa9) && !accept.contains(0xe2));
        // It could survive unfinished only avoiding all of those: not searched at all.
        assert_eq!(h.survive.within(1), None);
        // Past `:` only hex digits go on: the pair after it is cut, not explored, so `:` is
        // the one byte to avoid (exploring it would avoid every byte but the digits).
        let h = hz(&dfa("[^:\"\\\\]+:[0-9a-f]+\""));
        assert_eq!(h.survive.within(64), Some(set(b":")));
        // A length bound: every byte kills the string past it, none before.
        let bounded = dfa("[^<\"\\\\]{0,5}\"");
        let h = hz(&bounded);
        assert_eq!(h.survive.within(5), Some(set(b"<")));
        let sixth = h.survive.within(6).expect("searched");
        assert!(sixth.contains(b'a') && sixth.len() > 90, "a sixth character kills it");
        let h = content_hazards(&bounded, bounded.start(), 3);
        assert_eq!((h.survive.within(3), h.survive.within(4)), (Some(set(b"<")), None), "searched up to 3 bytes");
        // The survivor needing the fewest bytes avoided, and every other scan's accepting bytes.
        let (name, slash, word) = (hz(&dfa("x\"")), hz(&dfa("[^/\"\\\\]*\"")), hz(&dfa("[a-z]*")));
        let free = hz(&free);
        assert_eq!(avoid_set(&[&name, &slash], 64), Some((1, set(b"/"))));
        assert_eq!(avoid_set(&[&slash, &word], 64), Some((0, set(b"/abcdefghijklmnopqrstuvwxyz"))));
        assert_eq!(avoid_set(&[&slash, &free], 64), None, "free text ends on too many bytes");
    }
}
