//! The Earley chart and the per-byte step of the lexer/parser pair.
//!
//! Rows are Earley sets at *lexeme boundaries* only. Between boundaries the state of a parse
//! is a list of [`Scan`]s: a terminal being lexed, its DFA state, and the row it started in.
//! A byte advances every scan's DFA; scans that die are dropped. When a scan's DFA accepts, the
//! lexeme may end here: the items of its origin row that expected that terminal advance into a
//! new row (all lexemes ending at the same byte go into the same row), which is closed under
//! prediction and completion; the new row then starts fresh scans for every terminal it expects.
//! The scan also continues, since the lexeme may go on: every split is considered, so the
//! language is exactly the grammar's. Where the same lexemes (terminal and origin alike) end
//! at a later byte, the row they built last is taken again instead of a copy of it (free text
//! before a marker may end at every byte: one row, not one per byte).
//!
//! Rows are `u32` indices into the chart; an [`Item`] is a [`ProdId`], a dot and an origin
//! row. Finish costs (fewest usable bytes to finish, per row and symbol, computed lazily) are
//! [`UNREACHABLE`] where nothing finishes.
//!
//! Invariants:
//! - Row 0 is the initial row (prediction of `⊤ → • start`); a row only refers to earlier rows.
//! - A row is a function of the lexemes that built it (and the rows before it), not of the
//!   byte they ended at: so a row reused for a later byte reads on as a new one would.
//! - The chart is a stack: speculative rows (built while walking the token trie) are removed by
//!   [`Chart::truncate`] to a [`ChartLen`] taken before them, cost tables included.
//! - A row is accepting iff it holds `⊤ → start •` with origin 0.
//! - Every scan can read another byte (its DFA state has a live transition): a lexeme that can
//!   only end here lives on in the row its end built, not as a scan. So an empty scan list at
//!   an accepting row means the output is finished.
//! - With a cleaned grammar (see [`cfg`](super::cfg)) every live scan and every row reached by a
//!   live prefix can be completed, so "some scan alive or the row accepts" means "extendable".

use crate::regular::FxBuild;
use std::collections::HashSet;

use super::cfg::{Cfg, Costs, NtId, ProdId, Sym, TermId};
use super::VocabEnv;
use crate::regular::{StateId, UNREACHABLE};

/// How many rows before a position [`Chart::frontier_key`] compares a newer row with.
const SAME_ROW_LOOKBACK: u32 = 4;

/// An Earley item: a production, how much of its right-hand side is read, and the row it was
/// predicted in. Three `u32`s (the ids are `u32`s underneath): the chart holds many.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Item {
    pub prod: ProdId,
    /// Symbols of the right-hand side read so far.
    pub dot: u32,
    /// The row the item was predicted in.
    pub origin: u32,
}

/// A terminal being lexed: its DFA state and the row where the lexeme started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scan {
    pub term: TermId,
    pub state: StateId,
    pub origin: u32,
}

#[derive(Debug, Clone, Copy)]
struct Row {
    items_start: u32,
    expects_start: u32,
    /// Start of this row's slice of `Chart::waiting`.
    waiting_start: u32,
    accepting: bool,
}

/// A chart size to truncate back to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChartLen {
    rows: u32,
    items: u32,
    expects: u32,
    waiting: u32,
}

