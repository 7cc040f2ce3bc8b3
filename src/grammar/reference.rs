//! A slow, independent, exact recognizer over the grammar IR: the test oracle.
//!
//! It answers two questions about a byte string `input` of length `n`:
//! - [`accepts`]: does `input`, in full, derive from `g.start`?
//! - [`is_prefix`]: can `input` be extended to a member of the language (itself included)?
//!
//! Key types: [`Reference`] (the grammar with its regex leaves compiled once; use it when checking
//! many inputs) and the free functions, which build one per call.
//!
//! # Method
//!
//! Positions are `0..=n` plus one extra element `⊤`. For an expression `e` and a start `i`,
//! `ends(e, i)` is the set of `j` with `input[i..j] ∈ L(e)`, plus `⊤` when `input[i..n]` is a
//! prefix of some word of `L(e)` ("the input runs out inside or at the end of `e`").
//! Extended to sets, `ends(e, S)` is the union over the elements of `S`, where `⊤` maps to
//! `{⊤}` if `L(e)` is non-empty and to `{}` otherwise (the input has already run out; `e` only
//! has to be completable). Then:
//! - leaves: a literal `s` gives `i+|s|` when `input[i..]` starts with `s`, and `⊤` when `s`
//!   starts with `input[i..]`; the empty string gives `i`, and `⊤` when `i == n`; a regex runs
//!   an anchored DFA (`MatchKind::All`) from `i`, giving each `j` where the end-of-input
//!   transition is a match, and `⊤` when the state at `n` can still reach a match;
//! - `Seq` composes, `Alt` unions, `Repeat` unions the `k`-fold compositions for `min ≤ k ≤ max`;
//! - a rule reference reads a table `E(r, i)` of rule results, which is the least fixpoint of
//!   `E(r, i) = ends(body(r), {i})`, computed with a worklist over the `(r, i)` pairs actually
//!   needed (a pair is re-evaluated whenever a pair it read grows). Left recursion and epsilon
//!   cycles are therefore fine: they just do not add anything new.
//!
//! `accepts` is `n ∈ E(start, 0)`; `is_prefix` is `⊤ ∈ E(start, 0)`. Whether `L(e)` is
//! non-empty is computed up front by a separate fixpoint over the rules (productive rules).
//!
//! Every `ends` is distributive over union (it is defined element by element), which is what
//! makes the repetition shortcut exact: once the `k`-th composition adds nothing to the union
//! collected so far, no later one can.
//!
//! Complexity: at most `R·(n+1)` pairs; each table entry grows at most `n+2` times and each
//! growth re-evaluates its readers, each evaluation costing `O(|body|·n)` set operations of
//! `O(n/64)` words. A repetition composes its body at most `n + 2` times past `min`, and up to
//! `min` stops as soon as the set is empty or stops changing. Polynomial, about `O(|G|²·n³)` in
//! the worst case; milliseconds for the short inputs (< 200 bytes) tests use. Not for production.
//!
//! A [`Lexeme`] (intersection/complement of regexes) runs the anchored DFAs of all its regexes
//! side by side: a position `j` is an end when the boolean combination of their matches holds,
//! and the input may continue while some reachable tuple of states satisfies it, found by a
//! breadth-first search over tuples (pruned where a regex that the combination requires
//! positively can no longer match). This shares no code with the engine's product automaton.
//!
//! Regex leaves are matched on their own: look-around assertions in a leaf (`^`, `$`, `\b`)
//! see the leaf's span as the whole haystack. [`Reference::new`] (the oracle) panics if a regex
//! leaf cannot be compiled into a DFA (for example, a Unicode word boundary): such a grammar is
//! a bug in the test that built it.
//!
//! One production use: the JSON Schema front end checks `enum`/`const` values against the
//! grammar of the keywords beside them (few rules, short values) with [`Reference::within`],
//! which builds every leaf under the request's [`DfaLimits`] and answers [`Error::Limit`]
//! past them.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::nfa::thompson;
use regex_automata::util::primitives::StateID;
use regex_automata::util::start;
use regex_automata::{Anchored, MatchKind};
use regex_syntax::hir::Hir;

