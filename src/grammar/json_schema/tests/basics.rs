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
