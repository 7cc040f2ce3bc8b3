//! `strictly bench`: the JSON Schema benchmark, comparable line by line with
//! `../shared/peer-bench` (which measures llguidance and outlines-core).
//!
//! For every case (a schema with instances) it measures compile time, time to first mask, and
//! the mask time of every token of every instance, and checks that valid instances are
//! accepted and invalid ones rejected. Inputs, method, statuses, the per-case JSON lines and
//! the summary JSON are peer-bench's, so a run of each on the same directory and tokenizer can
//! be joined on `id`:
//!
//! - [`cases`]: finding and reading the inputs (test-suite, JSONSchemaBench, bare schemas,
//!   JSONL); ids and groups as peer-bench forms them.
//! - [`mod@run`]: one case, step by step ([`run::run_case`]); [`run::CaseResult`] is one
//!   output line.
//! - [`stats`]: clocks, nearest-rank percentiles, per-group tallies.
//! - [`isolate`]: worker processes with a per-case timeout and a memory limit.
//! - [`report`]: the summary on stderr and in `--summary-json`.
//!
//! Additions over peer-bench (extra fields only; none of its fields change meaning):
//! `peak_rss_mib` / `rss_before_mib` per case (a worker's resident-memory high-water mark
//! while it ran that case, reset per case), `automaton` (what the schema compiled to) and,
//! with `--lenient`, `unenforced`; `mask_slowest` (the slowest mask's instance and step, its
//! wall time, and the page faults and context switches the thread had during it) and, with
//! `--recheck-max-ms`, `mask_max_rechecks_us` (see [`run`](mod@run)); the summary adds `peak_rss_*`
//! tallies, `rechecked_cases` / `mask_max_us_rechecked`, `slowest_masks` and a few settings.
//! `engine_init_ms` is 0: the vocabulary's one-time work is inside `tokenizer_load_ms`.
//! The thread-CPU clock is read through a one-line `clock_gettime` declaration (std already
//! links the C library); `STRICTLY_BENCH_FAULT` is a test hook (see `inject_fault`).
//!
//! Invariant: the parent process never runs a case unless isolation is off; everything a
//! worker measures travels back in its result line.
//!
//! Memory: `peak_rss_mib` is measured, and `--mem-limit-gb` enforced (RLIMIT_AS, set by the
//! shell that starts each worker), per worker process. A worker holds the vocabulary and the
//! cases of one file, so its baseline is about the tokenizer's size; the high-water mark is
//! reset before each case, but memory the allocator kept from earlier cases counts in
//! `rss_before_mib`, so `--worker-per-case` is the exact per-schema measure.

pub mod cases;
pub mod groups;
pub mod isolate;
pub mod report;
pub mod result;
pub mod run;
pub mod stats;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::automaton::VocabEnv;
use crate::error::{Error, Result};
use crate::vocab::Vocab;
use cases::Case;
use run::{CaseResult, RunSettings};
pub use stats::Clock;

/// Everything `strictly bench` is told.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// A Hugging Face `tokenizer.json`, a GGUF model or `bytes` ([`vocab_at`]); `None`: the
    /// embedded stories260K vocabulary.
    pub tokenizer: Option<PathBuf>,
    /// A directory searched recursively, or one file.
    pub cases: PathBuf,
    /// Only the first N cases (after sorting, filters and `per_group_limit`).
    pub limit: Option<usize>,
    /// Only the first N cases of each group, applied before `limit`.
    pub per_group_limit: Option<usize>,
    /// Only cases whose id contains this.
    pub filter: Option<String>,
    /// Skip cases whose id contains this.
    pub exclude: Option<String>,
    /// Drop instances marked invalid.
    pub only_valid: bool,
    /// Worker processes, each single-threaded.
    pub threads: usize,
    pub settings: RunSettings,
    /// Add every step's mask µs to the output lines.
    pub per_step: bool,
    /// Per-case wall-clock limit (compile and all instances), seconds.
    pub timeout_s: f64,
    /// Per-worker address-space limit in GiB; 0 = none.
    pub mem_limit_gb: f64,
    /// Run cases in worker processes (else in this process, with no timeout or memory limit).
    pub isolate: bool,
    /// A fresh worker for every case (exact per-case peak memory; slow start per case).
    pub worker_per_case: bool,
    /// Run the untimed warm-up case first.
    pub warmup: bool,
    pub summary_json: Option<PathBuf>,
    /// Print at most this many failing cases / instances to stderr.
    pub show_failures: usize,
    /// Arguments that make the current executable call [`worker_main`] with these options.
    pub worker_argv: Vec<OsString>,
}

impl Default for BenchOptions {
    fn default() -> BenchOptions {
        BenchOptions {
            tokenizer: None,
            cases: PathBuf::new(),
            limit: None,
            per_group_limit: None,
            filter: None,
            exclude: None,
            only_valid: false,
            threads: 1,
            settings: RunSettings::default(),
            per_step: false,
            timeout_s: 120.0,
            mem_limit_gb: 8.0,
            isolate: true,
            worker_per_case: false,
            warmup: true,
            summary_json: None,
            show_failures: 0,
            worker_argv: Vec::new(),
        }
    }
}

