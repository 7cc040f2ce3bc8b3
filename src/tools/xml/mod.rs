//! XML tool calls ([`ToolFormat::Xml`](super::ToolFormat::Xml)): a call is an element naming the function, holding one
//! element per argument, as the templates of four families write them ([`XmlDialect`]):
//!
//! ```text
//! Qwen (Qwen3-Coder, Qwen3.5)      Seed (Seed-OSS)              GLM (4.5, 4.6)            MiniMax (M2)
//! <tool_call>                      <seed:tool_call>             <tool_call>get_weather    <minimax:tool_call>
//! <function=get_weather>           <function=get_weather>       <arg_key>city</arg_key>   <invoke name="get_weather">
//! <parameter=city>                 <parameter=city>Paris</para… <arg_value>Paris</arg_v…  <parameter name="city">Paris</param…
//! Paris                            <parameter=days>3</parame…   <arg_key>days</arg_key>   <parameter name="days">3</paramet…
//! </parameter>                     </function>                  <arg_value>3</arg_value>  </invoke>
//! <parameter=days>                 </seed:tool_call>            </tool_call>              </minimax:tool_call>
//! 3
//! </parameter>
//! </function>
//! </tool_call>
//! ```
//!
//! Each argument's value is typed by the tool's schema ([`ValueKind`]): a string property's
//! value is its bare text (no quotes, no escapes; what the templates write for a string and what
//! the families' own parsers read back as one), any other property's value is JSON text
//! (numbers, `true`/`false`, `null`, objects, arrays, and values of schemas that mix strings
//! with other types). The grammar ([`arguments_grammar`]) writes the properties the schema
//! names, in their declared order, required ones always and optional ones or not; the parser
//! ([`super::OutputParser`], with the reader in `read`) turns them back into the JSON object of
//! the arguments, which then validates against the tool's schema.
//!
//! Limits, each a clear error when a tool asks for it: the arguments must be an object schema
//! whose own keywords the element list can enforce (`properties`, `required`, `minProperties`
//! that the required ones meet, ...; not `anyOf` at the top, `dependentRequired`, ...), a
//! property name cannot hold `<`, `>`, `"` or a newline, and a text value never contains the
//! end of its element (`\n</parameter>`, `</arg_value>`, ...) or of the call. No call repeats an
//! earlier one of the reply: the grammar writes one text per call and arguments, and the
//! repeat check compares the calls' texts (a [`Mark::DistinctText`](crate::grammar::Mark) on
//! the opening tag; a JSON value holding the call's closing tags in a string ends the compared
//! text early, which can only refuse more).

pub(super) mod read;

use std::collections::HashMap;
use std::sync::Arc;

use regex_syntax::hir::Hir;
use serde_json::{Map, Value};

use crate::error::{Error, Location, Result};
use crate::grammar::json_schema::{self, JsonSchemaOptions, PartForm};
use crate::grammar::{Expr, Grammar, Rule, RuleId};
use crate::regular::Lexeme;

/// Which family's XML (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum XmlDialect {
    /// Qwen3-Coder, Qwen3.5: `<tool_call>`, `<function=NAME>`, `<parameter=KEY>` with the value
    /// on lines of its own.
    Qwen,
    /// ByteDance Seed-OSS: `<seed:tool_call>`, Qwen's elements, values inline.
    Seed,
    /// GLM-4.5/4.6: `<tool_call>NAME`, `<arg_key>KEY</arg_key>`, `<arg_value>VALUE</arg_value>`.
    Glm,
    /// MiniMax-M2: `<minimax:tool_call>`, `<invoke name="NAME">`, `<parameter name="KEY">`.
    MiniMax,
}

/// The fixed text of a dialect: a call is `call_open name_open NAME name_close`, then per
/// argument `key_open KEY key_close VALUE value_end after_value`, then `call_end` (which ends
/// with `call_close`, the block's closing tag);
/// calls follow each other after a newline.
#[derive(Debug)]
pub struct Syntax {
    pub call_open: &'static str,
    pub name_open: &'static str,
    pub name_close: &'static str,
    pub key_open: &'static str,
    pub key_close: &'static str,
    pub value_end: &'static str,
    pub after_value: &'static str,
    pub call_end: &'static str,
    pub call_close: &'static str,
}

