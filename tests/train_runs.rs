//! Training runs through the library's run (`train::run`, what `sesame train` calls), from the
//! flags as the command line parses them: BERT's pretraining and fine-tuning on text (masked
//! LM and next sentence, classification, token classification, question answering), GPT-2's
//! classifier with its auxiliary LM loss, fresh models (BERT, GPT-2, ELMo), ELMo's feature
//! classifier, resuming, and bad input refused before any step. The trained folders are then
//! used as users use them (the CLI's fill-mask and generate, the pipelines).

mod common;

use std::path::Path;

use common::train::{dir, evaluate, flags, lcg, refused, sentiment_tsv, tagged_conll, temp_dir, train, with, Trained};
use common::{gpu, read, sesame};
use sesame::weights::{Checkpoint, Weights};

#[test]
fn a_run_refuses_bad_input_before_any_step() {
    let init = dir("gpt2").join("init");
    let out = std::env::temp_dir().join(format!("sesame-train-bad-{}", std::process::id()));
    let empty = std::env::temp_dir().join(format!("sesame-train-empty-{}.txt", std::process::id()));
    std::fs::write(&empty, "  \n\n").unwrap();
    let base = flags(&["--model-init", init.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let run = |extra: &[&str]| refused(&with(&base, extra));
    let err = run(&["--data", empty.to_str().unwrap()]);
    assert!(err.contains("holds no text"), "{err}");
    let err = run(&["--data", "/nonexistent/corpus.txt"]);
    assert!(err.contains("/nonexistent/corpus.txt"), "{err}");
    let err = run(&["--objective", "bilm", "--data", empty.to_str().unwrap()]);
    assert!(err.contains("bilm"), "{err}");
    let err = run(&["--objective", "mlm", "--data", empty.to_str().unwrap()]);
    assert!(err.contains("mlm") && err.contains("BERT"), "{err}");
    let err = run(&["--lm-coef=-1", "--data", empty.to_str().unwrap()]);
    assert!(err.contains("--lm-coef"), "{err}");
    let err = run(&["--pretokenized", "--data", empty.to_str().unwrap()]);
    assert!(err.contains("--pretokenized"), "{err}");
    let err = run(&["--doc-stride", "8", "--data", empty.to_str().unwrap()]);
    assert!(err.contains("--doc-stride") && err.contains("clm"), "{err}");
    let err = run(&["--max-ngram", "3", "--data", empty.to_str().unwrap()]);
    assert!(err.contains("--max-ngram") && err.contains("clm"), "{err}");
    let err = run(&["--group-by-length", "--data", empty.to_str().unwrap()]);
    assert!(err.contains("--group-by-length") && err.contains("clm"), "{err}");
    let err = refused(&flags(&["--arch", "elmo", "--objective", "mlm", "--data", empty.to_str().unwrap(), "--out", out.to_str().unwrap()]));
    assert!(err.contains("ELMo trains with objective bilm"), "{err}");
    // A fresh model's family and objective are checked before a tokenizer is trained for it.
    let fresh = |arch: &str, objective: &str| {
        refused(&flags(&[
            "--arch",
            arch,
            "--objective",
            objective,
            "--tokenizer",
            "wordpiece:300",
            "--data",
            empty.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]))
    };
    let err = fresh("electra", "mlm");
    assert!(err.contains("--arch electra builds an ELECTRA pretraining folder") && err.contains("objective electra, not mlm"), "{err}");
    let err = fresh("gpt2", "mlm");
    assert!(err.contains("objective mlm trains") && err.contains("(gpt2) trains clm"), "{err}");
    let err = run(&["--resume", "--data", empty.to_str().unwrap()]);
    assert!(err.contains("no checkpoint"), "{err}");
    let batches = dir("gpt2").join("batches.safetensors");
    let err = run(&["--replay-batches", batches.to_str().unwrap(), "--steps", "21"]);
    assert!(err.contains("21 steps") && err.contains("20"), "{err}");
    let err = run(&["--replay-batches", batches.to_str().unwrap(), "--dropout", "1"]);
    assert!(err.contains("dropout must be in [0, 1)"), "{err}");
    let err = run(&["--replay-batches", batches.to_str().unwrap(), "--min-lr", "0.5"]);
    assert!(err.contains("min_lr"), "{err}");
    std::fs::remove_file(&empty).unwrap();
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn resume_refuses_other_settings() {
    let out = temp_dir("train-resume-settings");
    let (init, batches) = (dir("gpt2").join("init"), dir("gpt2").join("batches.safetensors"));
    #[rustfmt::skip]
    let run = flags(&["--steps", "2", "--out", out.to_str().unwrap(), "--model-init", init.to_str().unwrap(), "--replay-batches", batches.to_str().unwrap()]);
    train(&run).unwrap();
    let err = refused(&with(&run, &["--resume", "--lr", "0.5"]));
    assert!(err.contains("lr") && err.contains("0.5"), "{err}");
    assert_eq!(train(&with(&run, &["--resume"])).unwrap().resumed_from, Some(out.join("checkpoint-000002")), "the same settings resume");
    std::fs::remove_dir_all(&out).unwrap();
}

/// Asserts that a 60-step run's mean loss over its last 10 steps is at least 0.5 below its
/// first 10 steps'.
fn assert_loss_falls(trained: &Trained, run: &str) {
    let losses: Vec<f32> = trained.losses().into_iter().map(|(_, l)| l).collect();
    assert_eq!(losses.len(), 60);
    let mean = |l: &[f32]| l.iter().sum::<f32>() / l.len() as f32;
    let (first, last) = (mean(&losses[..10]), mean(&losses[50..]));
    eprintln!("{run}: mean loss over the first 10 steps {first:.3}, the last 10 {last:.3}");
    assert!(last < first - 0.5, "{run}: the loss should fall: {first} → {last}");
}

/// A fresh folder for a run on `text`: (the folder, its corpus.txt holding `text`).
fn text_run(name: &str, text: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let out = temp_dir(name);
    let corpus = out.join("corpus.txt");
    std::fs::write(&corpus, text).unwrap();
    (out, corpus)
}

/// Documents of random sentences over the tiny BERT's word vocabulary.
fn word_corpus(documents: usize) -> String {
    let words = ["the", "cat", "dog", "sat", "on", "mat", "ran", "to", "park", "and", "saw", "big", "small", "red", "bird", "sang", "in", "morning"];
    let mut next = lcg(12345);
    let mut text = String::new();
    for _ in 0..documents {
        for _ in 0..6 {
            // A subject, a verb and an object: the next word is partly predictable.
            let sentence = [words[next(3)], words[3 + next(4)], words[9 + next(5)], words[14 + next(4)]];
            text += &sentence.join(" ");
            text += " . ";
        }
        text += "\n\n";
    }
    text
}

#[test]
fn bert_pretrains_on_text_with_masked_lm_and_next_sentence() {
    let (out, corpus) = text_run("train-bert-text", &word_corpus(30));
    let init = dir("bert").join("init");
    #[rustfmt::skip]
    let args = flags(&["--objective", "mlm+nsp", "--model-init", init.to_str().unwrap(), "--data", corpus.to_str().unwrap(),
        "--steps", "60", "--batch-size", "8", "--seq-len", "32", "--lr", "3e-3", "--warmup", "5", "--seed", "1",
        "--out", out.to_str().unwrap()]);
    let trained = train(&args).unwrap();
    assert_loss_falls(&trained, "BERT from a checkpoint");
    let checkpoint = Checkpoint::from_bytes(read(&out, "model.safetensors")).unwrap();
    let model = sesame::models::auto::AutoModel::load(&read(&out, "config.json"), &Weights::new(gpu(), &checkpoint)).unwrap();
    assert_eq!(model.require(sesame::models::Capability::FillMask, "test").unwrap(), "prediction_logits");

    let err = refused(&with(&args, &["--whole-word-mask"]));
    assert!(err.contains("WordPiece"), "{err}");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_fresh_bert_with_a_trained_wordpiece_vocabulary_pretrains_and_fills_masks() {
    let (out, corpus) = text_run("train-bert-scratch", &word_corpus(40));
    #[rustfmt::skip]
    let args = flags(&["--arch", "bert", "--tokenizer", "wordpiece:300", "--layers", "2", "--heads", "2", "--hidden", "32",
        "--objective", "mlm+nsp", "--whole-word-mask", "--max-ngram", "3", "--dropout", "0.1", "--data", corpus.to_str().unwrap(),
        "--steps", "60", "--batch-size", "8", "--seq-len", "32", "--lr", "3e-3", "--warmup", "5", "--seed", "1",
        "--eval-every", "60", "--eval-batches", "2", "--out", out.to_str().unwrap()]);
    let trained = train(&args).unwrap();
    assert_loss_falls(&trained, "fresh BERT");
    let tokenizer = sesame::tokenize::TextTokenizer::from_bytes(&read(&out, "tokenizer.json")).unwrap();
    assert_eq!((tokenizer.token_to_id("[PAD]"), tokenizer.token_to_id("[MASK]")), (Some(0), Some(4)));
    assert!(tokenizer.token_to_id("morning").is_some(), "the corpus's words are in the learnt vocabulary");
    let config: serde_json::Value = serde_json::from_slice(&read(&out, "config.json")).unwrap();
    assert_eq!((config["num_hidden_layers"].as_u64(), config["vocab_size"].as_u64()), (Some(2), Some(tokenizer.vocab_size() as u64)));
    assert_eq!(config["hidden_dropout_prob"].as_f64(), Some(0.1), "the shortest decimal of --dropout 0.1");
    let state: serde_json::Value = serde_json::from_slice(&read(&out.join("checkpoint-000060"), "trainer_state.json")).unwrap();
    assert_eq!(state["settings"]["max_ngram"].as_u64(), Some(3), "ALBERT's spans, recorded for --resume");
    let (ok, stdout, err) = sesame(&["fill-mask", "--model", out.to_str().unwrap(), "--text", "the cat sat on [MASK] .", "--top-k", "3"]);
    assert!(ok, "the trained folder fills masks: {err}");
    assert!(stdout.lines().filter(|l| !l.trim().is_empty()).count() >= 3, "three candidates: {stdout}");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn bert_fine_tunes_for_classification_from_an_encoder_without_a_head() {
    let out = temp_dir("train-classify");
    let (train_data, dev) = (out.join("train.tsv"), out.join("dev.tsv"));
    std::fs::write(&train_data, sentiment_tsv(400, 1)).unwrap();
    std::fs::write(&dev, sentiment_tsv(100, 2)).unwrap();
    let init = common::fixture("bert", "BertModel");
    #[rustfmt::skip]
    let args = flags(&["--objective", "classify", "--model-init", init.to_str().unwrap(), "--data", train_data.to_str().unwrap(),
        "--eval-data", dev.to_str().unwrap(), "--eval-every", "75", "--eval-batches", "100", "--dropout", "0",
        "--steps", "150", "--batch-size", "16", "--lr", "1e-2", "--warmup", "5", "--seed", "1", "--out", out.to_str().unwrap()]);
    let trained = train(&args).unwrap();
    let lines = trained.evaluation_lines();
    let accuracy: Vec<f64> = lines.iter().filter_map(|l| l["eval_accuracy"].as_f64()).collect();
    eprintln!("held-out accuracy at steps 75 and 150: {accuracy:?}");
    assert_eq!(accuracy.len(), 2);
    assert!(accuracy[1] >= 0.9, "one cue word decides the label: {accuracy:?}");
    let config: serde_json::Value = serde_json::from_slice(&read(&out, "config.json")).unwrap();
    assert_eq!(config["architectures"][0].as_str(), Some("BertForSequenceClassification"));
    let checkpoint = Checkpoint::from_bytes(read(&out, "model.safetensors")).unwrap();
    assert_eq!(checkpoint.shape("classifier.weight"), Some(&[2, config["hidden_size"].as_u64().unwrap() as usize][..]));
    std::fs::write(&train_data, "sentence\tlabel\nthe warm sun\t1\nthe cold moon\tnegative\n").unwrap();
    let err = refused(&args);
    assert!(err.contains("line 3"), "{err}");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn bert_fine_tunes_for_token_classification_on_conll_data() {
    let out = temp_dir("train-token-classify");
    let (train_data, dev) = (out.join("train.conll"), out.join("dev.conll"));
    std::fs::write(&train_data, tagged_conll(300, 1)).unwrap();
    std::fs::write(&dev, tagged_conll(60, 2)).unwrap();
    let init = common::fixture("bert", "BertModel");
    #[rustfmt::skip]
    let args = flags(&["--objective", "token-classify", "--model-init", init.to_str().unwrap(), "--data", train_data.to_str().unwrap(),
        "--eval-data", dev.to_str().unwrap(), "--eval-every", "100", "--eval-batches", "100", "--dropout", "0",
        "--steps", "100", "--batch-size", "16", "--lr", "1e-2", "--warmup", "5", "--seed", "1", "--out", out.to_str().unwrap()]);
    let trained = train(&args).unwrap();
    let lines = trained.evaluation_lines();
    let accuracy = lines.iter().find_map(|l| l["eval_accuracy"].as_f64()).unwrap();
    eprintln!("held-out token accuracy: {accuracy}");
    assert!(accuracy >= 0.95, "each word decides its tag: {accuracy}");
    let config: serde_json::Value = serde_json::from_slice(&read(&out, "config.json")).unwrap();
    assert_eq!(config["architectures"][0].as_str(), Some("BertForTokenClassification"));
    assert_eq!(config["id2label"], serde_json::json!({"0": "B-ANIMAL", "1": "B-COLOUR", "2": "O"}), "the data's tags, sorted");
    // The token-classification pipeline reads the folder.
    let loaded = sesame::models::auto::LoadedModel::load(gpu(), &out, false).unwrap();
    let tags: Vec<String> = pollster::block_on(sesame::classify::classify_tokens(&loaded, "the red dog sat", &[]))
        .unwrap()
        .into_iter()
        .map(|t| format!("{} {}", t.word, t.entity))
        .collect();
    assert_eq!(tags, ["the O", "red B-COLOUR", "dog B-ANIMAL", "sat O"]);
    std::fs::write(&dev, "the O\ncat B-PERSON\n").unwrap();
    let err = refused(&args);
    assert!(err.contains("line 2") && err.contains("B-PERSON"), "{err}");
    std::fs::remove_dir_all(&out).unwrap();
}

/// Question-answering examples over the tiny BERT's vocabulary: a context of neutral words
/// holding an animal and a coloured thing ("red house"); the question "saw ?" asks for the
/// animal, "with ?" for the coloured thing. As JSON lines (Hugging Face datasets' SQuAD
/// layout), or as SQuAD's JSON.
fn squad_examples(rows: usize, seed: u64, squad_json: bool) -> String {
    let neutral = ["the", "sat", "on", "mat", "ran", "to", "park", "and", "old", "mill"];
    let (animals, colours, things) = (["cat", "dog", "bird"], ["red", "blue", "green"], ["house", "tree", "field"]);
    let mut next = lcg(seed);
    let mut rows_out = Vec::new();
    for i in 0..rows {
        let mut words: Vec<String> = (0..6).map(|_| neutral[next(neutral.len())].to_string()).collect();
        let thing = format!("{} {}", colours[next(3)], things[next(3)]);
        words.insert(next(7), animals[next(3)].to_string());
        words.insert(next(8), thing.clone());
        let context = words.join(" ");
        let (question, at) = match next(2) {
            0 => ("saw ?", words.iter().position(|w| animals.contains(&w.as_str())).unwrap()),
            _ => ("with ?", words.iter().position(|w| *w == thing).unwrap()),
        };
        let (answer, start) = (&words[at], words[..at].iter().map(|w| w.len() + 1).sum::<usize>());
        assert_eq!(&context[start..start + answer.len()], answer);
        rows_out
            .push(serde_json::json!({"id": format!("q{i}"), "question": question, "context": context, "answers": {"text": [answer], "answer_start": [start]}}));
    }
    if !squad_json {
        return rows_out.iter().map(|r| format!("{r}\n")).collect();
    }
    let paragraphs: Vec<serde_json::Value> = rows_out
        .iter()
        .map(|r| {
            serde_json::json!({"context": r["context"], "qas": [{"id": r["id"], "question": r["question"],
        "answers": [{"text": r["answers"]["text"][0], "answer_start": r["answers"]["answer_start"][0]}]}]})
        })
        .collect();
    serde_json::json!({"version": "1.1", "data": [{"title": "animals and things", "paragraphs": paragraphs}]}).to_string()
}

#[test]
fn bert_fine_tunes_for_question_answering_on_squad_style_data() {
    let out = temp_dir("train-qa");
    let (train_data, dev) = (out.join("train.jsonl"), out.join("dev.json"));
    std::fs::write(&train_data, squad_examples(400, 1, false)).unwrap();
    std::fs::write(&dev, squad_examples(60, 2, true)).unwrap();
    let init = common::fixture("bert", "BertModel");
    #[rustfmt::skip]
    let args = flags(&["--objective", "qa", "--model-init", init.to_str().unwrap(), "--data", train_data.to_str().unwrap(),
        "--eval-data", dev.to_str().unwrap(), "--eval-every", "200", "--eval-batches", "100", "--dropout", "0", "--seq-len", "24",
        "--steps", "200", "--batch-size", "16", "--lr", "1e-2", "--warmup", "10", "--seed", "1", "--out", out.to_str().unwrap()]);
    let trained = train(&args).unwrap();
    let lines = trained.evaluation_lines();
    let evaluation = lines.iter().find(|l| l["eval_exact_match"].is_f64()).unwrap();
    eprintln!("held out: {evaluation}");
    let (exact, f1) = (evaluation["eval_exact_match"].as_f64().unwrap(), evaluation["eval_f1"].as_f64().unwrap());
    assert!(exact >= 0.9 && f1 >= 0.9, "the question names what to pick: exact match {exact}, F1 {f1}");
    let config: serde_json::Value = serde_json::from_slice(&read(&out, "config.json")).unwrap();
    assert_eq!(config["architectures"][0].as_str(), Some("BertForQuestionAnswering"));
    // --eval-only scores the saved model on a file as the run's evaluation did.
    #[rustfmt::skip]
    let scored = evaluate(&flags(&["--objective", "qa", "--model-init", out.to_str().unwrap(), "--data", dev.to_str().unwrap(), "--seq-len", "24",
        "--batch-size", "16"])).unwrap();
    assert_eq!(
        (scored["eval_exact_match"].as_f64(), scored["eval_loss"].as_f64().map(|l| l as f32)),
        (Some(exact), evaluation["eval_loss"].as_f64().map(|l| l as f32))
    );
    let err = evaluate(&flags(&["--objective", "qa", "--model-init", init.to_str().unwrap(), "--data", dev.to_str().unwrap()])).unwrap_err();
    assert!(err.contains("no span head"), "a fresh head is not scored: {err}");
    let err = refused(&flags(&[
        "--objective",
        "qa",
        "--model-init",
        init.to_str().unwrap(),
        "--data",
        dev.to_str().unwrap(),
        "--eval-every",
        "5",
        "--out",
        out.to_str().unwrap(),
    ]));
    assert!(err.contains("--eval-data"), "{err}");
    // Answers are scored per question: one window per evaluation cannot hold a question of
    // three (10 tokens leave 5 for a context of 9).
    #[rustfmt::skip]
    let err = refused(&flags(&["--objective", "qa", "--model-init", init.to_str().unwrap(), "--data", dev.to_str().unwrap(), "--eval-data", dev.to_str().unwrap(),
        "--eval-every", "5", "--eval-batches", "1", "--batch-size", "1", "--seq-len", "10", "--doc-stride", "2", "--out", out.to_str().unwrap()]));
    assert!(err.contains("no whole question"), "{err}");
    // The question-answering pipeline answers with the saved folder.
    let loaded = sesame::models::auto::LoadedModel::load(gpu(), &out, false).unwrap();
    let context = "the dog sat on the old blue tree";
    let answer = |question: &str| {
        pollster::block_on(sesame::question_answering::answer_question(
            &loaded,
            question,
            context,
            &sesame::question_answering::QaOptions { max_answer_len: 5, ..Default::default() },
        ))
        .unwrap()[0]
            .answer
            .clone()
    };
    assert_eq!((answer("saw ?"), answer("with ?")), ("dog".to_string(), "blue tree".to_string()));
    std::fs::write(&dev, r#"{"question": "saw ?", "context": "the cat sat", "answers": {"text": ["dog"], "answer_start": [4]}}"#).unwrap();
    let err = refused(&args);
    assert!(err.contains("\"dog\" is not at character 4"), "{err}");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn gpt2_fine_tunes_for_classification_with_the_auxiliary_lm_loss() {
    let out = temp_dir("train-gpt2-classify");
    let (train_data, dev) = (out.join("train.tsv"), out.join("dev.tsv"));
    std::fs::write(&train_data, sentiment_tsv(400, 1)).unwrap();
    std::fs::write(&dev, sentiment_tsv(100, 2)).unwrap();
    // A fresh GPT-2 with a byte-level BPE: its end-of-text token pads the batches.
    #[rustfmt::skip]
    let args = flags(&["--arch", "gpt2", "--tokenizer", "bpe:300", "--layers", "1", "--heads", "2", "--hidden", "32", "--context", "32",
        "--objective", "classify", "--data", train_data.to_str().unwrap(), "--eval-data", dev.to_str().unwrap(), "--eval-every", "150",
        "--eval-batches", "100", "--steps", "150", "--batch-size", "16", "--lr", "1e-2", "--warmup", "5", "--seed", "1",
        "--out", out.to_str().unwrap()]);
    let trained = train(&args).unwrap();
    let lines = trained.evaluation_lines();
    let accuracy = lines.iter().find_map(|l| l["eval_accuracy"].as_f64()).unwrap();
    eprintln!("held-out accuracy of the GPT-2 classifier: {accuracy}");
    assert!(accuracy >= 0.9, "one cue word decides the label: {accuracy}");
    let config: serde_json::Value = serde_json::from_slice(&read(&out, "config.json")).unwrap();
    assert_eq!(config["architectures"][0].as_str(), Some("GPT2ForSequenceClassification"));
    assert_eq!(config["pad_token_id"], config["eos_token_id"], "padded with its end-of-text token");
    assert_eq!(Checkpoint::from_bytes(read(&out, "model.safetensors")).unwrap().shape("score.weight"), Some(&[2, 32][..]));

    // The LM term is part of the loss: without it the first step's loss is lower (the
    // same batch and weights; an untrained LM's loss is about ln 300).
    let task_only = out.join("task-only");
    let task_alone = train(&with(&args, &["--lm-coef", "0", "--steps", "1", "--eval-every", "0", "--out", task_only.to_str().unwrap()])).unwrap();
    let (with_lm, task) = (trained.steps[0].loss, task_alone.steps[0].loss);
    eprintln!("step-1 loss with λ = 0.5: {with_lm}, task alone: {task}");
    assert!(with_lm - task > 0.5 * 5.0 && with_lm - task < 0.5 * 6.5, "L_task + 0.5·L_LM with L_LM ≈ ln 300 = 5.7: {with_lm} vs {task}");

    // A GPT-2 without a padding or end-of-text id cannot pad a batch.
    let init = dir("gpt2").join("init");
    let no_pad = out.join("no-pad");
    let err = refused(&flags(&[
        "--objective",
        "classify",
        "--model-init",
        init.to_str().unwrap(),
        "--data",
        train_data.to_str().unwrap(),
        "--out",
        no_pad.to_str().unwrap(),
    ]));
    assert!(err.contains("pad_token_id"), "{err}");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_fresh_gpt2_with_a_trained_byte_level_bpe_learns_and_ends_text_with_its_own_token() {
    let (out, corpus) = text_run("train-bpe", &word_corpus(40));
    #[rustfmt::skip]
    let args = flags(&["--arch", "gpt2", "--tokenizer", "bpe:300", "--layers", "1", "--heads", "2", "--hidden", "32", "--seq-len", "16",
        "--data", corpus.to_str().unwrap(), "--steps", "60", "--batch-size", "8", "--lr", "1e-2", "--out", out.to_str().unwrap()]);
    let trained = train(&args).unwrap();
    assert_loss_falls(&trained, "fresh GPT-2 with byte-level BPE");
    let tokenizer = sesame::tokenize::TextTokenizer::from_bytes(&read(&out, "tokenizer.json")).unwrap();
    assert!(tokenizer.encode(" the cat", false).unwrap().len() <= 3, "frequent words are merged");
    let config: serde_json::Value = serde_json::from_slice(&read(&out, "config.json")).unwrap();
    assert_eq!(config["eos_token_id"].as_u64(), Some(tokenizer.token_to_id("<|endoftext|>").unwrap() as u64), "{config}");
    let (ok, stdout, err) = sesame(&["generate", "--model", out.to_str().unwrap(), "--prompt", "the cat", "--max-new-tokens", "8"]);
    assert!(ok && stdout.starts_with("the cat"), "{stdout} {err}");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_fresh_elmo_learns_its_bidirectional_lm_and_saves_a_folder_elmo_loads() {
    let (out, corpus) = text_run("train-elmo", &word_corpus(40));
    #[rustfmt::skip]
    let args = flags(&["--arch", "elmo", "--objective", "bilm", "--tokenizer", "words:100", "--layers", "2", "--hidden", "16",
        "--data", corpus.to_str().unwrap(), "--steps", "60", "--batch-size", "8", "--lr", "1e-2", "--seed", "1",
        "--eval-every", "60", "--eval-batches", "2", "--out", out.to_str().unwrap()]);
    let trained = train(&args).unwrap();
    assert_loss_falls(&trained, "fresh ELMo biLM");
    let vocab = String::from_utf8(read(&out, "vocab.txt")).unwrap();
    let words: Vec<&str> = vocab.lines().collect();
    assert_eq!(words[..4], ["<S>", "</S>", "<UNK>", "."], "bilm-tf's order: the special words, then the most frequent");
    assert_eq!(words.len(), 3 + 17, "every word the corpus uses (16 and the full stop)");
    let lines = trained.evaluation_lines();
    let eval = lines.iter().find(|l| l.get("eval_loss").is_some()).unwrap();
    let (loss, perplexity) = (eval["eval_loss"].as_f64().unwrap(), eval["eval_perplexity"].as_f64().unwrap());
    assert!((perplexity - loss.exp()).abs() < 1e-3 * perplexity && perplexity < 0.5 * words.len() as f64, "{eval}");
    // The loss is the mean of the two directions' (as many predictions each).
    let (forward, backward) = (eval["eval_forward_perplexity"].as_f64().unwrap(), eval["eval_backward_perplexity"].as_f64().unwrap());
    assert!(((forward.ln() + backward.ln()) / 2.0 - loss).abs() < 1e-4, "{eval}");

    // The folder is an ELMo: it loads for inference (the softmax ignored, one scalar mix).
    let model = sesame::models::elmo::ElmoModel::load_dir(gpu(), &out).unwrap();
    let output = model.forward(&[vec!["the".into(), "cat".into(), "sat".into()]]).unwrap();
    assert_eq!((output.layers.shape(), output.representations.len()), (&[1, 3, 3, 32][..], 1));
    let checkpoint = Checkpoint::from_bytes(read(&out, "model.safetensors")).unwrap();
    assert_eq!(checkpoint.shape("softmax.weight"), Some(&[words.len(), 16][..]));

    // Training goes on from the folder (its vocab.txt and softmax) with a lower loss.
    let again = out.join("again");
    #[rustfmt::skip]
    let more = flags(&["--objective", "bilm", "--model-init", out.to_str().unwrap(), "--data", corpus.to_str().unwrap(),
        "--steps", "2", "--batch-size", "8", "--lr", "1e-3", "--out", again.to_str().unwrap()]);
    let first = trained.steps[0].loss;
    assert!(train(&more).unwrap().steps[0].loss < first - 1.0, "a trained biLM starts lower than a fresh one ({first})");
    let err = refused(&with(&more, &["--objective", "clm"]));
    assert!(err.contains("ELMo trains with objective bilm"), "{err}");
    let err = refused(&with(&args, &["--dropout", "0.1"]));
    assert!(err.contains("dropout"), "{err}");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn elmo_features_train_a_scalar_mix_and_classifier_with_the_bilm_frozen() {
    let out = temp_dir("train-elmo-classify");
    let (train_data, dev) = (out.join("train.tsv"), out.join("dev.tsv"));
    std::fs::write(&train_data, sentiment_tsv(400, 1)).unwrap();
    std::fs::write(&dev, sentiment_tsv(100, 2)).unwrap();
    // The shipped WikiText ELMo: a pretrained biLM's features (a random one's barely separate
    // the cue words).
    let init = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/elmo-wikitext");
    #[rustfmt::skip]
    let args = flags(&["--objective", "classify", "--model-init", init.to_str().unwrap(), "--data", train_data.to_str().unwrap(),
        "--eval-data", dev.to_str().unwrap(), "--eval-every", "200", "--eval-batches", "100", "--checkpoint-every", "100",
        "--steps", "200", "--batch-size", "16", "--lr", "1e-2", "--seed", "1", "--out", out.to_str().unwrap()]);
    let trained = train(&args).unwrap();
    let lines = trained.evaluation_lines();
    let accuracy = lines.iter().find_map(|l| l["eval_accuracy"].as_f64()).unwrap();
    eprintln!("held-out accuracy of the ELMo feature classifier: {accuracy}");
    assert!(accuracy >= 0.8, "one cue word decides the label: {accuracy}");

    // The folder is an ELMo with the task's mix and classifier, its biLM as it was.
    let (saved, initial) =
        (Checkpoint::from_bytes(read(&out, "model.safetensors")).unwrap(), Checkpoint::from_bytes(read(&init, "model.safetensors")).unwrap());
    assert_eq!(saved.shape("classifier.weight"), Some(&[2, 128][..]));
    assert!(!saved.contains("softmax.weight"), "the biLM's softmax is not part of the classifier");
    for name in initial.names().filter(|n| !n.starts_with("softmax.")) {
        assert_eq!(saved.to_f32(name).unwrap(), initial.to_f32(name).unwrap(), "{name} is frozen");
    }
    let model = sesame::models::elmo::ElmoModel::load_dir(gpu(), &out).unwrap();
    assert_ne!(model.mixes[0].scalar_parameters, vec![0.0; 3], "ElmoModel loads the trained mix");

    // --resume goes on from the step-100 checkpoint with the same losses.
    std::fs::remove_dir_all(out.join("checkpoint-000200")).unwrap();
    let resumed = train(&with(&args, &["--resume"])).unwrap();
    assert_eq!(resumed.losses(), trained.losses()[100..], "the resumed steps repeat the run's");

    let err = refused(&with(&args, &["--dropout", "0.1"]));
    assert!(err.contains("dropout"), "{err}");
    let err = refused(&flags(&["--arch", "elmo", "--objective", "classify", "--data", train_data.to_str().unwrap(), "--out", out.to_str().unwrap()]));
    assert!(err.contains("--model-init"), "{err}");
    std::fs::remove_dir_all(&out).unwrap();
}

/// The files of folder `dir` (not its subfolders) put into `files` under `under`.
fn copy_into(files: &mut sesame::files::MemoryFiles, dir: &Path, under: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            files.insert(under.join(path.file_name().unwrap()), std::fs::read(&path).unwrap());
        }
    }
}

#[test]
fn a_run_reads_and_keeps_its_files_in_memory_as_on_disk_and_resumes_from_them() {
    use sesame::files::MemoryFiles;
    use sesame::train::checkpoint::{Checkpointing, MemoryCheckpoints};
    use sesame::train::run::{prepare_from, RunSpec};

    // A classifier added to a BERT encoder and fine-tuned 4 steps, a checkpoint every 2: on
    // disk through the CLI's flags, and in memory from the same files under other paths.
    let out = temp_dir("train-memory");
    let train_data = out.join("train.tsv");
    std::fs::write(&train_data, sentiment_tsv(64, 1)).unwrap();
    let init = common::fixture("bert", "BertModel");
    let settings = ["--objective", "classify", "--steps", "4", "--batch-size", "4", "--checkpoint-every", "2", "--save-total-limit", "5", "--seed", "3"];
    let on_disk = flags(
        &[&settings[..], &["--model-init", init.to_str().unwrap(), "--data", train_data.to_str().unwrap(), "--out", out.join("run").to_str().unwrap()]]
            .concat(),
    );
    train(&on_disk).unwrap();

    let mut inputs = MemoryFiles::default();
    copy_into(&mut inputs, &init, Path::new("bert"));
    inputs.insert("data/train.tsv", std::fs::read(&train_data).unwrap());
    let spec = RunSpec::from_flags(&[&settings[..], &["--model-init", "bert", "--data", "data/train.tsv", "--out", "run"]].concat()).unwrap();
    let plan = Checkpointing { out: "run".into(), every: 2, keep: 5 };
    let train_in_memory = |files: &MemoryFiles, spec: &RunSpec| {
        let mut run = prepare_from(gpu(), files, spec).unwrap();
        let mut store = MemoryCheckpoints { plan: plan.clone(), files: files.clone() };
        let mut observed = Trained { resumed_from: run.resumed_from.clone(), ..Trained::default() };
        pollster::block_on(run.train(&mut store, &mut observed)).unwrap();
        (store.files, observed)
    };
    let (kept, _) = train_in_memory(&inputs, &spec);
    let in_memory = |path: &str| kept.iter().find(|(p, _)| *p == Path::new(path)).map(|(_, bytes)| bytes.to_vec()).unwrap_or_else(|| panic!("no {path}"));
    for file in ["config.json", "model.safetensors", "checkpoint-000002/optimizer.exp_avg.safetensors", "checkpoint-000004/model.safetensors"] {
        assert!(in_memory(&format!("run/{file}")) == read(&out.join("run"), file), "{file}: the same bytes in memory as on disk");
    }

    // Resumed from the step-2 checkpoint alone, in memory: the uninterrupted run's weights.
    let mut stopped = inputs.clone();
    for (path, bytes) in kept.iter().filter(|(p, _)| p.starts_with("run/checkpoint-000002")) {
        stopped.insert(path, bytes.to_vec());
    }
    let (resumed, observed) = train_in_memory(&stopped, &RunSpec { resume: true, ..spec.clone() });
    assert_eq!(observed.resumed_from, Some("run/checkpoint-000002".into()));
    assert_eq!(observed.steps.iter().map(|s| s.step).collect::<Vec<_>>(), [2, 3]);
    let final_weights = resumed.iter().find(|(p, _)| *p == Path::new("run/model.safetensors")).unwrap().1;
    assert!(final_weights == in_memory("run/model.safetensors"), "a resumed run ends where the uninterrupted one does");

    // A new run into memory that holds an earlier run's checkpoints is refused, as on disk.
    let err = prepare_from(gpu(), &stopped, &spec).err().unwrap().to_string();
    assert!(err.contains("holds the checkpoints of an earlier run (checkpoint-000002)"), "{err}");
    std::fs::remove_dir_all(&out).unwrap();
}
