//! The sensible language (the default options) beside the exact one: objects and arrays
//! without unnamed members, integers within `i64`, dates Python reads, one whitespace layout.

use super::*;

fn default(schema: &Value, text: &str) -> bool {
    accepts_with(schema, &JsonSchemaOptions::default(), text)
}

fn with_ws(ws: Whitespace, schema: &Value, text: &str) -> bool {
    accepts_with(schema, &JsonSchemaOptions::default().with_whitespace(ws), text)
}

#[test]
fn objects_get_only_the_keys_their_schema_names() {
    let s = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}});
    assert!(default(&s, r#"{"a":5,"b":""}"#));
    assert!(default(&s, r#"{}"#));
    assert!(!default(&s, r#"{"junk":"x","a":5,"b":""}"#));
    assert!(!default(&s, r#"{"a":5,"junk":1}"#));
    assert!(accepts(&s, r#"{"junk":"x","a":5,"b":""}"#), "the exact language keeps them");
    // Keys matching `patternProperties` are named too.
    let p = json!({"type": "object", "patternProperties": {"^x-": {"type": "integer"}}});
    assert!(default(&p, r#"{"x-a":1}"#));
    assert!(!default(&p, r#"{"y":1}"#));
    // A required key with no declaration keeps its (any) value.
    let r = json!({"type": "object", "required": ["id"]});
    assert!(default(&r, r#"{"id":[1,{"k":2}]}"#));
    assert!(!default(&r, r#"{"id":1,"other":2}"#));
}

#[test]
fn objects_keep_unnamed_keys_when_the_schema_asks_for_them() {
    for s in [
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": true}),
        json!({"type": "object", "additionalProperties": {"type": "integer"}}),
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "minProperties": 2}),
        json!({"type": "object", "propertyNames": {"maxLength": 5}}),
    ] {
        assert!(default(&s, r#"{"a":1,"b":2}"#), "{s}");
    }
    // Schemas that constrain nothing are any value, objects with any keys included.
    for s in [json!(true), json!({}), json!({"description": "anything"})] {
        assert!(default(&s, r#"{"k":{"z":[1]}}"#), "{s}");
    }
    let closed_min = json!({"type": "object", "properties": {"a": {"type": "integer"}}, "minProperties": 1});
    assert!(!default(&closed_min, r#"{"b":2}"#), "a named key is enough");
}

#[test]
fn arrays_get_no_unnamed_items() {
    let s = json!({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "boolean"}]});
    assert!(default(&s, "[1,true]"));
    assert!(default(&s, "[1]"));
    assert!(!default(&s, r#"[1,true,"x"]"#));
    assert!(accepts(&s, r#"[1,true,"x"]"#));
    let more = json!({"type": "array", "prefixItems": [{"type": "integer"}], "minItems": 2});
    assert!(default(&more, r#"[1,"x"]"#));
    let items = json!({"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "string"}});
    assert!(default(&items, r#"[1,"x","y"]"#));
}

#[test]
fn integers_stay_within_their_format_or_i64() {
    let s = json!({"type": "integer"});
    assert!(default(&s, "9223372036854775807"));
    assert!(default(&s, "-9223372036854775807"));
    assert!(!default(&s, "9223372036854775808"));
    assert!(!default(&s, "12345678901234567890123"));
    assert!(accepts(&s, "12345678901234567890123"));
    let i32s = json!({"type": "integer", "format": "int32"});
    assert!(default(&i32s, "2147483647") && default(&i32s, "-2147483648"));
    assert!(!default(&i32s, "2147483648") && !default(&i32s, "-2147483649"));
    let u32s = json!({"type": "integer", "format": "uint32", "maximum": 10});
    assert!(default(&u32s, "10") && !default(&u32s, "-1") && !default(&u32s, "11"));
    let u64s = json!({"type": "integer", "format": "uint64"});
    assert!(!default(&u64s, "-1") && default(&u64s, "9223372036854775807"));
    // The exact language treats formats as the annotations JSON Schema says they are.
    assert!(accepts(&i32s, "2147483648"));
}

#[test]
fn multiple_of_with_bounds() {
    // Pydantic's conint(multiple_of=5, ge=0).
    let s = json!({"type": "integer", "multipleOf": 5, "minimum": 0});
    for (t, ok) in [("0", true), ("5", true), ("1230", true), ("3", false), ("-5", false), ("12", false)] {
        assert_eq!(default(&s, t), ok, "{t}");
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    for m in [3i64, 6, 7, 12, 14, 35] {
        let s = json!({"type": "integer", "multipleOf": m, "minimum": -40, "maximum": 200});
        let c = compiled(&s, &JsonSchemaOptions::exact()).unwrap();
        for v in -60i64..=230 {
            let mut mat = c.matcher();
            let ok = mat.commit_bytes(v.to_string().as_bytes()).is_ok() && mat.is_accepting();
            assert_eq!(ok, v % m == 0 && (-40..=200).contains(&v), "{v} multipleOf {m}");
        }
    }
    let unbounded = json!({"type": "integer", "multipleOf": 3});
    assert!(accepts(&unbounded, "123456789012345678900") && !accepts(&unbounded, "100"));
    assert!(!accepts(&unbounded, &"3".repeat(102)), "at most 100 digits");
}

#[test]
fn consts_are_compared_exactly() {
    let s = json!({"oneOf": [{"const": 9007199254740992u64}, {"const": 9007199254740993u64}]});
    assert!(accepts(&s, "9007199254740992"));
    assert!(accepts(&s, "9007199254740993"));
    assert!(!accepts(&s, "9007199254740994"));
    // 1 and 1.0 are still the same value.
    let same = json!({"oneOf": [{"const": 1}, {"const": 1.0}]});
    assert!(compiled(&same, &JsonSchemaOptions::exact()).map_or(true, |c| {
        let mut m = c.matcher();
        !(m.commit_bytes(b"1").is_ok() && m.is_accepting())
    }));
}

#[test]
fn dates_that_python_reads() {
    let d = json!({"type": "string", "format": "date"});
    assert!(!default(&d, r#""0000-01-01""#));
    assert!(default(&d, r#""0001-01-01""#) && default(&d, r#""2024-02-29""#));
    assert!(accepts(&d, r#""0000-01-01""#));
    let dt = json!({"type": "string", "format": "date-time"});
    assert!(default(&dt, r#""2024-05-01T12:30:00.123456Z""#));
    assert!(!default(&dt, r#""2024-05-01T12:30:00.1234567Z""#));
    assert!(accepts(&dt, r#""2024-05-01T12:30:00.1234567Z""#));
    let t = json!({"type": "string", "format": "time"});
    assert!(default(&t, r#""23:59:59+02:00""#) && !default(&t, r#""23:59:59.0000001Z""#));
}

#[test]
fn whitespace_layouts() {
    let s = json!({"type": "object", "properties": {
        "a": {"type": "array", "items": {"type": "integer"}},
        "b": {"type": "object", "properties": {"c": {"type": "boolean"}}},
        "e": {"type": "array", "maxItems": 0}
    }, "required": ["a", "b", "e"]});
    let v = json!({"a": [1, 2], "b": {"c": true}, "e": []});
    let compact = serde_json::to_string(&v).unwrap();
    let pretty = serde_json::to_string_pretty(&v).unwrap();
    assert!(with_ws(Whitespace::Compact, &s, &compact));
    assert!(!with_ws(Whitespace::Compact, &s, &pretty));
    assert!(with_ws(Whitespace::Pretty, &s, &pretty), "{pretty}");
    assert!(!with_ws(Whitespace::Pretty, &s, &compact));
    assert!(!with_ws(Whitespace::Pretty, &s, &pretty.replace("  ", "\t")));
    assert!(with_ws(Whitespace::Flexible, &s, &compact) && with_ws(Whitespace::Flexible, &s, &pretty));
    let empty = json!({"a": [], "b": {}, "e": []});
    assert!(with_ws(Whitespace::Pretty, &s, &serde_json::to_string_pretty(&empty).unwrap()));
    // Enums of objects keep their values under Pretty, laid out at their level.
    let e = json!({"type": "object", "properties": {"k": {"enum": [{"x": [1]}, 2]}}, "required": ["k"]});
    let text = serde_json::to_string_pretty(&json!({"k": {"x": [1]}})).unwrap();
    assert!(with_ws(Whitespace::Pretty, &e, &text), "{text}");
    // A recursive schema: the indentation grows with the depth, up to MAX_INDENT_LEVEL.
    let tree = json!({"$defs": {"t": {"type": "object", "properties": {"c": {"$ref": "#/$defs/t"}}}},
        "$ref": "#/$defs/t"});
    let mut deep = json!({});
    for _ in 0..5 {
        deep = json!({ "c": deep });
    }
    assert!(with_ws(Whitespace::Pretty, &tree, &serde_json::to_string_pretty(&deep).unwrap()));
    let mut deeper = String::from("{}");
    for level in (0..MAX_INDENT_LEVEL + 3).rev() {
        let ind = |l: usize| "  ".repeat(l.min(MAX_INDENT_LEVEL));
        deeper = format!("{{\n{}\"c\": {deeper}\n{}}}", ind(level + 1), ind(level));
    }
    assert!(with_ws(Whitespace::Pretty, &tree, &deeper), "{deeper}");
}

#[test]
fn openai_strict_rules() {
    let ok = json!({"type": "object", "properties": {"a": {"type": ["string", "null"]},
        "b": {"type": "array", "items": {"type": "object", "properties": {"c": {"type": "integer"}},
        "required": ["c"], "additionalProperties": false}}},
        "required": ["a", "b"], "additionalProperties": false});
    assert_eq!(strict_violation(&ok), None);
    // What the openai SDK's `chat.completions.parse` sends for a Pydantic model.
    let sdk: Value = serde_json::from_str(include_str!("openai_sdk_person.json")).unwrap();
    assert_eq!(strict_violation(&sdk), None);
    let mut open = ok.clone();
    open["properties"]["b"]["items"].as_object_mut().unwrap().remove("additionalProperties");
    assert_eq!(strict_violation(&open).unwrap().0, "/properties/b/items/additionalProperties");
    let mut optional = ok.clone();
    optional["required"] = json!(["a"]);
    assert_eq!(strict_violation(&optional).unwrap().0, "/required");
    assert_eq!(strict_violation(&json!({"anyOf": [ok.clone()]})).unwrap().0, "");
    let mut all_of = ok;
    all_of["properties"]["a"] = json!({"allOf": [{"type": "string"}]});
    assert_eq!(strict_violation(&all_of).unwrap().0, "/properties/a/allOf");
}
