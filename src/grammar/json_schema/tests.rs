use serde_json::json;

use super::*;
use crate::automaton::{Compiled, Constraint, VocabEnv};
use crate::vocab::Vocab;

/// Byte vocabulary: every text is one token per byte.
fn bytes_vocab() -> std::sync::Arc<Vocab> {
    let toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).chain([b"</s>".to_vec()]).collect();
    std::sync::Arc::new(Vocab::from_byte_tokens(toks, &[256]))
}

fn accepts(schema: &Value, text: &str) -> bool {
    let v = bytes_vocab();
    let c = Compiled::new(&VocabEnv::new(v), &Constraint::JsonSchema(schema.clone(), JsonSchemaOptions::default()))
        .unwrap_or_else(|e| panic!("{schema}: {e}"));
    let mut m = c.matcher();
    m.commit_bytes(text.as_bytes()).is_ok() && m.is_accepting()
}

#[test]
fn basic_types() {
    let s =
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"]});
    assert!(accepts(&s, r#"{"a":1}"#));
    assert!(accepts(&s, r#"{"a": -12, "b": "x\"y"}"#));
    assert!(accepts(&s, r#"{"a":1,"zz":[1,{"q":null}]}"#), "additional properties default to true");
    assert!(!accepts(&s, r#"{"b":"x"}"#), "a is required");
    assert!(!accepts(&s, r#"{"a":1.5}"#));
    assert!(!accepts(&s, r#"{"a":1,"a":2}"#), "a declared key is not an additional one");
    let closed = json!({"type": "object", "properties": {"a": {"type": "boolean"}}, "additionalProperties": false});
    assert!(accepts(&closed, r#"{}"#) && accepts(&closed, r#"{"a":true}"#));
    assert!(!accepts(&closed, r#"{"b":true}"#));
}

#[test]
fn numbers_and_ranges() {
    let s = json!({"type": "integer", "minimum": -15, "maximum": 120});
    for ok in ["-15", "-9", "0", "7", "99", "120"] {
        assert!(accepts(&s, ok), "{ok}");
    }
    for bad in ["-16", "121", "1000", "-100", "01"] {
        assert!(!accepts(&s, bad), "{bad}");
    }
    let s = json!({"type": "number", "exclusiveMinimum": 0, "maximum": 10});
    for ok in ["0.5", "10", "10.0", "9.99", "3"] {
        assert!(accepts(&s, ok), "{ok}");
    }
    for bad in ["0", "0.0", "-1", "10.01", "11", "-0.5"] {
        assert!(!accepts(&s, bad), "{bad}");
    }
    let s = json!({"type": "number", "multipleOf": 0.01});
    assert!(accepts(&s, "12.34") && !accepts(&s, "12.345"));
    let s = json!({"type": "integer", "multipleOf": 4});
    assert!(accepts(&s, "12") && accepts(&s, "1000") && !accepts(&s, "10") && !accepts(&s, "1002"));
}

#[test]
fn strings_patterns_formats() {
    let s = json!({"type": "string", "minLength": 2, "maxLength": 3});
    assert!(accepts(&s, r#""ab""#) && accepts(&s, r#""a\nb""#) && accepts(&s, r#""éé""#));
    assert!(!accepts(&s, r#""a""#) && !accepts(&s, r#""abcd""#));
    let s = json!({"type": "string", "pattern": "^[A-Z]{2}\\d$"});
    assert!(accepts(&s, r#""AB1""#) && !accepts(&s, r#""AB12""#) && !accepts(&s, r#""ab1""#));
    let s = json!({"type": "string", "pattern": "a\"b"});
    assert!(accepts(&s, r#""xxa\"bxx""#), "contains, with the quote escaped");
    let s = json!({"type": "string", "format": "date"});
    assert!(accepts(&s, r#""2024-02-29""#) && !accepts(&s, r#""2023-02-29""#) && !accepts(&s, r#""2024-13-01""#));
    let s = json!({"type": "string", "format": "ipv4"});
    assert!(accepts(&s, r#""192.168.0.1""#) && !accepts(&s, r#""256.1.1.1""#));
}

#[test]
fn any_of_patterns_is_their_alternation() {
    // One lexeme for the alternation: the same language as the branches side by side.
    let branches =
        json!([{"pattern": "^a"}, {"pattern": "b$", "description": "ends in b"}, {"pattern": "^x.*\\.can$"}]);
    let merged = json!({"anyOf": branches.clone()});
    let typed = json!({"type": "string", "anyOf": branches});
    let cases = [
        (r#""ax""#, true),
        (r#""xb""#, true),
        (r#""x1.can""#, true),
        (r#""ba""#, false),
        (r#""x.canb""#, true),
        (r#""x.cane""#, false),
        (r#""""#, false),
    ];
    for (text, want) in cases {
        assert_eq!(accepts(&merged, text), want, "{text}");
        assert_eq!(accepts(&typed, text), want, "{text}");
    }
    // Patterns accept every non-string; `type` still restricts.
    assert!(accepts(&merged, "12") && accepts(&merged, "null") && !accepts(&typed, "12"));
    // A branch with another keyword is not merged (and still works).
    let mixed = json!({"anyOf": [{"pattern": "^a"}, {"type": "integer"}]});
    assert!(accepts(&mixed, r#""ab""#) && accepts(&mixed, "3") && !accepts(&mixed, r#""ba""#));
}

#[test]
fn combinators_and_refs() {
    let s = json!({"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 5}]});
    assert!(accepts(&s, r#""x""#) && accepts(&s, "7") && !accepts(&s, "3"));
    let s = json!({"oneOf": [{"type": "string"}, {"type": "null"}]});
    assert!(accepts(&s, "null"));
    // Exact by `not`: arrays of 3+ items, or the empty array.
    let s = json!({"oneOf": [{"type": "array", "minItems": 1}, {"type": "array", "maxItems": 2}]});
    assert!(accepts(&s, "[]") && accepts(&s, "[1,2,3]") && !accepts(&s, "[1]") && !accepts(&s, "[1,2]"));
    let overlapping = json!({"oneOf": [{"type": "integer", "multipleOf": 2}, {"type": "integer", "multipleOf": 5}]});
    let e = compile(&overlapping, &JsonSchemaOptions::default()).unwrap_err().to_string();
    assert!(e.contains("/oneOf") && e.contains("overlap"), "{e}");
    let lenient = compile(&overlapping, &JsonSchemaOptions { lenient: true, ..Default::default() }).unwrap();
    assert_eq!(lenient.unenforced.len(), 1);
    let s = json!({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}, {"properties": {"a": {"minimum": 3}}}]});
    assert!(accepts(&s, r#"{"a":3}"#) && !accepts(&s, r#"{"a":2}"#));
    let tree = json!({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"], "additionalProperties": false}}, "$ref": "#/$defs/node"});
    assert!(accepts(&tree, r#"{"v":1,"kids":[{"v":2},{"v":3,"kids":[]}]}"#));
    assert!(!accepts(&tree, r#"{"v":1,"kids":[{"w":2}]}"#));
    let s = json!({"enum": ["a", 1, null, {"k": [true]}]});
    assert!(accepts(&s, r#""a""#) && accepts(&s, r#"{"k": [ true ]}"#) && !accepts(&s, r#""b""#));
}

#[test]
fn arrays() {
    let s = json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false, "minItems": 1});
    assert!(accepts(&s, r#"["a"]"#) && accepts(&s, r#"["a", 2]"#));
    assert!(!accepts(&s, "[]") && !accepts(&s, r#"["a",2,3]"#) && !accepts(&s, "[2]"));
    let s = json!({"type": "array", "items": {"type": "boolean"}, "minItems": 2, "maxItems": 3});
    assert!(accepts(&s, "[true,false]") && accepts(&s, "[true, false, true]"));
    assert!(!accepts(&s, "[true]") && !accepts(&s, "[true,true,true,true]"));
    let s = json!({"type": "array", "contains": {"const": 5}});
    assert!(accepts(&s, "[1, 5, \"x\"]") && !accepts(&s, "[1, 2]"));
}

#[test]
fn bad_schemas_are_clear_errors() {
    for (s, needle) in [
        (json!({"type": 5}), "/type"),
        (json!({"type": "strin"}), "unknown type"),
        (json!({"$ref": "#/$defs/missing"}), "points nowhere"),
        (json!({"$ref": "http://example.com/x.json"}), "remote"),
        (json!({"properties": {"a": {"minLength": -1}}}), "/properties/a/minLength"),
    ] {
        let e = compile(&s, &JsonSchemaOptions::default()).unwrap_err().to_string();
        assert!(e.contains(needle), "{s}: {e}");
    }
    // A cycle with no base case: nothing validates, which the grammar reports.
    let s = json!({"$defs": {"a": {"type": "object", "properties": {"x": {"$ref": "#/$defs/a"}}, "required": ["x"]}}, "$ref": "#/$defs/a"});
    let v = bytes_vocab();
    let e = Compiled::new(&VocabEnv::new(v), &Constraint::JsonSchema(s, JsonSchemaOptions::default()))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("no JSON value validates"), "{e}");
    // Deep nesting is a limit, not a stack overflow.
    let mut deep = json!({"type": "integer"});
    for _ in 0..10_000 {
        let mut m = serde_json::Map::new();
        m.insert("type".into(), json!("array"));
        m.insert("items".into(), deep);
        deep = Value::Object(m);
    }
    let e = compile(&deep, &JsonSchemaOptions::default()).unwrap_err().to_string();
    assert!(e.contains("nesting depth"), "{e}");
    std::mem::forget(deep); // dropping a 10,000-deep Value recurses; not what this test is about
}

#[test]
fn not_rewrites_and_annotations() {
    for nothing in [json!({"not": {}}), json!({"not": true}), json!({"not": {"description": "x"}})] {
        assert!(!accepts(&nothing, "1") && !accepts(&nothing, "null") && !accepts(&nothing, "{}"), "{nothing}");
    }
    assert!(accepts(&json!({"not": false}), "[1]"));
    let s = json!({"not": {"type": "string"}});
    assert!(accepts(&s, "1") && accepts(&s, "null") && !accepts(&s, r#""x""#));
    let s = json!({"type": "object", "not": {"required": ["secret"]}});
    assert!(accepts(&s, r#"{"a":1}"#) && !accepts(&s, r#"{"secret":1}"#) && !accepts(&s, r#"{"a":1,"secret":2}"#));
    let s = json!({"type": "string", "not": {"enum": ["no", "never"]}});
    assert!(accepts(&s, r#""yes""#) && accepts(&s, r#""n""#) && accepts(&s, r#""nos""#));
    assert!(!accepts(&s, r#""no""#) && !accepts(&s, r#""never""#));
    let s = json!({"not": {"const": null}, "type": ["string", "null"]});
    assert!(accepts(&s, r#""a""#) && !accepts(&s, "null"));
    // Numbers are excluded in every spelling; other types pass.
    let s = json!({"not": {"const": 3}});
    assert!(accepts(&s, "4") && !accepts(&s, "3") && !accepts(&s, "3.0") && accepts(&s, r#""3""#));
    // Arrays and objects as excluded values: another length, or an item that differs.
    let s = json!({"not": {"const": [1]}});
    assert!(
        !accepts(&s, "[1]") && !accepts(&s, "[1.0]") && accepts(&s, "[2]") && accepts(&s, "[1,1]") && accepts(&s, "[]")
    );
    // Unknown keywords are annotations, also inside allOf.
    let s = json!({"allOf": [{"type": "integer", "x-doc": "a"}, {"x-doc": "b", "minimum": 2}]});
    assert!(accepts(&s, "2") && !accepts(&s, "1"));
    // enum values are checked only against keywords for their own type.
    let s = json!({"type": ["string", "integer"], "enum": ["a", 5, "toolong"], "maxLength": 3, "minimum": 2});
    assert!(accepts(&s, r#""a""#) && accepts(&s, "5") && !accepts(&s, r#""toolong""#));
    // A huge maxLength is capped (stricter), not refused.
    let s = json!({"type": "string", "maxLength": 1_000_000});
    assert!(accepts(&s, r#""short""#));
}

#[test]
fn intersected_string_keywords() {
    // pattern + length: both hold.
    let s = json!({"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 4});
    for (t, ok) in
        [(r#""ab""#, true), (r#""abcd""#, true), (r#""a""#, false), (r#""abcde""#, false), (r#""aB""#, false)]
    {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    // An unanchored pattern means "contains", and length counts code points.
    let s = json!({"type": "string", "pattern": "x", "maxLength": 3});
    for (t, ok) in
        [(r#""x""#, true), (r#""éxé""#, true), (r#""\nx\t""#, true), (r#""abcx""#, false), (r#""ab""#, false)]
    {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    // A pattern that matches the empty string, anchored at one end at most, holds for every
    // string; anchored at both ends it does not.
    for p in ["([A-Z]+)?", "^a*", "(b|c)?$", "x?y*"] {
        let s = json!({"type": "string", "pattern": p, "maxLength": 3});
        // Only the length bound is left: no intersection to build.
        let g = compile(&s, &JsonSchemaOptions::default()).unwrap();
        assert!(!format!("{:?}", g.grammar).contains("And("), "{p}: the pattern was kept");
        for (t, ok) in [("\"\"", true), ("\"zé!\"", true), ("\"zzzz\"", false)] {
            assert_eq!(accepts(&s, t), ok, "{p} {t}");
        }
    }
    let s = json!({"type": "string", "pattern": "^a*$", "maxLength": 3});
    for (t, ok) in [("\"\"", true), ("\"aa\"", true), ("\"ab\"", false), ("\"aaaa\"", false)] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    // format + pattern.
    let s = json!({"type": "string", "format": "date", "pattern": "^2024-"});
    assert!(accepts(&s, r#""2024-02-29""#));
    assert!(!accepts(&s, r#""2023-02-28""#) && !accepts(&s, r#""2024-02-30""#));
    // An empty intersection: nothing validates.
    let s = json!({"type": ["string", "null"], "pattern": "^a+$", "maxLength": 0});
    assert!(accepts(&s, "null") && !accepts(&s, r#""""#) && !accepts(&s, r#""a""#));
    // Excluded values together with a length bound (from `not: {enum}`).
    let s = json!({"type": "string", "maxLength": 3, "not": {"enum": ["abc", "x"]}});
    for (t, ok) in [(r#""ab""#, true), (r#""abc""#, false), (r#""x""#, false), (r#""xy""#, true), (r#""abcd""#, false)]
    {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
}

#[test]
fn not_of_string_keywords() {
    // Without `type` in `not`, every non-string satisfies the inner schema, so none is valid.
    let s = json!({"not": {"pattern": "^a"}});
    for (t, ok) in [(r#""ba""#, true), (r#""""#, true), (r#""ab""#, false), ("1", false), ("null", false)] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    // With `type: "string"`, non-strings pass.
    let s = json!({"type": ["string", "integer"], "not": {"type": "string", "maxLength": 2}});
    for (t, ok) in [(r#""abc""#, true), (r#""ab""#, false), ("12", true)] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
}

#[test]
fn pattern_properties() {
    let s = json!({
        "type": "object",
        "properties": {"id": {"type": "integer"}, "s_fixed": {"type": "string"}},
        "patternProperties": {"^s_": {"type": "string"}, "_n$": {"type": "integer"}},
        "additionalProperties": false
    });
    for (t, ok) in [
        (r#"{"id":1}"#, true),
        (r#"{"s_a":"x","b_n":3}"#, true),
        (r#"{"s_a":1}"#, false),
        (r#"{"b_n":"x"}"#, false),
        (r#"{"other":1}"#, false),
        // Matches both patterns: must be a string and an integer, so nothing is valid.
        (r#"{"s_n":"x"}"#, false),
        (r#"{"s_n":1}"#, false),
        // A declared key must satisfy its own schema and every matching pattern.
        (r#"{"s_fixed":"x"}"#, true),
        (r#"{"id":1,"s_b":"y","c_n":2}"#, true),
    ] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    let s = json!({"type": "object", "patternProperties": {"^x-": true}, "additionalProperties": {"type": "integer"}});
    for (t, ok) in [(r#"{"x-a":"s","b":2}"#, true), (r#"{"b":"s"}"#, false), (r#"{"x-":[1]}"#, true)] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    // A required key that a pattern matches takes the pattern's schema.
    let s = json!({"type": "object", "required": ["n_1"], "patternProperties": {"^n_": {"type": "integer"}}});
    assert!(accepts(&s, r#"{"n_1":1}"#) && !accepts(&s, r#"{"n_1":"a"}"#) && !accepts(&s, r#"{}"#));
}

#[test]
fn property_names() {
    let s = json!({"type": "object", "propertyNames": {"pattern": "^[a-z]+$", "maxLength": 3}});
    for (t, ok) in [(r#"{}"#, true), (r#"{"ab":1,"xyz":[]}"#, true), (r#"{"abcd":1}"#, false), (r#"{"aB":1}"#, false)] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    // Declared keys that fail propertyNames cannot appear; a required one makes the schema empty.
    let s = json!({"type": "object", "properties": {"Bad": {}, "ok": {}}, "propertyNames": {"enum": ["ok", "fine"]}});
    for (t, ok) in [(r#"{"ok":1,"fine":2}"#, true), (r#"{"Bad":1}"#, false), (r#"{"other":1}"#, false)] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    let s = json!({"type": ["object", "null"], "required": ["Bad"], "propertyNames": {"maxLength": 2}});
    assert!(accepts(&s, "null") && !accepts(&s, r#"{"Bad":1}"#));
}

#[test]
fn one_of_made_disjoint() {
    // Two bare `required` branches: objects with exactly one of the keys; non-objects satisfy
    // both branches, so none is valid.
    let s = json!({"oneOf": [{"required": ["a"]}, {"required": ["b"]}]});
    for (t, ok) in [
        (r#"{"a":1}"#, true),
        (r#"{"b":1}"#, true),
        (r#"{"a":1,"b":2}"#, false),
        (r#"{}"#, false),
        ("1", false),
        (r#""s""#, false),
    ] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    // `not: {required}` rejects non-objects too.
    let s = json!({"not": {"required": ["a"]}});
    for (t, ok) in [(r#"{"b":1}"#, true), (r#"{"a":1}"#, false), ("1", false), ("null", false)] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    // Overlapping where the discriminator is missing: exact by `not` of each other branch
    // ({"v":1} fits only the first branch; {} fits both).
    let s = json!({"oneOf": [
        {"properties": {"kind": {"const": "x"}, "v": {"type": "integer"}}},
        {"properties": {"kind": {"const": "y"}, "v": {"type": "string"}}}
    ]});
    for (t, ok) in [
        (r#"{"kind":"x","v":1}"#, true),
        (r#"{"kind":"y","v":"s"}"#, true),
        (r#"{"kind":"x","v":"s"}"#, false),
        (r#"{"v":1}"#, true),
        (r#"{}"#, false),
        ("3", false),
    ] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    // Integers satisfy both branches: only non-integers are valid numbers.
    let s = json!({"oneOf": [{"type": "number"}, {"type": "integer"}]});
    for (t, ok) in [("1.5", true), ("-0.25", true), ("1", false), ("1.0", false), ("0", false), ("\"a\"", false)] {
        assert_eq!(accepts(&s, t), ok, "non-integer numbers only: {t}");
    }
    // A string branch minus a narrower one: exact by complement.
    let s = json!({"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 2}]});
    assert!(accepts(&s, r#""abc""#) && !accepts(&s, r#""ab""#) && !accepts(&s, "1"));
    // A discriminator that both require, with objects only.
    let s = json!({"oneOf": [
        {"type": "object", "required": ["t"], "properties": {"t": {"enum": [1, 2]}}},
        {"type": "object", "required": ["t"], "properties": {"t": {"enum": [3]}}}
    ]});
    assert!(accepts(&s, r#"{"t":2}"#) && accepts(&s, r#"{"t":3}"#) && !accepts(&s, r#"{"t":4}"#));
    // Without types, the same branches overlap on every non-object: those are rejected.
    let s = json!({"oneOf": [
        {"required": ["t"], "properties": {"t": {"enum": [1, 2]}}},
        {"required": ["t"], "properties": {"t": {"enum": [3]}}}
    ]});
    assert!(accepts(&s, r#"{"t":3}"#) && !accepts(&s, "5") && !accepts(&s, r#""x""#));
}

#[test]
fn conditionals() {
    let s = json!({"type": "object", "dependentRequired": {"card": ["billing"]}, "dependencies": {"a": {"required": ["b"], "properties": {"b": {"type": "integer"}}}}});
    for (t, ok) in [
        (r#"{}"#, true),
        (r#"{"billing":2,"card":1}"#, true),
        (r#"{"card":1}"#, false),
        // (keys in the order the grammar generates: declared, then required-only ones)
        (r#"{"b":2,"a":1}"#, true),
        (r#"{"b":"x","a":1}"#, false),
        (r#"{"a":1}"#, false),
        (r#"{"b":"x"}"#, true),
    ] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    let s = json!({
        "type": "object",
        "properties": {"country": {"type": "string"}, "zip": {"type": "string"}},
        "if": {"properties": {"country": {"const": "US"}}},
        "then": {"properties": {"zip": {"pattern": "^[0-9]{5}$"}}},
        "else": {"properties": {"zip": {"maxLength": 3}}}
    });
    for (t, ok) in [
        (r#"{"country":"US","zip":"12345"}"#, true),
        (r#"{"country":"US","zip":"1234"}"#, false),
        (r#"{"country":"CA","zip":"K1A"}"#, true),
        (r#"{"country":"CA","zip":"12345"}"#, false),
        // No country: `if` holds (properties only checks present keys), so `then` applies.
        (r#"{"zip":"12345"}"#, true),
        (r#"{"zip":"K1A"}"#, false),
    ] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    // An `if` whose branches cannot be written is reported.
    let s = json!({"if": {"multipleOf": 2}, "then": {"maximum": 3}});
    assert!(compile(&s, &JsonSchemaOptions::default()).unwrap_err().to_string().contains("cannot be enforced"));
    // A cycle of `$ref`s through `allOf` is an error, not a hang.
    let s = json!({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"});
    assert!(compile(&s, &JsonSchemaOptions::default()).is_err());
}

#[test]
fn one_of_discriminator_made_required() {
    // The exact rewrite needs `not {multipleOf: 5}` (not expressible): the declared
    // discriminator becomes required instead (stricter; outputs name their branch).
    let s = json!({"oneOf": [
        {"properties": {"kind": {"const": "x"}, "v": {"type": "integer", "multipleOf": 2}}},
        {"properties": {"kind": {"const": "y"}, "v": {"type": "integer", "multipleOf": 5}}}
    ]});
    for (t, ok) in [
        (r#"{"kind":"x","v":4}"#, true),
        (r#"{"kind":"y","v":15}"#, true),
        (r#"{"kind":"y","v":4}"#, false),
        (r#"{"v":4}"#, false),
    ] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
}

#[test]
fn unevaluated_keywords() {
    let s = json!({"properties": {"a": {}}, "unevaluatedProperties": false});
    assert!(accepts(&s, r#"{"a":1}"#) && !accepts(&s, r#"{"b":1}"#));
    // Parts of `allOf` evaluate their properties for the parent.
    let s = json!({"allOf": [{"properties": {"a": {}}}, {"$ref": "#/$defs/b"}], "$defs": {"b": {"properties": {"b": {"type": "integer"}}}},
                   "unevaluatedProperties": false});
    assert!(accepts(&s, r#"{"a":1,"b":2}"#) && !accepts(&s, r#"{"a":1,"b":"x"}"#) && !accepts(&s, r#"{"a":1,"c":3}"#));
    let s = json!({"$ref": "#/$defs/b", "$defs": {"b": {"properties": {"b": {}}}}, "unevaluatedProperties": {"type": "string"}});
    assert!(accepts(&s, r#"{"b":1,"c":"s"}"#) && !accepts(&s, r#"{"b":1,"c":2}"#));
    // A part's own unevaluatedProperties does not see its siblings' properties.
    let s = json!({"allOf": [{"properties": {"a": {}}, "unevaluatedProperties": false}, {"properties": {"b": {}}}]});
    assert!(accepts(&s, r#"{"a":1}"#) && !accepts(&s, r#"{"a":1,"b":2}"#));
    let s = json!({"prefixItems": [{"type": "integer"}], "unevaluatedItems": false});
    assert!(accepts(&s, "[1]") && !accepts(&s, "[1,2]"));
    // Conditional applicators make the evaluated set dynamic: reported.
    let s = json!({"anyOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}], "unevaluatedProperties": false});
    assert!(compile(&s, &JsonSchemaOptions::default()).is_err());
}

#[test]
fn unevaluated_items_beside_applicators_is_reported() {
    let s = json!({"prefixItems": [{"type": "string"}], "allOf": [{"prefixItems": [true, {"type": "number"}]}], "unevaluatedItems": false});
    assert!(compile(&s, &JsonSchemaOptions::default()).unwrap_err().to_string().contains("unevaluatedItems"));
}

#[test]
fn fractional_bounds_against_f64() {
    let mut xs = Vec::new();
    for i in -12i32..=12 {
        for f in ["", ".0", ".5", ".05", ".25", ".2500", ".249", ".251", ".75", ".9", ".001", ".999", ".5001", ".0001"]
        {
            if i < 0 || !f.is_empty() || i >= 0 {
                xs.push(format!("{i}{f}"));
            }
        }
        if i == 0 {
            for f in [".5", ".25", ".05", ".001", ".75"] {
                xs.push(format!("-0{f}"));
            }
        }
    }
    for b in [0.5, -0.5, 2.25, -2.25, 0.05, -0.001, 1.75, -10.5, 0.999] {
        for kw in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] {
            let s = json!({"type": "number", kw: b});
            let c =
                Compiled::new(&VocabEnv::new(bytes_vocab()), &Constraint::JsonSchema(s, JsonSchemaOptions::default()))
                    .unwrap();
            let accepts = |_: &Value, text: &str| {
                let mut m = c.matcher();
                m.commit_bytes(text.as_bytes()).is_ok() && m.is_accepting()
            };
            for x in &xs {
                let v: f64 = x.parse().unwrap();
                let want = match kw {
                    "minimum" => v >= b,
                    "maximum" => v <= b,
                    "exclusiveMinimum" => v > b,
                    _ => v < b,
                };
                assert_eq!(accepts(&Value::Null, x), want, "{kw} {b}: {x}");
            }
        }
    }
    // Both sides, with a decimal multipleOf.
    let s = json!({"type": "number", "minimum": 0.5, "exclusiveMaximum": 2, "multipleOf": 0.01});
    for (t, ok) in [("0.5", true), ("0.49", false), ("1.99", true), ("2", false), ("1.995", false), ("1", true)] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
}

#[test]
fn more_not_rewrites() {
    // Not all of several keys (at least one missing), on objects only.
    let s = json!({"not": {"required": ["a", "b"]}});
    for (t, ok) in
        [(r#"{"a":1}"#, true), (r#"{"b":1}"#, true), (r#"{}"#, true), (r#"{"a":1,"b":2}"#, false), ("1", false)]
    {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    let s = json!({"type": "object", "not": {"allOf": [{"required": ["cmd"]}, {"required": ["args"]}]}});
    assert!(accepts(&s, r#"{"cmd":1}"#) && !accepts(&s, r#"{"cmd":1,"args":2}"#));
    let s = json!({"type": "object", "not": {"anyOf": [{"required": ["x"]}, {"required": ["y"]}]}});
    assert!(accepts(&s, r#"{"z":1}"#) && !accepts(&s, r#"{"x":1}"#) && !accepts(&s, r#"{"y":1}"#));
    // Excluded numbers, in every spelling.
    let s = json!({"type": "number", "not": {"enum": [6379, 0, -1.5]}});
    for (t, ok) in [
        ("6380", true),
        ("6379", false),
        ("6379.00", false),
        ("0", false),
        ("-0", false),
        ("0.0", false),
        ("-1.5", false),
        ("-1.50", false),
        ("-1.25", true),
        ("63790", true),
    ] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    let s = json!({"type": "integer", "minimum": 1, "maximum": 5, "not": {"const": 3}});
    for (t, ok) in [("1", true), ("3", false), ("5", true), ("6", false)] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
}

#[test]
fn not_of_one_type_family() {
    let s = json!({"not": {"type": ["string", "null"], "minLength": 2}});
    for (t, ok) in [(r#""a""#, true), (r#""ab""#, false), ("null", false), ("1", true), ("[]", true)] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    let s = json!({"type": "number", "not": {"minimum": 900}});
    assert!(accepts(&s, "899.5") && !accepts(&s, "900") && !accepts(&s, "1000"));
    let s = json!({"not": {"type": "number", "minimum": 1, "maximum": 2}});
    for (t, ok) in [("0.5", true), ("1", false), ("2", false), ("2.5", true), (r#""x""#, true), ("null", true)] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    let s = json!({"type": ["string", "integer"], "not": {"type": "string", "enum": ["a", "b"]}});
    assert!(accepts(&s, r#""c""#) && !accepts(&s, r#""a""#) && accepts(&s, "3"));
    // A branch that already has a `not` can take another one (oneOf made disjoint).
    let s = json!({"oneOf": [
        {"not": {"required": ["base", "height"]}, "required": ["length", "width"]},
        {"not": {"required": ["length", "width"]}, "required": ["base", "height"]}
    ]});
    assert!(accepts(&s, r#"{"length":1,"width":2}"#) && !accepts(&s, r#"{"length":1,"width":2,"base":1,"height":2}"#));
}

#[test]
fn all_of_merges_object_members() {
    // properties on one side, patternProperties on the other.
    let s = json!({"allOf": [
        {"properties": {"s_a": {"maxLength": 3}, "b": {"type": "integer"}}},
        {"patternProperties": {"^s_": {"type": "string"}}}
    ]});
    for (t, ok) in [
        (r#"{"s_a":"abc","b":1}"#, true),
        (r#"{"s_a":"abcd"}"#, false),
        (r#"{"s_a":1}"#, false),
        (r#"{"s_x":2}"#, false),
        (r#"{"s_x":"y"}"#, true),
    ] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    // Two closed sides: only keys both allow.
    let s = json!({"allOf": [
        {"properties": {"a": {}, "b": {}}, "additionalProperties": false},
        {"properties": {"b": {"type": "integer"}, "c": {}}, "additionalProperties": false}
    ]});
    for (t, ok) in
        [(r#"{"b":1}"#, true), (r#"{"b":"x"}"#, false), (r#"{"a":1}"#, false), (r#"{"c":1}"#, false), (r#"{}"#, true)]
    {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    // A closed side against the other's patterns cannot be written as one schema: reported.
    let s = json!({"allOf": [{"additionalProperties": false}, {"patternProperties": {"^x": {}}}]});
    assert!(compile(&s, &JsonSchemaOptions::default()).is_err());
}

#[test]
fn not_of_array_keywords() {
    let s = json!({"type": "array", "not": {"items": {"type": "string"}}});
    for (t, ok) in [(r#"["a",1]"#, true), (r#"["a"]"#, false), ("[]", false), ("[1]", true)] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    let s = json!({"not": {"type": "array", "minItems": 2}});
    for (t, ok) in [("[1]", true), ("[1,2]", false), ("3", true)] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
}

#[test]
fn contains_with_counts() {
    let s = json!({"contains": {"const": 1}, "minContains": 2});
    for (t, ok) in [("[1,1]", true), ("[1,2,1]", true), ("[1,2]", false), ("[]", false), ("[2,1,3,1,1]", true)] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    let s = json!({"type": "array", "items": {"type": "integer"}, "contains": {"const": 1}, "maxContains": 2});
    for (t, ok) in [("[1]", true), ("[1,2,1]", true), ("[1,1,1]", false), ("[2]", false), ("[1,\"a\"]", false)] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    let s = json!({"type": "array", "contains": {"const": 1}, "minContains": 0, "maxContains": 0});
    assert!(accepts(&s, "[]") && accepts(&s, "[2]") && !accepts(&s, "[1]") && !accepts(&s, "[2,1]"));
    let s = json!({"type": "array", "contains": {"const": 1}, "minContains": 0, "maxContains": 1});
    for (t, ok) in [("[]", true), ("[2,3]", true), ("[1,2]", true), ("[1,1]", false)] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
}

#[test]
fn unique_items_over_finite_sets() {
    let s = json!({"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": true, "minItems": 1});
    for (t, ok) in [
        (r#"["a"]"#, true),
        (r#"["c","a","b"]"#, true),
        (r#"["a","a"]"#, false),
        ("[]", false),
        (r#"["a","b","a"]"#, false),
    ] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    let s = json!({"prefixItems": [{"type": "boolean"}, {"type": "boolean"}], "items": false, "uniqueItems": true});
    for (t, ok) in [("[true,false]", true), ("[false]", true), ("[true,true]", false), ("[]", true), ("[1]", false)] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    // An infinite item space stays reported.
    assert!(compile(&json!({"items": {"type": "string"}, "uniqueItems": true}), &JsonSchemaOptions::default()).is_err());
}

fn accepts_with(schema: &Value, opts: &JsonSchemaOptions, text: &str) -> bool {
    let c = Compiled::new(&VocabEnv::new(bytes_vocab()), &Constraint::JsonSchema(schema.clone(), opts.clone()))
        .unwrap_or_else(|e| panic!("{schema}: {e}"));
    let mut m = c.matcher();
    m.commit_bytes(text.as_bytes()).is_ok() && m.is_accepting()
}

#[test]
fn refs_resolve_against_base_uris_and_documents() {
    // `$id`s change the base: the same relative reference means different schemas.
    let s = json!({
        "$id": "http://example.com/root.json",
        "properties": {
            "a": {"$ref": "item.json"},
            "b": {"$id": "nested/", "properties": {"c": {"$ref": "item.json"}}}
        },
        "$defs": {
            "x": {"$id": "item.json", "type": "integer"},
            "y": {"$id": "nested/item.json", "type": "string"}
        }
    });
    assert!(accepts(&s, r#"{"a":1,"b":{"c":"s"}}"#));
    assert!(!accepts(&s, r#"{"a":"s"}"#) && !accepts(&s, r#"{"b":{"c":1}}"#));
    // Anchors belong to their resource.
    let s = json!({"$ref": "http://example.com/b.json#it", "$defs": {
        "a": {"$id": "http://example.com/a.json", "$defs": {"t": {"$anchor": "it", "type": "string"}}},
        "b": {"$id": "http://example.com/b.json", "$defs": {"t": {"$anchor": "it", "type": "boolean"}}}
    }});
    assert!(accepts(&s, "true") && !accepts(&s, r#""s""#));
    // Registered documents, with relative references inside them resolved against their URI.
    let mut opts = JsonSchemaOptions::default();
    opts.documents
        .insert("http://example.com/types.json".into(), json!({"$defs": {"n": {"$ref": "more.json#/$defs/m"}}}));
    opts.documents
        .insert("http://example.com/more.json".into(), json!({"$defs": {"m": {"type": "integer", "minimum": 5}}}));
    let s = json!({"$ref": "http://example.com/types.json#/$defs/n"});
    assert!(accepts_with(&s, &opts, "7") && !accepts_with(&s, &opts, "3") && !accepts_with(&s, &opts, r#""x""#));
    // Refs inside a `$ref`'s target keep their meaning when it is merged with siblings.
    let s = json!({"$ref": "#/definitions/car", "definitions": {
        "vehicle": {"properties": {"reg": {"type": "string"}}, "required": ["reg"]},
        "car": {"$ref": "#/definitions/vehicle", "properties": {"wheels": {"type": "integer"}}}
    }});
    // (Merged members come in one order; either is fine here.)
    assert!(accepts(&s, r#"{"reg":"x","wheels":4}"#) || accepts(&s, r#"{"wheels":4,"reg":"x"}"#));
    for bad in [r#"{"reg":6,"wheels":4}"#, r#"{"wheels":4,"reg":6}"#, r#"{"wheels":4}"#, r#"{"reg":6}"#] {
        assert!(!accepts(&s, bad), "{bad}");
    }
    // Draft-04 identifies with `id`, and `$id` means nothing there.
    let s = json!({"$schema": "http://json-schema.org/draft-04/schema#", "definitions": {
        "p": {"$id": "p", "type": "string"}, "q": {"$id": "q", "oneOf": [{"$ref": "#/definitions/p"}, {"type": "null"}]}
    }, "$ref": "#/definitions/q"});
    assert!(accepts(&s, r#""s""#), "string");
    assert!(accepts(&s, "null"), "null");
    assert!(!accepts(&s, "1"), "1");
    // Unknown URIs are errors naming the reference.
    let e = compile(&json!({"$ref": "other.json"}), &JsonSchemaOptions::default()).unwrap_err().to_string();
    assert!(e.contains("other.json") && e.contains("/$ref"), "{e}");
}

#[test]
fn repeated_additional_keys_do_not_count_twice() {
    // `{"f":1,"f":2,...}` is one property "f": a minimum must not count it twice.
    let s = json!({"type": "object", "properties": {"x": {}, "y": {}}, "additionalProperties": {"type": "integer"}, "minProperties": 3});
    assert!(accepts(&s, r#"{"x":1,"y":2,"z":3}"#));
    assert!(!accepts(&s, r#"{"x":1,"z":3,"z":3}"#) && !accepts(&s, r#"{"z":1,"z":2,"z":3}"#));
    let s = json!({"patternProperties": {"^[a-f]$": {}}, "additionalProperties": false, "minProperties": 2, "properties": {"g": {}}});
    assert!(accepts(&s, r#"{"g":1,"f":2}"#) && !accepts(&s, r#"{"f":1,"f":2}"#));
    let s = json!({"minProperties": 1});
    assert!(accepts(&s, r#"{"f":1,"f":2}"#) && !accepts(&s, "{}"));
    // Two additional keys needed: they could repeat, so that is refused, naming the keyword.
    let e =
        compile(&json!({"type": "object", "minProperties": 2}), &JsonSchemaOptions::default()).unwrap_err().to_string();
    assert!(e.contains("minProperties") && e.contains("distinct"), "{e}");
}

#[test]
fn anchors_inside_pattern_groups() {
    let s = json!({"type": "string", "pattern": "^([0-9]{3})$|^(default)$"});
    for ok in [r#""200""#, r#""default""#] {
        assert!(accepts(&s, ok), "{ok}");
    }
    for bad in [r#""2000""#, r#""xdefault""#, r#""defaults""#, r#""""#] {
        assert!(!accepts(&s, bad), "{bad}");
    }
    // Anchors inside a group in the middle, and alternatives with and without them.
    let s = json!({"type": "string", "pattern": "(^a|b)c($|d)"});
    for ok in [r#""ac""#, r#""acd""#, r#""xbcdx""#, r#""xbc""#, r#""acdd""#] {
        assert!(accepts(&s, ok), "{ok}");
    }
    for bad in [r#""xac""#, r#""bx""#, r#""cd""#] {
        assert!(!accepts(&s, bad), "{bad}");
    }
    // `$` followed by more text matches only where that text can be empty.
    let s = json!({"type": "string", "pattern": "^$[a-z]*$"});
    assert!(accepts(&s, r#""""#) && !accepts(&s, r#""a""#));
    // A URI pattern whose parts after the scheme's colon may all be empty, unanchored: "a scheme
    // and a colon somewhere" (the full pattern determinized for 0.3 s into thousands of states).
    let uri = r"([A-Za-z][A-Za-z0-9+\-.]*):(?:(//)(?:((?:[A-Za-z0-9\-._~!$&'()*+,;=:]|%[0-9A-Fa-f]{2})*)@)?((?:\[(?:(?:(?:(?:[0-9A-Fa-f]{1,4}:){6}|::(?:[0-9A-Fa-f]{1,4}:){5})(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}))|[Vv][0-9A-Fa-f]+\.[A-Za-z0-9\-._~!$&'()*+,;=:]+)\]|(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})*))(?::([0-9]*))?((?:/(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})*)*)|)(?:\?((?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*))?(?:\#((?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*))?";
    let s = json!({"type": "string", "pattern": uri});
    let c =
        Compiled::new(&VocabEnv::new(bytes_vocab()), &Constraint::JsonSchema(s.clone(), JsonSchemaOptions::default()))
            .unwrap();
    let states = c
        .stats()
        .as_object()
        .and_then(|o| o.get("dfa_states").or(o.get("lexer_states")))
        .and_then(|n| n.as_u64())
        .unwrap();
    assert!(states < 50, "{states} states");
    for ok in [r#""http://x""#, r#""see urn:isbn""#, r#""a:""#, r#""x 1a+b:[""#] {
        assert!(accepts(&s, ok), "{ok}");
    }
    for bad in [r#""http""#, r#""1:""#, r#""::""#, r#""""#] {
        assert!(!accepts(&s, bad), "{bad}");
    }
    // Many unanchored alternatives stay one search, not a union that remembers which of them
    // matched (2^10 times the states; this one took most of a second to compile).
    let s = json!({"type": "string", "pattern": "^list|date|time|string|enum|int|double|long|boolean|number$"});
    let c =
        Compiled::new(&VocabEnv::new(bytes_vocab()), &Constraint::JsonSchema(s.clone(), JsonSchemaOptions::default()))
            .unwrap();
    let states = c
        .stats()
        .as_object()
        .and_then(|o| o.get("dfa_states").or(o.get("lexer_states")))
        .and_then(|n| n.as_u64())
        .unwrap();
    assert!(states < 1000, "{states} states");
    for ok in [r#""listx""#, r#""a date""#, r#""a number""#, r#""xintx""#] {
        assert!(accepts(&s, ok), "{ok}");
    }
    for bad in [r#""xlist""#, r#""numbers""#, r#""dat""#] {
        assert!(!accepts(&s, bad), "{bad}");
    }
    // Differential: random strings against the `regex` crate's own search semantics.
    // The second row: unanchored ends trimmed of what "contains" makes redundant (optional
    // parts, extra repetitions, alternatives each), at one end or both.
    let patterns = [
        "^(ab|c)$|x",
        "(^|-)[0-9]+($|-)",
        "a(^b|c)",
        "(a$|b)c?",
        "^(?:foo|bar)(?:$|/)",
        "^ab|c1|fo|x-|r/|ox|bf|oc$|^o$",
        "a(b|)c?",
        "(x+|o{2,4})f*",
        "(ab)?c(a|b)*",
        "a{2,3}",
        "(?:f(o|x)?)+r?",
        "1(a|b?)",
        "^(ab)?c(a|b)*",
        "(o{2,3}x|r)b?$",
        "(?:(a|1)c+){2,}-?",
        "((fo)?r)+(/|-)?x",
    ];
    let mut rng = 7u64;
    for p in patterns {
        let s = json!({"type": "string", "pattern": p});
        let c = Compiled::new(
            &VocabEnv::new(bytes_vocab()),
            &Constraint::JsonSchema(s.clone(), JsonSchemaOptions::default()),
        )
        .unwrap();
        let re = regex_automata::meta::Regex::new(p).unwrap();
        for _ in 0..400 {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let len = (rng >> 60) as usize % 6;
            let text: String = (0..len).map(|i| b"abcfox-/1r"[((rng >> (i * 5 + 3)) % 10) as usize] as char).collect();
            let mut m = c.matcher();
            let ours = m.commit_bytes(format!("\"{text}\"").as_bytes()).is_ok() && m.is_accepting();
            assert_eq!(ours, re.is_match(&text), "pattern {p:?} on {text:?}");
        }
    }
}

/// Every (schema, instance) pair agrees with the `jsonschema` crate; each schema must compile.
fn agrees_with_validator(schemas: &[Value], instances: &[&str]) {
    for s in schemas {
        let judge = jsonschema::options().should_validate_formats(true).build(s).unwrap();
        for text in instances {
            let v: Value = serde_json::from_str(text).unwrap();
            assert_eq!(accepts(s, text), judge.is_valid(&v), "schema {s}, instance {text}");
        }
    }
}

#[test]
fn not_of_refs_and_closed_objects() {
    let defs = json!({
        "pt": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}, "required": ["x"], "additionalProperties": false},
        "tree": {"type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/tree"}}}, "additionalProperties": false}
    });
    let schemas = [
        json!({"$defs": defs, "not": {"$ref": "#/$defs/pt"}}),
        json!({"$defs": defs, "type": "object", "not": {"$ref": "#/$defs/pt"}}),
        json!({"$defs": defs, "type": "object", "properties": {"x": {"type": "number"}}, "not": {"$ref": "#/$defs/pt"}}),
        json!({"$defs": defs, "not": {"$ref": "#/$defs/tree"}}),
        json!({"not": {"properties": {"a": {}, "b": {"type": "string"}}, "additionalProperties": false}}),
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "not": {"properties": {"a": {}}, "additionalProperties": false}}),
        json!({"type": "object", "patternProperties": {"^p": {"type": "integer"}}, "not": {"properties": {"a": {}}, "additionalProperties": false}}),
        json!({"type": "object", "additionalProperties": false, "properties": {"a": {}, "b": {}, "c": {}}, "not": {"properties": {"a": {}}, "additionalProperties": false}}),
        json!({"not": {"properties": {"a": {"type": "string"}}, "additionalProperties": true}}),
        json!({"type": "integer", "not": {"type": "integer", "minimum": 900}}),
        json!({"oneOf": [{"$ref": "#/$defs/pt"}, {"allOf": [{"type": "object"}, {"required": ["y"]}]}], "$defs": defs}),
        json!({"oneOf": [{"required": ["x"]}, {"not": {"$ref": "#/$defs/pt"}}], "$defs": defs}),
    ];
    let instances = [
        "{}",
        r#"{"x":1}"#,
        r#"{"x":1,"y":2}"#,
        r#"{"x":1,"z":2}"#,
        r#"{"y":2}"#,
        r#"{"x":"s"}"#,
        r#"{"x":1.5}"#,
        r#"{"v":1}"#,
        r#"{"v":1,"kids":[{"v":2}]}"#,
        r#"{"v":1,"kids":[{"w":2}]}"#,
        r#"{"kids":[{"kids":[{"q":1}]}]}"#,
        r#"{"a":1}"#,
        r#"{"a":"s"}"#,
        r#"{"a":1,"b":"s"}"#,
        r#"{"a":1,"b":2}"#,
        r#"{"b":"s","c":null}"#,
        r#"{"p1":3}"#,
        r#"{"a":1,"p1":3}"#,
        r#"{"c":1}"#,
        "3",
        "899",
        "900",
        "1200",
        "null",
        r#""s""#,
        "[1]",
    ];
    agrees_with_validator(&schemas, &instances);
}

#[test]
fn enum_values_filtered_by_the_other_keywords_grammar() {
    let schemas = [
        json!({"allOf": [{"enum": [[1], [1, 2, 3], "x"]}, {"not": {"not": {"maxItems": 2}}}]}),
        json!({"enum": ["2024-01-01", "yesterday", 3], "format": "date"}),
        json!({"enum": [{"a": 1}, {"a": "s"}, {"b": 2}], "properties": {"a": {"type": "integer"}}, "required": ["a"]}),
        json!({"type": "array", "items": {"multipleOf": 5}, "enum": [[5, 10], [4], []]}),
    ];
    let instances = [
        "[1]",
        "[1,2,3]",
        r#""x""#,
        r#""2024-01-01""#,
        r#""yesterday""#,
        "3",
        r#"{"a":1}"#,
        r#"{"a":"s"}"#,
        r#"{"b":2}"#,
        "[3,6]",
        "[4]",
        "[]",
        "[5,10]",
    ];
    agrees_with_validator(&schemas, &instances);
}

#[test]
fn not_of_values_contains_counts_dependencies_and_disjoint_one_of() {
    let schemas = [
        json!({"not": {"const": true}}),
        json!({"not": {"enum": [false, null]}}),
        json!({"not": {"const": {"a": 1, "b": [1, "x"]}}}),
        json!({"not": {"enum": [[1, 2], {"a": {}}]}}),
        json!({"type": "array", "not": {"contains": {"type": "string"}}}),
        json!({"not": {"minProperties": 2}}),
        json!({"properties": {"a": {}, "b": {}}, "additionalProperties": false, "not": {"maxProperties": 1, "minProperties": 1}}),
        json!({"not": {"dependencies": {"a": ["b"], "c": {"required": ["d"]}}}}),
        json!({"not": {"dependentRequired": {"a": []}}}),
        json!({"not": {"oneOf": [{"type": "string"}, {"type": "object", "required": ["a"]}]}}),
        json!({"not": {"oneOf": [{"type": "object", "properties": {"k": {"const": 1}}, "required": ["k"]}, {"type": "object", "properties": {"k": {"const": 2}}, "required": ["k"]}]}}),
    ];
    let instances = [
        "true",
        "false",
        "null",
        "1",
        "1.0",
        r#""s""#,
        "[]",
        "[1,2]",
        "[1.0,2]",
        "[1,2,3]",
        r#"[1,"x"]"#,
        r#"["x"]"#,
        "{}",
        r#"{"a":1}"#,
        r#"{"a":1,"b":[1,"x"]}"#,
        r#"{"a":1.0,"b":[1,"x"]}"#,
        r#"{"a":1,"b":[1,"y"]}"#,
        r#"{"a":1,"b":[1,"x"],"c":0}"#,
        r#"{"a":{}}"#,
        r#"{"a":{"z":1}}"#,
        r#"{"a":1,"b":2}"#,
        r#"{"c":1}"#,
        r#"{"c":1,"d":2}"#,
        r#"{"k":1}"#,
        r#"{"k":3}"#,
    ];
    agrees_with_validator(&schemas, &instances);
}

#[test]
fn additional_keys_exclude_exactly_the_declared_names() {
    // Declared names take their own schema; every other key (prefixes and extensions of
    // names, escaped spellings, non-ASCII) takes `additionalProperties`.
    let s = json!({"type": "object", "properties": {"name": {"type": "integer"}, "namé": {"type": "integer"}, "a\"b": {"type": "integer"}},
                   "additionalProperties": {"type": "string"}});
    for (t, ok) in [
        (r#"{"name":1}"#, true),
        (r#"{"name":"x"}"#, false),
        (r#"{"namé":2,"a\"b":3}"#, true),
        (r#"{"namé":"x"}"#, false),
        (r#"{"a\"b":"x"}"#, false),
        (r#"{"nam":"x","names":"y","nameé":"z","":"e","a":"f","a\"":"g","a\"bc":"h"}"#, true),
        (r#"{"nam":1}"#, false),
        (r#"{"names":1}"#, false),
        (r#"{"na\nme":"x","x\u0001":"y"}"#, true),
    ] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
}

#[test]
fn uri_formats_take_ports_user_info_fragments_and_paths_without_authority() {
    let schemas = [json!({"type": "string", "format": "uri"}), json!({"type": "string", "format": "uri-reference"})];
    let instances = [
        r#""http://localhost:8086""#,
        r##""https://json-schema.org/draft-07/schema#""##,
        r#""file:///C:/Users/x/doc.txt""#,
        r#""urn:isbn:0451450523""#,
        r#""mailto:ada@example.com""#,
        r##""https://u:p@example.com:443/a%20b/c?q=1&r=%2F#frag""##,
        r#""ftp://ftp.example.org/""#,
        r#""/relative/path?x=1""#,
        r#""../up/one""#,
        r##""#only-fragment""##,
        r#""//host.example/x""#,
        r#""http://[::1]/""#,
        r#""a b""#,
        r#""http://exa mple.com""#,
        r#""%zz""#,
        r#""""#,
        // RFC 3986 bounds neither a scheme's length nor user information's.
        r#""web+a-very-long.scheme-name-2:x""#,
        r#""ssh://a-very-long-user-name-with-many-characters-in-it:pw@h/""#,
    ];
    for s in &schemas {
        let judge = jsonschema::options().should_validate_formats(true).build(s).unwrap();
        for text in instances {
            let v: Value = serde_json::from_str(text).unwrap();
            // A subset of the format: nothing accepted that the validator rejects.
            if accepts(s, text) {
                assert!(judge.is_valid(&v), "{s} accepted {text}");
            }
        }
    }
    let uri = &schemas[0];
    for ok in [
        r#""http://localhost:8086""#,
        r##""https://json-schema.org/draft-07/schema#""##,
        r#""file:///C:/Users/x/doc.txt""#,
        r#""urn:isbn:0451450523""#,
        r##""https://u:p@example.com:443/a%20b/c?q=1&r=%2F#frag""##,
        r#""web+a-very-long.scheme-name-2:x""#,
        r#""ssh://a-very-long-user-name-with-many-characters-in-it:pw@h/""#,
    ] {
        assert!(accepts(uri, ok), "{ok}");
    }
    for ok in [r#""/relative/path?x=1""#, r#""../up/one""#, r##""#only-fragment""##, r#""//host.example/x""#, r#""""#] {
        assert!(accepts(&schemas[1], ok), "{ok}");
    }
}

#[test]
fn non_integers_stay_non_integers_as_f64() {
    // A number that is not an integer keeps a fraction an `f64` can hold: with 17 significant
    // digits `8886914205066836.9` parses as 8886914205066837.0, which validators call an integer.
    let s = json!({"not": {"type": "integer"}, "type": "number"});
    for ok in ["1.5", "-0.25", "0.000123", "123456789012.125", "12345678901234.5", "0.100", "99999999999999.9"] {
        assert!(accepts(&s, ok), "{ok}");
        assert!(serde_json::from_str::<f64>(ok).unwrap().fract() != 0.0, "{ok} is whole as f64");
    }
    for bad in
        ["8886914205066836.9", "123456789012345.5", "1.0000000000000001", "0.99999999999999999", "2", "2.0", "1e3"]
    {
        assert!(!accepts(&s, bad), "{bad}");
    }
}
