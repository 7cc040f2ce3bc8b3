//! `not` rewrites: types, values, string/number/array/object keywords, `$ref`s, closed objects.

use super::*;

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

/// A value `not` cannot keep out (past ±9e15) is refused naming it as the schema writes it,
/// not as the `f64` it reads as (90071992547409930 is 90071992547409936 as an `f64`).
#[test]
fn an_unenforced_exclusion_names_the_value_as_written() {
    let s = json!({"type": "integer", "not": {"const": 90071992547409930u64}});
    let e = compile(&s, &JsonSchemaOptions::default()).unwrap_err().to_string();
    assert!(e.contains("/not") && e.contains("excluding 90071992547409930 (past"), "{e}");
}
