//! The end-of-run summary: a human-readable block on stderr and, with `--summary-json`, the
//! same numbers as JSON with peer-bench's field names (`engine`, `tokenizer`, `vocab_size`,
//! `cases_dir`, `format`, `clock`, `workers`, `timeout_s`, `wall_s`, `tokenizer_load_ms`,
//! `loadavg_start`, `loadavg_end`, `engine_init_ms`, `pretty`, `only_valid`, `lenient`,
//! `total`, `groups`), plus strictly's `isolated`, `mem_limit_gb`, `whitespace`, and
//! `slowest_masks` (the ten cases with the slowest masks: where, what the thread went through,
//! the re-runs' maxima; the text shows five).
//!
//! `engine_init_ms` is 0 for strictly: everything built once per vocabulary (the token trie)
//! is built while loading the tokenizer, so it is inside `tokenizer_load_ms`.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use super::groups::GroupSummary;
use super::run::{truncate, CaseResult, SlowestMask};
use super::BenchOptions;
use crate::error::{Error, Result};

/// Facts about the run that are not in the results.
pub struct RunInfo {
    pub engine: String,
    pub vocab_size: usize,
    pub tok_load_ms: f64,
    pub load_start: String,
    pub load_end: String,
    pub wall: Duration,
    /// Cases run at once: worker processes, or 1 in-process.
    pub workers: usize,
}

/// The first three fields of `/proc/loadavg`, or `?`.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

pub fn tokenizer_name(opts: &BenchOptions) -> String {
    opts.tokenizer.as_ref().map_or_else(|| "<embedded stories260K>".into(), |p| p.display().to_string())
}

fn pct(a: usize, b: usize) -> String {
    if b == 0 {
        "-".into()
    } else {
        format!("{:.1}%", 100.0 * a as f64 / b as f64)
    }
}

fn opt(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v}"))
}

/// Tallies over all results and per group.
pub fn tally(results: &[CaseResult]) -> (GroupSummary, BTreeMap<String, GroupSummary>) {
    let mut total = GroupSummary::default();
    let mut groups: BTreeMap<String, GroupSummary> = BTreeMap::new();
    for r in results {
        total.add(r);
        groups.entry(r.group.clone()).or_default().add(r);
    }
    total.finish();
    groups.values_mut().for_each(GroupSummary::finish);
    (total, groups)
}

pub fn print_summary(opts: &BenchOptions, info: &RunInfo, results: &[CaseResult]) -> Result<()> {
    let (total, groups) = tally(results);
    let mut text = Vec::new();
    write_text(&mut text, opts, info, results, &total, &groups).expect("writing to a Vec");
    let _ = std::io::stderr().write_all(&text);
    if let Some(path) = &opts.summary_json {
        let s = &opts.settings;
        let j = serde_json::json!({
            "engine": info.engine,
            "tokenizer": tokenizer_name(opts),
            "vocab_size": info.vocab_size,
            "cases_dir": opts.cases,
            "format": if s.pretty { "pretty" } else { "compact" },
            "clock": format!("{:?}", s.clock),
            "workers": opts.threads,
            "timeout_s": opts.timeout_s,
            "wall_s": info.wall.as_secs_f64(),
            "throughput": throughput(&total, info),
            "tokenizer_load_ms": info.tok_load_ms,
            "loadavg_start": info.load_start,
            "loadavg_end": info.load_end,
            "engine_init_ms": 0.0,
            "pretty": s.pretty,
            "tight_budget": s.tight_budget,
            "only_valid": opts.only_valid,
            "lenient": s.schema.lenient,
            "isolated": opts.isolate,
            "mem_limit_gb": opts.mem_limit_gb,
            "whitespace": s.schema.whitespace,
            "total": total,
            "slowest_masks": slowest_masks(results, 10).into_iter().map(|(r, s)| {
                let mut j = serde_json::to_value(s).expect("a SlowestMask serializes");
                j["id"] = r.id.clone().into();
                j["rechecks_us"] = r.mask_max_rechecks_us.clone().into();
                j
            }).collect::<Vec<_>>(),
            "groups": groups,
        });
        let body = serde_json::to_string_pretty(&j).expect("the summary serializes");
        std::fs::write(path, body).map_err(|source| Error::Io { path: path.display().to_string(), source })?;
    }
    Ok(())
}

fn write_text(
    e: &mut Vec<u8>,
    opts: &BenchOptions,
    info: &RunInfo,
    results: &[CaseResult],
    total: &GroupSummary,
    groups: &BTreeMap<String, GroupSummary>,
) -> std::io::Result<()> {
    write_run(e, opts, info)?;
    write_compliance(e, total)?;
    write_masks(e, info, results, total)?;
    write_times(e, total)?;
    write_groups(e, groups)?;
    write_failures(e, opts, results)
}

