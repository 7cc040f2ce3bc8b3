//! The scheduler: running generations for the HTTP side. Admission (a bounded queue),
//! generation slots (a fair semaphore), and the generation loop on a blocking thread, talking
//! to the request's task through a channel of [`Msg`]s.
//!
//! ```text
//! request ─ admit (≤ max_concurrent + max_queue, else 429) ─ compile ─ wait for a slot
//!   (FIFO; past the request timeout: 503) ─ spawn_blocking: for each choice, a fresh model
//!   sequence (ModelSource::fresh) + a fresh matcher ─ Generation ─ Msg ─▶ channel ─▶ handler
//! ```
//!
//! # Key types
//!
//! - [`Job`]: one request's work, `n` choices for each prompt (choice index = prompt · n + j).
//! - [`Ticket`]: a place among the admitted requests; [`AppState::admit`] hands it out.
//! - [`Started`]: a job whose first choice has begun, and the receiver of its [`Msg`]s
//!   ([`AppState::start`]); the endpoints turn those into a response (`super::reply`).
//!
//! The choices run one after another; with a model source that batches its passes
//! ([`ModelSource::batching`]), several choices run at once on scoped threads, so that their
//! passes share batches. Messages of different choices may then interleave; each choice's
//! own messages keep their order (`Begin`, events, `Done`).
//!
//! # Invariants
//!
//! - Cancellation: the handler (or the SSE body) owns the receiver. When the client goes away
//!   axum drops it, the next send fails, and the loop returns, dropping its slot and admission
//!   ticket. A send that waits (the client stopped reading) gives up at the request's deadline.
//! - A `Done` output satisfies its constraint: it is checked before it is sent.
//! - The ticket and the slot are given back before the last `Done` is sent, so a client that
//!   sends its next request on receiving the response finds them free.

use std::sync::atomic::Ordering::{AcqRel, Relaxed};
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use tokio::sync::{mpsc, OwnedSemaphorePermit};

use super::error::ApiError;
use super::metrics::Metrics;
use super::AppState;
#[cfg(doc)]
use super::ModelSource;
use crate::automaton::Compiled;
use crate::decode::{Event, GenerateOptions, Generation, Output, StoppedBy};
use crate::error::Error;
use crate::vocab::TokenId;

/// What the generation thread reports.
#[derive(Debug)]
pub enum Msg {
    /// Choice `index` started (its generation was set up without error).
    Begin {
        index: usize,
    },
    Event {
        index: usize,
        event: Event,
    },
    /// Choice `index` finished; its output satisfies the constraint (checked).
    Done {
        index: usize,
        output: Output,
    },
    /// The request failed; nothing follows.
    Error(ApiError),
}

/// One request's work: `n` choices for each prompt, choice index = prompt · n + j.
pub struct Job {
    pub prompts: Vec<Vec<TokenId>>,
    /// Per prompt.
    pub max_tokens: Vec<usize>,
    pub n: usize,
    pub compiled: Option<Arc<Compiled>>,
    pub opts: GenerateOptions,
}

/// A place among the admitted requests (running or queued); given back on drop.
pub struct Ticket {
    state: AppState,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.state.inner.admitted.fetch_sub(1, Relaxed);
    }
}

impl AppState {
    /// Admits a request, or 429 when `max_concurrent + max_queue` are already in.
    pub(crate) fn admit(&self) -> Result<Ticket, ApiError> {
        let i = &self.inner;
        let limit = i.config.max_concurrent + i.config.max_queue;
        if i.admitted.fetch_add(1, Relaxed) >= limit {
            i.admitted.fetch_sub(1, Relaxed);
            Metrics::add(&i.metrics.rejected, 1);
            return Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                format!(
                    "the server is busy: {} generations running and {} queued; retry later",
                    i.config.max_concurrent, i.config.max_queue
                ),
            )
            .code("server_busy"));
        }
        Ok(Ticket { state: self.clone() })
    }

    /// Generations running now.
    pub fn running(&self) -> usize {
        self.inner.config.max_concurrent - self.inner.slots.available_permits()
    }

    /// Requests admitted but not running (compiling or waiting for a slot).
    pub fn queued(&self) -> usize {
        self.inner.admitted.load(Relaxed).saturating_sub(self.running())
    }

    async fn slot(&self, deadline: Instant) -> Result<OwnedSemaphorePermit, ApiError> {
        let wait = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(wait, self.inner.slots.clone().acquire_owned()).await {
            Ok(Ok(p)) => Ok(p),
            Ok(Err(_)) => Err(ApiError::internal("the generation slots are closed")),
            Err(_) => Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                "timed out waiting for a free generation slot",
            )
            .code("queue_timeout")),
        }
    }

    /// Waits for a slot, starts the job on a blocking thread and returns its channel once the
    /// first choice has begun (or the error that kept it from beginning).
    pub(crate) async fn start(&self, job: Job, ticket: Ticket, deadline: Instant) -> Result<Started, ApiError> {
        let permit = self.slot(deadline).await?;
        let (tx, mut rx) = mpsc::channel(64);
        let st = self.clone();
        let handle = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            run(&st, job, deadline, &Sender { tx, handle, deadline }, (ticket, permit));
        });
        match rx.recv().await {
            Some(Msg::Begin { index }) => Ok(Started { rx, first: index }),
            Some(Msg::Error(e)) => Err(e),
            Some(other) => Err(ApiError::internal(format!("unexpected first message {other:?}"))),
            None => Err(ApiError::internal("the generation ended before it began")),
        }
    }
}

