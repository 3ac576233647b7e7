//! The LSTM recurrence (`shaders/lstm.wgsl`) with a projected state, as ELMo's biLM runs it
//! (AllenNLP `LstmCellWithProjection`, bilm-tf: cell size ≫ projection size, optional cell and
//! projection clipping), or without one, as PyTorch's `nn.LSTM` (AWD-LSTM, CoVe); ragged
//! batches either way.
//!
//! The input projection x·W_inputᵀ of all time steps is one matmul done by the caller; this op
//! runs the sequential part. Each step is two small dispatches — the gates and cell update
//! (parallel over cells), then the projection (parallel over projection outputs), each
//! invocation stepping a tile of up to 8 batch items so that a weight read serves them all —
//! and the whole sequence is recorded into the pending batch, so it is submitted as one command
//! buffer. The state lives in GPU tensors throughout.

use super::{as_u32, expect_f32};
use crate::error::{arg_err, shape_err, Result};
use crate::gpu::Device;
use crate::kernels::lstm::{Params, CELL, PROJECTION};
use crate::tensor::{DType, Tensor};

/// Invocations per workgroup of both kernels.
const WG: usize = 64;
/// The most batch items one invocation steps together (the unrolled accumulators of the shader).
const MAX_TILE: usize = 8;
/// Outputs per block of the weight layouts (`BLOCK` in the shader).
const BLOCK: usize = 8;

/// Batch items per invocation: the batch rounded up to a power of two, at most [`MAX_TILE`].
/// Larger tiles read each weight once for more items; a tile past the batch wastes work.
fn batch_tile(batch: usize) -> usize {
    batch.next_power_of_two().min(MAX_TILE)
}

/// The recurrent weights of one LSTM, laid out for the step kernels (see `shaders/lstm.wgsl`).
/// Built from row-major checkpoint tensors by [`LstmWeights::new`].
#[derive(Clone, Debug)]
pub struct LstmWeights {
    /// `state_linearity.weight` regrouped as [cell/8, proj, 8, 4]: the four gates of cell j
    /// for state element k side by side, in blocks of 8 cells (cell padded with zeros).
    state_gates: Tensor,
    /// `state_linearity.bias` regrouped as [cell, 4].
    state_bias: Tensor,
    /// `state_projection.weight` as [proj/8, cell/4, 8, 4]: transposed in blocks of 8 outputs,
    /// 4 consecutive cells side by side (cell padded with zeros); four unread 0s without one.
    projection: Tensor,
    /// Whether h = m·W_projᵀ (else h = m and proj = cell).
    project: bool,
    cell: usize,
    proj: usize,
}

