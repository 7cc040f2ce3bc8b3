//! What the generator knows about a grammar before it draws anything: the coverage units
//! (every alternative of every `Alt`, and the boundary counts of every `Repeat`), which rules
//! and expressions derive anything at all, the shortest output of each (bytes), which rules are
//! recursive, and the least recursion depth of each.
//!
//! Expression nodes are identified by their address inside the borrowed [`Grammar`] (the IR is
//! an immutable tree while the plan lives), numbered in pre-order per rule.
//!
//! Invariants:
//! - `size` and `height` are least fixpoints; `INF` means "derives nothing".
//! - A unit is *reachable* when some derivation from the start rule uses it; only reachable
//!   units count in the coverage total.

use std::collections::HashMap;

use crate::grammar::{Expr, Grammar, RuleId};
use crate::regular::Lexeme;

/// "Derives nothing" for sizes and heights.
pub const INF: u32 = u32::MAX;

/// Largest `Repeat` upper bound that gets a unit of its own for "exactly `max` copies".
/// Bigger bounds (a `maxItems: 10000`) only get "fewest" and "more than fewest".
pub const MAX_BOUNDARY_COUNT: u32 = 16;

/// One thing a sample can exercise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnitKind {
    /// Alternative `i` of an `Alt`.
    Alt(u32),
    /// A `Repeat` with exactly `min` copies (for `?`: absent).
    RepeatMin,
    /// A `Repeat` with more than `min` copies (and fewer than `max` when there is a unit for it).
    RepeatMore,
    /// A `Repeat` with exactly `max` copies (bounded, `max > min`, `max ≤ MAX_BOUNDARY_COUNT`).
    RepeatMax,
}

#[derive(Debug, Clone)]
pub struct Unit {
    pub rule: RuleId,
    /// Pre-order index of the `Alt`/`Repeat` node inside its rule's body.
    pub node: u32,
    pub kind: UnitKind,
    pub reachable: bool,
}

impl Unit {
    /// A short human name: `rule#node/alt2`, `rule#node/min`, ...
    pub fn describe(&self, g: &Grammar) -> String {
        let k = match self.kind {
            UnitKind::Alt(i) => format!("alt{i}"),
            UnitKind::RepeatMin => "min".into(),
            UnitKind::RepeatMore => "more".into(),
            UnitKind::RepeatMax => "max".into(),
        };
        format!("{}#{}/{k}", g.rule(self.rule).name, self.node)
    }
}

/// Facts about one `Alt`/`Repeat` node.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    pub rule: RuleId,
    /// First unit of this node (an `Alt`'s alternative `i` is `first_unit + i`; a `Repeat` has
    /// `RepeatMin`, then `RepeatMore`, then `RepeatMax` if present).
    pub first_unit: usize,
    pub index: u32,
}

pub struct Plan {
    pub units: Vec<Unit>,
    /// `Alt`/`Repeat` node address → facts.
    pub nodes: HashMap<usize, NodeInfo>,
    /// Shortest output of each rule, bytes.
    pub rule_size: Vec<u32>,
    /// Least recursion depth of each rule: the fewest *recursive entries* (a rule entered from
    /// a rule of its own strongly connected component) a derivation from it makes.
    pub rule_height: Vec<u32>,
    /// The strongly connected component of each rule in the reference graph. Only entries
    /// within a component nest without bound, so only they count toward depth: the long
    /// chains a schema compiles to (one rule per property position) do not.
    pub scc: Vec<u32>,
    /// Rules that reach a recursive rule (themselves included): their output can grow
    /// without bound.
    pub rule_deep: Vec<bool>,
    pub rule_reachable: Vec<bool>,
    /// Units inside each node's subtree, not through rule references, by node address
    /// (only for the alternatives of `Alt`s and the bodies of `Repeat`s).
    pub local_units: HashMap<usize, Vec<usize>>,
    /// Rules referenced directly inside each such subtree.
    pub local_rules: HashMap<usize, Vec<RuleId>>,
    /// Rules each rule references directly.
    pub rule_refs: Vec<Vec<RuleId>>,
}

pub fn addr(e: &Expr) -> usize {
    e as *const Expr as usize
}

/// Smallest length of any string a regex leaf matches, `INF` when it matches nothing.
pub fn hir_min(h: &regex_syntax::hir::Hir) -> u32 {
    h.properties().minimum_len().map_or(INF, |n| n.min(INF as usize - 1) as u32)
}

