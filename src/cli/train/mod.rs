//! `sesame train`: trains a model from an initial checkpoint or from scratch and writes
//! checkpoints plus the optimizer state: Hugging Face's layout (config.json,
//! model.safetensors, tokenizer.json), or ELMo's (options.json, model.safetensors, vocab.txt).
//!
//! Objectives: `clm` (GPT-2, GPT) on a text file tokenized by the model's tokenizer; `mlm`,
//! `mlm+nsp` and `mlm+sop` (the BERT family) on text documents masked as BERT's pretraining
//! does; `rtd` (ELECTRA's discriminator alone) on replayed batches; `electra` (ELECTRA's
//! generator and discriminator, an ELECTRA pretraining folder) on text; `classify` (BERT;
//! GPT-2 and GPT with the auxiliary LM loss; ELMo's task head on its frozen biLM) on labelled
//! sentences; `token-classify` (BERT) on CoNLL-style tagged words; `qa` (BERT) on SQuAD-style
//! questions with answer spans; `multiple-choice` (the encoders' `…ForMultipleChoice`) on
//! SWAG's CSV; `bilm` (ELMo) on the
//! sentences of a text; or, for the transformers, exact batches replayed from a safetensors
//! file (`--replay-batches`) to compare a run step by step with PyTorch. Batches are a
//! function of (seed, step), so `--resume` continues a run exactly.
//!
//! This module turns the flags into a model, its batches and [`Settings`], and shows the run
//! (progress, --log, the loss plot); the loop itself is the library's
//! [`sesame::train::trainer::Trainer`].

pub mod config;
mod progress;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use sesame::error::{Result, SesameError};
use sesame::models::training::{Objective, Trainable};
use sesame::train::distill::Distillation;
use sesame::train::evaluate::{evaluate, HeldOut};
use sesame::train::masking::MaskSchedule;
use sesame::train::multitask::TaskData;
use sesame::train::optim::{AdamWConfig, Decay, OptimizerKind, Schedule};
use sesame::train::trainer::{Checkpointing, Evaluation, RunObserver, StepReport, Trainer};
use sesame::Gpu;

use super::{io_err, read_bytes, read_text};
use models::{check_family, from_scratch, load, load_files, Loaded};
use progress::{History, Progress};
use sesame::train::checkpoint::{self, FreshModel, Settings, DEFAULT_LM_COEF};
use sources::batch_sources;

/// A bad-argument error of `sesame train`.
macro_rules! train_err {
    ($($t:tt)*) => { SesameError::InvalidArgument { op: "train", message: format!($($t)*) } };
}

mod models;
mod sources;

