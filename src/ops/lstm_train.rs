//! Training pair of the LSTM (`shaders/lstm_train.wgsl`): a forward that records every step's
//! gates, cell states, m and pre-clip h, and backpropagation through time from those records.
//! Semantics are [`super::lstm::lstm_sequence`]'s (AllenNLP `LstmCellWithProjection`, or
//! PyTorch's `nn.LSTM` without the projection; ragged batches, either direction, optional
//! clips); the weights stay row-major because the optimizer updates them every step.
//!
//! The backward is owner-computes: each step's kernels write the gate gradients of their
//! own (item, cell) and the carried state gradients of their own (item, element); the weight
//! gradients are then three matmuls over all steps (dW_state = Σ d_gatesᵀ·h_prev,
//! dW_proj = Σ dh_preᵀ·m) and a column sum (d_bias), with no float atomics.

use std::cell::Cell;

#[cfg(test)]
use super::lstm::{lstm_record, HostLstm};
use super::lstm::{sequence_params, LstmConfig};
use super::matmul::{matmul_accumulate, Matmul};
use super::rows::copy_rows;
use super::sum::column_sums_into;
use super::{as_u32, expect_f32, expect_shape};
use crate::error::{arg_err, shape_err, Result};
use crate::kernels::lstm::Params;
use crate::kernels::lstm_train::{BACKWARD_CELL, BACKWARD_H, BACKWARD_STATE, TRACE_CELL, TRACE_PROJECTION};
use crate::tensor::{DType, Tensor};

/// Invocations per workgroup (x); y runs over the batch.
const WG: usize = 64;

/// The matrices of one LSTM direction, row-major, as parameters or as their gradients:
/// `state_linearity.weight` [4·cell, proj] (gates input, forget, cell, output; PyTorch's
/// `weight_hh_l0`), `state_linearity.bias` [4·cell] (`bias_hh_l0`) and
/// `state_projection.weight` [proj, cell], which an LSTM without a projection lacks (proj = cell).
#[derive(Clone, Copy, Debug)]
pub struct LstmTensors<'a> {
    pub state_linearity: &'a Tensor,
    pub state_bias: &'a Tensor,
    pub state_projection: Option<&'a Tensor>,
}

impl LstmTensors<'_> {
    /// (cell, proj, whether there is a projection) after checking that the shapes agree.
    fn sizes(&self, op: &'static str, what: &'static str) -> Result<(usize, usize, bool)> {
        let (cell, proj) = match self.state_projection {
            Some(projection) => {
                expect_f32(op, what, projection, 2)?;
                (projection.shape()[1], projection.shape()[0])
            }
            None => {
                expect_f32(op, what, self.state_bias, 1)?;
                let cell = self.state_bias.shape()[0] / 4;
                (cell, cell)
            }
        };
        expect_shape(op, what, self.state_linearity, &[4 * cell, proj])?;
        expect_shape(op, what, self.state_bias, &[4 * cell])?;
        for t in [self.state_linearity, self.state_bias] {
            super::expect_dtype(op, what, t, DType::F32)?;
        }
        Ok((cell, proj, self.state_projection.is_some()))
    }

    /// What the kernels bind as W_proj: the projection, or (unread without one) the bias.
    fn projection_binding(&self) -> &Tensor {
        self.state_projection.unwrap_or(self.state_bias)
    }
}

/// What the traced forward recorded; [`lstm_sequence_backward`] consumes it.
pub struct LstmTrace {
    /// [B, T, proj]: h at every step, 0 at padded positions (as [`super::lstm::LstmOutput`]).
    pub outputs: Tensor,
    /// [B, T, cell, 4]: activated gates i, f, g, o.
    gates: Tensor,
    /// [B, T, cell, 2]: c before the clip, c.
    cells: Tensor,
    /// [B, T, cell]: o·tanh(c).
    m: Tensor,
    /// [B, T, proj]: h before the clip.
    h_pre: Tensor,
    lengths: Vec<usize>,
    lens: Tensor,
    cfg: LstmConfig,
    /// The kernels' params of the run (the backward sets `step` again).
    params: Params,
    cell: usize,
    /// The next step [`LstmTrace::step`] runs: steps run in order, each once.
    next: Cell<usize>,
}