impl LstmWeights {
    /// From row-major host tensors with gate blocks input, forget, cell, output: the state's
    /// weight [4·cell, proj] and bias [4·cell] (AllenNLP's `state_linearity`, PyTorch's
    /// `weight_hh_l0` and `bias_hh_l0`) and the projection [proj, cell] (AllenNLP's
    /// `state_projection.weight`, no bias), or none for an LSTM without one (proj = cell).
    pub fn new(gpu: &Device, state_linearity: &[f32], state_bias: &[f32], state_projection: Option<&[f32]>, cell: usize, proj: usize) -> Result<Self> {
        let op = "lstm";
        if cell == 0 || proj == 0 {
            return Err(arg_err!(op, "cell ({cell}) and projection ({proj}) sizes must be positive"));
        }
        if state_projection.is_none() && proj != cell {
            return Err(shape_err!(op, "an LSTM without a projection has h of the cell's size ({cell}), not {proj}"));
        }
        let expect = |what: &str, got: usize, want: usize, shape: &str| {
            if got == want {
                Ok(())
            } else {
                Err(shape_err!(op, "{what} has {got} values, expected {shape} = {want}"))
            }
        };
        expect("state_linearity.weight", state_linearity.len(), 4 * cell * proj, &format!("[4·{cell}, {proj}]"))?;
        expect("state_linearity.bias", state_bias.len(), 4 * cell, &format!("[4·{cell}]"))?;
        if let Some(state_projection) = state_projection {
            expect("state_projection.weight", state_projection.len(), proj * cell, &format!("[{proj}, {cell}]"))?;
        }
        // Element (row, col) of a [rows, cols] matrix goes to block row / BLOCK, position col in
        // it, lane row % BLOCK; rows is padded up to whole blocks.
        let blocked = |row: usize, col: usize, cols: usize| (row / BLOCK * cols + col) * BLOCK + row % BLOCK;
        let (cell_padded, proj_padded) = (cell.next_multiple_of(BLOCK), proj.next_multiple_of(BLOCK));
        let mut gates = vec![0f32; 4 * cell_padded * proj];
        as_u32(op, "elements of state_linearity (padded)", gates.len())?;
        for (row, weights) in state_linearity.chunks_exact(proj).enumerate() {
            let (gate, j) = (row / cell, row % cell);
            for (k, &w) in weights.iter().enumerate() {
                gates[blocked(j, k, proj) * 4 + gate] = w;
            }
        }
        let bias: Vec<f32> = (0..4 * cell).map(|i| state_bias[(i % 4) * cell + i / 4]).collect();
        let projection = match state_projection {
            Some(state_projection) => {
                let quads = cell.div_ceil(4);
                let mut projection = vec![0f32; proj_padded * quads * 4];
                for (k, weights) in state_projection.chunks_exact(cell).enumerate() {
                    for (j, &w) in weights.iter().enumerate() {
                        projection[blocked(k, j / 4, quads) * 4 + j % 4] = w;
                    }
                }
                Tensor::from_slice(gpu, &projection, &[proj_padded / BLOCK, quads, BLOCK, 4])?
            }
            // One vec4, the smallest binding the shader accepts.
            None => Tensor::zeros(gpu, &[1, 1, 1, 4], DType::F32)?,
        };
        Ok(LstmWeights {
            state_gates: Tensor::from_slice(gpu, &gates, &[cell_padded / BLOCK, proj, BLOCK, 4])?,
            state_bias: Tensor::from_slice(gpu, &bias, &[cell, 4])?,
            projection,
            project: state_projection.is_some(),
            cell,
            proj,
        })
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LstmConfig {
    /// Clamp the cell state to ±this after each update (ELMo: 3).
    pub cell_clip: Option<f32>,
    /// Clamp the projected state to ±this (ELMo: 3).
    pub proj_clip: Option<f32>,
    /// Run from each sequence's last token to its first (the backward direction).
    pub reverse: bool,
}

#[derive(Clone, Debug)]
pub struct LstmOutput {
    /// [B, T, proj]: h at every time step; 0 at padded positions t ≥ length.
    pub outputs: Tensor,
    /// [B, proj]: h after each item's last step.
    pub h: Tensor,
    /// [B, cell]: c after each item's last step.
    pub c: Tensor,
}

fn check_clip(op: &'static str, what: &str, clip: Option<f32>) -> Result<(u32, f32)> {
    match clip {
        None => Ok((0, 0.0)),
        Some(v) if v > 0.0 && v.is_finite() => Ok((1, v)),
        Some(v) => Err(arg_err!(op, "{what} must be positive and finite (or None), got {v}")),
    }
}

/// Checks `gates_x` [B, T, 4·cell] and `lengths` (each in 1..=T) against the sizes of the
/// weights (`project`: whether they have a projection) and `cfg`; returns the kernels' params
/// at step 0. Shared with the training kernels.
pub(super) fn sequence_params(
    op: &'static str,
    gates_x: &Tensor,
    lengths: &[usize],
    (cell, proj, project): (usize, usize, bool),
    cfg: &LstmConfig,
) -> Result<Params> {
    expect_f32(op, "gates_x", gates_x, 3)?;
    let (batch, seq, four_cell) = (gates_x.shape()[0], gates_x.shape()[1], gates_x.shape()[2]);
    if four_cell != 4 * cell {
        return Err(shape_err!(op, "gates_x {:?} is for cell {}, the weights for cell {cell}", gates_x.shape(), four_cell / 4));
    }
    if lengths.len() != batch {
        return Err(shape_err!(op, "{} lengths for a batch of {batch}", lengths.len()));
    }
    if let Some(bad) = lengths.iter().find(|&&l| l == 0 || l > seq) {
        return Err(arg_err!(op, "length {bad} is outside 1..={seq}"));
    }
    let (clip_cell, cell_clip) = check_clip(op, "cell_clip", cfg.cell_clip)?;
    let (clip_proj, proj_clip) = check_clip(op, "proj_clip", cfg.proj_clip)?;
    as_u32(op, "elements of gates_x", gates_x.numel())?;
    as_u32(op, "elements of the outputs", batch * seq * proj)?;
    Ok(Params {
        batch: as_u32(op, "batch", batch)?,
        seq: as_u32(op, "T", seq)?,
        cell: as_u32(op, "cell", cell)?,
        proj: as_u32(op, "proj", proj)?,
        step: 0,
        reverse: cfg.reverse as u32,
        clip_cell,
        clip_proj,
        cell_clip,
        proj_clip,
        project: project as u32,
        _pad: 0,
    })
}

/// Runs the recurrence over `gates_x` [B, T, 4·cell] (x·W_inputᵀ for every step, no bias)
/// from zero state. `lengths[b]` ∈ 1..=T is item b's length; state stops updating after it.
pub fn lstm_sequence(gates_x: &Tensor, lengths: &[usize], weights: &LstmWeights, cfg: &LstmConfig) -> Result<LstmOutput> {
    let op = "lstm";
    let (cell, proj) = (weights.cell, weights.proj);
    let mut params = sequence_params(op, gates_x, lengths, (cell, proj, weights.project), cfg)?;
    let (batch, seq) = (gates_x.shape()[0], gates_x.shape()[1]);
    let gpu = gates_x.gpu();
    let lens: Vec<u32> = lengths.iter().map(|&l| l as u32).collect();
    let lens = Tensor::from_slice(gpu, &lens, &[batch])?;
    let outputs = Tensor::zeros(gpu, &[batch, seq, proj], DType::F32)?;
    let h = Tensor::zeros(gpu, &[batch, proj], DType::F32)?;
    let c = Tensor::zeros(gpu, &[batch, cell], DType::F32)?;
    let m = Tensor::empty(gpu, &[batch, cell], DType::F32)?;
    let tile = batch_tile(batch);
    let tiles = as_u32(op, "batch tiles", batch.div_ceil(tile))?;
    let overrides = [("BATCH_TILE", tile as u32)];
    let (cell_grid, proj_grid) = ([cell.div_ceil(WG) as u32, tiles, 1], [proj.div_ceil(WG) as u32, tiles, 1]);
    let w = weights;
    let steps = lengths.iter().copied().max().unwrap_or(0);
    for step in 0..steps {
        params.step = step as u32;
        let cell_bindings = [(&lens).into(), gates_x.into(), (&w.state_gates).into(), (&w.state_bias).into(), (&h).into(), (&c).into(), (&m).into()];
        gpu.dispatch(&CELL, &overrides, &params, &cell_bindings, cell_grid)?;
        let proj_bindings = [(&lens).into(), (&w.projection).into(), (&m).into(), (&h).into(), (&outputs).into()];
        gpu.dispatch(&PROJECTION, &overrides, &params, &proj_bindings, proj_grid)?;
    }
    Ok(LstmOutput { outputs, h, c })
}

/// One step of one item as the CPU references record it, in f64.
#[cfg(test)]
pub(crate) struct StepRecord {
    /// The time index the step works on.
    pub t: usize,
    /// The state it starts from: h [proj] and c [cell] (0 at the item's first step).
    pub h_prev: Vec<f64>,
    pub c_prev: Vec<f64>,
    /// Activated gates, [cell] each: input, forget, cell (tanh), output.
    pub gates: [Vec<f64>; 4],
    /// c before and after the cell clip, m = o·tanh(c), [cell] each.
    pub c_pre: Vec<f64>,
    pub c: Vec<f64>,
    pub m: Vec<f64>,
    /// h before and after the projection clip, [proj] each.
    pub h_pre: Vec<f64>,
    pub h: Vec<f64>,
}

/// The LSTM weights in their row-major host layout (see [`LstmWeights::new`]).
#[derive(Clone, Copy, Debug)]
pub struct HostLstm<'a> {
    pub state_linearity: &'a [f32],
    pub state_bias: &'a [f32],
    pub state_projection: Option<&'a [f32]>,
}

impl HostLstm<'_> {
    pub fn cell(&self) -> usize {
        self.state_bias.len() / 4
    }

