//! The corpus's rows, pairs, masks and units.

use super::*;
use crate::train::masking::knowledge;

const VOCAB: &str = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\nsat\non\nmat\ndog\nran\nfast\nplay\n##ing\n##ed\nbird\nsang\nloud\n##ly\n.\n";

fn corpus(config: MaskingConfig, seq: usize) -> MaskedLmCorpus {
    let tokenizer = TextTokenizer::from_wordpiece_vocab(VOCAB, true).unwrap();
    let documents = [
        "the cat sat on the mat. the dog ran fast. the bird sang loudly.\nthe cat played. the dog played on the mat.",
        "the bird sang. the cat ran fast on the mat. the dog sat.",
        "playing playing playing. the mat sat on the dog.",
    ];
    MaskedLmCorpus::new(&documents.join("\n\n"), &tokenizer, config, 3, 8, seq).unwrap()
}

fn nsp() -> MaskingConfig {
    MaskingConfig::new(Some(SentencePairs::NextSentence))
}

/// A corpus's sentences as token ids.
fn sentence_ids(c: &MaskedLmCorpus) -> Vec<Vec<Vec<u32>>> {
    c.documents.iter().map(|d| d.iter().map(|s| ids(s)).collect()).collect()
}

#[test]
fn splits_documents_and_sentences() {
    let text = "a b. c! d?e f\ng h .";
    let split = |keep: &[Range<usize>]| sentences(text, keep).into_iter().map(|r| &text[r]).collect::<Vec<_>>();
    assert_eq!(split(&[]), vec!["a b.", "c!", "d?e f", "g h ."]);
    assert_eq!(split(std::slice::from_ref(&(2..6))), vec!["a b. c!", "d?e f", "g h ."], "not inside a span");
    let c = corpus(nsp(), 24);
    assert_eq!(c.documents.len(), 3);
    assert_eq!(c.documents[0].len(), 5);
}

#[test]
fn pairs_are_cls_a_sep_b_sep_with_segments_and_padding() {
    let c = corpus(nsp(), 24);
    for index in 0..20 {
        let b = c.batch(index).unwrap();
        assert_eq!(b, c.batch(index).unwrap(), "a batch depends on its index only");
        let types = b.token_type_ids.as_ref().unwrap();
        let mask = b.attention_mask.as_ref().unwrap();
        for row in 0..b.batch {
            let r = row * b.seq..(row + 1) * b.seq;
            let (ids, types, mask) = (&b.input_ids[r.clone()], &types[r.clone()], &mask[r]);
            let real = mask.iter().filter(|&&m| m == 1).count();
            assert!(mask[..real].iter().all(|&m| m == 1) && ids[real..].iter().all(|&t| t == 0), "padding after the text: {ids:?}");
            assert_eq!(ids[0], 2, "[CLS] first");
            let seps: Vec<usize> = (0..real).filter(|&i| ids[i] == 3).collect();
            assert_eq!(seps.len(), 2, "two [SEP]s: {ids:?}");
            assert_eq!(seps[1], real - 1);
            assert!(types[..=seps[0]].iter().all(|&t| t == 0) && types[seps[0] + 1..real].iter().all(|&t| t == 1), "{types:?}");
            assert!(seps[1] > seps[0] + 1, "B is not empty: {ids:?}");
        }
    }
}

