//! JSON Schema → grammar IR: the language of JSON texts that validate against a schema.
//!
//! The promise is exactness: every text the grammar accepts validates. Where a keyword cannot be
//! enforced exactly, compilation fails naming the keyword and its JSON pointer (or, with
//! [`JsonSchemaOptions::lenient`], compiles without it and lists it in
//! [`JsonGrammar::unenforced`]). The grammar may be *stricter* than the schema in documented
//! ways, which never lets an invalid text through:
//! - strings are produced in canonical JSON encoding (the one `serde_json` writes): `"`, `\` and
//!   control characters escaped (`\b \f \n \r \t`, else `\u00XX`), nothing else escaped. So
//!   every string value has one spelling, which makes `pattern` and property names exact;
//! - numbers are written as JSON numbers in the usual forms (no `-0` tricks are needed), with
//!   at most 100 integer digits and 2 exponent digits, so every number parses as an `f64` in
//!   any client; bounded numbers without exponents; numbers that must not be integers
//!   without exponents and with at most 15 significant digits, so their `f64` keeps a fraction;
//!   next to an exclusive bound, fractions of at most 15 significant digits and, past 2^53, the
//!   whole numbers whose `f64` is within it, so the bound holds for clients that read numbers
//!   as `f64` too (`number.rs`);
//! - object properties come in the order of `properties` (additional ones may come between);
//! - formats are checked by a regular subset of the format (e.g. no leap seconds);
//! - a `oneOf` whose branches overlap, when the exact rewrite (each branch minus the others)
//!   cannot be written, but the branches declare a property with disjoint `const`/`enum`
//!   values: that property is required, so every output names its branch.
//!
//! # Sensible by default, exact on request
//!
//! The default options ([`JsonSchemaOptions::default`]) compile a documented subset of that
//! language, the *sensible* one, which reads like JSON a program writes (every text in it
//! still validates); [`JsonSchemaOptions::exact`] compiles the whole language (with
//! [`Whitespace::Flexible`]), which the conformance tier and `strictly bench` measure:
//! - objects have only the keys their schema names (`properties`, `required`, keys matching
//!   `patternProperties`) unless it asks for more: `additionalProperties` present,
//!   `propertyNames`, a `minProperties` above the named keys (`object.rs`); a schema that
//!   constrains nothing (`true`, `{}`) is any value, open objects included;
//! - arrays have no items past their prefix unless `items`/`additionalItems` says what they
//!   are, `minItems` needs them, or `contains` (`array.rs`);
//! - integers stay within the range of their `format` (`int32`, `uint64`, ...) or else of
//!   `i64` (`number.rs`);
//! - `date`, `time` and `date-time` have years 0001-9999 and at most six fraction digits
//!   (`string.rs`);
//! - whitespace is [`Whitespace::Compact`] (none) unless chosen otherwise.
//!
//! Regular combinations that one regex cannot say (a `pattern` with a length bound or a
//! `format`, excluded values, `not` of string keywords, `patternProperties` and
//! `propertyNames` key regions) become [`crate::regular::Lexeme`]s: intersections and
//! complements that the automaton layer builds as product DFAs.
//!
//! Layout, one keyword family per file:
//! - `object.rs` (`properties`, `required`, `additionalProperties`, `patternProperties`,
//!   `propertyNames`, property counts), `array.rs` (items, `contains`, counts, `uniqueItems`),
//!   `string.rs` (strings, lengths, `pattern`, `format`, key languages), `ecma.rs` (ECMA-262
//!   patterns, lookaheads where regular), `number.rs` (numbers, integers, bounds, `multipleOf`);
//! - `values.rs` (`enum`/`const`), `one_of.rs` (`anyOf`/`oneOf`), `all_of.rs` (`allOf`
//!   merging; a schema met again while it is merged is a recursion, made a rule; one met
//!   again after it was merged is the rule it compiled to), `not.rs` (`not` rewrites),
//!   `conditional.rs` (`if`/`then`/`else`, dependencies),
//!   `refs.rs` (`$ref`, `$defs`, `$id`, anchors);
//! - `strict.rs` (OpenAI's strict-mode rules, for the server's `strict: true`);
//! - `layout.rs` (the whitespace of one object or array), `keywords.rs` (which keywords validate, the type each constrains, schema-building
//!   helpers), `validate.rs` (a small value validator the rewrites use to decide) and
//!   `empty.rs` (schemas shown to accept nothing before they are compiled: `anyOf`/`oneOf`
//!   branches left out; and why a compiled language is empty: [`JsonGrammar::empty`],
//!   [`why_empty`]);
//! - `tests/` (unit tests by family).
//!
//! Invariant: `Compiler::schema` returns an [`Expr`] for the JSON *value* (no surrounding
//! whitespace); whitespace goes between tokens, where [`Whitespace`] allows it, as the
//! current nesting level's `Layout` says (objects and arrays compile their members one
//! level down, so [`Whitespace::Pretty`] indents by depth; `$ref` targets and shared helper
//! rules are built once per indentation level).

