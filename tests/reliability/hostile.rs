//! Hostile inputs to the library and the command line: each one is answered by a clear error
//! (typed, one line, naming the problem) or compiles to a bounded automaton, and the process
//! lives on. Times are printed; [`within_bound`] asserts them only when
//! `$STRICTLY_HOSTILE_BOUND_MS` asks for it (a measurement, never a CI default).
//! The server's hostile clients (huge bodies, invalid UTF-8, slowloris) are in `load`.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use strictly::{
    automaton::{Compiled, Constraint},
    grammar::{ebnf, json_schema::JsonSchemaOptions},
    Error, Vocab,
};

use super::fuzz::{assert_clear, env};
use super::{timed, within_bound};

/// Compiles `constraint` with the embedded vocabulary on a thread with a small (2 MiB) stack,
/// like a server's worker: deep inputs must not overflow it. Returns the outcome and time.
fn compile(constraint: Constraint) -> (Result<Arc<Compiled>, Error>, Duration) {
    let (r, dt, constraint) = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            let (r, dt) = timed(|| Compiled::new(&env(), &constraint));
            (r, dt, constraint)
        })
        .unwrap()
        .join()
        .expect("compiling panicked");
    // A 10,000-deep `Value` drops recursively: not on the small stack.
    std::thread::Builder::new().stack_size(256 << 20).spawn(move || drop(constraint)).unwrap().join().unwrap();
    (r, dt)
}

/// Must fail with an error whose message contains `needle`, within the bound.
#[track_caller]
fn refused(what: &str, constraint: Constraint, needle: &str) -> String {
    let (r, dt) = compile(constraint);
    let e = match r {
        Ok(_) => panic!("{what}: compiled, but an error was expected"),
        Err(e) => e,
    };
    assert_clear(&e, what);
    let msg = e.to_string();
    assert!(
        msg.to_lowercase().contains(&needle.to_lowercase()),
        "{what}: the error {msg:?} does not mention {needle:?}"
    );
    within_bound(what, dt, 1);
    eprintln!("hostile {what}: {dt:?}: {msg}");
    msg
}

/// Compiles or fails clearly; the compiled form's facts (`Compiled::stats`) when it compiled.
#[track_caller]
fn answered(what: &str, constraint: Constraint) -> Option<Value> {
    let (r, dt) = compile(constraint);
    within_bound(what, dt, 1);
    match r {
        Ok(c) => {
            let stats = c.stats();
            eprintln!("hostile {what}: {dt:?}: compiled {stats}");
            Some(stats)
        }
        Err(e) => {
            assert_clear(&e, what);
            eprintln!("hostile {what}: {dt:?}: {e}");
            None
        }
    }
}

/// Must compile to an automaton with at most `reps + 16` states in all (DFA states, or the
/// Earley engine's lexer states): linear in the repetitions it counts, never blown up. A
/// deterministic measure where a time bound would flake.
#[track_caller]
fn compiled_linear(r: &str, reps: u64) {
    let stats = answered(r, Constraint::Regex(r.into())).unwrap_or_else(|| panic!("{r}: did not compile"));
    let states = stats["dfa_states"].as_u64().or(stats["lexer_states"].as_u64()).expect("a state count");
    assert!(states <= reps + 16, "{r}: {states} states for {reps} repetitions: {stats}");
}

fn schema(v: Value) -> Constraint {
    Constraint::JsonSchema(v, JsonSchemaOptions::default())
}

/// Builds a `depth`-deep value with `wrap` and drops it on a thread with a big stack
/// (serde_json's `Value` drops recursively; that is the test's problem, not the library's).
fn deep(depth: usize, wrap: impl Fn(Value) -> Value) -> Value {
    let mut v = json!({"type": "integer"});
    for _ in 0..depth {
        v = wrap(v);
    }
    v
}

