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
//! ([`Dfa::shared`]), so the cache lives in the [`VocabEnv`] and is keyed by DFA ids: every
//! constraint compiled for that vocabulary uses it (the state inside a plain JSON string is
//! the same in every schema). Merged subtrees depend on the vocabulary alone and are shared
//! between entries. Bounded by [`MAX_CACHE_BYTES`]: past it the cache is emptied and fills
//! again (entries in use live on in their `Arc`s).
//!
//! Files: the cache, its keys and entries here; `walk` (the lexer walk that builds an entry),
//! `wholesale` (which slices a key admits whole), `hazards` (which it admits but for the
//! tokens holding a few bytes), `content` (the string-content automaton those searches run
//! over), `merge` (merged subtrees), `classes` (class tries: a slice's trie read through the
//! byte classes of the DFA that walks it), `inside` (the tokens inside counted lexemes grouped
//! by where they leave them, shared by the rows of a count, for budgeted masks).
//!
//! Invariant: an entry's `inside` has the vocabulary's width; `ends[g.start..g.end]` are
//! indices into the key, ascending, not empty.

mod classes;
mod content;
mod hazards;
mod inside;
mod merge;
#[cfg(test)]
mod tests;
mod walk;
mod wholesale;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::cfg::Cfg;
use super::earley::Scan;
use super::VocabEnv;
use crate::regular::{Dfa, Distances, FxBuild, StateId, UNREACHABLE};
use crate::vocab::class_trie::ClassTrie;
use crate::vocab::{TokenId, TokenSet, TokenTrie};
use hazards::Hazards;
use wholesale::Reach;

pub use classes::ClassPolicy;
pub use inside::InsideGroups;
pub(super) use walk::ScanStack;

/// Most bytes all entries of one cache may take together.
pub const MAX_CACHE_BYTES: usize = 64 << 20;

/// One scan of a lexer key: its DFA's [id](Dfa::id) and its [canonical](horizon) state.
type ScanKey = (u64, StateId);

/// A lexer key: the scans' [`ScanKey`]s, in order.
type Key = Box<[ScanKey]>;

/// A trie node of one vocabulary slice: (slice, node in [`Slices::trie`](super::slices::Slices::trie)).
pub type SliceNode = (u32, u32);

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

/// What follows a group's members (see [`merge`]).
pub enum Below {
    /// The members' strict subtrees merged into one trie: paths are the bytes after a member.
    /// Shared by every entry with the same members (e.g. every state inside a string that
    /// admits the same characters ends at the same closing quotes).
    Merged(Arc<TokenTrie>),
    /// The members themselves: a lone member, or subtrees too large to copy.
    Nodes(Vec<SliceNode>),
}

/// The cached part of the mask at one lexer key (see the module docs).
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
    /// Scan `k`'s [`inside_dist`](Self::inside_dist) for a scan in `state` (`dist`: its DFA's
    /// distances), as tight as the scan's own state makes it: the key's bound is that of every
    /// state the key stands for (a count's rows share a key), and slices taken whole bound their
    /// tokens by the farthest state of the whole DFA; where that bound is finite, every
    /// `inside` token leads to a state of finite distance reachable from `state`, which
    /// [`Distances::farthest_from`] bounds.
    pub fn inside_bound(&self, k: usize, dist: &Distances, state: StateId) -> Option<u32> {
        self.inside_dist[k].map(|d| if d == UNREACHABLE { d } else { d.min(dist.farthest_from(state)) })
    }

    /// Heap bytes, roughly (for the cache bound).
    fn bytes(&self) -> usize {
        let below = |b: &Below| match b {
            Below::Merged(_) => 8,
            Below::Nodes(n) => n.len() * 8,
        };
        let groups: usize =
            self.groups.iter().map(|g| 64 + (g.at.len() + g.at_going.len()) * 4 + below(&g.below)).sum();
        self.inside.words().len() * 4 + groups + self.ends.len() * 4 + self.inside_dist.len() * 8 + 64
    }
}

/// The lexer-state mask cache of one vocabulary (see the module docs); `Send + Sync`.
#[derive(Default)]
pub struct MaskCache {
    inner: Mutex<Inner>,
    /// A [`ClassPolicy`]: a setting, not cached state (an emptying keeps it).
    class_policy: AtomicU8,
}

/// How far one token can move a lexer: the longest token, in bytes (saturating). Keys hold
/// each state as [`Dfa::canonical`] for it: states that read every token alike share one
/// entry, built from the canonical state (whose distances are at least theirs, so
/// `inside_dist` stays a bound).
fn horizon(env: &VocabEnv) -> u32 {
    env.slices().longest.try_into().unwrap_or(u32::MAX)
}

#[derive(Default)]
struct Inner {
    map: HashMap<Key, Arc<Entry>, FxBuild>,
    /// Merged subtrees by their members.
    merged: HashMap<Box<[SliceNode]>, Arc<TokenTrie>, FxBuild>,
    /// `wholesale::content_reach_table` per DFA id (`None`: the DFA
    /// has none).
    reach_tables: HashMap<u64, Option<Arc<[Reach]>>, FxBuild>,
    /// [`content_reach`](wholesale::content_reach) per scan, for DFAs without a table.
    reach: HashMap<ScanKey, Reach, FxBuild>,
    /// The same stopped at the first event (`first`), for keys of one scan: the smaller of
    /// the two distances.
    reach_first: HashMap<ScanKey, usize, FxBuild>,
    /// [`content_hazards`](hazards::content_hazards) per scan.
    hazards: HashMap<ScanKey, Arc<Hazards>, FxBuild>,
    /// Class tries by (slice, byte map), the nodes walked per (slice, DFA id), and content maps
    /// by DFA id (see [`classes`]).
    class_tries: HashMap<classes::ClassKey, classes::Slot, FxBuild>,
    walked: HashMap<classes::WalkKey, usize, FxBuild>,
    content_maps: HashMap<u64, Vec<classes::ContentMap>, FxBuild>,
    /// DFAs whose content reach is too large for a content map.
    no_content_map: HashSet<u64, FxBuild>,
    /// [`InsideGroups`] by their scans' shift keys.
    inside: HashMap<Box<[inside::ShiftKey]>, Arc<InsideGroups>, FxBuild>,
    bytes: usize,
    /// What an emptying dropped, freed a little per call (see [`Inner::reserve`]).
    retired: Retired,
}

