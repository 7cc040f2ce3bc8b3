//! `Cfg`: a grammar lowered for the Earley parser — productions over nonterminals and
//! terminals, where each terminal is a regular language (a lexeme) with its own [`Dfa`].
//!
//! Lowering from the IR:
//! - A rule that is not recursive and references only such rules is *regular*: it is inlined
//!   wherever it is used, as part of a terminal.
//! - In a sequence, every maximal run of regular parts becomes one terminal (`"{" ws` is one
//!   lexeme). This is exact: the lexer considers every split, not just the longest match.
//! - Alternations with a non-regular branch become alternative productions; repetitions of a
//!   non-regular body become left-recursive helper nonterminals (`H → ε | H x`), and counted
//!   ones are unrolled (bounded by [`CfgLimits::max_unrolled`]).
//! - A counted repetition of a regular body too large to inline (`[a-zа-я]{0,2048}`) is one
//!   terminal of its own: a counter DFA ([`Lexeme::Counted`]) when the body is prefix-free, its
//!   states linear in the count; else it is unrolled as above, or past the unroll limit
//!   determinized as one regex under the DFA limits.
//! - A [`Expr::Lexeme`] (an intersection/complement of regexes) is always a terminal of its own.
//! - A run is named before it is built (`runs`): by its parts' structure within one lowering,
//!   and by a regex text printed from the grammar across lowerings (the key of its terminal
//!   and of the process-wide DFA cache); its regex is built only when its DFA is.
//! - Non-productive nonterminals (those that derive no finite string, e.g. `a ::= a "x"`) and
//!   terminals with an empty language are removed with every production that uses them, so
//!   every item the parser builds can still be completed: a live prefix is always extendable.
//!
//! Ids: [`TermId`], [`NtId`] and [`ProdId`] index [`Cfg::terms`], [`Cfg::nts`] and
//! [`Cfg::prods`]; a [`Sym`] is one of the first two.
//!
//! Invariants: nonterminal 0 is the augmented start ⊤ ([`NtId::TOP`]) and production 0 is
//! `⊤ → start` ([`ProdId::TOP`]); `minlen` counts *usable* bytes (those that are single
//! tokens), so it is an upper bound on the tokens needed ([`UNREACHABLE`]: none suffice).

use super::distinct::{
    finishes_a_key_or_two, in_string, opens_two_items, value_string_may_repeat, InString, Place, Repeatable,
};
use super::VocabEnv;
use crate::error::Result;
use crate::grammar::{Expr, Grammar, Mark};
use crate::regular::Lexeme;
use crate::regular::{Dfa, DfaLimits, StateId, UNREACHABLE};
use crate::vocab::{SparseWords, TokenId, TokenKind, TokenSet};

mod lower;
mod runs;
pub use lower::{RegularRules, MAX_LEXEME_WEIGHT};

/// Declares an id: an index into one table of a [`Cfg`], `#[repr(transparent)]` over `u32` (a
/// table of ids is a table of `u32`s, and structures that pack ids keep their layout), with
/// [`index`](TermId::index) to index its table.
macro_rules! cfg_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(transparent)]
        pub struct $name(pub u32);

        impl $name {
            /// The id's entry in its table.
            #[inline(always)]
            pub const fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}

cfg_id!(
    /// A terminal (a lexeme with its DFA): an index into [`Cfg::terms`].
    TermId
);
cfg_id!(
    /// A nonterminal: an index into [`Cfg::nts`].
    NtId
);
cfg_id!(
    /// A production: an index into [`Cfg::prods`].
    ProdId
);

impl NtId {
    /// The augmented start ⊤, nonterminal 0.
    pub const TOP: NtId = NtId(0);
}

impl ProdId {
    /// `⊤ → start`, production 0.
    pub const TOP: ProdId = ProdId(0);
}

/// A grammar symbol: a terminal or a nonterminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Sym {
    T(TermId),
    N(NtId),
}

