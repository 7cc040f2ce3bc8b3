//! The lexer-only walk of a budgeted mask where the budget binds on tokens that keep a lexeme
//! going ([`CfgRun::fill`](super::CfgRun::fill)): each such token judged by its own finish
//! cost along the lexemes it keeps alive, no parser. Where every lexeme is a count far from
//! its bounds, the tokens come grouped by where they leave the lexemes, shared by the count's
//! rows ([`InsideGroups`](crate::automaton::mask_cache::InsideGroups)), and are judged a group
//! at a time instead. Also the byte step the plain walk shares ([`push_inside`]).
//!
//! A walk is a function of what it is given (the scans' lexeme DFAs, shared across compiles,
//! and states; their waits; the budget) and the vocabulary (listing refusals records more, it
//! lets the same tokens through), and
//! a budgeted mask's search and descents make the same walks again and again from parse
//! states that differ only where the lexer does not look (inside a string, every token leads
//! back to a few states): so the walks are kept, per vocabulary ([`WalkCache`], in the
//! [`VocabEnv`]), for every grammar and request whose lexemes meet them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::{LexerStates, Refused};
use crate::automaton::cfg::Cfg;
use crate::automaton::earley::Scan;
use crate::automaton::mask_cache::ScanStack;
use crate::automaton::VocabEnv;
use crate::regular::{Dfa, FxBuild, StateId};
use crate::vocab::{trie::TrieVisitor, TokenId, TokenSet};

/// Per scan, what finishing after its lexeme costs: in usable bytes
/// ([`Chart::scan_wait_cost`](crate::automaton::earley::Chart::scan_wait_cost)) and in tokens
/// ([`Chart::scan_wait_tokens`](crate::automaton::earley::Chart::scan_wait_tokens)).
#[derive(Clone, Copy)]
pub(super) struct Waits<'a> {
    pub bytes: &'a [u32],
    pub tokens: &'a [u32],
}

/// The most bytes (masks and refusals) the kept walks of one vocabulary may hold; past it
/// they are dropped and kept again.
const MAX_WALK_CACHE_BYTES: usize = 16 << 20;

/// What a walk depends on: per scan its lexeme's DFA ([`Dfa::id`]; its distances in usable
/// bytes are the DFA's, for the vocabulary), whether the lexeme is one named token, and its
/// state; the scans' waits in bytes and in tokens; the budget. (Whether refusals are listed
/// changes what it records, not what it lets through: a walk that listed them answers both.)
type WalkKey = (Vec<(u64, bool, StateId)>, Vec<u32>, Vec<u32>, u32);

/// One walk's answer: the tokens it let through, and those it refused where they were listed.
struct Walked {
    mask: TokenSet,
    refused: Option<Refused>,
}

impl Walked {
    /// Heap bytes, roughly (for the cache's bound), with its key's.
    fn bytes(&self, key: &WalkKey) -> usize {
        let refused = self.refused.as_ref().map_or(0, Refused::bytes);
        self.mask.words().len() * 4 + refused + key.0.len() * 16 + (key.1.len() + key.2.len()) * 4 + 128
    }
}

/// The budgeted walks already made for one vocabulary (see the module docs), bounded by
/// [`MAX_WALK_CACHE_BYTES`]. `Send + Sync`: the masks of a batch share it.
#[derive(Default)]
pub(crate) struct WalkCache {
    inner: Mutex<(HashMap<WalkKey, Arc<Walked>>, usize)>,
    /// Walks taken from here (for tests).
    hits: AtomicUsize,
}

impl WalkCache {
    /// The walk kept for `key`, where it listed refusals if `listed` asks for them.
    fn get(&self, key: &WalkKey, listed: bool) -> Option<Arc<Walked>> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let hit = inner.0.get(key).filter(|w| !listed || w.refused.is_some()).cloned();
        if hit.is_some() {
            self.hits.fetch_add(1, Ordering::Relaxed);
        }
        hit
    }

    /// Walks taken from here so far.
    #[cfg(test)]
    pub(crate) fn hits(&self) -> usize {
        self.hits.load(Ordering::Relaxed)
    }

    /// Keeps `walked` for `key` (in place of one that did not list refusals).
    fn keep(&self, key: WalkKey, walked: Arc<Walked>) {
        let bytes = walked.bytes(&key);
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if inner.1 + bytes > MAX_WALK_CACHE_BYTES {
            *inner = Default::default();
        }
        let old = inner.0.get(&key).map_or(0, |w| w.bytes(&key));
        inner.1 = inner.1 + bytes - old;
        inner.0.insert(key, walked);
    }
}

/// Walks the whole vocabulary from `scans`: into `mask` the tokens that keep some lexeme going
/// and finish within `budget` along it; the others, where the caller asks for them, into
/// `refused` (by the lexer states they reach, apart where a lexeme may end inside them, to be
/// settled with the parser walk's: see [`Refused`]; `refused` is empty here). A walk made before with the same key is taken from the
/// vocabulary's [`WalkCache`].
pub(super) fn walk(
    cfg: &Cfg,
    env: &VocabEnv,
    scans: &[Scan],
    waits: Waits,
    budget: u32,
    mask: &mut TokenSet,
    refused: Option<&mut Refused>,
) {
    debug_assert!(refused.as_ref().is_none_or(|r| r.is_empty()));
    let key: WalkKey = (
        scans
            .iter()
            .map(|sc| {
                let term = cfg.term(sc.term);
                (term.dfa.id(), term.one_token, sc.state)
            })
            .collect(),
        waits.bytes.to_vec(),
        waits.tokens.to_vec(),
        budget,
    );
    let (cache, listed) = (env.budgeted_walks(), refused.is_some());
    let walked = cache.get(&key, listed).unwrap_or_else(|| {
        let mut own = Walked { mask: TokenSet::new(env.vocab().len()), refused: listed.then(Refused::default) };
        walk_into(cfg, env, scans, waits, budget, &mut own);
        let own = Arc::new(own);
        cache.keep(key, own.clone());
        own
    });
    mask.union_clipped(&walked.mask);
    if let (Some(r), Some(own)) = (refused, &walked.refused) {
        r.clone_from(own);
    }
}

