//! [`GroupSummary`]: the tallies of a set of case results (one group, or the whole run), as
//! peer-bench's summary has them, and the summary JSON's per-group table.

use std::collections::BTreeMap;

use serde::Serialize;

use super::result::CaseResult;
use super::stats::{pct_sorted, summarize_ns_as_us, us, Summary};

/// Tallies over a set of cases (one group, or all). The serialized fields up to `ttfm_ms_max`
/// are peer-bench's, in its order; the `peak_rss_*` ones are strictly's additions.
#[derive(Debug, Default, Serialize)]
pub struct GroupSummary {
    pub cases: usize,
    /// Cases whose schema compiled and gave a first mask.
    pub compiled: usize,
    pub ok: usize,
    pub statuses: BTreeMap<String, usize>,
    pub valid: usize,
    pub valid_accepted: usize,
    pub invalid: usize,
    pub invalid_rejected: usize,
    /// Valid / invalid instances of schemas that compiled.
    pub valid_compiled: usize,
    pub invalid_compiled: usize,
    /// Compiled schemas with at least one valid instance, and those with all of them accepted.
    pub schemas_with_valid: usize,
    pub schemas_all_valid_accepted: usize,
    /// Valid instances not accepted, by the JSON context where the token was rejected (or the
    /// outcome, when it was not a rejection).
    pub valid_rejected_in: BTreeMap<String, usize>,
    pub tests_agree: usize,
    pub tests_total_compiled: usize,
    pub tests_total_all: usize,
    pub tokens: usize,
    pub masks: usize,
    pub mask_us: Option<Summary>,
    pub mask_us_p999: Option<f64>,
    pub compile_ms_median: Option<f64>,
    pub compile_ms_p90: Option<f64>,
    pub compile_ms_max: Option<f64>,
    pub ttfm_ms_median: Option<f64>,
    pub ttfm_ms_p90: Option<f64>,
    pub ttfm_ms_max: Option<f64>,
    /// Peak resident memory of a worker while it ran one compiled case (MiB), median and max
    /// over compiled cases; and the same minus the resident memory when the case started.
    pub peak_rss_mib_median: Option<f64>,
    pub peak_rss_mib_max: Option<f64>,
    /// 99th percentiles of compile and time to first mask (ms; the targets use them).
    pub compile_ms_p99: Option<f64>,
    pub ttfm_ms_p99: Option<f64>,
    pub peak_rss_delta_mib_median: Option<f64>,
    pub peak_rss_delta_mib_max: Option<f64>,
    /// Cases re-run for a slow maximum (`--recheck-max-ms`), and the largest maximum mask µs
    /// once each such case counts with the smallest of its runs' maxima: the maxima that came
    /// back. Equal to `mask_us.max` when nothing was re-run.
    pub rechecked_cases: usize,
    pub mask_max_us_rechecked: Option<f64>,
    #[serde(skip)]
    pub mask_ns: Vec<u64>,
    #[serde(skip)]
    compile_ns: Vec<u64>,
    #[serde(skip)]
    ttfm_ns: Vec<u64>,
    #[serde(skip)]
    peak_kib: Vec<u64>,
    #[serde(skip)]
    delta_kib: Vec<u64>,
}

impl GroupSummary {
    pub fn add(&mut self, r: &CaseResult) {
        self.cases += 1;
        *self.statuses.entry(r.status.clone()).or_default() += 1;
        if r.ttfm_us.is_some() {
            self.compiled += 1;
            self.compile_ns.push((r.compile_us.unwrap_or(0.0) * 1000.0) as u64);
            self.ttfm_ns.push((r.ttfm_us.unwrap_or(0.0) * 1000.0) as u64);
            self.tests_total_compiled += r.n_valid + r.n_invalid;
            self.valid_compiled += r.n_valid;
            self.invalid_compiled += r.n_invalid;
            if r.n_valid > 0 {
                self.schemas_with_valid += 1;
                if r.n_valid_accepted == r.n_valid {
                    self.schemas_all_valid_accepted += 1;
                }
            }
            if let Some(peak) = r.peak_rss_mib {
                let kib = (peak * 1024.0).round() as u64;
                self.peak_kib.push(kib);
                let before = (r.rss_before_mib.unwrap_or(peak) * 1024.0).round() as u64;
                self.delta_kib.push(kib.saturating_sub(before));
            }
        }
        if r.status == "ok" {
            self.ok += 1;
        }
        self.tests_total_all += r.n_valid + r.n_invalid;
        self.valid += r.n_valid;
        self.valid_accepted += r.n_valid_accepted;
        self.invalid += r.n_invalid;
        self.invalid_rejected += r.n_invalid_rejected;
        self.tests_agree += r.instances.iter().filter(|i| i.agree).count();
        self.tokens += r.n_tokens;
        self.masks += r.n_masks;
        if let Some(m) = &r.mask_us {
            self.rechecked_cases += usize::from(!r.mask_max_rechecks_us.is_empty());
            let kept = r.mask_max_rechecks_us.iter().copied().fold(m.max, f64::min);
            self.mask_max_us_rechecked = Some(self.mask_max_us_rechecked.map_or(kept, |x| x.max(kept)));
        }
        for i in &r.instances {
            self.mask_ns.extend_from_slice(&i.mask_ns);
            if i.expected_valid && !i.agree {
                let k = i.rejected_in.clone().unwrap_or_else(|| i.outcome.clone());
                *self.valid_rejected_in.entry(k).or_default() += 1;
            }
        }
    }

    /// Computes the distributions from the collected samples.
    pub fn finish(&mut self) {
        self.mask_us = summarize_ns_as_us(&self.mask_ns);
        if !self.mask_ns.is_empty() {
            self.mask_ns.sort_unstable();
            self.mask_us_p999 = Some(us(pct_sorted(&self.mask_ns, 0.999)));
        }
        let ms = |v: &mut Vec<u64>, q: f64| -> Option<f64> {
            (!v.is_empty()).then(|| {
                v.sort_unstable();
                (pct_sorted(v, q) as f64 / 1e4).round() / 100.0
            })
        };
        self.compile_ms_median = ms(&mut self.compile_ns, 0.5);
        self.compile_ms_p90 = ms(&mut self.compile_ns, 0.9);
        self.compile_ms_max = ms(&mut self.compile_ns, 1.0);
        self.ttfm_ms_median = ms(&mut self.ttfm_ns, 0.5);
        self.ttfm_ms_p90 = ms(&mut self.ttfm_ns, 0.9);
        self.ttfm_ms_max = ms(&mut self.ttfm_ns, 1.0);
        self.compile_ms_p99 = ms(&mut self.compile_ns, 0.99);
        self.ttfm_ms_p99 = ms(&mut self.ttfm_ns, 0.99);
        let mib = |v: &mut Vec<u64>, q: f64| -> Option<f64> {
            (!v.is_empty()).then(|| {
                v.sort_unstable();
                (pct_sorted(v, q) as f64 / 1024.0 * 10.0).round() / 10.0
            })
        };
        self.peak_rss_mib_median = mib(&mut self.peak_kib, 0.5);
        self.peak_rss_mib_max = mib(&mut self.peak_kib, 1.0);
        self.peak_rss_delta_mib_median = mib(&mut self.delta_kib, 0.5);
        self.peak_rss_delta_mib_max = mib(&mut self.delta_kib, 1.0);
    }
}
