//! GPT-2 training steps with random weights (native only): what `sesame train --objective
//! clm` does per step (forward, backward, AdamW, the loss read back), timed at a model shape
//! without a checkpoint or data; `scripts/bench-train-pytorch.py` times PyTorch on the same
//! shape.

use std::time::Instant;

use super::BenchRecord;
use crate::error::{arg_err, Result};
use crate::gpu::Gpu;
use crate::models::auto::AutoModel;
use crate::ops::dropout::DropoutStream;
use crate::train::data::Batch;
use crate::train::objective::{Objective, StepOptions, TrainModel};
use crate::train::optim::{AdamWConfig, Optimizer};
use crate::train::params::Parameters;
use crate::train::scratch::{Arch, ModelShape};
use crate::weights::Weights;

/// A GPT-2 of `shape` (GPT-2 124M: 12 layers, 12 heads, 768 wide, context 1024, vocabulary
/// 50,257) trained on batches of `batch` random sequences of its full context.
pub struct TrainBench<'a> {
    pub gpu: &'a Gpu,
    pub shape: ModelShape,
    pub batch: usize,
    /// Timed steps, after one untimed.
    pub steps: usize,
}

impl TrainBench<'_> {
    pub fn run(&self, mut emit: impl FnMut(BenchRecord)) -> Result<()> {
        let s = &self.shape;
        if s.arch != Arch::Gpt2 || self.batch == 0 || self.steps == 0 {
            return Err(arg_err!("bench", "the training benchmark times a GPT-2 with a positive batch and number of steps"));
        }
        let weights = Weights::random(self.gpu).recording();
        let model = TrainModel::Transformer(AutoModel::load(&s.config_json(None, None)?, &weights)?);
        let params = Parameters::from_weights(&weights)?;
        let config = AdamWConfig { beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0.1, clip_grad_norm: 1.0 };
        let mut optimizer = Optimizer::new(self.gpu, config, &params)?;
        let grads = params.gradients();
        let tokens = self.batch * s.context;
        let input_ids: Vec<u32> = (0..tokens).map(|i| (i.wrapping_mul(2654435761) % s.vocab) as u32).collect();
        let batch = Batch { labels: input_ids.iter().map(|&id| id as i64).collect(), input_ids, batch: self.batch, seq: s.context, ..Default::default() };
        let mut step = |index: u64| -> Result<()> {
            params.zero_grads();
            let options = StepOptions { loss_scale: 1.0, dropout: DropoutStream { seed: 0, batch_index: index }, lm_coef: 0.0 };
            let loss = Objective::Clm.loss_backward(&model, &batch, &grads, &options)?;
            optimizer.step(&params, 3e-4)?;
            // Reading the loss back waits for the step, as a training run does.
            let loss = pollster::block_on(loss.to_vec::<f32>())?[0];
            if !loss.is_finite() {
                return Err(arg_err!("bench", "the loss became {loss}"));
            }
            Ok(())
        };
        step(0)?;
        let started = Instant::now();
        for index in 1..=self.steps as u64 {
            step(index)?;
        }
        let ms = started.elapsed().as_secs_f64() * 1e3 / self.steps as f64;
        let shape = format!(
            "{} layers, {} heads, {} wide, vocabulary {}, {} parameters; batch {} × context {}, fp32, AdamW",
            s.layers,
            s.heads,
            s.width,
            s.vocab,
            params.numel(),
            self.batch,
            s.context
        );
        let mut record = BenchRecord::new(self.gpu, self.gpu.kernel_variant(), "gpt2_train_step", shape, ms);
        record.per_second = Some(tokens as f64 / (ms / 1e3));
        emit(record);
        Ok(())
    }
}
