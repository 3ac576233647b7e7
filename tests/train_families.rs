//! Runs of every encoder family through the library's run (`train::run`, what `sesame train`
//! calls), from the flags as the command line parses them: each family's PyTorch run replayed
//! (tests/fixtures/train/, from tests/reference/make_family_train_fixtures.py) — the objective
//! named by flag, the batches' tensors named as transformers names its inputs
//! (`task_type_ids`, `sentence_order_label`, per-token replaced-token `labels`), every loss
//! matching PyTorch's —, fresh heads and fresh models trained, and the objectives a family
//! cannot train refused before any step.

mod common;

use common::train::{evaluate, lcg, pytorch_run_args, refused, temp_dir, train, trajectory};
use sesame::classify::classify_text;
use sesame::models::auto::LoadedModel;

/// Replays the fixture's run with `objective`; the losses must be PyTorch's.
fn replays_the_pytorch_run(family: &str, objective: &str) {
    let out = temp_dir(&format!("train-{family}"));
    let mut args: Vec<String> = ["--objective", objective].map(String::from).to_vec();
    args.extend(pytorch_run_args(family));
    args.extend(["--seed", &trajectory(family).dropout_seed.to_string(), "--out", out.to_str().unwrap()].map(String::from));
    let trained = train(&args).unwrap_or_else(|e| panic!("{family}: {e}"));
    let t = trajectory(family);
    let losses = trained.losses();
    assert_eq!(losses.len(), t.steps.len(), "{family}: one report per step");
    for ((step, loss), want) in losses.iter().zip(&t.steps) {
        assert!((loss - want.loss).abs() <= 1e-5 * want.loss, "{family} step {step}: loss {loss} vs PyTorch {}", want.loss);
    }
    assert!(out.join("model.safetensors").is_file() && out.join("config.json").is_file(), "{family}: no checkpoint written");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn every_encoder_family_replays_its_pytorch_run() {
    for (family, objective) in [
        ("roberta-mlm", "mlm"),
        ("xlm-roberta-xl-mlm", "mlm"),
        ("distilbert-mlm", "mlm"),
        ("albert-sop", "mlm+sop"),
        ("albert-lamb", "mlm+sop"),
        ("ernie-nsp", "mlm+nsp"),
        ("electra-rtd", "rtd"),
        ("distilbert-token-classify", "token-classify"),
        ("distilbert-qa", "qa"),
        ("bert-multiple-choice", "multiple-choice"),
    ] {
        replays_the_pytorch_run(family, objective);
    }
}

#[test]
fn objectives_a_family_cannot_train_are_refused_before_any_step() {
    let out = temp_dir("train-family-refusals");
    let refused = |family: &str, objective: &str, expected: &[&str]| {
        let mut args: Vec<String> = ["--objective", objective].map(String::from).to_vec();
        args.extend(pytorch_run_args(family));
        args.extend(["--out", out.to_str().unwrap()].map(String::from));
        let err = refused(&args);
        assert!(expected.iter().all(|e| err.contains(e)), "{family} with {objective}: {err}");
    };
    // A family that does not train the objective: the families that do, and what it trains.
    refused("albert-sop", "mlm+nsp", &["objective mlm+nsp trains BERT (bert), ERNIE (ernie)", "ALBERT (albert) trains mlm, mlm+sop"]);
    refused("ernie-nsp", "mlm+sop", &["objective mlm+sop trains ALBERT (albert)", "ERNIE (ernie) trains mlm, mlm+nsp"]);
    refused("gpt2", "mlm+sop", &["ALBERT"]);
    refused("roberta-mlm", "rtd", &["objective rtd trains ELECTRA (electra)"]);
    refused("roberta-mlm", "mlm+nsp", &["objective mlm+nsp trains BERT (bert)"]);
    // A family that does, and a checkpoint without the head: the head it needs.
    refused("electra-rtd", "mlm", &["masked-LM head"]);
    refused("distil-bert-mlm", "mlm+nsp", &["needs a next-sentence head", "`BertForMaskedLM` has none"]);
    refused("bert-classify", "multiple-choice", &["…ForMultipleChoice head", "BertForSequenceClassification"]);
    // Task ids for a model without task type embeddings.
    let mut args: Vec<String> = ["--objective", "mlm+nsp"].map(String::from).to_vec();
    args.extend(pytorch_run_args("bert"));
    let batches = args.iter().position(|a| a == "--replay-batches").unwrap() + 1;
    args[batches] = common::train::dir("ernie-nsp").join("batches.safetensors").to_str().unwrap().to_string();
    args.extend(["--out", out.to_str().unwrap()].map(String::from));
    let err = train(&args).err().expect("batches with task ids for a model without task types");
    assert!(err.contains("task_type_ids given, but this model has no task type embeddings"), "{err}");
    assert!(!out.join("model.safetensors").exists(), "nothing written");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn every_encoder_family_fine_tunes_a_fresh_classifier_from_its_pretraining_checkpoint() {
    // Sentences whose label is carried by one word of the fixtures' vocabulary.
    let rows: Vec<String> = (0..64).map(|i| format!("the {} sat on the mat\t{}", ["warm", "cold"][i % 2], i % 2)).collect();
    let data = temp_dir("family-classify-data").join("train.tsv");
    std::fs::write(&data, rows.join("\n")).unwrap();
    for (family, class) in [
        ("roberta-mlm", "RobertaForSequenceClassification"),
        ("distilbert-mlm", "DistilBertForSequenceClassification"),
        ("albert-sop", "AlbertForSequenceClassification"),
        ("ernie-nsp", "ErnieForSequenceClassification"),
        ("electra-rtd", "ElectraForSequenceClassification"),
    ] {
        let out = temp_dir(&format!("classify-{family}"));
        let init = common::train::dir(family).join("init");
        #[rustfmt::skip]
        let args = common::train::flags(&["--objective", "classify", "--model-init", init.to_str().unwrap(), "--data", data.to_str().unwrap(),
            "--steps", "8", "--batch-size", "8", "--seq-len", "12", "--eval-every", "8", "--out", out.to_str().unwrap()]);
        let trained = train(&args).unwrap_or_else(|e| panic!("{family}: {e}"));
        assert!(trained.first_evaluation()["eval_accuracy"].is_f64(), "{family} reports held-out accuracy");
        let config: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("config.json")).unwrap()).unwrap();
        assert_eq!(config["architectures"][0], class, "{family}");
        // The written classifier loads and classifies.
        let loaded = LoadedModel::load(common::gpu(), &out, false).unwrap();
        let scores = pollster::block_on(classify_text(&loaded, "the warm cat", None)).unwrap();
        assert_eq!(scores.len(), 2, "{family}: {scores:?}");
        let _ = std::fs::remove_dir_all(&out);
    }
}