use crate::error::{Error, LimitKind, Result};
use crate::grammar::ir::{Expr, Grammar};
use crate::regular::{DfaLimits, Lexeme};

/// Does `input`, in full, derive from `g.start`?
pub fn accepts(g: &Grammar, input: &[u8]) -> bool {
    Reference::new(g).accepts(input)
}

/// Can `input` be extended (possibly by nothing) to a member of the language of `g`?
pub fn is_prefix(g: &Grammar, input: &[u8]) -> bool {
    Reference::new(g).is_prefix(input)
}

/// A grammar with its regex leaves compiled, ready to check many inputs (`Send + Sync`).
pub struct Reference<'g> {
    g: &'g Grammar,
    leaves: HashMap<usize, Arc<Leaf>>,
    /// Whether each expression node's language is non-empty, keyed by node address.
    nonempty: HashMap<usize, bool>,
}

/// A regex leaf as an anchored DFA, with the states that can still reach a match.
struct Leaf {
    dfa: dense::DFA<Vec<u32>>,
    start: StateID,
    live: std::collections::HashSet<StateID>,
}

/// Leaves already built, by regex text (equal texts, equal languages) and the limits they were
/// built under (a leaf is kept only by the limits that allowed it, so an answer never depends on
/// what an earlier compile happened to build): a compile that checks enum values against a
/// schema builds the same JSON leaves every time. Bounded: emptied when full.
type LeafKey = (String, Option<(usize, usize, usize)>);
static LEAVES: std::sync::LazyLock<std::sync::Mutex<HashMap<LeafKey, Arc<Leaf>>>> =
    std::sync::LazyLock::new(Default::default);
const MAX_SHARED_LEAVES: usize = 512;

impl Leaf {
    fn shared(hir: &Hir, limits: Option<&DfaLimits>) -> Result<Arc<Leaf>> {
        let key = (hir.to_string(), limits.map(|l| (l.nfa_bytes, l.dfa_bytes, l.states)));
        if let Some(l) = LEAVES.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(l.clone());
        }
        let leaf = Arc::new(Leaf::new(hir, limits)?);
        let mut all = LEAVES.lock().unwrap_or_else(|p| p.into_inner());
        if all.len() >= MAX_SHARED_LEAVES {
            all.clear();
        }
        all.insert(key, leaf.clone());
        Ok(leaf)
    }

    /// The leaf's DFA, under `limits` when given (past them: [`Error::Limit`]); without limits
    /// (the test oracle) a regex that cannot be built is a bug in the test: it panics.
    fn new(hir: &Hir, limits: Option<&DfaLimits>) -> Result<Leaf> {
        let limit = |kind: LimitKind, what: &'static str, limit: usize| Error::Limit {
            kind,
            what: format!("{what} for a regex checked against values"),
            limit,
            hint: Some("the regex expands to too many automaton states; simplify it".into()),
        };
        let nfa = thompson::Compiler::new()
            .configure(thompson::Config::new().nfa_size_limit(limits.map(|l| l.nfa_bytes)))
            .build_from_hir(hir);
        let nfa = match (nfa, limits) {
            (Ok(nfa), _) => nfa,
            (Err(_), Some(l)) => return Err(limit(LimitKind::NfaBytes, "NFA bytes", l.nfa_bytes)),
            (Err(e), None) => panic!("reference: cannot compile regex leaf {hir:?}: {e}"),
        };
        let dfa = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .match_kind(MatchKind::All)
                    .start_kind(StartKind::Anchored)
                    .dfa_size_limit(limits.map(|l| l.dfa_bytes))
                    .determinize_size_limit(limits.map(|l| l.dfa_bytes)),
            )
            .build_from_nfa(&nfa);
        let dfa = match (dfa, limits) {
            (Ok(dfa), _) => dfa,
            (Err(_), Some(l)) => return Err(limit(LimitKind::DfaBytes, "DFA bytes", l.dfa_bytes)),
            (Err(e), None) => panic!("reference: cannot build DFA for {hir:?}: {e}"),
        };
        let start = dfa
            .start_state(&start::Config::new().anchored(Anchored::Yes))
            .unwrap_or_else(|e| panic!("reference: no start state for {hir:?}: {e}"));
        // Explore every state reachable from the start (one byte per equivalence class is
        // enough: the bytes of a class share every transition), then walk predecessors back
        // from the states whose end-of-input transition is a match. Dense state ids are
        // multiples of the stride, so `id >> stride2` indexes them.
        let reps: Vec<u8> = {
            let classes = dfa.byte_classes();
            let mut seen = [false; 256];
            (0..=255u8).filter(|&b| !std::mem::replace(&mut seen[classes.get(b) as usize], true)).collect()
        };
        let slot = |id: StateID| id.as_usize() >> dfa.stride2();
        let mut index: Vec<usize> = vec![usize::MAX; slot(start) + 1];
        index[slot(start)] = 0;
        let mut states = vec![start];
        let mut preds: Vec<Vec<usize>> = vec![Vec::new()];
        let mut k = 0;
        while k < states.len() {
            let s = states[k];
            for &b in &reps {
                let t = dfa.next_state(s, b);
                assert!(!dfa.is_quit_state(t), "reference: DFA for {hir:?} gave up on byte {b}");
                if dfa.is_dead_state(t) {
                    continue;
                }
                if index.len() <= slot(t) {
                    index.resize(slot(t) + 1, usize::MAX);
                }
                if index[slot(t)] == usize::MAX {
                    index[slot(t)] = states.len();
                    states.push(t);
                    preds.push(Vec::new());
                }
                preds[index[slot(t)]].push(k);
            }
            k += 1;
        }
        let mut live = vec![false; states.len()];
        let mut stack: Vec<usize> =
            (0..states.len()).filter(|&k| dfa.is_match_state(dfa.next_eoi_state(states[k]))).collect();
        stack.iter().for_each(|&k| live[k] = true);
        while let Some(k) = stack.pop() {
            for &p in &preds[k] {
                if !live[p] {
                    live[p] = true;
                    stack.push(p);
                }
            }
        }
        if let Some(l) = limits.filter(|l| states.len() > l.states) {
            return Err(limit(LimitKind::DfaStates, "DFA states", l.states));
        }
        let live = states.iter().zip(&live).filter(|(_, &l)| l).map(|(&s, _)| s).collect();
        Ok(Leaf { dfa, start, live })
    }
}

