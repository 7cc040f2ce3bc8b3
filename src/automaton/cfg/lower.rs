//! Lowering a [`Grammar`] to a [`Cfg`](super::Cfg): which rules are regular (inlined into
//! lexemes), and the walk that turns the rest into productions (see the parent module's doc).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use regex_syntax::hir::Hir;

use super::runs::{Part, Texts};
use super::{CfgLimits, Nt, NtId, Prod, ProdId, Sym, Term, TermId, MAX_INLINE_DEPTH};
use crate::error::{Error, LimitKind, Result};
use crate::grammar::{regex::expr_to_hir, Expr, Grammar, Mark, RuleId};
use crate::regular::regex::hir_weight_within;
use crate::regular::Lexeme;
use crate::regular::{Dfa, FxBuild, StateId, UNREACHABLE};

/// The largest inlined size (see [`Weights::weight`]) folded into one lexeme. Bigger regular parts stay
/// grammar structure over smaller lexemes: inlining duplicates shared rules, so without a bound
/// a regular grammar with many optional parts would expand exponentially into one DFA.
pub const MAX_LEXEME_WEIGHT: u64 = 400;

/// Rough sizes of the automata expressions inline to ([`Weights::weight`]): the inlined size
/// of each rule (`u64::MAX` where unknown or too big), and the weights of shared regexes
/// already met, by their `Arc` (a schema's string and number regexes stand in hundreds of
/// runs: walking their HIR at every question showed in compile profiles). Borrowed from one
/// grammar, whose `Arc`s stay put while it lives.
#[derive(Default)]
struct Weights {
    sizes: Vec<u64>,
    regexes: RefCell<HashMap<usize, Option<u64>, FxBuild>>,
}

impl Weights {
    /// The weight of `e`: literal bytes, class ranges, repetition copies; rules count their
    /// inlined size. Past [`MAX_LEXEME_WEIGHT`] it is `u64::MAX` (too big to inline, whatever
    /// the size): what is heavier than that is not walked further, and every use compares with
    /// that bound.
    fn weight(&self, e: &Expr) -> u64 {
        self.within(e, MAX_LEXEME_WEIGHT).unwrap_or(u64::MAX)
    }

    /// [`Weights::weight`] if it is at most `cap` (at most [`MAX_LEXEME_WEIGHT`]).
    fn within(&self, e: &Expr, cap: u64) -> Option<u64> {
        debug_assert!(cap <= MAX_LEXEME_WEIGHT);
        let w = match e {
            Expr::Empty => 1,
            Expr::Literal(s) => s.len().max(1) as u64,
            // Never inlined: a mark is a terminal of its own, watched by the matcher; so is a
            // lexeme.
            Expr::Mark(_) | Expr::Lexeme(_) => return None,
            Expr::Regex(h) | Expr::TokensBut { text: h, .. } => {
                let at = Arc::as_ptr(h) as usize;
                let known = self.regexes.borrow().get(&at).copied();
                let w = known.unwrap_or_else(|| {
                    let w = hir_weight_within(h, MAX_LEXEME_WEIGHT);
                    self.regexes.borrow_mut().insert(at, w);
                    w
                });
                w?
            }
            // Resolved into bytes before lowering (see `automaton::tokens`).
            Expr::Token(t) => t.text().len().max(1) as u64,
            Expr::Rule(r) => self.sizes[r.0 as usize],
            Expr::Seq(xs) | Expr::Alt(xs) => {
                let mut sum = 0u64;
                for x in xs {
                    sum += self.within(x, cap - sum)?;
                }
                sum
            }
            Expr::Repeat { body, min, max } => {
                self.within(body, cap)?.checked_mul(u64::from(max.unwrap_or(*min).max(1)) + 1)?
            }
        };
        (w <= cap).then_some(w)
    }
}

/// Which rules of a grammar are regular *and small* ([`regular_rules`]), with their inlined
/// sizes: found once per compile, for the question "is the whole grammar one lexeme?" and for
/// the lowering.
pub struct RegularRules {
    regular: Vec<bool>,
    weights: Weights,
}