#[test]
fn sentence_order_pairs_are_consecutive_segments_swapped_half_of_the_time() {
    // Long rows: no segment is truncated, so A and B are exactly the corpus's text.
    let c = corpus(MaskingConfig { pairs: Some(SentencePairs::SentenceOrder), ..nsp() }, 64);
    let texts: Vec<Vec<u32>> = sentence_ids(&c).iter().map(|d| d.concat()).collect();
    let (mut rows, mut swapped) = (0, 0);
    for index in 0..50 {
        let b = c.batch(index).unwrap();
        assert!(b.next_sentence_label.is_none());
        let labels = b.sentence_order_label.as_ref().unwrap();
        for (row, &label) in labels.iter().enumerate() {
            let r = row * b.seq..(row + 1) * b.seq;
            // The original tokens: a masked position's label holds it.
            let ids: Vec<u32> = r.clone().map(|i| if b.labels[i] >= 0 { b.labels[i] as u32 } else { b.input_ids[i] }).collect();
            let seps: Vec<usize> = (0..ids.len()).filter(|&i| ids[i] == 3).collect();
            assert_eq!(ids[0], 2);
            assert_eq!(seps.len(), 2, "{ids:?}");
            let (a, second) = (&ids[1..seps[0]], &ids[seps[0] + 1..seps[1]]);
            assert!(!a.is_empty() && !second.is_empty(), "{ids:?}");
            assert!(b.token_type_ids.as_ref().unwrap()[r][seps[0] + 1] == 1);
            let in_order = if label == 1 { [second, a].concat() } else { [a, second].concat() };
            assert!(texts.iter().any(|t| t.windows(in_order.len()).any(|w| w == in_order.as_slice())), "not consecutive text of one document: {ids:?}");
            rows += 1;
            swapped += label as usize;
        }
    }
    let share = swapped as f64 / rows as f64;
    assert!((0.4..0.6).contains(&share), "share swapped: {share}");
    // A single-sentence document still gives two segments, split inside the sentence.
    let tokenizer = TextTokenizer::from_wordpiece_vocab(VOCAB, true).unwrap();
    let one = MaskedLmCorpus::new("the cat sat", &tokenizer, MaskingConfig { pairs: Some(SentencePairs::SentenceOrder), ..nsp() }, 0, 4, 16).unwrap();
    assert!(one.batch(0).unwrap().sentence_order_label.is_some());
    let err = MaskedLmCorpus::new("cat", &tokenizer, MaskingConfig { pairs: Some(SentencePairs::SentenceOrder), ..nsp() }, 0, 4, 16).err().unwrap().to_string();
    assert!(err.contains("at least two tokens"), "{err}");
}

#[test]
fn selects_fifteen_percent_with_80_10_10_replacement() {
    let c = corpus(MaskingConfig { pairs: None, ..nsp() }, 16);
    let (mut selected, mut masked, mut kept, mut random_next) = (0, 0, 0, 0);
    for index in 0..400 {
        let b = c.batch(index).unwrap();
        assert!(b.next_sentence_label.is_none() && b.token_type_ids.is_none());
        for row in 0..b.batch {
            let r = row * b.seq..(row + 1) * b.seq;
            // Less [CLS], the final [SEP] and the separators between documents.
            let real = b.attention_mask.as_ref().unwrap()[r.clone()].iter().filter(|&&m| m == 1).count();
            let text = real - 2 - b.input_ids[r.start + 1..r.start + real - 1].iter().filter(|&&t| t == 3).count();
            let labelled: Vec<usize> = r.filter(|&i| b.labels[i] != -100).collect();
            assert_eq!(labelled.len(), ((text as f64 * 0.15).round() as usize).max(1), "row {row} of batch {index}");
            for i in labelled {
                selected += 1;
                match b.input_ids[i] {
                    4 => masked += 1,
                    id if id as i64 == b.labels[i] => kept += 1,
                    _ => random_next += 1,
                }
            }
        }
    }
    let share = |n: usize| n as f64 / selected as f64;
    eprintln!("{selected} selected: {:.3} masked, {:.3} kept, {:.3} random", share(masked), share(kept), share(random_next));
    assert!(selected > 2000);
    assert!((share(masked) - 0.8).abs() < 0.03, "masked share {}", share(masked));
    // A random replacement may draw the original token (1 in 16 here): counted as kept.
    assert!((share(kept) - 0.1).abs() < 0.03 && (share(random_next) - 0.1).abs() < 0.03);
}