#[derive(clap::Args, Clone)]
#[command(args_override_self = true)]
pub struct TrainArgs {
    /// A TOML file of settings, keyed by these flags' long names (`lr = 1e-3`,
    /// `whole_word_mask = true`); flags on the command line override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// clm (causal LM, GPT-2), mlm (masked LM without next-sentence prediction, RoBERTa's
    /// recipe: rows of whole sentences across documents, masks drawn afresh each time), mlm+nsp
    /// (masked LM and next-sentence prediction, BERT's and ERNIE's pretraining), mlm+sop (masked
    /// LM and sentence-order prediction, ALBERT's), rtd (replaced-token detection, ELECTRA's
    /// discriminator alone, on replayed batches), electra (ELECTRA's pretraining of an ELECTRA
    /// pretraining folder: the generator's masked LM, its samples at the masked positions, the
    /// discriminator's replaced-token detection; loss = MLM + 50 · RTD), classify (sequence classification on a
    /// `sentence<TAB>label` file: BERT's [CLS] head, GPT-2's or GPT's last-token head with the
    /// auxiliary LM loss, an ELMo's scalar mix and classifier, ULMFiT's pooled classifier on
    /// an AWD-LSTM, or a pooled classifier on CoVe's fixed features; a checkpoint without a
    /// classifier gets a fresh one), token-classify (BERT, a label per word from a CoNLL-style
    /// `word … label` file, a blank line between sentences), qa (BERT's answer-span head on
    /// SQuAD-style questions; a checkpoint without one gets a fresh one), multiple-choice (an
    /// encoder's …ForMultipleChoice head, one score per choice, on SWAG's CSV or replayed
    /// batches: input_ids [steps, batch, choices, seq], labels [steps, batch]; a checkpoint
    /// without the head gets a fresh one), bilm (ELMo's forward and backward
    /// language models over a word vocabulary) or translation (CoVe's translation model on
    /// `source<TAB>target` pairs: the MT-LSTM encoder under an attentional decoder, teacher
    /// forcing; a CoVe encoder gets a fresh decoder over --data's target words, as many as
    /// --tokenizer words:N).
    #[arg(long, default_value = "clm")]
    pub(super) objective: Objective,
    /// The checkpoint to start from: a Hugging Face-layout folder (config.json,
    /// model.safetensors, tokenizer.json), or an ELMo folder (options.json, model.safetensors;
    /// for bilm also vocab.txt unless --tokenizer words:N builds one, and a checkpoint without
    /// a biLM softmax gets a fresh one).
    #[arg(long, conflicts_with = "arch")]
    pub(super) model_init: Option<PathBuf>,
    /// Start from a fresh model of this architecture instead (gpt2, bert, roberta, albert,
    /// ernie, electra, elmo, awd-lstm, cvt or cove; ALBERT's embeddings are min(128, --hidden) wide, its one layer
    /// shared by every depth; electra is an ELECTRA pretraining folder for objective electra,
    /// the discriminator at these sizes and a generator with a quarter of the heads, over
    /// shared embeddings min(128, --hidden) wide), sized by
    /// --layers, --heads, --hidden and --context (an ELMo by --layers and --hidden, its
    /// projection width, or by --elmo-options; an AWD-LSTM language model by --layers,
    /// --hidden for n_hid and --embedding-size; CVT's tagger, for --data's tags, by --hidden
    /// for its projections — cells 2·hidden, then hidden — and --embedding-size for its
    /// words; CoVe's translation model, for objective translation, by --hidden per encoder
    /// direction — the decoder 2·hidden — and --embedding-size for the vectors of both
    /// sides), with the vocabulary of --tokenizer.
    #[arg(long)]
    pub(super) arch: Option<String>,
    /// Layers of a fresh model (default 4); CVT's tagger and CoVe's MT-LSTM have their
    /// papers' 2.
    #[arg(long)]
    layers: Option<usize>,
    #[arg(long, default_value_t = 4)]
    heads: usize,
    #[arg(long, default_value_t = 128)]
    hidden: usize,
    /// Positions of a fresh model (default: --seq-len, else 128).
    #[arg(long)]
    context: Option<usize>,
    /// A fresh AWD-LSTM's embedding width (fastai's emb_sz, its last layer's width too;
    /// default --hidden), a fresh CVT tagger's word embeddings, a translation model's word
    /// vectors and target embeddings (on a CoVe encoder, the target's; default its vectors').
    #[arg(long)]
    embedding_size: Option<usize>,
    /// A fresh ELMo's options.json (bilm-tf's schema) instead of the shape from --layers and
    /// --hidden.
    #[arg(long)]
    elmo_options: Option<PathBuf>,
    /// A fresh model's tokenizer: `char` (one token per character of --data), `wordpiece:N`
    /// (BERT's uncased WordPiece) or `bpe:N` (GPT-2's byte-level BPE), both trained on the
    /// training part of --data with a vocabulary of at most N, or a tokenizer.json. An ELMo's
    /// is `words:N`: the N − 3 most frequent words of --data's training part after `<S>`,
    /// `</S>` and `<UNK>`, written as vocab.txt; an AWD-LSTM's too, after fastai's nine special
    /// tokens (lower-cased, WikiText's `<unk>` as `xxunk`); a CVT tagger's after cvt_text's
    /// five special words (lower-cased, digits as 0); a translation model's source and target
    /// vocabularies each from its side of --data (lower-cased; the target's with <s> and </s>;
    /// on a CoVe encoder, only the target's). With --model-init on an AWD-LSTM
    /// language model, `words:N` re-learns its vocabulary from --data (ULMFiT's stage 2, fastai's
    /// `match_embeds`): known words keep their embeddings, new ones start from the mean.
    #[arg(long, default_value = "char")]
    tokenizer: String,
    /// A text file: for clm, tokenized and sampled in windows; for mlm (and electra), documents separated
    /// by blank lines; for classify, `sentence<TAB>label` lines (a header line is skipped);
    /// for qa, SQuAD's JSON (v1.1 or v2.0) or JSON lines of {"question", "context",
    /// "answers": {"text", "answer_start"}}; for multiple-choice, SWAG's CSV (columns sent1,
    /// sent2, ending0, ending1, …, label; choice i is the pair sent1, sent2 + ending{i}); for
    /// bilm, lines cut into sentences after . ! and ?; for translation, `source<TAB>target`
    /// lines
    #[arg(long, required_unless_present_any = ["replay_batches", "tasks"], conflicts_with = "tasks")]
    data: Option<PathBuf>,
    /// Exact batches, one per micro-step, named as transformers names its inputs: input_ids /
    /// attention_mask / token_type_ids / task_type_ids / labels [steps, batch, seq],
    /// next_sentence_label / sentence_order_label / start_positions / end_positions (and the
    /// labels of sequence classification) [steps, batch]; multiple choice's inputs [steps,
    /// batch, choices, seq]; ELECTRA's generator_samples [steps, batch, seq]; CVT's char_ids
    /// [steps, batch, seq, width]; translation's decoder_input_ids and labels [steps, batch,
    /// target_seq].
    #[arg(long, conflicts_with = "data")]
    replay_batches: Option<PathBuf>,
    /// Continue the run in --out from its newest checkpoint, with the same settings.
    #[arg(long)]
    pub(super) resume: bool,
    /// Optimizer steps (default: every replayed batch, else 1000).
    #[arg(long)]
    steps: Option<u64>,
    #[arg(long, default_value_t = 8)]
    batch_size: usize,
    /// Micro-batches whose gradients are summed per optimizer step, each loss scaled by 1/N
    /// (one N-times larger batch when every micro-batch scores as many tokens).
    #[arg(long, default_value_t = 1)]
    grad_accum: u64,
    /// Tokens per sequence (default: the model's positions, at most 128); for an ELMo, words
    /// per sentence (default 50): bilm cuts longer ones into pieces, classify keeps the first.
    #[arg(long)]
    seq_len: Option<usize>,
    #[arg(long, default_value_t = 1e-3)]
    lr: f32,
    /// Steps of linear warmup.
    #[arg(long, default_value_t = 0)]
    warmup: u64,
    /// constant, linear or cosine decay after the warmup; or slanted-triangular (ULMFiT: a
    /// linear rise from --min-lr to --lr over --warmup steps, then a linear fall back; the
    /// paper's cut is a tenth of the steps and its ratio lr / min_lr 32).
    #[arg(long, default_value = "cosine")]
    schedule: Decay,
    /// The learning rate the decay ends at (and slanted-triangular starts from).
    #[arg(long, default_value_t = 0.0)]
    min_lr: f32,
    /// ULMFiT's discriminative fine-tuning (AWD-LSTM): each layer group below the top learns at
    /// the rate of the one above divided by this (the paper: 2.6).
    #[arg(long)]
    discriminative_lr: Option<f32>,
    /// ULMFiT's gradual unfreezing (AWD-LSTM): only the top layer group trains at first, and
    /// every this many steps the next group below joins (the paper: an epoch).
    #[arg(long)]
    unfreeze_every: Option<u64>,
    /// adamw, or lamb (You et al. 2019: Adam's direction plus weight decay, scaled per tensor by
    /// ‖weights‖ / ‖update‖, for large batches; ALBERT's optimizer). Both take the betas, eps,
    /// weight decay (not on biases and LayerNorm gains) and clipping below.
    #[arg(long, default_value = "adamw")]
    optimizer: OptimizerKind,
    #[arg(long, default_value_t = 0.01)]
    weight_decay: f32,
    #[arg(long, default_value_t = 0.9)]
    beta1: f32,
    #[arg(long, default_value_t = 0.999)]
    beta2: f32,
    #[arg(long, default_value_t = 1e-8)]
    eps: f32,
    /// Clip the global gradient norm to this (0: no clipping).
    #[arg(long, default_value_t = 1.0)]
    clip_grad_norm: f32,
    /// Masked LM: the fraction of tokens to predict.
    #[arg(long, default_value_t = 0.15)]
    mask_probability: f64,
    /// Masked LM: select whole words (all their ## pieces; a Chinese word's characters, as the
    /// jieba segmenter cuts them) rather than single pieces.
    #[arg(long)]
    whole_word_mask: bool,
    /// Masked LM: what a masked unit is — token (a piece, or a word with --whole-word-mask),
    /// phrase or entity (ERNIE's knowledge masking: the phrase's or entity's tokens are masked
    /// together) — or stages of them, `token:1000,phrase:1000,entity` (steps each; the last runs
    /// to the end), as ERNIE learns. Phrases and entities are read from annotated --data
    /// (a .jsonl file, see TRAINING.md); without annotations, phrases come from a built-in
    /// chunker (jieba's words in Chinese text) and entities from --gazetteer. Held-out
    /// batches are masked by token, so the loss compares with BERT's.
    #[arg(long, default_value = "token")]
    mask_level: MaskSchedule,
    /// Masked LM at the entity level: a file of entity names, one per line, found as whole
    /// words in documents that have no "entities" annotation.
    #[arg(long)]
    gazetteer: Option<PathBuf>,
    /// Objective multi-task (MT-DNN): a task, `NAME=KIND:TRAIN_FILE[,EVAL_FILE][@STAGE]`;
    /// repeat for each task. KIND is an objective (mlm, classify, token-classify or qa, its
    /// files as that objective reads them) or one of ERNIE 2.0's tasks drawn from plain text
    /// (capitalization, sentence-reordering, sentence-distance). --model-init is an encoder
    /// checkpoint, which gets a fresh head per task, or a multi-task folder (tasks.json)
    /// naming the same tasks. Each epoch mixes all tasks' batches in a shuffled order; with
    /// stages (@STAGE, --stage-steps) or text-drawn tasks, ERNIE 2.0's continual schedule
    /// trains each stage's tasks in equal shares. Each task is evaluated on its own held-out data.
    #[arg(long = "task", value_name = "NAME=KIND:TRAIN[,EVAL][@STAGE]")]
    tasks: Vec<TaskData>,
    /// Continual multi-task learning (ERNIE 2.0): the steps of each stage but the last, which
    /// runs to the end — `--stage-steps 1000,2000` for three stages. A task joins at the stage
    /// its --task names (@2) and is trained from then on.
    #[arg(long, value_delimiter = ',', value_name = "STEPS,...")]
    stage_steps: Vec<u64>,
    /// Masked LM: select spans of up to N consecutive words (or pieces), a span of n drawn with
    /// probability ∝ 1/n — ALBERT's n-gram masking uses 3; 1 selects them one by one.
    /// Held-out batches mask single tokens, so their loss compares with a BERT's.
    #[arg(long, default_value_t = 1)]
    max_ngram: usize,
    /// An ELMo's data is already split into words by spaces (WikiText, SST-2): split at
    /// whitespace only, so WikiText's `<unk>` and `@-@` stay single words. Otherwise lines are
    /// split as ELMo splits raw text (punctuation at the edges of a word becomes a word).
    #[arg(long)]
    pretokenized: bool,
    /// classify and token-classify: draw training batches of sentences of similar length
    /// (each window of 50 batches of the epoch's shuffle sorted by length), so batches pad
    /// less and train faster; every sentence is still seen once per epoch.
    #[arg(long)]
    group_by_length: bool,
    /// qa: context tokens that consecutive windows of one long context share (default: a
    /// third of --seq-len, 128 at 384 as transformers' run_qa.py).
    #[arg(long)]
    doc_stride: Option<usize>,
    /// classify on GPT-2 or GPT: the weight λ of the auxiliary language-model loss on the same
    /// text, L = L_task + λ·L_LM (the GPT paper's fine-tuning; 0 trains the classifier alone).
    #[arg(long, default_value_t = DEFAULT_LM_COEF)]
    lm_coef: f32,
    /// Every dropout probability of the model (written to the saved config.json); default:
    /// the probabilities in the model's config.json (0.1 in transformers' defaults; fresh
    /// --arch transformers 0, a translation decoder's 0.3, OpenNMT-py's, an AWD-LSTM's
    /// fastai's, a CVT tagger's cvt_text's 0.5 labelled and 0.2 unlabelled).
    #[arg(long, conflicts_with = "drop_mult")]
    dropout: Option<f32>,
    /// Multiplies each dropout probability the model's config.json states (fastai's
    /// drop_mult: ULMFiT scales its five dropouts together, lower for a small model or much
    /// data). The products are written to the saved config.json, so a run from that folder
    /// multiplies them again (fastai scales its fixed defaults instead).
    #[arg(long)]
    drop_mult: Option<f32>,
    /// Seeds the batch sampling, masking and dropout.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Evaluate on held-out data every this many steps (and at the end); 0: never. The loss
    /// and its perplexity (for classify and token-classify, the accuracy; for qa, the
    /// exact-match rate and F1 of the answer spans, in tokens) go to the log as {"step",
    /// "eval_loss", "eval_perplexity" | "eval_accuracy" | "eval_exact_match" and "eval_f1"}.
    #[arg(long, default_value_t = 0)]
    eval_every: u64,
    /// Batches per evaluation (always the same ones).
    #[arg(long, default_value_t = 20)]
    eval_batches: u64,
    /// Held-out text; default: the last 10% of --data (which then trains on the first 90%).
    /// A multi-task run names each task's in its --task.
    #[arg(long, conflicts_with = "tasks")]
    eval_data: Option<PathBuf>,
    /// Cross-view training (a CVT tagger, --objective token-classify): unlabelled text, a
    /// sentence a line with its words between spaces; training then alternates a labelled
    /// batch of --data and an unlabelled one, on which the auxiliary views learn to match the
    /// primary module (each kind counts as a step, as in the paper's code; so no
    /// --grad-accum, which would mix the two in one step).
    #[arg(long, conflicts_with = "replay_batches")]
    pub(super) unlabeled_data: Option<PathBuf>,
    /// Write a checkpoint every this many steps (and always at the end); 0: only at the end.
    #[arg(long, default_value_t = 0)]
    checkpoint_every: u64,
    /// How many checkpoint-* folders to keep (the newest).
    #[arg(long, default_value_t = 2)]
    save_total_limit: usize,
    /// Where checkpoints go; the final model is also written here directly.
    #[arg(long, required_unless_present = "eval_only")]
    out: Option<PathBuf>,
    /// Train nothing: score --model-init on all of --data (each example once, in order) as
    /// the held-out evaluation does, and print {"batches", "eval_loss", metrics…, "seconds"}
    /// as JSON (for a classifier's test set, say). Text a language model reads has no end:
    /// it is scored on --eval-batches draws, the batches a run's evaluations score with the
    /// same --seed. The model must have the objective's head.
    #[arg(long, requires = "model_init", conflicts_with_all = ["resume", "replay_batches", "eval_every", "eval_data"])]
    eval_only: bool,
    /// One JSON line per step: {"step", "loss", "lr", "grad_norm", "tokens_per_s"}, and one
    /// per evaluation: {"step", "eval_loss", "eval_perplexity"} (for mlm+nsp and mlm+sop, the
    /// perplexity of the masked-LM part, and "eval_next_sentence_accuracy" or
    /// "eval_sentence_order_accuracy" of the pair head; for bilm also each direction's; for the classifiers "eval_accuracy"
    /// instead, and eval_loss is the task's alone, without GPT's LM term; for qa
    /// "eval_exact_match" and "eval_f1").
    #[arg(long)]
    log: Option<PathBuf>,
}

