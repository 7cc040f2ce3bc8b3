//! `anyOf`/`oneOf`/`allOf`, conditionals, `unevaluated*`, and `enum` values filtered by their siblings.

use super::*;

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

/// Mutually exclusive members written as `if`/`then` pairs over a large object (as
/// prometheus.json's `auth`): the conditionals multiply out into 2^4 branches, each the whole
/// object; the branches that require two of the members are unsatisfiable and are left out
/// before they are merged with the object (`empty.rs`), so the compile visits about one object
/// per satisfiable branch. (Instances list keys in `properties` order, as the grammar writes them.)
#[test]
fn exclusive_conditionals_over_a_large_object_compile_once_per_way() {
    let auth = ["basic", "token", "oauth", "sigv4"];
    let mut props = serde_json::Map::new();
    for i in 0..30 {
        props.insert(format!("field{i}"), json!({"type": "string", "description": "a field"}));
    }
    for a in auth {
        props.insert(a.into(), json!({"type": ["object", "null"]}));
    }
    let conditionals: Vec<Value> = auth
        .iter()
        .map(|a| {
            let others: serde_json::Map<String, Value> =
                auth.iter().filter(|o| *o != a).map(|o| (o.to_string(), json!({"const": null}))).collect();
            json!({"if": {"not": {"properties": {*a: {"const": null}}}}, "then": {"properties": others}})
        })
        .collect();
    let schema = json!({"type": "object", "properties": props, "allOf": conditionals, "additionalProperties": false});
    let instances = [
        "{}",
        r#"{"field0":"x"}"#,
        r#"{"basic":{}}"#,
        r#"{"basic":{},"token":null}"#,
        r#"{"basic":{},"token":{}}"#,
        r#"{"field3":"y","token":{},"sigv4":{}}"#,
        r#"{"field29":"z","oauth":null,"sigv4":null}"#,
        r#"{"field1":"w","token":{},"oauth":null}"#,
    ];
    agrees_with_validator(std::slice::from_ref(&schema), &instances);
    let rules = compile(&schema, &JsonSchemaOptions::exact()).unwrap().grammar.rules.len();
    assert!(rules < 800, "{rules} rules: the unsatisfiable branches were compiled (1,678 when they were)");
    let opts = JsonSchemaOptions::exact();
    let (prepared, docs, index) = prepare(&schema, &opts).unwrap();
    let mut c = Compiler::new(&prepared, &docs, index, &opts, DfaLimits::default());
    c.schema(&prepared, "").unwrap();
    // 16 branches, 5 satisfiable: 280 subschemas compiled when all 16 were merged (214 now).
    assert!(c.visits < 240, "{} subschemas compiled: the unsatisfiable branches were merged", c.visits);
}

/// A `$ref` to the root beside other keywords under every property of the root (as
/// renovate's schema writes it): each distinct set of siblings is one merge, compiled once and
/// then shared. Merged again on every path through the others, the compile grew as the
/// factorial of their count (six sets: thousands of merges).
#[test]
fn a_schema_merged_once_is_shared_wherever_it_is_met_again() {
    let siblings = [
        json!({}),
        json!({"minProperties": 0}),
        json!({"maxProperties": 9}),
        json!({"required": []}),
        json!({"type": ["object", "null"]}),
        json!({"properties": {"z": {"type": "integer"}}}),
        // The target's own `type`: adds nothing, so it is the `$ref` alone (no merge).
        json!({"type": "object"}),
    ];
    let mut props = serde_json::Map::new();
    for (i, s) in siblings.iter().enumerate() {
        let mut p = s.as_object().unwrap().clone();
        p.insert("$ref".into(), json!("#"));
        p.insert("description".into(), json!(format!("member {i}")));
        props.insert(format!("p{i}"), Value::Object(p));
    }
    let schema = json!({"type": "object", "properties": props, "additionalProperties": false});
    let instances = [
        "{}",
        r#"{"p0":{}}"#,
        r#"{"p0":{"p1":{"p2":{"p3":{"p4":null,"p5":{"z":1}}}}}}"#,
        r#"{"p5":{"p0":{"z":1}}}"#,
        r#"{"p5":{"z":1,"p0":{}}}"#,
        r#"{"p4":null}"#,
        r#"{"p3":null}"#,
        r#"{"p2":{"p0":{},"p1":{},"p2":{},"p3":{},"p4":{},"p5":{},"p6":{}}}"#,
        r#"{"p5":{"z":"one"}}"#,
        r#"{"p6":{"p6":{"p5":{"z":2}}}}"#,
        r#"{"p6":{"p6":null}}"#,
    ];
    agrees_with_validator(std::slice::from_ref(&schema), &instances);
    let opts = JsonSchemaOptions::exact();
    let (prepared, docs, index) = prepare(&schema, &opts).unwrap();
    let mut c = Compiler::new(&prepared, &docs, index, &opts, DfaLimits::default());
    c.schema(&prepared, "").unwrap();
    // 51 subschemas compiled; 4,824 when every path merged again.
    assert!(c.visits < 100, "{} subschemas compiled: merges were repeated", c.visits);
}

