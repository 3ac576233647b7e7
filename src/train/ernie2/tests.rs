use std::collections::HashMap;

use super::*;
use crate::train::masking::knowledge::plain_documents;

/// A lowercasing WordPiece tokenizer that knows every word of `text` whole.
fn tokenizer(text: &str) -> TextTokenizer {
    TextTokenizer::from_bytes(&crate::train::tokenizer::wordpiece_tokenizer_json(&text.repeat(4), 2000).unwrap()).unwrap()
}

/// `documents` documents of `sentences` sentences each; sentence s of document d is the one
/// word `dXsY`, so a token names its sentence.
fn numbered_corpus(documents: usize, sentences: usize) -> String {
    (0..documents).map(|d| (0..sentences).map(|s| format!("d{d}s{s} .")).collect::<Vec<_>>().join(" ")).collect::<Vec<_>>().join("\n\n")
}

/// The (document, sentence) a token of [`numbered_corpus`] names.
fn sentence_of(t: &TextTokenizer, id: u32) -> Option<(usize, usize)> {
    let token = t.id_to_token(id)?;
    let (d, s) = token.strip_prefix('d')?.split_once('s')?;
    Some((d.parse().ok()?, s.parse().ok()?))
}

/// The rows of a batch, without padding.
fn rows(batch: &Batch) -> Vec<&[u32]> {
    let mask = batch.attention_mask.as_ref().unwrap();
    (0..batch.batch).map(|r| &batch.input_ids[r * batch.seq..r * batch.seq + mask[r * batch.seq..(r + 1) * batch.seq].iter().sum::<u32>() as usize]).collect()
}

#[test]
fn each_order_of_up_to_three_segments_has_its_own_class() {
    assert_eq!((order_class(&[0]), order_class(&[0, 1]), order_class(&[1, 0])), (0, 1, 2));
    assert_eq!((order_class(&[0, 1, 2]), order_class(&[0, 2, 1]), order_class(&[2, 1, 0])), (3, 4, 8));
    let mut classes: Vec<usize> = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]].iter().map(|o| order_class(o)).collect();
    classes.extend([order_class(&[0]), order_class(&[0, 1]), order_class(&[1, 0])]);
    classes.sort_unstable();
    assert_eq!(classes, (0..9).collect::<Vec<_>>());
    assert_eq!(StructureTask::SentenceReordering.num_labels(), 9);
}

#[test]
fn capitalization_labels_the_first_piece_of_each_word_by_its_case() {
    let chars: Vec<char> = "The cat (Paris) x3Y é".chars().collect();
    // The, cat, (, Paris, ), x3, Y, é — as a tokenizer would split them.
    let offsets = [(0, 3), (4, 7), (8, 9), (9, 14), (14, 15), (16, 18), (18, 19), (20, 21)];
    assert_eq!(capital_labels(&chars, &offsets), [1, 0, -100, 1, -100, 0, -100, 0]);
}

#[test]
fn capitalization_batches_label_capitalized_words_one_and_others_zero() {
    let text = "Alpha beta gamma. Delta alpha beta!\n\nBeta Gamma delta.";
    let t = tokenizer(text);
    let data = StructureTaskData::new(StructureTask::Capitalization, &plain_documents(text), &t, 7, 4, 16).unwrap();
    let (mut ones, mut zeros) = (0, 0);
    for i in 0..20 {
        let b = data.batch(i).unwrap();
        assert_eq!(b.labels.len(), b.batch * b.seq);
        for (&id, &label) in b.input_ids.iter().zip(&b.labels) {
            let token = t.id_to_token(id).unwrap();
            match label {
                -100 => assert!(!token.chars().next().unwrap().is_alphabetic() || token.starts_with("##"), "{token} unlabelled"),
                1 => ones += 1,
                0 => zeros += 1,
                other => panic!("label {other}"),
            }
        }
    }
    assert!(ones > 0 && zeros > 0);
    // Every word is lowercased in the input: the ids show no case.
    let b = data.batch(0).unwrap();
    let words = b.input_ids.iter().map(|&id| t.id_to_token(id).unwrap()).filter(|token| !token.starts_with('['));
    assert!(words.clone().count() > 0 && words.clone().all(|token| token == token.to_lowercase()));
    // Which labels a sentence's words get: "Beta Gamma delta." as the only document.
    let one = StructureTaskData::new(StructureTask::Capitalization, &plain_documents("Beta Gamma delta."), &t, 0, 1, 16).unwrap().batch(0).unwrap();
    assert_eq!(one.labels, [-100, 1, 1, 0, -100, -100]);
    assert_eq!(data.batch(3).unwrap(), data.batch(3).unwrap(), "a batch depends on (seed, index) alone");
}

#[test]
fn capitalization_refuses_a_tokenizer_that_keeps_case() {
    let text = "Alpha beta. Gamma delta.";
    let mut json: serde_json::Value = serde_json::from_slice(&crate::train::tokenizer::wordpiece_tokenizer_json(text, 300).unwrap()).unwrap();
    json["normalizer"]["lowercase"] = false.into();
    let cased = TextTokenizer::from_bytes(json.to_string().as_bytes()).unwrap();
    let err = StructureTaskData::new(StructureTask::Capitalization, &plain_documents(text), &cased, 0, 2, 16).err().unwrap().to_string();
    assert!(err.contains("lowercases"), "{err}");
}