/// [`super::lstm::lstm_sequence`] for training: the same outputs from `gates_x` [B, T, 4·cell],
/// with every step recorded for the backward.
pub fn lstm_sequence_traced(gates_x: &Tensor, lengths: &[usize], weights: &LstmTensors, cfg: &LstmConfig) -> Result<LstmTrace> {
    let trace = LstmTrace::start(gates_x, lengths, weights, cfg)?;
    for step in 0..trace.steps() {
        trace.step(step, gates_x, weights)?;
    }
    Ok(trace)
}

impl LstmTrace {
    /// An empty record of a run over `gates_x` [B, T, 4·cell], for a caller that runs the
    /// steps itself ([`LstmTrace::step`], 0 up to [`LstmTrace::steps`]): one whose input at a
    /// step depends on the output of the step before (a decoder's input feeding).
    pub fn start(gates_x: &Tensor, lengths: &[usize], weights: &LstmTensors, cfg: &LstmConfig) -> Result<LstmTrace> {
        let op = "lstm_traced";
        let sizes @ (cell, proj, _) = weights.sizes(op, "weights")?;
        let params = sequence_params(op, gates_x, lengths, sizes, cfg)?;
        let (batch, seq) = (gates_x.shape()[0], gates_x.shape()[1]);
        as_u32(op, "elements of the gate records", batch * seq * cell * 4)?;
        let gpu = gates_x.gpu();
        let lens: Vec<u32> = lengths.iter().map(|&l| l as u32).collect();
        let zeros = |shape: &[usize]| Tensor::zeros(gpu, shape, DType::F32);
        Ok(LstmTrace {
            outputs: zeros(&[batch, seq, proj])?,
            gates: zeros(&[batch, seq, cell, 4])?,
            cells: zeros(&[batch, seq, cell, 2])?,
            m: zeros(&[batch, seq, cell])?,
            h_pre: zeros(&[batch, seq, proj])?,
            lengths: lengths.to_vec(),
            lens: Tensor::from_slice(gpu, &lens, &[batch])?,
            cfg: *cfg,
            params,
            cell,
            next: Cell::new(0),
        })
    }

    /// How many steps the run takes: the longest sequence.
    pub fn steps(&self) -> usize {
        self.lengths.iter().copied().max().unwrap_or(0)
    }

    /// Runs step `step` (steps in order, each once) on `gates_x`, whose entries at `step` must
    /// be written by then; `gates_x` and `weights` of the shapes [`LstmTrace::start`] saw.
    pub fn step(&self, step: usize, gates_x: &Tensor, weights: &LstmTensors) -> Result<()> {
        let op = "lstm_traced";
        let (cell, proj, _) = weights.sizes(op, "weights")?;
        expect_f32(op, "gates_x", gates_x, 3)?;
        expect_shape(op, "gates_x", gates_x, &[self.lengths.len(), self.outputs.shape()[1], 4 * self.cell])?;
        if cell != self.cell || proj != self.outputs.shape()[2] {
            return Err(shape_err!(op, "weights of cell {cell}, proj {proj}: the run's are cell {}, proj {}", self.cell, self.outputs.shape()[2]));
        }
        // Each step reads the one before's records.
        if step != self.next.get() || step >= self.steps() {
            return Err(arg_err!(op, "step {step} run out of order: the run's next step is {} of {}", self.next.get(), self.steps()));
        }
        self.next.set(step + 1);
        let (t, w, gpu) = (self, weights, gates_x.gpu());
        let params = Params { step: step as u32, ..self.params };
        let (cell_grid, proj_grid) = grids(op, cell, proj, self.lengths.len())?;
        let cell_bindings = [
            (&t.lens).into(),
            gates_x.into(),
            w.state_linearity.into(),
            w.state_bias.into(),
            (&t.outputs).into(),
            (&t.gates).into(),
            (&t.cells).into(),
            (&t.m).into(),
        ];
        gpu.dispatch(&TRACE_CELL, &[], &params, &cell_bindings, cell_grid)?;
        let proj_bindings = [(&t.lens).into(), w.projection_binding().into(), (&t.m).into(), (&t.h_pre).into(), (&t.outputs).into()];
        gpu.dispatch(&TRACE_PROJECTION, &[], &params, &proj_bindings, proj_grid)
    }
}

