//! The classification and question-answering pipelines against the answers transformers
//! gives on the same random-weight fixture models (tests/reference/make_pipeline_fixtures.py).

mod common;

use common::{check_qa_case, fixture, gpu, host, pipeline_fixture as load};
use serde_json::Value;
use sesame::classify::{classify_text, classify_tokens, next_sentence_probability};
use sesame::models::auto::LoadedModel;
use sesame::question_answering::{answer_question, QaOptions};

fn assert_close(label: &str, got: f32, want: &Value) {
    let want = want.as_f64().unwrap() as f32;
    assert!((got - want).abs() <= 1e-4, "{label}: score {got} vs transformers {want}");
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap()
}

#[test]
fn text_classification_matches_the_pipeline() {
    for (family, arch) in [("bert", "BertForSequenceClassification"), ("gpt2", "GPT2ForSequenceClassification")] {
        let (loaded, cases) = load(family, arch);
        for case in cases["text-classification"].as_array().unwrap() {
            let pair = case.get("text_pair").and_then(Value::as_str);
            let got = pollster::block_on(classify_text(&loaded, str_of(case, "text"), pair)).unwrap();
            let want = case["result"].as_array().unwrap();
            assert_eq!(got.len(), want.len(), "{arch}: number of labels");
            for (g, w) in got.iter().zip(want) {
                assert_eq!(g.label, str_of(w, "label"), "{arch} {case}");
                assert_close(arch, g.score, &w["score"]);
            }
        }
    }
}

#[test]
fn next_sentence_probability_matches_the_nsp_head() {
    for arch in ["BertForNextSentencePrediction", "BertForPreTraining"] {
        let (loaded, cases) = load("bert", arch);
        for case in cases["next-sentence-prediction"].as_array().unwrap() {
            let got = pollster::block_on(next_sentence_probability(&loaded, str_of(case, "text"), str_of(case, "text_pair"))).unwrap();
            assert_close(arch, got, &case["is_next_probability"]);
        }
    }
}

#[test]
fn token_classification_matches_the_pipeline() {
    let (loaded, cases) = load("bert", "BertForTokenClassification");
    for case in cases["token-classification"].as_array().unwrap() {
        let got = pollster::block_on(classify_tokens(&loaded, str_of(case, "text"), &["O"])).unwrap();
        let want = case["result"].as_array().unwrap();
        assert_eq!(got.len(), want.len(), "{case}");
        for (g, w) in got.iter().zip(want) {
            assert_eq!(
                (g.entity.as_str(), g.index, g.word.as_str(), g.start, g.end),
                (
                    str_of(w, "entity"),
                    w["index"].as_u64().unwrap() as usize,
                    str_of(w, "word"),
                    w["start"].as_u64().unwrap() as usize,
                    w["end"].as_u64().unwrap() as usize
                )
            );
            assert_close("token-classification", g.score, &w["score"]);
        }
    }
}

#[test]
fn question_answering_matches_the_pipeline_post_processing() {
    let (loaded, cases) = load("bert", "BertForQuestionAnswering");
    // With truncation on, a long context is still read whole, in windows; and the same on
    // the host device.
    let truncating = LoadedModel::load(gpu(), &fixture("bert", "BertForQuestionAnswering"), true).unwrap();
    let on_host = LoadedModel::load(host(), &fixture("bert", "BertForQuestionAnswering"), false).unwrap();
    // Contexts longer than a window of `max_seq_len` (default: the model's 40 positions) are
    // read in windows sharing `doc_stride` tokens.
    for case in cases["question-answering"].as_array().unwrap() {
        for model in [&loaded, &truncating, &on_host] {
            check_qa_case(model, case, "BERT");
        }
    }
}

#[test]
fn pipelines_refuse_the_wrong_head_and_empty_text() {
    let (loaded, _) = load("bert", "BertForQuestionAnswering");
    let err = pollster::block_on(classify_text(&loaded, "the cat", None)).unwrap_err().to_string();
    assert!(err.contains("needs a model that can classify texts") && err.contains("`BertForQuestionAnswering` can answer questions"), "{err}");
    let err = pollster::block_on(answer_question(&loaded, "who ?", " ", &QaOptions::default())).unwrap_err().to_string();
    assert!(err.contains("the text is empty"), "{err}");
    // A window must leave the context more than the tokens windows share.
    let narrow = QaOptions { max_seq_len: 12, doc_stride: Some(6), ..Default::default() };
    let err = pollster::block_on(answer_question(&loaded, "who sat on the mat ?", "the cat sat on the mat .", &narrow)).unwrap_err().to_string();
    assert!(err.contains("leaves 3 for the context") && err.contains("doc_stride of 6"), "{err}");
    let no_room = QaOptions { max_seq_len: 9, ..Default::default() };
    let err = pollster::block_on(answer_question(&loaded, "who sat on the mat ?", "the cat sat on the mat .", &no_room)).unwrap_err().to_string();
    assert!(err.contains("no room for the context in a 9-token window"), "{err}");
    // A stride as long as the window is fine when one window holds the whole context.
    let one_window = QaOptions { doc_stride: Some(100), ..Default::default() };
    assert_eq!(pollster::block_on(answer_question(&loaded, "who ?", "the cat sat .", &one_window)).unwrap().len(), 1);
}
