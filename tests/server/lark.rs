//! Lark grammars through the server: `grammar` with `grammar_syntax: "lark"`, detected without
//! it (no `::=`), vLLM's `guided_grammar`; bad Lark text is a 400 naming `grammar` and the line.

use super::*;
use strictly::grammar::{lark, reference::Reference};

const ARITH: &str = "start: sum\n\
                     ?sum: product (OP product)*\n\
                     ?product: NUMBER | \"(\" sum \")\"\n\
                     OP: \"+\" | \"*\"\n\
                     NUMBER: /[0-9]{1,3}/\n\
                     %ignore \" \"";

#[tokio::test]
async fn lark_grammars_constrain_the_output() {
    let app = app(state(ServerConfig::default()));
    let g = lark::parse(ARITH, &Default::default()).unwrap();
    let r = Reference::new(&g);
    for seed in 0..3 {
        for body in [
            json!({"seed": seed, "max_tokens": 30, "grammar": ARITH, "grammar_syntax": "lark"}),
            json!({"seed": seed, "max_tokens": 30, "grammar": ARITH}),
            json!({"seed": seed, "max_tokens": 30, "guided_grammar": ARITH}),
        ] {
            let v = chat_ok(&app, body).await;
            let text = content(&v, 0);
            assert!(r.accepts(text.as_bytes()), "{text:?} is not in the grammar: {v}");
        }
    }
    // The same text read as GBNF is a GBNF error.
    let m = msgs("hi");
    let chat = "/v1/chat/completions";
    let e = expect_error(
        &app,
        chat,
        json!({"messages": m, "grammar": ARITH, "grammar_syntax": "gbnf"}),
        StatusCode::BAD_REQUEST,
    )
    .await;
    assert_eq!(e["param"], "grammar", "{e}");
}

#[tokio::test]
async fn bad_lark_grammars_are_400s_naming_the_line() {
    let app = app(state(ServerConfig::default()));
    let m = msgs("hi");
    let chat = "/v1/chat/completions";
    let e = expect_error(
        &app,
        chat,
        json!({"messages": m, "grammar": "start: a\n  | b\na: \"a\""}),
        StatusCode::BAD_REQUEST,
    )
    .await;
    let msg = e["message"].as_str().unwrap();
    assert!(msg.contains("Lark") && msg.contains("2:5") && msg.contains("undefined rule `b`"), "{e}");
    assert_eq!((e["param"].as_str(), e["code"].as_str()), (Some("grammar"), Some("invalid_grammar")));
    // Indentation grammars: refused, naming the postlexer's terminal.
    let g = "start: _INDENT \"x\"\n%declare _INDENT";
    let e = expect_error(
        &app,
        chat,
        json!({"messages": m, "grammar": g, "grammar_syntax": "lark"}),
        StatusCode::BAD_REQUEST,
    )
    .await;
    assert!(e["message"].as_str().unwrap().contains("_INDENT"), "{e}");
    // An unknown syntax, or a syntax without a grammar.
    let e = expect_error(
        &app,
        chat,
        json!({"messages": m, "grammar": "start: \"a\"", "grammar_syntax": "yacc"}),
        StatusCode::BAD_REQUEST,
    )
    .await;
    assert_eq!(e["param"], "grammar_syntax", "{e}");
    let e = expect_error(&app, chat, json!({"messages": m, "grammar_syntax": "lark"}), StatusCode::BAD_REQUEST).await;
    assert_eq!(e["param"], "grammar_syntax", "{e}");
}

/// Token terminals (GBNF `<name>`, Lark `<|…|>`/`<name>`) through the server: the named
/// special token is written where the grammar names it and shown in the reply's text (the
/// final check reads the tokens); a name the vocabulary lacks is a 400 naming `grammar`.
#[tokio::test]
async fn token_terminals_write_the_named_token() {
    let app = app(state(ServerConfig::default()));
    for (grammar, syntax) in
        [("root ::= \"Once\" <unk> \" upon a time\"", "gbnf"), ("start: \"Once\" <unk> \" upon a time\"", "lark")]
    {
        for seed in 0..2 {
            let body = json!({"seed": seed, "max_tokens": 12, "grammar": grammar, "grammar_syntax": syntax});
            let v = chat_ok(&app, body).await;
            assert_eq!(content(&v, 0), "Once<unk> upon a time", "{v}");
        }
    }
    let e = expect_error(
        &app,
        "/v1/chat/completions",
        json!({"messages": msgs("hi"), "grammar": "root ::= <|no_such|>"}),
        StatusCode::BAD_REQUEST,
    )
    .await;
    assert_eq!(e["param"], "grammar", "{e}");
    assert!(e["message"].as_str().unwrap().contains("no single token of the vocabulary is `<|no_such|>`"), "{e}");
}
