//! `strictly bench` as outside checks run it: the real binary on a small directory of cases in
//! every input layout (JSONSchemaBench, JSON Schema Test Suite, JSONL, bare schema). Checks that
//! every per-case line and the summary JSON carry peer-bench's fields, that case ids, groups and
//! counts are peer-bench's, and that statuses are right: a schema that does not compile is a
//! `compile_error`; `{"type":"integer"}` with a valid `5` and an invalid `"x"` is `ok` once it
//! compiles. Written to hold both before and after the JSON Schema compiler lands.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::shared_data;

const STATUSES: &[&str] =
    &["ok", "compile_error", "rejected_valid", "accepted_invalid", "engine_error", "timeout", "crash", "panic"];
const OUTCOMES: &[&str] = &["accepted", "rejected", "not_accepting", "engine_error"];

/// peer-bench's per-case fields that are always present.
const CASE_FIELDS: &[&str] = &[
    "engine",
    "idx",
    "id",
    "group",
    "status",
    "n_instances",
    "n_valid",
    "n_valid_accepted",
    "n_invalid",
    "n_invalid_rejected",
    "n_tokens",
    "n_masks",
    "instances",
];
const INSTANCE_FIELDS: &[&str] = &["idx", "expected_valid", "n_tokens", "outcome", "agree", "commit_ns_total"];
const SUMMARY_FIELDS: &[&str] = &[
    "engine",
    "tokenizer",
    "vocab_size",
    "cases_dir",
    "format",
    "clock",
    "workers",
    "timeout_s",
    "wall_s",
    "tokenizer_load_ms",
    "loadavg_start",
    "loadavg_end",
    "engine_init_ms",
    "pretty",
    "only_valid",
    "lenient",
    "total",
    "groups",
];
const GROUP_FIELDS: &[&str] = &[
    "cases",
    "compiled",
    "ok",
    "statuses",
    "valid",
    "valid_accepted",
    "invalid",
    "invalid_rejected",
    "valid_compiled",
    "invalid_compiled",
    "schemas_with_valid",
    "schemas_all_valid_accepted",
    "valid_rejected_in",
    "tests_agree",
    "tests_total_compiled",
    "tests_total_all",
    "tokens",
    "masks",
    "mask_us",
    "mask_us_p999",
    "compile_ms_median",
    "compile_ms_p90",
    "compile_ms_max",
    "ttfm_ms_median",
    "ttfm_ms_p90",
    "ttfm_ms_max",
];

/// A temporary directory, removed on drop.
struct TempDir(tempfile::TempDir);

impl TempDir {
    fn new(name: &str) -> TempDir {
        TempDir(tempfile::Builder::new().prefix(&format!("strictly-bench-{name}-")).tempdir().unwrap())
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    /// The cases directory (summaries go beside it, not in it).
    fn cases(&self) -> PathBuf {
        self.path().join("cases")
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.cases().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

/// The cases every test uses: 5 cases in 4 groups, 9 instances (6 valid, 3 invalid).
fn write_cases(t: &TempDir) {
    t.write(
        "jsb/Github_easy---o1.json",
        r#"{"description":"an integer","schema":{"type":"integer"},
            "tests":[{"description":"five","data":5,"valid":true},{"description":"a string","data":"x","valid":false}]}"#,
    );
    t.write("jsb/Kubernetes/bare.json", r#"{"type":"string","maxLength":3}"#);
    t.write(
        "suite/type.json",
        r#"[{"description":"integer type","schema":{"type":"integer"},
             "tests":[{"description":"one","data":1,"valid":true},{"description":"float","data":1.5,"valid":false}]},
            {"description":"object","schema":{"type":"object","properties":{"b":{"type":"boolean"}}},
             "tests":[{"description":"obj","data":{"b":true},"valid":true},{"description":"empty","data":{},"valid":true}]}]"#,
    );
    t.write(
        "more.jsonl",
        "{\"unique_id\":\"u1\",\"json_schema\":\"{\\\"type\\\":\\\"boolean\\\"}\",\"instances\":[true,false],\"invalid_instances\":[0]}\n",
    );
}

fn tiny_tokenizer() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/stories260K/tokenizer.json")
}

struct Run {
    code: i32,
    lines: Vec<Value>,
    stderr: String,
}

