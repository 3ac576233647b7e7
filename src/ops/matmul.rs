//! Batched matrix multiply with transposed operands and a fused bias
//! (`shaders/matmul_tiled.wgsl` for GPUs, `shaders/matmul_blocked.wgsl` for CPU adapters).
//!
//! Shapes: `a` is [.., M, K] (or [.., K, M] with `trans_a`), `b` is [.., K, N] (or [.., N, K]
//! with `trans_b`); leading dimensions are the batch, equal on both sides or absent on one
//! (a rank-2 operand is shared by every batch). The output is [batch.., M, N].

use super::{as_u32, expect_dtype, expect_shape};
use crate::error::{shape_err, Result};
use crate::gpu::KernelVariant;
use crate::kernels::matmul::{Params, Vec4Params, BLOCKED, BLOCKED_NN, BLOCKED_NN_ROW, BLOCKED_NT, BLOCKED_NT_ROW, TILED};
use crate::tensor::{DType, Tensor};

/// Options of [`matmul`]. `Default` is plain A·B.
#[derive(Clone, Copy, Debug, Default)]
pub struct Matmul<'a> {
    pub trans_a: bool,
    pub trans_b: bool,
    /// Added to every row of the output: `[N]`.
    pub bias: Option<&'a Tensor>,
    /// Overrides the device's kernel variant (for tests and benchmarks).
    pub variant: Option<KernelVariant>,
}

/// The problem a pair of operands describes, after shape checks.
#[derive(Debug, PartialEq, Eq)]
struct Problem {
    batch: usize,
    batch_dims: Vec<usize>,
    m: usize,
    n: usize,
    k: usize,
    a_batched: bool,
    b_batched: bool,
}

fn problem(a: &[usize], b: &[usize], opts: &Matmul) -> Result<Problem> {
    let op = "matmul";
    if a.len() < 2 || b.len() < 2 {
        return Err(shape_err!(op, "operands need rank ≥ 2, got a {a:?} and b {b:?}"));
    }
    let (a_rows, a_cols) = (a[a.len() - 2], a[a.len() - 1]);
    let (b_rows, b_cols) = (b[b.len() - 2], b[b.len() - 1]);
    let (m, ka) = if opts.trans_a { (a_cols, a_rows) } else { (a_rows, a_cols) };
    let (kb, n) = if opts.trans_b { (b_cols, b_rows) } else { (b_rows, b_cols) };
    if ka != kb {
        return Err(shape_err!(op, "inner dimensions differ: a {a:?}{} · b {b:?}{}", if opts.trans_a { "ᵀ" } else { "" }, if opts.trans_b { "ᵀ" } else { "" }));
    }
    let (a_batch, b_batch) = (&a[..a.len() - 2], &b[..b.len() - 2]);
    let batch_dims = match (a_batch.is_empty(), b_batch.is_empty()) {
        (_, true) => a_batch.to_vec(),
        (true, false) => b_batch.to_vec(),
        (false, false) if a_batch == b_batch => a_batch.to_vec(),
        _ => return Err(shape_err!(op, "batch dimensions differ: a {a:?}, b {b:?}")),
    };
    if m == 0 || n == 0 || ka == 0 || batch_dims.contains(&0) {
        return Err(shape_err!(op, "empty operand: a {a:?}, b {b:?}"));
    }
    Ok(Problem { batch: batch_dims.iter().product(), batch_dims, m, n, k: ka, a_batched: !a_batch.is_empty(), b_batched: !b_batch.is_empty() })
}

/// C = op(A)·op(B) (+ bias).
///
/// A shared Bᵀ larger than the device's storage-binding limit (GPT-2's tied LM head is
/// 147 MiB; lavapipe binds 128 MiB) is split into row chunks, each writing its block of
/// C's columns.
pub fn matmul(a: &Tensor, b: &Tensor, opts: Matmul) -> Result<Tensor> {
    matmul_within(a, b, opts, None, a.gpu().limits().max_storage_buffer_binding_size)
}

/// C += op(A)·op(B) (+ bias) into an existing `c` of the product's shape: how gradients of
/// weights add up over micro-batches and over the uses of a tied weight.
pub fn matmul_accumulate(a: &Tensor, b: &Tensor, opts: Matmul, c: &Tensor) -> Result<()> {
    matmul_within(a, b, opts, Some(c), a.gpu().limits().max_storage_buffer_binding_size).map(drop)
}

