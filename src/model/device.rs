//! Where a model runs and in what precision: [`DeviceSpec`], [`Precision`], [`LoadOptions`].
//!
//! Defaults: the CPU, and the precision that suits the device: `f32` on the CPU (candle's CPU
//! matmuls are fastest and exact in f32, and small models are what a CPU runs), `bf16` on CUDA
//! (half the memory and bandwidth, the range of f32). Weights stored in another float type are
//! converted while loading; the logits always come back as `f32`.

use std::fmt;
use std::str::FromStr;

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

/// How to load a model. `LoadOptions::default()`: the CPU, in f32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoadOptions {
    pub device: DeviceSpec,
    /// `None`: [`DeviceSpec::default_precision`].
    pub precision: Option<Precision>,
}

impl LoadOptions {
    /// The precision that will be used.
    pub fn precision(&self) -> Precision {
        self.precision.unwrap_or(self.device.default_precision())
    }
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
        let gpu = LoadOptions { device: DeviceSpec::Cuda(0), precision: None };
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
