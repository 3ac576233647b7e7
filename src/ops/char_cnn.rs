//! ELMo's character CNN (`shaders/char_cnn.wgsl`): for each filter width, a valid 1-D
//! convolution over a token's character embeddings, max-pooled over positions, then the
//! activation — AllenNLP `_ElmoCharacterEncoder` order (conv + bias, max, activation). The
//! widths' results are concatenated into one [N, Σ F] tensor, each width writing its own
//! column block.
//!
//! The convolution runs as im2col + the register-blocked matmul (the widest filters hold most
//! of the work: 7 × 16 inputs × 1024 filters at each of 44 positions), in chunks of tokens so
//! that the windows and the per-position outputs stay small.

use super::matmul::{matmul, matmul_accumulate, Matmul};
use super::sum::column_sums_into;
use super::{as_u32, expect_f32, expect_shape, grid_1d};
use crate::error::{arg_err, shape_err, Result};
use crate::kernels::char_cnn::{Params, COL2IM, IM2COL, MAX_POOL, POOL_BACKWARD, ROUTE_MAX};
use crate::tensor::{DType, Tensor};

/// Invocations per workgroup.
const WG: usize = 64;
/// Elements of the largest intermediate (windows or per-position outputs) of one token chunk.
const CHUNK_ELEMENTS: usize = 1 << 22;

/// The nonlinearity after the max-pool (ELMo: tanh) or inside a highway layer (ELMo: relu).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    Tanh,
    Relu,
}

impl Activation {
    /// The kernels' `ACT_*` code.
    pub(crate) fn code(self) -> u32 {
        match self {
            Activation::Tanh => 0,
            Activation::Relu => 1,
        }
    }

    /// The CPU reference of the function.
    #[cfg(test)]
    pub(crate) fn reference(self, x: f64) -> f64 {
        match self {
            Activation::Tanh => x.tanh(),
            Activation::Relu => x.max(0.0),
        }
    }
}

/// One filter width: `weight` `[F, E, w]` (PyTorch `Conv1d` layout: out, in, kernel), `bias` `[F]`.
#[derive(Clone, Copy, Debug)]
pub struct ConvFilter<'a> {
    pub weight: &'a Tensor,
    pub bias: &'a Tensor,
}

/// Runs every filter width over `chars` [N, L, E] and concatenates: returns [N, Σ F_i], with
/// filter f of width i at column Σ_{j<i} F_j + f.
pub fn char_cnn(chars: &Tensor, filters: &[ConvFilter], activation: Activation) -> Result<Tensor> {
    Ok(char_cnn_in_chunks(chars, filters, activation, false, CHUNK_ELEMENTS)?.out)
}

/// A training forward's result.
pub struct CharCnnOutput {
    /// [N, Σ F].
    pub out: Tensor,
    /// [N, Σ F] u32: the position of each max (first on ties); absent at inference.
    argmax: Option<Tensor>,
}

/// [`char_cnn`], recording the max positions for [`char_cnn_backward`].
pub fn char_cnn_saved(chars: &Tensor, filters: &[ConvFilter], activation: Activation) -> Result<CharCnnOutput> {
    char_cnn_in_chunks(chars, filters, activation, true, CHUNK_ELEMENTS)
}

/// Checks the operands; returns (N, L, E, Σ F).
fn check(op: &'static str, chars: &Tensor, filters: &[ConvFilter]) -> Result<(usize, usize, usize, usize)> {
    expect_f32(op, "chars", chars, 3)?;
    let (tokens, len, embed) = (chars.shape()[0], chars.shape()[1], chars.shape()[2]);
    if filters.is_empty() {
        return Err(arg_err!(op, "no filters given"));
    }
    for f in filters {
        expect_f32(op, "weight", f.weight, 3)?;
        let (count, in_dim, width) = (f.weight.shape()[0], f.weight.shape()[1], f.weight.shape()[2]);
        if in_dim != embed {
            return Err(shape_err!(op, "weight {:?} expects {in_dim} input channels, chars {:?} have {embed}", f.weight.shape(), chars.shape()));
        }
        if width > len {
            return Err(shape_err!(op, "filter width {width} exceeds the {len} characters per token"));
        }
        expect_f32(op, "bias", f.bias, 1)?;
        expect_shape(op, "bias", f.bias, &[count])?;
    }
    let total: usize = filters.iter().map(|f| f.weight.shape()[0]).sum();
    as_u32(op, "elements of chars", chars.numel())?;
    as_u32(op, "elements of the output", tokens * total)?;
    Ok((tokens, len, embed, total))
}

