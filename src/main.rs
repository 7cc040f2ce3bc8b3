//! The `strictly` binary: the allocator, then the command line ([`cli`], one file per verb).
//!
//! Contract (see DESIGN.md): exit 0 on success, 2 on bad input with a one-line error on stderr
//! naming the problem. `--help` and `--version` print to stdout and exit 0.

mod cli;

use std::process::ExitCode;

// The IR of a large schema is hundreds of thousands of small allocations, built and freed within
// a compile: mimalloc makes compiles 25-35% faster than the system allocator (BENCHMARKS.md).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc returns freed pages to the OS ("purges") about a second after they are freed, in
/// one batch, inside whichever allocation comes next: tens of MiB at ~1 µs a page stalled one
/// mask for 10-20 ms (the bench's rare worst masks, BENCHMARKS.md). A server keeps its
/// working set anyway, so purging is off; `MIMALLOC_PURGE_DELAY` set in the environment wins.
#[cfg(feature = "mimalloc")]
fn tune_allocator() {
    // `mi_option_purge_delay`: the 16th option of mimalloc 3's `mi_option_t` (libmimalloc-sys
    // names only some options). Its default, 1,000 ms, is no other option's: the number is
    // used only when the option there holds it (another mimalloc, another numbering: untouched).
    // `MIMALLOC_SHOW_STATS=1 strictly bench …` then reports "purges: 0".
    const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    const PURGE_DELAY_DEFAULT: std::ffi::c_long = 1000;
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: plain C calls on integers; mimalloc reads its options on every purge.
    unsafe {
        if libmimalloc_sys::mi_version() / 10_000 == 3
            && libmimalloc_sys::mi_option_get(PURGE_DELAY) == PURGE_DELAY_DEFAULT
        {
            libmimalloc_sys::mi_option_set(PURGE_DELAY, -1);
        }
    }
}

#[cfg(not(feature = "mimalloc"))]
fn tune_allocator() {}

fn main() -> ExitCode {
    tune_allocator();
    cli::main()
}
