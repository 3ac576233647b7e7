//! Token embeddings (`shaders/embedding.wgsl`): `out[t] = word[token[t]] + position[pos[t]] +
//! segment[seg[t]]`, the last two optional: BERT uses all three tables, GPT-2 word and
//! position, ELMo's character embedding the word table alone.
//!
//! Ids come from the host, so they are validated on the CPU (an out-of-range id on the GPU
//! would silently read a clamped row) and uploaded as u32 tensors.

use super::quantized::{gather_quantized, Matrix};
use super::{as_u32, expect_f32, grid_1d};
use crate::error::{arg_err, shape_err, Result};
use crate::kernels::embedding::{BackwardParams, Params, BACKWARD, KERNEL};
use crate::tensor::{DType, Tensor};

/// The ids of [`embedding`], one per token, row-major over the leading shape.
#[derive(Clone, Copy, Debug, Default)]
pub struct EmbeddingIds<'a> {
    pub tokens: &'a [u32],
    /// Rows of the position table. Default when a position table is given: 0, 1, … along the
    /// last dimension of the shape (restarting for every sequence), as in BERT and GPT-2.
    pub positions: Option<&'a [u32]>,
    /// Rows of the segment (token type) table. Default when a segment table is given: 0.
    pub segments: Option<&'a [u32]>,
}

/// Checks that `ids` has one id per token and each is a row of `table`.
fn check_ids(op: &'static str, what: &str, ids: &[u32], n: usize, table: &Tensor) -> Result<()> {
    if ids.len() != n {
        return Err(shape_err!(op, "{} {what} ids for {n} tokens", ids.len()));
    }
    let rows = table.shape()[0];
    match ids.iter().position(|&id| id as usize >= rows) {
        Some(i) => Err(arg_err!(op, "{what} id {} at index {i} is out of range for a {what} table of {rows} rows", ids[i])),
        None => Ok(()),
    }
}

/// Embeddings [shape.., C] of the ids; `shape` is the ids' leading shape (e.g. [B, T]), its
/// product the number of tokens. Tables are [rows, C] of one width C; a word table over the
/// device's binding limit is read in row chunks.
pub fn embedding(word: &Tensor, position: Option<&Tensor>, segment: Option<&Tensor>, ids: &EmbeddingIds, shape: &[usize]) -> Result<Tensor> {
    embedding_within(word, position, segment, ids, shape, word.gpu().limits().max_storage_buffer_binding_size)
}

/// [`embedding`] with a word table that may be quantized: its rows are decoded first (one
/// gather of the tokens' rows), then summed with the other tables as an f32 table's are.
pub fn lookup(word: &Matrix, position: Option<&Tensor>, segment: Option<&Tensor>, ids: &EmbeddingIds, shape: &[usize]) -> Result<Tensor> {
    match word {
        Matrix::F32(word) => embedding(word, position, segment, ids, shape),
        Matrix::Quantized(table) => {
            let rows = gather_quantized(table, ids.tokens)?;
            let own_rows: Vec<u32> = (0..ids.tokens.len() as u32).collect();
            embedding(&rows, position, segment, &EmbeddingIds { tokens: &own_rows, ..*ids }, shape)
        }
    }
}

