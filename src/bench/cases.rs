//! Benchmark inputs: finding case files under a directory and reading each one in whichever
//! layout it is written.
//!
//! The case ids, group names, order and instance lists are exactly those of
//! `../shared/peer-bench` (its README, "Inputs"), so that the two harnesses' per-case lines
//! can be joined on `id`. Layouts, detected per file:
//!
//! - **JSON Schema Test Suite**: a `.json` array of `{description, schema, tests: [{description,
//!   data, valid}]}` groups. One case per group, id `FILE#i`, group = the file path without
//!   `.json` (= the keyword).
//! - **JSONSchemaBench / maskbench**: a `.json` object `{description?, schema | json_schema,
//!   tests?}`; `instances`, `valid_instances` and `examples` arrays add valid data,
//!   `invalid_instances` invalid data. Id = the file path; group = the JSONSchemaBench subset
//!   (see [`group_of`]).
//! - **Bare schema**: a `.json` object without `schema`/`json_schema`: the whole file is the
//!   schema, compile-only (no instances).
//! - **JSON lines** (`.jsonl`): one object per line holding `schema` or `json_schema` (an
//!   object, or a string holding JSON), optional `unique_id`/`id`, tests as above. Id
//!   `FILE#uid` (or `FILE#line`), group = the file path without `.jsonl`.
//!
//! Files are visited in sorted path order, depth first. Unreadable JSON is reported as a
//! warning and skipped, never fatal.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// One instance to run through the matcher.
#[derive(Debug, Clone)]
pub struct Instance {
    pub description: String,
    pub data: Value,
    /// Must the constraint accept it?
    pub valid: bool,
}

/// One schema with its instances.
#[derive(Debug, Clone)]
pub struct Case {
    /// Unique within a run: the file path relative to the cases root, plus `#n` where a file
    /// holds several cases.
    pub id: String,
    pub group: String,
    pub description: String,
    pub schema: Value,
    pub instances: Vec<Instance>,
    /// The file it was read from (workers re-read just this file).
    pub file: PathBuf,
}

/// Cases found under `root` (a directory searched recursively, or one file), plus warnings
/// about files or lines that were skipped.
pub fn load(root: &Path) -> Result<(Vec<Case>, Vec<String>)> {
    let files = if root.is_file() {
        vec![root.to_path_buf()]
    } else {
        let mut files = Vec::new();
        collect_files(root, &mut files)?;
        files
    };
    let (mut cases, mut warnings) = (Vec::new(), Vec::new());
    for file in files {
        read_file(root, &file, &mut cases, &mut warnings)?;
    }
    Ok((cases, warnings))
}

/// The cases of one file found by [`load`]`(root)` (ids and groups as there), plus warnings.
pub fn load_file(root: &Path, file: &Path) -> Result<(Vec<Case>, Vec<String>)> {
    let (mut cases, mut warnings) = (Vec::new(), Vec::new());
    read_file(root, file, &mut cases, &mut warnings)?;
    Ok((cases, warnings))
}

fn read_file(root: &Path, file: &Path, cases: &mut Vec<Case>, warnings: &mut Vec<String>) -> Result<()> {
    // Ids are paths relative to the cases directory (to the file's directory for one file).
    let base = if root.is_file() { root.parent().unwrap_or(Path::new("")) } else { root };
    let rel = file.strip_prefix(base).unwrap_or(file);
    let name = rel.to_string_lossy().into_owned();
    let text =
        std::fs::read_to_string(file).map_err(|source| Error::Io { path: file.display().to_string(), source })?;
    let first = cases.len();
    if name.ends_with(".jsonl") {
        read_jsonl(&name, &text, cases, warnings);
    } else {
        match serde_json::from_str::<Value>(&text) {
            Ok(Value::Array(groups)) => read_test_suite(&name, &groups, cases),
            Ok(Value::Object(obj)) => match case_from_object(&obj, name.clone(), group_of(rel)) {
                Ok(Some(case)) => cases.push(case),
                Ok(None) => cases.push(Case {
                    id: name,
                    group: group_of(rel),
                    description: str_field(&obj, "description"),
                    schema: Value::Object(obj),
                    instances: Vec::new(),
                    file: PathBuf::new(),
                }),
                Err(e) => warnings.push(format!("skipping {name}: {e}")),
            },
            Ok(_) => warnings.push(format!("skipping {name}: neither array nor object")),
            Err(e) => warnings.push(format!("skipping {name}: not JSON: {e}")),
        }
    }
    for c in &mut cases[first..] {
        c.file = file.to_path_buf();
    }
    Ok(())
}

/// Every `.json` / `.jsonl` file under `dir`, in sorted order, depth first.
fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|source| Error::Io { path: dir.display().to_string(), source })?;
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            collect_files(&p, out)?;
        } else if matches!(p.extension().and_then(|e| e.to_str()), Some("json" | "jsonl")) {
            out.push(p);
        }
    }
    Ok(())
}

