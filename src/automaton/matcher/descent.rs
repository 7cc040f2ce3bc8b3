//! The descent: a completion spelled in tokens and guided by the lexeme-by-lexeme count, for a
//! context-free constraint under a budget with more tokens left than the exact
//! [`search`](super::search) settles.
//!
//! Two upper bounds judge a refused token before it: the count
//! ([`CfgRun::finish_cost`](crate::automaton::cfg_run::CfgRun::finish_cost)) knows the fewest
//! tokens lexeme by lexeme (an enum value of one token, longer in bytes than another of three)
//! but not a token across two lexemes (`",`); the [`witness`](super::witness) is the cheapest
//! completion in bytes, spelled in tokens (it crosses lexemes, but takes the three-token value).
//! Where the best way needs both, neither shows it. The descent follows the count's choices
//! token by token: from a point the count finishes in `c` tokens it takes the shortest token
//! (ties by the smallest id) after which the count says at most `c - 1` (one exists: the
//! count's own next token; a token is checked by committing it), so it takes at most the
//! count's tokens and ends within `c` steps; its bytes (the count's choices: `very active`
//! where the cheapest bytes are `sedentary`) are then spelled again in the fewest tokens the
//! matcher takes ([`spell`](Matcher::spell)), which crosses lexemes (`":"`, `"}}`). The shorter
//! of the two is the descent's way. Taking the longest token instead follows tokens that open
//! costly ways (`":-` into a long negative integer) and was measured worse.
//!
//! Where it is used: the questions asked once per request or per forced run
//! ([`Matcher::can_finish_within`], `min_tokens_to_finish`: `strictly check`'s `min_tokens` and
//! the request check), where the search cannot settle them (more than `MAX_SEARCH_TOKENS`
//! left, or its work ran out before it did); and a budgeted mask that would otherwise be empty
//! (the count, the witness and the search showed no token) takes the descent's first token if
//! its way fits; and in a budgeted mask, the first few parse states the search could not
//! settle (its work ran out first) are judged by a descent each (`allow_by_search`; through
//! one [`DescentMemo`] per mask: a descent that reaches a parse state an earlier one passed
//! takes the rest from there, as inside a string every token leads back to a few states). So a
//! budget the descent accepts never meets an empty mask, and a request is not refused where
//! the count's choices fit. It does not judge every refused token in a mask:
//! measured that way (a descent per refused parse state) the tightest-budget masks cost 2.4x
//! and no instance more was accepted, since each of a mask's many parse states needed a
//! descent of its own and the work ran out first.
//!
//! Each step is one budgeted count-only mask
//! ([`CfgRun::fill`](crate::automaton::cfg_run::CfgRun::fill) with no refusals asked for: a
//! walk of the vocabulary, none where no token inside a lexeme can fit, as at the last step),
//! so a descent costs up to its length in walks: one descent looks at most
//! [`MAX_DESCENT_WORK`] tokens (counted as the vocabulary's size per step). Grammars with distinct-items marks do not descend (as they
//! are not searched): a parse state's key does not hold the reader of distinct items.
//!
//! Invariants: the descent commits only through `Matcher::commit` and leaves the matcher as it
//! found it (witness included); what it finds is a function of the parse state alone (its
//! work is its own), so the fast and the reference mask agree.

use std::sync::Arc;

use super::KeyMap;
use super::{Backend, Matcher, Run};
use crate::automaton::cfg_run::RowWords;
use crate::automaton::earley::ChartLen;
use crate::regular::UNREACHABLE;
use crate::vocab::{TokenId, TokenSet};

/// The work one descent may do, in tokens looked at (each step counts the vocabulary's size):
/// about 32 steps on a 128k vocabulary.
pub(super) const MAX_DESCENT_WORK: usize = 1 << 22;

/// The most tokens one step of the descent commits to check that the count drops after them
/// (the budgeted walk also lets through tokens after which it does not: short tokens inside a
/// string or a number come first and are checked in vain).
const MAX_CHECKS: usize = 4096;

impl Matcher {
    /// Is a way to finish within `n` more tokens shown from here, by the exact
    /// [`search`](super::search) (with at most `MAX_SEARCH_TOKENS` left) or, where it cannot
    /// settle it (more tokens left, or its work ran out before it did), by the descent, or else
    /// by the deep search? `false` is a proof only when the search settled it. The matcher is
    /// left as it was (the deep search's way may become the witness).
    pub(super) fn finishes_within(&mut self, n: u32) -> bool {
        if let Some(mut search) = self.new_search(n) {
            let found = self.search_within(n, &mut search);
            if found || search.work >= self.compiled.vocab().len() {
                return found;
            }
        }
        self.descent_len().is_some_and(|d| d <= n) || self.deep_way(n).is_some()
    }

