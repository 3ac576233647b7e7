//! `sesame train` end to end: the PyTorch run replayed through the CLI, a run killed with
//! SIGKILL and resumed, BERT pretraining on text, and bad input.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::train::{compare_parameters, dir, lcg, logged_losses, pytorch_run_args, run, sentiment_tsv, tagged_conll, temp_dir, trajectory};
use common::{gpu, read, sesame};
use sesame::models::gpt2;
use sesame::train::params::{Parameters, Part};
use sesame::weights::{Checkpoint, Weights};

#[test]
fn train_cli_replays_the_pytorch_run_and_writes_a_loadable_checkpoint() {
    let out = temp_dir("train-cli");
    let log = out.join("log.jsonl");
    let t = trajectory("gpt2");
    let mut args: Vec<String> = ["train", "--objective", "clm"].map(String::from).to_vec();
    args.extend(pytorch_run_args("gpt2"));
    args.extend(["--out", out.to_str().unwrap(), "--log", log.to_str().unwrap()].map(String::from));
    let (ok, _, stderr) = run(&args);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("step 20/20"), "progress lines: {stderr}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), t.steps.len());
    for (line, want) in lines.iter().zip(&t.steps) {
        let loss = line["loss"].as_f64().unwrap() as f32;
        assert!((loss - want.loss).abs() <= 1e-3 * want.loss, "{line} vs PyTorch loss {}", want.loss);
        assert!(line["tokens_per_s"].as_f64().unwrap() > 0.0 && line["lr"].as_f64().is_some());
    }
    // The checkpoint is a model folder: it loads and holds PyTorch's final weights.
    let saved = Checkpoint::from_bytes(read(&out, "model.safetensors")).unwrap();
    let weights = Weights::new(gpu(), &saved).recording();
    gpt2::load(&read(&out, "config.json"), &weights).unwrap();
    let params = Parameters::from_weights(&weights).unwrap();
    let last = Checkpoint::from_bytes(read(&dir("gpt2").join("final"), "model.safetensors")).unwrap();
    compare_parameters("gpt2 saved by `sesame train`", &params, Part::Value, &last, 1e-4);
    let last_checkpoint = out.join("checkpoint-000020");
    for file in
        ["config.json", "model.safetensors", "tokenizer.json", "optimizer.exp_avg.safetensors", "optimizer.exp_avg_sq.safetensors", "trainer_state.json"]
    {
        assert!(last_checkpoint.join(file).is_file(), "{file} in {}", last_checkpoint.display());
    }
    assert_eq!(read(&last_checkpoint, "model.safetensors"), read(&out, "model.safetensors"));
    let leftovers: Vec<_> = std::fs::read_dir(&out).unwrap().filter_map(|e| e.ok()).filter(|e| e.file_name().to_string_lossy().contains(".tmp")).collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn train_cli_rejects_bad_input() {
    let init = dir("gpt2").join("init");
    let out = std::env::temp_dir().join(format!("sesame-train-bad-{}", std::process::id()));
    let empty = std::env::temp_dir().join(format!("sesame-train-empty-{}.txt", std::process::id()));
    std::fs::write(&empty, "  \n\n").unwrap();
    let base = ["train", "--model-init", init.to_str().unwrap(), "--out", out.to_str().unwrap()];
    let run = |extra: &[&str]| sesame(&[&base[..], extra].concat());
    let (ok, _, err) = run(&["--data", empty.to_str().unwrap()]);
    assert!(!ok && err.contains("holds no text"), "{err}");
    let (ok, _, err) = run(&["--data", "/nonexistent/corpus.txt"]);
    assert!(!ok && err.contains("/nonexistent/corpus.txt"), "{err}");
    let (ok, _, err) = run(&["--objective", "bilm", "--data", empty.to_str().unwrap()]);
    assert!(!ok && err.contains("bilm"), "{err}");
    let (ok, _, err) = run(&["--objective", "mlm", "--data", empty.to_str().unwrap()]);
    assert!(!ok && err.contains("mlm") && err.contains("BERT"), "{err}");
    let (ok, _, err) = run(&["--lm-coef=-1", "--data", empty.to_str().unwrap()]);
    assert!(!ok && err.contains("--lm-coef"), "{err}");
    let (ok, _, err) = run(&["--pretokenized", "--data", empty.to_str().unwrap()]);
    assert!(!ok && err.contains("--pretokenized"), "{err}");
    let (ok, _, err) = run(&["--doc-stride", "8", "--data", empty.to_str().unwrap()]);
    assert!(!ok && err.contains("--doc-stride") && err.contains("clm"), "{err}");
    let (ok, _, err) = run(&["--max-ngram", "3", "--data", empty.to_str().unwrap()]);
    assert!(!ok && err.contains("--max-ngram") && err.contains("clm"), "{err}");
    let (ok, _, err) = run(&["--group-by-length", "--data", empty.to_str().unwrap()]);
    assert!(!ok && err.contains("--group-by-length") && err.contains("clm"), "{err}");
    let (ok, _, err) = sesame(&["train", "--arch", "elmo", "--objective", "mlm", "--data", empty.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(!ok && err.contains("ELMo trains with objective bilm"), "{err}");
    let (ok, _, err) = run(&["--resume", "--data", empty.to_str().unwrap()]);
    assert!(!ok && err.contains("no checkpoint"), "{err}");
    let batches = dir("gpt2").join("batches.safetensors");
    let (ok, _, err) = run(&["--replay-batches", batches.to_str().unwrap(), "--steps", "21"]);
    assert!(!ok && err.contains("21 steps") && err.contains("20"), "{err}");
    let (ok, _, err) = run(&["--replay-batches", batches.to_str().unwrap(), "--dropout", "1"]);
    assert!(!ok && err.contains("dropout must be in [0, 1)"), "{err}");
    let (ok, _, err) = run(&["--replay-batches", batches.to_str().unwrap(), "--min-lr", "0.5"]);
    assert!(!ok && err.contains("min_lr"), "{err}");
    std::fs::remove_file(&empty).unwrap();
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_run_killed_with_sigkill_resumes_with_the_uninterrupted_losses() {
    // With dropout: its masks must follow the step, not the process.
    let mut base: Vec<String> = ["train", "--objective", "clm", "--checkpoint-every", "1", "--dropout", "0.1", "--seed", "5"].map(String::from).to_vec();
    base.extend(pytorch_run_args("gpt2"));
    let with_out = |out: &std::path::Path| -> Vec<String> {
        let mut args = base.clone();
        args.extend(["--out", out.to_str().unwrap(), "--log", out.join("log.jsonl").to_str().unwrap()].map(String::from));
        args
    };
    let reference = temp_dir("train-uninterrupted");
    let (ok, _, err) = run(&with_out(&reference));
    assert!(ok, "{err}");
    let want = logged_losses(&reference.join("log.jsonl"));
    assert_eq!(want.len(), 20);
    let config: serde_json::Value = serde_json::from_slice(&read(&reference, "config.json")).unwrap();
    for key in ["resid_pdrop", "embd_pdrop", "attn_pdrop"] {
        assert!((config[key].as_f64().unwrap() - 0.1).abs() < 1e-6, "--dropout is saved in config.json: {config}");
    }

    // Kill the run at 10 pseudo-random moments (a fixed xorshift sequence, so a failure can be
    // replayed); resume from the newest checkpoint each time.
    let out = temp_dir("train-killed");
    let log = out.join("log.jsonl");
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut random = |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let lines = || std::fs::read_to_string(&log).map_or(0, |t| t.lines().count());
    const KILLS: usize = 10;
    let mut kills = 0;
    for attempt in 0.. {
        let has_checkpoint = std::fs::read_dir(&out).unwrap().any(|e| e.unwrap().file_name().to_string_lossy().starts_with("checkpoint-"));
        let mut args = with_out(&out);
        if has_checkpoint {
            args.push("--resume".into());
        }
        let mut child = Command::new(env!("CARGO_BIN_EXE_sesame")).args(&args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        if attempt < KILLS {
            // Zero or one more logged step, plus 0–30 ms: kills land during start-up, mid-step
            // and mid-checkpoint.
            let target = lines() + random(2) as usize;
            let extra = Duration::from_millis(random(30));
            while lines() < target && child.try_wait().unwrap().is_none() {
                std::thread::sleep(Duration::from_millis(2));
            }
            std::thread::sleep(extra);
            if child.try_wait().unwrap().is_none() {
                child.kill().unwrap(); // SIGKILL
                child.wait().unwrap();
                kills += 1;
                eprintln!("attempt {attempt}: killed at {} logged steps + {extra:?}", lines());
                continue;
            }
        }
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        break;
    }
    assert_eq!(kills, KILLS, "every kill landed before the run finished");
    assert_eq!(logged_losses(&out.join("log.jsonl")), want, "the resumed run's losses differ from the uninterrupted run's");
    assert!(read(&out, "model.safetensors") == read(&reference, "model.safetensors"), "the final weights differ");
    let checkpoints: Vec<String> =
        std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).filter(|n| n.contains("checkpoint-")).collect();
    assert_eq!(checkpoints.len(), 2, "the newest two checkpoints are kept, no temporary folders: {checkpoints:?}");
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_dir_all(&reference).unwrap();
}

/// A save that fails part way (as on a full disk; here a file-size limit makes the writes of
/// model.safetensors fail) stops the run with a clear error and leaves the previous
/// checkpoint whole, with no half-written folder; a resume then ends as an uninterrupted run.
#[test]
fn a_failed_save_keeps_the_previous_checkpoint() {
    let out = temp_dir("train-save-fails");
    let mut args: Vec<String> = ["train", "--objective", "clm"].map(String::from).to_vec();
    args.extend(pytorch_run_args("gpt2"));
    // The last --steps wins: 4 of the fixture's 20 batches.
    args.extend(["--steps", "4", "--checkpoint-every", "2", "--out", out.to_str().unwrap()].map(String::from));
    let (ok, _, err) = run(&args);
    assert!(ok, "{err}");
    let (step2, finished) = (out.join("checkpoint-000002"), read(&out, "model.safetensors"));
    let saved: Vec<Vec<u8>> = ["model.safetensors", "optimizer.exp_avg.safetensors", "trainer_state.json"].iter().map(|f| read(&step2, f)).collect();
    std::fs::remove_dir_all(out.join("checkpoint-000004")).unwrap();

    // The model (90 KB) no longer fits under a 40 KB file-size limit; SIGXFSZ is ignored, so
    // the write fails with EFBIG instead of killing the process.
    let sesame = env!("CARGO_BIN_EXE_sesame");
    let limited =
        Command::new("bash").arg("-c").arg("trap '' XFSZ; ulimit -f 40; exec \"$0\" \"$@\"").arg(sesame).args(&args).arg("--resume").output().unwrap();
    let err = String::from_utf8_lossy(&limited.stderr);
    assert!(!limited.status.success(), "{err}");
    assert!(err.contains("saving the checkpoint of step 4 failed (earlier checkpoints are kept)"), "{err}");
    let names: Vec<String> =
        std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).filter(|n| n.contains("checkpoint-")).collect();
    assert_eq!(names, ["checkpoint-000002"], "no partial checkpoint-000004 and no temporary folder");
    let temporary: Vec<String> =
        std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).filter(|n| n.contains(".tmp-")).collect();
    assert!(temporary.is_empty(), "no temporary file is left behind: {temporary:?}");
    for (file, bytes) in ["model.safetensors", "optimizer.exp_avg.safetensors", "trainer_state.json"].iter().zip(&saved) {
        assert!(read(&step2, file) == *bytes, "{file} of the previous checkpoint changed");
    }

    let (ok, _, err) = run(&[&args[..], &["--resume".to_string()]].concat());
    assert!(ok, "{err}");
    assert!(read(&out, "model.safetensors") == finished, "the resumed run ends as the uninterrupted one");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn resume_refuses_other_settings() {
    let out = temp_dir("train-resume-settings");
    let mut args: Vec<String> = ["train", "--steps", "2", "--out", out.to_str().unwrap()].map(String::from).to_vec();
    let init = dir("gpt2").join("init");
    let batches = dir("gpt2").join("batches.safetensors");
    args.extend(["--model-init", init.to_str().unwrap(), "--replay-batches", batches.to_str().unwrap()].map(String::from));
    let (ok, _, err) = run(&args);
    assert!(ok, "{err}");
    args.extend(["--resume", "--lr", "0.5"].map(String::from));
    let (ok, _, err) = run(&args);
    assert!(!ok && err.contains("lr") && err.contains("0.5"), "{err}");
    std::fs::remove_dir_all(&out).unwrap();
}

/// Asserts that a 60-step run's mean loss over its last 10 steps is at least 0.5 below its
/// first 10 steps'.
fn assert_loss_falls(log: &std::path::Path, run: &str) {
    let losses: Vec<f32> = logged_losses(log).into_iter().map(|(_, l)| l).collect();
    assert_eq!(losses.len(), 60);
    let mean = |l: &[f32]| l.iter().sum::<f32>() / l.len() as f32;
    let (first, last) = (mean(&losses[..10]), mean(&losses[50..]));
    eprintln!("{run}: mean loss over the first 10 steps {first:.3}, the last 10 {last:.3}");
    assert!(last < first - 0.5, "{run}: the loss should fall: {first} → {last}");
}

/// A fresh folder for a run on `text`: (the folder, its corpus.txt holding `text`, its log path).
fn text_run(name: &str, text: &str) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let out = temp_dir(name);
    let corpus = out.join("corpus.txt");
    std::fs::write(&corpus, text).unwrap();
    let log = out.join("log.jsonl");
    (out, corpus, log)
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
    let (out, corpus, log) = text_run("train-bert-text", &word_corpus(30));
    let init = dir("bert").join("init");
    #[rustfmt::skip]
    let args = ["train", "--objective", "mlm+nsp", "--model-init", init.to_str().unwrap(), "--data", corpus.to_str().unwrap(),
        "--steps", "60", "--batch-size", "8", "--seq-len", "32", "--lr", "3e-3", "--warmup", "5", "--seed", "1",
        "--out", out.to_str().unwrap(), "--log", log.to_str().unwrap()];
    let (ok, _, err) = sesame(&args);
    assert!(ok, "{err}");
    assert_loss_falls(&log, "BERT from a checkpoint");
    let checkpoint = Checkpoint::from_bytes(read(&out, "model.safetensors")).unwrap();
    let model = sesame::models::auto::AutoModel::load(&read(&out, "config.json"), &Weights::new(gpu(), &checkpoint)).unwrap();
    assert_eq!(model.require(sesame::models::Capability::FillMask, "test").unwrap(), "prediction_logits");

    let (ok, _, err) = sesame(&[&args[..], &["--whole-word-mask"]].concat());
    assert!(!ok && err.contains("WordPiece"), "{err}");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_fresh_bert_with_a_trained_wordpiece_vocabulary_pretrains_and_fills_masks() {
    let (out, corpus, log) = text_run("train-bert-scratch", &word_corpus(40));
    #[rustfmt::skip]
    let args = ["train", "--arch", "bert", "--tokenizer", "wordpiece:300", "--layers", "2", "--heads", "2", "--hidden", "32",
        "--objective", "mlm+nsp", "--whole-word-mask", "--max-ngram", "3", "--dropout", "0.1", "--data", corpus.to_str().unwrap(),
        "--steps", "60", "--batch-size", "8", "--seq-len", "32", "--lr", "3e-3", "--warmup", "5", "--seed", "1",
        "--eval-every", "60", "--eval-batches", "2", "--out", out.to_str().unwrap(), "--log", log.to_str().unwrap()];
    let (ok, _, err) = sesame(&args);
    assert!(ok, "{err}");
    assert_loss_falls(&log, "fresh BERT");
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
    let (train, dev) = (out.join("train.tsv"), out.join("dev.tsv"));
    std::fs::write(&train, sentiment_tsv(400, 1)).unwrap();
    std::fs::write(&dev, sentiment_tsv(100, 2)).unwrap();
    let log = out.join("log.jsonl");
    let init = common::fixture("bert", "BertModel");
    #[rustfmt::skip]
    let args = ["train", "--objective", "classify", "--model-init", init.to_str().unwrap(), "--data", train.to_str().unwrap(),
        "--eval-data", dev.to_str().unwrap(), "--eval-every", "75", "--eval-batches", "100", "--dropout", "0",
        "--steps", "150", "--batch-size", "16", "--lr", "1e-2", "--warmup", "5", "--seed", "1", "--out", out.to_str().unwrap(), "--log", log.to_str().unwrap()];
    let (ok, _, err) = sesame(&args);
    assert!(ok, "{err}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let accuracy: Vec<f64> = lines.iter().filter_map(|l| l["eval_accuracy"].as_f64()).collect();
    eprintln!("held-out accuracy at steps 75 and 150: {accuracy:?}");
    assert_eq!(accuracy.len(), 2);
    assert!(accuracy[1] >= 0.9, "one cue word decides the label: {accuracy:?}");
    let config: serde_json::Value = serde_json::from_slice(&read(&out, "config.json")).unwrap();
    assert_eq!(config["architectures"][0].as_str(), Some("BertForSequenceClassification"));
    let checkpoint = Checkpoint::from_bytes(read(&out, "model.safetensors")).unwrap();
    assert_eq!(checkpoint.shape("classifier.weight"), Some(&[2, config["hidden_size"].as_u64().unwrap() as usize][..]));
    std::fs::write(&train, "sentence\tlabel\nthe warm sun\t1\nthe cold moon\tnegative\n").unwrap();
    let (ok, _, err) = sesame(&args);
    assert!(!ok && err.contains("line 3"), "{err}");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn bert_fine_tunes_for_token_classification_on_conll_data() {
    let out = temp_dir("train-token-classify");
    let (train, dev) = (out.join("train.conll"), out.join("dev.conll"));
    std::fs::write(&train, tagged_conll(300, 1)).unwrap();
    std::fs::write(&dev, tagged_conll(60, 2)).unwrap();
    let log = out.join("log.jsonl");
    let init = common::fixture("bert", "BertModel");
    #[rustfmt::skip]
    let args = ["train", "--objective", "token-classify", "--model-init", init.to_str().unwrap(), "--data", train.to_str().unwrap(),
        "--eval-data", dev.to_str().unwrap(), "--eval-every", "100", "--eval-batches", "100", "--dropout", "0",
        "--steps", "100", "--batch-size", "16", "--lr", "1e-2", "--warmup", "5", "--seed", "1", "--out", out.to_str().unwrap(), "--log", log.to_str().unwrap()];
    let (ok, _, err) = sesame(&args);
    assert!(ok, "{err}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
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
    let (ok, _, err) = sesame(&args);
    assert!(!ok && err.contains("line 2") && err.contains("B-PERSON"), "{err}");
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
    let (train, dev) = (out.join("train.jsonl"), out.join("dev.json"));
    std::fs::write(&train, squad_examples(400, 1, false)).unwrap();
    std::fs::write(&dev, squad_examples(60, 2, true)).unwrap();
    let log = out.join("log.jsonl");
    let init = common::fixture("bert", "BertModel");
    #[rustfmt::skip]
    let args = ["train", "--objective", "qa", "--model-init", init.to_str().unwrap(), "--data", train.to_str().unwrap(),
        "--eval-data", dev.to_str().unwrap(), "--eval-every", "200", "--eval-batches", "100", "--dropout", "0", "--seq-len", "24",
        "--steps", "200", "--batch-size", "16", "--lr", "1e-2", "--warmup", "10", "--seed", "1", "--out", out.to_str().unwrap(), "--log", log.to_str().unwrap()];
    let (ok, _, err) = sesame(&args);
    assert!(ok, "{err}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let evaluation = lines.iter().find(|l| l["eval_exact_match"].is_f64()).unwrap();
    eprintln!("held out: {evaluation}");
    let (exact, f1) = (evaluation["eval_exact_match"].as_f64().unwrap(), evaluation["eval_f1"].as_f64().unwrap());
    assert!(exact >= 0.9 && f1 >= 0.9, "the question names what to pick: exact match {exact}, F1 {f1}");
    let config: serde_json::Value = serde_json::from_slice(&read(&out, "config.json")).unwrap();
    assert_eq!(config["architectures"][0].as_str(), Some("BertForQuestionAnswering"));
    // --eval-only scores the saved model on a file as the run's evaluation did.
    let (ok, stdout, err) = sesame(&[
        "train",
        "--objective",
        "qa",
        "--model-init",
        out.to_str().unwrap(),
        "--data",
        dev.to_str().unwrap(),
        "--seq-len",
        "24",
        "--batch-size",
        "16",
        "--eval-only",
    ]);
    assert!(ok, "{err}");
    let scored: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(
        (scored["eval_exact_match"].as_f64(), scored["eval_loss"].as_f64().map(|l| l as f32)),
        (Some(exact), evaluation["eval_loss"].as_f64().map(|l| l as f32))
    );
    let (ok, _, err) = sesame(&["train", "--objective", "qa", "--model-init", init.to_str().unwrap(), "--data", dev.to_str().unwrap(), "--eval-only"]);
    assert!(!ok && err.contains("no span head"), "a fresh head is not scored: {err}");
    let (ok, _, err) = sesame(&[
        "train",
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
    ]);
    assert!(!ok && err.contains("--eval-data"), "{err}");
    // Answers are scored per question: one window per evaluation cannot hold a question of
    // three (10 tokens leave 5 for a context of 9).
    #[rustfmt::skip]
    let (ok, _, err) = sesame(&["train", "--objective", "qa", "--model-init", init.to_str().unwrap(), "--data", dev.to_str().unwrap(), "--eval-data", dev.to_str().unwrap(),
        "--eval-every", "5", "--eval-batches", "1", "--batch-size", "1", "--seq-len", "10", "--doc-stride", "2", "--out", out.to_str().unwrap()]);
    assert!(!ok && err.contains("no whole question"), "{err}");
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
    let (ok, _, err) = sesame(&args);
    assert!(!ok && err.contains("\"dog\" is not at character 4"), "{err}");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn gpt2_fine_tunes_for_classification_with_the_auxiliary_lm_loss() {
    let out = temp_dir("train-gpt2-classify");
    let (train, dev) = (out.join("train.tsv"), out.join("dev.tsv"));
    std::fs::write(&train, sentiment_tsv(400, 1)).unwrap();
    std::fs::write(&dev, sentiment_tsv(100, 2)).unwrap();
    let log = out.join("log.jsonl");
    // A fresh GPT-2 with a byte-level BPE: its end-of-text token pads the batches.
    #[rustfmt::skip]
    let args = ["train", "--arch", "gpt2", "--tokenizer", "bpe:300", "--layers", "1", "--heads", "2", "--hidden", "32", "--context", "32",
        "--objective", "classify", "--data", train.to_str().unwrap(), "--eval-data", dev.to_str().unwrap(), "--eval-every", "150",
        "--eval-batches", "100", "--steps", "150", "--batch-size", "16", "--lr", "1e-2", "--warmup", "5", "--seed", "1",
        "--out", out.to_str().unwrap(), "--log", log.to_str().unwrap()];
    let (ok, _, err) = sesame(&args);
    assert!(ok, "{err}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let accuracy = lines.iter().find_map(|l| l["eval_accuracy"].as_f64()).unwrap();
    eprintln!("held-out accuracy of the GPT-2 classifier: {accuracy}");
    assert!(accuracy >= 0.9, "one cue word decides the label: {accuracy}");
    let config: serde_json::Value = serde_json::from_slice(&read(&out, "config.json")).unwrap();
    assert_eq!(config["architectures"][0].as_str(), Some("GPT2ForSequenceClassification"));
    assert_eq!(config["pad_token_id"], config["eos_token_id"], "padded with its end-of-text token");
    assert_eq!(Checkpoint::from_bytes(read(&out, "model.safetensors")).unwrap().shape("score.weight"), Some(&[2, 32][..]));

    // The LM term is part of the loss: without it the first step's loss is lower (the
    // same batch and weights; an untrained LM's loss is about ln 300).
    let first = |log: &Path| logged_losses(log)[0].1;
    let (task_only, task_log) = (out.join("task-only"), out.join("task-only.jsonl"));
    let (ok, _, err) = sesame(
        &[&args[..], &["--lm-coef", "0", "--steps", "1", "--eval-every", "0", "--out", task_only.to_str().unwrap(), "--log", task_log.to_str().unwrap()]]
            .concat(),
    );
    assert!(ok, "{err}");
    let (with_lm, task) = (first(&log), first(&task_log));
    eprintln!("step-1 loss with λ = 0.5: {with_lm}, task alone: {task}");
    assert!(with_lm - task > 0.5 * 5.0 && with_lm - task < 0.5 * 6.5, "L_task + 0.5·L_LM with L_LM ≈ ln 300 = 5.7: {with_lm} vs {task}");

    // A GPT-2 without a padding or end-of-text id cannot pad a batch.
    let init = dir("gpt2").join("init");
    let (ok, _, err) = sesame(&[
        "train",
        "--objective",
        "classify",
        "--model-init",
        init.to_str().unwrap(),
        "--data",
        train.to_str().unwrap(),
        "--out",
        out.join("no-pad").to_str().unwrap(),
    ]);
    assert!(!ok && err.contains("pad_token_id"), "{err}");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_fresh_gpt2_with_a_trained_byte_level_bpe_learns_and_ends_text_with_its_own_token() {
    let (out, corpus, log) = text_run("train-bpe", &word_corpus(40));
    #[rustfmt::skip]
    let args = ["train", "--arch", "gpt2", "--tokenizer", "bpe:300", "--layers", "1", "--heads", "2", "--hidden", "32", "--seq-len", "16",
        "--data", corpus.to_str().unwrap(), "--steps", "60", "--batch-size", "8", "--lr", "1e-2", "--out", out.to_str().unwrap(), "--log", log.to_str().unwrap()];
    let (ok, _, err) = sesame(&args);
    assert!(ok, "{err}");
    assert_loss_falls(&log, "fresh GPT-2 with byte-level BPE");
    let tokenizer = sesame::tokenize::TextTokenizer::from_bytes(&read(&out, "tokenizer.json")).unwrap();
    assert!(tokenizer.encode(" the cat", false).unwrap().len() <= 3, "frequent words are merged");
    let config: serde_json::Value = serde_json::from_slice(&read(&out, "config.json")).unwrap();
    assert_eq!(config["eos_token_id"].as_u64(), Some(tokenizer.token_to_id("<|endoftext|>").unwrap() as u64), "{config}");
    let (ok, stdout, err) = sesame(&["generate", "--model", out.to_str().unwrap(), "--prompt", "the cat", "--max-new-tokens", "8"]);
    assert!(ok && stdout.starts_with("the cat"), "{stdout} {err}");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_fresh_character_level_gpt2_learns_and_reports_held_out_loss() {
    let out = temp_dir("train-scratch");
    let corpus = out.join("corpus.txt");
    // A text whose next character is mostly predictable.
    let text: String = (0..400).map(|i| ["to be or not to be\n", "that is the question\n", "whether tis nobler\n"][i % 3]).collect();
    std::fs::write(&corpus, &text).unwrap();
    let log = out.join("log.jsonl");
    // The shape from a TOML file, the rest as flags (and --lr overriding the file's).
    let config = out.join("run.toml");
    std::fs::write(&config, "arch = \"gpt2\"\nlayers = 1\nheads = 2\nhidden = 32\nseq_len = 16\nlr = 0.5\n").unwrap();
    #[rustfmt::skip]
    let args = ["train", "--config", config.to_str().unwrap(), "--data", corpus.to_str().unwrap(),
        "--steps", "60", "--batch-size", "8", "--lr", "1e-2", "--eval-every", "30", "--eval-batches", "4", "--out", out.to_str().unwrap(), "--log", log.to_str().unwrap()];
    let (ok, _, err) = sesame(&args);
    assert!(ok, "{err}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!((lines[0]["lr"].as_f64().unwrap() - 1e-2).abs() < 1e-6, "the command line's --lr wins: {}", lines[0]);
    let eval: Vec<f64> = lines.iter().filter_map(|l| l["eval_loss"].as_f64()).collect();
    assert_eq!(eval.len(), 2, "evaluations at steps 30 and 60");
    let perplexity = lines.iter().rev().find_map(|l| l["eval_perplexity"].as_f64()).unwrap();
    assert!((perplexity - eval[1].exp()).abs() < 1e-3 * perplexity, "perplexity {perplexity} = exp(held-out loss {})", eval[1]);
    let plot = std::fs::read_to_string(out.join("loss.svg")).unwrap();
    assert!(plot.starts_with("<svg") && plot.contains("held-out loss"), "the loss curves are plotted");
    let first_loss = lines[0]["loss"].as_f64().unwrap();
    let vocab = text.chars().collect::<std::collections::BTreeSet<_>>().len();
    assert!((first_loss - (vocab as f64).ln()).abs() < 0.3, "a fresh model starts near ln(vocab): {first_loss}");
    assert!(eval[1] < eval[0] && eval[1] < 0.5 * (vocab as f64).ln(), "held-out losses at steps 30 and 60: {eval:?}");
    let config: serde_json::Value = serde_json::from_slice(&read(&out, "config.json")).unwrap();
    assert_eq!((config["n_layer"].as_u64(), config["n_positions"].as_u64(), config["vocab_size"].as_u64()), (Some(1), Some(16), Some(vocab as u64)));
    let tokenizer = sesame::tokenize::TextTokenizer::from_bytes(&read(&out, "tokenizer.json")).unwrap();
    assert_eq!(tokenizer.encode("to be", false).unwrap().len(), 5);
    let (ok, _, err) = sesame(&["generate", "--model", out.to_str().unwrap(), "--max-new-tokens", "6", "--prompt", "to be or "]);
    assert!(ok, "the trained folder generates: {err}");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_fresh_elmo_learns_its_bidirectional_lm_and_saves_a_folder_elmo_loads() {
    let (out, corpus, log) = text_run("train-elmo", &word_corpus(40));
    #[rustfmt::skip]
    let args = ["train", "--arch", "elmo", "--objective", "bilm", "--tokenizer", "words:100", "--layers", "2", "--hidden", "16",
        "--data", corpus.to_str().unwrap(), "--steps", "60", "--batch-size", "8", "--lr", "1e-2", "--seed", "1",
        "--eval-every", "60", "--eval-batches", "2", "--out", out.to_str().unwrap(), "--log", log.to_str().unwrap()];
    let (ok, _, err) = sesame(&args);
    assert!(ok, "{err}");
    assert_loss_falls(&log, "fresh ELMo biLM");
    let vocab = String::from_utf8(read(&out, "vocab.txt")).unwrap();
    let words: Vec<&str> = vocab.lines().collect();
    assert_eq!(words[..4], ["<S>", "</S>", "<UNK>", "."], "bilm-tf's order: the special words, then the most frequent");
    assert_eq!(words.len(), 3 + 17, "every word the corpus uses (16 and the full stop)");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
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
    let (again, again_log) = (out.join("again"), out.join("again.jsonl"));
    #[rustfmt::skip]
    let more = ["train", "--objective", "bilm", "--model-init", out.to_str().unwrap(), "--data", corpus.to_str().unwrap(),
        "--steps", "2", "--batch-size", "8", "--lr", "1e-3", "--out", again.to_str().unwrap(), "--log", again_log.to_str().unwrap()];
    let (ok, _, err) = sesame(&more);
    assert!(ok, "{err}");
    let first = logged_losses(&log)[0].1;
    assert!(logged_losses(&again_log)[0].1 < first - 1.0, "a trained biLM starts lower than a fresh one ({first})");
    let (ok, _, err) = sesame(&[&more[..], &["--objective", "clm"]].concat());
    assert!(!ok && err.contains("ELMo trains with objective bilm"), "{err}");
    let (ok, _, err) = sesame(&[&args[..], &["--dropout", "0.1"]].concat());
    assert!(!ok && err.contains("dropout"), "{err}");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn elmo_features_train_a_scalar_mix_and_classifier_with_the_bilm_frozen() {
    let out = temp_dir("train-elmo-classify");
    let (train, dev) = (out.join("train.tsv"), out.join("dev.tsv"));
    std::fs::write(&train, sentiment_tsv(400, 1)).unwrap();
    std::fs::write(&dev, sentiment_tsv(100, 2)).unwrap();
    let log = out.join("log.jsonl");
    // The shipped WikiText ELMo: a pretrained biLM's features (a random one's barely separate
    // the cue words).
    let init = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/elmo-wikitext");
    #[rustfmt::skip]
    let args = ["train", "--objective", "classify", "--model-init", init.to_str().unwrap(), "--data", train.to_str().unwrap(),
        "--eval-data", dev.to_str().unwrap(), "--eval-every", "200", "--eval-batches", "100", "--checkpoint-every", "100",
        "--steps", "200", "--batch-size", "16", "--lr", "1e-2", "--seed", "1", "--out", out.to_str().unwrap(), "--log", log.to_str().unwrap()];
    let (ok, _, err) = sesame(&args);
    assert!(ok, "{err}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
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
    let losses = logged_losses(&log);
    std::fs::remove_dir_all(out.join("checkpoint-000200")).unwrap();
    let (ok, _, err) = sesame(&[&args[..], &["--resume"]].concat());
    assert!(ok, "{err}");
    assert_eq!(logged_losses(&log)[100..], losses[100..], "the resumed steps repeat the run's");

    let (ok, _, err) = sesame(&[&args[..], &["--dropout", "0.1"]].concat());
    assert!(!ok && err.contains("dropout"), "{err}");
    let (ok, _, err) = sesame(&["train", "--arch", "elmo", "--objective", "classify", "--data", train.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(!ok && err.contains("--model-init"), "{err}");
    std::fs::remove_dir_all(&out).unwrap();
}
