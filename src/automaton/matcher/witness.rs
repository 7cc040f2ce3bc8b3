//! The witness: one complete way on from a position, spelled in tokens of the vocabulary and
//! checked by committing it, for a context-free constraint near the end of a token budget.
//!
//! A context-free constraint counts what finishing costs lexeme by lexeme (see
//! [`Cfg::token_costs`](crate::automaton::cfg::Cfg::token_costs)): an upper bound, since a token
//! that straddles two lexemes (`":"`, `"},{"`) is not counted as one. Under a tight budget that
//! bound may say nothing fits where something does. The witness settles it the other way: the
//! cheapest completion in usable bytes (each byte chosen so the byte cost drops by one, the
//! lexer's own guess tried first; inside a UTF-8 character, the character's rest as the fewest
//! tokens of the vocabulary spell it, [`Matcher::char_tail`]; where that way is refused, a
//! repeat of a distinct item, a few other characters, and at each point a few of the bytes that
//! reach the same parse state, not all of them: [`Siblings`]), spelled in the fewest tokens the
//! matcher takes. It is a real
//! token sequence the matcher accepted, so when it fits, the output can be finished within the
//! budget.
//!
//! A budgeted mask uses it twice: the witness from the current position lets its first token
//! through (and is kept while the output follows it); and every token the count refused is
//! judged by the witness from after it ([`Matcher::allow_by_witness`]). Tokens that reach the
//! same parse state share one witness: those the mask's own walks group by where they land (the
//! lexer states they reach and the lexemes ending at their last byte, see [`Refused`]), the
//! others are committed one by one and grouped by
//! [`CfgRun::state_key`](crate::automaton::cfg_run::CfgRun::state_key). A token
//! neither the count nor the cheapest completion in bytes lets through is settled by the exact
//! [`search`](super::search) (a longer completion that tokenizes into fewer tokens) while its
//! work lasts; beyond it the token is refused. With distinct items
//! (marks), tokens share a witness by their lexer states only where the reader of distinct
//! items is outside every list it watches and the grammar has no marked literals
//! ([`CfgRun::shares_witness`](crate::automaton::cfg_run::CfgRun::shares_witness)); the singles
//! are grouped by the parse state and, where the reader matters, its key
//! ([`CfgRun::witness_key`](crate::automaton::cfg_run::CfgRun::witness_key): the items it
//! holds, the text of those it is reading). Inside a list of distinct items the tokens the
//! count refused are judged as the last tokens of a budget are (see `confirm`). Before any
//! witness after it, a refused token is judged by a [`join`](super::join) with the witness from
//! here (a few commits, not a whole completion); by the witness after it only while at most
//! `MAX_BUDGET_BY_WITNESS` tokens are left (one search per distinct state, each as long as the
//! witness); beyond that the count, the joins and the witness from here decide.
//!
//! Where items must be distinct and a round of the search runs out of work (it was trying sets
//! of items that all fall short: a minimum over a large finite set of keys), the next round
//! takes the whole length at once: cheapest byte first, a way is found at once, a little longer
//! than the fewest perhaps. The count is blind to what keeping items distinct costs; the
//! witness is not: a budgeted mask's slack grows by how much longer it is than the count
//! ([`Matcher::distinct_cost`]).
//!
//! Invariants: a witness is only ever a sequence the matcher committed from the position it is
//! kept for (`Matcher::witness.0` = the tokens committed then), ending accepting, or the way
//! a budgeted mask's judgement showed after the token then committed (`Matcher::shown`, see
//! `confirm`: committed after it, or after a token of its group, which has the same ways on);
//! judging the tokens after which one is looked for leaves the matcher as it was.

use super::descent::DescentMemo;
use super::join::Joins;
use super::search::MAX_SEARCH_WORK;
use super::KeyMap;
use super::{Backend, Matcher, Run};
use crate::automaton::cfg_run::{Old, Refused};
use crate::automaton::earley::ChartLen;
use crate::automaton::NO_BUDGET;
use crate::regular::UNREACHABLE;
use crate::vocab::{TokenId, TokenKind, TokenSet};

