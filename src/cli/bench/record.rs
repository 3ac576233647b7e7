//! What every benchmark shares: its record (one JSON object per measurement), its timer and
//! its random inputs. Timing is wall-clock around whole batches of dispatches after a
//! warm-up, with the device drained before and after, so it includes dispatch overhead as a
//! model would see it.

use std::time::Instant;

use serde::Serialize;

use sesame::error::Result;
use sesame::gpu::{Device, KernelVariant};
use sesame::tensor::Tensor;

#[derive(Serialize)]
pub struct BenchRecord {
    pub op: String,
    pub shape: String,
    pub ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gflops: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gbps: Option<f64>,
    /// Tokens (or, for embeddings, sentences) per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_second: Option<f64>,
    /// Sentences per second, where a benchmark counts both (ELMo).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sentences_per_second: Option<f64>,
    pub adapter: String,
    pub kernels: &'static str,
}

impl BenchRecord {
    pub fn new(gpu: &Device, variant: KernelVariant, op: &str, shape: String, ms: f64) -> Self {
        BenchRecord {
            op: op.into(),
            shape,
            ms,
            gflops: None,
            gbps: None,
            per_second: None,
            sentences_per_second: None,
            adapter: gpu.adapter_info().name.clone(),
            kernels: variant.name(),
        }
    }
}

/// Mean milliseconds per call of `record` (which records dispatches), over enough calls to
/// fill about `budget_ms`.
pub fn time_ms(gpu: &Device, budget_ms: f64, mut record: impl FnMut() -> Result<()>) -> Result<f64> {
    record()?;
    gpu.wait_idle()?;
    let start = Instant::now();
    record()?;
    gpu.wait_idle()?;
    let once = start.elapsed().as_secs_f64() * 1e3;
    let reps = ((budget_ms / once.max(1e-3)) as usize).clamp(1, 200);
    let start = Instant::now();
    for _ in 0..reps {
        record()?;
    }
    gpu.wait_idle()?;
    Ok(start.elapsed().as_secs_f64() * 1e3 / reps as f64)
}

/// `n` values of a cheap deterministic pattern in [-1, 1): the values do not matter for timing.
pub fn random_values(n: usize) -> Vec<f32> {
    (0..n).map(|i| ((i.wrapping_mul(2654435761) >> 7) % 2000) as f32 / 1000.0 - 1.0).collect()
}

pub fn random(gpu: &Device, shape: &[usize]) -> Result<Tensor> {
    Tensor::from_slice(gpu, &random_values(shape.iter().product()), shape)
}