#[derive(Clone)]
pub struct Chart {
    items: Vec<Item>,
    expects: Vec<TermId>,
    /// Per row (a slice each, sorted): (key of the symbol after the dot, item index), so that
    /// completion and scanning find the items waiting on a symbol by binary search instead of
    /// scanning the whole origin row. See [`sym_key`].
    waiting: Vec<(u32, u32)>,
    rows: Vec<Row>,
    /// Per unit (0: usable bytes, 1: tokens, see [`Cfg::token_costs`]) and row, lazily.
    costs: [Vec<Option<CostTable>>; 2],
    /// Per unit: rows below it all have their cost table (tables are built for a row and every
    /// row before it at once, so the rows with tables start as a prefix).
    costs_upto: [u32; 2],
    seen: HashSet<Item, FxBuild>,
    /// (terminal, origin row) of the lexemes that may end at the last [`step`](Self::step).
    accepted: Vec<(TermId, u32)>,
    seeds: Vec<Item>,
    /// Set when a row hit `Cfg::max_row_items` (and was made dead); see `take_overflow`.
    overflow: bool,
    /// The ending lexemes the last row built from them was built from, and that row (see
    /// [`row_from_accepted`](Self::row_from_accepted)); cleared where that row goes.
    last_built: Option<(Vec<(TermId, u32)>, u32)>,
}

impl ChartLen {
    /// The number of rows.
    pub fn rows(&self) -> u32 {
        self.rows
    }
}

/// A closed row lifted out of the chart, to be pasted back at another index (see
/// [`Chart::paste_row`]).
pub struct RowCopy {
    row: u32,
    items_start: u32,
    items: Vec<Item>,
    expects: Vec<TermId>,
    waiting: Vec<(u32, u32)>,
    accepting: bool,
}

impl Chart {
    /// A copy of row `r` (the last row), for [`paste_row`](Self::paste_row).
    pub fn copy_row(&self, r: u32) -> RowCopy {
        debug_assert_eq!(r as usize + 1, self.rows.len());
        let row = self.rows[r as usize];
        RowCopy {
            row: r,
            items_start: row.items_start,
            items: self.items[row.items_start as usize..].to_vec(),
            expects: self.expects[row.expects_start as usize..].to_vec(),
            waiting: self.waiting[row.waiting_start as usize..].to_vec(),
            accepting: row.accepting,
        }
    }

    /// Appends a copy of a row as a new row, renumbering its self-references. Exact when every
    /// item of the copy refers only to rows still below the new one or to the row itself —
    /// e.g. a row built from lexemes that all started in rows that are still there: building
    /// it again would give the same items in the same order.
    pub fn paste_row(&mut self, c: &RowCopy) -> u32 {
        self.last_built = None;
        let row = self.rows.len() as u32;
        let items_start = self.items.len() as u32;
        self.rows.push(Row {
            items_start,
            expects_start: self.expects.len() as u32,
            waiting_start: self.waiting.len() as u32,
            accepting: c.accepting,
        });
        self.costs.iter_mut().for_each(|c| c.push(None));
        self.items
            .extend(c.items.iter().map(|&it| Item { origin: if it.origin == c.row { row } else { it.origin }, ..it }));
        self.expects.extend_from_slice(&c.expects);
        self.waiting.extend(c.waiting.iter().map(|&(k, i)| (k, i - c.items_start + items_start)));
        row
    }

    /// Has a row hit the item limit since the last [`take_overflow`](Self::take_overflow)?
    pub fn overflowed(&self) -> bool {
        self.overflow
    }

    /// A chart holding the initial row.
    pub fn new(cfg: &Cfg) -> Chart {
        let mut c = Chart {
            items: Vec::new(),
            expects: Vec::new(),
            waiting: Vec::new(),
            rows: Vec::new(),
            costs: [Vec::new(), Vec::new()],
            costs_upto: [0; 2],
            seen: HashSet::default(),
            accepted: Vec::new(),
            seeds: Vec::new(),
            overflow: false,
            last_built: None,
        };
        c.seeds.push(Item { prod: ProdId::TOP, dot: 0, origin: 0 });
        c.close_row(cfg);
        c
    }

    pub fn len(&self) -> ChartLen {
        ChartLen {
            rows: self.rows.len() as u32,
            items: self.items.len() as u32,
            expects: self.expects.len() as u32,
            waiting: self.waiting.len() as u32,
        }
    }

