//! AdamW over a model's [`Parameters`] with PyTorch's semantics, or LAMB (You et al. 2019),
//! with a learning-rate schedule (linear warmup, then constant, linear or cosine decay; or
//! ULMFiT's slanted triangle) and clipping by global norm. A [`ParamPlan`] per parameter
//! scales its learning rate (ULMFiT's discriminative fine-tuning) and holds it frozen until a
//! step (gradual unfreezing).

use crate::error::{arg_err, Result};
use crate::gpu::Device;
use crate::ops::adamw::{adamw, clip_scale, lamb, AdamWStep, LambStep};
use crate::ops::sum::sum_squares_into;
use crate::tensor::{DType, Tensor};
use crate::train::params::Parameters;

/// What follows the warmup.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decay {
    Constant,
    Linear,
    Cosine,
    /// Howard & Ruder's slanted triangular rates (ULMFiT, eq. 3): a linear rise from min_lr
    /// to lr over the warmup (their cut, a tenth of the steps), then a linear fall back to
    /// min_lr (lr / their ratio, 32).
    #[serde(rename = "slanted-triangular")]
    SlantedTriangular,
}

impl std::str::FromStr for Decay {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Decay, String> {
        match s {
            "constant" => Ok(Decay::Constant),
            "linear" => Ok(Decay::Linear),
            "cosine" => Ok(Decay::Cosine),
            "slanted-triangular" => Ok(Decay::SlantedTriangular),
            _ => Err(format!("unknown schedule `{s}` (constant, linear, cosine or slanted-triangular)")),
        }
    }
}

/// The learning rate of each step: lr·(s+1)/warmup during the warmup, then with p the
/// fraction of the remaining steps done, min_lr + (lr − min_lr)·f where f is 1 (constant),
/// 1 − p (linear) or (1 + cos πp)/2 (cosine).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Schedule {
    pub lr: f32,
    pub warmup: u64,
    pub decay: Decay,
    pub total_steps: u64,
    /// The floor the decay ends at (nanoGPT's min_lr; 0 is PyTorch's schedulers).
    #[serde(default)]
    pub min_lr: f32,
}

impl Schedule {
    /// The learning rate of step `step` (0-based).
    pub fn lr_at(&self, step: u64) -> f32 {
        let (lr, min_lr) = (self.lr as f64, self.min_lr as f64);
        if step < self.warmup && self.decay == Decay::SlantedTriangular {
            return (min_lr + (lr - min_lr) * step as f64 / self.warmup as f64) as f32;
        }
        if step < self.warmup {
            return (lr * (step + 1) as f64 / self.warmup as f64) as f32;
        }
        let p = ((step - self.warmup) as f64 / self.total_steps.saturating_sub(self.warmup).max(1) as f64).min(1.0);
        let factor = match self.decay {
            Decay::Constant => 1.0,
            Decay::Linear | Decay::SlantedTriangular => 1.0 - p,
            Decay::Cosine => 0.5 * (1.0 + (std::f64::consts::PI * p).cos()),
        };
        (min_lr + (lr - min_lr) * factor.max(0.0)) as f32
    }

    pub fn validate(&self) -> Result<()> {
        let valid = self.lr > 0.0 && (0.0..=self.lr).contains(&self.min_lr);
        if !valid {
            return Err(arg_err!("schedule", "need lr > 0 and 0 ≤ min_lr ≤ lr (got lr {}, min_lr {})", self.lr, self.min_lr));
        }
        if self.decay == Decay::SlantedTriangular && (self.warmup == 0 || self.min_lr == 0.0) {
            return Err(arg_err!(
                "schedule",
                "slanted-triangular rises over --warmup steps (ULMFiT: a tenth of the run) from --min-lr (lr / 32 in the paper): give both"
            ));
        }
        Ok(())
    }
}

