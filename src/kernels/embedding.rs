//! Params, kernel declarations and host twins of `shaders/embedding.wgsl` and `shaders/embedding_backward.wgsl`
//! (`ops::embedding`).

use super::HostCall;
use super::{kernel_params, Access, Kernel, KernelParams};
use crate::error::Result;

pub(crate) const KERNEL: Kernel = Kernel {
    shader: "embedding",
    source: include_str!(concat!(env!("OUT_DIR"), "/embedding.wgsl")),
    entry: "embedding",
    bindings: &[Access::Read, Access::Read, Access::Read, Access::Read, Access::Read, Access::Read, Access::ReadWrite],
    params: Params::LAYOUT,
    twin: Some(embedding),
};

pub(crate) const BACKWARD: Kernel = Kernel {
    shader: "embedding_backward",
    source: include_str!(concat!(env!("OUT_DIR"), "/embedding_backward.wgsl")),
    entry: "embedding_backward",
    bindings: &[Access::Read, Access::Read, Access::Read, Access::Read, Access::ReadWrite],
    params: BackwardParams::LAYOUT,
    twin: Some(embedding_backward),
};

/// Every kernel of this module, for the checks over all kernels (`kernels::all`).
#[cfg(test)]
pub(crate) const KERNELS: &[&Kernel] = &[&KERNEL, &BACKWARD];

kernel_params! {
    pub(crate) struct BackwardParams {
        pub n: u32,
        pub cols: u32,
        pub row_start: u32,
        pub _pad: u32,
    }
}

kernel_params! {
    pub(crate) struct Params {
        pub n: u32,
        pub cols: u32,
        pub has_position: u32,
        pub has_segment: u32,
        pub word_start: u32,
        pub word_rows: u32,
        pub _pad: [u32; 2],
    }
}

/// Row `id` of a [rows, cols] table, if it has one.
fn row(table: &[f32], id: u32, cols: usize) -> Option<&[f32]> {
    table.get((id as usize).checked_mul(cols)?..)?.get(..cols)
}

/// out [tokens, C] (tokens = n / C):
/// out[t] = word[token[t] − word_start] + position[pos[t]] + segment[seg[t]], summed in that
/// order, the last two terms when their flags are set.
/// `word` holds rows word_start..word_start + word_rows of the table (a chunk of a table over
/// the binding limit); tokens whose id falls outside it are left as they are, for the
/// dispatch of their chunk to write.
pub(crate) fn embedding(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let word = call.read(0)?;
    let position = if p.has_position != 0 { Some((call.read(1)?, call.read_u32(4)?)) } else { None };
    let segment = if p.has_segment != 0 { Some((call.read(2)?, call.read_u32(5)?)) } else { None };
    let (tokens, out) = (call.read_u32(3)?, call.write(6)?);
    let cols = p.cols as usize;
    if cols == 0 {
        return Ok(());
    }
    let count = p.n as usize / cols;
    if tokens.len() < count || out.len() < count * cols {
        return Err(call.fault(format!("{count} tokens of width {cols} do not fit the bindings")));
    }
    for (t, (&id, out)) in tokens.iter().zip(out.chunks_exact_mut(cols)).take(count).enumerate() {
        if id < p.word_start || id - p.word_start >= p.word_rows {
            continue;
        }
        let word_row = row(word, id - p.word_start, cols);
        let word_row = word_row.ok_or_else(|| call.fault(format!("word row {id} is outside the bound table")))?;
        out.copy_from_slice(word_row);
        for (name, table) in [("position", position), ("segment", segment)] {
            let Some((table, ids)) = table else { continue };
            let table_row = ids.get(t).and_then(|&id| row(table, id, cols));
            let table_row = table_row.ok_or_else(|| call.fault(format!("the {name} id of token {t} is outside its table")))?;
            for (o, &v) in out.iter_mut().zip(table_row) {
                *o += v;
            }
        }
    }
    Ok(())
}

/// Host twin of `shaders/embedding_backward.wgsl`: d_out [tokens, C], the distinct ids
/// `rows`, `offsets` [distinct + 1] into `tokens` (token indices grouped by id) → grad
/// [chunk rows, C] += each id's run of d_out rows, summed in run order; grad holds the
/// table's rows row_start.. (n = distinct × C).
pub(crate) fn embedding_backward(call: &mut HostCall<'_>) -> Result<()> {
    use crate::kernels::embedding::BackwardParams;
    let p: BackwardParams = call.params()?;
    let (d_out, rows, offsets, tokens) = (call.read(0)?, call.read_u32(1)?, call.read_u32(2)?, call.read_u32(3)?);
    let grad = call.write(4)?;
    let cols = p.cols as usize;
    if p.n == 0 {
        return Ok(());
    }
    let distinct = (p.n / p.cols.max(1)) as usize;
    if cols == 0 || rows.len() < distinct || offsets.len() < distinct + 1 {
        return Err(call.fault(format!("{distinct} ids of {cols} columns do not fit the bindings")));
    }
    for (u, &id) in rows[..distinct].iter().enumerate() {
        let run = tokens.get(offsets[u] as usize..offsets[u + 1] as usize);
        let target = id.checked_sub(p.row_start).and_then(|r| grad.get_mut(r as usize * cols..)).and_then(|g| g.get_mut(..cols));
        let (Some(run), Some(target)) = (run, target) else {
            return Err(call.fault(format!("id {id} (run {u}) does not fit the bindings")));
        };
        // Each column sums its run first, then adds to grad, as one WGSL invocation does.
        let mut sum = vec![0.0f32; cols];
        for &t in run {
            let d = d_out.get(t as usize * cols..).and_then(|d| d.get(..cols)).ok_or_else(|| call.fault(format!("token {t} is outside d_out")))?;
            for (s, &v) in sum.iter_mut().zip(d) {
                *s += v;
            }
        }
        for (g, s) in target.iter_mut().zip(sum) {
            *g += s;
        }
    }
    Ok(())
}