pub struct Term {
    /// Shared with other compiles of the same lexeme (see [`Dfa::shared`]).
    pub dfa: std::sync::Arc<Dfa>,
    /// Per DFA state (by [`StateId::index`]): fewest usable bytes to acceptance
    /// ([`UNREACHABLE`]: none suffice).
    pub dist: crate::regular::Distances,
    pub nullable: bool,
    pub name: String,
    /// Set for the terminal of an [`Expr::Mark`](crate::grammar::Expr::Mark): the matcher
    /// learns from its lexeme ends where distinct items are (see
    /// [`distinct`](super::distinct)). A marked terminal is never shared with an unmarked one.
    pub mark: Option<Mark>,
    /// Set for the terminal of a token the grammar names (a token terminal, see
    /// [`tokens`](super::tokens)): its lexeme is spelled by that one token, whatever its
    /// bytes cost.
    pub one_token: bool,
}

pub struct Nt {
    pub name: String,
    pub prods: Vec<ProdId>,
    pub nullable: bool,
    /// Fewest usable bytes this nonterminal derives ([`UNREACHABLE`]: no finite string).
    pub minlen: u32,
}

pub struct Prod {
    pub lhs: NtId,
    pub rhs: Vec<Sym>,
    /// `rest[d]` = fewest usable bytes that `rhs[d..]` derives.
    pub rest: Vec<u32>,
}

/// Limits for lowering; each surfaces as [`Error::Limit`].
#[derive(Debug, Clone, Copy)]
pub struct CfgLimits {
    pub dfa: DfaLimits,
    /// Most terminals (distinct lexemes).
    pub max_terminals: usize,
    /// Most productions.
    pub max_productions: usize,
    /// Most copies a counted repetition of a non-regular body unrolls to.
    pub max_unrolled: u32,
    /// Most Earley items in one parser row (one lexeme boundary). A row past it is treated as
    /// dead (so masks only get stricter, never wrong) and `commit` reports the limit.
    pub max_row_items: usize,
}

impl Default for CfgLimits {
    fn default() -> Self {
        CfgLimits {
            dfa: DfaLimits::default(),
            max_terminals: 10_000,
            max_productions: 100_000,
            max_unrolled: 2_000,
            max_row_items: 200_000,
        }
    }
}

/// Least-cost tables of a grammar in one unit (single-byte tokens, or tokens of the
/// vocabulary): the cost of a nonterminal's cheapest derivation, and of each production's rest.
pub struct Costs {
    /// Per nonterminal ([`UNREACHABLE`]: no finite string).
    pub nt: Vec<u32>,
    /// Per production: `rest[d]` = the least cost of `rhs[d..]`.
    pub rest: Vec<Vec<u32>>,
}

pub struct Cfg {
    pub terms: Vec<Term>,
    pub nts: Vec<Nt>,
    pub prods: Vec<Prod>,
    pub max_row_items: usize,
    /// The literals of the grammar's [`Mark::DistinctAfter`] marks, in order of first use;
    /// `has_marks` is set when any terminal is marked (then the matcher reads the output for
    /// distinct items, see [`distinct`](super::distinct)).
    pub after_literals: Vec<std::sync::Arc<str>>,
    /// Per literal of `after_literals`: the text that ends its items for a
    /// [`Mark::DistinctText`] (`None`: its items are JSON values).
    pub after_closes: Vec<Option<crate::grammar::TextEnd>>,
    pub has_marks: bool,
    /// Some object's keys are looked ahead from ([`Mark::DistinctKeys`]'s `look_ahead`).
    pub keys_ahead: bool,
    /// [`Costs`] in tokens of the compile's vocabulary, built the first time a budget needs them
    /// (see [`Cfg::token_costs`]).
    token_costs: std::sync::OnceLock<Costs>,
    /// The tokens the distinct-items filter looks at (see [`Cfg::distinct_tokens`]).
    distinct_tokens: std::sync::OnceLock<std::sync::Arc<DistinctTokens>>,
}

/// Tokens of the vocabulary that can matter to the distinct-items filter, by where the reader
/// is and what its lists hold (see [`distinct`](super::distinct)): the filter reads only a
/// mask's tokens in [`candidates`](Self::candidates), found a non-empty word at a time.
pub struct DistinctTokens {
    /// By [`Reading`], then by [`Repeatable`]: see `build`.
    candidates: [[SparseWords; 3]; 7],
}