/// Which update the optimizer applies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerKind {
    /// Adam with decoupled weight decay (Loshchilov & Hutter), PyTorch's `AdamW`.
    #[default]
    AdamW,
    /// Adam's direction plus weight decay, scaled per tensor by ‖weights‖ / ‖update‖ (You et
    /// al. 2019's layer adaptation, for large batches; ALBERT's optimizer). Biases and
    /// LayerNorm gains neither decay nor adapt.
    Lamb,
}

impl std::str::FromStr for OptimizerKind {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<OptimizerKind, String> {
        match s {
            "adamw" => Ok(OptimizerKind::AdamW),
            "lamb" => Ok(OptimizerKind::Lamb),
            _ => Err(format!("unknown optimizer `{s}` (adamw or lamb)")),
        }
    }
}

/// The optimizer's hyperparameters besides the learning rate (AdamW's, which LAMB shares).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AdamWConfig {
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    pub weight_decay: f32,
    /// Clip the global gradient norm to this; 0 = no clipping.
    pub clip_grad_norm: f32,
}

impl AdamWConfig {
    pub fn validate(&self) -> Result<()> {
        let op = "adamw";
        if !(0.0..1.0).contains(&self.beta1) || !(0.0..1.0).contains(&self.beta2) {
            return Err(arg_err!(op, "betas must be in [0, 1), got ({}, {})", self.beta1, self.beta2));
        }
        // A NaN fails the test too.
        if !(self.eps > 0.0 && self.weight_decay >= 0.0 && self.clip_grad_norm >= 0.0) {
            return Err(arg_err!(op, "eps must be > 0, weight decay and clip norm ≥ 0 (got {}, {}, {})", self.eps, self.weight_decay, self.clip_grad_norm));
        }
        Ok(())
    }
}

/// The weights a fine-tuning run leaves as they are (`--freeze`): the whole base model (only
/// the task head learns, as with `requires_grad = False` on transformers' `model.bert`), or
/// its embeddings and its bottom N layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Freeze {
    Encoder,
    Bottom(usize),
}

impl std::str::FromStr for Freeze {
    type Err = crate::SesameError;

    fn from_str(s: &str) -> Result<Freeze> {
        match s {
            "encoder" => Ok(Freeze::Encoder),
            n => n.parse().map(Freeze::Bottom).map_err(|_| arg_err!("train", "--freeze is `encoder` or a number of bottom layers, got {s:?}")),
        }
    }
}

impl TryFrom<String> for Freeze {
    type Error = crate::SesameError;

    fn try_from(s: String) -> Result<Freeze> {
        s.parse()
    }
}

impl From<Freeze> for String {
    fn from(freeze: Freeze) -> String {
        match freeze {
            Freeze::Encoder => "encoder".into(),
            Freeze::Bottom(n) => n.to_string(),
        }
    }
}

impl Freeze {
    /// Whether weight `name` stays frozen, for a model whose base model's weights start with
    /// `base` (`bert`): everything under it, or its embeddings and layers below N (a name's
    /// layer is the number after `layer.` or `h.`; ALBERT's shared layer and the pooler are no
    /// bottom layer, and learn).
    pub(crate) fn holds(self, name: &str, base: &str) -> bool {
        let Some(rest) = name.strip_prefix(base).and_then(|rest| rest.strip_prefix('.')) else { return false };
        let parts: Vec<&str> = rest.split('.').collect();
        let layer = parts.windows(2).find_map(|w| matches!(w[0], "layer" | "h").then(|| w[1].parse::<usize>().ok()).flatten());
        match (self, layer) {
            (Freeze::Encoder, _) => true,
            (Freeze::Bottom(n), Some(layer)) => layer < n,
            (Freeze::Bottom(_), None) => parts[0].contains("embed") || matches!(parts[0], "wte" | "wpe"),
        }
    }
}

/// How one parameter trains: its learning rate is the schedule's × `lr_scale`, and it stays
/// as it is (no gradient in the norm, no update, no moments) before step `unfrozen_at`. Its
/// AdamW step count t starts at its first update, as PyTorch's per-parameter state does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ParamPlan {
    pub lr_scale: f32,
    pub unfrozen_at: u64,
}

