//! Grammar front ends and the shared IR.
//!
//! - [`ir`]: the IR every front end produces ([`Grammar`], [`Expr`], [`RuleId`]).
//! - [`regex`]: regexes (the whole output must match), parsed with `regex-syntax`.
//! - [`ebnf`]: GBNF-compatible EBNF (llama.cpp syntax plus `/regex/` terminals).
//! - [`lark`]: Lark grammars (Python `lark`'s dialect, as llguidance and XGrammar read it).
//! - [`json_schema`]: JSON Schema (draft 2020-12 and draft-07 spellings) into the IR.
//! - [`reference`](mod@reference): a slow, independent recognizer over the IR, used as a test oracle.

pub mod ebnf;
pub mod ir;
pub mod json_schema;
pub mod lark;
pub mod reference;
pub mod regex;
pub mod trigger;

pub use ir::{Expr, Grammar, Mark, Rule, RuleId, Span, TextEnd, TokenRef};