/// One filter width's params with its token chunks: tokens per chunk so that the windows
/// and per-position outputs stay within `chunk_elements`.
fn width_params(chars: &Tensor, weight: &Tensor, total: usize, col_offset: usize, activation: Activation, chunk_elements: usize) -> (Params, usize) {
    let (len, embed) = (chars.shape()[1], chars.shape()[2]);
    let (count, width) = (weight.shape()[0], weight.shape()[2]);
    let positions = len - width + 1;
    let chunk = (chunk_elements / (positions * count.max(embed * width))).max(1);
    let params = Params {
        tokens: 0,
        chars: len as u32,
        embed: embed as u32,
        width: width as u32,
        filters: count as u32,
        out_stride: total as u32,
        col_offset: col_offset as u32,
        activation: activation.code(),
        first_token: 0,
        keep_argmax: 0,
        _pad: [0; 2],
    };
    (params, chunk)
}

/// The windows [n·P, E·w] of tokens `first..first + n` for `params`' width.
fn im2col(chars: &Tensor, params: &Params) -> Result<Tensor> {
    let gpu = chars.gpu();
    let (positions, cols) = ((params.chars - params.width + 1) as usize, (params.embed * params.width) as usize);
    let windows = Tensor::empty(gpu, &[params.tokens as usize * positions, cols], DType::F32)?;
    gpu.dispatch(&IM2COL, &[], params, &[chars.into(), (&windows).into()], grid_1d(gpu, windows.numel(), WG))?;
    Ok(windows)
}

/// [`char_cnn`] with intermediates of at most `chunk_elements` (but at least one token),
/// recording the max positions when `keep_argmax`.
fn char_cnn_in_chunks(chars: &Tensor, filters: &[ConvFilter], activation: Activation, keep_argmax: bool, chunk_elements: usize) -> Result<CharCnnOutput> {
    let (tokens, _, embed, total) = check("char_cnn", chars, filters)?;
    let gpu = chars.gpu();
    let out = Tensor::empty(gpu, &[tokens, total], DType::F32)?;
    let argmax = keep_argmax.then(|| Tensor::empty(gpu, &[tokens, total], DType::U32)).transpose()?;
    let mut col_offset = 0;
    for f in filters {
        let (count, width) = (f.weight.shape()[0], f.weight.shape()[2]);
        let weight = f.weight.reshape(&[count, embed * width])?;
        let (mut params, chunk) = width_params(chars, f.weight, total, col_offset, activation, chunk_elements);
        params.keep_argmax = keep_argmax as u32;
        for first in (0..tokens).step_by(chunk) {
            let n = chunk.min(tokens - first);
            params.tokens = n as u32;
            params.first_token = first as u32;
            let conv = matmul(&im2col(chars, &params)?, &weight, Matmul { trans_b: true, ..Default::default() })?;
            gpu.dispatch(&MAX_POOL, &[], &params, &[(&conv).into(), f.bias.into(), (&out).into(), argmax.as_ref().into()], grid_1d(gpu, n * count, WG))?;
        }
        col_offset += count;
    }
    Ok(CharCnnOutput { out, argmax })
}

/// One filter width's gradients, added to by [`char_cnn_backward`]: `weight` `[F, E, w]`,
/// `bias` `[F]`.
pub type ConvFilterGrads<'a> = ConvFilter<'a>;

/// Backward of [`char_cnn_saved`] for `d_out` [N, Σ F]: adds each width's weight and bias
/// gradients into `grads` (in `filters`' order) and returns d_chars [N, L, E].
pub fn char_cnn_backward(
    chars: &Tensor,
    filters: &[ConvFilter],
    activation: Activation,
    saved: &CharCnnOutput,
    d_out: &Tensor,
    grads: &[ConvFilterGrads],
) -> Result<Tensor> {
    char_cnn_backward_in_chunks(chars, filters, activation, saved, d_out, grads, CHUNK_ELEMENTS)
}

