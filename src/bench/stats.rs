//! Clocks, percentiles and the per-group tallies of a benchmark run.
//!
//! Percentiles are nearest-rank over integer nanoseconds, reported in µs with one decimal
//! (ms with two), the same rounding as peer-bench, so equal samples print equal numbers.

use std::sync::OnceLock;
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// The clock every engine timing is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Clock {
    /// Monotonic wall clock.
    #[default]
    Wall,
    /// CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID): robust to other load on a
    /// shared machine, but blind to waiting, and each reading costs a system call.
    ThreadCpu,
}

static EPOCH: OnceLock<Instant> = OnceLock::new();

impl Clock {
    /// Nanoseconds since an arbitrary fixed point of this clock.
    #[inline]
    pub fn now_ns(self) -> u64 {
        match self {
            Clock::Wall => EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64,
            Clock::ThreadCpu => cpu_clock::thread_cpu_ns().unwrap_or(0),
        }
    }

    /// Can this clock be read on this platform?
    pub fn is_available(self) -> bool {
        match self {
            Clock::Wall => true,
            Clock::ThreadCpu => cpu_clock::thread_cpu_ns().is_some(),
        }
    }
}

#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
mod cpu_clock {
    use std::os::raw::{c_int, c_long};

    /// `struct timespec` on 64-bit Linux.
    #[repr(C)]
    struct Timespec {
        tv_sec: c_long,
        tv_nsec: c_long,
    }

    extern "C" {
        // From the C library std already links; no extra crate.
        fn clock_gettime(clock: c_int, tp: *mut Timespec) -> c_int;
    }

    const CLOCK_THREAD_CPUTIME_ID: c_int = 3;

    pub fn thread_cpu_ns() -> Option<u64> {
        let mut ts = Timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid, writable timespec; clock_gettime writes only into it.
        let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        (rc == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    }

    /// `struct rusage` on 64-bit Linux: two timevals, then fourteen longs (maxrss, ixrss,
    /// idrss, isrss, minflt, majflt, nswap, inblock, oublock, msgsnd, msgrcv, nsignals, nvcsw,
    /// nivcsw).
    #[repr(C)]
    struct Rusage {
        times: [c_long; 4],
        counts: [c_long; 14],
    }

    extern "C" {
        fn getrusage(who: c_int, usage: *mut Rusage) -> c_int;
    }

    const RUSAGE_THREAD: c_int = 1;

    /// (minor faults, major faults, voluntary switches, involuntary switches) of this thread.
    pub fn thread_events() -> Option<[u64; 4]> {
        let mut ru = Rusage { times: [0; 4], counts: [0; 14] };
        // SAFETY: `ru` is a valid, writable struct rusage; getrusage writes only into it.
        let rc = unsafe { getrusage(RUSAGE_THREAD, &mut ru) };
        let c = |i: usize| ru.counts[i].max(0) as u64;
        (rc == 0).then(|| [c(4), c(5), c(12), c(13)])
    }
}

#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
mod cpu_clock {
    pub fn thread_cpu_ns() -> Option<u64> {
        None
    }

    pub fn thread_events() -> Option<[u64; 4]> {
        None
    }
}

/// What the kernel counted for the calling thread (`getrusage(RUSAGE_THREAD)`): page faults
/// and context switches. Read around a timed call (outside its timing), the difference says
/// whether a slow call waited on memory the kernel had to supply or lost its CPU; a slow call
/// with none of these ran slowly on its own (or its CPU was slowed from outside the guest,
/// which no counter here sees).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadEvents {
    pub minflt: u64,
    pub majflt: u64,
    /// Voluntary context switches (the thread blocked).
    pub nvcsw: u64,
    /// Involuntary context switches (the scheduler took the CPU away).
    pub nivcsw: u64,
}

impl ThreadEvents {
    /// The counts so far; zeros where the platform has no `getrusage(RUSAGE_THREAD)`.
    pub fn now() -> ThreadEvents {
        let [minflt, majflt, nvcsw, nivcsw] = cpu_clock::thread_events().unwrap_or_default();
        ThreadEvents { minflt, majflt, nvcsw, nivcsw }
    }

    /// What happened between `earlier` and `self`.
    pub fn since(self, earlier: ThreadEvents) -> ThreadEvents {
        ThreadEvents {
            minflt: self.minflt.saturating_sub(earlier.minflt),
            majflt: self.majflt.saturating_sub(earlier.majflt),
            nvcsw: self.nvcsw.saturating_sub(earlier.nvcsw),
            nivcsw: self.nivcsw.saturating_sub(earlier.nivcsw),
        }
    }

    pub fn is_quiet(self) -> bool {
        self == ThreadEvents::default()
    }
}

/// Distribution of a list of timings, in µs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

/// Nearest-rank percentile of an ascending slice (`q` in 0..=1); 0 for an empty slice.
pub fn pct_sorted(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Nanoseconds as µs rounded to one decimal.
pub fn us(ns: u64) -> f64 {
    (ns as f64 / 100.0).round() / 10.0
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Summary in µs of nanosecond samples; `None` if there are none.
pub fn summarize_ns_as_us(samples: &[u64]) -> Option<Summary> {
    if samples.is_empty() {
        return None;
    }
    let mut v = samples.to_vec();
    v.sort_unstable();
    let sum: u128 = v.iter().map(|&x| x as u128).sum();
    Some(Summary {
        n: v.len(),
        mean: round1(sum as f64 / v.len() as f64 / 1000.0),
        p50: us(pct_sorted(&v, 0.50)),
        p95: us(pct_sorted(&v, 0.95)),
        p99: us(pct_sorted(&v, 0.99)),
        max: us(*v.last().expect("not empty")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(pct_sorted(&v, 0.5), 50);
        assert_eq!(pct_sorted(&v, 0.99), 99);
        assert_eq!(pct_sorted(&v, 1.0), 100);
        assert_eq!(pct_sorted(&[7], 0.5), 7);
        assert_eq!(pct_sorted(&[], 0.5), 0);
        let s = summarize_ns_as_us(&[1000, 3000]).unwrap();
        assert_eq!((s.n, s.mean, s.p50, s.max), (2, 2.0, 1.0, 3.0));
        assert_eq!(us(1549), 1.5);
    }

    #[test]
    fn thread_events_count_page_faults() {
        if cpu_clock::thread_events().is_none() {
            return;
        }
        let a = ThreadEvents::now();
        // A large zeroed allocation is fresh pages mapped lazily: the first write to each faults.
        let mut v = vec![0u8; 64 << 20];
        for i in (0..v.len()).step_by(4096) {
            v[i] = 1;
        }
        std::hint::black_box(&v);
        let d = ThreadEvents::now().since(a);
        assert!(d.minflt + d.majflt > 0, "{d:?}");
        assert!(!d.is_quiet());
        let x = ThreadEvents::now();
        assert!(x.since(x).is_quiet());
    }

    #[test]
    fn thread_cpu_clock_advances() {
        if !Clock::ThreadCpu.is_available() {
            return;
        }
        let a = Clock::ThreadCpu.now_ns();
        let mut x = 0u64;
        for i in 0..200_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(Clock::ThreadCpu.now_ns() > a);
    }
}