impl XmlDialect {
    /// The dialect a chat template's source teaches, if any.
    pub fn detect(source: &str) -> Option<XmlDialect> {
        let has = |s: &str| source.contains(s);
        if has("<seed:tool_call>") && has("<function=") {
            Some(XmlDialect::Seed)
        } else if has("<minimax:tool_call>") && has("<invoke name=") {
            Some(XmlDialect::MiniMax)
        } else if has(super::TOOL_CALL_OPEN) && has("<arg_key>") {
            Some(XmlDialect::Glm)
        } else if has(super::TOOL_CALL_OPEN) && has("<function=") && has("<parameter=") {
            Some(XmlDialect::Qwen)
        } else {
            None
        }
    }

    pub fn syntax(self) -> &'static Syntax {
        match self {
            XmlDialect::Qwen => &Syntax {
                call_open: "<tool_call>",
                name_open: "\n<function=",
                name_close: ">\n",
                key_open: "<parameter=",
                key_close: ">\n",
                value_end: "\n</parameter>",
                after_value: "\n",
                call_end: "</function>\n</tool_call>",
                call_close: "</tool_call>",
            },
            XmlDialect::Seed => &Syntax {
                call_open: "<seed:tool_call>",
                name_open: "\n<function=",
                name_close: ">\n",
                key_open: "<parameter=",
                key_close: ">",
                value_end: "</parameter>",
                after_value: "\n",
                call_end: "</function>\n</seed:tool_call>",
                call_close: "</seed:tool_call>",
            },
            XmlDialect::Glm => &Syntax {
                call_open: "<tool_call>",
                name_open: "",
                name_close: "\n",
                key_open: "<arg_key>",
                key_close: "</arg_key>\n<arg_value>",
                value_end: "</arg_value>",
                after_value: "\n",
                call_end: "</tool_call>",
                call_close: "</tool_call>",
            },
            XmlDialect::MiniMax => &Syntax {
                call_open: "<minimax:tool_call>",
                name_open: "\n<invoke name=\"",
                name_close: "\">\n",
                key_open: "<parameter name=\"",
                key_close: "\">",
                value_end: "</parameter>",
                after_value: "\n",
                call_end: "</invoke>\n</minimax:tool_call>",
                call_close: "</minimax:tool_call>",
            },
        }
    }
}

/// How a parameter's value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// A string, as its bare text.
    Text,
    /// Any other value, as JSON.
    Json,
}

/// Each offered tool's parameters by key, with how their values are written: what the parser
/// needs to turn a call back into JSON. A key it does not list is read as text (as Qwen's own
/// parsers do).
#[derive(Debug, Clone, Default)]
pub struct ValueKinds(HashMap<String, HashMap<String, ValueKind>>);

impl ValueKinds {
    /// The kinds of the tools' parameters, from each tool's name and `parameters` schema.
    pub fn new<'a>(tools: impl IntoIterator<Item = (&'a str, &'a Value)>) -> ValueKinds {
        let mut out = HashMap::new();
        for (name, parameters) in tools {
            let kinds = params(parameters).map(|ps| ps.into_iter().map(|p| (p.key, p.kind)).collect());
            out.insert(name.to_string(), kinds.unwrap_or_default());
        }
        ValueKinds(out)
    }

    /// How `tool`'s parameter `key` is written.
    pub fn kind(&self, tool: &str, key: &str) -> ValueKind {
        self.0.get(tool).and_then(|m| m.get(key)).copied().unwrap_or(ValueKind::Text)
    }
}

/// One property of an arguments schema, as an element (or a keyword argument).
pub(in crate::tools) struct Param {
    pub(in crate::tools) key: String,
    /// The JSON pointer of its subschema (after following `$ref`s).
    pub(in crate::tools) pointer: String,
    pub(in crate::tools) required: bool,
    kind: ValueKind,
}

/// Keywords that never narrow a value (annotations).
const ANNOTATIONS: [&str; 12] = [
    "title",
    "description",
    "default",
    "examples",
    "$comment",
    "$schema",
    "$id",
    "$defs",
    "definitions",
    "deprecated",
    "readOnly",
    "writeOnly",
];

fn err(pointer: &str, msg: impl Into<String>) -> Error {
    Error::Schema { at: Location::Pointer(pointer.to_string()), msg: msg.into() }
}

fn escape_key(k: &str) -> String {
    k.replace('~', "~0").replace('/', "~1")
}

