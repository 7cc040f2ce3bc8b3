//! `Matcher`: the per-sequence state of one constrained output.
//!
//! One public type over two backends: a DFA run (regular constraints: a stack of DFA states)
//! and an Earley run (context-free grammars, see [`cfg_run`](super::cfg_run)). Both keep one
//! state per committed token, so `rollback(n)` is exact. The mask is "every token whose bytes
//! keep the output extendable, plus EOS exactly when the output so far is complete". A token
//! whose bytes end inside a UTF-8 character is fine: the automata run on bytes. Where the grammar
//! marks distinct items ([`distinct`](super::distinct)), a token that would finish a repeat is
//! not allowed (by masks, `allows` and `commit` alike), and masks also leave out a token after
//! which every way on repeats (a bounded look-ahead: `allows` and `commit` judge the token
//! itself). Under a budget, a context-free count is helped by the [`witness`](self::witness): a
//! token the lexeme-by-lexeme count refuses is let through when a completion spelled in tokens
//! after it fits, and otherwise when the exact [`search`](self::search) over token sequences
//! finds one within its work; the [`descent`](self::descent) (the count's choices, spelled with tokens
//! across lexemes) answers the per-request questions where the search cannot, and gives a mask
//! that would be empty its first token.
//!
//! Masks take `&mut self` because the Earley parser builds rows speculatively while it walks
//! the token trie (and removes them before returning): the matcher's observable state does not
//! change.
//!
//! Invariants:
//! - After EOS is committed nothing is allowed until it is rolled back.
//! - A committed state is never dead.

use std::sync::Arc;

use super::cfg_run::{CfgRun, Refused};
use super::{Backend, Compiled, VocabEnv, NO_BUDGET};
use crate::error::{Error, Result};
use crate::regular::{Dfa, Distances, StateId, UNREACHABLE};
use crate::vocab::{TokenId, TokenKind, TokenSet};

/// The place-holder a DFA run pushes for EOS: no state of any DFA (ids are dense from 0, and a
/// table has far fewer than `u32::MAX` states), so it is never read as one.
const ENDED: StateId = StateId(u32::MAX);

/// Tokens to spare under which a budgeted mask checks its tokens by the witness where items
/// must be distinct (at least: twice the longest item in reach, in bytes, where that is more).
const DISTINCT_SLACK: u32 = 16;

/// Lets the first token of `path` (a way to finish) into `mask` where the rest of it fits in
/// `after_budget` tokens.
fn allow_first(mask: &mut TokenSet, path: Option<&[TokenId]>, after_budget: u32) {
    if let Some(&[first, ref rest @ ..]) = path {
        if rest.len() as u32 <= after_budget && (first.0 as usize) < mask.width() {
            mask.insert(first);
        }
    }
}

/// The most tokens left after a token under which a refused token is judged by the witness
/// from after it (each distinct parse state costs a search as long as the witness): beyond
/// it, the count, the joins with the witness from here (see `join`) and that witness decide
/// (long outputs of large schemas).
const MAX_BUDGET_BY_WITNESS: u32 = 256;

/// The most bytes `forced_bytes` returns at once.
const MAX_FORCED_BYTES: usize = 4096;

/// The searches that go one level deeper per byte or token of a way (the witness, the deep
/// search) may nest thousands deep, past a thread's stack (2 MiB for a server's worker or a
/// rayon thread): below this much stack left, the next level runs on a fresh segment of
/// [`STACK_GROWTH`] bytes on the heap (`stacker`), on any thread.
const STACK_RED_ZONE: usize = 256 * 1024;
const STACK_GROWTH: usize = 2 * 1024 * 1024;
/// The stack left is looked at every this many levels (a level takes a few hundred bytes to a
/// few KiB, so 16 of them stay well within [`STACK_RED_ZONE`]).
const STACK_CHECK_EVERY: usize = 16;

#[derive(Clone)]
enum Run {
    /// DFA states, one per committed token after the start; `ENDED` after EOS.
    Dfa(Vec<StateId>),
    Cfg(Box<CfgRun>),
}