    pub fn truncate(&mut self, to: ChartLen) {
        if self.last_built.as_ref().is_some_and(|&(_, r)| r >= to.rows) {
            self.last_built = None;
        }
        self.rows.truncate(to.rows as usize);
        self.costs.iter_mut().for_each(|c| c.truncate(to.rows as usize));
        self.costs_upto.iter_mut().for_each(|u| *u = (*u).min(to.rows));
        self.items.truncate(to.items as usize);
        self.expects.truncate(to.expects as usize);
        self.waiting.truncate(to.waiting as usize);
    }

    /// The indices (into `items`) of row `r`'s items whose next symbol is `sym`. Row `r` must
    /// be closed.
    fn waiting_on(&self, r: u32, sym: Sym) -> std::ops::Range<usize> {
        let start = self.rows[r as usize].waiting_start as usize;
        let end = self.rows.get(r as usize + 1).map_or(self.waiting.len(), |n| n.waiting_start as usize);
        let w = &self.waiting[start..end];
        let key = sym_key(sym);
        let lo = w.partition_point(|e| e.0 < key);
        let hi = lo + w[lo..].partition_point(|e| e.0 == key);
        start + lo..start + hi
    }

    fn row_items(&self, r: u32) -> &[Item] {
        let start = self.rows[r as usize].items_start as usize;
        let end = self.rows.get(r as usize + 1).map_or(self.items.len(), |n| n.items_start as usize);
        &self.items[start..end]
    }

    /// The items of the rows from `from` on, as words, each row after a `u32::MAX` (positions
    /// reached from one committed position by different tokens are the same parse state
    /// exactly when these and their scans agree; see `CfgRun::state_key`).
    pub fn items_since(&self, from: u32, out: &mut Vec<u32>) {
        for r in from..self.rows.len() as u32 {
            out.push(u32::MAX);
            self.row_words(r, out);
        }
    }

    /// The items of row `r` as words (as [`items_since`](Self::items_since) writes each row).
    pub fn row_words(&self, r: u32, out: &mut Vec<u32>) {
        out.extend(self.row_items(r).iter().flat_map(|it| [it.prod.0, it.dot, it.origin]));
    }

    /// The parse state at `scans` and `boundary` as words that do not depend on the path that
    /// built it: a row from `from` on that the state reaches (through scan, boundary and item
    /// origins) is written as one of the [`SAME_ROW_LOOKBACK`] rows before `from` where it holds
    /// the same items ([`same_row`](Self::same_row): lexemes that began in one row and ended at
    /// different bytes build such rows), or else numbered in the order met (`NEW_ROW | k`) and
    /// written out; earlier rows keep their index. Whatever reads on from a state reads only
    /// these rows (completion follows origins), so two states reached by different paths from
    /// the position where the chart had `from` rows, with equal words, read on alike (see
    /// `CfgRun::join_key`).
    pub fn frontier_key(&self, from: u32, scans: &[Scan], boundary: Option<u32>, out: &mut Vec<u32>) {
        const NEW_ROW: u32 = 1 << 31;
        // Rows from `from` on: their word, or `u32::MAX` (not met yet).
        let mut words = vec![u32::MAX; self.rows.len().saturating_sub(from as usize)];
        let mut met: Vec<u32> = Vec::new();
        let mut word = |r: u32, met: &mut Vec<u32>| {
            if r < from {
                return r;
            }
            let w = &mut words[(r - from) as usize];
            if *w == u32::MAX {
                let old = (from.saturating_sub(SAME_ROW_LOOKBACK)..from).rev().find(|&o| self.same_row(r, o));
                *w = old.unwrap_or_else(|| {
                    met.push(r);
                    NEW_ROW | (met.len() as u32 - 1)
                });
            }
            *w
        };
        out.push(boundary.map_or(u32::MAX - 1, |r| word(r, &mut met)));
        for sc in scans {
            out.extend([sc.term.0, sc.state.0, word(sc.origin, &mut met)]);
        }
        // Rows only refer to earlier rows (or themselves), so this ends.
        let mut k = 0;
        while k < met.len() {
            let r = met[k];
            out.extend([u32::MAX, u32::from(self.accepting(r))]);
            for it in self.row_items(r) {
                out.extend([it.prod.0, it.dot, word(it.origin, &mut met)]);
            }
            k += 1;
        }
    }