/// The engine string on every line and in the summary.
pub fn engine_description(settings: &RunSettings) -> String {
    format!(
        "strictly {} (json_schema {} whitespace {:?}, engine {:?})",
        env!("CARGO_PKG_VERSION"),
        if settings.schema.exact { "exact" } else { "sensible" },
        settings.schema.whitespace,
        settings.compile.backend
    )
    .to_lowercase()
}

fn load_vocab(opts: &BenchOptions) -> Result<Vocab> {
    vocab_at(opts.tokenizer.as_deref())
}

/// The vocabulary a `--tokenizer` path names (every command's, the bench's too): a
/// tokenizer.json, a GGUF model file (its tokenizer; with the `model` feature), `bytes` (one
/// token per byte, no model tokenizer needed), or the embedded stories260K tokenizer for `None`.
pub fn vocab_at(path: Option<&std::path::Path>) -> Result<Vocab> {
    Ok(match path {
        Some(p) if p.as_os_str() == "bytes" => Vocab::byte_level(),
        #[cfg(feature = "model")]
        Some(p) if crate::model::gguf::is_gguf(p) => crate::model::gguf::vocab(p)?,
        Some(p) => Vocab::from_tokenizer_json(p)?,
        None => Vocab::embedded(),
    })
}

/// The cases of this run, in order, with the filters applied; warnings on stderr unless
/// `quiet` (workers load the same list the parent already warned about).
pub fn selected_cases(opts: &BenchOptions, quiet: bool) -> Result<Vec<Case>> {
    if !opts.cases.exists() {
        return Err(Error::param(format!("cases {}: no such file or directory", opts.cases.display())));
    }
    let (mut cases, warnings) = cases::load(&opts.cases)?;
    if !quiet {
        for w in warnings {
            eprintln!("warning: {w}");
        }
    }
    if let Some(f) = &opts.filter {
        cases.retain(|c| c.id.contains(f.as_str()));
    }
    if let Some(x) = &opts.exclude {
        cases.retain(|c| !c.id.contains(x.as_str()));
    }
    if let Some(n) = opts.per_group_limit {
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        cases.retain(|c| {
            let k = seen.entry(c.group.clone()).or_default();
            *k += 1;
            *k <= n
        });
    }
    for c in &mut cases {
        filter_instances(c, opts);
    }
    if let Some(n) = opts.limit {
        cases.truncate(n);
    }
    Ok(cases)
}

fn filter_instances(case: &mut Case, opts: &BenchOptions) {
    if opts.only_valid {
        case.instances.retain(|i| i.valid);
    }
}

fn check_settings(opts: &BenchOptions) -> Result<()> {
    if !opts.settings.clock.is_available() {
        return Err(Error::param(format!("clock {:?} is not available on this platform", opts.settings.clock)));
    }
    if opts.timeout_s.is_nan() || opts.timeout_s <= 0.0 {
        return Err(Error::param("--timeout-s must be positive"));
    }
    if opts.mem_limit_gb.is_nan() || opts.mem_limit_gb < 0.0 {
        return Err(Error::param("--mem-limit-gb must be 0 (none) or positive"));
    }
    Ok(())
}

fn warm_up(env: &Arc<VocabEnv>, opts: &BenchOptions) {
    if opts.warmup {
        let r = run::warm_up(env, &opts.settings);
        if r.status != "ok" {
            let why = r.error.or_else(|| r.instances.iter().find(|i| !i.agree).and_then(|i| i.detail.clone()));
            eprintln!("warning: warm-up case status {}: {}", r.status, why.unwrap_or_default());
        }
    }
}

