//! The encoder families against transformers — RoBERTa, XLM-RoBERTa, XLM-RoBERTa-XL (pre-LN),
//! DistilBERT, ALBERT, ERNIE, ELECTRA, every head transformers has for them — on the fixtures that
//! tests/reference/make_family_fixtures.py wrote (odd shapes: head dim 6, a prime vocabulary,
//! padding, ALBERT's shared groups with E ≠ H, ELECTRA's projection, DistilBERT's sinusoidal
//! positions computed at load, ERNIE's task types; multiple choice over [2, 3, 7] ids). Every
//! output, hidden state (1e-4) and attention map (1e-5), on the GPU adapter and on the host
//! device, loaded through the registry as any user's folder is.

mod common;

use common::{check_fixture, fixture};

/// Every head of `family` (its class prefix `prefix`), each checked for `outputs`.
fn check_family(family: &str, prefix: &str, heads: &[(&str, &[&str])]) {
    for (head, outputs) in heads {
        check_fixture(&fixture(family, &format!("{prefix}{head}")), outputs);
    }
}

const ENCODER: &[&str] = &["last_hidden_state", "hidden_states.0", "hidden_states.2", "attentions.1"];

#[test]
fn roberta_matches_transformers() {
    #[rustfmt::skip]
    check_family("roberta", "Roberta", &[
        ("Model", &["last_hidden_state", "pooler_output", "hidden_states.2", "attentions.1"]),
        ("ForMaskedLM", &["logits"]),
        ("ForSequenceClassification", &["logits"]),
        ("ForTokenClassification", &["logits"]),
        ("ForQuestionAnswering", &["start_logits", "end_logits"]),
        ("ForMultipleChoice", &["logits"]),
    ]);
}

#[test]
fn xlm_roberta_matches_transformers() {
    #[rustfmt::skip]
    check_family("xlm-roberta", "XLMRoberta", &[
        ("Model", &["last_hidden_state", "pooler_output"]),
        ("ForMaskedLM", &["logits"]),
        ("ForSequenceClassification", &["logits"]),
        ("ForTokenClassification", &["logits"]),
        ("ForQuestionAnswering", &["start_logits", "end_logits"]),
        ("ForMultipleChoice", &["logits"]),
    ]);
}

#[test]
fn xlm_roberta_xl_pre_layer_norm_matches_transformers() {
    #[rustfmt::skip]
    check_family("xlm-roberta-xl", "XLMRobertaXL", &[
        // Pre-LN: the last hidden state is after the final LayerNorm.
        ("Model", &["last_hidden_state", "pooler_output", "hidden_states.0", "hidden_states.1", "hidden_states.2", "attentions.1"]),
        ("ForMaskedLM", &["logits"]),
        ("ForSequenceClassification", &["logits"]),
        ("ForTokenClassification", &["logits"]),
        ("ForQuestionAnswering", &["start_logits", "end_logits"]),
        ("ForMultipleChoice", &["logits"]),
    ]);
}

#[test]
fn distilbert_matches_transformers() {
    #[rustfmt::skip]
    check_family("distilbert", "DistilBert", &[
        // Its sinusoidal position table is not in the checkpoint: computed at load.
        ("Model", ENCODER),
        ("ForMaskedLM", &["logits"]),
        ("ForSequenceClassification", &["logits"]),
        ("ForTokenClassification", &["logits"]),
        ("ForQuestionAnswering", &["start_logits", "end_logits"]),
        ("ForMultipleChoice", &["logits"]),
    ]);
}

#[test]
fn albert_matches_transformers() {
    #[rustfmt::skip]
    check_family("albert", "Albert", &[
        // 3 layers over 2 groups of 2: 6 layer runs, 7 hidden states.
        ("Model", &["last_hidden_state", "pooler_output", "hidden_states.6", "attentions.5"]),
        ("ForPreTraining", &["prediction_logits", "sop_logits"]),
        ("ForMaskedLM", &["logits"]),
        ("ForSequenceClassification", &["logits"]),
        ("ForTokenClassification", &["logits"]),
        ("ForQuestionAnswering", &["start_logits", "end_logits"]),
        ("ForMultipleChoice", &["logits"]),
    ]);
}

#[test]
fn ernie_matches_transformers() {
    #[rustfmt::skip]
    check_family("ernie", "Ernie", &[
        ("Model", &["last_hidden_state", "pooler_output", "hidden_states.0"]),
        ("ForMaskedLM", &["logits"]),
        ("ForPreTraining", &["prediction_logits", "seq_relationship_logits"]),
        ("ForNextSentencePrediction", &["logits"]),
        ("ForSequenceClassification", &["logits"]),
        ("ForTokenClassification", &["logits"]),
        ("ForQuestionAnswering", &["start_logits", "end_logits"]),
        ("ForMultipleChoice", &["logits"]),
    ]);
}

#[test]
fn electra_matches_transformers() {
    #[rustfmt::skip]
    check_family("electra", "Electra", &[
        ("Model", ENCODER),
        ("ForPreTraining", &["logits"]),
        ("ForMaskedLM", &["logits"]),
        ("ForSequenceClassification", &["logits"]),
        ("ForTokenClassification", &["logits"]),
        ("ForQuestionAnswering", &["start_logits", "end_logits"]),
        ("ForMultipleChoice", &["logits"]),
    ]);
}