    /// The terminals row `r` expects next.
    pub fn expects(&self, r: u32) -> &[TermId] {
        let start = self.rows[r as usize].expects_start as usize;
        let end = self.rows.get(r as usize + 1).map_or(self.expects.len(), |n| n.expects_start as usize);
        &self.expects[start..end]
    }

    pub fn accepting(&self, r: u32) -> bool {
        self.rows[r as usize].accepting
    }

    /// Do rows `a` and `b` hold the same items in the same order (an item predicted in its own
    /// row counting as the same in both), so that whatever reads on from one reads on from the
    /// other alike? Scans that differ only in such origin rows give the same masks (free text
    /// that may end after any byte starts its successors' scans at a new, same-looking row
    /// every step).
    pub fn same_row(&self, a: u32, b: u32) -> bool {
        if a == b {
            return true;
        }
        let (x, y) = (self.row_items(a), self.row_items(b));
        self.accepting(a) == self.accepting(b)
            && x.len() == y.len()
            && x.iter().zip(y).all(|(i, j)| {
                i.prod == j.prod && i.dot == j.dot && (i.origin == j.origin || (i.origin == a && j.origin == b))
            })
    }

    /// Fresh scans for every terminal row `r` expects, appended to `out`.
    pub fn start_scans(&self, cfg: &Cfg, r: u32, out: &mut Vec<Scan>) {
        for &t in self.expects(r) {
            let dfa = &cfg.term(t).dfa;
            let start = dfa.start();
            if start != StateId::DEAD && dfa.can_continue(start) {
                out.push(Scan { term: t, state: start, origin: r });
            }
        }
    }

    /// The row still in the chart that the lexemes ending at the last [`step`](Self::step)
    /// built before (see [`row_from_accepted`](Self::row_from_accepted)), if any.
    pub fn built_before(&self) -> Option<u32> {
        match &self.last_built {
            Some((a, r)) if *a == self.accepted && (*r as usize) < self.rows.len() => Some(*r),
            _ => None,
        }
    }

    /// [`start_scans`](Self::start_scans), but for scans already among `out[from..]` (a row
    /// reused by [`row_from_accepted`](Self::row_from_accepted): a scan it started earlier may
    /// be back in its start state).
    pub fn start_new_scans(&self, cfg: &Cfg, r: u32, out: &mut Vec<Scan>, from: usize) {
        let end = out.len();
        self.start_scans(cfg, r, out);
        if out[from..end].iter().any(|s| s.origin == r) {
            let mut k = end;
            while k < out.len() {
                if out[from..end].contains(&out[k]) {
                    out.swap_remove(k);
                } else {
                    k += 1;
                }
            }
        }
    }

