//! `TokenTrie`: every text token's bytes in one prefix tree, flattened for fast walks.
//!
//! Built once per vocabulary. The sorted, de-duplicated token byte strings go into an
//! `fst::Map` (bytes → node index), which answers exact and longest-prefix lookups. The same
//! sorted order is a depth-first pre-order of the trie, so we also lay the trie out as a flat
//! array of nodes in that order, each knowing where its subtree ends. A mask computation walks
//! that array front to back and, the moment the automaton dies on a node's byte, jumps to the
//! end of its subtree: one comparison skips every token with that prefix. The root's children
//! are also kept side by side (`roots`), so a walk whose automaton reads a few first bytes
//! touches only their subtrees, not a node per first byte spread over the whole array.
//!
//! Invariants:
//! - `nodes[0]` is the root (no byte, depth 0); node `i`'s subtree is `i..nodes[i].subtree_end`.
//! - A node's parent is the nearest earlier node with depth one less.
//! - Several ids may share the same bytes (e.g. `A` and the byte-fallback `<0x41>`): node `i`
//!   owns the ids `token_ids[nodes[i].tok_start .. nodes[i + 1].tok_start]` (ids are stored in
//!   node order; a sentinel node closes the array), so the ids of `i`'s strict subtree are
//!   `token_ids[nodes[i + 1].tok_start .. nodes[subtree_end].tok_start]`.
//! - `roots` lists the root's children in node order, each with its subtree's range.

use fst::raw::Output;

use super::TokenId;

#[derive(Debug, Clone, Copy)]
pub(super) struct Node {
    pub(super) subtree_end: u32,
    /// Where this node's ids start in `token_ids` (they end where the next node's start).
    pub(super) tok_start: u32,
    pub(super) depth: u16,
    pub(super) byte: u8,
}

/// A child of the root: its byte and its subtree's node range (itself first).
#[derive(Debug, Clone, Copy)]
struct Root {
    byte: u8,
    start: u32,
    end: u32,
}

pub struct TokenTrie {
    /// The nodes in depth-first pre-order, then one sentinel (its `tok_start` closes the ids).
    pub(super) nodes: Vec<Node>,
    /// The root's children, in order, side by side: a walk reads them here instead of from
    /// nodes spread over the whole array (a cache miss each, where the walk starts cold and
    /// its automaton reads a few first bytes: a key, a number).
    roots: Vec<Root>,
    pub(super) token_ids: Vec<TokenId>,
    /// Exact bytes → index of the node that owns them (`None` for a walk-only trie).
    map: Option<fst::Map<Vec<u8>>>,
    max_depth: usize,
}

