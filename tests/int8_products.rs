//! The host device's q8 and q4 products — A quantized in blocks of 32, W's codes multiplied
//! by A's, exact int32 sums per block — against their plain-loop reference
//! (`Quantized::integer_product_reference`). The same test runs natively (AVX2 where the CPU
//! has it), in the wasm build under node (wasm SIMD's `i32x4.dot_i16x8_s`) and in a wasm build
//! with relaxed SIMD in Chromium (the tiles of `i32x4.relaxed_dot_i8x16_i7x16_add_s` from 12
//! rows where the CPU has VNNI; scripts/test.sh runs all three): one row of A (a decoded token) up to
//! 31, the most the product of few rows takes (natively with AVX-512 VNNI, and with relaxed
//! SIMD, the tiles take over from 12 rows), and 70, a batch for the tiles (natively:
//! `vpdpbusd` with A in i8 codes with AVX-512 VNNI, `vpmaddwd` with A in i16 codes with AVX2
//! alone); N past a thread's task, N and K past whole groups.

use sesame::ops::quantized::{host_activation_codes, matmul_quantized, QuantizedMatrix};
use sesame::quantize::{QuantFormat, Quantized};
use sesame::{Device, Tensor};
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

/// Values in −1..1 from a fixed sequence (no random generator in the wasm build's tests).
fn values(count: usize, seed: usize) -> Vec<f32> {
    (0..count).map(|i| ((i * 7919 + seed * 104_729) % 2001) as f32 / 1000.0 - 1.0).collect()
}

#[test]
fn q8_and_q4_products_on_the_host_match_the_integer_reference() {
    let device = Device::host();
    // A batch of 70 rows where the build multiplies batches in integers (the library says how:
    // natively with AVX-512 VNNI or AVX2, in wasm with relaxed SIMD); elsewhere (plain wasm
    // SIMD, AVX-512 without VNNI) it is f32 over decoded panels, which ops::quantized's tests
    // cover.
    let batch = host_activation_codes(70).is_some().then_some((70, 20, 72));
    let shapes = [(1, 9, 40), (5, 70, 64), (31, 17, 100), (8, 130, 384)].into_iter().chain(batch);
    for (seed, ((m, n, k), format)) in shapes.flat_map(|shape| [(shape, QuantFormat::Q8), (shape, QuantFormat::Q4)]).enumerate() {
        let (a, weights, bias) = (values(m * k, seed), values(n * k, seed + 10), values(n, seed + 20));
        let w = Quantized::quantize(format, &weights, n, k).unwrap();
        let codes = host_activation_codes(m).expect("few rows are multiplied in integers");
        let want = w.integer_product_reference(&a, Some(&bias), codes).unwrap();
        let upload = QuantizedMatrix::upload(&device, &w).unwrap();
        let x = Tensor::from_slice(&device, &a, &[m, k]).unwrap();
        let b = Tensor::from_slice(&device, &bias, &[n]).unwrap();
        let got = matmul_quantized(&x, &upload, Some(&b)).unwrap().host_values::<f32>().unwrap();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!((g - w).abs() <= 1e-4 * (1.0 + w.abs()), "{} {m}×{n}×{k}: element {i} is {g}, the reference {w}", format.name());
        }
    }
}