#[derive(Default)]
struct Retired {
    entries: Vec<Arc<Entry>>,
    tries: Vec<Arc<TokenTrie>>,
    tables: Vec<Arc<[Reach]>>,
    class_tries: Vec<Arc<ClassTrie>>,
    inside: Vec<Arc<InsideGroups>>,
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
            self.retired.inside.extend(old.inside.into_values());
            self.retired.class_tries.extend(old.class_tries.into_values().filter_map(|s| match s {
                classes::Slot::Built(t) => Some(t),
                _ => None,
            }));
        }
        self.bytes += bytes;
    }

    fn free_some(&mut self) {
        let r = &mut self.retired;
        for _ in 0..FREE_PER_CALL {
            if r.entries.pop().is_none()
                && r.tries.pop().is_none()
                && r.tables.pop().is_none()
                && r.class_tries.pop().is_none()
                && r.inside.pop().is_none()
            {
                break;
            }
        }
    }
}

impl MaskCache {
    /// The cache's state, locked (a panic elsewhere left it consistent: every update is one
    /// insert).
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Drops every entry now (entries in use live on in their `Arc`s): the next masks start
    /// cold. For measurements that must replay a first mask; a server never needs it.
    pub(crate) fn clear(&self) {
        *self.lock() = Inner::default();
    }

    /// Sets when class tries are built (see [`VocabEnv::set_class_policy`]).
    pub(crate) fn set_class_policy(&self, policy: ClassPolicy) {
        self.class_policy.store(policy as u8, Ordering::Relaxed);
    }

    /// When class tries are built.
    fn class_policy(&self) -> ClassPolicy {
        match self.class_policy.load(Ordering::Relaxed) {
            p if p == ClassPolicy::Eager as u8 => ClassPolicy::Eager,
            p if p == ClassPolicy::Off as u8 => ClassPolicy::Off,
            _ => ClassPolicy::Measured,
        }
    }

    /// The entry for the lexer key of `scans` (terms of `cfg`), built now if it is new.
    pub fn get_or_build(&self, cfg: &Cfg, env: &VocabEnv, scans: &[Scan]) -> Arc<Entry> {
        let term = |sc: &Scan| cfg.term(sc.term);
        let horizon = horizon(env);
        let key: Vec<ScanKey> = scans
            .iter()
            .map(|sc| (term(sc).dfa.id(), term(sc).dfa.canonical(sc.state, horizon, &term(sc).dist)))
            .collect();
        if let Some(e) = self.get(&key) {
            return e;
        }
        let dfas: Vec<&Dfa> = scans.iter().map(|sc| &*term(sc).dfa).collect();
        let dists: Vec<&Distances> = scans.iter().map(|sc| &term(sc).dist).collect();
        let states: Vec<StateId> = key.iter().map(|&(_, s)| s).collect();
        self.build(env, key, &dfas, &dists, &states)
    }

    /// The entry for the scans of `dfas` in `states` (`dists`: each DFA's fewest usable bytes
    /// to acceptance, [`Dfa::dist_using`] for this vocabulary). The DFA backend asks with its one
    /// DFA: its mask is `inside` and the groups' `at` ids (nothing may follow its lexeme).
    pub fn get_or_build_for(
        &self,
        env: &VocabEnv,
        dfas: &[&Dfa],
        dists: &[&Distances],
        states: &[StateId],
    ) -> Arc<Entry> {
        let horizon = horizon(env);
        let key: Vec<ScanKey> =
            dfas.iter().zip(states).zip(dists).map(|((d, &s), dist)| (d.id(), d.canonical(s, horizon, dist))).collect();
        match self.get(&key) {
            Some(e) => e,
            None => {
                let states: Vec<StateId> = key.iter().map(|&(_, s)| s).collect();
                self.build(env, key, dfas, dists, &states)
            }
        }
    }

    /// The cached entry for `key` (and a few retired values freed on the way).
    fn get(&self, key: &[ScanKey]) -> Option<Arc<Entry>> {
        let mut inner = self.lock();
        inner.free_some();
        inner.map.get(key).cloned()
    }

    /// Builds and keeps the entry for `key` (the scans of `dfas` in `states`): what the key
    /// admits of the slices without a walk, then the walk of the rest.
    fn build(
        &self,
        env: &VocabEnv,
        key: Vec<ScanKey>,
        dfas: &[&Dfa],
        dists: &[&Distances],
        states: &[StateId],
    ) -> Arc<Entry> {
        let wholesale = self.wholesale(env, &key, dfas, states);
        let merged = |nodes: &[SliceNode]| self.merged(env, nodes);
        let walks = walk::SliceWalks { cache: self, env };
        let entry = Arc::new(Entry::build(dfas, dists, states, env, &wholesale, merged, &walks));
        let mut inner = self.lock();
        inner.reserve(entry.bytes() + key.len() * 12 + 32);
        inner.map.entry(key.into()).or_insert(entry).clone()
    }
}