impl<'g> Reference<'g> {
    /// The test oracle: regex leaves built without size limits (a leaf that cannot be built
    /// panics).
    pub fn new(g: &'g Grammar) -> Reference<'g> {
        Reference::build(g, None).expect("without limits, building leaves only panics")
    }

    /// The recognizer with every regex leaf built under `limits`, for checks a compile makes
    /// (the JSON Schema front end checks `enum` values with it): past them, [`Error::Limit`].
    pub fn within(g: &'g Grammar, limits: &DfaLimits) -> Result<Reference<'g>> {
        Reference::build(g, Some(limits))
    }

    fn build(g: &'g Grammar, limits: Option<&DfaLimits>) -> Result<Reference<'g>> {
        let mut leaves = HashMap::new();
        fn add(h: &Hir, leaves: &mut HashMap<usize, Arc<Leaf>>, limits: Option<&DfaLimits>) -> Result<()> {
            if let std::collections::hash_map::Entry::Vacant(e) = leaves.entry(h as *const Hir as usize) {
                e.insert(Leaf::shared(h, limits)?);
            }
            Ok(())
        }
        fn collect(e: &Expr, leaves: &mut HashMap<usize, Arc<Leaf>>, limits: Option<&DfaLimits>) -> Result<()> {
            match e {
                Expr::Regex(h) | Expr::TokensBut { text: h, .. } => add(h, leaves, limits)?,
                Expr::Lexeme(l) => {
                    let mut hirs = Vec::new();
                    lexeme_leaves(l, true, &mut hirs);
                    for (h, _) in hirs {
                        add(h, leaves, limits)?;
                    }
                }
                Expr::Seq(xs) | Expr::Alt(xs) => {
                    for x in xs {
                        collect(x, leaves, limits)?;
                    }
                }
                Expr::Repeat { body, .. } => collect(body, leaves, limits)?,
                Expr::Empty | Expr::Literal(_) | Expr::Mark(_) | Expr::Token(_) | Expr::Rule(_) => {}
            }
            Ok(())
        }
        for r in &g.rules {
            collect(&r.body, &mut leaves, limits)?;
        }
        let mut me = Reference { g, leaves, nonempty: HashMap::new() };
        // Productive rules: least fixpoint, starting from "every rule is empty".
        let mut productive = vec![false; g.rules.len()];
        loop {
            let next: Vec<bool> = g.rules.iter().map(|r| me.lang_nonempty(&r.body, &productive)).collect();
            if next == productive {
                break;
            }
            productive = next;
        }
        let mut nonempty = HashMap::new();
        fn record(me: &Reference, e: &Expr, p: &[bool], out: &mut HashMap<usize, bool>) {
            out.insert(e as *const Expr as usize, me.lang_nonempty(e, p));
            match e {
                Expr::Seq(xs) | Expr::Alt(xs) => xs.iter().for_each(|x| record(me, x, p, out)),
                Expr::Repeat { body, .. } => record(me, body, p, out),
                Expr::Empty
                | Expr::Literal(_)
                | Expr::Mark(_)
                | Expr::Token(_)
                | Expr::TokensBut { .. }
                | Expr::Regex(_)
                | Expr::Lexeme(_)
                | Expr::Rule(_) => {}
            }
        }
        g.rules.iter().for_each(|r| record(&me, &r.body, &productive, &mut nonempty));
        me.nonempty = nonempty;
        Ok(me)
    }

    /// Is `L(e)` non-empty, given which rules are productive?
    fn lang_nonempty(&self, e: &Expr, productive: &[bool]) -> bool {
        match e {
            Expr::Empty | Expr::Literal(_) | Expr::Mark(_) | Expr::Token(_) => true,
            Expr::Regex(h) | Expr::TokensBut { text: h, .. } => {
                let leaf = &self.leaves[&(&**h as *const Hir as usize)];
                leaf.live.contains(&leaf.start)
            }
            Expr::Lexeme(l) => {
                let start = self.lexeme_start(l);
                self.lexeme_live(l, &start)
            }
            Expr::Rule(r) => productive[r.0 as usize],
            Expr::Seq(xs) => xs.iter().all(|x| self.lang_nonempty(x, productive)),
            Expr::Alt(xs) => xs.iter().any(|x| self.lang_nonempty(x, productive)),
            Expr::Repeat { body, min, max } => {
                max.is_none_or(|m| m >= *min) && (*min == 0 || self.lang_nonempty(body, productive))
            }
        }
    }

    /// The start tuple of a lexeme: its regexes' start states, in pre-order.
    fn lexeme_start(&self, l: &Lexeme) -> Vec<StateID> {
        let mut hirs = Vec::new();
        lexeme_leaves(l, true, &mut hirs);
        hirs.iter().map(|(h, _)| self.leaves[&(*h as *const Hir as usize)].start).collect()
    }

    /// Does the tuple `states` (one per regex of `l`, pre-order) satisfy `l` as it stands?
    fn lexeme_matches(&self, l: &Lexeme, states: &[StateID]) -> bool {
        fn eval(r: &Reference, l: &Lexeme, states: &[StateID], k: &mut usize) -> bool {
            match l {
                Lexeme::Regex(h) => {
                    let leaf = &r.leaves[&(h as *const Hir as usize)];
                    let s = states[*k];
                    *k += 1;
                    leaf.dfa.is_match_state(leaf.dfa.next_eoi_state(s))
                }
                // Every part is evaluated (in order, no short circuit) so `k` stays in step.
                Lexeme::And(xs) => {
                    let mut all = true;
                    for x in xs {
                        all &= eval(r, x, states, k);
                    }
                    all
                }
                Lexeme::Not(x) => !eval(r, x, states, k),
                Lexeme::Counted { full, .. } => {
                    let leaf = &r.leaves[&(&**full as *const Hir as usize)];
                    let s = states[*k];
                    *k += 1;
                    leaf.dfa.is_match_state(leaf.dfa.next_eoi_state(s))
                }
            }
        }
        eval(self, l, states, &mut 0)
    }

    /// Can the tuple `states` still reach one that satisfies `l`? Breadth-first over tuples.
    fn lexeme_live(&self, l: &Lexeme, states: &[StateID]) -> bool {
        let mut hirs = Vec::new();
        lexeme_leaves(l, true, &mut hirs);
        let leaves: Vec<(&Leaf, bool)> =
            hirs.iter().map(|(h, req)| (&*self.leaves[&(*h as *const Hir as usize)], *req)).collect();
        let hopeless = |t: &[StateID]| leaves.iter().zip(t).any(|((leaf, req), s)| *req && !leaf.live.contains(s));
        let mut seen = std::collections::HashSet::from([states.to_vec()]);
        let mut queue = VecDeque::from([states.to_vec()]);
        while let Some(t) = queue.pop_front() {
            if hopeless(&t) {
                continue;
            }
            if self.lexeme_matches(l, &t) {
                return true;
            }
            assert!(seen.len() < 2_000_000, "reference: lexeme product too large to explore");
            for b in 0..=255u8 {
                let next: Vec<StateID> =
                    leaves.iter().zip(&t).map(|((leaf, _), &s)| leaf.dfa.next_state(s, b)).collect();
                if seen.insert(next.clone()) {
                    queue.push_back(next);
                }
            }
        }
        false
    }

    /// Does `input`, in full, derive from the start rule?
    pub fn accepts(&self, input: &[u8]) -> bool {
        Solver::new(self, input).run().contains(input.len())
    }

    /// Can `input` be extended (possibly by nothing) to a member of the language?
    pub fn is_prefix(&self, input: &[u8]) -> bool {
        Solver::new(self, input).run().contains(input.len() + 1)
    }
}

/// The regexes of a lexeme in pre-order, each with whether the lexeme *requires* it to match
/// (reached through intersections only, never through a complement).
fn lexeme_leaves<'l>(l: &'l Lexeme, required: bool, out: &mut Vec<(&'l Hir, bool)>) {
    match l {
        Lexeme::Regex(h) => out.push((h, required)),
        Lexeme::And(xs) => xs.iter().for_each(|x| lexeme_leaves(x, required, out)),
        Lexeme::Not(x) => lexeme_leaves(x, false, out),
        Lexeme::Counted { full, .. } => out.push((full, required)),
    }
}

/// A set of positions `0..=n` plus `⊤` (stored as `n + 1`).
#[derive(Clone, PartialEq, Eq)]
struct PosSet(Vec<u64>);

impl PosSet {
    fn empty(n: usize) -> PosSet {
        PosSet(vec![0; (n + 2).div_ceil(64)])
    }
    fn insert(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn remove(&mut self, i: usize) {
        self.0[i / 64] &= !(1 << (i % 64));
    }
    fn contains(&self, i: usize) -> bool {
        self.0[i / 64] >> (i % 64) & 1 == 1
    }
    fn is_empty(&self) -> bool {
        self.0.iter().all(|&w| w == 0)
    }
    fn is_subset(&self, other: &PosSet) -> bool {
        self.0.iter().zip(&other.0).all(|(a, b)| a & !b == 0)
    }
    /// Adds `other`; returns whether anything was new.
    fn union_with(&mut self, other: &PosSet) -> bool {
        let mut changed = false;
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            changed |= b & !*a != 0;
            *a |= b;
        }
        changed
    }
    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.0.len() * 64).filter(|&i| self.contains(i))
    }
}

/// One run over one input.
struct Solver<'r, 'g> {
    r: &'r Reference<'g>,
    input: &'r [u8],
    n: usize,
    /// `E(r, i)` at index `r * (n + 1) + i`; `None` until the pair is first needed.
    table: Vec<Option<PosSet>>,
    /// For each pair, the pairs whose evaluation read it.
    readers: Vec<Vec<usize>>,
    queue: VecDeque<usize>,
    queued: Vec<bool>,
    leaf_memo: HashMap<(usize, usize), PosSet>,
    lexeme_memo: HashMap<(usize, usize), PosSet>,
}

impl<'r, 'g> Solver<'r, 'g> {
    fn new(r: &'r Reference<'g>, input: &'r [u8]) -> Self {
        let n = input.len();
        let pairs = r.g.rules.len() * (n + 1);
        Solver {
            r,
            input,
            n,
            table: vec![None; pairs],
            readers: vec![Vec::new(); pairs],
            queue: VecDeque::new(),
            queued: vec![false; pairs],
            leaf_memo: HashMap::new(),
            lexeme_memo: HashMap::new(),
        }
    }

