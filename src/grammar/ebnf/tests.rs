//! Tests of the GBNF front end: every llama.cpp grammar parses and means what llama.cpp
//! reads, the shipped grammars suit llama.cpp, syntax features, errors that point at the
//! problem, limits, and property tests that parsing never panics.

use super::*;
use crate::grammar::reference::Reference;
use proptest::prelude::*;

const LLAMA_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/data/grammars/llama.cpp");

fn llama_grammars() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir(LLAMA_DIR) else { return out };
    for entry in dir.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "gbnf") {
            let text = std::fs::read_to_string(&path).unwrap();
            out.push((path.file_name().unwrap().to_string_lossy().into_owned(), text));
        }
    }
    out.sort();
    out
}

fn err(src: &str) -> (usize, usize, String) {
    match parse(src) {
        Err(Error::Grammar { at: Location::LineCol { line, col }, msg }) => (line, col, msg),
        other => panic!("expected a grammar error for {src:?}, got {other:?}"),
    }
}

fn check(src: &str, accept: &[&str], reject: &[&str]) {
    let g = parse(src).unwrap_or_else(|e| panic!("{src:?}: {e}"));
    let r = Reference::new(&g);
    for a in accept {
        assert!(r.accepts(a.as_bytes()), "{src:?} should accept {a:?}");
    }
    for x in reject {
        assert!(!r.accepts(x.as_bytes()), "{src:?} should reject {x:?}");
    }
}