/// Where the filter reads from, for [`DistinctTokens::candidates`]: a [`Place`], or the content
/// of a string (not just after a backslash), an item or not, where the reader judges only what
/// [`in_string`] cannot (after the close of a string that is not an item, where no array's
/// list has items: [`value_string_may_repeat`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reading {
    At(Place),
    StringContent { item: bool },
}

impl DistinctTokens {
    /// The sets over `vocab`'s text tokens, for a grammar whose marked literals end with the
    /// bytes `last` and whose text items' closes end with the bytes `close_last`.
    pub(crate) fn build(vocab: &crate::vocab::Vocab, last: &[u8], close_last: &[u8]) -> DistinctTokens {
        let set = || TokenSet::new(vocab.len());
        let (mut openers, mut quotes, mut between, mut scalar) = (set(), set(), set(), set());
        let (mut closers, mut commas, mut quotes_or_commas, mut more_than_string) = (set(), set(), set(), set());
        let (mut after_value, mut key_or_two, mut more_than_few) = (set(), set(), set());
        let space = |x: &u8| matches!(x, b' ' | b'\t' | b'\n' | b'\r');
        let word = |b: &[u8]| [&b"true"[..], b"false", b"null"].iter().any(|w| b.windows(w.len()).any(|x| x == *w));
        for id in (0..vocab.len() as u32).map(TokenId) {
            if vocab.kind(id) != TokenKind::Text {
                continue;
            }
            let b = vocab.bytes(id);
            // Idle: a token can finish a repeat only if it may start a list and finish two
            // items of it (`opens_two_items`), or hold the last byte of a marked literal with
            // anything after it.
            let array = opens_two_items(b);
            let literal = b.iter().position(|x| last.contains(x)).is_some_and(|i| i + 1 < b.len());
            if array || literal {
                openers.insert(id);
            }
            // Inside a string: only a token with a `"` can finish anything; in its content, only
            // one that may finish more than the string (the rest is judged by `in_string`),
            // with few items (no array's) and with any.
            let n_quotes = b.iter().filter(|&&x| x == b'"').count();
            if n_quotes > 0 {
                quotes.insert(id);
            }
            if in_string(b, false) == InString::More {
                more_than_string.insert(id);
            }
            if in_string(b, true) == InString::More {
                more_than_few.insert(id);
            }
            if value_string_may_repeat(b) {
                after_value.insert(id);
            }
            if finishes_a_key_or_two(b) {
                key_or_two.insert(id);
            }
            // Only a token with a `,` can finish two items of one list; one with a `"` or a `,`
            // an object's key.
            if b.contains(&b',') {
                commas.insert(id);
            }
            if n_quotes > 0 || b.contains(&b',') {
                quotes_or_commas.insert(id);
            }
            // Between values: a token that can hold a whole value or end one (two quotes, a
            // closing bracket, a comma or colon, digits then whitespace, a whole
            // `true`/`false`/`null`), or fix a number's value (digits then an exponent: `0e`
            // is 0 whatever follows).
            let closes = b.iter().any(|x| matches!(x, b']' | b'}' | b',' | b':'));
            let digit_then_space = b.iter().position(u8::is_ascii_digit).is_some_and(|i| b[i..].iter().any(space));
            let digit_then_exponent =
                b.iter().position(u8::is_ascii_digit).is_some_and(|i| b[i..].iter().any(|x| matches!(x, b'e' | b'E')));
            if n_quotes > 1 || closes || digit_then_space || digit_then_exponent || word(b) {
                between.insert(id);
            }
            // Inside a number or literal: a token that can end it (whitespace, `,`, a bracket,
            // the last letter of a literal) or fix its value (an exponent after zeros).
            if closes || b.iter().any(|x| space(x) || matches!(x, b'e' | b'E' | b'l')) {
                scalar.insert(id);
            }
            // Inside a text item: only a token with the last byte of an item's close can end one.
            if b.iter().any(|x| close_last.contains(x)) {
                closers.insert(id);
            }
        }
        // By `Repeatable`: any token of the place's set, or only those with a `,` (`Pairs`) or
        // a `"` or `,` (`Keys`). Where no array's list has items (all but `Any`), in a number,
        // between values and after a string's close, a token must also finish a key or two
        // items (`finishes_a_key_or_two`).
        let by_held = |s: &SparseWords| [s.clone(), s.and(&commas), s.and(&quotes_or_commas)];
        let few = |any: &TokenSet, few: &SparseWords| {
            let [any, ..] = by_held(&any.sparse());
            let [_, pairs, keys] = by_held(few);
            [any, pairs, keys]
        };
        let (scalar_few, between_few) = (scalar.sparse().and(&key_or_two), between.sparse().and(&key_or_two));
        DistinctTokens {
            candidates: [
                by_held(&openers.sparse()),
                by_held(&quotes.sparse()),
                few(&scalar, &scalar_few),
                few(&between, &between_few),
                by_held(&closers.sparse()),
                few(&more_than_string, &more_than_few.sparse()),
                few(&more_than_string, &after_value.sparse()),
            ],
        }
    }

