//! [`VocabEnv`]: a vocabulary together with what the automaton keeps per vocabulary, shared by
//! every constraint compiled for it (llguidance calls the same idea its token environment).
//!
//! - the vocabulary ([`Vocab`]: token bytes, kinds, EOS, the token trie);
//! - its [`Slices`]: the text tokens split into parts a lexer state
//!   often admits wholesale, built on first use;
//! - the [`MaskCache`]: per set of lexer states, the part of the
//!   mask that does not depend on the parser, keyed by lexeme DFA ids (lexeme DFAs are shared
//!   across compiles, so the entry for "inside a JSON string" serves every schema);
//! - the bytes that exist as single-byte tokens (the cheap bound of the never-truncated budget);
//! - the [`TokenDistances`](super::token_dist::TokenDistances) of each lexeme DFA asked about:
//!   how many of this vocabulary's tokens finish a lexeme (the exact count, where the cheap
//!   bound does not fit a budget);
//! - the distinct-items filter's token sets ([`DistinctTokens`]), per pair of last bytes they
//!   depend on (tool calls' grammars share one).
//!
//! Create one per vocabulary and compile every constraint for that vocabulary against it
//! ([`Compiled::new`](super::Compiled::new)): the caches are what make the second schema's
//! masks cheap. Immutable but for its caches (interior, bounded); `Send + Sync`.
//!
//! The vocabulary itself knows nothing of automata: data flows vocab ← automaton.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use super::cfg::DistinctTokens;
use super::cfg_run::WalkCache;
use super::mask_cache::{ClassPolicy, MaskCache};
use super::slices::Slices;
use super::token_dist::{Reach, TokenDistances};
use crate::regular::{Dfa, StateId};
use crate::vocab::{TokenId, TokenKind, Vocab};

/// Most DFAs whose token distances an environment keeps (emptied past it).
const MAX_TOKEN_DIST_DFAS: usize = 4096;

/// Most sets of [`DistinctTokens`] an environment keeps (emptied past it): one per distinct
/// pair of last bytes, a handful in practice.
const MAX_DISTINCT_TOKEN_SETS: usize = 64;

/// What [`DistinctTokens`] depend on: the last bytes of a grammar's marked literals and of its
/// text items' closes (each sorted, distinct).
type LastBytes = (Vec<u8>, Vec<u8>);

pub struct VocabEnv {
    vocab: Arc<Vocab>,
    /// Built on the first cached mask.
    slices: OnceLock<Slices>,
    mask_cache: MaskCache,
    /// `usable[b]`: some text token is exactly the byte `b`.
    usable: [bool; 256],
    /// Token distances per lexeme DFA (by [`Dfa::id`]).
    token_dists: Mutex<HashMap<u64, Arc<TokenDistances>>>,
    /// The distinct-items filter's token sets, by the last bytes they depend on.
    distinct: Mutex<HashMap<LastBytes, Arc<DistinctTokens>>>,
    /// Budgeted lexer walks already made, by what they depend on.
    budgeted_walks: WalkCache,
}

/// The string formats whose first mask [`VocabEnv::prepare`] computes ahead: those read over
/// letters, whose walks are large and whose every character is a new state (the others are
/// read over digits: their walks are small).
pub const PREPARED_FORMATS: [&str; 3] = ["email", "hostname", "uri"];

impl VocabEnv {
    /// The environment of `vocab`, with empty caches.
    pub fn new(vocab: Arc<Vocab>) -> Arc<VocabEnv> {
        let mut usable = [false; 256];
        for b in 0..=255u8 {
            usable[b as usize] = !vocab.trie().lookup(&[b]).is_empty();
        }
        Arc::new(VocabEnv {
            vocab,
            slices: OnceLock::new(),
            mask_cache: MaskCache::default(),
            usable,
            token_dists: Mutex::default(),
            budgeted_walks: WalkCache::default(),
            distinct: Mutex::default(),
        })
    }

    pub fn vocab(&self) -> &Arc<Vocab> {
        &self.vocab
    }

    /// The text tokens split into [`Slices`], built on the first call.
    pub fn slices(&self) -> &Slices {
        self.slices.get_or_init(|| {
            let v = &self.vocab;
            let text = (0..v.len() as u32)
                .map(TokenId)
                .filter(|&id| v.kind(id) == TokenKind::Text && !v.bytes(id).is_empty())
                .map(|id| (v.bytes(id), id));
            Slices::build(v.len(), text)
        })
    }

