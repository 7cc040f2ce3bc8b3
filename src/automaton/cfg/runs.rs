//! The regular runs of a lowering, named without being built: [`Part`]s key the runs already
//! lowered in one grammar (by structure: the schema compiler writes the same small parts
//! afresh for every value), and [`Texts`] prints a run's regex text from the grammar, the key
//! of its terminal and of its DFA in the process-wide cache ([`Dfa::shared_by`]). A run whose
//! text is known needs no regex tree: building one (inlining every rule, copying every shared
//! regex) and printing it was most of the lowering of a large schema, whose runs are mostly
//! built already.
//!
//! Invariant: a text is a faithful regex (`regex-syntax` notation, default flags) of its
//! run's language, so equal texts name equal languages; every text [`Texts`] writes is one
//! atom (a group), so texts concatenate, alternate and repeat without further brackets.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Arc;

use regex_syntax::hir::Hir;

use crate::error::{Error, Result};
use crate::grammar::{Expr, Grammar};
use crate::regular::{FxBuild, Lexeme};

/// One part of a regular run: a rule by its id, anything else by what it is made of
/// ([`Shape`]). Equal keys are equal languages; equal languages may have different keys (a
/// miss only costs the full path, whose terminals are deduplicated by their text).
#[derive(PartialEq, Eq, Hash)]
pub(super) enum Part<'a> {
    /// (Apart so that a rule referenced on its own, with no expression to borrow, has the key
    /// of a run made of that reference.)
    Rule(u32),
    Node(Shape<'a>),
}

impl<'a> Part<'a> {
    pub(super) fn of(e: &'a Expr) -> Part<'a> {
        match e {
            Expr::Rule(r) => Part::Rule(r.0),
            other => Part::Node(Shape(other)),
        }
    }
}

/// An expression compared and hashed by its structure, regexes and lexemes by their `Arc`:
/// the schema compiler writes the same small parts afresh for every value (`[]`,
/// `true|false`, a closing bracket), so that keying them by address missed 60-70% of the runs
/// of a large schema and built their regex and key text again.
pub(super) struct Shape<'a>(&'a Expr);

impl PartialEq for Shape<'_> {
    fn eq(&self, other: &Self) -> bool {
        fn same(a: &Expr, b: &Expr) -> bool {
            use std::sync::Arc;
            let all = |xs: &[Expr], ys: &[Expr]| xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| same(x, y));
            match (a, b) {
                (Expr::Empty, Expr::Empty) => true,
                (Expr::Literal(x), Expr::Literal(y)) => x == y,
                (Expr::Regex(x), Expr::Regex(y)) => Arc::ptr_eq(x, y),
                (Expr::Lexeme(x), Expr::Lexeme(y)) => Arc::ptr_eq(x, y),
                (Expr::Mark(x), Expr::Mark(y)) => x == y,
                (Expr::Token(x), Expr::Token(y)) => x == y,
                (
                    Expr::TokensBut { but, min, max, text },
                    Expr::TokensBut { but: but2, min: min2, max: max2, text: text2 },
                ) => but == but2 && min == min2 && max == max2 && Arc::ptr_eq(text, text2),
                (Expr::Rule(x), Expr::Rule(y)) => x == y,
                (Expr::Seq(xs), Expr::Seq(ys)) | (Expr::Alt(xs), Expr::Alt(ys)) => all(xs, ys),
                (Expr::Repeat { body, min, max }, Expr::Repeat { body: body2, min: min2, max: max2 }) => {
                    min == min2 && max == max2 && same(body, body2)
                }
                _ => false,
            }
        }
        same(self.0, other.0)
    }
}

impl Eq for Shape<'_> {}