mod all_of;
mod array;
mod conditional;
mod ecma;
mod empty;
mod keywords;
mod layout;
use layout::Layout;
mod not;
mod number;
mod object;
mod one_of;
mod parts;
mod ranges;
mod refs;
mod strict;
mod string;
mod validate;
mod values;

use std::collections::HashMap;

use empty::RuleShape;
pub use empty::{no_value_error, EmptySubschema};
pub use parts::{compile_parts, PartForm};
pub use strict::{strict_violation, MAX_STRICT_DEPTH};

use serde_json::{Map, Value};

use crate::error::{Error, LimitKind, Location, Result};
use crate::grammar::{Expr, Grammar, Rule, RuleId};
use crate::regular::DfaLimits;

/// Whitespace the output may contain between JSON tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Whitespace {
    /// None at all: `{"a":1,"b":[true,null]}`, as `serde_json::to_string` writes it. The
    /// default: JSON as a program writes it, and the fewest tokens.
    #[default]
    Compact,
    /// One layout, as `serde_json::to_string_pretty` and Python's `json.dumps(v, indent=2)`
    /// write it: a newline and two spaces per nesting level before every member or item and
    /// before the closing bracket of a non-empty object or array, `": "` between a key and its
    /// value, nothing inside `{}` and `[]`. Past [`MAX_INDENT_LEVEL`] levels (a recursive
    /// `$ref` nests without end) the indentation stays at that level's.
    Pretty,
    /// Bounded but free: at most one space, or one newline plus up to 64 spaces/tabs, between
    /// any two tokens; compact and pretty-printed JSON both fit, and the model chooses. The
    /// exact language's whitespace: the conformance tier and `strictly bench` use it.
    /// (`bounded`, its former name, reads as this.)
    #[serde(alias = "bounded")]
    Flexible,
}

impl std::str::FromStr for Whitespace {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Whitespace, String> {
        match s {
            "compact" => Ok(Whitespace::Compact),
            "pretty" => Ok(Whitespace::Pretty),
            "flexible" | "bounded" => Ok(Whitespace::Flexible),
            _ => Err(format!("whitespace must be compact, pretty or flexible, not {s:?}")),
        }
    }
}

/// Deepest nesting level that [`Whitespace::Pretty`] indents further (two spaces a level).
pub const MAX_INDENT_LEVEL: usize = 12;

/// How a JSON Schema is compiled. The default is the *sensible* language: compact JSON with
/// only the properties a schema names, integers within `i64`, dates Python can read (see the
/// [module docs](self#sensible-by-default-exact-on-request)); [`JsonSchemaOptions::exact`] is
/// the schema's whole language (whitespace aside).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct JsonSchemaOptions {
    pub whitespace: Whitespace,
    /// The schema's exact language: keys and items that the schema allows without naming
    /// them, integers of any size (up to 100 digits), the year 0000, and `format: int32`
    /// and its kin as the annotations JSON Schema says they are. Off by default.
    pub exact: bool,
    /// Compile anyway when something cannot be enforced, and list it in
    /// [`JsonGrammar::unenforced`]; otherwise that is a compile error.
    pub lenient: bool,
    /// Spell `true`, `false` and `null` as Python does (`True`, `False`, `None`): the values
    /// are then Python literals (a JSON string, number, list or dict is one already), as
    /// pythonic tool calls write their arguments. Off by default.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub python: bool,
    /// Documents that `$ref`s may name by URI (absolute, without fragment) → schema, e.g.
    /// `http://example.com/address.json`. Nothing is ever fetched: a `$ref` to a URI that is
    /// neither here nor an `$id` in the schema is a compile error.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub documents: std::collections::BTreeMap<String, Value>,
}

impl JsonSchemaOptions {
    /// The schema's exact language with [`Whitespace::Flexible`]: what the conformance tier
    /// measures and `strictly bench` compares with other engines.
    pub fn exact() -> JsonSchemaOptions {
        JsonSchemaOptions { whitespace: Whitespace::Flexible, exact: true, ..JsonSchemaOptions::default() }
    }

    /// These options with `whitespace`.
    pub fn with_whitespace(mut self, whitespace: Whitespace) -> JsonSchemaOptions {
        self.whitespace = whitespace;
        self
    }
}

/// Something a lenient compile could not enforce: the keyword and its JSON pointer.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Unenforced {
    pub pointer: String,
    pub keyword: String,
    pub reason: String,
}

#[derive(Debug, Clone)]
pub struct JsonGrammar {
    pub grammar: Grammar,
    pub unenforced: Vec<Unenforced>,
    /// Where the language is found empty while compiling, the subschemas that make it so,
    /// innermost first: a subschema that accepts nothing is listed only where its emptiness
    /// reaches the root (a required property, every branch of an `anyOf`, ...), not where its
    /// parent does without it (an optional property, one branch of several). Empty otherwise,
    /// and also where the emptiness shows only in an automaton (a `pattern` no string of the
    /// allowed lengths matches).
    pub empty: Vec<EmptySubschema>,
}

