//! Helpers over regex HIRs for the Lark lowering: laziness, greediness, line comments.

use std::sync::Arc;

use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir, HirKind, Repetition};

use super::lower::TermLang;
use crate::grammar::ir::Expr;
use crate::regular::Lexeme;

pub(super) fn repeat(h: Hir, min: u32, max: Option<u32>) -> Hir {
    Hir::repetition(Repetition { min, max, greedy: true, sub: Box::new(h) })
}

/// A literal HIR as an [`Expr::Literal`] (so forced text stays possible), else a regex leaf.
pub(super) fn hir_expr(h: Hir) -> Expr {
    match h.kind() {
        HirKind::Empty => Expr::Empty,
        HirKind::Literal(l) => match std::str::from_utf8(&l.0) {
            Ok(s) => Expr::Literal(s.to_string()),
            Err(_) => Expr::Regex(Arc::new(h)),
        },
        _ => Expr::Regex(Arc::new(h)),
    }
}

pub(super) fn to_lexeme(l: TermLang) -> Lexeme {
    match l {
        TermLang::Hir(h) => Lexeme::Regex(greedy(&h)),
        TermLang::Lexeme(l) => l,
    }
}

/// Is this ignored terminal a line comment: does every string of it go on with any character
/// but a newline (each branch ends in an unbounded repetition of a class without `\n`)?
pub(super) fn line_comment(h: &Hir) -> bool {
    match h.kind() {
        HirKind::Alternation(xs) => xs.iter().all(line_comment),
        HirKind::Concat(xs) => xs.last().is_some_and(line_comment),
        HirKind::Capture(c) => line_comment(&c.sub),
        HirKind::Repetition(r) if r.max.is_none() => match r.sub.kind() {
            HirKind::Class(Class::Unicode(c)) => {
                let all_but_newline = ClassUnicode::new([
                    ClassUnicodeRange::new('\0', '\t'),
                    ClassUnicodeRange::new('\u{b}', '\u{10FFFF}'),
                ]);
                c == &all_but_newline
            }
            _ => false,
        },
        _ => false,
    }
}

/// Does `h` match the string "\n" (in full)?
pub(super) fn matches_newline(h: &Hir) -> bool {
    use regex_syntax::hir::Look;
    let anchored = Hir::concat(vec![Hir::look(Look::Start), h.clone(), Hir::look(Look::End)]);
    regex_automata::meta::Regex::builder().build_from_hir(&anchored).is_ok_and(|re| re.is_match("\n"))
}

/// Does the HIR have a lazy (non-greedy) repetition?
pub(super) fn has_lazy(h: &Hir) -> bool {
    match h.kind() {
        HirKind::Repetition(r) => !r.greedy || has_lazy(&r.sub),
        HirKind::Capture(c) => has_lazy(&c.sub),
        HirKind::Concat(xs) | HirKind::Alternation(xs) => xs.iter().any(has_lazy),
        _ => false,
    }
}

/// The same language with every repetition greedy (and no capture groups).
pub(super) fn greedy(h: &Hir) -> Hir {
    match h.kind() {
        HirKind::Repetition(r) => repeat(greedy(&r.sub), r.min, r.max),
        HirKind::Capture(c) => greedy(&c.sub),
        HirKind::Concat(xs) => Hir::concat(xs.iter().map(greedy).collect()),
        HirKind::Alternation(xs) => Hir::alternation(xs.iter().map(greedy).collect()),
        _ => h.clone(),
    }
}

/// The shortest-match language of `h`: its strings with no proper prefix in it.
pub(super) fn shortest(h: &Hir) -> Lexeme {
    let g = greedy(h);
    let any = Hir::class(Class::Unicode(ClassUnicode::new([ClassUnicodeRange::new('\0', '\u{10FFFF}')])));
    let longer = Hir::concat(vec![g.clone(), repeat(any, 1, None)]);
    Lexeme::and(vec![Lexeme::Regex(g), Lexeme::Not(Box::new(Lexeme::Regex(longer)))])
}
