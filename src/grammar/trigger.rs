//! Triggered (lazy) constraints: free text until a trigger appears, then a constraint from the
//! trigger on, as llama.cpp's lazy grammars and llguidance's lazy lexemes do. The output is
//! `text (trigger then)?`, where `text` is any text that contains none of the text triggers:
//! the first copy of any trigger starts the constraint, and an output that never writes one is
//! free text (which the model may end at any point). With several triggers, the one that
//! completes first in the text is the one (of `ab` and `abc`, `ab`). A [`Trigger::Token`] is one
//! token of the vocabulary (a control token such as Llama 3's `<|python_tag|>`): only that token
//! starts the constraint, never its text spelled by other tokens (see `automaton::tokens`).

use std::sync::Arc;

use regex_syntax::hir::Hir;

use super::{Expr, Grammar, Rule, TokenRef};
use crate::error::{Error, Result};
use crate::regular::Lexeme;

/// What starts a triggered constraint.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Trigger {
    /// The first copy of this text in the output, whichever tokens spell it.
    Text(String),
    /// This one token, by id or name ([`TokenRef::parse`]), written as that token.
    Token(TokenRef),
}

impl From<&str> for Trigger {
    fn from(text: &str) -> Trigger {
        Trigger::Text(text.to_string())
    }
}

/// The grammar of free text up to the first of `triggers`, then that trigger and an output of
/// `then`.
pub fn triggered(triggers: &[Trigger], then: Grammar) -> Result<Grammar> {
    let empty = |t: &Trigger| match t {
        Trigger::Text(s) | Trigger::Token(TokenRef::Name(s)) => s.is_empty(),
        Trigger::Token(TokenRef::Id(_)) => false,
    };
    if triggers.is_empty() || triggers.iter().any(empty) {
        return Err(Error::param("a trigger must not be empty (and at least one is needed)"));
    }
    let mut rules = vec![Rule { name: "root".into(), body: Expr::Empty, span: None }];
    let start = then.append_to(&mut rules);
    let texts: Vec<&str> = triggers
        .iter()
        .filter_map(|t| match t {
            Trigger::Text(s) => Some(s.as_str()),
            Trigger::Token(_) => None,
        })
        .collect();
    let any_trigger = Expr::Alt(
        triggers
            .iter()
            .map(|t| match t {
                Trigger::Text(s) => Expr::Literal(s.clone()),
                Trigger::Token(t) => Expr::Token(t.clone()),
            })
            .collect(),
    );
    // Free text never writes a token trigger: a control token is not text, and a named text
    // token is barred wherever the grammar does not name it.
    let text = if texts.is_empty() { any_text() } else { text_without_any(&texts) };
    rules[0].body = Expr::Seq(vec![
        text,
        Expr::Repeat { body: Box::new(Expr::Seq(vec![any_trigger, Expr::Rule(start)])), min: 0, max: Some(1) },
    ]);
    Ok(Grammar { rules, start: super::RuleId(0) })
}

/// Any text (valid UTF-8), one lexeme.
fn any_text() -> Expr {
    Expr::Lexeme(Arc::new(Lexeme::Regex(crate::regular::regex::parse("(?s:.*)").expect("a valid built-in regex"))))
}

/// A reasoning part, then an output of `then`: `start? text end ws then` where `text` is any
/// text without `end` and `ws` at most 4 whitespace characters (models write `</think>\n\n`).
/// `start: None`: the reasoning is open already (the prompt ends with its start marker), so the
/// output begins inside it; `Some(start)`: the reasoning part is optional and begins with
/// `start` (see `model::reasoning`). With a `header` (harmony's `<|channel|>final<|message|>`),
/// `then` follows it, with or without a reasoning part, and no whitespace comes between.
pub fn after_reasoning(start: Option<&str>, end: &str, header: Option<&str>, then: Grammar) -> Result<Grammar> {
    if end.is_empty() || start.is_some_and(str::is_empty) || header.is_some_and(str::is_empty) {
        return Err(Error::param("reasoning markers must not be empty"));
    }
    let mut rules = vec![Rule { name: "root".into(), body: Expr::Empty, span: None }];
    let answer = match header {
        Some(h) => Expr::Seq(vec![Expr::Literal(h.into()), Expr::Rule(then.append_to(&mut rules))]),
        None => Expr::Rule(then.append_to(&mut rules)),
    };
    let mut reasoning = vec![text_without(end), Expr::Literal(end.into())];
    if header.is_none() {
        let ws = crate::regular::regex::parse(r"[ \t\r\n]{0,4}").expect("a valid built-in regex");
        reasoning.push(Expr::Lexeme(Arc::new(Lexeme::Regex(ws))));
    }
    let reasoning = Expr::Seq(reasoning);
    rules[0].body = match start {
        None => Expr::Seq(vec![reasoning, answer]),
        Some(start) => Expr::Seq(vec![
            Expr::Repeat {
                body: Box::new(Expr::Seq(vec![Expr::Literal(start.into()), reasoning])),
                min: 0,
                max: Some(1),
            },
            answer,
        ]),
    };
    Ok(Grammar { rules, start: super::RuleId(0) })
}

/// `text_without(trigger) then?`, for a `then` that begins with the trigger (the tool calls of
/// `tool_choice: auto` begin with their marker, which is a [`Mark`](super::Mark) of its own).
pub fn text_then(trigger: &str, then: Expr) -> Expr {
    Expr::Seq(vec![text_without(trigger), Expr::Repeat { body: Box::new(then), min: 0, max: Some(1) }])
}

/// Any text (valid UTF-8) that does not contain `trigger` (non-empty): one lexeme, the
/// intersection of any text with the complement of "contains it".
pub fn text_without(trigger: &str) -> Expr {
    text_without_any(std::slice::from_ref(&trigger))
}

/// Any text (valid UTF-8) that contains none of `triggers` (non-empty strings).
pub fn text_without_any<S: AsRef<str>>(triggers: &[S]) -> Expr {
    let any = || crate::regular::regex::parse("(?s:.*)").expect("a valid built-in regex");
    let one_of = Hir::alternation(triggers.iter().map(|t| Hir::literal(t.as_ref().as_bytes())).collect());
    let containing = Hir::concat(vec![any(), one_of, any()]);
    Expr::Lexeme(Arc::new(Lexeme::and(vec![Lexeme::Regex(any()), Lexeme::Not(Box::new(Lexeme::Regex(containing)))])))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::regular::{Dfa, DfaLimits, StateId};

    #[test]
    fn text_without_the_trigger() {
        let Expr::Lexeme(l) = text_without("<tool_call>") else { unreachable!("a lexeme") };
        let dfa = Dfa::shared(&l, DfaLimits::default()).unwrap();
        let matches = |s: &str| {
            let t = dfa.run(dfa.start(), s.as_bytes());
            t != StateId::DEAD && dfa.is_accepting(t)
        };
        for ok in [
            "",
            "hello",
            "a < b",
            "<tool",
            "<tool_cal",
            "x<<tool_calx>",
            "<tool_call",
            "<<tool_call",
            "tool_call>",
            "<\n",
            "é",
        ] {
            assert!(matches(ok), "{ok:?} should match");
        }
        for bad in ["<tool_call>", "hi <tool_call> x", "<<tool_call>", "<tool_<tool_call>", "a<tool_call>b"] {
            assert!(!matches(bad), "{bad:?} should not match");
        }
        // Text is UTF-8: a lone byte 0xFF is not.
        assert_eq!(dfa.run(dfa.start(), b"a\xff"), StateId::DEAD);
    }
}
