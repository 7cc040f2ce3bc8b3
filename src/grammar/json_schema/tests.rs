use serde_json::json;

use super::*;
use crate::automaton::{Compiled, Constraint};
use crate::vocab::Vocab;

/// Byte vocabulary: every text is one token per byte.
fn bytes_vocab() -> std::sync::Arc<Vocab> {
    let toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).chain([b"</s>".to_vec()]).collect();
    std::sync::Arc::new(Vocab::from_byte_tokens(toks, &[256]))
}

fn accepts(schema: &Value, text: &str) -> bool {
    let v = bytes_vocab();
    let c = Compiled::new(v, &Constraint::JsonSchema(schema.clone(), JsonSchemaOptions::default())).unwrap();
    let mut m = c.matcher();
    m.commit_bytes(text.as_bytes()).is_ok() && m.is_accepting()
}

#[test]
fn basic_types() {
    let s = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"]});
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
fn combinators_and_refs() {
    let s = json!({"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 5}]});
    assert!(accepts(&s, r#""x""#) && accepts(&s, "7") && !accepts(&s, "3"));
    let s = json!({"oneOf": [{"type": "string"}, {"type": "null"}]});
    assert!(accepts(&s, "null"));
    let overlapping = json!({"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 2}]});
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
    let e = Compiled::new(v, &Constraint::JsonSchema(s, JsonSchemaOptions::default())).err().unwrap().to_string();
    assert!(e.contains("no finite string"), "{e}");
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
    // Numbers are not handled: reported, not approximated.
    assert!(compile(&json!({"not": {"const": 3}}), &JsonSchemaOptions::default()).is_err());
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
