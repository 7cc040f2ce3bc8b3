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
//! Steering (coverage mode): before each draw the generator computes, for every rule, the
//! fewest bytes a derivation from it needs to use a unit no verified sample has used yet
//! ([`Generator`]'s `new_cost`, a least fixpoint like the plan's sizes). Each choice then
//! weighs its options by what they lead to *within the bytes this part of the sample has*:
//! an uncovered alternative or boundary first, then options from which an uncovered unit is
//! reachable in the room left, and, while the grammar still has uncovered units, the shortest
//! option otherwise (extra copies, optional parts and long leaves that lead to nothing new
//! would only spend the bytes the sample needs to get there). Every other draw is greedy
//! instead: at each choice it takes, all but certainly, the option nearest to a new unit, so
//! units behind long chains of choices (an object's "the first member is member i": i skips,
//! then an emit) are reached in one draw rather than by luck at every link; the broad draws
//! between cover more per sample. Leaves (strings, whitespace) get
//! a small share of the room while there is something left to cover. Once everything is
//! covered, choices are random again, so samples keep their variety.
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

/// Bytes a leaf may use while uncovered units remain.
const LEAF_ROOM_HUNTING: u32 = 8;

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
    /// Per rule, during one draw: the fewest bytes a derivation from it needs to use a unit
    /// no verified sample has used (`INF`: none reachable). Computed at the start of a draw.
    new_cost: Vec<u32>,
    /// During one draw: does the grammar still have an uncovered unit reachable from the start?
    hunting: bool,
    /// Draws so far: every other one steers to the nearest new unit (see `pick_alt`).
    draws: u64,
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
            return Err(Error::param(format!(
                "the grammar derives no finite string from its start rule `{}`",
                g.rule(g.start).name
            )));
        }
        let (n_units, n_rules) = (plan.units.len(), g.rules.len());
        Ok(Generator {
            g,
            plan,
            leaves: Leaves::default(),
            opts,
            counts: vec![0; n_units],
            new_cost: vec![INF; n_rules],
            hunting: false,
            draws: 0,
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

    /// The byte budget [`GenOptions::max_bytes`] for a grammar of this many coverage units when
    /// the caller gives none: a sample can only use the units it has room for, so large
    /// grammars (a Kubernetes schema has ~3,000) get larger samples — 4 bytes per unit, between
    /// 256 and 16,384 bytes.
    pub fn auto_max_bytes(units: usize) -> u32 {
        (units.saturating_mul(4)).clamp(256, 16_384) as u32
    }

    /// The recursion depth [`GenOptions::max_depth`] for this grammar when the caller gives
    /// none: deep enough to reach every reachable rule and close from it
    /// ([`Plan::depth_to_reach_all`](super::plan::Plan::depth_to_reach_all)) with a margin of
    /// 8, at least 24 and at most 1,024. The byte budget still bounds each sample.
    pub fn auto_max_depth(&self) -> u32 {
        self.plan.depth_to_reach_all(self.g.start).saturating_add(8).clamp(24, 1024)
    }

    /// Sets the recursion depth bound for the next draws.
    pub fn set_max_depth(&mut self, max_depth: u32) {
        self.opts.max_depth = max_depth;
    }

    /// Sets the byte budget for the next draws.
    pub fn set_max_bytes(&mut self, max_bytes: u32) {
        self.opts.max_bytes = max_bytes;
    }

    pub fn units(&self) -> &[super::plan::Unit] {
        &self.plan.units
    }

    /// Draws one derivation, with choices from `src`.
    pub fn draw(&mut self, src: &mut dyn Source) -> Result<Derivation> {
        self.refresh_costs();
        self.draws += 1;
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
            let mine: Vec<usize> = (0..self.plan.units.len())
                .filter(|&u| self.plan.units[u].rule.0 as usize == i && self.plan.units[u].reachable)
                .collect();
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
        let rules_covered =
            (0..self.g.rules.len()).filter(|&r| self.plan.rule_reachable[r] && self.rules_used[r]).count();
        Coverage { covered, total, rules_covered, rules_total, per_rule, uncovered }
    }

    fn uncovered(&self, u: usize) -> bool {
        self.plan.units[u].reachable && self.counts[u] == 0 && !self.used_now[u]
    }

    /// Is unit `u` still to cover: not by a verified sample (`live`: nor in the draw so far)?
    fn is_new(&self, u: usize, live: bool) -> bool {
        self.plan.units[u].reachable && self.counts[u] == 0 && !(live && self.used_now[u])
    }

    /// Recomputes `new_cost` (a least fixpoint: costs only decrease) and `hunting`.
    fn refresh_costs(&mut self) {
        let n = self.g.rules.len();
        self.new_cost = vec![INF; n];
        self.hunting = false;
        if !self.opts.cover {
            return;
        }
        let g = self.g.clone();
        loop {
            let mut changed = false;
            // Later rules first: front ends mostly define a rule before the rules it uses.
            for r in (0..n).rev() {
                let c = self.cost(&g.rules[r].body, false);
                if c < self.new_cost[r] {
                    self.new_cost[r] = c;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        self.hunting = self.new_cost[g.start.0 as usize] != INF;
    }

    /// The fewest bytes a derivation of `e` needs to use a new unit ([`is_new`](Self::is_new)
    /// with `live`), `INF` when none is reachable.
    fn cost(&self, e: &Expr, live: bool) -> u32 {
        let add = |a: u32, b: u32| if a == INF || b == INF { INF } else { a.saturating_add(b).min(INF - 1) };
        let mul = |a: u32, k: u32| if a == INF { INF } else { a.saturating_mul(k).min(INF - 1) };
        match e {
            Expr::Empty
            | Expr::Literal(_)
            | Expr::Mark(_)
            | Expr::Token(_)
            | Expr::TokensBut { .. }
            | Expr::Regex(_)
            | Expr::Lexeme(_) => INF,
            Expr::Rule(r) => self.new_cost[r.0 as usize],
            Expr::Seq(xs) => {
                let total = xs.iter().fold(0, |a, x| add(a, self.plan.size(x)));
                if total == INF {
                    return INF;
                }
                xs.iter()
                    .map(|x| {
                        let c = self.cost(x, live);
                        if c == INF {
                            INF
                        } else {
                            add(c, total - self.plan.size(x))
                        }
                    })
                    .min()
                    .unwrap_or(INF)
            }
            Expr::Alt(xs) => {
                let first = self.plan.nodes[&addr(e)].first_unit;
                xs.iter()
                    .enumerate()
                    .map(|(i, x)| if self.is_new(first + i, live) { self.plan.size(x) } else { self.cost(x, live) })
                    .min()
                    .unwrap_or(INF)
            }
            Expr::Repeat { body, min, max } => {
                let info = &self.plan.nodes[&addr(e)];
                let bsize = self.plan.size(body);
                let mut best = add(self.cost(body, live), mul(bsize, (*min).max(1) - 1));
                for u in info.first_unit..self.plan.units.len() {
                    let unit = &self.plan.units[u];
                    if unit.node != info.index || unit.rule != info.rule {
                        break;
                    }
                    if !self.is_new(u, live) {
                        continue;
                    }
                    let copies = match unit.kind {
                        UnitKind::RepeatMin => *min,
                        UnitKind::RepeatMore => min + 1,
                        UnitKind::RepeatMax => max.unwrap_or(min + 1),
                        UnitKind::Alt(_) => continue,
                    };
                    best = best.min(mul(bsize, copies));
                }
                best
            }
        }
    }

    /// Does `e` (an alternative or a repetition body) lead to a new unit within `room` bytes?
    fn leads_to_uncovered(&self, e: &Expr, room: u32) -> bool {
        self.cost(e, true) <= room
    }

    fn use_unit(&mut self, u: usize, cx: &mut Cx) {
        self.used_now[u] = true;
        cx.units.push(u);
    }

    /// Expands rule `r`, referenced from rule `from` (`None` for the start).
    fn rule(
        &mut self,
        g: &Grammar,
        r: RuleId,
        from: Option<RuleId>,
        cx: &mut Cx,
        depth: u32,
        reserve: u32,
    ) -> Result<()> {
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

    /// Bytes a leaf may use: while there is something left to cover, a small share of the
    /// room (the rest is for the structure that reaches it).
    fn leaf_room(&self, cx: &Cx, reserve: u32) -> u32 {
        let room = self.room(cx, reserve);
        if self.hunting {
            room.min(LEAF_ROOM_HUNTING)
        } else {
            room
        }
    }

    fn expr(&mut self, g: &Grammar, e: &Expr, rule: RuleId, cx: &mut Cx, depth: u32, reserve: u32) -> Result<()> {
        match e {
            Expr::Empty => {}
            Expr::Literal(_) | Expr::Mark(_) | Expr::Token(_) => {
                // With no vocabulary, a token is its name (`<think>`).
                let name;
                let s = match e {
                    Expr::Mark(m) => m.text(),
                    Expr::Literal(s) => s,
                    Expr::Token(t) => {
                        name = t.text();
                        &name
                    }
                    _ => unreachable!("matched above"),
                };
                let start = cx.out.len();
                cx.out.extend_from_slice(s.as_bytes());
                cx.trace.push(Trace { start, end: cx.out.len(), kind: TraceKind::Literal });
            }
            // With no vocabulary, a run of tokens is its text.
            Expr::Regex(h) | Expr::TokensBut { text: h, .. } => {
                let start = cx.out.len();
                let room = self.leaf_room(cx, reserve);
                let shortest = room == 0 || depth > self.opts.max_depth;
                let s = self.leaves.regex(h, cx.src, shortest, room)?;
                cx.out.extend_from_slice(&s);
                cx.trace.push(Trace { start, end: cx.out.len(), kind: TraceKind::Terminal });
            }
            Expr::Lexeme(l) => {
                let start = cx.out.len();
                let room = self.leaf_room(cx, reserve);
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
                    let share = if self.hunting {
                        self.hunting_share(x, &xs[i + 1..], &sizes[i + 1..], free)
                    } else {
                        match (growable(x), big(x), xs[i + 1..].iter().any(big)) {
                            (true, true, true) => free / 2,
                            (true, false, true) => free - free / 8,
                            _ => 0,
                        }
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

    /// While hunting: the bytes part `x` of a sequence leaves to the parts after it (`rest`,
    /// whose shortest sizes are `sizes`), out of `free`. A part that leads to nothing new
    /// keeps to its shortest form; one that does gets the room, less what the later parts need
    /// to reach something new themselves (at most half).
    fn hunting_share(&self, x: &Expr, rest: &[Expr], sizes: &[u32], free: u32) -> u32 {
        if self.cost(x, true) > free {
            return free;
        }
        let later = rest.iter().zip(sizes).map(|(y, &s)| self.cost(y, true).saturating_sub(s)).min().unwrap_or(INF);
        if later >= free {
            0
        } else {
            later.min(free / 2)
        }
    }

    fn pick_alt(&mut self, xs: &[Expr], first: usize, rule: RuleId, cx: &mut Cx, depth: u32, reserve: u32) -> usize {
        let depth_left = self.opts.max_depth.saturating_sub(depth);
        let room = self.room(cx, reserve);
        // Candidates: productive alternatives, smallest first (so a byte-stream source that
        // runs out, or shrinks toward 0, gets the shortest choice).
        let mut cands: Vec<(u32, u32, usize)> = xs
            .iter()
            .enumerate()
            .map(|(i, x)| (self.plan.size(x), self.plan.height(x, rule), i))
            .filter(|c| c.1 != INF)
            .collect();
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
        let new_here: Vec<bool> = fits.iter().map(|&i| self.uncovered(first + i)).collect();
        // The bytes each option needs to use a new unit: its own size if it is one, else what
        // reaching one inside it costs (`INF`: none). Every other draw takes the nearest at
        // every choice (all but certainly: a unit behind a chain of 30 choices, skip, skip,
        // ..., take, as the first member of an object is, must survive each link), so such a
        // unit is reached in one sample instead of by luck at every link; the draws between
        // weigh every option that leads somewhere new alike, which keeps samples broad (each
        // covers more: greedy draws alone halved one schema's coverage at 50 samples).
        let costs: Vec<u32> = fits
            .iter()
            .zip(&new_here)
            .map(|(&i, &new)| if new { self.plan.size(&xs[i]) } else { self.cost(&xs[i], true) })
            .collect();
        let nearest = costs.iter().copied().filter(|&c| c <= room).min();
        let greedy = self.draws % 2 == 0;
        let weights: Vec<u32> = if let Some(best) = nearest {
            (0..fits.len())
                .map(|k| match greedy {
                    true if costs[k] == best => 1024,
                    true => 1,
                    false => 1 + 32 * u32::from(new_here[k]) + 16 * u32::from(costs[k] <= room),
                })
                .collect()
        } else if self.hunting {
            // Nothing new from here: the shortest alternatives (first in `fits`), to keep the
            // bytes for the parts of the sample that lead somewhere new.
            let least = self.plan.size(&xs[fits[0]]);
            fits.iter().map(|&i| if self.plan.size(&xs[i]) == least { 16 } else { 1 }).collect()
        } else {
            vec![1; fits.len()]
        };
        fits[cx.src.weighted(&weights)]
    }

    #[allow(clippy::too_many_arguments)]
    fn repeat(
        &mut self,
        g: &Grammar,
        e: &Expr,
        body: &Expr,
        min: u32,
        max: Option<u32>,
        rule: RuleId,
        cx: &mut Cx,
        depth: u32,
        reserve: u32,
    ) -> Result<()> {
        let first = self.plan.nodes[&addr(e)].first_unit;
        let has_max = self.plan.units.get(first + 2).is_some_and(|u| {
            u.kind == UnitKind::RepeatMax
                && self.plan.units[first].node == u.node
                && self.plan.units[first].rule == u.rule
        });
        let (bsize, bheight) = (self.plan.size(body), self.plan.height(body, rule));
        let depth_left = self.opts.max_depth.saturating_sub(depth);
        // The most copies the bounds allow: extra copies must fit in the room and the depth.
        let room = self.room(cx, reserve.saturating_add(bsize.saturating_mul(min)));
        let hi = max.unwrap_or(min.saturating_add(4));
        let extra_ok = bheight != INF && bheight <= depth_left && !cx.src.exhausted();
        // (A body of size 0 needs no room: as many copies as the bounds allow.)
        let mut affordable = if extra_ok { room.checked_div(bsize).map_or(hi - min, |n| n.min(hi - min)) } else { 0 };
        if self.hunting && affordable > 1 {
            // Copies that lead somewhere new need room each: no more of them than fit.
            let c = self.cost(body, true);
            if c != INF && c > bsize {
                affordable = affordable.min((room / c).max(1));
            }
        }
        let hi = min + affordable;
        let target = if hi == min {
            min
        } else if !self.opts.cover {
            min + cx.src.below((hi - min) as usize + 1) as u32
        } else {
            // Options: exactly min, something between, exactly max (when it has a unit).
            let body_pending = self.leads_to_uncovered(body, room);
            let weight = |new: bool, body: bool| 1 + 32 * u32::from(new) + 16 * u32::from(body);
            let mut opts: Vec<(u32, u32)> = vec![(min, weight(self.uncovered(first), false))];
            let more_hi = if has_max && max == Some(hi) { hi - 1 } else { hi };
            if more_hi > min {
                let k = min + 1 + cx.src.below((more_hi - min) as usize) as u32;
                opts.push((k, weight(self.uncovered(first + 1), body_pending)));
            }
            if has_max && max == Some(hi) {
                opts.push((hi, weight(self.uncovered(first + 2), body_pending)));
            }
            if self.hunting && opts.iter().all(|o| o.1 == 1) {
                // Nothing new from here: the fewest copies, keeping the bytes for elsewhere.
                opts[0].1 = 16;
            }
            let w: Vec<u32> = opts.iter().map(|o| o.1).collect();
            opts[cx.src.weighted(&w)].0
        };
        let k = cx.trace.len();
        cx.trace.push(Trace {
            start: cx.out.len(),
            end: 0,
            kind: TraceKind::Repeat { rule, min, max, copies: Vec::new() },
        });
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
