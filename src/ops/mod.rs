//! Ops: one WGSL kernel family each (`shaders/<op>.wgsl`), with its uniform params, the
//! Rust that checks operands and records the dispatch, a plain-loop CPU reference, and
//! parity tests against that reference. An op's backward will sit beside its forward.
//!
//! Ops record into the GPU's pending batch and return output tensors at once; nothing runs
//! until a flush or a read-back.

pub mod adamw;
pub mod attention;
pub mod batch_norm;
pub mod char_cnn;
pub mod cross_entropy;
pub mod distillation;
pub mod dropout;
pub mod elementwise;
pub mod embedding;
pub mod highway;
pub mod layer_norm;
pub mod lstm;
pub mod lstm_train;
pub mod matmul;
pub mod pool;
pub mod quantized;
pub mod rows;
pub mod scalar_mix;
pub mod softmax;
pub mod sum;
pub mod topk;

use crate::error::{shape_err, Result, SesameError};
use crate::gpu::Device;
use crate::tensor::{DType, Tensor};

/// Fails unless `t` has dtype `dtype`.
pub(crate) fn expect_dtype(op: &'static str, operand: &'static str, t: &Tensor, dtype: DType) -> Result<()> {
    if t.dtype() != dtype {
        return Err(SesameError::DType { op, operand, expected: dtype.name(), actual: t.dtype().name() });
    }
    Ok(())
}

/// Fails unless `t` is f32 of rank `rank` with no zero-sized dimension.
pub(crate) fn expect_f32(op: &'static str, operand: &'static str, t: &Tensor, rank: usize) -> Result<()> {
    expect_dtype(op, operand, t, DType::F32)?;
    if t.rank() != rank {
        return Err(shape_err!(op, "`{operand}` must have rank {rank}, got shape {:?}", t.shape()));
    }
    if t.numel() == 0 {
        return Err(shape_err!(op, "`{operand}` is empty (shape {:?})", t.shape()));
    }
    Ok(())
}

/// Fails unless `t` has exactly `shape`.
pub(crate) fn expect_shape(op: &'static str, operand: &'static str, t: &Tensor, shape: &[usize]) -> Result<()> {
    if t.shape() != shape {
        return Err(shape_err!(op, "`{operand}` must have shape {shape:?}, got {:?}", t.shape()));
    }
    Ok(())
}

/// Workgroups for `n` items at `per_group` items per workgroup, spread over x and y so that
/// neither exceeds the per-dimension limit. Kernels rebuild the linear index as
/// `wid.x + wid.y * num_workgroups.x`.
pub(crate) fn grid_1d(gpu: &Device, n: usize, per_group: usize) -> [u32; 3] {
    let groups = n.div_ceil(per_group) as u64;
    let max_x = gpu.limits().max_compute_workgroups_per_dimension as u64;
    let x = groups.min(max_x);
    let y = if x == 0 { 0 } else { groups.div_ceil(x) };
    [x as u32, y as u32, 1]
}

/// Converts a size to the u32 a kernel's params hold, or names the op whose limit it breaks.
pub(crate) fn as_u32(op: &'static str, what: &str, n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| shape_err!(op, "{what} = {n} exceeds the u32 range of the kernel"))
}

#[cfg(all(test, not(target_arch = "wasm32")))]
pub(crate) mod testing {
    //! Helpers for parity tests: seeded random data and comparisons that print their errors.
    use rand::{rngs::SmallRng, Rng, SeedableRng};

    pub fn rng(seed: u64) -> SmallRng {
        SmallRng::seed_from_u64(seed)
    }

    pub fn random_vec(rng: &mut SmallRng, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| rng.random_range(-scale..scale)).collect()
    }

    /// Central differences (f(x + h·eᵢ) − f(x − h·eᵢ)) / 2h of a scalar function at x, for
    /// every i: what analytic backward references are checked against.
    pub fn numeric_gradient(x: &[f32], h: f32, f: impl Fn(&[f32]) -> f64) -> Vec<f32> {
        let mut probe = x.to_vec();
        (0..x.len())
            .map(|i| {
                // The step actually taken in f32, not the nominal 2h.
                let (hi, lo) = (x[i] + h, x[i] - h);
                probe[i] = hi;
                let up = f(&probe);
                probe[i] = lo;
                let down = f(&probe);
                probe[i] = x[i];
                ((up - down) / (hi as f64 - lo as f64)) as f32
            })
            .collect()
    }

    /// Asserts |got − want| ≤ atol + rtol·|want| elementwise; prints the max abs and rel error.
    pub fn assert_close(what: &str, got: &[f32], want: &[f32], atol: f32, rtol: f32) {
        assert_eq!(got.len(), want.len(), "{what}: length");
        let (mut max_abs, mut max_rel, mut worst) = (0f32, 0f32, None);
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            let abs = (g - w).abs();
            let rel = abs / w.abs().max(f32::MIN_POSITIVE);
            // NaN differences fail too.
            if (abs.is_nan() || abs > atol + rtol * w.abs()) && worst.is_none() {
                worst = Some((i, g, w));
            }
            if abs.is_nan() || abs > max_abs {
                max_abs = abs;
            }
            max_rel = max_rel.max(rel.min(f32::MAX));
        }
        eprintln!("{what}: max abs err {max_abs:.3e}, max rel err {max_rel:.3e} over {} values", got.len());
        if let Some((i, g, w)) = worst {
            panic!("{what}: element {i} is {g}, expected {w} (atol {atol:e}, rtol {rtol:e}; max abs err {max_abs:e})");
        }
    }
}