/// Deepest schema nesting (through subschemas, not through `$ref`) accepted.
pub const MAX_DEPTH: usize = 128;
/// Most grammar rules one schema compiles to (a bound on the work and memory of a compile
/// whose rewrites multiply: `oneOf` ways tried at every level of a recursive schema).
pub const MAX_RULES: usize = 100_000;
/// Most `enum` values accepted.
pub const MAX_ENUM: usize = 10_000;
/// Largest length/count bound unrolled into the grammar (`maxLength`, `maxItems`, ...).
pub const MAX_COUNT: u64 = 10_000;
/// Most names one object schema may declare in `properties` or list in `required` (the
/// largest in JSONSchemaBench declares 587; a 100,000-name object would take minutes).
pub const MAX_PROPERTIES: usize = 1_000;
/// Deepest JSON nesting of a schema document, checked without recursion before compiling, so
/// a programmatically built 10,000-deep `Value` is an error rather than a stack overflow. Text
/// read by [`read_document`] may nest as deep (serde_json's own parser stops at 128 levels).
pub const MAX_JSON_DEPTH: usize = 512;

/// Reads a schema document from JSON text: nested up to [`MAX_JSON_DEPTH`] levels (a deep but
/// valid schema, deeper than serde_json's default 128), deeper text refused, where it first
/// nests too deep, before it is parsed (the parse would recurse once per level).
pub fn read_document(text: &[u8]) -> Result<Value> {
    if let Some(at) = nesting_exceeds(text, MAX_JSON_DEPTH) {
        return Err(Error::Limit {
            kind: LimitKind::DocumentDepth,
            what: format!("JSON nesting depth of the schema document (at byte {at})"),
            limit: MAX_JSON_DEPTH,
            hint: None,
        });
    }
    let mut de = serde_json::Deserializer::from_slice(text);
    de.disable_recursion_limit();
    let v = serde::Deserialize::deserialize(&mut de).and_then(|v| de.end().map(|()| v));
    v.map_err(|e| Error::Schema { at: Location::Pointer(String::new()), msg: format!("not valid JSON: {e}") })
}

