//! Params, kernel declarations and host twins of `lstm.wgsl` (`ops::lstm`): one time step of an LSTM with a projected state for
//! B items, of which those with `step` < lengths[b] (u32 [B]) are active, at time t = step (or
//! lengths[b] − 1 − step in reverse). Inactive items keep their state and write nothing.
//! - `lstm_cell`: gates = h_prev[b]·W_stateᵀ + state_bias + gates_x[b, t] (input, forget, cell,
//!   output), c = i·g + f·c (clipped), m = o·tanh(c); gates_x [B, T, 4·cell], W_state
//!   [cell/8, proj, 8, 4], state_bias [cell, 4], h_prev [B, proj]; c [B, cell] in place, m [B, cell].
//! - `lstm_projection`: h = clip(m·W_projᵀ), to h [B, proj] and outputs [B, T, proj]; W_proj
//!   [proj/8, cell/4, 8, 4] (cell/4 rounded up, the padded cells' weights 0); without a
//!   projection (`project` 0, proj = cell: PyTorch's nn.LSTM) h = clip(m) and W_proj is unread.
//!
//! Both walk the weights one block of 8 outputs at a time (a contiguous region) and step every
//! active item through the block while it is in cache, as the shader's batch tiles do.

use super::activations::{safe_tanh, sigmoid};
use super::HostCall;
use super::{kernel_params, Access, Kernel, KernelParams};
use crate::error::Result;

const SOURCE: &str = concat!(include_str!(concat!(env!("OUT_DIR"), "/lstm_common.wgsl")), include_str!(concat!(env!("OUT_DIR"), "/lstm.wgsl")));

pub(crate) const CELL: Kernel = Kernel {
    shader: "lstm",
    source: SOURCE,
    entry: "lstm_cell",
    // lengths, gates_x, state_gates, state_bias, h, c, m
    bindings: &[Access::Read, Access::Read, Access::Read, Access::Read, Access::Read, Access::ReadWrite, Access::ReadWrite],
    params: Params::LAYOUT,
    twin: Some(lstm_cell),
};

pub(crate) const PROJECTION: Kernel = Kernel {
    shader: "lstm",
    source: SOURCE,
    entry: "lstm_projection",
    // lengths, projection, m, h, outputs
    bindings: &[Access::Read, Access::Read, Access::Read, Access::ReadWrite, Access::ReadWrite],
    params: Params::LAYOUT,
    twin: Some(lstm_projection),
};

/// Every kernel of this module, for the checks over all kernels (`kernels::all`).
#[cfg(test)]
pub(crate) const KERNELS: &[&Kernel] = &[&CELL, &PROJECTION];

kernel_params! {
    pub(crate) struct Params {
        pub(crate) batch: u32,
        pub(crate) seq: u32,
        pub(crate) cell: u32,
        pub(crate) proj: u32,
        pub(crate) step: u32,
        pub(crate) reverse: u32,
        pub(crate) clip_cell: u32,
        pub(crate) clip_proj: u32,
        pub(crate) cell_clip: f32,
        pub(crate) proj_clip: f32,
        /// 1 when h = m·W_projᵀ, 0 for h = m.
        pub(crate) project: u32,
        pub _pad: u32,
    }
}

/// Outputs per weight block (the shader's `BLOCK`).
const BLOCK: usize = 8;
/// Floats of one step of a block: 8 outputs × 4 (gates, or consecutive cells).
const STRIDE: usize = BLOCK * 4;

/// The (item, time index) pairs active at this step (`time_index` of lstm_common.wgsl).
pub(super) fn active_items(p: &Params, lengths: &[u32]) -> Vec<(usize, usize)> {
    let time = |len: u32| {
        if p.step >= len {
            p.seq
        } else if p.reverse != 0 {
            len - 1 - p.step
        } else {
            p.step
        }
    };
    lengths.iter().take(p.batch as usize).enumerate().map(|(b, &len)| (b, time(len))).filter(|&(_, t)| t < p.seq).map(|(b, t)| (b, t as usize)).collect()
}