fn str_field(obj: &Map<String, Value>, key: &str) -> String {
    obj.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

fn read_test_suite(name: &str, groups: &[Value], cases: &mut Vec<Case>) {
    let group = name.trim_end_matches(".json").to_string();
    for (i, g) in groups.iter().enumerate() {
        let Some(obj) = g.as_object() else { continue };
        let Some(schema) = obj.get("schema") else { continue };
        cases.push(Case {
            id: format!("{name}#{i}"),
            group: group.clone(),
            description: str_field(obj, "description"),
            schema: schema.clone(),
            instances: tests_in(obj.get("tests"), true),
            file: PathBuf::new(),
        });
    }
}

fn read_jsonl(name: &str, text: &str, cases: &mut Vec<Case>, warnings: &mut Vec<String>) {
    let group = name.trim_end_matches(".jsonl").to_string();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let obj = match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(obj)) => obj,
            Ok(_) => continue,
            Err(e) => {
                warnings.push(format!("{name}:{}: bad JSON line: {e}", i + 1));
                continue;
            }
        };
        let uid = match obj.get("unique_id").or_else(|| obj.get("id")) {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => (i + 1).to_string(),
        };
        match case_from_object(&obj, format!("{name}#{uid}"), group.clone()) {
            Ok(Some(case)) => cases.push(case),
            Ok(None) => {}
            Err(e) => warnings.push(format!("{name}:{}: {e}", i + 1)),
        }
    }
}

/// A `{schema | json_schema, tests?, ...}` object as a case; `None` if it has neither key.
fn case_from_object(obj: &Map<String, Value>, id: String, group: String) -> Result<Option<Case>, String> {
    let Some(s) = obj.get("schema").or_else(|| obj.get("json_schema")) else { return Ok(None) };
    let schema = match s {
        Value::String(text) => serde_json::from_str(text).map_err(|e| format!("bad json_schema: {e}"))?,
        other => other.clone(),
    };
    let mut instances = tests_in(obj.get("tests"), true);
    for key in ["instances", "valid_instances", "examples"] {
        instances.extend(tests_in(obj.get(key), true));
    }
    instances.extend(tests_in(obj.get("invalid_instances"), false));
    Ok(Some(Case { id, group, description: str_field(obj, "description"), schema, instances, file: PathBuf::new() }))
}

/// Instances from an array of `{description?, data, valid?}` objects or of bare values.
fn tests_in(v: Option<&Value>, default_valid: bool) -> Vec<Instance> {
    let Some(Value::Array(items)) = v else { return Vec::new() };
    items
        .iter()
        .map(|t| match t.as_object() {
            // A test object; a bare instance that happens to have a `data` key and many
            // others is taken as data.
            Some(obj) if obj.contains_key("data") && (obj.contains_key("valid") || obj.len() <= 3) => Instance {
                description: str_field(obj, "description"),
                data: obj["data"].clone(),
                valid: obj.get("valid").and_then(Value::as_bool).unwrap_or(default_valid),
            },
            _ => Instance { description: String::new(), data: t.clone(), valid: default_valid },
        })
        .collect()
}

/// The JSONSchemaBench group of a file (path relative to the cases root):
/// `Github_easy---o123.json` → `Github_easy`; a file in a sub-directory → that directory;
/// `BFCL_java_12.json` → `BFCL_java`; otherwise the file stem.
pub fn group_of(rel: &Path) -> String {
    let stem = rel.file_stem().and_then(|s| s.to_str()).unwrap_or("").to_string();
    if let Some((subset, _)) = stem.split_once("---") {
        return subset.to_string();
    }
    if let Some(parent) = rel.parent() {
        let p = parent.to_string_lossy();
        if !p.is_empty() {
            return p.into_owned();
        }
    }
    let trimmed = stem.trim_end_matches(|c: char| c.is_ascii_digit());
    if trimmed.len() < stem.len() && trimmed.len() > 1 {
        if let Some(base) = trimmed.strip_suffix('_') {
            return base.to_string();
        }
    }
    stem
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_names() {
        assert_eq!(group_of(Path::new("Github_easy---o1.json")), "Github_easy");
        assert_eq!(group_of(Path::new("BFCL_java_12.json")), "BFCL_java");
        assert_eq!(group_of(Path::new("Kubernetes/kb_1.json")), "Kubernetes");
        assert_eq!(group_of(Path::new("plain.json")), "plain");
        assert_eq!(group_of(Path::new("_1.json")), "_1");
    }

    #[test]
    fn test_objects_and_bare_instances() {
        let v: Value = serde_json::from_str(r#"[{"data":1,"valid":false},{"data":2,"a":1,"b":2,"c":3},"x"]"#).unwrap();
        let t = tests_in(Some(&v), true);
        assert_eq!(t.len(), 3);
        assert!(!t[0].valid);
        assert_eq!(t[0].data, serde_json::json!(1));
        assert_eq!(t[1].data, serde_json::json!({"data":2,"a":1,"b":2,"c":3}));
        assert!(t[2].valid);
    }
}
