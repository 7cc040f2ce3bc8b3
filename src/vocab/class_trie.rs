//! `ClassTrie`: a [`TokenTrie`] read through a byte-class map, for automata that cannot tell the
//! bytes of one class apart.
//!
//! A DFA steps alike on every byte of one of its classes, so two trie nodes whose paths have
//! the same *classes* (`"Job"` and `"Dev"` under `[A-Za-z]`) reach the same state from any
//! start: one walk step stands for both. A class trie is the trie of the class strings of a
//! trie's tokens (the trie determinized under the class map): each node stands for its
//! *members*, the nodes of the token trie whose paths map to its class string, and holds the
//! ids those members spell. Under a letters-and-digits map (an e-mail address, a date, a
//! number) a 49k vocabulary's 100k nodes become about 1,500, and a walk visits that many at
//! most instead of tens of thousands. A map that splits the letters (string escapes: `\n`,
//! `\u00e9`) gains little; [`TokenTrie::by_classes`] gives up past a node budget.
//!
//! Invariants: `trie` keeps [`TokenTrie`]'s layout (pre-order, subtree ends, ids per node, a
//! sentinel); node `i` stands for `members[member_at[i]..member_at[i + 1]]`, ascending, all at
//! its depth; every node of the token trie is a member of exactly one node, but those with a
//! byte of [`DEAD_CLASS`] on their path (members of none); a node's ids are its members' ids,
//! member by member.

use super::trie::{Node, TokenTrie};
use super::TokenId;

/// A token trie read through a byte-class map (see the module docs): a walk-only
/// [`TokenTrie`] whose paths are class strings (each node's byte is its first member's: a byte
/// of its class), and each node's members.
pub struct ClassTrie {
    trie: TokenTrie,
    /// Node `i`'s members: `members[member_at[i]..member_at[i + 1]]`.
    member_at: Vec<u32>,
    members: Vec<u32>,
}

/// The class of bytes the automaton dies on wherever it is: a node with such a byte stands
/// for nothing (its subtree is left out of the class trie).
pub const DEAD_CLASS: u8 = u8::MAX;

