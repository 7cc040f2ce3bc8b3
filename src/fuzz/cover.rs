//! The generator: a top-down random expansion of the grammar IR that, in coverage mode, steers
//! each choice toward the units (alternatives, repetition boundaries) earlier samples have not
//! used yet, and records the derivation it built.
//!
//! Bounds: every recursive rule entered (one on a cycle of references) counts one level of
//! depth; once `max_depth` is reached only
//! alternatives that close without going deeper are taken (the least-height ones if none fits),
//! and once the bytes left (`max_bytes` minus what the rest of the derivation needs at least)
//! run short only the shortest alternatives and counts are taken. Past the depth bound every
//! choice minimises the least rule-nesting height, which strictly decreases, so generation
//! always ends. Both bounds are soft only where the grammar itself needs more.
//!
//! Coverage is counted from the derivation the generator built, and only for samples that the
//! caller has verified ([`Generator::record`]): a unit counts as covered when a sample that is
//! in the language used it.

use std::sync::Arc;

use super::leaf::Leaves;
use super::plan::{addr, Plan, UnitKind, INF};
use super::Source;
use crate::error::{Error, Result};
use crate::grammar::{Expr, Grammar, RuleId};

/// Bounds and mode of the generator.
#[derive(Debug, Clone, Copy)]
pub struct GenOptions {
    /// Recursion depth (recursive rules entered) beyond which only closing choices are made
    /// (default 24).
    pub max_depth: u32,
    /// Output size in bytes beyond which only the shortest choices are made (default 256).
    /// With any tokenizer a sample of at most this many bytes has at most this many tokens.
    pub max_bytes: u32,
    /// Steer toward units earlier samples did not use.
    pub cover: bool,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions { max_depth: 24, max_bytes: 256, cover: true }
    }
}

/// One step of a derivation, over the byte span `start..end` of the text.
#[derive(Debug, Clone)]
pub struct Trace {
    pub start: usize,
    pub end: usize,
    pub kind: TraceKind,
}

#[derive(Debug, Clone)]
pub enum TraceKind {
    /// A rule expansion.
    Rule(RuleId),
    /// A literal of the grammar.
    Literal,
    /// A regex or lexeme terminal.
    Terminal,
    /// A repetition: its bounds and the span of each copy.
    Repeat { rule: RuleId, min: u32, max: Option<u32>, copies: Vec<(usize, usize)> },
}

/// A generated text with the derivation that produced it.
#[derive(Debug, Clone)]
pub struct Derivation {
    pub text: Vec<u8>,
    /// Units used (indices into [`Generator::units`]), possibly repeated.
    pub units: Vec<usize>,
    pub trace: Vec<Trace>,
}

/// Can `e` come out longer than its shortest form?
fn growable(e: &Expr) -> bool {
    match e {
        Expr::Empty | Expr::Literal(_) => false,
        Expr::Seq(xs) => xs.iter().any(growable),
        _ => true,
    }
}

/// Coverage reached so far, over reachable units.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Coverage {
    pub covered: usize,
    pub total: usize,
    pub rules_covered: usize,
    pub rules_total: usize,
    /// Per rule with units: (name, covered, total).
    pub per_rule: Vec<(String, usize, usize)>,
    /// Names of the reachable units not yet covered.
    pub uncovered: Vec<String>,
}

pub struct Generator {
    g: Arc<Grammar>,
    plan: Plan,
    leaves: Leaves,
    opts: GenOptions,
    counts: Vec<u64>,
    /// Per rule, during one draw: does it (or a rule it reaches) have uncovered units?
    pending: Vec<bool>,
    /// Units used in the draw in progress (treated as covered for steering).
    used_now: Vec<bool>,
    /// Rules that some verified sample expanded.
    rules_used: Vec<bool>,
}

struct Cx<'s> {
    src: &'s mut dyn Source,
    out: Vec<u8>,
    units: Vec<usize>,
    trace: Vec<Trace>,
}

impl Generator {
    pub fn new(g: Arc<Grammar>, opts: GenOptions) -> Result<Generator> {
        let plan = Plan::new(&g);
        if plan.rule_size[g.start.0 as usize] == INF {
            return Err(Error::invalid(format!("the grammar derives no finite string from its start rule `{}`", g.rule(g.start).name)));
        }
        let (n_units, n_rules) = (plan.units.len(), g.rules.len());
        Ok(Generator {
            g,
            plan,
            leaves: Leaves::default(),
            opts,
            counts: vec![0; n_units],
            pending: vec![false; n_rules],
            used_now: vec![false; n_units],
            rules_used: vec![false; n_rules],
        })
    }