/// The longest completion a witness is looked for along, in bytes (also the search's depth).
const MAX_WITNESS_BYTES: usize = 8192;

/// Most bytes the search for a witness tries.
const MAX_WITNESS_COMMITS: usize = 32_768;

/// Characters the witness search tries where a token ended inside one (see `cheapest_from`).
const MAX_CHAR_TRIES: usize = 4;

/// Bytes beyond the cheapest cost the witness search's second round allows (see
/// `cheapest_bytes`).
const WITNESS_SLACK: usize = 4;

/// With distinct items, each round of the witness search but the last may do at most
/// 1/`ROUND_SHARE` of the work left (see `cheapest_bytes`).
const ROUND_SHARE: usize = 4;

/// Bytes the witness search follows at one point of its way that lead to the same parse state
/// (see [`Siblings`]).
const MAX_SAME_STATE: usize = 2;

/// The most entries the search could not settle that a mask judges by a descent each (a
/// descent costs up to `MAX_DESCENT_WORK`).
const MAX_DESCENTS_AFTER_SEARCH: usize = 4;

/// The key of the state after a token ([`CfgRun::witness_key`](crate::automaton::cfg_run::CfgRun::witness_key)):
/// equal keys, the same ways on; `key[..state]` is the parse state's part.
pub(super) struct AfterKey {
    pub key: Vec<u32>,
    pub state: usize,
}

/// What trying one byte found (see [`Matcher::try_byte`]).
enum Tried {
    Found,
    Costs(u32),
    Not,
}

/// The bounds of one [`cheapest_bytes`](Matcher::cheapest_bytes) search.
struct Dig {
    /// Bytes it may still try.
    budget: usize,
    /// The longest completion this round looks at.
    limit: usize,
    /// Whether `limit` cut a way short this round (a longer one may finish).
    cut: bool,
    /// With distinct items: the chart's size where the search began, and the points between
    /// items (see [`CfgRun::between_items_key`](crate::automaton::cfg_run::CfgRun::between_items_key))
    /// it found no way on from this round, each with the most bytes it had left there. The same
    /// items in another order reach the same point: without this, a round that cannot finish
    /// tries every order of them (`[0,1,…,9,` in 10! orders).
    dead: Option<(ChartLen, KeyMap<usize>)>,
    /// How many levels deep the search is (a byte, or a character, each).
    depth: usize,
}

/// The parse states the ways followed from one point of a [`cheapest_bytes`]
/// (Matcher::cheapest_bytes) search lead to, each with how many led there. Bytes that reach
/// the same parse state (the digits of a number, a string's content) differ only in the text
/// they write, which matters only where an item would repeat: [`MAX_SAME_STATE`] of them are
/// followed, not every one (each byte more the search's limit allows multiplied its ways by
/// ~95, every one searched to its end where none finishes).
///
/// Where the reader of distinct items holds `k` items in a list in reach, `k` more are
/// followed: a new item may have to try as many values as there are earlier ones before one
/// is no repeat (`[0,1,…,9,` needs a tenth digit, or two), and each value tried that repeats
/// ends at the commit that would finish it, so that the extra costs a few bytes per item.
struct Siblings {
    /// The chart's size at the point (`None`: not a context-free run; every way is followed).
    from: Option<ChartLen>,
    seen: Vec<(Vec<u32>, usize)>,
    /// How many ways to one parse state are followed.
    most: usize,
}

impl Siblings {
    fn new(m: &Matcher) -> Siblings {
        let (from, held) = match (&m.run, &m.compiled.backend) {
            (Run::Cfg(c), Backend::Earley(cfg)) => {
                (Some(c.chart_len()), if cfg.has_marks { c.most_items_in_reach() } else { 0 })
            }
            _ => (None, 0),
        };
        Siblings { from, seen: Vec::new(), most: MAX_SAME_STATE + held }
    }

    /// After a commit from the point: is the way through it to be followed?
    fn admit(&mut self, m: &Matcher) -> bool {
        let (Run::Cfg(c), Some(from)) = (&m.run, self.from) else { return true };
        let key = c.state_key(from);
        match self.seen.iter_mut().find(|(k, _)| *k == key) {
            Some((_, n)) if *n >= self.most => false,
            Some((_, n)) => {
                *n += 1;
                true
            }
            None => {
                self.seen.push((key, 1));
                true
            }
        }
    }
}