impl TokenTrie {
    /// This trie read through `classes` (byte → class; [`DEAD_CLASS`]: left out, subtree and
    /// all), or `None` when that takes more than `max_nodes` nodes (the map splits the tokens
    /// too finely to be worth it).
    ///
    /// Three passes: every node's class node (numbered as first met, children kept in a table
    /// by class), the class nodes in pre-order, then the members by class node (ascending, as
    /// met) and their ids.
    pub fn by_classes(&self, classes: &[u8; 256], max_nodes: usize) -> Option<ClassTrie> {
        // Dense class numbers, so the children table has one column per class in use.
        let mut dense_of = [u16::MAX; 256];
        let mut dense = [0u16; 256];
        let mut k = 0usize;
        for b in 0..256 {
            let c = classes[b] as usize;
            if dense_of[c] == u16::MAX {
                dense_of[c] = k as u16;
                k += 1;
            }
            dense[b] = dense_of[c];
        }
        let n = self.node_count();
        let nodes = &self.nodes[..n + 1];
        let own_ids = |i: usize| nodes[i + 1].tok_start - nodes[i].tok_start;
        // Pass 1: `of[i]`, node i's class node; `child[c * k + class]`, class node c's child;
        // per class node, its members and their ids counted. (Nodes left out keep `NONE`.)
        const NONE: u32 = u32::MAX;
        let mut of = vec![NONE; n];
        of[0] = 0;
        let mut child = vec![u32::MAX; k];
        let mut depth = vec![0u16];
        let (mut member_n, mut id_n) = (vec![1u32], vec![own_ids(0)]);
        // path[d]: the class node of the current path's node at depth d (deeper entries stale).
        let mut path = vec![0u32; self.max_token_len() + 1];
        let mut i = 1;
        while i < n {
            let node = nodes[i];
            if classes[node.byte as usize] == DEAD_CLASS {
                i = node.subtree_end as usize;
                continue;
            }
            let d = node.depth as usize;
            let slot = path[d - 1] as usize * k + dense[node.byte as usize] as usize;
            let mut c = child[slot];
            if c == u32::MAX {
                c = depth.len() as u32;
                if depth.len() >= max_nodes {
                    return None;
                }
                child[slot] = c;
                child.resize(child.len() + k, u32::MAX);
                depth.push(d as u16);
                member_n.push(0);
                id_n.push(0);
            }
            of[i] = c;
            path[d] = c;
            member_n[c as usize] += 1;
            id_n[c as usize] += own_ids(i);
            i += 1;
        }
        // Pass 2: pre-order positions and subtree ends.
        let count = depth.len();
        let mut pos = vec![0u32; count];
        let mut order: Vec<u32> = Vec::with_capacity(count);
        let mut end = vec![0u32; count];
        let mut stack: Vec<(u32, bool)> = vec![(0, false)];
        while let Some((c, done)) = stack.pop() {
            if done {
                end[c as usize] = order.len() as u32;
                continue;
            }
            pos[c as usize] = order.len() as u32;
            order.push(c);
            stack.push((c, true));
            let row = &child[c as usize * k..(c as usize + 1) * k];
            stack.extend(row.iter().rev().filter(|&&x| x != u32::MAX).map(|&x| (x, false)));
        }
        // Pass 3: members and ids by class node, in one front-to-back pass over the nodes (a
        // counting sort by the counts of pass 1: ascending within each class node, ids member
        // by member). Indexed by class node here, by pre-order position in the result.
        let (mut member_at, mut id_at) = (vec![0u32; count + 1], vec![0u32; count + 1]);
        for p in 0..count {
            let c = order[p] as usize;
            member_at[p + 1] = member_at[p] + member_n[c];
            id_at[p + 1] = id_at[p] + id_n[c];
        }
        let (mut next_member, mut next_id) = (vec![0u32; count], vec![0u32; count]);
        for c in 0..count {
            let p = pos[c] as usize;
            (next_member[c], next_id[c]) = (member_at[p], id_at[p]);
        }
        let mut nodes_out: Vec<Node> = (0..count)
            .map(|p| {
                let c = order[p] as usize;
                Node { subtree_end: end[c], tok_start: id_at[p], depth: depth[c], byte: 0 }
            })
            .collect();
        let mut ids_out = vec![TokenId(0); id_at[count] as usize];
        let mut members = vec![0u32; member_at[count] as usize];
        let token_ids = &self.token_ids;
        for (i, &c) in of.iter().enumerate() {
            if c == NONE {
                continue;
            }
            let c = c as usize;
            let (m, t) = (next_member[c] as usize, next_id[c] as usize);
            members[m] = i as u32;
            next_member[c] += 1;
            let (from, to) = (nodes[i].tok_start as usize, nodes[i + 1].tok_start as usize);
            if from < to {
                // Mostly one id: a loop, not a call to copy.
                for (k, &id) in token_ids[from..to].iter().enumerate() {
                    ids_out[t + k] = id;
                }
                next_id[c] += (to - from) as u32;
            }
        }
        // A class node's byte is its first member's.
        for p in 1..count {
            nodes_out[p].byte = nodes[members[member_at[p] as usize] as usize].byte;
        }
        let max_depth = depth.iter().copied().max().unwrap_or(0) as usize;
        nodes_out.push(Node { subtree_end: count as u32 + 1, tok_start: ids_out.len() as u32, depth: 0, byte: 0 });
        let trie = TokenTrie::from_nodes(nodes_out, ids_out, max_depth);
        Some(ClassTrie { trie, member_at, members })
    }
}

impl ClassTrie {
    /// The trie of the class strings: walk it (`walk_nodes`: `step` gets a byte of the node's
    /// class, any one standing for all), its node's ids are its members' ids.
    pub fn trie(&self) -> &TokenTrie {
        &self.trie
    }

    /// The number of nodes (root included).
    pub fn node_count(&self) -> usize {
        self.trie.node_count()
    }