    /// Builds a row from `self.seeds` (consumed), closed under prediction and completion.
    fn close_row(&mut self, cfg: &Cfg) -> u32 {
        let row = self.rows.len() as u32;
        let items_start = self.items.len();
        self.rows.push(Row {
            items_start: items_start as u32,
            expects_start: self.expects.len() as u32,
            waiting_start: self.waiting.len() as u32,
            accepting: false,
        });
        self.costs.iter_mut().for_each(|c| c.push(None));
        self.seen.clear();
        let mut seeds = std::mem::take(&mut self.seeds);
        for s in seeds.drain(..) {
            self.add(s);
        }
        self.seeds = seeds;
        let mut k = items_start;
        while k < self.items.len() {
            if self.items.len() - items_start > cfg.max_row_items {
                // Fail closed: the row is dead (no expectations, not accepting).
                self.overflow = true;
                self.expects.truncate(self.rows[row as usize].expects_start as usize);
                return row;
            }
            let it = self.items[k];
            k += 1;
            let p = cfg.prod(it.prod);
            let Some(&next) = p.rhs.get(it.dot as usize) else {
                // Complete. Same-row completions are nullable derivations, already advanced
                // at prediction time (Aycock–Horspool).
                if it.origin != row {
                    for k in self.waiting_on(it.origin, Sym::N(p.lhs)) {
                        let w = self.items[self.waiting[k].1 as usize];
                        self.add(Item { prod: w.prod, dot: w.dot + 1, origin: w.origin });
                    }
                }
                continue;
            };
            let advanced = Item { prod: it.prod, dot: it.dot + 1, origin: it.origin };
            match next {
                Sym::N(n) => {
                    for &q in &cfg.nt(n).prods {
                        self.add(Item { prod: q, dot: 0, origin: row });
                    }
                    if cfg.nt(n).nullable {
                        self.add(advanced);
                    }
                }
                Sym::T(t) => {
                    let es = self.rows[row as usize].expects_start as usize;
                    if !self.expects[es..].contains(&t) {
                        self.expects.push(t);
                    }
                    if cfg.term(t).nullable {
                        self.add(advanced);
                    }
                }
            }
        }
        let ws = self.waiting.len();
        for (k, it) in self.items.iter().enumerate().skip(items_start) {
            if let Some(&x) = cfg.prod(it.prod).rhs.get(it.dot as usize) {
                self.waiting.push((sym_key(x), k as u32));
            }
        }
        self.waiting[ws..].sort_unstable();
        let accepting = self.row_items(row).contains(&Item { prod: ProdId::TOP, dot: 1, origin: 0 });
        self.rows[row as usize].accepting = accepting;
        row
    }

    #[inline]
    fn add(&mut self, it: Item) {
        if self.seen.insert(it) {
            self.items.push(it);
        }
    }

    /// Did a row hit the item limit since the last call?
    pub fn take_overflow(&mut self) -> bool {
        std::mem::take(&mut self.overflow)
    }

    /// Advances the scans `buf[range]` by `byte`, appending the survivors to `buf`; if a lexeme
    /// may end here, builds the new row and appends its fresh scans too. Returns that row.
    pub fn advance(&mut self, cfg: &Cfg, buf: &mut Vec<Scan>, range: std::ops::Range<usize>, byte: u8) -> Option<u32> {
        let survivors = range.end;
        if !self.step(cfg, buf, range, byte) {
            return None;
        }
        let row = self.row_from_accepted(cfg);
        self.start_new_scans(cfg, row, buf, survivors);
        Some(row)
    }

    /// The lexer half of [`advance`](Self::advance): advances the scans `buf[range]` by `byte`,
    /// appending the survivors to `buf`, and records which lexemes may end here (see
    /// [`accepted`](Self::accepted)). Returns whether any may.
    pub fn step(&mut self, cfg: &Cfg, buf: &mut Vec<Scan>, range: std::ops::Range<usize>, byte: u8) -> bool {
        self.accepted.clear();
        for i in range {
            let sc = buf[i];
            let dfa = &cfg.term(sc.term).dfa;
            let next = dfa.next(sc.state, byte);
            if next != StateId::DEAD {
                // A scan that cannot read another byte has no future but the lexeme's end.
                if dfa.can_continue(next) {
                    buf.push(Scan { state: next, ..sc });
                }
                if dfa.is_accepting(next) {
                    self.accepted.push((sc.term, sc.origin));
                }
            }
        }
        !self.accepted.is_empty()
    }

    /// The (terminal, origin row) pairs whose lexeme may end at the last [`step`](Self::step).
    /// The row [`row_from_accepted`](Self::row_from_accepted) builds depends only on these and
    /// the rows before it.
    pub fn accepted(&self) -> &[(TermId, u32)] {
        &self.accepted
    }

