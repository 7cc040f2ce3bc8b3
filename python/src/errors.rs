//! strictly's typed errors as Python exceptions.
//!
//! Every error the library returns becomes an instance of one class under
//! `strictly.StrictlyError` (itself a `ValueError`, so `except ValueError` still catches a bad
//! schema), chosen by the error's kind, with the place as attributes a caller can read without
//! parsing the message:
//!
//! | class | when | attributes (else `None`) |
//! |---|---|---|
//! | `SchemaError` | a JSON Schema that is malformed or cannot be enforced | `pointer`, `keyword` |
//! | `RegexError` | a regex that does not parse | `column` |
//! | `GrammarError` | GBNF or Lark that does not parse, or derives nothing | `line`, `column` |
//! | `LimitError` | a documented limit (automaton size, nesting, ...) | `limit_kind`, `limit` |
//! | `TokenizerError` | a tokenizer that cannot be read | `path` |
//! | `TokenNotAllowedError` | a commit the constraint refuses | `token` |
//! | `StateError` | a call out of order (rolling back too far) | |
//! | `StrictlyError` | anything else (bad parameters, I/O) | |
//!
//! Every instance also has `kind` (the class's short name: `"schema"`, `"regex"`, ...) and
//! `message` (the problem without its place); `str(e)` is the library's one-line message.
//! `keyword` is the last segment of the pointer when that segment is a JSON Schema keyword
//! (`/properties/name/pattern` → `pattern`), as the pointer names the keyword's place.

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use strictly::error::{Error, Location};

create_exception!(_strictly, StrictlyError, PyValueError, "Every error strictly raises (a ValueError).");
create_exception!(
    _strictly,
    SchemaError,
    StrictlyError,
    "A JSON Schema that is malformed or cannot be enforced exactly."
);
create_exception!(_strictly, RegexError, StrictlyError, "A regex that does not parse or cannot be compiled.");
create_exception!(
    _strictly,
    GrammarError,
    StrictlyError,
    "A GBNF or Lark grammar that does not parse or derives nothing."
);
create_exception!(_strictly, LimitError, StrictlyError, "A documented limit was hit (automaton size, nesting, ...).");
create_exception!(_strictly, TokenizerError, StrictlyError, "A tokenizer that cannot be read or understood.");
create_exception!(_strictly, TokenNotAllowedError, StrictlyError, "A token the constraint does not allow here.");
create_exception!(
    _strictly,
    StateError,
    StrictlyError,
    "A call out of order, such as rolling back more than was committed."
);

/// Registers the exception classes on the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("StrictlyError", py.get_type::<StrictlyError>())?;
    m.add("SchemaError", py.get_type::<SchemaError>())?;
    m.add("RegexError", py.get_type::<RegexError>())?;
    m.add("GrammarError", py.get_type::<GrammarError>())?;
    m.add("LimitError", py.get_type::<LimitError>())?;
    m.add("TokenizerError", py.get_type::<TokenizerError>())?;
    m.add("TokenNotAllowedError", py.get_type::<TokenNotAllowedError>())?;
    m.add("StateError", py.get_type::<StateError>())?;
    Ok(())
}

/// Keywords of JSON Schema that a pointer's last segment may name (those strictly reads).
const KEYWORDS: &[&str] = &[
    "$ref",
    "$defs",
    "$id",
    "$anchor",
    "$dynamicRef",
    "$dynamicAnchor",
    "$schema",
    "additionalItems",
    "additionalProperties",
    "allOf",
    "anyOf",
    "const",
    "contains",
    "definitions",
    "dependencies",
    "dependentRequired",
    "dependentSchemas",
    "else",
    "enum",
    "exclusiveMaximum",
    "exclusiveMinimum",
    "format",
    "if",
    "items",
    "maxContains",
    "maxItems",
    "maxLength",
    "maxProperties",
    "maximum",
    "minContains",
    "minItems",
    "minLength",
    "minProperties",
    "minimum",
    "multipleOf",
    "not",
    "oneOf",
    "pattern",
    "patternProperties",
    "prefixItems",
    "properties",
    "propertyNames",
    "required",
    "then",
    "type",
    "unevaluatedItems",
    "unevaluatedProperties",
    "uniqueItems",
];