/// SWAG-style examples whose right ending is "warm", wherever the shuffle puts it among four
/// (chance: 25%).
fn warm_choices(examples: usize, seed: u64) -> String {
    let mut next = lcg(seed);
    let mut csv = String::from(",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n");
    for i in 0..examples {
        let mut endings = ["warm", "cold", "red", "blue"];
        for j in (1..4).rev() {
            endings.swap(j, next(j + 1));
        }
        let label = endings.iter().position(|&e| e == "warm").unwrap();
        csv += &format!("{i},v{i},0,x,the cat sat on the mat .,it was,gold,{},{label}\n", endings.join(","));
    }
    csv
}

#[test]
fn every_encoder_family_fine_tunes_a_fresh_multiple_choice_head_on_swag_style_data() {
    let dir = temp_dir("family-multiple-choice");
    let (train_data, dev) = (dir.join("train.csv"), dir.join("val.csv"));
    std::fs::write(&train_data, warm_choices(64, 1)).unwrap();
    std::fs::write(&dev, warm_choices(32, 2)).unwrap();
    for (family, class, steps) in [
        ("bert", "BertForMultipleChoice", "30"),
        ("roberta-mlm", "RobertaForMultipleChoice", "4"),
        ("distilbert-mlm", "DistilBertForMultipleChoice", "4"),
        ("albert-sop", "AlbertForMultipleChoice", "4"),
        ("ernie-nsp", "ErnieForMultipleChoice", "4"),
    ] {
        let out = dir.join(family);
        let init = common::train::dir(family).join("init");
        #[rustfmt::skip]
        let args = common::train::flags(&["--objective", "multiple-choice", "--model-init", init.to_str().unwrap(), "--data", train_data.to_str().unwrap(),
            "--eval-data", dev.to_str().unwrap(), "--steps", steps, "--batch-size", "8", "--seq-len", "16", "--lr", "2e-3", "--warmup", "5",
            "--eval-every", steps, "--eval-batches", "4", "--out", out.to_str().unwrap()]);
        let trained = train(&args).unwrap_or_else(|e| panic!("{family}: {e}"));
        let config: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("config.json")).unwrap()).unwrap();
        assert_eq!(config["architectures"][0], class, "{family}");
        LoadedModel::load(common::gpu(), &out, false).unwrap_or_else(|e| panic!("{family}: {e}"));
        let eval = trained.first_evaluation();
        let accuracy = eval["eval_accuracy"].as_f64().unwrap_or_else(|| panic!("{family}: no held-out accuracy in {eval}"));
        if family == "bert" {
            // The task is learnt: the held-out examples are new draws (the rows' order within
            // an example is the labels').
            assert!(accuracy >= 0.9, "bert: held-out accuracy {accuracy}");
            // --eval-only scores the trained model on the file, each example once.
            #[rustfmt::skip]
            let scored = evaluate(&common::train::flags(&["--objective", "multiple-choice", "--model-init", out.to_str().unwrap(), "--data", dev.to_str().unwrap(),
                "--seq-len", "16", "--batch-size", "8"])).unwrap();
            assert_eq!((scored["batches"].as_u64(), scored["eval_accuracy"].as_f64()), (Some(4), Some(accuracy)), "{scored}");
        }
    }
    // Refused before any step: ELECTRA, whose multiple-choice head Sesame lacks.
    let init = common::train::dir("electra-rtd").join("init");
    #[rustfmt::skip]
    let err = refused(&common::train::flags(&["--objective", "multiple-choice", "--model-init", init.to_str().unwrap(), "--data", train_data.to_str().unwrap(),
        "--steps", "2", "--out", dir.join("electra").to_str().unwrap()]));
    assert!(err.contains("multiple-choice head"), "{err}");
    // Held out without --eval-data: a CSV is not cut by lines.
    let init = common::train::dir("bert").join("init");
    #[rustfmt::skip]
    let err = refused(&common::train::flags(&["--objective", "multiple-choice", "--model-init", init.to_str().unwrap(), "--data", train_data.to_str().unwrap(),
        "--steps", "2", "--eval-every", "1", "--out", dir.join("no-eval").to_str().unwrap()]));
    assert!(err.contains("evaluates on --eval-data"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fresh_roberta_albert_and_ernie_pretrain_with_their_objectives() {
    // 40 documents of six sentences over a 20-word vocabulary.
    let words = "the a cat dog sat on mat ran to park and saw big small red blue house tree bird sang".split(' ').collect::<Vec<_>>();
    let mut next = lcg(7);
    let documents: Vec<String> = (0..40)
        .map(|_| (0..6).map(|_| (0..4 + next(6)).map(|_| words[next(words.len())]).collect::<Vec<_>>().join(" ") + " .").collect::<Vec<_>>().join(" "))
        .collect();
    let dir = temp_dir("fresh-families");
    let data = dir.join("corpus.txt");
    std::fs::write(&data, documents.join("\n\n")).unwrap();
    for (arch, objective, class) in
        [("roberta", "mlm", "RobertaForMaskedLM"), ("albert", "mlm+sop", "AlbertForPreTraining"), ("ernie", "mlm+nsp", "ErnieForPreTraining")]
    {
        let out = dir.join(arch);
        #[rustfmt::skip]
        let args = common::train::flags(&["--arch", arch, "--tokenizer", "wordpiece:256", "--layers", "2", "--heads", "2", "--hidden", "32", "--objective", objective,
            "--data", data.to_str().unwrap(), "--eval-data", data.to_str().unwrap(), "--eval-every", "40", "--eval-batches", "2",
            "--seq-len", "32", "--batch-size", "8", "--steps", "40", "--lr", "3e-3", "--warmup", "5", "--out", out.to_str().unwrap()]);
        let trained = train(&args).unwrap_or_else(|e| panic!("{arch}: {e}"));
        let (first, last) = trained.first_and_last_losses();
        assert!(last < 0.85 * first, "{arch}: the loss falls from {first} to {last}");
        // Held out, the perplexity is the masked LM's alone; a pair head's accuracy is logged.
        let eval = trained.first_evaluation();
        let (loss, perplexity) = (eval["eval_loss"].as_f64().unwrap(), eval["eval_perplexity"].as_f64().unwrap());
        let pair_metric = match objective {
            "mlm+sop" => Some("eval_sentence_order_accuracy"),
            "mlm+nsp" => Some("eval_next_sentence_accuracy"),
            _ => None,
        };
        match pair_metric {
            Some(metric) => {
                let accuracy = eval[metric].as_f64().unwrap_or_else(|| panic!("{arch}: no {metric} in {eval}"));
                assert!((0.0..=1.0).contains(&accuracy) && perplexity.ln() < loss - 0.05, "{arch}: the pair loss is not in the perplexity: {eval}");
            }
            None => assert!((perplexity.ln() - loss).abs() < 1e-4 && eval.get("eval_next_sentence_accuracy").is_none(), "{arch}: {eval}"),
        }
        // --eval-only scores the saved model on text as the run's last evaluation did: the
        // same --eval-batches draws (text has no end), by the same seed.
        #[rustfmt::skip]
        let scored = evaluate(&common::train::flags(&["--objective", objective, "--model-init", out.to_str().unwrap(), "--data", data.to_str().unwrap(),
            "--seq-len", "32", "--batch-size", "8", "--eval-batches", "2"])).unwrap_or_else(|e| panic!("{arch} --eval-only: {e}"));
        let last_eval = trained.evaluation_lines().pop().unwrap();
        let (scored_loss, logged_loss) = (scored["eval_loss"].as_f64().unwrap(), last_eval["eval_loss"].as_f64().unwrap());
        assert_eq!(scored["batches"], 2, "{arch}: {scored}");
        assert!((scored_loss - logged_loss).abs() <= 1e-5 * logged_loss, "{arch}: --eval-only {scored_loss}, the run's last evaluation {logged_loss}");
        let config: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("config.json")).unwrap()).unwrap();
        assert_eq!(config["architectures"][0], class);
        LoadedModel::load(common::gpu(), &out, false).unwrap_or_else(|e| panic!("{arch}: {e}"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ernie_pretrains_with_knowledge_masking_in_stages() {
    // 30 documents of four sentences; "red house" and "big tree" annotated as entities.
    let words = "the a cat dog sat on mat ran to park and saw small blue bird sang red house big tree".split(' ').collect::<Vec<_>>();
    let mut next = lcg(3);
    let lines: Vec<String> = (0..30)
        .map(|_| {
            let text = (0..4).map(|_| (0..5 + next(5)).map(|_| words[next(words.len())]).collect::<Vec<_>>().join(" ") + " .").collect::<Vec<_>>().join(" ");
            let entities: Vec<[usize; 2]> =
                ["red house", "big tree"].iter().flat_map(|name| text.match_indices(name).map(|(at, _)| [at, at + name.len()]).collect::<Vec<_>>()).collect();
            serde_json::json!({"text": text, "entities": entities}).to_string()
        })
        .collect();
    let dir = temp_dir("ernie-knowledge");
    let data = dir.join("corpus.jsonl");
    std::fs::write(&data, lines.join("\n")).unwrap();
    let out = dir.join("ernie");
    #[rustfmt::skip]
    let args = |extra: &[&str]| {
        let mut args: Vec<String> = ["--arch", "ernie", "--tokenizer", "wordpiece:256", "--layers", "2", "--heads", "2", "--hidden", "32",
            "--objective", "mlm+nsp", "--data", data.to_str().unwrap(), "--seq-len", "32", "--batch-size", "8", "--steps", "30", "--lr", "3e-3",
            "--warmup", "5", "--out", out.to_str().unwrap()].map(String::from).to_vec();
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    };
    let trained = train(&args(&["--mask-level", "token:10,phrase:10,entity", "--whole-word-mask"])).unwrap();
    assert_eq!(trained.steps.len(), 30);
    let state: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("checkpoint-000030/trainer_state.json")).unwrap()).unwrap();
    assert_eq!(state["settings"]["mask_level"], "token:10,phrase:10,entity", "the stages, recorded for --resume");
    LoadedModel::load(common::gpu(), &out, false).unwrap();

    // Refused before any step, naming what is wrong.
    let refused = |extra: &[&str], data_text: Option<&str>, expected: &[&str]| {
        let (data_file, gazetteer) = (dir.join("bad.jsonl"), dir.join("gazetteer.txt"));
        std::fs::write(&gazetteer, "# none yet\n").unwrap();
        let mut a = args(extra);
        if let Some(text) = data_text {
            std::fs::write(&data_file, text).unwrap();
            let at = a.iter().position(|s| s == "--data").unwrap();
            a[at + 1] = data_file.to_str().unwrap().to_string();
        }
        let a: Vec<String> = a.into_iter().map(|s| s.replace("GAZETTEER", gazetteer.to_str().unwrap())).collect();
        let err = refused(&a);
        assert!(expected.iter().all(|e| err.contains(e)), "{extra:?}: {err}");
    };
    refused(&["--mask-level", "entity"], Some("{\"text\": \"the cat sat .\", \"entities\": [[4, 7], [6, 11]]}\n"), &["line 1", "overlap"]);
    refused(&["--mask-level", "entity"], Some("{\"text\": \"the cat sat .\", \"entities\": [[4, 70]]}\n"), &["line 1", "[4, 70]"]);
    refused(&["--mask-level", "entity"], Some("{\"text\": \"the cat sat .\"}\n"), &["document 1", "gazetteer"]);
    refused(&["--mask-level", "entity", "--gazetteer", "GAZETTEER"], None, &["gazetteer", "no entity names"]);
    refused(&["--gazetteer", "GAZETTEER"], None, &["--gazetteer", "no entity stage"]);
    refused(&["--mask-level", "phrase,entity"], None, &["every stage but the last"]);
    let _ = std::fs::remove_dir_all(&dir);
}
