//! A regex constraint laid out as grammar IR for the generator, so that its alternatives and
//! repetition boundaries are coverage units like a grammar's.
//!
//! A regex compiles to one terminal (`Expr::Regex`), which the generator draws as a leaf: no
//! units. [`regex_grammar`] walks the regex's HIR instead: an alternation becomes an `Alt`, a
//! counted or starred repetition a `Repeat` with the same bounds, a concatenation a `Seq`, a
//! literal a `Literal`; character classes stay regex leaves (one character each). The language
//! is the same. Anchors at the ends (`^…$`, which the regex front end implies anyway) are
//! dropped; any other look-around keeps the subexpression holding it a single leaf, whose own
//! DFA check throws out draws that break it.

use regex_syntax::hir::{Hir, HirKind, Look};

use crate::error::Result;
use crate::grammar::{Expr, Grammar};

/// The grammar of regex `pattern`, laid out for the generator (see the module docs).
pub fn regex_grammar(pattern: &str) -> Result<Grammar> {
    Ok(Grammar::single(lay_out(&strip(&crate::regular::regex::parse(pattern)?, true, true))))
}

fn is_start(l: Look) -> bool {
    matches!(l, Look::Start | Look::StartLF | Look::StartCRLF)
}

fn is_end(l: Look) -> bool {
    matches!(l, Look::End | Look::EndLF | Look::EndCRLF)
}

/// `h` without start anchors at its beginning (`start`) and end anchors at its end (`end`).
fn strip(h: &Hir, start: bool, end: bool) -> Hir {
    match h.kind() {
        HirKind::Look(l) if (start && is_start(*l)) || (end && is_end(*l)) => Hir::empty(),
        HirKind::Capture(c) => strip(&c.sub, start, end),
        HirKind::Alternation(xs) => Hir::alternation(xs.iter().map(|x| strip(x, start, end)).collect()),
        HirKind::Concat(xs) => {
            let n = xs.len();
            let parts = xs.iter().enumerate().map(|(i, x)| strip(x, start && i == 0, end && i + 1 == n));
            // Dropped anchors leave empties; the concatenation of the rest is the same language.
            Hir::concat(parts.filter(|x| !matches!(x.kind(), HirKind::Empty)).collect())
        }
        _ => h.clone(),
    }
}

fn leaf(h: &Hir) -> Expr {
    Expr::Regex(std::sync::Arc::new(h.clone()))
}

fn lay_out(h: &Hir) -> Expr {
    if !h.properties().look_set().is_empty() {
        return leaf(h);
    }
    match h.kind() {
        HirKind::Empty => Expr::Empty,
        HirKind::Literal(l) => match std::str::from_utf8(&l.0) {
            Ok(s) => Expr::Literal(s.to_string()),
            Err(_) => leaf(h),
        },
        HirKind::Class(_) | HirKind::Look(_) => leaf(h),
        HirKind::Repetition(r) => Expr::Repeat { body: Box::new(lay_out(&r.sub)), min: r.min, max: r.max },
        HirKind::Capture(c) => lay_out(&c.sub),
        HirKind::Concat(xs) => Expr::Seq(xs.iter().map(lay_out).collect()),
        HirKind::Alternation(xs) => Expr::Alt(xs.iter().map(lay_out).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzz::plan::Plan;

    fn units(pattern: &str) -> usize {
        let g = regex_grammar(pattern).unwrap();
        Plan::new(&g).units.iter().filter(|u| u.reachable).count()
    }

    #[test]
    fn alternatives_and_repetitions_become_units() {
        // 3 alternatives; {1,3}: min, more, max; ?: absent, present (min, more).
        assert_eq!(units("^(red|green|blue)-[0-9]{1,3}(x|yz)?$"), 3 + 3 + 2 + 2);
        assert_eq!(units("abc"), 0);
        // A word boundary depends on its neighbours: what holds one stays one leaf.
        assert_eq!(units(r"(ab|c)(\bc|d)"), 0);
        assert_eq!(units(r"(?m)^(ab|c)+$"), 2 + 2);
        match regex_grammar("^a$").unwrap().rules[0].body {
            Expr::Literal(ref s) => assert_eq!(s, "a"),
            ref other => panic!("{other:?}"),
        }
    }
}