#[derive(Clone)]
pub struct Matcher {
    compiled: Arc<Compiled>,
    run: Run,
    /// The [`witness`](Self::witness) and the tokens committed when it was found (or followed).
    witness: Option<(usize, Vec<TokenId>)>,
    /// The ways to finish the last budgeted mask's judgement showed after the tokens it kept
    /// (see `confirm`), and the tokens committed then: committing one of those tokens makes its
    /// way the witness (a fresh search might find only a longer one, and leave a budget it
    /// fitted with no token). Dropped once a rollback goes below that position.
    shown: Option<(usize, Shown)>,
}

/// Tokens, each with a way to finish after it (ways shared by tokens that reach one state).
type Shown = Vec<(TokenId, Arc<[TokenId]>)>;

mod confirm;
mod descent;

/// Maps and sets keyed by parse-state keys (long `Vec<u32>`s, hashed eight bytes a step).
type KeyMap<V> = std::collections::HashMap<Vec<u32>, V, crate::regular::FxWordsBuild>;
type KeySet = std::collections::HashSet<Vec<u32>, crate::regular::FxWordsBuild>;
#[cfg(test)]
mod exact_tests;
mod join;
mod search;
mod spell;
mod witness;

impl Matcher {
    pub fn new(compiled: Arc<Compiled>) -> Matcher {
        let run = match &compiled.backend {
            Backend::Dfa { dfa, .. } => Run::Dfa(vec![dfa.start()]),
            Backend::Earley(cfg) => Run::Cfg(Box::new(CfgRun::new(cfg))),
        };
        Matcher { compiled, run, witness: None, shown: None }
    }

    pub fn compiled(&self) -> &Arc<Compiled> {
        &self.compiled
    }

