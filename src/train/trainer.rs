//! The training loop that every front end drives (`sesame train`, tests): a model with its
//! parameters and AdamW state, stepped over a run's batches — micro-batches summed per
//! optimizer step, the schedule's learning rate, the held-out evaluation and the checkpoints
//! on the run's schedule. What a run shows (a progress bar, a log file, a plot) is its front
//! end's, told through [`RunObserver`].

use std::path::Path;

use web_time::Instant;

use crate::error::SesameError;
use crate::error::{arg_err, Result};
use crate::files::Files;
use crate::gpu::Device;
use crate::models::registry::family_of;
use crate::models::training::{Objective, StepOptions, Trainable};
use crate::ops::dropout::DropoutStream;
use crate::ops::elementwise;
use crate::train::checkpoint;
use crate::train::checkpoint::{CheckpointStore, ModelFolder, Settings, TrainerState};
use crate::train::data::BatchSource;
use crate::train::distill;
use crate::train::evaluate::{evaluate, HeldOut};
use crate::train::optim::{Optimizer, ParamPlan};
use crate::train::params::{Parameters, Part};

/// One optimizer step's numbers, as the step log records them.
#[derive(Clone, Debug)]
pub struct StepReport {
    /// The step (0-based).
    pub step: u64,
    /// The mean loss of its micro-batches.
    pub loss: f32,
    pub lr: f32,
    /// The global gradient norm before clipping.
    pub grad_norm: f32,
    pub tokens_per_s: f64,
}

/// A held-out evaluation after step `step`: the mean loss and the objective's metrics, named
/// as the log names them (`eval_perplexity`, `eval_accuracy`, …).
#[derive(Clone, Debug)]
pub struct Evaluation {
    pub step: u64,
    pub loss: f32,
    pub metrics: Vec<(String, f32)>,
}

/// What a run tells its front end as it goes; an error stops the run (its last checkpoint stays).
pub trait RunObserver {
    fn stepped(&mut self, report: &StepReport) -> Result<()>;
    fn evaluated(&mut self, evaluation: &Evaluation) -> Result<()>;
}

/// Each parameter's learning-rate scale and first step, from the settings' discriminative
/// rates and gradual unfreezing over the model's layer groups (a group d below the top learns
/// at lr / factor^d and joins at step d × unfreeze_every), and its frozen weights (never).
fn param_plans(model: &dyn Trainable, params: &Parameters, settings: &Settings, base: Option<&str>) -> Result<Vec<ParamPlan>> {
    if let Some(freeze) = settings.freeze {
        if settings.discriminative_lr.is_some() || settings.unfreeze_every.is_some() {
            return Err(arg_err!("train", "--freeze is for transformers; ULMFiT's discriminative rates and gradual unfreezing plan an AWD-LSTM's layers"));
        }
        let base = base.ok_or_else(|| {
            arg_err!("train", "--freeze {} needs a transformer with a base model to freeze ({} has none)", String::from(freeze), model.architecture())
        })?;
        let plans: Vec<ParamPlan> =
            params.list.iter().map(|p| ParamPlan { unfrozen_at: if freeze.holds(&p.name, base) { u64::MAX } else { 0 }, ..ParamPlan::default() }).collect();
        if plans.iter().all(|plan| plan.unfrozen_at == u64::MAX) {
            return Err(arg_err!("train", "--freeze {} leaves no weight of {} to learn", String::from(freeze), model.architecture()));
        }
        return Ok(plans);
    }
    if settings.discriminative_lr.is_none() && settings.unfreeze_every.is_none() {
        return Ok(vec![ParamPlan::default(); params.list.len()]);
    }
    let factor = settings.discriminative_lr.unwrap_or(1.0);
    if !(factor.is_finite() && factor >= 1.0) || settings.unfreeze_every == Some(0) {
        return Err(arg_err!(
            "train",
            "the discriminative factor must be ≥ 1 and unfreezing at least 1 step apart (got {factor}, {:?})",
            settings.unfreeze_every
        ));
    }
    params
        .list
        .iter()
        .map(|p| {
            let (group, groups) = model.layer_group(&p.name).ok_or_else(|| {
                arg_err!("train", "discriminative rates and gradual unfreezing need a model with layer groups (AWD-LSTM); `{}` has none", p.name)
            })?;
            let depth = groups - 1 - group;
            Ok(ParamPlan { lr_scale: factor.powi(-(depth as i32)), unfrozen_at: settings.unfreeze_every.map_or(0, |every| depth as u64 * every) })
        })
        .collect()
}