/// [`embedding`] binding at most `binding_limit` bytes of the word table at once.
fn embedding_within(
    word: &Tensor,
    position: Option<&Tensor>,
    segment: Option<&Tensor>,
    ids: &EmbeddingIds,
    shape: &[usize],
    binding_limit: u64,
) -> Result<Tensor> {
    let op = "embedding";
    expect_f32(op, "word", word, 2)?;
    let cols = word.shape()[1];
    for (name, table) in [("position", position), ("segment", segment)] {
        if let Some(table) = table {
            expect_f32(op, name, table, 2)?;
            if table.shape()[1] != cols {
                return Err(shape_err!(op, "{name} table {:?} is not as wide as the word table {:?}", table.shape(), word.shape()));
            }
        }
    }
    if ids.positions.is_some() && position.is_none() {
        return Err(arg_err!(op, "position ids given without a position table"));
    }
    if ids.segments.is_some() && segment.is_none() {
        return Err(arg_err!(op, "segment ids given without a segment table"));
    }
    let n = ids.tokens.len();
    if shape.iter().product::<usize>() != n {
        return Err(shape_err!(op, "{n} token ids do not fill shape {shape:?}"));
    }
    let seq = shape.last().copied().unwrap_or(1).max(1);
    let default_positions: Vec<u32>;
    let positions = match (position, ids.positions) {
        (Some(_), None) => {
            default_positions = (0..n).map(|i| (i % seq) as u32).collect();
            Some(&default_positions[..])
        }
        (_, given) => given,
    };
    let default_segments: Vec<u32>;
    let segments = match (segment, ids.segments) {
        (Some(_), None) => {
            default_segments = vec![0; n];
            Some(&default_segments[..])
        }
        (_, given) => given,
    };
    check_ids(op, "token", ids.tokens, n, word)?;
    if let (Some(table), Some(p)) = (position, positions) {
        check_ids(op, "position", p, n, table)?;
    }
    if let (Some(table), Some(s)) = (segment, segments) {
        check_ids(op, "segment", s, n, table)?;
    }

    let gpu = word.gpu();
    let out_shape: Vec<usize> = shape.iter().copied().chain([cols]).collect();
    let out = Tensor::empty(gpu, &out_shape, DType::F32)?;
    if n == 0 {
        return Ok(out);
    }
    let upload = |ids: Option<&[u32]>| ids.map(|ids| Tensor::from_slice(gpu, ids, &[n])).transpose();
    let token_ids = Tensor::from_slice(gpu, ids.tokens, &[n])?;
    let (position_ids, segment_ids) = (upload(positions)?, upload(segments)?);
    let total = n.checked_mul(cols).ok_or_else(|| shape_err!(op, "{n} × {cols} outputs overflow"))?;
    for (start, rows) in word.row_chunks(binding_limit)? {
        // Chunks no token falls in need no dispatch.
        if !ids.tokens.iter().any(|&id| (start..start + rows).contains(&(id as usize))) {
            continue;
        }
        let params = Params {
            n: as_u32(op, "output elements", total)?,
            cols: as_u32(op, "C", cols)?,
            has_position: position.is_some() as u32,
            has_segment: segment.is_some() as u32,
            word_start: as_u32(op, "word row", start)?,
            word_rows: as_u32(op, "word rows", rows)?,
            _pad: [0; 2],
        };
        let chunk = word.narrow(start, rows)?;
        let bindings =
            [(&chunk).into(), position.into(), segment.into(), (&token_ids).into(), position_ids.as_ref().into(), segment_ids.as_ref().into(), (&out).into()];
        gpu.dispatch(&KERNEL, &[], &params, &bindings, grid_1d(gpu, total, 256))?;
    }
    Ok(out)
}

/// The backward of one table's lookup: `grad` [rows, C] += the sum of `d_out` [.., C] rows
/// over the tokens with each id (`ids`, one per row of d_out). Call it once per table (word,
/// position, segment) with that table's ids.
pub fn embedding_backward(d_out: &Tensor, ids: &[u32], grad: &Tensor) -> Result<()> {
    embedding_backward_within(d_out, ids, grad, None, grad.gpu().limits().max_storage_buffer_binding_size)
}

/// [`embedding_backward`] of a table whose row `padding_idx` gets no gradient, as PyTorch's
/// `nn.Embedding(padding_idx=…)` (BERT's word embeddings, at `pad_token_id`).
pub fn embedding_backward_with_padding(d_out: &Tensor, ids: &[u32], grad: &Tensor, padding_idx: u32) -> Result<()> {
    embedding_backward_within(d_out, ids, grad, Some(padding_idx), grad.gpu().limits().max_storage_buffer_binding_size)
}