#[test]
fn without_nsp_rows_are_full_sentences_across_documents() {
    let c = corpus(MaskingConfig { pairs: None, ..nsp() }, 16);
    // Every sentence, and every sentence with a document's end after it, as ids.
    let documents = sentence_ids(&c);
    let sentences: Vec<&[u32]> = documents.iter().flatten().map(Vec::as_slice).collect();
    let mut crossed = 0;
    for index in 0..100 {
        let b = c.batch(index).unwrap();
        for row in 0..b.batch {
            let r = row * b.seq..(row + 1) * b.seq;
            let real = b.attention_mask.as_ref().unwrap()[r.clone()].iter().filter(|&&m| m == 1).count();
            // The text as it was before masking.
            let ids: Vec<u32> = r.clone().map(|i| if b.labels[i] == -100 { b.input_ids[i] } else { b.labels[i] as u32 }).collect();
            assert_eq!((ids[0], ids[real - 1]), (2, 3), "[CLS] … [SEP]: {ids:?}");
            let pieces: Vec<&[u32]> = ids[1..real - 1].split(|&t| t == 3).collect();
            crossed += pieces.len() - 1;
            for piece in pieces {
                // Whole sentences, each in the corpus (only a row's single sentence may be cut).
                let mut rest = piece;
                while !rest.is_empty() {
                    let whole =
                        sentences.iter().find(|s| rest.starts_with(s) && (rest.len() == s.len() || sentences.iter().any(|t| rest[s.len()..].starts_with(t))));
                    match whole {
                        Some(s) => rest = &rest[s.len()..],
                        None => {
                            assert!(real == b.seq && sentences.iter().any(|s| s.starts_with(rest)), "not whole sentences: {piece:?}");
                            rest = &[];
                        }
                    }
                }
            }
        }
    }
    assert!(crossed > 50, "rows run on into the next document: {crossed}");
}

#[test]
fn masks_are_drawn_afresh_each_time_a_sequence_is_seen() {
    // One short sentence: every row holds it whole, so only the masks differ.
    let tokenizer = TextTokenizer::from_wordpiece_vocab(VOCAB, true).unwrap();
    let config = MaskingConfig::new(None);
    let c = MaskedLmCorpus::new("the cat sat on the mat the dog ran fast", &tokenizer, config, 5, 4, 12).unwrap();
    let mut masks = std::collections::HashSet::new();
    let mut per_position = [0usize; 10];
    let rows = 4 * 500;
    for index in 0..500 {
        let b = c.batch(index).unwrap();
        for row in b.labels.chunks(12) {
            masks.insert(row.iter().map(|&l| l != -100).collect::<Vec<_>>());
            for (count, label) in per_position.iter_mut().zip(&row[1..11]) {
                *count += (*label != -100) as usize;
            }
        }
    }
    // Two of ten words each time (round(1.5)): 45 possible pairs.
    assert!(masks.len() > 40, "{} distinct masks", masks.len());
    for (position, &count) in per_position.iter().enumerate() {
        let share = count as f64 / rows as f64;
        assert!((share - 0.2).abs() < 0.04, "word {position} selected in {share:.3} of the rows");
    }
}

#[test]
fn roberta_tokens_when_the_tokenizer_has_them() {
    let tokenizer = TextTokenizer::from_bytes(include_bytes!("../../../tests/fixtures/roberta/RobertaForMaskedLM/tokenizer.json")).unwrap();
    let id = |t: &str| tokenizer.token_to_id(t).unwrap();
    let config = MaskingConfig::new(None);
    let text = "the cat sat on the mat. the dog ran to the park.\n\nthe bird sang in the morning.";
    let c = MaskedLmCorpus::new(text, &tokenizer, config, 1, 8, 24).unwrap();
    let b = c.batch(0).unwrap();
    for row in b.input_ids.chunks(24) {
        assert_eq!(row[0], id("<s>"));
        let real = row.iter().rposition(|&t| t != id("<pad>")).unwrap() + 1;
        assert_eq!(row[real - 1], id("</s>"), "{row:?}");
        assert!(row[real - 1..].iter().skip(1).all(|&t| t == id("<pad>")));
    }
    assert!(b.input_ids.contains(&id("<mask>")));
    assert!(b.labels.iter().all(|&l| l == -100 || !["<s>", "</s>", "<pad>", "<mask>"].iter().any(|t| l == id(t) as i64)));
}