    pub fn grammar(&self) -> &Arc<Grammar> {
        &self.g
    }

    pub fn options(&self) -> GenOptions {
        self.opts
    }

    pub fn units(&self) -> &[super::plan::Unit] {
        &self.plan.units
    }

    /// Draws one derivation, with choices from `src`.
    pub fn draw(&mut self, src: &mut dyn Source) -> Result<Derivation> {
        self.refresh_pending();
        self.used_now.iter_mut().for_each(|u| *u = false);
        let g = self.g.clone();
        let mut cx = Cx { src, out: Vec::new(), units: Vec::new(), trace: Vec::new() };
        self.rule(&g, g.start, None, &mut cx, 0, 0)?;
        Ok(Derivation { text: cx.out, units: cx.units, trace: cx.trace })
    }

    /// Counts the units of a derivation whose text was verified to be in the language.
    /// Returns how many units it covered for the first time.
    pub fn record(&mut self, d: &Derivation) -> usize {
        let mut new = 0;
        for &u in &d.units {
            if self.counts[u] == 0 {
                new += 1;
            }
            self.counts[u] += 1;
        }
        for t in &d.trace {
            if let TraceKind::Rule(r) = t.kind {
                self.rules_used[r.0 as usize] = true;
            }
        }
        new
    }

    pub fn coverage(&self) -> Coverage {
        let (covered, total) = self.plan.totals(&self.counts);
        let mut per_rule = Vec::new();
        for (i, r) in self.g.rules.iter().enumerate() {
            let mine: Vec<usize> = (0..self.plan.units.len()).filter(|&u| self.plan.units[u].rule.0 as usize == i && self.plan.units[u].reachable).collect();
            if !mine.is_empty() {
                let c = mine.iter().filter(|&&u| self.counts[u] > 0).count();
                per_rule.push((r.name.clone(), c, mine.len()));
            }
        }
        let uncovered = (0..self.plan.units.len())
            .filter(|&u| self.plan.units[u].reachable && self.counts[u] == 0)
            .map(|u| self.plan.units[u].describe(&self.g))
            .collect();
        let rules_total = self.plan.rule_reachable.iter().filter(|&&r| r).count();
        let rules_covered = (0..self.g.rules.len()).filter(|&r| self.plan.rule_reachable[r] && self.rules_used[r]).count();
        Coverage { covered, total, rules_covered, rules_total, per_rule, uncovered }
    }

    fn uncovered(&self, u: usize) -> bool {
        self.plan.units[u].reachable && self.counts[u] == 0 && !self.used_now[u]
    }