/// The run: engine, tokenizer, cases, format, clock, workers, wall time, and what was built
/// once per process.
fn write_run(e: &mut Vec<u8>, opts: &BenchOptions, info: &RunInfo) -> std::io::Result<()> {
    let s = &opts.settings;
    writeln!(e, "\n=== strictly bench summary ===")?;
    writeln!(
        e,
        "engine: {} | tokenizer: {} (vocab {}) | cases: {} | format: {} | clock: {:?} | workers: {} | wall {:.1}s",
        info.engine,
        tokenizer_name(opts),
        info.vocab_size,
        opts.cases.display(),
        if s.pretty { "pretty" } else { "compact" },
        s.clock,
        if opts.isolate { opts.threads.to_string() } else { "in-process".into() },
        info.wall.as_secs_f64()
    )?;
    writeln!(
        e,
        "init (once per process, not in compile times): tokenizer + trie load {:.0} ms | loadavg start [{}] end [{}] on {} cpus",
        info.tok_load_ms,
        info.load_start,
        info.load_end,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    )?;
    Ok(())
}

/// Coverage (cases compiled), and how far the compiled constraints agree with the tests.
fn write_compliance(e: &mut Vec<u8>, total: &GroupSummary) -> std::io::Result<()> {
    writeln!(
        e,
        "#cases {} | #compiled {} (coverage {}) | #ok {} | statuses {:?}",
        total.cases,
        total.compiled,
        pct(total.compiled, total.cases),
        total.ok,
        total.statuses
    )?;
    writeln!(
        e,
        "compliance on compiled schemas: valid instances accepted {}/{} ({}) | schemas with all valid instances accepted {}/{} ({}) | invalid instances rejected {}/{} ({})",
        total.valid_accepted,
        total.valid_compiled,
        pct(total.valid_accepted, total.valid_compiled),
        total.schemas_all_valid_accepted,
        total.schemas_with_valid,
        pct(total.schemas_all_valid_accepted, total.schemas_with_valid),
        total.invalid_rejected,
        total.invalid_compiled,
        pct(total.invalid_rejected, total.invalid_compiled)
    )?;
    if !total.valid_rejected_in.is_empty() {
        writeln!(e, "valid instances not accepted, by where it failed: {:?}", total.valid_rejected_in)?;
    }
    writeln!(
        e,
        "all instances (uncompiled schemas count as failures): valid accepted {}/{} ({}) | invalid rejected {}/{} ({})",
        total.valid_accepted,
        total.valid,
        pct(total.valid_accepted, total.valid),
        total.invalid_rejected,
        total.invalid,
        pct(total.invalid_rejected, total.invalid)
    )?;
    writeln!(
        e,
        "test agreement: {}/{} on compiled schemas ({}) | {}/{} over all tests ({})",
        total.tests_agree,
        total.tests_total_compiled,
        pct(total.tests_agree, total.tests_total_compiled),
        total.tests_agree,
        total.tests_total_all,
        pct(total.tests_agree, total.tests_total_all)
    )?;
    Ok(())
}

/// Mask times, the slowest masks, and masks per second.
fn write_masks(e: &mut Vec<u8>, info: &RunInfo, results: &[CaseResult], total: &GroupSummary) -> std::io::Result<()> {
    if let Some(m) = &total.mask_us {
        writeln!(
            e,
            "mask µs over {} steps ({} tokens): mean {} | p50 {} | p95 {} | p99 {} | p99.9 {} | max {}",
            m.n,
            total.tokens,
            m.mean,
            m.p50,
            m.p95,
            m.p99,
            opt(total.mask_us_p999),
            m.max
        )?;
    }
    let slowest = slowest_masks(results, 5);
    if !slowest.is_empty() {
        writeln!(e, "slowest masks (µs at instance/step | wall µs | faults minor/major | switches voluntary/involuntary | re-runs' maxima):")?;
        for (r, s) in &slowest {
            let ev = s.events;
            writeln!(
                e,
                "  {} {} at {}/{} | wall {} | faults {}/{} | switches {}/{} | re-runs {:?}",
                r.id,
                s.us,
                s.instance,
                s.step,
                s.wall_us,
                ev.minflt,
                ev.majflt,
                ev.nvcsw,
                ev.nivcsw,
                r.mask_max_rechecks_us
            )?;
        }
        if total.rechecked_cases > 0 {
            writeln!(
                e,
                "max once each re-run case counts with its smallest maximum: {} µs ({} cases re-run)",
                opt(total.mask_max_us_rechecked),
                total.rechecked_cases
            )?;
        }
    }
    let t = throughput(total, info);
    writeln!(
        e,
        "throughput: {} masks/s over the run's wall time with {} worker(s) | {} masks/s per worker in mask time alone",
        t["masks_per_s_wall"], t["workers"], t["masks_per_s_worker"]
    )?;
    Ok(())
}

