//! Layers shared by the models, named after their PyTorch counterparts and loaded from a
//! checkpoint prefix (`weight`, `bias`). Each layer's `backward` sits beside its `forward`:
//! given what the forward saw and the gradient of its output, it adds its parameters'
//! gradients into [`Gradients`] and returns the gradient of its input.

use crate::error::{arg_err, Result};
use crate::ops::elementwise::{self, Unary};
use crate::ops::layer_norm::LayerNormOutput;
use crate::ops::quantized::{self, Matrix};
use crate::ops::{layer_norm, matmul, sum};
use crate::tensor::Tensor;
use crate::weights::Weights;

/// Gradient accumulators of a model's parameters, found by the parameter tensor they belong
/// to: a weight used twice (GPT-2's tied embeddings) sums both uses into one gradient.
pub struct Gradients {
    /// (parameter, its gradient) pairs.
    entries: Vec<(Tensor, Tensor)>,
}

impl Gradients {
    pub fn new(entries: Vec<(Tensor, Tensor)>) -> Gradients {
        Gradients { entries }
    }

    /// The gradient accumulator of `param`.
    pub fn of(&self, param: &Tensor) -> Result<&Tensor> {
        self.entries
            .iter()
            .find(|(p, _)| p.same_view(param))
            .map(|(_, g)| g)
            .ok_or_else(|| arg_err!("backward", "a parameter of shape {:?} has no gradient accumulator", param.shape()))
    }
}

/// y = x·Wᵀ + b. PyTorch's `nn.Linear` stores W as [out, in]; GPT's `Conv1D` stores it as
/// [in, out] (one of the deviations listed in `models`), which `transposed` records for an
/// f32 weight (a quantized one is always [out, in]).
pub struct Linear {
    pub weight: Matrix,
    pub bias: Option<Tensor>,
    /// W is stored [in, out].
    transposed: bool,
}

impl Linear {
    /// `nn.Linear(in, out)`: `weight` `[out, in]`, `bias` `[out]`.
    pub fn load(w: &Weights, in_features: usize, out_features: usize) -> Result<Linear> {
        let bias = if w.contains("bias") { Some(w.tensor("bias", &[out_features])?) } else { None };
        Ok(Linear { weight: w.matrix("weight", [out_features, in_features])?, bias, transposed: false })
    }

    /// GPT's `Conv1D(out, in)`: `weight` `[in, out]`, `bias` `[out]`.
    pub fn load_conv1d(w: &Weights, in_features: usize, out_features: usize) -> Result<Linear> {
        let (weight, transposed) = w.conv1d_matrix("weight", [out_features, in_features])?;
        Ok(Linear { weight, bias: Some(w.tensor("bias", &[out_features])?), transposed })
    }

    /// A linear map from an existing weight: [out, in] (e.g. a tied embedding table).
    pub fn from_matrix(weight: Matrix, bias: Option<Tensor>) -> Linear {
        Linear { weight, bias, transposed: false }
    }

    /// [`Linear::from_matrix`] of an f32 tensor.
    pub fn from_tensors(weight: Tensor, bias: Option<Tensor>) -> Linear {
        Linear::from_matrix(Matrix::F32(weight), bias)
    }

    /// x [.., in] → [.., out].
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match &self.weight {
            Matrix::F32(weight) => matmul::matmul(x, weight, matmul::Matmul { trans_b: !self.transposed, bias: self.bias.as_ref(), ..Default::default() }),
            Matrix::Quantized(weight) => quantized::matmul_quantized(x, weight, self.bias.as_ref()),
        }
    }

    /// dW += dyᵀ·x (or xᵀ·dy for the [in, out] layout), db += Σ dy; returns dx = dy·W. Only
    /// an f32 weight trains.
    pub fn backward(&self, x: &Tensor, dy: &Tensor, grads: &Gradients) -> Result<Tensor> {
        self.backward_weights(x, dy, grads)?;
        self.backward_input(dy)
    }

    /// dx = dy·W alone (the weights' gradients added elsewhere, as by
    /// [`Linear::backward_weights`] over many steps at once).
    pub fn backward_input(&self, dy: &Tensor) -> Result<Tensor> {
        matmul::matmul(dy, self.weight.f32()?, matmul::Matmul { trans_b: self.transposed, ..Default::default() })
    }

    /// dW += dyᵀ·x (or xᵀ·dy for the [in, out] layout), db += Σ dy.
    pub fn backward_weights(&self, x: &Tensor, dy: &Tensor, grads: &Gradients) -> Result<()> {
        let weight = self.weight.f32()?;
        let (inputs, outputs) = (x.shape()[x.rank() - 1], dy.shape()[dy.rank() - 1]);
        let x2 = x.reshape(&[x.numel() / inputs, inputs])?;
        let dy2 = dy.reshape(&[dy.numel() / outputs, outputs])?;
        let at = matmul::Matmul { trans_a: true, ..Default::default() };
        if self.transposed {
            matmul::matmul_accumulate(&x2, &dy2, at, grads.of(weight)?)?;
        } else {
            matmul::matmul_accumulate(&dy2, &x2, at, grads.of(weight)?)?;
        }
        if let Some(bias) = &self.bias {
            sum::column_sums_into(&dy2, grads.of(bias)?)?;
        }
        Ok(())
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
        Ok(self.forward_saved(x)?.y)
    }

    /// The output with the row statistics that [`LayerNorm::backward`] needs.
    pub fn forward_saved(&self, x: &Tensor) -> Result<LayerNormOutput> {
        layer_norm::layer_norm(x, &self.weight, &self.bias, self.eps)
    }

    pub fn backward(&self, x: &Tensor, saved: &LayerNormOutput, dy: &Tensor, grads: &Gradients) -> Result<Tensor> {
        layer_norm::layer_norm_backward(x, &self.weight, saved, dy, grads.of(&self.weight)?, grads.of(&self.bias)?)
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

    fn unary(self) -> Unary {
        match self {
            Activation::Gelu => Unary::GeluErf,
            Activation::GeluTanh => Unary::GeluTanh,
            Activation::Relu => Unary::Relu,
            Activation::Tanh => Unary::Tanh,
        }
    }

    pub fn forward(self, x: &Tensor) -> Result<Tensor> {
        elementwise::unary(x, self.unary())
    }

    /// dx = dy·f'(x), x being the forward's input.
    pub fn backward(self, x: &Tensor, dy: &Tensor) -> Result<Tensor> {
        elementwise::unary_backward(x, dy, self.unary())
    }
}