impl Matcher {
    /// The witness from here (cached along its own path), or `None` (a regular constraint,
    /// whose count is exact; nothing found within [`MAX_WITNESS_BYTES`]; after EOS).
    pub(super) fn witness(&mut self) -> Option<&[TokenId]> {
        if !matches!(self.run, Run::Cfg(_)) || self.is_ended() {
            return None;
        }
        let here = self.len();
        if self.witness.as_ref().is_none_or(|(at, _)| *at != here) {
            let path = self.find_witness()?;
            self.witness = Some((here, path));
        }
        self.witness.as_ref().map(|(_, p)| p.as_slice())
    }

    /// How many tokens more the witness from here takes than the lexeme count says finishing
    /// does: what keeping items distinct costs from here, as far as the witness shows (it
    /// commits through the repeats' check; the count repeats the cheapest item). 0 without a
    /// witness or where it is no longer than the count, and, without looking for one, where
    /// `after_budget` is more than twice the count: a cost beyond the count itself is not
    /// looked for (a budget far from binding keeps most masks free of a witness search).
    pub(super) fn distinct_cost(&mut self, after_budget: u32) -> u32 {
        let count = match (&mut self.run, &self.compiled.backend) {
            (Run::Cfg(c), Backend::Earley(cfg)) => c.finish_cost(cfg, &self.compiled.env),
            _ => return 0,
        };
        if count == UNREACHABLE || after_budget > count.saturating_mul(2) {
            return 0;
        }
        self.witness().map_or(0, |w| (w.len() as u32).saturating_sub(count))
    }

    /// Keeps the witness when `token` is its next token (committed at `before` tokens); else
    /// the way a budgeted mask's judgement showed after `token` there, if any, is the witness.
    pub(super) fn follow_witness(&mut self, before: usize, token: TokenId) {
        self.witness = match self.witness.take() {
            Some((at, path)) if at == before && path.first() == Some(&token) => Some((at + 1, path[1..].to_vec())),
            _ => self.shown.as_ref().filter(|(at, _)| *at == before).and_then(|(_, ways)| {
                ways.iter().find(|(t, _)| *t == token).map(|(_, way)| (before + 1, way.to_vec()))
            }),
        };
    }

    /// Lets through each token the lexeme count `refused` after which a way to finish within
    /// `after_budget` tokens is shown: first by a [`join`](super::join) with the witness from
    /// here, then (`deep`) by a witness from after it, then, of the others, by the
    /// [`search`](super::search) (those with the shortest witness first: the search's work is
    /// bounded per mask). Tokens that reach one parse state are judged together: those
    /// grouped by where they land (see [`Refused`]), the singles by
    /// [`CfgRun::state_key`](crate::automaton::cfg_run::CfgRun::state_key) after committing
    /// each. Must equal [`reference_by_witness`](Self::reference_by_witness) (while the
    /// search's work bound is not reached).
    pub(super) fn allow_by_witness(&mut self, mask: &mut TokenSet, after_budget: u32, refused: &Refused, deep: bool) {
        let width = mask.width();
        let open = |t: &TokenId, mask: &TokenSet| (t.0 as usize) < width && !mask.contains(*t);
        if !refused.grouped.iter().flat_map(|(_, ids)| ids).chain(&refused.singles).any(|t| open(t, mask)) {
            return;
        }
        let joins = self.joins();
        // Refused still, one entry per parse state: (witness length, the tokens reaching it).
        let mut left: Vec<(u32, Vec<TokenId>)> = Vec::new();
        for (_, ids) in &refused.grouped {
            let Some(&first) = ids.iter().find(|t| open(t, mask)) else { continue };
            match self.after_text(first, |m| m.judge_here(joins.as_ref(), after_budget, deep)) {
                Some(Ok(())) => ids.iter().filter(|t| (t.0 as usize) < width).for_each(|&t| mask.insert(t)),
                w => left.push((
                    w.and_then(Result::err).unwrap_or(UNREACHABLE),
                    ids.iter().copied().filter(|t| open(t, mask)).collect(),
                )),
            }
        }
        // The singles by the state they reach: index into `left`, or let through.
        let mut known: KeyMap<Option<usize>> = KeyMap::default();
        let old = self.old_items();
        for &t in &refused.singles {
            if !open(&t, mask) {
                continue;
            }
            let at = self.after_token(t, &old, |m, AfterKey { key, .. }| match known.get(&key) {
                Some(&at) => at,
                None => {
                    let at = m.judge_here(joins.as_ref(), after_budget, deep).err().map(|w| {
                        left.push((w, Vec::new()));
                        left.len() - 1
                    });
                    known.insert(key, at);
                    at
                }
            });
            match at {
                Some(Some(i)) => left[i].1.push(t),
                Some(None) => mask.insert(t),
                None => {}
            }
        }
        if deep {
            self.allow_by_search(mask, after_budget, left);
        }
    }

