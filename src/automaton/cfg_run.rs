//! `CfgRun`: the per-sequence state of a context-free constraint (see [`earley`](super::earley)).
//!
//! One [`Pos`] per committed token (plus the start), so rollback is exact: truncate the
//! positions and cut the chart back to the size the last kept position recorded.
//!
//! The fast mask walks the token trie with a [`TrieVisitor`] that keeps the scans of every
//! depth in one flat buffer and builds rows speculatively as lexemes end inside tokens;
//! backing up a level truncates both. Without a token budget, most of that walk is skipped:
//! the tokens that end inside the current lexemes come from the [`mask_cache`](super::mask_cache)
//! (whole vocabulary slices at once), and only the subtrees where a lexeme ends are walked with
//! the parser. The reference mask runs every token on its own.

use super::cfg::{Cfg, TermId};
pub(super) use super::distinct::key::Old;
use super::distinct::{Distinct, MarkAt, Marks, Repeated};

mod plain;
mod refused;
mod repeats;
mod within;
use super::earley::{Chart, ChartLen, RowCopy, Scan, Within};
use super::mask_cache::{Below, Entry};
use super::{VocabEnv, NO_BUDGET};
use crate::regular::{StateId, UNREACHABLE};
use crate::vocab::trie::{ByteSet, TrieVisitor};
use crate::vocab::{TokenId, TokenSet};
pub(super) use refused::Refused;
use within::Waits;
pub(crate) use within::WalkCache;

#[derive(Clone)]
struct Pos {
    scans: Vec<Scan>,
    boundary: Option<u32>,
    chart: ChartLen,
    ended: bool,
    /// The distinct-items reader after this position (idle unless the grammar has marks).
    distinct: Distinct,
    /// `CfgRun::text`'s length at this position.
    text_len: usize,
}

/// Why bytes were not committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// The grammar does not allow them.
    Grammar,
    /// They finish an item equal to an earlier one (see [`distinct`](super::distinct)).
    Repeat,
}

/// Rows chained into words for [`CfgRun::chained_state_key`]: a word and a row's items, to the
/// word of the rows up to that row.
pub(super) type RowWords = std::collections::HashMap<Vec<u32>, u32, crate::regular::FxWordsBuild>;

/// The lexer states a token leaves the current scans in: (scan index, state) of those going on.
pub(super) type LexerStates = Vec<(u32, StateId)>;

#[derive(Clone)]
pub(super) struct CfgRun {
    chart: Chart,
    positions: Vec<Pos>,
    /// The output so far, kept only when the grammar has marks (the distinct-items reader
    /// needs the items' text).
    text: Vec<u8>,
    /// Where marked terminals ended in the bytes of the last [`run`](Self::run) (offsets into
    /// the output); filled only when the grammar has marks.
    events: Vec<(u32, MarkAt)>,
    /// See [`refused_repeats`](Self::refused_repeats).
    refused_repeats: bool,
    /// The last cached-path mask, the scans it was computed at, and the least token budget it
    /// holds for ([`NO_BUDGET`]: computed without one, so it holds for no budget). A mask depends
    /// only on the scans (terminal, state, origin row) and the rows up to those origins, which
    /// only a rollback can change: so the same scans give the same mask (e.g. every token
    /// inside one plain string) until a rollback, which drops the memo. Origin rows count as
    /// the same when they hold the same items ([`Chart::same_row`]: free text that may end
    /// anywhere starts the next lexeme's scan at a new such row every step). Under a budget it is
    /// kept only if the budget refused nothing; it then holds for every budget at least as
    /// large as the largest finish cost among its tokens (or a bound on it).
    memo: Option<(Vec<Scan>, TokenSet, u32)>,
    /// The repeats filter's last answer where it depends only on the reader's containers and
    /// the mask (see `repeats::Settled`): the reader, the mask it was given, the tokens it took
    /// out.
    repeats_memo: Option<Box<(Distinct, TokenSet, Vec<TokenId>)>>,
}

