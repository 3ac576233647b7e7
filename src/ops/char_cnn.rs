//! ELMo's character CNN (`shaders/char_cnn.wgsl`): for each filter width, a valid 1-D
//! convolution over a token's character embeddings, max-pooled over positions, then the
//! activation — AllenNLP `_ElmoCharacterEncoder` order (conv + bias, max, activation). The
//! widths' results are concatenated into one [N, Σ F] tensor, each width writing its own
//! column block.
//!
//! The convolution runs as im2col + the register-blocked matmul (the widest filters hold most
//! of the work: 7 × 16 inputs × 1024 filters at each of 44 positions), in chunks of tokens so
//! that the windows and the per-position outputs stay small.

use super::matmul::{matmul, Matmul};
use super::{as_u32, expect_f32, expect_shape, grid_1d};
use crate::error::{arg_err, shape_err, Result};
use crate::gpu::{Access, Kernel};
use crate::tensor::{DType, Tensor};

const SOURCE: &str = include_str!("../../shaders/char_cnn.wgsl");
const IM2COL: Kernel = Kernel {
    shader: "char_cnn",
    source: SOURCE,
    entry: "im2col",
    // x, windows
    bindings: &[Access::Read, Access::ReadWrite],
};
const MAX_POOL: Kernel = Kernel {
    shader: "char_cnn",
    source: SOURCE,
    entry: "max_pool",
    // conv, bias, out
    bindings: &[Access::Read, Access::Read, Access::ReadWrite],
};

/// Invocations per workgroup.
const WG: usize = 64;
/// Elements of the largest intermediate (windows or per-position outputs) of one token chunk.
const CHUNK_ELEMENTS: usize = 1 << 22;

#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    tokens: u32,
    chars: u32,
    embed: u32,
    width: u32,
    filters: u32,
    out_stride: u32,
    col_offset: u32,
    activation: u32,
    first_token: u32,
    _pad: [u32; 3],
}

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
    pub fn reference(self, x: f64) -> f64 {
        match self {
            Activation::Tanh => x.tanh(),
            Activation::Relu => x.max(0.0),
        }
    }
}

/// One filter width: `weight` [F, E, w] (PyTorch `Conv1d` layout: out, in, kernel), `bias` [F].
#[derive(Clone, Copy, Debug)]
pub struct ConvFilter<'a> {
    pub weight: &'a Tensor,
    pub bias: &'a Tensor,
}

/// Runs every filter width over `chars` [N, L, E] and concatenates: returns [N, Σ F_i], with
/// filter f of width i at column Σ_{j<i} F_j + f.
pub fn char_cnn(chars: &Tensor, filters: &[ConvFilter], activation: Activation) -> Result<Tensor> {
    char_cnn_in_chunks(chars, filters, activation, CHUNK_ELEMENTS)
}

/// [`char_cnn`] with intermediates of at most `chunk_elements` (but at least one token).
fn char_cnn_in_chunks(chars: &Tensor, filters: &[ConvFilter], activation: Activation, chunk_elements: usize) -> Result<Tensor> {
    let op = "char_cnn";
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

    let gpu = chars.gpu();
    let out = Tensor::empty(gpu, &[tokens, total], DType::F32)?;
    let mut col_offset = 0;
    for f in filters {
        let (count, width) = (f.weight.shape()[0], f.weight.shape()[2]);
        let positions = len - width + 1;
        let weight = f.weight.reshape(&[count, embed * width])?;
        let chunk = (chunk_elements / (positions * count.max(embed * width))).max(1);
        let mut params = Params {
            tokens: 0,
            chars: len as u32,
            embed: embed as u32,
            width: width as u32,
            filters: count as u32,
            out_stride: total as u32,
            col_offset: col_offset as u32,
            activation: activation.code(),
            first_token: 0,
            _pad: [0; 3],
        };
        for first in (0..tokens).step_by(chunk) {
            let n = chunk.min(tokens - first);
            params.tokens = n as u32;
            params.first_token = first as u32;
            let windows = Tensor::empty(gpu, &[n * positions, embed * width], DType::F32)?;
            gpu.dispatch(&IM2COL, &[], &params, &[chars.into(), (&windows).into()], grid_1d(gpu, windows.numel(), WG))?;
            let conv = matmul(&windows, &weight, Matmul { trans_b: true, ..Default::default() })?;
            gpu.dispatch(&MAX_POOL, &[], &params, &[(&conv).into(), f.bias.into(), (&out).into()], grid_1d(gpu, n * count, WG))?;
        }
        col_offset += count;
    }
    Ok(out)
}