#[test]
fn ngram_masking_selects_longer_runs_and_keeps_the_quota() {
    // In batches: as many tokens selected as before, in longer runs.
    let mean_run = |max_ngram: usize, held_out: bool| {
        let config = MaskingConfig { pairs: None, probability: 0.3, max_ngram, ..nsp() };
        let c = corpus(if held_out { config.held_out() } else { config }, 24);
        let (mut selected, mut runs) = (0, 0);
        for index in 0..200 {
            let b = c.batch(index).unwrap();
            for (row, ids) in b.labels.chunks(b.seq).zip(b.input_ids.chunks(b.seq)) {
                let picked: Vec<bool> = row.iter().map(|&l| l != -100).collect();
                let real = ids.iter().rposition(|&t| t != 0).unwrap() + 1;
                let text = real - 2 - ids[1..real - 1].iter().filter(|&&t| t == 3).count();
                assert_eq!(picked.iter().filter(|&&p| p).count(), ((text as f64 * 0.3).round() as usize).max(1), "spans fill the quota exactly");
                selected += picked.iter().filter(|&&p| p).count();
                runs += picked.windows(2).filter(|w| w[1] && !w[0]).count() + picked[0] as usize;
            }
        }
        selected as f64 / runs as f64
    };
    let (single, spans, held_out) = (mean_run(1, false), mean_run(3, false), mean_run(3, true));
    assert!(spans > single + 0.3, "mean run of selected tokens: {single:.2} one by one, {spans:.2} with spans up to 3");
    // Held out, a span-masking run is scored as BERT's is: single tokens.
    assert_eq!(held_out, single, "held-out batches of a run with spans up to 3 select one by one");
    let tokenizer = TextTokenizer::from_wordpiece_vocab(VOCAB, true).unwrap();
    for max_ngram in [0, MAX_NGRAM + 1] {
        let err = MaskedLmCorpus::new("the cat sat", &tokenizer, MaskingConfig { max_ngram, pairs: None, ..nsp() }, 0, 2, 16).err().unwrap().to_string();
        assert!(err.contains("n-gram"), "{err}");
    }
}

#[test]
fn whole_word_masking_takes_every_piece_of_a_word() {
    let c = corpus(MaskingConfig { whole_word: true, probability: 0.3, ..MaskingConfig::new(None) }, 16);
    let tokenizer = TextTokenizer::from_wordpiece_vocab(VOCAB, true).unwrap();
    let mut pieces_seen = 0;
    for index in 0..200 {
        let b = c.batch(index).unwrap();
        for i in 1..b.input_ids.len() {
            let original = |j: usize| if b.labels[j] == -100 { b.input_ids[j] } else { b.labels[j] as u32 };
            if tokenizer.id_to_token(original(i)).unwrap().starts_with("##") {
                pieces_seen += 1;
                assert_eq!(b.labels[i] == -100, b.labels[i - 1] == -100, "a ## piece is selected with the piece before it (batch {index}, position {i})");
            }
        }
    }
    assert!(pieces_seen > 100);
}

#[test]
fn next_sentence_labels_are_balanced_and_bad_corpora_are_refused() {
    let c = corpus(nsp(), 24);
    let labels: Vec<i64> = (0..100).flat_map(|i| c.batch(i).unwrap().next_sentence_label.unwrap()).collect();
    let random = labels.iter().filter(|&&l| l == 1).count() as f64 / labels.len() as f64;
    assert!((0.4..0.75).contains(&random), "share of random B: {random}");
    let tokenizer = TextTokenizer::from_wordpiece_vocab(VOCAB, true).unwrap();
    let err = MaskedLmCorpus::new("the cat sat. the dog ran.", &tokenizer, nsp(), 0, 2, 16).err().unwrap().to_string();
    assert!(err.contains("other documents"), "{err}");
    let err = MaskedLmCorpus::new(" \n\n ", &tokenizer, nsp(), 0, 2, 16).err().unwrap().to_string();
    assert!(err.contains("no text"), "{err}");
    let err = MaskedLmCorpus::new("the cat", &tokenizer, nsp(), 0, 2, 3).err().unwrap().to_string();
    assert!(err.contains("no room"), "{err}");
}

/// Every occurrence of `unit` (token ids) in the batches' original text: whether it was
/// selected whole, cut (some of its tokens selected, not all), or left alone.
fn unit_selections(c: &MaskedLmCorpus, batches: std::ops::Range<u64>, unit: &[u32]) -> (usize, usize) {
    let (mut whole, mut cut) = (0, 0);
    for index in batches {
        let b = c.batch(index).unwrap();
        let original: Vec<u32> = (0..b.input_ids.len()).map(|i| if b.labels[i] == -100 { b.input_ids[i] } else { b.labels[i] as u32 }).collect();
        for row in 0..b.batch {
            let r = row * b.seq..(row + 1) * b.seq;
            for at in 0..=b.seq - unit.len() {
                let window = r.start + at..r.start + at + unit.len();
                if original[window.clone()] == *unit {
                    match window.filter(|&i| b.labels[i] != -100).count() {
                        0 => {}
                        n if n == unit.len() => whole += 1,
                        _ => cut += 1,
                    }
                }
            }
        }
    }
    (whole, cut)
}