impl CfgRun {
    pub fn new(cfg: &Cfg) -> CfgRun {
        let chart = Chart::new(cfg);
        let mut scans = Vec::new();
        chart.start_scans(cfg, 0, &mut scans);
        let distinct = Distinct::with_closes(&cfg.after_closes);
        let start = Pos { scans, boundary: Some(0), chart: chart.len(), ended: false, distinct, text_len: 0 };
        CfgRun {
            chart,
            positions: vec![start],
            text: Vec::new(),
            events: Vec::new(),
            refused_repeats: false,
            memo: None,
            repeats_memo: None,
        }
    }

    fn pos(&self) -> &Pos {
        self.positions.last().expect("positions are never empty")
    }

    pub fn len(&self) -> usize {
        self.positions.len() - 1
    }

    pub fn is_ended(&self) -> bool {
        self.pos().ended
    }

    pub fn is_accepting(&self) -> bool {
        let p = self.pos();
        !p.ended && p.boundary.is_some_and(|r| self.chart.accepting(r))
    }

    /// Accepting, and no lexeme can continue.
    pub fn is_finished(&self) -> bool {
        self.is_ended() || (self.is_accepting() && self.pos().scans.is_empty())
    }

    /// Runs `bytes` from the current position; the new position, or `None` if it dies. Rows it
    /// builds stay in the chart (the caller truncates on failure or keeps them).
    fn run(&mut self, cfg: &Cfg, bytes: &[u8]) -> Option<Pos> {
        let p = self.pos();
        if p.ended {
            return None;
        }
        let mut cur = p.scans.clone();
        let mut boundary = p.boundary;
        let (distinct, text_len) = (p.distinct.clone(), p.text_len + bytes.len());
        self.events.clear();
        for (i, &b) in bytes.iter().enumerate() {
            let n = cur.len();
            boundary = self.chart.advance(cfg, &mut cur, 0..n, b);
            cur.drain(..n);
            if cur.is_empty() && !boundary.is_some_and(|r| self.chart.accepting(r)) {
                return None;
            }
            if cfg.has_marks && boundary.is_some() {
                let at = (self.text.len() + i) as u32;
                for &(t, _) in self.chart.accepted() {
                    if let Some(m) = &cfg.term(t).mark {
                        let m = MarkAt::of(m, &cfg.after_literals);
                        if !self.events.contains(&(at, m)) {
                            self.events.push((at, m));
                        }
                    }
                }
            }
        }
        Some(Pos { scans: cur, boundary, chart: self.chart.len(), ended: false, distinct, text_len })
    }

    pub fn allows_bytes(&mut self, cfg: &Cfg, bytes: &[u8]) -> bool {
        let mark = self.chart.len();
        let ok = !bytes.is_empty() && self.run(cfg, bytes).is_some();
        self.chart.truncate(mark);
        ok && !(cfg.has_marks && self.repeats(cfg, bytes))
    }

    /// Would `bytes` finish an item equal to an earlier one, as masks judge it (the guess of
    /// [`distinct`](super::distinct))?
    fn repeats(&mut self, cfg: &Cfg, bytes: &[u8]) -> bool {
        self.read_guess(cfg, bytes).is_err()
    }

    /// The reader after `bytes` as masks guess it, or the repeat they finish.
    fn read_guess(&mut self, cfg: &Cfg, bytes: &[u8]) -> Result<Distinct, Repeated> {
        let from = self.text.len();
        self.text.extend_from_slice(bytes);
        let mut d = self.pos().distinct.clone();
        let r = d.read(&self.text, from, Marks::Guess(&cfg.after_literals));
        self.text.truncate(from);
        r.map(|()| d)
    }

    /// Commits `bytes` (non-empty); `Ok(false)` and no change if they are not allowed, an
    /// error if the parser hit its row limit on the way. With `as_token`, the bytes are one
    /// token's: a repeat of a distinct item is judged as masks judge it (the guess, see
    /// [`distinct`](super::distinct)), so masks, `allows` and commits agree token by token;
    /// otherwise (text: validating an output, forced text) by the parser's exact marks only,
    /// since the guess reads every `[` of a longer text as marked.
    pub fn commit_bytes(&mut self, cfg: &Cfg, bytes: &[u8], as_token: bool) -> crate::error::Result<bool> {
        Ok(self.commit_or_why(cfg, bytes, as_token)?.is_ok())
    }