    /// The tokens that can finish a repeat, reading from `at`, where the lists hold what
    /// `held` says (see [`Distinct::repeatable`](super::distinct::Distinct::repeatable)).
    pub(super) fn candidates(&self, at: Reading, held: Repeatable) -> &SparseWords {
        let place = match at {
            Reading::At(Place::Idle) => 0,
            Reading::At(Place::String) => 1,
            Reading::At(Place::Scalar) => 2,
            Reading::At(Place::Between) => 3,
            Reading::At(Place::Text) => 4,
            Reading::StringContent { item: true } => 5,
            Reading::StringContent { item: false } => 6,
        };
        let held = match held {
            Repeatable::Any => 0,
            Repeatable::Pairs => 1,
            Repeatable::Keys => 2,
        };
        &self.candidates[place][held]
    }
}

/// Longest chain of rule references inlined into one lexeme; deeper chains are lowered as
/// nonterminals instead (which also bounds the recursion depth of inlining).
pub const MAX_INLINE_DEPTH: usize = 200;

impl Cfg {
    /// Is the grammar regular: does its start rule inline into one regex, or is it one
    /// [`Lexeme`]? Then it returns that lexeme (for a single [`Dfa`]).
    pub fn regular_lexeme(g: &Grammar, rules: &RegularRules) -> Result<Option<Lexeme>> {
        if rules.is_regular(g.start) {
            return Ok(Some(Lexeme::Regex(lower::inline(g, &Expr::Rule(g.start))?)));
        }
        let mut body = &g.rule(g.start).body;
        for _ in 0..MAX_INLINE_DEPTH {
            match body {
                Expr::Rule(r) => body = &g.rule(*r).body,
                Expr::Lexeme(l) => return Ok(Some((**l).clone())),
                _ => break,
            }
        }
        Ok(None)
    }

    /// The grammar lowered for the Earley parser; `None` when its start rule derives no finite
    /// string (the language is empty: the caller says so in the front end's terms).
    pub fn lower(g: &Grammar, rules: RegularRules, usable: &[bool; 256], limits: CfgLimits) -> Result<Option<Cfg>> {
        let l = lower::Lowering::run(g, rules, usable, limits)?;
        let mut cfg = Cfg {
            terms: l.terms,
            nts: l.nts,
            prods: l.prods,
            max_row_items: limits.max_row_items,
            after_literals: Vec::new(),
            after_closes: Vec::new(),
            has_marks: false,
            keys_ahead: false,
            token_costs: std::sync::OnceLock::new(),
            distinct_tokens: std::sync::OnceLock::new(),
        };
        if !cfg.clean() {
            return Ok(None);
        }
        cfg.analyse();
        for t in &cfg.terms {
            let (open, close) = match &t.mark {
                Some(Mark::DistinctAfter(s)) => (s, None),
                Some(Mark::DistinctText { open, end }) => (open, Some(end.clone())),
                _ => continue,
            };
            if !cfg.after_literals.contains(open) {
                cfg.after_literals.push(open.clone());
                cfg.after_closes.push(close);
            }
        }
        cfg.has_marks = cfg.terms.iter().any(|t| t.mark.is_some());
        cfg.keys_ahead = cfg.terms.iter().any(|t| t.mark == Some(Mark::DistinctKeys { look_ahead: true }));
        Ok(Some(cfg))
    }