    /// Sets the lexemes that end here as if the last [`step`](Self::step) had found them.
    pub fn set_accepted(&mut self, pairs: impl IntoIterator<Item = (TermId, u32)>) {
        self.accepted.clear();
        self.accepted.extend(pairs);
    }

    /// The parser half of [`advance`](Self::advance): builds the row that the lexemes ending at
    /// the last [`step`](Self::step) lead to (its fresh scans are not started).
    ///
    /// Where the same lexemes (terminal and origin alike) ended at an earlier byte and built a
    /// row that is still there, that row is the answer: built again it would hold the same
    /// items (its seeds come from the origin rows, its closure from rows before it), so the
    /// parse goes on from it alike. Free text before a marker (`…</think>`, text then an
    /// optional tool call) may end at every byte: one row for all of them, not one per byte,
    /// so the positions after tokens of different lengths are the same parse state.
    pub fn row_from_accepted(&mut self, cfg: &Cfg) -> u32 {
        debug_assert!(self.seeds.is_empty());
        if let Some(r) = self.built_before() {
            return r;
        }
        let accepted = std::mem::take(&mut self.accepted);
        for &(t, o) in &accepted {
            for k in self.waiting_on(o, Sym::T(t)) {
                let w = self.items[self.waiting[k].1 as usize];
                self.seeds.push(Item { prod: w.prod, dot: w.dot + 1, origin: w.origin });
            }
        }
        let row = self.close_row(cfg);
        // (A row the item limit made dead is not reused: its overflow must be seen each time.)
        self.last_built = match self.last_built.take() {
            _ if self.overflow => None,
            Some((mut a, _)) => {
                a.clone_from(&accepted);
                Some((a, row))
            }
            None => Some((accepted.clone(), row)),
        };
        self.accepted = accepted;
        row
    }

    /// Fewest usable bytes that finish the parse from a position with these scans and
    /// boundary row ([`UNREACHABLE`] if none): an upper bound on the tokens still needed.
    pub fn finish_cost(&mut self, cfg: &Cfg, scans: &[Scan], boundary: Option<u32>) -> u32 {
        let mut best = UNREACHABLE;
        if boundary.is_some_and(|r| self.accepting(r)) {
            return 0;
        }
        for sc in scans {
            let d = cfg.term(sc.term).dist.at(sc.state);
            let w = self.wait_cost(cfg, None, sc.origin, Sym::T(sc.term));
            best = best.min(d.saturating_add(w));
        }
        best
    }

    /// Can the parse be finished from a position with these scans and boundary row within
    /// `budget` tokens of `env`'s vocabulary? The usable-byte cost first ([`finish_cost`]
    /// (Self::finish_cost)), which settles almost every position; where it does not fit, the
    /// cost in tokens, lexeme by lexeme ([`Cfg::token_costs`], [`Cfg::token_rest_within`]).
    pub fn fits(&mut self, cfg: &Cfg, env: &VocabEnv, scans: &[Scan], boundary: Option<u32>, budget: u32) -> Within {
        let bytes = self.finish_cost(cfg, scans, boundary);
        if bytes <= budget {
            return Within::Bytes(bytes);
        }
        let costs = cfg.token_costs(env);
        // The lexeme's rest is asked about within what its wait leaves (as the lexer-only walk in
        // `cfg_run::within` does): `token_rest_within` answers exactly where its search settles it.
        for sc in scans {
            let w = self.wait_cost(cfg, Some(costs), sc.origin, Sym::T(sc.term));
            if w <= budget && cfg.token_rest_within(env, sc.term, sc.state, budget - w) {
                return Within::Tokens;
            }
        }
        Within::Over
    }

    /// Fewest usable bytes to finish after the lexeme of `sc` ends, not counting the lexeme's own
    /// rest (so `finish_cost` of a position is the least `dist + scan_wait_cost` over its scans).
    pub fn scan_wait_cost(&mut self, cfg: &Cfg, sc: &Scan) -> u32 {
        self.wait_cost(cfg, None, sc.origin, Sym::T(sc.term))
    }