    /// The slow reference for [`allow_by_witness`](Self::allow_by_witness): every token the
    /// mask without a budget holds and this one left out, committed and judged by the parse
    /// state it reaches ([`CfgRun::witness_key`](crate::automaton::cfg_run::CfgRun::witness_key);
    /// a join and a witness cost dozens of commits each, too much for every token of a large
    /// vocabulary). The fast mask judges most tokens by another key (where they land, see
    /// [`Refused`]) and takes them from the lexeme count's refusals rather
    /// than from the mask without a budget; that the key itself is faithful, the brute-force
    /// budget tests show (`tests/core/budget.rs`).
    pub(super) fn reference_by_witness(&mut self, mask: &mut TokenSet, after_budget: u32, deep: bool) {
        let mut all = TokenSet::new(mask.width());
        self.fill(&mut all, NO_BUDGET, true);
        let vocab = self.compiled.vocab().clone();
        let left_out: Vec<TokenId> =
            all.iter().filter(|&t| vocab.kind(t) == TokenKind::Text && !mask.contains(t)).collect();
        if left_out.is_empty() {
            return;
        }
        let joins = self.joins();
        let mut judged_at: KeyMap<Result<(), u32>> = KeyMap::default();
        // The tokens the witness refused, by the parse state they reach (as the fast mask
        // groups them), for the search.
        let mut left: Vec<(u32, Vec<TokenId>)> = Vec::new();
        let mut at: KeyMap<usize> = KeyMap::default();
        let searched = deep && self.mask_search().is_some();
        let old = self.old_items();
        for t in left_out {
            let judged = self.after_token(t, &old, |m, AfterKey { key, .. }| {
                let judged = match judged_at.get(&key) {
                    Some(&j) => j,
                    None => {
                        let j = m.judge_here(joins.as_ref(), after_budget, deep);
                        judged_at.insert(key.clone(), j);
                        j
                    }
                };
                (judged, key)
            });
            match judged {
                Some((Ok(()), _)) => mask.insert(t),
                Some((Err(w), key)) if searched => {
                    let i = *at.entry(key).or_insert_with(|| {
                        left.push((w, Vec::new()));
                        left.len() - 1
                    });
                    left[i].1.push(t);
                }
                _ => {}
            }
        }
        self.allow_by_search(mask, after_budget, left);
    }

    /// Commits `t` as text, calls `f`, and rolls back (`None`: `t` is refused). The witness
    /// from here is kept.
    pub(super) fn after_text<R>(&mut self, t: TokenId, f: impl FnOnce(&mut Matcher) -> R) -> Option<R> {
        let saved = self.witness.take();
        let r = self.commit_text(self.compiled.vocab().clone().bytes(t), true).ok().map(|()| {
            let r = f(self);
            self.rollback(1).expect("committed just now");
            r
        });
        self.witness = saved;
        r
    }