/// A lower bound on the shortest string of a lexeme (exact for regexes and counted strings).
pub fn lexeme_min(l: &Lexeme) -> u32 {
    match l {
        Lexeme::Regex(h) => hir_min(h),
        Lexeme::Counted { full, .. } => hir_min(full),
        Lexeme::And(xs) => xs.iter().map(lexeme_min).max().unwrap_or(0),
        Lexeme::Not(_) => 0,
    }
}

impl Plan {
    /// The recursion depth that lets a derivation from `start` reach every reachable rule and
    /// still close from it: the most, over those rules, of the fewest recursive entries on the
    /// way there (a 0-1 breadth-first search over the references: an entry within a component
    /// costs one) plus the rule's own least height. A schema whose definitions nest through
    /// long cycles of `$ref`s needs far more than the default depth to reach its inner ones.
    pub fn depth_to_reach_all(&self, start: RuleId) -> u32 {
        let n = self.rule_refs.len();
        let mut reach = vec![INF; n];
        let mut queue = std::collections::VecDeque::from([start.0 as usize]);
        reach[start.0 as usize] = 0;
        while let Some(r) = queue.pop_front() {
            for q in &self.rule_refs[r] {
                let q = q.0 as usize;
                let cost = u32::from(self.scc[q] == self.scc[r]);
                if reach[r] + cost < reach[q] {
                    reach[q] = reach[r] + cost;
                    match cost {
                        0 => queue.push_front(q),
                        _ => queue.push_back(q),
                    }
                }
            }
        }
        (0..n)
            .filter(|&r| reach[r] != INF && self.rule_height[r] != INF)
            .map(|r| reach[r].saturating_add(self.rule_height[r]))
            .max()
            .unwrap_or(0)
    }