impl Default for ParamPlan {
    fn default() -> Self {
        ParamPlan { lr_scale: 1.0, unfrozen_at: 0 }
    }
}

/// The optimizer's step count and the buffers of the global-norm computation.
pub struct Optimizer {
    pub kind: OptimizerKind,
    pub config: AdamWConfig,
    /// Steps taken (PyTorch's `state["step"]`).
    pub steps: u64,
    sums: Tensor,
    /// [global gradient norm before clipping, clipping factor] of the last step.
    pub norm_scale: Tensor,
    /// LAMB: the squared norms of each parameter and of its update.
    lamb_norms: Option<Tensor>,
    /// Each parameter's plan (all default: every parameter trains from step 0 at the rate).
    plan: Vec<ParamPlan>,
}

impl Optimizer {
    pub fn new(gpu: &Device, kind: OptimizerKind, config: AdamWConfig, params: &Parameters) -> Result<Optimizer> {
        config.validate()?;
        let slots = params.list.len();
        let lamb_norms = (kind == OptimizerKind::Lamb).then(|| Tensor::zeros(gpu, &[2 * slots], DType::F32)).transpose()?;
        let (sums, norm_scale) = (Tensor::zeros(gpu, &[slots], DType::F32)?, Tensor::zeros(gpu, &[2], DType::F32)?);
        Ok(Optimizer { kind, config, steps: 0, sums, norm_scale, lamb_norms, plan: vec![ParamPlan::default(); slots] })
    }

    /// Trains each parameter by its plan (in the order of `Parameters::list`).
    pub fn with_plan(mut self, plan: Vec<ParamPlan>) -> Result<Optimizer> {
        if plan.len() != self.plan.len() {
            return Err(arg_err!("train", "{} parameter plans for {} parameters", plan.len(), self.plan.len()));
        }
        if self.kind == OptimizerKind::Lamb && plan.iter().any(|p| *p != ParamPlan::default()) {
            return Err(arg_err!("train", "discriminative rates and gradual unfreezing are AdamW's here, not LAMB's"));
        }
        self.plan = plan;
        Ok(self)
    }

