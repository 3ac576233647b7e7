//! `sesame train` (and `sesame distill`): the library's run ([`sesame::train::run`]) with its
//! flags ([`RunSpec`], plus a TOML `--config` and a `--log`), a progress display, a step log
//! and the loss plot. Training, its checks and its data are the library's.

pub mod config;
mod progress;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use sesame::error::{Result, SesameError};
use sesame::train::run::{evaluate, prepare, RunSpec};
use sesame::train::trainer::{Evaluation, RunObserver, StepReport};
use sesame::Device;

use super::io_err;
use progress::{History, Progress};

#[derive(clap::Args, Clone)]
#[command(args_override_self = true)]
pub struct TrainArgs {
    /// A TOML file of settings, keyed by these flags' long names (`lr = 1e-3`,
    /// `whole_word_mask = true`); flags on the command line override it.
    #[arg(long)]
    config: Option<PathBuf>,
    #[command(flatten)]
    pub spec: RunSpec,
    /// One JSON line per step: {"step", "loss", "lr", "grad_norm", "tokens_per_s"}, and one
    /// per evaluation: {"step", "eval_loss", "eval_perplexity"} (for mlm+nsp and mlm+sop, the
    /// perplexity of the masked-LM part, and "eval_next_sentence_accuracy" or
    /// "eval_sentence_order_accuracy" of the pair head; for bilm also each direction's; for the classifiers "eval_accuracy"
    /// instead, and eval_loss is the task's alone, without GPT's LM term; for qa
    /// "eval_exact_match" and "eval_f1").
    #[arg(long)]
    log: Option<PathBuf>,
}

/// `sesame train`: the run of the flags, or with --eval-only the scores of --model-init on
/// --data, printed as {"batches", "eval_loss", metrics…, "seconds"}.
pub fn run(gpu: &Device, args: TrainArgs) -> Result<()> {
    if args.spec.eval_only {
        let started = Instant::now();
        let scores = evaluate(gpu, &args.spec)?;
        let mut line = serde_json::json!({"batches": scores.batches, "eval_loss": scores.loss, "seconds": started.elapsed().as_secs_f64()});
        for (name, value) in scores.metrics {
            line[name] = value.into();
        }
        println!("{line}");
        return Ok(());
    }
    let mut run = prepare(gpu, &args.spec)?;
    if let Some(dir) = &run.resumed_from {
        eprintln!("resuming from {} (step {})", dir.display(), run.trainer.next_step());
    }
    let (first_step, steps) = (run.trainer.next_step(), run.trainer.settings().steps);
    // Before the log, which may be kept there.
    std::fs::create_dir_all(&run.checkpoints.out).map_err(io_err(&run.checkpoints.out))?;
    let mut observer = RunDisplay { progress: Progress::new(first_step, steps), history: History::default(), log: None, steps };
    if let Some(path) = &args.log {
        let (file, kept) = open_log(path, first_step)?;
        observer.history = History::from_log(&kept);
        observer.log = Some(file);
    }
    if let Some(config) = &args.config {
        eprintln!("settings from {} and the command line", config.display());
    }
    let params = run.trainer.params();
    let frozen: usize = params.frozen.iter().map(|(_, _, values)| values.len()).sum();
    let frozen = if frozen > 0 { format!(", {frozen} more frozen") } else { String::new() };
    eprintln!("training {} parameters{frozen} ({}) for {steps} steps", params.numel(), run.what);
    let ran = run.run(&mut observer);
    observer.progress.finish();
    ran?;
    let out = &run.checkpoints.out;
    let plot = out.join("loss.svg");
    observer.history.write_svg(&plot, &format!("sesame train: {} ({} parameters)", run.what, run.trainer.params().numel()))?;
    eprintln!("wrote {} and the loss curves in {}", out.display(), plot.display());
    Ok(())
}

/// What `sesame train` shows and keeps of a run: the progress display, the losses for the
/// plot, and the step log (--log).
struct RunDisplay {
    progress: Progress,
    history: History,
    log: Option<std::fs::File>,
    steps: u64,
}

impl RunDisplay {
    fn log_line(&mut self, line: serde_json::Value) -> Result<()> {
        match &mut self.log {
            Some(file) => writeln!(file, "{line}").map_err(|e| SesameError::Io(format!("log: {e}"))),
            None => Ok(()),
        }
    }
}

impl RunObserver for RunDisplay {
    fn stepped(&mut self, r: &StepReport) -> Result<()> {
        self.history.train.push((r.step, r.loss));
        self.log_line(serde_json::json!({ "step": r.step, "loss": r.loss, "lr": r.lr, "grad_norm": r.grad_norm, "tokens_per_s": r.tokens_per_s }))?;
        self.progress.step(r.step, r.loss, r.lr, r.tokens_per_s);
        Ok(())
    }

    fn evaluated(&mut self, e: &Evaluation) -> Result<()> {
        let shown: Vec<String> = e.metrics.iter().map(|(name, value)| format!("{} {value:.4}", name.trim_start_matches("eval_").replace('_', " "))).collect();
        self.progress.println(&format!("step {}/{}  held-out loss {:.4}  {}", e.step + 1, self.steps, e.loss, shown.join("  ")));
        self.history.eval.push((e.step, e.loss));
        let mut line = serde_json::json!({ "step": e.step, "eval_loss": e.loss });
        for (name, value) in &e.metrics {
            line[name.as_str()] = (*value).into();
        }
        self.log_line(line)
    }
}

/// Opens the step log; a resumed run keeps the lines of the steps before `first_step` (also
/// returned) and rewrites the rest.
fn open_log(path: &Path, first_step: u64) -> Result<(std::fs::File, String)> {
    let kept: String = if first_step == 0 {
        String::new()
    } else {
        let old = std::fs::read_to_string(path).unwrap_or_default();
        old.lines()
            .filter(|line| serde_json::from_str::<serde_json::Value>(line).ok().and_then(|v| v["step"].as_u64()).is_some_and(|s| s < first_step))
            .map(|line| format!("{line}\n"))
            .collect()
    };
    std::fs::write(path, &kept).map_err(io_err(path))?;
    Ok((std::fs::OpenOptions::new().append(true).open(path).map_err(io_err(path))?, kept))
}