    /// [`commit_bytes`](Self::commit_bytes), saying why bytes were refused.
    fn commit_or_why(&mut self, cfg: &Cfg, bytes: &[u8], as_token: bool) -> crate::error::Result<Result<(), Refusal>> {
        let mark = self.chart.len();
        self.chart.take_overflow();
        match self.run(cfg, bytes) {
            Some(mut p) if !bytes.is_empty() => {
                if cfg.has_marks {
                    // Refused exactly when a mask would refuse it (the guess); the parser's
                    // marks are what the new position records. The guess refuses whatever the
                    // parser's marks would (see the module doc of `distinct`).
                    let from = self.text.len();
                    let guess = as_token && self.repeats(cfg, bytes);
                    self.text.extend_from_slice(bytes);
                    let exact = p.distinct.read(&self.text, from, Marks::Exact(&self.events));
                    debug_assert!(!as_token || guess || exact.is_ok(), "the guess refuses what the marks refuse");
                    if guess || exact.is_err() {
                        self.text.truncate(from);
                        self.chart.truncate(mark);
                        return Ok(Err(Refusal::Repeat));
                    }
                }
                self.positions.push(p);
                Ok(Ok(()))
            }
            _ => {
                self.chart.truncate(mark);
                if self.chart.take_overflow() {
                    return Err(crate::error::Error::limit(
                        crate::error::LimitKind::ParserRow,
                        "Earley items in one parser row",
                        cfg.max_row_items,
                    ));
                }
                Ok(Err(Refusal::Grammar))
            }
        }
    }

    pub fn commit_eos(&mut self) {
        let mut p = self.pos().clone();
        p.ended = true;
        p.scans.clear();
        self.positions.push(p);
    }

    pub fn rollback(&mut self, n: usize) {
        if n > 0 {
            self.memo = None;
        }
        self.positions.truncate(self.positions.len() - n);
        let to = self.pos().chart;
        self.chart.truncate(to);
        self.text.truncate(self.pos().text_len);
    }

    /// The chart's size now (for [`state_key`](Self::state_key)).
    pub fn chart_len(&self) -> ChartLen {
        self.chart.len()
    }

    /// Words that two positions reached by single commits from the position where the chart
    /// had size `from` share exactly when they are the same parse state: the scans, the
    /// boundary row and the rows built since. (Not the distinct-items reader: grammars with
    /// marks must not rely on it.)
    pub fn state_key(&self, from: ChartLen) -> Vec<u32> {
        let mut key = self.position_words();
        self.chart.items_since(from.rows(), &mut key);
        key
    }

    /// The words of a state key before its rows: whether ended, the boundary row, the scans.
    fn position_words(&self) -> Vec<u32> {
        let p = self.pos();
        let mut key = vec![u32::from(p.ended), p.boundary.map_or(u32::MAX, |r| r)];
        key.extend(p.scans.iter().flat_map(|sc| [sc.term.0, sc.state.0, sc.origin]));
        key
    }

    /// [`state_key`](Self::state_key) with the rows since the key's root as one word: each row
    /// from `from` on is chained into `rows` (the word before it and its items, to a new word
    /// where not met before), from `chain`, the word of the rows from the root up to `from` (0:
    /// none). Keys taken so, with one table and one root, are equal exactly where
    /// `state_key(root)` would be (a word stands for one sequence of rows), and cost only the
    /// rows since `from` (a deep search's keys held every row since its root: hundreds of rows,
    /// megabytes a state). Returns the key and the word of this position's rows.
    pub fn chained_state_key(&self, from: u32, chain: u32, rows: &mut RowWords) -> (Vec<u32>, u32) {
        let mut word = chain;
        let mut buf = Vec::new();
        for r in from..self.chart.len().rows() {
            buf.clear();
            buf.push(word);
            self.chart.row_words(r, &mut buf);
            word = match rows.get(&buf) {
                Some(&w) => w,
                None => {
                    let w = rows.len() as u32 + 1;
                    rows.insert(buf.clone(), w);
                    w
                }
            };
        }
        let mut key = self.position_words();
        key.push(word);
        (key, word)
    }