/// A model in training: its parameters (values, gradients, AdamW moments), the optimizer,
/// the files its checkpoints copy, and the run's settings.
pub struct Trainer {
    model: Box<dyn Trainable>,
    /// The teacher of a distillation run (`settings.distillation`).
    teacher: Option<Box<dyn Trainable>>,
    params: Parameters,
    folder: ModelFolder,
    settings: Settings,
    optimizer: Optimizer,
}

impl Trainer {
    /// A trainer at step 0; `settings.schedule` and the optimizer's settings are checked here.
    pub fn new(gpu: &Device, model: Box<dyn Trainable>, params: Parameters, folder: ModelFolder, settings: Settings) -> Result<Trainer> {
        if settings.grad_accum == 0 || settings.eval_batches == 0 {
            return Err(arg_err!("train", "--grad-accum and --eval-batches must be at least 1"));
        }
        settings.schedule.validate()?;
        let base = folder.file("config.json").and_then(|config| family_of(config).ok()).and_then(|f| f.training).and_then(|t| t.base_model_prefix());
        let plan = param_plans(model.as_ref(), &params, &settings, base)?;
        let optimizer = Optimizer::new(gpu, settings.optimizer, settings.adamw, &params)?.with_plan(plan)?;
        Ok(Trainer { model, teacher: None, params, folder, settings, optimizer })
    }

    /// The trainer of a distillation run (`settings.distillation`), its student learning from
    /// `teacher`; the pair is checked here.
    pub fn with_teacher(mut self, teacher: Box<dyn Trainable>) -> Result<Trainer> {
        let d = self.settings.distillation.as_ref().ok_or_else(|| arg_err!("distill", "a teacher needs settings.distillation"))?;
        distill::check_pair(teacher.as_ref(), self.model.as_ref(), self.settings.objective, &d.loss)?;
        if d.restrict_to_mask && self.settings.objective != Objective::Mlm {
            return Err(arg_err!(
                "distill",
                "--restrict-to-mask restricts a masked LM's soft targets to its masked positions, not a setting of objective {}",
                self.settings.objective
            ));
        }
        self.teacher = Some(teacher);
        Ok(self)
    }

    /// Continues the run of checkpoint folder `dir` (whose trainer state is `state`): its
    /// settings must be this run's; the optimizer's moments (read from `files`) and step
    /// count are restored.
    pub fn resume(&mut self, files: &dyn Files, dir: &Path, state: &TrainerState) -> Result<()> {
        let differences = self.settings.differences(&state.settings);
        if !differences.is_empty() {
            let run = dir.parent().unwrap_or(dir);
            return Err(arg_err!("train", "--resume needs the settings of the run in {}: {}", run.display(), differences.join("; ")));
        }
        if state.step > self.settings.steps {
            return Err(arg_err!("train", "{}: trainer_state.json says step {}, past the run's {} steps", dir.display(), state.step, self.settings.steps));
        }
        checkpoint::load_moments(files, dir, &mut self.params)?;
        self.optimizer.steps = state.step;
        Ok(())
    }

    /// The next step to take: 0, or the step a resumed run stopped at.
    pub fn next_step(&self) -> u64 {
        self.optimizer.steps
    }

    pub fn model(&self) -> &dyn Trainable {
        self.model.as_ref()
    }

