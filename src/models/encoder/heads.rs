//! The task heads of the encoder families, as reusable modules: the masked-LM head, the
//! sentence-level classifiers (on the pooler, or an MLP on the first token), the span head
//! for question answering, and ELECTRA's per-token discriminator. A family's file picks
//! them by the class its config names, with its own key names.

use super::EncoderConfig;
use crate::error::Result;
use crate::nn::{Activation, Gradients, LayerNorm, Linear};
use crate::ops::dropout::{dropout, Dropout};
use crate::ops::layer_norm::LayerNormOutput;
use crate::ops::matmul::{matmul, Matmul};
use crate::ops::quantized::Matrix;
use crate::tensor::{DType, Tensor};
use crate::weights::Weights;

/// The task head of an encoder.
pub enum EncoderHead {
    /// `…Model`: last_hidden_state (and pooler_output when there is a pooler).
    Base,
    /// `…ForMaskedLM`: logits [B, T, V].
    MaskedLm(MaskedLmHead),
    /// `…ForPreTraining`: the masked-LM head (`prediction_logits`) and a two-way classifier
    /// of the sentence pair on the pooler.
    PreTraining(MaskedLmHead, SentencePairHead),
    /// `…ForNextSentencePrediction`: logits [B, 2] on the pooler.
    NextSentence(Linear),
    /// `…ForSequenceClassification`: logits [B, labels].
    SequenceClassification(SequenceHead),
    /// `…ForTokenClassification`: logits [B, T, labels].
    TokenClassification(Linear),
    /// `…ForQuestionAnswering`: start_logits and end_logits [B, T].
    QuestionAnswering(SpanHead),
    /// `…ForMultipleChoice`: one score per choice, logits [B, choices].
    MultipleChoice(SequenceHead),
    /// ELECTRA's `…ForPreTraining`: the discriminator's replaced/original logit per token,
    /// logits [B, T].
    ReplacedTokens(MlpHead),
}

/// The masked-LM head: a transform (dense, activation, LayerNorm), then the decoder back to
/// the vocabulary, tied to the word embeddings unless the config unties them, plus an output
/// bias. The transform maps the hidden size H to the embedding size E (ALBERT,
/// ELECTRA) or keeps H.
pub struct MaskedLmHead {
    dense: Linear,
    activation: Activation,
    layer_norm: LayerNorm,
    decoder: Linear,
}

/// Where a family keeps its masked-LM head's parts, relative to the head's prefix.
pub struct LmHeadNames {
    pub dense: &'static str,
    pub layer_norm: &'static str,
    pub decoder: &'static str,
    /// The output bias, when kept beside the decoder rather than as `{decoder}.bias`.
    pub bias: Option<&'static str>,
}

impl MaskedLmHead {
    pub fn load(w: &Weights, names: &LmHeadNames, c: &EncoderConfig, activation: Activation, word_embeddings: &Matrix) -> Result<MaskedLmHead> {
        let (h, e, v) = (c.hidden_size, c.embedding_size, c.vocab_size);
        let decoder = w.pp(names.decoder);
        let weight = decoder.untied_matrix("weight", [v, e], c.head.tie_word_embeddings)?.unwrap_or_else(|| word_embeddings.clone());
        let bias = match names.bias {
            // transformers ties `decoder.bias` to the head's `bias`; a checkpoint may hold both.
            Some(name) if w.contains(name) => {
                if decoder.contains("bias") {
                    decoder.tied_copy("bias", &[v])?;
                }
                w.tensor(name, &[v])?
            }
            _ => decoder.tensor("bias", &[v])?,
        };
        Ok(MaskedLmHead {
            dense: Linear::load(&w.pp(names.dense), h, e)?,
            activation,
            layer_norm: LayerNorm::load(&w.pp(names.layer_norm), e, c.layer_norm_eps)?,
            decoder: Linear::from_matrix(weight, Some(bias)),
        })
    }

    pub(crate) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let transformed = self.layer_norm.forward(&self.activation.forward(&self.dense.forward(x)?)?)?;
        self.decoder.forward(&transformed)
    }

    /// The logits and the transform's pre-activation, activation and LayerNorm output.
    pub(crate) fn forward_saved(&self, x: &Tensor) -> Result<(Tensor, [Tensor; 2], LayerNormOutput)> {
        let pre = self.dense.forward(x)?;
        let act = self.activation.forward(&pre)?;
        let norm = self.layer_norm.forward_saved(&act)?;
        Ok((self.decoder.forward(&norm.y)?, [pre, act], norm))
    }

    pub(crate) fn backward(&self, x: &Tensor, [pre, act]: &[Tensor; 2], norm: &LayerNormOutput, d_logits: &Tensor, grads: &Gradients) -> Result<Tensor> {
        let d_transformed = self.decoder.backward(&norm.y, d_logits, grads)?;
        let d_act = self.layer_norm.backward(act, norm, &d_transformed, grads)?;
        self.dense.backward(x, &self.activation.backward(pre, &d_act)?, grads)
    }
}

/// The two-way classifier of `…ForPreTraining` on the pooled first token: BERT's and ERNIE's
/// next-sentence head or ALBERT's sentence-order head.
pub struct SentencePairHead {
    pub classifier: Linear,
    /// The output holding its logits.
    pub output: &'static str,
    /// Whether training drops out the pooled output first (at `classifier_dropout`):
    /// ALBERT's head does, BERT's does not.
    pub dropout: bool,
}

impl SentencePairHead {
    /// BERT's and ERNIE's `seq_relationship` (label 0: B follows A).
    pub fn next_sentence(classifier: Linear) -> SentencePairHead {
        SentencePairHead { classifier, output: "seq_relationship_logits", dropout: false }
    }

