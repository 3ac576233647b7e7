//! Inverted dropout from a counter-based generator (`shaders/dropout_mask.wgsl`): element i of
//! a call with key k is kept iff hash(k, i) ≥ p·2³², and kept values are scaled by 1/(1 − p).
//! Nothing is stored between the forward and the backward: the backward asks for the same
//! (key, index) pairs and gets the same mask. Keys come from [`DropoutStream`], a function of
//! (seed, batch index, site), so a training run is reproducible and `--resume` continues it
//! exactly. Attention-probability dropout runs inside the attention kernels with the same mask.

use super::{as_u32, expect_dtype, grid_1d};
use crate::error::{arg_err, Result};
use crate::kernels::dropout::{MaskParams, Params, DROPOUT, DROPOUT_ACCUMULATE};
use crate::tensor::{DType, Tensor};

/// One dropout call: probability `p` in (0, 1) and the key its mask is drawn from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dropout {
    p: f32,
    key: u64,
}

impl Dropout {
    /// None when `p` is 0 (nothing to drop); an error unless 0 ≤ p < 1.
    pub fn new(p: f32, key: u64) -> Result<Option<Dropout>> {
        if !(0.0..1.0).contains(&p) {
            return Err(arg_err!("dropout", "probability must be in [0, 1), got {p}"));
        }
        Ok((p > 0.0).then_some(Dropout { p, key }))
    }

    pub(crate) fn mask_params(&self) -> MaskParams {
        // p·2³² rounded, at most 2³² − 1 since p < 1.
        let threshold = (self.p as f64 * 4294967296.0).round().min(u32::MAX as f64) as u32;
        MaskParams { threshold, scale: 1.0 / (1.0 - self.p), key0: self.key as u32, key1: (self.key >> 32) as u32 }
    }

    /// The CPU reference of the mask: whether element `index` is kept.
    pub fn keeps(&self, index: u32) -> bool {
        self.factor(index) != 0.0
    }

    /// The factor element `index` is multiplied by: 0 or 1/(1 − p).
    pub fn factor(&self, index: u32) -> f32 {
        self.mask_params().factor(index)
    }
}

/// SplitMix64's output function: a well-mixed 64-bit bijection.
fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The dropout keys of one training forward: site s of micro-batch `batch_index` of a run
/// seeded `seed` draws key splitmix(splitmix(splitmix(seed) ⊕ batch_index) ⊕ s).
///
/// Sites are numbered in the order transformers' modules call dropout, so a PyTorch run can
/// be fed the same masks: 0 is the embeddings' output, then each layer's calls in turn (see
/// [`LayerSites`]: BERT's layer l has 1 + 3l the attention probabilities, 2 + 3l the attention
/// block's output projection and 3 + 3l the feed-forward block's output); a head's dropout
/// comes after the last layer's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DropoutStream {
    pub seed: u64,
    pub batch_index: u64,
}

impl DropoutStream {
    pub fn key(&self, site: u32) -> u64 {
        splitmix64(splitmix64(splitmix64(self.seed) ^ self.batch_index) ^ site as u64)
    }

    pub fn site(&self, p: f32, site: u32) -> Result<Option<Dropout>> {
        Dropout::new(p, self.key(site))
    }

    /// The first site after `layers` layers' (a task head's dropout).
    pub fn after_layers(layers: usize, sites: LayerSites) -> u32 {
        1 + sites.count() * layers as u32
    }

    /// The embeddings' dropout (site 0).
    pub fn embedding(&self, p: f32) -> Result<Option<Dropout>> {
        self.site(p, 0)
    }

    /// Layer `layer`'s sites, attention probabilities at `attention_p`, the block outputs
    /// `sites` has at `hidden_p`.
    pub fn layer(&self, layer: usize, sites: LayerSites, attention_p: f32, hidden_p: f32) -> Result<LayerDropout> {
        let probs = 1 + sites.count() * layer as u32;
        let attention_output = probs + 1;
        let output = attention_output + sites.attention_output as u32;
        let block = |present: bool, site| if present { self.site(hidden_p, site) } else { Ok(None) };
        Ok(LayerDropout {
            probs: self.site(attention_p, probs)?,
            attention_output: block(sites.attention_output, attention_output)?,
            output: block(sites.feed_forward_output, output)?,
        })
    }
}

/// Which dropout calls a transformer layer makes besides the one on its attention
/// probabilities (which comes first), in transformers' order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerSites {
    /// On the attention's output projection, before the residual (all but DistilBERT).
    pub attention_output: bool,
    /// On the feed-forward block's output, before the residual (all but ALBERT).
    pub feed_forward_output: bool,
}

impl LayerSites {
    /// BERT's and GPT's three calls.
    pub const ALL: LayerSites = LayerSites { attention_output: true, feed_forward_output: true };

    /// How many sites a layer takes.
    pub fn count(self) -> u32 {
        1 + self.attention_output as u32 + self.feed_forward_output as u32
    }
}

