//! GPT-2 training steps with random weights (native only): the Trainer's step as `sesame
//! train --objective clm` takes it (forward, backward, AdamW, the loss read back), timed at a
//! model shape without a checkpoint or data; `scripts/bench-train-pytorch.py` times PyTorch on the same
//! shape.

use std::time::Instant;

use super::BenchRecord;
use sesame::error::{Result, SesameError};
use sesame::gpu::Device;
use sesame::models::registry::family;
use sesame::models::training::fresh::{FreshShape, FreshVocabulary};
use sesame::models::training::Objective;
use sesame::train::checkpoint::{ModelFolder, Settings};
use sesame::train::data::TokenStream;
use sesame::train::optim::{AdamWConfig, Decay, Schedule};
use sesame::train::params::Parameters;
use sesame::train::trainer::Trainer;
use sesame::weights::{Checkpoint, Weights};

/// A GPT-2 of `shape` (GPT-2 124M: 12 layers, 12 heads, 768 wide, context 1024, vocabulary
/// 50,257) trained on batches of `batch` random sequences of its full context.
pub struct TrainBench<'a> {
    pub gpu: &'a Device,
    pub shape: FreshShape,
    pub vocab: usize,
    pub batch: usize,
    /// Timed steps, after one untimed.
    pub steps: usize,
}

impl TrainBench<'_> {
    pub fn run(&self, mut emit: impl FnMut(BenchRecord)) -> Result<()> {
        let (s, vocab) = (&self.shape, self.vocab);
        if self.batch == 0 || self.steps == 0 {
            return Err(SesameError::InvalidArgument {
                op: "bench",
                message: "the training benchmark times a GPT-2 with a positive batch and number of steps".into(),
            });
        }
        let gpt2 = family("gpt2")?;
        let folder = gpt2.fresh(s, &FreshVocabulary { size: vocab, ..FreshVocabulary::default() }, 0)?;
        let file =
            |name: &str| folder.file(name).ok_or_else(|| SesameError::InvalidArgument { op: "bench", message: format!("the fresh GPT-2 has no {name}") });
        let checkpoint = Checkpoint::from_bytes(file("model.safetensors")?.to_vec())?;
        let weights = Weights::new(self.gpu, &checkpoint).recording();
        let model = gpt2.load_trainable(file("config.json")?, &weights, Objective::Clm)?;
        let params = Parameters::from_weights(&weights)?;
        let numel = params.numel();
        let steps = self.steps as u64 + 1;
        let schedule = Schedule { lr: 3e-4, warmup: 0, decay: Decay::Constant, total_steps: steps, min_lr: 0.0 };
        let adamw = AdamWConfig { beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0.1, clip_grad_norm: 1.0 };
        let settings = Settings::new(Objective::Clm, steps, self.batch, s.context, schedule, adamw);
        let mut trainer = Trainer::new(self.gpu, model, params, ModelFolder { files: Vec::new() }, settings)?;
        // Windows of a stream of arbitrary ids, a batch of full contexts per step.
        let ids: Vec<u32> = (0..4 * self.batch * s.context).map(|i| (i.wrapping_mul(2654435761) % vocab) as u32).collect();
        let source = TokenStream::new(ids, 0, self.batch, s.context)?;
        // Each step reads its loss back, so it waits for the GPU, as a training run does.
        pollster::block_on(trainer.step(&source))?;
        let started = Instant::now();
        for _ in 0..self.steps {
            pollster::block_on(trainer.step(&source))?;
        }
        let ms = started.elapsed().as_secs_f64() * 1e3 / self.steps as f64;
        let shape = format!(
            "{} layers, {} heads, {} wide, vocabulary {}, {} parameters; batch {} × context {}, fp32, AdamW",
            s.layers, s.heads, s.width, vocab, numel, self.batch, s.context
        );
        let mut record = BenchRecord::new(self.gpu, self.gpu.kernel_variant(), "gpt2_train_step", shape, ms);
        record.per_second = Some((self.batch * s.context) as f64 / (ms / 1e3));
        emit(record);
        Ok(())
    }
}