/// Workgroups of the per-cell and per-projection-element kernels.
fn grids(op: &'static str, cell: usize, proj: usize, batch: usize) -> Result<([u32; 3], [u32; 3])> {
    let batch = as_u32(op, "batch", batch)?;
    Ok(([as_u32(op, "cell groups", cell.div_ceil(WG))?, batch, 1], [as_u32(op, "projection groups", proj.div_ceil(WG))?, batch, 1]))
}

/// Backpropagates `d_outputs` [B, T, proj] (the loss gradient at every output; padded rows
/// are ignored) through the traced run: adds the weight gradients into `grads` and returns
/// the gradient of `gates_x` [B, T, 4·cell] (0 at padded positions).
pub fn lstm_sequence_backward(trace: &LstmTrace, weights: &LstmTensors, d_outputs: &Tensor, grads: &LstmTensors) -> Result<Tensor> {
    let backward = LstmBackward::start(trace, weights, grads)?;
    for step in (0..trace.steps()).rev() {
        backward.step(step, weights, d_outputs)?;
    }
    backward.finish(grads)
}

/// Backpropagation through time a step at a time (steps from the last to 0, each once), for
/// a caller whose loss gradient at a step's output depends on the gradient of a later step's
/// input (a decoder's input feeding); [`LstmBackward::finish`] adds the weight gradients.
pub struct LstmBackward<'a> {
    trace: &'a LstmTrace,
    /// The steps not backpropagated yet: the next one is `remaining − 1`.
    remaining: Cell<usize>,
    /// The state gradients carried from the step after: dh [B, proj], dc [B, cell].
    dh_carry: Tensor,
    dc_carry: Tensor,
    /// [B, T, proj]: the gradient of h before the clip.
    dh_pre: Tensor,
    d_gates: Tensor,
}

