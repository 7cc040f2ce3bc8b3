//! Joining the witness: a token the lexeme count refused, judged by a short way from after it
//! to a position on the [`witness`](super::witness) from here.
//!
//! The witness from here is one way to finish; most tokens the count refuses differ from its
//! first token only in how they go on with the current lexemes (`100` where the witness writes
//! `0`), and a few bytes later both ways read the same bytes to the same parse state (after
//! `,"` in the next key). So: walk the cheapest bytes after the token (at most
//! [`MAX_JOIN_BYTES`]; the rest of a character it ends inside as tokens spell it); where their
//! rest agrees with the witness's bytes from one of its token boundaries, spell the bytes
//! before that point in the fewest tokens, commit them, and look
//! the parse state up among the positions the witness passes through ([`CfgRun::join_key`]:
//! keys that do not depend on the path that reached a state). A hit at `j` tokens after the
//! token, where the witness has `rest` tokens left, shows a way to finish in `j + rest` tokens.
//! It costs a few dozen commits per parse state, where a witness after the token costs a whole
//! completion: so it is tried first at every budget, and it is all that judges refused tokens
//! where the budget leaves more than `MAX_BUDGET_BY_WITNESS` tokens (long outputs of large
//! schemas).
//!
//! Invariants: a join is only ever a hit on the key of a position the witness from here
//! committed, reached by commits from after the token; both keyed from this position's chart
//! size, so equal keys mean the same ways on (the witness's rest is a way on from the hit). The
//! matcher is left as it was.

use super::KeyMap;
use super::{Backend, Matcher, Run};
use crate::automaton::cfg_run::CfgRun;
use crate::automaton::earley::ChartLen;
use crate::regular::UNREACHABLE;

/// Positions of the witness keyed (its first tokens: a join comes within a few).
const MAX_JOIN_TOKENS: usize = 64;

/// The most bytes walked after a token to meet the witness.
const MAX_JOIN_BYTES: usize = 64;

/// The least bytes the walk and the witness must agree on past a join point (fewer where the
/// walk ends sooner).
const MIN_AGREE: usize = 8;

/// The most join points tried per token (each a spelling and a few commits).
const MAX_TRIES: usize = 4;

/// The positions along the witness from one position, for [`Matcher::joins_within`].
pub(super) struct Joins {
    /// The chart's size at the position the witness starts from (what the keys are taken from).
    from: ChartLen,
    /// [`CfgRun::join_key`] of a position on the witness -> the witness's tokens left there.
    left: KeyMap<u32>,
    /// The witness's bytes (its first tokens, and [`MAX_JOIN_BYTES`] more where it has them),
    /// and the offsets in them of the keyed positions.
    bytes: Vec<u8>,
    offsets: Vec<usize>,
    /// The fewest tokens left at any keyed position.
    least: u32,
}

impl Matcher {
    fn cfg_run(&self) -> Option<&CfgRun> {
        match &self.run {
            Run::Cfg(c) => Some(c),
            Run::Dfa(_) => None,
        }
    }

    fn join_key(&self, from: ChartLen) -> Option<Vec<u32>> {
        match (&self.run, &self.compiled.backend) {
            (Run::Cfg(c), Backend::Earley(cfg)) => c.join_key(cfg, from),
            _ => None,
        }
    }

    /// The positions along the witness from here, keyed; `None` without a witness or where
    /// positions have no key (the reader of distinct items holds something here).
    pub(super) fn joins(&mut self) -> Option<Joins> {
        let from = self.cfg_run()?.chart_len();
        self.join_key(from)?;
        let path = self.witness()?.to_vec();
        let (start, saved) = (self.len(), self.witness.take());
        let vocab = self.compiled.vocab().clone();
        let (mut left, mut offsets, mut bytes) = (KeyMap::default(), Vec::new(), Vec::new());
        for (i, &t) in path.iter().enumerate() {
            if i >= MAX_JOIN_TOKENS {
                // Bytes to agree with past the last keyed position.
                if bytes.len() >= offsets.last().map_or(0, |&o| o + MAX_JOIN_BYTES) {
                    break;
                }
                bytes.extend_from_slice(vocab.bytes(t));
                continue;
            }
            if self.commit(t).is_err() {
                break;
            }
            bytes.extend_from_slice(vocab.bytes(t));
            if let Some(key) = self.join_key(from) {
                let rest = (path.len() - i - 1) as u32;
                left.entry(key).and_modify(|r: &mut u32| *r = (*r).min(rest)).or_insert(rest);
                offsets.push(bytes.len());
            }
        }
        self.rollback(self.len() - start).expect("committed here");
        self.witness = saved;
        let least = left.values().copied().min()?;
        Some(Joins { from, left, bytes, offsets, least })
    }

