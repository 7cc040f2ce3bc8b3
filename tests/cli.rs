//! The command line, used as a new user would: `strictly sample` over regexes with every real
//! tokenizer (every sample must fully match, checked by the independent `regex` crate), and
//! bad input exits 2 with a one-line message.

use std::process::Command;

use crate::common::{shared_data, TOKENIZERS};

fn strictly(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_strictly")).args(args).output().expect("run strictly");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).expect("stdout is UTF-8"),
        String::from_utf8(out.stderr).expect("stderr is UTF-8"),
    )
}

const SAMPLE_REGEXES: &[&str] = &[
    r"[a-z]{1,8}( [a-z]{1,8}){0,3}",
    r"\p{Greek}{1,6}|[ぁ-ゖ]{2,4}|[😀-🙏]",
    r"[0-9]{3}-[0-9]{2}-[0-9]{4}",
    r"(red|green|blue|cyan|magenta|yellow)(, (red|green|blue)){0,2}",
    r#"\{"id": [1-9][0-9]{0,5}, "ok": (true|false)\}"#,
    r"(?i)hello|wörld",
    r"[^\n]{0,10}\n?",
];

#[test]
fn sampled_outputs_match_their_regex_for_every_tokenizer() {
    let Some(data) = shared_data() else { return };
    for name in TOKENIZERS {
        let tok = data.join("tokenizers").join(name).join("tokenizer.json");
        for re in SAMPLE_REGEXES {
            let full = regex::Regex::new(&format!("^(?:{re})$")).unwrap();
            let (code, out, err) = strictly(&[
                "sample",
                "--tokenizer",
                tok.to_str().unwrap(),
                "--regex",
                re,
                "-n",
                "4",
                "--seed",
                "7",
                "--max-tokens",
                "24",
            ]);
            assert_eq!(code, 0, "{name} {re}: {err}");
            let lines: Vec<&str> = out.lines().collect();
            assert_eq!(lines.len(), 4, "{name} {re}: {out}");
            for line in lines {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                let text = v["text"].as_str().unwrap();
                let reason = v["finish_reason"].as_str().unwrap();
                assert!(reason == "stop" || reason == "length", "{line}");
                assert!(v["tokens"].as_u64().unwrap() <= 24, "{line}");
                // Never truncated: "length" samples are complete too.
                assert!(full.is_match(text), "{name} {re}: {text:?} ({reason}) does not match");
            }
        }
    }
}

#[test]
fn same_seed_same_samples() {
    let Some(data) = shared_data() else { return };
    let tok = data.join("tokenizers/gpt2/tokenizer.json");
    let run = |seed: &str| {
        strictly(&[
            "sample",
            "--tokenizer",
            tok.to_str().unwrap(),
            "--regex",
            "[a-z ]{5,20}",
            "-n",
            "3",
            "--seed",
            seed,
        ])
        .1
    };
    let three = run("3");
    assert_eq!(three.lines().count(), 3, "{three}");
    assert_eq!(three, run("3"));
    assert_ne!(three, run("4"));
}

#[test]
fn choice_samples_are_options() {
    let Some(data) = shared_data() else { return };
    let tok = data.join("tokenizers/llama-3.2/tokenizer.json");
    let (code, out, err) =
        strictly(&["sample", "--tokenizer", tok.to_str().unwrap(), "--choice", "yes", "no", "maybe so", "-n", "6"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 6, "{out}");
    for line in out.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(["yes", "no", "maybe so"].contains(&v["text"].as_str().unwrap()), "{line}");
        assert_eq!(v["finish_reason"], "stop");
    }
}