    /// ALBERT's `sop_classifier` (label 1: the segments swapped).
    pub fn sentence_order(classifier: Linear) -> SentencePairHead {
        SentencePairHead { classifier, output: "sop_logits", dropout: true }
    }
}

/// dense → activation → out, on the rows it is given: RoBERTa's classification head
/// (`dense`, tanh, `out_proj`), ELECTRA's (gelu) and its discriminator (`dense`,
/// `dense_prediction`), DistilBERT's (`pre_classifier`, ReLU, `classifier`).
pub struct MlpHead {
    dense: Linear,
    activation: Activation,
    out: Linear,
    /// Whether training drops out the input too (RoBERTa's and ELECTRA's classifiers), not
    /// only the activation (all).
    input_dropout: bool,
}

/// What an [`MlpHead`]'s training forward keeps for its backward.
pub(crate) struct MlpSaved {
    /// The input after its dropout, the pre-activation, and the activation after its dropout.
    x: Tensor,
    pre: Tensor,
    act: Tensor,
    drops: [Option<Dropout>; 2],
}

impl MlpHead {
    /// `dense` (H → H) and `out` (H → `outputs`), each under its own prefix.
    pub fn load(dense: &Weights, activation: Activation, out: &Weights, hidden: usize, outputs: usize) -> Result<MlpHead> {
        Ok(MlpHead { dense: Linear::load(dense, hidden, hidden)?, activation, out: Linear::load(out, hidden, outputs)?, input_dropout: false })
    }

    /// The same head, dropping out its input in training as well (RoBERTa's and ELECTRA's
    /// `ClassificationHead`).
    pub fn dropping_input(self) -> MlpHead {
        MlpHead { input_dropout: true, ..self }
    }

    /// How many values it outputs per row.
    pub(crate) fn outputs(&self) -> usize {
        self.out.weight.shape()[0]
    }

    pub(crate) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.out.forward(&self.activation.forward(&self.dense.forward(x)?)?)
    }

    /// The training forward: `drops` are the dropout calls in order (the input's then the
    /// activation's when the head drops its input; else the activation's alone, the second
    /// unused; None for none).
    pub(crate) fn forward_saved(&self, x: &Tensor, drops: [Option<Dropout>; 2]) -> Result<(Tensor, MlpSaved)> {
        let [input_drop, hidden_drop] = if self.input_dropout { drops } else { [None, drops[0]] };
        let x = dropout(x, input_drop)?;
        let pre = self.dense.forward(&x)?;
        let act = dropout(&self.activation.forward(&pre)?, hidden_drop)?;
        Ok((self.out.forward(&act)?, MlpSaved { x, pre, act, drops: [input_drop, hidden_drop] }))
    }

    /// Adds the head's gradients and returns the gradient of its input rows.
    pub(crate) fn backward(&self, s: &MlpSaved, d_out: &Tensor, grads: &Gradients) -> Result<Tensor> {
        let d_act = dropout(&self.out.backward(&s.act, d_out, grads)?, s.drops[1])?;
        let d_x = self.dense.backward(&s.x, &self.activation.backward(&s.pre, &d_act)?, grads)?;
        dropout(&d_x, s.drops[0])
    }
}

/// A classifier of each sequence (or choice) from its first token.
pub enum SequenceHead {
    /// The pooler (dense + tanh on the first token), then this linear map (BERT, ALBERT,
    /// ERNIE, and RoBERTa's multiple choice).
    Pooled(Linear),
    /// An [`MlpHead`] on the first token's hidden state (RoBERTa, ELECTRA, DistilBERT).
    FirstToken(MlpHead),
}

/// `…ForQuestionAnswering`'s head: `qa_outputs` gives each token a start and an end logit.
/// Its output [B·T, 2] is transposed to [2, B·T] (a product with the 2 × 2 identity, which is
/// exact) so that each logit is one contiguous row.
pub struct SpanHead {
    qa_outputs: Linear,
    identity: Tensor,
}

impl SpanHead {
    pub fn load(root: &Weights, hidden_size: usize) -> Result<SpanHead> {
        let qa_outputs = Linear::load(&root.pp("qa_outputs"), hidden_size, 2)?;
        let identity = Tensor::from_slice(root.gpu(), &[1.0f32, 0.0, 0.0, 1.0], &[2, 2])?;
        Ok(SpanHead { qa_outputs, identity })
    }

    /// The start and end logits, [B, T] each, of the encoder's rows [B·T, C].
    pub(crate) fn logits(&self, rows: &Tensor, batch: usize, seq: usize) -> Result<(Tensor, Tensor)> {
        let transposed = matmul(&self.identity, &self.qa_outputs.forward(rows)?, Matmul { trans_b: true, ..Default::default() })?;
        Ok((transposed.narrow(0, 1)?.reshape(&[batch, seq])?, transposed.narrow(1, 1)?.reshape(&[batch, seq])?))
    }

    /// Adds the head's weight gradients and returns the rows' gradient [B·T, C], from the
    /// gradients of the start and end logits ([B, T] each).
    pub(crate) fn backward(&self, rows: &Tensor, d_start: &Tensor, d_end: &Tensor, grads: &Gradients) -> Result<Tensor> {
        let n = d_start.numel();
        let d_transposed = Tensor::empty(rows.gpu(), &[2, n], DType::F32)?;
        d_transposed.write_rows(0, &d_start.reshape(&[1, n])?)?;
        d_transposed.write_rows(1, &d_end.reshape(&[1, n])?)?;
        let d_logits = matmul(&d_transposed, &self.identity, Matmul { trans_a: true, ..Default::default() })?;
        self.qa_outputs.backward(rows, &d_logits, grads)
    }
}