    /// Right after a token committed from the position `joins` was made at: `Ok` where a way to
    /// finish within `after_budget` tokens is shown (a join, or with `deep` a witness), else
    /// the witness's length (`UNREACHABLE`: none, or not looked for), to order the search by.
    fn judge_here(&mut self, joins: Option<&Joins>, after_budget: u32, deep: bool) -> Result<(), u32> {
        if joins.is_some_and(|j| self.joins_within(j, after_budget)) {
            return Ok(());
        }
        match deep.then(|| self.find_witness().map(|w| w.len() as u32)).flatten() {
            Some(w) if w <= after_budget => Ok(()),
            w => Err(w.unwrap_or(UNREACHABLE)),
        }
    }

    /// The text tokens the lexeme count left out of `mask` (of width `mask.width()`): from
    /// `refused`, or for the reference, those the mask without a budget holds. The same set
    /// either way (the count lists every token it refuses).
    pub(super) fn refused_by_count(&mut self, mask: &TokenSet, refused: &Refused, reference: bool) -> TokenSet {
        let width = mask.width();
        let mut out = TokenSet::new(width);
        if reference {
            self.fill(&mut out, NO_BUDGET, true);
        } else {
            refused.grouped.iter().for_each(|(_, ids)| out.insert_clipped(ids));
            out.insert_clipped(&refused.singles);
        }
        let vocab = self.compiled.vocab().clone();
        let drop: Vec<TokenId> = out.iter().filter(|&t| mask.contains(t) || vocab.kind(t) != TokenKind::Text).collect();
        drop.into_iter().for_each(|t| out.remove(t));
        out
    }

    /// The items the reader holds here (see [`CfgRun::old_items`]); none for a regular run.
    pub(super) fn old_items(&self) -> Old {
        match &self.run {
            Run::Cfg(c) => c.old_items(),
            Run::Dfa(_) => Old::default(),
        }
    }

    /// Whether `path` commits from here and ends the output (rolled back after; the witness
    /// from here is kept): a witness found elsewhere, checked here.
    pub(super) fn replays(&mut self, path: &[TokenId]) -> bool {
        let (start, saved) = (self.len(), self.witness.take());
        let ok = path.iter().all(|&t| self.commit(t).is_ok()) && self.is_accepting();
        self.rollback(self.len() - start).expect("committed here");
        self.witness = saved;
        ok
    }

    /// Commits `t`, calls `f` with the [`CfgRun::witness_key`] of the state after it (`old`:
    /// [`old_items`](Self::old_items) from here), and rolls back. `None`: `t` is refused, or
    /// the run is not context-free. The witness from here is kept.
    pub(super) fn after_token<R>(
        &mut self,
        t: TokenId,
        old: &Old,
        f: impl FnOnce(&mut Matcher, AfterKey) -> R,
    ) -> Option<R> {
        let Run::Cfg(c) = &self.run else { return None };
        let from = c.chart_len();
        self.after_text(t, |m| {
            let (Run::Cfg(c), Backend::Earley(cfg)) = (&m.run, &m.compiled.backend) else {
                unreachable!("a context-free run")
            };
            let (key, state) = c.witness_key(cfg, from, old);
            f(m, AfterKey { key, state })
        })
    }

    /// Of the tokens the witness refused (one entry per parse state they reach: the witness
    /// length there, the tokens), lets through those after which the search finds a way
    /// within `after_budget` tokens. The entries are searched the shortest witness first (ties
    /// by the smallest token id), each from scratch, while the mask's search work lasts: so
    /// what is let through depends on the entries alone, not on the order tokens were met in
    /// (the fast and the reference mask agree).
    fn allow_by_search(&mut self, mask: &mut TokenSet, after_budget: u32, mut left: Vec<(u32, Vec<TokenId>)>) {
        if left.is_empty() || self.mask_search().is_none() {
            return;
        }
        left.retain(|(_, members)| !members.is_empty());
        left.iter_mut().for_each(|(_, members)| members.sort_unstable());
        left.sort_unstable_by_key(|(w, members)| (*w, members[0]));
        let mut work = MAX_SEARCH_WORK;
        let cost = self.compiled.vocab().len();
        // Entries the search could not settle (its work ran out), in the same order.
        let mut unsettled = Vec::new();
        for (_, members) in left {
            let Some(mut search) = self.mask_search() else { return };
            search.work = work;
            match self.after_text(members[0], |m| m.search_within(after_budget, &mut search)) {
                Some(true) => members.into_iter().for_each(|t| mask.insert(t)),
                Some(false) if search.work < cost => unsettled.push(members),
                _ => {}
            }
            work = search.work;
        }
        // A descent after the first few of those: the count's own choices, which the search
        // may not have reached (`"very active"`, one token fewer than `sedentary`, behind many
        // states of an integer's digits). Each a function of its entry: the masks agree.
        let mut memo = DescentMemo::new(self);
        for members in unsettled.into_iter().take(MAX_DESCENTS_AFTER_SEARCH) {
            let fits =
                |m: &mut Matcher| m.descent_path_with(memo.as_mut()).is_some_and(|p| p.len() as u32 <= after_budget);
            if self.after_text(members[0], fits) == Some(true) {
                members.into_iter().for_each(|t| mask.insert(t));
            }
        }
    }

