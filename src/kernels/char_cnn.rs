//! Params, kernel declarations and host twins of `char_cnn.wgsl` (`ops::char_cnn`), for one filter width w over the chunk of
//! `tokens` tokens starting at `first_token` (n0), with L characters of E dims per token and
//! P = L − w + 1 positions. The forward:
//! - `im2col`: windows [tokens·P, E·w], windows[n·P + pos, e·w + k] = x[n0 + n, pos + k, e]
//!   for x [N, L, E];
//! - `max_pool`: out[n0 + n, col_offset + f] = act(max over pos of conv[n·P + pos, f] + bias[f])
//!   for conv [tokens·P, F], bias [F] and out [N, out_stride]; with `keep_argmax`, the first
//!   position of each max goes to argmax (u32, laid out like out) when it is bound.
//!
//! The backward (training):
//! - `pool_backward`: d_pre[n, f] = d_out[n, c]·act'(out[n, c]) with c = col_offset + f, for
//!   n < tokens (n0 is not used: it runs over all tokens at once), d_out and out [N, out_stride],
//!   d_pre [N, F]; act' is 1 − y² for tanh, else 1 where y > 0;
//! - `route_max`: d_conv[n·P + pos, f] = d_pre[n0 + n, f] where argmax[n0 + n, c] = pos, else 0;
//! - `col2im`: d_chars[n0 + n, l, e] += Σ over taps k (with 0 ≤ l − k < P) of
//!   d_windows[n·P + l − k, e·w + k], accumulated onto d_chars [N, L, E].

use super::activations::{tanh_or_relu, ACT_TANH};
use super::HostCall;
use super::{kernel_params, Access, Kernel, KernelParams};
use crate::error::Result;

const SOURCE: &str = include_str!(concat!(env!("OUT_DIR"), "/char_cnn.wgsl"));

pub(crate) const IM2COL: Kernel = Kernel {
    shader: "char_cnn",
    source: SOURCE,
    entry: "im2col",
    // x, windows
    bindings: &[Access::Read, Access::ReadWrite],
    params: Params::LAYOUT,
    twin: Some(im2col),
};

pub(crate) const MAX_POOL: Kernel = Kernel {
    shader: "char_cnn",
    source: SOURCE,
    entry: "max_pool",
    // conv, bias, out, argmax (absent at inference)
    bindings: &[Access::Read, Access::Read, Access::ReadWrite, Access::ReadWrite],
    params: Params::LAYOUT,
    twin: Some(max_pool),
};

pub(crate) const POOL_BACKWARD: Kernel = Kernel {
    shader: "char_cnn",
    source: SOURCE,
    entry: "pool_backward",
    // d_out, out, d_pre
    bindings: &[Access::Read, Access::Read, Access::ReadWrite],
    params: Params::LAYOUT,
    twin: Some(pool_backward),
};

pub(crate) const ROUTE_MAX: Kernel = Kernel {
    shader: "char_cnn",
    source: SOURCE,
    entry: "route_max",
    // d_pre, argmax, d_conv
    bindings: &[Access::Read, Access::Read, Access::ReadWrite],
    params: Params::LAYOUT,
    twin: Some(route_max),
};

pub(crate) const COL2IM: Kernel = Kernel {
    shader: "char_cnn",
    source: SOURCE,
    entry: "col2im",
    // d_windows, d_chars
    bindings: &[Access::Read, Access::ReadWrite],
    params: Params::LAYOUT,
    twin: Some(col2im),
};

/// Every kernel of this module, for the checks over all kernels (`kernels::all`).
#[cfg(test)]
pub(crate) const KERNELS: &[&Kernel] = &[&IM2COL, &MAX_POOL, &POOL_BACKWARD, &ROUTE_MAX, &COL2IM];

kernel_params! {
    pub(crate) struct Params {
        pub(crate) tokens: u32,
        pub(crate) chars: u32,
        pub(crate) embed: u32,
        pub(crate) width: u32,
        pub(crate) filters: u32,
        pub(crate) out_stride: u32,
        pub(crate) col_offset: u32,
        pub(crate) activation: u32,
        pub(crate) first_token: u32,
        pub(crate) keep_argmax: u32,
        pub _pad: [u32; 2],
    }
}

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

/// Elements of an array of `dims`, saturating (then no binding holds them).
fn count(dims: &[usize]) -> usize {
    dims.iter().fold(1, |n, &d| n.saturating_mul(d))
}

