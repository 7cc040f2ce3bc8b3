//! Where a model runs and in what precision: [`DeviceSpec`], [`Precision`], [`LoadOptions`].
//!
//! Defaults: the CPU, and the precision that suits the device: `f32` on the CPU (candle's CPU
//! matmuls are fastest and exact in f32, and small models are what a CPU runs), `bf16` on CUDA
//! (half the memory and bandwidth, the range of f32). Weights stored in another float type are
//! converted while loading; the logits always come back as `f32`.
//!
//! CPU threads: candle runs a forward pass on two process-wide thread pools (rayon's, for
//! float matmuls, and its own for quantized ones), sized once, when first used, from
//! `RAYON_NUM_THREADS` / `CANDLE_NUM_THREADS` (default: the physical cores).
//! [`set_cpu_threads`] (and [`LoadOptions::threads`], `--threads`) sets both before that
//! first use; a later, different count is an error, since the pools cannot be resized.
//!
//! Threads on CUDA: a CUDA context is current on the thread that opened the device, and cudarc
//! makes it current for its calls but not where it frees device memory (the free fails, the
//! error is recorded and comes out of the next call anywhere: a server's batched passes failed
//! with `CUDA_ERROR_INVALID_CONTEXT` after a request's thread dropped its KV cache). So every
//! pass ([`run_pass`]) and every drop of a sequence's tensors (`KvCache`, `CandleModel`) makes it
//! current first ([`make_current`]).

use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;

use candle_core::{DType, Device};

use crate::error::{Error, Result};

/// A device, as the command line spells it: `cpu`, `cuda` (= `cuda:0`) or `cuda:N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceSpec {
    #[default]
    Cpu,
    /// A CUDA GPU by ordinal (needs the `cuda` feature).
    Cuda(usize),
}

impl FromStr for DeviceSpec {
    type Err = Error;

    fn from_str(s: &str) -> Result<DeviceSpec> {
        let t = s.trim().to_ascii_lowercase();
        match t.as_str() {
            "cpu" => Ok(DeviceSpec::Cpu),
            "cuda" | "gpu" => Ok(DeviceSpec::Cuda(0)),
            _ => match t.strip_prefix("cuda:").map(str::parse::<usize>) {
                Some(Ok(n)) => Ok(DeviceSpec::Cuda(n)),
                _ => Err(Error::param(format!("unknown device {s:?} (expected cpu, cuda or cuda:N)"))),
            },
        }
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::Cpu => write!(f, "cpu"),
            DeviceSpec::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

/// Runs a pass's tensor work `f` where it belongs. On the CPU: on a thread of candle's pool, so
/// the ops that split their work with rayon (softmax, norms) run there and then instead of
/// handing it to a pool thread and waiting, op after op (a measured ~15% of a small model's
/// decode step). On CUDA: on the calling thread, with the device's context made current on it
/// first (see the module doc; it stays current there, so the tensor work that follows the pass
/// on this thread, reading the logits back, runs in it too).
pub(crate) fn run_pass<T: Send>(
    device: &Device,
    f: impl FnOnce() -> candle_core::Result<T> + Send,
) -> candle_core::Result<T> {
    if device.is_cpu() {
        return candle_core::utils::with_threadpool(f);
    }
    make_current(device)?;
    f()
}

/// Makes a CUDA device's context current on the calling thread (see the module doc); nothing
/// on other devices. Cheap where it is current already (one driver query).
pub(crate) fn make_current(device: &Device) -> candle_core::Result<()> {
    #[cfg(feature = "cuda")]
    if let Device::Cuda(d) = device {
        d.cuda_stream().context().bind_to_thread().map_err(|e| candle_core::Error::Msg(format!("{e:?}")))?;
    }
    let _ = device;
    Ok(())
}

impl DeviceSpec {
    /// Opens the device. A CUDA device needs a binary built with the `cuda` feature and a GPU
    /// with that ordinal; both failures are errors, never a silent fall-back to the CPU.
    pub fn open(self) -> Result<Device> {
        match self {
            DeviceSpec::Cpu => Ok(Device::Cpu),
            DeviceSpec::Cuda(n) => {
                if !cfg!(feature = "cuda") {
                    return Err(Error::param(format!(
                        "device cuda:{n}: this binary was built without the `cuda` feature \
                         (cargo build --release --features cuda)"
                    )));
                }
                Device::new_cuda(n).map_err(|e| Error::param(format!("device cuda:{n}: {e}")))
            }
        }
    }

    /// The precision used when none is asked for: f32 on the CPU, bf16 on CUDA.
    pub fn default_precision(self) -> Precision {
        match self {
            DeviceSpec::Cpu => Precision::F32,
            DeviceSpec::Cuda(_) => Precision::Bf16,
        }
    }
}

/// The float type weights and activations are computed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    F32,
    Bf16,
    F16,
}

impl FromStr for Precision {
    type Err = Error;

