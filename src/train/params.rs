//! A model's trainable parameters under their checkpoint names, each with its gradient
//! accumulator and AdamW moments on the GPU.

use std::borrow::Cow;

use crate::error::{arg_err, Result};
use crate::nn::Gradients;
use crate::tensor::{DType, Tensor};
use crate::weights::{self, Recorded, Weights};

/// One parameter: its value, gradient and the optimizer's first and second moments.
pub struct Parameter {
    pub name: String,
    pub value: Tensor,
    pub grad: Tensor,
    pub m: Tensor,
    pub v: Tensor,
}

impl Parameter {
    /// Weight decay applies to matrices and embedding tables, not to biases or LayerNorm
    /// gains (nanoGPT's and the BERT paper's practice).
    pub fn decays(&self) -> bool {
        self.value.rank() >= 2
    }
}

pub struct Parameters {
    pub list: Vec<Parameter>,
    /// Tensors the model uses but does not train, as loaded: (name, shape, values), saved
    /// with the values.
    pub frozen: Vec<(String, Vec<usize>, Vec<f32>)>,
    /// State the model updates itself (BatchNorm's running statistics), saved with the values.
    pub buffers: Vec<(String, Tensor)>,
}

/// Which tensor of every parameter to save.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    Value,
    Grad,
    FirstMoment,
    SecondMoment,
}

impl Parameters {
    /// Zeroed gradients and moments for the trainable tensors a model loaded through
    /// `weights` (a [`Weights::recording`] view); its frozen ones are kept as they are, except
    /// those a trainable tensor of the same name replaces.
    pub fn from_weights(weights: &Weights) -> Result<Parameters> {
        let (mut trainable, mut frozen, mut buffers) = (Vec::new(), Vec::new(), Vec::new());
        for recorded in weights.take_loaded() {
            match recorded {
                Recorded::Trainable { name, value } => trainable.push((name, value)),
                Recorded::Frozen { name, shape, values } => frozen.push((name, shape, values)),
                Recorded::Buffer { name, value } => buffers.push((name, value)),
            }
        }
        frozen.retain(|(name, ..)| !trainable.iter().any(|(n, _)| n == name));
        if trainable.is_empty() {
            return Err(arg_err!("train", "the model has no trainable parameters"));
        }
        let list = trainable
            .into_iter()
            .map(|(name, value)| {
                let zeros = || Tensor::zeros(value.gpu(), value.shape(), DType::F32);
                Ok(Parameter { grad: zeros()?, m: zeros()?, v: zeros()?, name, value })
            })
            .collect::<Result<_>>()?;
        Ok(Parameters { list, frozen, buffers })
    }

    /// The gradient accumulators, for the models' backward passes.
    pub fn gradients(&self) -> Gradients {
        Gradients::new(self.list.iter().map(|p| (p.value.clone(), p.grad.clone())).collect())
    }

    pub fn zero_grads(&self) {
        for p in &self.list {
            p.grad.fill_zeros();
        }
    }

    /// Total number of trainable scalars.
    pub fn numel(&self) -> usize {
        self.list.iter().map(|p| p.value.numel()).sum()
    }

    /// The optimizer moments of every parameter from `checkpoint` (files `to_safetensors`
    /// wrote), to resume a run.
    pub fn load_moments(&mut self, part: Part, checkpoint: &weights::Checkpoint) -> Result<()> {
        for p in &mut self.list {
            let (values, shape) = checkpoint.to_f32(&p.name)?;
            if shape != p.value.shape() {
                return Err(arg_err!("train", "`{}` has shape {shape:?} in the optimizer state, the model's is {:?}", p.name, p.value.shape()));
            }
            let moment = Tensor::from_slice(p.value.gpu(), &values, &shape)?;
            match part {
                Part::FirstMoment => p.m = moment,
                Part::SecondMoment => p.v = moment,
                Part::Value | Part::Grad => return Err(arg_err!("train", "only optimizer moments are loaded into parameters")),
            }
        }
        Ok(())
    }

    /// One part of every parameter as a safetensors file (f32, under the parameter names);
    /// the values include the frozen tensors and the buffers.
    pub async fn to_safetensors(&self, part: Part) -> Result<Vec<u8>> {
        let mut data = Vec::with_capacity(self.list.len() + self.frozen.len());
        for p in &self.list {
            let t = match part {
                Part::Value => &p.value,
                Part::Grad => &p.grad,
                Part::FirstMoment => &p.m,
                Part::SecondMoment => &p.v,
            };
            data.push((p.name.as_str(), p.value.shape(), Cow::Owned(t.to_vec::<f32>().await?)));
        }
        if part == Part::Value {
            for (name, shape, values) in &self.frozen {
                data.push((name.as_str(), shape.as_slice(), Cow::Borrowed(values.as_slice())));
            }
            for (name, value) in &self.buffers {
                data.push((name.as_str(), value.shape(), Cow::Owned(value.to_vec::<f32>().await?)));
            }
        }
        weights::serialize_f32(&data)
    }
}