    pub fn proj(&self) -> usize {
        self.state_projection.map_or(self.cell(), |w| w.len() / self.cell())
    }
}

/// The CPU references' forward: every item's steps in the order they run (item b's first
/// step is at its last token in reverse), for `gates_x` [B, T, 4·cell] and B = `lengths.len()`.
#[cfg(test)]
pub(crate) fn lstm_record(gates_x: &[f32], lengths: &[usize], seq: usize, w: &HostLstm, cfg: &LstmConfig) -> Vec<Vec<StepRecord>> {
    let (cell, proj) = (w.cell(), w.proj());
    let sigmoid = |x: f64| 1.0 / (1.0 + (-x).exp());
    let clip = |x: f64, limit: Option<f32>| limit.map_or(x, |l| x.clamp(-(l as f64), l as f64));
    let mut items = Vec::with_capacity(lengths.len());
    for (b, &len) in lengths.iter().enumerate() {
        let (mut h, mut c) = (vec![0f64; proj], vec![0f64; cell]);
        let mut steps = Vec::with_capacity(len);
        for s in 0..len {
            let t = if cfg.reverse { len - 1 - s } else { s };
            let gx = &gates_x[(b * seq + t) * 4 * cell..][..4 * cell];
            let pre = |row: usize| gx[row] as f64 + w.state_bias[row] as f64 + (0..proj).map(|k| h[k] * w.state_linearity[row * proj + k] as f64).sum::<f64>();
            let gates: [Vec<f64>; 4] =
                std::array::from_fn(|q| (0..cell).map(|j| if q == 2 { pre(q * cell + j).tanh() } else { sigmoid(pre(q * cell + j)) }).collect());
            let c_pre: Vec<f64> = (0..cell).map(|j| gates[0][j] * gates[2][j] + gates[1][j] * c[j]).collect();
            let c_new: Vec<f64> = c_pre.iter().map(|&v| clip(v, cfg.cell_clip)).collect();
            let m: Vec<f64> = (0..cell).map(|j| gates[3][j] * c_new[j].tanh()).collect();
            let h_pre: Vec<f64> = match w.state_projection {
                Some(w_proj) => (0..proj).map(|k| (0..cell).map(|j| m[j] * w_proj[k * cell + j] as f64).sum()).collect(),
                None => m.clone(),
            };
            let h_new: Vec<f64> = h_pre.iter().map(|&v| clip(v, cfg.proj_clip)).collect();
            let h_prev = std::mem::replace(&mut h, h_new.clone());
            let c_prev = std::mem::replace(&mut c, c_new.clone());
            steps.push(StepRecord { t, h_prev, c_prev, gates, c_pre, c: c_new, m, h_pre, h: h_new });
        }
        items.push(steps);
    }
    items
}