    /// A witness from after `t` (`None`: `t` is refused, or none was found). The matcher is
    /// left as it was.
    pub(super) fn witness_after(&mut self, t: TokenId) -> Option<Vec<TokenId>> {
        self.after_text(t, |m| m.find_witness()).flatten()
    }

    pub(super) fn byte_cost(&mut self) -> u32 {
        match (&mut self.run, &self.compiled.backend) {
            (Run::Cfg(c), super::Backend::Earley(cfg)) => c.byte_cost(cfg),
            _ => UNREACHABLE,
        }
    }

    pub(super) fn find_witness(&mut self) -> Option<Vec<TokenId>> {
        let mut work = MAX_WITNESS_COMMITS;
        self.find_witness_within(&mut work)
    }

    /// [`find_witness`](Self::find_witness) with at most `work` bytes tried by its search
    /// (and [`MAX_WITNESS_COMMITS`] at most); those it tried are taken off `work`.
    pub(super) fn find_witness_within(&mut self, work: &mut usize) -> Option<Vec<TokenId>> {
        let start = self.len();
        let saved = self.witness.take();
        let bytes = self.cheapest_bytes(work);
        let path = bytes.and_then(|b| self.spell(&b));
        self.rollback(self.len() - start).expect("committed here");
        self.witness = saved;
        path
    }

    /// The cheapest completion in usable bytes (the caller rolls back): a depth-first search
    /// that takes, at each point, the first byte after which the byte cost drops by one (the
    /// usual way, found at once), and only where that way is refused further on (a repeat of a
    /// distinct item) the other bytes, cheapest first; at most [`MAX_WITNESS_COMMITS`] bytes
    /// tried. The search is bounded by a length (the cost from here, then [`WITNESS_SLACK`]
    /// bytes more, the extra doubled while a way was cut short by it): a way around a repeat is
    /// found among the short ones (`[0,1]` after `[0,0` is refused), not down a branch that
    /// never ends (`[0,0.000…`). A round that finds nothing has searched every way within its
    /// length, so rounds a byte apart cost far more than the few bytes they could save.
    fn cheapest_bytes(&mut self, work: &mut usize) -> Option<Vec<u8>> {
        let start = self.len();
        let base = self.byte_cost();
        if base == UNREACHABLE {
            return None;
        }
        let budget = (*work).min(MAX_WITNESS_COMMITS);
        let dead = match (&self.run, &self.compiled.backend) {
            (Run::Cfg(c), Backend::Earley(cfg)) if cfg.has_marks => Some((c.chart_len(), KeyMap::default())),
            _ => None,
        };
        // With distinct items a round gets a share of the work: one whose limit is too short
        // may try every set of items that fits in it (all subsets of ten digits), and the
        // longer limit that finishes at once (`[0,…,9,10,…]`) would never be tried.
        let shared = dead.is_some();
        let mut dig = Dig { budget, limit: base as usize, cut: false, dead, depth: 0 };
        let mut left = budget;
        let mut bytes = Vec::new();
        let found = loop {
            dig.cut = false;
            if let Some((_, dead)) = &mut dig.dead {
                dead.clear();
            }
            let last = dig.limit >= MAX_WITNESS_BYTES;
            dig.budget = if shared && !last { left.div_ceil(ROUND_SHARE) } else { left };
            let given = dig.budget;
            let found = self.cheapest_from(&mut bytes, &mut dig);
            left -= given - dig.budget;
            if found {
                break true;
            }
            let ran_out = dig.budget == 0;
            if !(dig.cut || (shared && ran_out)) || left == 0 || last {
                break false;
            }
            // A round that ran out of work with distinct items was trying sets of them that
            // all fall short (a minimum over a finite set of keys, each round a little longer:
            // every subset of the cheap keys is tried again): the last round then, the whole
            // length, where the cheapest byte first finds a way at once (`k0`..`k9`, then
            // `k10`..), a little longer than the fewest perhaps, never shorter.
            dig.limit = if shared && ran_out {
                MAX_WITNESS_BYTES
            } else {
                (dig.limit + (dig.limit - base as usize).max(WITNESS_SLACK)).min(MAX_WITNESS_BYTES)
            };
        };
        *work -= budget - left;
        self.rollback(self.len() - start).expect("committed here");
        found.then_some(bytes)
    }