impl TokenTrie {
    /// Builds the trie over `(bytes, id)` pairs (bytes non-empty, at most 65,535 long).
    pub fn build<'a>(tokens: impl Iterator<Item = (&'a [u8], TokenId)>) -> TokenTrie {
        Self::build_pairs(tokens.collect(), true)
    }

    /// A walk-only trie from its laid-out parts (see the module docs' invariants; the last node
    /// a sentinel whose `tok_start` closes the ids): the class tries' own layout.
    pub(super) fn from_nodes(nodes: Vec<Node>, token_ids: Vec<TokenId>, max_depth: usize) -> TokenTrie {
        TokenTrie { roots: roots(&nodes), nodes, token_ids, map: None, max_depth }
    }

    /// A trie for walks only: [`lookup`](Self::lookup), [`longest_prefix`](Self::longest_prefix)
    /// and [`greedy_encode`](Self::greedy_encode) find nothing in it (no byte index is built).
    pub fn build_walk_only(pairs: Vec<(&[u8], TokenId)>) -> TokenTrie {
        Self::build_pairs(pairs, false)
    }

    fn build_pairs(mut pairs: Vec<(&[u8], TokenId)>, indexed: bool) -> TokenTrie {
        pairs.retain(|(b, _)| !b.is_empty() && b.len() <= u16::MAX as usize);
        pairs.sort_unstable();
        pairs.dedup();
        let mut nodes = vec![Node { subtree_end: 0, tok_start: 0, depth: 0, byte: 0 }];
        let mut token_ids = Vec::with_capacity(pairs.len());
        let mut map = indexed.then(fst::MapBuilder::memory);
        // path[d] = index of the node at depth d on the current root-to-node path.
        let mut path: Vec<usize> = vec![0];
        let mut prev: &[u8] = &[];
        let mut max_depth = 0;
        for (bytes, id) in pairs {
            if bytes == prev {
                // Same bytes as the previous id: the node already exists and is the last one.
                token_ids.push(id);
                continue;
            }
            let common = prev.iter().zip(bytes).take_while(|(a, b)| a == b).count();
            // Close the nodes deeper than the common prefix.
            while path.len() > common + 1 {
                let done = path.pop().unwrap();
                nodes[done].subtree_end = nodes.len() as u32;
            }
            // Pairs are sorted, so `bytes` extends the common prefix: its node is new (and last).
            for (d, &b) in bytes.iter().enumerate().skip(common) {
                path.push(nodes.len());
                nodes.push(Node { subtree_end: 0, tok_start: token_ids.len() as u32, depth: d as u16 + 1, byte: b });
            }
            let last = *path.last().unwrap();
            token_ids.push(id);
            if let Some(map) = &mut map {
                map.insert(bytes, last as u64).expect("keys are sorted and unique");
            }
            max_depth = max_depth.max(bytes.len());
            prev = bytes;
        }
        while let Some(done) = path.pop() {
            nodes[done].subtree_end = nodes.len() as u32;
        }
        let end = nodes.len() as u32;
        nodes.push(Node { subtree_end: end + 1, tok_start: token_ids.len() as u32, depth: 0, byte: 0 });
        let map = map.map(|m| fst::Map::new(m.into_inner().expect("in-memory fst")).expect("valid fst"));
        TokenTrie { roots: roots(&nodes), nodes, token_ids, map, max_depth }
    }

    /// The number of nodes (root included).
    pub fn node_count(&self) -> usize {
        self.nodes.len() - 1
    }

    /// The number of ids (an id is counted once per trie it is in).
    pub fn id_count(&self) -> usize {
        self.token_ids.len()
    }

    /// Node `node`'s depth (its path's length in bytes).
    pub fn node_depth(&self, node: u32) -> usize {
        self.nodes[node as usize].depth as usize
    }

    /// The ids below node `node` (its strict subtree), in depth-first order.
    pub fn ids_below(&self, node: u32) -> &[TokenId] {
        let i = node as usize;
        let end = self.nodes[i].subtree_end as usize;
        &self.token_ids[self.nodes[i + 1].tok_start as usize..self.nodes[end].tok_start as usize]
    }

    /// Per node: the bytes of the tokens at or below it (the path's bytes and every byte on
    /// the paths beneath), as a 256-bit set. A walk that only needs tokens holding some byte
    /// of a set skips every subtree whose set misses it.
    pub fn byte_sets(&self) -> Vec<ByteSet> {
        let n = self.nodes.len() - 1;
        let mut sets = vec![ByteSet::default(); n];
        // Forward: each node's path bytes (its parent's and its own byte); `path[d]`: the
        // node at depth d on the current path.
        let mut parent = vec![0u32; n];
        let mut path: Vec<u32> = vec![0];
        for i in 1..n {
            let node = self.nodes[i];
            path.truncate(node.depth as usize);
            let p = *path.last().expect("the root is on every path");
            parent[i] = p;
            sets[i] = sets[p as usize];
            sets[i].insert(node.byte);
            path.push(i as u32);
        }
        // Backward (children come after their parent): add each node's set to its parent's.
        for i in (1..n).rev() {
            let below = sets[i];
            sets[parent[i] as usize].union(&below);
        }
        sets
    }

    /// The root's children, in byte order: each one's byte and the nodes of its subtree
    /// (itself included).
    pub fn first_bytes(&self) -> impl Iterator<Item = (u8, usize)> + '_ {
        self.roots.iter().map(|r| (r.byte, (r.end - r.start) as usize))
    }

    /// The longest token, in bytes.
    pub fn max_token_len(&self) -> usize {
        self.max_depth
    }

    /// The ids whose bytes are exactly `bytes`.
    pub fn lookup(&self, bytes: &[u8]) -> &[TokenId] {
        match self.map.as_ref().and_then(|m| m.get(bytes)) {
            Some(i) => self.node_tokens(i as usize),
            None => &[],
        }
    }

    /// The ids of every token whose bytes start with `prefix` (not empty): those of the node
    /// whose path it is and of its subtree, side by side in depth-first order.
    pub fn with_prefix(&self, prefix: &[u8]) -> &[TokenId] {
        let Some(i) = self.node_at(prefix) else { return &[] };
        let end = self.nodes[i].subtree_end as usize;
        &self.token_ids[self.nodes[i].tok_start as usize..self.nodes[end].tok_start as usize]
    }

    /// The node whose path is `prefix` (not empty), where some token starts with it: down from
    /// the root's children a byte at a time, passing over each child's subtree.
    fn node_at(&self, prefix: &[u8]) -> Option<usize> {
        let (&first, rest) = prefix.split_first()?;
        let r = self.roots.binary_search_by_key(&first, |r| r.byte).ok()?;
        let mut i = self.roots[r].start as usize;
        for &b in rest {
            let end = self.nodes[i].subtree_end as usize;
            let mut child = i + 1;
            while child < end && self.nodes[child].byte != b {
                child = self.nodes[child].subtree_end as usize;
            }
            if child >= end {
                return None;
            }
            i = child;
        }
        Some(i)
    }

    #[inline]
    fn node_tokens(&self, i: usize) -> &[TokenId] {
        &self.token_ids[self.nodes[i].tok_start as usize..self.nodes[i + 1].tok_start as usize]
    }

    /// The longest token that is a prefix of `text`: (its length, its lowest id).
    pub fn longest_prefix(&self, text: &[u8]) -> Option<(usize, TokenId)> {
        let fst = self.map.as_ref()?.as_fst();
        let mut node = fst.root();
        let mut out = Output::zero();
        let mut best = None;
        for (i, &b) in text.iter().enumerate() {
            let Some(t) = node.find_input(b) else { break };
            let tr = node.transition(t);
            out = out.cat(tr.out);
            node = fst.node(tr.addr);
            if node.is_final() {
                let idx = out.cat(node.final_output()).value() as usize;
                best = Some((i + 1, self.node_tokens(idx)[0]));
            }
        }
        best
    }

    /// Greedy longest-match tokenization; `None` if some position starts no token.
    pub fn greedy_encode(&self, mut text: &[u8]) -> Option<Vec<TokenId>> {
        let mut out = Vec::new();
        while !text.is_empty() {
            let (len, id) = self.longest_prefix(text)?;
            out.push(id);
            text = &text[len..];
        }
        Some(out)
    }

    /// Walks every token reachable from `root`.
    ///
    /// `step(state, byte)` advances the automaton; `None` means dead, and the whole subtree
    /// below that byte is skipped. For every node whose full byte path is alive, `on_tokens`
    /// gets the state after its last byte and the ids spelled by that path.
    #[inline]
    pub fn walk<S: Copy>(
        &self,
        root: S,
        mut step: impl FnMut(S, u8) -> Option<S>,
        on_tokens: impl FnMut(S, &[TokenId]),
    ) {
        self.walk_nodes(root, |s, b, _| step(s, b), on_tokens)
    }

    /// [`walk`](Self::walk), with the node index passed to `step` as well (for
    /// [`node_ids`](Self::node_ids) and [`ids_below`](Self::ids_below)).
    #[inline]
    pub fn walk_nodes<S: Copy>(
        &self,
        root: S,
        mut step: impl FnMut(S, u8, u32) -> Option<S>,
        mut on_tokens: impl FnMut(S, &[TokenId]),
    ) {
        // states[d] = the state after the first d bytes of the current path.
        let mut states = vec![root; self.max_depth + 1];
        let nodes = &self.nodes;
        for r in &self.roots {
            let Some(s) = step(root, r.byte, r.start) else { continue };
            states[1] = s;
            let ids = self.node_tokens(r.start as usize);
            if !ids.is_empty() {
                on_tokens(s, ids);
            }
            let mut i = r.start as usize + 1;
            while i < r.end as usize {
                let n = nodes[i];
                let d = n.depth as usize;
                debug_assert!(d >= 2 && d <= self.max_depth);
                match step(states[d - 1], n.byte, i as u32) {
                    None => i = n.subtree_end as usize,
                    Some(s) => {
                        states[d] = s;
                        let ids = self.node_tokens(i);
                        if !ids.is_empty() {
                            on_tokens(s, ids);
                        }
                        i += 1;
                    }
                }
            }
        }
    }
}