/// `pointer` and its value after following local `$ref`s that stand alone.
fn resolve(root: &Value, mut pointer: String) -> Result<(String, &Value)> {
    for _ in 0..32 {
        let v = root.pointer(&pointer).ok_or_else(|| err(&pointer, "no subschema here"))?;
        match v.as_object().and_then(|o| o.get("$ref")).and_then(Value::as_str) {
            Some(r)
                if v.as_object()
                    .is_some_and(|o| o.keys().all(|k| k == "$ref" || ANNOTATIONS.contains(&k.as_str()))) =>
            {
                match r.strip_prefix('#') {
                    Some(p) if p.is_empty() || p.starts_with('/') => pointer = p.to_string(),
                    _ => return Ok((pointer, v)),
                }
            }
            _ => return Ok((pointer, v)),
        }
    }
    Err(err(&pointer, "`$ref`s that lead in a circle"))
}

/// How a property's value is written: bare text for a schema of strings only.
fn kind_of(schema: &Value) -> ValueKind {
    let Some(o) = schema.as_object() else { return ValueKind::Json };
    const COMPOSED: [&str; 7] = ["anyOf", "oneOf", "allOf", "not", "if", "$ref", "$dynamicRef"];
    if COMPOSED.iter().any(|k| o.contains_key(*k)) {
        return ValueKind::Json;
    }
    let strings_only = |v: &Value| match v {
        Value::Array(vs) => vs.iter().all(Value::is_string),
        v => v.is_string(),
    };
    let typed_string = match o.get("type") {
        Some(Value::String(t)) => t == "string",
        Some(Value::Array(ts)) => ts.len() == 1 && ts[0] == "string",
        Some(_) => false,
        None => o.get("const").is_some_and(Value::is_string) || o.get("enum").is_some_and(strings_only),
    };
    let listed_strings = o.get("const").is_none_or(Value::is_string) && o.get("enum").is_none_or(strings_only);
    if typed_string && listed_strings {
        ValueKind::Text
    } else {
        ValueKind::Json
    }
}

/// The properties of an arguments schema as elements, or an error naming what the element
/// list cannot enforce.
pub(in crate::tools) fn params(parameters: &Value) -> Result<Vec<Param>> {
    let (root, schema) = resolve(parameters, String::new())?;
    let Some(obj) = schema.as_object() else {
        return match schema {
            Value::Bool(true) => Ok(Vec::new()),
            _ => Err(err(&root, "the arguments must be an object schema")),
        };
    };
    let empty = Map::new();
    let props = match obj.get("properties") {
        None => &empty,
        Some(Value::Object(p)) => p,
        Some(_) => return Err(err(&root, "`properties` must be an object")),
    };
    let required: Vec<&str> = match obj.get("required") {
        None => Vec::new(),
        Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
        Some(_) => return Err(err(&root, "`required` must be an array")),
    };
    for (k, v) in obj {
        let ok = match k.as_str() {
            "type" => v == "object" || v.as_array().is_some_and(|ts| ts.len() == 1 && ts[0] == "object"),
            "properties" | "required" | "strict" => true,
            // Undeclared keys are never written (the default language), so these say nothing more.
            "additionalProperties" | "patternProperties" | "unevaluatedProperties" => true,
            "minProperties" => v.as_u64().is_some_and(|n| n as usize <= required.len()),
            "maxProperties" => v.as_u64().is_some_and(|n| n as usize >= props.len()),
            k => ANNOTATIONS.contains(&k),
        };
        if !ok {
            return Err(err(
                &json_schema_join(&root, k),
                format!(
                    "`{k}` here cannot be enforced when the arguments are written one by one (XML or pythonic calls)"
                ),
            ));
        }
    }
    if let Some(r) = required.iter().find(|r| !props.contains_key(**r)) {
        return Err(err(&json_schema_join(&root, "required"), format!("the required {r:?} is not in `properties`")));
    }
    let mut out = Vec::with_capacity(props.len());
    for (key, _) in props {
        if key.is_empty() || key.contains(['<', '>', '"', '\n', '\r']) {
            return Err(err(
                &json_schema_join(&root, "properties"),
                format!("the property name {key:?} cannot be written as an XML parameter"),
            ));
        }
        let (pointer, sub) = resolve(parameters, format!("{root}/properties/{}", escape_key(key)))?;
        out.push(Param { key: key.clone(), pointer, required: required.contains(&key.as_str()), kind: kind_of(sub) });
    }
    Ok(out)
}

