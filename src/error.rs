//! Typed errors for the library.
//!
//! Every error names the problem and, where there is one, the place: a column in a regex,
//! a `line:column` in a grammar, a JSON pointer in a schema, a file path. A caller matches on
//! the kind ([`Error`]'s variants; a limit's [`LimitKind`]) and shows `Display`, one line.
//! Limits surface as [`Error::Limit`], never as panics or hangs. The CLI prints `Display` and
//! exits 2; the server maps kinds to HTTP statuses (`server::ApiError::from_lib`).
//!
//! Both enums are `#[non_exhaustive]`: new kinds may come without a breaking change.

use std::fmt;

/// Where in the user's input a problem is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A 1-based column (character offset) in a one-line input such as a regex.
    Column(usize),
    /// A 1-based line and column in a multi-line input such as a grammar file.
    LineCol { line: usize, col: usize },
    /// A JSON pointer into a schema, e.g. `/properties/name/pattern`.
    Pointer(String),
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Column(c) => write!(f, "column {c}"),
            Location::LineCol { line, col } => write!(f, "{line}:{col}"),
            Location::Pointer(p) if p.is_empty() => write!(f, "the schema root"),
            Location::Pointer(p) => write!(f, "{p}"),
        }
    }
}

/// Which documented limit was hit. Each has a default (named where it is defined) that the
/// caller can raise or lower where it is an option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LimitKind {
    /// Heap for a regex's Thompson NFA (`DfaLimits::nfa_bytes`).
    NfaBytes,
    /// Heap for a DFA under construction (`DfaLimits::dfa_bytes`).
    DfaBytes,
    /// States of one DFA (`DfaLimits::states`).
    DfaStates,
    /// Distinct lexemes of a grammar (`CfgLimits::max_terminals`).
    Terminals,
    /// Productions of a grammar (`CfgLimits::max_productions`).
    Productions,
    /// Copies a counted repetition of a non-regular expression unrolls to
    /// (`CfgLimits::max_unrolled`).
    Unrolled,
    /// Earley items in one parser row (`CfgLimits::max_row_items`).
    ParserRow,
    /// Nesting depth of groups in a grammar or regex text.
    GrammarNesting,
    /// A repetition count in a grammar text.
    Repetition,
    /// Nesting depth of subschemas (`json_schema::MAX_DEPTH`).
    SchemaDepth,
    /// JSON nesting depth of a schema document (`json_schema::MAX_JSON_DEPTH`).
    DocumentDepth,
    /// Values of one `enum` (`json_schema::MAX_ENUM`).
    EnumValues,
    /// Names in one object schema's `properties` or `required` (`json_schema::MAX_PROPERTIES`).
    Properties,
    /// Token ids of a vocabulary.
    Vocabulary,
    /// The model's context (`max_position_embeddings`): the prompt and the output must fit.
    Context,
    /// Stop strings of one request, or the bytes of one.
    StopStrings,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A tokenizer file could not be read or understood.
    #[error("tokenizer {path}: {msg}")]
    Tokenizer { path: String, msg: String },

    /// A regex that does not parse or cannot be compiled.
    #[error("invalid regex at {at}: {msg}")]
    Regex { at: Location, msg: String },

    /// A grammar that does not parse or is inconsistent (undefined rules, ...).
    #[error("invalid grammar at {at}: {msg}")]
    Grammar { at: Location, msg: String },

    /// A JSON Schema that is malformed or uses something that cannot be enforced exactly.
    #[error("schema at {at}: {msg}")]
    Schema { at: Location, msg: String },

    /// A documented limit was hit (automaton size, nesting depth, context length, ...).
    #[error("limit exceeded: {what} (limit {limit}){}", hint.as_deref().map(|h| format!("; {h}")).unwrap_or_default())]
    Limit { kind: LimitKind, what: String, limit: usize, hint: Option<String> },

    /// A token that the constraint does not allow at this point was committed.
    #[error("token {token} ({text:?}) is not allowed here")]
    TokenNotAllowed { token: u32, text: String },

    /// Bytes that the constraint does not allow at this point were committed.
    #[error("text {text:?} is not allowed here")]
    TextNotAllowed { text: String },

    /// A parameter out of range or inconsistent with another (sampling knobs, budgets, token
    /// ids, devices, tool definitions, benchmark options): the caller's to fix.
    #[error("{msg}")]
    Param { msg: String },

    /// A model that cannot be loaded (files, config, weights) or run (a failed forward pass).
    #[error("{msg}")]
    Model {
        msg: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },

    /// A chat template that does not compile or render.
    #[error("chat template{}: {msg}", name.as_deref().map(|n| format!(" in {n}")).unwrap_or_default())]
    Template { name: Option<String>, msg: String },

    /// A model output that does not read back as what it was constrained to be (a typed value,
    /// a tool call): never expected under a constraint, so reported rather than papered over.
    #[error("{msg}")]
    Output { msg: String },

    /// A call out of order: rolling back more than was committed, rewinding with no
    /// checkpoint, using a sequence whose last forward pass failed.
    #[error("{msg}")]
    State { msg: String },

    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A bad parameter ([`Error::Param`]).
    pub fn param(msg: impl Into<String>) -> Error {
        Error::Param { msg: msg.into() }
    }

    /// A model that cannot be loaded or run ([`Error::Model`]), with no underlying error.
    pub fn model(msg: impl Into<String>) -> Error {
        Error::Model { msg: msg.into(), source: None }
    }

    /// [`Error::Model`] keeping the underlying error as its source (its text is usually in `msg`
    /// already, so `Display` stays one line).
    pub fn model_from(msg: impl Into<String>, source: impl std::error::Error + Send + Sync + 'static) -> Error {
        Error::Model { msg: msg.into(), source: Some(Box::new(source)) }
    }

    /// A model output that does not read back ([`Error::Output`]).
    pub fn output(msg: impl Into<String>) -> Error {
        Error::Output { msg: msg.into() }
    }

    /// A call out of order ([`Error::State`]).
    pub fn state(msg: impl Into<String>) -> Error {
        Error::State { msg: msg.into() }
    }

    /// A limit of `kind` hit ([`Error::Limit`]), with no hint.
    pub fn limit(kind: LimitKind, what: impl Into<String>, limit: usize) -> Error {
        Error::Limit { kind, what: what.into(), limit, hint: None }
    }

    /// [`Error::limit`] with a hint on what to change.
    pub fn limit_hint(kind: LimitKind, what: impl Into<String>, limit: usize, hint: impl Into<String>) -> Error {
        Error::Limit { kind, what: what.into(), limit, hint: Some(hint.into()) }
    }

    /// The kind of limit, for a [`Error::Limit`].
    pub fn limit_kind(&self) -> Option<LimitKind> {
        match self {
            Error::Limit { kind, .. } => Some(*kind),
            _ => None,
        }
    }
}