/// Compile and time-to-first-mask times, and peak memory per case.
fn write_times(e: &mut Vec<u8>, total: &GroupSummary) -> std::io::Result<()> {
    writeln!(
        e,
        "compile ms: median {} | p90 {} | p99 {} | max {}   ttfm ms: median {} | p90 {} | p99 {} | max {}",
        opt(total.compile_ms_median),
        opt(total.compile_ms_p90),
        opt(total.compile_ms_p99),
        opt(total.compile_ms_max),
        opt(total.ttfm_ms_median),
        opt(total.ttfm_ms_p90),
        opt(total.ttfm_ms_p99),
        opt(total.ttfm_ms_max)
    )?;
    if total.peak_rss_mib_max.is_some() {
        writeln!(
            e,
            "peak RSS per compiled case, MiB: median {} | max {}   added by the case: median {} | max {}",
            opt(total.peak_rss_mib_median),
            opt(total.peak_rss_mib_max),
            opt(total.peak_rss_delta_mib_median),
            opt(total.peak_rss_delta_mib_max)
        )?;
    }
    Ok(())
}

/// The per-group table (only when there is more than one group).
fn write_groups(e: &mut Vec<u8>, groups: &BTreeMap<String, GroupSummary>) -> std::io::Result<()> {
    if groups.len() <= 1 {
        return Ok(());
    }
    writeln!(
        e,
        "\n{:<44} {:>6} {:>8} {:>6} {:>13} {:>13} {:>7} {:>8} {:>8} {:>9}",
        "group", "cases", "compiled", "ok", "valid acc", "invalid rej", "agree", "mask p50", "mask p99", "cmp ms p50"
    )?;
    writeln!(
        e,
        "  (valid acc / invalid rej counted over all instances; agree = agreeing tests / all tests incl. uncompiled)"
    )?;
    for (name, g) in groups {
        writeln!(
            e,
            "{:<44} {:>6} {:>8} {:>6} {:>13} {:>13} {:>7} {:>8} {:>8} {:>9}",
            truncate(name, 44),
            g.cases,
            g.compiled,
            g.ok,
            format!("{}/{}", g.valid_accepted, g.valid),
            format!("{}/{}", g.invalid_rejected, g.invalid),
            pct(g.tests_agree, g.tests_total_all),
            g.mask_us.as_ref().map_or("-".into(), |m| format!("{}", m.p50)),
            g.mask_us.as_ref().map_or("-".into(), |m| format!("{}", m.p99)),
            opt(g.compile_ms_median)
        )?;
    }
    Ok(())
}

/// With `--show-failures N`: the first N failing cases and instances.
fn write_failures(e: &mut Vec<u8>, opts: &BenchOptions, results: &[CaseResult]) -> std::io::Result<()> {
    if opts.show_failures == 0 {
        return Ok(());
    }
    writeln!(e, "\nfailures (first {}):", opts.show_failures)?;
    let mut lines = Vec::new();
    for r in results {
        if r.ttfm_us.is_none() {
            lines.push(format!("  {} [{}]: {}", r.id, r.status, r.error.clone().unwrap_or_default()));
            continue;
        }
        for i in r.instances.iter().filter(|i| !i.agree) {
            lines.push(format!(
                "  {} test {} (valid={}) {:?}: {} {}",
                r.id,
                i.idx,
                i.expected_valid,
                i.description,
                i.outcome,
                i.detail.clone().unwrap_or_default()
            ));
        }
    }
    for l in lines.iter().take(opts.show_failures) {
        writeln!(e, "{l}")?;
    }
    Ok(())
}

/// The `n` cases with the slowest masks, slowest first, each with its slowest mask.
fn slowest_masks(results: &[CaseResult], n: usize) -> Vec<(&CaseResult, &SlowestMask)> {
    let mut v: Vec<(&CaseResult, &SlowestMask)> =
        results.iter().filter_map(|r| r.mask_slowest.as_ref().map(|s| (r, s))).collect();
    v.sort_by(|a, b| b.1.us.total_cmp(&a.1.us));
    v.truncate(n);
    v
}

/// Masks per second: all masks over the run's wall time (every worker together, compile and
/// commits included: what `--threads N` scales), and per worker over mask time alone
/// (1 / mean mask time).
fn throughput(total: &GroupSummary, info: &RunInfo) -> serde_json::Value {
    let wall = info.wall.as_secs_f64();
    let per_wall = if wall > 0.0 { (total.masks as f64 / wall).round() } else { 0.0 };
    let per_worker = total.mask_us.as_ref().filter(|m| m.mean > 0.0).map_or(0.0, |m| (1e6 / m.mean).round());
    serde_json::json!({ "workers": info.workers, "masks": total.masks, "masks_per_s_wall": per_wall, "masks_per_s_worker": per_worker })
}
