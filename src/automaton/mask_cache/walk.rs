//! The lexer-only trie walk that builds an [`Entry`] ([`Entry::build`]).
//!
//! Per vocabulary slice, the key's scans walk the slice's trie with their DFAs alone (no
//! parser): a token after which some scan is still alive goes into `inside`; a node after whose
//! byte some lexemes end joins the group of exactly those lexemes (its ids into `at` or
//! `at_going`, by whether a scan goes on there). Body slices that the key admits whole
//! ([`Wholesale`]) are not walked; those it admits but for the tokens holding a few bytes are
//! walked only where such a byte is, the dead and ending tokens found there taken back.
//!
//! The scans of every depth live in one flat [`ScanStack`] (also used by the budgeted walk in
//! [`cfg_run`](crate::automaton::cfg_run)); a key of one scan (most keys) walks with the state
//! on the trie walk's own stack instead ([`LexWalk::walk_one`]), and where the cache has a
//! class trie for the slice and the DFA's classes, over that ([`LexWalk::walk_classes`], the
//! same entry: see [`classes`](super::classes)).

use std::collections::HashMap;
use std::sync::Arc;

use super::merge;
use super::wholesale::Wholesale;
use super::{Entry, Group, MaskCache, SliceNode};
use crate::automaton::slices::Slices;
use crate::automaton::VocabEnv;
use crate::regular::{Dfa, Distances, FxBuild, StateId};
use crate::vocab::class_trie::ClassTrie;
use crate::vocab::{trie::ByteSet, trie::TrieVisitor, TokenId, TokenSet, TokenTrie};

impl Entry {
    /// The entry for the scans of `dfas` in `states` (`dists`: their distance tables); `merged`
    /// gives the merged trie of a list of members; `walks` the class tries to walk through.
    pub(super) fn build(
        dfas: &[&Dfa],
        dists: &[&Distances],
        states: &[StateId],
        env: &VocabEnv,
        wholesale: &Wholesale,
        mut merged: impl FnMut(&[SliceNode]) -> Arc<TokenTrie>,
        walks: &SliceWalks,
    ) -> Entry {
        let slices = env.slices();
        let mut w = LexWalk::new(dfas, dists, slices, env.vocab().len());
        for part in 0..=slices.body.len() {
            if !w.take_wholesale(part, wholesale) {
                w.walk_part(part, states, walks);
            }
        }
        let groups = w
            .members
            .into_iter()
            .map(|m| Group {
                start: m.start,
                end: m.end,
                at: m.at,
                at_going: m.at_going,
                below: merge::below(m.nodes, slices, &mut merged),
            })
            .collect();
        Entry { inside: w.inside, inside_dist: w.inside_dist, groups, ends: w.ends }
    }
}

/// Ids a walk of one scan survives in state `s`: into `inside`, their rest into `far`.
#[inline]
fn survive(inside: &mut TokenSet, dist: &Distances, far: &mut Option<u32>, s: StateId, ids: &[TokenId]) {
    let d = dist.at(s);
    *far = Some(far.map_or(d, |f| f.max(d)));
    ids.iter().for_each(|&id| inside.insert(id));
}

/// Where a walk of one scan finds its class tries: the cache and its vocabulary.
pub(super) struct SliceWalks<'a> {
    pub cache: &'a MaskCache,
    pub env: &'a VocabEnv,
}

/// A group while it is being collected.
struct Members {
    start: u32,
    end: u32,
    at: Vec<TokenId>,
    at_going: Vec<TokenId>,
    nodes: Vec<SliceNode>,
}

/// The (scan index, DFA state) pairs of a lexer-only trie walk, per depth: one flat buffer,
/// with each depth's range in `levels` (the base level holds the scans' starting states).
#[derive(Default)]
pub(in crate::automaton) struct ScanStack {
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

    /// One byte deeper in a lexer-only walk (scan `k` read by `dfa(k)`): steps every pair of
    /// the deepest level that goes on, and records in `ends` whether some lexeme may end within
    /// the bytes so far; `false` (nothing pushed) where no lexeme goes on.
    #[inline]
    pub fn push_byte<'d>(&mut self, ends: &mut Vec<bool>, byte: u8, dfa: impl Fn(u32) -> &'d Dfa) -> bool {
        let mut end = *ends.last().expect("base level");
        let going = self.descend(|k, s| {
            let dfa = dfa(k);
            let next = dfa.next(s, byte);
            end |= next != StateId::DEAD && dfa.is_accepting(next);
            (next != StateId::DEAD && dfa.can_continue(next)).then_some(next)
        });
        if going {
            ends.push(end);
        }
        going
    }
}