/// Runs the benchmark: one JSON line per case on stdout (in completion order), the summary on
/// stderr and in `opts.summary_json`.
pub fn run(opts: &BenchOptions) -> Result<()> {
    check_settings(opts)?;
    let t_start = Instant::now();
    let load_start = report::loadavg();
    let env = VocabEnv::new(Arc::new(load_vocab(opts)?));
    let vocab = env.vocab().clone();
    let tok_load_ms = t_start.elapsed().as_secs_f64() * 1000.0;
    let vocab_size = vocab.len();
    let cases = selected_cases(opts, false)?;
    let n_cases = cases.len();
    let engine = engine_description(&opts.settings);
    eprintln!(
        "strictly bench: {} cases from {} | tokenizer {} (vocab {}, eos {:?})",
        cases.len(),
        opts.cases.display(),
        report::tokenizer_name(opts),
        vocab.len(),
        vocab.eos().iter().map(|t| t.0).collect::<Vec<_>>()
    );
    let mut results: Vec<CaseResult> = Vec::with_capacity(cases.len());
    let stdout = std::io::stdout();
    let mut emit = |mut r: CaseResult| -> Result<()> {
        r.engine = engine.clone();
        let mut line = r.clone();
        for i in &mut line.instances {
            if opts.per_step {
                i.step_mask_us = i.mask_ns.iter().map(|&n| stats::us(n)).collect();
            }
            i.mask_ns.clear();
        }
        let text = serde_json::to_string(&line).expect("a CaseResult serializes");
        let mut o = stdout.lock();
        writeln!(o, "{text}").and_then(|_| o.flush()).map_err(|source| Error::Io { path: "stdout".into(), source })?;
        results.push(r);
        Ok(())
    };
    if !opts.isolate {
        warm_up(&env, opts);
        for (idx, case) in cases.iter().enumerate() {
            emit(run_guarded(&env, case, idx, &opts.settings))?;
        }
    } else {
        drop((vocab, env));
        let cases = Arc::new(cases);
        let next = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel::<CaseResult>();
        let handles: Vec<_> = (0..opts.threads.max(1))
            .map(|_| {
                let (opts, cases, next, tx) = (opts.clone(), cases.clone(), next.clone(), tx.clone());
                std::thread::spawn(move || {
                    if let Err(e) = isolate::supervise(&opts, &cases, next, tx) {
                        eprintln!("strictly bench: supervisor error: {e}");
                    }
                })
            })
            .collect();
        drop(tx);
        let mut last_report = Instant::now();
        for (done, r) in rx.into_iter().enumerate() {
            emit(r)?;
            if last_report.elapsed() > Duration::from_secs(30) {
                eprintln!("... {}/{n_cases} cases, {:.0}s", done + 1, t_start.elapsed().as_secs_f64());
                last_report = Instant::now();
            }
        }
        for h in handles {
            let _ = h.join();
        }
    }
    let n_done = results.len();
    results.sort_by_key(|r| r.idx);
    let info = report::RunInfo {
        engine,
        vocab_size,
        tok_load_ms,
        load_start,
        load_end: report::loadavg(),
        wall: t_start.elapsed(),
        workers: if opts.isolate { opts.threads.max(1) } else { 1 },
    };
    report::print_summary(opts, &info, &results)?;
    if n_done < n_cases {
        return Err(Error::param(format!("only {n_done} of {n_cases} cases produced results")));
    }
    Ok(())
}

/// Test hook: with `STRICTLY_BENCH_FAULT=PART:hang|abort|panic` in the environment, cases whose
/// id contains `PART` hang, abort the process or panic, so that tests can drive the timeout,
/// crash and panic paths deterministically.
fn inject_fault(id: &str) {
    let Some(spec) = std::env::var_os("STRICTLY_BENCH_FAULT") else { return };
    let spec = spec.to_string_lossy();
    let Some((part, what)) = spec.rsplit_once(':') else { return };
    if !id.contains(part) {
        return;
    }
    match what {
        "hang" => loop {
            std::thread::sleep(Duration::from_secs(3600));
        },
        "abort" => std::process::abort(),
        "panic" => panic!("injected panic (STRICTLY_BENCH_FAULT)"),
        _ => {}
    }
}

/// `run_case`, with a panic caught and reported as the case's status.
fn run_guarded(env: &Arc<VocabEnv>, case: &Case, idx: usize, settings: &RunSettings) -> CaseResult {
    let run = || {
        inject_fault(&case.id);
        run::run_case(env, case, idx, settings)
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panic".into());
        CaseResult::failed(case, idx, "panic", run::truncate(&msg, 500))
    })
}

/// The worker side of [`isolate`]: loads the vocabulary, warms up, says `READY`, then answers
/// case requests read from stdin with result lines on stdout until stdin closes. A request
/// names the case's index, id and file; the worker reads just that file (keeping the last one),
/// so its memory holds one file's cases, not the whole run's.
pub fn worker_main(opts: &BenchOptions) -> Result<()> {
    check_settings(opts)?;
    let env = VocabEnv::new(Arc::new(load_vocab(opts)?));
    warm_up(&env, opts);
    let io = |source| Error::Io { path: "worker pipe".into(), source };
    let stdout = std::io::stdout();
    let say = |line: &str| -> Result<()> {
        let mut o = stdout.lock();
        writeln!(o, "{line}").and_then(|_| o.flush()).map_err(io)
    };
    say(isolate::READY)?;
    let mut file_cases: Option<(PathBuf, Vec<Case>)> = None;
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(io)?;
        let Ok(req) = serde_json::from_str::<isolate::Request>(&line) else { continue };
        if file_cases.as_ref().is_none_or(|(f, _)| *f != req.file) {
            file_cases = Some((req.file.clone(), cases::load_file(&opts.cases, &req.file)?.0));
        }
        let found = file_cases.as_ref().and_then(|(_, cs)| cs.iter().find(|c| c.id == req.id)).cloned();
        let r = match found {
            Some(mut case) => {
                filter_instances(&mut case, opts);
                run_guarded(&env, &case, req.idx, &opts.settings)
            }
            None => CaseResult {
                idx: req.idx,
                id: req.id.clone(),
                status: "crash".into(),
                error: Some(format!("case {:?} not found in {}: the case files changed", req.id, req.file.display())),
                ..CaseResult::default()
            },
        };
        say(&serde_json::to_string(&r).expect("a CaseResult serializes"))?;
    }
    Ok(())
}
