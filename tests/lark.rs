//! Lark grammars end to end:
//! - every `.lark` file in `../shared/data/grammars/{lark,outlines,llguidance}` either
//!   compiles (to the IR and to an automaton) or is refused with the error listed in
//!   [`SHARED`], so neither can change silently;
//! - a tier with Python's own `lark` package: samples strictly draws (seeded random logits)
//!   from each grammar that compiles, and from inline grammars exercising each construct, must
//!   parse with `lark.Lark(grammar, parser="earley", lexer="dynamic_complete")`
//!   (`tests/lark/parse_samples.py`). Without python3's `lark` the tier says SKIPPED loudly,
//!   and fails under `STRICTLY_REQUIRE_DATA=1` (`.ci/run` installs it);
//! - the command line: `--grammar FILE.lark` and `--lark FILE`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde_json::{json, Value};
use strictly::automaton::{Compiled, Constraint, VocabEnv};
use strictly::grammar::{lark, reference::Reference, Grammar};
use strictly::Vocab;

use crate::common::shared_data;

/// Each shared Lark file and what it gives: `None` compiles; `Some(text)` is refused with an
/// error containing `text`.
const SHARED: &[(&str, Option<&str>)] = &[
    // Libraries to import, with no start rule of their own (Lark's `common` is built in, in
    // an equivalent form: its file's `ESCAPED_STRING` has a lookbehind).
    ("lark/common.lark", Some("27:35: invalid regex: lookarounds")),
    ("lark/unicode.lark", Some("1:1: no rule `start`")),
    ("outlines/common.lark", Some("1:1: no rule `start`")),
    ("lark/examples-composition-csv.lark", None),
    ("lark/examples-composition-json.lark", None),
    // Python's indentation grammars: `_INDENT`/`_DEDENT` come from Lark's postlexer.
    ("lark/examples-python2.lark", Some("167:10: `_INDENT` is declared with %declare and used at")),
    ("lark/python.lark", Some("275:10: `_INDENT` is declared with %declare and used at")),
    // `MULTILINE_COMMENT: /\/\*(\*(?!\/)|[^*])*\*\//`: a lookahead (llguidance refuses it too).
    ("lark/examples-verilog.lark", Some("126:28: invalid regex: lookarounds")),
    // `OP: /[+*]|[?](?![a-z])/`: a lookahead past the token's end.
    ("lark/lark.lark", Some("48:14: invalid regex: lookarounds")),
    ("llguidance/lark.lark", None),
    ("llguidance/rfc.lark", None),
    ("outlines/arithmetic.lark", None),
    ("outlines/json.lark", None),
];

/// Grammars Python's `lark` itself refuses with `lexer="dynamic_complete"` (strictly reads
/// them): name → part of lark's message.
const LARK_REFUSES: &[(&str, &str)] = &[
    // `""` alternatives (llguidance reads an empty literal as the empty string, as strictly does).
    ("llguidance/rfc.lark", "Empty terminals are not allowed"),
];

