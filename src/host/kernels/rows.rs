//! Host twin of `shaders/rows.wgsl` (`ops::rows`).

use crate::error::Result;
use crate::host::HostCall;
use crate::ops::rows::Params;

/// map [pairs, 2] of (src row, dst row), src [rows, width] → dst [rows', dst_stride]: each
/// pair copies its src row into its dst row at columns col_offset..col_offset + width; the
/// rest of dst is left as it is.
pub(crate) fn copy_rows(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (map, src, dst) = (call.read_u32(0)?, call.read(1)?, call.write(2)?);
    let (pairs, width, stride, offset) = (p.pairs as usize, p.width as usize, p.dst_stride as usize, p.col_offset as usize);
    if map.len() < 2 * pairs {
        return Err(call.fault(format!("{pairs} pairs do not fit a map of {} ids", map.len())));
    }
    for pair in map.chunks_exact(2).take(pairs) {
        let (s, d) = (pair[0] as usize, pair[1] as usize);
        let from = src.get(s * width..).and_then(|row| row.get(..width));
        let to = dst.get_mut(d * stride + offset..).and_then(|row| row.get_mut(..width));
        match (from, to) {
            (Some(from), Some(to)) => to.copy_from_slice(from),
            _ => return Err(call.fault(format!("pair ({s}, {d}) is outside src or dst"))),
        }
    }
    Ok(())
}