    pub fn params(&self) -> &Parameters {
        &self.params
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The files the model's checkpoints copy (config.json, its tokenizer's).
    pub fn folder(&self) -> &ModelFolder {
        &self.folder
    }

    /// Takes the next optimizer step on `source`'s micro-batches `step × grad_accum ..`: each
    /// one's loss scaled by 1/grad_accum and its gradients summed, then one clipped AdamW (or
    /// LAMB) update at the schedule's learning rate. A loss that is not finite is an error
    /// found before the update: the weights stay those of the last good step.
    pub async fn step(&mut self, source: &dyn BatchSource) -> Result<StepReport> {
        let started = Instant::now();
        let step = self.optimizer.steps;
        let s = &self.settings;
        let lr = s.schedule.lr_at(step);
        self.params.zero_grads();
        let grads = self.params.gradients();
        let mut loss_sum = None;
        let mut tokens = 0;
        for micro in 0..s.grad_accum {
            let index = step * s.grad_accum + micro;
            let batch = source.batch(index)?;
            tokens += batch.tokens();
            let options =
                StepOptions { loss_scale: 1.0 / s.grad_accum as f32, dropout: DropoutStream { seed: s.seed, batch_index: index }, lm_coef: s.lm_coef };
            let loss = match (&s.distillation, &self.teacher) {
                (None, _) => self.model.loss_backward(s.objective, &batch, &grads, &options)?,
                (Some(d), Some(teacher)) => {
                    distill::loss_backward(teacher.as_ref(), self.model.as_ref(), s.objective, &d.loss, d.restrict_to_mask, &batch, &grads, &options)?
                }
                (Some(_), None) => return Err(arg_err!("distill", "a distillation run needs its teacher (Trainer::with_teacher)")),
            };
            loss_sum = Some(match loss_sum {
                None => loss,
                Some(sum) => elementwise::add(&sum, &loss)?,
            });
        }
        let loss_sum = loss_sum.ok_or_else(|| arg_err!("train", "no micro-batches"))?;
        let loss = loss_sum.to_vec::<f32>().await?[0] / s.grad_accum as f32;
        if !loss.is_finite() {
            let kept = if step == 0 { "the weights are the starting ones".to_string() } else { format!("the weights are those after step {}", step - 1) };
            return Err(arg_err!("train", "the loss became {loss} at step {step}; {kept} (a lower learning rate may help)"));
        }
        self.optimizer.step(&self.params, lr)?;
        let grad_norm = self.optimizer.norm_scale.to_vec::<f32>().await?[0];
        Ok(StepReport { step, loss, lr, grad_norm, tokens_per_s: tokens as f64 / started.elapsed().as_secs_f64() })
    }

    /// The model's mean loss and metrics on the first `settings.eval_batches` batches of `held_out`
    /// (of each task's set).
    pub async fn evaluate(&self, held_out: &HeldOut) -> Result<(f32, Vec<(String, f32)>)> {
        evaluate(self.model.as_ref(), self.settings.objective, held_out, self.settings.eval_batches).await
    }

    /// The model's files as trained so far, by their path in its folder: model.safetensors and
    /// the files the folder copies (see [`ModelFolder::saved_files`]).
    pub async fn model_files(&self) -> Result<Vec<(String, Vec<u8>)>> {
        self.folder.saved_files(self.params.to_safetensors(Part::Value).await?)
    }

    /// A checkpoint's files: the model's, the optimizer's moments and trainer_state.json,
    /// from which a run resumes at [`Trainer::next_step`].
    pub async fn checkpoint_files(&self) -> Result<Vec<(String, Vec<u8>)>> {
        let mut files = self.model_files().await?;
        files.push(("optimizer.exp_avg.safetensors".into(), self.params.to_safetensors(Part::FirstMoment).await?));
        files.push(("optimizer.exp_avg_sq.safetensors".into(), self.params.to_safetensors(Part::SecondMoment).await?));
        let state = TrainerState { step: self.next_step(), settings: self.settings.clone() };
        let json = serde_json::to_vec_pretty(&state).map_err(|e| SesameError::Io(format!("trainer state: {e}")))?;
        files.push(("trainer_state.json".into(), json));
        Ok(files)
    }

