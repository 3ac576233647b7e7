//! Row softmax with an optional additive mask (`shaders/softmax.wgsl`): y = softmax(x + mask)
//! over the last dimension. x is [..., N] (rows = product of the leading dims); mask is
//! [..., N] with G rows, G dividing the rows of x, and row r of x adds mask row r / (rows / G):
//! a [B, Tk] mask broadcasts over the heads and queries of scores [B, H, Tq, Tk].
//!
//! Entries that are −inf or ≤ −1e30 after masking get probability 0; a row of only such
//! entries gives zeros rather than NaN (a fully padded query attends to nothing).

use super::{as_u32, expect_dtype, grid_1d};
use crate::error::{shape_err, Result};
#[cfg(test)]
use crate::kernels::softmax::MASKED;
use crate::kernels::softmax::{Params, KERNEL};
use crate::tensor::{DType, Tensor};

/// Splits a non-empty shape of rank ≥ 1 into (rows, last dim).
fn rows_cols(op: &'static str, operand: &str, t: &Tensor) -> Result<(usize, usize)> {
    match t.shape().last() {
        Some(&cols) if t.numel() > 0 => Ok((t.numel() / cols, cols)),
        _ => Err(shape_err!(op, "`{operand}` must have rank ≥ 1 and no zero-sized dimension, got shape {:?}", t.shape())),
    }
}

/// softmax(x + mask) over the last dimension; same shape as x.
pub fn softmax(x: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
    let op = "softmax";
    expect_dtype(op, "x", x, DType::F32)?;
    let (rows, cols) = rows_cols(op, "x", x)?;
    let mut group_rows = rows;
    if let Some(mask) = mask {
        expect_dtype(op, "mask", mask, DType::F32)?;
        let (groups, mask_cols) = rows_cols(op, "mask", mask)?;
        if mask_cols != cols || rows % groups != 0 {
            return Err(shape_err!(op, "mask {:?} must be [G, {cols}] with G dividing the {rows} rows of x {:?}", mask.shape(), x.shape()));
        }
        group_rows = rows / groups;
    }
    let gpu = x.gpu();
    let y = Tensor::empty(gpu, x.shape(), DType::F32)?;
    let params = Params {
        rows: as_u32(op, "rows", rows)?,
        cols: as_u32(op, "N", cols)?,
        has_mask: mask.is_some() as u32,
        group_rows: as_u32(op, "rows per mask row", group_rows)?,
    };
    gpu.dispatch(&KERNEL, &[], &params, &[x.into(), mask.into(), (&y).into()], grid_1d(gpu, rows, 1))?;
    Ok(y)
}