/// CPU reference of [`char_cnn`] on row-major host data `chars` [N, L, E]; each filter is
/// (weight [F, E, w], bias [F], w). Returns [N, Σ F].
pub fn char_cnn_reference(chars: &[f32], len: usize, embed: usize, filters: &[(&[f32], &[f32], usize)], activation: Activation) -> Vec<f32> {
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

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::gpu::testing::gpu;
    use crate::ops::testing::{assert_close, random_vec, rng};
    use pollster::block_on;

    // Tolerance: 1e-5 absolute + relative (sums of ≤ 20 products of values ≤ 1).
    const TOL: f32 = 1e-5;

    fn check(seed: u64, tokens: usize, len: usize, embed: usize, widths: &[(usize, usize)], activation: Activation) {
        check_in_chunks(seed, tokens, len, embed, widths, activation, CHUNK_ELEMENTS);
    }

    fn check_in_chunks(seed: u64, tokens: usize, len: usize, embed: usize, widths: &[(usize, usize)], activation: Activation, chunk_elements: usize) {
        let gpu = gpu();
        let mut rng = rng(seed);
        let xv = random_vec(&mut rng, tokens * len * embed, 1.0);
        let host: Vec<(Vec<f32>, Vec<f32>, usize)> = widths
            .iter()
            .map(|&(width, count)| (random_vec(&mut rng, count * embed * width, 0.5), random_vec(&mut rng, count, 0.5), width))
            .collect();
        let x = Tensor::from_slice(gpu, &xv, &[tokens, len, embed]).unwrap();
        let tensors: Vec<(Tensor, Tensor)> = host
            .iter()
            .map(|(w, b, width)| (Tensor::from_slice(gpu, w, &[b.len(), embed, *width]).unwrap(), Tensor::from_slice(gpu, b, &[b.len()]).unwrap()))
            .collect();
        let filters: Vec<ConvFilter> = tensors.iter().map(|(weight, bias)| ConvFilter { weight, bias }).collect();
        let out = char_cnn_in_chunks(&x, &filters, activation, chunk_elements).unwrap();
        let total: usize = widths.iter().map(|w| w.1).sum();
        assert_eq!(out.shape(), &[tokens, total]);
        let got = block_on(out.to_vec::<f32>()).unwrap();
        let refs: Vec<(&[f32], &[f32], usize)> = host.iter().map(|(w, b, width)| (&w[..], &b[..], *width)).collect();
        let want = char_cnn_reference(&xv, len, embed, &refs, activation);
        assert_close(&format!("char_cnn N{tokens} L{len} E{embed} (width, F) {widths:?} {activation:?}"), &got, &want, TOL, TOL);
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
    fn bad_shapes_are_errors() {
        let gpu = gpu();
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
        assert!(char_cnn(&x, &[ConvFilter { weight: &w, bias: &b }, ConvFilter { weight: &w, bias: &short_bias }], Activation::Relu).is_err(), "bias length");
        assert!(char_cnn(&z(&[2, 12]), &[ConvFilter { weight: &w, bias: &b }], Activation::Tanh).is_err(), "rank 2 chars");
        let ids = Tensor::from_slice(gpu, &[0u32; 24], &[2, 4, 3]).unwrap();
        assert!(char_cnn(&ids, &[ConvFilter { weight: &w, bias: &b }], Activation::Tanh).is_err(), "u32 chars");
    }
}