fn shared_files(data: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for dir in ["lark", "outlines", "llguidance"] {
        let Ok(entries) = std::fs::read_dir(data.join("grammars").join(dir)) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "lark") {
                let name = format!("{dir}/{}", p.file_name().unwrap().to_string_lossy());
                out.push((name, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

fn byte_env() -> Arc<VocabEnv> {
    VocabEnv::new(Arc::new(Vocab::byte_level()))
}

#[test]
fn every_shared_lark_grammar_compiles_or_is_refused_clearly() {
    let Some(data) = shared_data() else { return };
    let files = shared_files(&data);
    let names: Vec<&str> = files.iter().map(|f| f.0.as_str()).collect();
    let mut listed: Vec<&str> = SHARED.iter().map(|s| s.0).collect();
    listed.sort();
    assert_eq!(names, listed, "the shared Lark files and the SHARED table differ: list each new file's outcome");
    let env = byte_env();
    for (name, text) in &files {
        let want = SHARED.iter().find(|s| s.0 == name).unwrap().1;
        match (lark::parse(text, &Default::default()), want) {
            (Ok(g), None) => {
                Compiled::new(&env, &Constraint::Grammar(g)).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
            (Err(e), Some(w)) => assert!(e.to_string().contains(w), "{name}: {e} (expected {w:?})"),
            (Ok(_), Some(w)) => panic!("{name}: compiles, expected the error {w:?}"),
            (Err(e), None) => panic!("{name}: {e}"),
        }
    }
}

/// Inline grammars for the Python tier, one construct or more each: (name, text).
const INLINE: &[(&str, &str)] = &[
    ("ignore", "start: NAME (\",\" NAME)*\nNAME: /[a-z]+/\n%import common.WS\n%ignore WS"),
    (
        "templates",
        "start: pair{key, NUMBER} (\";\" pair{key, STRING})*\npair{k, v}: k \"=\" v\nkey: /[a-z]/\n\
         %import common.NUMBER\n%import common.ESCAPED_STRING -> STRING",
    ),
    ("operators", "start: a~2 b~1..3 [c] (a | b)* \"z\"i\na: \"a\"\nb: \"b\" | \"B\"\nc: \"c\"+"),
    ("lazy", "start: S (\" \" S)*\nS: \"<\" /.*?/ \">\""),
    ("ranges", "start: HEX+\nHEX: \"0\"..\"9\" | \"a\"..\"f\""),
    ("comments", "start: stmt+\nstmt: WORD \";\"\n%import common (WORD, WS, CPP_COMMENT, C_COMMENT)\n%ignore WS\n%ignore CPP_COMMENT\n%ignore C_COMMENT"),
    ("override", "start: A B\nA: \"a\"\nB: \"b\"\n%override A: \"x\" | \"y\"\n%extend B: \"c\""),
    ("flags", "start: K+\nK: /select|from/i | /[0-9]+/"),
];

fn python_has_lark() -> Result<(), String> {
    let out =
        Command::new("python3").args(["-c", "import lark"]).output().map_err(|e| format!("cannot run python3: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("").to_string())
    }
}

fn data_required() -> bool {
    std::env::var("STRICTLY_REQUIRE_DATA").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// `n` samples of `g` with seeded random logits over `vocab`, of at most `max_tokens` tokens
/// (more where the grammar's shortest output needs more).
fn samples(g: &Grammar, vocab: &Arc<Vocab>, n: u64, max_tokens: usize) -> Vec<String> {
    let c = Compiled::new(&VocabEnv::new(vocab.clone()), &Constraint::Grammar(g.clone())).unwrap();
    // Where no output fits `max_tokens` (rfc.lark: 76 tokens at least), eight times that at
    // once: a refused request costs seconds on a grammar that large.
    let fits = c.min_tokens().is_some_and(|m| m as usize <= max_tokens);
    (0..n)
        .map(|seed| {
            let first = fits.then(|| crate::common::random_sample(&c, seed, max_tokens).ok()).flatten();
            let out = first.unwrap_or_else(|| crate::common::random_sample(&c, seed, max_tokens * 8).unwrap());
            String::from_utf8(out.bytes).expect("constrained output is UTF-8")
        })
        .collect()
}

#[test]
fn samples_parse_with_python_lark() {
    let Some(data) = shared_data() else { return };
    if let Err(why) = python_has_lark() {
        if data_required() {
            panic!(
                "python3 cannot import lark ({why}) and STRICTLY_REQUIRE_DATA is set: `python3 -m pip install lark`"
            );
        }
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "!!! SKIPPED: python3 cannot import lark ({why}): Lark samples not checked (python3 -m pip install lark)"
        );
        return;
    }
    let mut grammars: Vec<(String, String)> = shared_files(&data)
        .into_iter()
        .filter(|(name, _)| SHARED.iter().any(|s| s.0 == name && s.1.is_none()))
        .collect();
    grammars.extend(INLINE.iter().map(|(n, t)| (format!("inline/{n}"), t.to_string())));
    let vocabs = [Arc::new(Vocab::embedded()), Arc::new(Vocab::byte_level())];
    let mut cases = Vec::new();
    let mut drawn = 0;
    for (name, text) in &grammars {
        let g = lark::parse(text, &Default::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let r = Reference::new(&g);
        let mut all = Vec::new();
        for v in &vocabs {
            for s in samples(&g, v, 8, 48) {
                assert!(r.accepts(s.as_bytes()), "{name}: the reference rejects the sample {s:?}");
                all.push(s);
            }
        }
        drawn += all.len();
        cases.push(json!({"name": name, "grammar": text, "start": "start", "samples": all}));
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/lark/parse_samples.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run python3");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(serde_json::to_string(&cases).unwrap().as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "parse_samples.py failed");
    let results: BTreeMap<String, Value> = serde_json::from_slice(&out.stdout).unwrap();
    let mut failures = Vec::new();
    for (name, r) in &results {
        let refused_as = LARK_REFUSES.iter().find(|x| x.0 == name).map(|x| x.1);
        match (r.get("refused").and_then(Value::as_str), refused_as) {
            (Some(why), Some(want)) if why.contains(want) => {}
            (Some(why), _) => failures.push(format!("{name}: lark refuses the grammar: {why}")),
            (None, Some(want)) => failures.push(format!("{name}: lark now reads it (LARK_REFUSES says {want:?})")),
            (None, None) => {
                for x in r["rejected"].as_array().unwrap() {
                    failures.push(format!("{name}: lark rejects the sample {}: {}", x[0], x[1]));
                }
            }
        }
    }
    assert_eq!(results.len(), cases.len());
    assert!(failures.is_empty(), "{} of {drawn} samples:\n{}", failures.len(), failures.join("\n"));
}

// ---- the command line -------------------------------------------------------------------------

fn strictly(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_strictly")).args(args).output().expect("run strictly");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("lark");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn cli_reads_lark_by_extension_or_flag() {
    let text = "start: \"id-\" NUM (\",\" NUM)*\nNUM: /[0-9]{1,4}/\n%ignore \" \"";
    let g = lark::parse(text, &Default::default()).unwrap();
    let r = Reference::new(&g);
    let by_ext = temp_file("ids.lark", text);
    let by_flag = temp_file("ids.txt", text);
    for args in [
        vec!["sample", "--tokenizer", "bytes", "-n", "4", "--seed", "2", "--grammar", by_ext.to_str().unwrap()],
        vec!["sample", "--tokenizer", "bytes", "-n", "4", "--seed", "2", "--lark", by_flag.to_str().unwrap()],
    ] {
        let (code, out, err) = strictly(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
        for line in out.lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            let t = v["text"].as_str().unwrap();
            assert!(r.accepts(t.as_bytes()), "{t:?}");
        }
    }
    // The same file as GBNF (no .lark, no --lark) is a GBNF error.
    let (code, _, _) = strictly(&["check", "--tokenizer", "bytes", "--grammar", by_flag.to_str().unwrap()]);
    assert_eq!(code, 2);
    // A bad Lark grammar: exit 2, one line naming the file, the line and the problem.
    let bad = temp_file("bad.lark", "start: a\n  | NOPE\na: \"a\"");
    let (code, _, err) = strictly(&["check", "--tokenizer", "bytes", "--grammar", bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("bad.lark") && err.contains("2:5") && err.contains("undefined terminal `NOPE`"), "{err}");
}