/// A transformer layer's dropout calls (None where the probability is 0).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LayerDropout {
    /// On the attention probabilities (inside the attention kernels).
    pub probs: Option<Dropout>,
    /// On the attention block's output projection, before its residual.
    pub attention_output: Option<Dropout>,
    /// On the feed-forward block's output, before its residual.
    pub output: Option<Dropout>,
}

/// Which mask entry each element of x reads: one mask value can be shared by many elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaskShape {
    /// An entry per element: element i reads entry i.
    Elements,
    /// An entry per row of `width` elements (fastai's embedding dropout on the word table:
    /// whole words are dropped): element i reads entry i / width.
    Rows { width: usize },
    /// An entry per (sequence, feature) of x [B, T, C], shared by the T steps (locked, or
    /// variational, dropout: fastai's `RNNDropout`): element (b, t, c) reads entry b·C + c.
    Locked { seq: usize, width: usize },
}

impl MaskShape {
    /// (group, stride, inner): element i reads entry (i / group)·stride + i % inner.
    fn map(self, op: &'static str) -> Result<(u32, u32, u32)> {
        let (group, stride, inner) = match self {
            MaskShape::Elements => (1, 1, 1),
            MaskShape::Rows { width } => (width, 1, 1),
            MaskShape::Locked { seq, width } => (seq.saturating_mul(width), width, width),
        };
        if group == 0 || inner == 0 {
            return Err(arg_err!(op, "a mask over empty rows or sequences ({self:?})"));
        }
        Ok((as_u32(op, "mask group", group)?, as_u32(op, "mask stride", stride)?, as_u32(op, "mask width", inner)?))
    }

    /// The entry element `i` reads (the CPU reference; empty rows read entry 0).
    pub fn index(self, i: usize) -> usize {
        match self {
            MaskShape::Elements => i,
            MaskShape::Rows { width } => i / width.max(1),
            MaskShape::Locked { seq, width } => i / (seq * width).max(1) * width + i % width.max(1),
        }
    }
}

/// x with `dropout` applied (x itself when None). Also the backward: the gradient of the
/// output passed through the same call gives the input's gradient.
pub fn dropout(x: &Tensor, dropout: Option<Dropout>) -> Result<Tensor> {
    dropout_shaped(x, dropout, MaskShape::Elements)
}

/// [`dropout`] with the mask entries shared as `shape` says (its own backward too).
pub fn dropout_shaped(x: &Tensor, dropout: Option<Dropout>, shape: MaskShape) -> Result<Tensor> {
    let Some(d) = dropout else { return Ok(x.clone()) };
    let y = Tensor::empty(x.gpu(), x.shape(), DType::F32)?;
    dispatch("dropout", &DROPOUT, x, &y, d.mask_params(), shape)?;
    Ok(y)
}

/// into += x with `dropout` applied (x itself when None): the gradient through a dropped
/// weight (fastai's `WeightDropout`, the embedding table's word dropout) added into the
/// weight's. `into` has x's shape.
pub fn dropout_accumulate(x: &Tensor, dropout: Option<Dropout>, shape: MaskShape, into: &Tensor) -> Result<()> {
    let op = "dropout_accumulate";
    if into.shape() != x.shape() {
        return Err(crate::error::shape_err!(op, "x {:?} and the accumulator {:?} differ", x.shape(), into.shape()));
    }
    // Without dropout every factor is 1: threshold 0 keeps everything, unscaled.
    let mask = dropout.map_or(MaskParams { threshold: 0, scale: 1.0, key0: 0, key1: 0 }, |d| d.mask_params());
    dispatch(op, &DROPOUT_ACCUMULATE, x, into, mask, shape)
}

fn dispatch(op: &'static str, kernel: &crate::kernels::Kernel, x: &Tensor, y: &Tensor, mask: MaskParams, shape: MaskShape) -> Result<()> {
    expect_dtype(op, "x", x, DType::F32)?;
    expect_dtype(op, "y", y, DType::F32)?;
    if x.numel() == 0 {
        return Ok(());
    }
    let (group, stride, inner) = shape.map(op)?;
    let params = Params { n: as_u32(op, "elements", x.numel())?, mask, group, stride, inner };
    let gpu = x.gpu();
    gpu.dispatch(kernel, &[], &params, &[x.into(), y.into()], grid_1d(gpu, x.numel(), 256))
}

#[cfg(test)]
/// CPU reference of [`dropout`].
pub(crate) fn dropout_reference(x: &[f32], d: &Dropout) -> Vec<f32> {
    dropout_shaped_reference(x, d, MaskShape::Elements)
}