#[test]
fn bad_input_exits_2_with_one_line() {
    // The byte-level vocabulary: no data needed, so every case runs everywhere.
    let tok = "bytes".to_string();
    let tmp = tempfile::Builder::new().prefix("strictly-not-json-").tempdir().unwrap();
    let not_json = tmp.path().join("not.json");
    std::fs::write(&not_json, "{ not json").unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["sample", "--tokenizer", &tok, "--regex", "ab(c"], "column 3"),
        (vec!["sample", "--tokenizer", &tok, "--regex", "a{3,1}"], "invalid regex"),
        (vec!["check", "--tokenizer", &tok, "--regex", "(a|b)*a(a|b){40}"], "limit"),
        (vec!["check", "--tokenizer", "/nonexistent/tokenizer.json", "--regex", "a"], "cannot read"),
        (vec!["check", "--tokenizer", not_json.to_str().unwrap(), "--regex", "a"], "not JSON"),
        (vec!["sample", "--tokenizer", &tok, "--regex", "a", "--bogus"], "--bogus"),
        (vec!["sample", "--tokenizer", &tok], "required"),
        (vec!["sample", "--tokenizer", &tok, "--regex", "a", "--temperature", "-1"], "temperature"),
        (vec!["sample", "--tokenizer", &tok, "--regex", "[a-z]{50}", "--max-tokens", "3"], "max_tokens"),
        (vec!["sample", "--tokenizer", &tok, "--regex", r"[^\s\S]"], "no output"),
    ];
    for (args, needle) in cases {
        // Each refusal is checked by its message: the exponential regex by the limit it hit
        // (a deterministic size limit), never by how long it took.
        let (code, out, err) = strictly(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: printed {out:?} before failing");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: not one line: {err}");
        assert!(err.contains(needle), "{args:?}: {err:?} lacks {needle:?}");
    }
}

