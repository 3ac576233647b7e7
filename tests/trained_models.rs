//! Checkpoints written by `sesame train`: the trained models that ship in models/ (for the
//! demo) are trained (each scores held-out text far better than an untrained model of its
//! vocabulary, whose perplexity is the vocabulary size: the WikiText-2 ones on paragraphs of
//! its validation split, tests/fixtures/wikitext-2-held-out.txt, CC BY-SA 3.0) and run from
//! their folders; and
//! Python transformers loads them and computes the same logits (the fixtures
//! tests/reference/check_sesame_checkpoints.py wrote in tests/fixtures/roundtrip/).

mod common;

use std::path::{Path, PathBuf};

use common::train::scalar;
use common::{gpu, read, sesame};
use sesame::classify::{classify_text, classify_tokens, detect_replaced_tokens};
use sesame::embed::{embed_texts, Pooling};
use sesame::models::auto::LoadedModel;
use sesame::models::elmo::train::{BiLmBatch, ElmoBiLm};
use sesame::models::elmo::{ElmoModel, ElmoOptions};
use sesame::models::training::Objective;
use sesame::models::{ForwardOptions, IdsBatch};
use sesame::tokenize::TextTokenizer;
use sesame::train::data::BatchSource;
use sesame::train::elmo::{SentenceCorpus, WordSplit, WordVocab};
use sesame::train::masking::{MaskedLmCorpus, MaskingConfig};
use sesame::weights::{Checkpoint, Weights};

fn model(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models").join(name)
}