#[cfg(test)]
/// CPU reference of [`dropout_shaped`].
pub(crate) fn dropout_shaped_reference(x: &[f32], d: &Dropout, shape: MaskShape) -> Vec<f32> {
    x.iter().enumerate().map(|(i, &v)| v * d.factor(shape.index(i) as u32)).collect()
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::gpu::testing::every_device;
    use crate::ops::testing::{random_vec, rng};
    use pollster::block_on;

    #[test]
    fn matches_reference_bit_for_bit() {
        for gpu in every_device() {
            let x = random_vec(&mut rng(1), 70_000, 1.0);
            let t = Tensor::from_slice(gpu, &x, &[70, 1000]).unwrap();
            for (p, site) in [(0.1, 0), (0.5, 7), (0.9, 123)] {
                let d = DropoutStream { seed: 42, batch_index: 3 }.site(p, site).unwrap().unwrap();
                let got = block_on(dropout(&t, Some(d)).unwrap().to_vec::<f32>()).unwrap();
                assert_eq!(got, dropout_reference(&x, &d), "p {p} on {}", gpu.adapter_info().name);
                // The share dropped is p: 70,000 draws give a standard error ≤ 0.0019.
                let dropped = got.iter().filter(|&&v| v == 0.0).count() as f64 / x.len() as f64;
                assert!((dropped - p as f64).abs() < 0.01, "p {p}: dropped {dropped}");
            }
            assert_eq!(block_on(dropout(&t, None).unwrap().to_vec::<f32>()).unwrap(), x, "no dropout: x itself");
        }
    }

    #[test]
    fn shared_masks_drop_whole_rows_and_whole_sequences_and_accumulate() {
        let (batch, seq, width) = (3, 5, 70);
        let x = random_vec(&mut rng(2), batch * seq * width, 1.0);
        let d = DropoutStream { seed: 9, batch_index: 1 }.site(0.4, 2).unwrap().unwrap();
        for gpu in every_device() {
            let t = Tensor::from_slice(gpu, &x, &[batch, seq, width]).unwrap();
            for shape in [MaskShape::Rows { width }, MaskShape::Locked { seq, width }] {
                let got = block_on(dropout_shaped(&t, Some(d), shape).unwrap().to_vec::<f32>()).unwrap();
                assert_eq!(got, dropout_shaped_reference(&x, &d, shape), "{shape:?} on {}", gpu.adapter_info().name);
                let kept = |b: usize, t: usize, c: usize| got[(b * seq + t) * width + c] != 0.0;
                for b in 0..batch {
                    for c in 0..width {
                        match shape {
                            // Every step of a sequence keeps the same features.
                            MaskShape::Locked { .. } => assert!((0..seq).all(|t| kept(b, t, c) == kept(b, 0, c)), "{shape:?} ({b}, ·, {c})"),
                            // Every feature of a row is kept or dropped together.
                            _ => assert!((0..seq).all(|t| kept(b, t, c) == kept(b, t, 0)), "{shape:?} ({b}, ·, {c})"),
                        }
                    }
                }
            }
            // Accumulating adds the dropped values to what is there; without a mask, x itself.
            let into = Tensor::from_slice(gpu, &vec![1.0f32; x.len()], &[batch, seq, width]).unwrap();
            let shape = MaskShape::Locked { seq, width };
            dropout_accumulate(&t, Some(d), shape, &into).unwrap();
            dropout_accumulate(&t, None, shape, &into).unwrap();
            let want: Vec<f32> = dropout_shaped_reference(&x, &d, shape).iter().zip(&x).map(|(a, b)| 1.0 + a + b).collect();
            assert_eq!(block_on(into.to_vec::<f32>()).unwrap(), want);
            assert!(dropout_accumulate(&t, Some(d), shape, &Tensor::zeros(gpu, &[2], DType::F32).unwrap()).is_err(), "shapes differ");
        }
    }

    #[test]
    fn keys_differ_by_seed_batch_and_site_and_masks_by_key() {
        let s = DropoutStream { seed: 1, batch_index: 0 };
        let keys = [s.key(0), s.key(1), DropoutStream { batch_index: 1, ..s }.key(0), DropoutStream { seed: 2, ..s }.key(0)];
        for (i, a) in keys.iter().enumerate() {
            assert!(keys[i + 1..].iter().all(|b| a != b), "{keys:?}");
        }
        let mask = |key| (0..1000).map(|i| Dropout::new(0.5, key).unwrap().unwrap().keeps(i)).collect::<Vec<_>>();
        let (a, b) = (mask(keys[0]), mask(keys[1]));
        let agree = a.iter().zip(&b).filter(|(x, y)| x == y).count();
        assert!((400..600).contains(&agree), "two keys' masks agree on {agree}/1000: independent draws agree about half the time");
    }

    #[test]
    fn probability_out_of_range_is_an_error() {
        assert!(Dropout::new(1.0, 0).is_err());
        assert!(Dropout::new(-0.1, 0).is_err());
        assert!(Dropout::new(f32::NAN, 0).is_err());
        assert_eq!(Dropout::new(0.0, 0).unwrap(), None);
    }
}
