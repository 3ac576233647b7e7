//! `sesame bench elmo`: ELMo forward passes with random weights at the published shape
//! (2x4096_512_2048cnn_2xhighway: 4096 cells, 512 projection, 2048 CNN filters) and the small
//! release shape (2x1024_128_2048cnn_1xhighway), on 20-word sentences, batch 1 and 32. A pass
//! ends with the mixed representation read back, as a caller would.

use super::record::{time_ms, BenchRecord};
use sesame::error::Result;
use sesame::gpu::Device;
use sesame::models::elmo::{ElmoModel, ElmoOptions};
use sesame::weights::Weights;

const CNN_2048: &str = r#""activation": "relu", "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
    "embedding": {"dim": 16}, "n_characters": 262, "max_characters_per_token": 50"#;

/// (name, options.json) of the benchmarked shapes.
fn shapes() -> [(&'static str, String); 2] {
    let options = |cells: usize, proj: usize, highways: usize| {
        format!(
            r#"{{"lstm": {{"use_skip_connections": true, "projection_dim": {proj}, "cell_clip": 3, "proj_clip": 3, "dim": {cells}, "n_layers": 2}},
            "char_cnn": {{{CNN_2048}, "n_highway": {highways}}}}}"#
        )
    };
    [("elmo_original", options(4096, 512, 2)), ("elmo_small", options(1024, 128, 1))]
}

/// Words per benchmarked sentence.
const WORDS: usize = 20;

pub struct ElmoBench<'a> {
    pub gpu: &'a Device,
    pub budget_ms: f64,
    /// Run only the shapes whose name contains this (elmo_original, elmo_small).
    pub only: Option<String>,
}

impl ElmoBench<'_> {
    fn forward(&self, name: &str, model: &ElmoModel, batch: usize) -> Result<BenchRecord> {
        // Words of varied lengths (their characters do not matter for timing).
        let sentence: Vec<String> = (0..WORDS).map(|i| "sesamesesame"[..3 + i % 9].to_string()).collect();
        let sentences = vec![sentence; batch];
        let ms = time_ms(self.gpu, self.budget_ms, || {
            let out = model.forward(&sentences)?;
            pollster::block_on(out.representations[0].to_vec::<f32>()).map(drop)
        })?;
        let lstm = &model.options.lstm;
        let shape = format!("{} cells, {} projection, batch {batch} x {WORDS} words", lstm.dim, lstm.projection_dim);
        Ok(BenchRecord {
            per_second: Some((batch * WORDS) as f64 * 1e3 / ms),
            sentences_per_second: Some(batch as f64 * 1e3 / ms),
            ..BenchRecord::new(self.gpu, self.gpu.kernel_variant(), name, shape, ms)
        })
    }

    /// Runs the benchmarks, handing each record to `emit` as soon as it is measured.
    pub fn run(&self, mut emit: impl FnMut(BenchRecord)) -> Result<()> {
        for (name, options) in shapes() {
            if self.only.as_deref().is_some_and(|only| !name.contains(only)) {
                continue;
            }
            let model = ElmoModel::load(ElmoOptions::from_json(options.as_bytes())?, &Weights::random(self.gpu))?;
            for batch in [1, 32] {
                emit(self.forward(name, &model, batch)?);
            }
        }
        Ok(())
    }
}
