//! Why a schema accepts nothing: the subschemas that make its language empty, by pointer and
//! reason, and only those whose emptiness reaches the root.

use super::*;

/// The message a schema with an empty language gets: the compile error (context-free) or the
/// compiled constraint's `why_empty` (regular): the same text either way.
fn why(s: &Value, opts: &JsonSchemaOptions) -> String {
    match compiled(s, opts) {
        Err(e) => e.to_string(),
        Ok(c) => c.why_empty().unwrap_or_else(|| panic!("{s}: not empty")).to_string(),
    }
}

#[test]
fn an_empty_language_names_the_subschemas_that_make_it_so() {
    let table = [
        (
            json!({"type": "integer", "minimum": 5, "maximum": 3}),
            "schema at the schema root: no integer is at least 5 and at most 3",
        ),
        (
            json!({"type": "number", "exclusiveMinimum": 3, "maximum": 3}),
            "the schema root: no number is above 3 and at most 3",
        ),
        (
            json!({"type": "integer", "multipleOf": 7, "minimum": 1, "maximum": 6}),
            "no multiple of 7 is at least 1 and at most 6",
        ),
        (json!({"type": "integer", "format": "int8", "minimum": 200}), "fits the range of `format: int8`"),
        (
            json!({"type": "string", "minLength": 5, "maxLength": 2}),
            "no string is at least 5 and at most 2 characters long",
        ),
        (
            json!({"type": "string", "format": "date", "maxLength": 3}),
            "no string satisfies `format` and `maxLength` together",
        ),
        (json!({"allOf": [{"type": "string"}, {"type": "integer"}]}), "at /type: no JSON type is allowed"),
        (json!({"not": {}}), "at /not: `not` of a schema that every value validates against"),
        (json!({"enum": [1, 2], "minimum": 3}), "at /enum: no `enum` value validates against the keywords beside it"),
        (json!({"type": "array", "minItems": 3, "maxItems": 2}), "`minItems` 3 is above `maxItems` 2"),
        (
            json!({"type": "array", "items": {"enum": [1, 2]}, "uniqueItems": true, "minItems": 3}),
            "the items have only 2 distinct values",
        ),
        (
            json!({"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 69}, "uniqueItems": true, "minItems": 71}),
            "`uniqueItems` with `minItems` 71: the items have fewer distinct values",
        ),
        (
            json!({"type": "array", "contains": {}, "minContains": 3, "maxContains": 2}),
            "`minContains` 3 is above `maxContains` 2",
        ),
        (
            json!({"type": "object", "maxProperties": 1, "required": ["a", "b"]}),
            "`maxProperties` 1 is below the 2 required properties",
        ),
        (
            json!({"type": "object", "propertyNames": {"enum": ["a", "b"]}, "minProperties": 3}),
            "`minProperties` 3 is more than the 2 keys",
        ),
        (
            json!({"type": "object", "properties": {"a": {}}, "required": ["zz"], "additionalProperties": false}),
            "at /required: the required property \"zz\" is not allowed",
        ),
        // A required property's value, deep down: its pointer.
        (
            json!({"type": "object", "properties": {"x": {"type": "array", "minItems": 1, "items": {"type": "object",
                "properties": {"y": {"const": "a", "enum": ["b"]}}, "required": ["y"]}}}, "required": ["x"]}),
            "at /properties/x/items/properties/y/const: the `const` value does not validate",
        ),
        // A pattern with lengths is context-free here (an object around it): the compile error.
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^[0-9]+$", "maxLength": 0}}, "required": ["a"]}),
            "at /properties/a: no string satisfies `pattern` and `maxLength` together",
        ),
        // Every branch of an `anyOf`: each named.
        (
            json!({"anyOf": [{"type": "integer", "minimum": 3, "maximum": 1}, {"type": "string", "minLength": 1, "maxLength": 0}]}),
            "at /anyOf/0: no integer is at least 3 and at most 1 (also at /anyOf/1: no string is at least 1",
        ),
        // A `$ref` target, met a second time from a cached rule.
        (
            json!({"$defs": {"x": {"enum": [1, 2], "minimum": 3}}, "type": "object",
                "properties": {"p": {"$ref": "#/$defs/x"}, "q": {"$ref": "#/$defs/x"}}, "required": ["q"]}),
            "at /$defs/x/enum: no `enum` value validates",
        ),
        (json!(false), "the schema root: the schema is false"),
    ];
    for (s, needle) in table {
        for opts in [JsonSchemaOptions::default(), JsonSchemaOptions::exact()] {
            if needle.contains("int8") && opts.exact {
                continue; // (the exact language has every integer)
            }
            let e = why(&s, &opts);
            assert!(e.contains(needle), "{s} (exact: {}): {e}", opts.exact);
            assert!(e.contains("so no JSON value validates against the schema"), "{s}: {e}");
        }
    }
}

#[test]
fn only_emptiness_that_reaches_the_root_is_named() {
    // An optional property that accepts nothing is left out of the objects, not named.
    let s = json!({"type": "object", "properties": {"a": {"type": "integer", "minimum": 5, "maximum": 3},
        "b": {"type": "string"}}, "required": ["b"]});
    let g = compile(&s, &JsonSchemaOptions::default()).unwrap();
    assert_eq!(g.empty, vec![], "{s}");
    // Beside a required one that does, only the required one is named.
    let s = json!({"type": "object", "properties": {"a": false, "b": {"type": "integer", "minimum": 5, "maximum": 3}},
        "required": ["b"]});
    let e = why(&s, &JsonSchemaOptions::default());
    assert!(e.starts_with("schema at /properties/b: no integer is at least 5 and at most 3, so"), "{e}");
    // One branch of several that accepts nothing: not named.
    let s = json!({"anyOf": [{"type": "integer", "minimum": 3, "maximum": 1}, {"type": "string"}]});
    assert_eq!(compile(&s, &JsonSchemaOptions::exact()).unwrap().empty, vec![], "{s}");
}
