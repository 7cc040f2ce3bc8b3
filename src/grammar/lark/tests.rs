//! Tests of the Lark front end: each construct means what Lark reads, errors point at the
//! problem, limits hold on hostile input.

use super::*;
use crate::error::LimitKind;
use crate::grammar::reference::Reference;

fn check(src: &str, accept: &[&str], reject: &[&str]) {
    let g = parse(src, &Default::default()).unwrap_or_else(|e| panic!("{src:?}: {e}"));
    let r = Reference::new(&g);
    for a in accept {
        assert!(r.accepts(a.as_bytes()), "{src:?} should accept {a:?}");
    }
    for x in reject {
        assert!(!r.accepts(x.as_bytes()), "{src:?} should reject {x:?}");
    }
}

/// The error's (line, col, message).
fn err(src: &str) -> (usize, usize, String) {
    match parse(src, &Default::default()) {
        Err(Error::Grammar { at: Location::LineCol { line, col }, msg }) => (line, col, msg),
        other => panic!("expected a grammar error for {src:?}, got {other:?}"),
    }
}

#[test]
fn rules_literals_and_operators() {
    check("start: \"a\" b\nb: \"b\"+", &["ab", "abbb"], &["a", "ba"]);
    check("?start: x*\n!x: \"x\" | \"y\"", &["", "xyx"], &["z"]);
    check("start: _item~2\n_item: \"a\"", &["aa"], &["a", "aaa"]);
    check("start: \"a\"~1..3", &["a", "aaa"], &["", "aaaa"]);
    check("start: [\"a\"] \"b\"", &["b", "ab"], &["aab"]);
    check("start: (\"a\" | \"b\")? \"c\"", &["c", "ac", "bc"], &["abc"]);
    check("start: \"a\"{2,3}", &["aa", "aaa"], &["a"]);
    check("start: \"ab\"i", &["ab", "AB", "aB"], &["a"]);
    check("start: \"a\" -> alias\n     | \"b\" -> other", &["a", "b"], &["ab"]);
    check("start: a\n  | b\n// a comment between\n  | c\na: \"a\"\nb: \"b\"\nc: \"c\"", &["a", "b", "c"], &[]);
    check("start: (\"a\"\n  \"b\")", &["ab"], &["a"]);
    check("start: \"\\n\\t\\\"\\\\\\x41\\u00e9\"", &["\n\t\"\\A\u{e9}"], &[]);
}

#[test]
fn terminals() {
    check("start: NUM\nNUM: DIGIT+ (\".\" DIGIT+)?\nDIGIT: \"0\"..\"9\"", &["1", "12.5"], &["1.", "a"]);
    check("start: ID\nID.2: /[a-z_][a-z0-9_]*/i", &["abc", "A_9"], &["9a"]);
    check("start: X\nX: /a.b/s", &["a\nb"], &[]);
    check("start: X\nX: /a.b/", &["axb"], &["a\nb"]);
    check("start: X\nX: /a b/x", &["ab"], &["a b"]);
    check("start: X\nX: /\\/+/", &["//"], &[]);
    // llguidance's `&` and `~` over terminals.
    check("start: X\nX: /[a-z]+/ & ~\"if\"", &["i", "iff"], &["if"]);
}

#[test]
fn ignore_goes_between_tokens_never_inside() {
    let src = "start: NAME \"=\" NAME\nNAME: /[a-z]+/\n%import common.WS\n%ignore WS";
    check(src, &["a=b", " a =\n b ", "a= b  "], &["a b=c", "a=b c"]);
    // Rules are not tokens: ignored text may come between a rule's parts.
    check("start: w\nw: \"a\" \"b\"\n%ignore \" \"", &["a b", " ab "], &["a  x"]);
    // A literal is one token.
    check("start: \"ab\"\n%ignore \" \"", &["ab "], &["a b"]);
    // llguidance: nothing before the first token unless asked.
    check("%llguidance {}\nstart: \"a\"\n%ignore \" \"", &["a", "a "], &[" a"]);
    check("%llguidance {\"allow_initial_skip\": true}\nstart: \"a\"\n%ignore \" \"", &[" a"], &[]);
    check(
        "%llguidance {\"skip_repetition\": \"once\"}\nstart: \"a\" \"b\"\n%ignore /[ ]{1,2}/",
        &["a  b"],
        &["a    b"],
    );
}

