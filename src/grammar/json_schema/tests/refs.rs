//! `$ref` resolution against base URIs, `$id`s and registered documents.

use super::*;

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

/// A `$ref` with keywords beside it, inside its own target (a tree whose children are
/// `{"type": "object", "$ref": "#/$defs/node"}`), compiles: merging it again at every level
/// is a recursion, and the merged schema becomes a rule (it unfolded to the depth limit before).
/// Its language is the validator's.
#[test]
fn a_recursive_ref_with_siblings_compiles_to_a_rule() {
    let node = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 3},
            "children": {
                "type": "object",
                "additionalProperties": {"type": ["object", "boolean"], "$ref": "#/$defs/node", "description": "a child"}
            }
        },
        "required": ["name"]
    });
    let s = json!({"$defs": {"node": node}, "$ref": "#/$defs/node", "minProperties": 1});
    let instances = [
        r#"{"name":"a"}"#,
        r#"{"name":"a","children":{}}"#,
        r#"{"name":"a","children":{"x":{"name":"b"}}}"#,
        r#"{"name":"a","children":{"x":{"name":"b","children":{"y":{"name":"c","children":{"z":{"name":"d"}}}}}}}"#,
        r#"{"name":"a","children":{"x":{"name":"b","children":{"y":{"name":"long"}}}}}"#,
        r#"{"name":"a","children":{"x":{"children":{}}}}"#,
        r#"{"name":"a","children":{"x":true}}"#,
        r#"{"name":"a","children":{"x":{"name":"b","children":{"y":1}}}}"#,
        r#"{}"#,
    ];
    agrees_with_validator(&[s], &instances);
    // A recursion that every value must take without end has no finite value: refused, not
    // unfolded.
    let s = json!({
        "type": "object",
        "definitions": {
            "Foo": {
                "type": "object",
                "properties": {"child": {"allOf": [{"$ref": "#/definitions/Foo"}, {"type": "object"}]}},
                "required": ["child"]
            }
        },
        "properties": {"Foo": {"$ref": "#/definitions/Foo"}},
        "required": ["Foo"]
    });
    let e = compiled(&s, &JsonSchemaOptions::exact()).err().expect("no finite value").to_string();
    assert!(e.contains("no JSON value validates"), "{e}");
}

/// JSON pointers escape `~` and `/` in keys (RFC 6901), in that order of meaning.
#[test]
fn pointers_escape_tildes_and_slashes() {
    assert_eq!(join("", "a"), "/a");
    assert_eq!(join("/properties", "a/b~c"), "/properties/a~1b~0c");
    assert_eq!(join("/x", "~1"), "/x/~01");
    assert_eq!(join("/x", "é/"), "/x/é~1");
    assert_eq!(join("/x", ""), "/x/");
}
