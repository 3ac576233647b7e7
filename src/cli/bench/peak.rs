//! `sesame bench kernels --only peak`: the most arithmetic this CPU does with the instructions
//! the host kernels' inner loops use — the ceiling of the roofline that BENCHMARKS.md sets each
//! GEMM against. Each loop keeps independent accumulators in registers (no loads, no stores),
//! enough of them to cover the instruction's latency, on every thread of the host device at
//! once; the time is the best of the rounds that fit in the time budget.

use std::time::Instant;

/// One instruction route: its name, the multiply-adds one step of a chain does, and the loop.
#[derive(Clone, Copy)]
pub struct PeakLoop {
    pub op: &'static str,
    pub what: &'static str,
    pub multiply_adds_per_step: usize,
    /// Whether this CPU has the loop's instructions.
    supported: fn() -> bool,
    /// Runs `iterations` steps of every chain; the result only keeps the work observable.
    run: fn(usize) -> i64,
}

/// Independent accumulator chains per loop: FMA's latency of 4 cycles times 2 pipes needs 8;
/// 12 leave headroom and fit AVX2's 16 registers beside the loop's constants.
pub const CHAINS: usize = 12;

impl PeakLoop {
    /// The loops this CPU can run (x86-64's only: other instruction sets' loops are not
    /// written yet).
    pub fn available() -> Vec<PeakLoop> {
        #[cfg(target_arch = "x86_64")]
        return x86::LOOPS.into_iter().filter(|route| (route.supported)()).collect();
        #[cfg(not(target_arch = "x86_64"))]
        Vec::new()
    }