    /// The lexer part of [`state_key`](Self::state_key): each scan's terminal and lexer state
    /// (what the mask cache's entry for this position is built from).
    pub fn lexer_key(&self) -> Vec<u32> {
        self.pos().scans.iter().flat_map(|sc| [sc.term.0, sc.state.0]).collect()
    }

    /// How many scans (lexemes in progress) are alive here.
    pub fn scans_len(&self) -> usize {
        self.pos().scans.len()
    }

    /// Whether the parse can be finished from here within `budget` tokens ([`Chart::fits`]).
    pub fn can_finish_within(&mut self, cfg: &Cfg, env: &VocabEnv, budget: u32) -> bool {
        let p = self.positions.last().expect("never empty");
        if p.ended {
            return true;
        }
        let (scans, boundary) = (p.scans.clone(), p.boundary);
        self.chart.fits(cfg, env, &scans, boundary, budget) != Within::Over
    }

    /// Fewest usable bytes that finish from the current position ([`Chart::finish_cost`]; 0
    /// after EOS).
    pub fn byte_cost(&mut self, cfg: &Cfg) -> u32 {
        let p = self.positions.last().expect("never empty");
        if p.ended {
            return 0;
        }
        let (scans, boundary) = (p.scans.clone(), p.boundary);
        self.chart.finish_cost(cfg, &scans, boundary)
    }

