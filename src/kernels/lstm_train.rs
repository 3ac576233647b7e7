//! Params, kernel declarations and host twins of `lstm_train.wgsl` (`ops::lstm_train`): one step of the traced forward or of
//! backpropagation through time of the projected LSTM, for B items of which those with `step`
//! < lengths[b] (u32 [B]) are active, at time t (lstm.rs's `active_items`). Inactive items read
//! and write nothing, so their rows of every record keep what they held. The weights are
//! AllenNLP's row-major W_state [4·cell, proj] (gates i, f, g, o), bias [4·cell] and W_proj
//! [proj, cell]; the records are [B, T, …]; t_prev is the item's previous step (t ∓ 1).
//! - `trace_cell`: pre = gates_x[b, t] + bias + outputs[b, t_prev]·W_stateᵀ (no state term at
//!   step 0); writes the gates (σ(i), σ(f), tanh(g), σ(o)) to [B, T, cell, 4], (c_pre, c) to
//!   [B, T, cell, 2] with c_pre = i·g + f·c_prev and c = clip(c_pre), and m = o·tanh(c).
//! - `trace_projection`: h_pre = m·W_projᵀ (m itself without a projection, `project` 0) to
//!   h_pre [B, T, proj], clip(h_pre) to outputs.
//! - `backward_h`: dh_pre = d_outputs + dh_carry [B, proj], 0 where the projection clip bound.
//! - `backward_cell`: dm = dh_pre·W_proj (dh_pre without a projection), through m, the cell clip and c to d_gates
//!   [B, T, 4·cell]; dc_carry [B, cell] becomes dc·f.
//! - `backward_state`: dh_carry [B, proj] = d_gates[b, t]·W_state.
//!
//! All outputs are overwritten (dc_carry after being read). The sums over W_proj's and
//! W_state's columns run over their rows in order, as the shader's loops do, one row at a time
//! for every item while it is in cache.

use super::activations::{safe_tanh, sigmoid};
use super::lstm::active_items;
use super::lstm::Params;
use super::simd::dot;
use super::{Access, HostCall, Kernel, KernelParams, Twin};
use crate::error::Result;
use Access::{Read, ReadWrite};

const SOURCE: &str = concat!(include_str!(concat!(env!("OUT_DIR"), "/lstm_common.wgsl")), include_str!(concat!(env!("OUT_DIR"), "/lstm_train.wgsl")));

const fn kernel(entry: &'static str, bindings: &'static [Access], twin: Twin) -> Kernel {
    Kernel { shader: "lstm_train", source: SOURCE, entry, bindings, params: Params::LAYOUT, twin: Some(twin) }
}

// lengths, gates_x, w_state, bias, outputs, gates, cells, m
pub(crate) const TRACE_CELL: Kernel = kernel("trace_cell", &[Read, Read, Read, Read, Read, ReadWrite, ReadWrite, ReadWrite], trace_cell);

// lengths, w_proj, m, h_pre, outputs
pub(crate) const TRACE_PROJECTION: Kernel = kernel("trace_projection", &[Read, Read, Read, ReadWrite, ReadWrite], trace_projection);

// lengths, d_outputs, h_pre, dh carry, dh_pre
pub(crate) const BACKWARD_H: Kernel = kernel("backward_h", &[Read, Read, Read, Read, ReadWrite], backward_h);

// lengths, dh_pre, w_proj, gates, cells, dc carry, d_gates
pub(crate) const BACKWARD_CELL: Kernel = kernel("backward_cell", &[Read, Read, Read, Read, Read, ReadWrite, ReadWrite], backward_cell);

// lengths, d_gates, w_state, dh carry
pub(crate) const BACKWARD_STATE: Kernel = kernel("backward_state", &[Read, Read, Read, ReadWrite], backward_state);

/// Every kernel of this module, for the checks over all kernels (`kernels::all`).
#[cfg(test)]
pub(crate) const KERNELS: &[&Kernel] = &[&TRACE_CELL, &TRACE_PROJECTION, &BACKWARD_H, &BACKWARD_CELL, &BACKWARD_STATE];

/// Elements of an array of `dims`, saturating (then no binding holds them).
fn count(dims: &[usize]) -> usize {
    dims.iter().fold(1, |n, &d| n.saturating_mul(d))
}

/// Elements of W_proj the params read: [proj, cell], none without a projection.
fn projection_elements(p: &Params) -> usize {
    if p.project == 0 {
        0
    } else {
        count(&[p.proj as usize, p.cell as usize])
    }
}

/// (seq, cell, proj, B·T) of the params.
fn sizes(p: &Params) -> (usize, usize, usize, usize) {
    let (seq, cell, proj) = (p.seq as usize, p.cell as usize, p.proj as usize);
    (seq, cell, proj, count(&[p.batch as usize, seq]))
}

