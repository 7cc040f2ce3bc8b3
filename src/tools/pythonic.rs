//! Pythonic tool calls ([`ToolFormat::Pythonic`](super::ToolFormat::Pythonic)), as Llama 4's
//! tool templates teach them: the whole reply is a Python list of calls with keyword
//! arguments,
//!
//! ```text
//! [get_weather(city="Paris", days=3), note(text="Pack \"boots\"", urgent=True)]
//! ```
//!
//! The grammar ([`arguments_grammar`]) writes the properties the schema names, in declared
//! order, required ones always and optional ones or not, each value a Python literal of the
//! property's schema: JSON's spelling, which Python reads the same (double-quoted strings with
//! JSON's escapes, numbers, lists, dicts), except `True`, `False` and `None`
//! ([`JsonSchemaOptions::python`]). The reader turns a call back into the JSON object of its
//! arguments (the three words spelled as JSON again), one value at a time.
//!
//! Limits, each a clear error when a tool asks for it: those of the XML formats' element lists
//! (an object schema whose own keywords a fixed list of arguments can enforce), and property
//! names must be Python identifiers. Calls of one reply are not checked for repeats in this
//! format.

use serde_json::Value;

use super::parse::{Found, ValueScanner};
use super::xml::params;
use crate::error::{Error, Location, Result};
use crate::grammar::json_schema::{self, JsonSchemaOptions, PartForm};
use crate::grammar::{Expr, Grammar, Rule, RuleId};

/// Whether `s` is a Python identifier (ASCII).
fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The grammar of a call's keyword arguments (what comes between `NAME(` and `)`) for a tool
/// whose arguments have the JSON Schema `parameters`; values in `opts`' language spelled as
/// Python literals.
pub fn arguments_grammar(parameters: &Value, opts: &JsonSchemaOptions) -> Result<Grammar> {
    let params = params(parameters)?;
    if let Some(p) = params.iter().find(|p| !is_identifier(&p.key)) {
        return Err(Error::Schema {
            at: Location::Pointer(p.pointer.clone()),
            msg: format!(
                "the property name {:?} is not a Python identifier, so it cannot be a keyword argument",
                p.key
            ),
        });
    }
    let opts = JsonSchemaOptions { python: true, ..opts.clone() };
    let forms: Vec<(&str, PartForm)> = params.iter().map(|p| (p.pointer.as_str(), PartForm::Json)).collect();
    let (mut rules, values) = json_schema::compile_parts(parameters, &opts, &forms)?;
    // rest(i, written): the arguments from the i-th on, after `written` earlier ones (a
    // separator goes before each argument but the first written).
    let n = params.len();
    let base = rules.len() as u32;
    let id = |i: usize, written: bool| RuleId(base + (2 * i + written as usize) as u32);
    for i in 0..=n {
        for written in [false, true] {
            rules.push(Rule { name: format!("kwargs_{i}_{written}"), body: Expr::Empty, span: None });
        }
    }
    for (i, (p, value)) in params.iter().zip(values).enumerate() {
        for written in [false, true] {
            let mut seq = Vec::new();
            if written {
                seq.push(Expr::Literal(", ".into()));
            }
            seq.push(Expr::Literal(format!("{}=", p.key)));
            seq.push(value.clone());
            seq.push(Expr::Rule(id(i + 1, true)));
            let with = Expr::Seq(seq);
            rules[id(i, written).0 as usize].body =
                if p.required { with } else { Expr::Alt(vec![with, Expr::Rule(id(i + 1, written))]) };
        }
    }
    Ok(Grammar { start: id(0, false), rules })
}

/// Where the reader is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    /// Before the list's `[`.
    List,
    /// A call's name, up to `(`.
    Name,
    /// A keyword, up to `=`, or the call's `)`.
    Key,
    /// A value.
    Value,
    /// After a value: `,` or `)`.
    AfterValue,
    /// After a call: `,` and another, or `]`.
    AfterCall,
    /// The list is closed.
    Done,
}

/// Reads a reply's list of calls as it streams (see the module docs).
#[derive(Debug, Clone)]
pub(super) struct PyCalls {
    at: At,
    params: usize,
    scan: ValueScanner,
    value: String,
}

impl Default for PyCalls {
    fn default() -> PyCalls {
        PyCalls { at: At::List, params: 0, scan: ValueScanner::default(), value: String::new() }
    }
}

fn is_ws(c: char) -> bool {
    matches!(c, ' ' | '\n' | '\r' | '\t')
}

