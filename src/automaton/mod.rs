//! Compiling a constraint for a vocabulary, and the per-sequence matcher.
//!
//! - [`Compiled`]: a constraint compiled against one vocabulary (immutable; share it in an
//!   `Arc`). Its backend is one [`Dfa`] when the language is regular (lexeme DFAs are shared
//!   process-wide, [`Dfa::shared`]), else a [`cfg::Cfg`] for the Earley parser: terminals
//!   (lexemes with their DFAs), nonterminals and productions, named by [`cfg::TermId`],
//!   [`cfg::NtId`] and [`cfg::ProdId`].
//! - [`VocabEnv`]: the vocabulary with what is kept per vocabulary (its slices, the lexer-state
//!   mask cache), shared by every constraint compiled for it.
//! - [`Matcher`]: per-sequence state over a `Compiled`: `fill_mask`, `commit`, `rollback`,
//!   `is_accepting`, `forced_tokens`.
//!
//! Files: `cfg` (lowering the IR), `earley` (the chart and the per-byte step), `cfg_run` (an
//! Earley sequence: positions, rollback, the mask walks), `mask_cache` (per lexer key, the part
//! of the mask that does not depend on the parser), `token_dist` (a lexeme's fewest tokens to
//! acceptance), `tokens` (token terminals), `slices`, `env`, `matcher`.
//!
//! Masks are computed by walking the vocabulary's [`TokenTrie`](crate::vocab::TokenTrie) with
//! the automaton, skipping every subtree whose prefix is dead; the Earley parser caches, per set
//! of lexer states and for every constraint compiled for a vocabulary, the tokens whose answer
//! does not depend on the parser and the few places where it does (`mask_cache`), and each
//! sequence keeps its last mask while its lexer position does not change. A slow
//! reference mask that tries every token byte by byte is kept beside it; tests check the two
//! agree on random states.
//!
//! Under a token budget (`fill_mask_within`) a mask keeps only the tokens after which the
//! output can still be finished within the budget, counted in tokens of the vocabulary: first
//! in usable bytes (bytes that are single tokens: an upper bound that settles most positions),
//! then, where that does not fit, each lexeme's exact fewest tokens (`token_dist`, within its
//! search limit), added up across lexemes (an upper bound: one token may span two). So a
//! regular constraint's count is exact and a context-free one's is sound; where it says nothing
//! fits, the matcher's witness (a completion spelled in tokens and checked by committing it)
//! may show that something does. Costs that cannot be met are [`UNREACHABLE`](crate::regular::UNREACHABLE), and no budget is
//! `NO_BUDGET`.
//!
//! Items a grammar marks as distinct (`uniqueItems` beyond small finite sets, the tool calls of
//! one reply) are kept apart by the matcher, not the grammar: see `distinct`. Tokens a grammar
//! names (token terminals) stand for bytes no text holds and go to the parser: see `tokens`.

pub mod cfg;
mod cfg_run;
mod distinct;
mod earley;
mod env;
mod mask_cache;
mod matcher;
pub mod slices;
mod token_dist;
pub mod tokens;

use std::sync::Arc;

pub use cfg::CfgLimits;
pub use env::VocabEnv;
pub use mask_cache::ClassPolicy;
pub use matcher::Matcher;

use crate::error::{Error, Location, Result};
use crate::grammar::{self, Grammar};
use crate::regular::{Dfa, DfaLimits, Distances, StateId};
use crate::vocab::{TokenId, Vocab};

/// The token budget that binds nothing (a mask without `max_tokens`): as the most usable bytes
/// allowed to finish after a token, it admits every finish cost, [`UNREACHABLE`](crate::regular::UNREACHABLE) included.
/// Real budgets stay below it (see `Matcher::fill_mask_within`).
const NO_BUDGET: u32 = u32::MAX;

/// What the output must match.
#[derive(Debug, Clone)]
pub enum Constraint {
    /// A regex the whole output must match (anchors implied).
    Regex(String),
    /// Exactly one of these strings.
    Choice(Vec<String>),
    /// A grammar in the shared IR.
    Grammar(Grammar),
    /// JSON that validates against a JSON Schema.
    JsonSchema(serde_json::Value, grammar::json_schema::JsonSchemaOptions),
    /// Free text until one of `triggers` appears, then that trigger and an output of `then` (a
    /// lazy constraint, see [`grammar::trigger`]); an output without a trigger is free text.
    Triggered { triggers: Vec<grammar::trigger::Trigger>, then: Box<Constraint> },
    /// A reasoning part (free text up to the `end` marker), then `header` where given (harmony's
    /// `<|channel|>final<|message|>`) and an output of `then` (see
    /// [`grammar::trigger::after_reasoning`]): `start: None` begins inside the reasoning (the
    /// prompt opened it), `Some(start)` makes the part optional, opened by `start`.
    AfterReasoning { start: Option<String>, end: String, header: Option<String>, then: Box<Constraint> },
}

