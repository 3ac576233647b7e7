//! Classification pipelines, answering as transformers' pipelines do: `text-classification`
//! (a sequence-classification head over a text or a pair), `zero-shot-classification` (an NLI
//! head scoring "this example is {label}" hypotheses), next-sentence prediction (BERT's NSP or
//! ALBERT's sentence-order head), `multiple-choice` (a multiple-choice head over
//! (prompt, choice) pairs), `token-classification` (a label per token,
//! `aggregation_strategy="none"`) and `replaced-token-detection` (ELECTRA's discriminator:
//! the probability that each token was replaced; transformers has no pipeline for it).

use crate::error::{arg_err, Result};
use crate::models::auto::LoadedModel;
use crate::models::{Capability, ForwardOptions, Forwarded, IdsBatch};
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

/// One token as ELECTRA's discriminator judges it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ReplacedToken {
    /// The probability that the token was replaced (a sigmoid of the discriminator's logit).
    pub score: f32,
    /// Whether the discriminator says so (score > 0.5).
    pub replaced: bool,
    pub index: usize,
    pub word: String,
    pub start: usize,
    pub end: usize,
}

/// A softmax over one row of logits, its sum in f64 (a pipeline's scores: a few numbers
/// already on the host, not worth a dispatch).
pub(crate) fn softmax(logits: &[f32]) -> Vec<f32> {
    let max = logits.iter().fold(f64::NEG_INFINITY, |m, &l| m.max(l as f64));
    let exps: Vec<f64> = logits.iter().map(|&l| (l as f64 - max).exp()).collect();
    let sum: f64 = exps.iter().sum();
    exps.iter().map(|&e| (e / sum) as f32).collect()
}

fn sigmoid(logits: &[f32]) -> Vec<f32> {
    logits.iter().map(|&l| 1.0 / (1.0 + (-l).exp())).collect()
}

/// One text (or pair) through the model: its encoding and the model's outputs.
pub(crate) fn run_one<'a>(loaded: &'a LoadedModel, op: &'static str, text: &str, pair: Option<&str>) -> Result<(Encoded, Forwarded<'a>)> {
    let encoded = loaded.encode_detailed(op, text, pair)?;
    let out = Forwarded::run(&*loaded.model, loaded.single(&encoded), ForwardOptions::default())?;
    Ok((encoded, out))
}

/// Text pairs encoded into one padded batch.
fn pairs_batch(loaded: &LoadedModel, op: &'static str, pairs: &[(&str, &str)]) -> Result<IdsBatch> {
    let encoded = pairs.iter().map(|(a, b)| loaded.encode(op, a, Some(b))).collect::<Result<Vec<_>>>()?;
    Ok(loaded.batch(&encoded))
}

/// Every label of a sequence-classification head with its probability, best first: a
/// softmax over the logits, or a sigmoid per label for one label or multi-label problems.
pub async fn classify_text(loaded: &LoadedModel, text: &str, pair: Option<&str>) -> Result<Vec<LabelScore>> {
    let op = "text-classification";
    let output = loaded.model.require(Capability::SequenceClassification, op)?;
    let head = loaded.model.head_config();
    let (_, out) = run_one(loaded, op, text, pair)?;
    let logits = out.read(op, output).await?;
    let multi_label = head.problem_type.as_deref() == Some("multi_label_classification");
    let scores = if logits.len() == 1 || multi_label { sigmoid(&logits) } else { softmax(&logits) };
    let mut labels: Vec<LabelScore> = scores.into_iter().enumerate().map(|(i, score)| LabelScore { label: head.label(i), score }).collect();
    labels.sort_by(|a, b| b.score.total_cmp(&a.score));
    Ok(labels)
}

/// The probability that `second` follows `first` in a text (BERT's next-sentence head, or
/// ALBERT's sentence-order head: index 0 of their logits is "B follows A").
pub async fn next_sentence_probability(loaded: &LoadedModel, first: &str, second: &str) -> Result<f32> {
    let op = "next-sentence-prediction";
    let output = loaded.model.require(Capability::NextSentence, op)?;
    let (_, out) = run_one(loaded, op, first, Some(second))?;
    let logits = out.read(op, output).await?;
    Ok(softmax(&logits)[0])
}

/// Candidate labels scored by an NLI model, best first, as transformers'
/// `zero-shot-classification` pipeline scores them: each label's hypothesis
/// (`template` with `{}` replaced by the label) read as the pair (text, hypothesis); the
/// entailment logits softmaxed over the labels, or with `multi_label` (and for one label)
/// each label's entailment against its contradiction logit.
pub async fn zero_shot(loaded: &LoadedModel, text: &str, labels: &[&str], template: &str, multi_label: bool) -> Result<Vec<LabelScore>> {
    let op = "zero-shot-classification";
    let output = loaded.model.require(Capability::SequenceClassification, op)?;
    let head = loaded.model.head_config();
    let entailment = head.entailment_label().ok_or_else(|| {
        arg_err!(
            op,
            "needs an NLI model: one of its labels must start with \"entail\" (its labels: {})",
            (0..head.num_labels()).map(|i| head.label(i)).collect::<Vec<_>>().join(", ")
        )
    })?;
    if labels.is_empty() || labels.iter().any(|l| l.trim().is_empty()) {
        return Err(arg_err!(op, "give at least one candidate label, none empty"));
    }
    if !template.contains("{}") {
        return Err(arg_err!(op, "the hypothesis template `{template}` has no {{}} for the label"));
    }
    let hypotheses: Vec<String> = labels.iter().map(|label| template.replacen("{}", label, 1)).collect();
    let pairs: Vec<(&str, &str)> = hypotheses.iter().map(|h| (text, h.as_str())).collect();
    let batch = pairs_batch(loaded, op, &pairs)?;
    let out = Forwarded::run(&*loaded.model, batch, ForwardOptions::default())?;
    let logits = out.read(op, output).await?;
    let classes = logits.len() / labels.len();
    let rows: Vec<&[f32]> = logits.chunks(classes).collect();
    let scores = if multi_label || labels.len() == 1 {
        let contradiction = if entailment == 0 { classes - 1 } else { 0 };
        rows.iter().map(|row| softmax(&[row[contradiction], row[entailment]])[1]).collect()
    } else {
        softmax(&rows.iter().map(|row| row[entailment]).collect::<Vec<_>>())
    };
    let mut scored: Vec<LabelScore> = labels.iter().zip(scores).map(|(label, score)| LabelScore { label: label.to_string(), score }).collect();
    scored.sort_by(|a, b| b.score.total_cmp(&a.score));
    Ok(scored)
}