#[test]
fn imports() {
    check("start: SIGNED_NUMBER\n%import common.SIGNED_NUMBER", &["-1", "2.5e3", "+.5"], &["1e", "--1"]);
    check(
        "start: ESCAPED_STRING\n%import common.ESCAPED_STRING",
        &[r#""a\"b""#, r#""""#, r#""\\""#],
        &[r#""a"b""#, r#""\""#],
    );
    check("start: N X\n%import common (INT, LETTER)\nN: INT\nX: LETTER", &["12a"], &["a"]);
    check("start: _NL\n%import common.NEWLINE -> _NL", &["\n", "\r\n\n"], &["\r"]);
    check("start: C\n%import common.C_COMMENT -> C", &["/* a * b */", "/**/", "/***/"], &["/* a */ b */"]);
    check("start: CNAME WS\n%import unicode.WS\n%import common.CNAME", &["a_1\u{a0}"], &[]);
    // Imports keep their own namespace: the grammar's INT is not common's.
    check("start: NUMBER INT\n%import common.NUMBER\nINT: \"x\"", &["12x"], &["1212"]);
}

#[test]
fn lazy_terminals_match_the_shortest() {
    // Lark's lexer reads `"` .*? `"` up to the first quote.
    check("start: S\nS: \"\\\"\" /.*?/ \"\\\"\"", &[r#""ab""#], &[r#""a"b""#]);
    check("start: X\nX[lazy]: /.*end/", &["xxend"], &["endend"]);
    check("start: X\nX[suffix=\"!\"]: /[a-z]*/", &["ab!"], &["ab!!", "ab"]);
}

#[test]
fn overrides_extends_templates() {
    check("start: A\nA: \"a\"\n%override A: \"b\"", &["b"], &["a"]);
    check("start: a\na: \"a\"\n%extend a: \"b\"", &["a", "b"], &[]);
    check("start: list{NUM}\nlist{x}: x (\",\" x)*\nNUM: /[0-9]+/", &["1,22"], &["1,"]);
    check("start: pair{\"a\", b}\npair{x, y}: x y\nb: \"b\"", &["ab"], &[]);
    // Same arguments, same instance.
    let g = parse("start: t{\"a\"} t{\"a\"} t{\"b\"}\nt{x}: x", &Default::default()).unwrap();
    assert_eq!(g.rules.iter().filter(|r| r.name.starts_with("t{")).count(), 2);
}

#[test]
fn json_embeds_a_schema() {
    check("start: \"x=\" v\nv: %json {\"type\": \"integer\"}", &["x=12", "x=-3"], &["x=1.5", "x="]);
}

#[test]
fn options_start_and_warnings() {
    let opts = LarkOptions { start: Some("top".into()), ..Default::default() };
    let (g, w) = parse_with_warnings("top: \"a\"\nspare: \"b\"", &opts).unwrap();
    assert!(Reference::new(&g).accepts(b"a"));
    assert_eq!(w[0].to_string(), "2:1: rule `spare` is not reachable from `top` (ignored)");
    let (_, w) = parse_with_warnings("start: X\nX[temperature=0.5]: /a/", &Default::default()).unwrap();
    assert!(w[0].msg.contains("temperature"), "{w:?}");
}

#[test]
fn errors_name_the_problem_and_place() {
    let cases: &[(&str, (usize, usize), &str)] = &[
        ("start: a", (1, 8), "undefined rule `a`"),
        ("start: A", (1, 8), "undefined terminal `A`"),
        ("x: \"a\"", (1, 1), "no rule `start`"),
        ("start: A\nA: B\nB: \"b\" A", (2, 1), "terminal `A` is recursive (A → B → A)"),
        ("start: A\nA: b\nb: \"b\"", (2, 4), "terminal `A` uses rule `b`"),
        ("start: \"a\"\nstart: \"b\"", (2, 1), "`start` is already defined at 1:1"),
        ("start: X\n%import common.NOPE -> X", (2, 16), "`common` has no `NOPE`"),
        ("start: X\n%import python.X", (2, 9), "unknown import `python`"),
        ("start: /a(/", (1, 10), "invalid regex"),
        ("start: /(?=a)b/", (1, 9), "lookarounds"),
        ("start: /^a/", (1, 8), "anchors"),
        ("start: /a/q", (1, 8), "regex flag `q`"),
        ("start: \"ab", (1, 8), "unterminated string"),
        ("start: (\"a\"", (1, 8), "unclosed `(`"),
        ("start: \"a\")", (1, 11), "unmatched `)`"),
        ("start \"a\"", (1, 7), "expected `:` after `start`"),
        ("start: \"b\"..\"a\"", (1, 8), "reversed range"),
        ("start: \"ab\"..\"z\"", (1, 8), "single characters"),
        ("start: \"a\"~3..1", (1, 11), "minimum exceeds maximum"),
        ("start: <[1-5]> \"a\"", (1, 8), "only one token id fits in `<[...]>`"),
        ("start: X\nX: <|eot_id|> \"a\"", (2, 4), "a special token cannot be part of terminal `X`"),
        ("start: @sub", (1, 8), "other grammars"),
        ("%frobnicate x", (1, 1), "unknown directive %frobnicate"),
        ("start: X\nX[stop=\"\\n\"]: /.*/", (2, 3), "`stop=` is not supported"),
        ("start: X\nX[max_tokens=5]: /.*/", (2, 3), "`max_tokens=` is not supported"),
        ("start: t{\"a\"}\nt{x, y}: x y", (1, 8), "takes 2 argument(s), given 1"),
        ("start: v\nv: %json {\"type\": 5}", (2, 4), "%json"),
        ("start: v\nv: %json {\"type\": }", (2, 19), "invalid JSON"),
        ("%llguidance {\"allow_invalid_utf8\": true}\nstart: \"a\"", (1, 13), "allow_invalid_utf8"),
        ("start: a & b\na: \"a\"\nb: \"b\"", (1, 8), "`&` and `~` combine terminals"),
        ("start: \"a\"\n%override b: \"b\"", (2, 11), "%override of `b`"),
        ("start: %import common.WS", (1, 8), "expected an expression"),
    ];
    for (src, (line, col), want) in cases {
        let (l, c, msg) = err(src);
        assert!(msg.contains(want), "{src:?}: {msg:?} should say {want:?}");
        assert_eq!((l, c), (*line, *col), "{src:?}: {msg}");
    }
}

#[test]
fn indentation_grammars_are_refused_naming_the_postlexer() {
    let src = "start: _NEWLINE _INDENT \"x\" _DEDENT\n_NEWLINE: /\\n/\n%declare _INDENT _DEDENT";
    let (line, col, msg) = err(src);
    assert_eq!((line, col), (3, 10));
    assert!(msg.contains("`_INDENT` is declared") && msg.contains("postlexer") && msg.contains("1:17"), "{msg}");
    // Declared but unused: fine.
    check("start: \"a\"\n%declare _INDENT", &["a"], &[]);
}

#[test]
fn limits_hold_on_deep_and_large_input() {
    for src in [
        format!("start: {}\"a\"{}", "(".repeat(100_000), ")".repeat(100_000)),
        format!("start: {}\"a\"{}", "[".repeat(100_000), "]".repeat(100_000)),
        format!("start: \"a\"{}", "*".repeat(100_000)),
        format!("start: {}\"a\"", "~".repeat(100_000)),
    ] {
        match parse(&src, &Default::default()) {
            Err(Error::Limit { kind: LimitKind::GrammarNesting, .. }) => {}
            other => panic!("expected a nesting limit, got {other:?}"),
        }
    }
    // A long chain of terminals, each using the next.
    let mut chain = String::from("start: T0\n");
    for i in 0..5_000 {
        chain.push_str(&format!("T{i}: T{} \"x\"\n", i + 1));
    }
    chain.push_str("T5000: \"y\"\n");
    assert!(matches!(parse(&chain, &Default::default()), Err(Error::Limit { kind: LimitKind::GrammarNesting, .. })));
    match parse("start: \"a\"~100001", &Default::default()) {
        Err(Error::Limit { kind: LimitKind::Repetition, .. }) => {}
        other => panic!("expected a repetition limit, got {other:?}"),
    }
    // A template that grows its argument forever.
    let (_, _, msg) = err("start: t{\"a\"}\nt{x}: x | t{(x x)}");
    assert!(msg.contains("template `t`") || msg.contains("template instances"), "{msg}");
}

#[test]
fn garbage_never_panics() {
    let pieces = [
        "start",
        ":",
        "\"a\"",
        "/b/",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        "|",
        "~",
        "..",
        "->",
        "%import",
        "%ignore",
        "common.WS",
        "\n",
        "A",
        "?",
        "*",
        "+",
        "2",
        ",",
        "%json",
        "%declare",
        "<|x|>",
        "&",
        "\"",
        "/",
        ".",
        "!",
    ];
    let mut x: u64 = 1;
    for _ in 0..3_000 {
        let mut s = String::new();
        for _ in 0..12 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            s.push_str(pieces[(x >> 33) as usize % pieces.len()]);
            s.push(' ');
        }
        let _ = parse(&s, &Default::default());
    }
}

#[test]
fn lark_or_gbnf() {
    assert!(looks_like_lark("start: \"a\""));
    assert!(looks_like_lark("%import common.WS\nstart: WS"));
    assert!(looks_like_lark("%llguidance {}\nstart: \"::=\""));
    assert!(!looks_like_lark("root ::= \"a\""));
    assert!(!looks_like_lark("# comment: x\nroot ::= [a-z]"));
}

#[test]
fn ignored_line_comments_run_to_the_end_of_their_line() {
    let src = "start: (WORD \";\")+\n%import common (WORD, WS, SH_COMMENT)\n%ignore WS\n%ignore SH_COMMENT";
    check(src, &["a; # note\nb;", "a; # last", "a;#x\n#y\n b;"], &["a; # note b;\nc", "a # c;"]);
}
