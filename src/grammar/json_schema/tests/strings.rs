//! Strings: lengths, `pattern` (anchors, alternations, against the `regex` crate), `format`, intersected string keywords.

use super::*;

#[test]
fn strings_patterns_formats() {
    let s = json!({"type": "string", "minLength": 2, "maxLength": 3});
    assert!(accepts(&s, r#""ab""#) && accepts(&s, r#""a\nb""#) && accepts(&s, r#""éé""#));
    assert!(!accepts(&s, r#""a""#) && !accepts(&s, r#""abcd""#));
    let s = json!({"type": "string", "pattern": "^[A-Z]{2}\\d$"});
    assert!(accepts(&s, r#""AB1""#) && !accepts(&s, r#""AB12""#) && !accepts(&s, r#""ab1""#));
    let s = json!({"type": "string", "pattern": "a\"b"});
    assert!(accepts(&s, r#""xxa\"bxx""#), "contains, with the quote escaped");
    let s = json!({"type": "string", "format": "date"});
    assert!(accepts(&s, r#""2024-02-29""#) && !accepts(&s, r#""2023-02-29""#) && !accepts(&s, r#""2024-13-01""#));
    let s = json!({"type": "string", "format": "ipv4"});
    assert!(accepts(&s, r#""192.168.0.1""#) && !accepts(&s, r#""256.1.1.1""#));
}

#[test]
fn any_of_patterns_is_their_alternation() {
    // One lexeme for the alternation: the same language as the branches side by side.
    let branches =
        json!([{"pattern": "^a"}, {"pattern": "b$", "description": "ends in b"}, {"pattern": "^x.*\\.can$"}]);
    let merged = json!({"anyOf": branches.clone()});
    let typed = json!({"type": "string", "anyOf": branches});
    let cases = [
        (r#""ax""#, true),
        (r#""xb""#, true),
        (r#""x1.can""#, true),
        (r#""ba""#, false),
        (r#""x.canb""#, true),
        (r#""x.cane""#, false),
        (r#""""#, false),
    ];
    for (text, want) in cases {
        assert_eq!(accepts(&merged, text), want, "{text}");
        assert_eq!(accepts(&typed, text), want, "{text}");
    }
    // Patterns accept every non-string; `type` still restricts.
    assert!(accepts(&merged, "12") && accepts(&merged, "null") && !accepts(&typed, "12"));
    // A branch with another keyword is not merged (and still works).
    let mixed = json!({"anyOf": [{"pattern": "^a"}, {"type": "integer"}]});
    assert!(accepts(&mixed, r#""ab""#) && accepts(&mixed, "3") && !accepts(&mixed, r#""ba""#));
}

#[test]
fn intersected_string_keywords() {
    // pattern + length: both hold.
    let s = json!({"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 4});
    for (t, ok) in
        [(r#""ab""#, true), (r#""abcd""#, true), (r#""a""#, false), (r#""abcde""#, false), (r#""aB""#, false)]
    {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    // An unanchored pattern means "contains", and length counts code points.
    let s = json!({"type": "string", "pattern": "x", "maxLength": 3});
    for (t, ok) in
        [(r#""x""#, true), (r#""éxé""#, true), (r#""\nx\t""#, true), (r#""abcx""#, false), (r#""ab""#, false)]
    {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    // A pattern that matches the empty string, anchored at one end at most, holds for every
    // string; anchored at both ends it does not.
    for p in ["([A-Z]+)?", "^a*", "(b|c)?$", "x?y*"] {
        let s = json!({"type": "string", "pattern": p, "maxLength": 3});
        // Only the length bound is left: no intersection to build.
        let g = compile(&s, &JsonSchemaOptions::default()).unwrap();
        assert!(!format!("{:?}", g.grammar).contains("And("), "{p}: the pattern was kept");
        for (t, ok) in [("\"\"", true), ("\"zé!\"", true), ("\"zzzz\"", false)] {
            assert_eq!(accepts(&s, t), ok, "{p} {t}");
        }
    }
    let s = json!({"type": "string", "pattern": "^a*$", "maxLength": 3});
    for (t, ok) in [("\"\"", true), ("\"aa\"", true), ("\"ab\"", false), ("\"aaaa\"", false)] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
    // format + pattern.
    let s = json!({"type": "string", "format": "date", "pattern": "^2024-"});
    assert!(accepts(&s, r#""2024-02-29""#));
    assert!(!accepts(&s, r#""2023-02-28""#) && !accepts(&s, r#""2024-02-30""#));
    // An empty intersection: nothing validates.
    let s = json!({"type": ["string", "null"], "pattern": "^a+$", "maxLength": 0});
    assert!(accepts(&s, "null") && !accepts(&s, r#""""#) && !accepts(&s, r#""a""#));
    // Excluded values together with a length bound (from `not: {enum}`).
    let s = json!({"type": "string", "maxLength": 3, "not": {"enum": ["abc", "x"]}});
    for (t, ok) in [(r#""ab""#, true), (r#""abc""#, false), (r#""x""#, false), (r#""xy""#, true), (r#""abcd""#, false)]
    {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
}

/// `minLength: 1` beside a pattern without the empty string adds no intersection; beside one
/// with it, or with a maximum, it still holds. "At most N words" patterns (counted through a
/// marker) keep their count and their words.
#[test]
fn min_length_one_and_word_counts() {
    // `oneOf` of an empty string and a non-empty one: every JSON string, and nothing else.
    let s = json!({"type": "string", "oneOf": [{"maxLength": 0}, {"minLength": 1}]});
    assert!(accepts(&s, r#""""#) && accepts(&s, r#""a b""#) && !accepts(&s, "\"a\"b\"") && !accepts(&s, "\"\u{1}\""));
    let words = "^(?:\\S+\\s+){0,2}\\S+$";
    for (schema, intersected) in [
        (json!({"type": "string", "pattern": "^[a-z]+$", "minLength": 1}), false),
        (json!({"type": "string", "pattern": words, "minLength": 1}), false),
        (json!({"type": "string", "pattern": "^[a-z]*$", "minLength": 1}), true),
        (json!({"type": "string", "pattern": "^[a-z]+$", "minLength": 1, "maxLength": 9}), true),
    ] {
        let g = compile(&schema, &JsonSchemaOptions::default()).unwrap();
        assert_eq!(format!("{:?}", g.grammar).contains("And("), intersected, "{schema}");
        assert!(!accepts(&schema, "\"\"") && !accepts(&schema, "\"\"\""), "{schema}");
    }
    let s = json!({"type": "string", "pattern": words, "minLength": 1});
    for (t, ok) in [
        (r#""a""#, true),
        (r#""one two\tthree""#, true),
        (r#""one  two\n three""#, true),
        (r#""é ü""#, true),
        (r#""one two three four""#, false),
        (r#"" one""#, false),
        (r#""one ""#, false),
        (r#""""#, false),
    ] {
        assert_eq!(accepts(&s, t), ok, "{t}");
    }
}

#[test]
fn anchors_inside_pattern_groups() {
    let s = json!({"type": "string", "pattern": "^([0-9]{3})$|^(default)$"});
    for ok in [r#""200""#, r#""default""#] {
        assert!(accepts(&s, ok), "{ok}");
    }
    for bad in [r#""2000""#, r#""xdefault""#, r#""defaults""#, r#""""#] {
        assert!(!accepts(&s, bad), "{bad}");
    }
    // Anchors inside a group in the middle, and alternatives with and without them.
    let s = json!({"type": "string", "pattern": "(^a|b)c($|d)"});
    for ok in [r#""ac""#, r#""acd""#, r#""xbcdx""#, r#""xbc""#, r#""acdd""#] {
        assert!(accepts(&s, ok), "{ok}");
    }
    for bad in [r#""xac""#, r#""bx""#, r#""cd""#] {
        assert!(!accepts(&s, bad), "{bad}");
    }
    // `$` followed by more text matches only where that text can be empty.
    let s = json!({"type": "string", "pattern": "^$[a-z]*$"});
    assert!(accepts(&s, r#""""#) && !accepts(&s, r#""a""#));
    // A URI pattern whose parts after the scheme's colon may all be empty, unanchored: "a scheme
    // and a colon somewhere" (the full pattern determinized for 0.3 s into thousands of states).
    let uri = r"([A-Za-z][A-Za-z0-9+\-.]*):(?:(//)(?:((?:[A-Za-z0-9\-._~!$&'()*+,;=:]|%[0-9A-Fa-f]{2})*)@)?((?:\[(?:(?:(?:(?:[0-9A-Fa-f]{1,4}:){6}|::(?:[0-9A-Fa-f]{1,4}:){5})(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}))|[Vv][0-9A-Fa-f]+\.[A-Za-z0-9\-._~!$&'()*+,;=:]+)\]|(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})*))(?::([0-9]*))?((?:/(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})*)*)|)(?:\?((?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*))?(?:\#((?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*))?";
    let s = json!({"type": "string", "pattern": uri});
    let c = compiled(&s, &JsonSchemaOptions::default()).unwrap();
    let states = c
        .stats()
        .as_object()
        .and_then(|o| o.get("dfa_states").or(o.get("lexer_states")))
        .and_then(|n| n.as_u64())
        .unwrap();
    assert!(states < 50, "{states} states");
    for ok in [r#""http://x""#, r#""see urn:isbn""#, r#""a:""#, r#""x 1a+b:[""#] {
        assert!(accepts(&s, ok), "{ok}");
    }
    for bad in [r#""http""#, r#""1:""#, r#""::""#, r#""""#] {
        assert!(!accepts(&s, bad), "{bad}");
    }
    // Many unanchored alternatives stay one search, not a union that remembers which of them
    // matched (2^10 times the states; this one took most of a second to compile).
    let s = json!({"type": "string", "pattern": "^list|date|time|string|enum|int|double|long|boolean|number$"});
    let c = compiled(&s, &JsonSchemaOptions::default()).unwrap();
    let states = c
        .stats()
        .as_object()
        .and_then(|o| o.get("dfa_states").or(o.get("lexer_states")))
        .and_then(|n| n.as_u64())
        .unwrap();
    assert!(states < 1000, "{states} states");
    for ok in [r#""listx""#, r#""a date""#, r#""a number""#, r#""xintx""#] {
        assert!(accepts(&s, ok), "{ok}");
    }
    for bad in [r#""xlist""#, r#""numbers""#, r#""dat""#] {
        assert!(!accepts(&s, bad), "{bad}");
    }
    // Differential: random strings against the `regex` crate's own search semantics.
    // The second row: unanchored ends trimmed of what "contains" makes redundant (optional
    // parts, extra repetitions, alternatives each), at one end or both.
    let patterns = [
        "^(ab|c)$|x",
        "(^|-)[0-9]+($|-)",
        "a(^b|c)",
        "(a$|b)c?",
        "^(?:foo|bar)(?:$|/)",
        "^ab|c1|fo|x-|r/|ox|bf|oc$|^o$",
        "a(b|)c?",
        "(x+|o{2,4})f*",
        "(ab)?c(a|b)*",
        "a{2,3}",
        "(?:f(o|x)?)+r?",
        "1(a|b?)",
        "^(ab)?c(a|b)*",
        "(o{2,3}x|r)b?$",
        "(?:(a|1)c+){2,}-?",
        "((fo)?r)+(/|-)?x",
    ];
    let mut rng = 7u64;
    for p in patterns {
        let s = json!({"type": "string", "pattern": p});
        let c = compiled(&s, &JsonSchemaOptions::default()).unwrap();
        let re = regex_automata::meta::Regex::new(p).unwrap();
        for _ in 0..400 {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let len = (rng >> 60) as usize % 6;
            let text: String = (0..len).map(|i| b"abcfox-/1r"[((rng >> (i * 5 + 3)) % 10) as usize] as char).collect();
            let mut m = c.matcher();
            let ours = m.commit_bytes(format!("\"{text}\"").as_bytes()).is_ok() && m.is_accepting();
            assert_eq!(ours, re.is_match(&text), "pattern {p:?} on {text:?}");
        }
    }
}

#[test]
fn uri_formats_take_ports_user_info_fragments_and_paths_without_authority() {
    let schemas = [json!({"type": "string", "format": "uri"}), json!({"type": "string", "format": "uri-reference"})];
    let instances = [
        r#""http://localhost:8086""#,
        r##""https://json-schema.org/draft-07/schema#""##,
        r#""file:///C:/Users/x/doc.txt""#,
        r#""urn:isbn:0451450523""#,
        r#""mailto:ada@example.com""#,
        r##""https://u:p@example.com:443/a%20b/c?q=1&r=%2F#frag""##,
        r#""ftp://ftp.example.org/""#,
        r#""/relative/path?x=1""#,
        r#""../up/one""#,
        r##""#only-fragment""##,
        r#""//host.example/x""#,
        r#""http://[::1]/""#,
        r#""a b""#,
        r#""http://exa mple.com""#,
        r#""%zz""#,
        r#""""#,
        // RFC 3986 bounds neither a scheme's length nor user information's.
        r#""web+a-very-long.scheme-name-2:x""#,
        r#""ssh://a-very-long-user-name-with-many-characters-in-it:pw@h/""#,
    ];
    for s in &schemas {
        let judge = jsonschema::options().should_validate_formats(true).build(s).unwrap();
        for text in instances {
            let v: Value = serde_json::from_str(text).unwrap();
            // A subset of the format: nothing accepted that the validator rejects.
            if accepts(s, text) {
                assert!(judge.is_valid(&v), "{s} accepted {text}");
            }
        }
    }
    let uri = &schemas[0];
    for ok in [
        r#""http://localhost:8086""#,
        r##""https://json-schema.org/draft-07/schema#""##,
        r#""file:///C:/Users/x/doc.txt""#,
        r#""urn:isbn:0451450523""#,
        r##""https://u:p@example.com:443/a%20b/c?q=1&r=%2F#frag""##,
        r#""web+a-very-long.scheme-name-2:x""#,
        r#""ssh://a-very-long-user-name-with-many-characters-in-it:pw@h/""#,
    ] {
        assert!(accepts(uri, ok), "{ok}");
    }
    for ok in [r#""/relative/path?x=1""#, r#""../up/one""#, r##""#only-fragment""##, r#""//host.example/x""#, r#""""#] {
        assert!(accepts(&schemas[1], ok), "{ok}");
    }
}

/// `pattern` is ECMA-262 (with the `u` flag): escapes and classes mean what ECMA-262 says,
/// also where the `regex` crate's syntax would refuse the text or read it otherwise.
#[test]
fn patterns_read_ecma_escapes_as_ecma_262() {
    let yes_no = |pattern: &str, yes: &[&str], no: &[&str]| {
        let s = json!({"type": "string", "pattern": pattern});
        for t in yes {
            assert!(accepts(&s, t), "{pattern:?} should accept {t}");
        }
        for t in no {
            assert!(!accepts(&s, t), "{pattern:?} should reject {t}");
        }
    };
    // Control escapes, NUL, hex and UTF-16 escapes (the `regex` crate refuses `\cJ`, `\0`).
    yes_no(r"^a\cJb\cib$", &[r#""a\nb\tb""#], &[r#""aJbib""#, r#""acJb""#]);
    yes_no(r"^[\cA-\cZ]$", &[r#""\u0001""#, r#""\n""#], &[r#""A""#]);
    yes_no(r"^a\0b$", &[r#""a\u0000b""#], &[r#""a0b""#, r#""ab""#]);
    yes_no(r"^\x41\u00e9\uD83D\uDE00\u{1F600}$", &["\"Aé😀😀\""], &["\"Aé\""]);
    yes_no(r"^[\b]$", &[r#""\b""#], &[r#""b""#]);
    // `[` inside a class is a plain character (the `regex` crate reads `[[]` as unclosed).
    yes_no(r"^[[]+$", &[r#""[[""#], &[r#""]""#, r#""a""#]);
    yes_no(r"^[a[]+$", &[r#""a[a""#], &[r#""]""#]);
    yes_no(r"^[^]$", &[r#""\n""#, r#""x""#], &[r#""""#]);
    // ASCII `\d` and `\w`, ECMA's `\s` (U+FEFF is white space there, not for the `regex` crate).
    yes_no(r"^\d+$", &[r#""042""#], &["\"٣\"", "\"１\""]);
    yes_no(r"^\w+$", &[r#""a_Z9""#], &["\"é\"", "\"ab-\""]);
    yes_no(r"^\s$", &["\"\u{feff}\"", "\"\u{a0}\"", r#""\n""#], &["\"\u{85}\"", r#""x""#]);
    yes_no(r"^[\d\s-]+$", &[r#""1 -2""#], &[r#""1a""#]);
    // Unicode properties keep their braces (no quantifier there).
    yes_no(r"^\p{Letter}{2}\P{L}$", &["\"éa1\""], &["\"é1\"", "\"éab\""]);
    // Escaped punctuation is the character itself.
    yes_no(r"^a\/b\-c$", &[r#""a/b-c""#], &[r#""a\\/b-c""#]);
    yes_no(r"^[a\-z]$", &[r#""-""#, r#""z""#], &[r#""b""#]);
    yes_no(r"^\.\*\{$", &[r#"".*{""#], &[r#""a*{""#]);
    // `{` and `}` that make no quantifier are plain (the `regex` crate refuses `a{`, `{,2}`).
    yes_no(r"^a{$", &[r#""a{""#], &[r#""a""#]);
    yes_no(r"^x{,2}$", &[r#""x{,2}""#], &[r#""xx""#]);
    yes_no(r"^{}x{2}$", &[r#""{}xx""#], &[r#""{}x""#]);
    // What has no regular meaning, or is a syntax error under `u`, is refused with a reason.
    for (pattern, why) in [
        (r"(a)\1", "backreferences"),
        (r"(?<n>a)\k<n>", "named backreferences"),
        (r"a(?=b)", "lookahead"),
        (r"\q", "unknown escape"),
        (r"\c1", "control escape"),
        (r"\01", "octal"),
        (r"\uD800", "lone surrogate"),
        (r"[]", "empty class"),
    ] {
        let e = compiled(&json!({"type": "string", "pattern": pattern}), &JsonSchemaOptions::exact());
        let e = e.err().unwrap_or_else(|| panic!("{pattern:?} compiled")).to_string();
        assert!(e.contains(why) && e.contains("/pattern"), "{pattern:?}: {e}");
    }
}

/// Lookaheads right after a leading `^` (how real schemas exclude names) and tempered tokens
/// (`^((?!X).)*$`) mean what ECMA-262 says: the `jsonschema` crate (whose regexes run lookarounds) agrees on every instance, as a
/// `pattern`, as a `patternProperties` key and through `enum` values checked against the pattern.
#[test]
fn leading_lookaheads_agree_with_the_validator() {
    let patterns = [
        r"^(?!@@)[\w@]+$",
        r"^(?!(False|None|True|and|as)$)[a-zA-Z_][\w]*$",
        r"^(?!^lucene\.|builtin\.|mongodb\.).*",
        r"^(?=[^=]+$)(?!\s+$)(.|\n)+$",
        r"^(?!.*\/)^(.*[^.]+.*)$",
        r"^(?=.{2,4}$)(?!ab)[a-z]+",
        r"^(?!tag|category)$",
        r"^(?![i|I][o|O])",
        r#"^(?!a")"#,
        r"^((?!(c|C)(l|L)(y|Y)(d|D)(e|E)).)*$",
        r"^(?:(?!ab)[a-z ])+$",
        r#"^((?!")\w)*$"#,
    ];
    // ASCII only: ECMA's `\w` is ASCII, the validator's Unicode (a difference of `\w`, not of
    // lookaheads; `patterns_read_ecma_escapes_as_ecma_262` checks it).
    let words = [
        "",
        "a",
        "ab",
        "abc",
        "abcd",
        "abcde",
        "@@x",
        "@x@",
        "x@@",
        "None",
        "Nonesuch",
        "and",
        "an",
        "_x1",
        "1x",
        "lucene.x",
        "builtin.y",
        "mongodb.",
        "mongo",
        "a=b",
        "   ",
        " a ",
        "a\nb",
        "a/b",
        "ab.",
        ".",
        "..a",
        "tag",
        "category",
        "io",
        "IOx",
        "iO",
        "a\"",
        "b\"",
        "ba",
        "Clyde",
        "my clYde x",
        "cly de",
        "a b",
        "x ab",
    ];
    let instances: Vec<String> = words.iter().map(|w| serde_json::to_string(w).unwrap()).collect();
    let instances: Vec<&str> = instances.iter().map(String::as_str).collect();
    let as_pattern: Vec<Value> = patterns.iter().map(|p| json!({"type": "string", "pattern": p})).collect();
    agrees_with_validator(&as_pattern, &instances);
    // As a key pattern: objects with one key each.
    let as_keys: Vec<Value> = patterns
        .iter()
        .map(|p| json!({"type": "object", "patternProperties": {*p: {"type": "integer"}}, "additionalProperties": false}))
        .collect();
    let objects: Vec<String> = instances.iter().map(|k| format!("{{{k}: 1}}")).collect();
    agrees_with_validator(&as_keys, &objects.iter().map(String::as_str).collect::<Vec<_>>());
    // `enum` values are checked against the pattern when compiling (`validate`): the values
    // left are exactly those the validator accepts.
    for p in patterns {
        let schema = json!({"type": "string", "pattern": p, "enum": words.to_vec()});
        let judge = jsonschema::validator_for(&schema).unwrap();
        for w in words {
            let text = serde_json::to_string(w).unwrap();
            assert_eq!(accepts(&schema, &text), judge.is_valid(&json!(w)), "{p} {text}");
        }
    }
    // Lookarounds elsewhere, or lookaheads that would bind to one branch only, stay refused.
    for pattern in [r"a(?=b)", r"^a(?!b)", r"^(?!a)b|c", r"(?<!a)b$", r"^(?!a", r"^((?!a?).)*$", r"^((?!a)bc)*$"] {
        let e = compiled(&json!({"type": "string", "pattern": pattern}), &JsonSchemaOptions::exact());
        let e = e.err().unwrap_or_else(|| panic!("{pattern:?} compiled")).to_string();
        let why = if pattern.contains("(?<") { "lookbehind is not supported" } else { "lookahead is supported only" };
        assert!(e.contains("/pattern") && (e.contains(why) || pattern == r"^(?!a"), "{pattern:?}: {e}");
    }
}

/// Two patterns in an `allOf` (or a `$ref` and a pattern beside it) merge into one pattern
/// with a lookahead, compiled as their intersection: the validator's language, anchored or not,
/// three at once, and beside a pattern that has lookaheads of its own.
#[test]
fn patterns_of_an_all_of_intersect() {
    let schemas = [
        json!({"allOf": [{"pattern": "^[a-z]+$"}, {"pattern": "x"}]}),
        json!({"allOf": [{"pattern": "ab"}, {"pattern": "cd"}, {"pattern": "^[a-d]{4,6}$"}], "type": "string"}),
        json!({"allOf": [{"pattern": "^(?!ab)[a-z]+$"}, {"pattern": "c$"}]}),
        json!({"allOf": [{"pattern": "b$"}, {"pattern": "^(?!ab)[a-z]+$"}]}),
        json!({"$defs": {"d": {"pattern": "^[0-9]"}}, "$ref": "#/$defs/d", "pattern": "9$", "type": "string"}),
    ];
    let words = [
        "", "x", "ax", "Ax", "abcd", "cdab", "abdc", "dcab", "aabbccdd", "abc", "bc", "cc", "ab", "b", "0", "09",
        "19a", "9",
    ];
    let instances: Vec<String> = words.iter().map(|w| serde_json::to_string(w).unwrap()).collect();
    agrees_with_validator(&schemas, &instances.iter().map(String::as_str).collect::<Vec<_>>());
}

#[test]
fn pattern_classes_take_exactly_the_canonical_encodings() {
    // `.` (every character but a line terminator, as in ECMA-262) and a class of escaped
    // characters only: each member in its canonical encoding is accepted, and nothing else
    // (the escapes share their `\`).
    let dot = json!({"type": "string", "pattern": "^.$"});
    let specials = json!({"type": "string", "pattern": "^[\\x00-\\x1f\"\\\\]$"});
    for c in ('\0'..='\x7f').chain(['é', '€', '😀', '\u{2028}']) {
        let text = serde_json::to_string(&c.to_string()).unwrap();
        assert_eq!(accepts(&dot, &text), !matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}'), "{text}");
        assert_eq!(accepts(&specials, &text), c < ' ' || c == '"' || c == '\\', "{text}");
    }
    for other in [r#""\u0041""#, r#""\/""#, r#""\u001F""#, r#""\u000a""#, r#""\u00""#, r#""\""#, r#""ab""#] {
        assert!(!accepts(&dot, other), "{other}");
        assert!(!accepts(&specials, other), "{other}");
    }
}

#[test]
fn ascii_trie_is_the_alternation_of_its_strings() {
    let strings: Vec<Vec<u8>> =
        ["", "a", "ab", "abc", "abd", "b", "ba", "c"].iter().map(|s| s.as_bytes().to_vec()).collect();
    let re = regex_automata::meta::Regex::builder()
        .build_from_hir(&regex_syntax::hir::Hir::concat(vec![
            regex_syntax::hir::Hir::look(regex_syntax::hir::Look::Start),
            crate::grammar::json_schema::string::ascii_trie(&strings),
            regex_syntax::hir::Hir::look(regex_syntax::hir::Look::End),
        ]))
        .unwrap();
    for len in 0..=4 {
        for n in 0..4usize.pow(len) {
            let text: String = (0..len).map(|i| b"abcd"[n / 4usize.pow(i) % 4] as char).collect();
            assert_eq!(re.is_match(&text), strings.contains(&text.clone().into_bytes()), "{text:?}");
        }
    }
}