fn char_cnn_backward_in_chunks(
    chars: &Tensor,
    filters: &[ConvFilter],
    activation: Activation,
    saved: &CharCnnOutput,
    d_out: &Tensor,
    grads: &[ConvFilterGrads],
    chunk_elements: usize,
) -> Result<Tensor> {
    let op = "char_cnn_backward";
    let (tokens, _, embed, total) = check(op, chars, filters)?;
    let argmax = saved.argmax.as_ref().ok_or_else(|| arg_err!(op, "the forward did not record its max positions (use char_cnn_saved)"))?;
    expect_f32(op, "d_out", d_out, 2)?;
    expect_shape(op, "d_out", d_out, &[tokens, total])?;
    expect_shape(op, "saved output", &saved.out, &[tokens, total])?;
    if grads.len() != filters.len() {
        return Err(shape_err!(op, "{} gradient pairs for {} filter widths", grads.len(), filters.len()));
    }
    for (g, f) in grads.iter().zip(filters) {
        expect_shape(op, "weight gradient", g.weight, f.weight.shape())?;
        expect_shape(op, "bias gradient", g.bias, f.bias.shape())?;
    }
    let gpu = chars.gpu();
    let d_chars = Tensor::zeros(gpu, chars.shape(), DType::F32)?;
    let mut col_offset = 0;
    for (f, g) in filters.iter().zip(grads) {
        let (count, width) = (f.weight.shape()[0], f.weight.shape()[2]);
        let (weight, d_weight) = (f.weight.reshape(&[count, embed * width])?, g.weight.reshape(&[count, embed * width])?);
        let (mut params, chunk) = width_params(chars, f.weight, total, col_offset, activation, chunk_elements);
        params.tokens = tokens as u32;
        let d_pre = Tensor::empty(gpu, &[tokens, count], DType::F32)?;
        gpu.dispatch(&POOL_BACKWARD, &[], &params, &[d_out.into(), (&saved.out).into(), (&d_pre).into()], grid_1d(gpu, tokens * count, WG))?;
        column_sums_into(&d_pre, g.bias)?;
        for first in (0..tokens).step_by(chunk) {
            let n = chunk.min(tokens - first);
            params.tokens = n as u32;
            params.first_token = first as u32;
            let windows = im2col(chars, &params)?;
            let d_conv = Tensor::empty(gpu, &[windows.shape()[0], count], DType::F32)?;
            gpu.dispatch(&ROUTE_MAX, &[], &params, &[(&d_pre).into(), argmax.into(), (&d_conv).into()], grid_1d(gpu, d_conv.numel(), WG))?;
            matmul_accumulate(&d_conv, &windows, Matmul { trans_a: true, ..Default::default() }, &d_weight)?;
            let d_windows = matmul(&d_conv, &weight, Matmul::default())?;
            gpu.dispatch(&COL2IM, &[], &params, &[(&d_windows).into(), (&d_chars).into()], grid_1d(gpu, n * chars.shape()[1] * embed, WG))?;
        }
        col_offset += count;
    }
    Ok(d_chars)
}

#[cfg(test)]
/// CPU reference of [`char_cnn`] on row-major host data `chars` `[N, L, E]`; each filter is
/// (weight `[F, E, w]`, bias `[F]`, w). Returns `[N, Σ F]`.
pub(crate) fn char_cnn_reference(chars: &[f32], len: usize, embed: usize, filters: &[(&[f32], &[f32], usize)], activation: Activation) -> Vec<f32> {
    let tokens = chars.len() / (len * embed);
    let total: usize = filters.iter().map(|f| f.1.len()).sum();
    let mut out = vec![0f32; tokens * total];
    for n in 0..tokens {
        let x = &chars[n * len * embed..][..len * embed];
        let mut col = 0;
        for &(weight, bias, width) in filters {
            for (f, &b) in bias.iter().enumerate() {
                let mut best = f64::NEG_INFINITY;
                for pos in 0..=len - width {
                    let mut acc = b as f64;
                    for e in 0..embed {
                        for k in 0..width {
                            acc += x[(pos + k) * embed + e] as f64 * weight[(f * embed + e) * width + k] as f64;
                        }
                    }
                    best = best.max(acc);
                }
                out[n * total + col + f] = activation.reference(best) as f32;
            }
            col += bias.len();
        }
    }
    out
}

