//! Counters for `GET /metrics`, in Prometheus' text format.
//!
//! Generation figures are added when a generation finishes, from its [`Output`]: the loop
//! measures them (a cancelled or failed generation adds nothing).

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[cfg(doc)]
use crate::decode::{MaskStats, Output};
use crate::model::{BatchStats, BATCH_BUCKETS};

#[derive(Debug, Default)]
pub struct Metrics {
    pub chat_requests: AtomicU64,
    pub completion_requests: AtomicU64,
    /// Requests answered with an error (any status >= 400).
    pub errors: AtomicU64,
    /// Requests refused because the queue was full.
    pub rejected: AtomicU64,
    pub prompt_tokens: AtomicU64,
    pub completion_tokens: AtomicU64,
    /// Tokens appended without a forward pass (fast-forward).
    pub forced_tokens: AtomicU64,
    pub forward_passes: AtomicU64,
    pub compile_micros: AtomicU64,
    pub compiles: AtomicU64,
    pub cache_hits: AtomicU64,
    /// Wall time inside generation loops (mask, sampling and model), microseconds.
    pub generate_micros: AtomicU64,
    /// Masks computed by generation loops ([`MaskStats::count`]).
    pub masks: AtomicU64,
    /// Time spent computing them, microseconds ([`MaskStats::time`]): with overlap, much of it
    /// ran during forward passes, so it is not a share of `generate_micros`.
    pub mask_micros: AtomicU64,
    /// Generations stopped because the client went away.
    pub cancelled: AtomicU64,
}

impl Metrics {
    pub fn add(c: &AtomicU64, v: u64) {
        c.fetch_add(v, Relaxed);
    }

    /// The text exposition; `running` and `queued` are gauges read by the caller, `batching`
    /// the model source's batch size limit and figures (`None`: it does not batch).
    pub fn render(
        &self,
        running: usize,
        queued: usize,
        cached: usize,
        batching: Option<&(usize, BatchStats)>,
    ) -> String {
        let mut s = String::new();
        let l = |c: &AtomicU64| c.load(Relaxed) as f64;
        metric(
            &mut s,
            "requests_total",
            "counter",
            "Completion requests received.",
            &[("{route=\"chat\"}", l(&self.chat_requests)), ("{route=\"completions\"}", l(&self.completion_requests))],
        );
        let plain: [(&str, &str, &str, f64); 17] = [
            ("request_errors_total", "counter", "Requests answered with an error.", l(&self.errors)),
            ("requests_rejected_total", "counter", "Requests refused: queue full.", l(&self.rejected)),
            (
                "generations_cancelled_total",
                "counter",
                "Generations stopped by a client disconnect.",
                l(&self.cancelled),
            ),
            ("prompt_tokens_total", "counter", "Prompt tokens processed.", l(&self.prompt_tokens)),
            ("completion_tokens_total", "counter", "Tokens generated.", l(&self.completion_tokens)),
            ("forced_tokens_total", "counter", "Tokens appended without a forward pass.", l(&self.forced_tokens)),
            ("forward_passes_total", "counter", "Model forward passes.", l(&self.forward_passes)),
            ("generate_seconds_total", "counter", "Time in generation loops.", l(&self.generate_micros) / 1e6),
            ("masks_total", "counter", "Token masks computed.", l(&self.masks)),
            ("mask_seconds_total", "counter", "Time computing token masks.", l(&self.mask_micros) / 1e6),
            ("compiles_total", "counter", "Constraints compiled.", l(&self.compiles)),
            ("compile_seconds_total", "counter", "Time compiling constraints.", l(&self.compile_micros) / 1e6),
            ("compile_cache_hits_total", "counter", "Constraints found in the compile cache.", l(&self.cache_hits)),
            ("compile_cache_entries", "gauge", "Compiled constraints cached.", cached as f64),
            ("generations_running", "gauge", "Generations running now.", running as f64),
            ("requests_queued", "gauge", "Requests waiting for a generation slot.", queued as f64),
            (
                "kv_cache_bytes",
                "gauge",
                "Bytes the KV caches hold on the CPU (every live sequence, with the room sized ahead).",
                crate::model::kv_cache_cpu_bytes() as f64,
            ),
        ];
        for (name, kind, help, v) in plain {
            metric(&mut s, name, kind, help, &[("", v)]);
        }
        // Batched forward passes: a histogram of sequences per pass (all zero when the model
        // does not batch), the tokens they fed and their time.
        let (max_batch, b) = batching.cloned().unwrap_or((1, BatchStats::default()));
        let les: Vec<String> = BATCH_BUCKETS.iter().map(|n| format!("{{le=\"{n}\"}}")).collect();
        let mut buckets: Vec<(&str, f64)> = les.iter().map(|l| l.as_str()).zip(b.buckets.map(|c| c as f64)).collect();
        buckets.push(("{le=\"+Inf\"}", b.passes as f64));
        let _ = writeln!(
            s,
            "# HELP strictly_batch_size Sequences stepped per batched forward pass.\n# TYPE strictly_batch_size histogram"
        );
        for (labels, v) in buckets {
            let _ = writeln!(s, "strictly_batch_size_bucket{labels} {v}");
        }
        let _ = writeln!(s, "strictly_batch_size_sum {}\nstrictly_batch_size_count {}", b.rows, b.passes);
        let batch: [(&str, &str, &str, f64); 3] = [
            ("batch_tokens_total", "counter", "Tokens fed by batched forward passes.", b.tokens as f64),
            ("batch_seconds_total", "counter", "Time in batched forward passes.", b.busy.as_secs_f64()),
            ("max_batch", "gauge", "Most sequences per forward pass (1: no batching).", max_batch as f64),
        ];
        for (name, kind, help, v) in batch {
            metric(&mut s, name, kind, help, &[("", v)]);
        }
        s
    }
}

fn metric(s: &mut String, name: &str, kind: &str, help: &str, values: &[(&str, f64)]) {
    let _ = writeln!(s, "# HELP strictly_{name} {help}\n# TYPE strictly_{name} {kind}");
    for (labels, v) in values {
        let _ = writeln!(s, "strictly_{name}{labels} {v}");
    }
}
