//! [`Stream`]: a generation on a worker thread, handed out as [`StreamEvent`]s as they
//! happen (text, each tool call's start and arguments, then the finished value).
//!
//! The worker runs the same [`Job`] the blocking methods run, so with the same seed the events
//! add up to exactly the blocking result, which comes last as [`StreamEvent::Done`].
//!
//! Invariants: the worker sends at most [`STREAM_AHEAD`] events ahead of the consumer (a
//! bounded channel); dropping the [`Stream`] (or [`Stream::cancel`]) sets the cancel flag and
//! drops the receiver, so the worker stops at its next token or its next send, and then joins
//! it: no worker outlives its stream.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::{Job, Ran, STREAM_AHEAD};
use crate::error::{Error, Result};
use crate::tools::Piece;

/// What a [`Stream`] hands out, in order; the last is `Done`.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent<T> {
    /// Text of the reply's reasoning part (a reasoning model's `<think>`…), before any
    /// [`Text`](Self::Text) or call; complete UTF-8, never empty.
    Reasoning(String),
    /// Text (outside tool calls), complete UTF-8, never empty.
    Text(String),
    /// Call `index` (0, 1, ...) of `name` begins.
    CallStart { index: usize, id: String, name: String },
    /// More of call `index`'s arguments' JSON text.
    CallArgs { index: usize, text: String },
    /// The end: the finished value (what the blocking method returns).
    Done(T),
}

/// A generation running on a worker thread: an iterator of [`StreamEvent`]s (or the error
/// that ended it). Dropping it cancels the generation and waits for the worker.
///
/// ```
/// use strictly::{Engine, GenerateOptions, StreamEvent};
/// #[derive(serde::Deserialize, schemars::JsonSchema, Debug)]
/// struct Pet { name: String, legs: u8 }
/// let engine = Engine::embedded()?;
/// let mut text = String::new();
/// for ev in engine.stream::<Pet>("Once upon a time", &GenerateOptions::default().with_seed(1))? {
///     match ev? {
///         StreamEvent::Text(t) => text.push_str(&t),
///         StreamEvent::Done(pet) => assert_eq!(serde_json::from_str::<serde_json::Value>(&text)?["legs"], pet.legs),
///         _ => {}
///     }
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Stream<T> {
    rx: Option<Receiver<Result<StreamEvent<T>>>>,
    cancel: Arc<AtomicBool>,
    tokens: Arc<AtomicUsize>,
    worker: Option<JoinHandle<()>>,
}

impl<T: Send + 'static> Stream<T> {
    pub(super) fn spawn(job: Job, finish: impl FnOnce(Ran) -> Result<T> + Send + 'static) -> Result<Stream<T>> {
        let (tx, rx) = sync_channel(STREAM_AHEAD);
        let cancel = Arc::new(AtomicBool::new(false));
        let tokens = job.tokens.clone();
        let stop = cancel.clone();
        let worker = std::thread::Builder::new()
            .name("strictly-stream".into())
            .spawn(move || {
                let mut on = |piece: Piece| {
                    let ev = match piece {
                        Piece::Reasoning(t) => StreamEvent::Reasoning(t),
                        Piece::Content(t) => StreamEvent::Text(t),
                        Piece::ToolStart { index, id, name } => StreamEvent::CallStart { index, id, name },
                        Piece::ToolArgs { index, text } => StreamEvent::CallArgs { index, text },
                    };
                    !stop.load(Ordering::Relaxed) && tx.send(Ok(ev)).is_ok()
                };
                let last = match job.run(&mut on) {
                    Ok(Some(ran)) => finish(ran).map(StreamEvent::Done),
                    Ok(None) => return,
                    Err(e) => Err(e),
                };
                let _ = tx.send(last);
            })
            .map_err(|e| Error::Io { path: "the stream's worker thread".into(), source: e })?;
        Ok(Stream { rx: Some(rx), cancel, tokens, worker: Some(worker) })
    }
}

impl<T> Stream<T> {
    /// Stops the generation (at its next token, or before its next event is handed out) and
    /// waits for the worker; returns how many tokens it had generated.
    pub fn cancel(mut self) -> usize {
        self.stop();
        self.tokens.load(Ordering::Relaxed)
    }

    /// Runs to the end and returns the [`StreamEvent::Done`] value (the other events dropped).
    pub fn wait(mut self) -> Result<T> {
        for ev in &mut self {
            if let StreamEvent::Done(v) = ev? {
                return Ok(v);
            }
        }
        Err(Error::state("the stream ended without a result"))
    }

    fn stop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
        self.rx = None; // a worker blocked on a full channel wakes with an error
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

impl<T> Iterator for Stream<T> {
    type Item = Result<StreamEvent<T>>;

    fn next(&mut self) -> Option<Self::Item> {
        let ev = self.rx.as_ref()?.recv().ok();
        if matches!(ev, None | Some(Ok(StreamEvent::Done(_))) | Some(Err(_))) {
            self.rx = None;
        }
        ev
    }
}

impl<T> Drop for Stream<T> {
    fn drop(&mut self) {
        self.stop();
    }
}

impl<T> std::fmt::Debug for Stream<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stream(running: {})", self.rx.is_some())
    }
}