/// The perplexity `sesame perplexity --json` reports for `text`.
fn perplexity(dir: &Path, text: &str) -> f64 {
    let (ok, stdout, err) = sesame(&["perplexity", "--model", dir.to_str().unwrap(), "--text", text, "--json"]);
    assert!(ok, "{err}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    report["perplexity"].as_f64().unwrap_or_else(|| panic!("no perplexity in {report}"))
}

#[test]
fn the_baby_gpt_scores_held_out_shakespeare_and_generates() {
    let dir = model("baby-gpt-shakespeare");
    // The last lines of Tiny Shakespeare: in the held-out 10% the model never trained on.
    let held_out = "SEBASTIAN:\nI do; and surely\nIt is a sleepy language and thou speak'st\nOut of thy sleep. What is it thou didst say?\n\
                    This is a strange repose, to be asleep\nWith eyes wide open; standing, speaking, moving,\nAnd yet so fast asleep.\n";
    let ppl = perplexity(&dir, held_out);
    eprintln!("baby GPT perplexity on held-out Shakespeare: {ppl:.2} (untrained: 65)");
    // Its held-out loss of 1.88 nats is perplexity 6.6; allow for a short passage.
    assert!(ppl < 10.0, "perplexity {ppl}");
    let (ok, stdout, err) = sesame(&["generate", "--model", dir.to_str().unwrap(), "--prompt", "ROMEO:\n", "--max-new-tokens", "40"]);
    assert!(ok, "{err}");
    assert!(stdout.starts_with("ROMEO:\n") && stdout.len() >= "ROMEO:\n".len() + 40, "{stdout}");
}

/// Paragraphs of WikiText-2's validation split, which the WikiText-2 models never trained on.
fn wikitext_held_out() -> String {
    String::from_utf8(read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"), "wikitext-2-held-out.txt")).unwrap()
}

/// A WikiText-2 masked LM of models/ scores BERT's masking of held-out paragraphs far better
/// than chance (perplexity under an eighth of the vocabulary, or `ceiling`) and fills the
/// demo's example's mask (with `top` first, where given).
fn predicts_held_out_masked_words_and_fills_masks(name: &str, top: Option<&str>) {
    predicts_held_out_masked_words_below(name, top, None)
}

fn predicts_held_out_masked_words_below(name: &str, top: Option<&str>, ceiling: Option<f32>) {
    let dir = model(name);
    let tokenizer = TextTokenizer::from_bytes(&read(&dir, "tokenizer.json")).unwrap();
    let checkpoint = Checkpoint::from_bytes(read(&dir, "model.safetensors")).unwrap();
    let model = common::train::trainable(&read(&dir, "config.json"), &Weights::new(gpu(), &checkpoint), Objective::Mlm);
    // BERT's masking (15%, 80/10/10) of the held-out paragraphs, the same draws every run.
    let config = MaskingConfig::new(None);
    let corpus = MaskedLmCorpus::new(&wikitext_held_out(), &tokenizer, config, 7, 8, 128).unwrap();
    let batches = 4;
    let loss = (0..batches).map(|i| scalar(&model.loss(Objective::Mlm, &corpus.batch(i).unwrap()).unwrap())[0]).sum::<f32>() / batches as f32;
    let vocab = tokenizer.vocab_size();
    eprintln!("{name}: held-out masked-LM perplexity {:.1} (untrained: {vocab})", loss.exp());
    assert!(loss.exp() < ceiling.unwrap_or(vocab as f32 / 8.0), "{name}: masked-LM loss {loss}");
    let (ok, stdout, err) =
        sesame(&["fill-mask", "--model", dir.to_str().unwrap(), "--text", "she became one of [MASK] most popular singers .", "--top-k", "3"]);
    assert!(ok, "{name}: {err}");
    let lines: Vec<&str> = stdout.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 3, "{name}: {stdout}");
    if let Some(top) = top {
        assert_eq!(lines[0].split_whitespace().nth(1), Some(top), "{name}: {stdout}");
    }
}

#[test]
fn the_wikitext_bert_predicts_held_out_masked_words_and_fills_masks() {
    // The demo's example: a function word it has learnt.
    predicts_held_out_masked_words_and_fills_masks("bert-wikitext", Some("the"));
}

#[test]
fn the_wikitext_roberta_albert_and_ernie_predict_held_out_masked_words_and_fill_masks() {
    predicts_held_out_masked_words_and_fills_masks("roberta-wikitext", Some("the"));
    predicts_held_out_masked_words_and_fills_masks("albert-wikitext", None);
    predicts_held_out_masked_words_and_fills_masks("ernie-wikitext", Some("the"));
}

#[test]
fn the_wikitext_electra_and_distilbert_predict_held_out_masked_words_and_fill_masks() {
    // ELECTRA's generator is half the discriminator's width (64; one head of its two) and
    // trained on ELECTRA's masking (no random replacements): 215 on its held-out batches in
    // training, 563 on these four paragraphs under BERT's masking.
    predicts_held_out_masked_words_below("electra-wikitext/generator", None, Some(700.0));
    predicts_held_out_masked_words_and_fills_masks("distilbert-wikitext", Some("the"));
}

#[test]
fn the_wikitext_electra_discriminator_has_learnt_the_share_of_replaced_tokens() {
    // Its pretraining did not teach it to tell replaced tokens from real ones at this scale
    // (TRAINING.md: ROC AUC 0.51), but it has learnt what can be replaced: [CLS] and [SEP]
    // never are, and about one token in eight of the text is (an untrained head says 0.5).
    let dir = model("electra-wikitext/discriminator");
    let loaded = LoadedModel::load(gpu(), &dir, false).unwrap();
    let ids = loaded.tokenizer().unwrap().encode("she became one of the most popular singers of her time .", true).unwrap();
    let batch = IdsBatch { seq: ids.len(), input_ids: ids, batch: 1, ..Default::default() };
    let out = loaded.model.forward(&batch, ForwardOptions::default()).unwrap();
    let logits = pollster::block_on(out.get("logits").unwrap().to_vec::<f32>()).unwrap();
    let p: Vec<f32> = logits.iter().map(|x| 1.0 / (1.0 + (-x).exp())).collect();
    let text = &p[1..p.len() - 1];
    assert!(p[0] < 0.01 && p[p.len() - 1] < 0.01, "[CLS] and [SEP]: {p:?}");
    assert!(text.iter().all(|&q| (0.05..0.25).contains(&q)), "the text's tokens: {p:?}");
}

#[test]
fn the_wikitext_elmo_scores_held_out_sentences_and_runs_as_elmo() {
    let dir = model("elmo-wikitext");
    let options = ElmoOptions::from_json(&read(&dir, "options.json")).unwrap();
    let vocab = WordVocab::from_vocab_txt(&String::from_utf8(read(&dir, "vocab.txt")).unwrap()).unwrap();
    let checkpoint = Checkpoint::from_bytes(read(&dir, "model.safetensors")).unwrap();
    let bilm = ElmoBiLm::load(options, &Weights::new(gpu(), &checkpoint), vocab.len()).unwrap();
    // WikiText is split into words already; the model trained on it so (--pretokenized).
    let corpus = SentenceCorpus::new(&wikitext_held_out(), WordSplit::Pretokenized, &vocab, None, 16, 30).unwrap();
    let batches = corpus.batches().unwrap() as u64;
    let mut loss = 0.0;
    for i in 0..batches {
        let batch = corpus.batch(i).unwrap();
        let s = batch.sentences.as_ref().unwrap();
        loss += scalar(&bilm.losses(&BiLmBatch { sentences: &s.sentences, targets: &s.targets }).unwrap().loss)[0] / batches as f32;
    }
    eprintln!("WikiText ELMo: held-out biLM perplexity {:.1} (untrained: {})", loss.exp(), vocab.len());
    assert!(loss.exp() < vocab.len() as f32 / 8.0, "biLM loss {loss}");
    let elmo = ElmoModel::load_dir(gpu(), &dir).unwrap();
    assert_eq!(elmo.forward(&[vec!["the".into(), "river".into(), "bank".into()]]).unwrap().representations.len(), 1);
}

/// The WikiText ELMo loads into the PyTorch ELMo of tests/reference/elmo_reference.py
/// (AllenNLP's names; check_sesame_elmo.py wrote what it computes): Sesame's layers, mask and
/// mix are within 1e-4 of PyTorch's, and its biLM losses within 1e-5 relative.
#[test]
fn the_wikitext_elmo_round_trips_through_the_pytorch_elmo() {
    let dir = model("elmo-wikitext");
    let bytes = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/roundtrip"), "elmo-wikitext.safetensors");
    let (_, metadata) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let sentences: Vec<Vec<String>> = serde_json::from_str(&metadata.metadata().as_ref().unwrap()["sentences"]).unwrap();
    let reference = Checkpoint::from_bytes(bytes.clone()).unwrap();
    let output = ElmoModel::load_dir(gpu(), &dir).unwrap().forward(&sentences).unwrap().into_model_output();
    for name in ["elmo_layers", "mask", "elmo_representations.0"] {
        let (want, shape) = reference.to_f32(name).unwrap();
        let got = output.get(name).unwrap();
        assert_eq!(got.shape(), &shape[..], "{name}");
        let got = pollster::block_on(got.to_vec::<f32>()).unwrap();
        let max_err = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0f32, f32::max);
        eprintln!("WikiText ELMo {name}: max abs err {max_err:.2e} against PyTorch");
        assert!(max_err <= 1e-4, "{name}: max abs err {max_err:e}");
    }
    let options = ElmoOptions::from_json(&read(&dir, "options.json")).unwrap();
    let vocab = WordVocab::from_vocab_txt(&String::from_utf8(read(&dir, "vocab.txt")).unwrap()).unwrap();
    let checkpoint = Checkpoint::from_bytes(read(&dir, "model.safetensors")).unwrap();
    let bilm = ElmoBiLm::load(options, &Weights::new(gpu(), &checkpoint), vocab.len()).unwrap();
    let targets: Vec<Vec<u32>> = sentences.iter().map(|s| vocab.targets(s)).collect();
    let losses = bilm.losses(&BiLmBatch { sentences: &sentences, targets: &targets }).unwrap();
    for (got, name) in [(&losses.loss, "loss"), (&losses.forward, "forward_loss"), (&losses.backward, "backward_loss")] {
        let (got, want) = (scalar(got)[0], reference.to_f32(name).unwrap().0[0]);
        eprintln!("WikiText ELMo {name}: {got} (PyTorch {want})");
        assert!((got - want).abs() <= 1e-5 * want, "{name}: {got} vs {want}");
    }
}