#[test]
fn check_prints_facts() {
    let Some(data) = shared_data() else { return };
    let tok = data.join("tokenizers/qwen2.5/tokenizer.json");
    let (code, out, err) = strictly(&["check", "--tokenizer", tok.to_str().unwrap(), "--regex", r#"\{"a": \d\}"#]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["forced_prefix"], "{\"a\": ");
    assert_eq!(v["accepts_empty"], false);
    assert_eq!(v["vocab_size"], 151665);
}

#[test]
fn schema_whitespace_and_exact_flags() {
    let dir = tempfile::Builder::new().prefix("strictly-cli-ws-").tempdir().unwrap();
    let schema = dir.path().join("s.json");
    std::fs::write(&schema, r#"{"type":"object","properties":{"n":{"type":"integer"},"l":{"type":"array","items":{"type":"boolean"},"maxItems":2}},"required":["n","l"]}"#).unwrap();
    let run = |extra: &[&str]| -> Vec<String> {
        let mut args =
            vec!["sample", "--tokenizer", "bytes", "--schema", schema.to_str().unwrap(), "-n", "8", "--seed", "5"];
        args.extend_from_slice(extra);
        let (code, out, err) = strictly(&args);
        assert_eq!(code, 0, "{err}");
        out.lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["text"].as_str().unwrap().to_string())
            .collect()
    };
    for (flags, layout) in [(&[][..], "compact"), (&["--whitespace", "pretty"][..], "pretty")] {
        for text in run(flags) {
            let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let want = if layout == "pretty" { serde_json::to_string_pretty(&v) } else { serde_json::to_string(&v) };
            assert_eq!(text, want.unwrap(), "{layout}");
            // The sensible language: only the named keys, integers within i64.
            assert_eq!(v.as_object().unwrap().len(), 2, "{text}");
            assert!(v["n"].is_i64(), "{text}");
        }
    }
    // --exact: keys the schema does not name are in the language (seeded random logits write
    // them), and any bounded whitespace.
    let exact = run(&["--exact", "--whitespace", "flexible"]);
    let keys = |t: &String| serde_json::from_str::<serde_json::Value>(t).unwrap().as_object().unwrap().len();
    assert!(exact.iter().any(|t| keys(t) > 2), "{exact:?}");
    let (code, _, err) = strictly(&["check", "--tokenizer", "bytes", "--regex", "a", "--whitespace", "tabs"]);
    assert_eq!((code, err.lines().count()), (2, 1), "{err}");
}

/// A grammar with a rule `root` never reaches loads (as in llama.cpp); `check` names the rule
/// in its `warnings` and on stderr.
#[test]
fn check_reports_unused_grammar_rules_as_warnings() {
    let dir = tempfile::Builder::new().prefix("strictly-cli-unused-").tempdir().unwrap();
    let grammar = dir.path().join("g.gbnf");
    std::fs::write(&grammar, "root ::= \"a\"\nspare ::= \"b\"\n").unwrap();
    let (code, out, err) = strictly(&["check", "--tokenizer", "bytes", "--grammar", grammar.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let warnings = v["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{v}");
    assert!(warnings[0].as_str().unwrap().ends_with("2:1: rule `spare` is not reachable from `root` (ignored)"), "{v}");
    assert!(err.contains("warning:") && err.contains("`spare`"), "{err}");
    let (_, out, _) = strictly(&["check", "--tokenizer", "bytes", "--regex", "a"]);
    assert_eq!(serde_json::from_str::<serde_json::Value>(out.trim()).unwrap()["warnings"], serde_json::json!([]));
}

/// `strictly chat` driven through a pipe, as a script would: one reply line per user line on
/// stdout, notices on stderr; `/regex` and `/schema` hold the replies after them and switch off
/// without an argument; `/tools` takes an OpenAI tools file; bad commands and files are notices,
/// not the end; `/exit` ends with status 0, and so does the end of input.
#[test]
fn chat_over_a_pipe() {
    use std::io::Write;
    let dir = tempfile::Builder::new().prefix("strictly-chat-").tempdir().unwrap();
    let schema = dir.path().join("pet.json");
    std::fs::write(
        &schema,
        r#"{"type":"object","properties":{"name":{"type":"string","maxLength":12},"legs":{"type":"integer","minimum":0,"maximum":8}},"required":["name","legs"],"additionalProperties":false}"#,
    )
    .unwrap();
    let tools = dir.path().join("tools.json");
    std::fs::write(&tools, r#"[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]"#).unwrap();
    let script = format!(
        "Once upon a time\n/regex (yes|no)\nWas it sunny?\n/schema {}\nA pet?\n/schema\n/regex\n/bogus\n/schema /no/such/file.json\n/tools {}\nWeather in Paris?\n/tools\n/reset\nThe end\n/exit\nnot read\n",
        schema.display(),
        tools.display()
    );
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_strictly"))
        .args(["chat", "--max-tokens", "24", "--seed", "3"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run strictly chat");
    child.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap());
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // Five user turns (the tools turn may hold a call over two lines).
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines.len() >= 5, "{stdout}");
    assert!(lines[1] == "yes" || lines[1] == "no", "the regex holds: {:?}", lines[1]);
    let pet: serde_json::Value = serde_json::from_str(lines[2]).expect("the schema holds");
    assert!(pet["name"].is_string() && pet["legs"].is_u64(), "{pet}");
    for notice in [
        "replies match (yes|no)",
        "replies follow the schema",
        "/schema is off",
        "/regex is off",
        "unknown command /bogus",
        "/no/such/file.json",
        "may call get_weather",
        "/tools is off",
        "forgotten",
    ] {
        assert!(stderr.contains(notice), "{notice:?} in {stderr}");
    }
    drop(dir);
    // The end of input ends it too.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_strictly"))
        .args(["chat", "--max-tokens", "4"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
}

/// A reader that goes away (`strictly sample … | head -1`) ends the writer quietly, as it ends
/// any Unix tool: no panic message on stderr.
#[cfg(unix)]
#[test]
fn a_closed_pipe_ends_output_quietly() {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_strictly"))
        .args(["sample", "--regex", "[a-z]{20,40}", "-n", "1000000"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 64];
    child.stdout.as_mut().unwrap().read_exact(&mut first).unwrap();
    drop(child.stdout.take());
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    let status = child.wait().unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(status.signal(), Some(libc::SIGPIPE), "{status:?}: {stderr}");
}

/// A help page read by a reader that is already gone (`strictly sample --help | head -0`) ends
/// quietly too: the pipe's reading end is closed before the child starts, so its first write
/// meets it, whatever the timing.
#[cfg(unix)]
#[test]
fn a_help_page_into_a_closed_pipe_ends_quietly() {
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::process::ExitStatusExt;
    let mut fds = [0; 2];
    // SAFETY: pipe(2) fills two fresh descriptors, each then owned by exactly one OwnedFd.
    let (read_end, write_end) = unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
        (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))
    };
    drop(read_end);
    for args in [&["sample", "--help"][..], &["--help"], &["--version"]] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_strictly"))
            .args(args)
            .stdout(std::process::Stdio::from(write_end.try_clone().unwrap()))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{args:?}: {:?}: {stderr}", out.status);
    }
}
