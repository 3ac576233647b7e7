//! Fresh weights: tensors drawn from one seeded stream as transformers initialises them, to
//! build a checkpoint (or add heads to one) with.

use rand::{rngs::StdRng, SeedableRng};
use rand_distr::{Distribution, Normal, Uniform};

use crate::error::{arg_err, Result};
use crate::weights;

/// transformers' `initializer_range`.
pub(crate) const INIT_STD: f64 = 0.02;

/// Tensors (name, shape, values) of a checkpoint being built, drawn from one seeded stream.
pub(crate) struct Init {
    rng: StdRng,
    pub tensors: Vec<(String, Vec<usize>, Vec<f32>)>,
}

impl Init {
    pub fn new(seed: u64) -> Init {
        Init { rng: StdRng::seed_from_u64(seed), tensors: Vec::new() }
    }

    /// Every weight of `checkpoint` (as f32, by name), to add fresh ones to. Integer buffers
    /// (`embeddings.position_ids` in sentence-transformers' MiniLM) are left out: no model
    /// reads them, and transformers rebuilds them when it loads.
    pub fn from_checkpoint(checkpoint: &weights::Checkpoint, seed: u64) -> Result<Init> {
        let mut init = Init::new(seed);
        let mut names: Vec<&str> = checkpoint.names().filter(|name| checkpoint.is_floating_point(name)).collect();
        names.sort_unstable();
        for name in names {
            let (values, shape) = checkpoint.to_f32(name)?;
            init.tensors.push((name.to_string(), shape, values));
        }
        Ok(init)
    }

    pub fn normal(&mut self, name: String, shape: Vec<usize>, std: f64) -> Result<()> {
        let dist = Normal::new(0.0, std).map_err(|e| arg_err!("model", "{e}"))?;
        let values = (0..shape.iter().product()).map(|_| dist.sample(&mut self.rng) as f32).collect();
        self.tensors.push((name, shape, values));
        Ok(())
    }

    /// Values drawn U(−bound, bound).
    pub fn uniform(&mut self, name: String, shape: Vec<usize>, bound: f64) -> Result<()> {
        let dist = Uniform::new_inclusive(-bound, bound).map_err(|e| arg_err!("model", "{e}"))?;
        let values = (0..shape.iter().product()).map(|_| dist.sample(&mut self.rng) as f32).collect();
        self.tensors.push((name, shape, values));
        Ok(())
    }

    pub fn constant(&mut self, name: String, size: usize, value: f32) {
        self.tensors.push((name, vec![size], vec![value; size]));
    }

    /// A Linear's weight [out, inp] drawn N(0, std) and its bias 0 (`{name}.weight`, `.bias`).
    pub fn linear(&mut self, name: &str, out: usize, inp: usize, std: f64) -> Result<()> {
        self.normal(format!("{name}.weight"), vec![out, inp], std)?;
        self.constant(format!("{name}.bias"), out, 0.0);
        Ok(())
    }

    /// A LayerNorm's weight 1 and bias 0.
    pub fn layer_norm(&mut self, name: &str, width: usize) {
        self.constant(format!("{name}.weight"), width, 1.0);
        self.constant(format!("{name}.bias"), width, 0.0);
    }

    pub fn serialize(&self) -> Result<Vec<u8>> {
        weights::serialize_f32(&self.tensors)
    }
}
