//! The objectives a run trains with, by the names the CLI and trainer_state.json give them.

use std::str::FromStr;

use super::Batch;
use crate::error::{arg_err, Result, SesameError};

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Objective {
    /// Causal LM: every position predicts the next token (GPT-2).
    Clm,
    /// Masked LM: the selected positions predict their original token (BERT).
    Mlm,
    /// Masked LM plus next-sentence prediction (BERT's and ERNIE's pretraining).
    #[serde(rename = "mlm+nsp")]
    MlmNsp,
    /// Masked LM plus sentence-order prediction (ALBERT's pretraining).
    #[serde(rename = "mlm+sop")]
    MlmSop,
    /// Replaced-token detection: each token labelled replaced (1) or original (0) (ELECTRA's
    /// discriminator).
    Rtd,
    /// Sequence classification: one label per sequence (BERT's `[CLS]` head).
    Classify,
    /// Token classification: one label per token, −100 where none (BERT's token head).
    #[serde(rename = "token-classify")]
    TokenClassify,
    /// Question answering: each sequence's answer span, a start and an end token (BERT's
    /// span head).
    Qa,
    /// Multiple choice: one score per choice, the right choice labelled (SWAG's; BERT's
    /// `…ForMultipleChoice`).
    #[serde(rename = "multiple-choice")]
    MultipleChoice,
    /// Bidirectional LM: each word predicted from the words before it and from those after
    /// it (ELMo's pretraining).
    #[serde(rename = "bilm")]
    BiLm,
    /// ELECTRA's pretraining: a generator's masked LM and a discriminator's replaced-token
    /// detection on the generator's samples, loss = MLM + 50 · RTD.
    Electra,
    /// Multi-task fine-tuning: each batch scored by its task's objective, through its task's
    /// head on the shared encoder (MT-DNN).
    #[serde(rename = "multi-task")]
    MultiTask,
    /// Translation: the target sentence's words, each predicted from the source and the
    /// target words before it (CoVe's encoder-decoder).
    Translation,
}

impl FromStr for Objective {
    type Err = SesameError;

    fn from_str(s: &str) -> Result<Objective> {
        match s {
            "clm" => Ok(Objective::Clm),
            "mlm" => Ok(Objective::Mlm),
            "mlm+nsp" => Ok(Objective::MlmNsp),
            "mlm+sop" => Ok(Objective::MlmSop),
            "rtd" => Ok(Objective::Rtd),
            "classify" => Ok(Objective::Classify),
            "token-classify" => Ok(Objective::TokenClassify),
            "bilm" => Ok(Objective::BiLm),
            "qa" => Ok(Objective::Qa),
            "multiple-choice" => Ok(Objective::MultipleChoice),
            "electra" => Ok(Objective::Electra),
            "multi-task" => Ok(Objective::MultiTask),
            "translation" => Ok(Objective::Translation),
            other => Err(arg_err!(
                "train",
                "unknown objective `{other}` (clm, mlm, mlm+nsp, mlm+sop, rtd, electra, bilm, classify, token-classify, qa, multiple-choice, multi-task, translation)"
            )),
        }
    }
}

impl std::fmt::Display for Objective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Objective::Clm => "clm",
            Objective::Mlm => "mlm",
            Objective::MlmNsp => "mlm+nsp",
            Objective::MlmSop => "mlm+sop",
            Objective::Rtd => "rtd",
            Objective::Electra => "electra",
            Objective::Classify => "classify",
            Objective::TokenClassify => "token-classify",
            Objective::Qa => "qa",
            Objective::MultipleChoice => "multiple-choice",
            Objective::BiLm => "bilm",
            Objective::MultiTask => "multi-task",
            Objective::Translation => "translation",
        })
    }
}

impl Objective {
    /// Masked LM, alone or with a sentence-pair head.
    pub fn is_masked_lm(self) -> bool {
        matches!(self, Objective::Mlm | Objective::MlmNsp | Objective::MlmSop)
    }

    /// The output of a sentence-pair objective's head, as transformers names it.
    pub fn pair_output(self) -> Option<&'static str> {
        match self {
            Objective::MlmNsp => Some("seq_relationship_logits"),
            Objective::MlmSop => Some("sop_logits"),
            _ => None,
        }
    }

    /// The sentence-pair labels a pair objective scores, by the name transformers gives them.
    pub fn pair_labels(self, batch: &Batch) -> Result<&[i64]> {
        let (labels, name) = match self {
            Objective::MlmSop => (&batch.sentence_order_label, "sentence_order_label"),
            _ => (&batch.next_sentence_label, "next_sentence_label"),
        };
        labels.as_deref().ok_or_else(|| arg_err!("train", "objective {self} needs {name} in every batch"))
    }
}
