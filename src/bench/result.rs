//! The per-case record: one JSON line per case on stdout ([`CaseResult`], with its
//! [`InstanceResult`]s and [`SlowestMask`]), in peer-bench's field names and order with
//! strictly's additions between. Filled by `run`, summarized by `stats`, printed by `report`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::cases::Case;
use super::stats::{Summary, ThreadEvents};

/// The slowest mask of a case and what the thread went through during it, read around the
/// timed call (outside its timing): a one-off maximum with faults or switches waited on the
/// kernel; one without them that does not come back in a re-run was slowed from outside.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SlowestMask {
    pub instance: usize,
    /// The step (0-based token index) in that instance.
    pub step: usize,
    pub us: f64,
    /// Wall-clock µs of the same call (with the thread-CPU clock, more than `us` where the
    /// thread waited for a CPU).
    pub wall_us: f64,
    #[serde(flatten)]
    pub events: ThreadEvents,
}

/// One instance's result. Field names and order are peer-bench's.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct InstanceResult {
    pub idx: usize,
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub description: String,
    pub expected_valid: bool,
    pub n_tokens: usize,
    /// accepted | rejected | not_accepting | engine_error
    pub outcome: String,
    /// The step (0-based token index) where the token was rejected or the error happened.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub step: Option<usize>,
    pub agree: bool,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub detail: Option<String>,
    /// JSON lexical context of the rejected token: key / string / number / literal /
    /// structure / whitespace / end / other.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rejected_in: Option<String>,
    /// The mask that refused the token was empty: no way on at all was allowed (under a
    /// budget, at step 0 the request check refuses the request; later, a budget the earlier
    /// masks promised was not kept).
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub mask_empty: bool,
    /// The tokens do not spell the instance text exactly.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub tokenization_mismatch: bool,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mask_us: Option<Summary>,
    /// Every step's mask time; travels from workers, cleared before a line is printed.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub mask_ns: Vec<u64>,
    /// Every step's mask time in µs (with `--per-step`).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub step_mask_us: Vec<f64>,
    #[serde(default)]
    pub commit_ns_total: u64,
    /// The slowest step's mask, before the instance index is known to the case.
    #[serde(skip)]
    pub(super) slowest: Option<(u64, SlowestMask)>,
}

/// One case's result: one JSON line on stdout. Fields up to `commit_us_mean`, and
/// `instances`, are peer-bench's; the ones between are strictly's additions.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CaseResult {
    pub engine: String,
    pub idx: usize,
    pub id: String,
    pub group: String,
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub description: String,
    /// ok | compile_error | rejected_valid | accepted_invalid | engine_error | timeout |
    /// crash | panic
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub compile_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ttfm_us: Option<f64>,
    pub n_instances: usize,
    pub n_valid: usize,
    pub n_valid_accepted: usize,
    pub n_invalid: usize,
    pub n_invalid_rejected: usize,
    pub n_tokens: usize,
    pub n_masks: usize,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mask_us: Option<Summary>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub commit_us_mean: Option<f64>,
    /// Peak resident memory of the process while it ran this case (MiB).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub peak_rss_mib: Option<f64>,
    /// Resident memory when the case started (MiB); `peak_rss_mib` minus this is what the
    /// case added at its peak (compiled constraint, matchers, masks).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rss_before_mib: Option<f64>,
    /// Facts about the compiled automaton ([`Compiled::stats`](crate::automaton::Compiled::stats): engine dfa | earley, sizes).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub automaton: Option<Value>,
    /// With `--lenient`: what the schema asks that is not enforced (keyword and pointer).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub unenforced: Vec<Value>,
    /// The slowest mask of the case (its step and what the thread went through).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mask_slowest: Option<SlowestMask>,
    /// With `recheck_over_ns`: the slowest mask µs of each re-run of the case.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub mask_max_rechecks_us: Vec<f64>,
    pub instances: Vec<InstanceResult>,
}

impl CaseResult {
    /// A result with the case's identity and instance counts filled in.
    pub fn for_case(case: &Case, idx: usize) -> CaseResult {
        CaseResult {
            idx,
            id: case.id.clone(),
            group: case.group.clone(),
            description: case.description.clone(),
            n_instances: case.instances.len(),
            n_valid: case.instances.iter().filter(|i| i.valid).count(),
            n_invalid: case.instances.iter().filter(|i| !i.valid).count(),
            ..CaseResult::default()
        }
    }

    /// A case that produced no measurements (timeout, crash, panic).
    pub fn failed(case: &Case, idx: usize, status: &str, error: String) -> CaseResult {
        CaseResult { status: status.into(), error: Some(error), ..CaseResult::for_case(case, idx) }
    }
}