/// A Python literal of the grammar's spelling as JSON: `True`, `False`, `None` outside strings
/// become `true`, `false`, `null`.
fn to_json(py: &str) -> String {
    let mut out = String::with_capacity(py.len());
    let (mut in_str, mut esc) = (false, false);
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        out.push_str(match word.as_str() {
            "True" => "true",
            "False" => "false",
            "None" => "null",
            w => w,
        });
        word.clear();
    };
    for c in py.chars() {
        if in_str {
            out.push(c);
            if esc {
                esc = false;
            } else if c == '\\' {
                esc = true;
            } else if c == '"' {
                in_str = false;
            }
        } else if c.is_ascii_alphabetic() {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            if c == '"' {
                in_str = true;
            }
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

impl PyCalls {
    /// Reads what it can from the start of `buf`, draining what it read.
    pub(super) fn read(&mut self, buf: &mut String) -> Found {
        // Whitespace between the parts is allowed (the grammar writes none but after commas).
        if !matches!(self.at, At::Value) {
            let skip = buf.len() - buf.trim_start_matches(is_ws).len();
            buf.drain(..skip);
        }
        let Some(first) = buf.chars().next() else { return Found::More };
        match self.at {
            At::List | At::AfterCall => match (self.at, first) {
                (At::List, '[') | (At::AfterCall, ',') => {
                    buf.drain(..1);
                    self.at = At::Name;
                    self.read(buf)
                }
                (At::AfterCall, ']') => {
                    buf.drain(..1);
                    self.at = At::Done;
                    Found::End
                }
                _ => Found::Bad,
            },
            At::Name | At::Key => {
                let end = if self.at == At::Name { '(' } else { '=' };
                if self.at == At::Key && first == ')' {
                    buf.drain(..1);
                    self.at = At::AfterCall;
                    return Found::Args(if self.params == 0 { "{}" } else { "}" }.into());
                }
                let Some(n) = buf.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) else { return Found::More };
                if !buf[n..].starts_with(end) || !is_identifier(&buf[..n]) {
                    return Found::Bad;
                }
                let word: String = buf.drain(..n + 1).collect();
                let word = word[..n].to_string();
                if self.at == At::Name {
                    self.params = 0;
                    self.at = At::Key;
                    return Found::Start(word);
                }
                let sep = if self.params == 0 { "{" } else { ", " };
                self.params += 1;
                self.scan = ValueScanner::default();
                self.value.clear();
                self.at = At::Value;
                Found::Args(format!("{sep}{}: ", serde_json::to_string(&word).expect("a string serializes")))
            }
            At::Value => {
                let end = self.scan.scan(buf);
                let n = end.unwrap_or(buf.len());
                self.value.extend(buf.drain(..n));
                if end.is_none() {
                    return Found::More;
                }
                self.at = At::AfterValue;
                Found::Args(to_json(&std::mem::take(&mut self.value)))
            }
            At::AfterValue => match first {
                ',' => {
                    buf.drain(..1);
                    self.at = At::Key;
                    self.read(buf)
                }
                ')' => {
                    buf.drain(..1);
                    self.at = At::AfterCall;
                    Found::Args("}".into())
                }
                _ => Found::Bad,
            },
            At::Done => Found::Bad,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_words_become_json_outside_strings() {
        assert_eq!(
            to_json(r#"[True, {"a": None}, "False \" None", 1e5]"#),
            r#"[true, {"a": null}, "False \" None", 1e5]"#
        );
        assert_eq!(to_json("False"), "false");
        assert!(is_identifier("_a1") && !is_identifier("1a") && !is_identifier("a-b") && !is_identifier(""));
    }

    #[test]
    fn keyword_arguments_keep_their_order_and_separators() {
        use crate::automaton::{Compiled, Constraint, VocabEnv};
        let schema = serde_json::json!({"type": "object", "properties": {
            "a": {"type": "integer", "minimum": 0, "maximum": 9}, "b": {"type": "boolean"}, "c": {"type": "null"}
        }, "required": ["b"]});
        let g = arguments_grammar(&schema, &JsonSchemaOptions::default()).unwrap();
        let env = VocabEnv::new(std::sync::Arc::new(crate::vocab::Vocab::byte_level()));
        let c = Compiled::new(&env, &Constraint::Grammar(g)).unwrap();
        let accepts = |s: &str| {
            let mut m = c.matcher();
            m.commit_bytes(s.as_bytes()).is_ok() && m.is_accepting()
        };
        for ok in ["b=True", "a=3, b=False", "b=True, c=None", "a=0, b=True, c=None"] {
            assert!(accepts(ok), "{ok}");
        }
        for bad in ["", "a=3", "b=true", "b=True, a=3", "a=3,b=True", ", b=True", "b=True, c=null"] {
            assert!(!accepts(bad), "{bad}");
        }
        let bad = serde_json::json!({"type": "object", "properties": {"not-an-id": {}}});
        let e = arguments_grammar(&bad, &JsonSchemaOptions::default()).unwrap_err().to_string();
        assert!(e.contains("not a Python identifier") && e.contains("/properties/not-an-id"), "{e}");
    }
}