impl RegularRules {
    pub fn of(g: &Grammar) -> RegularRules {
        let (regular, weights) = regular_rules(g);
        RegularRules { regular, weights }
    }

    /// Is rule `r` regular and small?
    pub(super) fn is_regular(&self, r: RuleId) -> bool {
        self.regular[r.0 as usize]
    }
}

/// Which rules are regular *and small*: not on a cycle, referencing only such rules, and
/// inlining to at most [`MAX_LEXEME_WEIGHT`]. Returns (regular, weights with the inlined
/// sizes).
fn regular_rules(g: &Grammar) -> (Vec<bool>, Weights) {
    let acyclic = acyclic_rules(g);
    let n = g.rules.len();
    // Sizes bottom-up over the acyclic rules, each once, children first (an acyclic rule
    // references only acyclic rules). A rule whose chain of references below it is longer
    // than `MAX_INLINE_DEPTH` (or met that deep below the rule sized first) keeps `u64::MAX`:
    // not regular, nor is anything above it. So inlining a regular rule, and this recursion,
    // go at most `MAX_INLINE_DEPTH` references deep.
    struct Sizing<'g> {
        g: &'g Grammar,
        acyclic: Vec<bool>,
        weights: Weights,
        /// The longest chain of references below a sized rule.
        height: Vec<usize>,
        sized: Vec<bool>,
    }
    impl Sizing<'_> {
        fn size(&mut self, r: usize, depth: usize) {
            if self.sized[r] || !self.acyclic[r] || depth > MAX_INLINE_DEPTH {
                return;
            }
            let g = self.g;
            let body = &g.rules[r].body;
            let mut height = 0;
            body.for_each_rule(&mut |c| {
                self.size(c.0 as usize, depth + 1);
                height = height.max(self.height[c.0 as usize] + 1);
            });
            if height <= MAX_INLINE_DEPTH {
                self.weights.sizes[r] = self.weights.weight(body);
            }
            self.height[r] = height;
            self.sized[r] = true;
        }
    }
    let weights = Weights { sizes: vec![u64::MAX; n], ..Weights::default() };
    let mut s = Sizing { g, acyclic, weights, height: vec![0; n], sized: vec![false; n] };
    for r in 0..n {
        s.size(r, 0);
    }
    let Sizing { acyclic, weights, .. } = s;
    let sizes = &weights.sizes;
    let mut regular = vec![false; n];
    for r in 0..n {
        if acyclic[r] && sizes[r] <= MAX_LEXEME_WEIGHT {
            let mut ok = true;
            g.rules[r].body.for_each_rule(&mut |c| ok &= sizes[c.0 as usize] <= MAX_LEXEME_WEIGHT);
            regular[r] = ok;
        }
    }
    (regular, weights)
}

/// Which rules are regular in the language sense: not on a cycle, referencing only such rules.
fn acyclic_rules(g: &Grammar) -> Vec<bool> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Active,
        Regular,
        NotRegular,
    }
    fn visit(g: &Grammar, r: usize, marks: &mut [Mark], depth: usize) -> bool {
        match marks[r] {
            Mark::Regular => return true,
            Mark::NotRegular | Mark::Active => return false,
            Mark::New => {}
        }
        if depth > MAX_INLINE_DEPTH {
            // Too deep a chain to inline (and to recurse on): lower it as a nonterminal.
            marks[r] = Mark::NotRegular;
            return false;
        }
        marks[r] = Mark::Active;
        let mut ok = true;
        g.rules[r].body.for_each_rule(&mut |c| ok &= visit(g, c.0 as usize, marks, depth + 1));
        marks[r] = if ok { Mark::Regular } else { Mark::NotRegular };
        ok
    }
    // A rule that reaches a rule still `Active` (on the visit stack) is on a cycle with it, so
    // it is not regular; so is every rule that reaches a non-regular one. Rules are only ever
    // marked not regular too eagerly (the depth bound), which is safe: they become nonterminals.
    let mut marks = vec![Mark::New; g.rules.len()];
    (0..g.rules.len()).map(|r| visit(g, r, &mut marks, 0)).collect()
}