    /// Removes non-productive symbols and the productions that use them; `false` if the start
    /// symbol itself is non-productive (nothing is left).
    fn clean(&mut self) -> bool {
        let mut productive = vec![false; self.nts.len()];
        let term_ok: Vec<bool> = self.terms.iter().map(|t| t.dfa.start() != StateId::DEAD).collect();
        let sym_ok = |s: &Sym, productive: &[bool]| match *s {
            Sym::T(t) => term_ok[t.index()],
            Sym::N(n) => productive[n.index()],
        };
        // Worklist: each production waits for its not-yet-productive nonterminals (counted
        // with multiplicity); a nonterminal becomes productive with its first ready production.
        // Linear in the grammar's size (a rule chain would take one sweep per link otherwise).
        // A production that uses a terminal with an empty language waits forever.
        const NEVER_READY: usize = usize::MAX;
        let mut waiting: Vec<usize> = vec![0; self.prods.len()];
        let mut users: Vec<Vec<usize>> = vec![Vec::new(); self.nts.len()];
        let mut ready: Vec<usize> = Vec::new();
        for (i, p) in self.prods.iter().enumerate() {
            if p.rhs.iter().any(|s| matches!(*s, Sym::T(t) if !term_ok[t.index()])) {
                waiting[i] = NEVER_READY;
                continue;
            }
            for s in &p.rhs {
                if let Sym::N(n) = *s {
                    waiting[i] += 1;
                    users[n.index()].push(i);
                }
            }
            if waiting[i] == 0 {
                ready.push(i);
            }
        }
        while let Some(i) = ready.pop() {
            let lhs = self.prods[i].lhs.index();
            if productive[lhs] {
                continue;
            }
            productive[lhs] = true;
            for &u in &users[lhs] {
                if waiting[u] != NEVER_READY {
                    waiting[u] -= 1;
                    if waiting[u] == 0 {
                        ready.push(u);
                    }
                }
            }
        }
        if !productive[NtId::TOP.index()] {
            return false;
        }
        let keep: Vec<bool> = self.prods.iter().map(|p| p.rhs.iter().all(|s| sym_ok(s, &productive))).collect();
        // Renumber kept productions; production 0 (⊤ → start) is productive, so it stays 0.
        // `None`: removed.
        let mut new_index: Vec<Option<ProdId>> = vec![None; self.prods.len()];
        let mut kept = Vec::new();
        for (i, p) in std::mem::take(&mut self.prods).into_iter().enumerate() {
            if keep[i] {
                new_index[i] = Some(ProdId(kept.len() as u32));
                kept.push(p);
            }
        }
        self.prods = kept;
        for nt in &mut self.nts {
            nt.prods = nt.prods.iter().filter_map(|&p| new_index[p.index()]).collect();
        }
        true
    }