fn json_schema_join(pointer: &str, key: &str) -> String {
    format!("{pointer}/{}", escape_key(key))
}

/// The grammar of a call's argument elements in `dialect` for a tool whose arguments have the
/// JSON Schema `parameters` (see the module docs): what comes between the name's element and
/// `call_end`. Values in `opts`' language (its whitespace for JSON values).
pub fn arguments_grammar(parameters: &Value, dialect: XmlDialect, opts: &JsonSchemaOptions) -> Result<Grammar> {
    let syn = dialect.syntax();
    let params = params(parameters)?;
    let forms: Vec<(&str, PartForm)> = params
        .iter()
        .map(|p| {
            let form = match p.kind {
                ValueKind::Text => PartForm::Text,
                ValueKind::Json => PartForm::Json,
            };
            (p.pointer.as_str(), form)
        })
        .collect();
    let (mut rules, values) = json_schema::compile_parts(parameters, opts, &forms)?;
    // A text value never holds the element's end, nor the call's (which ends the text that
    // the repeat check compares).
    let holds_end = Lexeme::Regex(Hir::concat(vec![
        crate::regular::regex::builtin("(?s:.*)"),
        Hir::alternation(vec![Hir::literal(syn.value_end.as_bytes()), Hir::literal(syn.call_close.as_bytes())]),
        crate::regular::regex::builtin("(?s:.*)"),
    ]));
    let mut elements = Vec::with_capacity(params.len());
    for (p, value) in params.iter().zip(values) {
        let value = match (p.kind, value) {
            (ValueKind::Text, Expr::Lexeme(l)) => {
                Expr::Lexeme(Arc::new(Lexeme::and(vec![(*l).clone(), Lexeme::Not(Box::new(holds_end.clone()))])))
            }
            (_, v) => v,
        };
        let element = Expr::Seq(vec![
            Expr::Literal(format!("{}{}{}", syn.key_open, p.key, syn.key_close)),
            value,
            Expr::Literal(format!("{}{}", syn.value_end, syn.after_value)),
        ]);
        elements.push(if p.required {
            element
        } else {
            Expr::Repeat { body: Box::new(element), min: 0, max: Some(1) }
        });
    }
    rules.push(Rule { name: "xml_arguments".into(), body: Expr::Seq(elements), span: None });
    Ok(Grammar { start: RuleId(rules.len() as u32 - 1), rules })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kinds_follow_the_schema() {
        let schema = json!({"type": "object", "properties": {
            "city": {"type": "string"},
            "unit": {"enum": ["C", "F"]},
            "n": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "either": {"type": ["string", "null"]},
            "any": {"anyOf": [{"type": "string"}, {"type": "number"}]},
            "ref": {"$ref": "#/$defs/name"},
        }, "$defs": {"name": {"type": "string", "maxLength": 5}}});
        let k = ValueKinds::new([("f", &schema)]);
        let kinds: Vec<ValueKind> =
            ["city", "unit", "n", "tags", "either", "any", "ref", "other"].iter().map(|p| k.kind("f", p)).collect();
        use ValueKind::*;
        assert_eq!(kinds, vec![Text, Text, Json, Json, Json, Json, Text, Text]);
    }

    #[test]
    fn what_the_elements_cannot_enforce_is_named() {
        let bad = [
            (json!({"anyOf": [{"type": "object"}]}), "/anyOf"),
            (json!({"type": "array"}), "/type"),
            (json!({"type": "object", "required": ["x"]}), "/required"),
            (json!({"type": "object", "properties": {"a>b": {}}}), "/properties"),
            (json!({"type": "object", "minProperties": 1}), "/minProperties"),
            (json!({"type": "object", "dependentRequired": {"a": ["b"]}}), "/dependentRequired"),
        ];
        for (schema, at) in bad {
            let e =
                arguments_grammar(&schema, XmlDialect::Qwen, &JsonSchemaOptions::default()).unwrap_err().to_string();
            assert!(e.contains(at), "{schema}: {e}");
        }
        let ok = json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
                        "minProperties": 1, "additionalProperties": false, "$schema": "x"});
        assert!(arguments_grammar(&ok, XmlDialect::Glm, &JsonSchemaOptions::default()).is_ok());
        assert!(
            arguments_grammar(&json!({"type": "object"}), XmlDialect::MiniMax, &JsonSchemaOptions::default()).is_ok()
        );
    }
}