/// The root's children of a laid-out trie (the last node a sentinel).
fn roots(nodes: &[Node]) -> Vec<Root> {
    let n = nodes.len() - 1;
    let mut roots = Vec::new();
    let mut i = 1;
    while i < n {
        let end = nodes[i].subtree_end;
        roots.push(Root { byte: nodes[i].byte, start: i as u32, end });
        i = end as usize;
    }
    roots
}

/// A set of byte values.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, Debug)]
pub struct ByteSet(pub [u64; 4]);

impl ByteSet {
    #[inline]
    pub fn insert(&mut self, b: u8) {
        self.0[b as usize / 64] |= 1 << (b % 64);
    }

    #[inline]
    pub fn contains(&self, b: u8) -> bool {
        self.0[b as usize / 64] >> (b % 64) & 1 == 1
    }

    #[inline]
    pub fn union(&mut self, other: &ByteSet) {
        (0..4).for_each(|i| self.0[i] |= other.0[i]);
    }

    #[inline]
    pub fn meets(&self, other: &ByteSet) -> bool {
        (0..4).any(|i| self.0[i] & other.0[i] != 0)
    }

    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }
}

/// A stateful automaton for [`TokenTrie::walk_visitor`]: it keeps its own stack of states.
pub trait TrieVisitor {
    /// Advances by `byte` (the last byte of trie node `node`) and pushes the new state; `false`
    /// (nothing pushed) to skip the node's subtree, e.g. because the automaton is dead.
    fn push(&mut self, node: u32, byte: u8) -> bool;
    /// Pops the state pushed last.
    fn pop(&mut self);
    /// The ids spelled by the current path (all pushes alive).
    fn tokens(&mut self, ids: &[TokenId]);
}