#[cfg(test)]
/// CPU reference of [`lstm_sequence`] on row-major host data: returns (outputs [B, T, proj],
/// h [B, proj], c [B, cell]). B = `lengths.len()`.
pub(crate) fn lstm_reference(gates_x: &[f32], lengths: &[usize], seq: usize, w: &HostLstm, cfg: &LstmConfig) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let (cell, proj) = (w.cell(), w.proj());
    let mut outputs = vec![0f32; lengths.len() * seq * proj];
    let (mut h_all, mut c_all) = (Vec::with_capacity(lengths.len() * proj), Vec::with_capacity(lengths.len() * cell));
    for (b, steps) in lstm_record(gates_x, lengths, seq, w, cfg).iter().enumerate() {
        for step in steps {
            for (out, &v) in outputs[(b * seq + step.t) * proj..][..proj].iter_mut().zip(&step.h) {
                *out = v as f32;
            }
        }
        let last = steps.last().expect("lengths are ≥ 1");
        h_all.extend(last.h.iter().map(|&v| v as f32));
        c_all.extend(last.c.iter().map(|&v| v as f32));
    }
    (outputs, h_all, c_all)
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::gpu::testing::devices;
    use crate::ops::testing::{assert_close, random_vec, rng};
    use pollster::block_on;

    // Tolerance: 1e-5 absolute + relative. Each step sums ≤ 70 products of values ≤ 1 in f32;
    // the gates and tanh contract errors, so they do not grow over the ≤ 6 steps.
    const TOL: f32 = 1e-5;

    struct Host {
        gates_x: Vec<f32>,
        w_state: Vec<f32>,
        bias: Vec<f32>,
        w_proj: Option<Vec<f32>>,
    }

    impl Host {
        fn weights(&self) -> HostLstm<'_> {
            HostLstm { state_linearity: &self.w_state, state_bias: &self.bias, state_projection: self.w_proj.as_deref() }
        }
    }

    fn host(seed: u64, batch: usize, seq: usize, cell: usize, proj: usize) -> Host {
        let mut rng = rng(seed);
        Host {
            gates_x: random_vec(&mut rng, batch * seq * 4 * cell, 1.5),
            w_state: random_vec(&mut rng, 4 * cell * proj, 0.6),
            bias: random_vec(&mut rng, 4 * cell, 0.5),
            w_proj: Some(random_vec(&mut rng, proj * cell, 0.5)),
        }
    }

    /// Runs the op on `gpu`; returns (outputs, h, c) on the host.
    fn run(gpu: &Device, d: &Host, lengths: &[usize], seq: usize, cell: usize, proj: usize, cfg: &LstmConfig) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let batch = lengths.len();
        let gates_x = Tensor::from_slice(gpu, &d.gates_x, &[batch, seq, 4 * cell]).unwrap();
        let weights = LstmWeights::new(gpu, &d.w_state, &d.bias, d.w_proj.as_deref(), cell, proj).unwrap();
        let out = lstm_sequence(&gates_x, lengths, &weights, cfg).unwrap();
        let get = |t: &Tensor| block_on(t.to_vec::<f32>()).unwrap();
        (get(&out.outputs), get(&out.h), get(&out.c))
    }

    fn check(seed: u64, lengths: &[usize], seq: usize, cell: usize, proj: usize, cfg: &LstmConfig) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        check_host(&host(seed, lengths.len(), seq, cell, proj), lengths, seq, cfg)
    }

    /// Runs `d` on every device against the reference; returns the reference's results.
    fn check_host(d: &Host, lengths: &[usize], seq: usize, cfg: &LstmConfig) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let (cell, proj) = (d.weights().cell(), d.weights().proj());
        let want = lstm_reference(&d.gates_x, lengths, seq, &d.weights(), cfg);
        for gpu in devices() {
            let got = run(gpu, d, lengths, seq, cell, proj, cfg);
            let name = format!("lstm lengths {lengths:?} T{seq} cell{cell} proj{proj} {cfg:?} on {}", gpu.adapter_info().name);
            assert_close(&format!("{name} outputs"), &got.0, &want.0, TOL, TOL);
            assert_close(&format!("{name} h"), &got.1, &want.1, TOL, TOL);
            assert_close(&format!("{name} c"), &got.2, &want.2, TOL, TOL);
            for (b, &len) in lengths.iter().enumerate() {
                assert!(got.0[(b * seq + len) * proj..(b + 1) * seq * proj].iter().all(|&v| v == 0.0), "{name}: padding of item {b} is not 0");
            }
        }
        want
    }

    #[test]
    fn ragged_forward_and_reverse_with_clips_match_reference() {
        let (lengths, seq, cell, proj) = ([5, 3, 1], 6, 37, 13);
        for reverse in [false, true] {
            let none = LstmConfig { reverse, ..Default::default() };
            let plain = check(1, &lengths, seq, cell, proj, &none);
            let clips = [(Some(0.5), None), (None, Some(0.3)), (Some(0.5), Some(0.3))];
            for (cell_clip, proj_clip) in clips {
                let cfg = LstmConfig { cell_clip, proj_clip, reverse };
                let clipped = check(1, &lengths, seq, cell, proj, &cfg);
                // The clip values bite: results differ from the unclipped run.
                let moved = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
                assert!(moved(&clipped.0, &plain.0) > 1e-2, "{cfg:?} changed nothing");
                if cell_clip.is_some() {
                    assert!(plain.2.iter().any(|v| v.abs() > 0.5) && clipped.2.iter().all(|v| v.abs() <= 0.5), "{cfg:?}: c not clipped");
                }
                if proj_clip.is_some() {
                    assert!(plain.0.iter().any(|v| v.abs() > 0.3) && clipped.0.iter().all(|v| v.abs() <= 0.3), "{cfg:?}: h not clipped");
                }
            }
        }
    }

    #[test]
    fn odd_and_degenerate_sizes_match_reference() {
        let cfg = LstmConfig { cell_clip: Some(3.0), proj_clip: Some(3.0), reverse: false };
        check(2, &[1], 1, 1, 1, &cfg);
        check(3, &[1], 1, 37, 13, &LstmConfig { reverse: true, ..cfg });
        check(4, &[4], 4, 5, 3, &cfg);
        // B·cell and B·proj not multiples of the workgroup of 64.
        check(5, &[3, 2], 3, 70, 65, &cfg);
        check(6, &[2, 7, 7, 1, 4], 7, 33, 67, &LstmConfig { reverse: true, ..cfg });
    }

    #[test]
    fn without_a_projection_h_is_m_as_with_an_identity_projection() {
        let clips = LstmConfig { cell_clip: Some(0.5), proj_clip: Some(0.3), reverse: false };
        // Ragged, both directions, clips, a cell past one workgroup and batch tiles of 1 and 8.
        let cases: [(&[usize], usize, usize, LstmConfig); 4] = [
            (&[5, 3, 1], 6, 13, LstmConfig::default()),
            (&[2, 4], 4, 70, LstmConfig { reverse: true, ..LstmConfig::default() }),
            (&[4, 1, 3], 4, 9, clips),
            (&[1, 2, 3, 4, 5, 6, 5, 4, 3], 6, 11, LstmConfig { reverse: true, ..clips }),
        ];
        for (seed, (lengths, seq, cell, cfg)) in cases.into_iter().enumerate() {
            let mut plain = host(30 + seed as u64, lengths.len(), seq, cell, cell);
            plain.w_proj = None;
            check_host(&plain, lengths, seq, &cfg);
            let identity: Vec<f32> = (0..cell * cell).map(|i| (i % (cell + 1) == 0) as u32 as f32).collect();
            let projected = Host { w_proj: Some(identity), gates_x: plain.gates_x.clone(), w_state: plain.w_state.clone(), bias: plain.bias.clone() };
            for gpu in devices() {
                let name = format!("lstm without a projection, cell {cell} {cfg:?}, against W_proj = I on {}", gpu.adapter_info().name);
                let (got, want) = (run(gpu, &plain, lengths, seq, cell, cell, &cfg), run(gpu, &projected, lengths, seq, cell, cell, &cfg));
                assert_close(&format!("{name} outputs"), &got.0, &want.0, TOL, TOL);
                assert_close(&format!("{name} c"), &got.2, &want.2, TOL, TOL);
            }
        }
    }

    #[test]
    fn reverse_equals_forward_over_reversed_tokens() {
        // Independent of the reference: running backward over item b's first len tokens is
        // running forward over them in reverse order.
        let (lengths, seq, cell, proj) = ([4, 2, 3], 4, 9, 5);
        let d = host(7, lengths.len(), seq, cell, proj);
        let mut flipped = Host { gates_x: vec![0.0; d.gates_x.len()], w_state: d.w_state.clone(), bias: d.bias.clone(), w_proj: d.w_proj.clone() };
        let row = 4 * cell;
        for (b, &len) in lengths.iter().enumerate() {
            for t in 0..len {
                let (src, dst) = ((b * seq + t) * row, (b * seq + len - 1 - t) * row);
                flipped.gates_x[dst..dst + row].copy_from_slice(&d.gates_x[src..src + row]);
            }
        }
        let cfg = LstmConfig { cell_clip: Some(0.5), proj_clip: Some(0.3), reverse: true };
        for gpu in devices() {
            let backward = run(gpu, &d, &lengths, seq, cell, proj, &cfg);
            let forward = run(gpu, &flipped, &lengths, seq, cell, proj, &LstmConfig { reverse: false, ..cfg });
            assert_close(&format!("lstm reverse final h on {}", gpu.adapter_info().name), &backward.1, &forward.1, TOL, TOL);
            assert_close(&format!("lstm reverse final c on {}", gpu.adapter_info().name), &backward.2, &forward.2, TOL, TOL);
            // Output rows of the forward run, put back in the original token order.
            let mut unflipped = forward.0.clone();
            for (b, &len) in lengths.iter().enumerate() {
                for t in 0..len {
                    let (src, dst) = ((b * seq + len - 1 - t) * proj, (b * seq + t) * proj);
                    unflipped[dst..dst + proj].copy_from_slice(&forward.0[src..src + proj]);
                }
            }
            assert_close(&format!("lstm reverse outputs on {}", gpu.adapter_info().name), &backward.0, &unflipped, TOL, TOL);
        }
    }

    #[test]
    fn batch_tiles_of_every_width_match_reference() {
        // Batches of 2, 3, 5 and 8 items run with tiles of 2, 4, 8 and 8 (tile 1 is the other
        // tests'), 11 items as an 8-tile and a partial one; ragged lengths so items of one tile
        // start and stop at different steps.
        let cfg = LstmConfig { cell_clip: Some(0.5), proj_clip: Some(0.3), reverse: false };
        for batch in [2, 3, 5, 8, 11] {
            let lengths: Vec<usize> = (0..batch).map(|b| 1 + (b * 5) % 6).collect();
            check(10 + batch as u64, &lengths, 6, 19, 11, &LstmConfig { reverse: batch % 2 == 1, ..cfg });
        }
    }

    #[test]
    fn bad_shapes_are_errors() {
        for gpu in devices() {
            let (cell, proj) = (3, 2);
            let zeros = |n: usize| vec![0f32; n];
            let weights = |w: usize, b: usize, p: usize| LstmWeights::new(gpu, &zeros(w), &zeros(b), Some(&zeros(p)), cell, proj);
            assert!(weights(4 * cell * proj + 1, 4 * cell, proj * cell).is_err(), "state_linearity length");
            assert!(weights(4 * cell * proj, 4 * cell - 1, proj * cell).is_err(), "bias length");
            assert!(weights(4 * cell * proj, 4 * cell, proj * cell + 2).is_err(), "projection length");
            assert!(LstmWeights::new(gpu, &[], &[], Some(&[]), 0, proj).is_err(), "cell 0");
            assert!(LstmWeights::new(gpu, &zeros(4 * cell * proj), &zeros(4 * cell), None, cell, proj).is_err(), "no projection, proj ≠ cell");
            let weights = weights(4 * cell * proj, 4 * cell, proj * cell).unwrap();
            let z = |shape: &[usize]| Tensor::zeros(gpu, shape, DType::F32).unwrap();
            let gates = z(&[2, 3, 4 * cell]);
            let cfg = LstmConfig::default();
            assert!(lstm_sequence(&gates, &[3, 1], &weights, &cfg).is_ok());
            assert!(lstm_sequence(&gates, &[3], &weights, &cfg).is_err(), "one length for two items");
            assert!(lstm_sequence(&gates, &[3, 0], &weights, &cfg).is_err(), "length 0");
            assert!(lstm_sequence(&gates, &[4, 1], &weights, &cfg).is_err(), "length past T");
            assert!(lstm_sequence(&z(&[2, 3, 13]), &[3, 1], &weights, &cfg).is_err(), "13 is not 4·cell");
            assert!(lstm_sequence(&z(&[2, 3, 16]), &[3, 1], &weights, &cfg).is_err(), "cell 4 vs weights for 3");
            assert!(lstm_sequence(&z(&[0, 3, 12]), &[], &weights, &cfg).is_err(), "empty batch");
            let u32_gates = Tensor::from_slice(gpu, &[0u32; 24], &[2, 1, 12]).unwrap();
            assert!(lstm_sequence(&u32_gates, &[1, 1], &weights, &cfg).is_err(), "u32 gates");
            let negative = LstmConfig { cell_clip: Some(-1.0), ..cfg };
            assert!(lstm_sequence(&gates, &[3, 1], &weights, &negative).is_err(), "negative clip");
        }
    }
}