/// Where JSON text first nests deeper than `limit` arrays and objects (a byte offset), found
/// without recursion; strings are skipped (escapes included). `None` within the limit.
pub fn nesting_exceeds(bytes: &[u8], limit: usize) -> Option<usize> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (i, &b) in bytes.iter().enumerate() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > limit {
                    return Some(i);
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// Compiles a schema into a grammar whose language is the JSON texts (in the chosen
/// whitespace) that validate against it, or fails naming what cannot be enforced.
pub fn compile(schema: &Value, opts: &JsonSchemaOptions) -> Result<JsonGrammar> {
    compile_within(schema, opts, DfaLimits::default())
}

/// [`compile`], building every automaton it needs to decide something (key regions, value
/// checks, emptiness) under `limits`: a request's compile passes its own limits here, so a
/// schema that would need a larger automaton is an [`Error::Limit`], whichever path asks.
pub fn compile_within(schema: &Value, opts: &JsonSchemaOptions, limits: DfaLimits) -> Result<JsonGrammar> {
    compile_as(schema, opts, limits, false)
}

/// Why no JSON value validates against `schema` (whose compiled language was found empty):
/// the error naming the subschemas that accept nothing ([`JsonGrammar::empty_language_error`]),
/// from a compile that also asks every string product (a `pattern` with lengths, a `format`)
/// whether it is empty, which a plain compile leaves to the automaton. `None` where that
/// compile finds no such subschema (an emptiness only the whole grammar shows, such as a
/// recursion without a base case) or fails.
pub fn why_empty(schema: &Value, opts: &JsonSchemaOptions, limits: DfaLimits) -> Option<Error> {
    compile_as(schema, opts, limits, true).ok().filter(|g| !g.empty.is_empty()).map(|g| g.empty_language_error())
}

fn compile_as(schema: &Value, opts: &JsonSchemaOptions, limits: DfaLimits, explain: bool) -> Result<JsonGrammar> {
    let (prepared, docs, index) = prepare(schema, opts)?;
    let mut c = Compiler::new(&prepared, &docs, index, opts, limits);
    c.explain = explain;
    let root = c.new_rule("root");
    let body = c.schema(&prepared, "")?;
    c.set_body(root, body);
    Ok(JsonGrammar { grammar: Grammar { rules: c.rules, start: root }, unenforced: c.unenforced, empty: c.empty })
}

/// A schema prepared by [`prepare`]: the document, the registered documents (URI, schema), the
/// index of their resources and anchors.
type Prepared = (Value, Vec<(String, Value)>, refs::Index);

/// The schema and the options' documents ready to compile: deep JSON refused first, without
/// recursion (copying it would overflow the stack), then `$ref`s made absolute and resources
/// and anchors indexed (see [`refs`]).
fn prepare(schema: &Value, opts: &JsonSchemaOptions) -> Result<Prepared> {
    for v in std::iter::once(schema).chain(opts.documents.values()) {
        if json_depth_exceeds(v, MAX_JSON_DEPTH) {
            return Err(Error::Limit {
                kind: LimitKind::DocumentDepth,
                what: "JSON nesting depth of the schema document".into(),
                limit: MAX_JSON_DEPTH,
                hint: None,
            });
        }
    }
    let docs = opts.documents.iter().map(|(uri, d)| (uri.trim_end_matches('#'), d));
    Ok(refs::prepare(schema, docs))
}

/// Is `v` nested deeper than `limit` (arrays and objects)? An explicit stack, no recursion.
fn json_depth_exceeds(v: &Value, limit: usize) -> bool {
    let mut stack = vec![(v, 0usize)];
    while let Some((v, d)) = stack.pop() {
        if d > limit {
            return true;
        }
        match v {
            Value::Array(a) => stack.extend(a.iter().map(|x| (x, d + 1))),
            Value::Object(o) => stack.extend(o.values().map(|x| (x, d + 1))),
            _ => {}
        }
    }
    false
}

pub(crate) struct Compiler<'s> {
    root: &'s Value,
    opts: JsonSchemaOptions,
    /// The grammar's rules; a rule's body is set once, with [`Compiler::set_body`].
    rules: Vec<Rule>,
    /// What [`Compiler::is_nothing`] knows of each rule, by id.
    shapes: Vec<RuleShape>,
    /// `$ref` targets already compiled (or being compiled): pointer → rule.
    ref_rules: HashMap<String, RuleId>,
    /// Schemas being merged (`allOf`, `$ref` with siblings), by a hash and indentation key:
    /// the rule a recursion back into one refers to (see `all_of::merged`).
    merging: HashMap<(u128, usize), Option<RuleId>>,
    /// Schemas merged and compiled, by the same key: what meeting one again compiles to (a
    /// leaf or a rule; see `all_of::merged`).
    merged: HashMap<(u128, usize), Expr>,
    /// Shared helper rules by name (any value, any object, ...) and [`Compiler::indent_key`].
    named: HashMap<(&'static str, usize), RuleId>,
    unenforced: Vec<Unenforced>,
    /// Subschemas found to accept nothing whose emptiness has not been absorbed by a parent
    /// (see [`Compiler::nothing_because`] and [`Compiler::schema`]).
    empty: Vec<EmptySubschema>,
    /// Compiling to say why the language is empty ([`why_empty`]): emptiness that only an
    /// automaton shows is looked for too.
    explain: bool,
    depth: usize,
    /// The JSON nesting level of the value being compiled (0: the document), for
    /// [`Whitespace::Pretty`]'s indentation.
    level: usize,
    /// Registered documents (URI → schema), prepared like `root`.
    docs: &'s [(String, Value)],
    /// Resources and anchors by absolute URI → location.
    index: refs::Index,
    /// Rewritten `oneOf` branch sets tried so far (see `one_of::any_one_of`).
    one_of_attempts: usize,
    /// `enum` values checked against the grammar of their sibling keywords, by (schema,
    /// values) text (see `values::accepted_by`; a pure cache, kept across rollbacks).
    value_checks: HashMap<String, Option<Vec<bool>>>,
    /// The request's limits for every automaton built while compiling (key regions, emptiness
    /// and value checks), the same as the lexer's.
    limits: DfaLimits,
    /// Subschemas compiled so far (calls of [`Compiler::schema`]): the work a compile did,
    /// which tests bound where a shortcut must save it.
    visits: usize,
}

impl<'s> Compiler<'s> {
    fn new(
        root: &'s Value,
        docs: &'s [(String, Value)],
        index: refs::Index,
        opts: &JsonSchemaOptions,
        limits: DfaLimits,
    ) -> Compiler<'s> {
        Compiler {
            root,
            opts: opts.clone(),
            rules: Vec::new(),
            shapes: Vec::new(),
            ref_rules: HashMap::new(),
            merging: HashMap::new(),
            merged: HashMap::new(),
            named: HashMap::new(),
            unenforced: Vec::new(),
            empty: Vec::new(),
            explain: false,
            depth: 0,
            level: 0,
            docs,
            index,
            one_of_attempts: 0,
            value_checks: HashMap::new(),
            limits,
            visits: 0,
        }
    }

    /// A new rule named `name`, its body to be set (see [`Compiler::set_body`]).
    fn new_rule(&mut self, name: &str) -> RuleId {
        self.rules.push(Rule { name: name.to_string(), body: Expr::Empty, span: None });
        self.shapes.push(RuleShape::Unset);
        RuleId(self.rules.len() as u32 - 1)
    }

    /// Sets the body of a rule made by [`Compiler::new_rule`] (once: what
    /// [`Compiler::is_nothing`] learns of a rule holds for good).
    fn set_body(&mut self, r: RuleId, body: Expr) {
        let i = r.0 as usize;
        debug_assert_eq!(self.shapes[i], RuleShape::Unset, "rule {} set twice", self.rules[i].name);
        self.rules[i].body = body;
        self.shapes[i] = RuleShape::Set;
    }

    /// `e` as something cheap to copy: leaves stay as they are, anything else becomes a rule
    /// of its own. The IR is a tree, so an expression used in several places (an object's
    /// member in every member-list rule, an array's item schema) must be shared this way, or
    /// nesting would multiply its copies at every level.
    fn share(&mut self, name: &str, e: Expr) -> Expr {
        match e {
            Expr::Empty | Expr::Literal(_) | Expr::Regex(_) | Expr::Rule(_) => e,
            _ => {
                let r = self.new_rule(name);
                self.set_body(r, e);
                Expr::Rule(r)
            }
        }
    }

    /// Runs `f`; if it fails, undoes what it did to the compiler (rules, caches, notes), so the
    /// caller can try another way.
    ///
    /// `ref_rules`, `named` and `merged` only ever gain entries, each naming a rule created
    /// with it (or a leaf, which names none), so the entries that `f` added are exactly those
    /// naming rules past the mark (no copy of the maps per attempt: a large schema makes
    /// thousands of attempts). A merge still in progress forgets a recursion rule made past
    /// the mark; a later recursion makes it again.
    fn attempt<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        let (rules, unenforced, empty, depth, level) =
            (self.rules.len(), self.unenforced.len(), self.empty.len(), self.depth, self.level);
        let r = f(self);
        if r.is_err() {
            self.rules.truncate(rules);
            self.shapes.truncate(rules);
            self.ref_rules.retain(|_, r| (r.0 as usize) < rules);
            self.named.retain(|_, r| (r.0 as usize) < rules);
            self.merged.retain(|_, e| !matches!(e, Expr::Rule(r) if r.0 as usize >= rules));
            for r in self.merging.values_mut() {
                if r.is_some_and(|r| r.0 as usize >= rules) {
                    *r = None;
                }
            }
            self.unenforced.truncate(unenforced);
            self.empty.truncate(empty);
            self.depth = depth;
            self.level = level;
        }
        r
    }

    /// Runs `f` one JSON nesting level down (for the members of an object, the items of an
    /// array).
    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        self.level += 1;
        let r = f(self);
        self.level -= 1;
        r
    }

    /// What distinguishes the rules of one schema at different nesting levels: the level
    /// (at most [`MAX_INDENT_LEVEL`]) under [`Whitespace::Pretty`], else nothing (0). Caches of
    /// compiled rules (`$ref` targets, shared helpers) key on it.
    fn indent_key(&self) -> usize {
        match self.opts.whitespace {
            Whitespace::Pretty => self.level.min(MAX_INDENT_LEVEL),
            _ => 0,
        }
    }

    /// A helper rule built once per grammar (once per indentation level under `Pretty`).
    fn shared(&mut self, name: &'static str, build: impl FnOnce(&mut Self, RuleId) -> Expr) -> Expr {
        let key = (name, self.indent_key());
        if let Some(&r) = self.named.get(&key) {
            return Expr::Rule(r);
        }
        let r = self.new_rule(name);
        self.named.insert(key, r);
        let body = build(self, r);
        self.set_body(r, body);
        Expr::Rule(r)
    }

    /// `true`, `false` or `null` as the output spells it ([`JsonSchemaOptions::python`]).
    pub(super) fn word(&self, w: &'static str) -> &'static str {
        match (self.opts.python, w) {
            (true, "true") => "True",
            (true, "false") => "False",
            (true, "null") => "None",
            _ => w,
        }
    }

    /// A JSON value as the output spells it, compact.
    pub(super) fn value_text(&self, v: &Value) -> String {
        if !self.opts.python {
            return serde_json::to_string(v).expect("JSON serializes");
        }
        match v {
            Value::Null => "None".into(),
            Value::Bool(b) => if *b { "True" } else { "False" }.into(),
            Value::Array(a) => format!("[{}]", a.iter().map(|x| self.value_text(x)).collect::<Vec<_>>().join(",")),
            Value::Object(o) => format!(
                "{{{}}}",
                o.iter()
                    .map(|(k, x)| format!(
                        "{}:{}",
                        serde_json::to_string(k).expect("a string serializes"),
                        self.value_text(x)
                    ))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            other => serde_json::to_string(other).expect("JSON serializes"),
        }
    }

    /// A schema error (malformed schema): always an error, even when lenient.
    fn bad(&self, pointer: &str, msg: impl Into<String>) -> Error {
        Error::Schema { at: Location::Pointer(pointer.to_string()), msg: msg.into() }
    }

    /// Something valid that cannot be enforced: an error, or (lenient) noted and skipped.
    fn unenforced(&mut self, pointer: &str, keyword: &str, reason: impl Into<String>) -> Result<()> {
        let reason = reason.into();
        let at = join(pointer, keyword);
        if self.opts.lenient {
            self.unenforced.push(Unenforced { pointer: at, keyword: keyword.to_string(), reason });
            Ok(())
        } else {
            Err(Error::Schema { at: Location::Pointer(at), msg: format!("`{keyword}` cannot be enforced: {reason}") })
        }
    }

    /// [`Whitespace::Flexible`]'s whitespace between two tokens.
    fn flexible_ws() -> Expr {
        // One copy per process (every container's layout has six).
        static WS: std::sync::OnceLock<std::sync::Arc<regex_syntax::hir::Hir>> = std::sync::OnceLock::new();
        Expr::Regex(WS.get_or_init(|| crate::regular::regex::builtin_shared(r"(?: ?|\n[ \t]{0,64})")).clone())
    }

    /// The whitespace (and punctuation) of an object or array at the current nesting level.
    fn layout(&self) -> Layout {
        Layout::new(self.opts.whitespace, self.level)
    }

    /// `: ` between a key and its value, in the chosen whitespace.
    fn colon(&self) -> Expr {
        self.layout().colon
    }

    /// An object or array at the current level: `open`, then either `items` (one or more
    /// members or items, commas included, built with [`Layout::sep`]) or, if `empty_ok`,
    /// nothing; then `close`.
    fn container(&self, open: Expr, items: Option<Expr>, empty_ok: bool, close: &str) -> Expr {
        let l = self.layout();
        let mut alts = Vec::new();
        if let Some(items) = items {
            alts.push(Expr::seq(vec![l.first, items, l.close, Expr::Literal(close.into())]));
        }
        if empty_ok {
            alts.push(Expr::seq(vec![l.close_empty, Expr::Literal(close.into())]));
        }
        Expr::seq(vec![open, l.open, alt(alts)])
    }

    /// The value expression for `schema` at `pointer`.
    fn schema(&mut self, schema: &Value, pointer: &str) -> Result<Expr> {
        if self.rules.len() > MAX_RULES {
            return Err(Error::Limit {
                kind: LimitKind::Productions,
                what: format!(
                    "grammar rules built for this schema (at {})",
                    pointer.chars().take(80).collect::<String>()
                ),
                limit: MAX_RULES,
                hint: None,
            });
        }
        self.visits += 1;
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            self.depth -= 1;
            let shown: String = pointer.chars().take(80).collect();
            let more = if shown.len() < pointer.len() { "…" } else { "" };
            return Err(Error::Limit {
                kind: LimitKind::SchemaDepth,
                what: format!("schema nesting depth at {shown}{more}"),
                limit: MAX_DEPTH,
                hint: None,
            });
        }
        let empty = self.empty.len();
        let r = self.schema_inner(schema, pointer);
        self.depth -= 1;
        if let Ok(e) = &r {
            if !self.is_nothing(e) {
                // Whatever inside accepted nothing, this subschema accepts something: its
                // parent's emptiness (if any) has other reasons.
                self.empty.truncate(empty);
            } else if self.empty.len() == empty {
                self.empty.push(EmptySubschema { pointer: pointer.to_string(), reason: "accepts no value".into() });
            }
        }
        r
    }

    fn schema_inner(&mut self, schema: &Value, pointer: &str) -> Result<Expr> {
        let obj = match schema {
            Value::Bool(true) => return Ok(self.any_value()),
            Value::Bool(false) => return Ok(self.nothing_because(pointer, "the schema is false")),
            Value::Object(o) => o,
            _ => return Err(self.bad(pointer, "a schema must be an object or a boolean")),
        };
        if let Some(rewritten) = self.unevaluated(obj, pointer)? {
            return self.schema(&Value::Object(rewritten), pointer);
        }
        // Conditionals become allOf parts; allOf (and $ref with siblings) merge into one schema.
        if let Some(rewritten) = conditional::rewrite_conditionals(self, obj, pointer)? {
            return self.schema(&Value::Object(rewritten), pointer);
        }
        if let Some(e) = all_of::merged(self, obj, pointer)? {
            return Ok(e);
        }
        if let Some(r) = keywords::get(obj, "$ref") {
            let r = r.as_str().ok_or_else(|| self.bad(&join(pointer, "$ref"), "`$ref` must be a string"))?;
            return self.reference(r, pointer);
        }
        if let Some(n) = keywords::get(obj, "not") {
            // `not: false` constrains nothing; `not: true` / `not: {}` (no validation keyword)
            // rejects everything.
            if n == &Value::Bool(false) {
                let mut rest = obj.clone();
                rest.remove("not");
                return self.schema(&Value::Object(rest), pointer);
            }
            if n == &Value::Bool(true)
                || n.as_object().is_some_and(|o| !o.keys().any(|k| keywords::is_validation_keyword(k)))
            {
                return Ok(
                    self.nothing_because(&join(pointer, "not"), "`not` of a schema that every value validates against")
                );
            }
            if let Some(r) = n.get("$ref").and_then(Value::as_str) {
                return self.not_ref(obj, r, pointer);
            }
            if let Some(as_any) = one_of::one_of_as_any_of(self, n) {
                // Branches that are pairwise disjoint: `oneOf` is `anyOf`, whose `not` rewrites.
                let mut o = obj.clone();
                o.insert("not".into(), as_any);
                return self.schema(&Value::Object(o), pointer);
            }
            match not::rewrite_not(obj) {
                Some(rewritten) => return self.schema(&Value::Object(rewritten), pointer),
                None => self.unenforced(pointer, "not", "no exact rewrite of this `not` is known (supported: types, values, the keywords of one JSON type, closed objects, `$ref`s, and `anyOf`/`allOf`/`not` of those)")?,
            }
        }
        for kw in ["unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef"] {
            if let Some(v) = keywords::get(obj, kw) {
                if !trivially_true(kw, v) {
                    self.unenforced(pointer, kw, "not supported yet")?;
                }
            }
        }
        if let Some(e) = values::enum_const(self, obj, pointer)? {
            return Ok(e);
        }
        if let Some(e) = one_of::any_one_of(self, obj, pointer)? {
            return Ok(e);
        }
        if !self.opts.exact && !obj.keys().any(|k| keywords::is_validation_keyword(k)) {
            // A schema that constrains nothing (`{}`, annotations only) asks for any value, as
            // `true` does: its objects keep their unnamed keys in the sensible language too.
            return Ok(self.any_value());
        }
        let types = self.types(obj, pointer)?;
        if types.is_empty() {
            // (An empty `type`, or the types of `allOf`/`$ref` parts merged here.)
            return Ok(self.nothing_because(&join(pointer, "type"), "no JSON type is allowed by every `type` here"));
        }
        let mut alts = Vec::new();
        for t in types {
            let e = match t {
                "null" => Expr::Literal(self.word("null").into()),
                "boolean" => {
                    Expr::Alt(vec![Expr::Literal(self.word("true").into()), Expr::Literal(self.word("false").into())])
                }
                "string" => string::string(self, obj, pointer)?,
                "integer" => number::integer(self, obj, pointer)?,
                "number" => number::number(self, obj, pointer)?,
                "array" => array::array(self, obj, pointer)?,
                "object" => object::object(self, obj, pointer)?,
                _ => unreachable!("types() checks names"),
            };
            alts.push(e);
        }
        Ok(alt(alts))
    }

    /// `unevaluatedProperties` / `unevaluatedItems` where what is evaluated is known statically,
    /// rewritten to plain keywords (exact); `None` if there is neither.
    /// - Properties: with no in-place applicator that evaluates conditionally (`anyOf`, `oneOf`,
    ///   `if`, `dependentSchemas`, `dependencies`, dynamic refs), the evaluated keys are those
    ///   of `properties`/`patternProperties` (of this schema and, once merged, its `allOf`/`$ref`
    ///   parts), or all of them if some `additionalProperties` is present. So the keyword *is*
    ///   `additionalProperties` of the merged schema, or has no effect. The merge happens first
    ///   with the keyword set aside.
    /// - Items: only with no in-place applicator at all: `items` (2020-12) or `additionalItems`
    ///   (after an `items` array), or no effect if those are present.
    fn unevaluated(&mut self, obj: &Map<String, Value>, pointer: &str) -> Result<Option<Map<String, Value>>> {
        const CONDITIONAL: [&str; 7] =
            ["anyOf", "oneOf", "if", "dependentSchemas", "dependencies", "$dynamicRef", "$recursiveRef"];
        // (Cloning only when needed: a schema may be nested deeper than a clone can recurse.)
        if !keywords::has_any(obj, &["unevaluatedProperties", "unevaluatedItems"]) {
            return Ok(None);
        }
        let mut out = obj.clone();
        let mut changed = false;
        if let Some(u) = keywords::get(obj, "unevaluatedProperties") {
            if !keywords::has_any(obj, &CONDITIONAL) {
                out.remove("unevaluatedProperties");
                if obj.contains_key("allOf") || obj.contains_key("$ref") {
                    if let Some(r) = out.remove("$ref") {
                        let mut all = out.get("allOf").and_then(Value::as_array).cloned().unwrap_or_default();
                        all.push(serde_json::json!({ "$ref": r }));
                        out.insert("allOf".into(), Value::Array(all));
                    }
                    // Merge the parts first, then apply the keyword to the merged schema.
                    if let Some(Value::Object(mut merged)) = all_of::merge_all_of(self, &out, pointer)? {
                        if !keywords::has_any(&merged, &CONDITIONAL) && !merged.contains_key("unevaluatedProperties") {
                            merged.entry("additionalProperties").or_insert_with(|| u.clone());
                            return Ok(Some(merged));
                        }
                    }
                    out = obj.clone();
                } else {
                    out.entry("additionalProperties").or_insert_with(|| u.clone());
                    changed = true;
                }
            }
        }
        if let Some(u) = keywords::get(obj, "unevaluatedItems") {
            const APPLICATORS: [&str; 10] = [
                "allOf",
                "anyOf",
                "oneOf",
                "not",
                "if",
                "$ref",
                "contains",
                "dependentSchemas",
                "$dynamicRef",
                "$recursiveRef",
            ];
            if !keywords::has_any(obj, &APPLICATORS) {
                let key =
                    if keywords::get(obj, "items").is_some_and(Value::is_array) { "additionalItems" } else { "items" };
                out.entry(key).or_insert_with(|| u.clone());
            } else if u != &Value::Bool(true) {
                // Reported here: merging `allOf`/`$ref` parts would otherwise hide which items
                // the parts evaluate.
                self.unenforced(pointer, "unevaluatedItems", "supported only without in-place applicators beside it")?;
            }
            out.remove("unevaluatedItems");
            changed = true;
        }
        Ok(changed.then_some(out))
    }

    /// The JSON types a schema allows: `type` if given, else every type.
    fn types(&self, obj: &Map<String, Value>, pointer: &str) -> Result<Vec<&'static str>> {
        const ALL: [&str; 7] = ["null", "boolean", "object", "array", "string", "integer", "number"];
        let names: Vec<&str> = match keywords::get(obj, "type") {
            None => return Ok(vec!["null", "boolean", "object", "array", "string", "number"]),
            Some(Value::String(s)) => vec![s.as_str()],
            Some(Value::Array(a)) => a.iter().map(|v| v.as_str().unwrap_or("?")).collect(),
            Some(_) => return Err(self.bad(&join(pointer, "type"), "`type` must be a string or an array of strings")),
        };
        let mut out = Vec::new();
        for n in names {
            let Some(t) = ALL.iter().find(|t| **t == n) else {
                return Err(self.bad(&join(pointer, "type"), format!("unknown type {n:?}")));
            };
            if !out.contains(t) {
                out.push(*t);
            }
        }
        // "number" already includes every integer.
        if out.contains(&"number") {
            out.retain(|t| *t != "integer");
        }
        Ok(out)
    }

    /// Any JSON value (at the current nesting level).
    fn any_value(&mut self) -> Expr {
        self.shared("any_value", |c, _| {
            let sep = c.layout().sep;
            let colon = c.colon();
            // Members and items one level down: under `Pretty` a rule of that level (the same
            // rule past the deepest indented level), else this one.
            let inner = c.nested(|c| Ok(c.any_value())).expect("no errors");
            let string = string::any_string();
            let member = Expr::seq(vec![string.clone(), colon, inner.clone()]);
            let members = Expr::seq(vec![
                member.clone(),
                Expr::Repeat { body: Box::new(Expr::seq(vec![sep.clone(), member])), min: 0, max: None },
            ]);
            let items = Expr::seq(vec![
                inner.clone(),
                Expr::Repeat { body: Box::new(Expr::seq(vec![sep, inner])), min: 0, max: None },
            ]);
            // Any keys: kept distinct in the sensible language (see `object::open_brace`).
            let brace = match c.opts.exact {
                false => Expr::Mark(crate::grammar::Mark::DistinctKeys { look_ahead: false }),
                true => Expr::Literal("{".into()),
            };
            Expr::Alt(vec![
                c.container(brace, Some(members), true, "}"),
                c.container(Expr::Literal("[".into()), Some(items), true, "]"),
                string,
                number::any_number(),
                Expr::Literal(c.word("true").into()),
                Expr::Literal(c.word("false").into()),
                Expr::Literal(c.word("null").into()),
            ])
        })
    }
}