fn vocab_ids(tokenizer: &TextTokenizer, text: &str) -> Vec<u32> {
    tokenizer.encode(text, false).unwrap()
}

const ANNOTATED: &str = r#"{"text": "the cat sat on the mat. the dog ran fast.", "entities": [[4, 11], [28, 40]]}
{"text": "the bird sang loudly. the mat sat on the cat.", "entities": [[4, 20]]}"#;

fn entity_corpus(schedule: &str) -> MaskedLmCorpus {
    let tokenizer = TextTokenizer::from_wordpiece_vocab(VOCAB, true).unwrap();
    let config = MaskingConfig { probability: 0.3, schedule: schedule.parse().unwrap(), ..MaskingConfig::new(None) };
    MaskedLmCorpus::from_documents(knowledge::annotated_documents(ANNOTATED).unwrap(), None, &tokenizer, config, 11, 8, 16).unwrap()
}

#[test]
fn entity_level_masks_annotated_entities_whole() {
    let tokenizer = TextTokenizer::from_wordpiece_vocab(VOCAB, true).unwrap();
    let (entities, tokens) = (entity_corpus("entity"), entity_corpus("token"));
    for entity in ["cat sat", "dog ran fast", "bird sang loudly"] {
        let unit = vocab_ids(&tokenizer, entity);
        let (whole, cut) = unit_selections(&entities, 0..200, &unit);
        assert!(cut == 0 && whole > 20, "{entity}: selected whole {whole} times, cut {cut}");
        // By token, the same rows cut it: the check above can fail.
        let (_, cut) = unit_selections(&tokens, 0..200, &unit);
        assert!(cut > 50, "{entity} cut {cut} times by token-level masking");
    }
}

#[test]
fn phrase_level_without_annotations_masks_the_chunkers_phrases_whole() {
    let tokenizer = TextTokenizer::from_wordpiece_vocab(VOCAB, true).unwrap();
    let config = MaskingConfig { probability: 0.3, schedule: "phrase".parse().unwrap(), ..MaskingConfig::new(None) };
    let text = "the cat sat on the mat. the dog ran fast.\n\nthe bird sang loudly. the mat sat on the cat.";
    let c = MaskedLmCorpus::new(text, &tokenizer, config, 2, 8, 16).unwrap();
    // "the" and "on" are function words: the chunker's phrases are these (and "mat sat").
    for phrase in ["cat sat", "dog ran fast", "bird sang loudly", "mat sat"] {
        let (whole, cut) = unit_selections(&c, 0..200, &vocab_ids(&tokenizer, phrase));
        assert!(cut == 0 && whole > 20, "{phrase}: selected whole {whole} times, cut {cut}");
    }
}

#[test]
fn entities_come_from_the_gazetteer_where_the_data_has_none() {
    let tokenizer = TextTokenizer::from_wordpiece_vocab(VOCAB, true).unwrap();
    let config = MaskingConfig { probability: 0.3, schedule: "entity".parse().unwrap(), ..MaskingConfig::new(None) };
    let text = "the cat sat on the mat. the dog ran fast.\n\nthe bird sang loudly.";
    let err = MaskedLmCorpus::new(text, &tokenizer, config.clone(), 2, 8, 16).err().unwrap().to_string();
    assert!(err.contains("document 1") && err.contains("gazetteer"), "{err}");
    let gazetteer = knowledge::Gazetteer::new("dog ran fast\nbird sang\n").unwrap();
    let c = MaskedLmCorpus::from_documents(knowledge::plain_documents(text), Some(&gazetteer), &tokenizer, config, 2, 8, 16).unwrap();
    for entity in ["dog ran fast", "bird sang"] {
        let (whole, cut) = unit_selections(&c, 0..200, &vocab_ids(&tokenizer, entity));
        assert!(cut == 0 && whole > 20, "{entity}: selected whole {whole} times, cut {cut}");
    }
}

