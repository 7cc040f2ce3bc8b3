//! Merged subtrees: what follows a group's members, as one trie ([`Below::Merged`]).
//!
//! The members of a group (the trie nodes where the same lexemes end) build the same boundary
//! row, so what follows them is walked from that row once: over the members' strict subtrees
//! merged into one trie, whose paths are the bytes after a member and whose ids are the tokens
//! that end with them. A merged trie depends on the vocabulary and the members alone, so the
//! cache keeps it by its members and every entry with the same members shares it (every state
//! inside a string that admits the same characters ends at the same closing quotes). A lone
//! member, or members holding too many ids to copy, is walked in place ([`Below::Nodes`]).

use std::sync::Arc;

use super::{Below, MaskCache, SliceNode};
use crate::automaton::slices::Slices;
use crate::automaton::VocabEnv;
use crate::vocab::TokenTrie;

/// A group's subtrees are merged when it has several members and they hold at most this many
/// ids together; otherwise its walks start at the members in the vocabulary's own tries.
const MERGE_MAX_IDS: usize = 8192;

/// What follows the members `nodes` of a group: their subtrees merged (by `merged`, which
/// gives the merged trie of a list of members) when [`MERGE_MAX_IDS`] allows, else the members
/// themselves.
pub(super) fn below(
    nodes: Vec<SliceNode>,
    slices: &Slices,
    merged: &mut impl FnMut(&[SliceNode]) -> Arc<TokenTrie>,
) -> Below {
    let ids = || nodes.iter().map(|&(part, node)| slices.trie(part as usize).ids_below(node).len()).sum::<usize>();
    if nodes.len() > 1 && ids() <= MERGE_MAX_IDS {
        Below::Merged(merged(&nodes))
    } else {
        Below::Nodes(nodes)
    }
}

impl MaskCache {
    /// The merged trie of the members `nodes`, kept by its members. Built outside the lock:
    /// another matcher may build the same trie meanwhile (the same value; the first kept wins).
    pub(super) fn merged(&self, env: &VocabEnv, nodes: &[SliceNode]) -> Arc<TokenTrie> {
        if let Some(t) = self.lock().merged.get(nodes) {
            return t.clone();
        }
        let t = Arc::new(merge_subtrees(env, nodes));
        let mut inner = self.lock();
        inner.reserve(t.node_count() * 12 + t.id_count() * 4 + nodes.len() * 8 + 32);
        inner.merged.entry(nodes.into()).or_insert(t).clone()
    }
}

/// The strict subtrees below `nodes` merged into one walk-only trie.
fn merge_subtrees(env: &VocabEnv, nodes: &[SliceNode]) -> TokenTrie {
    let slices = env.slices();
    let mut pairs = Vec::new();
    for &(part, node) in nodes {
        let trie = slices.trie(part as usize);
        let depth = trie.node_depth(node);
        pairs.extend(trie.ids_below(node).iter().map(|&id| (&env.vocab().bytes(id)[depth..], id)));
    }
    TokenTrie::build_walk_only(pairs)
}
