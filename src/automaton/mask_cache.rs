//! `MaskCache`: per set of lexer states, the tokens whose answer does not depend on the parser.
//!
//! Between lexeme boundaries the Earley engine's position is a list of scans (terminal, DFA
//! state, origin row). A token whose bytes never bring any scan to an accepting DFA state
//! builds no parser row while it is read: whether it is allowed depends only on the scans'
//! (terminal, state) pairs, not on the rows (XGrammar's "context-independent tokens"). So per
//! *lexer key* (the scans' (terminal, state) pairs, in order) we walk the token trie once with
//! the DFAs alone and keep:
//! - `inside`: the tokens that end inside the lexemes (every byte alive, no lexeme end on the
//!   way) — copied into the mask wholesale;
//! - `resumes`: the trie nodes where, for the first time on their path, some lexeme may end,
//!   with the scans' states just before that node's byte. Only those subtrees depend on the
//!   parser; [`CfgRun::fill`](super::cfg_run) walks them with the full Earley walker, building
//!   each boundary row once per distinct set of ending lexemes.
//!
//! The union is exactly what the full trie walk computes: a node is either inside (no lexeme end
//! on its path, handled here), dead (skipped by both), or at or below exactly one resume node.
//! Entries are built lazily, on the first mask at a key, so compiling stays cheap; the cache is
//! shared by every matcher of one compiled constraint and bounded by [`MAX_CACHE_BYTES`] (past
//! it, masks are computed by the full walk, uncached).
//!
//! Invariant: an entry's `inside` has the vocabulary's width; `states[r.start..r.end]` are
//! (index into the key, DFA state) pairs, every state alive.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use super::cfg::Cfg;
use super::dfa::{Dfa, DEAD};
use crate::vocab::{trie::TrieVisitor, TokenId, TokenSet, Vocab};

/// Most bytes all entries of one cache may take together.
pub const MAX_CACHE_BYTES: usize = 64 << 20;

/// A trie node below which the parser must be consulted.
#[derive(Debug, Clone, Copy)]
pub struct Resume {
    /// Which trie: [`Slices::trie`](crate::vocab::slices::Slices::trie)'s index.
    pub part: u32,
    pub node: u32,
    /// `Entry::states[start..end]`: the scans just before the node's byte.
    pub start: u32,
    pub end: u32,
}

pub struct Entry {
    pub inside: TokenSet,
    pub resumes: Vec<Resume>,
    pub states: Vec<(u32, u32)>,
}

impl Entry {
    fn bytes(&self) -> usize {
        self.inside.words().len() * 4 + self.resumes.len() * 12 + self.states.len() * 8 + 64
    }

    /// The entry for `key`, or `None` if no slice is admitted wholesale (then the plain walk
    /// costs no more than building the entry would, and such states rarely repeat).
    fn build(cfg: &Cfg, vocab: &Vocab, key: &[(u32, u32)], reach: &[(usize, usize)]) -> Option<Entry> {
        let slices = vocab.slices();
        let admits = |hi: usize| reach.iter().all(|&(accept, _)| accept > hi) && reach.iter().any(|&(_, dead)| dead > hi);
        if !slices.body.iter().any(|s| admits(s.hi)) {
            return None;
        }
        let mut w = LexWalk {
            cfg,
            key,
            buf: Vec::new(),
            levels: Vec::new(),
            part: 0,
            entry: Entry { inside: TokenSet::new(vocab.len()), resumes: Vec::new(), states: Vec::new() },
        };
        for part in 0..=slices.body.len() {
            if let Some(slice) = slices.body.get(part) {
                // Every string-content string up to `hi` bytes keeps some scan alive and ends no lexeme.
                if admits(slice.hi) {
                    w.entry.inside.union_clipped(&slice.mask);
                    continue;
                }
            }
            w.part = part as u32;
            w.buf.clear();
            w.buf.extend(key.iter().enumerate().map(|(i, &(_, s))| (i as u32, s)));
            w.levels.clear();
            w.levels.push((0, key.len() as u32));
            slices.trie(part).walk_visitor(&mut w);
        }
        Some(w.entry)
    }
}