    /// Tokens enough to finish from the current position: the least budget
    /// [`Chart::fits`] accepts (exact for one lexeme, an upper bound across lexemes, see
    /// [`Cfg::token_costs`](super::cfg::Cfg::token_costs)); never more than the usable-byte cost.
    pub fn finish_cost(&mut self, cfg: &Cfg, env: &VocabEnv) -> u32 {
        let p = self.positions.last().expect("never empty");
        if p.ended {
            return 0;
        }
        let (scans, boundary) = (p.scans.clone(), p.boundary);
        let bytes = self.chart.finish_cost(cfg, &scans, boundary);
        // The least budget the token costs fit, found by halving (each probe is cheap once
        // the tables exist); never more than the usable-byte cost.
        if bytes == UNREACHABLE || bytes == 0 {
            return bytes;
        }
        let (mut lo, mut hi) = (0u32, bytes);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.chart.fits(cfg, env, &scans, boundary, mid) != Within::Over {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        hi
    }

    /// The one byte every continuation starts with, if there is exactly one and the output
    /// cannot end here.
    pub fn only_byte(&self, cfg: &Cfg) -> Option<u8> {
        if self.is_accepting() || self.is_ended() {
            return None;
        }
        let mut next = self.next_bytes(cfg);
        let found = next.next();
        next.next().is_none().then_some(found).flatten()
    }

    /// The byte the cheapest way on most likely reads next, found without committing: along
    /// the scan with the least finish cost in usable bytes, a byte after which its lexeme's
    /// rest drops by one (printable ASCII first). `None` where that lexeme may end here (the
    /// next byte is the next lexeme's) or nothing is found. A guess: the caller checks it.
    pub fn likely_next_byte(&mut self, cfg: &Cfg) -> Option<u8> {
        let p = self.positions.last().expect("never empty");
        if p.ended {
            return None;
        }
        let scans = p.scans.clone();
        let mut best: Option<(u32, Scan)> = None;
        for sc in scans {
            let cost = cfg.term(sc.term).dist.at(sc.state).saturating_add(self.chart.scan_wait_cost(cfg, &sc));
            if best.is_none_or(|(c, _)| cost < c) {
                best = Some((cost, sc));
            }
        }
        let (_, sc) = best?;
        let term = cfg.term(sc.term);
        let d = term.dist.at(sc.state);
        if d == 0 || d == UNREACHABLE {
            return None;
        }
        (0x20..0x7f).chain(0..0x20).chain(0x7f..=0xff).find(|&b| {
            let n = term.dfa.next(sc.state, b);
            n != StateId::DEAD && term.dist.at(n).saturating_add(1) == d
        })
    }

    /// The bytes some current lexeme can read next, in increasing order: exactly those a commit
    /// can take (every live scan can be completed, see [`earley`](super::earley)), short of a
    /// repeat of a distinct item.
    pub fn next_bytes(&self, cfg: &Cfg) -> impl Iterator<Item = u8> {
        let set = self.next_byte_set(cfg);
        (0..=255u8).filter(move |&b| set[b as usize / 64] >> (b % 64) & 1 == 1)
    }

    /// [`next_bytes`](Self::next_bytes) as four 64-bit words (byte `b` is bit `b % 64` of word
    /// `b / 64`).
    pub fn next_byte_set(&self, cfg: &Cfg) -> [u64; 4] {
        first_bytes(cfg, &self.pos().scans).0
    }

    /// The forced bytes from here (see `Matcher::forced_bytes`).
    pub fn forced_bytes(&mut self, cfg: &Cfg, max: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let depth = self.positions.len();
        while out.len() < max {
            let Some(b) = self.only_byte(cfg) else { break };
            if !self.commit_bytes(cfg, &[b], false).unwrap_or(false) {
                break;
            }
            out.push(b);
        }
        self.rollback(self.positions.len() - depth);
        out
    }

    /// The fast mask: a trie walk. `after_budget` = most tokens of the vocabulary allowed to
    /// finish after a token ([`NO_BUDGET`]: none; see [`Chart::fits`]).
    ///
    /// The tokens that end inside the current lexemes come from the
    /// [`MaskCache`](super::mask_cache) and only what follows a lexeme end is walked with the
    /// parser. Under a budget the cached part is used when a bound on its tokens' finish cost
    /// (their lexemes' farthest rest plus what finishing after the lexeme costs) is within the
    /// budget — everywhere but the last tokens of a budget; otherwise the tokens that keep a
    /// lexeme going are checked one by one by a lexer-only walk (each one's finish cost along
    /// that way), and the groups as always.
    ///
    /// Under a budget, the tokens it refused are listed in `refused` (cleared first) where the
    /// caller asks for them; where it does not and the budget leaves no scan room for a token
    /// inside its lexeme (each scan's wait is over it, in bytes and in tokens), the lexer walk,
    /// which would only list refusals, is not made (the last token of a search or a descent:
    /// budget 0). Returns whether the lexer walk of the whole vocabulary was made (not where
    /// the cache or the memo answered, nor where it was not needed): what a search's work
    /// counts.
    pub fn fill(
        &mut self,
        cfg: &Cfg,
        env: &VocabEnv,
        mask: &mut TokenSet,
        after_budget: u32,
        refused: Option<&mut Refused>,
    ) -> bool {
        let list = refused.is_some();
        let mut unlisted = Refused::default();
        let refused = refused.unwrap_or(&mut unlisted);
        refused.clear();
        let p = self.positions.last().expect("never empty");
        if p.ended {
            return false;
        }
        if let Some((scans, m, need)) = &self.memo {
            let same = scans.len() == p.scans.len()
                && scans
                    .iter()
                    .zip(&p.scans)
                    .all(|(a, b)| a.term == b.term && a.state == b.state && self.chart.same_row(a.origin, b.origin));
            if same && m.width() == mask.width() && (after_budget == NO_BUDGET || *need <= after_budget) {
                mask.union_clipped(m);
                return false;
            }
        }
        let entry = env.mask_cache().get_or_build(cfg, env, &p.scans);
        // Under a budget: each scan's wait cost, and the bound on the inside tokens' finish cost.
        let waits: Vec<u32> = if after_budget == NO_BUDGET {
            Vec::new()
        } else {
            p.scans.iter().map(|sc| self.chart.scan_wait_cost(cfg, sc)).collect()
        };
        let need_with = |waits: &[u32]| {
            (waits.iter().zip(&p.scans).enumerate())
                .filter_map(|(k, (&w, sc))| {
                    entry.inside_bound(k, &cfg.term(sc.term).dist, sc.state).map(|d| d.saturating_add(w))
                })
                .max()
                .unwrap_or(0)
        };
        let mut need = need_with(&waits);
        // Where the waits in bytes bind, in tokens they may not: a wait's least tokens (the
        // grammar's token costs; a JSON key and its value a few tokens where bytes count
        // dozens). An inside token's rest in bytes, spelled a byte a token, then the wait in
        // tokens is a way to finish; the walk below lets through every token within that.
        let mut waits_tokens = None;
        if need > after_budget && after_budget != NO_BUDGET {
            let tokens: Vec<u32> = p.scans.iter().map(|sc| self.chart.scan_wait_tokens(cfg, env, sc)).collect();
            let least: Vec<u32> = waits.iter().zip(&tokens).map(|(&b, &t)| b.min(t)).collect();
            need = need_with(&least);
            waits_tokens = Some(tokens);
        }
        if need <= after_budget {
            let (any_refused, cost) = self.fill_cached(cfg, env, &entry, mask, after_budget, refused);
            if list {
                refused.settle(mask, cfg.has_marks);
            }
            if !any_refused {
                let need = if after_budget == NO_BUDGET { NO_BUDGET } else { need.max(cost) };
                let scans = &self.positions.last().expect("never empty").scans;
                match &mut self.memo {
                    Some((s, m, n)) if m.width() == mask.width() => {
                        s.clone_from(scans);
                        m.copy_from(mask);
                        *n = need;
                    }
                    memo => *memo = Some((scans.clone(), mask.clone(), need)),
                }
            }
            return false;
        }
        // The budget binds on some tokens that keep a lexeme going: those one by one (a lexer
        // walk with each token's finish cost, no parser), the groups as always.
        let scans = self.positions.last().expect("never empty").scans.clone();
        let waits_tokens: Vec<u32> = match waits_tokens {
            Some(t) => t,
            None => scans.iter().map(|sc| self.chart.scan_wait_tokens(cfg, env, sc)).collect(),
        };
        // A token inside a lexeme fits only where its scan's wait does (see `within`).
        let inside_may_fit = waits.iter().zip(&waits_tokens).any(|(&w, &t)| w.min(t) <= after_budget);
        if !list && !inside_may_fit {
            self.fill_groups(cfg, env, &entry, mask, after_budget, refused);
            return false;
        }
        let waits = Waits { bytes: &waits, tokens: &waits_tokens };
        within::walk(cfg, env, &scans, waits, after_budget, mask, list.then_some(&mut *refused));
        self.fill_groups(cfg, env, &entry, mask, after_budget, refused);
        if list {
            refused.settle(mask, cfg.has_marks);
        }
        true
    }

    /// The cached mask: `entry.inside` (the caller checked it fits `after_budget`), plus one
    /// parser walk per boundary group (see [`mask_cache`](super::mask_cache)) from the row its
    /// ending lexemes build, with the budget checked per token. Rows built here are kept until
    /// the end. Returns whether the budget refused a token, and the largest finish cost of the
    /// tokens it let through from the groups (0 without a budget).
    fn fill_cached(
        &mut self,
        cfg: &Cfg,
        env: &VocabEnv,
        entry: &Entry,
        mask: &mut TokenSet,
        after_budget: u32,
        refused: &mut Refused,
    ) -> (bool, u32) {
        mask.union_clipped(&entry.inside);
        self.fill_groups(cfg, env, entry, mask, after_budget, refused)
    }

    /// The groups' part of [`fill_cached`](Self::fill_cached); the tokens a budget refused are
    /// added to `singles`.
    fn fill_groups(
        &mut self,
        cfg: &Cfg,
        env: &VocabEnv,
        entry: &Entry,
        mask: &mut TokenSet,
        after_budget: u32,
        listed: &mut Refused,
    ) -> (bool, u32) {
        let (mut refused, mut max_cost) = (false, 0u32);
        if entry.groups.is_empty() {
            return (refused, max_cost);
        }
        let budgeted = after_budget != NO_BUDGET;
        let p = self.positions.last().expect("never empty");
        let mark = self.chart.len();
        let mut buf: Vec<Scan> = Vec::new();
        let mut pasted = Vec::new();
        for (gi, g) in entry.groups.iter().enumerate() {
            let ends = &entry.ends[g.start as usize..g.end as usize];
            self.chart.set_accepted(ends.iter().map(|&k| (p.scans[k as usize].term, p.scans[k as usize].origin)));
            let row = self.chart.row_from_accepted(cfg);
            // Only the boundary's fresh scans: the key's lexemes going on are in `inside` and
            // in later groups.
            buf.clear();
            self.chart.start_scans(cfg, row, &mut buf);
            if buf.is_empty() && !self.chart.accepting(row) {
                continue;
            }
            // Under a budget the members' own ids are judged by this row's finish cost, also
            // those where a scan goes on (the way through that scan may cost more).
            let at_ok = !budgeted || (g.at.is_empty() && g.at_going.is_empty()) || {
                match self.chart.fits(cfg, env, &buf, Some(row), after_budget) {
                    Within::Bytes(cost) => {
                        max_cost = max_cost.max(cost);
                        true
                    }
                    // Let through by its cost in tokens: the mask depends on the budget.
                    Within::Tokens => {
                        refused = true;
                        true
                    }
                    Within::Over => {
                        refused = true;
                        false
                    }
                }
            };
            if at_ok {
                mask.insert_clipped(&g.at);
                if budgeted {
                    mask.insert_clipped(&g.at_going);
                }
            } else {
                listed.add_at_end(gi as u32, g.at.iter().chain(&g.at_going).copied());
            }
            if buf.is_empty() {
                continue;
            }
            let base = self.chart.len();
            let end = buf.len() as u32;
            // Below many members (free text ends at every node), most first bytes start no
            // fresh scan: those are turned away before the parser steps.
            let first = match &g.below {
                Below::Nodes(nodes) if nodes.len() >= MANY_MEMBERS => Some(first_bytes(cfg, &buf)),
                _ => None,
            };
            let mut w = Walker {
                cfg,
                env,
                chart: &mut self.chart,
                buf: std::mem::take(&mut buf),
                levels: vec![Level { start: 0, end, boundary: Some(row), chart: base }],
                mask,
                after_budget,
                // Rows built so far in this mask stay until its end, so the walk may rely on them.
                base_rows: base.rows(),
                rows: std::mem::take(&mut pasted),
                refused: false,
                singles: &mut listed.singles,
                max_cost: 0,
                first,
            };
            match &g.below {
                Below::Merged(trie) => trie.walk_visitor(&mut w),
                Below::Nodes(nodes) => nodes
                    .iter()
                    .for_each(|&(part, node)| env.slices().trie(part as usize).walk_visitor_below(node, &mut w)),
            }
            refused |= w.refused;
            max_cost = max_cost.max(w.max_cost);
            buf = w.buf;
            pasted = w.rows;
            debug_assert_eq!(self.chart.len(), base);
        }
        self.chart.truncate(mark);
        (refused, max_cost)
    }

    /// The slow reference mask: every token on its own, byte by byte.
    pub fn reference(&mut self, cfg: &Cfg, env: &VocabEnv, mask: &mut TokenSet, after_budget: u32) {
        if self.is_ended() {
            return;
        }
        let vocab = env.vocab();
        let n = vocab.len().min(mask.width());
        for id in (0..n as u32).map(TokenId) {
            let bytes = vocab.bytes(id);
            if vocab.kind(id) != crate::vocab::TokenKind::Text || bytes.is_empty() {
                continue;
            }
            let mark = self.chart.len();
            if let Some(p) = self.run(cfg, bytes) {
                let ok = after_budget == NO_BUDGET
                    || self.chart.fits(cfg, env, &p.scans, p.boundary, after_budget) != Within::Over;
                if ok {
                    mask.insert(id);
                }
            }
            self.chart.truncate(mark);
        }
    }
}

struct Level {
    start: u32,
    end: u32,
    boundary: Option<u32>,
    /// The chart size before this level's byte was read.
    chart: ChartLen,
}

struct Walker<'a> {
    cfg: &'a Cfg,
    env: &'a VocabEnv,
    chart: &'a mut Chart,
    buf: Vec<Scan>,
    levels: Vec<Level>,
    mask: &'a mut TokenSet,
    after_budget: u32,
    /// Rows below this index belong to committed positions (never truncated by the walk).
    base_rows: u32,
    /// Rows built from lexemes that started in committed rows, by ending set (see `boundary_row`).
    rows: Vec<(Vec<(TermId, u32)>, RowCopy)>,
    /// Under a budget: whether it refused a token (and which), and the largest finish cost it
    /// let through.
    refused: bool,
    singles: &'a mut Vec<TokenId>,
    max_cost: u32,
    /// Where set, the bytes some fresh scan of the base level reads (see [`first_bytes`]): a
    /// member's child spelled otherwise is dead, turned away unstepped.
    first: Option<ByteSet>,
}