fn bench(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_strictly")).arg("bench").args(args).output().expect("run strictly");
    let stdout = String::from_utf8(out.stdout).expect("stdout is UTF-8");
    let lines = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect();
    Run { code: out.status.code().unwrap_or(-1), lines, stderr: String::from_utf8_lossy(&out.stderr).into_owned() }
}

fn by_id<'a>(lines: &'a [Value], id: &str) -> &'a Value {
    lines.iter().find(|l| l["id"] == id).unwrap_or_else(|| panic!("no line for {id}"))
}

/// Checks one per-case line: fields, types, status and outcome sets, counts that add up, and
/// the status peer-bench would give.
fn check_line(l: &Value) {
    for f in CASE_FIELDS {
        assert!(l.get(*f).is_some(), "missing {f}: {l}");
    }
    let status = l["status"].as_str().unwrap();
    assert!(STATUSES.contains(&status), "{l}");
    let insts = l["instances"].as_array().unwrap();
    let n = |k: &str| l[k].as_u64().unwrap() as usize;
    assert_eq!(n("n_valid") + n("n_invalid"), n("n_instances"), "{l}");
    assert!(l.get("mask_ns").is_none(), "raw samples never printed: {l}");
    let compiled = l.get("ttfm_us").is_some();
    if status == "compile_error" {
        assert!(!compiled && insts.is_empty(), "{l}");
        assert!(l["compile_us"].as_f64().is_some() && l["error"].as_str().is_some_and(|e| !e.is_empty()), "{l}");
        return;
    }
    if !compiled {
        assert!(["timeout", "crash", "panic"].contains(&status), "{l}");
        return;
    }
    assert!(l["compile_us"].as_f64().unwrap() <= l["ttfm_us"].as_f64().unwrap(), "{l}");
    assert_eq!(insts.len(), n("n_instances"), "{l}");
    let (mut masks, mut tokens, mut va, mut ir) = (0, 0, 0, 0);
    for (k, i) in insts.iter().enumerate() {
        for f in INSTANCE_FIELDS {
            assert!(i.get(*f).is_some(), "missing instance field {f}: {l}");
        }
        assert_eq!(i["idx"], k);
        let outcome = i["outcome"].as_str().unwrap();
        assert!(OUTCOMES.contains(&outcome), "{i}");
        let valid = i["expected_valid"].as_bool().unwrap();
        let agree = if valid { outcome == "accepted" } else { outcome == "rejected" || outcome == "not_accepting" };
        assert_eq!(i["agree"].as_bool().unwrap(), agree, "{i}");
        va += usize::from(valid && agree);
        ir += usize::from(!valid && agree);
        if outcome == "accepted" {
            assert!(i.get("step").is_none() && i.get("detail").is_none(), "{i}");
        } else {
            assert!(i["step"].as_u64().is_some() && i["detail"].as_str().is_some(), "{i}");
        }
        if outcome == "rejected" {
            assert!(i["rejected_in"].as_str().is_some(), "{i}");
        }
        tokens += i["n_tokens"].as_u64().unwrap() as usize;
        let steps = i.get("mask_us").map_or(0, |m| m["n"].as_u64().unwrap() as usize);
        masks += steps;
        if let Some(per_step) = i.get("step_mask_us") {
            assert_eq!(per_step.as_array().unwrap().len(), steps, "{i}");
        }
    }
    assert_eq!((n("n_masks"), n("n_tokens")), (masks, tokens), "{l}");
    assert_eq!((n("n_valid_accepted"), n("n_invalid_rejected")), (va, ir), "{l}");
    let expected = if va < n("n_valid") || ir < n("n_invalid") {
        ["rejected_valid", "accepted_invalid", "engine_error"].as_slice()
    } else {
        ["ok"].as_slice()
    };
    assert!(expected.contains(&status), "{l}");
    if masks > 0 {
        let m = &l["mask_us"];
        for f in ["n", "mean", "p50", "p95", "p99", "max"] {
            assert!(m[f].as_f64().is_some(), "{l}");
        }
        assert!(m["p50"].as_f64() <= m["max"].as_f64());
        assert!(l["commit_us_mean"].as_f64().is_some(), "{l}");
        // The slowest mask: where it was (its instance's own maximum) and what the thread went
        // through during it.
        let s = &l["mask_slowest"];
        assert_eq!(s["us"], m["max"], "{l}");
        let i = &insts[s["instance"].as_u64().unwrap() as usize];
        assert_eq!(i["mask_us"]["max"], m["max"], "{l}");
        assert!(s["step"].as_u64().unwrap() < i["mask_us"]["n"].as_u64().unwrap(), "{l}");
        for f in ["wall_us", "minflt", "majflt", "nvcsw", "nivcsw"] {
            assert!(s[f].as_f64().is_some(), "{f}: {l}");
        }
    } else {
        assert!(l.get("mask_slowest").is_none(), "{l}");
    }
}