/// One choice of a multiple-choice question and its probability.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ChoiceScore {
    /// The choice's position among those given.
    pub index: usize,
    pub choice: String,
    pub score: f32,
}

/// The choices for `prompt`, best first, scored by a multiple-choice head: each read as the
/// pair (prompt, choice), as SWAG and RACE models are trained, and the choices' logits
/// softmaxed.
pub async fn choose(loaded: &LoadedModel, prompt: &str, choices: &[&str]) -> Result<Vec<ChoiceScore>> {
    let op = "multiple-choice";
    let output = loaded.model.require(Capability::MultipleChoice, op)?;
    if choices.len() < 2 {
        return Err(arg_err!(op, "give at least two choices, got {}", choices.len()));
    }
    let pairs: Vec<(&str, &str)> = choices.iter().map(|choice| (prompt, *choice)).collect();
    let batch = IdsBatch { batch: 1, choices: Some(choices.len()), ..pairs_batch(loaded, op, &pairs)? };
    let out = Forwarded::run(&*loaded.model, batch, ForwardOptions::default())?;
    let scores = softmax(&out.read(op, output).await?);
    let mut scored: Vec<ChoiceScore> =
        choices.iter().zip(scores).enumerate().map(|(index, (choice, score))| ChoiceScore { index, choice: choice.to_string(), score }).collect();
    scored.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.index.cmp(&b.index)));
    Ok(scored)
}

/// A label for every token that is not special, except labels in `ignore` (the pipeline
/// ignores `O`, "outside any entity").
pub async fn classify_tokens(loaded: &LoadedModel, text: &str, ignore: &[&str]) -> Result<Vec<TokenLabel>> {
    let op = "token-classification";
    let output = loaded.model.require(Capability::TokenClassification, op)?;
    let head = loaded.model.head_config();
    let (encoded, out) = run_one(loaded, op, text, None)?;
    let logits = out.read(op, output).await?;
    let labels = logits.len() / encoded.ids.len();
    let words = TokenWords::new(loaded, text)?;
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
        let (word, start, end) = words.of(&encoded, index);
        out.push(TokenLabel { entity, score: scores[best], index, word, start, end });
    }
    Ok(out)
}

/// For every token that is not special, the probability that it replaced the text's
/// original (ELECTRA's discriminator, `…ForPreTraining`).
pub async fn detect_replaced_tokens(loaded: &LoadedModel, text: &str) -> Result<Vec<ReplacedToken>> {
    let op = "replaced-token-detection";
    let output = loaded.model.require(Capability::ReplacedTokens, op)?;
    let (encoded, out) = run_one(loaded, op, text, None)?;
    let logits = out.read(op, output).await?;
    let words = TokenWords::new(loaded, text)?;
    Ok(sigmoid(&logits)
        .into_iter()
        .enumerate()
        .filter(|&(index, _)| !encoded.special[index])
        .map(|(index, score)| {
            let (word, start, end) = words.of(&encoded, index);
            ReplacedToken { score, replaced: score > 0.5, index, word, start, end }
        })
        .collect())
}

/// How the token pipelines name a token: as the vocabulary spells it (`##ing`), or by the
/// text it covers when it is the unknown token.
struct TokenWords<'a> {
    tokenizer: &'a crate::tokenize::TextTokenizer,
    unknown: Option<u32>,
    chars: Vec<char>,
}

impl<'a> TokenWords<'a> {
    fn new(loaded: &'a LoadedModel, text: &str) -> Result<TokenWords<'a>> {
        let tokenizer = loaded.tokenizer()?;
        let unknown = ["[UNK]", "<unk>"].iter().find_map(|t| tokenizer.token_to_id(t));
        Ok(TokenWords { tokenizer, unknown, chars: text.chars().collect() })
    }

    /// Token `index`'s word and its span in the text, in characters.
    fn of(&self, encoded: &Encoded, index: usize) -> (String, usize, usize) {
        let (start, end) = encoded.offsets[index];
        let id = encoded.ids[index];
        let word = match self.tokenizer.id_to_token(id) {
            Some(token) if Some(id) != self.unknown => token,
            _ => self.chars[start.min(self.chars.len())..end.min(self.chars.len())].iter().collect(),
        };
        (word, start, end)
    }
}