impl TokenTrie {
    /// Like [`walk`](Self::walk), for automata whose state is not `Copy` (the visitor keeps a
    /// stack: one `push` per byte of the current path, `pop` when the walk backs up).
    pub fn walk_visitor(&self, v: &mut impl TrieVisitor) {
        for r in &self.roots {
            if v.push(r.start, r.byte) {
                let ids = self.node_tokens(r.start as usize);
                if !ids.is_empty() {
                    v.tokens(ids);
                }
                self.walk_visitor_below(r.start, v);
                v.pop();
            }
        }
    }

    /// Like [`walk_visitor`](Self::walk_visitor), over the subtree strictly below node `root`:
    /// the visitor's current state stands for `root`'s path, and the first push is a child's byte.
    pub fn walk_visitor_below(&self, root: u32, v: &mut impl TrieVisitor) {
        let nodes = &self.nodes;
        let base = nodes[root as usize].depth as usize;
        let end = nodes[root as usize].subtree_end as usize;
        let mut depth = 0usize;
        let mut i = root as usize + 1;
        while i < end {
            let n = nodes[i];
            let d = n.depth as usize - base;
            while depth >= d {
                v.pop();
                depth -= 1;
            }
            if v.push(i as u32, n.byte) {
                depth += 1;
                let ids = self.node_tokens(i);
                if !ids.is_empty() {
                    v.tokens(ids);
                }
                i += 1;
            } else {
                i = n.subtree_end as usize;
            }
        }
        while depth > 0 {
            v.pop();
            depth -= 1;
        }
    }