/// [`embedding_backward`] binding at most `binding_limit` bytes of `grad` at once, leaving
/// out the tokens of `padding_idx`.
fn embedding_backward_within(d_out: &Tensor, ids: &[u32], grad: &Tensor, padding_idx: Option<u32>, binding_limit: u64) -> Result<()> {
    let op = "embedding_backward";
    expect_f32(op, "grad", grad, 2)?;
    let cols = grad.shape()[1];
    if d_out.dtype() != DType::F32 || d_out.shape().last() != Some(&cols) || d_out.numel() != ids.len() * cols {
        return Err(shape_err!(op, "d_out {:?} must be f32 with {} rows of the table's width {cols}", d_out.shape(), ids.len()));
    }
    check_ids(op, "token", ids, ids.len(), grad)?;
    if ids.is_empty() {
        return Ok(());
    }
    // Token indices grouped by id (a stable sort keeps each run in token order; the padding
    // id's tokens left out), and the runs: (id, start in `order`).
    let mut order: Vec<u32> = (0..ids.len() as u32).filter(|&t| Some(ids[t as usize]) != padding_idx).collect();
    if order.is_empty() {
        return Ok(());
    }
    order.sort_by_key(|&t| ids[t as usize]);
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for (k, &t) in order.iter().enumerate() {
        let id = ids[t as usize];
        if runs.last().is_none_or(|&(last, _)| last != id) {
            runs.push((id, k as u32));
        }
    }
    let gpu = grad.gpu();
    let tokens = Tensor::from_slice(gpu, &order, &[order.len()])?;
    for (start, len) in grad.row_chunks(binding_limit)? {
        // The runs of ids in this chunk are consecutive, as the runs are sorted by id.
        let first = runs.partition_point(|&(id, _)| (id as usize) < start);
        let end = runs.partition_point(|&(id, _)| (id as usize) < start + len);
        if first == end {
            continue;
        }
        let rows: Vec<u32> = runs[first..end].iter().map(|&(id, _)| id).collect();
        let offsets: Vec<u32> = (first..=end).map(|r| runs.get(r).map_or(order.len() as u32, |&(_, k)| k)).collect();
        let n = rows.len() * cols;
        let params = BackwardParams { n: as_u32(op, "gradient elements", n)?, cols: as_u32(op, "C", cols)?, row_start: as_u32(op, "row", start)?, _pad: 0 };
        let rows_t = Tensor::from_slice(gpu, &rows, &[rows.len()])?;
        let offsets_t = Tensor::from_slice(gpu, &offsets, &[offsets.len()])?;
        let chunk = grad.narrow(start, len)?;
        gpu.dispatch(&BACKWARD, &[], &params, &[d_out.into(), (&rows_t).into(), (&offsets_t).into(), (&tokens).into(), (&chunk).into()], grid_1d(gpu, n, 256))?;
    }
    Ok(())
}

#[cfg(test)]
/// CPU reference of [`embedding_backward`]: grad [rows, C] plus the d_out rows of each id.
pub(crate) fn embedding_backward_reference(grad: &[f32], d_out: &[f32], ids: &[u32], cols: usize) -> Vec<f32> {
    let mut out: Vec<f64> = grad.iter().map(|&v| v as f64).collect();
    for (row, &id) in d_out.chunks(cols).zip(ids) {
        for (c, &v) in row.iter().enumerate() {
            out[id as usize * cols + c] += v as f64;
        }
    }
    out.into_iter().map(|v| v as f32).collect()
}