    /// One point of [`cheapest_bytes`](Self::cheapest_bytes)' search: is a way on found from
    /// here within the round's limit (kept committed, its bytes on `out`)? Between distinct
    /// items, a point found dead before with as many bytes left or more is not searched again.
    fn cheapest_from(&mut self, out: &mut Vec<u8>, dig: &mut Dig) -> bool {
        let key = match (&dig.dead, &self.run, &self.compiled.backend) {
            (Some((root, _)), Run::Cfg(c), Backend::Earley(cfg)) => c.between_items_key(cfg, *root),
            _ => None,
        };
        let left = dig.limit.saturating_sub(out.len());
        if let (Some(key), Some((_, dead))) = (&key, &dig.dead) {
            if dead.get(key).is_some_and(|&was| was >= left) {
                return false;
            }
        }
        // One level of this search per byte of the way, up to [`MAX_WITNESS_BYTES`] (8,192):
        // deeper than a 2 MiB thread stack (a server's worker, a rayon thread) holds, so the
        // stack grows onto the heap as it runs low (`x{5000}` overflowed it); looked at every
        // few levels, well within the red zone.
        dig.depth += 1;
        let found = if dig.depth % super::STACK_CHECK_EVERY == 0 {
            stacker::maybe_grow(super::STACK_RED_ZONE, super::STACK_GROWTH, || self.cheapest_on(out, dig))
        } else {
            self.cheapest_on(out, dig)
        };
        dig.depth -= 1;
        // (Out of budget, nothing is shown dead: the search ends anyway.)
        if let (false, true, Some(key), Some((_, dead))) = (found, dig.budget > 0, key, &mut dig.dead) {
            let was = dead.entry(key).or_insert(left);
            *was = (*was).max(left);
        }
        found
    }

