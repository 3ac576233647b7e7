//! Host twins of `char_cnn.wgsl`'s inference entry points (`ops::char_cnn`), for one filter
//! width w over the chunk of `tokens` tokens starting at `first_token` (n0), with L characters
//! of E dims per token and P = L − w + 1 positions:
//! - `im2col`: windows [tokens·P, E·w], windows[n·P + pos, e·w + k] = x[n0 + n, pos + k, e]
//!   for x [N, L, E];
//! - `max_pool`: out[n0 + n, col_offset + f] = act(max over pos of conv[n·P + pos, f] + bias[f])
//!   for conv [tokens·P, F], bias [F] and out [N, out_stride]; with `keep_argmax`, the first
//!   position of each max goes to argmax (u32, laid out like out) when it is bound.

use super::activations::{tanh_or_relu, ACT_TANH};
use crate::error::Result;
use crate::host::HostCall;
use crate::ops::char_cnn::Params;

pub(crate) fn im2col(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (x, windows) = (call.read(0)?, call.write(1)?);
    let (chars, embed, width) = (p.chars as usize, p.embed as usize, p.width as usize);
    let (positions, cols) = ((chars + 1).saturating_sub(width), embed * width);
    if cols == 0 || positions == 0 {
        return Ok(());
    }
    let first = p.first_token as usize;
    let rows = windows.chunks_exact_mut(cols).take(p.tokens as usize * positions);
    for (row, window) in rows.enumerate() {
        let (n, pos) = (row / positions, row % positions);
        // The w characters this window covers, [w, E].
        let span = &x[((first + n) * chars + pos) * embed..][..cols];
        for (e, taps) in window.chunks_exact_mut(width).enumerate() {
            for (k, v) in taps.iter_mut().enumerate() {
                *v = span[k * embed + e];
            }
        }
    }
    Ok(())
}

pub(crate) fn max_pool(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (conv, bias, out) = (call.read(0)?, call.read(1)?, call.write(2)?);
    let argmax: Option<&mut [u32]> = call.optional_write(3)?.map(bytemuck::cast_slice_mut);
    let mut argmax = argmax.filter(|_| p.keep_argmax != 0);
    let (filters, stride, offset) = (p.filters as usize, p.out_stride as usize, p.col_offset as usize);
    let positions = (p.chars + 1).saturating_sub(p.width) as usize;
    if filters == 0 || positions == 0 {
        return Ok(());
    }
    let tanh = p.activation == ACT_TANH;
    let mut best = vec![0f32; filters];
    let mut best_pos = vec![0u32; filters];
    for (n, token) in conv.chunks_exact(positions * filters).take(p.tokens as usize).enumerate() {
        // The shader's running max over positions: strictly greater, so the first max wins.
        best.fill(-3.0e38);
        best_pos.fill(0);
        for (pos, row) in token.chunks_exact(filters).enumerate() {
            for ((b, at), &v) in best.iter_mut().zip(best_pos.iter_mut()).zip(row) {
                if v > *b {
                    *b = v;
                    *at = pos as u32;
                }
            }
        }
        let at = (p.first_token as usize + n) * stride + offset;
        for ((o, &b), &bias) in out[at..][..filters].iter_mut().zip(&best).zip(bias) {
            let pre = b + bias;
            *o = tanh_or_relu(tanh, pre);
        }
        if let Some(argmax) = argmax.as_deref_mut() {
            argmax[at..][..filters].copy_from_slice(&best_pos);
        }
    }
    Ok(())
}