/// Faults unless the batch's lengths are bound and within T, and each binding (name, length,
/// elements the params need) holds its elements.
fn check(call: &HostCall<'_>, p: &Params, lengths: &[u32], bindings: &[(&str, usize, usize)]) -> Result<()> {
    let batch = p.batch as usize;
    if !lengths.get(..batch).is_some_and(|lens| lens.iter().all(|&len| len <= p.seq)) {
        return Err(call.fault(format!("no lengths of {batch} items within T = {} are bound", p.seq)));
    }
    match bindings.iter().find(|&&(_, len, need)| len < need) {
        Some((what, len, need)) => Err(call.fault(format!("{what} holds {len} elements, the params need {need}"))),
        None => Ok(()),
    }
}

/// The row (b, t_prev) of item b's previous step: t − 1 going forward, t + 1 in reverse. Only
/// for step ≥ 1, where it lies within the item's length.
fn previous_row(p: &Params, b: usize, t: usize) -> usize {
    b * p.seq as usize + if p.reverse != 0 { t + 1 } else { t - 1 }
}

/// `x` clamped to ±`limit` when `on` (not `f32::clamp`, which panics on a NaN limit). A NaN
/// stays NaN, as PyTorch's clamp keeps it (`f32::max` would turn it into −limit).
fn clip(x: f32, on: u32, limit: f32) -> f32 {
    if on != 0 && !x.is_nan() {
        x.max(-limit).min(limit)
    } else {
        x
    }
}

pub(crate) fn trace_cell(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (lengths, gates_x, w_state, bias, outputs) = (call.read_u32(0)?, call.read(1)?, call.read(2)?, call.read(3)?, call.read(4)?);
    let (gates_out, cells_out, m_out) = (call.write(5)?, call.write(6)?, call.write(7)?);
    let (seq, cell, proj, rows) = sizes(&p);
    let bindings = [
        ("gates_x", gates_x.len(), count(&[rows, 4, cell])),
        ("W_state", w_state.len(), count(&[4, cell, proj])),
        ("bias", bias.len(), count(&[4, cell])),
        ("outputs", outputs.len(), count(&[rows, proj])),
        ("gates", gates_out.len(), count(&[rows, cell, 4])),
        ("cells", cells_out.len(), count(&[rows, cell, 2])),
        ("m", m_out.len(), count(&[rows, cell])),
    ];
    check(call, &p, lengths, &bindings)?;
    let items = active_items(&p, lengths);
    // Each item's previous row, whose h and c this step starts from (none at step 0).
    let previous: Vec<Option<usize>> = items.iter().map(|&(b, t)| (p.step > 0).then(|| previous_row(&p, b, t))).collect();
    for j in 0..cell {
        // The rows of W_state for cell j's four gates.
        let w: [&[f32]; 4] = std::array::from_fn(|g| &w_state[(g * cell + j) * proj..][..proj]);
        for (&(b, t), &prev) in items.iter().zip(&previous) {
            let row = b * seq + t;
            let pre: [f32; 4] = std::array::from_fn(|g| {
                let x = gates_x[row * 4 * cell + g * cell + j] + bias[g * cell + j];
                prev.map_or(x, |prev| x + dot(&outputs[prev * proj..][..proj], w[g]))
            });
            let c_prev = prev.map_or(0.0, |prev| cells_out[(prev * cell + j) * 2 + 1]);
            let (i, f, g, o) = (sigmoid(pre[0]), sigmoid(pre[1]), safe_tanh(pre[2]), sigmoid(pre[3]));
            let c_pre = i * g + f * c_prev;
            let c = clip(c_pre, p.clip_cell, p.cell_clip);
            let at = row * cell + j;
            gates_out[at * 4..][..4].copy_from_slice(&[i, f, g, o]);
            cells_out[at * 2..][..2].copy_from_slice(&[c_pre, c]);
            m_out[at] = o * safe_tanh(c);
        }
    }
    Ok(())
}

pub(crate) fn trace_projection(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (lengths, w_proj, m) = (call.read_u32(0)?, call.read(1)?, call.read(2)?);
    let (h_pre, outputs) = (call.write(3)?, call.write(4)?);
    let (_, cell, proj, rows) = sizes(&p);
    let bindings = [
        ("W_proj", w_proj.len(), projection_elements(&p)),
        ("m", m.len(), count(&[rows, cell])),
        ("h_pre", h_pre.len(), count(&[rows, proj])),
        ("outputs", outputs.len(), count(&[rows, proj])),
    ];
    check(call, &p, lengths, &bindings)?;
    let items = active_items(&p, lengths);
    for k in 0..proj {
        let w = if p.project == 0 { &[][..] } else { &w_proj[k * cell..][..cell] };
        for &(b, t) in &items {
            let row = b * p.seq as usize + t;
            let h = if p.project == 0 { m[row * cell + k] } else { dot(&m[row * cell..][..cell], w) };
            let at = row * proj + k;
            h_pre[at] = h;
            outputs[at] = clip(h, p.clip_proj, p.proj_clip);
        }
    }
    Ok(())
}