/// The HIR of a regular expression tree, inlining (regular) rules. Recursion here is bounded by
/// the rule graph being acyclic for regular rules.
pub(super) fn inline(g: &Grammar, e: &Expr) -> Result<Hir> {
    expr_to_hir(e, &mut |r: RuleId| inline(g, &g.rule(r).body))
}

pub(super) struct Lowering<'a> {
    g: &'a Grammar,
    rules: RegularRules,
    limits: CfgLimits,
    usable: &'a [bool; 256],
    pub(super) terms: Vec<Term>,
    term_ids: HashMap<String, TermId, foldhash::fast::RandomState>,
    pub(super) nts: Vec<Nt>,
    rule_nt: HashMap<RuleId, NtId, FxBuild>,
    /// The inverse of `rule_nt`, by nonterminal.
    nt_rule: Vec<Option<RuleId>>,
    pub(super) prods: Vec<Prod>,
    /// Regular runs already lowered, by what they are made of: the terminal, and whether the
    /// run can only match the empty string. A hit skips the run's key text and the DFA lookup
    /// (a large schema repeats the same few runs thousands of times: the whitespace and
    /// punctuation around every member, the shared string and number regexes).
    runs: HashMap<Vec<Part<'a>>, (Sym, bool), foldhash::fast::RandomState>,
    /// The texts of rules and shared regexes, printed once (see [`Texts`]).
    texts: Texts,
    /// The terminal of each [`Expr::Lexeme`], by the address of its `Arc` (borrowed from the
    /// grammar: stable).
    lexeme_syms: HashMap<usize, Sym, FxBuild>,
}