    /// Does this run descend: a context-free run without distinct-items marks (as the search).
    fn descends(&self) -> bool {
        matches!((&self.run, &self.compiled.backend), (Run::Cfg(_), Backend::Earley(cfg)) if !cfg.has_marks)
    }

    /// The tokens a descent from here finishes in (see [`descent_path`](Self::descent_path)).
    pub(super) fn descent_len(&mut self) -> Option<u32> {
        self.descent_path().map(|p| p.len() as u32)
    }

    /// A way to finish from here found by the descent: its tokens, or its bytes spelled again
    /// in the fewest tokens the matcher takes where that is shorter. `None`: no descent for
    /// this run, a dead end, or its work ran out. The matcher is left as it was.
    pub(super) fn descent_path(&mut self) -> Option<Vec<TokenId>> {
        self.descent_path_with(None)
    }

    /// [`descent_path`](Self::descent_path), taking the rest of a descent from `memo` where one
    /// passed the same parse state before (and keeping this one's there).
    pub(super) fn descent_path_with(&mut self, memo: Option<&mut DescentMemo>) -> Option<Vec<TokenId>> {
        if !self.descends() {
            return None;
        }
        self.descent_path_unchecked(memo)
    }

    /// [`descent_path`](Self::descent_path) where items must be distinct too: each token is
    /// committed through the repeats' check, so a way it finds is one (a descent that meets
    /// only repeats ends at a dead end, `None`); without a memo, whose parse states do not see
    /// the items. What an otherwise empty budgeted mask asks last.
    pub(super) fn descent_path_marked(&mut self) -> Option<Vec<TokenId>> {
        matches!(self.run, Run::Cfg(_)).then(|| self.descent_path_unchecked(None)).flatten()
    }

    fn descent_path_unchecked(&mut self, memo: Option<&mut DescentMemo>) -> Option<Vec<TokenId>> {
        let start = self.len();
        let saved = self.witness.take();
        let path = self.descend(memo);
        self.rollback(self.len() - start).expect("committed here");
        let found = path.map(|path| {
            let compiled = self.compiled.clone();
            let (named, vocab) = (compiled.named.as_ref(), compiled.vocab());
            let bytes: Vec<u8> = path
                .iter()
                .flat_map(|&t| named.and_then(|n| n.bytes(t)).unwrap_or_else(|| vocab.bytes(t)).iter().copied())
                .collect();
            let again = self.spell(&bytes);
            self.rollback(self.len() - start).expect("committed here");
            match again {
                Some(again) if again.len() < path.len() => again,
                _ => path,
            }
        });
        self.witness = saved;
        found
    }

    /// Commits, token by token, the shortest token after which the count drops (ties by the
    /// smallest id), until the output is complete (the caller rolls back); `None` at a dead
    /// end, or when the work or a step's [`MAX_CHECKS`] run out.
    fn descend(&mut self, mut memo: Option<&mut DescentMemo>) -> Option<Vec<TokenId>> {
        let mut work = MAX_DESCENT_WORK;
        let compiled = self.compiled.clone();
        let (env, named) = (&compiled.env, compiled.named.as_ref());
        let vocab = env.vocab();
        let mut mask = TokenSet::new(vocab.len());
        let mut path = Vec::new();
        // The states passed, keyed for the memo, with the path's length there.
        let mut passed: Vec<(Vec<u32>, usize)> = Vec::new();
        // The rows up to the step before and their word (see `CfgRun::chained_state_key`).
        let mut chain: Option<(u32, u32)> = None;
        while !self.is_accepting() {
            let (Run::Cfg(c), Backend::Earley(cfg)) = (&mut self.run, &compiled.backend) else {
                return None;
            };
            if let Some(memo) = memo.as_deref_mut() {
                // Keyed from the step before (the memo's root first), as the search keys.
                let (from, before) = chain.unwrap_or((memo.root.rows(), 0));
                let (key, word) = c.chained_state_key(from, before, &mut memo.rows);
                chain = Some((c.chart_len().rows(), word));
                if let Some(rest) = memo.rest.get(&key) {
                    // What the steps from here did before, each a walk of the work.
                    if rest.len().saturating_mul(vocab.len()) > work {
                        return None;
                    }
                    memo.hits += 1;
                    path.extend_from_slice(rest);
                    break;
                }
                passed.push((key, path.len()));
            }
            let count = c.finish_cost(cfg, env);
            if count == 0 || count == UNREACHABLE || work < vocab.len() {
                return None;
            }
            work -= vocab.len();
            // This step's own mask (a fill adds to what the mask holds).
            mask.clear();
            c.fill(cfg, env, &mut mask, count - 1, None);
            let text = |t: &TokenId| named.is_none_or(|n| !n.is_barred(*t));
            let mut ways: Vec<(usize, TokenId)> = mask.iter().filter(text).map(|t| (vocab.bytes(t).len(), t)).collect();
            for (t, bytes) in named.iter().flat_map(|n| n.tokens()) {
                if self.commit_text(bytes, true).is_ok() {
                    let (Run::Cfg(c), Backend::Earley(cfg)) = (&mut self.run, &compiled.backend) else {
                        unreachable!("a context-free run")
                    };
                    if c.finish_cost(cfg, env) < count {
                        ways.push((bytes.len(), *t));
                    }
                    self.rollback(1).expect("committed just now");
                }
            }
            ways.sort_unstable_by_key(|&(k, t)| (k, t));
            // The budgeted mask is judged at the token's end; the count is checked again after
            // it, so that every step drops it and the descent ends within the first count.
            let t = ways.into_iter().map(|(_, t)| t).take(MAX_CHECKS).find(|&t| {
                if self.commit(t).is_err() {
                    return false;
                }
                let (Run::Cfg(c), Backend::Earley(cfg)) = (&mut self.run, &compiled.backend) else {
                    unreachable!("a context-free run")
                };
                let drops = c.finish_cost(cfg, env) < count;
                if !drops {
                    self.rollback(1).expect("committed just now");
                }
                drops
            })?;
            path.push(t);
        }
        if let Some(memo) = memo {
            for (key, at) in passed {
                memo.rest.insert(key, path[at..].into());
            }
        }
        Some(path)
    }
}