/// [`walk`] made, into `out` (empty).
fn walk_into(cfg: &Cfg, env: &VocabEnv, scans: &[Scan], waits: Waits, budget: u32, out: &mut Walked) {
    let Walked { mask, refused } = out;
    let refused = refused.as_mut();
    let mut w = InsideWithin {
        cfg,
        env,
        scans,
        waits,
        budget,
        rests: HashMap::default(),
        stack: ScanStack::default(),
        ends: vec![false],
        mask,
        refused,
    };
    // Counted lexemes far from their bounds: the tokens' groups, shared by the count's rows,
    // judged a group at a time (the same judgement as the walk's, see `mask_cache::inside`).
    let dfas: Vec<&Dfa> = scans.iter().map(|sc| &*cfg.term(sc.term).dfa).collect();
    let states: Vec<StateId> = scans.iter().map(|sc| sc.state).collect();
    if let Some((groups, rows)) = env.mask_cache().inside_groups(env, &dfas, &states) {
        let mut top: LexerStates = Vec::new();
        for g in &groups.groups {
            top.clear();
            top.extend(g.top.iter().map(|&(k, on, place)| {
                let base = dfas[k as usize].counted_base().expect("a count");
                (k, base.state_at(rows[k as usize] + on, place))
            }));
            w.judge(&top, g.ends, &g.ids);
        }
        return;
    }
    w.stack.reset(states.iter().copied());
    env.vocab().trie().walk_visitor(&mut w);
}

/// The lexer-only walk for the tokens that keep some current lexeme going, under a budget that
/// binds: a token is let through when some scan it keeps alive has a rest plus a wait cost
/// within the budget — its finish cost along that way — in usable bytes (`dist`), or else in
/// tokens ([`Cfg::token_rest_within`]), as [`Chart::fits`](crate::automaton::earley::Chart::fits) counts.
struct InsideWithin<'a> {
    cfg: &'a Cfg,
    env: &'a VocabEnv,
    scans: &'a [Scan],
    waits: Waits<'a>,
    budget: u32,
    /// Per (scan index, lexer state) met at a token's end: whether the lexeme's rest fits in
    /// tokens within what the scan's wait leaves (many tokens end in one state).
    rests: HashMap<(u32, StateId), bool, FxBuild>,
    stack: ScanStack,
    /// Per depth: whether some lexeme may end within the bytes so far (then a token there may
    /// have other ways on than its scans going on: see [`Refused`]).
    ends: Vec<bool>,
    mask: &'a mut TokenSet,
    refused: Option<&'a mut Refused>,
}

impl TrieVisitor for InsideWithin<'_> {
    #[inline]
    fn push(&mut self, _node: u32, byte: u8) -> bool {
        push_inside(self.cfg, self.scans, &mut self.stack, &mut self.ends, byte)
    }

    #[inline]
    fn pop(&mut self) {
        self.stack.pop();
        self.ends.pop();
    }

    fn tokens(&mut self, ids: &[TokenId]) {
        let ends = *self.ends.last().expect("base level");
        // The stack is read while `judge` writes elsewhere: a copy of its top is avoided by
        // taking it out for the call.
        let stack = std::mem::take(&mut self.stack);
        self.judge(stack.top(), ends, ids);
        self.stack = stack;
    }
}

impl InsideWithin<'_> {
    /// Lets `ids` through where some scan of `top` (the pairs going on at their end) finishes
    /// within the budget; else lists them as refused, apart where some lexeme may end inside
    /// them (`ends`).
    fn judge(&mut self, top: &[(u32, StateId)], ends: bool, ids: &[TokenId]) {
        let (cfg, env, scans, budget) = (self.cfg, self.env, self.scans, self.budget);
        let within = top.iter().any(|&(k, s)| {
            let dist = cfg.term(scans[k as usize].term).dist.at(s);
            dist.saturating_add(self.waits.bytes[k as usize]) <= budget
        }) || top.iter().any(|&(k, s)| {
            let wait = self.waits.tokens[k as usize];
            wait <= budget
                && *self
                    .rests
                    .entry((k, s))
                    .or_insert_with(|| cfg.token_rest_within(env, scans[k as usize].term, s, budget - wait))
        });
        match &mut self.refused {
            _ if within => self.mask.insert_clipped(ids),
            Some(refused) if ends => refused.add_ending(top, ids),
            Some(refused) => refused.add_inside(top, ids),
            None => {}
        }
    }
}

/// One byte deeper in a lexer-only walk over the scans' lexemes ([`ScanStack::push_byte`]).
#[inline]
pub(super) fn push_inside(cfg: &Cfg, scans: &[Scan], stack: &mut ScanStack, ends: &mut Vec<bool>, byte: u8) -> bool {
    stack.push_byte(ends, byte, |k| &*cfg.term(scans[k as usize].term).dfa)
}