#[cfg(test)]
/// CPU reference of [`softmax`] in f64 for x [rows, cols] and mask [G, cols] (G divides rows).
pub(crate) fn softmax_reference(x: &[f32], mask: Option<&[f32]>, cols: usize) -> Vec<f32> {
    let rows = x.len() / cols;
    let group_rows = mask.map_or(rows, |m| rows / (m.len() / cols));
    let mut y = vec![0f32; x.len()];
    for r in 0..rows {
        let mut v = vec![0f64; cols];
        for c in 0..cols {
            v[c] = x[r * cols + c] as f64 + mask.map_or(0.0, |m| m[(r / group_rows) * cols + c] as f64);
        }
        let mut max = f64::NEG_INFINITY;
        for &vc in &v {
            if vc > MASKED as f64 {
                max = max.max(vc);
            }
        }
        if max == f64::NEG_INFINITY {
            continue; // every entry masked: zeros
        }
        let mut sum = 0f64;
        for &vc in &v {
            if vc > MASKED as f64 {
                sum += (vc - max).exp();
            }
        }
        for c in 0..cols {
            if v[c] > MASKED as f64 {
                y[r * cols + c] = ((v[c] - max).exp() / sum) as f32;
            }
        }
    }
    y
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::gpu::testing::devices;
    use crate::ops::testing::{assert_close, random_vec, rng};
    use pollster::block_on;

    // Tolerance: 1e-6 absolute + relative (probabilities ≤ 1; exp within a few ulps).
    const TOL: f32 = 1e-6;

    fn check(shape: &[usize], mask_shape: Option<&[usize]>, seed: u64) {
        for gpu in devices() {
            let mut rng = rng(seed);
            let cols = *shape.last().unwrap();
            // Scale 40: exp(x) alone would overflow for the larger entries without the max shift.
            let mut xv = random_vec(&mut rng, shape.iter().product(), 40.0);
            if xv.len() > cols {
                // A row of x with −inf entries, and (when wide enough) one entirely −inf.
                xv[cols] = f32::NEG_INFINITY;
                if xv.len() >= 3 * cols {
                    xv[2 * cols..3 * cols].fill(f32::NEG_INFINITY);
                }
            }
            let maskv = mask_shape.map(|ms| {
                let n: usize = ms.iter().product();
                // Mask row g hides its last g columns; row 1 is fully masked by finfo(f32).min.
                let mut m: Vec<f32> = (0..n).map(|i| if (i % cols) + (i / cols) >= cols { f32::NEG_INFINITY } else { 0.0 }).collect();
                if n >= 2 * cols {
                    m[cols..2 * cols].fill(f32::MIN);
                }
                m
            });
            let x = Tensor::from_slice(gpu, &xv, shape).unwrap();
            let mask = maskv.as_ref().map(|m| Tensor::from_slice(gpu, m, mask_shape.unwrap()).unwrap());
            let got = block_on(softmax(&x, mask.as_ref()).unwrap().to_vec::<f32>()).unwrap();
            assert!(got.iter().all(|v| v.is_finite()), "softmax {shape:?} on {}: non-finite output", gpu.adapter_info().name);
            let want = softmax_reference(&xv, maskv.as_deref(), cols);
            assert_close(&format!("softmax {shape:?} mask {mask_shape:?} on {}", gpu.adapter_info().name), &got, &want, TOL, TOL);
        }
    }

    #[test]
    fn softmax_matches_reference() {
        check(&[1, 1], None, 1);
        check(&[1], None, 2);
        check(&[7, 5], None, 3);
        check(&[300, 1000], None, 4);
        check(&[2, 50257], None, 5);
        check(&[9, 1], Some(&[3, 1]), 6);
        check(&[3, 7, 5], Some(&[3, 7, 5]), 7);
        check(&[300, 257], Some(&[257]), 8);
    }

    #[test]
    fn attention_scores_with_a_padding_mask() {
        // Scores [B, H, Tq, Tk] with a key-padding mask [B, Tk].
        check(&[3, 2, 5, 37], Some(&[3, 37]), 9);
        check(&[2, 12, 1, 300], Some(&[2, 300]), 10);
    }

    /// A NaN in a row makes the row's unmasked entries NaN on every device (the GPU's max()
    /// may pass a NaN over, which would turn an all-NaN row into zeros: a wrong number that
    /// looks right).
    #[test]
    fn nan_propagates_through_a_row() {
        for gpu in devices() {
            let nan = f32::NAN;
            #[rustfmt::skip]
            let xv = [
                nan, nan, nan, nan,
                1.0, nan, 2.0, 3.0,
                1.0, 2.0, f32::NEG_INFINITY, nan,
                1.0, 2.0, 3.0, 4.0,
            ];
            let x = Tensor::from_slice(gpu, &xv, &[4, 4]).unwrap();
            let got = block_on(softmax(&x, None).unwrap().to_vec::<f32>()).unwrap();
            let name = &gpu.adapter_info().name;
            for row in 0..3 {
                for col in 0..4 {
                    let v = got[row * 4 + col];
                    let masked = xv[row * 4 + col] == f32::NEG_INFINITY;
                    assert!(if masked { v == 0.0 } else { v.is_nan() }, "row {row} col {col} on {name}: {v}");
                }
            }
            assert!(got[12..].iter().all(|v| v.is_finite()), "a row without NaN is untouched on {name}");
        }
    }

    #[test]
    fn bad_operands_are_errors() {
        for gpu in devices() {
            let x = Tensor::zeros(gpu, &[6, 4], DType::F32).unwrap();
            let mask = Tensor::zeros(gpu, &[4, 4], DType::F32).unwrap();
            let err = softmax(&x, Some(&mask)).unwrap_err().to_string();
            assert!(err.contains("softmax") && err.contains("[4, 4]"), "{err}");
            let wide = Tensor::zeros(gpu, &[2, 5], DType::F32).unwrap();
            assert!(softmax(&x, Some(&wide)).unwrap_err().to_string().contains("softmax"));
            let ids = Tensor::zeros(gpu, &[6, 4], DType::U32).unwrap();
            assert!(softmax(&ids, None).unwrap_err().to_string().contains("u32"));
            assert!(softmax(&Tensor::zeros(gpu, &[0, 4], DType::F32).unwrap(), None).is_err());
        }
    }
}
