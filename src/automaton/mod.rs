//! Automata and the per-sequence matcher.
//!
//! - [`dfa::Dfa`]: a compact byte DFA for a regular language, with dead ends pruned.
//! - [`Compiled`]: a constraint compiled against one vocabulary (immutable; share it in an `Arc`).
//! - [`Matcher`]: per-sequence state over a `Compiled`: `fill_mask`, `commit`, `rollback`,
//!   `is_accepting`, `forced_tokens`.
//!
//! Masks are computed by walking the vocabulary's [`TokenTrie`](crate::vocab::TokenTrie) with
//! the automaton, skipping every subtree whose prefix is dead. A slow reference mask that tries
//! every token byte by byte is kept beside it; tests check the two agree on random states.

pub mod dfa;
mod matcher;

use std::sync::Arc;

pub use dfa::{Dfa, DfaLimits};
pub use matcher::Matcher;

use crate::error::{Error, Result};
use crate::grammar::{self, Expr, Grammar, RuleId};
use crate::vocab::{TokenKind, Vocab};

/// What the output must match.
#[derive(Debug, Clone)]
pub enum Constraint {
    /// A regex the whole output must match (anchors implied).
    Regex(String),
    /// Exactly one of these strings.
    Choice(Vec<String>),
    /// A grammar in the shared IR.
    Grammar(Grammar),
}

/// A constraint compiled for one vocabulary. Immutable; matchers share it.
pub struct Compiled {
    vocab: Arc<Vocab>,
    dfa: Dfa,
    /// Per DFA state: the fewest single-byte tokens that reach acceptance — an upper bound
    /// on the tokens needed to finish, used to steer into a complete output before max_tokens.
    finish_tokens: Vec<u32>,
}

impl Compiled {
    pub fn new(vocab: Arc<Vocab>, constraint: &Constraint) -> Result<Arc<Compiled>> {
        Self::with_limits(vocab, constraint, DfaLimits::default())
    }

    pub fn with_limits(vocab: Arc<Vocab>, constraint: &Constraint, limits: DfaLimits) -> Result<Arc<Compiled>> {
        let hir = match constraint {
            Constraint::Regex(r) => grammar::regex::parse(r)?,
            Constraint::Choice(options) => {
                if options.is_empty() {
                    return Err(Error::invalid("a choice needs at least one option"));
                }
                grammar::regex::expr_to_hir(&grammar::regex::choice(options), &mut |_| unreachable!())?
            }
            Constraint::Grammar(g) => regular_grammar_hir(g)?,
        };
        let dfa = Dfa::from_hir(&hir, limits)?;
        let mut usable = [false; 256];
        for b in 0..=255u8 {
            usable[b as usize] = !vocab.trie().lookup(&[b]).is_empty();
        }
        let finish_tokens = dfa.dist_using(&usable);
        Ok(Arc::new(Compiled { vocab, dfa, finish_tokens }))
    }

    pub fn vocab(&self) -> &Arc<Vocab> {
        &self.vocab
    }

    pub fn dfa(&self) -> &Dfa {
        &self.dfa
    }

    /// A fresh matcher at the start of the output.
    pub fn matcher(self: &Arc<Self>) -> Matcher {
        Matcher::new(self.clone())
    }

    /// Can the empty output be extended to a complete one at all?
    pub fn is_empty_language(&self) -> bool {
        self.dfa.start() == dfa::DEAD
    }

    /// Fewest tokens (using single-byte tokens) from the start to a complete output, if any.
    pub fn min_tokens(&self) -> Option<u32> {
        let d = self.finish_tokens[self.dfa.start() as usize];
        (d != u32::MAX).then_some(d)
    }

    fn is_text(&self, id: crate::TokenId) -> bool {
        self.vocab.kind(id) == TokenKind::Text
    }
}

/// Inlines every rule of a non-recursive grammar into one HIR.
fn regular_grammar_hir(g: &Grammar) -> Result<regex_syntax::hir::Hir> {
    fn inline(g: &Grammar, id: RuleId, visiting: &mut Vec<RuleId>) -> Result<regex_syntax::hir::Hir> {
        if visiting.contains(&id) {
            let rule = g.rule(id);
            let at = rule.span.map(|s| crate::error::Location::LineCol { line: s.line, col: s.col });
            return Err(Error::Grammar {
                at: at.unwrap_or(crate::error::Location::LineCol { line: 1, col: 1 }),
                msg: format!("rule `{}` is recursive; recursive grammars need the context-free engine, which is not built yet", rule.name),
            });
        }
        visiting.push(id);
        let body: &Expr = &g.rule(id).body;
        let h = grammar::regex::expr_to_hir(body, &mut |r| inline(g, r, visiting));
        visiting.pop();
        h
    }
    inline(g, g.start, &mut Vec::new())
}
