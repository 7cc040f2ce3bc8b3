//! `strictly.compile`: a constraint compiled for a vocabulary, once, shared by every sequence.
//!
//! The five kinds of input map onto the library's [`Constraint`] as `strictly check` builds
//! them: `json_schema` (a string or any JSON-able value, with [`JsonSchemaOptions`] from the
//! keyword options), `regex` (the whole output must match), `grammar` (GBNF, or Lark when the
//! text is Lark: `grammar::lark::looks_like_lark`), `lark`, and `choice` (one of a list of
//! strings). `triggers` wraps any of them as the library's lazy constraint (free text until a
//! trigger, then the constraint): text, or one token as `{"token": NAME_OR_ID}`.
//!
//! A `Compiled` is immutable and thread-safe: share it across threads and sequences, and
//! cache it by its inputs (the vLLM and SGLang adapters do). Compiling releases the GIL.

use std::sync::Arc;

use pyo3::prelude::*;
use strictly::automaton::{Compiled, Constraint};
use strictly::grammar::json_schema::{JsonSchemaOptions, Whitespace};
use strictly::grammar::lark::{self, LarkOptions};
use strictly::grammar::{ebnf, Grammar};

use crate::errors::{param, to_py};
use crate::matcher::PyMatcher;
use crate::vocab::PyVocab;

#[pyclass(name = "Compiled", module = "strictly", frozen)]
pub struct PyCompiled {
    pub inner: Arc<Compiled>,
    pub vocab: Py<PyVocab>,
    kind: &'static str,
    warnings: Vec<String>,
}

#[pymethods]
impl PyCompiled {
    /// A fresh matcher at the start of the output: one per sequence.
    fn matcher(slf: &Bound<'_, Self>) -> PyMatcher {
        PyMatcher::new(slf.get(), slf.get().vocab.get().vocab_size)
    }

    #[getter]
    fn vocab(&self, py: Python<'_>) -> Py<PyVocab> {
        self.vocab.clone_ref(py)
    }

    /// Which input it came from: `json_schema`, `regex`, `grammar`, `lark` or `choice`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.kind
    }

    /// What in the input loads but is likely a mistake (a grammar's unreachable rules).
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }

    /// Does no output at all match? (Only a regular constraint compiles with an empty language.)
    fn is_empty_language(&self) -> bool {
        self.inner.is_empty_language()
    }

    /// Why no output matches, where none does (for a JSON Schema: the subschemas that accept
    /// nothing, by JSON pointer, and why); `None` otherwise.
    #[getter]
    fn why_empty(&self) -> Option<String> {
        self.inner.why_empty().map(str::to_string)
    }

    /// Facts about the compiled form (engine, states, terminals), as a dict.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let text = self.inner.stats().to_string();
        py.import("json")?.call_method1("loads", (text,))
    }

    fn __repr__(&self) -> String {
        format!("Compiled(kind={:?}, {})", self.kind, self.inner.stats())
    }
}

/// `strictly.compile(vocab, json_schema=... | regex=... | grammar=... | lark=... | choice=...,
/// whitespace=None, exact=False, lenient=False, triggers=None)`.
#[pyfunction]
#[pyo3(signature = (vocab, *, json_schema=None, regex=None, grammar=None, lark=None, choice=None,
                    whitespace=None, exact=false, lenient=false, triggers=None))]
