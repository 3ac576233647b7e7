//! Layers shared by the models, named after their PyTorch counterparts and loaded from a
//! checkpoint prefix (`weight`, `bias`).

use crate::error::Result;
use crate::ops::elementwise::{self, Unary};
use crate::ops::{layer_norm, matmul};
use crate::tensor::Tensor;
use crate::weights::Weights;

/// y = x·Wᵀ + b. PyTorch's `nn.Linear` stores W as [out, in]; GPT's `Conv1D` stores it as
/// [in, out] (one of the deviations listed in `models`), which `transposed` records.
pub struct Linear {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    /// W is stored [in, out].
    transposed: bool,
}

impl Linear {
    /// `nn.Linear(in, out)`: `weight` [out, in], `bias` [out].
    pub fn load(w: &Weights, in_features: usize, out_features: usize) -> Result<Linear> {
        let bias = if w.contains("bias") { Some(w.tensor("bias", &[out_features])?) } else { None };
        Ok(Linear { weight: w.tensor("weight", &[out_features, in_features])?, bias, transposed: false })
    }

    /// GPT's `Conv1D(out, in)`: `weight` [in, out], `bias` [out].
    pub fn load_conv1d(w: &Weights, in_features: usize, out_features: usize) -> Result<Linear> {
        Ok(Linear { weight: w.tensor("weight", &[in_features, out_features])?, bias: Some(w.tensor("bias", &[out_features])?), transposed: true })
    }

    /// A linear map from existing tensors: `weight` [out, in] (e.g. a tied embedding table).
    pub fn from_tensors(weight: Tensor, bias: Option<Tensor>) -> Linear {
        Linear { weight, bias, transposed: false }
    }

    /// x [.., in] → [.., out].
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        matmul::matmul(x, &self.weight, matmul::Matmul { trans_b: !self.transposed, bias: self.bias.as_ref(), ..Default::default() })
    }
}

/// `nn.LayerNorm` over the last dimension.
pub struct LayerNorm {
    pub weight: Tensor,
    pub bias: Tensor,
    pub eps: f32,
}

impl LayerNorm {
    pub fn load(w: &Weights, size: usize, eps: f32) -> Result<LayerNorm> {
        Ok(LayerNorm { weight: w.tensor("weight", &[size])?, bias: w.tensor("bias", &[size])?, eps })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(layer_norm::layer_norm(x, &self.weight, &self.bias, self.eps)?.y)
    }
}

/// The activations named by `hidden_act` / `activation_function` in Hugging Face configs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `gelu`: the exact erf form.
    Gelu,
    /// `gelu_new`, `gelu_pytorch_tanh`: the tanh approximation.
    GeluTanh,
    Relu,
    Tanh,
}

impl Activation {
    pub fn from_config(name: &str) -> Option<Activation> {
        match name {
            "gelu" => Some(Activation::Gelu),
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Some(Activation::GeluTanh),
            "relu" => Some(Activation::Relu),
            "tanh" => Some(Activation::Tanh),
            _ => None,
        }
    }

    pub fn forward(self, x: &Tensor) -> Result<Tensor> {
        let f = match self {
            Activation::Gelu => Unary::GeluErf,
            Activation::GeluTanh => Unary::GeluTanh,
            Activation::Relu => Unary::Relu,
            Activation::Tanh => Unary::Tanh,
        };
        elementwise::unary(x, f)
    }
}
