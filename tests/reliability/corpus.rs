//! Regression corpus: every minimized input that once crashed or fooled a fuzz target, replayed
//! through the same checks (`fuzz::check_*`) with a few seeds.
//!
//! Files in `tests/reliability/corpus/`, by name prefix:
//! `regex-*.txt` (the pattern, the whole file without a trailing newline), `ebnf-*.gbnf`,
//! `schema-*.json`, `tokenizer-*.json` (a whole tokenizer file, bytes as they are).
//! Each file's first line may not be a comment: the file is the input, exactly.

use std::path::PathBuf;

use super::fuzz::{check_ebnf, check_regex, check_schema, check_tokenizer_bytes};

fn files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reliability/corpus");
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    out.sort();
    out
}

#[test]
fn replay_the_regression_corpus() {
    let mut n = 0;
    for f in files() {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let bytes = std::fs::read(&f).unwrap();
        let text = || String::from_utf8(bytes.clone()).unwrap_or_else(|_| panic!("{name}: not UTF-8"));
        for seed in 0..3 {
            if name.starts_with("regex-") {
                check_regex(&text(), seed);
            } else if name.starts_with("ebnf-") {
                check_ebnf(&text(), seed);
            } else if name.starts_with("schema-") {
                let v = serde_json::from_str(&text()).unwrap_or_else(|e| panic!("{name}: {e}"));
                check_schema(&v, seed);
            } else if name.starts_with("tokenizer-") {
                check_tokenizer_bytes(&bytes, &format!("corpus{n}"));
            } else {
                continue;
            }
        }
        n += 1;
    }
    println!("regression corpus: {n} inputs replayed");
}
