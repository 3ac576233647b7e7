//! The pipelines on the encoder families, against transformers on the same random-weight
//! fixtures (tests/reference/make_family_fixtures.py): fill-mask with each family's own mask
//! token (`<mask>` for RoBERTa), text classification of texts and pairs, zero-shot
//! classification with an NLI-labelled RoBERTa, multiple choice, ALBERT's sentence-order head
//! as next-sentence prediction; and what each family's tokenizer and inputs refuse.

mod common;

use common::{check_qa_case, fixture, gpu, pipeline_fixture as load, read};
use serde_json::Value;
use sesame::classify::{choose, classify_text, next_sentence_probability, zero_shot};
use sesame::fill_mask::fill_mask;
use sesame::models::auto::{LoadedModel, ModelFiles};
use sesame::models::{Capability, ForwardOptions, IdsBatch};

fn close(label: &str, got: f32, want: &Value) {
    let want = want.as_f64().unwrap() as f32;
    eprintln!("{label}: {got} vs {want}");
    assert!((got - want).abs() <= 1e-4, "{label}: score {got} vs transformers {want}");
}

const MASKED_LMS: &[(&str, &str)] = &[
    ("roberta", "RobertaForMaskedLM"),
    ("xlm-roberta", "XLMRobertaForMaskedLM"),
    ("xlm-roberta-xl", "XLMRobertaXLForMaskedLM"),
    ("distilbert", "DistilBertForMaskedLM"),
    ("albert", "AlbertForMaskedLM"),
    ("ernie", "ErnieForMaskedLM"),
    ("electra", "ElectraForMaskedLM"),
];

#[test]
fn fill_mask_uses_each_familys_mask_token_as_transformers_does() {
    for (family, arch) in MASKED_LMS {
        let (loaded, cases) = load(family, arch);
        for case in cases["fill-mask"].as_array().unwrap() {
            let text = case["text"].as_str().unwrap();
            let got = pollster::block_on(fill_mask(&loaded, text, case["top_k"].as_u64().unwrap() as usize)).unwrap();
            // The pipeline gives one text's candidates as a list, several masks' as lists.
            let want: Vec<&Value> = match &case["result"][0] {
                Value::Array(_) => case["result"].as_array().unwrap().iter().collect(),
                _ => vec![&case["result"]],
            };
            assert_eq!(got.len(), want.len(), "{arch} {text}: masks");
            for (mask, (g, w)) in got.iter().zip(want).enumerate() {
                for (c, wc) in g.iter().zip(w.as_array().unwrap()) {
                    assert_eq!(c.token as u64, wc["token"].as_u64().unwrap(), "{arch} {text} mask {mask}");
                    assert_eq!(c.token_str, wc["token_str"].as_str().unwrap(), "{arch} {text}");
                    assert_eq!(c.sequence, wc["sequence"].as_str().unwrap(), "{arch} {text}");
                    close(&format!("{arch} {text}"), c.score, &wc["score"]);
                }
            }
        }
    }
    // A RoBERTa text with BERT's mask token has no mask.
    let (loaded, _) = load("roberta", "RobertaForMaskedLM");
    let err = pollster::block_on(fill_mask(&loaded, "the cat sat on the [MASK] .", 3)).unwrap_err().to_string();
    assert!(err.contains("no <mask> token"), "{err}");
}

#[test]
fn text_classification_of_texts_and_pairs_matches_the_pipeline() {
    for (family, arch) in [
        ("roberta", "RobertaForSequenceClassification"),
        ("distilbert", "DistilBertForSequenceClassification"),
        ("albert", "AlbertForSequenceClassification"),
        ("ernie", "ErnieForSequenceClassification"),
        ("electra", "ElectraForSequenceClassification"),
        ("xlm-roberta", "XLMRobertaForSequenceClassification"),
    ] {
        let (loaded, cases) = load(family, arch);
        for case in cases["text-classification"].as_array().unwrap() {
            let pair = case.get("text_pair").and_then(Value::as_str);
            let got = pollster::block_on(classify_text(&loaded, case["text"].as_str().unwrap(), pair)).unwrap();
            let want = case["result"].as_array().unwrap();
            assert_eq!(got.len(), want.len(), "{arch}");
            for (g, w) in got.iter().zip(want) {
                assert_eq!(g.label, w["label"].as_str().unwrap(), "{arch} {case}");
                close(arch, g.score, &w["score"]);
            }
        }
    }
}

