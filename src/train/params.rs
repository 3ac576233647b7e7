//! A model's trainable parameters under their checkpoint names, each with its gradient
//! accumulator and AdamW moments on the GPU.

use crate::error::{arg_err, Result};
use crate::nn::Gradients;
use crate::tensor::{DType, Tensor};
use crate::weights;

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
    /// Zeroed gradients and moments for the (name, tensor) pairs a model loaded
    /// (`Weights::recording`).
    pub fn new(loaded: Vec<(String, Tensor)>) -> Result<Parameters> {
        if loaded.is_empty() {
            return Err(arg_err!("train", "the model has no parameters"));
        }
        let list = loaded
            .into_iter()
            .map(|(name, value)| {
                let zeros = || Tensor::zeros(value.gpu(), value.shape(), DType::F32);
                Ok(Parameter { grad: zeros()?, m: zeros()?, v: zeros()?, name, value })
            })
            .collect::<Result<_>>()?;
        Ok(Parameters { list })
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

    /// Total number of scalars.
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

    /// One part of every parameter as a safetensors file (f32, under the parameter names).
    pub async fn to_safetensors(&self, part: Part) -> Result<Vec<u8>> {
        let mut data = Vec::with_capacity(self.list.len());
        for p in &self.list {
            let t = match part {
                Part::Value => &p.value,
                Part::Grad => &p.grad,
                Part::FirstMoment => &p.m,
                Part::SecondMoment => &p.v,
            };
            data.push((p.name.as_str(), p.value.shape(), t.to_vec::<f32>().await?));
        }
        let entries: Vec<_> = data.iter().map(|(name, shape, v)| (*name, safetensors::Dtype::F32, *shape, bytemuck::cast_slice::<f32, u8>(v))).collect();
        weights::serialize(&entries)
    }
}
