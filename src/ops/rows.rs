//! Row copies between layouts (`shaders/rows.wgsl`): row `src_row` of a [rows, w] tensor goes
//! to row `dst_row` of a [rows', W] tensor at a column offset, for a list of pairs, in one
//! dispatch. ELMo uses it to concatenate the two LSTM directions, drop the sentence boundary
//! positions and lay the layers out as [batch, layers, tokens, 2·proj].

use super::{as_u32, expect_f32, grid_1d};
use crate::error::{arg_err, shape_err, Result};
use crate::kernels::rows::{Params, KERNEL};
use crate::tensor::Tensor;

/// Invocations per workgroup.
const WG: usize = 256;

/// Copies row `s` of `src` [R, w] into row `d` of `dst` [R', W], columns `col_offset..+w`,
/// for every `(s, d)` in `pairs` (recorded in the pending batch; other elements of `dst` are
/// left as they are). Destination rows should be distinct: overlapping writes race.
pub fn copy_rows(src: &Tensor, dst: &Tensor, col_offset: usize, pairs: &[(usize, usize)]) -> Result<()> {
    let width = src.shape().get(1).copied().unwrap_or(0);
    copy_block(src, 0, width, dst, col_offset, pairs)
}

/// Columns `offset..offset + width` of `x` [R, W]: [R, width] (the inverse of
/// [`concat_columns`], as its backward splits a gradient).
pub fn columns(x: &Tensor, offset: usize, width: usize) -> Result<Tensor> {
    let op = "columns";
    expect_f32(op, "x", x, 2)?;
    let rows = x.shape()[0];
    let out = Tensor::empty(x.gpu(), &[rows, width], crate::tensor::DType::F32)?;
    let pairs: Vec<(usize, usize)> = (0..rows).map(|r| (r, r)).collect();
    copy_block(x, offset, width, &out, 0, &pairs)?;
    Ok(out)
}

/// [`copy_rows`] of columns `src_offset..src_offset + width` of each src row.
fn copy_block(src: &Tensor, src_offset: usize, width: usize, dst: &Tensor, col_offset: usize, pairs: &[(usize, usize)]) -> Result<()> {
    let op = "copy_rows";
    expect_f32(op, "src", src, 2)?;
    expect_f32(op, "dst", dst, 2)?;
    let (src_rows, src_width) = (src.shape()[0], src.shape()[1]);
    let (dst_rows, dst_width) = (dst.shape()[0], dst.shape()[1]);
    if src_offset + width > src_width {
        return Err(shape_err!(op, "{width} columns at offset {src_offset} are not all in src {:?}", src.shape()));
    }
    if col_offset + width > dst_width {
        return Err(shape_err!(op, "{width} columns at offset {col_offset} do not fit in dst {:?}", dst.shape()));
    }
    if let Some(&(s, d)) = pairs.iter().find(|&&(s, d)| s >= src_rows || d >= dst_rows) {
        return Err(arg_err!(op, "pair ({s}, {d}) is out of range for src {:?} and dst {:?}", src.shape(), dst.shape()));
    }
    if pairs.is_empty() {
        return Ok(());
    }
    as_u32(op, "copied elements", pairs.len() * width)?;
    as_u32(op, "elements of dst", dst.numel())?;
    let gpu = src.gpu();
    let flat: Vec<u32> = pairs.iter().flat_map(|&(s, d)| [s as u32, d as u32]).collect();
    let map = Tensor::from_slice(gpu, &flat, &[pairs.len(), 2])?;
    as_u32(op, "elements of src", src.numel())?;
    let params = Params {
        pairs: pairs.len() as u32,
        width: width as u32,
        dst_stride: dst_width as u32,
        col_offset: col_offset as u32,
        src_stride: src_width as u32,
        src_offset: src_offset as u32,
    };
    gpu.dispatch(&KERNEL, &[], &params, &[(&map).into(), src.into(), dst.into()], grid_1d(gpu, pairs.len() * width, WG))
}

/// `parts` [R, wᵢ] side by side: [R, Σ wᵢ] (a bidirectional layer's [forward; backward]).
pub fn concat_columns(parts: &[&Tensor]) -> Result<Tensor> {
    let op = "concat_columns";
    let Some(first) = parts.first() else {
        return Err(arg_err!(op, "nothing to concatenate"));
    };
    expect_f32(op, "parts", first, 2)?;
    let rows = first.shape()[0];
    if let Some(other) = parts.iter().find(|p| p.shape().len() != 2 || p.shape()[0] != rows) {
        return Err(shape_err!(op, "parts of {rows} rows and {:?}", other.shape()));
    }
    let width = parts.iter().map(|p| p.shape()[1]).sum();
    let out = Tensor::empty(first.gpu(), &[rows, width], crate::tensor::DType::F32)?;
    let pairs: Vec<(usize, usize)> = (0..rows).map(|r| (r, r)).collect();
    let mut offset = 0;
    for part in parts {
        copy_rows(part, &out, offset, &pairs)?;
        offset += part.shape()[1];
    }
    Ok(out)
}