/// transformers' logits for a Sesame checkpoint equal Sesame's (max abs error ≤ 1e-4), for the
/// same ids, which Sesame's tokenizer gives for `text` too.
fn round_trips_through_transformers(name: &str, folder: &Path, text: &str) {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/roundtrip");
    let bytes = read(&fixtures, &format!("{name}.safetensors"));
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let ids: Vec<u32> = file.tensor("input_ids").unwrap().data().chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap()) as u32).collect();
    let reference = Checkpoint::from_bytes(bytes.clone()).unwrap();
    let loaded = LoadedModel::load(gpu(), folder, false).unwrap();
    assert_eq!(loaded.tokenizer().unwrap().encode(text, true).unwrap(), ids, "{name}: transformers' tokenizer and Sesame's give the same ids");
    let batch = IdsBatch { seq: ids.len(), input_ids: ids, batch: 1, ..Default::default() };
    let out = loaded.model.forward(&batch, ForwardOptions::default()).unwrap();
    let mut names: Vec<&str> = reference.names().filter(|n| *n != "input_ids").collect();
    names.sort_unstable();
    assert!(!names.is_empty());
    for output in names {
        let (want, shape) = reference.to_f32(output).unwrap();
        let tensor = out.get(output).unwrap_or_else(|| panic!("{name}: Sesame did not produce `{output}`"));
        assert_eq!(tensor.shape(), &shape[..], "{name} {output}");
        let got = pollster::block_on(tensor.to_vec::<f32>()).unwrap();
        let max_err = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0f32, f32::max);
        eprintln!("{name} {output}: max abs err {max_err:.2e} against transformers");
        assert!(max_err <= 1e-4, "{name} {output}: max abs err {max_err:e}");
    }
}