/// A fresh model's layers without --layers.
const DEFAULT_LAYERS: usize = 4;

impl TrainArgs {
    /// The layers of a fresh model: --layers, else [`DEFAULT_LAYERS`].
    pub(super) fn layers(&self) -> usize {
        self.layers.unwrap_or(DEFAULT_LAYERS)
    }
}

/// An ELMo's default --seq-len: words per sentence.
const DEFAULT_SENTENCE_WORDS: usize = 50;
/// The flags that shape a fresh model (--arch), which a resumed run must repeat.
fn fresh_model(args: &TrainArgs) -> Option<FreshModel> {
    args.arch.as_ref()?;
    Some(FreshModel {
        layers: args.layers(),
        heads: args.heads,
        hidden: args.hidden,
        context: args.context,
        tokenizer: args.tokenizer.clone(),
        elmo_options: args.elmo_options.clone(),
        embedding_size: args.embedding_size,
    })
}

/// What `sesame distill` adds to a run: the teacher, the distillation settings, and the
/// student made from the teacher when none is given (--student-layers).
pub struct DistillRun {
    pub teacher: Box<dyn Trainable>,
    pub settings: Distillation,
    pub student: Option<StudentFiles>,
}

/// The files of a student made from its teacher.
pub struct StudentFiles {
    pub config_json: Vec<u8>,
    pub safetensors: Vec<u8>,
    pub tokenizer_json: Option<Vec<u8>>,
}