    /// Heap bytes, roughly (for cache bounds).
    pub fn heap_bytes(&self) -> usize {
        (self.trie.node_count() + 1) * std::mem::size_of::<Node>()
            + self.trie.id_count() * 4
            + (self.members.len() + self.member_at.len()) * 4
    }

    /// The ids spelled by node `node`'s members (often none).
    pub fn node_ids(&self, node: u32) -> &[TokenId] {
        self.trie.node_ids(node)
    }

    /// The token-trie nodes that node `node` stands for, ascending.
    pub fn members(&self, node: u32) -> &[u32] {
        let i = node as usize;
        &self.members[self.member_at[i] as usize..self.member_at[i + 1] as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trie(tokens: &[&str]) -> TokenTrie {
        TokenTrie::build(tokens.iter().enumerate().map(|(i, t)| (t.as_bytes(), TokenId(i as u32))))
    }

    /// Letters one class, digits another, every other byte its own.
    fn letters_digits() -> [u8; 256] {
        std::array::from_fn(|b| match b as u8 {
            b'a'..=b'z' | b'A'..=b'Z' => 1,
            b'0'..=b'9' => 2,
            _ => 3 + (b as u8 % 200),
        })
    }

    #[test]
    fn class_strings_stand_for_their_members() {
        let toks = ["ab", "cd", "a1", "b", "x9", "ab", "1", "a-", "zz-"];
        let t = trie(&toks);
        let c = t.by_classes(&letters_digits(), 1000).expect("small");
        // Class strings: L, LL, LD, L-, LL-, D.
        assert_eq!(c.node_count(), 7);
        // Every token trie node is a member of exactly one class node, at the same depth;
        // every id once, under the class string of its bytes.
        let mut members: Vec<u32> = (0..c.node_count() as u32).flat_map(|n| c.members(n).to_vec()).collect();
        members.sort();
        assert_eq!(members, (0..t.node_count() as u32).collect::<Vec<_>>());
        let mut seen = Vec::new();
        c.trie().walk_nodes(
            0u32,
            |d, _, node| {
                for &m in c.members(node) {
                    assert_eq!(t.node_depth(m), d as usize + 1);
                }
                Some(d + 1)
            },
            |_, ids| seen.extend(ids.iter().map(|i| i.0)),
        );
        seen.sort();
        assert_eq!(seen, (0..toks.len() as u32).collect::<Vec<_>>());
        // A node's ids are the tokens of one class string, and no other node has that string:
        // "ab" (twice) and "cd" share LL.
        let classes = letters_digits();
        let class_string = |id: &TokenId| toks[id.0 as usize].bytes().map(|b| classes[b as usize]).collect::<Vec<_>>();
        let mut strings = Vec::new();
        for n in 0..c.node_count() as u32 {
            if let Some(first) = c.node_ids(n).first() {
                assert!(c.node_ids(n).iter().all(|id| class_string(id) == class_string(first)));
                strings.push(class_string(first));
            }
        }
        let all = strings.len();
        strings.sort();
        strings.dedup();
        assert_eq!(strings.len(), all);
        let ll = (0..c.node_count() as u32).find(|&n| c.node_ids(n).contains(&TokenId(0))).expect("ab");
        let mut ids: Vec<u32> = c.node_ids(ll).iter().map(|i| i.0).collect();
        ids.sort();
        assert_eq!(ids, [0, 1, 5]);
        // Bytes of the dead class leave their subtrees out: "a-" and "zz-" under `-` dead.
        let mut dead = letters_digits();
        dead[b'-' as usize] = DEAD_CLASS;
        let d = t.by_classes(&dead, 1000).expect("small");
        assert_eq!(d.node_count(), 5, "the root, L, LL, LD, D; L- and LL- left out");
        let mut kept: Vec<u32> = (0..d.node_count() as u32).flat_map(|n| d.node_ids(n).iter().map(|i| i.0)).collect();
        kept.sort();
        assert_eq!(kept, [0, 1, 2, 3, 4, 5, 6]);
        // A node budget it cannot keep.
        assert!(t.by_classes(&letters_digits(), 3).is_none());
    }
}
