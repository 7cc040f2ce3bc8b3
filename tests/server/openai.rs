//! The official `openai` Python client against a real server, end to end.

// ---- the official openai client ---------------------------------------------------------------

#[test]
fn openai_python_client_end_to_end() {
    let has_openai = std::process::Command::new("python3")
        .args(["-c", "import openai, pydantic"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_openai {
        eprintln!("!!! SKIPPED: python3 cannot import openai (python3 -m pip install openai)");
        return;
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/openai_e2e.py");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .args(["--bin", env!("CARGO_BIN_EXE_strictly")])
        .output()
        .unwrap();
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the openai client checks failed:\n{report}");
    assert!(report.contains("checks passed"), "{report}");
}