#[cfg(test)]
/// CPU reference of [`char_cnn_backward`] in f64, for the gradients of Σ d_out·out: returns
/// d_chars `[N, L, E]` and per filter (d_weight `[F, E, w]`, d_bias `[F]`). The max routes to its
/// first position on ties, as torch.max does.
#[allow(clippy::type_complexity)]
pub(crate) fn char_cnn_backward_reference(
    chars: &[f32],
    len: usize,
    embed: usize,
    filters: &[(&[f32], &[f32], usize)],
    activation: Activation,
    d_out: &[f32],
) -> (Vec<f32>, Vec<(Vec<f32>, Vec<f32>)>) {
    let tokens = chars.len() / (len * embed);
    let total: usize = filters.iter().map(|f| f.1.len()).sum();
    let mut d_chars = vec![0f64; chars.len()];
    let mut grads: Vec<(Vec<f64>, Vec<f64>)> = filters.iter().map(|(w, b, _)| (vec![0.0; w.len()], vec![0.0; b.len()])).collect();
    for n in 0..tokens {
        let x = &chars[n * len * embed..][..len * embed];
        let mut col = 0;
        for (&(weight, bias, width), (d_weight, d_bias)) in filters.iter().zip(&mut grads) {
            for (f, &b) in bias.iter().enumerate() {
                let conv = |pos: usize| {
                    b as f64
                        + (0..embed)
                            .flat_map(|e| (0..width).map(move |k| (e, k)))
                            .map(|(e, k)| x[(pos + k) * embed + e] as f64 * weight[(f * embed + e) * width + k] as f64)
                            .sum::<f64>()
                };
                let (mut best, mut best_pos) = (conv(0), 0);
                for pos in 1..=len - width {
                    if conv(pos) > best {
                        (best, best_pos) = (conv(pos), pos);
                    }
                }
                let y = activation.reference(best);
                let slope = match activation {
                    Activation::Tanh => 1.0 - y * y,
                    Activation::Relu => (best > 0.0) as u8 as f64,
                };
                let d = d_out[n * total + col + f] as f64 * slope;
                d_bias[f] += d;
                for e in 0..embed {
                    for k in 0..width {
                        let at = (best_pos + k) * embed + e;
                        d_weight[(f * embed + e) * width + k] += d * x[at] as f64;
                        d_chars[n * len * embed + at] += d * weight[(f * embed + e) * width + k] as f64;
                    }
                }
            }
            col += bias.len();
        }
    }
    let f32s = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<_>>();
    (f32s(&d_chars), grads.iter().map(|(w, b)| (f32s(w), f32s(b))).collect())
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::gpu::testing::devices;
    use crate::ops::testing::{assert_close, numeric_gradient, random_vec, rng};
    use pollster::block_on;

    // Tolerance: 1e-5 absolute + relative (sums of ≤ 20 products of values ≤ 1).
    const TOL: f32 = 1e-5;

    fn check(seed: u64, tokens: usize, len: usize, embed: usize, widths: &[(usize, usize)], activation: Activation) {
        check_in_chunks(seed, tokens, len, embed, widths, activation, CHUNK_ELEMENTS);
    }

    fn check_in_chunks(seed: u64, tokens: usize, len: usize, embed: usize, widths: &[(usize, usize)], activation: Activation, chunk_elements: usize) {
        let mut rng = rng(seed);
        let xv = random_vec(&mut rng, tokens * len * embed, 1.0);
        let host: Vec<(Vec<f32>, Vec<f32>, usize)> =
            widths.iter().map(|&(width, count)| (random_vec(&mut rng, count * embed * width, 0.5), random_vec(&mut rng, count, 0.5), width)).collect();
        let refs: Vec<(&[f32], &[f32], usize)> = host.iter().map(|(w, b, width)| (&w[..], &b[..], *width)).collect();
        let want = char_cnn_reference(&xv, len, embed, &refs, activation);
        for gpu in devices() {
            let x = Tensor::from_slice(gpu, &xv, &[tokens, len, embed]).unwrap();
            let tensors: Vec<(Tensor, Tensor)> = host
                .iter()
                .map(|(w, b, width)| (Tensor::from_slice(gpu, w, &[b.len(), embed, *width]).unwrap(), Tensor::from_slice(gpu, b, &[b.len()]).unwrap()))
                .collect();
            let filters: Vec<ConvFilter> = tensors.iter().map(|(weight, bias)| ConvFilter { weight, bias }).collect();
            let out = char_cnn_in_chunks(&x, &filters, activation, false, chunk_elements).unwrap().out;
            let total: usize = widths.iter().map(|w| w.1).sum();
            assert_eq!(out.shape(), &[tokens, total]);
            let got = block_on(out.to_vec::<f32>()).unwrap();
            let name = format!("char_cnn N{tokens} L{len} E{embed} (width, F) {widths:?} {activation:?} on {}", gpu.adapter_info().name);
            assert_close(&name, &got, &want, TOL, TOL);
        }
    }

    #[test]
    fn several_widths_match_reference() {
        let widths = [(1, 3), (2, 5), (3, 7), (5, 5)];
        check(1, 9, 7, 4, &widths, Activation::Tanh);
        check(2, 9, 7, 4, &widths, Activation::Relu);
        // Width equal to the token length (one position), a single token, odd sizes.
        check(3, 1, 7, 4, &[(7, 3), (1, 1)], Activation::Tanh);
        // ELMo-like: 50 characters of 16 dims.
        check(4, 37, 50, 16, &[(1, 32), (2, 32), (3, 64), (7, 65)], Activation::Tanh);
        check(5, 70, 3, 1, &[(2, 1)], Activation::Relu);
    }

    #[test]
    fn token_chunks_match_reference() {
        // 11 tokens of 7 characters, intermediates of ≤ 120 elements: width 3 (5 positions ×
        // 12 window columns) in chunks of 2 tokens and a last of 1, width 1 (7 × 9 filters) one
        // token at a time, width 7 (1 × 28) in chunks of 4, 4 and 3; then one token per chunk
        // where a single token's intermediates exceed the limit.
        check_in_chunks(6, 11, 7, 4, &[(3, 6), (1, 9), (7, 2)], Activation::Relu, 120);
        check_in_chunks(7, 11, 7, 4, &[(3, 6)], Activation::Tanh, 10);
    }

    #[test]
    fn backward_reference_matches_finite_differences() {
        let (tokens, len, embed) = (2, 5, 3);
        let mut rng = rng(8);
        let x = random_vec(&mut rng, tokens * len * embed, 1.0);
        let host: Vec<(Vec<f32>, Vec<f32>, usize)> = [(2, 3), (3, 2)]
            .iter()
            .map(|&(width, count)| (random_vec(&mut rng, count * embed * width, 0.5), random_vec(&mut rng, count, 0.5), width))
            .collect();
        let d_out = random_vec(&mut rng, tokens * 5, 1.0);
        for activation in [Activation::Tanh, Activation::Relu] {
            let loss = |x: &[f32], filters: &[(Vec<f32>, Vec<f32>, usize)]| {
                let views: Vec<(&[f32], &[f32], usize)> = filters.iter().map(|(w, b, width)| (&w[..], &b[..], *width)).collect();
                char_cnn_reference(x, len, embed, &views, activation).iter().zip(&d_out).map(|(&o, &d)| o as f64 * d as f64).sum::<f64>()
            };
            let views: Vec<(&[f32], &[f32], usize)> = host.iter().map(|(w, b, width)| (&w[..], &b[..], *width)).collect();
            let (d_chars, grads) = char_cnn_backward_reference(&x, len, embed, &views, activation, &d_out);
            let h = 1e-3;
            // Finite differences of f32 outputs: tolerances above their rounding (~1e-7 / 2h).
            assert_close(&format!("char_cnn d_chars {activation:?} vs finite differences"), &d_chars, &numeric_gradient(&x, h, |v| loss(v, &host)), 2e-3, 2e-3);
            for (i, (d_weight, d_bias)) in grads.iter().enumerate() {
                let numeric_w = numeric_gradient(&host[i].0, h, |v| {
                    let mut filters = host.clone();
                    filters[i].0 = v.to_vec();
                    loss(&x, &filters)
                });
                assert_close(&format!("char_cnn d_weight {i} {activation:?} vs finite differences"), d_weight, &numeric_w, 2e-3, 2e-3);
                let numeric_b = numeric_gradient(&host[i].1, h, |v| {
                    let mut filters = host.clone();
                    filters[i].1 = v.to_vec();
                    loss(&x, &filters)
                });
                assert_close(&format!("char_cnn d_bias {i} {activation:?} vs finite differences"), d_bias, &numeric_b, 2e-3, 2e-3);
            }
        }
    }

    /// The backward on each device against the reference; `tied` repeats each token's first
    /// character at every position, so all positions of a window tie for the max.
    #[allow(clippy::too_many_arguments)]
    fn check_backward(
        seed: u64,
        tokens: usize,
        len: usize,
        embed: usize,
        widths: &[(usize, usize)],
        activation: Activation,
        tied: bool,
        chunk_elements: usize,
    ) {
        let mut rng = rng(seed);
        let mut xv = random_vec(&mut rng, tokens * len * embed, 1.0);
        if tied {
            for token in xv.chunks_mut(len * embed) {
                let first = token[..embed].to_vec();
                token.chunks_mut(embed).for_each(|c| c.copy_from_slice(&first));
            }
        }
        let host: Vec<(Vec<f32>, Vec<f32>, usize)> =
            widths.iter().map(|&(width, count)| (random_vec(&mut rng, count * embed * width, 0.5), random_vec(&mut rng, count, 0.5), width)).collect();
        let total: usize = widths.iter().map(|w| w.1).sum();
        let d_out_v = random_vec(&mut rng, tokens * total, 1.0);
        let views: Vec<(&[f32], &[f32], usize)> = host.iter().map(|(w, b, width)| (&w[..], &b[..], *width)).collect();
        let (want_chars, want_grads) = char_cnn_backward_reference(&xv, len, embed, &views, activation, &d_out_v);
        for gpu in devices() {
            let up = |v: &[f32], shape: &[usize]| Tensor::from_slice(gpu, v, shape).unwrap();
            let x = up(&xv, &[tokens, len, embed]);
            let tensors: Vec<(Tensor, Tensor)> = host.iter().map(|(w, b, width)| (up(w, &[b.len(), embed, *width]), up(b, &[b.len()]))).collect();
            // Gradients start at 1 to show they are added to.
            let grads: Vec<(Tensor, Tensor)> =
                host.iter().map(|(w, b, width)| (up(&vec![1.0; w.len()], &[b.len(), embed, *width]), up(&vec![1.0; b.len()], &[b.len()]))).collect();
            let filters: Vec<ConvFilter> = tensors.iter().map(|(weight, bias)| ConvFilter { weight, bias }).collect();
            let grad_views: Vec<ConvFilterGrads> = grads.iter().map(|(weight, bias)| ConvFilter { weight, bias }).collect();
            let saved = char_cnn_in_chunks(&x, &filters, activation, true, chunk_elements).unwrap();
            let d_chars = char_cnn_backward_in_chunks(&x, &filters, activation, &saved, &up(&d_out_v, &[tokens, total]), &grad_views, chunk_elements).unwrap();
            let get = |t: &Tensor| block_on(t.to_vec::<f32>()).unwrap();
            let less_one = |t: &Tensor| get(t).iter().map(|g| g - 1.0).collect::<Vec<_>>();
            let name = format!(
                "char_cnn backward N{tokens} L{len} E{embed} {widths:?} {activation:?} tied {tied} chunk {chunk_elements} on {}",
                gpu.adapter_info().name
            );
            assert_close(&format!("{name} d_chars"), &get(&d_chars), &want_chars, 1e-5, 1e-4);
            for ((d_weight, d_bias), (want_w, want_b)) in grads.iter().zip(&want_grads) {
                assert_close(&format!("{name} d_weight"), &less_one(d_weight), want_w, 1e-4, 1e-4);
                assert_close(&format!("{name} d_bias"), &less_one(d_bias), want_b, 1e-4, 1e-4);
            }
        }
    }

    #[test]
    fn backward_matches_reference() {
        let widths = [(1, 3), (2, 5), (3, 7), (5, 5)];
        check_backward(10, 9, 7, 4, &widths, Activation::Tanh, false, CHUNK_ELEMENTS);
        check_backward(11, 9, 7, 4, &widths, Activation::Relu, false, CHUNK_ELEMENTS);
        check_backward(12, 37, 50, 16, &[(1, 32), (3, 64), (7, 65)], Activation::Tanh, false, CHUNK_ELEMENTS);
        // Ties route to the first position, as torch.max does.
        check_backward(13, 5, 6, 3, &[(2, 4), (3, 3)], Activation::Tanh, true, CHUNK_ELEMENTS);
        // Token chunks (see token_chunks_match_reference).
        check_backward(14, 11, 7, 4, &[(3, 6), (1, 9), (7, 2)], Activation::Relu, false, 120);
    }

    #[test]
    fn bad_shapes_are_errors() {
        for gpu in devices() {
            let z = |shape: &[usize]| Tensor::zeros(gpu, shape, DType::F32).unwrap();
            let x = z(&[2, 4, 3]);
            let (w, b) = (z(&[5, 3, 2]), z(&[5]));
            assert!(char_cnn(&x, &[ConvFilter { weight: &w, bias: &b }], Activation::Tanh).is_ok());
            assert!(char_cnn(&x, &[], Activation::Tanh).is_err(), "no filters");
            let wide = z(&[5, 3, 5]);
            assert!(char_cnn(&x, &[ConvFilter { weight: &wide, bias: &b }], Activation::Tanh).is_err(), "width 5 > 4 chars");
            let other_embed = z(&[5, 2, 2]);
            assert!(char_cnn(&x, &[ConvFilter { weight: &other_embed, bias: &b }], Activation::Tanh).is_err(), "embedding mismatch");
            let short_bias = z(&[4]);
            assert!(
                char_cnn(&x, &[ConvFilter { weight: &w, bias: &b }, ConvFilter { weight: &w, bias: &short_bias }], Activation::Relu).is_err(),
                "bias length"
            );
            assert!(char_cnn(&z(&[2, 12]), &[ConvFilter { weight: &w, bias: &b }], Activation::Tanh).is_err(), "rank 2 chars");
            let ids = Tensor::from_slice(gpu, &[0u32; 24], &[2, 4, 3]).unwrap();
            assert!(char_cnn(&ids, &[ConvFilter { weight: &w, bias: &b }], Activation::Tanh).is_err(), "u32 chars");
            let device = &gpu.adapter_info().name;
            let filters = [ConvFilter { weight: &w, bias: &b }];
            let saved = char_cnn_saved(&x, &filters, Activation::Tanh).unwrap();
            let d_out = z(&[2, 5]);
            if let Err(e) = char_cnn_backward(&x, &filters, Activation::Tanh, &saved, &d_out, &filters) {
                panic!("backward on {device}: {e}");
            }
            assert!(char_cnn_backward(&x, &filters, Activation::Tanh, &saved, &z(&[2, 4]), &filters).is_err(), "d_out width on {device}");
            assert!(char_cnn_backward(&x, &filters, Activation::Tanh, &saved, &d_out, &[]).is_err(), "no gradients on {device}");
            let short = [ConvFilter { weight: &w, bias: &short_bias }];
            assert!(char_cnn_backward(&x, &filters, Activation::Tanh, &saved, &d_out, &short).is_err(), "bias gradient shape on {device}");
            let inference = CharCnnOutput { out: saved.out.clone(), argmax: None };
            assert!(char_cnn_backward(&x, &filters, Activation::Tanh, &inference, &d_out, &filters).is_err(), "no recorded max positions on {device}");
        }
    }
}