#[test]
fn stages_change_the_level_at_their_step() {
    // Two micro-batches a step: token for batches 0–3 (steps 0 and 1), then entity.
    let tokenizer = TextTokenizer::from_wordpiece_vocab(VOCAB, true).unwrap();
    let staged = {
        let config = MaskingConfig { probability: 0.3, schedule: "token:2,entity".parse().unwrap(), batches_per_step: 2, ..MaskingConfig::new(None) };
        MaskedLmCorpus::from_documents(knowledge::annotated_documents(ANNOTATED).unwrap(), None, &tokenizer, config, 11, 8, 16).unwrap()
    };
    let (tokens, entities) = (entity_corpus("token"), entity_corpus("entity"));
    for index in 0..8 {
        let want = if index < 4 { &tokens } else { &entities };
        assert_eq!(staged.batch(index).unwrap(), want.batch(index).unwrap(), "batch {index}");
    }
    assert_ne!(tokens.batch(5).unwrap(), entities.batch(5).unwrap(), "the levels differ");
    // Held out, every stage masks by token.
    let entity_config = MaskingConfig { probability: 0.3, schedule: "entity".parse().unwrap(), ..MaskingConfig::new(None) };
    let held_out =
        MaskedLmCorpus::from_documents(knowledge::annotated_documents(ANNOTATED).unwrap(), None, &tokenizer, entity_config.held_out(), 11, 8, 16).unwrap();
    assert_eq!(held_out.batch(5).unwrap(), tokens.batch(5).unwrap(), "held-out batches of an entity-level run");
}

#[test]
fn mask_schedules_parse_and_print_and_name_what_is_wrong() {
    let schedule: MaskSchedule = "token:1000, phrase:500,entity".parse().unwrap();
    assert_eq!(schedule.to_string(), "token:1000,phrase:500,entity");
    let levels: Vec<MaskLevel> = [0, 999, 1000, 1499, 1500, 10_000].map(|s| schedule.level_at(s)).to_vec();
    use MaskLevel::*;
    assert_eq!(levels, vec![Token, Token, Phrase, Phrase, Entity, Entity]);
    // A last stage with a length still runs on to the end.
    assert_eq!("token:5,phrase:5".parse::<MaskSchedule>().unwrap().level_at(50), Phrase);
    assert_eq!(serde_json::to_string(&schedule).unwrap(), "\"token:1000,phrase:500,entity\"");
    for (bad, says) in
        [("word", "not token, phrase or entity"), ("token,phrase", "every stage but the last"), ("token:0,phrase", "above 0"), ("token:x", "above 0")]
    {
        let err = bad.parse::<MaskSchedule>().err().unwrap().to_string();
        assert!(err.contains(says), "{bad}: {err}");
    }
}

#[test]
fn chinese_whole_words_are_masked_by_the_segmenters_words() {
    let vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n我\n们\n在\n北\n京\n大\n学\n习\n。\n##x\n";
    let tokenizer = TextTokenizer::from_wordpiece_vocab(vocab, true).unwrap();
    let text = "我们在北京大学学习。";
    let words = knowledge::chinese_words(text).unwrap();
    assert!(words.len() >= 2, "{words:?}");
    // Half of the ten characters: room for a four-character word.
    let config = MaskingConfig { probability: 0.5, whole_word: true, ..MaskingConfig::new(None) };
    let c = MaskedLmCorpus::new(text, &tokenizer, config, 4, 8, 12).unwrap();
    for word in &words {
        let (whole, cut) = unit_selections(&c, 0..100, &vocab_ids(&tokenizer, &text[word.clone()]));
        assert!(cut == 0 && whole > 20, "{}: selected whole {whole} times, cut {cut}", &text[word.clone()]);
    }
}

#[test]
fn an_epoch_of_masked_lm_rows_holds_the_corpus_tokens() {
    // batch 8; 24-token rows hold 22 (21 with a pair's three special tokens).
    let (single, pairs) = (corpus(MaskingConfig::new(None), 24), corpus(nsp(), 24));
    let tokens: usize = single.documents.iter().flatten().map(Vec::len).sum();
    assert_eq!(single.batches_per_epoch(), Some(tokens.div_ceil(22).div_ceil(8)));
    assert_eq!(pairs.batches_per_epoch(), Some(tokens.div_ceil(21).div_ceil(8)));
    assert_eq!(single.batches(), None, "drawn without end");
}