/// The lexer-only trie walk that builds an [`Entry`].
struct LexWalk<'a> {
    /// The key's DFAs and their distances to acceptance (the terms' `dist`), by key index.
    dfas: &'a [&'a Dfa],
    dists: &'a [&'a Distances],
    inside_dist: Vec<Option<u32>>,
    /// Per scan, the farthest rest of any live state of its DFA (computed when first needed).
    far: Vec<Option<u32>>,
    slices: &'a Slices,
    stack: ScanStack,
    /// The slice being walked.
    part: u32,
    inside: TokenSet,
    ends: Vec<u32>,
    /// A group's ending scans → its index in `members`.
    index: HashMap<Box<[u32]>, u32, FxBuild>,
    /// The group [`group`](Self::group) found last: consecutive nodes mostly end the same scans
    /// (a lexeme that accepts after every byte, as free text does, ends at every node).
    last: Option<u32>,
    /// The scans ending at the current node.
    ending: Vec<u32>,
    members: Vec<Members>,
    /// A slice the key admits but for the tokens holding a byte of the set, kept alive by the
    /// scan of that index ([`Wholesale::avoid`]), until the walk takes it (`prune`) or walks a
    /// class trie instead.
    avoid: Option<(usize, ByteSet)>,
    /// While a slice is taken wholesale but for tokens holding an avoided byte: those bytes,
    /// and the slice trie's [byte sets](TokenTrie::byte_sets). Subtrees without one are skipped.
    prune: Option<(ByteSet, &'a [ByteSet])>,
    /// Nodes where no scan goes on, while pruning: their tokens and those below them leave
    /// `inside` after the walk.
    dropped: Vec<u32>,
    /// The slice nodes that class tries built for this entry may still read (see
    /// [`MaskCache::class_trie`]).
    build_budget: usize,
}