    /// The plan of `g`. Node addresses are only meaningful while `g` is neither moved nor
    /// changed: keep it behind an `Arc` beside the plan.
    pub fn new(g: &Grammar) -> Plan {
        let n = g.rules.len();
        let mut plan = Plan {
            units: Vec::new(),
            nodes: HashMap::new(),
            rule_size: vec![INF; n],
            rule_height: vec![INF; n],
            rule_reachable: vec![false; n],
            scc: vec![0; n],
            rule_deep: vec![false; n],
            local_units: HashMap::new(),
            local_rules: HashMap::new(),
            rule_refs: Vec::new(),
        };
        for (i, r) in g.rules.iter().enumerate() {
            let mut k = 0;
            plan.number(&r.body, RuleId(i as u32), &mut k);
            let mut refs = Vec::new();
            r.body.for_each_rule(&mut |x| refs.push(x));
            refs.sort();
            refs.dedup();
            plan.rule_refs.push(refs);
        }
        plan.scc = components(&plan.rule_refs);
        let mut comp_size = HashMap::new();
        plan.scc.iter().for_each(|&c| *comp_size.entry(c).or_insert(0usize) += 1);
        for r in 0..n {
            plan.rule_deep[r] = comp_size[&plan.scc[r]] > 1 || plan.rule_refs[r].contains(&RuleId(r as u32));
        }
        loop {
            let mut changed = false;
            for r in 0..n {
                if !plan.rule_deep[r] && plan.rule_refs[r].iter().any(|q| plan.rule_deep[q.0 as usize]) {
                    plan.rule_deep[r] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        // Least fixpoints of sizes and heights (values only decrease; each pass that changes
        // something lowers at least one value, and all are bounded below).
        loop {
            let mut changed = false;
            for (i, r) in g.rules.iter().enumerate() {
                let s = plan.size(&r.body);
                let h = plan.height(&r.body, RuleId(i as u32));
                if s < plan.rule_size[i] {
                    plan.rule_size[i] = s;
                    changed = true;
                }
                if h < plan.rule_height[i] {
                    plan.rule_height[i] = h;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        for r in &g.rules {
            plan.locals(&r.body);
        }
        // Reachability: from the start rule, through productive expressions only.
        if plan.rule_height[g.start.0 as usize] != INF {
            let mut stack = vec![g.start];
            plan.rule_reachable[g.start.0 as usize] = true;
            while let Some(r) = stack.pop() {
                let mut found = Vec::new();
                plan.reach(&g.rule(r).body, &mut found);
                for x in found {
                    if !plan.rule_reachable[x.0 as usize] {
                        plan.rule_reachable[x.0 as usize] = true;
                        stack.push(x);
                    }
                }
            }
        }
        plan
    }

    fn number(&mut self, e: &Expr, rule: RuleId, k: &mut u32) {
        match e {
            Expr::Alt(xs) => {
                self.nodes.insert(addr(e), NodeInfo { rule, first_unit: self.units.len(), index: *k });
                for i in 0..xs.len() {
                    self.units.push(Unit { rule, node: *k, kind: UnitKind::Alt(i as u32), reachable: false });
                }
                *k += 1;
                xs.iter().for_each(|x| self.number(x, rule, k));
            }
            Expr::Repeat { body, min, max } => {
                self.nodes.insert(addr(e), NodeInfo { rule, first_unit: self.units.len(), index: *k });
                self.units.push(Unit { rule, node: *k, kind: UnitKind::RepeatMin, reachable: false });
                self.units.push(Unit { rule, node: *k, kind: UnitKind::RepeatMore, reachable: false });
                if let Some(m) = max {
                    if *m > *min && *m <= MAX_BOUNDARY_COUNT {
                        self.units.push(Unit { rule, node: *k, kind: UnitKind::RepeatMax, reachable: false });
                    }
                }
                *k += 1;
                self.number(body, rule, k);
            }
            Expr::Seq(xs) => xs.iter().for_each(|x| self.number(x, rule, k)),
            _ => {}
        }
    }

    /// Shortest output of `e`, bytes (`INF`: none).
    pub fn size(&self, e: &Expr) -> u32 {
        match e {
            Expr::Empty => 0,
            Expr::Literal(s) => s.len() as u32,
            Expr::Mark(m) => m.text().len() as u32,
            Expr::Token(t) => t.text().len() as u32,
            Expr::Regex(h) | Expr::TokensBut { text: h, .. } => hir_min(h),
            Expr::Lexeme(l) => lexeme_min(l),
            Expr::Rule(r) => self.rule_size[r.0 as usize],
            Expr::Seq(xs) => xs.iter().fold(0u32, |a, x| {
                let s = self.size(x);
                if a == INF || s == INF {
                    INF
                } else {
                    a.saturating_add(s).min(INF - 1)
                }
            }),
            Expr::Alt(xs) => xs.iter().map(|x| self.size(x)).min().unwrap_or(INF),
            Expr::Repeat { body, min, max } => {
                if max.is_some_and(|m| m < *min) {
                    return INF;
                }
                if *min == 0 {
                    return 0;
                }
                let s = self.size(body);
                if s == INF {
                    INF
                } else {
                    s.saturating_mul(*min).min(INF - 1)
                }
            }
        }
    }

    /// Least recursion depth of a derivation of `e`, an expression inside rule `ctx` (`INF`:
    /// none).
    pub fn height(&self, e: &Expr, ctx: RuleId) -> u32 {
        match e {
            Expr::Empty | Expr::Literal(_) | Expr::Mark(_) | Expr::Token(_) => 0,
            Expr::Regex(h) | Expr::TokensBut { text: h, .. } => {
                if hir_min(h) == INF {
                    INF
                } else {
                    0
                }
            }
            Expr::Lexeme(_) => 0,
            Expr::Rule(r) => {
                let same = self.scc[r.0 as usize] == self.scc[ctx.0 as usize];
                self.rule_height[r.0 as usize].saturating_add(u32::from(same))
            }
            Expr::Seq(xs) => xs.iter().map(|x| self.height(x, ctx)).max().unwrap_or(0),
            Expr::Alt(xs) => xs.iter().map(|x| self.height(x, ctx)).min().unwrap_or(INF),
            Expr::Repeat { body, min, max } => {
                if max.is_some_and(|m| m < *min) {
                    INF
                } else if *min == 0 {
                    0
                } else {
                    self.height(body, ctx)
                }
            }
        }
    }

    /// Does `e` reference a rule that reaches a recursive rule?
    pub fn deep(&self, e: &Expr) -> bool {
        let mut deep = false;
        e.for_each_rule(&mut |r| deep |= self.rule_deep[r.0 as usize]);
        deep
    }

    pub fn productive(&self, e: &Expr) -> bool {
        self.size(e) != INF
    }

    /// Fills `local_units` / `local_rules` for the alternatives and bodies under `e`.
    fn locals(&mut self, e: &Expr) {
        fn collect(p: &Plan, e: &Expr, units: &mut Vec<usize>, rules: &mut Vec<RuleId>) {
            match e {
                Expr::Rule(r) => rules.push(*r),
                Expr::Alt(xs) => {
                    let first = p.nodes[&addr(e)].first_unit;
                    units.extend(first..first + xs.len());
                    xs.iter().for_each(|x| collect(p, x, units, rules));
                }
                Expr::Repeat { body, .. } => {
                    let info = &p.nodes[&addr(e)];
                    let count = p.units[info.first_unit..]
                        .iter()
                        .take_while(|u| u.node == info.index && u.rule == info.rule)
                        .count();
                    units.extend(info.first_unit..info.first_unit + count);
                    collect(p, body, units, rules);
                }
                Expr::Seq(xs) => xs.iter().for_each(|x| collect(p, x, units, rules)),
                _ => {}
            }
        }
        match e {
            Expr::Alt(xs) => {
                for x in xs {
                    let (mut u, mut r) = (Vec::new(), Vec::new());
                    collect(self, x, &mut u, &mut r);
                    self.local_units.insert(addr(x), u);
                    self.local_rules.insert(addr(x), r);
                    self.locals(x);
                }
            }
            Expr::Repeat { body, .. } => {
                let (mut u, mut r) = (Vec::new(), Vec::new());
                collect(self, body, &mut u, &mut r);
                self.local_units.insert(addr(body), u);
                self.local_rules.insert(addr(body), r);
                self.locals(body);
            }
            Expr::Seq(xs) => xs.iter().for_each(|x| self.locals(x)),
            _ => {}
        }
    }

    /// Marks the units used by some derivation of `e` (which must be productive) reachable
    /// and collects the rules it can reference.
    fn reach(&mut self, e: &Expr, rules: &mut Vec<RuleId>) {
        match e {
            Expr::Rule(r) => rules.push(*r),
            Expr::Seq(xs) => xs.iter().for_each(|x| self.reach(x, rules)),
            Expr::Alt(xs) => {
                let first = self.nodes[&addr(e)].first_unit;
                for (i, x) in xs.iter().enumerate() {
                    if self.productive(x) {
                        self.units[first + i].reachable = true;
                        self.reach(x, rules);
                    }
                }
            }
            Expr::Repeat { body, min, max } => {
                let first = self.nodes[&addr(e)].first_unit;
                let body_ok = self.productive(body);
                let (min, max) = (*min, *max);
                let count = self.units[first..]
                    .iter()
                    .take_while(|u| u.node == self.units[first].node && u.rule == self.units[first].rule)
                    .count();
                for k in first..first + count {
                    self.units[k].reachable = match self.units[k].kind {
                        UnitKind::RepeatMin => min == 0 || body_ok,
                        // `More` means min < count (< max when a `Max` unit exists).
                        UnitKind::RepeatMore => body_ok && max.is_none_or(|m| m > min + u32::from(count == 3)),
                        UnitKind::RepeatMax => body_ok,
                        UnitKind::Alt(_) => unreachable!("repeat units only"),
                    };
                }
                if body_ok {
                    self.reach(body, rules);
                }
            }
            _ => {}
        }
    }

    /// (covered, total) over reachable units.
    pub fn totals(&self, counts: &[u64]) -> (usize, usize) {
        let total = self.units.iter().filter(|u| u.reachable).count();
        let covered = self.units.iter().zip(counts).filter(|(u, &c)| u.reachable && c > 0).count();
        (covered, total)
    }
}

/// The strongly connected component of each rule (Tarjan's algorithm, iterative).
fn components(refs: &[Vec<RuleId>]) -> Vec<u32> {
    let n = refs.len();
    const UNSEEN: usize = usize::MAX;
    let (mut index, mut low, mut on_stack) = (vec![UNSEEN; n], vec![0; n], vec![false; n]);
    let (mut stack, mut out, mut next, mut comps) = (Vec::new(), vec![0u32; n], 0, 0u32);
    for root in 0..n {
        if index[root] != UNSEEN {
            continue;
        }
        // (rule, next edge to look at)
        let mut work = vec![(root, 0usize)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut e)) = work.last_mut() {
            if let Some(w) = refs[v].get(*e).map(|r| r.0 as usize) {
                *e += 1;
                if index[w] == UNSEEN {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                loop {
                    let w = stack.pop().expect("v is on the stack");
                    on_stack[w] = false;
                    out[w] = comps;
                    if w == v {
                        break;
                    }
                }
                comps += 1;
            }
        }
    }
    out
}
