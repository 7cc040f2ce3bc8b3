//! Typed errors for the library.
//!
//! Every error names the problem and, where there is one, the place: a column in a regex,
//! a `line:column` in a grammar, a JSON pointer in a schema, a file path. Limits surface as
//! [`Error::Limit`], never as panics or hangs. The CLI prints `Display` on one line and exits 2.

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

#[derive(Debug, thiserror::Error)]
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

    /// A documented limit was hit (automaton size, nesting depth, ...).
    #[error("limit exceeded: {what} (limit {limit}){}", hint.as_deref().map(|h| format!("; {h}")).unwrap_or_default())]
    Limit { what: String, limit: usize, hint: Option<String> },

    /// A token that the constraint does not allow at this point was committed.
    #[error("token {token} ({text:?}) is not allowed here")]
    TokenNotAllowed { token: u32, text: String },

    /// Bad parameters (sampling knobs, budgets, ...).
    #[error("{0}")]
    Invalid(String),

    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn invalid(msg: impl Into<String>) -> Error {
        Error::Invalid(msg.into())
    }

    pub fn limit(what: impl Into<String>, limit: usize) -> Error {
        Error::Limit { what: what.into(), limit, hint: None }
    }
}