/// A job whose first choice has begun.
pub struct Started {
    pub rx: mpsc::Receiver<Msg>,
    /// The index of the choice that began (0).
    pub first: usize,
}

struct Sender {
    tx: mpsc::Sender<Msg>,
    handle: tokio::runtime::Handle,
    deadline: Instant,
}

impl Sender {
    /// False when the receiver is gone or did not take the message before the deadline.
    fn send(&self, m: Msg) -> bool {
        match self.tx.try_send(m) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Closed(_)) => false,
            Err(mpsc::error::TrySendError::Full(m)) => {
                let wait = self.deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
                matches!(self.handle.block_on(tokio::time::timeout(wait, self.tx.send(m))), Ok(Ok(())))
            }
        }
    }
}

fn timeout_error() -> ApiError {
    ApiError::new(StatusCode::GATEWAY_TIMEOUT, "timeout_error", "the request ran past the server's request timeout")
        .code("timeout")
}

/// An error from inside the loop: the context running out is the request's fault, anything
/// else (a failing model) the server's.
fn loop_error(e: Error) -> ApiError {
    match e {
        Error::Limit { .. } => ApiError::from_lib(e, None).code("context_length_exceeded"),
        e => ApiError::internal(format!("generation failed: {}", super::error::one_line(&e.to_string()))),
    }
}

/// Runs the job's choices: one after another, or, when the model batches its passes and
/// there are several, all at once on scoped threads (their passes then share batches; each
/// choice's seed is still the request's seed + its index, so the outputs are the same either
/// way). `guards` (the admission ticket and the slot) are given back just before the last
/// `Done` goes out, so that a client that sends its next request as soon as it has the
/// response finds them free; on an early return they go with the function.
fn run(st: &AppState, job: Job, deadline: Instant, tx: &Sender, guards: (Ticket, OwnedSemaphorePermit)) {
    // (choice index, prompt index): choice index = prompt · n + j.
    let choices: Vec<(usize, usize)> =
        (0..job.prompts.len()).flat_map(|p| std::iter::repeat_n(p, job.n)).enumerate().collect();
    let run = Run {
        st,
        job: &job,
        deadline,
        tx,
        guards: Mutex::new(Some(guards)),
        left: AtomicUsize::new(choices.len()),
        stop: AtomicBool::new(false),
    };
    if choices.len() > 1 && st.inner.source.batching().is_some() {
        std::thread::scope(|s| {
            for &(index, p) in &choices {
                let run = &run;
                s.spawn(move || {
                    if !run.choice(index, p) {
                        // The request is over (an error went out, or the client left): the
                        // other choices stop at their next event, without a word.
                        run.stop.store(true, Relaxed);
                    }
                });
            }
        });
    } else {
        for &(index, p) in &choices {
            if !run.choice(index, p) {
                return;
            }
        }
    }
}

/// One job's choices in progress (see [`run`]).
struct Run<'a> {
    st: &'a AppState,
    job: &'a Job,
    deadline: Instant,
    tx: &'a Sender,
    guards: Mutex<Option<(Ticket, OwnedSemaphorePermit)>>,
    /// Choices not done yet.
    left: AtomicUsize,
    /// Set when a choice ended the request early; the others then stop quietly.
    stop: AtomicBool,
}

