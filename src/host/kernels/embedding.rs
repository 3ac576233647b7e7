//! Host twin of `shaders/embedding.wgsl` (`ops::embedding`).

use crate::error::Result;
use crate::host::HostCall;
use crate::ops::embedding::Params;

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
