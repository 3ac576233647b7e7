//! Masked-word filling with a masked-LM head (BERT, RoBERTa, ALBERT, …), as transformers'
//! `fill-mask` pipeline returns it: for each mask token of the text (the tokenizer's own:
//! `[MASK]`, `<mask>`), the `top_k` most likely tokens with their probabilities and the text
//! with the mask replaced.

use crate::error::{arg_err, Result};
use crate::models::auto::LoadedModel;
use crate::models::{Capability, ForwardOptions, Forwarded};

/// One candidate for one mask.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct MaskCandidate {
    /// Softmax probability over the vocabulary.
    pub score: f32,
    pub token: u32,
    /// The token decoded on its own.
    pub token_str: String,
    /// The whole text with this token in place of the mask (special tokens dropped when the
    /// text has one mask, kept when several, as transformers does).
    pub sequence: String,
}

/// Candidates for every mask token of `text`, in order of the masks, best first.
pub async fn fill_mask(loaded: &LoadedModel, text: &str, top_k: usize) -> Result<Vec<Vec<MaskCandidate>>> {
    let op = "fill-mask";
    let logits_name = loaded.model.require(Capability::FillMask, op)?;
    let tokenizer = loaded.tokenizer()?;
    if top_k == 0 {
        return Err(arg_err!(op, "top_k must be at least 1"));
    }
    let (mask_str, mask_id) = loaded.mask_token()?;
    let encoded = loaded.encode_detailed(op, text, None)?;
    let ids = &encoded.ids;
    let masks: Vec<usize> = ids.iter().enumerate().filter(|(_, &id)| id == mask_id).map(|(i, _)| i).collect();
    if masks.is_empty() {
        return Err(arg_err!(op, "the text has no {mask_str} token"));
    }
    let forwarded = Forwarded::run(&*loaded.model, loaded.single(&encoded), ForwardOptions::default())?;
    let logits = forwarded.output.get(logits_name).ok_or_else(|| arg_err!(op, "the model produced no `{logits_name}`"))?;
    let vocab = logits.shape()[2];
    let rows = logits.reshape(&[ids.len(), vocab])?.select_rows(&masks)?.to_vec::<f32>().await?;
    forwarded.check(logits_name, &rows).await?;

    let mut result = Vec::with_capacity(masks.len());
    for (row, &position) in rows.chunks(vocab).zip(&masks) {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let total: f64 = row.iter().map(|&l| ((l - max) as f64).exp()).sum();
        let mut order: Vec<u32> = (0..vocab as u32).collect();
        let k = top_k.min(vocab);
        // Best first; ties go to the lower id.
        order.select_nth_unstable_by(k - 1, |&a, &b| row[b as usize].total_cmp(&row[a as usize]).then(a.cmp(&b)));
        order.truncate(k);
        order.sort_by(|&a, &b| row[b as usize].total_cmp(&row[a as usize]).then(a.cmp(&b)));
        let mut candidates = Vec::with_capacity(k);
        for token in order {
            let mut filled = ids.clone();
            filled[position] = token;
            candidates.push(MaskCandidate {
                score: (((row[token as usize] - max) as f64).exp() / total) as f32,
                token,
                token_str: tokenizer.decode(&[token], false)?,
                sequence: tokenizer.decode(&filled, masks.len() == 1)?,
            });
        }
        result.push(candidates);
    }
    Ok(result)
}
