//! Regex front end: a regex is a one-terminal grammar that the whole output must match.
//!
//! Parsed with `regex-syntax` (the full syntax of the `regex` crate: Unicode classes, counted
//! repetition, alternation, flags). Anchors are implied: `abc` means the output is exactly
//! `abc`, so `^`/`$`/`\A`/`\z` are accepted but change nothing. Laziness (`*?`) is irrelevant
//! for a language and ignored. The result must only match valid UTF-8.

use regex_syntax::hir::{Hir, Repetition};

use crate::error::{Error, Result};
use crate::grammar::ir::Expr;

/// The grammar of a regex the whole output must match (anchors implied).
pub fn grammar(pattern: &str) -> Result<crate::grammar::Grammar> {
    Ok(crate::grammar::Grammar::single(Expr::Regex(std::sync::Arc::new(crate::regular::regex::parse(pattern)?))))
}

/// The regex that matches exactly one of `options`.
pub fn choice(options: &[String]) -> Expr {
    Expr::Alt(options.iter().map(|o| Expr::Literal(o.clone())).collect())
}

/// Builds a HIR for a regular expression tree (no rule references; the caller inlines them).
pub fn expr_to_hir(e: &Expr, rule: &mut impl FnMut(crate::grammar::RuleId) -> Result<Hir>) -> Result<Hir> {
    Ok(match e {
        Expr::Empty => Hir::empty(),
        Expr::Literal(s) => Hir::literal(s.as_bytes()),
        Expr::Mark(m) => Hir::literal(m.text().as_bytes()),
        // With no vocabulary, a token is its name (compiling resolves it first, see
        // `automaton::tokens`).
        Expr::Token(t) => Hir::literal(t.text().as_bytes()),
        Expr::Regex(h) | Expr::TokensBut { text: h, .. } => (**h).clone(),
        Expr::Lexeme(l) => match &**l {
            crate::regular::Lexeme::Regex(h) => h.clone(),
            crate::regular::Lexeme::Counted { full, .. } => (**full).clone(),
            _ => {
                return Err(Error::Grammar {
                    at: crate::error::Location::Column(1),
                    msg: "an intersection or complement of regexes is not one regex".into(),
                })
            }
        },
        Expr::Rule(r) => rule(*r)?,
        Expr::Seq(xs) => Hir::concat(xs.iter().map(|x| expr_to_hir(x, rule)).collect::<Result<_>>()?),
        Expr::Alt(xs) => Hir::alternation(xs.iter().map(|x| expr_to_hir(x, rule)).collect::<Result<_>>()?),
        Expr::Repeat { body, min, max } => {
            Hir::repetition(Repetition { min: *min, max: *max, greedy: true, sub: Box::new(expr_to_hir(body, rule)?) })
        }
    })
}