impl Constraint {
    /// The constraint as a grammar in the shared IR (what [`Compiled`] compiles; the fuzzer in
    /// [`crate::fuzz`] walks it), under the default limits.
    pub fn grammar(&self) -> Result<Grammar> {
        self.grammar_within(DfaLimits::default())
    }

    /// [`grammar`](Self::grammar), with every automaton the front end builds to decide
    /// something (a JSON Schema's key regions and value checks) under `limits`.
    pub fn grammar_within(&self, limits: DfaLimits) -> Result<Grammar> {
        Ok(match self {
            Constraint::Regex(r) => grammar::regex::grammar(r)?,
            Constraint::Choice(options) => {
                if options.is_empty() {
                    return Err(Error::param("a choice needs at least one option"));
                }
                Grammar::single(grammar::regex::choice(options))
            }
            Constraint::Grammar(g) => g.clone(),
            Constraint::JsonSchema(schema, o) => grammar::json_schema::compile_within(schema, o, limits)?.grammar,
            Constraint::Triggered { triggers, then } => {
                grammar::trigger::triggered(triggers, then.grammar_within(limits)?)?
            }
            Constraint::AfterReasoning { start, end, header, then } => grammar::trigger::after_reasoning(
                start.as_deref(),
                end,
                header.as_deref(),
                then.grammar_within(limits)?,
            )?,
        })
    }
}

/// Which backend to compile to. `Auto` uses the DFA whenever the language is regular.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendChoice {
    #[default]
    Auto,
    /// Always the Earley parser (for tests that compare the two).
    Earley,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct CompileOptions {
    pub limits: CfgLimits,
    pub backend: BackendChoice,
}

/// The compiled form of a constraint: what [`BackendChoice`] chose.
pub(crate) enum Backend {
    /// A regular language: one DFA; `finish_tokens[s.index()]` = fewest single-byte tokens from
    /// state `s` to acceptance (an upper bound on the tokens needed to finish; [`UNREACHABLE`](crate::regular::UNREACHABLE):
    /// none suffice).
    Dfa { dfa: Arc<Dfa>, finish_tokens: Distances },
    /// A context-free grammar for the Earley parser.
    Earley(Box<cfg::Cfg>),
}

/// A constraint compiled for one vocabulary. Immutable; matchers share it.
pub struct Compiled {
    env: Arc<VocabEnv>,
    backend: Backend,
    /// The tokens the grammar names (token terminals, see [`tokens`]).
    named: Option<tokens::Named>,
    /// Why no output matches, where none does (a regular constraint; see
    /// [`Compiled::why_empty`]).
    why_empty: Option<String>,
}

impl Compiled {
    /// `constraint` compiled for the vocabulary of `env` (whose caches it shares with every
    /// other constraint compiled there), under the default limits.
    pub fn new(env: &Arc<VocabEnv>, constraint: &Constraint) -> Result<Arc<Compiled>> {
        Self::with_options(env, constraint, &CompileOptions::default())
    }

    pub fn with_options(env: &Arc<VocabEnv>, constraint: &Constraint, opts: &CompileOptions) -> Result<Arc<Compiled>> {
        let grammar = constraint.grammar_within(opts.limits.dfa)?;
        let (grammar, named) = match tokens::resolve(&grammar, env.vocab())? {
            Some((g, named)) => (g, Some(named)),
            None => (grammar, None),
        };
        let mut usable = *env.usable_bytes();
        if named.is_some() {
            // A named token's bytes count as usable: eight of them for its one token.
            usable[tokens::HIGH as usize..].fill(true);
        }
        let usable = &usable;
        // A named token's bytes stand for one token: the DFA's counts (exact over text tokens)
        // would count eight, so such grammars go to the parser, whose terminal for the token
        // counts one.
        let rules = cfg::RegularRules::of(&grammar);
        let regular = match opts.backend {
            BackendChoice::Auto if named.is_none() => cfg::Cfg::regular_lexeme(&grammar, &rules)?,
            _ => None,
        };
        let mut why_empty = None;
        let backend = match regular {
            Some(lexeme) => {
                // An empty regular language compiles (`is_empty_language`); generation refuses it.
                let dfa = Dfa::shared(&lexeme, opts.limits.dfa)?;
                if dfa.start() == StateId::DEAD {
                    why_empty = Some(empty_language(constraint, &grammar, opts.limits.dfa).to_string());
                }
                let finish_tokens = dfa.dist_using(usable);
                Backend::Dfa { dfa, finish_tokens }
            }
            None => match cfg::Cfg::lower(&grammar, rules, usable, opts.limits)? {
                Some(mut cfg) => {
                    if named.is_some() {
                        tokens::mark_terms(&mut cfg);
                    }
                    if cfg.has_marks {
                        // The distinct-items filter's token sets: built (once per vocabulary)
                        // with the compile, not in the first mask.
                        cfg.distinct_tokens(env);
                    }
                    Backend::Earley(Box::new(cfg))
                }
                None => return Err(empty_language(constraint, &grammar, opts.limits.dfa)),
            },
        };
        Ok(Arc::new(Compiled { env: env.clone(), backend, named, why_empty }))
    }