    fn from_str(s: &str) -> Result<Precision> {
        match s.trim().to_ascii_lowercase().as_str() {
            "f32" | "float32" | "fp32" => Ok(Precision::F32),
            "bf16" | "bfloat16" => Ok(Precision::Bf16),
            "f16" | "float16" | "fp16" | "half" => Ok(Precision::F16),
            _ => Err(Error::param(format!("unknown dtype {s:?} (expected f32, bf16 or f16)"))),
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Precision::F32 => "f32",
            Precision::Bf16 => "bf16",
            Precision::F16 => "f16",
        })
    }
}

impl Precision {
    pub(crate) fn dtype(self) -> DType {
        match self {
            Precision::F32 => DType::F32,
            Precision::Bf16 => DType::BF16,
            Precision::F16 => DType::F16,
        }
    }
}

/// How to load a model. `LoadOptions::default()`: the CPU, in f32, candle's default threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoadOptions {
    pub device: DeviceSpec,
    /// `None`: [`DeviceSpec::default_precision`].
    pub precision: Option<Precision>,
    /// CPU threads for the forward pass (a process-wide setting: [`set_cpu_threads`]);
    /// `None`: leave it as it is.
    pub threads: Option<usize>,
}

impl LoadOptions {
    /// The precision that will be used.
    pub fn precision(&self) -> Precision {
        self.precision.unwrap_or(self.device.default_precision())
    }

    /// Sets [`threads`](Self::threads), if given ([`set_cpu_threads`]).
    pub(crate) fn apply_threads(&self) -> Result<()> {
        self.threads.map_or(Ok(()), set_cpu_threads)
    }
}

/// The most CPU threads [`set_cpu_threads`] takes.
pub const MAX_CPU_THREADS: usize = 1024;

/// The count [`set_cpu_threads`] set, if it ran.
static THREADS: Mutex<Option<usize>> = Mutex::new(None);

/// Sets the number of CPU threads candle's forward passes use, for the whole process (see the
/// module docs). Call it before the first forward pass; calling it again with the same count
/// is a no-op, with another count an error (the pools are already running). It sets the
/// environment variables candle reads (`RAYON_NUM_THREADS`, `CANDLE_NUM_THREADS`), so call it
/// while no other thread reads the environment, e.g. at the start of `main`.
pub fn set_cpu_threads(n: usize) -> Result<()> {
    if n == 0 || n > MAX_CPU_THREADS {
        return Err(Error::param(format!("threads must be between 1 and {MAX_CPU_THREADS}, got {n}")));
    }
    let mut set = THREADS.lock().unwrap_or_else(|e| e.into_inner());
    match *set {
        Some(m) if m == n => return Ok(()),
        Some(m) => {
            return Err(Error::param(format!(
                "the CPU thread count is set once per process: it is {m} already, cannot make it {n}"
            )))
        }
        None => {}
    }
    let value = n.to_string();
    std::env::set_var("RAYON_NUM_THREADS", &value);
    std::env::set_var("CANDLE_NUM_THREADS", &value);
    // Start candle's quantized-matmul pool now, and check it has the size asked for (it keeps
    // the size it got if something ran a quantized matmul before this call).
    let workers = candle_core::utils::barrier_pool().n_workers() + 1;
    if workers != n {
        return Err(Error::param(format!(
            "candle's CPU thread pool already runs {workers} threads (a forward pass ran before the thread \
             count was set); set it before loading a model"
        )));
    }
    *set = Some(n);
    Ok(())
}

/// The CPU threads a forward pass uses: the count [`set_cpu_threads`] set, else candle's default
/// (`RAYON_NUM_THREADS`, else the physical cores).
pub fn cpu_threads() -> usize {
    let set = *THREADS.lock().unwrap_or_else(|e| e.into_inner());
    set.unwrap_or_else(candle_core::utils::get_num_threads)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_devices_and_precisions() {
        assert_eq!("cpu".parse::<DeviceSpec>().unwrap(), DeviceSpec::Cpu);
        assert_eq!("CUDA:1".parse::<DeviceSpec>().unwrap(), DeviceSpec::Cuda(1));
        assert_eq!("cuda".parse::<DeviceSpec>().unwrap(), DeviceSpec::Cuda(0));
        assert!("tpu".parse::<DeviceSpec>().is_err());
        assert!("cuda:x".parse::<DeviceSpec>().is_err());
        assert_eq!("bfloat16".parse::<Precision>().unwrap(), Precision::Bf16);
        assert!("f64".parse::<Precision>().is_err());
        assert_eq!(LoadOptions::default().precision(), Precision::F32);
        let gpu = LoadOptions { device: DeviceSpec::Cuda(0), ..LoadOptions::default() };
        assert_eq!(gpu.precision(), Precision::Bf16);
        assert_eq!(DeviceSpec::Cuda(3).to_string(), "cuda:3");
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn cuda_without_the_feature_is_a_clear_error() {
        let e = DeviceSpec::Cuda(0).open().unwrap_err().to_string();
        assert!(e.contains("`cuda` feature"), "{e}");
    }
}
