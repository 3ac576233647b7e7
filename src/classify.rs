//! Classification pipelines, answering as transformers' pipelines do: `text-classification`
//! (a sequence-classification head over a text or a pair), next-sentence prediction (BERT's
//! NSP head) and `token-classification` (a label per token, `aggregation_strategy="none"`).

use crate::error::{arg_err, Result};
use crate::models::auto::{AutoModel, IdsBatch, LoadedModel};
use crate::models::bert::ForwardOptions;
use crate::models::ModelOutput;
use crate::ops::softmax::softmax_reference;
use crate::tokenize::Encoded;

/// One label and its probability.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LabelScore {
    pub label: String,
    pub score: f32,
}

/// One token's label, as the token-classification pipeline reports it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TokenLabel {
    pub entity: String,
    pub score: f32,
    /// The token's position in the encoded sequence (special tokens counted).
    pub index: usize,
    /// The token as the vocabulary spells it (`##ing`), or the text it covers when unknown.
    pub word: String,
    /// The token's span in the text, in characters.
    pub start: usize,
    pub end: usize,
}

/// A softmax over one row of logits (the CPU reference of the softmax kernel, f64 sums).
pub(crate) fn softmax(logits: &[f32]) -> Vec<f32> {
    softmax_reference(logits, None, logits.len())
}

fn sigmoid(logits: &[f32]) -> Vec<f32> {
    logits.iter().map(|&l| 1.0 / (1.0 + (-l).exp())).collect()
}

/// One text (or pair) through the model: its encoding and the model's outputs.
pub(crate) fn run_one(loaded: &LoadedModel, op: &'static str, text: &str, pair: Option<&str>) -> Result<(Encoded, ModelOutput)> {
    let encoded = loaded.encode_detailed(op, text, pair)?;
    let types = matches!(loaded.model, AutoModel::Bert(_)).then(|| encoded.type_ids.clone());
    let batch = IdsBatch { input_ids: encoded.ids.clone(), attention_mask: None, token_type_ids: types, batch: 1, seq: encoded.ids.len() };
    let out = loaded.model.forward(&batch, ForwardOptions::default())?;
    Ok((encoded, out))
}

/// The output `name`, downloaded.
pub(crate) async fn read_output(out: &ModelOutput, op: &'static str, name: &str) -> Result<Vec<f32>> {
    out.get(name).ok_or_else(|| arg_err!(op, "the model has no `{name}` output"))?.to_vec::<f32>().await
}

/// Every label of a sequence-classification head with its probability, best first: a
/// softmax over the logits, or a sigmoid per label for one label or multi-label problems.
pub async fn classify_text(loaded: &LoadedModel, text: &str, pair: Option<&str>) -> Result<Vec<LabelScore>> {
    let op = "text-classification";
    let head = loaded.model.head_config();
    if !head.architecture("").ends_with("ForSequenceClassification") {
        return Err(arg_err!(op, "needs a sequence-classification model, this one is `{}`", head.architecture("a bare encoder")));
    }
    let (_, out) = run_one(loaded, op, text, pair)?;
    let logits = read_output(&out, op, "logits").await?;
    let multi_label = head.problem_type.as_deref() == Some("multi_label_classification");
    let scores = if logits.len() == 1 || multi_label { sigmoid(&logits) } else { softmax(&logits) };
    let mut labels: Vec<LabelScore> = scores.into_iter().enumerate().map(|(i, score)| LabelScore { label: head.label(i), score }).collect();
    labels.sort_by(|a, b| b.score.total_cmp(&a.score));
    Ok(labels)
}

/// The probability that `second` follows `first` in a text (BERT's NSP head; index 0 of its
/// logits is "is next").
pub async fn next_sentence_probability(loaded: &LoadedModel, first: &str, second: &str) -> Result<f32> {
    let op = "next-sentence-prediction";
    let output = match loaded.model.head_config().architecture("") {
        "BertForNextSentencePrediction" => "logits",
        "BertForPreTraining" => "seq_relationship_logits",
        other => return Err(arg_err!(op, "needs BertForNextSentencePrediction or BertForPreTraining, this model is `{other}`")),
    };
    let (_, out) = run_one(loaded, op, first, Some(second))?;
    let logits = read_output(&out, op, output).await?;
    Ok(softmax(&logits)[0])
}

/// A label for every token that is not special, except labels in `ignore` (the pipeline
/// ignores `O`, "outside any entity").
pub async fn classify_tokens(loaded: &LoadedModel, text: &str, ignore: &[&str]) -> Result<Vec<TokenLabel>> {
    let op = "token-classification";
    let head = loaded.model.head_config();
    if !head.architecture("").ends_with("ForTokenClassification") {
        return Err(arg_err!(op, "needs a token-classification model, this one is `{}`", head.architecture("a bare encoder")));
    }
    let (encoded, out) = run_one(loaded, op, text, None)?;
    let logits = read_output(&out, op, "logits").await?;
    let labels = logits.len() / encoded.ids.len();
    let tokenizer = loaded.tokenizer()?;
    let unknown = ["[UNK]", "<unk>"].iter().find_map(|t| tokenizer.token_to_id(t));
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    for (index, row) in logits.chunks(labels).enumerate() {
        if encoded.special[index] {
            continue;
        }
        let scores = softmax(row);
        let best = (0..labels).fold(0, |b, i| if scores[i] > scores[b] { i } else { b });
        let entity = head.label(best);
        if ignore.contains(&entity.as_str()) {
            continue;
        }
        let (start, end) = encoded.offsets[index];
        let id = encoded.ids[index];
        let word = match tokenizer.id_to_token(id) {
            Some(token) if Some(id) != unknown => token,
            _ => chars[start..end.min(chars.len())].iter().collect(),
        };
        out.push(TokenLabel { entity, score: scores[best], index, word, start, end });
    }
    Ok(out)
}