pub(crate) fn lstm_cell(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (lengths, gates_x, w_state, state_bias, h_prev) = (call.read_u32(0)?, call.read(1)?, call.read(2)?, call.read(3)?, call.read(4)?);
    let (c_state, m_out) = (call.write(5)?, call.write(6)?);
    let (seq, cell, proj) = (p.seq as usize, p.cell as usize, p.proj as usize);
    let items = active_items(&p, lengths);
    for block in 0..cell.div_ceil(BLOCK) {
        // [proj, 8, 4]: the four gates of 8 cells at each state element k.
        let weights = &w_state[block * proj * STRIDE..][..proj * STRIDE];
        for &(b, t) in &items {
            let h = &h_prev[b * proj..][..proj];
            let mut acc = [0f32; STRIDE];
            for (&hk, w) in h.iter().zip(weights.chunks_exact(STRIDE)) {
                for (a, &w) in acc.iter_mut().zip(w) {
                    *a += hk * w;
                }
            }
            let gx = &gates_x[(b * seq + t) * 4 * cell..][..4 * cell];
            for (lane, recurrent) in acc.chunks_exact(4).enumerate() {
                let j = block * BLOCK + lane;
                if j >= cell {
                    break;
                }
                let gate = |g: usize| recurrent[g] + state_bias[j * 4 + g] + gx[g * cell + j];
                let (input, forget, memory, output) = (sigmoid(gate(0)), sigmoid(gate(1)), safe_tanh(gate(2)), sigmoid(gate(3)));
                let s = b * cell + j;
                let mut c = input * memory + forget * c_state[s];
                if p.clip_cell != 0 {
                    c = c.max(-p.cell_clip).min(p.cell_clip);
                }
                c_state[s] = c;
                m_out[s] = output * safe_tanh(c);
            }
        }
    }
    Ok(())
}

pub(crate) fn lstm_projection(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (lengths, w_proj, m_in) = (call.read_u32(0)?, call.read(1)?, call.read(2)?);
    let (h_state, outputs) = (call.write(3)?, call.write(4)?);
    let (seq, cell, proj) = (p.seq as usize, p.cell as usize, p.proj as usize);
    let items = active_items(&p, lengths);
    let mut store = |b: usize, t: usize, k: usize, mut h: f32| {
        if p.clip_proj != 0 {
            h = h.max(-p.proj_clip).min(p.proj_clip);
        }
        h_state[b * proj + k] = h;
        outputs[(b * seq + t) * proj + k] = h;
    };
    if p.project == 0 {
        for &(b, t) in &items {
            for k in 0..proj {
                store(b, t, k, m_in[b * cell + k]);
            }
        }
        return Ok(());
    }
    let quads = cell.div_ceil(4);
    // Each active item's m padded to whole quads by repeating the last cell (as the shader's
    // `m_at`; the padded cells' weights are 0).
    let m: Vec<Vec<f32>> = items
        .iter()
        .map(|&(b, _)| {
            let row = &m_in[b * cell..][..cell];
            let last = row.last().copied().unwrap_or(0.0);
            row.iter().copied().chain(std::iter::repeat(last)).take(quads * 4).collect()
        })
        .collect();
    for block in 0..proj.div_ceil(BLOCK) {
        // [quads, 8, 4]: 4 consecutive cells of 8 projection outputs at each quad.
        let weights = &w_proj[block * quads * STRIDE..][..quads * STRIDE];
        for (&(b, t), m) in items.iter().zip(&m) {
            // Lane l·4 + c accumulates output l's products with cells 4q + c.
            let mut acc = [0f32; STRIDE];
            for (m4, w) in m.chunks_exact(4).zip(weights.chunks_exact(STRIDE)) {
                for (a, w) in acc.chunks_exact_mut(4).zip(w.chunks_exact(4)) {
                    for c in 0..4 {
                        a[c] += m4[c] * w[c];
                    }
                }
            }
            for (lane, sums) in acc.chunks_exact(4).enumerate() {
                let k = block * BLOCK + lane;
                if k >= proj {
                    break;
                }
                store(b, t, k, (sums[0] + sums[1]) + (sums[2] + sums[3]));
            }
        }
    }
    Ok(())
}