#[test]
fn sentence_reordering_shows_consecutive_segments_in_the_order_its_class_names() {
    let text = numbered_corpus(3, 30);
    let t = tokenizer(&text);
    let sep = t.token_to_id("[SEP]").unwrap();
    let data = StructureTaskData::new(StructureTask::SentenceReordering, &plain_documents(&text), &t, 3, 8, 24).unwrap();
    let mut per_class = HashMap::new();
    let draws = 400;
    for i in 0..draws / 8 {
        let b = data.batch(i).unwrap();
        assert_eq!(b.labels.len(), b.batch);
        for (row, &class) in rows(&b).iter().zip(&b.labels) {
            assert!(row.len() <= 24 && row[0] == t.token_to_id("[CLS]").unwrap() && *row.last().unwrap() == sep);
            // Each segment: consecutive sentences of one document.
            let segments: Vec<Vec<(usize, usize)>> =
                row[1..].split(|&id| id == sep).filter(|s| !s.is_empty()).map(|s| s.iter().filter_map(|&id| sentence_of(&t, id)).collect()).collect();
            for segment in &segments {
                assert!(segment.windows(2).all(|w| w[0].0 == w[1].0 && w[1].1 == w[0].1 + 1), "{segment:?}");
            }
            // Put back in document order, they read on from each other.
            let mut sorted = segments.clone();
            sorted.sort();
            assert!(sorted.windows(2).all(|w| w[1][0].1 == w[0].last().unwrap().1 + 1), "{sorted:?}");
            let order: Vec<usize> = segments.iter().map(|s| sorted.iter().position(|o| o == s).unwrap()).collect();
            assert_eq!(class, order_class(&order) as i64, "{segments:?}");
            *per_class.entry(class).or_insert(0) += 1;
        }
    }
    // n uniform in 1..=3, the order uniform among n!: class 0 a third of the time, classes
    // 1–2 a sixth, 3–8 an eighteenth (a paragraph of 24 tokens holds 3 sentences but at a
    // document's last two).
    let share = |c: i64| per_class.get(&c).copied().unwrap_or(0) as f64 / draws as f64;
    assert!((share(0) - 1.0 / 3.0).abs() < 0.08, "{per_class:?}");
    assert!((1..3).all(|c| (share(c) - 1.0 / 6.0).abs() < 0.07), "{per_class:?}");
    assert!((3..9).all(|c| (share(c) - 1.0 / 18.0).abs() < 0.05), "{per_class:?}");
}

#[test]
fn sentence_distance_pairs_next_far_and_foreign_sentences_by_class() {
    let text = numbered_corpus(4, 6);
    let t = tokenizer(&text);
    let data = StructureTaskData::new(StructureTask::SentenceDistance, &plain_documents(&text), &t, 5, 8, 16).unwrap();
    let mut counts = [0; 3];
    let draws = 480;
    for i in 0..draws / 8 {
        let b = data.batch(i).unwrap();
        let types = b.token_type_ids.as_ref().unwrap();
        for (r, (row, &class)) in rows(&b).iter().zip(&b.labels).enumerate() {
            let named: Vec<((usize, usize), u32)> =
                row.iter().enumerate().filter_map(|(p, &id)| sentence_of(&t, id).map(|s| (s, types[r * b.seq + p]))).collect();
            let (a, b_) = match named[..] {
                [(a, 0), (b_, 1)] => (a, b_),
                _ => panic!("a pair of one sentence each in segments 0 and 1: {named:?}"),
            };
            match class {
                0 => assert!(a.0 == b_.0 && b_.1 == a.1 + 1, "{a:?} {b_:?}"),
                1 => assert!(a.0 == b_.0 && a.1.abs_diff(b_.1) >= 2, "{a:?} {b_:?}"),
                2 => assert_ne!(a.0, b_.0),
                other => panic!("class {other}"),
            }
            counts[class as usize] += 1;
        }
    }
    // A uniform, then a class A allows: the last sentence of a document (1 in 6) has no next.
    let shares = [5.0 / 18.0, 1.0 / 3.0 + 1.0 / 36.0, 1.0 / 3.0 + 1.0 / 36.0];
    assert!(counts.iter().zip(shares).all(|(&c, share)| (c as f64 / draws as f64 - share).abs() < 0.06), "{counts:?}");
}

#[test]
fn corpora_and_shapes_a_task_cannot_draw_from_are_refused() {
    let text = numbered_corpus(1, 5);
    let t = tokenizer(&text);
    let docs = plain_documents(&text);
    let err = StructureTaskData::new(StructureTask::SentenceDistance, &docs, &t, 0, 2, 16).err().unwrap().to_string();
    assert!(err.contains("two or more documents"), "{err}");
    let two_short = plain_documents("d0s0 . d0s1 .\n\nd1s0 . d1s1 .");
    let err = StructureTaskData::new(StructureTask::SentenceDistance, &two_short, &t, 0, 2, 16).err().unwrap().to_string();
    assert!(err.contains("three or more sentences"), "no sentence has one two away: {err}");
    let one_each = plain_documents("d0s0 .\n\nd1s0 .");
    let err = StructureTaskData::new(StructureTask::SentenceReordering, &one_each, &t, 0, 2, 16).err().unwrap().to_string();
    assert!(err.contains("no document has two sentences"), "{err}");
    let err = StructureTaskData::new(StructureTask::Capitalization, &plain_documents("42 . 7 ."), &t, 0, 2, 16).err().unwrap().to_string();
    assert!(err.contains("no word that starts with a letter"), "{err}");
    let err = StructureTaskData::new(StructureTask::SentenceReordering, &docs, &t, 0, 2, 6).err().unwrap().to_string();
    assert!(err.contains("at least 7 tokens"), "{err}");
    let err = StructureTaskData::new(StructureTask::Capitalization, &plain_documents("\n\n"), &t, 0, 2, 16).err().unwrap().to_string();
    assert!(err.contains("holds no text"), "{err}");
    assert!("sentence-order".parse::<StructureTask>().is_err());
    assert_eq!("sentence-distance".parse::<StructureTask>().unwrap().to_string(), "sentence-distance");
}