/// An object from pairs, moving the values (`json!` would deep-copy an interpolated `Value`
/// through serialization: quadratic, and recursive, for a 10,000-deep build).
fn obj(pairs: Vec<(&str, Value)>) -> Value {
    Value::Object(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

fn drop_deep(v: Value) {
    std::thread::Builder::new().stack_size(256 << 20).spawn(move || drop(v)).unwrap().join().unwrap();
}

#[test]
fn exponential_regexes_hit_the_dfa_limit() {
    for r in [r"(a|b)*a(a|b){40}", r"(a|b)*a(a|b){20}(c|d)*c(c|d){20}", r"[01]*1[01]{64}", r"(\w|\d)*x\w{30}"] {
        refused(r, Constraint::Regex(r.into()), "limit");
    }
    // Also as a JSON Schema pattern, and as a grammar terminal.
    refused("pattern", schema(json!({"type": "string", "pattern": "^(a|b)*a(a|b){40}$"})), "limit");
    let g = ebnf::parse(r#"root ::= [ab]* "a" [ab]{40}"#).unwrap();
    answered("grammar (a|b)*a(a|b){40}", Constraint::Grammar(g));
}

#[test]
fn huge_counts_are_refused_or_compile_linearly() {
    for r in [r"a{1000000}", r"a{0,4294967295}", r"(a{1000}){1000}", r"(((a{100}){100}){100})"] {
        refused(r, Constraint::Regex(r.into()), "");
    }
    // A counted class compiles to one state per repetition, within the DFA limits.
    compiled_linear(r"[a-z]{100000}", 100_000);
    compiled_linear(r"[0-9]{10000}-[a-z]{0,10000}", 20_000);
    answered(r"\w{5000}", Constraint::Regex(r"\w{5000}".into()));
    let limit = ebnf::parse(r#"root ::= "a"{10001}"#).unwrap_err();
    assert!(matches!(limit, Error::Limit { .. }), "{limit}");
    for (what, s) in [
        ("minLength 1e9", json!({"type": "string", "minLength": 1_000_000_000u64})),
        ("minItems 1e6", json!({"type": "array", "minItems": 1_000_000})),
        ("minProperties 1e6", json!({"type": "object", "minProperties": 1_000_000})),
        ("minLength 2^64-1", json!({"type": "string", "minLength": u64::MAX})),
    ] {
        refused(what, schema(s), "");
    }
    // Bounds that are effectively "no bound" may compile; either way, fast.
    for (what, s) in [
        ("maxLength 1e12", json!({"type": "string", "maxLength": 1_000_000_000_000u64})),
        ("maxItems 2^64-1", json!({"type": "array", "maxItems": u64::MAX})),
        ("min/max ±1e300", json!({"type": "number", "minimum": -1e300, "maximum": 1e300})),
        ("integer ±1e300", json!({"type": "integer", "minimum": -1e300, "maximum": 1e300})),
        ("multipleOf 1e-300", json!({"type": "number", "multipleOf": 1e-300})),
        ("multipleOf 1e300", json!({"type": "integer", "multipleOf": 1e300})),
        ("maxLength 10000 pattern", json!({"type": "string", "maxLength": 10000, "pattern": "^[a-z]*$"})),
        ("minLength 5000 of a format", json!({"type": "string", "minLength": 5000, "format": "email"})),
        (
            "items 5000..10000",
            json!({"type": "array", "minItems": 5000, "maxItems": 10000, "items": {"type": "integer"}}),
        ),
    ] {
        answered(what, schema(s));
    }
}

#[test]
fn ten_thousand_deep_nesting_is_refused() {
    // Building and cloning 10,000-deep values recurses in serde_json: a big stack for the test
    // itself (the compiles still run on 2 MiB stacks, see `compile`).
    std::thread::Builder::new().stack_size(256 << 20).spawn(deep_nesting).unwrap().join().unwrap();
}

fn deep_nesting() {
    let s = deep(10_000, |v| obj(vec![("type", "array".into()), ("items", v)]));
    refused("10,000-deep items", schema(s.clone()), "depth");
    drop_deep(s);
    let s = deep(10_000, |v| {
        obj(vec![("type", "object".into()), ("properties", obj(vec![("a", v)])), ("required", json!(["a"]))])
    });
    refused("10,000-deep properties", schema(s.clone()), "depth");
    drop_deep(s);
    let s = deep(10_000, |v| Value::Array(vec![v]));
    refused("10,000-deep array inside a const", schema(obj(vec![("const", s.clone())])), "depth");
    drop_deep(s);
    let s = deep(10_000, |v| obj(vec![("anyOf", Value::Array(vec![v, json!({"type": "null"})]))]));
    refused("10,000-deep anyOf", schema(s.clone()), "depth");
    drop_deep(s);
    let s = deep(10_000, |v| obj(vec![("not", v)]));
    refused("10,000-deep not", schema(s.clone()), "depth");
    drop_deep(s);
    // A 10,000-long chain of $refs: each one is a step deeper.
    let mut defs = serde_json::Map::new();
    for i in 0..10_000 {
        defs.insert(format!("d{i}"), json!({"$ref": format!("#/$defs/d{}", i + 1)}));
    }
    defs.insert("d10000".into(), json!({"type": "integer"}));
    answered("10,000-long $ref chain", schema(json!({"$defs": defs, "$ref": "#/$defs/d0"})));

    // Grammars and regexes.
    let g = format!("root ::= {}\"a\"{}", "(".repeat(10_000), ")".repeat(10_000));
    let (e, dt) = timed(|| ebnf::parse(&g).unwrap_err());
    assert!(matches!(e, Error::Limit { .. }), "{e} in {dt:?}");
    within_bound("10,000-deep GBNF parentheses", dt, 1);
    let r = format!("{}a{}", "(".repeat(10_000), ")".repeat(10_000));
    refused("10,000-deep regex", Constraint::Regex(r), "nest");
    let r = "a*".repeat(10_000);
    answered("10,000 stars", Constraint::Regex(r));
    let r = format!("{}a", "(?:".repeat(10_000));
    refused("10,000 unclosed groups", Constraint::Regex(r), "");
    // A 10,000-long chain of rules, and one 10,000-deep through rule recursion of the output.
    let mut g = String::from("root ::= r0\n");
    for i in 0..10_000 {
        g.push_str(&format!("r{i} ::= \"x\" r{}\n", i + 1));
    }
    g.push_str("r10000 ::= \"y\"\n");
    let (parsed, dt) = timed(|| ebnf::parse(&g));
    within_bound("parsing a 10,000-rule chain", dt, 1);
    answered("10,000-rule chain", Constraint::Grammar(parsed.unwrap())).expect("a 10,000-rule chain compiles");
    let mut g = String::from("root ::= r0\n");
    for i in 0..10_000 {
        g.push_str(&format!("r{i} ::= \"(\" r{} \")\"\n", i + 1));
    }
    g.push_str("r10000 ::= \"y\"\n");
    answered("10,000-deep nested rules", Constraint::Grammar(ebnf::parse(&g).unwrap()))
        .expect("10,000-deep nested rules compile");
}

#[test]
fn cyclic_and_dangling_refs_are_refused() {
    refused("$ref #", schema(json!({"$ref": "#"})), "");
    refused(
        "a → b → a",
        schema(json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})),
        "",
    );
    refused("allOf self", schema(json!({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"})), "");
    refused(
        "required self",
        schema(json!({"type": "object", "properties": {"x": {"$ref": "#"}}, "required": ["x"]})),
        "",
    );
    refused("dangling", schema(json!({"$ref": "#/$defs/nope"})), "");
    refused("remote", schema(json!({"$ref": "https://example.com/s.json"})), "");
    refused("bad pointer", schema(json!({"$ref": "#/properties/~2"})), "");
    // Recursion with a way out is a fine schema.
    answered("optional self", schema(json!({"type": "object", "properties": {"x": {"$ref": "#"}}})))
        .expect("an optional self-reference compiles");
}

#[test]
fn huge_enums_and_objects_are_refused_or_compiled() {
    let big: Vec<Value> = (0..100_000).map(|i| json!(format!("v{i}"))).collect();
    refused("100,000-value enum", schema(json!({"enum": big})), "enum");
    let big: Vec<String> = (0..100_000).map(|i| format!("v{i}")).collect();
    // One finite lexeme (a trie), whatever its size: compiled to one terminal, or refused.
    if let Some(stats) = answered("100,000-option choice", Constraint::Choice(big)) {
        assert!(stats["engine"] == "dfa" || stats["terminals"] == 1, "{stats}");
    }
    let props: serde_json::Map<String, Value> =
        (0..100_000).map(|i| (format!("p{i}"), json!({"type": "integer"}))).collect();
    refused("100,000 properties", schema(json!({"type": "object", "properties": props})), "properties");
    let required: Vec<String> = (0..100_000).map(|i| format!("p{i}")).collect();
    refused("100,000 required", schema(json!({"type": "object", "required": required})), "required");
    let any_of: Vec<Value> = (0..100_000).map(|i| json!({"const": i})).collect();
    answered("100,000 anyOf", schema(json!({"anyOf": any_of})));
    let alts = (0..100_000).map(|i| format!("\"w{i}\"")).collect::<Vec<_>>().join(" | ");
    let (g, dt) = timed(|| ebnf::parse(&format!("root ::= {alts}")));
    within_bound("parsing 100,000 alternatives", dt, 1);
    // One finite lexeme (a trie), not 100,000 terminals.
    let stats = answered("100,000 alternatives", Constraint::Grammar(g.unwrap())).expect("compiles");
    assert!(stats["engine"] == "dfa" || stats["terminals"] == 1, "{stats}");
    // Values checked against the grammar of the keywords beside them, and values excluded by
    // `not`: both are bounded (the rewrites grow with the values).
    let long: Vec<Value> = (0..256).map(|i| json!(format!("{}{i}@example.com", "x".repeat(480)))).collect();
    answered(
        "256 long enum values beside a format",
        schema(json!({"enum": long, "format": "email", "maxLength": 600})),
    );
    let arrays: Vec<Value> = (0..256).map(|i| json!(vec![i; 150])).collect();
    answered(
        "256 long array values beside item keywords",
        schema(json!({"enum": arrays, "items": {"minimum": 0}, "maxItems": 300})),
    );
    let huge: serde_json::Map<String, Value> = (0..5_000).map(|i| (format!("k{i}"), json!(i))).collect();
    refused("not of a 5,000-member object", schema(json!({"not": {"const": huge}})), "not");
    let closed: serde_json::Map<String, Value> = (0..999).map(|i| (format!("k{i}"), json!({}))).collect();
    answered(
        "not of a closed 999-property object",
        schema(json!({"type": "object", "not": {"properties": closed, "additionalProperties": false}})),
    );
}

// ---- tokenizer files -------------------------------------------------------------------------

/// `bytes` as `tokenizer.json` in a temporary directory (removed when the guard drops).
fn tokenizer_file(tag: &str, bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::Builder::new().prefix(&format!("strictly-hostile-{tag}-")).tempdir().unwrap();
    let p = dir.path().join("tokenizer.json");
    std::fs::write(&p, bytes).unwrap();
    (dir, p)
}

fn embedded_json() -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/stories260K/tokenizer.json"),
        )
        .unwrap(),
    )
    .unwrap()
}

#[test]
fn tokenizer_files_with_missing_fields_are_refused() {
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    let edit = |f: &dyn Fn(&mut Value)| {
        let mut v = embedded_json();
        f(&mut v);
        serde_json::to_vec(&v).unwrap()
    };
    cases.push(("no model", edit(&|v| drop(v.as_object_mut().unwrap().shift_remove("model")))));
    cases.push(("no vocab", edit(&|v| drop(v["model"].as_object_mut().unwrap().shift_remove("vocab")))));
    cases.push(("no model type", edit(&|v| drop(v["model"].as_object_mut().unwrap().shift_remove("type")))));
    cases.push(("no merges", edit(&|v| drop(v["model"].as_object_mut().unwrap().shift_remove("merges")))));
    cases.push(("empty vocab", edit(&|v| v["model"]["vocab"] = json!({}))));
    cases.push(("vocab a string", edit(&|v| v["model"]["vocab"] = json!("x"))));
    cases.push(("ids negative", edit(&|v| v["model"]["vocab"] = json!({"a": -1, "b": 0}))));
    cases.push(("ids huge", edit(&|v| v["model"]["vocab"] = json!({"a": 4_000_000_000u64, "b": 0}))));
    cases.push(("added tokens not a list", edit(&|v| v["added_tokens"] = json!({"x": 1}))));
    cases.push(("added token without id", edit(&|v| v["added_tokens"] = json!([{"content": "<x>", "special": true}]))));
    cases.push(("not JSON", b"{\"model\": ".to_vec()));
    cases.push(("empty file", Vec::new()));
    cases.push(("a JSON array", b"[]".to_vec()));
    let mut bad_utf8 = serde_json::to_vec(&embedded_json()).unwrap();
    let at = bad_utf8.windows(3).position(|w| w == b"\"a\"").unwrap();
    bad_utf8[at + 1] = 0xFF;
    cases.push(("invalid UTF-8 in a token", bad_utf8));
    for (i, (what, bytes)) in cases.into_iter().enumerate() {
        let (dir, p) = tokenizer_file(&i.to_string(), &bytes);
        let (r, dt) = timed(|| {
            std::panic::catch_unwind(|| Vocab::from_tokenizer_json(&p)).unwrap_or_else(|_| panic!("{what}: panicked"))
        });
        drop(dir);
        within_bound(what, dt, 1);
        match r {
            Ok(v) => eprintln!("hostile tokenizer {what}: loaded ({} tokens) in {dt:?}", v.len()),
            Err(e) => {
                assert_clear(&e, what);
                assert!(matches!(e, Error::Tokenizer { .. } | Error::Limit { .. }), "{what}: {e:?}");
                eprintln!("hostile tokenizer {what}: {dt:?}: {e}");
            }
        }
    }
    // Absent file and a directory.
    let e = Vocab::from_tokenizer_json("/nonexistent/tokenizer.json").err().unwrap();
    assert!(e.to_string().contains("/nonexistent/tokenizer.json"), "{e}");
    assert!(Vocab::from_tokenizer_json(std::env::temp_dir()).is_err());
}

// ---- the command line: invalid UTF-8 in every text input ---------------------------------------

fn strictly(args: &[&std::ffi::OsStr]) -> (i32, String) {
    let (out, dt) = timed(|| Command::new(env!("CARGO_BIN_EXE_strictly")).args(args).output().unwrap());
    // Process start included; the CLI loads the embedded vocabulary too.
    within_bound(&format!("{args:?}"), dt, 5);
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn invalid_utf8_in_every_cli_text_input_is_exit_2() {
    use std::os::unix::ffi::OsStrExt;
    let os = |b: &[u8]| std::ffi::OsStr::from_bytes(b).to_owned();
    let (guard, tok) = tokenizer_file("cli-tok", &serde_json::to_vec(&embedded_json()).unwrap());
    let dir = guard.path();
    let bad_grammar = dir.join("bad.gbnf");
    std::fs::write(&bad_grammar, b"root ::= \"\xff\xfe\"\n").unwrap();
    let bad_schema = dir.join("bad.json");
    std::fs::write(&bad_schema, b"{\"const\": \"\xc3\x28\"}").unwrap();
    let bad_tok = dir.join("bad-tok.json");
    std::fs::write(&bad_tok, b"{\"model\": {\"vocab\": {\"\xff\": 0}}}").unwrap();
    let t = tok.as_os_str().to_owned();
    let cases: Vec<(&str, Vec<std::ffi::OsString>)> = vec![
        ("regex argument", vec![os(b"check"), os(b"--tokenizer"), t.clone(), os(b"--regex"), os(b"a\xffb")]),
        ("choice argument", vec![os(b"sample"), os(b"--tokenizer"), t.clone(), os(b"--choice"), os(b"\xc0\xaf")]),
        (
            "grammar file",
            vec![os(b"check"), os(b"--tokenizer"), t.clone(), os(b"--grammar"), bad_grammar.into_os_string()],
        ),
        (
            "schema file",
            vec![os(b"check"), os(b"--tokenizer"), t.clone(), os(b"--schema"), bad_schema.into_os_string()],
        ),
        ("tokenizer file", vec![os(b"check"), os(b"--tokenizer"), bad_tok.into_os_string(), os(b"--regex"), os(b"a")]),
        (
            "tokenizer path",
            vec![os(b"check"), os(b"--tokenizer"), os(b"/tmp/\xff/tokenizer.json"), os(b"--regex"), os(b"a")],
        ),
    ];
    for (what, args) in cases {
        let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        let (code, err) = strictly(&args);
        assert_eq!(code, 2, "{what}: exit {code}, stderr {err:?}");
        assert!(!err.trim().is_empty() && !err.contains("panicked"), "{what}: {err:?}");
        eprintln!("hostile cli {what}: {}", err.trim());
    }
}
