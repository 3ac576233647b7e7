//! The training files `sesame train` reads besides models: classification TSV, CoNLL tags,
//! SQuAD JSON (and JSON lines), SWAG's CSV, annotated JSON lines and gazetteers for ERNIE's
//! knowledge masking, a multi-task folder's tasks.json, plain text drawn into ERNIE 2.0's
//! tasks, and translation's sentence pairs. The first byte picks the reader, the rest is the
//! file; a few batches are drawn from whatever parses, with the tiny BERT fixture's WordPiece
//! tokenizer (the translation fixture's word-level pair for sentence pairs).
#![no_main]

#[path = "common.rs"]
mod common;

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sesame::tokenize::TextTokenizer;
use sesame::train::classification::LabelledSentences;
use sesame::train::cove::{PairBatches, TranslationPairs};
use sesame::train::data::BatchSource;
use sesame::train::ernie2::{StructureTask, StructureTaskData};
use sesame::train::masking::knowledge::{annotated_documents, plain_documents, Document, Gazetteer};
use sesame::train::masking::{MaskedLmCorpus, MaskingConfig, SentencePairs};
use sesame::train::multiple_choice::MultipleChoiceExamples;
use sesame::train::multitask::parse_tasks;
use sesame::train::question_answering::{squad_examples, QaWindows};
use sesame::models::training::formats::label_names;
use sesame::train::token_classification::{LabelledTokens, TokenBatches};

/// Text for a fuzzed gazetteer to find names in: documents of a few sentences.
const DOCUMENTS: &str = "Paris is in France. The cat sat on the mat.\nNew York is big. It rains.\n\nBerlin and Rome. The dog ran home.\nIt was late.";

/// The first few batches (a source drawn without end is not drawn to its end).
fn draw(source: &dyn BatchSource) {
    for index in 0..3 {
        if source.batch(index).is_err() {
            break;
        }
    }
}

/// ERNIE's masked-LM pairs in its three stages, masked by token, phrase and entity.
fn masked(documents: Vec<Document>, gazetteer: Option<&Gazetteer>, tokenizer: &TextTokenizer) {
    let config = MaskingConfig {
        max_ngram: 3,
        schedule: "token:1,phrase:1,entity".parse().expect("a valid schedule"),
        ..MaskingConfig::new(Some(SentencePairs::NextSentence))
    };
    if let Ok(corpus) = MaskedLmCorpus::from_documents(documents, gazetteer, tokenizer, config, 1, 4, 24) {
        draw(&corpus);
    }
}

fuzz_target!(|data: &[u8]| {
    static TOKENIZER: OnceLock<TextTokenizer> = OnceLock::new();
    common::host(); // the memory budget
    let tokenizer = TOKENIZER.get_or_init(|| TextTokenizer::from_bytes(&common::read("train/bert/init/tokenizer.json")).expect("fixture"));
    let Some((&kind, file)) = data.split_first() else { return };
    // `sesame train` reads its data files as UTF-8, refusing anything else.
    let Ok(text) = std::str::from_utf8(file) else { return };
    match kind % 9 {
        0 => {
            if let Ok(sentences) = LabelledSentences::from_tsv(text, tokenizer, 0, Some(1), 4, 16) {
                draw(&sentences.grouped_by_length());
            }
        }
        1 => {
            // Unlabelled lines with each token's characters (CVT's), then CoNLL without.
            let layout = TokenBatches { pad_id: 0, chars_per_token: 8, batch: 4, seq: 16 };
            if let Ok(lines) = LabelledTokens::from_lines(text, tokenizer, layout, Some(1)) {
                draw(&lines);
            }
            let Ok(labels) = label_names(text) else { return };
            if let Ok(tags) = LabelledTokens::from_conll(text, tokenizer, &labels, TokenBatches { chars_per_token: 0, ..layout }, Some(1)) {
                draw(&tags);
            }
        }
        2 => {
            let Ok(examples) = squad_examples(text) else { return };
            if let Ok(windows) = QaWindows::new(examples, tokenizer, 0, None, 4, 24, 8) {
                draw(&windows);
            }
        }
        3 => {
            if let Ok(examples) = MultipleChoiceExamples::from_csv(text, tokenizer, 0, Some(1), 2, 16) {
                draw(&examples);
            }
        }
        4 => {
            if let Ok(documents) = annotated_documents(text) {
                masked(documents, None, tokenizer);
            }
        }
        5 => {
            if let Ok(gazetteer) = Gazetteer::new(text) {
                masked(plain_documents(DOCUMENTS), Some(&gazetteer), tokenizer);
            }
        }
        6 => {
            let _ = parse_tasks(file);
        }
        7 => {
            static PAIR: OnceLock<(TextTokenizer, TextTokenizer)> = OnceLock::new();
            let (source, target) = PAIR.get_or_init(|| {
                let read = |name: &str| TextTokenizer::from_bytes(&common::read(&format!("train/cove-translation/init/{name}"))).expect("fixture");
                (read("tokenizer.json"), read("target_tokenizer.json"))
            });
            let layout = PairBatches { source_pad: 1, target_pad: 0, batch: 4, seq: 12 };
            if let Ok(pairs) = TranslationPairs::from_tsv(text, source, target, layout, Some(1)) {
                draw(&pairs);
            }
        }
        _ => {
            let documents = plain_documents(text);
            for task in [StructureTask::Capitalization, StructureTask::SentenceReordering, StructureTask::SentenceDistance] {
                if let Ok(source) = StructureTaskData::new(task, &documents, tokenizer, 1, 4, 24) {
                    draw(&source);
                }
            }
        }
    }
});