impl std::hash::Hash for Shape<'_> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        fn walk<H: std::hash::Hasher>(e: &Expr, state: &mut H) {
            std::mem::discriminant(e).hash(state);
            match e {
                Expr::Empty => {}
                Expr::Literal(s) => s.hash(state),
                Expr::Regex(h) => std::sync::Arc::as_ptr(h).hash(state),
                Expr::Lexeme(l) => std::sync::Arc::as_ptr(l).hash(state),
                Expr::Mark(m) => m.hash(state),
                Expr::Token(t) => t.hash(state),
                Expr::TokensBut { but, min, max, text } => (but, min, max, std::sync::Arc::as_ptr(text)).hash(state),
                Expr::Rule(r) => r.hash(state),
                Expr::Seq(xs) | Expr::Alt(xs) => {
                    xs.len().hash(state);
                    xs.iter().for_each(|x| walk(x, state));
                }
                Expr::Repeat { body, min, max } => {
                    (min, max).hash(state);
                    walk(body, state);
                }
            }
        }
        walk(self.0, state)
    }
}

/// Regex texts already printed in one lowering: of regular rules (inlined), and of shared
/// regexes by their `Arc` (a schema's string and number regexes stand in hundreds of runs).
#[derive(Default)]
pub(super) struct Texts {
    rules: HashMap<u32, String, FxBuild>,
    regexes: HashMap<usize, String, FxBuild>,
}

impl Texts {
    /// The text of `run`, its parts in sequence.
    pub(super) fn run(&mut self, g: &Grammar, run: &[&Expr]) -> Result<String> {
        let mut out = String::from("(?:");
        for e in run {
            self.write(g, e, &mut out)?;
        }
        out.push(')');
        Ok(out)
    }

