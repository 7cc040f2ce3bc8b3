//! The tokens of a mask that go on with the content of a JSON string the distinct-items
//! reader is in, grouped by the parse state they reach: what the matcher needs to judge them
//! a group at a time in the last tokens of a budget (see `Matcher::confirm_distinct`).

use super::{CfgRun, LexerStates, Scan};
use crate::automaton::cfg::Cfg;
use crate::automaton::mask_cache::ScanStack;
use crate::automaton::VocabEnv;
use crate::vocab::{trie::TrieVisitor, TokenId, TokenKind, TokenSet};

/// A byte that string content holds as itself: not a quote, a backslash or a control byte.
fn is_plain(b: u8) -> bool {
    b >= 0x20 && b != b'"' && b != b'\\'
}

impl CfgRun {
    /// The output so far (kept where the grammar has marks; empty otherwise).
    pub fn text(&self) -> &[u8] {
        &self.text
    }

    /// Is the distinct-items reader inside the content of a JSON string (not just after a
    /// backslash)? Then plain bytes are that string's content.
    pub fn in_string_content(&self) -> bool {
        self.pos().distinct.in_string_content()
    }

    /// The canonical forms of the finished items of every list the reader has in reach (the
    /// items a new one is compared with).
    pub fn items_in_reach(&self) -> Vec<std::sync::Arc<[u8]>> {
        self.pos().distinct.reach().iter().flat_map(|l| l.list.keys().iter().cloned()).collect()
    }

    /// The longest finished item that is an object or array, in bytes as written, of the lists
    /// the reader has in reach (0 with none): what a new distinct item may have to outgrow (see
    /// `Matcher::fill`). Strings and numbers (an object's keys among them) are left out: a
    /// new one need not outgrow the earlier ones, as there are exponentially many of each
    /// length (a few bytes more than the cheapest tell apart thousands), where a recursive
    /// object may have one shape per length (`{}`, `{"next":{}}`, ...).
    pub fn longest_item_in_reach(&self) -> usize {
        let reach = self.pos().distinct.reach();
        let containers =
            reach.iter().flat_map(|l| l.list.raws().iter().filter(|r| matches!(r.first(), Some(b'{' | b'['))));
        containers.map(|r| r.len()).max().unwrap_or(0)
    }

    /// The most items finished in one list the reader has in reach (0 with none): how many
    /// values a new item may have to try before one is not a repeat (see the witness's
    /// `Siblings`).
    pub fn most_items_in_reach(&self) -> usize {
        self.pos().distinct.reach().iter().map(|l| l.list.keys().len()).max().unwrap_or(0)
    }

    /// The tokens of `mask` made of [plain](is_plain) bytes (and, with `no_bracket`, no `[`)
    /// that keep some current lexemes going with no lexeme ending anywhere in them, grouped by
    /// the lexer states they reach: the tokens of one group reach one parse state (the chart
    /// does not change inside lexemes), and differ only in the bytes they add to the output.
    /// In order: the largest group first (ties: the smallest id first), ids ascending in each,
    /// whichever way they were found: a walk over the vocabulary's trie, or (for a few tokens)
    /// each token's bytes read on its own.
    pub fn plain_groups(&self, cfg: &Cfg, env: &VocabEnv, mask: &TokenSet, no_bracket: bool) -> Vec<Vec<TokenId>> {
        self.plain_groups_by(cfg, env, mask, no_bracket, mask.len() <= MAX_ONE_BY_ONE)
    }

    /// [`plain_groups`](Self::plain_groups), reading the tokens one by one or walking the trie.
    pub(in crate::automaton) fn plain_groups_by(
        &self,
        cfg: &Cfg,
        env: &VocabEnv,
        mask: &TokenSet,
        no_bracket: bool,
        one_by_one: bool,
    ) -> Vec<Vec<TokenId>> {
        let scans = &self.pos().scans;
        let stack = ScanStack::default();
        let mut w = PlainGroups { cfg, scans, stack, ends: vec![false], mask, no_bracket, groups: Vec::new() };
        let reset = |w: &mut PlainGroups| {
            w.stack.reset(scans.iter().map(|sc| sc.state));
            w.ends.truncate(1);
        };
        let vocab = env.vocab();
        if one_by_one {
            // The tokens the trie holds: text, not empty.
            let in_trie = |t: &TokenId| {
                (t.0 as usize) < vocab.len() && vocab.kind(*t) == TokenKind::Text && !vocab.bytes(*t).is_empty()
            };
            for t in mask.iter().filter(in_trie) {
                reset(&mut w);
                if vocab.bytes(t).iter().all(|&b| w.push(0, b)) {
                    w.tokens(&[t]);
                }
            }
        } else {
            reset(&mut w);
            vocab.trie().walk_visitor(&mut w);
        }
        let mut groups: Vec<Vec<TokenId>> = w.groups.into_iter().map(|(_, ids)| ids).collect();
        groups.iter_mut().for_each(|ids| ids.sort_unstable());
        groups.sort_by_key(|ids| (std::cmp::Reverse(ids.len()), ids[0]));
        groups
    }
}

/// The most tokens [`CfgRun::plain_groups`] reads one by one (each token's bytes through the
/// lexers) rather than walking the whole trie (which shares their prefixes, but visits every
/// token the lexers take).
const MAX_ONE_BY_ONE: usize = 8192;

/// The lexer-only walk of [`CfgRun::plain_groups`].
struct PlainGroups<'a> {
    cfg: &'a Cfg,
    scans: &'a [Scan],
    stack: ScanStack,
    /// Per depth: whether some lexeme may end within the bytes so far.
    ends: Vec<bool>,
    mask: &'a TokenSet,
    no_bracket: bool,
    groups: Vec<(LexerStates, Vec<TokenId>)>,
}

impl TrieVisitor for PlainGroups<'_> {
    fn push(&mut self, _node: u32, byte: u8) -> bool {
        if !is_plain(byte) || (self.no_bracket && byte == b'[') {
            return false;
        }
        super::within::push_inside(self.cfg, self.scans, &mut self.stack, &mut self.ends, byte)
    }

    fn pop(&mut self) {
        self.stack.pop();
        self.ends.pop();
    }

    fn tokens(&mut self, ids: &[TokenId]) {
        if *self.ends.last().expect("base level") {
            return;
        }
        let ids = ids.iter().copied().filter(|&t| self.mask.contains(t));
        let top = self.stack.top();
        match self.groups.iter().rposition(|(k, _)| k.as_slice() == top) {
            Some(i) => self.groups[i].1.extend(ids),
            None => {
                let ids: Vec<TokenId> = ids.collect();
                if !ids.is_empty() {
                    self.groups.push((top.to_vec(), ids));
                }
            }
        }
    }
}