    fn top(&self) -> usize {
        self.n + 1
    }

    /// Computes `E(start, 0)`.
    fn run(mut self) -> PosSet {
        let root = self.r.g.start.0 as usize * (self.n + 1);
        self.need(root);
        while let Some(p) = self.queue.pop_front() {
            self.queued[p] = false;
            let rule = p / (self.n + 1);
            let i = p % (self.n + 1);
            let mut from = PosSet::empty(self.n);
            from.insert(i);
            let g: &'g Grammar = self.r.g;
            let out = self.eval(&g.rules[rule].body, &from, p);
            let changed = self.table[p].as_mut().is_some_and(|old| old.union_with(&out));
            if changed {
                for k in 0..self.readers[p].len() {
                    let q = self.readers[p][k];
                    if !self.queued[q] {
                        self.queued[q] = true;
                        self.queue.push_back(q);
                    }
                }
            }
        }
        self.table[root].take().unwrap_or_else(|| PosSet::empty(self.n))
    }

    fn need(&mut self, p: usize) {
        if self.table[p].is_none() {
            self.table[p] = Some(PosSet::empty(self.n));
            self.queued[p] = true;
            self.queue.push_back(p);
        }
    }

    /// `ends(e, from)`, reading the table on behalf of pair `reader`: `⊤` passes through where
    /// `L(e)` is non-empty, and the real positions go through the step for `e`'s kind.
    fn eval(&mut self, e: &'g Expr, from: &PosSet, reader: usize) -> PosSet {
        let (n, top) = (self.n, self.top());
        let mut out = PosSet::empty(n);
        if from.is_empty() {
            return out;
        }
        if from.contains(top) && self.r.nonempty[&(e as *const Expr as usize)] {
            out.insert(top);
        }
        let mut real = from.clone();
        real.remove(top);
        if real.is_empty() {
            return out;
        }
        let ends = match e {
            Expr::Empty => self.epsilon(real),
            Expr::Literal(s) => self.literal_ends(s.as_bytes(), &real),
            // The reference reads the language only: a mark is its text.
            Expr::Mark(m) => self.literal_ends(m.text().as_bytes(), &real),
            // With no vocabulary, a token is its name.
            Expr::Token(t) => self.literal_ends(t.text().as_bytes(), &real),
            // With no vocabulary, a run of tokens is its text.
            Expr::Regex(h) | Expr::TokensBut { text: h, .. } => {
                let mut ends = PosSet::empty(n);
                for i in real.iter() {
                    ends.union_with(&self.regex_ends(h, i));
                }
                ends
            }
            Expr::Lexeme(l) => {
                let mut ends = PosSet::empty(n);
                for i in real.iter() {
                    ends.union_with(&self.lexeme_ends(l, i));
                }
                ends
            }
            Expr::Rule(r) => self.rule_ends(r.0 as usize, &real, reader),
            Expr::Seq(xs) => {
                let mut cur = self.epsilon(real);
                for x in xs {
                    cur = self.eval(x, &cur, reader);
                }
                cur
            }
            Expr::Alt(xs) => {
                let mut ends = PosSet::empty(n);
                for x in xs {
                    let part = self.eval(x, &real, reader);
                    ends.union_with(&part);
                }
                ends
            }
            Expr::Repeat { body, min, max } => self.repeat_ends(body, *min, *max, real, reader),
        };
        out.union_with(&ends);
        out
    }