/// Positions of a window in a token (0 when the filter is wider than the token).
fn window_positions(p: &Params) -> usize {
    (p.chars as usize).saturating_add(1).saturating_sub(p.width as usize)
}

/// Elements of an [N, out_stride] array that `tokens` tokens from `first` reach in this width's
/// columns.
fn column_block_end(p: &Params, first: usize, tokens: usize) -> usize {
    count(&[first.saturating_add(tokens) - 1, p.out_stride as usize]).saturating_add(p.col_offset as usize).saturating_add(p.filters as usize)
}

pub(crate) fn pool_backward(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (d_out, out, d_pre) = (call.read(0)?, call.read(1)?, call.write(2)?);
    let (tokens, filters) = (p.tokens as usize, p.filters as usize);
    if tokens == 0 || filters == 0 {
        return Ok(());
    }
    let end = column_block_end(&p, 0, tokens);
    if d_out.len() < end || out.len() < end || d_pre.len() < count(&[tokens, filters]) {
        return Err(call.fault(format!("{tokens} tokens of {filters} filters do not fit the bindings")));
    }
    let tanh = p.activation == ACT_TANH;
    for (n, row) in d_pre.chunks_exact_mut(filters).take(tokens).enumerate() {
        let at = n * p.out_stride as usize + p.col_offset as usize;
        for ((d, &dy), &y) in row.iter_mut().zip(&d_out[at..][..filters]).zip(&out[at..][..filters]) {
            // The activation's slope from its output, as the shader.
            let slope = if tanh {
                1.0 - y * y
            } else if y > 0.0 {
                1.0
            } else {
                0.0
            };
            *d = dy * slope;
        }
    }
    Ok(())
}

pub(crate) fn route_max(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (d_pre, argmax, d_conv) = (call.read(0)?, call.read_u32(1)?, call.write(2)?);
    let (tokens, filters, first) = (p.tokens as usize, p.filters as usize, p.first_token as usize);
    let positions = window_positions(&p);
    if tokens == 0 || filters == 0 || positions == 0 {
        return Ok(());
    }
    let fits = argmax.len() >= column_block_end(&p, first, tokens)
        && d_pre.len() >= count(&[first.saturating_add(tokens), filters])
        && d_conv.len() >= count(&[tokens, positions, filters]);
    if !fits {
        return Err(call.fault(format!("tokens {first}.. ({tokens}) of {positions} positions and {filters} filters do not fit the bindings")));
    }
    for (n, token) in d_conv.chunks_exact_mut(positions * filters).take(tokens).enumerate() {
        let at = (first + n) * p.out_stride as usize + p.col_offset as usize;
        let (maxima, grads) = (&argmax[at..][..filters], &d_pre[(first + n) * filters..][..filters]);
        for (pos, row) in token.chunks_exact_mut(filters).enumerate() {
            for ((o, &max_at), &g) in row.iter_mut().zip(maxima).zip(grads) {
                *o = if max_at as usize == pos { g } else { 0.0 };
            }
        }
    }
    Ok(())
}

pub(crate) fn col2im(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (d_windows, d_chars) = (call.read(0)?, call.write(1)?);
    let (tokens, chars, embed, width, first) = (p.tokens as usize, p.chars as usize, p.embed as usize, p.width as usize, p.first_token as usize);
    let (positions, cols, span) = (window_positions(&p), count(&[embed, width]), count(&[chars, embed]));
    if tokens == 0 || span == 0 {
        return Ok(());
    }
    if d_windows.len() < count(&[tokens, positions, cols]) || d_chars.len() < count(&[first.saturating_add(tokens), span]) {
        return Err(call.fault(format!("tokens {first}.. ({tokens}) of {chars} characters of {embed} do not fit the bindings")));
    }
    for n in 0..tokens {
        let windows = &d_windows[n * positions * cols..][..positions * cols];
        let token = &mut d_chars[(first + n) * span..][..span];
        for (l, character) in token.chunks_exact_mut(embed).enumerate() {
            for (e, d) in character.iter_mut().enumerate() {
                // Tap k of window l − k reads character l; the taps in order, as the shader.
                let mut sum = 0.0;
                for k in 0..width.min(l + 1) {
                    let pos = l - k;
                    if pos < positions {
                        sum += windows[pos * cols + e * width + k];
                    }
                }
                *d += sum;
            }
        }
    }
    Ok(())
}