impl<'a> LstmBackward<'a> {
    /// Checks that `weights` and their gradients `grads` fit the run `trace` recorded.
    pub fn start(trace: &'a LstmTrace, weights: &LstmTensors, grads: &LstmTensors) -> Result<LstmBackward<'a>> {
        let op = "lstm_backward";
        let sizes @ (cell, proj, project) = weights.sizes(op, "weights")?;
        if grads.sizes(op, "grads")? != sizes || cell != trace.cell || project != (trace.params.project != 0) {
            return Err(shape_err!(
                op,
                "weights (cell {cell}, proj {proj}, projected: {project}), their gradients and the trace (cell {}, projected: {}) disagree",
                trace.cell,
                trace.params.project != 0
            ));
        }
        if trace.next.get() != trace.steps() {
            return Err(arg_err!(op, "the traced run stopped at step {} of {}: finish its forward first", trace.next.get(), trace.steps()));
        }
        let (batch, seq) = (trace.outputs.shape()[0], trace.outputs.shape()[1]);
        let zeros = |shape: &[usize]| Tensor::zeros(trace.outputs.gpu(), shape, DType::F32);
        Ok(LstmBackward {
            trace,
            remaining: Cell::new(trace.steps()),
            dh_carry: zeros(&[batch, proj])?,
            dc_carry: zeros(&[batch, cell])?,
            dh_pre: zeros(&[batch, seq, proj])?,
            d_gates: zeros(&[batch, seq, 4 * cell])?,
        })
    }

    /// Backpropagates step `step` with `d_outputs` [B, T, proj], whose entries at `step` must
    /// be final by then; the step's entries of [`LstmBackward::d_gates`] are then final.
    pub fn step(&self, step: usize, weights: &LstmTensors, d_outputs: &Tensor) -> Result<()> {
        let op = "lstm_backward";
        expect_f32(op, "d_outputs", d_outputs, 3)?;
        expect_shape(op, "d_outputs", d_outputs, self.trace.outputs.shape())?;
        let (cell, proj, _) = weights.sizes(op, "weights")?;
        if cell != self.trace.cell || proj != self.trace.outputs.shape()[2] {
            return Err(shape_err!(op, "weights of cell {cell}, proj {proj}: the run's are cell {}, proj {}", self.trace.cell, self.trace.outputs.shape()[2]));
        }
        // The carried state gradients come from the step after: from the last step down, each once.
        if self.remaining.get() == 0 || step != self.remaining.get() - 1 {
            return Err(arg_err!(op, "step {step} backpropagated out of order: the next is {} (from the last step down)", self.remaining.get() as isize - 1));
        }
        self.remaining.set(step);
        let (t, w, lens, gpu) = (self.trace, weights, &self.trace.lens, d_outputs.gpu());
        let params = Params { step: step as u32, ..t.params };
        let (cell_grid, proj_grid) = grids(op, cell, proj, t.lengths.len())?;
        gpu.dispatch(
            &BACKWARD_H,
            &[],
            &params,
            &[lens.into(), d_outputs.into(), (&t.h_pre).into(), (&self.dh_carry).into(), (&self.dh_pre).into()],
            proj_grid,
        )?;
        let cell_bindings = [
            lens.into(),
            (&self.dh_pre).into(),
            w.projection_binding().into(),
            (&t.gates).into(),
            (&t.cells).into(),
            (&self.dc_carry).into(),
            (&self.d_gates).into(),
        ];
        gpu.dispatch(&BACKWARD_CELL, &[], &params, &cell_bindings, cell_grid)?;
        // Step 0's state gradient would reach the zero initial state: nothing to carry.
        if step > 0 {
            gpu.dispatch(&BACKWARD_STATE, &[], &params, &[lens.into(), (&self.d_gates).into(), w.state_linearity.into(), (&self.dh_carry).into()], proj_grid)?;
        }
        Ok(())
    }

    /// The gradient of `gates_x` [B, T, 4·cell] (0 at padded positions); final at the steps run.
    pub fn d_gates(&self) -> &Tensor {
        &self.d_gates
    }

    /// After step 0: adds the weight gradients into `grads` and returns the gradient of
    /// `gates_x`.
    pub fn finish(self, grads: &LstmTensors) -> Result<Tensor> {
        let t = self.trace;
        if self.remaining.get() != 0 {
            return Err(arg_err!("lstm_backward", "finished with {} steps not backpropagated", self.remaining.get()));
        }
        let (batch, seq, proj, cell) = (t.outputs.shape()[0], t.outputs.shape()[1], t.outputs.shape()[2], t.cell);
        // h_prev of every step: the output row of the item's previous step (0 at its first).
        let rows = batch * seq;
        let h_prev = Tensor::zeros(t.outputs.gpu(), &[rows, proj], DType::F32)?;
        let pairs: Vec<(usize, usize)> = t
            .lengths
            .iter()
            .enumerate()
            .flat_map(|(b, &len)| {
                let time = move |s: usize| b * seq + if t.cfg.reverse { len - 1 - s } else { s };
                (1..len).map(move |s| (time(s - 1), time(s)))
            })
            .collect();
        copy_rows(&t.outputs.reshape(&[rows, proj])?, &h_prev, 0, &pairs)?;
        let d_gates_rows = self.d_gates.reshape(&[rows, 4 * cell])?;
        let transposed = Matmul { trans_a: true, ..Default::default() };
        matmul_accumulate(&d_gates_rows, &h_prev, transposed, grads.state_linearity)?;
        column_sums_into(&d_gates_rows, grads.state_bias)?;
        if let Some(d_projection) = grads.state_projection {
            matmul_accumulate(&self.dh_pre.reshape(&[rows, proj])?, &t.m.reshape(&[rows, cell])?, transposed, d_projection)?;
        }
        Ok(self.d_gates)
    }
}

/// The gradients of an LSTM run on the CPU, in f64 then rounded.
#[cfg(test)]
pub(crate) struct LstmGradsReference {
    /// [B, T, 4·cell], 0 at padded positions.
    pub d_gates_x: Vec<f32>,
    pub state_linearity: Vec<f32>,
    pub state_bias: Vec<f32>,
    /// None without a projection.
    pub state_projection: Option<Vec<f32>>,
}

#[cfg(test)]
/// CPU reference of [`lstm_sequence_backward`] on row-major host data: the gradients of
/// Σ d_outputs·outputs for the run [`super::lstm::lstm_reference`] describes.
pub(crate) fn lstm_backward_reference(gates_x: &[f32], lengths: &[usize], seq: usize, w: &HostLstm, cfg: &LstmConfig, d_outputs: &[f32]) -> LstmGradsReference {
    let (cell, proj) = (w.cell(), w.proj());
    let mut d_gates_x = vec![0f64; lengths.len() * seq * 4 * cell];
    let (mut d_state, mut d_bias, mut d_proj) = (vec![0f64; 4 * cell * proj], vec![0f64; 4 * cell], vec![0f64; proj * cell]);
    let passes = |x: f64, limit: Option<f32>| limit.is_none_or(|l| x.abs() <= l as f64);
    for (b, steps) in lstm_record(gates_x, lengths, seq, w, cfg).iter().enumerate() {
        let (mut dh_carry, mut dc_carry) = (vec![0f64; proj], vec![0f64; cell]);
        for step in steps.iter().rev() {
            let row = b * seq + step.t;
            let dh_pre: Vec<f64> =
                (0..proj).map(|k| if passes(step.h_pre[k], cfg.proj_clip) { d_outputs[row * proj + k] as f64 + dh_carry[k] } else { 0.0 }).collect();
            let [i, f, g, o] = &step.gates;
            let d_gates = &mut d_gates_x[row * 4 * cell..][..4 * cell];
            for j in 0..cell {
                let dm: f64 = match w.state_projection {
                    Some(w_proj) => {
                        for (k, &d) in dh_pre.iter().enumerate() {
                            d_proj[k * cell + j] += d * step.m[j];
                        }
                        (0..proj).map(|k| dh_pre[k] * w_proj[k * cell + j] as f64).sum()
                    }
                    None => dh_pre[j],
                };
                let tanh_c = step.c[j].tanh();
                let mut dc = dc_carry[j] + dm * o[j] * (1.0 - tanh_c * tanh_c);
                if !passes(step.c_pre[j], cfg.cell_clip) {
                    dc = 0.0;
                }
                dc_carry[j] = dc * f[j];
                d_gates[j] = dc * g[j] * i[j] * (1.0 - i[j]);
                d_gates[cell + j] = dc * step.c_prev[j] * f[j] * (1.0 - f[j]);
                d_gates[2 * cell + j] = dc * i[j] * (1.0 - g[j] * g[j]);
                d_gates[3 * cell + j] = dm * tanh_c * o[j] * (1.0 - o[j]);
            }
            for (r, &d) in d_gates.iter().enumerate() {
                d_bias[r] += d;
                for k in 0..proj {
                    d_state[r * proj + k] += d * step.h_prev[k];
                }
            }
            dh_carry = (0..proj).map(|k| d_gates.iter().enumerate().map(|(r, &d)| d * w.state_linearity[r * proj + k] as f64).sum()).collect();
        }
    }
    let f32s = |v: Vec<f64>| v.into_iter().map(|x| x as f32).collect();
    LstmGradsReference {
        d_gates_x: f32s(d_gates_x),
        state_linearity: f32s(d_state),
        state_bias: f32s(d_bias),
        state_projection: w.state_projection.map(|_| f32s(d_proj)),
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::gpu::testing::devices;
    use crate::ops::lstm::lstm_reference;
    use crate::ops::testing::{assert_close, numeric_gradient, random_vec, rng};
    use pollster::block_on;

    struct Case {
        gates_x: Vec<f32>,
        state_linearity: Vec<f32>,
        state_bias: Vec<f32>,
        state_projection: Option<Vec<f32>>,
        d_outputs: Vec<f32>,
        lengths: Vec<usize>,
        seq: usize,
    }

    impl Case {
        fn new(seed: u64, lengths: &[usize], seq: usize, cell: usize, proj: usize) -> Case {
            let mut rng = rng(seed);
            let batch = lengths.len();
            Case {
                gates_x: random_vec(&mut rng, batch * seq * 4 * cell, 1.5),
                state_linearity: random_vec(&mut rng, 4 * cell * proj, 0.6),
                state_bias: random_vec(&mut rng, 4 * cell, 0.5),
                state_projection: Some(random_vec(&mut rng, proj * cell, 0.8)),
                d_outputs: random_vec(&mut rng, batch * seq * proj, 1.0),
                lengths: lengths.to_vec(),
                seq,
            }
        }

        /// A case without a projection (proj = cell).
        fn plain(seed: u64, lengths: &[usize], seq: usize, cell: usize) -> Case {
            Case { state_projection: None, ..Case::new(seed, lengths, seq, cell, cell) }
        }

        fn host(&self) -> HostLstm<'_> {
            HostLstm { state_linearity: &self.state_linearity, state_bias: &self.state_bias, state_projection: self.state_projection.as_deref() }
        }

        /// Σ d_outputs·outputs of the f64 reference run with some inputs replaced.
        fn loss(&self, gates_x: &[f32], w: &HostLstm, cfg: &LstmConfig) -> f64 {
            let proj = w.proj();
            let mut loss = 0.0;
            for (b, steps) in lstm_record(gates_x, &self.lengths, self.seq, w, cfg).iter().enumerate() {
                for step in steps {
                    loss += step.h.iter().enumerate().map(|(k, &h)| h * self.d_outputs[(b * self.seq + step.t) * proj + k] as f64).sum::<f64>();
                }
            }
            loss
        }
    }

    #[test]
    fn backward_reference_matches_finite_differences() {
        // Clips that bind on some values (checked below) but leave the rest differentiable.
        let clips = LstmConfig { cell_clip: Some(0.4), proj_clip: Some(0.05), reverse: true };
        let (projected, plain) = (Case::new(1, &[3, 2], 3, 3, 2), Case::plain(2, &[3, 2], 3, 3));
        for (case, cfg) in [(&projected, LstmConfig::default()), (&projected, clips), (&plain, LstmConfig::default()), (&plain, clips)] {
            let w = case.host();
            let records = lstm_record(&case.gates_x, &case.lengths, case.seq, &w, &cfg);
            if cfg.cell_clip.is_some() {
                assert!(records.iter().flatten().any(|s| s.c_pre.iter().any(|v| v.abs() > 0.4)), "the cell clip never binds");
                assert!(records.iter().flatten().any(|s| s.h_pre.iter().any(|v| v.abs() > 0.05)), "the projection clip never binds");
            }
            let got = lstm_backward_reference(&case.gates_x, &case.lengths, case.seq, &w, &cfg, &case.d_outputs);
            let h = 1e-3;
            let name = |what: &str| format!("lstm {what} vs finite differences {cfg:?}, projected: {}", w.state_projection.is_some());
            let numeric = numeric_gradient(&case.gates_x, h, |x| case.loss(x, &w, &cfg));
            assert_close(&name("d_gates_x"), &got.d_gates_x, &numeric, 1e-4, 1e-3);
            let numeric = numeric_gradient(&case.state_linearity, h, |v| case.loss(&case.gates_x, &HostLstm { state_linearity: v, ..w }, &cfg));
            assert_close(&name("d state_linearity"), &got.state_linearity, &numeric, 1e-4, 1e-3);
            let numeric = numeric_gradient(&case.state_bias, h, |v| case.loss(&case.gates_x, &HostLstm { state_bias: v, ..w }, &cfg));
            assert_close(&name("d state_bias"), &got.state_bias, &numeric, 1e-4, 1e-3);
            match (&case.state_projection, &got.state_projection) {
                (Some(projection), Some(got)) => {
                    let numeric = numeric_gradient(projection, h, |v| case.loss(&case.gates_x, &HostLstm { state_projection: Some(v), ..w }, &cfg));
                    assert_close(&name("d state_projection"), got, &numeric, 1e-4, 1e-3);
                }
                (None, None) => {}
                _ => panic!("{}: a projection's gradient without a projection, or none with one", name("d state_projection")),
            }
        }
    }

    /// Runs the traced forward and the backward on each device (gradients accumulated onto
    /// non-zero starting values) and compares both with the CPU references.
    fn check(seed: u64, lengths: &[usize], seq: usize, cell: usize, proj: usize, cfg: &LstmConfig) {
        check_case(seed, &Case::new(seed, lengths, seq, cell, proj), cfg);
    }

    fn check_case(seed: u64, case: &Case, cfg: &LstmConfig) {
        let (lengths, seq, cell, proj) = (&case.lengths[..], case.seq, case.host().cell(), case.host().proj());
        let batch = lengths.len();
        let mut rng = rng(seed + 100);
        let start = [random_vec(&mut rng, 4 * cell * proj, 1.0), random_vec(&mut rng, 4 * cell, 1.0), random_vec(&mut rng, proj * cell, 1.0)];
        let (outputs, _, _) = lstm_reference(&case.gates_x, lengths, seq, &case.host(), cfg);
        let want = lstm_backward_reference(&case.gates_x, lengths, seq, &case.host(), cfg, &case.d_outputs);
        for gpu in devices() {
            let up = |v: &[f32], shape: &[usize]| Tensor::from_slice(gpu, v, shape).unwrap();
            let (w_state, w_bias) = (up(&case.state_linearity, &[4 * cell, proj]), up(&case.state_bias, &[4 * cell]));
            let w_proj = case.state_projection.as_ref().map(|w| up(w, &[proj, cell]));
            let weights = LstmTensors { state_linearity: &w_state, state_bias: &w_bias, state_projection: w_proj.as_ref() };
            let (g_state, g_bias, g_proj) = (up(&start[0], &[4 * cell, proj]), up(&start[1], &[4 * cell]), up(&start[2], &[proj, cell]));
            let grads = LstmTensors { state_linearity: &g_state, state_bias: &g_bias, state_projection: w_proj.as_ref().map(|_| &g_proj) };

            let gates_x = up(&case.gates_x, &[batch, seq, 4 * cell]);
            let trace = lstm_sequence_traced(&gates_x, lengths, &weights, cfg).unwrap();
            let d_outputs = up(&case.d_outputs, &[batch, seq, proj]);
            let d_gates_x = lstm_sequence_backward(&trace, &weights, &d_outputs, &grads).unwrap();

            let get = |t: &Tensor| block_on(t.to_vec::<f32>()).unwrap();
            let name = format!("lstm lengths {lengths:?} T{seq} cell{cell} proj{proj} {cfg:?} on {}", gpu.adapter_info().name);
            assert_close(&format!("{name} traced outputs"), &get(&trace.outputs), &outputs, 1e-5, 1e-5);
            // Backpropagation sums over ≤ 7 steps of ≤ 4·70 products; f32 against f64.
            let tol = 2e-5;
            assert_close(&format!("{name} d_gates_x"), &get(&d_gates_x), &want.d_gates_x, tol, tol);
            let added = |t: &Tensor, start: &[f32]| get(t).iter().zip(start).map(|(g, s)| g - s).collect::<Vec<_>>();
            assert_close(&format!("{name} d state_linearity"), &added(&g_state, &start[0]), &want.state_linearity, tol, tol);
            assert_close(&format!("{name} d state_bias"), &added(&g_bias, &start[1]), &want.state_bias, tol, tol);
            match &want.state_projection {
                Some(want) => assert_close(&format!("{name} d state_projection"), &added(&g_proj, &start[2]), want, tol, tol),
                None => assert_eq!(get(&g_proj), start[2], "{name}: the unused projection's gradient changed"),
            }
        }
    }

    #[test]
    fn ragged_traced_runs_and_their_backward_match_the_references() {
        let clips = LstmConfig { cell_clip: Some(0.6), proj_clip: Some(0.5), reverse: false };
        for reverse in [false, true] {
            check(2, &[5, 3, 1], 6, 37, 13, &LstmConfig { reverse, ..Default::default() });
            check(3, &[5, 3, 1], 6, 37, 13, &LstmConfig { reverse, ..clips });
        }
        // Sizes past one workgroup of 64 and single steps.
        check(4, &[3, 2], 3, 70, 65, &clips);
        check(5, &[1], 1, 1, 1, &LstmConfig { reverse: true, ..clips });
        check(6, &[2, 7, 7, 1, 4], 7, 9, 5, &LstmConfig { reverse: true, ..clips });
        // Without a projection (PyTorch's nn.LSTM): h = m.
        check_case(7, &Case::plain(7, &[5, 3, 1], 6, 13), &LstmConfig::default());
        check_case(8, &Case::plain(8, &[3, 2], 3, 70), &LstmConfig { reverse: true, ..clips });
    }

    #[test]
    fn mismatched_operands_are_errors() {
        for gpu in devices() {
            let device = &gpu.adapter_info().name;
            let (cell, proj) = (3, 2);
            let z = |shape: &[usize]| Tensor::zeros(gpu, shape, DType::F32).unwrap();
            let (w_state, w_bias, w_proj) = (z(&[4 * cell, proj]), z(&[4 * cell]), z(&[proj, cell]));
            let weights = LstmTensors { state_linearity: &w_state, state_bias: &w_bias, state_projection: Some(&w_proj) };
            let short_bias = z(&[4 * cell - 1]);
            let bad = LstmTensors { state_bias: &short_bias, ..weights };
            let gates = z(&[2, 3, 4 * cell]);
            let cfg = LstmConfig::default();
            assert!(lstm_sequence_traced(&gates, &[3, 1], &bad, &cfg).is_err(), "bias length on {device}");
            assert!(lstm_sequence_traced(&gates, &[4, 1], &weights, &cfg).is_err(), "length past T on {device}");
            assert!(lstm_sequence_traced(&z(&[2, 3, 16]), &[3, 1], &weights, &cfg).is_err(), "gates_x for cell 4 on {device}");
            let trace = lstm_sequence_traced(&gates, &[3, 1], &weights, &cfg).unwrap();
            let (g_state, g_bias, g_proj) = (z(&[4 * cell, proj]), z(&[4 * cell]), z(&[proj, cell]));
            let grads = LstmTensors { state_linearity: &g_state, state_bias: &g_bias, state_projection: Some(&g_proj) };
            if let Err(e) = lstm_sequence_backward(&trace, &weights, &z(&[2, 3, proj]), &grads) {
                panic!("backward on {device}: {e}");
            }
            assert!(lstm_sequence_backward(&trace, &weights, &z(&[2, 2, proj]), &grads).is_err(), "d_outputs shape on {device}");
            assert!(lstm_sequence_backward(&trace, &weights, &z(&[2, 3, proj]), &bad).is_err(), "gradient shapes on {device}");
            let wide = z(&[proj + 1, cell]);
            assert!(
                lstm_sequence_backward(&trace, &LstmTensors { state_projection: Some(&wide), ..weights }, &z(&[2, 3, proj]), &grads).is_err(),
                "weights for another proj on {device}"
            );
            let unprojected = LstmTensors { state_projection: None, ..grads };
            assert!(lstm_sequence_backward(&trace, &weights, &z(&[2, 3, proj]), &unprojected).is_err(), "gradients without the projection on {device}");
            // Without a projection h has the cell's size: a state weight for another h is wrong.
            assert!(lstm_sequence_traced(&gates, &[3, 1], &LstmTensors { state_projection: None, ..weights }, &cfg).is_err(), "proj ≠ cell on {device}");
            // A step at a time: each step reads the one before's records, so the order is checked.
            let stepped = LstmTrace::start(&gates, &[3, 1], &weights, &cfg).unwrap();
            assert!(stepped.step(1, &gates, &weights).is_err(), "a skipped step on {device}");
            stepped.step(0, &gates, &weights).unwrap();
            assert!(stepped.step(0, &gates, &weights).is_err(), "a repeated step on {device}");
            assert!(LstmBackward::start(&stepped, &weights, &grads).is_err(), "a backward before the forward's end on {device}");
            stepped.step(1, &gates, &weights).unwrap();
            stepped.step(2, &gates, &weights).unwrap();
            assert!(stepped.step(3, &gates, &weights).is_err(), "a step past the longest sequence on {device}");
            let backward = LstmBackward::start(&stepped, &weights, &grads).unwrap();
            let d_outputs = z(&[2, 3, proj]);
            assert!(backward.step(0, &weights, &d_outputs).is_err(), "the first step before the last on {device}");
            backward.step(2, &weights, &d_outputs).unwrap();
            assert!(backward.step(2, &weights, &d_outputs).is_err(), "a step twice on {device}");
            backward.step(1, &weights, &d_outputs).unwrap();
            let unfinished = LstmBackward::start(&stepped, &weights, &grads).unwrap();
            assert!(unfinished.finish(&grads).is_err(), "finished before step 0 on {device}");
            backward.step(0, &weights, &d_outputs).unwrap();
            backward.finish(&grads).unwrap();
        }
    }
}