/// `{"type":"integer"}` with `5` (valid) and `"x"` (invalid): `ok` once it compiles.
fn check_integer_case(l: &Value) {
    if l.get("ttfm_us").is_none() {
        assert_eq!(l["status"], "compile_error", "{l}");
        return;
    }
    assert_eq!(l["status"], "ok", "{l}");
    assert_eq!(l["instances"][0]["outcome"], "accepted", "{l}");
    let o = l["instances"][1]["outcome"].as_str().unwrap();
    assert!(o == "rejected" || o == "not_accepting", "{l}");
}

#[test]
fn bench_lines_and_summary_match_peer_bench() {
    let t = TempDir::new("main");
    write_cases(&t);
    let summary = t.path().join("summary.json");
    let cases = t.cases();
    let tok = tiny_tokenizer();
    let r = bench(&[
        "--tokenizer",
        tok.to_str().unwrap(),
        "--cases",
        cases.to_str().unwrap(),
        "--summary-json",
        summary.to_str().unwrap(),
        "--show-failures",
        "3",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("=== strictly bench summary ==="), "{}", r.stderr);

    // Ids, order and groups as peer-bench forms them (sorted paths, depth first).
    let ids: Vec<&str> = r.lines.iter().map(|l| l["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "jsb/Github_easy---o1.json",
            "jsb/Kubernetes/bare.json",
            "more.jsonl#u1",
            "suite/type.json#0",
            "suite/type.json#1"
        ]
    );
    let groups: Vec<&str> = r.lines.iter().map(|l| l["group"].as_str().unwrap()).collect();
    assert_eq!(groups, ["Github_easy", "jsb/Kubernetes", "more", "suite/type", "suite/type"]);
    for (k, l) in r.lines.iter().enumerate() {
        assert_eq!(l["idx"], k);
        assert!(l["engine"].as_str().unwrap().starts_with("strictly "), "{l}");
        check_line(l);
    }
    let counts = |id: &str| {
        let l = by_id(&r.lines, id);
        (l["n_instances"].as_u64().unwrap(), l["n_valid"].as_u64().unwrap(), l["n_invalid"].as_u64().unwrap())
    };
    assert_eq!(counts("jsb/Github_easy---o1.json"), (2, 1, 1));
    assert_eq!(counts("jsb/Kubernetes/bare.json"), (0, 0, 0));
    assert_eq!(counts("more.jsonl#u1"), (3, 2, 1));
    assert_eq!(counts("suite/type.json#1"), (2, 2, 0));
    check_integer_case(by_id(&r.lines, "jsb/Github_easy---o1.json"));

    // The summary JSON: peer-bench's fields, and totals that agree with the lines.
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    for f in SUMMARY_FIELDS {
        assert!(s.get(*f).is_some(), "summary lacks {f}: {s}");
    }
    assert_eq!(s["vocab_size"], 512);
    assert_eq!(
        (s["format"].as_str(), s["clock"].as_str(), s["workers"].as_u64()),
        (Some("compact"), Some("Wall"), Some(1))
    );
    let total = &s["total"];
    for f in GROUP_FIELDS {
        assert!(total.get(*f).is_some(), "total lacks {f}: {total}");
    }
    assert_eq!(total["cases"], 5);
    assert_eq!(
        (total["valid"].as_u64(), total["invalid"].as_u64(), total["tests_total_all"].as_u64()),
        (Some(6), Some(3), Some(9))
    );
    let compiled = r.lines.iter().filter(|l| l.get("ttfm_us").is_some()).count();
    let ok = r.lines.iter().filter(|l| l["status"] == "ok").count();
    assert_eq!((total["compiled"].as_u64(), total["ok"].as_u64()), (Some(compiled as u64), Some(ok as u64)));
    let statuses: u64 = total["statuses"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(statuses, 5);
    let masks: u64 = r.lines.iter().map(|l| l["n_masks"].as_u64().unwrap()).sum();
    assert_eq!(total["masks"].as_u64(), Some(masks));
    let names: Vec<&String> = s["groups"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["Github_easy", "jsb/Kubernetes", "more", "suite/type"]);
    for g in s["groups"].as_object().unwrap().values() {
        for f in GROUP_FIELDS {
            assert!(g.get(*f).is_some(), "group lacks {f}: {g}");
        }
    }
    assert_eq!(s["groups"]["suite/type"]["cases"], 2);
    // The per-group table is printed when there is more than one group.
    assert!(r.stderr.contains("suite/type"), "{}", r.stderr);
}

#[test]
fn bench_in_process_with_filters_and_per_step() {
    let t = TempDir::new("opts");
    write_cases(&t);
    let summary = t.path().join("s.json");
    let tok = tiny_tokenizer();
    let r = bench(&[
        "--tokenizer",
        tok.to_str().unwrap(),
        "--cases",
        t.cases().to_str().unwrap(),
        "--no-isolate",
        "--no-warmup",
        "--only-valid",
        "--per-step",
        "--pretty",
        "--exclude",
        "Kubernetes",
        "--limit",
        "3",
        "--clock",
        "thread-cpu",
        "--recheck-max-ms",
        "0",
        "--summary-json",
        summary.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.lines.len(), 3);
    let ids: Vec<&str> = r.lines.iter().map(|l| l["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["jsb/Github_easy---o1.json", "more.jsonl#u1", "suite/type.json#0"]);
    for l in &r.lines {
        check_line(l);
        assert_eq!(l["n_invalid"], 0, "--only-valid drops invalid instances: {l}");
        for i in l["instances"].as_array().unwrap() {
            if i["n_tokens"].as_u64().unwrap() > 0 {
                assert!(i.get("step_mask_us").is_some(), "--per-step: {i}");
            }
        }
    }
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!((s["format"].as_str(), s["pretty"].as_bool()), (Some("pretty"), Some(true)));
    assert_eq!((s["only_valid"].as_bool(), s["clock"].as_str()), (Some(true), Some("ThreadCpu")));
    assert_eq!(s["total"]["cases"], 3);
    // --recheck-max-ms 0: every case with masks ran twice more; its line keeps the first run's
    // figures, and the summary's slowest masks are the lines' slowest, slowest first.
    let timed: Vec<&Value> = r.lines.iter().filter(|l| l.get("mask_us").is_some()).collect();
    assert!(!timed.is_empty());
    for l in &timed {
        assert_eq!(l["mask_max_rechecks_us"].as_array().map(Vec::len), Some(2), "{l}");
    }
    assert_eq!(s["total"]["rechecked_cases"], timed.len());
    let max = s["total"]["mask_us"]["max"].as_f64().unwrap();
    assert!(s["total"]["mask_max_us_rechecked"].as_f64().unwrap() <= max, "{s}");
    let slowest: Vec<f64> = s["slowest_masks"].as_array().unwrap().iter().map(|m| m["us"].as_f64().unwrap()).collect();
    assert_eq!(slowest.len(), timed.len());
    assert_eq!(slowest[0], max);
    assert!(slowest.windows(2).all(|w| w[0] >= w[1]), "{slowest:?}");
    assert!(r.stderr.contains("cases re-run)"), "{}", r.stderr);

    // --filter and --per-group-limit, isolated with two workers.
    let r = bench(&[
        "--tokenizer",
        tok.to_str().unwrap(),
        "--cases",
        t.cases().to_str().unwrap(),
        "--filter",
        "suite",
        "--per-group-limit",
        "1",
        "--threads",
        "2",
        "--worker-per-case",
        "--summary-json",
        summary.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let ids: Vec<&str> = r.lines.iter().map(|l| l["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["suite/type.json#0"]);
    // Throughput across workers, and the p99s of compile and time to first mask.
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let tp = &s["throughput"];
    assert_eq!(tp["workers"], 2, "{tp}");
    assert!(tp["masks"].as_u64().unwrap() > 0 && tp["masks_per_s_wall"].as_f64().unwrap() > 0.0, "{tp}");
    assert!(tp["masks_per_s_worker"].as_f64().unwrap() > 0.0, "{tp}");
    assert!(s["total"]["ttfm_ms_p99"].as_f64().is_some() && s["total"]["compile_ms_p99"].as_f64().is_some());
    assert!(r.stderr.contains("masks/s over the run's wall time with 2 worker(s)"), "{}", r.stderr);
    check_line(&r.lines[0]);
    check_integer_case(&r.lines[0]);
}

/// A hang, a crash and a panic in one case (injected through the `STRICTLY_BENCH_FAULT` test
/// hook) cost that case only: it gets its status, the others run normally, the run exits 0.
#[test]
fn bench_isolates_hangs_crashes_and_panics() {
    let t = TempDir::new("faults");
    write_cases(&t);
    let tok = tiny_tokenizer();
    let cases = t.cases();
    for (fault, status, message) in [
        ("hang", "timeout", "no result within 1.5s"),
        ("abort", "crash", "worker died"),
        ("panic", "panic", "injected panic"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_strictly"))
            .args(["bench", "--tokenizer", tok.to_str().unwrap(), "--cases", cases.to_str().unwrap()])
            .args(["--timeout-s", "1.5", "--no-warmup"])
            .env("STRICTLY_BENCH_FAULT", format!("more.jsonl:{fault}"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{fault}: {stderr}");
        let lines: Vec<Value> =
            String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 5, "{fault}");
        for l in &lines {
            check_line(l);
            if l["id"] == "more.jsonl#u1" {
                assert_eq!(l["status"], status, "{fault}: {l}");
                assert!(l["error"].as_str().unwrap().contains(message), "{fault}: {l}");
                assert_eq!((l["n_valid"].as_u64(), l["n_invalid"].as_u64()), (Some(2), Some(1)), "{l}");
            } else {
                assert!(!["timeout", "crash", "panic"].contains(&l["status"].as_str().unwrap()), "{fault}: {l}");
            }
        }
        assert!(stderr.contains(&format!("\"{status}\": 1")), "{fault}: {stderr}");
    }
}

#[test]
fn bench_bad_input_exits_2_with_one_line() {
    let t = TempDir::new("bad");
    write_cases(&t);
    let tok = tiny_tokenizer();
    let missing = t.path().join("nope");
    let cases = t.cases();
    for args in [
        vec!["--tokenizer", tok.to_str().unwrap(), "--cases", missing.to_str().unwrap()],
        vec!["--tokenizer", missing.to_str().unwrap(), "--cases", cases.to_str().unwrap()],
        vec!["--tokenizer", tok.to_str().unwrap()],
        vec!["--tokenizer", tok.to_str().unwrap(), "--cases", cases.to_str().unwrap(), "--clock", "sundial"],
        vec!["--tokenizer", tok.to_str().unwrap(), "--cases", cases.to_str().unwrap(), "--recheck-max-ms", "-1"],
    ] {
        let r = bench(&args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.lines.is_empty(), "{args:?}");
        let last = r.stderr.lines().last().unwrap_or("");
        assert!(last.starts_with("strictly: "), "{args:?}: {}", r.stderr);
    }
}

/// With a real tokenizer (Llama 3.2, the one peer-bench's published results use): the same
/// integer case, compact and pretty.
#[test]
fn bench_with_llama_tokenizer() {
    let Some(data) = shared_data() else { return };
    let tok = data.join("tokenizers/llama-3.2/tokenizer.json");
    let t = TempDir::new("llama");
    write_cases(&t);
    let cases = t.cases();
    for extra in [None, Some("--pretty")] {
        let mut args =
            vec!["--tokenizer", tok.to_str().unwrap(), "--cases", cases.to_str().unwrap(), "--filter", "Github"];
        args.extend(extra);
        let r = bench(&args);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(r.lines.len(), 1);
        check_line(&r.lines[0]);
        check_integer_case(&r.lines[0]);
        if r.lines[0].get("ttfm_us").is_some() {
            // `5` is one token, `"x"` is rejected at its first token.
            assert_eq!(r.lines[0]["instances"][0]["n_tokens"], 1);
            if let Some(peak) = r.lines[0].get("peak_rss_mib") {
                assert!(peak.as_f64().is_some_and(|m| m > 0.0), "{}", r.lines[0]);
            }
        }
    }
}
