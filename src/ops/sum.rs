//! Reductions for gradients (`shaders/sum.wgsl`): column sums accumulated into a bias's
//! gradient, and a tensor's sum of squares (for the global gradient norm).

use super::{as_u32, expect_dtype, expect_f32, expect_shape};
use crate::error::{shape_err, Result};
use crate::kernels::sum::{Params, COLUMN_SUMS, SUM_SQUARES};
use crate::tensor::{DType, Tensor};

/// `out[c]` += Σ over every leading index of `x[.., c]`; `out` is `[C]` for x `[.., C]`.
pub fn column_sums_into(x: &Tensor, out: &Tensor) -> Result<()> {
    let op = "column_sums";
    expect_dtype(op, "x", x, DType::F32)?;
    if x.rank() == 0 || x.numel() == 0 {
        return Err(shape_err!(op, "`x` must have rank ≥ 1 and no zero-sized dimension, got shape {:?}", x.shape()));
    }
    let cols = x.shape()[x.rank() - 1];
    expect_f32(op, "out", out, 1)?;
    expect_shape(op, "out", out, &[cols])?;
    let params = Params { rows: as_u32(op, "rows", x.numel() / cols)?, cols: as_u32(op, "columns", cols)?, slot: 0, _pad: 0 };
    let gpu = x.gpu();
    gpu.dispatch(&COLUMN_SUMS, &[], &params, &[x.into(), out.into()], [as_u32(op, "workgroups", cols.div_ceil(256))?, 1, 1])
}

/// `out[slot]` = Σ x² over all of x.
pub fn sum_squares_into(x: &Tensor, out: &Tensor, slot: usize) -> Result<()> {
    let op = "sum_squares";
    expect_dtype(op, "x", x, DType::F32)?;
    expect_f32(op, "out", out, 1)?;
    if slot >= out.numel() {
        return Err(shape_err!(op, "slot {slot} is outside out {:?}", out.shape()));
    }
    let params = Params { rows: 1, cols: as_u32(op, "elements", x.numel())?, slot: slot as u32, _pad: 0 };
    x.gpu().dispatch(&SUM_SQUARES, &[], &params, &[x.into(), out.into()], [1, 1, 1])
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::gpu::testing::devices;
    use crate::ops::testing::{assert_close, random_vec, rng};
    use pollster::block_on;

    #[test]
    fn column_sums_add_to_the_accumulator() {
        for gpu in devices() {
            let device = &gpu.adapter_info().name;
            let mut rng = rng(1);
            for shape in [vec![1, 1], vec![7, 300], vec![2, 3, 5], vec![513]] {
                let xv = random_vec(&mut rng, shape.iter().product(), 1.0);
                let cols = *shape.last().unwrap();
                let start = random_vec(&mut rng, cols, 1.0);
                let x = Tensor::from_slice(gpu, &xv, &shape).unwrap();
                let out = Tensor::from_slice(gpu, &start, &[cols]).unwrap();
                column_sums_into(&x, &out).unwrap();
                let mut want = start.clone();
                for row in xv.chunks(cols) {
                    for (w, v) in want.iter_mut().zip(row) {
                        *w += v;
                    }
                }
                assert_close(&format!("column sums {shape:?} on {device}"), &block_on(out.to_vec::<f32>()).unwrap(), &want, 1e-5, 1e-5);
            }
        }
    }

    #[test]
    fn sum_squares_fills_its_slot_only() {
        for gpu in devices() {
            let device = &gpu.adapter_info().name;
            let mut rng = rng(2);
            let xv = random_vec(&mut rng, 1000, 2.0);
            let x = Tensor::from_slice(gpu, &xv, &[10, 100]).unwrap();
            let out = Tensor::from_slice(gpu, &[-1.0f32; 3], &[3]).unwrap();
            sum_squares_into(&x, &out, 1).unwrap();
            let want = xv.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() as f32;
            assert_close(&format!("sum of squares on {device}"), &block_on(out.to_vec::<f32>()).unwrap(), &[-1.0, want, -1.0], 1e-5, 1e-5);
            assert!(sum_squares_into(&x, &out, 3).is_err(), "slot 3 of 3 on {device}");
        }
    }
}
