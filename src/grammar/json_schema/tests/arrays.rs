//! Arrays: items, `contains` with counts, `uniqueItems` (finite item sets in the grammar, others
//! marked for the matcher).

use super::*;

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
fn contains_with_counts() {
    let s = json!({"contains": {"const": 1}, "minContains": 2});
    for (t, ok) in [("[1,1]", true), ("[1,2,1]", true), ("[1,2]", false), ("[]", false), ("[2,1,3,1,1]", true)] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    let s = json!({"type": "array", "items": {"type": "integer"}, "contains": {"const": 1}, "maxContains": 2});
    for (t, ok) in [("[1]", true), ("[1,2,1]", true), ("[1,1,1]", false), ("[2]", false), ("[1,\"a\"]", false)] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    let s = json!({"type": "array", "contains": {"const": 1}, "minContains": 0, "maxContains": 0});
    assert!(accepts(&s, "[]") && accepts(&s, "[2]") && !accepts(&s, "[1]") && !accepts(&s, "[2,1]"));
    let s = json!({"type": "array", "contains": {"const": 1}, "minContains": 0, "maxContains": 1});
    for (t, ok) in [("[]", true), ("[2,3]", true), ("[1,2]", true), ("[1,1]", false)] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
}

#[test]
fn unique_items_over_finite_sets() {
    let s = json!({"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": true, "minItems": 1});
    for (t, ok) in [
        (r#"["a"]"#, true),
        (r#"["c","a","b"]"#, true),
        (r#"["a","a"]"#, false),
        ("[]", false),
        (r#"["a","b","a"]"#, false),
    ] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    let s = json!({"prefixItems": [{"type": "boolean"}, {"type": "boolean"}], "items": false, "uniqueItems": true});
    for (t, ok) in [("[true,false]", true), ("[false]", true), ("[true,true]", false), ("[]", true), ("[1]", false)] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    // With `contains`: the sets it may close at hold enough (and not too many) values that
    // satisfy it (it was dropped here: `[1]` was accepted under `contains: {const: 5}`).
    let none = json!({"allOf": [{"type": "array", "contains": {"const": 5}},
                                {"type": "array", "items": {"enum": [1, 2]}, "maxItems": 2, "uniqueItems": true}]});
    let e = compiled(&none, &JsonSchemaOptions::exact()).err().expect("no array of 1 and 2 contains 5");
    assert!(e.to_string().contains("no JSON value validates"), "{e}");
    agrees_with_validator(
        &[
            json!({"type": "array", "contains": {"const": 2}, "items": {"enum": [1, 2, 3]}, "uniqueItems": true}),
            json!({"type": "array", "contains": {"enum": [2, 3]}, "minContains": 2, "maxContains": 2,
                   "items": {"enum": [1, 2, 3]}, "uniqueItems": true}),
            json!({"type": "array", "contains": {"enum": [2, 3]}, "maxContains": 1, "minContains": 0,
                   "items": {"enum": [1, 2, 3]}, "uniqueItems": true}),
        ],
        &["[]", "[1]", "[2]", "[1,2]", "[2,3]", "[1,2,3]", "[3,1]", "[5]"],
    );
    // An infinite item space compiles with the array's `[` marked: the matcher keeps its items
    // distinct (see `automaton::distinct` and tests/core/distinct.rs).
    let g = compile(&json!({"items": {"type": "string"}, "uniqueItems": true}), &JsonSchemaOptions::default()).unwrap();
    let marked =
        |e: &crate::grammar::Expr| matches!(e, crate::grammar::Expr::Mark(crate::grammar::Mark::DistinctArray));
    fn any(e: &crate::grammar::Expr, f: &dyn Fn(&crate::grammar::Expr) -> bool) -> bool {
        use crate::grammar::Expr;
        f(e) || match e {
            Expr::Seq(xs) | Expr::Alt(xs) => xs.iter().any(|x| any(x, f)),
            Expr::Repeat { body, .. } => any(body, f),
            _ => false,
        }
    }
    assert!(g.grammar.rules.iter().any(|r| any(&r.body, &marked)));
}
