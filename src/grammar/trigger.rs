//! Triggered (lazy) constraints: free text until a trigger string appears, then a constraint
//! from the trigger on, as llama.cpp's lazy grammars and llguidance's lazy lexemes do. The
//! output is `text (trigger then)?`, where `text` is any text that does not contain the
//! trigger: the first copy of the trigger starts the constraint, and an output that never
//! writes it is free text (which the model may end at any point).

use std::sync::Arc;

use regex_syntax::hir::Hir;

use super::{Expr, Grammar, Rule};
use crate::error::{Error, Result};
use crate::regular::Lexeme;

/// The grammar of free text up to `trigger`, then `trigger` and an output of `then`.
pub fn triggered(trigger: &str, then: Grammar) -> Result<Grammar> {
    if trigger.is_empty() {
        return Err(Error::param("a trigger must not be empty"));
    }
    let mut rules = vec![Rule { name: "root".into(), body: Expr::Empty, span: None }];
    let start = then.append_to(&mut rules);
    let any = || crate::regular::regex::parse("(?s:.*)").expect("a valid built-in regex");
    let containing = Hir::concat(vec![any(), Hir::literal(trigger.as_bytes()), any()]);
    let text = Lexeme::and(vec![Lexeme::Regex(any()), Lexeme::Not(Box::new(Lexeme::Regex(containing)))]);
    rules[0].body = Expr::Seq(vec![
        Expr::Lexeme(Arc::new(text)),
        Expr::Repeat {
            body: Box::new(Expr::Seq(vec![Expr::Literal(trigger.into()), Expr::Rule(start)])),
            min: 0,
            max: Some(1),
        },
    ]);
    Ok(Grammar { rules, start: super::RuleId(0) })
}
