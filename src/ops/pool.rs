//! ULMFiT's concat pooling (`shaders/pool.wgsl`, Howard & Ruder 2018 §3.3): a classifier's
//! input is [h_last, maxpool(H), meanpool(H)] of the last layer's states H. Each sequence pools
//! over its own window of positions (its real tokens, or fastai's last chunks of a long text),
//! so ragged right-padded batches pool exactly as each sequence alone.

use super::{as_u32, expect_f32, expect_shape, grid_1d};
use crate::error::{arg_err, shape_err, Result};
use crate::kernels::pool::{Params, CONCAT_POOL, CONCAT_POOL_BACKWARD};
use crate::tensor::{DType, Tensor};

/// A concat pooling, kept for its backward.
pub struct ConcatPool {
    /// [B, 3C]: last, max, mean.
    pub pooled: Tensor,
    /// [B, C] u32: the position of each max.
    argmax: Tensor,
    /// [B, 2] u32: (start, end) of each window.
    windows: Tensor,
    params: Params,
}

/// Pools x [B, T, C] over each item's window [start, end) (start < end ≤ T).
pub fn concat_pool(x: &Tensor, windows: &[(usize, usize)]) -> Result<ConcatPool> {
    let op = "concat_pool";
    expect_f32(op, "x", x, 3)?;
    let (batch, seq, width) = (x.shape()[0], x.shape()[1], x.shape()[2]);
    if windows.len() != batch {
        return Err(shape_err!(op, "{} windows for a batch of {batch}", windows.len()));
    }
    if let Some(&(start, end)) = windows.iter().find(|&&(start, end)| start >= end || end > seq) {
        return Err(arg_err!(op, "window [{start}, {end}) is empty or past the {seq} positions"));
    }
    as_u32(op, "elements of x", x.numel())?;
    let params = Params { batch: as_u32(op, "batch", batch)?, seq: as_u32(op, "T", seq)?, width: as_u32(op, "C", width)?, _pad: 0 };
    let gpu = x.gpu();
    let flat: Vec<u32> = windows.iter().flat_map(|&(start, end)| [start as u32, end as u32]).collect();
    let windows = Tensor::from_slice(gpu, &flat, &[batch, 2])?;
    let pooled = Tensor::empty(gpu, &[batch, 3 * width], DType::F32)?;
    let argmax = Tensor::empty(gpu, &[batch, width], DType::U32)?;
    gpu.dispatch(&CONCAT_POOL, &[], &params, &[(&windows).into(), x.into(), (&pooled).into(), (&argmax).into()], grid_1d(gpu, batch * width, 256))?;
    Ok(ConcatPool { pooled, argmax, windows, params })
}

/// The gradient of x [B, T, C] from that of the pooled features, d_pooled [B, 3C].
pub fn concat_pool_backward(pool: &ConcatPool, d_pooled: &Tensor) -> Result<Tensor> {
    let op = "concat_pool_backward";
    expect_f32(op, "d_pooled", d_pooled, 2)?;
    expect_shape(op, "d_pooled", d_pooled, pool.pooled.shape())?;
    let p = &pool.params;
    let gpu = d_pooled.gpu();
    let (batch, seq, width) = (p.batch as usize, p.seq as usize, p.width as usize);
    let d_x = Tensor::empty(gpu, &[batch, seq, width], DType::F32)?;
    let bindings = [(&pool.windows).into(), d_pooled.into(), (&pool.argmax).into(), (&d_x).into()];
    gpu.dispatch(&CONCAT_POOL_BACKWARD, &[], p, &bindings, grid_1d(gpu, batch * seq * width, 256))?;
    Ok(d_x)
}