    /// Writes the text of `e` (one atom) to `out`; rules are inlined (only regular rules are
    /// met here: their references are acyclic and at most `MAX_INLINE_DEPTH` deep).
    fn write(&mut self, g: &Grammar, e: &Expr, out: &mut String) -> Result<()> {
        let literal = |text: &str, out: &mut String| {
            out.push_str("(?:");
            regex_syntax::escape_into(text, out);
            out.push(')');
        };
        let regex = |texts: &mut HashMap<usize, String, FxBuild>, h: &Arc<Hir>, out: &mut String| {
            out.push_str("(?:");
            out.push_str(texts.entry(Arc::as_ptr(h) as usize).or_insert_with(|| h.to_string()));
            out.push(')');
        };
        match e {
            Expr::Empty => out.push_str("(?:)"),
            Expr::Literal(s) => literal(s, out),
            Expr::Mark(m) => literal(m.text(), out),
            Expr::Token(t) => literal(&t.text(), out),
            Expr::Regex(h) | Expr::TokensBut { text: h, .. } => regex(&mut self.regexes, h, out),
            Expr::Lexeme(l) => match &**l {
                Lexeme::Regex(_) | Lexeme::Counted { .. } => {
                    out.push_str("(?:");
                    out.push_str(&l.key());
                    out.push(')');
                }
                // (As `expr_to_hir`: never inlined, so never met here.)
                _ => {
                    return Err(Error::Grammar {
                        at: crate::error::Location::Column(1),
                        msg: "an intersection or complement of regexes is not one regex".into(),
                    })
                }
            },
            Expr::Rule(r) => {
                if !self.rules.contains_key(&r.0) {
                    let mut text = String::new();
                    self.write(g, &g.rule(*r).body, &mut text)?;
                    self.rules.insert(r.0, text);
                }
                out.push_str(&self.rules[&r.0]);
            }
            Expr::Seq(xs) => {
                out.push_str("(?:");
                for x in xs {
                    self.write(g, x, out)?;
                }
                out.push(')');
            }
            Expr::Alt(xs) if xs.is_empty() => {
                out.push_str("(?:");
                out.push_str(&Hir::fail().to_string());
                out.push(')');
            }
            Expr::Alt(xs) => {
                out.push_str("(?:");
                for (i, x) in xs.iter().enumerate() {
                    if i > 0 {
                        out.push('|');
                    }
                    self.write(g, x, out)?;
                }
                out.push(')');
            }
            Expr::Repeat { body, min, max } => {
                out.push_str("(?:");
                self.write(g, body, out)?;
                let _ = match max {
                    Some(max) => write!(out, "{{{min},{max}}})"),
                    None => write!(out, "{{{min},}})"),
                };
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::ir::Rule;
    use crate::grammar::RuleId;

    /// Every string over `alphabet` of at most `len` characters.
    fn words(alphabet: &[&str], len: usize) -> Vec<String> {
        let mut all = vec![String::new()];
        let mut last = vec![String::new()];
        for _ in 0..len {
            last = last.iter().flat_map(|w| alphabet.iter().map(move |c| format!("{w}{c}"))).collect();
            all.extend(last.iter().cloned());
        }
        all
    }

    /// A run's text is a regex of the language its inlined regex has (the key of its terminal
    /// and DFA must name that language), for every kind of part: literals with regex
    /// metacharacters, shared regexes, rules inlined (twice), nested sequences and choices, an
    /// empty choice, bounded and unbounded repetitions, the empty string.
    #[test]
    fn a_runs_text_names_its_language() {
        let lit = |s: &str| Expr::Literal(s.into());
        let re = |s: &str| Expr::Regex(Arc::new(crate::regular::regex::parse(s).unwrap()));
        let rules = vec![
            Rule { name: "digit".into(), body: re("[0-9]"), span: None },
            Rule {
                name: "pair".into(),
                body: Expr::Seq(vec![Expr::Rule(RuleId(0)), lit("."), Expr::Rule(RuleId(0))]),
                span: None,
            },
        ];
        let g = Grammar { rules, start: RuleId(1) };
        let rep = |e: Expr, min, max| Expr::Repeat { body: Box::new(e), min, max };
        let runs: Vec<Vec<Expr>> = vec![
            vec![lit("a.b"), lit("(|)"), lit("*+?")],
            vec![lit("é"), re("[a-c]+|x"), Expr::Empty],
            vec![Expr::Rule(RuleId(1)), lit("|"), Expr::Rule(RuleId(0))],
            vec![Expr::Alt(vec![lit("a"), Expr::Seq(vec![lit("b"), Expr::Alt(vec![lit("c"), Expr::Empty])])])],
            vec![lit("a"), Expr::Alt(vec![])],
            vec![rep(Expr::Alt(vec![lit("ab"), lit("c")]), 1, Some(2)), rep(lit("."), 0, None)],
            vec![rep(Expr::Seq(vec![lit("a"), re("b?")]), 2, Some(2)), lit("")],
            vec![Expr::Empty],
        ];
        let alphabet = ["a", "b", "c", ".", "|", "(", ")", "*", "+", "?", "é", "x", "1"];
        let sample = words(&alphabet, 4);
        let mut texts = Texts::default();
        for run in &runs {
            let parts: Vec<&Expr> = run.iter().collect();
            let text = texts.run(&g, &parts).unwrap();
            let hir = Hir::concat(
                parts.iter().map(|x| super::super::lower::inline(&g, x)).collect::<Result<Vec<_>>>().unwrap(),
            );
            let by_text = regex::Regex::new(&format!("^{text}$")).unwrap();
            let by_hir = regex::Regex::new(&format!("^(?:{hir})$")).unwrap();
            for w in sample.iter().chain([&"1.2|3".to_string(), &"a.b(|)*+?".to_string(), &"ab.....".to_string()]) {
                assert_eq!(by_text.is_match(w), by_hir.is_match(w), "{text} against {hir} on {w:?}");
            }
        }
    }

    /// Parts written afresh with the same structure are one key; different ones are not.
    #[test]
    fn parts_are_keyed_by_their_structure() {
        use std::collections::HashSet;
        let fresh = || Expr::Alt(vec![Expr::Literal("true".into()), Expr::Literal("false".into())]);
        let (a, b) = (fresh(), fresh());
        let other = Expr::Alt(vec![Expr::Literal("true".into()), Expr::Literal("null".into())]);
        let keys: HashSet<Part<'_>> = [Part::of(&a), Part::of(&b), Part::of(&other)].into_iter().collect();
        assert_eq!(keys.len(), 2);
        // Shared regexes are one part by their `Arc`, two parses of one pattern are two.
        let h = Arc::new(crate::regular::regex::parse("[a-z]+").unwrap());
        let (x, y) = (Expr::Regex(h.clone()), Expr::Regex(h));
        let z = Expr::Regex(Arc::new(crate::regular::regex::parse("[a-z]+").unwrap()));
        assert!(Part::of(&x) == Part::of(&y) && Part::of(&x) != Part::of(&z));
    }
}