#[cfg(test)]
/// CPU reference of [`copy_rows`] on row-major host data: `src` rows of `width`, `dst` rows
/// of `dst_width`.
pub(crate) fn copy_rows_reference(src: &[f32], width: usize, dst: &mut [f32], dst_width: usize, col_offset: usize, pairs: &[(usize, usize)]) {
    for &(s, d) in pairs {
        dst[d * dst_width + col_offset..][..width].copy_from_slice(&src[s * width..][..width]);
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::gpu::testing::devices;
    use crate::ops::testing::{random_vec, rng};
    use crate::tensor::DType;
    use pollster::block_on;

    #[test]
    fn copy_rows_matches_reference() {
        for gpu in devices() {
            let mut rng = rng(4);
            // Two [5, 3] sources side by side in a [7, 8] destination, rows shuffled, one row left.
            let (a, b) = (random_vec(&mut rng, 15, 1.0), random_vec(&mut rng, 15, 1.0));
            let start = random_vec(&mut rng, 56, 1.0);
            let pairs = [(0, 6), (4, 0), (2, 3), (1, 1), (3, 5), (2, 2)];
            let dst = Tensor::from_slice(gpu, &start, &[7, 8]).unwrap();
            copy_rows(&Tensor::from_slice(gpu, &a, &[5, 3]).unwrap(), &dst, 0, &pairs).unwrap();
            copy_rows(&Tensor::from_slice(gpu, &b, &[5, 3]).unwrap(), &dst, 5, &pairs[..4]).unwrap();
            let mut want = start.clone();
            copy_rows_reference(&a, 3, &mut want, 8, 0, &pairs);
            copy_rows_reference(&b, 3, &mut want, 8, 5, &pairs[..4]);
            assert_eq!(block_on(dst.to_vec::<f32>()).unwrap(), want, "copies are exact on {}", gpu.adapter_info().name);
        }
    }

    #[test]
    fn concatenated_columns_sit_side_by_side() {
        for gpu in devices() {
            let a = Tensor::from_slice(gpu, &[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
            let b = Tensor::from_slice(gpu, &[5.0f32, 6.0], &[2, 1]).unwrap();
            let both = concat_columns(&[&a, &b]).unwrap();
            assert_eq!(both.shape(), &[2, 3]);
            assert_eq!(block_on(both.to_vec::<f32>()).unwrap(), [1.0, 2.0, 5.0, 3.0, 4.0, 6.0]);
            assert!(concat_columns(&[&a, &Tensor::zeros(gpu, &[3, 1], DType::F32).unwrap()]).is_err(), "rows differ");
            assert!(concat_columns(&[]).is_err());
            // Columns take the parts back out.
            assert_eq!(block_on(columns(&both, 0, 2).unwrap().to_vec::<f32>()).unwrap(), [1.0, 2.0, 3.0, 4.0]);
            assert_eq!(block_on(columns(&both, 2, 1).unwrap().to_vec::<f32>()).unwrap(), [5.0, 6.0]);
            assert_eq!(block_on(columns(&both, 1, 2).unwrap().to_vec::<f32>()).unwrap(), [2.0, 5.0, 4.0, 6.0]);
            assert!(columns(&both, 2, 2).is_err(), "columns past the end");
        }
    }

    #[test]
    fn bad_copies_are_errors() {
        for gpu in devices() {
            let z = |shape: &[usize]| Tensor::zeros(gpu, shape, DType::F32).unwrap();
            let (src, dst) = (z(&[4, 3]), z(&[6, 5]));
            assert!(copy_rows(&src, &dst, 2, &[(3, 5)]).is_ok());
            assert!(copy_rows(&src, &dst, 3, &[(0, 0)]).is_err(), "columns past the end");
            assert!(copy_rows(&src, &dst, 0, &[(4, 0)]).is_err(), "source row out of range");
            assert!(copy_rows(&src, &dst, 0, &[(0, 6)]).is_err(), "destination row out of range");
            assert!(copy_rows(&z(&[12]), &dst, 0, &[(0, 0)]).is_err(), "rank 1 source");
        }
    }
}
