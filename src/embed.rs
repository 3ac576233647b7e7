//! Sentence embeddings from any transformer's final hidden states: mean pooling over the real
//! tokens or the first token's vector ([CLS], `<s>`), optionally L2-normalised — the
//! sentence-transformers recipe of all-MiniLM-L6-v2 is mean pooling + normalisation.

use crate::error::{arg_err, Result};
use crate::models::auto::LoadedModel;
use crate::models::{Capability, ForwardOptions, IdsBatch, Model};
use crate::ops::matmul::{matmul, Matmul};
use crate::tensor::Tensor;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pooling {
    /// The average of the token vectors where attention_mask is 1.
    Mean,
    /// The first token's ([CLS]) vector.
    Cls,
}

impl std::str::FromStr for Pooling {
    type Err = crate::SesameError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "mean" => Ok(Pooling::Mean),
            "cls" => Ok(Pooling::Cls),
            other => Err(arg_err!("embed", "unknown pooling `{other}` (expected mean or cls)")),
        }
    }
}

/// Encoded texts right-padded into one batch, row-major [batch, seq].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PaddedBatch {
    pub input_ids: Vec<u32>,
    pub attention_mask: Vec<u32>,
    pub token_type_ids: Vec<u32>,
    pub batch: usize,
    pub seq: usize,
}

impl PaddedBatch {
    /// Pads (ids, token types) rows to the longest with `pad_id` (mask 0, type 0).
    pub fn pad(rows: &[(Vec<u32>, Vec<u32>)], pad_id: u32) -> PaddedBatch {
        let seq = rows.iter().map(|(ids, _)| ids.len()).max().unwrap_or(0);
        let mut b = PaddedBatch { batch: rows.len(), seq, ..Default::default() };
        for (ids, types) in rows {
            let pad = seq - ids.len();
            b.input_ids.extend(ids.iter().copied().chain(std::iter::repeat_n(pad_id, pad)));
            b.attention_mask.extend(std::iter::repeat_n(1, ids.len()).chain(std::iter::repeat_n(0, pad)));
            b.token_type_ids.extend(types.iter().copied().chain(std::iter::repeat_n(0, pad)));
        }
        b
    }

    /// The batch as model inputs (a model without token types ignores them).
    pub fn ids(&self) -> IdsBatch {
        IdsBatch {
            input_ids: self.input_ids.clone(),
            attention_mask: Some(self.attention_mask.clone()),
            token_type_ids: Some(self.token_type_ids.clone()),
            batch: self.batch,
            seq: self.seq,
            ..IdsBatch::default()
        }
    }
}

/// One embedding per sequence of the batch: [batch][hidden].
pub async fn sentence_embeddings(model: &dyn Model, inputs: &IdsBatch, pooling: Pooling, normalize: bool) -> Result<Vec<Vec<f32>>> {
    let op = "embed";
    let output = model.capabilities().output(Capability::Embeddings, op, model.architecture())?;
    let out = model.forward(inputs, ForwardOptions { last_hidden_state: true, ..Default::default() })?;
    let hidden = out.get(output).ok_or_else(|| arg_err!(op, "the model returned no `{output}`"))?;
    let (batch, seq, width) = (inputs.batch, inputs.seq, model.sizes().hidden_size);
    let pooled = match pooling {
        Pooling::Cls => hidden.reshape(&[batch * seq, width])?.select_rows(&(0..batch).map(|b| b * seq).collect::<Vec<_>>())?,
        Pooling::Mean => {
            // [B, 1, T] weights (mask / count) times [B, T, C] hidden states.
            let mut weights = Vec::with_capacity(batch * seq);
            for b in 0..batch {
                let mask: Vec<f32> = (0..seq).map(|t| inputs.attention_mask.as_ref().map_or(1.0, |m| (m[b * seq + t] != 0) as u32 as f32)).collect();
                let count = mask.iter().sum::<f32>().max(1e-9);
                weights.extend(mask.iter().map(|m| m / count));
            }
            let weights = Tensor::from_slice(hidden.gpu(), &weights, &[batch, 1, seq])?;
            matmul(&weights, hidden, Matmul::default())?
        }
    };
    let flat = pooled.to_vec::<f32>().await?;
    Ok(flat
        .chunks(width)
        .map(|row| {
            let norm = if normalize { row.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12) } else { 1.0 };
            row.iter().map(|v| v / norm).collect()
        })
        .collect())
}

/// Sentence embeddings of `texts` (each checked against the model's positions), batched with
/// padding: one vector per text.
pub async fn embed_texts(loaded: &LoadedModel, texts: &[impl AsRef<str>], pooling: Pooling, normalize: bool) -> Result<Vec<Vec<f32>>> {
    let op = "embed";
    loaded.model.require(Capability::Embeddings, op)?;
    if texts.is_empty() {
        return Err(arg_err!(op, "no texts given"));
    }
    let encoded = texts.iter().map(|t| loaded.encode(op, t.as_ref(), None)).collect::<Result<Vec<_>>>()?;
    let batch = PaddedBatch::pad(&encoded, loaded.model.head_config().pad_token_id.unwrap_or(0));
    sentence_embeddings(&*loaded.model, &batch.ids(), pooling, normalize).await
}