    fn cheapest_on(&mut self, out: &mut Vec<u8>, dig: &mut Dig) -> bool {
        if self.is_accepting() {
            return true;
        }
        let cost = self.byte_cost();
        if cost == UNREACHABLE || cost == 0 || out.len() >= MAX_WITNESS_BYTES {
            return false;
        }
        if out.len() + cost as usize > dig.limit {
            dig.cut = true;
            return false;
        }
        // Inside a UTF-8 character every way on spells the same number of bytes: those the
        // fewest tokens spell (the byte-by-byte choice below takes the least bytes, which a
        // byte-level vocabulary spells one token each). Ways on differ only in which character
        // it is, which matters only where an item would repeat: a few characters are tried,
        // not every byte (64 a continuation byte: 262,144 ways through a 4-byte character,
        // each searched to its end where none finishes within the limit).
        let mut on_cheapest = false;
        for tail in self.char_tails(MAX_CHAR_TRIES) {
            if dig.budget == 0 {
                return false;
            }
            dig.budget -= 1;
            if self.commit_on_cheapest(&tail, cost) {
                on_cheapest = true;
                out.extend_from_slice(&tail);
                if self.cheapest_from(out, dig) {
                    return true;
                }
                out.truncate(out.len() - tail.len());
                self.rollback(1).expect("committed just now");
            }
        }
        if on_cheapest {
            return false;
        }
        let mut later = Vec::new();
        let mut siblings = Siblings::new(self);
        // The byte the lexer expects first: almost always the one (the others are not even
        // listed then).
        let likely = match (&mut self.run, &self.compiled.backend) {
            (Run::Cfg(c), super::Backend::Earley(cfg)) => c.likely_next_byte(cfg),
            _ => None,
        }
        .filter(|&b| self.usable(b));
        if let Some(b) = likely {
            match self.try_byte(b, cost, out, dig, &mut siblings) {
                Tried::Found => return true,
                Tried::Costs(after) => later.push((after, b)),
                Tried::Not => {}
            }
        }
        // The bytes the lexemes can read, printable ASCII first: the usual way on.
        let mut order: Vec<u8> = match (&self.run, &self.compiled.backend) {
            (Run::Cfg(c), super::Backend::Earley(cfg)) => c.next_bytes(cfg).filter(|&b| Some(b) != likely).collect(),
            _ => return false,
        };
        order.retain(|&b| self.usable(b));
        order.sort_by_key(|&b| !(0x20..0x7f).contains(&b));
        for b in order {
            if dig.budget == 0 {
                return false;
            }
            match self.try_byte(b, cost, out, dig, &mut siblings) {
                Tried::Found => return true,
                Tried::Costs(after) => later.push((after, b)),
                Tried::Not => {}
            }
        }
        later.sort_unstable();
        for (after, b) in later {
            if out.len() + 1 + after as usize > dig.limit {
                dig.cut = true;
                break;
            }
            if dig.budget == 0 || self.commit_bytes(&[b]).is_err() {
                return false;
            }
            if !siblings.admit(self) {
                self.rollback(1).expect("committed just now");
                continue;
            }
            out.push(b);
            if self.cheapest_from(out, dig) {
                return true;
            }
            out.pop();
            self.rollback(1).expect("committed just now");
        }
        false
    }

    /// Commits `bytes` where the byte cost then drops by their length (they start a cheapest
    /// completion); else leaves the matcher as it was. Was it committed?
    pub(super) fn commit_on_cheapest(&mut self, bytes: &[u8], cost: u32) -> bool {
        if self.commit_bytes(bytes).is_err() {
            return false;
        }
        let drops = cost.checked_sub(bytes.len() as u32) == Some(self.byte_cost());
        if !drops {
            self.rollback(1).expect("committed just now");
        }
        drops
    }

    /// Is `b` a usable byte (a token of its own, or a named token's byte): the bytes the byte
    /// cost counts, and the ones a witness is spelled from (a byte no token spells alone, `" "`
    /// in a vocabulary without it, would make a completion in bytes that no tokens spell).
    pub(super) fn usable(&self, b: u8) -> bool {
        self.compiled.env.usable_bytes()[b as usize]
            || (b >= crate::automaton::tokens::HIGH && self.compiled.named.is_some())
    }

    /// One byte of [`cheapest_from`](Self::cheapest_from) at a point whose byte cost is `cost`:
    /// found a way on through it (kept committed), or what it costs after it (to try later), or
    /// refused.
    fn try_byte(&mut self, b: u8, cost: u32, out: &mut Vec<u8>, dig: &mut Dig, siblings: &mut Siblings) -> Tried {
        if dig.budget == 0 {
            return Tried::Not;
        }
        dig.budget -= 1;
        if self.commit_bytes(&[b]).is_err() {
            return Tried::Not;
        }
        let after = self.byte_cost();
        let tried = if after == cost - 1 {
            // (Not followed: as many bytes to the same parse state were.)
            if siblings.admit(self) {
                out.push(b);
                if self.cheapest_from(out, dig) {
                    return Tried::Found;
                }
                out.pop();
            }
            Tried::Not
        } else if after != UNREACHABLE {
            Tried::Costs(after)
        } else {
            Tried::Not
        };
        self.rollback(1).expect("committed just now");
        tried
    }
}
