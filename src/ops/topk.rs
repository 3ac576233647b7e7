//! Top-k over the last dimension (`shaders/topk.wgsl`), for sampling: the k largest logits of
//! each row in descending order with their indices, ties going to the lower index (so results
//! are deterministic across adapters). [`argmax`] is k = 1, for greedy decoding.
//!
//! The kernel makes k passes over the row (O(k·V)); that suits sampling's k ≤ 256 and needs
//! no per-row scratch memory.

use super::{as_u32, expect_dtype, grid_1d};
use crate::error::{arg_err, shape_err, Result};
use crate::kernels::topk::{Params, KERNEL};
use crate::tensor::{DType, Tensor};

/// The largest k supported (each pick is a pass over the row).
pub const MAX_K: usize = 256;

/// The k largest entries of each row of x [..., V]: (values f32 [..., k] in descending order,
/// indices u32 [..., k]). Rows are the product of the leading dims. Rows with NaNs give
/// unspecified picks (WGSL does not promise IEEE NaN comparisons).
pub fn topk(x: &Tensor, k: usize) -> Result<(Tensor, Tensor)> {
    let op = "topk";
    expect_dtype(op, "x", x, DType::F32)?;
    let cols = match x.shape().last() {
        Some(&cols) if x.numel() > 0 => cols,
        _ => return Err(shape_err!(op, "`x` must have rank ≥ 1 and no zero-sized dimension, got shape {:?}", x.shape())),
    };
    if k == 0 || k > cols || k > MAX_K {
        return Err(arg_err!(op, "k = {k} must be in 1..={} for rows of {cols} values (at most {MAX_K})", cols.min(MAX_K)));
    }
    let rows = x.numel() / cols;
    let mut shape = x.shape()[..x.rank() - 1].to_vec();
    shape.push(k);
    let gpu = x.gpu();
    let values = Tensor::empty(gpu, &shape, DType::F32)?;
    let indices = Tensor::empty(gpu, &shape, DType::U32)?;
    let params = Params { rows: as_u32(op, "rows", rows)?, cols: as_u32(op, "V", cols)?, k: k as u32, _pad: 0 };
    gpu.dispatch(&KERNEL, &[], &params, &[x.into(), (&values).into(), (&indices).into()], grid_1d(gpu, rows, 1))?;
    Ok((values, indices))
}

/// Index of the largest entry of each row of x `[..., V]` (the lowest such index on ties):
/// u32 of x's leading shape (`[N]` for x `[N, V]`).
pub fn argmax(x: &Tensor) -> Result<Tensor> {
    let (_, indices) = topk(x, 1)?;
    indices.reshape(&x.shape()[..x.rank() - 1])
}

#[cfg(test)]
/// CPU reference of [`topk`] for x [rows, cols]: (values, indices), each [rows, k].
pub(crate) fn topk_reference(x: &[f32], cols: usize, k: usize) -> (Vec<f32>, Vec<u32>) {
    let (mut values, mut indices) = (Vec::new(), Vec::new());
    for row in x.chunks(cols) {
        let mut order: Vec<usize> = (0..cols).collect();
        // Stable sort by value descending keeps equal values in ascending index order.
        order.sort_by(|&a, &b| row[b].partial_cmp(&row[a]).unwrap_or(std::cmp::Ordering::Equal));
        for &i in &order[..k] {
            values.push(row[i]);
            indices.push(i as u32);
        }
    }
    (values, indices)
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::gpu::testing::devices;
    use crate::ops::testing::{assert_close, random_vec, rng};
    use pollster::block_on;
    use rand::Rng;

    // Tolerance: exact (values are copied, indices compared as integers).
    const TOL: f32 = 0.0;

    /// `levels` > 0 draws values from that many integers, so that ties abound.
    fn check(shape: &[usize], k: usize, levels: u32, seed: u64) {
        for gpu in devices() {
            let mut rng = rng(seed);
            let cols = *shape.last().unwrap();
            let n: usize = shape.iter().product();
            let xv = if levels > 0 { (0..n).map(|_| rng.random_range(0..levels) as f32 - 1.0).collect() } else { random_vec(&mut rng, n, 10.0) };
            let x = Tensor::from_slice(gpu, &xv, shape).unwrap();
            let (values, indices) = topk(&x, k).unwrap();
            assert_eq!(indices.shape(), [&shape[..shape.len() - 1], &[k]].concat());
            let (want_v, want_i) = topk_reference(&xv, cols, k);
            let name = format!("topk {shape:?} k {k} levels {levels} on {}", gpu.adapter_info().name);
            assert_close(&format!("{name} values"), &block_on(values.to_vec::<f32>()).unwrap(), &want_v, TOL, TOL);
            assert_eq!(block_on(indices.to_vec::<u32>()).unwrap(), want_i, "{name} indices");
        }
    }

    #[test]
    fn topk_matches_reference() {
        check(&[5, 1], 1, 0, 1);
        check(&[1, 7], 7, 0, 2);
        check(&[7, 33], 33, 3, 3);
        check(&[7, 300], 10, 4, 4);
        check(&[3, 1000], 256, 0, 5);
        check(&[2, 3, 17], 5, 0, 6);
        check(&[2, 50257], 50, 0, 7);
        check(&[1, 50257], 40, 50, 8);
    }

    #[test]
    fn argmax_takes_the_lowest_index_on_ties() {
        for gpu in devices() {
            let mut rng = rng(9);
            let xv: Vec<f32> = (0..300 * 50).map(|_| rng.random_range(0..3) as f32).collect();
            let x = Tensor::from_slice(gpu, &xv, &[300, 50]).unwrap();
            let got = block_on(argmax(&x).unwrap().to_vec::<u32>()).unwrap();
            assert_eq!(got, topk_reference(&xv, 50, 1).1, "argmax on {}", gpu.adapter_info().name);
            let row = Tensor::from_slice(gpu, &[1.0f32, 3.0, -2.0, 3.0], &[4]).unwrap();
            let top = argmax(&row).unwrap();
            assert_eq!(top.shape(), &[] as &[usize]);
            assert_eq!(block_on(top.to_vec::<u32>()).unwrap(), vec![1]);
        }
    }

    #[test]
    fn bad_k_is_an_error() {
        for gpu in devices() {
            let x = Tensor::zeros(gpu, &[2, 300], DType::F32).unwrap();
            for k in [0, 257] {
                let e = topk(&x, k).unwrap_err().to_string();
                assert!(e.contains("topk") && e.contains(&format!("k = {k}")), "{e}");
            }
            let small = Tensor::zeros(gpu, &[2, 5], DType::F32).unwrap();
            assert!(topk(&small, 6).unwrap_err().to_string().contains("1..=5"));
            let ids = Tensor::zeros(gpu, &[2, 5], DType::U32).unwrap();
            assert!(argmax(&ids).unwrap_err().to_string().contains("u32"));
        }
    }
}