#[cfg(test)]
/// CPU reference of [`concat_pool`] on row-major x [B, T, C]: the pooled [B, 3C].
pub(crate) fn concat_pool_reference(x: &[f32], seq: usize, width: usize, windows: &[(usize, usize)]) -> Vec<f32> {
    let mut out = Vec::with_capacity(windows.len() * 3 * width);
    for (b, &(start, end)) in windows.iter().enumerate() {
        let at = |t: usize, c: usize| x[(b * seq + t) * width + c] as f64;
        out.extend((0..width).map(|c| at(end - 1, c) as f32));
        out.extend((0..width).map(|c| (start..end).map(|t| at(t, c)).fold(f64::NEG_INFINITY, f64::max) as f32));
        out.extend((0..width).map(|c| ((start..end).map(|t| at(t, c)).sum::<f64>() / (end - start) as f64) as f32));
    }
    out
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::gpu::testing::devices;
    use crate::ops::testing::{assert_close, numeric_gradient, random_vec, rng};
    use pollster::block_on;

    #[test]
    fn pooling_and_its_backward_match_the_reference_on_ragged_windows() {
        // Windows: whole rows, a suffix (a long text's last chunks), one position; a width past
        // one workgroup of 256.
        for (seq, width, windows) in [(5, 3, vec![(0, 5), (0, 2), (3, 5), (4, 5)]), (4, 300, vec![(1, 4), (0, 1)])] {
            let batch = windows.len();
            let mut rng = rng(seq as u64);
            let (x, d_pooled) = (random_vec(&mut rng, batch * seq * width, 2.0), random_vec(&mut rng, batch * 3 * width, 1.0));
            let want = concat_pool_reference(&x, seq, width, &windows);
            // The gradient of Σ d_pooled·pooled, by finite differences of the reference (the
            // random values have no ties, so the max is differentiable).
            let loss = |x: &[f32]| concat_pool_reference(x, seq, width, &windows).iter().zip(&d_pooled).map(|(&p, &d)| p as f64 * d as f64).sum::<f64>();
            let numeric = if width < 10 { Some(numeric_gradient(&x, 1e-3, loss)) } else { None };
            for gpu in devices() {
                let name = format!("concat pool T{seq} C{width} {windows:?} on {}", gpu.adapter_info().name);
                let xt = Tensor::from_slice(gpu, &x, &[batch, seq, width]).unwrap();
                let pool = concat_pool(&xt, &windows).unwrap();
                assert_close(&name, &block_on(pool.pooled.to_vec::<f32>()).unwrap(), &want, 1e-6, 1e-6);
                let d_x = concat_pool_backward(&pool, &Tensor::from_slice(gpu, &d_pooled, &[batch, 3 * width]).unwrap()).unwrap();
                let d_x = block_on(d_x.to_vec::<f32>()).unwrap();
                if let Some(numeric) = &numeric {
                    assert_close(&format!("{name} backward vs finite differences"), &d_x, numeric, 1e-3, 1e-3);
                }
                // Outside its window a position gets no gradient.
                for (b, &(start, end)) in windows.iter().enumerate() {
                    let outside = (0..seq).filter(|t| !(start..end).contains(t));
                    assert!(outside.flat_map(|t| &d_x[(b * seq + t) * width..][..width]).all(|&g| g == 0.0), "{name}: gradient outside item {b}'s window");
                }
            }
        }
    }

    #[test]
    fn bad_windows_are_errors() {
        for gpu in devices() {
            let x = Tensor::zeros(gpu, &[2, 3, 4], DType::F32).unwrap();
            assert!(concat_pool(&x, &[(0, 3), (0, 1)]).is_ok());
            assert!(concat_pool(&x, &[(0, 3)]).is_err(), "one window for two items");
            assert!(concat_pool(&x, &[(0, 3), (1, 1)]).is_err(), "empty window");
            assert!(concat_pool(&x, &[(0, 4), (0, 1)]).is_err(), "past T");
            let pool = concat_pool(&x, &[(0, 3), (0, 1)]).unwrap();
            assert!(concat_pool_backward(&pool, &Tensor::zeros(gpu, &[2, 4], DType::F32).unwrap()).is_err(), "d_pooled of another width");
        }
    }
}