    pub fn vocab(&self) -> &Arc<Vocab> {
        self.env.vocab()
    }

    /// The tokens the grammar names by id or name (token terminals), in id order: allowed only
    /// where the grammar names them, and their text is part of the output (detokenizers that
    /// skip control tokens must show these).
    pub fn named_tokens(&self) -> Vec<TokenId> {
        self.named.as_ref().map_or_else(Vec::new, |n| n.tokens().iter().map(|(t, _)| *t).collect())
    }

    /// The vocabulary environment this was compiled for.
    pub fn env(&self) -> &Arc<VocabEnv> {
        &self.env
    }

    /// Does the constraint match no output at all? (Only a regular constraint compiles with an
    /// empty language; a context-free one whose start derives nothing is a compile error.)
    pub fn is_empty_language(&self) -> bool {
        self.why_empty.is_some()
    }

    /// Why the constraint matches no output at all, in its front end's terms (for a JSON
    /// Schema, the subschemas that accept nothing and their pointers); `None` where it matches
    /// some. The message a compile error would have been (see [`Compiled::is_empty_language`]).
    pub fn why_empty(&self) -> Option<&str> {
        self.why_empty.as_deref()
    }

    /// A fresh matcher at the start of the output.
    pub fn matcher(self: &Arc<Self>) -> Matcher {
        Matcher::new(self.clone())
    }

    /// Fewest tokens of the vocabulary from the start to a complete output, as a fresh matcher
    /// counts them ([`Matcher::min_tokens_to_finish`]): exact for a regular constraint (within
    /// the token search's bound, see `token_dist`); for a context-free one the smaller of the
    /// lexeme-by-lexeme count (an upper bound: a token that straddles two lexemes is not counted
    /// as one), the witness (a completion spelled in tokens, checked by committing it) and,
    /// when few tokens finish, the exact search over token sequences. Where items or keys must
    /// be distinct, the shortest way shown that keeps them so (a budget that fits).
    pub fn min_tokens(self: &Arc<Self>) -> Option<u32> {
        self.matcher().min_tokens_to_finish()
    }

    /// Facts about the compiled form, for `strictly check`.
    pub fn stats(&self) -> serde_json::Value {
        match &self.backend {
            Backend::Dfa { dfa, .. } => serde_json::json!({"engine": "dfa", "dfa_states": dfa.state_count()}),
            Backend::Earley(cfg) => serde_json::json!({
                "engine": "earley",
                "terminals": cfg.terms.len(),
                "nonterminals": cfg.nts.len(),
                "productions": cfg.prods.len(),
                "lexer_states": cfg.terms.iter().map(|t| t.dfa.state_count()).sum::<usize>(),
            }),
        }
    }
}

/// The error for a constraint whose language is empty, in its front end's terms. (A JSON
/// Schema is compiled again for its reasons: this is the error path.)
fn empty_language(constraint: &Constraint, grammar: &Grammar, limits: DfaLimits) -> Error {
    match constraint {
        Constraint::JsonSchema(schema, o) => {
            grammar::json_schema::why_empty(schema, o, limits).unwrap_or_else(grammar::json_schema::no_value_error)
        }
        Constraint::Regex(_) => Error::Regex {
            at: Location::Column(1),
            msg: "no string matches this regex (its assertions or classes contradict each other)".into(),
        },
        Constraint::AfterReasoning { then, .. } => empty_language(then, grammar, limits),
        Constraint::Grammar(_) | Constraint::Choice(_) | Constraint::Triggered { .. } => {
            let start = grammar.rule(grammar.start);
            let span = start.span.unwrap_or(crate::grammar::Span { line: 1, col: 1 });
            Error::Grammar {
                at: Location::LineCol { line: span.line, col: span.col },
                msg: format!(
                    "rule `{}` derives no finite string (every alternative recurses forever or matches nothing)",
                    start.name
                ),
            }
        }
    }
}