impl<'a> LexWalk<'a> {
    fn new(dfas: &'a [&'a Dfa], dists: &'a [&'a Distances], slices: &'a Slices, width: usize) -> LexWalk<'a> {
        LexWalk {
            dfas,
            dists,
            inside_dist: vec![None; dfas.len()],
            far: vec![None; dists.len()],
            slices,
            stack: ScanStack::default(),
            part: 0,
            inside: TokenSet::new(width),
            ends: Vec::new(),
            index: HashMap::default(),
            last: None,
            ending: Vec::new(),
            members: Vec::new(),
            avoid: None,
            prune: None,
            dropped: Vec::new(),
            build_budget: (0..=slices.body.len()).map(|p| slices.trie(p).node_count()).max().unwrap_or(0),
        }
    }

    /// Takes what `wholesale` admits of slice `part` without a walk: a whole body slice (then
    /// `true`: nothing is left to walk), or all of one but the tokens holding an avoided byte
    /// (then the walk is pruned to those: `prune`).
    fn take_wholesale(&mut self, part: usize, wholesale: &Wholesale) -> bool {
        (self.prune, self.avoid) = (None, None);
        let slices = self.slices;
        let Some(slice) = slices.body.get(part) else { return false };
        // Every string-content string up to `hi` bytes keeps some scan alive and ends no lexeme.
        if wholesale.admits(slice.hi) {
            self.inside.union_clipped(&slice.mask);
            // The scans no such string kills survive every token of the slice, in
            // states unknown here: bound their rest by the farthest live state. (With
            // none such, each token is survived by one scan or another: bound them all.)
            let alone = wholesale.alone(slice.hi);
            for (k, &(_, dead)) in wholesale.reach.iter().enumerate() {
                if dead > slice.hi || !alone {
                    self.note_far(k);
                }
            }
            return true;
        }
        // The slice's tokens without an avoided byte keep the survivor alive and end no
        // lexeme: taken wholesale by the walk (see `walk_part`).
        self.avoid = wholesale.avoid.get(part).copied().flatten();
        false
    }

    /// Takes slice `part` wholesale but for the tokens holding a byte of `self.avoid`, if set:
    /// the walk then visits only subtrees holding such a byte and takes back the tokens it
    /// finds dead or ending (`prune`, `dropped`).
    fn start_pruning(&mut self, part: usize) {
        if let Some((k, avoid)) = self.avoid.take() {
            let slice = &self.slices.body[part];
            self.inside.union_clipped(&slice.mask);
            self.note_far(k);
            self.prune = Some((avoid, &slice.bytes));
        }
    }

    /// Walks slice `part`'s trie from the scans' `states`: one scan through a class trie where
    /// `walks` has one (its walk is bounded, where a pruned walk may visit most of a slice: an
    /// avoided space), else pruned where the slice is taken but for some bytes; then takes
    /// the tokens at and below the nodes it dropped (while pruning) back out of `inside`.
    fn walk_part(&mut self, part: usize, states: &[StateId], walks: &SliceWalks) {
        self.part = part as u32;
        let trie = self.slices.trie(part);
        if let [dfa] = self.dfas {
            // Where the slice is taken but for the tokens holding a few bytes, the pruned walk
            // visits at most the subtrees holding them.
            let pruned = self.avoid.map(|(_, avoid)| self.slices.body[part].pruned_walk_nodes(&avoid));
            match walks.cache.class_trie(walks.env, part, dfa, states[0], pruned, &mut self.build_budget) {
                Ok(by_class) => {
                    self.avoid = None;
                    self.walk_classes(dfa, states[0], trie, &by_class);
                }
                Err(key) => {
                    self.start_pruning(part);
                    let steps = self.walk_one(dfa, states[0], trie);
                    if let Some(key) = key {
                        walks.cache.walked(key, steps);
                    }
                }
            }
        } else {
            self.start_pruning(part);
            self.stack.reset(states.iter().copied());
            trie.walk_visitor(self);
        }
        for node in self.dropped.drain(..) {
            trie.node_ids(node).iter().chain(trie.ids_below(node)).for_each(|&id| self.inside.remove(id));
        }
    }

    fn note_dist(&mut self, k: usize, d: u32) {
        let m = &mut self.inside_dist[k];
        *m = Some(m.map_or(d, |m| m.max(d)));
    }

    /// Notes scan `k`'s farthest rest from any live state of its DFA.
    fn note_far(&mut self, k: usize) {
        let dist = self.dists[k];
        let f = *self.far[k].get_or_insert_with(|| dist.farthest());
        self.note_dist(k, f);
    }

    /// The walk for a key of one scan (most keys): the same result as the visitor walk, with
    /// the state on the trie walk's own stack. Returns the nodes it visited.
    fn walk_one(&mut self, dfa: &Dfa, state: StateId, trie: &TokenTrie) -> usize {
        let mut steps = 0;
        let (mut nodes, mut at, mut at_going) = (Vec::new(), Vec::new(), Vec::new());
        let part = self.part;
        let inside = &mut self.inside;
        let dist = self.dists[0];
        let mut far: Option<u32> = None;
        let (prune, dropped) = (self.prune, &mut self.dropped);
        trie.walk_nodes(
            state,
            |s, byte, node| {
                steps += 1;
                if prune.is_some_and(|(avoid, sets)| !sets[node as usize].meets(&avoid)) {
                    return None;
                }
                let (next, accepting, goes_on) = dfa.advance(s, byte);
                if accepting {
                    nodes.push((part, node));
                    if goes_on { &mut at_going } else { &mut at }.extend_from_slice(trie.node_ids(node));
                }
                if !goes_on && prune.is_some() {
                    dropped.push(node);
                }
                goes_on.then_some(next)
            },
            |s: StateId, ids| survive(inside, dist, &mut far, s, ids),
        );
        self.keep_one(far, nodes, at, at_going);
        steps
    }

    /// [`walk_one`](Self::walk_one) without pruning, over `trie` read through a class trie of
    /// it: the same entry, each class node standing for its members (an ending class node's
    /// members are laid out in the trie's order, as the walk of `trie` finds them).
    fn walk_classes(&mut self, dfa: &Dfa, state: StateId, trie: &TokenTrie, by_class: &ClassTrie) {
        let mut ending: Vec<(u32, bool)> = Vec::new();
        let inside = &mut self.inside;
        let dist = self.dists[0];
        let mut far: Option<u32> = None;
        by_class.trie().walk_nodes(
            state,
            |s, byte, node| {
                let (next, accepting, goes_on) = dfa.advance(s, byte);
                if accepting {
                    ending.extend(by_class.members(node).iter().map(|&m| (m, goes_on)));
                }
                goes_on.then_some(next)
            },
            |s: StateId, ids| survive(inside, dist, &mut far, s, ids),
        );
        ending.sort_unstable();
        let (mut nodes, mut at, mut at_going) = (Vec::new(), Vec::new(), Vec::new());
        for (node, goes_on) in ending {
            nodes.push((self.part, node));
            if goes_on { &mut at_going } else { &mut at }.extend_from_slice(trie.node_ids(node));
        }
        self.keep_one(far, nodes, at, at_going);
    }

    /// Keeps what a walk of one scan found: the farthest rest after a token it survives, and
    /// the nodes where its lexeme ends (in trie order) with their ids.
    fn keep_one(&mut self, far: Option<u32>, nodes: Vec<SliceNode>, at: Vec<TokenId>, at_going: Vec<TokenId>) {
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
        if let Some(g) = self.last {
            let m = &self.members[g as usize];
            if self.ends[m.start as usize..m.end as usize] == self.ending[..] {
                return &mut self.members[g as usize];
            }
        }
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
        self.last = Some(g);
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
            let (next, accepting, open) = dfas[k as usize].advance(s, byte);
            if accepting {
                ending.push(k);
            }
            // As in `Chart::step`: a scan that cannot read another byte lives on only as the
            // lexeme's end.
            open.then_some(next)
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
            let d = self.dists[k as usize].at(s);
            self.note_dist(k as usize, d);
        }
    }
}