/// The keyword a schema pointer ends in, if its last segment is one.
fn keyword_of(pointer: &str) -> Option<&str> {
    let last = pointer.rsplit('/').next()?;
    KEYWORDS.contains(&last).then_some(last)
}

/// The Python exception for a library error (see the module docs).
pub fn to_py(e: Error) -> PyErr {
    Python::attach(|py| {
        let text = e.to_string();
        let (err, kind) = match &e {
            Error::Schema { .. } => (SchemaError::new_err(text), "schema"),
            Error::Regex { .. } => (RegexError::new_err(text), "regex"),
            Error::Grammar { .. } => (GrammarError::new_err(text), "grammar"),
            Error::Limit { .. } => (LimitError::new_err(text), "limit"),
            Error::Tokenizer { .. } => (TokenizerError::new_err(text), "tokenizer"),
            Error::TokenNotAllowed { .. } | Error::TextNotAllowed { .. } => {
                (TokenNotAllowedError::new_err(text), "not_allowed")
            }
            Error::State { .. } => (StateError::new_err(text), "state"),
            Error::Param { .. } => (StrictlyError::new_err(text), "param"),
            Error::Io { .. } => (StrictlyError::new_err(text), "io"),
            _ => (StrictlyError::new_err(text), "other"),
        };
        let value = err.value(py);
        let mut attrs: Vec<(&str, Py<PyAny>)> = vec![("kind", kind.into_pyobject(py).unwrap().into_any().unbind())];
        let none = || py.None();
        let (mut pointer, mut keyword, mut line, mut column) = (none(), none(), none(), none());
        let (mut path, mut limit_kind, mut limit, mut token) = (none(), none(), none(), none());
        let message: String = match &e {
            Error::Schema { at, msg } | Error::Regex { at, msg } | Error::Grammar { at, msg } => {
                match at {
                    Location::Pointer(p) => {
                        pointer = p.into_pyobject(py).unwrap().into_any().unbind();
                        if let Some(k) = keyword_of(p) {
                            keyword = k.into_pyobject(py).unwrap().into_any().unbind();
                        }
                    }
                    Location::Column(c) => column = c.into_pyobject(py).unwrap().into_any().unbind(),
                    Location::LineCol { line: l, col } => {
                        line = l.into_pyobject(py).unwrap().into_any().unbind();
                        column = col.into_pyobject(py).unwrap().into_any().unbind();
                    }
                }
                msg.clone()
            }
            Error::Limit { kind, what, limit: n, .. } => {
                limit_kind = format!("{kind:?}").into_pyobject(py).unwrap().into_any().unbind();
                limit = n.into_pyobject(py).unwrap().into_any().unbind();
                what.clone()
            }
            Error::Tokenizer { path: p, msg } => {
                path = p.into_pyobject(py).unwrap().into_any().unbind();
                msg.clone()
            }
            Error::Io { path: p, source } => {
                path = p.into_pyobject(py).unwrap().into_any().unbind();
                source.to_string()
            }
            Error::TokenNotAllowed { token: t, .. } => {
                token = t.into_pyobject(py).unwrap().into_any().unbind();
                e.to_string()
            }
            _ => e.to_string(),
        };
        attrs.push(("message", message.into_pyobject(py).unwrap().into_any().unbind()));
        attrs.extend([
            ("pointer", pointer),
            ("keyword", keyword),
            ("line", line),
            ("column", column),
            ("path", path),
            ("limit_kind", limit_kind),
            ("limit", limit),
            ("token", token),
        ]);
        for (name, v) in attrs {
            // Exception instances take attributes; if one would not, the message still says it all.
            let _ = value.setattr(name, v);
        }
        err
    })
}

/// A `StrictlyError` for a caller's mistake found by the binding itself.
pub fn param(msg: impl Into<String>) -> PyErr {
    to_py(Error::param(msg.into()))
}
