//! No false accepts where a rewrite meets other spellings of a value: `not`, `if` without
//! `else` and `oneOf` (each written with complements) against escapes, number spellings,
//! numerically equal items and keys, and the formats strictly writes as subsets, in the exact
//! and the default mode. Rejecting a valid spelling is allowed (strictly writes one spelling);
//! accepting an invalid one never is. Schemas strictly refuses are skipped.

use super::*;

#[test]
fn complements_meet_every_spelling() {
    let schemas = [
        json!({"type":"string","not":{"pattern":"^a$"}}),
        json!({"not":{"const":"a"}}),
        json!({"not":{"enum":[1]}}),
        json!({"not":{"type":"integer"}}),
        json!({"type":"string","not":{"maxLength":1}}),
        json!({"type":"string","not":{"minLength":2}}),
        json!({"type":"number","not":{"multipleOf":2}}),
        json!({"type":"number","not":{"minimum":5}}),
        json!({"type":"number","not":{"maximum":5}}),
        json!({"type":"number","not":{"exclusiveMaximum":5}}),
        json!({"type":"array","uniqueItems":true}),
        json!({"type":"array","not":{"uniqueItems":true}}),
        json!({"type":"object","propertyNames":{"not":{"pattern":"^a$"}}}),
        json!({"type":"object","propertyNames":{"not":{"const":"a"}}}),
        json!({"type":"object","propertyNames":{"maxLength":1}}),
        json!({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":false}),
        json!({"type":"object","not":{"properties":{"a":{"type":"integer"}}}}),
        json!({"if":{"type":"string","pattern":"^a"},"then":{"maxLength":2}}),
        json!({"if":{"type":"string","format":"email"},"then":{"maxLength":2}}),
        json!({"if":{"type":"string","format":"hostname"},"then":{"maxLength":2}}),
        json!({"if":{"type":"string","format":"date"},"then":{"maxLength":2}}),
        json!({"if":{"type":"integer"},"then":{"maximum":2}}),
        json!({"if":{"minimum":3},"then":{"multipleOf":2}}),
        json!({"type":"string","not":{"format":"date"}}),
        json!({"type":"string","not":{"format":"ipv4"}}),
        json!({"type":"string","not":{"format":"uuid"}}),
        json!({"oneOf":[{"type":"string","format":"hostname"},{"type":"string","maxLength":3}]}),
        json!({"oneOf":[{"type":"string","pattern":"^a"},{"type":"string","maxLength":3}]}),
        json!({"oneOf":[{"type":"integer"},{"type":"number","maximum":3}]}),
        json!({"oneOf":[{"type":"string","format":"date"},{"type":"string","maxLength":10}]}),
        json!({"type":"object","dependentSchemas":{"a":{"not":{"required":["b"]}}}}),
        json!({"type":"array","contains":{"const":1},"maxContains":1}),
        json!({"type":"array","not":{"contains":{"const":1}}}),
        json!({"type":"string","pattern":"^(?!ab)..$"}),
        json!({"not":{"type":"integer","maximum":2}}),
        json!({"not":{"format":"int32"}}),
        json!({"type":"integer","not":{"format":"int32"}}),
        json!({"not":{"format":"date-time"}}),
        json!({"not":{"format":"time"}}),
        json!({"type":"integer","not":{"maximum":100}}),
        json!({"type":"string","const":"é"}),
        json!({"type":"string","not":{"pattern":"^.$"}}),
    ];
    let inst = [
        r#""a""#,
        r#""\u0061""#,
        r#""b""#,
        r#""ab""#,
        r#""\u0061b""#,
        r#""é""#,
        r#""\u00e9""#,
        r#""\ud83d\ude00""#,
        r#""😀""#,
        "1",
        "1.0",
        "1e0",
        "10e-1",
        "0.1e1",
        "2",
        "2.0",
        "4",
        "4.0",
        "4e0",
        "5",
        "5.0",
        "50e-1",
        "5.5",
        "3",
        "3.0",
        "-0",
        "-0.0",
        "1E0",
        "2E0",
        "[1,1.0]",
        r#"["a","\u0061"]"#,
        "[1,1]",
        "[1,2]",
        "[[1],[1.0]]",
        r#"[{"a":1},{"a":1.0}]"#,
        "[0,-0]",
        "[1]",
        "[2]",
        r#"{"a":1}"#,
        r#"{"\u0061":1}"#,
        r#"{"a":1.0}"#,
        r#"{"a":1.5}"#,
        r#"{"b":1}"#,
        r#"{"ab":1}"#,
        r#"{"a":1,"b":2}"#,
        r#"{"a":1,"a":2}"#,
        r#"{"a":1.5,"a":1}"#,
        r#""2020-01-01""#,
        r#""2020-02-30""#,
        r#""1.2.3.4""#,
        r#""01.2.3.4""#,
        r#""a@b.c""#,
        r#""a.b""#,
        r#""123e4567-e89b-12d3-a456-426614174000""#,
        r#""123E4567-E89B-12D3-A456-426614174000""#,
        r#""a-""#,
        r#""aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa""#,
        r#""a+b@c.d""#,
        r#""\"a b\"@c.d""#,
        r#""12:00:00Z""#,
        r#""12:00:00.123456789+01:00""#,
        "1e30",
        "1.5e1",
        "1.25e1",
        "100e-2",
        "15e-1",
        "123456789012345678901234567890",
        "9223372036854775808",
        "-9223372036854775809",
        "1e2",
        r#""0000-01-01""#,
        r#""9999-12-31""#,
        r#""2020-01-01T00:00:00Z""#,
        r#""10000-01-01""#,
        r#""xn--a""#,
        r#""aa""#,
        r#""\n""#,
        r#""\/""#,
        r#""\u0000""#,
    ];
    let mut bad = vec![];
    for opts in [JsonSchemaOptions::exact(), JsonSchemaOptions::default()] {
        for s in &schemas {
            let judge = jsonschema::options().should_validate_formats(true).build(s).unwrap();
            let Ok(c) = compiled(s, &opts) else { continue };
            for t in inst {
                let v: Value = serde_json::from_str(t).unwrap();
                let mut m = c.matcher();
                let g = m.commit_bytes(t.as_bytes()).is_ok() && m.is_accepting();
                let j = judge.is_valid(&v);
                if g && !j {
                    bad.push(format!("FALSE ACCEPT {s} {t}"));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
