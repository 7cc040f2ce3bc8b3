//! [`Batcher`]: continuous batching. One thread owns a [`BatchNet`] and steps every sequence
//! that needs a forward pass in one batched pass; each sequence is a [`BatchedSequence`], a
//! [`LanguageModel`] whose `forward` hands its tokens and KV cache to that thread and waits for
//! its logits row.
//!
//! ```text
//!  generation loop A ─ forward(tokens) ─┐                       ┌─▶ logits A (cache A grown)
//!  generation loop B ─ forward(tokens) ─┼─▶ batch thread: gather ─ one BatchNet pass ───┼─▶ logits B
//!  generation loop C ─ (masking, sampling, streaming: not ready yet; joins the next pass)
//! ```
//!
//! Each generation keeps running [`crate::decode::Generation`] on its own thread, unchanged:
//! the mask, the sampler, the stops, the detokenizer, cancellation and the server's checks
//! stay per sequence (and run in parallel), and only the forward pass is shared. Sequences join
//! and leave between passes: a new one's prefill simply rides along in the next pass.
//!
//! Gathering: the thread takes the first waiting request and everything already queued behind
//! it, then waits for the sequences of the previous pass that are still alive and have not sent
//! their next request yet (they are busy masking or sampling), but no longer than the last pass
//! took: waiting longer would cost the ready ones more than a separate pass costs the late one.
//! A sequence that missed a pass (its client reads slowly, say) is not waited for again until
//! it is back in a pass, so it delays the others at most once. New sequences are not waited
//! for: their prefill joins whichever pass they reach. At most `max_batch` requests go in one
//! pass; the others wait in arrival order for the next.
//!
//! Invariants:
//! - A sequence's cache lives in its [`BatchedSequence`]; it travels to the batch thread with
//!   the request and comes back with the reply, grown by the request's tokens, or unchanged
//!   when the pass failed. So checkpoints, rewinds and forks are local clones.
//! - The batch thread stops when the [`Batcher`] and every sequence are gone.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use super::batch::{check_row, BatchNet, BatchRow, KvCache};
use crate::decode::LanguageModel;
use crate::error::{Error, Result};
use crate::vocab::TokenId;

/// The batch sizes the histogram tells apart: a pass of `n` sequences counts in the first
/// bucket `b >= n` (and all later ones, as Prometheus buckets do).
pub const BATCH_BUCKETS: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];

/// What the batch thread has done so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchStats {
    /// Batched passes run.
    pub passes: u64,
    /// Sequences stepped, summed over the passes (`rows / passes` is the mean batch size).
    pub rows: u64,
    /// Tokens fed, summed over the passes.
    pub tokens: u64,
    /// Per bucket of [`BATCH_BUCKETS`]: passes of at most that many sequences (cumulative).
    pub buckets: [u64; BATCH_BUCKETS.len()],
    /// Time inside passes.
    pub busy: Duration,
}

#[derive(Default)]
struct Shared {
    /// Sequences that exist (could send a request).
    live: AtomicUsize,
    /// The id of the next sequence.
    next_id: AtomicU64,
    passes: AtomicU64,
    rows: AtomicU64,
    tokens: AtomicU64,
    buckets: [AtomicU64; BATCH_BUCKETS.len()],
    busy_micros: AtomicU64,
}

/// The cache back, and the logits after each of the request's last `tail` tokens.
type Reply = (KvCache, Result<Vec<Vec<f32>>>);

/// What sequences send to the batch thread.
enum Msg {
    Pass(Request),
    /// The sequence with this id is gone (dropped).
    Leave(u64),
}

struct Request {
    id: u64,
    cache: KvCache,
    tokens: Vec<TokenId>,
    /// Rows of logits wanted: after each of the last `tail` tokens (1 but for a draft).
    tail: usize,
    reply: mpsc::SyncSender<Reply>,
}

/// The handle to one batch thread (see the module docs). Dropping it lets the thread stop once
/// the last sequence is gone too.
pub struct Batcher {
    tx: mpsc::Sender<Msg>,
    shared: Arc<Shared>,
    width: usize,
    max_positions: usize,
    max_batch: usize,
}

impl Batcher {
    /// Starts the batch thread for `model`, stepping at most `max_batch` (at least 1)
    /// sequences per pass.
    pub fn new(model: BatchNet, max_batch: usize) -> Result<Batcher> {
        let max_batch = max_batch.max(1);
        let (tx, rx) = mpsc::channel();
        let shared = Arc::new(Shared::default());
        let (width, max_positions) = (model.vocab_size(), model.max_positions());
        let s = shared.clone();
        std::thread::Builder::new()
            .name("strictly-batch".into())
            .spawn(move || run(model, rx, &s, max_batch))
            .map_err(|e| Error::model(format!("cannot start the batch thread: {e}")))?;
        Ok(Batcher { tx, shared, width, max_positions, max_batch })
    }

