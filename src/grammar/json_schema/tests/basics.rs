//! Types, required keys, closed objects, and schemas that are errors.

use super::*;

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
fn bad_schemas_are_clear_errors() {
    for (s, needle) in [
        (json!({"type": 5}), "/type"),
        (json!({"type": "strin"}), "unknown type"),
        // In one branch too (not dropped as a branch that accepts nothing).
        (json!({"anyOf": [{"type": "strin"}, {"type": "integer"}]}), "/anyOf/0/type"),
        (json!({"oneOf": [{"type": "strin"}, {"type": "integer"}]}), "/oneOf/0/type"),
        (json!({"oneOf": [{"type": 5}, {"type": "integer"}]}), "/oneOf/0/type"),
        (json!({"$ref": "#/$defs/missing"}), "points nowhere"),
        (json!({"$ref": "http://example.com/x.json"}), "remote"),
        (json!({"properties": {"a": {"minLength": -1}}}), "/properties/a/minLength"),
    ] {
        let e = compile(&s, &JsonSchemaOptions::default()).unwrap_err().to_string();
        assert!(e.contains(needle), "{s}: {e}");
    }
    // A cycle with no base case: nothing validates, which the grammar reports.
    let s = json!({"$defs": {"a": {"type": "object", "properties": {"x": {"$ref": "#/$defs/a"}}, "required": ["x"]}}, "$ref": "#/$defs/a"});
    let e = compiled(&s, &JsonSchemaOptions::default()).err().unwrap().to_string();
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

/// Schema text nested deeper than serde_json's default 128 levels reads and compiles (a
/// 120-deep object schema is 240 levels of JSON); text past [`MAX_JSON_DEPTH`] is the same
/// limit error, found before parsing; bad JSON names itself.
#[test]
fn deep_schema_text_reads_up_to_the_document_depth() {
    let deep_text = |n: usize| {
        let mut s = json!({"type": "string"});
        for _ in 0..n {
            s = json!({"type": "object", "properties": {"a": s}, "required": ["a"]});
        }
        s.to_string()
    };
    let text = deep_text(120);
    assert!(serde_json::from_str::<Value>(&text).is_err(), "serde_json alone stops at 128 levels");
    let s = read_document(text.as_bytes()).unwrap();
    assert!(accepts(&s, &format!("{}\"x\"{}", r#"{"a":"#.repeat(120), "}".repeat(120))));
    let e = read_document(deep_text(300).as_bytes()).unwrap_err().to_string();
    assert!(e.contains("nesting depth") && e.contains("512"), "{e}");
    let e = read_document(br#"{"type": "#).unwrap_err().to_string();
    assert!(e.contains("not valid JSON"), "{e}");
}