    /// `ends(ε, real)`: the positions themselves, and `⊤` from `n` ("" is a prefix of "").
    fn epsilon(&self, mut set: PosSet) -> PosSet {
        if set.contains(self.n) {
            set.insert(self.top());
        }
        set
    }

    /// `ends` of the literal `s` from the real positions `real`.
    fn literal_ends(&self, s: &[u8], real: &PosSet) -> PosSet {
        let mut out = PosSet::empty(self.n);
        for i in real.iter() {
            let rest = &self.input[i..];
            if rest.starts_with(s) {
                out.insert(i + s.len());
            }
            if s.starts_with(rest) {
                out.insert(self.top());
            }
        }
        out
    }

    /// `ends` of a reference to rule `rule` from the real positions `real`: the table entries
    /// `E(rule, i)` as they stand, each marked needed and read by `reader` (so `reader` is
    /// evaluated again when one grows).
    fn rule_ends(&mut self, rule: usize, real: &PosSet, reader: usize) -> PosSet {
        let mut out = PosSet::empty(self.n);
        for i in real.iter() {
            let p = rule * (self.n + 1) + i;
            self.need(p);
            if !self.readers[p].contains(&reader) {
                self.readers[p].push(reader);
            }
            if let Some(set) = &self.table[p] {
                out.union_with(set);
            }
        }
        out
    }