pub(crate) fn backward_h(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (lengths, d_outputs, h_pre, dh_carry) = (call.read_u32(0)?, call.read(1)?, call.read(2)?, call.read(3)?);
    let dh_pre = call.write(4)?;
    let (seq, _, proj, rows) = sizes(&p);
    let bindings = [
        ("d_outputs", d_outputs.len(), count(&[rows, proj])),
        ("h_pre", h_pre.len(), count(&[rows, proj])),
        ("dh_carry", dh_carry.len(), count(&[p.batch as usize, proj])),
        ("dh_pre", dh_pre.len(), count(&[rows, proj])),
    ];
    check(call, &p, lengths, &bindings)?;
    for (b, t) in active_items(&p, lengths) {
        let at = (b * seq + t) * proj;
        for k in 0..proj {
            // PyTorch's clamp passes the gradient at |h_pre| ≤ limit (and NaN).
            let clipped = p.clip_proj != 0 && h_pre[at + k].abs() > p.proj_clip;
            dh_pre[at + k] = if clipped { 0.0 } else { d_outputs[at + k] + dh_carry[b * proj + k] };
        }
    }
    Ok(())
}

pub(crate) fn backward_cell(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (lengths, dh_pre, w_proj, gates, cells) = (call.read_u32(0)?, call.read(1)?, call.read(2)?, call.read(3)?, call.read(4)?);
    let (dc_carry, d_gates) = (call.write(5)?, call.write(6)?);
    let (seq, cell, proj, rows) = sizes(&p);
    let bindings = [
        ("dh_pre", dh_pre.len(), count(&[rows, proj])),
        ("W_proj", w_proj.len(), projection_elements(&p)),
        ("gates", gates.len(), count(&[rows, cell, 4])),
        ("cells", cells.len(), count(&[rows, cell, 2])),
        ("dc_carry", dc_carry.len(), count(&[p.batch as usize, cell])),
        ("d_gates", d_gates.len(), count(&[rows, 4, cell])),
    ];
    check(call, &p, lengths, &bindings)?;
    let items = active_items(&p, lengths);
    // dm = dh_pre[b, t]·W_proj (or dh_pre) for each active item, [items, cell].
    let mut dm_rows = vec![0f32; items.len() * cell];
    if p.project == 0 {
        for (n, &(b, t)) in items.iter().enumerate() {
            dm_rows[n * cell..][..cell].copy_from_slice(&dh_pre[(b * seq + t) * proj..][..cell]);
        }
    } else {
        for k in 0..proj {
            let w = &w_proj[k * cell..][..cell];
            for (n, &(b, t)) in items.iter().enumerate() {
                let dh = dh_pre[(b * seq + t) * proj + k];
                for (acc, &weight) in dm_rows[n * cell..][..cell].iter_mut().zip(w) {
                    *acc += dh * weight;
                }
            }
        }
    }
    for (n, &(b, t)) in items.iter().enumerate() {
        let row = b * seq + t;
        let prev = (p.step > 0).then(|| previous_row(&p, b, t));
        for j in 0..cell {
            let dm = dm_rows[n * cell + j];
            let at = row * cell + j;
            let gate = &gates[at * 4..][..4];
            let (i, f, g, o) = (gate[0], gate[1], gate[2], gate[3]);
            let (c_pre, c) = (cells[at * 2], cells[at * 2 + 1]);
            let c_prev = prev.map_or(0.0, |prev| cells[(prev * cell + j) * 2 + 1]);
            let tanh_c = safe_tanh(c);
            let d_output_gate = dm * tanh_c;
            let carry = b * cell + j;
            let mut dc = dc_carry[carry] + dm * o * (1.0 - tanh_c * tanh_c);
            if p.clip_cell != 0 && c_pre.abs() > p.cell_clip {
                dc = 0.0;
            }
            dc_carry[carry] = dc * f;
            let d = row * 4 * cell + j;
            d_gates[d] = dc * g * i * (1.0 - i);
            d_gates[d + cell] = dc * c_prev * f * (1.0 - f);
            d_gates[d + 2 * cell] = dc * i * (1.0 - g * g);
            d_gates[d + 3 * cell] = d_output_gate * o * (1.0 - o);
        }
    }
    Ok(())
}

pub(crate) fn backward_state(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (lengths, d_gates, w_state) = (call.read_u32(0)?, call.read(1)?, call.read(2)?);
    let dh_carry = call.write(3)?;
    let (seq, cell, proj, rows) = sizes(&p);
    let bindings = [
        ("d_gates", d_gates.len(), count(&[rows, 4, cell])),
        ("W_state", w_state.len(), count(&[4, cell, proj])),
        ("dh_carry", dh_carry.len(), count(&[p.batch as usize, proj])),
    ];
    check(call, &p, lengths, &bindings)?;
    let items = active_items(&p, lengths);
    // dh = d_gates[b, t]·W_state for each active item, [items, proj].
    let mut dh_rows = vec![0f32; items.len() * proj];
    for r in 0..4 * cell {
        let w = &w_state[r * proj..][..proj];
        for (n, &(b, t)) in items.iter().enumerate() {
            let d = d_gates[(b * seq + t) * 4 * cell + r];
            for (acc, &weight) in dh_rows[n * proj..][..proj].iter_mut().zip(w) {
                *acc += d * weight;
            }
        }
    }
    for (n, &(b, _)) in items.iter().enumerate() {
        dh_carry[b * proj..][..proj].copy_from_slice(&dh_rows[n * proj..][..proj]);
    }
    Ok(())
}