/// From DFA state `state`, over strings of string-content characters (see
/// [`slices`](crate::vocab::slices)) of at most `max` bytes: the fewest bytes after which the
/// DFA can be accepting, and after which it can be dead (`usize::MAX`: not within `max`).
fn content_reach(dfa: &Dfa, state: u32, max: usize) -> (usize, usize) {
    static CONTENT: OnceLock<Dfa> = OnceLock::new();
    let q = CONTENT.get_or_init(|| {
        let hir = crate::grammar::regex::parse(r#"[^\x00-\x1f"\\]*"#).expect("valid regex");
        Dfa::from_hir(&hir, Default::default()).expect("small DFA")
    });
    // One representative byte per pair of classes.
    let mut seen = HashSet::new();
    let reps: Vec<u8> = (0..=255u8).filter(|&b| seen.insert((dfa.class(b), q.class(b)))).collect();
    let (mut accept, mut dead) = (usize::MAX, usize::MAX);
    let mut visited: HashSet<(u32, u32)> = HashSet::new();
    let mut frontier = vec![(state, q.start())];
    let mut depth = 0;
    while !frontier.is_empty() && depth < max && (accept == usize::MAX || dead == usize::MAX) {
        depth += 1;
        let mut next = Vec::new();
        for &(d, c) in &frontier {
            for &b in &reps {
                let c2 = q.next(c, b);
                if c2 == DEAD {
                    continue;
                }
                let d2 = dfa.next(d, b);
                if d2 == DEAD {
                    dead = dead.min(depth);
                    continue;
                }
                if dfa.is_accepting(d2) {
                    accept = accept.min(depth);
                }
                if visited.insert((d2, c2)) {
                    next.push((d2, c2));
                }
            }
        }
        frontier = next;
    }
    (accept, dead)
}

#[derive(Default)]
pub struct MaskCache {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// `None`: not worth caching (see [`Entry::build`]).
    map: HashMap<Box<[(u32, u32)]>, Option<Arc<Entry>>>,
    /// [`content_reach`] per (terminal, state).
    reach: HashMap<(u32, u32), (usize, usize)>,
    bytes: usize,
}

impl MaskCache {
    /// The entry for `key`, built now if it is new; `None` if it is not worth caching or the
    /// cache is full (then the caller walks the whole trie).
    pub fn get_or_build(&self, cfg: &Cfg, vocab: &Vocab, key: &[(u32, u32)]) -> Option<Arc<Entry>> {
        let reach: Vec<(usize, usize)> = {
            let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(e) = inner.map.get(key) {
                return e.clone();
            }
            if inner.bytes >= MAX_CACHE_BYTES {
                return None;
            }
            let hi = vocab.slices().body.iter().map(|s| s.hi).max().unwrap_or(0);
            key.iter()
                .map(|&(t, s)| *inner.reach.entry((t, s)).or_insert_with(|| content_reach(&cfg.terms[t as usize].dfa, s, hi)))
                .collect()
        };
        // Built outside the lock: another matcher may build the same entry meanwhile (same value).
        let entry = Entry::build(cfg, vocab, key, &reach).map(Arc::new);
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.bytes += entry.as_ref().map_or(0, |e| e.bytes()) + key.len() * 8 + 32;
        inner.map.entry(key.into()).or_insert(entry.clone());
        entry
    }
}

/// The lexer-only trie walk that builds an [`Entry`]. `buf` holds (key index, state) pairs per
/// depth, `levels` their ranges.
struct LexWalk<'a> {
    cfg: &'a Cfg,
    key: &'a [(u32, u32)],
    buf: Vec<(u32, u32)>,
    levels: Vec<(u32, u32)>,
    /// The slice being walked.
    part: u32,
    entry: Entry,
}

impl TrieVisitor for LexWalk<'_> {
    #[inline]
    fn push(&mut self, node: u32, byte: u8) -> bool {
        let (start, end) = *self.levels.last().expect("base level");
        let (start, end) = (start as usize, end as usize);
        debug_assert_eq!(end, self.buf.len());
        let mut ends_lexeme = false;
        for i in start..end {
            let (k, s) = self.buf[i];
            let dfa = &self.cfg.terms[self.key[k as usize].0 as usize].dfa;
            let next = dfa.next(s, byte);
            if next == DEAD {
                continue;
            }
            if dfa.is_accepting(next) {
                ends_lexeme = true;
                break;
            }
            // Always true for a live, non-accepting state of a pruned DFA; kept for symmetry
            // with `Chart::step`.
            if dfa.can_continue(next) {
                self.buf.push((k, next));
            }
        }
        if ends_lexeme {
            self.buf.truncate(end);
            let st = self.entry.states.len() as u32;
            self.entry.states.extend_from_slice(&self.buf[start..end]);
            self.entry.resumes.push(Resume { part: self.part, node, start: st, end: self.entry.states.len() as u32 });
            return false;
        }
        if self.buf.len() == end {
            return false;
        }
        self.levels.push((end as u32, self.buf.len() as u32));
        true
    }

    #[inline]
    fn pop(&mut self) {
        let (start, _) = self.levels.pop().expect("pushed level");
        self.buf.truncate(start as usize);
    }

    fn tokens(&mut self, ids: &[TokenId]) {
        for &id in ids {
            self.entry.inside.insert(id);
        }
    }
}