    /// A new, empty sequence.
    pub fn sequence(&self) -> BatchedSequence {
        BatchedSequence::new(self.tx.clone(), self.shared.clone(), KvCache::default(), self.width, self.max_positions)
    }

    /// Sequences that exist now.
    pub fn live(&self) -> usize {
        self.shared.live.load(Relaxed)
    }

    pub fn max_batch(&self) -> usize {
        self.max_batch
    }

    pub fn stats(&self) -> BatchStats {
        let s = &self.shared;
        let mut buckets = [0; BATCH_BUCKETS.len()];
        for (b, a) in buckets.iter_mut().zip(&s.buckets) {
            *b = a.load(Relaxed);
        }
        BatchStats {
            passes: s.passes.load(Relaxed),
            rows: s.rows.load(Relaxed),
            tokens: s.tokens.load(Relaxed),
            buckets,
            busy: Duration::from_micros(s.busy_micros.load(Relaxed)),
        }
    }
}

impl std::fmt::Debug for Batcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Batcher(max batch {}, {} live sequences)", self.max_batch, self.live())
    }
}

/// The batch thread: gather, one pass, replies; until every sender is gone.
fn run(model: BatchNet, rx: mpsc::Receiver<Msg>, s: &Shared, max_batch: usize) {
    // How long to wait for late sequences: the last pass's time, within these bounds.
    const MIN_WAIT: Duration = Duration::from_micros(50);
    const MAX_WAIT: Duration = Duration::from_millis(20);
    let mut wait = MIN_WAIT;
    // The ids of the previous pass's sequences still alive: the ones worth waiting for.
    let mut expected: HashSet<u64> = HashSet::new();
    while let Ok(msg) = rx.recv() {
        let first = match msg {
            Msg::Pass(r) => r,
            Msg::Leave(id) => {
                expected.remove(&id);
                continue;
            }
        };
        expected.remove(&first.id);
        let mut batch = vec![first];
        let until = Instant::now() + wait;
        while batch.len() < max_batch {
            // Whatever is already queued joins without waiting.
            let msg = match rx.try_recv() {
                Ok(m) => m,
                Err(mpsc::TryRecvError::Disconnected) => break,
                Err(mpsc::TryRecvError::Empty) => {
                    let now = Instant::now();
                    if expected.is_empty() || now >= until {
                        break;
                    }
                    match rx.recv_timeout(until - now) {
                        Ok(m) => m,
                        Err(_) => break,
                    }
                }
            };
            match msg {
                Msg::Pass(r) => {
                    expected.remove(&r.id);
                    batch.push(r);
                }
                Msg::Leave(id) => {
                    expected.remove(&id);
                }
            }
        }
        // Late ones of the previous pass are not waited for again until they are back.
        expected = batch.iter().map(|r| r.id).collect();
        let t0 = Instant::now();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let tails: Vec<usize> = batch.iter().map(|r| r.tail).collect();
            let mut rows: Vec<BatchRow> =
                batch.iter_mut().map(|r| BatchRow { cache: &mut r.cache, tokens: &r.tokens }).collect();
            model.forward_tails(&mut rows, &tails)
        }))
        .unwrap_or_else(|_| Err(Error::model("the batched forward pass panicked")));
        let took = t0.elapsed();
        wait = took.clamp(MIN_WAIT, MAX_WAIT);
        let n = batch.len();
        s.passes.fetch_add(1, Relaxed);
        s.rows.fetch_add(n as u64, Relaxed);
        s.tokens.fetch_add(batch.iter().map(|r| r.tokens.len() as u64).sum(), Relaxed);
        for (b, count) in BATCH_BUCKETS.iter().zip(&s.buckets) {
            if n <= *b {
                count.fetch_add(1, Relaxed);
            }
        }
        s.busy_micros.fetch_add(took.as_micros() as u64, Relaxed);
        match result {
            Ok(rows) => {
                let mut rows = rows.into_iter();
                for r in batch {
                    let mine: Vec<Vec<f32>> = rows.by_ref().take(r.tail).collect();
                    // A sequence that went away no longer waits for its reply: nothing to do.
                    let _ = r.reply.send((r.cache, Ok(mine)));
                }
            }
            Err(e) => {
                let msg = e.to_string();
                for r in batch {
                    let _ = r.reply.send((r.cache, Err(Error::model(msg.clone()))));
                }
            }
        }
    }
}

