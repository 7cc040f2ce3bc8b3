//! [`Layout`]: the whitespace of one object or array under a [`Whitespace`] choice.

use super::{Compiler, Whitespace, MAX_INDENT_LEVEL};
use crate::grammar::ir::Expr;

/// The whitespace of one object or array (at one nesting level) under a [`Whitespace`]: each
/// field is what goes at one place, punctuation included.
///
/// ```text
/// {⟨open⟩⟨first⟩"a"⟨colon⟩1⟨sep⟩"b"⟨colon⟩2⟨close⟩}        {⟨open⟩⟨close_empty⟩}
/// ```
#[derive(Clone)]
pub(super) struct Layout {
    /// After the opening bracket, always.
    pub open: Expr,
    /// Before the first member or item.
    pub first: Expr,
    /// Between two members or items: the comma and its whitespace.
    pub sep: Expr,
    /// After the last member or item, before the closing bracket.
    pub close: Expr,
    /// Before the closing bracket of an empty object or array (after `open`).
    pub close_empty: Expr,
    /// Between a key and its value: the colon and its whitespace.
    pub colon: Expr,
}

impl Layout {
    /// The opening `bracket` and what follows it.
    pub fn start(&self, bracket: &str) -> Expr {
        Expr::seq(vec![Expr::Literal(bracket.into()), self.open.clone()])
    }

    /// The end of a container after at least one member or item (`nonempty`) or none: the
    /// closing whitespace, then `bracket`.
    pub fn end(&self, nonempty: bool, bracket: &str) -> Expr {
        let ws = if nonempty { self.close.clone() } else { self.close_empty.clone() };
        Expr::seq(vec![ws, Expr::Literal(bracket.into())])
    }

    /// `e` as the first member or item (after [`Layout::first`]) or a later one (after
    /// [`Layout::sep`]).
    pub fn item(&self, first: bool, e: Expr) -> Expr {
        self.item_then(first, e, Expr::Empty)
    }

    /// [`Layout::item`] followed by `then`, as one flat sequence built in one go (an object's
    /// member lists are made of these).
    pub fn item_then(&self, first: bool, e: Expr, then: Expr) -> Expr {
        let lead = if first { &self.first } else { &self.sep };
        let mut parts = Vec::with_capacity(5);
        match lead {
            Expr::Seq(xs) => parts.extend(xs.iter().cloned()),
            Expr::Empty => {}
            x => parts.push(x.clone()),
        }
        parts.push(e);
        if !matches!(then, Expr::Empty) {
            parts.push(then);
        }
        Expr::seq(parts)
    }

    pub(super) fn new(ws: Whitespace, level: usize) -> Layout {
        let lit = |s: &str| Expr::Literal(s.into());
        match ws {
            Whitespace::Compact => Layout {
                open: Expr::Empty,
                first: Expr::Empty,
                sep: lit(","),
                close: Expr::Empty,
                close_empty: Expr::Empty,
                colon: lit(":"),
            },
            Whitespace::Pretty => {
                let indent = |l: usize| "  ".repeat(l.min(MAX_INDENT_LEVEL));
                Layout {
                    open: Expr::Empty,
                    first: lit(&format!("\n{}", indent(level + 1))),
                    sep: lit(&format!(",\n{}", indent(level + 1))),
                    close: lit(&format!("\n{}", indent(level))),
                    close_empty: Expr::Empty,
                    colon: lit(": "),
                }
            }
            // Any bounded whitespace around every token (the grammar of `{ ws members? ws }`).
            Whitespace::Flexible => {
                let ws = Compiler::flexible_ws;
                Layout {
                    open: ws(),
                    first: Expr::Empty,
                    sep: Expr::seq(vec![ws(), lit(","), ws()]),
                    close: ws(),
                    close_empty: ws(),
                    colon: Expr::seq(vec![ws(), lit(":"), ws()]),
                }
            }
        }
    }
}
