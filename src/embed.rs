//! Sentence embeddings from any transformer's final hidden states: mean pooling over the real
//! tokens or the first token's vector (`[CLS]`, `<s>`), optionally L2-normalised — the
//! sentence-transformers recipe of all-MiniLM-L6-v2 is mean pooling + normalisation.

use crate::error::{arg_err, Result};
use crate::models::auto::LoadedModel;
use crate::models::{Capability, ForwardOptions, Forwarded, IdsBatch, Model};
use crate::ops::matmul::{matmul, Matmul};
use crate::tensor::Tensor;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pooling {
    /// The average of the token vectors where attention_mask is 1.
    Mean,
    /// The first token's (`[CLS]`) vector.
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

/// One embedding per sequence of the batch: `[batch][hidden]`.
pub async fn sentence_embeddings(model: &dyn Model, inputs: &IdsBatch, pooling: Pooling, normalize: bool) -> Result<Vec<Vec<f32>>> {
    let op = "embed";
    let output = model.capabilities().output(Capability::Embeddings, op, model.architecture())?;
    let out = Forwarded::run(model, inputs.clone(), ForwardOptions { last_hidden_state: true, ..Default::default() })?;
    let hidden = out.output.get(output).ok_or_else(|| arg_err!(op, "the model returned no `{output}`"))?;
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
    out.check(output, &flat).await?;
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
    sentence_embeddings(&*loaded.model, &loaded.batch(&encoded), pooling, normalize).await
}