/// How many member nodes a group has before its walk checks the first byte below them
/// against [`first_bytes`] (a set of 256 bytes per scan to work out, against one step per
/// child).
const MANY_MEMBERS: usize = 32;

/// The bytes on which some of `scans` lives (reads on, or ends its lexeme).
fn first_bytes(cfg: &Cfg, scans: &[Scan]) -> ByteSet {
    let mut set = ByteSet::default();
    for sc in scans {
        for (s, l) in set.0.iter_mut().zip(cfg.term(sc.term).dfa.live_bytes(sc.state)) {
            *s |= l;
        }
    }
    set
}

impl Walker<'_> {
    /// The row the lexemes ending at the last step lead to. When they all started in rows
    /// below the walk (`base_rows`), the row does not depend on the speculative rows above
    /// them, so it is built once per set of ending lexemes and pasted afterwards.
    fn boundary_row(&mut self) -> u32 {
        if let Some(row) = self.chart.built_before() {
            return row;
        }
        let accepted = self.chart.accepted();
        if !accepted.iter().all(|&(_, o)| o < self.base_rows) {
            return self.chart.row_from_accepted(self.cfg);
        }
        if let Some((_, copy)) = self.rows.iter().find(|(a, _)| a.as_slice() == accepted) {
            return self.chart.paste_row(copy);
        }
        let accepted = accepted.to_vec();
        let row = self.chart.row_from_accepted(self.cfg);
        if !self.chart.overflowed() {
            self.rows.push((accepted, self.chart.copy_row(row)));
        }
        row
    }
}