    /// [`scan_wait_cost`](Self::scan_wait_cost) in tokens ([`Cfg::token_costs`]).
    pub fn scan_wait_tokens(&mut self, cfg: &Cfg, env: &VocabEnv, sc: &Scan) -> u32 {
        let costs = cfg.token_costs(env);
        self.wait_cost(cfg, Some(costs), sc.origin, Sym::T(sc.term))
    }

    /// Least cost to finish after `sym` completes, for items of row `r` waiting on it: in
    /// usable bytes (`tokens` is `None`) or in tokens (the grammar's token costs).
    fn wait_cost(&mut self, cfg: &Cfg, tokens: Option<&Costs>, r: u32, sym: Sym) -> u32 {
        let k = usize::from(tokens.is_some());
        for o in self.costs_upto[k]..=r {
            if self.costs[k][o as usize].is_none() {
                let table = self.row_costs(cfg, tokens, o);
                self.costs[k][o as usize] = Some(table);
            }
        }
        self.costs_upto[k] = self.costs_upto[k].max(r + 1);
        lookup(self.costs[k][r as usize].as_ref().unwrap(), sym)
    }

    /// The cost table of row `r` in one unit (earlier rows' tables must exist): a small
    /// fixpoint, since items predicted in `r` wait on nonterminals that other items of `r` wait
    /// on too.
    fn row_costs(&self, cfg: &Cfg, tokens: Option<&Costs>, r: u32) -> Vec<(Sym, u32)> {
        let k = usize::from(tokens.is_some());
        let mut table: Vec<(Sym, u32)> = Vec::new();
        loop {
            let mut changed = false;
            for it in self.row_items(r) {
                let p = cfg.prod(it.prod);
                let Some(&x) = p.rhs.get(it.dot as usize) else { continue };
                let after_lhs = if p.lhs == NtId::TOP {
                    0
                } else if it.origin == r {
                    lookup(&table, Sym::N(p.lhs))
                } else {
                    lookup(self.costs[k][it.origin as usize].as_ref().expect("earlier rows first"), Sym::N(p.lhs))
                };
                let rest = tokens.map_or(&p.rest, |c| &c.rest[it.prod.index()]);
                let cost = rest[it.dot as usize + 1].saturating_add(after_lhs);
                match table.iter_mut().find(|(s, _)| *s == x) {
                    Some(e) if e.1 <= cost => {}
                    Some(e) => {
                        e.1 = cost;
                        changed = true;
                    }
                    None => {
                        table.push((x, cost));
                        changed = true;
                    }
                }
            }
            if !changed {
                return table;
            }
        }
    }
}

/// A row's finish costs: (symbol, least cost to finish after that symbol completes), for the
/// symbols the row's items wait on.
type CostTable = Vec<(Sym, u32)>;

/// Whether a position fits a token budget, and how that was settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Within {
    /// The usable-byte cost fits: this many.
    Bytes(u32),
    /// Only the cost in tokens fits.
    Tokens,
    /// Neither fits.
    Over,
}

/// The cost after `s` in a row's cost table ([`UNREACHABLE`]: no item there waits on it).
fn lookup(table: &[(Sym, u32)], s: Sym) -> u32 {
    table.iter().find(|(x, _)| *x == s).map_or(UNREACHABLE, |e| e.1)
}

/// The sort key of a symbol in `Chart::waiting`, packed in one `u32` so a row's slice sorts and
/// searches as plain words: terminals even, nonterminals odd (ids stay below 2^31: the limits
/// on terminals and productions are far below it).
#[inline]
fn sym_key(s: Sym) -> u32 {
    match s {
        Sym::T(t) => t.0 << 1,
        Sym::N(n) => (n.0 << 1) | 1,
    }
}