/// [`matmul`] (or, with `into`, [`matmul_accumulate`]) binding at most `binding_limit` bytes
/// of a shared Bᵀ at once.
fn matmul_within(a: &Tensor, b: &Tensor, opts: Matmul, into: Option<&Tensor>, binding_limit: u64) -> Result<Tensor> {
    let op = "matmul";
    expect_dtype(op, "a", a, DType::F32)?;
    expect_dtype(op, "b", b, DType::F32)?;
    let mut pr = problem(a.shape(), b.shape(), &opts)?;
    if let Some(bias) = opts.bias {
        expect_dtype(op, "bias", bias, DType::F32)?;
        expect_shape(op, "bias", bias, &[pr.n])?;
    }
    let mut out_shape = pr.batch_dims.clone();
    out_shape.extend([pr.m, pr.n]);
    // A batched A against a shared B is one tall matrix: fold its batch into M.
    if pr.a_batched && !pr.b_batched && !opts.trans_a {
        pr.m *= pr.batch;
        pr.batch = 1;
        pr.a_batched = false;
    }
    let c = match into {
        Some(c) => {
            expect_dtype(op, "accumulator", c, DType::F32)?;
            expect_shape(op, "accumulator", c, &out_shape)?;
            c.clone()
        }
        None => Tensor::empty(a.gpu(), &out_shape, DType::F32)?,
    };
    let accumulate = into.is_some();
    if !(opts.trans_b && !pr.b_batched && b.byte_len() > binding_limit) {
        record(&pr, a, b, &c, 0, pr.n, &opts, accumulate)?;
        return Ok(c);
    }
    for (start, len) in b.row_chunks(binding_limit)? {
        record(&pr, a, &b.narrow(start, len)?, &c, start, len, &opts, accumulate)?;
    }
    Ok(c)
}

/// Records the dispatch computing columns `col..col + n` of C from `b` (those columns' part).
#[allow(clippy::too_many_arguments)]
fn record(pr: &Problem, a: &Tensor, b: &Tensor, c: &Tensor, col: usize, n: usize, opts: &Matmul, accumulate: bool) -> Result<()> {
    let op = "matmul";
    let (m, k) = (as_u32(op, "M", pr.m)?, as_u32(op, "K", pr.k)?);
    let (n, c_rs, c_off) = (as_u32(op, "N", n)?, as_u32(op, "N", pr.n)?, as_u32(op, "column", col)?);
    let (a_rs, a_cs) = if opts.trans_a { (1, m) } else { (k, 1) };
    let (b_rs, b_cs) = if opts.trans_b { (1, k) } else { (n, 1) };
    let stride = |batched: bool, size: usize| -> Result<u32> {
        if batched {
            as_u32(op, "batch stride", size)
        } else {
            Ok(0)
        }
    };
    let params = Params {
        m,
        n,
        k,
        has_bias: opts.bias.is_some() as u32,
        a_rs,
        a_cs,
        a_bs: stride(pr.a_batched, pr.m * pr.k)?,
        c_bs: as_u32(op, "output batch stride", pr.m * pr.n)?,
        b_rs,
        b_cs,
        b_bs: stride(pr.b_batched, pr.k * n as usize)?,
        c_rs,
        c_off,
        accumulate: accumulate as u32,
        _pad: [0; 2],
    };
    let gpu = a.gpu();
    let batch = as_u32(op, "batch", pr.batch)?;
    let bindings = [a.into(), b.into(), opts.bias.into(), c.into()];
    match opts.variant.unwrap_or(gpu.kernel_variant()) {
        // The host twin reads the general strided params, as the tiled kernel does.
        KernelVariant::Tiled | KernelVariant::Host => gpu.dispatch(&TILED, &[], &params, &bindings, [n.div_ceil(64), m.div_ceil(64), batch]),
        // Rows that are whole vec4s (the usual case: hidden sizes are multiples of 4) take the
        // vec4 kernels; anything else the scalar-gather one.
        KernelVariant::Blocked if !opts.trans_a && k % 4 == 0 && (opts.trans_b || n % 4 == 0) => {
            let vec4 = Vec4Params {
                m,
                n,
                k4: k / 4,
                has_bias: params.has_bias,
                a_bs: params.a_bs / 4,
                b_bs: params.b_bs / 4,
                c_bs: params.c_bs,
                c_rs,
                c_off,
                accumulate: params.accumulate,
                _pad: [0; 2],
            };
            let (kernel, groups) = match (m, opts.trans_b) {
                // 16 invocations, each owning 8 columns of the row.
                (1, true) => (&BLOCKED_NT_ROW, [n.div_ceil(128), m, batch]),
                (1, false) => (&BLOCKED_NN_ROW, [n.div_ceil(128), m, batch]),
                // 8×8 invocations, each owning 4 rows × 8 columns.
                (_, true) => (&BLOCKED_NT, [n.div_ceil(64), m.div_ceil(32), batch]),
                (_, false) => (&BLOCKED_NN, [n.div_ceil(64), m.div_ceil(32), batch]),
            };
            gpu.dispatch(kernel, &[], &vec4, &bindings, groups)
        }
        // 16×4 invocations, each owning 4×4.
        KernelVariant::Blocked => gpu.dispatch(&BLOCKED, &[], &params, &bindings, [n.div_ceil(64), m.div_ceil(16), batch]),
    }
}