    /// Clips the accumulated gradients by their global norm and applies one AdamW or LAMB
    /// update at learning rate `lr` (recorded on the GPU; nothing is read back). LAMB leaves
    /// each gradient buffer holding its update.
    pub fn step(&mut self, params: &Parameters, lr: f32) -> Result<()> {
        // A frozen parameter's slot stays 0 (plans only ever unfreeze).
        let step_index = self.steps;
        let training = |slot: usize| step_index >= self.plan[slot].unfrozen_at;
        for (slot, p) in params.list.iter().enumerate().filter(|&(slot, _)| training(slot)) {
            sum_squares_into(&p.grad, &self.sums, slot)?;
        }
        clip_scale(&self.sums, self.config.clip_grad_norm, &self.norm_scale)?;
        self.steps += 1;
        let c = &self.config;
        for (slot, p) in params.list.iter().enumerate().filter(|&(slot, _)| training(slot)) {
            let weight_decay = if p.decays() { c.weight_decay } else { 0.0 };
            let plan = self.plan[slot];
            match &self.lamb_norms {
                None => {
                    let lr = lr * plan.lr_scale;
                    let step = AdamWStep { lr, beta1: c.beta1, beta2: c.beta2, eps: c.eps, weight_decay, t: self.steps - plan.unfrozen_at };
                    adamw(&p.value, &p.grad, &p.m, &p.v, &self.norm_scale, &step)?;
                }
                Some(norms) => {
                    let step = LambStep { lr, beta1: c.beta1, beta2: c.beta2, eps: c.eps, weight_decay, layer_adaptation: p.decays(), t: self.steps };
                    lamb(&p.value, &p.grad, &p.m, &p.v, &self.norm_scale, norms, 2 * slot, &step)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn freeze_holds_the_base_model_or_its_bottom_layers() {
        use super::Freeze;
        assert_eq!(("encoder".parse::<Freeze>().unwrap(), "2".parse::<Freeze>().unwrap()), (Freeze::Encoder, Freeze::Bottom(2)));
        assert!("heads".parse::<Freeze>().is_err());
        let bert = [
            "bert.embeddings.word_embeddings.weight",
            "bert.encoder.layer.0.output.dense.weight",
            "bert.encoder.layer.1.output.dense.weight",
            "bert.pooler.dense.weight",
            "classifier.weight",
        ];
        let held = |freeze: Freeze, names: &[&str], base: &str| names.iter().map(|n| freeze.holds(n, base)).collect::<Vec<_>>();
        assert_eq!(held(Freeze::Encoder, &bert, "bert"), [true, true, true, true, false]);
        assert_eq!(held(Freeze::Bottom(1), &bert, "bert"), [true, true, false, false, false]);
        let gpt2 = [
            "transformer.wte.weight",
            "transformer.wpe.weight",
            "transformer.h.0.attn.c_attn.weight",
            "transformer.h.1.mlp.c_fc.weight",
            "transformer.ln_f.weight",
            "score.weight",
        ];
        assert_eq!(held(Freeze::Bottom(1), &gpt2, "transformer"), [true, true, true, false, false, false]);
        assert_eq!(serde_json::to_string(&Freeze::Bottom(3)).unwrap(), "\"3\"");
    }

    use super::*;

    #[test]
    fn schedules_warm_up_then_decay() {
        let s = |decay| Schedule { lr: 1e-3, warmup: 4, decay, total_steps: 20, min_lr: 0.0 };
        // The same numbers as tests/reference/make_train_fixtures.py's lr_at.
        let cosine: Vec<f32> = (0..6).map(|i| s(Decay::Cosine).lr_at(i)).collect();
        let want = [2.5e-4, 5e-4, 7.5e-4, 1e-3, 1e-3, 1e-3 * 0.5 * (1.0 + (std::f64::consts::PI / 16.0).cos()) as f32];
        for (g, w) in cosine.iter().zip(want) {
            assert!((g - w).abs() < 1e-9, "{cosine:?}");
        }
        assert_eq!(s(Decay::Constant).lr_at(19), 1e-3);
        assert!((s(Decay::Linear).lr_at(12) - 5e-4).abs() < 1e-9);
        assert_eq!(Schedule { warmup: 0, ..s(Decay::Linear) }.lr_at(0), 1e-3);
        assert!(s(Decay::Cosine).lr_at(100) >= 0.0, "past the end: held at 0, never negative");
        let floored = Schedule { min_lr: 1e-4, ..s(Decay::Cosine) };
        assert_eq!(floored.lr_at(3), 1e-3, "the warmup ends at lr");
        assert!((floored.lr_at(12) - 5.5e-4).abs() < 1e-9, "half way: the mean of lr and min_lr");
        assert!((floored.lr_at(20) - 1e-4).abs() < 1e-9 && (floored.lr_at(100) - 1e-4).abs() < 1e-9);
        assert!(Schedule { min_lr: 2e-3, ..floored }.validate().is_err());
    }

    #[test]
    fn slanted_triangular_rates_rise_from_min_lr_then_fall_back() {
        // Howard & Ruder's eq. 3 with T = 20, cut = 2 (cut_frac 0.1), ratio 32.
        let s = Schedule { lr: 0.01, warmup: 2, decay: Decay::SlantedTriangular, total_steps: 20, min_lr: 0.01 / 32.0 };
        let paper = |t: u64| {
            let p = if t < 2 { t as f64 / 2.0 } else { 1.0 - (t - 2) as f64 / 18.0 };
            0.01 * (1.0 + p * 31.0) / 32.0
        };
        for t in 0..20 {
            assert!((s.lr_at(t) as f64 - paper(t)).abs() < 1e-9, "step {t}: {} vs {}", s.lr_at(t), paper(t));
        }
        assert!(Schedule { warmup: 0, ..s }.validate().is_err() && Schedule { min_lr: 0.0, ..s }.validate().is_err());
        assert_eq!("slanted-triangular".parse::<Decay>(), Ok(Decay::SlantedTriangular));
    }
}