pub fn run(gpu: &Gpu, args: TrainArgs) -> Result<()> {
    run_with(gpu, args, None)
}

/// A training run, or with `distill` a distillation run (`sesame distill`).
pub fn run_with(gpu: &Gpu, args: TrainArgs, mut distill: Option<DistillRun>) -> Result<()> {
    if args.grad_accum == 0 || args.eval_batches == 0 {
        // Before any model or data is read (the Trainer checks it again).
        return Err(train_err!("--grad-accum and --eval-batches must be at least 1"));
    }
    if !(args.lm_coef.is_finite() && args.lm_coef >= 0.0) {
        return Err(train_err!("--lm-coef must be a finite weight ≥ 0, got {}", args.lm_coef));
    }
    check_family(&args)?;
    let resumed = match (&args.out, args.resume) {
        (Some(out), true) => Some(checkpoint::latest(out)?),
        _ => None,
    };
    let Loaded { model, params, folder } = match (&resumed, &args.model_init, &args.arch) {
        // The checkpoint's config.json holds the run's dropouts already multiplied.
        (Some((dir, _)), ..) => load(gpu, dir, &TrainArgs { drop_mult: None, ..args.clone() })?,
        (None, Some(dir), _) => load(gpu, dir, &args)?,
        (None, None, Some(arch)) => from_scratch(gpu, &args, arch)?,
        (None, None, None) => match distill.as_mut().and_then(|d| d.student.take()) {
            Some(files) => {
                load_files(gpu, files.config_json, files.safetensors, models::TokenizerFiles { json: files.tokenizer_json, ..Default::default() }, &args)?
            }
            None if distill.is_some() => {
                return Err(train_err!("give the student: --model-init STUDENT_DIR, or --student-layers N to make it from the teacher (or --resume)"))
            }
            None => return Err(train_err!("give --model-init or --arch (or --resume)")),
        },
    };
    // A distillation checks its pair, the teacher first (Trainer::with_teacher).
    if distill.is_none() {
        model.check(args.objective)?;
    }
    let seq = args.seq_len.unwrap_or(model.max_positions().map_or(DEFAULT_SENTENCE_WORDS, |p| p.min(128)));
    if let Some(positions) = model.max_positions().filter(|&p| seq > p) {
        return Err(train_err!("--seq-len {seq} exceeds the model's {positions} positions"));
    }
    sesame::limits::check_elements(
        || format!("training micro-batches of --batch-size {} × --seq-len {seq} (the activations kept for the backward pass)", args.batch_size),
        model.activation_values(args.batch_size, seq),
        4,
    )?;
    let (source, held_out) = batch_sources(&args, &folder, seq)?;
    let rows_per_example =
        source.as_deref().or(held_out.as_ref().and_then(|h| h.sets.iter().flatten().next().map(|s| s.as_ref()))).map_or(1, |s| s.rows_per_example());
    if rows_per_example > 1 {
        let rows = args.batch_size.saturating_mul(rows_per_example);
        sesame::limits::check_elements(
            || {
                format!(
                    "training micro-batches of --batch-size {} × {} choices × --seq-len {seq} (the activations kept for the backward pass)",
                    args.batch_size, rows_per_example
                )
            },
            model.activation_values(rows, seq),
            4,
        )?;
    }
    let source = match (source, args.eval_only) {
        (_, true) => return evaluate_only(model.as_ref(), &args, held_out.as_ref().ok_or_else(|| train_err!("--eval-only scores --data, and there is none"))?),
        (Some(source), false) => source,
        (None, false) => return Err(train_err!("give --data or --replay-batches")),
    };
    let out = args.out.clone().ok_or_else(|| train_err!("give --out, where the run writes its checkpoints"))?;
    let steps = match (source.batches(), args.steps) {
        (Some(n), Some(s)) if s.saturating_mul(args.grad_accum) > n as u64 => {
            return Err(train_err!("{s} steps × {} micro-batches asked for, but the replay file holds {n}", args.grad_accum))
        }
        (Some(n), None) => n as u64 / args.grad_accum,
        (_, s) => s.unwrap_or(1000),
    };
    if steps.checked_mul(args.grad_accum).is_none_or(|micro| micro > i64::MAX as u64) {
        return Err(train_err!("--steps {steps} × --grad-accum {} micro-batches is more than a run can count", args.grad_accum));
    }
    let settings = Settings {
        objective: args.objective,
        arch: args.arch.clone(),
        fresh_model: fresh_model(&args),
        data: args.data.clone(),
        replay_batches: args.replay_batches.clone(),
        steps,
        batch_size: args.batch_size,
        seq_len: seq,
        grad_accum: args.grad_accum,
        seed: args.seed,
        dropout: args.dropout,
        drop_mult: args.drop_mult,
        mask_probability: args.mask_probability,
        whole_word_mask: args.whole_word_mask,
        max_ngram: args.max_ngram,
        mask_level: args.mask_level.clone(),
        gazetteer: args.gazetteer.clone(),
        tasks: args.tasks.clone(),
        stage_steps: args.stage_steps.clone(),
        pretokenized: args.pretokenized,
        group_by_length: args.group_by_length,
        doc_stride: args.doc_stride,
        lm_coef: args.lm_coef,
        eval_every: args.eval_every,
        eval_batches: args.eval_batches,
        eval_data: args.eval_data.clone(),
        schedule: Schedule { lr: args.lr, warmup: args.warmup, decay: args.schedule, total_steps: steps, min_lr: args.min_lr },
        optimizer: args.optimizer,
        adamw: AdamWConfig { beta1: args.beta1, beta2: args.beta2, eps: args.eps, weight_decay: args.weight_decay, clip_grad_norm: args.clip_grad_norm },
        distillation: distill.as_ref().map(|d| d.settings.clone()),
        discriminative_lr: args.discriminative_lr,
        unfreeze_every: args.unfreeze_every,
    };
    let trainer = Trainer::new(gpu, model, params, folder, settings)?;
    let (mut trainer, what) = match distill {
        Some(d) => (trainer.with_teacher(d.teacher)?, format!("distilled from {}", d.settings.teacher.display())),
        None => (trainer, args.objective.to_string()),
    };
    match &resumed {
        Some((dir, state)) => {
            trainer.resume(dir, state)?;
            eprintln!("resuming from {} (step {})", dir.display(), state.step);
        }
        // Checked last, after the settings: a bad flag is reported as such.
        None => checkpoint::refuse_earlier_run(&out)?,
    }
    let first_step = trainer.next_step();
    std::fs::create_dir_all(&out).map_err(io_err(&out))?;
    let mut observer = RunDisplay { progress: Progress::new(first_step, steps), history: History::default(), log: None, steps };
    if let Some(path) = &args.log {
        let (file, kept) = open_log(path, first_step)?;
        observer.history = History::from_log(&kept);
        observer.log = Some(file);
    }
    if let Some(config) = &args.config {
        eprintln!("settings from {} and the command line", config.display());
    }
    let params = trainer.params();
    let frozen: usize = params.frozen.iter().map(|(_, _, values)| values.len()).sum();
    let frozen = if frozen > 0 { format!(", {frozen} more frozen") } else { String::new() };
    eprintln!("training {} parameters{frozen} ({what}) for {steps} steps", params.numel());
    let checkpoints = Checkpointing { out: out.clone(), every: args.checkpoint_every, keep: args.save_total_limit };
    let ran = trainer.run(source.as_ref(), held_out.as_ref(), &checkpoints, &mut observer);
    observer.progress.finish();
    ran?;
    let plot = out.join("loss.svg");
    observer.history.write_svg(&plot, &format!("sesame train: {what} ({} parameters)", trainer.params().numel()))?;
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

/// `--eval-only`: the model's held-out loss and metrics on all of `data`, printed as JSON.
fn evaluate_only(model: &dyn Trainable, args: &TrainArgs, data: &HeldOut) -> Result<()> {
    let tasks = model.tasks();
    // A multi-task model's: all of each task's examples (a task drawn from text has no end).
    if let Some(((name, _), _)) = tasks.iter().zip(&data.sets).find(|(_, set)| set.as_ref().is_some_and(|s| s.batches().is_none())) {
        return Err(train_err!(
            "--eval-only scores files of examples, and task `{name}` draws its batches from text: evaluate it while training (--eval-every)"
        ));
    }
    let batches = match (tasks.is_empty(), data.sets.first().and_then(|set| set.as_ref().and_then(|s| s.batches()))) {
        (false, _) => u64::MAX,
        (true, Some(examples)) => examples as u64,
        // A language model's text: --eval-batches draws, as an evaluation while training.
        (true, None) => args.eval_batches,
    };
    let started = Instant::now();
    let (loss, metrics) = evaluate(model, args.objective, data, batches)?;
    let mut line = serde_json::json!({"batches": batches, "eval_loss": loss, "seconds": started.elapsed().as_secs_f64()});
    for (name, value) in metrics {
        line[name] = value.into();
    }
    println!("{line}");
    Ok(())
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