/// The descents of one mask (`allow_by_search`): from each parse state a descent passed
/// (keyed from the mask's position), the tokens it committed from there to the end. A
/// descent's steps from a state are a function of that state (each step's mask and count
/// are), so a later descent that reaches it takes the rest without walking again; the answers
/// are those without the memo (the rest is taken only where its steps fit the work left),
/// whichever descent comes first.
pub(super) struct DescentMemo {
    root: ChartLen,
    rest: KeyMap<Arc<[TokenId]>>,
    /// The rows since `root`, chained into words for the keys.
    rows: RowWords,
    /// Descents that took their rest from here.
    hits: usize,
}

impl DescentMemo {
    /// An empty memo for the descents from the current position of `m` (`None` for a run that
    /// does not descend).
    pub(super) fn new(m: &Matcher) -> Option<DescentMemo> {
        match &m.run {
            Run::Cfg(c) if m.descends() => {
                Some(DescentMemo { root: c.chart_len(), rest: KeyMap::default(), rows: RowWords::default(), hits: 0 })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::DescentMemo;
    use crate::automaton::{Compiled, Constraint, VocabEnv};
    use crate::grammar::json_schema::JsonSchemaOptions;
    use crate::vocab::{TokenSet, Vocab};

    /// The descents of one mask through the memo find what each finds alone, whichever comes
    /// first (forward and backward over the tokens of a mask), and later ones take their rest
    /// from it: inside a string every token leads back to the same few parse states.
    #[test]
    fn descents_through_the_memo_are_the_descents_alone() {
        let v = Arc::new(Vocab::embedded());
        let env = VocabEnv::new(v.clone());
        let schema = serde_json::json!({"type": "object", "properties": {
            "name": {"type": "string"}, "mood": {"enum": ["happy", "very sad"]}},
            "required": ["name", "mood"], "additionalProperties": false});
        let c = Compiled::new(&env, &Constraint::JsonSchema(schema, JsonSchemaOptions::exact())).unwrap();
        let mut m = c.matcher();
        m.commit_bytes(br#"{"name":"Tim"#).unwrap();
        let mut mask = TokenSet::new(v.len());
        m.fill_mask(&mut mask);
        let tokens: Vec<_> = mask.iter().filter(|&t| !v.is_eos(t)).collect();
        assert!(tokens.len() > 100, "{} tokens go on inside the name", tokens.len());
        let alone: Vec<_> = tokens.iter().map(|&t| m.after_text(t, |m| m.descent_path()).flatten()).collect();
        let ends = alone.iter().filter(|p| p.is_some()).count();
        assert!(ends > tokens.len() / 2, "{ends} of {} ways on descend to an end", tokens.len());
        for backward in [false, true] {
            let mut memo = DescentMemo::new(&m).expect("a context-free run");
            let mut order: Vec<usize> = (0..tokens.len()).collect();
            if backward {
                order.reverse();
            }
            for i in order {
                let with = m.after_text(tokens[i], |m| m.descent_path_with(Some(&mut memo))).flatten();
                assert_eq!(with, alone[i], "after {:?}", String::from_utf8_lossy(v.bytes(tokens[i])));
            }
            assert!(memo.hits > tokens.len() / 2, "{} of {} descents took their rest", memo.hits, tokens.len());
        }
    }
}