#[allow(clippy::too_many_arguments)]
pub fn compile(
    py: Python<'_>,
    vocab: Bound<'_, PyVocab>,
    json_schema: Option<Bound<'_, PyAny>>,
    regex: Option<String>,
    grammar: Option<String>,
    lark: Option<String>,
    choice: Option<Vec<String>>,
    whitespace: Option<String>,
    exact: bool,
    lenient: bool,
    triggers: Option<Bound<'_, PyAny>>,
) -> PyResult<PyCompiled> {
    let given = [json_schema.is_some(), regex.is_some(), grammar.is_some(), lark.is_some(), choice.is_some()];
    if given.iter().filter(|&&g| g).count() != 1 {
        return Err(param("compile needs exactly one of json_schema, regex, grammar, lark or choice"));
    }
    let mut json = if exact { JsonSchemaOptions::exact() } else { JsonSchemaOptions::default() };
    if let Some(w) = &whitespace {
        json.whitespace = w.parse::<Whitespace>().map_err(param)?;
    }
    json.lenient = lenient;
    let json_options_given = whitespace.is_some() || exact || lenient;
    if json_options_given && json_schema.is_none() && lark.is_none() && grammar.is_none() {
        return Err(param(
            "whitespace, exact and lenient apply to json_schema (and Lark's %json), not to regex or choice",
        ));
    }

    let mut warnings = Vec::new();
    let (constraint, kind) = if let Some(schema) = json_schema {
        let text: String = if schema.is_instance_of::<pyo3::types::PyString>() {
            schema.extract()?
        } else {
            py.import("json")?.call_method1("dumps", (schema,))?.extract()?
        };
        let value = strictly::grammar::json_schema::read_document(text.as_bytes()).map_err(to_py)?;
        (Constraint::JsonSchema(value, json), "json_schema")
    } else if let Some(r) = regex {
        (Constraint::Regex(r), "regex")
    } else if let Some(options) = choice {
        (Constraint::Choice(options), "choice")
    } else {
        let (text, is_lark) = match (grammar, lark) {
            (Some(g), _) => {
                let is_lark = lark::looks_like_lark(&g);
                (g, is_lark)
            }
            (None, Some(l)) => (l, true),
            (None, None) => unreachable!("one input was given"),
        };
        let (g, w): (Grammar, Vec<String>) = py
            .detach(|| {
                if is_lark {
                    let opts = LarkOptions { json: json.clone(), ..LarkOptions::default() };
                    lark::parse_with_warnings(&text, &opts).map(|(g, w)| (g, w.iter().map(|w| w.to_string()).collect()))
                } else {
                    ebnf::parse_with_warnings(&text, &Default::default())
                        .map(|(g, w)| (g, w.iter().map(|w| w.to_string()).collect()))
                }
            })
            .map_err(to_py)?;
        warnings = w;
        (Constraint::Grammar(g), if is_lark { "lark" } else { "grammar" })
    };
    let constraint = match triggers {
        None => constraint,
        Some(t) => {
            let list: Vec<Bound<'_, PyAny>> = match t.extract::<Vec<Bound<'_, PyAny>>>() {
                Ok(xs) if !t.is_instance_of::<pyo3::types::PyString>() => xs,
                _ => vec![t],
            };
            let triggers = list.iter().map(one_trigger).collect::<PyResult<Vec<_>>>()?;
            Constraint::Triggered { triggers, then: Box::new(constraint) }
        }
    };
    let env = vocab.get().env.clone();
    let inner = py.detach(|| Compiled::new(&env, &constraint)).map_err(to_py)?;
    Ok(PyCompiled { inner, vocab: vocab.unbind(), kind, warnings })
}

/// One trigger: text (a string), or one token (`{"token": NAME_OR_ID}`: `"<|python_tag|>"`,
/// `"<[128010]>"` or `128010`), as the server's `trigger` takes them.
fn one_trigger(t: &Bound<'_, PyAny>) -> PyResult<strictly::grammar::trigger::Trigger> {
    use strictly::grammar::{trigger::Trigger, TokenRef};
    let bad = || param("a trigger is a string or {\"token\": NAME_OR_ID}");
    if let Ok(s) = t.extract::<String>() {
        return Ok(Trigger::Text(s));
    }
    let d = t.cast::<pyo3::types::PyDict>().map_err(|_| bad())?;
    if d.len() != 1 {
        return Err(bad());
    }
    let token = d.get_item("token")?.ok_or_else(bad)?;
    if let Ok(id) = token.extract::<u32>() {
        return Ok(Trigger::Token(TokenRef::Id(id)));
    }
    Ok(Trigger::Token(TokenRef::parse(&token.extract::<String>().map_err(|_| bad())?)))
}