impl TrieVisitor for Walker<'_> {
    #[inline]
    fn push(&mut self, _node: u32, byte: u8) -> bool {
        if self.levels.len() == 1 && self.first.is_some_and(|f| !f.contains(byte)) {
            return false;
        }
        let top = self.levels.last().expect("base level");
        let (start, end) = (top.start as usize, top.end as usize);
        debug_assert_eq!(end, self.buf.len());
        let mark = self.chart.len();
        let boundary = if self.chart.step(self.cfg, &mut self.buf, start..end, byte) {
            let row = self.boundary_row();
            self.chart.start_new_scans(self.cfg, row, &mut self.buf, end);
            Some(row)
        } else {
            None
        };
        let alive = self.buf.len() > end || boundary.is_some_and(|r| self.chart.accepting(r));
        if !alive {
            self.buf.truncate(end);
            self.chart.truncate(mark);
            return false;
        }
        self.levels.push(Level { start: end as u32, end: self.buf.len() as u32, boundary, chart: mark });
        true
    }

    #[inline]
    fn pop(&mut self) {
        let lv = self.levels.pop().expect("pushed level");
        self.buf.truncate(lv.start as usize);
        self.chart.truncate(lv.chart);
    }

    fn tokens(&mut self, ids: &[TokenId]) {
        if self.after_budget != NO_BUDGET {
            let top = self.levels.last().expect("level");
            let scans = &self.buf[top.start as usize..top.end as usize];
            match self.chart.fits(self.cfg, self.env, scans, top.boundary, self.after_budget) {
                Within::Bytes(cost) => self.max_cost = self.max_cost.max(cost),
                // Let through by its cost in tokens: the mask depends on the budget.
                Within::Tokens => self.refused = true,
                Within::Over => {
                    self.refused = true;
                    self.singles.extend_from_slice(ids);
                    return;
                }
            }
        }
        self.mask.insert_clipped(ids);
    }
}