impl Run<'_> {
    /// Generates choice `index` of prompt `p` and sends its messages; false if the request is
    /// over (an error was sent, the client went away, or another choice ended it).
    fn choice(&self, index: usize, p: usize) -> bool {
        let (inner, job, tx) = (&self.st.inner, self.job, self.tx);
        let mut model = match inner.source.fresh() {
            Ok(model) => model,
            Err(e) => {
                tx.send(Msg::Error(ApiError::internal(format!("cannot start a sequence: {e}"))));
                return false;
            }
        };
        let mut matcher = job.compiled.as_ref().map(|c| c.matcher());
        let opts = self.options(index, p);
        let t0 = Instant::now();
        let mut g = match Generation::new(&mut *model, inner.env.vocab(), matcher.as_mut(), &job.prompts[p], &opts) {
            Ok(g) => g,
            Err(e) => {
                let mut err = ApiError::from_lib(e, None);
                if err.message.starts_with("max_tokens") {
                    err.param = Some("max_tokens".into());
                }
                tx.send(Msg::Error(err));
                return false;
            }
        };
        if self.stop.load(Relaxed) {
            return false;
        }
        if !tx.send(Msg::Begin { index }) {
            Metrics::add(&inner.metrics.cancelled, 1);
            return false;
        }
        if !self.events(index, &mut g) {
            return false;
        }
        let Some(output) = g.into_output() else {
            tx.send(Msg::Error(ApiError::internal("the generation ended without an output")));
            return false;
        };
        self.count(&output, t0);
        if let Err(e) = self.check(&output) {
            tx.send(Msg::Error(e));
            return false;
        }
        if self.left.fetch_sub(1, AcqRel) == 1 {
            // The last choice: nothing of the request's is running any more.
            drop(self.guards.lock().unwrap_or_else(|p| p.into_inner()).take());
        }
        tx.send(Msg::Done { index, output })
    }

    /// The job's options for choice `index` of prompt `p`: that prompt's budget, and the
    /// request's seed + the choice index (so choices differ, and run alike in any order).
    fn options(&self, index: usize, p: usize) -> GenerateOptions {
        let mut opts = self.job.opts.clone();
        opts.max_tokens = self.job.max_tokens[p];
        if let Some(s) = opts.sampling.seed {
            opts.sampling.seed = Some(s.wrapping_add(index as u64));
        }
        opts
    }

    /// Sends the generation's events until it ends; false if the request is over (deadline,
    /// a failing model, the client gone, or another choice ended it).
    fn events(&self, index: usize, g: &mut Generation<'_>) -> bool {
        let (tx, deadline) = (self.tx, self.deadline);
        loop {
            if self.stop.load(Relaxed) {
                return false;
            }
            if Instant::now() >= deadline {
                tx.send(Msg::Error(timeout_error()));
                return false;
            }
            match g.next() {
                None => return true,
                Some(Ok(event)) => {
                    if !tx.send(Msg::Event { index, event }) {
                        if Instant::now() >= deadline {
                            tx.send(Msg::Error(timeout_error()));
                        } else if !self.stop.load(Relaxed) {
                            Metrics::add(&self.st.inner.metrics.cancelled, 1);
                        }
                        return false;
                    }
                }
                Some(Err(e)) => {
                    tx.send(Msg::Error(loop_error(e)));
                    return false;
                }
            }
        }
    }

    /// Adds a finished choice to the metrics (`t0`: when its generation was set up).
    fn count(&self, output: &Output, t0: Instant) {
        let m = &self.st.inner.metrics;
        Metrics::add(&m.generate_micros, t0.elapsed().as_micros() as u64);
        Metrics::add(&m.completion_tokens, output.tokens.len() as u64);
        Metrics::add(&m.forced_tokens, output.forced as u64);
        Metrics::add(&m.forward_passes, output.forward_passes as u64);
        Metrics::add(&m.masks, output.masks.count as u64);
        Metrics::add(&m.mask_micros, output.masks.time.as_micros() as u64);
    }

    /// Whether the output satisfies the job's constraint. The decoding loop guarantees this (a
    /// stop string ends a constrained output only where it is complete); checking costs one
    /// pass over the bytes and turns a broken guarantee into an error rather than a broken
    /// success (a stop string's: a 400 naming `stop`; anything else is a bug, a 500).
    fn check(&self, output: &Output) -> Result<(), ApiError> {
        let Some(c) = &self.job.compiled else { return Ok(()) };
        let mut check = c.matcher();
        // A token the grammar names (a token terminal) is not its text to the matcher: there
        // the tokens are checked.
        let taken = if c.named_tokens().is_empty() {
            check.commit_bytes(&output.bytes).is_ok()
        } else {
            output.tokens.iter().all(|&t| check.commit(t).is_ok())
        };
        if taken && check.is_accepting() {
            return Ok(());
        }
        Err(match &output.stopped_by {
            Some(StoppedBy::String(s)) => ApiError::bad_request(format!(
                "the stop string {s:?} ended the output before its constraint was complete; \
                 choose stop strings the constrained output cannot contain"
            ))
            .param("stop"),
            _ => ApiError::internal("the output does not satisfy its constraint (a bug: please report it)"),
        })
    }
}