    /// Nullable sets (a fixpoint), then the least costs in usable bytes (`minlen`, `rest`).
    fn analyse(&mut self) {
        // Sweeps alternate direction, so a chain of rules settles in two sweeps whichever way
        // its productions are numbered (one sweep per link otherwise).
        for sweep in 0.. {
            let mut changed = false;
            let order: Box<dyn Iterator<Item = &Prod>> =
                if sweep % 2 == 0 { Box::new(self.prods.iter()) } else { Box::new(self.prods.iter().rev()) };
            for p in order {
                let nullable = p.rhs.iter().all(|s| self.nullable(*s));
                let nt = &mut self.nts[p.lhs.index()];
                if nullable && !nt.nullable {
                    nt.nullable = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let bytes = self.costs_with(|t| {
            let term = self.term(t);
            term.dist.at(term.dfa.start())
        });
        for (nt, c) in self.nts.iter_mut().zip(bytes.nt) {
            nt.minlen = c;
        }
        for (p, rest) in self.prods.iter_mut().zip(bytes.rest) {
            p.rest = rest;
        }
    }

    /// The least-cost tables when a whole lexeme of terminal `t` costs `term_cost(t)`: a
    /// fixpoint over the productions, then each production's rests.
    pub fn costs_with(&self, term_cost: impl Fn(TermId) -> u32) -> Costs {
        let cost = |s: Sym, nt: &[u32]| match s {
            Sym::T(t) => term_cost(t),
            Sym::N(n) => nt[n.index()],
        };
        let mut nt = vec![UNREACHABLE; self.nts.len()];
        for sweep in 0.. {
            let mut changed = false;
            let order: Box<dyn Iterator<Item = &Prod>> =
                if sweep % 2 == 0 { Box::new(self.prods.iter()) } else { Box::new(self.prods.iter().rev()) };
            for p in order {
                let len = p.rhs.iter().fold(0u32, |acc, s| acc.saturating_add(cost(*s, &nt)));
                if len < nt[p.lhs.index()] {
                    nt[p.lhs.index()] = len;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let rest = self
            .prods
            .iter()
            .map(|p| {
                let mut rest = vec![0u32; p.rhs.len() + 1];
                for d in (0..p.rhs.len()).rev() {
                    rest[d] = rest[d + 1].saturating_add(cost(p.rhs[d], &nt));
                }
                rest
            })
            .collect();
        Costs { nt, rest }
    }

    /// [`Costs`] in tokens of `env`'s vocabulary, lexeme by lexeme: a terminal costs the fewest
    /// tokens that spell one of its lexemes (the exact count where the token search settles it,
    /// else the usable-byte count). An upper bound on the tokens a derivation needs (spelling
    /// each lexeme apart is one way to spell the whole). Built on the first call; `env` must be
    /// the one the grammar was compiled for.
    pub fn token_costs(&self, env: &VocabEnv) -> &Costs {
        self.token_costs.get_or_init(|| {
            self.costs_with(|t| {
                let term = self.term(t);
                if term.one_token {
                    return 1;
                }
                let start = term.dfa.start();
                let bytes = term.dist.at(start);
                env.token_reach(&term.dfa, start, bytes).or_bound(bytes)
            })
        })
    }

    /// [`DistinctTokens`] of the compile's vocabulary, taken on the first call from `env` (which
    /// must be the one the grammar was compiled for), where grammars with the same marked
    /// literals' and text items' last bytes share them.
    pub fn distinct_tokens(&self, env: &VocabEnv) -> &DistinctTokens {
        self.distinct_tokens.get_or_init(|| {
            let mut last: Vec<u8> = self.after_literals.iter().filter_map(|l| l.as_bytes().last().copied()).collect();
            let mut close_last: Vec<u8> =
                self.after_closes.iter().flatten().filter_map(|e| e.close.as_bytes().last().copied()).collect();
            for v in [&mut last, &mut close_last] {
                v.sort_unstable();
                v.dedup();
            }
            env.distinct_tokens(last, close_last)
        })
    }

    /// Do `budget` tokens or fewer surely finish lexeme `t` from `state`? The usable-byte count
    /// first, then a way in tokens ([`VocabEnv::token_within`]: the greedy walk, else the exact
    /// search within `budget`). True only where such a way exists; exact where the search
    /// settles it (a function of the lexeme, the state and the budget, whatever was asked before).
    pub fn token_rest_within(&self, env: &VocabEnv, t: TermId, state: StateId, budget: u32) -> bool {
        let term = self.term(t);
        if term.one_token && state == term.dfa.start() {
            return budget >= 1;
        }
        // No token finishes a lexeme that needs bytes yet.
        if term.dist.at(state) <= budget {
            return true;
        }
        budget > 0 && env.token_within(&term.dfa, state, budget)
    }

    #[inline]
    pub fn term(&self, t: TermId) -> &Term {
        &self.terms[t.index()]
    }

    #[inline]
    pub fn nt(&self, n: NtId) -> &Nt {
        &self.nts[n.index()]
    }

    #[inline]
    pub fn prod(&self, p: ProdId) -> &Prod {
        &self.prods[p.index()]
    }

    pub fn nullable(&self, s: Sym) -> bool {
        match s {
            Sym::T(t) => self.term(t).nullable,
            Sym::N(n) => self.nt(n).nullable,
        }
    }

    /// Fewest usable bytes `s` derives ([`UNREACHABLE`]: no finite string).
    pub fn minlen(&self, s: Sym) -> u32 {
        match s {
            Sym::T(t) => {
                let term = self.term(t);
                term.dist.at(term.dfa.start())
            }
            Sym::N(n) => self.nt(n).minlen,
        }
    }
}
