//! Params, kernel declarations and host twins of `shaders/cross_entropy.wgsl` (`ops::cross_entropy`): the forward entry
//! points `rows` and `mean`, and `backward`.

use super::lanes::{max_from, sum_by};
use super::HostCall;
use super::{kernel_params, Access, Kernel, KernelParams};
use crate::error::Result;

const SOURCE: &str = concat!(include_str!(concat!(env!("OUT_DIR"), "/reduce.wgsl")), include_str!(concat!(env!("OUT_DIR"), "/cross_entropy.wgsl")));

const BINDINGS: &[Access] = &[Access::Read, Access::Read, Access::ReadWrite, Access::ReadWrite, Access::ReadWrite];

pub(crate) const ROWS: Kernel = Kernel { shader: "cross_entropy", source: SOURCE, entry: "rows", bindings: BINDINGS, params: Params::LAYOUT, twin: Some(rows) };

pub(crate) const MEAN: Kernel = Kernel { shader: "cross_entropy", source: SOURCE, entry: "mean", bindings: BINDINGS, params: Params::LAYOUT, twin: Some(mean) };

pub(crate) const BACKWARD: Kernel = Kernel {
    shader: "cross_entropy",
    source: SOURCE,
    entry: "backward",
    bindings: &[Access::ReadWrite, Access::Read, Access::ReadWrite, Access::ReadWrite],
    params: Params::LAYOUT,
    twin: Some(backward),
};

/// Every kernel of this module, for the checks over all kernels (`kernels::all`).
#[cfg(test)]
pub(crate) const KERNELS: &[&Kernel] = &[&ROWS, &MEAN, &BACKWARD];

kernel_params! {
    pub(crate) struct Params {
        pub rows: u32,
        pub vocab: u32,
        pub scale: f32,
        pub _pad: u32,
    }
}

/// The target of an ignored row.
const IGNORED: u32 = u32::MAX;

/// logits [rows, vocab], targets [rows] → logsumexp [rows] (max-shifted) and losses [rows] =
/// (max − logit[target]) + log Σ exp(logit − max), 0 for ignored rows.
pub(crate) fn rows(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (logits, targets) = (call.read(0)?, call.read_u32(1)?);
    let (losses, logsumexp) = (call.write(2)?, call.write(3)?);
    let (rows, vocab) = (p.rows as usize, p.vocab as usize);
    if logits.len() < rows * vocab || targets.len() < rows || losses.len() < rows || logsumexp.len() < rows {
        return Err(call.fault(format!("{rows} rows of {vocab} do not fit the bindings")));
    }
    let outputs = losses[..rows].iter_mut().zip(&mut logsumexp[..rows]).zip(&targets[..rows]);
    for (r, ((loss, lse), &target)) in outputs.enumerate() {
        let row = &logits[r * vocab..(r + 1) * vocab];
        let m = max_from(-3.0e38, row);
        let log_s = sum_by(row, |v| (v - m).exp()).ln();
        *lse = m + log_s;
        *loss = match target {
            IGNORED => 0.0,
            class => {
                let logit = row.get(class as usize).ok_or_else(|| call.fault(format!("target {class} of row {r} is outside 0..{vocab}")))?;
                // (m − logit) first: exact for nearby values, as in the WGSL.
                (m - logit) + log_s
            }
        };
    }
    Ok(())
}

/// targets [rows], losses [rows] (from [`rows`]) → loss [1]: the mean loss over the rows not
/// ignored, 0 when every row is.
pub(crate) fn mean(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let targets = call.read_u32(1)?;
    let (losses, loss) = (call.write(2)?, call.write(4)?);
    let rows = p.rows as usize;
    if targets.len() < rows || losses.len() < rows || loss.is_empty() {
        return Err(call.fault(format!("{rows} rows do not fit the bindings")));
    }
    let (mut total, mut count) = (0.0f32, 0.0f32);
    for (&target, &l) in targets[..rows].iter().zip(&losses[..rows]) {
        if target != IGNORED {
            total += l;
            count += 1.0;
        }
    }
    loss[0] = if count == 0.0 { 0.0 } else { total / count };
    Ok(())
}

/// logits [rows, vocab] (overwritten), targets [rows], logsumexp [rows] (from [`rows`]) →
/// the logits' gradient in their place: scale·(softmax − one-hot), 0 on ignored rows.
pub(crate) fn backward(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (dlogits, targets) = (call.write(0)?, call.read_u32(1)?);
    // Bound read_write in the WGSL, but only read. Binding 2 (the losses) is unused.
    let logsumexp: &[f32] = call.write(3)?;
    let (rows, vocab) = (p.rows as usize, p.vocab as usize);
    let total = rows.checked_mul(vocab).ok_or_else(|| call.fault(format!("{rows} × {vocab} logits overflow")))?;
    if total == 0 {
        return Ok(());
    }
    if dlogits.len() < total || targets.len() < rows || logsumexp.len() < rows {
        return Err(call.fault(format!("{rows} rows of {vocab} do not fit the bindings")));
    }
    let per_row = dlogits[..total].chunks_exact_mut(vocab).zip(&targets[..rows]).zip(&logsumexp[..rows]);
    for ((row, &target), &lse) in per_row {
        if target == IGNORED {
            row.fill(0.0);
            continue;
        }
        // A target outside the row (the op refuses those) subtracts nothing, as on the GPU.
        for (c, v) in row.iter_mut().enumerate() {
            let one_hot = if c as u32 == target { 1.0 } else { 0.0 };
            *v = p.scale * ((*v - lse).exp() - one_hot);
        }
    }
    Ok(())
}