impl<'a> Lowering<'a> {
    /// Lowers `g`: every rule reachable from the start, on first reference.
    pub(super) fn run(
        g: &'a Grammar,
        rules: RegularRules,
        usable: &'a [bool; 256],
        limits: CfgLimits,
    ) -> Result<Lowering<'a>> {
        let mut l = Lowering {
            g,
            rules,
            limits,
            usable,
            terms: Vec::new(),
            term_ids: HashMap::default(),
            nts: Vec::new(),
            rule_nt: HashMap::default(),
            nt_rule: Vec::new(),
            prods: Vec::new(),
            runs: HashMap::default(),
            texts: Texts::default(),
            lexeme_syms: HashMap::default(),
        };
        l.new_nt("⊤".into());
        let start = l.rule_sym(g.start)?;
        l.add_prod(NtId::TOP, vec![start])?;
        // Rules are lowered on first reference; keep going until none is pending.
        let mut done = 0;
        while done < l.nts.len() {
            let nt_rule: Option<RuleId> = l.nt_rule.get(done).copied().flatten();
            if let Some(rule) = nt_rule {
                let body = &g.rule(rule).body;
                for alt in l.alts(body)? {
                    l.add_prod(NtId(done as u32), alt)?;
                }
            }
            done += 1;
        }
        Ok(l)
    }

    /// Regular and small enough to be one lexeme. (A weight within the bound means every
    /// rule it references is regular: a rule's size is within it exactly when it is.)
    fn is_regular(&self, e: &Expr) -> bool {
        regular_at_any_weight(e) || self.rules.weights.weight(e) <= MAX_LEXEME_WEIGHT
    }

    /// [`Weights::weight`] of `e` where it [`is_regular`](Lowering::is_regular) (possibly
    /// `u64::MAX`: see [`regular_at_any_weight`]), `None` where not: one walk where a run
    /// needs both answers.
    fn regular_weight(&self, e: &Expr) -> Option<u64> {
        let w = self.rules.weights.weight(e);
        (regular_at_any_weight(e) || w <= MAX_LEXEME_WEIGHT).then_some(w)
    }

    fn new_nt(&mut self, name: String) -> NtId {
        self.nts.push(Nt { name, prods: vec![], nullable: false, minlen: UNREACHABLE });
        NtId(self.nts.len() as u32 - 1)
    }

    fn add_prod(&mut self, lhs: NtId, rhs: Vec<Sym>) -> Result<()> {
        if self.prods.len() >= self.limits.max_productions {
            return Err(Error::limit(LimitKind::Productions, "grammar productions", self.limits.max_productions));
        }
        self.nts[lhs.index()].prods.push(ProdId(self.prods.len() as u32));
        self.prods.push(Prod { lhs, rhs, rest: Vec::new() });
        Ok(())
    }

    /// The symbol for a non-regular rule (lowered later), or a terminal for a regular one.
    fn rule_sym(&mut self, r: RuleId) -> Result<Sym> {
        if self.rules.is_regular(r) {
            // Borrowed from the grammar, not from `self`: no copy of the name per reference.
            let grammar: &'a Grammar = self.g;
            return Ok(self.memo_term(vec![Part::Rule(r.0)], &[&Expr::Rule(r)], &grammar.rule(r).name)?.0);
        }
        if let Some(&nt) = self.rule_nt.get(&r) {
            return Ok(Sym::N(nt));
        }
        let nt = self.new_nt(self.g.rule(r).name.clone());
        self.rule_nt.insert(r, nt);
        if self.nt_rule.len() <= nt.index() {
            self.nt_rule.resize(nt.index() + 1, None);
        }
        self.nt_rule[nt.index()] = Some(r);
        Ok(Sym::N(nt))
    }

    fn term(&mut self, lexeme: &Lexeme, name: &str) -> Result<Sym> {
        self.keyed_term(lexeme.key(), name, None, || Ok(lexeme.clone()))
    }

    /// The terminal of a mark: its text as a lexeme, but a terminal apart from the same text
    /// unmarked (and from other marks), so that the parser reports where it ends.
    fn marked_term(&mut self, m: &Mark) -> Result<Sym> {
        let lexeme = Lexeme::Regex(Hir::literal(m.text().as_bytes()));
        self.keyed_term(lexeme.key(), "mark", Some(m.clone()), || Ok(lexeme.clone()))
    }

    /// The terminal for the lexeme under `key` (a regex text of its language, see
    /// [`Dfa::shared_by`]), made once per key and mark; `lexeme` is made only when its DFA is
    /// built.
    fn keyed_term(
        &mut self,
        key: String,
        name: &str,
        mark: Option<Mark>,
        lexeme: impl FnOnce() -> Result<Lexeme>,
    ) -> Result<Sym> {
        let term_key = match &mark {
            Some(m) => format!("{key}\u{0}{m:?}"),
            None => key.clone(),
        };
        if let Some(&t) = self.term_ids.get(&term_key) {
            return Ok(Sym::T(t));
        }
        if self.terms.len() >= self.limits.max_terminals {
            return Err(Error::limit(
                LimitKind::Terminals,
                "grammar terminals (distinct lexemes)",
                self.limits.max_terminals,
            ));
        }
        let dfa = Dfa::shared_by(key, self.limits.dfa, lexeme).map_err(|e| match e {
            Error::Limit { kind, what, limit, hint } => {
                Error::Limit { kind, what: format!("{what} (in rule `{name}`)"), limit, hint }
            }
            other => other,
        })?;
        let dist = dfa.dist_using(self.usable);
        let nullable = dfa.is_accepting(dfa.start());
        let id = TermId(self.terms.len() as u32);
        self.terms.push(Term { dfa, dist, nullable, name: name.to_string(), mark, one_token: false });
        self.term_ids.insert(term_key, id);
        Ok(Sym::T(id))
    }

    /// The alternatives an expression lowers to.
    fn alts(&mut self, e: &'a Expr) -> Result<Vec<Vec<Sym>>> {
        if let Expr::Empty = e {
            return Ok(vec![vec![]]);
        }
        if self.is_regular(e) {
            return Ok(vec![vec![self.regular_term(&[e])?.0]]);
        }
        Ok(match e {
            Expr::Alt(xs) => {
                let mut out = Vec::new();
                for x in xs {
                    out.extend(self.alts(x)?);
                }
                out
            }
            Expr::Seq(xs) => vec![self.seq(xs)?],
            _ => vec![vec![self.sym(e)?]],
        })
    }

    /// A sequence: runs of regular parts merge into one terminal each.
    fn seq(&mut self, xs: &'a [Expr]) -> Result<Vec<Sym>> {
        let mut flat = Vec::new();
        flatten_seq(xs, &mut flat);
        let mut out = Vec::new();
        let mut run: Vec<&Expr> = Vec::new();
        let mut run_weight = 0u64;
        for x in flat {
            if let Some(w) = self.regular_weight(x) {
                if !run.is_empty() && run_weight.saturating_add(w) > MAX_LEXEME_WEIGHT {
                    self.flush(&mut run, &mut out)?;
                    run_weight = 0;
                }
                run.push(x);
                run_weight = run_weight.saturating_add(w);
            } else {
                run_weight = 0;
                self.flush(&mut run, &mut out)?;
                out.push(self.sym(x)?);
            }
        }
        self.flush(&mut run, &mut out)?;
        Ok(out)
    }

    fn flush(&mut self, run: &mut Vec<&'a Expr>, out: &mut Vec<Sym>) -> Result<()> {
        if run.is_empty() {
            return Ok(());
        }
        let (sym, empty) = self.regular_term(run)?;
        run.clear();
        // A run that can only match the empty string adds nothing.
        if !empty {
            out.push(sym);
        }
        Ok(())
    }

    /// The terminal for a run of regular parts in sequence, and whether it can only match the
    /// empty string (memoized in `runs`).
    fn regular_term(&mut self, run: &[&'a Expr]) -> Result<(Sym, bool)> {
        let key: Vec<Part<'a>> = run.iter().map(|x| Part::of(x)).collect();
        self.memo_term(key, run, "lexeme")
    }

    /// The terminal (and "only the empty string?") for the run named `key`, from `runs`, or
    /// by its text ([`Texts`]) from the terminals and DFAs already made, or built from its
    /// regex (the parts inlined) where none has that text.
    fn memo_term(&mut self, key: Vec<Part<'a>>, run: &[&Expr], name: &str) -> Result<(Sym, bool)> {
        if let Some(&hit) = self.runs.get(&key) {
            return Ok(hit);
        }
        let g = self.g;
        let text = self.texts.run(g, run)?;
        let regex = || Ok(Lexeme::Regex(Hir::concat(run.iter().map(|x| inline(g, x)).collect::<Result<Vec<_>>>()?)));
        let sym = self.keyed_term(text, name, None, regex)?;
        let Sym::T(t) = sym else { unreachable!("keyed_term makes terminals") };
        // Only the empty string: the start accepts and reads nothing more.
        let dfa = &self.terms[t.index()].dfa;
        let empty = dfa.start() != StateId::DEAD && dfa.is_accepting(dfa.start()) && !dfa.can_continue(dfa.start());
        self.runs.insert(key, (sym, empty));
        Ok((sym, empty))
    }

    /// One symbol standing for a non-regular expression.
    fn sym(&mut self, e: &'a Expr) -> Result<Sym> {
        match e {
            Expr::Rule(r) => self.rule_sym(*r),
            Expr::Repeat { body, min, max } => self.repeat(body, *min, *max),
            // One lexeme (a pattern ∧ length, an enum's complement) is often referenced from
            // many places: its key text, a walk of its whole regex, is made once.
            Expr::Mark(m) => self.marked_term(m),
            Expr::Lexeme(l) => {
                let at = std::sync::Arc::as_ptr(l) as usize;
                if let Some(&sym) = self.lexeme_syms.get(&at) {
                    return Ok(sym);
                }
                let sym = self.term(l, "lexeme")?;
                self.lexeme_syms.insert(at, sym);
                Ok(sym)
            }
            _ => {
                let nt = self.new_nt("group".into());
                for alt in self.alts(e)? {
                    self.add_prod(nt, alt)?;
                }
                Ok(Sym::N(nt))
            }
        }
    }

    fn repeat(&mut self, body: &'a Expr, min: u32, max: Option<u32>) -> Result<Sym> {
        let copies = max.unwrap_or(min);
        if copies > 1 && self.is_regular(body) {
            if let Some(sym) = self.counted_term(body, min, max, copies > self.limits.max_unrolled)? {
                return Ok(sym);
            }
        }
        if copies > self.limits.max_unrolled {
            return Err(Error::Limit {
                kind: LimitKind::Unrolled,
                what: "copies of a repeated non-regular expression".into(),
                limit: self.limits.max_unrolled as usize,
                hint: Some(format!("{{{min},{}}} unrolls to {copies}", max.map_or(String::new(), |m| m.to_string()))),
            });
        }
        let b = self.sym_or_seq(body)?;
        // star → ε | star b   (left recursion suits Earley)
        let tail = match max {
            None => {
                let star = self.new_nt("repeat*".into());
                self.add_prod(star, vec![])?;
                self.add_prod(star, vec![Sym::N(star), b])?;
                Some(Sym::N(star))
            }
            Some(max) if max > min => {
                // opt_k → ε | b opt_{k-1}
                let mut next: Option<Sym> = None;
                for _ in 0..(max - min) {
                    let opt = self.new_nt("repeat?".into());
                    self.add_prod(opt, vec![])?;
                    let mut rhs = vec![b];
                    rhs.extend(next);
                    self.add_prod(opt, rhs)?;
                    next = Some(Sym::N(opt));
                }
                next
            }
            _ => None,
        };
        let h = self.new_nt("repeat".into());
        let mut rhs = vec![b; min as usize];
        rhs.extend(tail);
        self.add_prod(h, rhs)?;
        Ok(Sym::N(h))
    }

    /// A counted repetition of a regular body as one terminal (`[a-zа-я]{0,2048}` is regular,
    /// whatever the count): a counter DFA, its states linear in the count (computed on the fly
    /// when many), where the body is countable (prefix-free, see [`Dfa::is_countable`]). Else,
    /// only when `must` (unrolling is over its limit), the repeated regex, determinized under
    /// the DFA limits; `None`: unroll it.
    fn counted_term(&mut self, body: &'a Expr, min: u32, max: Option<u32>, must: bool) -> Result<Option<Sym>> {
        let unit = inline(self.g, body)?;
        let unit_dfa = Dfa::shared(&Lexeme::Regex(unit.clone()), self.limits.dfa)?;
        if !must && !Dfa::is_countable(&unit_dfa, min, max, b"") {
            return Ok(None);
        }
        let name = match body {
            Expr::Rule(r) => self.g.rule(*r).name.clone(),
            _ => "lexeme".to_string(),
        };
        self.term(&Lexeme::counted(b"", unit, min, max, b""), &name).map(Some)
    }

    fn sym_or_seq(&mut self, e: &'a Expr) -> Result<Sym> {
        if self.is_regular(e) {
            return Ok(self.regular_term(&[e])?.0);
        }
        self.sym(e)
    }
}

/// A literal, a regex, or a set of literals: one lexeme whatever its weight. A set of literals
/// of any size (an `enum` of hundreds of values) is one finite lexeme too: its trie DFA is
/// linear in its size, so the weight bound (a guard against regexes that blow up) does not
/// apply; as one alternative per value it was hundreds of terminals, scanned side by side at
/// every mask.
fn regular_at_any_weight(e: &Expr) -> bool {
    match e {
        Expr::Literal(_) | Expr::Regex(_) => true,
        Expr::Alt(xs) => xs.iter().all(|x| matches!(x, Expr::Literal(_))),
        _ => false,
    }
}

fn flatten_seq<'e>(xs: &'e [Expr], out: &mut Vec<&'e Expr>) {
    for x in xs {
        match x {
            Expr::Seq(ys) => flatten_seq(ys, out),
            Expr::Empty => {}
            _ => out.push(x),
        }
    }
}