/// One sequence stepped by a [`Batcher`]: a [`LanguageModel`] whose passes are batched with
/// the other sequences'. Checkpoints and forks clone the cache (cheap: shared tensors).
pub struct BatchedSequence {
    id: u64,
    tx: mpsc::Sender<Msg>,
    shared: Arc<Shared>,
    /// `None` only while a request is out (never observable: `forward` waits for it).
    cache: Option<KvCache>,
    saved: Option<KvCache>,
    width: usize,
    max_positions: usize,
}

impl BatchedSequence {
    fn new(tx: mpsc::Sender<Msg>, shared: Arc<Shared>, cache: KvCache, width: usize, max_positions: usize) -> Self {
        shared.live.fetch_add(1, Relaxed);
        let id = shared.next_id.fetch_add(1, Relaxed);
        BatchedSequence { id, tx, shared, cache: Some(cache), saved: None, width, max_positions }
    }

    /// Tokens in the sequence so far.
    pub fn position(&self) -> usize {
        self.cache.as_ref().map_or(0, KvCache::position)
    }
}

impl Drop for BatchedSequence {
    fn drop(&mut self) {
        self.shared.live.fetch_sub(1, Relaxed);
        // Nobody to tell when the thread has stopped.
        let _ = self.tx.send(Msg::Leave(self.id));
    }
}

impl LanguageModel for BatchedSequence {
    fn logits_width(&self) -> usize {
        self.width
    }

    fn forward(&mut self, tokens: &[TokenId], logits: &mut [f32]) -> Result<()> {
        self.forward_rows(tokens, 1, logits)
    }

    /// One request to the batch thread, whatever the rows: a draft rides in the shared pass.
    fn forward_rows(&mut self, tokens: &[TokenId], n_rows: usize, logits: &mut [f32]) -> Result<()> {
        // Checked here, so that one sequence's bad input never fails a pass the others share.
        check_row(self.position(), tokens, self.width, self.max_positions)?;
        crate::decode::check_rows(tokens, n_rows, logits.len(), self.width)?;
        let cache = self.cache.take().expect("the cache is home between passes");
        // A channel per pass: if the batch thread died holding the request, the reply's sender
        // goes with it and `recv` fails instead of waiting for ever.
        let (reply, reply_rx) = mpsc::sync_channel(1);
        let req = Request { id: self.id, cache, tokens: tokens.to_vec(), tail: n_rows, reply };
        if let Err(mpsc::SendError(msg)) = self.tx.send(Msg::Pass(req)) {
            if let Msg::Pass(req) = msg {
                self.cache = Some(req.cache);
            }
            return Err(Error::model("the batch thread has stopped"));
        }
        let Ok((cache, row)) = reply_rx.recv() else {
            // The thread dropped the request without replying (it cannot, short of dying).
            self.cache = Some(KvCache::default());
            return Err(Error::model("the batch thread stopped during a pass; the sequence is lost"));
        };
        self.cache = Some(cache);
        let rows = row?;
        if rows.len() != n_rows || rows.iter().any(|r| r.len() != self.width) {
            return Err(Error::model(format!("the batch thread returned {} rows, expected {n_rows}", rows.len())));
        }
        for (dst, row) in logits.chunks_mut(self.width).zip(&rows) {
            dst.copy_from_slice(row);
        }
        Ok(())
    }

    fn can_truncate(&self) -> bool {
        true
    }

    fn truncate(&mut self, n: usize) -> Result<()> {
        self.cache.as_mut().expect("the cache is home between passes").truncate(n)
    }

    fn fork(&self) -> Result<Box<dyn LanguageModel>> {
        let cache = self.cache.clone().unwrap_or_default();
        Ok(Box::new(BatchedSequence::new(self.tx.clone(), self.shared.clone(), cache, self.width, self.max_positions)))
    }

    fn checkpoint(&mut self) -> bool {
        self.saved = self.cache.clone();
        self.saved.is_some()
    }

    fn rewind(&mut self) -> Result<()> {
        let saved = self.saved.take().ok_or_else(|| Error::state("no checkpoint to rewind to"))?;
        self.cache = Some(saved);
        Ok(())
    }
}

impl std::fmt::Debug for BatchedSequence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BatchedSequence({} tokens)", self.position())
    }
}

// Generations run on their own threads.
const _: () = {
    const fn send<T: Send>() {}
    send::<BatchedSequence>();
    send::<Batcher>();
};