    /// Builds now what the first masks over this vocabulary would otherwise build, so that no
    /// request waits for it: the [`Slices`] (about 15 ms on a 49k vocabulary); the
    /// string-content automaton and the class tries of plain string content; and the first
    /// mask inside a string of each format in [`PREPARED_FORMATS`], compiled as a schema
    /// would be (the format's lexeme is shared with every schema that uses it as it is, and
    /// its class tries with those whose strings split the bytes alike): a few ms more.
    /// Idempotent; a mask that needs the slices while this runs waits for them.
    pub fn prepare(self: &Arc<Self>) {
        self.slices();
        self.mask_cache.prepare_content_tries(self);
        let quote = self.vocab.encode(b"\"").unwrap_or_default();
        let mut mask = crate::vocab::TokenSet::new(self.vocab.len());
        for format in PREPARED_FORMATS {
            let schema = serde_json::json!({"type": "string", "format": format});
            let Ok(c) = super::Compiled::new(self, &super::Constraint::JsonSchema(schema, Default::default())) else {
                continue;
            };
            let mut m = c.matcher();
            if quote.iter().all(|&t| m.commit(t).is_ok()) {
                m.fill_mask(&mut mask);
            }
        }
    }

    /// [`prepare`](Self::prepare) on a thread of its own, so that the caller (a model loader)
    /// does not wait for it either.
    pub fn prepare_in_background(self: &Arc<Self>) {
        let env = self.clone();
        // If the thread cannot start, the first mask builds them, as without this call.
        let _ = std::thread::Builder::new().name("strictly-vocab-prepare".into()).spawn(move || env.prepare());
    }

    pub(crate) fn mask_cache(&self) -> &MaskCache {
        &self.mask_cache
    }

    /// The budgeted lexer walks of this vocabulary's masks already made (see [`WalkCache`]).
    pub(crate) fn budgeted_walks(&self) -> &WalkCache {
        &self.budgeted_walks
    }

    /// The fewest tokens of this vocabulary from `state` of `dfa` to acceptance, if `budget` or
    /// fewer (see [`TokenDistances`]).
    pub(crate) fn token_reach(&self, dfa: &Dfa, state: StateId, budget: u32) -> Reach {
        self.token_distances(dfa).reach(&self.vocab, dfa, state, budget)
    }

    /// Can `budget` tokens of this vocabulary surely take `dfa` from `state` to acceptance
    /// (see [`TokenDistances::within`])?
    pub(crate) fn token_within(&self, dfa: &Dfa, state: StateId, budget: u32) -> bool {
        self.token_distances(dfa).within(&self.vocab, dfa, state, budget)
    }

    fn token_distances(&self, dfa: &Dfa) -> Arc<TokenDistances> {
        let mut all = self.token_dists.lock().unwrap_or_else(|e| e.into_inner());
        if all.len() >= MAX_TOKEN_DIST_DFAS && !all.contains_key(&dfa.id()) {
            all.clear();
        }
        all.entry(dfa.id()).or_default().clone()
    }

    /// The distinct-items filter's token sets for a grammar whose marked literals end with the
    /// bytes `last` and text items' closes with `close_last` (sorted, distinct): built once per
    /// pair, so every request with tool calls does not scan the vocabulary again.
    pub(crate) fn distinct_tokens(&self, last: Vec<u8>, close_last: Vec<u8>) -> Arc<DistinctTokens> {
        let mut all = self.distinct.lock().unwrap_or_else(|e| e.into_inner());
        let key = (last, close_last);
        if let Some(d) = all.get(&key) {
            return d.clone();
        }
        if all.len() >= MAX_DISTINCT_TOKEN_SETS {
            all.clear();
        }
        let d = Arc::new(DistinctTokens::build(&self.vocab, &key.0, &key.1));
        all.insert(key, d.clone());
        d
    }

    /// Which bytes exist as single-byte text tokens.
    pub(crate) fn usable_bytes(&self) -> &[bool; 256] {
        &self.usable
    }

    /// Sets when the mask cache reads vocabulary slices through a lexeme's byte classes (see
    /// `mask_cache::classes`): by default where a walk proved costly; tests ask for every walk
    /// that can, or none, and compare the masks.
    pub fn set_class_policy(&self, policy: ClassPolicy) {
        self.mask_cache.set_class_policy(policy);
    }

    /// Empties the mask cache, so the next masks are computed as in a fresh process (with the
    /// shared lexeme DFAs emptied too, see `regular::Dfa::clear_shared`). For measurements that
    /// must replay a first mask; a server never needs it.
    pub fn clear_mask_cache(&self) {
        self.mask_cache.clear();
        crate::regular::Dfa::clear_shared();
    }
}

impl std::fmt::Debug for VocabEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VocabEnv({:?})", self.vocab)
    }
}