    /// Rules with an uncovered unit in their body or in a rule they reach.
    fn refresh_pending(&mut self) {
        let n = self.g.rules.len();
        self.pending = vec![false; n];
        if !self.opts.cover {
            return;
        }
        for (u, unit) in self.plan.units.iter().enumerate() {
            if unit.reachable && self.counts[u] == 0 {
                self.pending[unit.rule.0 as usize] = true;
            }
        }
        loop {
            let mut changed = false;
            for r in 0..n {
                if !self.pending[r] && self.plan.rule_refs[r].iter().any(|x| self.pending[x.0 as usize]) {
                    self.pending[r] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
    }

    /// Does the subtree `e` (an alternative or a repetition body) lead to something uncovered?
    fn leads_to_uncovered(&self, e: &Expr) -> bool {
        let a = addr(e);
        self.plan.local_units.get(&a).is_some_and(|us| us.iter().any(|&u| self.uncovered(u)))
            || self.plan.local_rules.get(&a).is_some_and(|rs| rs.iter().any(|r| self.pending[r.0 as usize]))
    }

    fn use_unit(&mut self, u: usize, cx: &mut Cx) {
        self.used_now[u] = true;
        cx.units.push(u);
    }

    /// Expands rule `r`, referenced from rule `from` (`None` for the start).
    fn rule(&mut self, g: &Grammar, r: RuleId, from: Option<RuleId>, cx: &mut Cx, depth: u32, reserve: u32) -> Result<()> {
        let start = cx.out.len();
        let k = cx.trace.len();
        cx.trace.push(Trace { start, end: start, kind: TraceKind::Rule(r) });
        // A recursive entry (within one strongly connected component) nests one level deeper.
        let depth = depth + u32::from(from.is_some_and(|f| self.plan.scc[r.0 as usize] == self.plan.scc[f.0 as usize]));
        self.expr(g, &g.rule(r).body, r, cx, depth, reserve)?;
        cx.trace[k].end = cx.out.len();
        Ok(())
    }

    /// Bytes left for `e` when `reserve` bytes must follow it.
    fn room(&self, cx: &Cx, reserve: u32) -> u32 {
        self.opts.max_bytes.saturating_sub(cx.out.len() as u32).saturating_sub(reserve)
    }

    fn expr(&mut self, g: &Grammar, e: &Expr, rule: RuleId, cx: &mut Cx, depth: u32, reserve: u32) -> Result<()> {
        match e {
            Expr::Empty => {}
            Expr::Literal(s) => {
                let start = cx.out.len();
                cx.out.extend_from_slice(s.as_bytes());
                cx.trace.push(Trace { start, end: cx.out.len(), kind: TraceKind::Literal });
            }
            Expr::Regex(h) => {
                let start = cx.out.len();
                let room = self.room(cx, reserve);
                let shortest = room == 0 || depth > self.opts.max_depth;
                let s = self.leaves.regex(h, cx.src, shortest, room)?;
                cx.out.extend_from_slice(&s);
                cx.trace.push(Trace { start, end: cx.out.len(), kind: TraceKind::Terminal });
            }
            Expr::Lexeme(l) => {
                let start = cx.out.len();
                let room = self.room(cx, reserve);
                let shortest = room == 0 || depth > self.opts.max_depth;
                let s = self.leaves.lexeme(l, cx.src, shortest, room)?;
                cx.out.extend_from_slice(&s);
                cx.trace.push(Trace { start, end: cx.out.len(), kind: TraceKind::Terminal });
            }
            Expr::Rule(r) => self.rule(g, *r, Some(rule), cx, depth, reserve)?,
            Expr::Seq(xs) => {
                let sizes: Vec<u32> = xs.iter().map(|x| self.plan.size(x)).collect();
                for (i, x) in xs.iter().enumerate() {
                    let after = sizes[i + 1..].iter().fold(reserve, |a, &s| a.saturating_add(s));
                    // When a later part can nest (reaches a recursive rule), a part may spend
                    // at most half of the free room if it can nest too, an eighth if it cannot
                    // (whitespace, a name): the first parts cannot starve the rest.
                    let big = |e: &Expr| growable(e) && self.plan.deep(e);
                    let free = self.room(cx, after);
                    let share = match (growable(x), big(x), xs[i + 1..].iter().any(big)) {
                        (true, true, true) => free / 2,
                        (true, false, true) => free - free / 8,
                        _ => 0,
                    };
                    self.expr(g, x, rule, cx, depth, after.saturating_add(share))?;
                }
            }
            Expr::Alt(xs) => {
                let first = self.plan.nodes[&addr(e)].first_unit;
                let i = self.pick_alt(xs, first, rule, cx, depth, reserve);
                self.use_unit(first + i, cx);
                self.expr(g, &xs[i], rule, cx, depth, reserve)?;
            }
            Expr::Repeat { body, min, max } => self.repeat(g, e, body, *min, *max, rule, cx, depth, reserve)?,
        }
        Ok(())
    }

    fn pick_alt(&mut self, xs: &[Expr], first: usize, rule: RuleId, cx: &mut Cx, depth: u32, reserve: u32) -> usize {
        let depth_left = self.opts.max_depth.saturating_sub(depth);
        let room = self.room(cx, reserve);
        // Candidates: productive alternatives, smallest first (so a byte-stream source that
        // runs out, or shrinks toward 0, gets the shortest choice).
        let mut cands: Vec<(u32, u32, usize)> =
            xs.iter().enumerate().map(|(i, x)| (self.plan.size(x), self.plan.height(x, rule), i)).filter(|c| c.1 != INF).collect();
        cands.sort();
        let fits: Vec<usize> = cands.iter().filter(|c| c.1 <= depth_left && c.0 <= room).map(|c| c.2).collect();
        if fits.is_empty() || cx.src.exhausted() {
            // Close as fast as possible: least height past the depth bound, else least size.
            let best = if depth >= self.opts.max_depth {
                cands.iter().min_by_key(|c| (c.1, c.0)).unwrap()
            } else {
                cands.iter().min_by_key(|c| (c.0, c.1)).unwrap()
            };
            return best.2;
        }
        if !self.opts.cover {
            return fits[cx.src.below(fits.len())];
        }
        let weights: Vec<u32> = fits
            .iter()
            .map(|&i| 1 + if self.uncovered(first + i) { 16 } else { 0 } + if self.leads_to_uncovered(&xs[i]) { 8 } else { 0 })
            .collect();
        fits[cx.src.weighted(&weights)]
    }

    #[allow(clippy::too_many_arguments)]
    fn repeat(&mut self, g: &Grammar, e: &Expr, body: &Expr, min: u32, max: Option<u32>, rule: RuleId, cx: &mut Cx, depth: u32, reserve: u32) -> Result<()> {
        let first = self.plan.nodes[&addr(e)].first_unit;
        let has_max = self.plan.units.get(first + 2).is_some_and(|u| u.kind == UnitKind::RepeatMax && self.plan.units[first].node == u.node && self.plan.units[first].rule == u.rule);
        let (bsize, bheight) = (self.plan.size(body), self.plan.height(body, rule));
        let depth_left = self.opts.max_depth.saturating_sub(depth);
        // The most copies the bounds allow: extra copies must fit in the room and the depth.
        let room = self.room(cx, reserve.saturating_add(bsize.saturating_mul(min)));
        let hi = max.unwrap_or(min.saturating_add(4));
        let extra_ok = bheight != INF && bheight <= depth_left && !cx.src.exhausted();
        let affordable = if !extra_ok { 0 } else if bsize == 0 { hi - min } else { (room / bsize).min(hi - min) };
        let hi = min + affordable;
        let target = if hi == min {
            min
        } else if !self.opts.cover {
            min + cx.src.below((hi - min) as usize + 1) as u32
        } else {
            // Options: exactly min, something between, exactly max (when it has a unit).
            let body_pending = self.leads_to_uncovered(body);
            let mut opts: Vec<(u32, u32)> = vec![(min, 1 + if self.uncovered(first) { 16 } else { 0 })];
            let more_hi = if has_max && max == Some(hi) { hi - 1 } else { hi };
            if more_hi > min {
                let k = min + 1 + cx.src.below((more_hi - min) as usize) as u32;
                opts.push((k, 1 + if self.uncovered(first + 1) { 16 } else { 0 } + if body_pending { 8 } else { 0 }));
            }
            if has_max && max == Some(hi) {
                opts.push((hi, 1 + if self.uncovered(first + 2) { 16 } else { 0 } + if body_pending { 8 } else { 0 }));
            }
            let w: Vec<u32> = opts.iter().map(|o| o.1).collect();
            opts[cx.src.weighted(&w)].0
        };
        let k = cx.trace.len();
        cx.trace.push(Trace { start: cx.out.len(), end: 0, kind: TraceKind::Repeat { rule, min, max, copies: Vec::new() } });
        let mut n = 0;
        while n < target {
            let left = if n + 1 < min { bsize.saturating_mul(min - n - 1) } else { 0 };
            // An extra copy that no longer fits (earlier copies came out long) is not made.
            if n >= min && (bsize > self.room(cx, reserve) || cx.src.exhausted()) {
                break;
            }
            let start = cx.out.len();
            // Copies share the free room equally: copy n of target may use 1/(target - n).
            let free = self.room(cx, reserve.saturating_add(left));
            let share = free - free / (target - n);
            self.expr(g, body, rule, cx, depth, reserve.saturating_add(left).saturating_add(share))?;
            if let TraceKind::Repeat { copies, .. } = &mut cx.trace[k].kind {
                copies.push((start, cx.out.len()));
            }
            n += 1;
        }
        cx.trace[k].end = cx.out.len();
        let unit = if n == min {
            first
        } else if has_max && Some(n) == max {
            first + 2
        } else {
            first + 1
        };
        self.use_unit(unit, cx);
        Ok(())
    }
}
