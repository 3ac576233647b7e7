//! `sesame bench kernels`: times each kernel at model-sized shapes.

use super::peak::{PeakLoop, CHAINS};
use super::record::{random, random_values, time_ms, BenchRecord};
use sesame::error::Result;
use sesame::gpu::{Device, KernelVariant};
use sesame::ops::{attention, elementwise, lstm, matmul, quantized};
use sesame::quantize::{QuantFormat, Quantized};

pub struct KernelBench<'a> {
    pub gpu: &'a Device,
    pub variant: KernelVariant,
    pub budget_ms: f64,
    /// Square matmul sizes to run.
    pub square_sizes: Vec<usize>,
    /// Run only the benchmarks whose op name contains this.
    pub only: Option<String>,
}

impl KernelBench<'_> {
    fn record(&self, op: &str, shape: String, ms: f64, flops: Option<f64>, bytes: Option<f64>) -> BenchRecord {
        BenchRecord { gflops: flops.map(|f| f / ms / 1e6), gbps: bytes.map(|b| b / ms / 1e6), ..BenchRecord::new(self.gpu, self.variant, op, shape, ms) }
    }

    fn matmul(&self, m: usize, k: usize, n: usize, trans_b: bool) -> Result<BenchRecord> {
        let a = random(self.gpu, &[m, k])?;
        let b = random(self.gpu, &if trans_b { [n, k] } else { [k, n] })?;
        let opts = matmul::Matmul { trans_b, variant: Some(self.variant), ..Default::default() };
        let ms = time_ms(self.gpu, self.budget_ms, || matmul::matmul(&a, &b, opts).map(drop))?;
        let shape = format!("{m}x{k}x{n}{}", if trans_b { " (B transposed)" } else { "" });
        Ok(self.record("matmul", shape, ms, Some(2.0 * (m * n * k) as f64), None))
    }

    /// x [M, K] · Wᵀ with W [N, K] stored in `format` (as `--dtype` loads a model's matrices):
    /// operations counted as 2·M·N·K, bytes as the stored weights (codes and scales).
    fn matmul_quantized(&self, format: QuantFormat, m: usize, k: usize, n: usize) -> Result<BenchRecord> {
        let x = random(self.gpu, &[m, k])?;
        let stored = Quantized::quantize(format, &random_values(n * k), n, k)?;
        let w = quantized::QuantizedMatrix::upload(self.gpu, &stored)?;
        let ms = time_ms(self.gpu, self.budget_ms, || quantized::matmul_quantized(&x, &w, None).map(drop))?;
        let op = format!("matmul_{}", format.name());
        Ok(self.record(&op, format!("{m}x{k}x{n} (W [N, K])"), ms, Some(2.0 * (m * n * k) as f64), Some(stored.bytes() as f64)))
    }

    /// Self-attention over `tk` keys for `tq` queries (the last ones: tq = 1 is one decoding
    /// step against a KV cache of tk entries).
    fn attention(&self, heads: usize, tq: usize, tk: usize, head_dim: usize) -> Result<BenchRecord> {
        let width = heads * head_dim;
        let q = random(self.gpu, &[1, tq, width])?;
        let k = random(self.gpu, &[1, tk, width])?;
        let v = random(self.gpu, &[1, tk, width])?;
        let args = attention::Attention { heads, causal: tq == 1, ..Default::default() };
        let ms = time_ms(self.gpu, self.budget_ms, || attention::attention(&q, &k, &v, &args).map(drop))?;
        let flops = 4.0 * (heads * tq * tk * head_dim) as f64;
        let (op, shape) = if tq == 1 {
            ("attention_decode", format!("heads {heads}, 1 query, {tk} cached keys, head_dim {head_dim}"))
        } else {
            ("attention", format!("heads {heads}, seq {tk}, head_dim {head_dim}"))
        };
        Ok(self.record(op, shape, ms, Some(flops), None))
    }

    fn lstm_step(&self, batch: usize, cells: usize, projection: usize) -> Result<BenchRecord> {
        let steps = 20;
        let gates = random(self.gpu, &[batch, steps, 4 * cells])?;
        let weights = lstm::LstmWeights::new(
            self.gpu,
            &random_values(4 * cells * projection),
            &random_values(4 * cells),
            Some(&random_values(projection * cells)),
            cells,
            projection,
        )?;
        let lengths = vec![steps; batch];
        let cfg = lstm::LstmConfig { cell_clip: Some(3.0), proj_clip: Some(3.0), reverse: false };
        let ms = time_ms(self.gpu, self.budget_ms, || lstm::lstm_sequence(&gates, &lengths, &weights, &cfg).map(drop))?;
        // Per step: h·W_hh (4c × p) and the projection (p × c), multiply-adds.
        let flops = 2.0 * (batch * (4 * cells * projection + projection * cells)) as f64;
        let weight_bytes = 4.0 * (4 * cells * projection + projection * cells) as f64;
        let per_step = ms / steps as f64;
        let mut rec = self.record("lstm_step", format!("batch {batch}, cells {cells}, projection {projection}"), per_step, Some(flops), Some(weight_bytes));
        rec.gbps = Some(weight_bytes / per_step / 1e6);
        Ok(rec)
    }

    /// The arithmetic peak of the instructions behind the host device's kernels, on its threads:
    /// operations counted as 2 a multiply-add, as the GEMMs' are.
    fn peak(&self, threads: usize, route: &PeakLoop) -> BenchRecord {
        let (ms, multiply_adds) = route.measure(threads, self.budget_ms);
        let shape = format!("{CHAINS} chains of {}, {threads} threads", route.what);
        self.record(route.op, shape, ms, Some(2.0 * multiply_adds), None)
    }

    /// The cost of one small dispatch (256 elements): what a model pays per kernel launch.
    fn dispatch_overhead(&self) -> Result<BenchRecord> {
        let x = random(self.gpu, &[256])?;
        let ms = time_ms(self.gpu, self.budget_ms, || elementwise::unary(&x, elementwise::Unary::Relu).map(drop))?;
        Ok(self.record("dispatch", "relu over 256 elements".into(), ms, None, Some(2.0 * 256.0 * 4.0)))
    }

    /// Runs the benchmarks (those named like `only`), handing each record to `emit` as soon
    /// as it is measured.
    pub fn run(&self, mut emit: impl FnMut(BenchRecord)) -> Result<()> {
        let wanted = |op: &str| self.only.as_deref().is_none_or(|only| op.contains(only));
        // The CPU's peaks set the host device's GEMMs in proportion (BENCHMARKS.md's roofline).
        if let Some(threads) = self.gpu.host_threads() {
            for route in PeakLoop::available().iter().filter(|route| wanted(route.op)) {
                emit(self.peak(threads, route));
            }
        }
        if wanted("dispatch") {
            emit(self.dispatch_overhead()?);
        }
        if wanted("matmul") {
            for &s in &self.square_sizes {
                emit(self.matmul(s, s, s, false)?);
            }
            // Model-shaped: BERT-base projections and FFN at 128 tokens, GPT-2's LM head for one
            // token, MiniLM's FFN over a batch of 32 × 128 tokens.
            emit(self.matmul(128, 768, 768, true)?);
            emit(self.matmul(128, 768, 3072, true)?);
            emit(self.matmul(1, 768, 50257, true)?);
            emit(self.matmul(4096, 384, 1536, true)?);
        }
        // The same matrices stored quantized: one row (a decoded token), short inputs (8 rows,
        // and 31 and 32 either side of where the host's product of few rows hands over to its
        // tiles), 128 tokens and a batch.
        for format in [QuantFormat::Q8, QuantFormat::Q4] {
            if wanted(&format!("matmul_{}", format.name())) {
                for (m, k, n) in [(1, 768, 3072), (1, 768, 50257), (8, 768, 3072), (31, 768, 3072), (32, 768, 3072), (128, 768, 3072), (4096, 384, 1536)] {
                    emit(self.matmul_quantized(format, m, k, n)?);
                }
            }
        }
        if wanted("attention") {
            emit(self.attention(12, 128, 128, 64)?);
            emit(self.attention(12, 512, 512, 64)?);
            emit(self.attention(12, 1, 512, 64)?);
        }
        if wanted("lstm") {
            emit(self.lstm_step(1, 4096, 512)?);
            emit(self.lstm_step(32, 4096, 512)?);
        }
        Ok(())
    }
}