#[test]
fn the_baby_gpt_round_trips_through_transformers() {
    round_trips_through_transformers("baby-gpt-shakespeare", &model("baby-gpt-shakespeare"), "ROMEO:\nWhat light through yonder window breaks?");
}

#[test]
fn a_fresh_bert_trained_by_sesame_round_trips_through_transformers() {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/roundtrip/bert-pretraining");
    round_trips_through_transformers("bert-pretraining", &folder, "the [MASK] of the river is in the north .");
}

#[test]
fn a_gpt_trained_by_sesame_round_trips_through_transformers() {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/roundtrip/openai-gpt-clm");
    round_trips_through_transformers("openai-gpt-clm", &folder, "the old dog sat by the river and the bird sang");
}

#[test]
fn every_encoder_family_trained_by_sesame_round_trips_through_transformers() {
    let texts = [
        ("roberta-mlm", "the cat sat on the <mask> by the river ."),
        ("xlm-roberta-xl-mlm", "the old mill by the <mask> was quiet ."),
        ("distilbert-mlm", "the cat sat on the [MASK] by the river ."),
        ("albert-sop", "the dog ran to the [MASK] and saw a big tree ."),
        ("ernie-nsp", "the bird sang in the morning while the [MASK] shone ."),
        ("electra-rtd", "the children played with a ball from the bench ."),
    ];
    for (name, text) in texts {
        let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/roundtrip").join(name);
        round_trips_through_transformers(name, &folder, text);
    }
}

/// ELECTRA's pretraining writes the discriminator and the generator as transformers folders,
/// each with the shared embeddings (the generator's output layer tied to them).
#[test]
fn electra_models_pretrained_by_sesame_round_trip_through_transformers() {
    for (name, text) in [
        ("electra-pretraining-discriminator", "the cat sat on the mat by the river ."),
        ("electra-pretraining-generator", "the cat sat on the [MASK] by the river ."),
    ] {
        let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/roundtrip").join(name);
        round_trips_through_transformers(name, &folder, text);
    }
}

/// ERNIE 2.0's continual pretraining exports a model per task (a masked LM, a token tagger
/// and a sequence classifier here), each of which transformers loads as its own class.
#[test]
fn ernie_2_task_models_exported_by_sesame_round_trip_through_transformers() {
    let texts = [
        ("ernie2-mlm", "the river ran past the [MASK] mill ."),
        ("ernie2-caps", "the river ran past the old mill ."),
        ("ernie2-order", "the bird sang . the river ran past the old mill ."),
    ];
    for (name, text) in texts {
        let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/roundtrip").join(name);
        round_trips_through_transformers(name, &folder, text);
    }
}

#[test]
fn the_wikitext_bert_round_trips_through_transformers() {
    round_trips_through_transformers("bert-wikitext", &model("bert-wikitext"), "she became one of [MASK] most popular singers .");
}

#[test]
fn the_wikitext_roberta_albert_ernie_and_distilbert_round_trip_through_transformers() {
    for name in ["roberta-wikitext", "albert-wikitext", "ernie-wikitext", "distilbert-wikitext"] {
        round_trips_through_transformers(name, &model(name), "she became one of [MASK] most popular singers .");
    }
}