    /// The last byte of node `node`'s path.
    pub fn node_byte(&self, node: u32) -> u8 {
        self.nodes[node as usize].byte
    }

    /// The ids spelled exactly by node `node`'s path (often none).
    pub fn node_ids(&self, node: u32) -> &[TokenId] {
        self.node_tokens(node as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trie(tokens: &[&str]) -> TokenTrie {
        TokenTrie::build(tokens.iter().enumerate().map(|(i, t)| (t.as_bytes(), TokenId(i as u32))))
    }

    #[test]
    fn walk_visits_every_token_once() {
        let toks = ["a", "ab", "abc", "b", "ba", "c", "ab"];
        let t = trie(&toks);
        let mut seen = Vec::new();
        t.walk((), |_, _| Some(()), |_, ids| seen.extend(ids.iter().map(|i| i.0)));
        seen.sort();
        assert_eq!(seen, (0..toks.len() as u32).collect::<Vec<_>>());
        assert_eq!(t.lookup(b"ab"), &[TokenId(1), TokenId(6)]);
        assert!(t.lookup(b"x").is_empty());
    }

    /// The tokens with a prefix are those whose bytes start with it, for every prefix of every
    /// token and a few that none has.
    #[test]
    fn with_prefix_finds_every_token_that_starts_with_it() {
        let toks = ["a", "ab", "abc", "b", "ba", "c", "ab", "\"a\":", "\"a\"", "\"", "\"b", "abd", "xyz"];
        let t = trie(&toks);
        let mut prefixes: Vec<&[u8]> =
            toks.iter().flat_map(|x| (1..=x.len()).map(move |n| &x.as_bytes()[..n])).collect();
        prefixes.extend([&b"abx"[..], b"q", b"\"a\":1", b"\xff"]);
        for p in prefixes {
            let mut got: Vec<u32> = t.with_prefix(p).iter().map(|i| i.0).collect();
            got.sort();
            let want: Vec<u32> =
                (0..toks.len() as u32).filter(|&i| toks[i as usize].as_bytes().starts_with(p)).collect();
            assert_eq!(got, want, "{:?}", String::from_utf8_lossy(p));
        }
    }

    #[test]
    fn byte_sets_hold_the_bytes_of_every_token_below() {
        let toks = ["ab", "acd", "b", "bx", "a"];
        let t = trie(&toks);
        let sets = t.byte_sets();
        assert_eq!(sets.len(), t.node_count());
        // Against the tokens themselves: a node's set is the union of the bytes of the tokens
        // whose bytes start with its path.
        let mut paths = vec![Vec::new(); t.node_count()];
        for node in 1..t.node_count() as u32 {
            let depth = t.node_depth(node);
            let id = t.node_ids(node).first().or(t.ids_below(node).first()).expect("a token at or below");
            paths[node as usize] = toks[id.0 as usize].as_bytes()[..depth].to_vec();
        }
        for (node, path) in paths.iter().enumerate() {
            let mut want = ByteSet::default();
            toks.iter()
                .filter(|tok| tok.as_bytes().starts_with(path))
                .flat_map(|tok| tok.bytes())
                .for_each(|b| want.insert(b));
            assert_eq!(sets[node], want, "node {node} path {:?}", String::from_utf8_lossy(path));
        }
    }

    #[test]
    fn dead_byte_skips_subtree() {
        let t = trie(&["a", "ab", "abc", "b", "bab"]);
        let mut seen = Vec::new();
        // Dies on any 'b' directly after 'a'.
        t.walk(
            0u8,
            |prev, b| if prev == b'a' && b == b'b' { None } else { Some(b) },
            |_, ids| seen.extend(ids.iter().map(|i| i.0)),
        );
        seen.sort();
        assert_eq!(seen, vec![0, 3]);
    }

    #[test]
    fn visitor_walk_matches_copy_walk() {
        struct V {
            path: Vec<u8>,
            seen: Vec<(Vec<u8>, u32)>,
        }
        impl TrieVisitor for V {
            fn push(&mut self, _node: u32, b: u8) -> bool {
                // Dies on "ab" anywhere in the path.
                if self.path.last() == Some(&b'a') && b == b'b' {
                    return false;
                }
                self.path.push(b);
                true
            }
            fn pop(&mut self) {
                self.path.pop();
            }
            fn tokens(&mut self, ids: &[TokenId]) {
                for id in ids {
                    self.seen.push((self.path.clone(), id.0));
                }
            }
        }
        let t = trie(&["a", "ab", "abc", "b", "ba", "bab", "c", "cc"]);
        let mut v = V { path: vec![], seen: vec![] };
        t.walk_visitor(&mut v);
        assert!(v.path.is_empty(), "every push is popped");
        let got: Vec<u32> = v.seen.iter().map(|s| s.1).collect();
        assert_eq!(got, vec![0, 3, 4, 6, 7]);
        assert!(v
            .seen
            .iter()
            .all(|(p, id)| p == [&b"a"[..], b"ab", b"abc", b"b", b"ba", b"bab", b"c", b"cc"][*id as usize]));
    }

    #[test]
    fn visitor_walk_below_a_node() {
        struct V(Vec<u32>, usize);
        impl TrieVisitor for V {
            fn push(&mut self, _node: u32, _b: u8) -> bool {
                self.1 += 1;
                true
            }
            fn pop(&mut self) {
                self.1 -= 1;
            }
            fn tokens(&mut self, ids: &[TokenId]) {
                self.0.extend(ids.iter().map(|i| i.0));
            }
        }
        let t = trie(&["a", "ab", "abc", "abd", "b", "ba"]);
        let ab = t.map.as_ref().unwrap().get(b"ab").unwrap() as u32;
        assert_eq!(t.node_byte(ab), b'b');
        assert_eq!(t.node_ids(ab), &[TokenId(1)]);
        let mut v = V(vec![], 0);
        t.walk_visitor_below(ab, &mut v);
        assert_eq!((v.0, v.1), (vec![2, 3], 0), "only the strict subtree, every push popped");
    }

    #[test]
    fn many_ids_per_node_and_ids_below() {
        // 300 ids share "ab" (more than a byte can count); a walk-only trie finds no bytes.
        let mut pairs: Vec<(&[u8], TokenId)> = (0..300).map(|i| (&b"ab"[..], TokenId(i))).collect();
        pairs.extend([(&b"a"[..], TokenId(300)), (&b"abc"[..], TokenId(301)), (&b"b"[..], TokenId(302))]);
        let t = TokenTrie::build_walk_only(pairs.clone());
        assert!(t.lookup(b"ab").is_empty() && t.longest_prefix(b"ab").is_none());
        let t = TokenTrie::build(pairs.into_iter());
        assert_eq!(t.lookup(b"ab").len(), 300);
        let a = t.map.as_ref().unwrap().get(b"a").unwrap() as u32;
        assert_eq!(t.node_depth(a), 1);
        let mut below: Vec<u32> = t.ids_below(a).iter().map(|i| i.0).collect();
        below.sort();
        assert_eq!(below, (0..300).chain([301]).collect::<Vec<_>>());
        assert!(t.ids_below(t.map.as_ref().unwrap().get(b"b").unwrap() as u32).is_empty());
        assert_eq!(t.ids_below(0).len(), 303);
        let mut seen = 0;
        t.walk((), |_, _| Some(()), |_, ids| seen += ids.len());
        assert_eq!(seen, 303);
    }

    #[test]
    fn greedy_longest_match() {
        let t = trie(&["a", "ab", "abc", "c", "bc"]);
        assert_eq!(t.greedy_encode(b"abcabc").unwrap(), vec![TokenId(2), TokenId(2)]);
        assert_eq!(t.greedy_encode(b"abbc").unwrap(), vec![TokenId(1), TokenId(4)]);
        assert!(t.greedy_encode(b"x").is_none());
        assert_eq!(t.longest_prefix(b"ax"), Some((1, TokenId(0))));
    }
}