    /// The best round's milliseconds and its multiply-adds (all threads' together), over the
    /// rounds that fit in about `budget_ms` with `threads` threads at once.
    pub fn measure(&self, threads: usize, budget_ms: f64) -> (f64, f64) {
        let round = |iterations: usize| {
            let start = Instant::now();
            std::thread::scope(|scope| {
                for _ in 0..threads {
                    scope.spawn(|| std::hint::black_box((self.run)(std::hint::black_box(iterations))));
                }
            });
            start.elapsed().as_secs_f64()
        };
        // About 20 ms a round, sized from a short first one.
        let trial = 100_000;
        let iterations = ((0.02 / round(trial).max(1e-6)) * trial as f64).max(trial as f64) as usize;
        let work = (threads * iterations * CHAINS * self.multiply_adds_per_step) as f64;
        let deadline = Instant::now() + std::time::Duration::from_secs_f64(budget_ms / 1e3);
        let mut best = f64::INFINITY;
        loop {
            best = best.min(round(iterations));
            if Instant::now() >= deadline {
                return (best * 1e3, work);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::hint::black_box;

    use super::{PeakLoop, CHAINS};

    fn avx2() -> bool {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }

    // SAFETY (each loop's call): `PeakLoop::available` lists a loop only where its `supported`
    // finds the instructions it enables.
    pub(super) const LOOPS: [PeakLoop; 6] = [
        PeakLoop {
            op: "peak_f32_fma",
            what: "vfmadd231ps on 8 floats (the f32 GEMM's step)",
            multiply_adds_per_step: 8,
            supported: avx2,
            run: |n| unsafe { fma_f32(n) },
        },
        PeakLoop {
            op: "peak_i16_madd",
            what: "vpmaddwd + vpaddd on 16 pairs of i16 (the integer tiles' step)",
            multiply_adds_per_step: 16,
            supported: avx2,
            run: |n| unsafe { madd_i16(n) },
        },
        PeakLoop {
            op: "peak_i8_maddubs",
            what: "vpmaddubsw + vpmaddwd + vpaddd on 32 pairs of bytes (the few-row integer product's step)",
            multiply_adds_per_step: 32,
            supported: avx2,
            run: |n| unsafe { maddubs_i8(n) },
        },
        PeakLoop {
            op: "peak_f32_fma_512",
            what: "vfmadd231ps on 16 floats (gemm's AVX-512 step)",
            multiply_adds_per_step: 16,
            supported: || is_x86_feature_detected!("avx512f"),
            run: |n| unsafe { fma_f32_512(n) },
        },
        PeakLoop {
            op: "peak_i8_vnni_256",
            what: "vpdpbusd on 32 pairs of bytes (AVX-VNNI; no kernel uses it yet)",
            multiply_adds_per_step: 32,
            supported: || avx2() && is_x86_feature_detected!("avxvnni"),
            run: |n| unsafe { vnni_i8_256(n) },
        },
        PeakLoop {
            op: "peak_i8_vnni_512",
            what: "vpdpbusd on 64 pairs of bytes (AVX-512 VNNI; no kernel uses it yet)",
            multiply_adds_per_step: 64,
            supported: || is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vnni"),
            run: |n| unsafe { vnni_i8_512(n) },
        },
    ];

    #[target_feature(enable = "avx2,fma")]
    fn fma_f32(iterations: usize) -> i64 {
        let (a, b) = (_mm256_set1_ps(black_box(0.999)), _mm256_set1_ps(black_box(1e-3)));
        let mut acc: [__m256; CHAINS] = std::array::from_fn(|chain| _mm256_set1_ps(black_box(chain as f32)));
        for _ in 0..iterations {
            for chain in &mut acc {
                *chain = _mm256_fmadd_ps(*chain, a, b);
            }
        }
        let total = acc.iter().fold(_mm256_setzero_ps(), |sum, &chain| _mm256_add_ps(sum, chain));
        _mm256_cvtss_f32(total) as i64
    }

    // Each chain feeds its own multiply (as a tile's sums feed its adds), which keeps the
    // compiler from hoisting a multiply of constants out of the loop.
    #[target_feature(enable = "avx2")]
    fn madd_i16(iterations: usize) -> i64 {
        let w = _mm256_set1_epi16(black_box(3));
        let mut acc = chains();
        for _ in 0..iterations {
            for chain in &mut acc {
                *chain = _mm256_add_epi32(_mm256_madd_epi16(*chain, w), *chain);
            }
        }
        lane_sum(acc)
    }

    #[target_feature(enable = "avx2")]
    fn maddubs_i8(iterations: usize) -> i64 {
        let (w, ones) = (_mm256_set1_epi8(black_box(3)), _mm256_set1_epi16(1));
        let mut acc = chains();
        for _ in 0..iterations {
            for chain in &mut acc {
                let pairs = _mm256_maddubs_epi16(*chain, w);
                *chain = _mm256_add_epi32(_mm256_madd_epi16(pairs, ones), *chain);
            }
        }
        lane_sum(acc)
    }

    #[target_feature(enable = "avx512f")]
    fn fma_f32_512(iterations: usize) -> i64 {
        let (a, b) = (_mm512_set1_ps(black_box(0.999)), _mm512_set1_ps(black_box(1e-3)));
        let mut acc: [__m512; CHAINS] = std::array::from_fn(|chain| _mm512_set1_ps(black_box(chain as f32)));
        for _ in 0..iterations {
            for chain in &mut acc {
                *chain = _mm512_fmadd_ps(*chain, a, b);
            }
        }
        _mm512_reduce_add_ps(acc.iter().fold(_mm512_setzero_ps(), |sum, &chain| _mm512_add_ps(sum, chain))) as i64
    }

    // As `madd_i16`, each chain feeds its own multiply.
    #[target_feature(enable = "avx2,avxvnni")]
    fn vnni_i8_256(iterations: usize) -> i64 {
        let w = _mm256_set1_epi8(black_box(3));
        let mut acc = chains();
        for _ in 0..iterations {
            for chain in &mut acc {
                *chain = _mm256_dpbusd_avx_epi32(*chain, *chain, w);
            }
        }
        lane_sum(acc)
    }

    #[target_feature(enable = "avx512f,avx512vnni")]
    fn vnni_i8_512(iterations: usize) -> i64 {
        let w = _mm512_set1_epi8(black_box(3));
        let mut acc: [__m512i; CHAINS] = std::array::from_fn(|chain| _mm512_set1_epi32(black_box(chain as i32 + 1)));
        for _ in 0..iterations {
            for chain in &mut acc {
                *chain = _mm512_dpbusd_epi32(*chain, *chain, w);
            }
        }
        _mm512_reduce_add_epi32(acc.iter().fold(_mm512_setzero_si512(), |sum, &chain| _mm512_add_epi32(sum, chain))) as i64
    }

    /// Accumulators the compiler cannot know (a start it could fold, as a fixed point of the
    /// step, would leave no loop to time).
    #[target_feature(enable = "avx2")]
    fn chains() -> [__m256i; CHAINS] {
        std::array::from_fn(|chain| _mm256_set1_epi32(black_box(chain as i32 + 1)))
    }

    #[target_feature(enable = "avx2")]
    fn lane_sum(acc: [__m256i; CHAINS]) -> i64 {
        let total = acc.iter().fold(_mm256_setzero_si256(), |sum, &chain| _mm256_add_epi32(sum, chain));
        _mm256_extract_epi32::<0>(total) as i64
    }
}