    /// The number of tokens committed (EOS included).
    pub fn len(&self) -> usize {
        match &self.run {
            Run::Dfa(stack) => stack.len() - 1,
            Run::Cfg(c) => c.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Has EOS been committed?
    pub fn is_ended(&self) -> bool {
        match &self.run {
            Run::Dfa(stack) => stack.last() == Some(&ENDED),
            Run::Cfg(c) => c.is_ended(),
        }
    }

    /// Is the output so far complete (EOS allowed now)?
    pub fn is_accepting(&self) -> bool {
        match (&self.run, &self.compiled.backend) {
            (Run::Dfa(stack), Backend::Dfa { dfa, .. }) => {
                let s = *stack.last().expect("never empty");
                s != ENDED && s != StateId::DEAD && dfa.is_accepting(s)
            }
            (Run::Cfg(c), _) => c.is_accepting(),
            _ => unreachable!("the run matches the backend"),
        }
    }

    /// Is no continuation possible except EOS (the output is complete and cannot grow)?
    pub fn is_finished(&self) -> bool {
        match (&self.run, &self.compiled.backend) {
            (Run::Dfa(stack), Backend::Dfa { dfa, .. }) => {
                let s = *stack.last().expect("never empty");
                s == ENDED || (self.is_accepting() && (0..=255u8).all(|b| dfa.next(s, b) == StateId::DEAD))
            }
            (Run::Cfg(c), _) => c.is_finished(),
            _ => unreachable!("the run matches the backend"),
        }
    }

    /// Fills `mask` with the allowed tokens (cleared first). `mask.width()` may exceed the
    /// vocabulary: ids past it stay unset.
    pub fn fill_mask(&mut self, mask: &mut TokenSet) {
        self.fill(mask, NO_BUDGET, false);
    }

    /// Like [`fill_mask`](Self::fill_mask), but only tokens after which the output can still be
    /// completed within `remaining - 1` more tokens, so that an output limited to `remaining`
    /// tokens (this one included) always ends complete. With `remaining == 0` nothing is allowed.
    pub fn fill_mask_within(&mut self, mask: &mut TokenSet, remaining: usize) {
        if remaining == 0 {
            mask.clear();
            return;
        }
        self.fill(mask, budget_after(remaining), false);
    }

    /// The slow reference: tries every token id byte by byte. Must equal `fill_mask`.
    pub fn reference_mask(&mut self, mask: &mut TokenSet) {
        self.fill(mask, NO_BUDGET, true);
    }

    /// The slow reference for [`fill_mask_within`](Self::fill_mask_within).
    pub fn reference_mask_within(&mut self, mask: &mut TokenSet, remaining: usize) {
        if remaining == 0 {
            mask.clear();
            return;
        }
        self.fill(mask, budget_after(remaining), true);
    }

    fn fill(&mut self, mask: &mut TokenSet, after_budget: u32, reference: bool) {
        self.fill_deep(mask, after_budget, reference, true);
    }

    /// [`fill`](Self::fill), with the deep search where `deep` (see its use below).
    fn fill_deep(&mut self, mask: &mut TokenSet, after_budget: u32, reference: bool, deep: bool) {
        mask.clear();
        let compiled = self.compiled.clone();
        let env = &compiled.env;
        let vocab = env.vocab();
        match (&mut self.run, &compiled.backend) {
            (Run::Dfa(stack), Backend::Dfa { dfa, finish_tokens }) => {
                let s = *stack.last().expect("never empty");
                if s == ENDED || s == StateId::DEAD {
                    return;
                }
                let width = mask.width();
                let mut fits = Fits::new(env, dfa, finish_tokens, after_budget);
                if reference {
                    for id in (0..vocab.len().min(width) as u32).map(TokenId) {
                        let bytes = vocab.bytes(id);
                        if vocab.kind(id) == TokenKind::Text && !bytes.is_empty() {
                            let t = dfa.run(s, bytes);
                            if t != StateId::DEAD && fits.check(t) {
                                mask.insert(id);
                            }
                        }
                    }
                } else {
                    // Cached per (DFA, state) for the vocabulary, when the budget cannot bind on
                    // the tokens that keep the DFA going (the ones that end it need 0 more).
                    let entry = env.mask_cache().get_or_build_for(env, &[&**dfa], &[finish_tokens], &[s]);
                    if entry.inside_bound(0, finish_tokens, s).is_none_or(|d| d <= after_budget) {
                        mask.union_clipped(&entry.inside);
                        entry.groups.iter().for_each(|g| mask.insert_clipped(&g.at));
                    } else {
                        vocab.trie().walk(
                            s,
                            |s, b| {
                                let t = dfa.next(s, b);
                                (t != StateId::DEAD).then_some(t)
                            },
                            |s, ids| {
                                if fits.check(s) {
                                    mask.insert_clipped(ids);
                                }
                            },
                        );
                    }
                }
            }
            (Run::Cfg(c), Backend::Earley(cfg)) => {
                let mut refused = Refused::default();
                if reference {
                    c.reference(cfg, env, mask, after_budget);
                } else {
                    c.fill(cfg, env, mask, after_budget, Some(&mut refused));
                }
                // Each token the count refused, by a witness from after it (before the repeats
                // filter, which judges what this lets through as it judges every token). Where
                // the reader of distinct items is in a list, the witness after a token depends
                // on the items it writes: the refused tokens go back in, to be judged below as
                // the last tokens of a budget are (`confirm`).
                let mut unsure = None;
                if after_budget != NO_BUDGET && c.shares_witness(cfg) {
                    let deep = after_budget <= MAX_BUDGET_BY_WITNESS;
                    if reference {
                        self.reference_by_witness(mask, after_budget, deep);
                    } else {
                        self.allow_by_witness(mask, after_budget, &refused, deep);
                    }
                } else if after_budget <= MAX_BUDGET_BY_WITNESS {
                    let added = self.refused_by_count(mask, &refused, reference);
                    mask.union_clipped(&added);
                    unsure = Some(added);
                }
                let Run::Cfg(c) = &mut self.run else { unreachable!("a context-free run") };
                c.filter_repeats(cfg, env, mask);
                // Where the lexeme-by-lexeme count says the budget cannot be met, the witness
                // may show it can: then its first token is allowed (see `witness`).
                let short = after_budget != NO_BUDGET
                    && (mask.is_empty() || !c.can_finish_within(cfg, env, after_budget.saturating_add(1)));
                // The budget does not count what keeping items distinct costs: near its end,
                // a token is kept only if a witness after it (which commits through the repeat
                // check) finishes within the budget. Every token, not only those near a repeat:
                // one that ends an item may leave only repeats within the budget (`[["",` with
                // `""` the cheapest next item). Tokens that go on with a string's content are
                // judged a group at a time, the rest one by one up to a bound (see `confirm`).
                // The slack grows with the items in reach: a new item may have to be longer than
                // every earlier one (`{}`, `{"next":{}}`, then `{"next":{"next":{}}}`), by
                // about as much again at most, in bytes (so in tokens).
                let judge = after_budget != NO_BUDGET && cfg.has_marks;
                let slack = if judge {
                    DISTINCT_SLACK.max(c.longest_item_in_reach().saturating_mul(2).min(NO_BUDGET as usize) as u32)
                } else {
                    DISTINCT_SLACK
                };
                let mut tight = judge && !c.can_finish_within(cfg, env, after_budget.saturating_sub(slack));
                // Where many items must still come (a minimum over a finite set of keys), what
                // keeping them distinct costs adds up past any fixed slack: the witness from here
                // (which keeps them distinct) measures it, and the slack grows by how much longer
                // it is than the count (see `distinct_cost`).
                let slack =
                    if judge && !tight { slack.saturating_add(self.distinct_cost(after_budget)) } else { slack };
                let Run::Cfg(c) = &mut self.run else { unreachable!("a context-free run") };
                tight = tight || (judge && !c.can_finish_within(cfg, env, after_budget.saturating_sub(slack)));
                if tight {
                    let judged = mask.clone();
                    self.confirm_distinct(mask, &judged, after_budget);
                } else if judge {
                    // Room here (the output can end soon), but not after every token: those
                    // whose count leaves less than the slack (`,` into a next item that only
                    // repeats can finish cheaply) are judged as at a budget's end, and those
                    // the witness let through where the reader is in a list.
                    let mut roomy = TokenSet::new(mask.width());
                    let slack_budget = after_budget.saturating_sub(slack);
                    if reference {
                        c.reference(cfg, env, &mut roomy, slack_budget);
                    } else {
                        c.fill(cfg, env, &mut roomy, slack_budget, None);
                    }
                    let mut judged = mask.clone();
                    judged.subtract(&roomy);
                    if let Some(unsure) = unsure {
                        judged.union(&unsure);
                        judged.intersect(mask);
                    }
                    if !judged.is_empty() {
                        self.confirm_distinct(mask, &judged, after_budget);
                    }
                }
                // The repeats' check may have refused every token it judged (its witnesses are
                // the cheapest in bytes, and a way cheap in tokens spells more bytes): the ways
                // below then show one, as where the count refused them all.
                let short = short || (after_budget != NO_BUDGET && mask.is_empty());
                if short {
                    let witness = self.witness().map(<[TokenId]>::to_vec);
                    allow_first(mask, witness.as_deref(), after_budget);
                    // Nothing shown to fit yet, where `can_finish_within` may still show a way by
                    // the descent: its first token (so a budget it accepts never meets an empty
                    // mask).
                    if mask.is_empty() {
                        let path = self.descent_path();
                        allow_first(mask, path.as_deref(), after_budget);
                    }
                    // Where items must be distinct (no descent above, no deep search below):
                    // a descent committed through the repeats' check.
                    if mask.is_empty() && cfg.has_marks {
                        let path = self.descent_path_marked();
                        allow_first(mask, path.as_deref(), after_budget);
                    }
                    // Still nothing: the deep search (a way of more tokens than the count's
                    // choices, which it keeps as the witness for the masks after this one).
                    if deep && mask.is_empty() && after_budget < NO_BUDGET - 1 {
                        if let Some(way) = self.deep_way(after_budget + 1) {
                            if way.path.is_some() {
                                // Its way is now the witness from here: the mask once more,
                                // judged as every mask after it is (the joins with that
                                // witness), so that the fast and the reference mask agree
                                // whichever is asked first. Its first token is let in there.
                                return self.fill_deep(mask, after_budget, reference, false);
                            }
                            if (way.first.0 as usize) < mask.width() {
                                mask.insert(way.first);
                            }
                        }
                    }
                }
            }
            _ => unreachable!("the run matches the backend"),
        }
        if let Some(named) = &compiled.named {
            self.fill_named(named, mask, after_budget);
        }
        if self.is_accepting() {
            for &e in vocab.eos() {
                if (e.0 as usize) < mask.width() {
                    mask.insert(e);
                }
            }
        }
    }

    /// The named tokens' part of a mask (see [`tokens`](super::tokens)): the barred text tokens
    /// out, each named token in where its bytes are allowed and, under a budget, the output
    /// can be finished after them within `after_budget` tokens. The same for the fast and the
    /// reference mask.
    fn fill_named(&mut self, named: &super::tokens::Named, mask: &mut TokenSet, after_budget: u32) {
        named.remove_barred(mask);
        for (t, bytes) in named.tokens() {
            if (t.0 as usize) >= mask.width() || self.is_ended() {
                continue;
            }
            let saved = self.witness.take();
            if self.commit_text(bytes, true).is_ok() {
                let fits = after_budget == NO_BUDGET || self.can_finish_within(after_budget as usize);
                self.rollback(1).expect("committed just now");
                if fits {
                    mask.insert(*t);
                }
            }
            self.witness = saved;
        }
    }

    /// Did the last mask take out tokens because they would repeat an earlier item of a list
    /// whose items must be distinct (a JSON Schema `uniqueItems` array, the tool calls of one
    /// reply), or lead only to such a repeat? Says why a mask is empty before the output is
    /// complete: the items' language has run out of distinct values.
    pub fn refused_repeats(&self) -> bool {
        match &self.run {
            Run::Cfg(c) => c.refused_repeats(),
            Run::Dfa(_) => false,
        }
    }

    /// Is `token` allowed now?
    pub fn allows(&mut self, token: TokenId) -> bool {
        let compiled = self.compiled.clone();
        let vocab = compiled.vocab();
        if let Some(named) = &compiled.named {
            if let Some(bytes) = named.bytes(token) {
                return self.allows_bytes(bytes);
            }
            if named.is_barred(token) {
                return false;
            }
        }
        match vocab.kind(token) {
            TokenKind::Text => self.allows_bytes(vocab.bytes(token)),
            TokenKind::Special => vocab.is_eos(token) && self.is_accepting(),
            TokenKind::Unused => false,
        }
    }

    fn allows_bytes(&mut self, bytes: &[u8]) -> bool {
        if bytes.is_empty() {
            return false;
        }
        match (&mut self.run, &self.compiled.backend) {
            (Run::Dfa(stack), Backend::Dfa { dfa, .. }) => {
                let s = *stack.last().expect("never empty");
                s != ENDED && dfa.run(s, bytes) != StateId::DEAD
            }
            (Run::Cfg(c), Backend::Earley(cfg)) => c.allows_bytes(cfg, bytes),
            _ => unreachable!("the run matches the backend"),
        }
    }

    /// Appends `token`. Errors (and changes nothing) if it is not allowed.
    pub fn commit(&mut self, token: TokenId) -> Result<()> {
        let compiled = self.compiled.clone();
        let vocab = compiled.vocab();
        let not_allowed = || Error::TokenNotAllowed {
            token: token.0,
            text: String::from_utf8_lossy(vocab.bytes(token)).into_owned(),
        };
        if vocab.kind(token) == TokenKind::Special && vocab.is_eos(token) && self.is_accepting() {
            self.witness = None;
            match &mut self.run {
                Run::Dfa(stack) => stack.push(ENDED),
                Run::Cfg(c) => c.commit_eos(),
            }
            return Ok(());
        }
        // A named token commits the bytes it stands for; a barred one nothing (see `tokens`).
        let named = compiled.named.as_ref();
        let bytes = match named.and_then(|n| n.bytes(token)) {
            Some(b) => b,
            None if named.is_some_and(|n| n.is_barred(token)) => return Err(not_allowed()),
            None if vocab.kind(token) == TokenKind::Text => vocab.bytes(token),
            None => return Err(not_allowed()),
        };
        let before = self.len();
        self.commit_text(bytes, true).map_err(|e| match e {
            Error::Limit { .. } => e,
            _ => not_allowed(),
        })?;
        self.follow_witness(before, token);
        Ok(())
    }

    /// Appends raw bytes (text to validate, forced text). Errors if not allowed. Unlike
    /// [`commit`](Self::commit) of a token, items that must be distinct are judged exactly (by
    /// the parser's marks), not as masks guess them within a token.
    pub fn commit_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        self.commit_text(bytes, false)?;
        self.witness = None;
        Ok(())
    }

    fn commit_text(&mut self, bytes: &[u8], as_token: bool) -> Result<()> {
        let ok = !bytes.is_empty()
            && match (&mut self.run, &self.compiled.backend) {
                (Run::Dfa(stack), Backend::Dfa { dfa, .. }) => {
                    let s = *stack.last().expect("never empty");
                    let t = if s == ENDED { StateId::DEAD } else { dfa.run(s, bytes) };
                    if t != StateId::DEAD {
                        stack.push(t);
                    }
                    t != StateId::DEAD
                }
                (Run::Cfg(c), Backend::Earley(cfg)) => c.commit_bytes(cfg, bytes, as_token)?,
                _ => unreachable!("the run matches the backend"),
            };
        if ok {
            Ok(())
        } else {
            Err(Error::TextNotAllowed { text: String::from_utf8_lossy(bytes).into_owned() })
        }
    }

    /// Undoes the last `n` commits. Errors if fewer than `n` were made.
    pub fn rollback(&mut self, n: usize) -> Result<()> {
        if n > self.len() {
            return Err(Error::state(format!("cannot roll back {n} tokens: only {} committed", self.len())));
        }
        match &mut self.run {
            Run::Dfa(stack) => stack.truncate(stack.len() - n),
            Run::Cfg(c) => c.rollback(n),
        }
        if n > 0 {
            self.witness = None;
        }
        if self.shown.as_ref().is_some_and(|(at, _)| *at > self.len()) {
            self.shown = None;
        }
        Ok(())
    }

    /// Back to the start of the output.
    pub fn reset(&mut self) {
        let n = self.len();
        self.rollback(n).expect("n == len");
    }

    /// Fewest tokens of the vocabulary that finish the output from here (as
    /// [`Compiled::min_tokens`] counts them): what a budget must leave. Exact for a regular
    /// constraint; for a context-free one the least of the count, the witness, the descent
    /// (the count's choices spelled across lexemes) and, up to 12 tokens (`MAX_SEARCH_TOKENS`),
    /// the search's answer; where that search did not settle it, the deep search's, asked for
    /// one token fewer a few times (`MAX_DEEP_STEPS`, each within its work). Where items or
    /// keys must be distinct (a grammar with marks: no search, and a count blind to repeats),
    /// the shorter of the ways shown that keep them distinct (the witness, a descent through
    /// the repeats' check) or, below it, the least budget whose mask lets a token through (so
    /// what a request is checked by: a few budgets down, to the first empty mask): an upper
    /// bound that fits, never the grammar's count below it that repeats an item; the count
    /// only where neither shows a way. `None` if it cannot be
    /// finished (after EOS: `Some(0)`).
    pub fn min_tokens_to_finish(&mut self) -> Option<u32> {
        if let Some(d) = self.min_tokens_distinct() {
            return Some(d);
        }
        let d = match (&mut self.run, &self.compiled.backend) {
            (Run::Dfa(stack), Backend::Dfa { dfa, finish_tokens }) => {
                let s = *stack.last().expect("never empty");
                if s == ENDED {
                    0
                } else {
                    dfa_finish_tokens(&self.compiled.env, dfa, finish_tokens, s)
                }
            }
            (Run::Cfg(c), Backend::Earley(cfg)) => c.finish_cost(cfg, &self.compiled.env),
            _ => unreachable!("the run matches the backend"),
        };
        // A context-free count is an upper bound: the witness or the descent may be shorter,
        // and below them the search finds the fewest (within its bound).
        let d = d.min(self.witness().map_or(UNREACHABLE, |w| w.len() as u32));
        let d = d.min(self.descent_len().unwrap_or(UNREACHABLE));
        let (mut d, settled) = match self.new_search(0) {
            Some(mut s) => {
                let found = (0..d.min(search::MAX_SEARCH_TOKENS + 1)).find(|&k| self.search_within(k, &mut s));
                // Exact where its work never ran out and it tried every count below `d`.
                let tried = found.is_some() || d <= search::MAX_SEARCH_TOKENS + 1;
                (found.unwrap_or(d), tried && s.work >= self.compiled.vocab().len())
            }
            None => (d, true),
        };
        // Where the search did not settle it (more tokens, or its work ran out first), the deep
        // search for one fewer, a few times.
        if d != UNREACHABLE && !settled {
            for _ in 0..search::MAX_DEEP_STEPS {
                if d == 0 {
                    break;
                }
                match self.deep_way(d - 1) {
                    Some(way) => d = way.path.map_or(d - 1, |p| p.len() as u32),
                    None => break,
                }
            }
        }
        (d != UNREACHABLE).then_some(d)
    }

    /// [`min_tokens_to_finish`](Self::min_tokens_to_finish) where items or keys must be
    /// distinct: the shorter of the witness and the marked descent, each a way the matcher
    /// committed through the repeats' check, then fewer while the budgeted mask lets a token
    /// through (it never lets through one that cannot finish in time). `None` for a grammar
    /// without marks, or where neither way is shown (the count then answers).
    fn min_tokens_distinct(&mut self) -> Option<u32> {
        let (Run::Cfg(_), Backend::Earley(cfg)) = (&self.run, &self.compiled.backend) else { return None };
        if !cfg.has_marks {
            return None;
        }
        if self.is_accepting() || self.is_ended() {
            return Some(0);
        }
        let witness = self.witness().map(|w| w.len() as u32);
        let descent = self.descent_path_marked().map(|p| p.len() as u32);
        let mut d = witness.into_iter().chain(descent).min()?;
        // Below them, the budgeted mask (what a request is checked by) shows a way in fewer
        // where it lets a token through: its searches and joins find what the two miss (a
        // longer item that tokenizes into fewer tokens). Down to the first mask that is empty.
        let mut mask = TokenSet::new(self.compiled.vocab().len());
        for _ in 0..search::MAX_DEEP_STEPS {
            if d <= 1 {
                break;
            }
            self.fill_mask_within(&mut mask, d as usize - 1);
            if mask.is_empty() {
                break;
            }
            d -= 1;
        }
        Some(d)
    }

    /// The lexeme-by-lexeme count of the tokens that finish the output (blind to items that
    /// must be distinct; see [`min_tokens_to_finish`](Self::min_tokens_to_finish)), `None`
    /// for a regular constraint or one that cannot finish.
    pub fn grammar_tokens_to_finish(&mut self) -> Option<u32> {
        match (&mut self.run, &self.compiled.backend) {
            (Run::Cfg(c), Backend::Earley(cfg)) => Some(c.finish_cost(cfg, &self.compiled.env)),
            _ => None,
        }
        .filter(|&d| d != UNREACHABLE)
    }

    /// Can the output be finished within `n` more tokens, as a budgeted mask counts them
    /// ([`fill_mask_within`](Self::fill_mask_within) allows a token exactly when this holds
    /// after it, with `n` = the tokens left after it)? Cheaper than
    /// [`min_tokens_to_finish`](Self::min_tokens_to_finish) when the answer is plainly yes.
    pub fn can_finish_within(&mut self, n: usize) -> bool {
        let n = n.min(NO_BUDGET as usize - 1) as u32;
        let env = &self.compiled.env;
        let bound = match (&mut self.run, &self.compiled.backend) {
            (Run::Dfa(stack), Backend::Dfa { dfa, finish_tokens }) => {
                let s = *stack.last().expect("never empty");
                return s == ENDED || (s != StateId::DEAD && Fits::new(env, dfa, finish_tokens, n).check(s));
            }
            (Run::Cfg(c), Backend::Earley(cfg)) => c.can_finish_within(cfg, env, n),
            _ => unreachable!("the run matches the backend"),
        };
        bound || self.witness().is_some_and(|w| w.len() as u32 <= n) || self.finishes_within(n)
    }

    /// The bytes that must come next whatever is chosen (empty if there is a choice, or if
    /// the output may end here); text only: they stop before a named token (a token terminal).
    pub fn forced_bytes(&mut self) -> Vec<u8> {
        let mut out = self.forced_run();
        if self.compiled.named.is_some() {
            let text = out.iter().position(|&b| b >= super::tokens::HIGH).unwrap_or(out.len());
            out.truncate(text);
        }
        out
    }

    fn forced_run(&mut self) -> Vec<u8> {
        match (&mut self.run, &self.compiled.backend) {
            (Run::Dfa(stack), Backend::Dfa { dfa, .. }) => {
                let mut out = Vec::new();
                let mut s = *stack.last().expect("never empty");
                if s == ENDED {
                    return out;
                }
                while out.len() < MAX_FORCED_BYTES && !dfa.is_accepting(s) {
                    let Some(b) = dfa.only_byte(s) else { break };
                    out.push(b);
                    s = dfa.next(s, b);
                }
                out
            }
            (Run::Cfg(c), Backend::Earley(cfg)) => c.forced_bytes(cfg, MAX_FORCED_BYTES),
            _ => unreachable!("the run matches the backend"),
        }
    }

    /// Tokens that are the only sensible continuation: the forced bytes, tokenized canonically.
    /// The last token is held back unless the forced text finishes the output, since the text
    /// after it might merge with it into a longer token.
    pub fn forced_tokens(&mut self) -> Vec<TokenId> {
        let bytes = self.forced_bytes();
        if bytes.is_empty() {
            return Vec::new();
        }
        let Some(mut tokens) = self.compiled.vocab().encode(&bytes) else { return Vec::new() };
        let finishes = self.commit_bytes(&bytes).is_ok() && {
            let f = self.is_finished();
            self.rollback(1).expect("just committed");
            f
        };
        if !finishes {
            tokens.pop();
        }
        tokens
    }
}

/// Whether a DFA state can be finished within a budget, in tokens of the vocabulary: the
/// single-byte bound (`finish_tokens`) first, which settles almost every state; where it does
/// not fit, a way of so many tokens ([`VocabEnv::token_within`]). Answers are kept for the one
/// mask being filled (a trie walk asks about the same few states at thousands of token ends).
struct Fits<'a> {
    env: &'a VocabEnv,
    dfa: &'a Dfa,
    finish_tokens: &'a Distances,
    budget: u32,
    known: Vec<(StateId, bool)>,
}