#[test]
fn zero_shot_classification_matches_the_pipeline() {
    let (loaded, cases) = load("roberta", "RobertaForSequenceClassification");
    assert!(loaded.model.summary().tasks.contains(&"zero-shot-classification"));
    for case in cases["zero-shot-classification"].as_array().unwrap() {
        let labels: Vec<&str> = case["labels"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
        let (text, template, multi) = (case["text"].as_str().unwrap(), case["hypothesis_template"].as_str().unwrap(), case["multi_label"].as_bool().unwrap());
        let got = pollster::block_on(zero_shot(&loaded, text, &labels, template, multi)).unwrap();
        let want = &case["result"];
        for (i, g) in got.iter().enumerate() {
            assert_eq!(g.label, want["labels"][i].as_str().unwrap(), "{case}");
            close(&format!("zero-shot {text} {template} multi={multi}"), g.score, &want["scores"][i]);
        }
    }
    let err = pollster::block_on(zero_shot(&loaded, "the cat", &["cat"], "no slot", false)).unwrap_err().to_string();
    assert!(err.contains("no {} for the label"), "{err}");
    // A classifier without an entailment label is no NLI model.
    let (albert, _) = load("albert", "AlbertForSequenceClassification");
    assert!(!albert.model.summary().tasks.contains(&"zero-shot-classification"));
    let err = pollster::block_on(zero_shot(&albert, "the cat", &["cat", "dog"], "{}", false)).unwrap_err().to_string();
    assert!(err.contains("must start with \"entail\""), "{err}");
}

#[test]
fn multiple_choice_matches_the_heads_softmax() {
    for (family, arch) in [
        ("bert", "BertForMultipleChoice"),
        ("roberta", "RobertaForMultipleChoice"),
        ("distilbert", "DistilBertForMultipleChoice"),
        ("albert", "AlbertForMultipleChoice"),
        ("ernie", "ErnieForMultipleChoice"),
        ("electra", "ElectraForMultipleChoice"),
    ] {
        let (loaded, cases) = load(family, arch);
        for case in cases["multiple-choice"].as_array().unwrap() {
            let choices: Vec<&str> = case["choices"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
            let got = pollster::block_on(choose(&loaded, case["prompt"].as_str().unwrap(), &choices)).unwrap();
            assert_eq!(got.len(), choices.len());
            for g in &got {
                assert_eq!(g.choice, choices[g.index]);
                close(&format!("{arch} choice {}", g.index), g.score, &case["scores"][g.index]);
            }
            assert!(got.windows(2).all(|w| w[0].score >= w[1].score), "best first");
        }
    }
    let (loaded, _) = load("roberta", "RobertaForMultipleChoice");
    let err = pollster::block_on(choose(&loaded, "the cat", &["sat"])).unwrap_err().to_string();
    assert!(err.contains("at least two choices"), "{err}");
}

#[test]
fn question_answering_in_windows_matches_the_pipeline_post_processing() {
    for (family, arch) in [
        ("roberta", "RobertaForQuestionAnswering"),
        ("xlm-roberta", "XLMRobertaForQuestionAnswering"),
        ("xlm-roberta-xl", "XLMRobertaXLForQuestionAnswering"),
        ("distilbert", "DistilBertForQuestionAnswering"),
        ("albert", "AlbertForQuestionAnswering"),
        ("ernie", "ErnieForQuestionAnswering"),
        ("electra", "ElectraForQuestionAnswering"),
    ] {
        let (loaded, cases) = load(family, arch);
        for case in cases["question-answering"].as_array().unwrap() {
            check_qa_case(&loaded, case, arch);
        }
    }
}

#[test]
fn albert_sentence_order_serves_next_sentence_prediction() {
    let (loaded, cases) = load("albert", "AlbertForPreTraining");
    for case in cases["next-sentence-prediction"].as_array().unwrap() {
        let got = pollster::block_on(next_sentence_probability(&loaded, case["text"].as_str().unwrap(), case["text_pair"].as_str().unwrap())).unwrap();
        close("ALBERT sentence order", got, &case["is_next_probability"]);
    }
}

#[test]
fn capabilities_name_what_a_model_can_do_instead() {
    let (loaded, _) = load("electra", "ElectraForMaskedLM");
    let summary = loaded.model.summary();
    assert_eq!((summary.model_type, summary.family), ("electra", "ELECTRA"));
    assert_eq!(summary.tasks, vec!["fill-mask", "feature-extraction"]);
    let err = pollster::block_on(classify_text(&loaded, "the cat", None)).unwrap_err().to_string();
    assert!(err.contains("`ElectraForMaskedLM` can fill masks (fill-mask), compute sentence embeddings"), "{err}");
    // ALBERT's weights are stored once however many layers run: 2 groups of 2 layers.
    let albert = LoadedModel::load(gpu(), &fixture("albert", "AlbertModel"), false).unwrap().model.summary();
    let checkpoint = sesame::weights::Checkpoint::from_bytes(read(&fixture("albert", "AlbertModel"), "model.safetensors")).unwrap();
    let stored: usize = checkpoint.names().map(|n| checkpoint.shape(n).unwrap().iter().product::<usize>()).sum();
    assert_eq!(albert.parameters, stored, "every tensor once");
    assert_eq!(albert.weight_bytes, 4 * stored);
    assert_eq!(albert.layers, 3);
}

#[test]
fn family_inputs_are_checked() {
    // DistilBERT has no token types: they are ignored; ERNIE's task types must be in range.
    let distil = LoadedModel::load(gpu(), &fixture("distilbert", "DistilBertModel"), false).unwrap();
    let ids = IdsBatch { input_ids: vec![5, 6, 7], token_type_ids: Some(vec![0, 1, 1]), batch: 1, seq: 3, ..IdsBatch::default() };
    assert!(distil.model.forward(&ids, ForwardOptions::default()).is_ok());
    let ernie = LoadedModel::load(gpu(), &fixture("ernie", "ErnieModel"), false).unwrap();
    let bad = IdsBatch { task_type_ids: Some(vec![0, 3, 1]), ..ids.clone() };
    let err = ernie.model.forward(&bad, ForwardOptions::default()).err().unwrap().to_string();
    assert!(err.contains("task_type_ids") && err.contains("3"), "{err}");
    // Multiple-choice ids must be [batch, choices, seq].
    let (mc, _) = load("roberta", "RobertaForMultipleChoice");
    let err = mc.model.forward(&ids, ForwardOptions::default()).err().unwrap().to_string();
    assert!(err.contains("[batch, choices, seq]"), "{err}");
    // RoBERTa's positions start after the padding id: 40 positions hold 38 tokens.
    let roberta = LoadedModel::load(gpu(), &fixture("roberta", "RobertaModel"), false).unwrap();
    assert_eq!(roberta.model.max_positions(), 38);
    let long = IdsBatch { input_ids: vec![5; 39], batch: 1, seq: 39, ..IdsBatch::default() };
    let err = roberta.model.forward(&long, ForwardOptions::default()).err().unwrap().to_string();
    assert!(err.contains("longer than the model's 38 positions"), "{err}");
    assert!(roberta.model.require(Capability::Embeddings, "test").is_ok());
}

#[test]
fn a_roberta_folder_without_tokenizer_json_reads_vocab_json_and_merges() {
    let dir = std::env::temp_dir().join(format!("sesame-roberta-bpe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let source = fixture("roberta", "RobertaForMaskedLM");
    for file in ["config.json", "model.safetensors"] {
        std::fs::copy(source.join(file), dir.join(file)).unwrap();
    }
    #[rustfmt::skip]
    let vocab = r#"{"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "t": 4, "h": 5, "e": 6, "Ġ": 7, "c": 8, "a": 9, "th": 10, "the": 11, "Ġc": 12, "Ġca": 13, "Ġcat": 14, "<mask>": 15}"#;
    std::fs::write(dir.join("vocab.json"), vocab).unwrap();
    std::fs::write(dir.join("merges.txt"), "#version: 0.2\nt h\nth e\nĠ c\nĠc a\nĠca t\n").unwrap();
    let loaded = LoadedModel::load(gpu(), &dir, false).unwrap();
    assert_eq!(loaded.encode("test", "the cat", None).unwrap().0, vec![0, 11, 14, 2], "RoBERTa's template over byte-level BPE");
    let filled = pollster::block_on(fill_mask(&loaded, "the <mask>", 2)).unwrap();
    assert_eq!(filled[0].len(), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sentencepiece_families_need_tokenizer_json() {
    // An XLM-R folder with only its SentencePiece model: the error says what to do.
    let dir = std::env::temp_dir().join(format!("sesame-spm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let source = fixture("xlm-roberta", "XLMRobertaModel");
    for file in ["config.json", "model.safetensors"] {
        std::fs::copy(source.join(file), dir.join(file)).unwrap();
    }
    std::fs::write(dir.join("sentencepiece.bpe.model"), b"not read").unwrap();
    let loaded = LoadedModel::load(gpu(), &dir, false).unwrap();
    let err = pollster::block_on(sesame::embed::embed_texts(&loaded, &["the cat"], sesame::embed::Pooling::Mean, false)).unwrap_err().to_string();
    assert!(err.contains("sentencepiece.bpe.model") && err.contains("tokenizer.json"), "{err}");
    let files = ModelFiles::read_tokenizer_files(&dir).unwrap();
    assert_eq!(files.sentencepiece_model, Some("sentencepiece.bpe.model"));
    std::fs::remove_dir_all(&dir).unwrap();
}