    /// `ends` of `body{min,max}` from the real positions `real`: the union of the `k`-fold
    /// compositions for `min ≤ k ≤ max`, stopped as soon as a composition adds nothing (exact:
    /// see the module docs).
    fn repeat_ends(&mut self, body: &'g Expr, min: u32, max: Option<u32>, real: PosSet, reader: usize) -> PosSet {
        let none = PosSet::empty(self.n);
        if max.is_some_and(|m| m < min) {
            return none;
        }
        // cur = body^k(real), for k = 0, 1, ... min.
        let mut cur = self.epsilon(real);
        for _ in 0..min {
            let next = self.eval(body, &cur, reader);
            if next == cur {
                break; // a fixed point: every later power is the same set
            }
            cur = next;
            if cur.is_empty() {
                return none;
            }
        }
        // acc = union of body^k(real) for min <= k <= max.
        let mut acc = cur.clone();
        let mut k = min;
        while max.is_none_or(|m| k < m) {
            cur = self.eval(body, &cur, reader);
            k += 1;
            if cur.is_subset(&acc) {
                break; // no later power can add anything (see the module docs)
            }
            acc.union_with(&cur);
        }
        acc
    }

    /// Like [`Self::regex_ends`], for all of a lexeme's regexes in step.
    fn lexeme_ends(&mut self, l: &'g Lexeme, i: usize) -> PosSet {
        let key = (l as *const Lexeme as usize, i);
        if let Some(set) = self.lexeme_memo.get(&key) {
            return set.clone();
        }
        let mut hirs = Vec::new();
        lexeme_leaves(l, true, &mut hirs);
        let leaves: Vec<&Leaf> = hirs.iter().map(|(h, _)| &*self.r.leaves[&(*h as *const Hir as usize)]).collect();
        let mut states = self.r.lexeme_start(l);
        let mut out = PosSet::empty(self.n);
        let mut j = i;
        while self.r.lexeme_live(l, &states) {
            if self.r.lexeme_matches(l, &states) {
                out.insert(j);
            }
            if j == self.n {
                out.insert(self.top());
                break;
            }
            for (s, leaf) in states.iter_mut().zip(&leaves) {
                *s = leaf.dfa.next_state(*s, self.input[j]);
            }
            j += 1;
        }
        self.lexeme_memo.insert(key, out.clone());
        out
    }

    /// `ends` of a regex leaf from the real position `i`.
    fn regex_ends(&mut self, h: &'g Hir, i: usize) -> PosSet {
        let key = (h as *const Hir as usize, i);
        if let Some(set) = self.leaf_memo.get(&key) {
            return set.clone();
        }
        let leaf = &self.r.leaves[&(h as *const Hir as usize)];
        let mut out = PosSet::empty(self.n);
        let mut state = leaf.start;
        let mut j = i;
        while leaf.live.contains(&state) {
            if leaf.dfa.is_match_state(leaf.dfa.next_eoi_state(state)) {
                out.insert(j);
            }
            if j == self.n {
                out.insert(self.top()); // still live when the input runs out
                break;
            }
            state = leaf.dfa.next_state(state, self.input[j]);
            j += 1;
        }
        self.leaf_memo.insert(key, out.clone());
        out
    }
}

#[cfg(test)]
mod tests;