impl<'a> Fits<'a> {
    fn new(env: &'a VocabEnv, dfa: &'a Dfa, finish_tokens: &'a Distances, budget: u32) -> Fits<'a> {
        Fits { env, dfa, finish_tokens, budget, known: Vec::new() }
    }

    #[inline]
    fn check(&mut self, t: StateId) -> bool {
        if self.finish_tokens.at(t) <= self.budget {
            return true;
        }
        if let Some(&(_, ok)) = self.known.iter().find(|(s, _)| *s == t) {
            return ok;
        }
        let ok = self.env.token_within(self.dfa, t, self.budget);
        self.known.push((t, ok));
        ok
    }
}

/// The fewest tokens that finish a DFA output from `s`: the exact token distance where the
/// search settles it within the single-byte bound, else that bound.
fn dfa_finish_tokens(env: &VocabEnv, dfa: &Dfa, finish_tokens: &Distances, s: StateId) -> u32 {
    let bound = finish_tokens.at(s);
    if bound == UNREACHABLE {
        return UNREACHABLE;
    }
    env.token_reach(dfa, s, bound).or_bound(bound)
}

/// Tokens allowed to finish after a token, when `remaining` tokens (this one included) are
/// left: always below [`NO_BUDGET`], so a real budget never reads as none.
fn budget_after(remaining: usize) -> u32 {
    (remaining - 1).min(NO_BUDGET as usize - 1) as u32
}