    /// Called right after a token was committed (from the position `joins` was made at): can
    /// the output finish within `budget` more tokens by the cheapest bytes from here, up to a
    /// position of the witness (or to an end)? `false` where no join was found. The matcher is
    /// left as it was.
    pub(super) fn joins_within(&mut self, joins: &Joins, budget: u32) -> bool {
        if self.is_accepting() {
            return true;
        }
        let walk = self.cheapest_prefix(MAX_JOIN_BYTES);
        // Join points: where the rest of the walk agrees with the witness from one of its keyed
        // positions, the nearest first.
        let mut tries: Vec<usize> = Vec::new();
        for k in 0..walk.len() {
            let rest = &walk[k..];
            let agrees = joins.offsets.iter().any(|&o| {
                let theirs = &joins.bytes[o..];
                let n = rest.len().min(theirs.len());
                n >= MIN_AGREE.min(rest.len()) && rest[..n] == theirs[..n]
            });
            if agrees {
                tries.push(k);
                if tries.len() == MAX_TRIES {
                    break;
                }
            }
        }
        if joins.least > budget {
            tries.clear();
        }
        // The walk may end the output (it stopped short of its length where the output may end).
        if walk.len() < MAX_JOIN_BYTES {
            tries.push(walk.len());
        }
        tries.into_iter().any(|k| {
            let (start, saved) = (self.len(), self.witness.take());
            let spent = self.spell_prefix(&walk[..k]);
            let found = spent.is_some_and(|spent| {
                let rest = if self.is_accepting() {
                    Some(0)
                } else {
                    self.join_key(joins.from).and_then(|key| joins.left.get(&key).copied())
                };
                rest.is_some_and(|rest| spent + rest <= budget)
            });
            self.rollback(self.len() - start).expect("committed here");
            self.witness = saved;
            found
        })
    }

    /// Commits `bytes` spelled in the fewest tokens that spell them exactly
    /// ([`fewest_tokens`](Self::fewest_tokens)); the number of tokens, or `None` where no
    /// spelling commits (the caller rolls back either way).
    fn spell_prefix(&mut self, bytes: &[u8]) -> Option<u32> {
        let (n, best) = (bytes.len(), self.fewest_tokens(bytes));
        let (mut i, mut spent) = (0, 0);
        while i < n {
            let (_, t, k) = best[i]?;
            self.commit(t).ok()?;
            i += k;
            spent += 1;
        }
        Some(spent)
    }

    /// The first bytes (at most `max`) of a cheapest completion from here, each the first byte
    /// found after which the byte cost drops by one (the lexer's guess first); shorter where
    /// the output may end or no byte goes on so. The matcher is left as it was.
    fn cheapest_prefix(&mut self, max: usize) -> Vec<u8> {
        let start = self.len();
        let mut out = Vec::new();
        while out.len() < max && !self.is_accepting() {
            let cost = self.byte_cost();
            if cost == UNREACHABLE || cost == 0 {
                break;
            }
            // Inside a character, its rest as the fewest tokens spell it (see `char_tail`).
            if let Some(tail) = self.char_tail().filter(|t| out.len() + t.len() <= max) {
                if self.commit_on_cheapest(&tail, cost) {
                    out.extend_from_slice(&tail);
                    continue;
                }
            }
            let (Run::Cfg(c), Backend::Earley(cfg)) = (&mut self.run, &self.compiled.backend) else { break };
            let likely = c.likely_next_byte(cfg);
            let mut order: Vec<u8> =
                likely.into_iter().chain(c.next_bytes(cfg).filter(|&b| Some(b) != likely)).collect();
            order.retain(|&b| self.usable(b));
            let next = order.into_iter().find(|&b| self.commit_on_cheapest(&[b], cost));
            match next {
                Some(b) => out.push(b),
                None => break,
            }
        }
        self.rollback(self.len() - start).expect("committed here");
        out
    }
}
