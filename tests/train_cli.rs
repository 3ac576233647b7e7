//! `sesame train` end to end, as a process: the PyTorch run replayed (its progress lines, step
//! log and checkpoint folders), a run killed with SIGKILL and resumed, a save that fails part
//! way, and a run configured by a TOML file, evaluated and plotted. (Training itself is tested
//! through the library: train_runs.rs, train_families.rs.)

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::train::{compare_parameters, dir, logged_losses, pytorch_run_args, run, temp_dir, trajectory};
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
fn a_run_killed_with_sigkill_resumes_with_the_uninterrupted_losses() {
    // With dropout: its masks must follow the step, not the process. On the WGSL kernels (an
    // adapter, lavapipe here): the host device ends the 20 steps before ten kills can land.
    let mut base: Vec<String> =
        ["--kernels", "blocked", "train", "--objective", "clm", "--checkpoint-every", "1", "--dropout", "0.1", "--seed", "5"].map(String::from).to_vec();
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
