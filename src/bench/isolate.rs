//! Running cases in worker processes, so that a hang, a crash or runaway memory in one case
//! costs that case only.
//!
//! The protocol: the supervisor starts the current executable with the worker arguments
//! ([`BenchOptions::worker_argv`]); the worker loads the vocabulary, runs the warm-up, prints
//! `READY`, then reads [`Request`]s, one JSON object per line, on stdin and answers each with
//! one [`CaseResult`] JSON line on stdout (with every step's mask time in `mask_ns`). It reads
//! the case from its file itself, so no schema or instance is re-serialized on the way (their
//! numbers reach it exactly as the parent read them).
//!
//! No answer within the timeout: the worker is killed (by its pid) and the case is a
//! `timeout`. The worker dies: `crash`. Either way a fresh worker takes over.
//! With `worker_per_case` every case gets a fresh worker, so that its memory high-water mark
//! (`peak_rss_mib`) owes nothing to earlier cases (at the cost of a vocabulary load per case).
//!
//! Memory: with a limit, the worker is started through `/bin/sh -c 'ulimit -v KiB; exec …'`,
//! so the address-space limit (RLIMIT_AS) applies to it without any C binding; an allocation
//! past the limit aborts the worker and the case reads `crash`.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::cases::Case;
use super::run::{truncate, CaseResult};
use super::BenchOptions;
use crate::error::{Error, Result};

/// One case for a worker: its index in the run, its id, and the file that holds it.
#[derive(Debug, Serialize, Deserialize)]
pub struct Request {
    pub idx: usize,
    pub id: String,
    pub file: PathBuf,
}

/// The line a worker prints once it is ready for requests.
pub const READY: &str = "READY";

/// How long a worker may take to load the vocabulary, the cases and warm up.
const START_TIMEOUT: Duration = Duration::from_secs(600);

struct Worker {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl Worker {
    fn spawn(opts: &BenchOptions) -> Result<Worker> {
        // /proc/PID/exe keeps naming the running binary even if it is rebuilt meanwhile (and,
        // unlike /proc/self/exe, means this process also to the shell that applies the limit).
        let proc_exe = PathBuf::from(format!("/proc/{}/exe", std::process::id()));
        let exe = if proc_exe.exists() {
            proc_exe
        } else {
            std::env::current_exe().map_err(|source| Error::Io { path: "current executable".into(), source })?
        };
        let limit_kib = (opts.mem_limit_gb * 1024.0 * 1024.0) as u64;
        let mut cmd = if limit_kib > 0 && std::path::Path::new("/bin/sh").exists() {
            let mut c = Command::new("/bin/sh");
            c.arg("-c").arg(r#"ulimit -v "$0" && exec "$@""#).arg(limit_kib.to_string()).arg(exe);
            c
        } else {
            Command::new(exe)
        };
        let mut child = cmd
            .args(&opts.worker_argv)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|source| Error::Io { path: "bench worker".into(), source })?;
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut w = Worker { child, stdin, lines };
        match w.lines.recv_timeout(START_TIMEOUT) {
            Ok(l) if l == READY => Ok(w),
            Ok(l) => {
                w.kill();
                Err(Error::param(format!("bench worker said {:?} instead of {READY}", truncate(&l, 200))))
            }
            Err(_) => {
                let status = w.kill();
                Err(Error::param(format!("bench worker failed to start ({status})")))
            }
        }
    }

    /// Closes the worker's stdin, which ends it, and reaps it.
    fn finish(self) {
        let Worker { mut child, stdin, .. } = self;
        drop(stdin);
        let _ = child.wait();
    }

    /// Kills exactly this worker (by pid) and reaps it; returns how it ended.
    fn kill(&mut self) -> String {
        let _ = self.child.kill();
        match self.child.wait() {
            Ok(st) => st.to_string(),
            Err(e) => format!("wait error: {e}"),
        }
    }
}

/// One supervisor: takes the next case index from `next` until none are left, runs it in its
/// worker, and sends the result to `out`. A worker is started when there is a case for it and
/// none is running (after a timeout or crash, and for every case with `worker_per_case`).
pub fn supervise(
    opts: &BenchOptions,
    cases: &[Case],
    next: Arc<AtomicUsize>,
    out: mpsc::Sender<CaseResult>,
) -> Result<()> {
    let timeout = Duration::from_secs_f64(opts.timeout_s.max(0.001));
    let mut worker: Option<Worker> = None;
    loop {
        let idx = next.fetch_add(1, Ordering::SeqCst);
        if idx >= cases.len() {
            break;
        }
        let w = match worker.as_mut() {
            Some(w) => w,
            None => worker.insert(Worker::spawn(opts)?),
        };
        let case = &cases[idx];
        let req = Request { idx, id: case.id.clone(), file: case.file.clone() };
        let req = serde_json::to_string(&req).map_err(|e| Error::param(format!("{}: {e}", case.file.display())))?;
        let sent = writeln!(w.stdin, "{req}").and_then(|_| w.stdin.flush());
        let answer =
            if sent.is_ok() { w.lines.recv_timeout(timeout) } else { Err(mpsc::RecvTimeoutError::Disconnected) };
        let result = match answer {
            Ok(line) => match serde_json::from_str::<CaseResult>(&line) {
                Ok(r) if r.id == cases[idx].id => r,
                Ok(r) => {
                    let msg = format!("the worker's case {idx} is {:?}: the case files changed during the run", r.id);
                    CaseResult::failed(&cases[idx], idx, "crash", msg)
                }
                Err(e) => {
                    let msg = format!("bad worker output ({e}): {}", truncate(&line, 200));
                    CaseResult::failed(&cases[idx], idx, "crash", msg)
                }
            },
            Err(mpsc::RecvTimeoutError::Timeout) => {
                w.kill();
                worker = None;
                CaseResult::failed(&cases[idx], idx, "timeout", format!("no result within {}s", opts.timeout_s))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = w.kill();
                worker = None;
                let hint = if opts.mem_limit_gb > 0.0 {
                    format!(" (memory limit {} GiB?)", opts.mem_limit_gb)
                } else {
                    String::new()
                };
                CaseResult::failed(&cases[idx], idx, "crash", format!("worker died: {status}{hint}"))
            }
        };
        if opts.worker_per_case {
            if let Some(w) = worker.take() {
                w.finish();
            }
        }
        if out.send(result).is_err() {
            break;
        }
    }
    if let Some(w) = worker {
        w.finish();
    }
    Ok(())
}