/// The empty language (a schema nothing validates against).
fn nothing() -> Expr {
    Expr::Alt(vec![])
}

fn alt(mut xs: Vec<Expr>) -> Expr {
    if xs.len() == 1 {
        xs.pop().unwrap()
    } else {
        Expr::Alt(xs)
    }
}

/// `pointer/key` with JSON-pointer escaping.
pub(crate) fn join(pointer: &str, key: &str) -> String {
    let mut out = String::with_capacity(pointer.len() + 1 + key.len());
    out.push_str(pointer);
    push_segment(&mut out, key);
    out
}

/// Appends `/key` to a JSON pointer, `~` and `/` escaped (RFC 6901). Written directly (no
/// `format!`, no copies for the escapes): a large schema extends a pointer for every
/// subschema it walks and compiles.
fn push_segment(pointer: &mut String, key: &str) {
    pointer.push('/');
    // Pieces between the bytes to escape, copied whole (a key rarely has either).
    let mut rest = key;
    while let Some(at) = rest.find(['~', '/']) {
        pointer.push_str(&rest[..at]);
        pointer.push_str(if rest.as_bytes()[at] == b'~' { "~0" } else { "~1" });
        rest = &rest[at + 1..];
    }
    pointer.push_str(rest);
}

/// Keywords whose value makes them no constraint at all.
fn trivially_true(kw: &str, v: &Value) -> bool {
    match kw {
        "unevaluatedProperties" | "unevaluatedItems" => v == &Value::Bool(true),
        "dependentSchemas" | "dependentRequired" | "dependencies" => v.as_object().is_some_and(|o| o.is_empty()),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
