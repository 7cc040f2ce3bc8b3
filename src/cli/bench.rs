//! `strictly bench`: the JSON Schema benchmark, with peer-bench's inputs, method, per-case
//! JSON lines and summary fields (see [`strictly::bench`]). This file only turns the flags
//! into [`BenchOptions`]; with the hidden `--worker` flag the process is one of the run's
//! worker processes (case indices on stdin, results on stdout), started by the parent with
//! the parent's own arguments plus `--worker`.

use std::path::PathBuf;

use clap::Args;
use strictly::automaton::{BackendChoice, CompileOptions};
use strictly::bench::{run::RunSettings, BenchOptions, Clock};
use strictly::grammar::json_schema::{JsonSchemaOptions, Whitespace};

use super::WhitespaceArg;

#[derive(Args)]
pub struct BenchArgs {
    /// A Hugging Face tokenizer.json or a GGUF model (its tokenizer) [default: the embedded
    /// stories260K tokenizer].
    #[arg(long)]
    tokenizer: Option<PathBuf>,
    /// A directory (searched recursively for .json / .jsonl) or one file of cases.
    #[arg(long)]
    cases: PathBuf,
    /// Only the first N cases (after sorting by path and the filters).
    #[arg(long)]
    limit: Option<usize>,
    /// Only the first N cases of each group, applied before --limit.
    #[arg(long)]
    per_group_limit: Option<usize>,
    /// Only cases whose id contains this.
    #[arg(long)]
    filter: Option<String>,
    /// Skip cases whose id contains this.
    #[arg(long)]
    exclude: Option<String>,
    /// Every mask under a budget of exactly the tokens the instance has left (what budgets cost
    /// where they bind at every step; a valid instance must still be accepted).
    #[arg(long)]
    tight_budget: bool,
    /// Serialize instances indented (serde_json pretty) instead of compact.
    #[arg(long)]
    pretty: bool,
    /// Skip instances marked "valid": false.
    #[arg(long)]
    only_valid: bool,
    /// Compile schemas even where a keyword cannot be enforced (listed as `unenforced`).
    #[arg(long)]
    lenient: bool,
    /// Whitespace the JSON Schema grammar allows between tokens (schemas compile to their
    /// exact language: engines are compared on the same language).
    #[arg(long, value_enum, default_value_t = WhitespaceArg::Flexible)]
    whitespace: WhitespaceArg,
    /// Compile to the sensible default language (what a request gets: named keys only,
    /// integers within i64, ...) instead of the exact one; valid instances outside it are
    /// rejected. For measuring what the default costs per mask.
    #[arg(long)]
    sensible: bool,
    /// Force the Earley engine even for regular schemas.
    #[arg(long)]
    earley: bool,
    /// Worker processes, each single-threaded (take timings with 1).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Clock for compile / mask / commit timings.
    #[arg(long, value_enum, default_value_t = Clock::Wall)]
    clock: Clock,
    /// Per-case wall-clock limit (compile and all instances), seconds.
    #[arg(long, default_value_t = 120.0)]
    timeout_s: f64,
    /// Per-worker address-space limit, GiB (0 = none).
    #[arg(long, default_value_t = 8.0)]
    mem_limit_gb: f64,
    /// Run cases in this process (no timeout, memory limit or crash isolation).
    #[arg(long)]
    no_isolate: bool,
    /// A fresh worker process for every case, so each case's peak RSS is its own.
    #[arg(long, conflicts_with = "no_isolate")]
    worker_per_case: bool,
    /// Skip the untimed warm-up case.
    #[arg(long)]
    no_warmup: bool,
    /// Add every step's mask µs to the JSON lines.
    #[arg(long)]
    per_step: bool,
    /// Re-run (twice, in the same worker) every case whose slowest mask took longer than this
    /// many ms, and report those runs' slowest masks beside the first: a maximum that does not
    /// come back was the machine's. The first run's timings are the ones summarized.
    #[arg(long)]
    recheck_max_ms: Option<f64>,
    /// Also write the summary as JSON to this file.
    #[arg(long)]
    summary_json: Option<PathBuf>,
    /// Print at most this many failing cases / instances to stderr.
    #[arg(long, default_value_t = 0)]
    show_failures: usize,
    /// Internal: run as a worker process (case indices on stdin, results on stdout).
    #[arg(long, hide = true)]
    worker: bool,
}

pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    let whitespace = Whitespace::from(a.whitespace);
    let engine = if a.earley { BackendChoice::Earley } else { BackendChoice::Auto };
    if let Some(ms) = a.recheck_max_ms.filter(|ms| !(ms.is_finite() && *ms >= 0.0)) {
        anyhow::bail!("--recheck-max-ms must be a non-negative number of milliseconds, not {ms}");
    }
    let mut worker_argv: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    worker_argv.push("--worker".into());
    let opts = BenchOptions {
        tokenizer: a.tokenizer,
        cases: a.cases,
        limit: a.limit,
        per_group_limit: a.per_group_limit,
        filter: a.filter,
        exclude: a.exclude,
        only_valid: a.only_valid,
        threads: a.threads.max(1),
        settings: RunSettings {
            pretty: a.pretty,
            clock: a.clock,
            schema: JsonSchemaOptions {
                lenient: a.lenient,
                exact: !a.sensible,
                ..JsonSchemaOptions::exact().with_whitespace(whitespace)
            },
            compile: CompileOptions { backend: engine, ..CompileOptions::default() },
            recheck_over_ns: a.recheck_max_ms.map(|ms| (ms.max(0.0) * 1e6) as u64),
            tight_budget: a.tight_budget,
        },
        per_step: a.per_step,
        timeout_s: a.timeout_s,
        mem_limit_gb: a.mem_limit_gb,
        isolate: !a.no_isolate,
        worker_per_case: a.worker_per_case,
        warmup: !a.no_warmup,
        summary_json: a.summary_json,
        show_failures: a.show_failures,
        worker_argv,
    };
    if a.worker {
        strictly::bench::worker_main(&opts)?;
    } else {
        strictly::bench::run(&opts)?;
    }
    Ok(())
}