#[cfg(test)]
/// CPU reference of [`embedding`] with explicit ids: [tokens, C] for tables [rows, C].
pub(crate) fn embedding_reference(
    word: &[f32],
    position: Option<(&[f32], &[u32])>,
    segment: Option<(&[f32], &[u32])>,
    tokens: &[u32],
    cols: usize,
) -> Vec<f32> {
    let mut out = Vec::with_capacity(tokens.len() * cols);
    for (t, &tok) in tokens.iter().enumerate() {
        for c in 0..cols {
            let mut v = word[tok as usize * cols + c];
            if let Some((table, ids)) = position {
                v += table[ids[t] as usize * cols + c];
            }
            if let Some((table, ids)) = segment {
                v += table[ids[t] as usize * cols + c];
            }
            out.push(v);
        }
    }
    out
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::gpu::testing::devices;
    use crate::ops::testing::{assert_close, random_vec, rng};
    use pollster::block_on;
    use rand::Rng;

    // Tolerance: exact (the kernel adds the same f32 values in the reference's order).
    const TOL: f32 = 0.0;

    fn ids(rng: &mut rand::rngs::SmallRng, n: usize, below: usize) -> Vec<u32> {
        (0..n).map(|_| rng.random_range(0..below as u32)).collect()
    }

    /// `tables` = rows of (word, position, segment); `explicit` = pass position/segment ids.
    fn check(tables: (usize, Option<usize>, Option<usize>), cols: usize, shape: &[usize], explicit: bool, seed: u64) {
        check_within(tables, cols, shape, explicit, seed, u64::MAX);
    }

    /// [`check`] with the word table bound at most `binding_limit` bytes at a time.
    fn check_within(tables: (usize, Option<usize>, Option<usize>), cols: usize, shape: &[usize], explicit: bool, seed: u64, binding_limit: u64) {
        for gpu in devices() {
            let mut rng = rng(seed);
            let n: usize = shape.iter().product();
            let table = |rng: &mut _, rows: usize| {
                let v = random_vec(rng, rows * cols, 1.0);
                (Tensor::from_slice(gpu, &v, &[rows, cols]).unwrap(), v)
            };
            let (word, wv) = table(&mut rng, tables.0);
            let position = tables.1.map(|rows| table(&mut rng, rows));
            let segment = tables.2.map(|rows| table(&mut rng, rows));
            let tokens = ids(&mut rng, n, tables.0);
            let seq = *shape.last().unwrap();
            let pos_ids = match tables.1 {
                Some(rows) if explicit => ids(&mut rng, n, rows),
                _ => (0..n).map(|i| (i % seq) as u32).collect(),
            };
            let seg_ids = match tables.2 {
                Some(rows) if explicit => ids(&mut rng, n, rows),
                _ => vec![0; n],
            };
            let given = EmbeddingIds {
                tokens: &tokens,
                positions: (explicit && tables.1.is_some()).then_some(&pos_ids[..]),
                segments: (explicit && tables.2.is_some()).then_some(&seg_ids[..]),
            };
            let out = embedding_within(&word, position.as_ref().map(|t| &t.0), segment.as_ref().map(|t| &t.0), &given, shape, binding_limit).unwrap();
            assert_eq!(out.shape(), [shape, &[cols]].concat());
            let want = embedding_reference(
                &wv,
                position.as_ref().map(|t| (&t.1[..], &pos_ids[..])),
                segment.as_ref().map(|t| (&t.1[..], &seg_ids[..])),
                &tokens,
                cols,
            );
            let got = block_on(out.to_vec::<f32>()).unwrap();
            assert_close(&format!("embedding {tables:?} C {cols} shape {shape:?} explicit {explicit} on {}", gpu.adapter_info().name), &got, &want, TOL, TOL);
        }
    }

    #[test]
    fn embedding_matches_reference() {
        // BERT-like: all three tables, explicit and default position / segment ids.
        check((30, Some(12), Some(2)), 7, &[2, 5], true, 1);
        check((30, Some(12), Some(2)), 96, &[3, 12], false, 2);
        // GPT-2-like: word + position.
        check((50, Some(16), None), 33, &[3, 4], false, 3);
        check((50, Some(16), None), 257, &[1, 16], true, 4);
        // Word only (ELMo's characters), width 1, a single token, a flat id list.
        check((262, None, None), 16, &[4, 50], false, 5);
        check((5, None, None), 1, &[1], false, 6);
        check((5, Some(1), Some(1)), 1, &[1, 1], false, 7);
        check((100, None, Some(3)), 300, &[37], true, 8);
    }

    #[test]
    fn oversized_word_table_is_read_in_row_chunks() {
        // 256-byte rows: chunks of 7 rows. 132-byte rows: chunks of whole alignment steps.
        check_within((40, Some(16), Some(2)), 64, &[2, 16], true, 9, 7 * 256);
        check_within((300, Some(16), None), 33, &[4, 16], false, 10, 70 * 132);
    }

    #[test]
    fn backward_sums_the_rows_of_repeated_ids() {
        for gpu in devices() {
            let mut rng = rng(12);
            // Unlimited binding, then 7-row chunks of a 40-row table (ids in several chunks).
            for (rows, cols, n, limit) in [(10, 5, 30, u64::MAX), (40, 64, 50, 7 * 256), (3, 1, 1, u64::MAX)] {
                let token_ids = ids(&mut rng, n, rows);
                let (dv, g0) = (random_vec(&mut rng, n * cols, 1.0), random_vec(&mut rng, rows * cols, 1.0));
                let d_out = Tensor::from_slice(gpu, &dv, &[n, cols]).unwrap();
                let grad = Tensor::from_slice(gpu, &g0, &[rows, cols]).unwrap();
                embedding_backward_within(&d_out, &token_ids, &grad, None, limit).unwrap();
                let want = embedding_backward_reference(&g0, &dv, &token_ids, cols);
                assert_close(
                    &format!("embedding backward {rows}×{cols}, {n} ids on {}", gpu.adapter_info().name),
                    &block_on(grad.to_vec::<f32>()).unwrap(),
                    &want,
                    1e-5,
                    1e-5,
                );
                // With a padding row: the reference without its tokens; the row keeps its value.
                let padding = token_ids[0];
                let grad = Tensor::from_slice(gpu, &g0, &[rows, cols]).unwrap();
                embedding_backward_within(&d_out, &token_ids, &grad, Some(padding), limit).unwrap();
                let kept: Vec<usize> = (0..n).filter(|&t| token_ids[t] != padding).collect();
                let kept_d: Vec<f32> = kept.iter().flat_map(|&t| dv[t * cols..(t + 1) * cols].iter().copied()).collect();
                let want = embedding_backward_reference(&g0, &kept_d, &kept.iter().map(|&t| token_ids[t]).collect::<Vec<_>>(), cols);
                let got = block_on(grad.to_vec::<f32>()).unwrap();
                assert_close(&format!("embedding backward {rows}×{cols}, padding {padding}"), &got, &want, 1e-5, 1e-5);
                let row = padding as usize * cols..(padding as usize + 1) * cols;
                assert_eq!(got[row.clone()], g0[row], "the padding row is untouched");
            }
            let grad = Tensor::zeros(gpu, &[4, 2], DType::F32).unwrap();
            let d_out = Tensor::zeros(gpu, &[2, 2], DType::F32).unwrap();
            assert!(embedding_backward(&d_out, &[1, 4], &grad).unwrap_err().to_string().contains("out of range"));
            assert!(embedding_backward(&d_out, &[1], &grad).is_err(), "one id for two rows");
        }
    }

    #[test]
    fn bad_ids_and_tables_are_errors() {
        for gpu in devices() {
            let word = Tensor::zeros(gpu, &[10, 4], DType::F32).unwrap();
            let pos = Tensor::zeros(gpu, &[3, 4], DType::F32).unwrap();
            let narrow = Tensor::zeros(gpu, &[2, 5], DType::F32).unwrap();
            let err = |e: crate::error::SesameError| e.to_string();
            let tokens = [1u32, 2, 10];
            let e = err(embedding(&word, None, None, &EmbeddingIds { tokens: &tokens, ..Default::default() }, &[3]).unwrap_err());
            assert!(e.contains("embedding") && e.contains("token id 10") && e.contains("10 rows"), "{e}");
            let tokens = [1u32, 2, 3, 4];
            let e = err(embedding(&word, Some(&pos), None, &EmbeddingIds { tokens: &tokens, ..Default::default() }, &[1, 4]).unwrap_err());
            assert!(e.contains("position id 3") && e.contains("3 rows"), "default positions past the table: {e}");
            let e = err(embedding(&word, Some(&pos), None, &EmbeddingIds { tokens: &tokens, positions: Some(&[0, 1]), segments: None }, &[4]).unwrap_err());
            assert!(e.contains("embedding") && e.contains("2 position ids for 4 tokens"), "{e}");
            let e = err(embedding(&word, None, None, &EmbeddingIds { tokens: &tokens, positions: Some(&[0; 4]), segments: None }, &[4]).unwrap_err());
            assert!(e.contains("without a position table"), "{e}");
            let e = err(embedding(&word, None, Some(&narrow), &EmbeddingIds { tokens: &tokens, ..Default::default() }, &[4]).unwrap_err());
            assert!(e.contains("segment table [2, 5]") && e.contains("[10, 4]"), "{e}");
            let e = err(embedding(&word, None, None, &EmbeddingIds { tokens: &tokens, ..Default::default() }, &[2, 3]).unwrap_err());
            assert!(e.contains("4 token ids do not fill shape [2, 3]"), "{e}");
        }
    }
}
