//! ULMFiT's classifier head (Howard & Ruder 2018, §3.3) as fastai's `PoolingLinearClassifier`
//! runs it at inference: the last layer's states H of each text pooled to
//! [h_last, maxpool(H), meanpool(H)] (`ops::pool`), then blocks of BatchNorm1d → Linear
//! (no bias) → ReLU, the last block without the ReLU: `1.layers.{i}` with the BatchNorm at
//! `.0` and the Linear at `.2` (`.1` when the block's dropout was 0, which fastai leaves out).
//!
//! fastai's `SentenceEncoder` reads a text in chunks of `bptt` tokens, carrying the state
//! across them, and keeps for pooling only the chunks that start within the last `max_len`
//! tokens: [`pooling_windows`] gives those positions, so that a long text pools as in fastai.
//! At inference BatchNorm is an affine map with its running statistics, folded into the
//! Linear after it at load.

use crate::error::Result;
use crate::nn::{Activation, Linear};
use crate::tensor::Tensor;
use crate::weights::Weights;

/// fastai's BatchNorm1d epsilon (PyTorch's default).
const BATCH_NORM_EPS: f64 = 1e-5;

/// The head's blocks, each BatchNorm folded into its Linear.
pub struct PoolingClassifier {
    blocks: Vec<Linear>,
}

impl PoolingClassifier {
    /// Loads `1.layers` for `dims` = [3·emb_sz, lin_ftrs…, classes].
    pub fn load(w: &Weights, dims: &[usize]) -> Result<PoolingClassifier> {
        let blocks = dims
            .windows(2)
            .enumerate()
            .map(|(i, io)| {
                let (input, output) = (io[0], io[1]);
                let (norm, linear) = head_block(w, i)?;
                let [gamma, beta, mean, var] = ["weight", "bias", "running_mean", "running_var"].map(|leaf| norm.values(leaf, &[input]));
                let weight = linear.values("weight", &[output, input])?;
                // BN(x) = x·s + t with s = γ/√(σ² + ε), t = β − μ·s; W·BN(x) = (W·diag s)·x + W·t.
                let (gamma, beta, mean, var) = (gamma?, beta?, mean?, var?);
                let scale: Vec<f64> = gamma.iter().zip(&var).map(|(&g, &v)| g as f64 / (v as f64 + BATCH_NORM_EPS).sqrt()).collect();
                let shift: Vec<f64> = (0..input).map(|k| beta[k] as f64 - mean[k] as f64 * scale[k]).collect();
                let folded: Vec<f32> = weight.chunks_exact(input).flat_map(|row| row.iter().zip(&scale).map(|(&w, &s)| (w as f64 * s) as f32)).collect();
                let bias: Vec<f32> = weight.chunks_exact(input).map(|row| row.iter().zip(&shift).map(|(&w, &t)| w as f64 * t).sum::<f64>() as f32).collect();
                let gpu = w.gpu();
                Ok(Linear::from_tensors(Tensor::from_slice(gpu, &folded, &[output, input])?, Some(Tensor::from_slice(gpu, &bias, &[output])?)))
            })
            .collect::<Result<_>>()?;
        Ok(PoolingClassifier { blocks })
    }

    /// pooled [B, 3·emb_sz] → logits [B, classes].
    pub fn forward(&self, pooled: &Tensor) -> Result<Tensor> {
        let mut x = pooled.clone();
        for (i, block) in self.blocks.iter().enumerate() {
            x = block.forward(&x)?;
            if i + 1 < self.blocks.len() {
                x = Activation::Relu.forward(&x)?;
            }
        }
        Ok(x)
    }
}

/// Block `i` of the head under `w` (`1.layers`): its BatchNorm (`.0`, whose integer
/// `num_batches_tracked` is checked, not read) and its Linear (`.2`, or `.1` when fastai left
/// the block's dropout out at p = 0).
pub(super) fn head_block<'a>(w: &Weights<'a>, i: usize) -> Result<(Weights<'a>, Weights<'a>)> {
    let block = w.pp(i);
    let norm = block.pp(0);
    if norm.contains("num_batches_tracked") {
        norm.tied_copy("num_batches_tracked", &[])?;
    }
    let linear = if block.contains("2.weight") || !block.contains("1.weight") { block.pp(2) } else { block.pp(1) };
    Ok((norm, linear))
}

/// Each text's pooled positions [start, length): the chunks of `bptt` tokens with
/// length − start ≤ `max_len` (fastai keeps chunk i·bptt of a text so; it measures a ragged
/// batch from its padded length, so texts shorter than the batch's longest can keep a chunk
/// more or less there).
pub fn pooling_windows(lengths: &[usize], bptt: usize, max_len: usize) -> Vec<(usize, usize)> {
    lengths.iter().map(|&len| (len.saturating_sub(max_len).div_ceil(bptt) * bptt, len)).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn long_texts_pool_over_the_chunks_within_max_len() {
        // bptt 4, max_len 8: a 14-token text keeps chunks 8..12 and 12..14; shorter ones all.
        assert_eq!(super::pooling_windows(&[14, 8, 9, 1, 13], 4, 8), [(8, 14), (0, 8), (4, 9), (0, 1), (8, 13)]);
        assert_eq!(super::pooling_windows(&[3000], 72, 1440), [(1584, 3000)]);
    }
}
