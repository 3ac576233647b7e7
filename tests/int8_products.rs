//! The host device's q8 product — A quantized in blocks of 32, W's codes multiplied by A's,
//! exact int32 sums per block — against a plain-loop reference written here. The same test
//! runs natively (AVX2 where the CPU has it) and in the wasm build under node (wasm SIMD's
//! `i32x4.dot_i16x8_s`; scripts/test.sh runs both): one row of A (a decoded token) up to 31,
//! the most the integer product takes; N past a thread's task, N and K past whole groups.

use sesame::ops::quantized::{matmul_quantized, QuantizedMatrix};
use sesame::quantize::{QuantFormat, Quantized, BLOCK};
use sesame::{Device, Tensor};
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

/// Values in −1..1 from a fixed sequence (no random generator in the wasm build's tests).
fn values(count: usize, seed: usize) -> Vec<f32> {
    (0..count).map(|i| ((i * 7919 + seed * 104_729) % 2001) as f32 / 1000.0 - 1.0).collect()
}

/// C = A·Wᵀ + bias as the host computes it, in f64 from exact integer sums: A's rows
/// quantized in blocks (scale max |block| / 127, codes rounded to even).
fn reference(a: &[f32], w: &Quantized, bias: &[f32]) -> Vec<f32> {
    let (k, blocks) = (w.cols, w.cols.div_ceil(BLOCK));
    let w_codes: Vec<i64> = w.words.iter().flat_map(|word| word.to_le_bytes().map(|b| b as i8 as i64)).collect();
    let mut c = Vec::new();
    for row in a.chunks_exact(k) {
        let mut codes = vec![0i64; blocks * BLOCK];
        let mut scales = vec![0f32; blocks];
        for (b, block) in row.chunks(BLOCK).enumerate() {
            scales[b] = block.iter().fold(0f32, |m, v| m.max(v.abs())) / 127.0;
            for (i, v) in block.iter().enumerate() {
                codes[b * BLOCK + i] = (v / scales[b]).round_ties_even() as i64;
            }
        }
        for (j, bias) in bias.iter().enumerate() {
            let mut sum = *bias as f64;
            for (b, &scale) in scales.iter().enumerate() {
                let dot: i64 = (0..BLOCK).map(|i| codes[b * BLOCK + i] * w_codes[(j * blocks + b) * BLOCK + i]).sum();
                sum += scale as f64 * w.scales[j * blocks + b] as f64 * dot as f64;
            }
            c.push(sum as f32);
        }
    }
    c
}

#[test]
fn q8_products_on_the_host_match_the_integer_reference() {
    let device = Device::host();
    for (seed, (m, n, k)) in [(1, 9, 40), (5, 70, 64), (31, 17, 100), (8, 130, 384)].into_iter().enumerate() {
        let (a, weights, bias) = (values(m * k, seed), values(n * k, seed + 10), values(n, seed + 20));
        let w = Quantized::quantize(QuantFormat::Q8, &weights, n, k).unwrap();
        let want = reference(&a, &w, &bias);
        let upload = QuantizedMatrix::upload(&device, &w).unwrap();
        let x = Tensor::from_slice(&device, &a, &[m, k]).unwrap();
        let b = Tensor::from_slice(&device, &bias, &[n]).unwrap();
        let got = matmul_quantized(&x, &upload, Some(&b)).unwrap().host_values::<f32>().unwrap();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!((g - w).abs() <= 1e-4 * (1.0 + w.abs()), "{m}×{n}×{k}: element {i} is {g}, the reference {w}");
        }
    }
}