#[test]
fn every_llama_cpp_grammar_parses() {
    let all = llama_grammars();
    if all.is_empty() {
        eprintln!("skipping: {LLAMA_DIR} not found");
        return;
    }
    for (name, text) in &all {
        let g = parse(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(g.rule(g.start).name, "root", "{name}");
    }
}

#[test]
fn llama_cpp_grammars_mean_what_they_say() {
    let all: HashMap<String, String> = llama_grammars().into_iter().collect();
    let Some(json) = all.get("json.gbnf") else { return };
    check(json, &[r#"{"a": [1, 2.5e3, "x\u00e9", true, null]}"#, "{}"], &["[]", r#"{"a" 1}"#]);
    check(&all["list.gbnf"], &["- one\n- two\n"], &["- one", "-  \u{2028}\n"]);
    check(&all["japanese.gbnf"], &["こんにちは 世界"], &["hello"]);
    check(&all["english.gbnf"], &["Hi, there! [ok] \\o/"], &["héllo"]);
    check(&all["arithmetic.gbnf"], &["1+2=3\n", "(a *b)= c\n"], &["1+2=3"]);
    check(&all["chess.gbnf"], &["1. e4 e5\n2. Nf3 Nc6\n"], &["1. e4 e5\n"]);
}

/// A rough check that a grammar uses only what llama.cpp's parser accepts: no regex
/// terminals, no `{,n}`, no `\-`/`\^` escapes, and (llama.cpp ends a top-level rule at a
/// newline) a line that continues a rule only after `|`, `::=` or an open `(`.
fn llama_cpp_compatible(src: &str) -> std::result::Result<(), String> {
    let (mut depth, mut last, mut in_lit, mut in_class, mut comment) = (0, '=', false, false, false);
    let mut chars = src.chars().peekable();
    let mut line = 1;
    while let Some(c) = chars.next() {
        match c {
            '\n' => {
                line += 1;
                comment = false;
                if depth == 0 && !matches!(last, '|' | '=') {
                    let rest: String = src
                        .lines()
                        .skip(line - 1)
                        .find(|l| {
                            let t = l.trim_start();
                            !t.is_empty() && !t.starts_with('#')
                        })
                        .unwrap_or("x ::=")
                        .to_string();
                    let t = rest.trim_start();
                    let name_end = t.find(|c: char| !is_name_char(c)).unwrap_or(t.len());
                    if name_end == 0 || !t[name_end..].trim_start().starts_with("::=") {
                        return Err(format!("line {line} continues a rule: {rest:?}"));
                    }
                    last = '=';
                }
            }
            _ if comment => {}
            '\\' if in_lit || in_class => {
                let e = chars.next().unwrap_or(' ');
                if e == '-' || e == '^' || e == '\'' {
                    return Err(format!("line {line}: escape `\\{e}`"));
                }
            }
            '"' if !in_class => in_lit = !in_lit,
            _ if in_lit => {}
            '[' if !in_class => in_class = true,
            ']' if in_class => in_class = false,
            _ if in_class => {}
            '#' => comment = true,
            '(' => depth += 1,
            ')' => depth -= 1,
            '/' => return Err(format!("line {line}: regex terminal")),
            '{' if chars.peek() == Some(&',') => return Err(format!("line {line}: `{{,n}}`")),
            ' ' | '\t' | '\r' => {}
            c => last = c,
        }
        // Characters of literals and classes are never `|` or `::=` for this purpose.
        if !comment && (in_lit || in_class || c == '"' || c == ']') {
            last = 'x';
        }
    }
    Ok(())
}

#[test]
fn shipped_grammars_parse_and_suit_llama_cpp() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/grammars");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap();
        parse(&text).unwrap_or_else(|e| panic!("{:?}: {e}", entry.path()));
        llama_cpp_compatible(&text).unwrap_or_else(|e| panic!("{:?}: {e}", entry.path()));
        n += 1;
    }
    assert!(n >= 5);
    for (name, text) in llama_grammars() {
        llama_cpp_compatible(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    assert!(llama_cpp_compatible("root ::= a\n  | b").is_err());
    assert!(llama_cpp_compatible("root ::= a |\n  b\nb ::= (\n\"x\"\n)").is_ok());
    assert!(llama_cpp_compatible("root ::= /a/").is_err());
    assert!(llama_cpp_compatible("root ::= \"a|\"\n \"b\"").is_err());
}

#[test]
fn syntax_features() {
    check(r#"root ::= "a\n\t\\\"\'\[\]\x41\u00e9\U0001F600""#, &["a\n\t\\\"'[]Aé😀"], &["a"]);
    check(r#"root ::= [^"\\] [a-c\-x] [\]] ."#, &["é-]\n", "xa]z", "😀x]\u{10FFFF}"], &["\"a]a", "a?]a"]);
    check("root ::= \"a\"{2} \"b\"{1,} \"c\"{,2} \"d\"{0,1}", &["aab", "aabbbccd"], &["ab", "aabccc"]);
    check("root ::= (\"x\" | \"y\")+? \"!\"", &["!", "xyx!"], &["xy"]);
    check("root ::= ws | \"a\" ws\nws ::= | \" \"", &["", " ", "a", "a "], &["  "]);
    check("root ::= /[a-z]+[0-9]?/ \"-\" /abc/i /x.y/s", &["ab1-ABcx\ny", "a-abcxzy"], &["a-abdx\ny", "1-abcxy"]);
    check(r#"root ::= /a\/b/ [/]"#, &["a/b/"], &["ab/"]);
    // A rule body may span lines; a new rule starts at `name ::=`.
    check("root ::= a\n  b # comment\n  | c\na ::= \"a\"\nb ::= \"b\"\nc ::= \"c\"", &["ab", "c"], &["a"]);
    check("\u{feff}# only a comment\r\nroot ::= \"x\"\r\n", &["x"], &[""]);
}

#[test]
fn rules_are_in_definition_order() {
    let g = parse("root ::= b a\na ::= \"a\"\nb ::= \"b\"").unwrap();
    let names: Vec<&str> = g.rules.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["root", "a", "b"]);
    assert_eq!(g.rules[1].span, Some(Span { line: 2, col: 1 }));
    match &g.rules[0].body {
        Expr::Seq(xs) => assert!(matches!(xs[..], [Expr::Rule(RuleId(2)), Expr::Rule(RuleId(1))])),
        other => panic!("{other:?}"),
    }
}

#[test]
fn errors_point_at_the_problem() {
    assert_eq!(err("a ::= \"x\"").2, "no `root` rule (the start rule must be called `root`)");
    assert_eq!(err("root ::= x\n  y"), (1, 10, "undefined rule `x`".into()));
    let (l, c, m) = err("root ::= \"a\"\nroot ::= \"b\"");
    assert_eq!((l, c), (2, 1));
    assert!(m.contains("already defined at 1:1"), "{m}");
    // Undefined references count in unused rules too (llama.cpp checks every rule).
    assert_eq!(err("root ::= \"a\"\nunused ::= x").2, "undefined rule `x`");
    assert_eq!(err("root ::= \"a\"{3,2}").0, 1);
    assert!(err("root ::= \"a\"{3,2}").2.contains("minimum exceeds maximum"));
    assert_eq!(err("root ::= \"abc").1, 10);
    assert_eq!(err("root ::= \"ab\ncd\"").1, 10);
    assert_eq!(err("root ::= [abc").1, 10);
    assert_eq!(err("root ::= [c-a]").1, 11);
    assert_eq!(err("root ::= []").2, "character class matches nothing");
    assert_eq!(err("root ::= (\"a\" | \"b\"").1, 10);
    assert_eq!(err("root ::= \"a\")").2, "unmatched `)`");
    assert_eq!(err("root ::= * \"a\"").2, "`*` has nothing to repeat");
    assert_eq!(err(r#"root ::= "\q""#).2, "unknown escape `\\q`");
    assert!(err(r#"root ::= "\uD800""#).2.contains("not a Unicode scalar"));
    assert!(err(r#"root ::= "\x4""#).2.contains("hex digits"));
    assert_eq!(err("root ::= \"a\" b ::= \"b\"").2, "a new rule must start on its own line");
    assert_eq!(err("root \"a\"").2, "expected `::=` after the rule name");
    assert_eq!(err("root ::= \"a\"\n= \"b\"").0, 2);
    assert_eq!(err("root ::= \"a\u{0}\"").1, 12);
    assert_eq!(err("root ::= \"a\"\u{1}").1, 13);
    assert_eq!(err("root ::= /a^/").2, "anchors and word boundaries are not supported in regex terminals");
    assert_eq!(err("root ::= /a(/").1, 12);
    assert_eq!(err("root ::= /a/q").2, "unknown regex flag `q` (allowed: i, s, x)");
    assert_eq!(err("root ::= //").2, "empty regex `//`");
    assert_eq!(err("root ::= \"a\"{}").2, "expected a number");
    assert_eq!(err("root ::= \"a\"{1;}").2, "expected a number, `,` or `}`");
}

/// llama.cpp loads grammars with rules `root` never reaches, and writes them itself: this is
/// its `json_schema_to_grammar` output for `{"type": "array", "items": {"type": "string"},
/// "maxItems": 0}`. Such rules are warnings, and left out of the IR.
#[test]
fn unused_rules_are_warnings() {
    let src = r#"char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
item ::= string
root ::= "[" space  "]" space
space ::= | " " | "\n"{1,2} [ \t]{0,20}
string ::= "\"" char* "\"" space
"#;
    let (g, warnings) = parse_with_warnings(src, &Limits::default()).unwrap();
    let names: Vec<&str> = g.rules.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["root", "space"]);
    assert_eq!(g.rule(g.start).name, "root");
    let said: Vec<String> = warnings.iter().map(|w| w.to_string()).collect();
    assert_eq!(
        said,
        [
            "1:1: rule `char` is not reachable from `root` (ignored)",
            "2:1: rule `item` is not reachable from `root` (ignored)",
            "5:1: rule `string` is not reachable from `root` (ignored)",
        ]
    );
    check(src, &["[]", "[ ]\n "], &["[\"a\"]"]);
    // Used rules give no warning.
    let (_, none) = parse_with_warnings("root ::= a\na ::= \"x\"", &Limits::default()).unwrap();
    assert!(none.is_empty());
}

/// llama.cpp's token terminals parse into token leaves; negated ones repeated into runs of
/// tokens but that one; a single negated one and malformed ones are refused by name at their
/// position (not a generic parse error).
#[test]
fn token_terminals_parse_and_negated_ones_are_runs_or_named_errors() {
    use crate::grammar::ir::TokenRef;
    let g = parse("root ::= <[128000]> \"x\" | <think> [a-z]* <|eot_id|>").unwrap();
    let mut found = Vec::new();
    /// A token leaf, and a run's counts.
    type Leaf = (TokenRef, Option<(u32, Option<u32>)>);
    fn leaves(e: &Expr, out: &mut Vec<Leaf>) {
        match e {
            Expr::Token(t) => out.push((t.clone(), None)),
            Expr::TokensBut { but, min, max, .. } => out.push((but.clone(), Some((*min, *max)))),
            Expr::Seq(xs) | Expr::Alt(xs) => xs.iter().for_each(|x| leaves(x, out)),
            Expr::Repeat { body, .. } => leaves(body, out),
            _ => {}
        }
    }
    g.rules.iter().for_each(|r| leaves(&r.body, &mut found));
    let name = |n: &str| TokenRef::Name(n.into());
    assert_eq!(found, vec![(TokenRef::Id(128_000), None), (name("<think>"), None), (name("<|eot_id|>"), None)]);
    // Runs, with or without parentheses; a repetition of a run is an ordinary repetition.
    let g = parse("root ::= <think> (!</think>)* </think> !<[7]>+ ( ( !<x> ) )* x\nx ::= (!<y>+)?").unwrap();
    found.clear();
    g.rules.iter().for_each(|r| leaves(&r.body, &mut found));
    assert_eq!(
        found,
        vec![
            (name("<think>"), None),
            (name("</think>"), Some((0, None))),
            (name("</think>"), None),
            (TokenRef::Id(7), Some((1, None))),
            (name("<x>"), Some((0, None))),
            (name("<y>"), Some((1, None))),
        ]
    );
    for (src, at, msg) in [
        (
            "root ::= \"a\" !<[2]>",
            (1, 14),
            "`!<[2]>` (one token but that) is supported only as a run of any length: `(!<[2]>)*` or \
             `(!<[2]>)+`, any text without that token",
        ),
        (
            "root ::= x\nx ::= \"b\" | !<|eot_id|>{2,}",
            (2, 13),
            "`!<|eot_id|>` (one token but that) is supported only as a run of any length: \
             `(!<|eot_id|>)*` or `(!<|eot_id|>)+`, any text without that token",
        ),
        (
            "root ::= (!<a> !<b>)*",
            (1, 11),
            "`!<a>` (one token but that) is supported only as a run of any length: `(!<a>)*` or \
             `(!<a>)+`, any text without that token",
        ),
        ("root ::= <[12] >", (1, 14), "expected `]>` after the token id"),
        ("root ::= <[]>", (1, 12), "expected a token id in `<[...]>`"),
        ("root ::= <think", (1, 10), "unterminated token terminal `<...>`"),
        ("root ::= <>", (1, 10), "empty token terminal `<>`"),
        ("root ::= ! \"a\"", (1, 10), "`!` must be followed by a token terminal `<[id]>` or `<name>`"),
    ] {
        assert_eq!(err(src), (at.0, at.1, msg.to_string()), "{src:?}");
    }
    // In literals, classes and regexes `<`, `>` and `!` are plain characters.
    check(r#"root ::= "<think>" [!<] /!<[0-9]>/"#, &["<think>!!<1>", "<think><!<2>"], &["<think>"]);
}

#[test]
fn limits_are_errors() {
    let deep = format!("root ::= {}\"a\"{}", "(".repeat(201), ")".repeat(201));
    assert!(matches!(parse(&deep), Err(Error::Limit { limit: 200, .. })));
    let ok = format!("root ::= {}\"a\"{}", "(".repeat(200), ")".repeat(200));
    assert!(parse(&ok).is_ok());
    let very_deep = format!("root ::= {}", "(".repeat(100_000));
    assert!(matches!(parse(&very_deep), Err(Error::Limit { .. })));
    let stacked = format!("root ::= \"a\"{}", "?".repeat(100_000));
    assert!(matches!(parse(&stacked), Err(Error::Limit { .. })));
    assert!(matches!(parse("root ::= \"a\"{10001}"), Err(Error::Limit { limit: 10_000, .. })));
    assert!(matches!(parse("root ::= \"a\"{0,99999999999999999999999}"), Err(Error::Limit { .. })));
    assert!(parse("root ::= \"a\"{10000}").is_ok());
    let small = Limits { max_depth: 2, max_repeat: 3 };
    assert!(parse_with("root ::= ((\"a\"))", &small).is_ok());
    assert!(parse_with("root ::= (((\"a\")))", &small).is_err());
    assert!(parse_with("root ::= \"a\"{4}", &small).is_err());
    assert!(parse_with(&format!("root ::= /{}a{}/", "(".repeat(5), ")".repeat(5)), &small).is_err());
}

fn mutate(text: &str, edits: &[(usize, u8, char)]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for &(at, kind, c) in edits {
        let at = at % (chars.len() + 1);
        match kind % 3 {
            0 => chars.insert(at, c),
            1 if at < chars.len() => {
                chars.remove(at);
            }
            _ if at < chars.len() => chars[at] = c,
            _ => chars.push(c),
        }
    }
    chars.into_iter().collect()
}

fn interesting_char() -> impl Strategy<Value = char> {
    prop_oneof![
        proptest::sample::select("\"[]()/\\|*+?{},.-^#:=\n\r\t x0aZ_\u{0}\u{1}é😀".chars().collect::<Vec<_>>()),
        any::<char>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn never_panics_on_random_text(src in "\\PC{0,80}|[\"\\[\\]()/\\\\|*+?{},.^#:= \na-c0-9\\-]{0,80}") {
        let _ = parse(&src);
        let _ = parse(&format!("root ::= {src}"));
    }

    #[test]
    fn never_panics_on_mutated_grammars(
        which in 0usize..16,
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), interesting_char()), 1..6),
    ) {
        let mut all = llama_grammars();
        all.push(("x".into(), "root ::= /[a-z]+\\/x/i (a | \"\\u00e9\"){2,3}\na ::= [^\\]x-z] .*".into()));
        let (_, text) = &all[which % all.len()];
        let src = mutate(text, &edits);
        if let Ok(g) = parse(&src) {
            // Whatever parses must satisfy the IR invariants and be usable by the oracle.
            let r = Reference::new(&g);
            let _ = r.is_prefix(b"1. e4");
        }
    }
}
