//! Objects: `patternProperties`, `propertyNames`, merged members, additional keys, property counts.

use super::*;

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
fn repeated_additional_keys_do_not_count_twice() {
    // `{"f":1,"f":2,...}` is one property "f": a minimum must not count it twice.
    let s = json!({"type": "object", "properties": {"x": {}, "y": {}}, "additionalProperties": {"type": "integer"}, "minProperties": 3});
    assert!(accepts(&s, r#"{"x":1,"y":2,"z":3}"#));
    assert!(!accepts(&s, r#"{"x":1,"z":3,"z":3}"#) && !accepts(&s, r#"{"z":1,"z":2,"z":3}"#));
    let s = json!({"patternProperties": {"^[a-f]$": {}}, "additionalProperties": false, "minProperties": 2, "properties": {"g": {}}});
    assert!(accepts(&s, r#"{"g":1,"f":2}"#) && !accepts(&s, r#"{"f":1,"f":2}"#));
    let s = json!({"minProperties": 1});
    assert!(accepts(&s, r#"{"f":1,"f":2}"#) && !accepts(&s, "{}"));
    // (The sensible language refuses the repeat itself: see `additional_keys_are_distinct`.)
    assert!(!accepts_with(&s, &JsonSchemaOptions::default(), r#"{"f":1,"f":2}"#));
    // Two or more additional keys needed (with a maximum or not): each counts, as the
    // matcher keeps them distinct, in the exact language too.
    for opts in [JsonSchemaOptions::default(), JsonSchemaOptions::exact()] {
        let s = json!({"type": "object", "minProperties": 3, "maxProperties": 4});
        assert!(
            accepts_with(&s, &opts, r#"{"a":1,"b":2,"c":3}"#)
                && accepts_with(&s, &opts, r#"{"a":1,"b":2,"c":3,"d":4}"#)
        );
        assert!(!accepts_with(&s, &opts, r#"{"a":1,"b":2,"a":3}"#) && !accepts_with(&s, &opts, r#"{"a":1,"b":2}"#));
        assert!(!accepts_with(&s, &opts, r#"{"a":1,"b":2,"c":3,"d":4,"e":5}"#));
        let s = json!({"properties": {"x": {}}, "additionalProperties": {"type": "integer"}, "minProperties": 3});
        assert!(
            accepts_with(&s, &opts, r#"{"x":"s","y":2,"z":3}"#) && !accepts_with(&s, &opts, r#"{"x":"s","y":2,"y":3}"#)
        );
    }
}

#[test]
fn few_keys_of_patterns_are_members_of_their_own() {
    // A key language of few keys is written key by key (in byte order of their quoted forms),
    // so the rules keep them distinct and no `,` comes after the last of them; many or endless
    // keys stay a region. Declared keys are left out of it.
    let s = json!({"type": "object", "properties": {"b": {"minimum": 5}},
        "patternProperties": {"^[a-c]$": {"type": "integer"}, "^x-": {}}, "additionalProperties": false});
    let ok = |t: &str| accepts_with(&s, &JsonSchemaOptions::default(), t);
    assert!(ok(r#"{"b":5,"a":1,"c":2}"#) && ok(r#"{"a":1,"x-y":[],"c":2,"x-z":0}"#));
    assert!(
        !ok(r#"{"b":1}"#)
            && !ok(r#"{"c":1,"a":2}"#)
            && !ok(r#"{"a":"s"}"#)
            && !ok(r#"{"a":1,"a":2}"#)
            && !ok(r#"{"d":1}"#)
    );
    let s = json!({"type": "object", "propertyNames": {"pattern": "^[ab]$"}, "minProperties": 2});
    let c = compiled(&s, &JsonSchemaOptions::default()).unwrap();
    let mut m = c.matcher();
    assert!(m.commit_bytes(br#"{"a":1,"b":2"#).is_ok());
    assert!(m.commit_bytes(b",").is_err(), "no third key exists");
}

#[test]
fn additional_keys_are_distinct() {
    // In the sensible language a key the rules cannot keep apart (any key of
    // `additionalProperties`, of an object in any value) is refused where it would repeat an
    // earlier one of its object, spelled alike or not; objects nested in values keep their own
    // keys. The exact language lets keys repeat, as JSON does.
    let dict = json!({"type": "object", "additionalProperties": {"type": "integer"}});
    let nested = json!({"type": "object", "properties": {"m": {"type": "object", "additionalProperties": {}}}, "additionalProperties": {"type": "object", "additionalProperties": true}});
    let ok = |s: &Value, t: &str| accepts_with(s, &JsonSchemaOptions::default(), t);
    assert!(ok(&dict, r#"{"a":1,"b":1,"c":2}"#));
    for t in [r#"{"a":1,"a":2}"#, r#"{"a":1,"b":1,"a":2}"#, r#"{"a\"b":1,"c":2,"a\"b":1}"#] {
        assert!(!ok(&dict, t) && accepts(&dict, t), "{t}");
    }
    // (Spellings other than the canonical one are in neither language.)
    for t in [r#"{"a":1,"\u0061":2}"#, r#"{"é":1,"\u00e9":2}"#] {
        assert!(!ok(&dict, t), "{t}");
    }
    assert!(ok(&nested, r#"{"m":{"a":1,"b":{"a":1,"b":[{"a":1},{"a":1}]}},"a":{"m":{}},"b":{"m":{}}}"#));
    for t in [r#"{"m":{"a":1,"a":1}}"#, r#"{"m":{"x":{"a":1,"a":1}}}"#, r#"{"a":{},"a":{}}"#, r#"{"a":{"k":1,"k":2}}"#]
    {
        assert!(!ok(&nested, t) && accepts(&nested, t), "{t}");
    }
    // A finite `propertyNames` writes its keys as members of their own (kept distinct by the
    // rules, in the order listed): every object of distinct keys, no repeat.
    let s = json!({"type": "object", "propertyNames": {"enum": ["a", "b", "c"]}, "additionalProperties": {"type": "boolean"}, "minProperties": 2});
    for opts in [JsonSchemaOptions::exact(), JsonSchemaOptions::default()] {
        assert!(accepts_with(&s, &opts, r#"{"a":true,"c":false}"#));
        assert!(!accepts_with(&s, &opts, r#"{"a":true,"a":false}"#) && !accepts_with(&s, &opts, r#"{"a":true}"#));
        assert!(!accepts_with(&s, &opts, r#"{"d":true,"a":false}"#));
    }
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