    /// Runs the remaining steps: evaluating on `held_out` every `settings.eval_every` steps and
    /// after the last, keeping checkpoints in `checkpoints` on its schedule, and the final
    /// model.
    pub async fn run(
        &mut self,
        source: &dyn BatchSource,
        held_out: Option<&HeldOut>,
        checkpoints: &mut dyn CheckpointStore,
        observer: &mut dyn RunObserver,
    ) -> Result<()> {
        let steps = self.settings.steps;
        while self.next_step() < steps {
            let report = self.step(source).await?;
            observer.stepped(&report)?;
            let done = report.step + 1;
            let every = self.settings.eval_every;
            if let Some(held_out) = held_out.filter(|_| every > 0 && (done % every == 0 || done == steps)) {
                let (loss, metrics) = self.evaluate(held_out).await?;
                observer.evaluated(&Evaluation { step: report.step, loss, metrics })?;
            }
            if (checkpoints.every() > 0 && done % checkpoints.every() == 0) || done == steps {
                checkpoints.save_checkpoint(done, &self.checkpoint_files().await?)?;
            }
        }
        checkpoints.save_model(&self.model_files().await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::Disk;
    use crate::gpu::testing::gpu;
    use crate::models::registry::family_of;
    use crate::models::registry::testing::tiny;
    use crate::train::checkpoint::Checkpointing;
    use crate::train::data::TokenStream;
    use crate::train::optim::{AdamWConfig, Decay, Schedule};
    use crate::weights::{Checkpoint, Weights};
    use std::path::PathBuf;

    fn settings() -> Settings {
        let schedule = Schedule { lr: 1e-2, warmup: 2, decay: Decay::Cosine, total_steps: 6, min_lr: 0.0 };
        let adamw = AdamWConfig { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.01, clip_grad_norm: 1.0 };
        Settings { grad_accum: 2, seed: 3, eval_every: 4, eval_batches: 2, ..Settings::new(Objective::Clm, 6, 2, 8, schedule, adamw) }
    }

    /// A tiny GPT-2 in a trainer: fresh (always the same weights), or with the weights of `safetensors`.
    fn trainer(settings: Settings, safetensors: Option<Vec<u8>>) -> Trainer {
        let (config, fresh) = tiny("gpt2", 1, 8, 8, 11, 7);
        let checkpoint = Checkpoint::from_bytes(safetensors.unwrap_or(fresh)).unwrap();
        let weights = Weights::new(gpu(), &checkpoint).recording();
        let model = family_of(&config).unwrap().load_trainable(&config, &weights, Objective::Clm).unwrap();
        let params = Parameters::from_weights(&weights).unwrap();
        Trainer::new(gpu(), model, params, ModelFolder { files: vec![("config.json", config)] }, settings).unwrap()
    }

    fn tokens(seed: u64) -> TokenStream {
        TokenStream::new((0..200).map(|i| (i * 7 % 11) as u32).collect(), seed, 2, 8).unwrap()
    }

    #[derive(Default)]
    struct Seen {
        steps: Vec<StepReport>,
        evaluations: Vec<Evaluation>,
    }

    impl RunObserver for Seen {
        fn stepped(&mut self, report: &StepReport) -> Result<()> {
            self.steps.push(report.clone());
            Ok(())
        }
        fn evaluated(&mut self, evaluation: &Evaluation) -> Result<()> {
            self.evaluations.push(evaluation.clone());
            Ok(())
        }
    }

    fn out_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sesame-trainer-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_run_reports_evaluates_and_checkpoints_on_its_schedule_and_resumes_exactly() {
        let (source, held_out) = (tokens(1), HeldOut::one(Box::new(tokens(2))));
        let out = out_dir("whole");
        let mut whole = trainer(settings(), None);
        let mut seen = Seen::default();
        pollster::block_on(whole.run(&source, Some(&held_out), &mut Checkpointing { out: out.clone(), every: 3, keep: 5 }, &mut seen)).unwrap();
        assert_eq!(seen.steps.iter().map(|r| r.step).collect::<Vec<_>>(), (0..6).collect::<Vec<_>>());
        assert!(seen.steps[5].loss < seen.steps[0].loss, "it learns: {:?}", seen.steps);
        assert_eq!(seen.steps[0].lr, 5e-3, "warmup: half of lr at the first of two steps");
        assert_eq!(seen.evaluations.iter().map(|e| e.step).collect::<Vec<_>>(), [3, 5], "every 4 steps, and after the last");
        assert_eq!(seen.evaluations[1].metrics[0].0, "eval_perplexity");
        let checkpoints: Vec<String> = {
            let mut names: Vec<String> = std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
            names.sort();
            names
        };
        assert_eq!(checkpoints, ["checkpoint-000003", "checkpoint-000006", "config.json", "model.safetensors"]);

        // Stopped after step 3 and resumed from its checkpoint: the same final weights.
        let dir = out.join("checkpoint-000003");
        let state3 = TrainerState::from_json(&std::fs::read(dir.join("trainer_state.json")).unwrap()).unwrap();
        let mut resumed = trainer(settings(), Some(std::fs::read(dir.join("model.safetensors")).unwrap()));
        resumed.resume(&Disk, &dir, &state3).unwrap();
        assert_eq!(resumed.next_step(), 3);
        let resumed_out = out_dir("resumed");
        pollster::block_on(resumed.run(&source, None, &mut Checkpointing { out: resumed_out.clone(), every: 0, keep: 1 }, &mut Seen::default())).unwrap();
        let a = pollster::block_on(whole.params().to_safetensors(Part::Value)).unwrap();
        let b = pollster::block_on(resumed.params().to_safetensors(Part::Value)).unwrap();
        assert!(a == b, "a resumed run ends where the uninterrupted one does");

        // Another run's settings cannot resume it.
        let mut other = trainer(Settings { seed: 4, ..settings() }, None);
        let err = other.resume(&Disk, &dir, &state3).unwrap_err().to_string();
        assert!(err.contains("--resume needs the settings of the run") && err.contains("seed"), "{err}");
        std::fs::remove_dir_all(&out).unwrap();
        std::fs::remove_dir_all(&resumed_out).unwrap();
    }

    #[test]
    fn a_loss_that_is_not_finite_stops_before_the_update_and_keeps_the_last_good_weights() {
        // A learning rate of 1e30 throws the weights so far that the next loss overflows.
        let schedule = Schedule { lr: 1e30, warmup: 0, decay: Decay::Constant, total_steps: 4, min_lr: 0.0 };
        let mut settings = settings();
        settings.schedule = schedule;
        settings.adamw.clip_grad_norm = 0.0;
        let mut trainer = trainer(settings, None);
        let source = tokens(1);
        let mut failure = None;
        let mut good = Vec::new();
        for _ in 0..4 {
            good = pollster::block_on(trainer.params().to_safetensors(Part::Value)).unwrap();
            if let Err(e) = pollster::block_on(trainer.step(&source)) {
                failure = Some(e.to_string());
                break;
            }
        }
        let err = failure.expect("the loss overflows within 4 steps");
        let step = trainer.next_step();
        assert!(step > 0 && err.contains(&format!("at step {step}")) && err.contains(&format!("after step {}", step - 1)), "{err}");
        assert!(pollster::block_on(trainer.params().to_safetensors(Part::Value)).unwrap() == good, "the failed step changed no weight");
    }
}