#[test]
fn the_wikitext_electra_round_trips_through_transformers() {
    round_trips_through_transformers("electra-wikitext-generator", &model("electra-wikitext/generator"), "she became one of [MASK] most popular singers .");
    let text = "she became one of the most popular singers .";
    round_trips_through_transformers("electra-wikitext-discriminator", &model("electra-wikitext/discriminator"), text);

    // The replaced-token-detection pipeline: a sigmoid of transformers' logit at each token
    // that is not special, named as the vocabulary spells it.
    let reference =
        Checkpoint::from_bytes(read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/roundtrip"), "electra-wikitext-discriminator.safetensors"))
            .unwrap();
    let (logits, _) = reference.to_f32("logits").unwrap();
    let loaded = LoadedModel::load(gpu(), &model("electra-wikitext/discriminator"), false).unwrap();
    let tokens = pollster::block_on(detect_replaced_tokens(&loaded, text)).unwrap();
    let words: Vec<&str> = tokens.iter().map(|t| t.word.as_str()).collect();
    assert_eq!(words, ["she", "became", "one", "of", "the", "most", "popular", "sing", "##ers", "."]);
    for (token, logit) in tokens.iter().zip(&logits[1..logits.len() - 1]) {
        let want = 1.0 / (1.0 + (-logit).exp());
        assert!((token.score - want).abs() <= 1e-5 && token.replaced == (want > 0.5), "{token:?} against transformers' {want}");
        assert_eq!(&text[token.start..token.end], token.word.trim_start_matches("##"));
    }
    // A masked LM is not a discriminator.
    let generator = LoadedModel::load(gpu(), &model("electra-wikitext/generator"), false).unwrap();
    let err = pollster::block_on(detect_replaced_tokens(&generator, text)).unwrap_err().to_string();
    assert!(err.contains("replaced-token-detection") && err.contains("fill masks"), "{err}");
}

/// Reviews written for this test (not SST-2's), each clearly one way, with its label.
const REVIEWS: [(&str, &str); 12] = [
    ("a gripping , beautifully acted film .", "positive"),
    ("one of the best movies of the year .", "positive"),
    ("funny , warm and wonderfully made .", "positive"),
    ("a moving story with a brilliant cast .", "positive"),
    ("an absolute delight from start to finish .", "positive"),
    ("smart , charming and often hilarious .", "positive"),
    ("a dull , lifeless mess .", "negative"),
    ("the worst film i have seen in years .", "negative"),
    ("boring , predictable and far too long .", "negative"),
    ("a tedious waste of a talented cast .", "negative"),
    ("the jokes fall flat and the plot makes no sense .", "negative"),
    ("an ugly , pointless and painful experience .", "negative"),
];

/// ULMFiT's classifier trained on SST-2 (from scratch: TRAINING.md) tells clear reviews apart.
#[test]
fn the_sst2_classifier_tells_positive_from_negative_reviews() {
    let loaded = LoadedModel::load(gpu(), &model("awd-lstm-sst2"), false).unwrap();
    let right = REVIEWS
        .iter()
        .filter(|(text, label)| {
            let scores = pollster::block_on(classify_text(&loaded, text, None)).unwrap();
            eprintln!("{text}: {} {:.3}", scores[0].label, scores[0].score);
            scores[0].label == *label
        })
        .count();
    assert!(right >= 10, "{right} of {} reviews right", REVIEWS.len());
}

/// CVT's small tagger (TRAINING.md) tags a plain sentence as the silver tagger it learnt from
/// (words as its tokenizer reads them: lower-cased).
#[test]
fn the_cvt_tagger_tags_a_sentence() {
    let loaded = LoadedModel::load(gpu(), &model("cvt-pos-wikitext"), false).unwrap();
    let tags = pollster::block_on(classify_tokens(&loaded, "The old mill stood by the river for two hundred years .", &[])).unwrap();
    let got: Vec<(&str, &str)> = tags.iter().map(|t| (t.word.as_str(), t.entity.as_str())).collect();
    eprintln!("{got:?}");
    let want = [
        ("the", "DET"),
        ("old", "JJ"),
        ("mill", "NN"),
        ("stood", "VBD"),
        ("by", "IN"),
        ("the", "DET"),
        ("river", "NN"),
        ("for", "IN"),
        ("two", "CD"),
        ("hundred", "CD"),
        ("years", "NNS"),
        (".", "PP"),
    ];
    let right = got.iter().zip(&want).filter(|(g, w)| g == w).count();
    assert_eq!(got.len(), want.len(), "{got:?}");
    assert!(right >= 11, "{right} of {} tags right: {got:?}", want.len());
}

/// CoVe from the translation run on software messages (TRAINING.md): its mean-pooled
/// vectors put messages that say the same thing closer than unrelated ones.
#[test]
fn the_gettext_cove_puts_similar_messages_close() {
    let loaded = LoadedModel::load(gpu(), &model("cove-gettext"), false).unwrap();
    let texts = ["file not found", "directory not found", "cannot open the file", "South Sudan", "number of archive parts"];
    let vectors = pollster::block_on(embed_texts(&loaded, &texts, Pooling::Mean, true)).unwrap();
    assert_eq!(vectors[0].len(), 256);
    let cos = |a: usize, b: usize| vectors[a].iter().zip(&vectors[b]).map(|(x, y)| x * y).sum::<f32>();
    eprintln!(
        "file/directory not found {:.3}, file not found/cannot open the file {:.3}, file not found/South Sudan {:.3}, /archive parts {:.3}",
        cos(0, 1),
        cos(0, 2),
        cos(0, 3),
        cos(0, 4)
    );
    assert!(cos(0, 1) > cos(0, 3) && cos(0, 1) > cos(0, 4), "file not found is closer to directory not found than to unrelated messages");
}