/// Two different formats that an `allOf` (or a `$ref` with siblings) merges: both hold, as
/// two patterns do. The validator agrees where the formats' regular subsets are the formats.
#[test]
fn two_formats_merged_both_hold() {
    let s = json!({"type": "string", "allOf": [{"format": "hostname"}, {"format": "ipv4"}]});
    let instances = [r#""10.0.0.1""#, r#""example.com""#, r#""256.1.1.1""#, r#""1.2.3.4.5""#, r#""""#, "3"];
    agrees_with_validator(std::slice::from_ref(&s), &instances);
    // Three formats over a `$ref` chain; the ones already there are not repeated.
    let s = json!({"$defs": {"h": {"format": "hostname"}, "v4": {"$ref": "#/$defs/h", "format": "ipv4"}},
        "allOf": [{"$ref": "#/$defs/v4"}, {"format": "hostname"}, {"format": "ipv4"}]});
    assert!(accepts(&s, r#""10.0.0.1""#) && !accepts(&s, r#""example.com""#) && accepts(&s, "7"));
    // Formats with no common value: no string (the rest of the schema stays).
    let s = json!({"type": ["string", "null"], "allOf": [{"format": "uuid"}, {"format": "ipv4"}]});
    assert!(accepts(&s, "null") && !accepts(&s, r#""10.0.0.1""#));
    assert!(!accepts(&s, r#""123e4567-e89b-12d3-a456-426614174000""#));
    // A format no validator knows is an annotation, merged or not.
    let s = json!({"allOf": [{"format": "ipv4"}, {"format": "x-custom"}]});
    assert!(accepts(&s, r#""10.0.0.1""#) && !accepts(&s, r#""x""#));
    // Integer formats (the sensible language keeps to their ranges): both ranges hold.
    let s = json!({"type": "integer", "allOf": [{"format": "int8"}, {"format": "uint16"}]});
    let sensible = JsonSchemaOptions::default();
    assert!(accepts_with(&s, &sensible, "127") && accepts_with(&s, &sensible, "0"));
    assert!(!accepts_with(&s, &sensible, "128") && !accepts_with(&s, &sensible, "-1"));
    // A format that is not a string is still an error, merged or not.
    let e = compile(&json!({"allOf": [{"format": "ipv4"}, {"format": 4}]}), &JsonSchemaOptions::exact()).unwrap_err();
    assert!(e.to_string().contains("format"), "{e}");
}

/// `allOf` parts (a `$ref` target's type read where it is) with no JSON type in common: no
/// value, found before any part is copied; types that meet (`number` and `integer`) merge.
#[test]
fn all_of_parts_without_a_common_type_are_no_value() {
    let defs = json!({"s": {"type": "string", "minLength": 2}, "n": {"type": "number", "maximum": 5}});
    let disjoint = json!({"$defs": defs, "type": "object", "properties": {
        "a": {"allOf": [{"$ref": "#/$defs/s"}, {"type": "integer"}]},
        "b": {"type": ["string", "null"], "allOf": [{"$ref": "#/$defs/n"}]},
        "c": {"allOf": [{"$ref": "#/$defs/n"}, {"type": "integer"}]},
        "d": {"allOf": [{"$ref": "#/$defs/s"}, {"maxLength": 3}]}
    }});
    let instances = [
        "{}",
        r#"{"a":1}"#,
        r#"{"a":"xx"}"#,
        r#"{"b":null}"#,
        r#"{"b":3}"#,
        r#"{"c":3}"#,
        r#"{"c":3.5}"#,
        r#"{"c":7}"#,
        r#"{"d":"xyz"}"#,
        r#"{"d":"x"}"#,
        r#"{"d":"wxyz"}"#,
    ];
    agrees_with_validator(std::slice::from_ref(&disjoint), &instances);
}