#[cfg(test)]
/// CPU reference of [`matmul`] on host data with the same shape conventions. Panics on
/// operands [`matmul`] would reject (it serves tests, which build valid ones).
pub(crate) fn matmul_reference(a: &[f32], a_shape: &[usize], b: &[f32], b_shape: &[usize], trans_a: bool, trans_b: bool, bias: Option<&[f32]>) -> Vec<f32> {
    let opts = Matmul { trans_a, trans_b, ..Default::default() };
    let pr = problem(a_shape, b_shape, &opts).expect("reference operands must be valid");
    let (m, n, k) = (pr.m, pr.n, pr.k);
    let mut c = vec![0f32; pr.batch * m * n];
    for batch in 0..pr.batch {
        let a_base = if pr.a_batched { batch * m * k } else { 0 };
        let b_base = if pr.b_batched { batch * k * n } else { 0 };
        for i in 0..m {
            for j in 0..n {
                let mut sum = 0f64;
                for l in 0..k {
                    let av = if trans_a { a[a_base + l * m + i] } else { a[a_base + i * k + l] };
                    let bv = if trans_b { b[b_base + j * k + l] } else { b[b_base + l * n + j] };
                    sum += av as f64 * bv as f64;
                }
                c[batch * m * n + i * n + j] = sum as f32 + bias.map_or(0.0, |b| b[j]);
            }
        }
    }
    c
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::gpu::testing::{gpu, host, portable_host, portable_one_thread};
    use crate::gpu::Device;
    use crate::ops::testing::{assert_close, random_vec, rng};
    use pollster::block_on;

    /// Every kernel family with its device: the GPU adapter's two, and the host twin as the
    /// browser's two builds run it (one thread, several) and natively (gemm, on every core).
    fn kernel_families() -> [(&'static Device, KernelVariant); 5] {
        [
            (gpu(), KernelVariant::Tiled),
            (gpu(), KernelVariant::Blocked),
            (portable_one_thread(), KernelVariant::Host),
            (portable_host(), KernelVariant::Host),
            (host(), KernelVariant::Host),
        ]
    }

    // Tolerance: f32 accumulation over K ≤ 300 terms of magnitude ≤ 1 against an f64
    // reference: 1e-5 absolute + 1e-5 relative.
    const TOL: f32 = 1e-5;

    #[allow(clippy::too_many_arguments)]
    fn check(gpu: &Device, a_shape: &[usize], b_shape: &[usize], trans_a: bool, trans_b: bool, with_bias: bool, variant: KernelVariant, seed: u64) {
        let mut rng = rng(seed);
        let av = random_vec(&mut rng, a_shape.iter().product(), 1.0);
        let bv = random_vec(&mut rng, b_shape.iter().product(), 1.0);
        let n = if trans_b { b_shape[b_shape.len() - 2] } else { b_shape[b_shape.len() - 1] };
        let biasv = random_vec(&mut rng, n, 1.0);
        let a = Tensor::from_slice(gpu, &av, a_shape).unwrap();
        let b = Tensor::from_slice(gpu, &bv, b_shape).unwrap();
        let bias = Tensor::from_slice(gpu, &biasv, &[n]).unwrap();
        let opts = Matmul { trans_a, trans_b, bias: with_bias.then_some(&bias), variant: Some(variant) };
        let got = block_on(matmul(&a, &b, opts).unwrap().to_vec::<f32>()).unwrap();
        let want = matmul_reference(&av, a_shape, &bv, b_shape, trans_a, trans_b, with_bias.then_some(&biasv[..]));
        let name = format!("matmul {variant:?} a{a_shape:?}{} b{b_shape:?}{} bias={with_bias}", if trans_a { "ᵀ" } else { "" }, if trans_b { "ᵀ" } else { "" });
        assert_close(&name, &got, &want, TOL, TOL);
    }

    /// (a, b) shapes for A·B; the transposed cases swap the last two dims of an operand.
    const SHAPES: &[(&[usize], &[usize])] = &[
        (&[1, 1], &[1, 1]),
        (&[1, 37], &[37, 1]),     // 1×N · N×1
        (&[37, 1], &[1, 29]),     // outer product
        (&[1, 64], &[64, 130]),   // one row, as in decoding
        (&[1, 12], &[12, 20]),    // one row of whole vec4s; N = 20 leaves a half block of 8
        (&[3, 1, 8], &[3, 8, 4]), // batched single rows
        (&[1, 16], &[16, 292]),   // one row over 3 workgroups, ending in a half block
        (&[6, 16], &[16, 68]),    // 4×8 blocks over 2 workgroups, ragged M, a half block
        (&[1, 1, 16], &[16, 20]), // shared B folded into M = 1: one row
        (&[3, 1, 16], &[16, 20]), // … into M = 3: blocks
        (&[1, 16], &[2, 16, 20]), // shared A, single rows
        (&[65, 67], &[67, 70]),   // not multiples of any tile
        (&[128, 96], &[96, 64]),
        (&[3, 17, 9], &[3, 9, 21]),  // batched
        (&[1, 5, 8], &[1, 8, 3]),    // batch 1
        (&[2, 6, 35], &[35, 11]),    // shared B (folded into M)
        (&[19, 7], &[4, 7, 6]),      // shared A
        (&[8, 300], &[300, 12]),     // long K; N = 12 leaves a half block of 8 columns
        (&[2, 7, 12], &[2, 12, 20]), // batched, whole vec4 rows, ragged M and N
    ];

    fn transposed(shape: &[usize]) -> Vec<usize> {
        let mut s = shape.to_vec();
        let r = s.len();
        s.swap(r - 1, r - 2);
        s
    }

    fn check_all(gpu: &Device, variant: KernelVariant) {
        for (i, (a, b)) in SHAPES.iter().enumerate() {
            for (trans_a, trans_b) in [(false, false), (false, true), (true, false), (true, true)] {
                let a_shape = if trans_a { transposed(a) } else { a.to_vec() };
                let b_shape = if trans_b { transposed(b) } else { b.to_vec() };
                check(gpu, &a_shape, &b_shape, trans_a, trans_b, i % 2 == 0, variant, i as u64);
            }
        }
    }

    #[test]
    fn tiled_variant_matches_reference() {
        check_all(gpu(), KernelVariant::Tiled);
    }

    #[test]
    fn blocked_variant_matches_reference() {
        check_all(gpu(), KernelVariant::Blocked);
    }

    #[test]
    fn host_twin_matches_reference() {
        // Natively (gemm), and as both browser builds compute (one thread; three, which split
        // many rows into bands of rows and few rows into bands of columns).
        for host in [host(), portable_host(), portable_one_thread()] {
            check_all(host, KernelVariant::Host);
            // Either side of packing (from 4 rows), several row panels of 64, ragged last
            // blocks, more columns than one group of packed panels (512) with one band of rows
            // and with several sharing each group, one row (decoding).
            let shapes = [(3, 33, 13), (4, 40, 13), (70, 9, 77), (130, 4, 8), (5, 7, 530), (21, 6, 530), (1, 40, 77), (2, 50, 100)];
            for (seed, (m, k, n)) in shapes.into_iter().enumerate() {
                check(host, &[m, k], &[n, k], false, true, true, KernelVariant::Host, 100 + seed as u64);
                check(host, &[m, k], &[k, n], false, false, false, KernelVariant::Host, 200 + seed as u64);
                check(host, &[k, m], &[k, n], true, false, true, KernelVariant::Host, 300 + seed as u64);
            }
        }
    }

    #[test]
    fn oversized_shared_b_is_split_into_aligned_chunks() {
        // A binding limit of 3 rows of Bᵀ forces chunks (of 3 rows, or fewer where the device
        // needs a coarser offset alignment).
        let mut rng = rng(7);
        let (m, k, n) = (5, 64, 23);
        let (av, bv, biasv) = (random_vec(&mut rng, m * k, 1.0), random_vec(&mut rng, n * k, 1.0), random_vec(&mut rng, n, 1.0));
        let want = matmul_reference(&av, &[m, k], &bv, &[n, k], false, true, Some(&biasv));
        for (gpu, variant) in kernel_families() {
            let a = Tensor::from_slice(gpu, &av, &[m, k]).unwrap();
            let b = Tensor::from_slice(gpu, &bv, &[n, k]).unwrap();
            let bias = Tensor::from_slice(gpu, &biasv, &[n]).unwrap();
            let opts = Matmul { trans_b: true, bias: Some(&bias), variant: Some(variant), ..Default::default() };
            let got = block_on(matmul_within(&a, &b, opts, None, 3 * 64 * 4).unwrap().to_vec::<f32>()).unwrap();
            assert_close(&format!("chunked matmul {variant:?}"), &got, &want, TOL, TOL);
        }
    }

    #[test]
    fn accumulate_adds_to_the_existing_product() {
        // The weight-gradient shapes: dW += dYᵀ·X (trans_a) and, for Conv1D, Xᵀ·dY; plus a
        // chunked shared Bᵀ, whose column blocks must each add to their own columns.
        let mut rng = rng(11);
        for (gpu, variant) in kernel_families() {
            for (a_shape, b_shape, trans_a, trans_b, limit) in [
                (&[9, 6][..], &[9, 10][..], true, false, u64::MAX),
                (&[9, 8][..], &[9, 12][..], true, false, u64::MAX),
                (&[5, 16][..], &[16, 12][..], false, false, u64::MAX),
                (&[5, 64][..], &[23, 64][..], false, true, 3 * 64 * 4),
                // One row (the single-row kernels), chunked as a token's LM head can be.
                (&[1, 64][..], &[23, 64][..], false, true, 3 * 64 * 4),
                (&[1, 16][..], &[16, 12][..], false, false, u64::MAX),
            ] {
                let (av, bv) = (random_vec(&mut rng, a_shape.iter().product(), 1.0), random_vec(&mut rng, b_shape.iter().product(), 1.0));
                let product = matmul_reference(&av, a_shape, &bv, b_shape, trans_a, trans_b, None);
                let c0 = random_vec(&mut rng, product.len(), 1.0);
                let out_shape = [if trans_a { a_shape[1] } else { a_shape[0] }, if trans_b { b_shape[0] } else { b_shape[1] }];
                let c = Tensor::from_slice(gpu, &c0, &out_shape).unwrap();
                let a = Tensor::from_slice(gpu, &av, a_shape).unwrap();
                let b = Tensor::from_slice(gpu, &bv, b_shape).unwrap();
                let opts = Matmul { trans_a, trans_b, variant: Some(variant), ..Default::default() };
                matmul_within(&a, &b, opts, Some(&c), limit).unwrap();
                let want: Vec<f32> = c0.iter().zip(&product).map(|(x, y)| x + y).collect();
                let name = format!("accumulated matmul {variant:?} a{a_shape:?} b{b_shape:?} trans ({trans_a}, {trans_b})");
                assert_close(&name, &block_on(c.to_vec::<f32>()).unwrap(), &want, TOL, TOL);
            }
        }
        let a = Tensor::zeros(gpu(), &[2, 3], DType::F32).unwrap();
        let wrong = Tensor::zeros(gpu(), &[3, 3], DType::F32).unwrap();
        let err = matmul_accumulate(&a, &a, Matmul { trans_b: true, ..Default::default() }, &wrong).unwrap_err().to_string();
        assert!(err.contains("accumulator") && err.contains("[2, 2]"), "{err}");
    }

    #[test]
    fn shape_errors_name_the_operands() {
        let gpu = gpu();
        let a = Tensor::zeros(gpu, &[2, 3], DType::F32).unwrap();
        let b = Tensor::zeros(gpu, &[4, 5], DType::F32).unwrap();
        let err = matmul(&a, &b, Matmul::default()).unwrap_err().to_string();
        assert!(err.contains("matmul") && err.contains("[2, 3]") && err.contains("[4, 5]"), "{err}");
        let bias = Tensor::zeros(gpu, &[4], DType::F32).unwrap();
        let ok_b = Tensor::zeros(gpu, &[3, 5], DType::F32).unwrap();
        assert!(matmul(&a, &ok_b, Matmul { bias: Some(&bias), ..Default::default() }).is_err(), "bias of the wrong width");
        let batched = Tensor::zeros(gpu, &[2, 3, 3], DType::F32).unwrap();
        let other = Tensor::zeros(gpu, &[4, 3, 3], DType::F32).unwrap();
        assert!(matmul(&batched, &other, Matmul::default()).is_err(), "mismatched batch");
    }
}
