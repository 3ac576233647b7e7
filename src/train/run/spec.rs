//! What a run is, as data: [`RunSpec`], everything `sesame train` takes (its fields are the
//! flags' long names, as in a `--config` TOML file), serde-serialisable so that a run can be
//! described by another front end (a notebook, the browser package) and kept beside its
//! checkpoints. With the `cli` feature it is also the flags' parser.

use std::path::PathBuf;

use crate::models::training::fresh::DEFAULT_LAYERS;
use crate::models::training::Objective;
use crate::train::checkpoint::DEFAULT_LM_COEF;
use crate::train::distill::Distillation;
use crate::train::elmo::WordSplit;
use crate::train::masking::MaskSchedule;
use crate::train::multitask::TaskData;
use crate::train::optim::{Decay, Freeze, OptimizerKind};

/// A training run: its model (a checkpoint, or a fresh architecture and size), its data, its
/// objective and recipe, its evaluation and checkpoints.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
#[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), derive(clap::Args))]
pub struct RunSpec {
    /// clm (causal LM, GPT-2), mlm (masked LM without next-sentence prediction, RoBERTa's
    /// recipe: rows of whole sentences across documents, masks drawn afresh each time), mlm+nsp
    /// (masked LM and next-sentence prediction, BERT's and ERNIE's pretraining), mlm+sop (masked
    /// LM and sentence-order prediction, ALBERT's), rtd (replaced-token detection, ELECTRA's
    /// discriminator alone, on replayed batches), electra (ELECTRA's pretraining of an ELECTRA
    /// pretraining folder: the generator's masked LM, its samples at the masked positions, the
    /// discriminator's replaced-token detection; loss = MLM + 50 · RTD), classify (sequence classification on a
    /// `sentence<TAB>label` file: BERT's `[CLS]` head, GPT-2's or GPT's last-token head with the
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
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, default_value = "clm"))]
    pub objective: Objective,
    /// The checkpoint to start from: a Hugging Face-layout folder (config.json,
    /// model.safetensors, tokenizer.json), or an ELMo folder (options.json, model.safetensors;
    /// for bilm also vocab.txt unless --tokenizer words:N builds one, and a checkpoint without
    /// a biLM softmax gets a fresh one).
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, conflicts_with = "arch"))]
    pub model_init: Option<PathBuf>,
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
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long))]
    pub arch: Option<String>,
    /// Layers of a fresh model (default 4); CVT's tagger and CoVe's MT-LSTM have their
    /// papers' 2.
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long))]
    pub layers: Option<usize>,
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, default_value_t = 4))]
    pub heads: usize,
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, default_value_t = 128))]
    pub hidden: usize,
    /// Positions of a fresh model (default: --seq-len, else 128).
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long))]
    pub context: Option<usize>,
    /// A fresh AWD-LSTM's embedding width (fastai's emb_sz, its last layer's width too;
    /// default --hidden), a fresh CVT tagger's word embeddings, a translation model's word
    /// vectors and target embeddings (on a CoVe encoder, the target's; default its vectors').
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long))]
    pub embedding_size: Option<usize>,
    /// A fresh ELMo's options.json (bilm-tf's schema) instead of the shape from --layers and
    /// --hidden.
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long))]
    pub elmo_options: Option<PathBuf>,
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
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, default_value = "char"))]
    pub tokenizer: String,
    /// A text file: for clm, tokenized and sampled in windows; for mlm (and electra), documents separated
    /// by blank lines; for classify, `sentence<TAB>label` lines (a header line is skipped);
    /// for qa, SQuAD's JSON (v1.1 or v2.0) or JSON lines of {"question", "context",
    /// "answers": {"text", "answer_start"}}; for multiple-choice, SWAG's CSV (columns sent1,
    /// sent2, ending0, ending1, …, label; choice i is the pair sent1, sent2 + ending{i}); for
    /// bilm, lines cut into sentences after . ! and ?; for translation, `source<TAB>target`
    /// lines
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, required_unless_present_any = ["replay_batches", "tasks"], conflicts_with = "tasks"))]
    pub data: Option<PathBuf>,
    /// Exact batches, one per micro-step, named as transformers names its inputs: input_ids /
    /// attention_mask / token_type_ids / task_type_ids / labels [steps, batch, seq],
    /// next_sentence_label / sentence_order_label / start_positions / end_positions (and the
    /// labels of sequence classification) [steps, batch]; multiple choice's inputs [steps,
    /// batch, choices, seq]; ELECTRA's generator_samples [steps, batch, seq]; CVT's char_ids
    /// [steps, batch, seq, width]; translation's decoder_input_ids and labels [steps, batch,
    /// target_seq].
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, conflicts_with = "data"))]
    pub replay_batches: Option<PathBuf>,
    /// Continue the run in --out from its newest checkpoint, with the same settings.
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long))]
    pub resume: bool,
    /// Optimizer steps (default: every replayed batch, else --epochs' steps, else 1000).
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, conflicts_with = "epochs"))]
    pub steps: Option<u64>,
    /// Passes over --data's training examples instead of --steps (a fraction too): the steps
    /// are the epochs × the batches an epoch holds (÷ --grad-accum), rounded up. For data read
    /// in epochs (classify, token-classify, qa, multiple-choice, translation, ELMo's biLM; a
    /// masked LM's epoch is as many full rows as its text's tokens fill).
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long))]
    pub epochs: Option<f64>,
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, default_value_t = 8))]
    pub batch_size: usize,
    /// Micro-batches whose gradients are summed per optimizer step, each loss scaled by 1/N
    /// (one N-times larger batch when every micro-batch scores as many tokens).
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, default_value_t = 1))]
    pub grad_accum: u64,
    /// Tokens per sequence (default: the model's positions, at most 128); for an ELMo, words
    /// per sentence (default 50): bilm cuts longer ones into pieces, classify keeps the first.
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long))]
    pub seq_len: Option<usize>,
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, default_value_t = 1e-3))]
    pub lr: f32,
    /// Steps of linear warmup.
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, default_value_t = 0))]
    pub warmup: u64,
    /// The warmup as a share of the run's steps instead (transformers' warmup_ratio: the
    /// steps × ratio, rounded up).
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, conflicts_with = "warmup"))]
    pub warmup_ratio: Option<f32>,
    /// constant, linear or cosine decay after the warmup; or slanted-triangular (ULMFiT: a
    /// linear rise from --min-lr to --lr over --warmup steps, then a linear fall back; the
    /// paper's cut is a tenth of the steps and its ratio lr / min_lr 32).
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, default_value = "cosine"))]
    pub schedule: Decay,
    /// The learning rate the decay ends at (and slanted-triangular starts from).
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, default_value_t = 0.0))]
    pub min_lr: f32,
    /// ULMFiT's discriminative fine-tuning (AWD-LSTM): each layer group below the top learns at
    /// the rate of the one above divided by this (the paper: 2.6).
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long))]
    pub discriminative_lr: Option<f32>,
    /// ULMFiT's gradual unfreezing (AWD-LSTM): only the top layer group trains at first, and
    /// every this many steps the next group below joins (the paper: an epoch).
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long))]
    pub unfreeze_every: Option<u64>,
    /// Fine-tuning: leave the base model's weights as they are — `encoder` (only the task head
    /// learns, as `requires_grad = False` on transformers' `model.bert`), or N (its embeddings
    /// and bottom N layers). Frozen weights take no update and no part in the gradient norm.
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, value_name = "encoder|N"))]
    pub freeze: Option<Freeze>,
    /// adamw, or lamb (You et al. 2019: Adam's direction plus weight decay, scaled per tensor by
    /// ‖weights‖ / ‖update‖, for large batches; ALBERT's optimizer). Both take the betas, eps,
    /// weight decay (not on biases and LayerNorm gains) and clipping below.
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, default_value = "adamw"))]
    pub optimizer: OptimizerKind,
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, default_value_t = 0.01))]
    pub weight_decay: f32,
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, default_value_t = 0.9))]
    pub beta1: f32,
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, default_value_t = 0.999))]
    pub beta2: f32,
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, default_value_t = 1e-8))]
    pub eps: f32,
    /// Clip the global gradient norm to this (0: no clipping).
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, default_value_t = 1.0))]
    pub clip_grad_norm: f32,
    /// Masked LM: the fraction of tokens to predict.
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, default_value_t = 0.15))]
    pub mask_probability: f64,
    /// Masked LM: select whole words (all their ## pieces; a Chinese word's characters, as the
    /// jieba segmenter cuts them) rather than single pieces.
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long))]
    pub whole_word_mask: bool,
    /// Masked LM: what a masked unit is — token (a piece, or a word with --whole-word-mask),
    /// phrase or entity (ERNIE's knowledge masking: the phrase's or entity's tokens are masked
    /// together) — or stages of them, `token:1000,phrase:1000,entity` (steps each; the last runs
    /// to the end), as ERNIE learns. Phrases and entities are read from annotated --data
    /// (a .jsonl file, see TRAINING.md); without annotations, phrases come from a built-in
    /// chunker (jieba's words in Chinese text) and entities from --gazetteer. Held-out
    /// batches are masked by token, so the loss compares with BERT's.
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, default_value = "token"))]
    pub mask_level: MaskSchedule,
    /// Masked LM at the entity level: a file of entity names, one per line, found as whole
    /// words in documents that have no "entities" annotation.
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long))]
    pub gazetteer: Option<PathBuf>,
    /// Objective multi-task (MT-DNN): a task, `NAME=KIND:TRAIN_FILE[,EVAL_FILE][@STAGE]`;
    /// repeat for each task. KIND is an objective (mlm, classify, token-classify or qa, its
    /// files as that objective reads them) or one of ERNIE 2.0's tasks drawn from plain text
    /// (capitalization, sentence-reordering, sentence-distance). --model-init is an encoder
    /// checkpoint, which gets a fresh head per task, or a multi-task folder (tasks.json)
    /// naming the same tasks. Each epoch mixes all tasks' batches in a shuffled order; with
    /// stages (@STAGE, --stage-steps) or text-drawn tasks, ERNIE 2.0's continual schedule
    /// trains each stage's tasks in equal shares. Each task is evaluated on its own held-out data.
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long = "task", value_name = "NAME=KIND:TRAIN[,EVAL][@STAGE]"))]
    pub tasks: Vec<TaskData>,
    /// Continual multi-task learning (ERNIE 2.0): the steps of each stage but the last, which
    /// runs to the end — `--stage-steps 1000,2000` for three stages. A task joins at the stage
    /// its --task names (@2) and is trained from then on.
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, value_delimiter = ',', value_name = "STEPS,..."))]
    pub stage_steps: Vec<u64>,
    /// Masked LM: select spans of up to N consecutive words (or pieces), a span of n drawn with
    /// probability ∝ 1/n — ALBERT's n-gram masking uses 3; 1 selects them one by one.
    /// Held-out batches mask single tokens, so their loss compares with a BERT's.
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, default_value_t = 1))]
    pub max_ngram: usize,
    /// An ELMo's data is already split into words by spaces (WikiText, SST-2): split at
    /// whitespace only, so WikiText's `<unk>` and `@-@` stay single words. Otherwise lines are
    /// split as ELMo splits raw text (punctuation at the edges of a word becomes a word).
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long))]
    pub pretokenized: bool,
    /// Train on the examples in --data's order, every epoch alike, instead of a seeded shuffle
    /// per epoch (classify, token-classify, qa, multiple-choice, translation, ELMo's biLM).
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long = "no-shuffle", action = clap::ArgAction::SetFalse))]
    pub shuffle: bool,
    /// classify and token-classify: draw training batches of sentences of similar length
    /// (each window of 50 batches of the epoch's shuffle sorted by length), so batches pad
    /// less and train faster; every sentence is still seen once per epoch.
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long))]
    pub group_by_length: bool,
    /// qa: context tokens that consecutive windows of one long context share (default: a
    /// third of --seq-len, 128 at 384 as transformers' run_qa.py).
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long))]
    pub doc_stride: Option<usize>,
    /// classify on GPT-2 or GPT: the weight λ of the auxiliary language-model loss on the same
    /// text, L = L_task + λ·L_LM (the GPT paper's fine-tuning; 0 trains the classifier alone).
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, default_value_t = DEFAULT_LM_COEF))]
    pub lm_coef: f32,
    /// Every dropout probability of the model (written to the saved config.json); default:
    /// the probabilities in the model's config.json (0.1 in transformers' defaults; fresh
    /// --arch transformers 0, a translation decoder's 0.3, OpenNMT-py's, an AWD-LSTM's
    /// fastai's, a CVT tagger's cvt_text's 0.5 labelled and 0.2 unlabelled).
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, conflicts_with = "drop_mult"))]
    pub dropout: Option<f32>,
    /// Multiplies each dropout probability the model's config.json states (fastai's
    /// drop_mult: ULMFiT scales its five dropouts together, lower for a small model or much
    /// data). The products are written to the saved config.json, so a run from that folder
    /// multiplies them again (fastai scales its fixed defaults instead).
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long))]
    pub drop_mult: Option<f32>,
    /// classify and token-classify: the class names, by id, written to the saved config.json's
    /// id2label and label2id (classify's labels 0, 1, … name them in this order; token-classify's
    /// tags must be among them). Default: transformers' LABEL_0, LABEL_1, … for classify, the
    /// sorted tags of --data for token-classify; a checkpoint's own head keeps its names unless
    /// these rename its classes (as many).
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, value_delimiter = ',', value_name = "NAME,..."))]
    pub labels: Vec<String>,
    /// Seeds the batch sampling, masking and dropout.
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, default_value_t = 0))]
    pub seed: u64,
    /// Evaluate on held-out data every this many steps (and at the end); 0: never. The loss
    /// and its perplexity (for classify and token-classify, the accuracy; for qa, the
    /// exact-match rate and F1 of the answer spans, in tokens) go to the log as {"step",
    /// "eval_loss", "eval_perplexity" | "eval_accuracy" | "eval_exact_match" and "eval_f1"}.
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, default_value_t = 0))]
    pub eval_every: u64,
    /// Batches per evaluation (always the same ones).
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, default_value_t = 20))]
    pub eval_batches: u64,
    /// Held-out text; default: the last 10% of --data (which then trains on the first 90%).
    /// A multi-task run names each task's in its --task.
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, conflicts_with = "tasks"))]
    pub eval_data: Option<PathBuf>,
    /// Cross-view training (a CVT tagger, --objective token-classify): unlabelled text, a
    /// sentence a line with its words between spaces; training then alternates a labelled
    /// batch of --data and an unlabelled one, on which the auxiliary views learn to match the
    /// primary module (each kind counts as a step, as in the paper's code; so no
    /// --grad-accum, which would mix the two in one step).
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, conflicts_with = "replay_batches"))]
    pub unlabeled_data: Option<PathBuf>,
    /// Write a checkpoint every this many steps (and always at the end); 0: only at the end.
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, default_value_t = 0))]
    pub checkpoint_every: u64,
    /// How many checkpoint-* folders to keep (the newest).
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, default_value_t = 2))]
    pub save_total_limit: usize,
    /// Where checkpoints go; the final model is also written here directly.
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, required_unless_present = "eval_only"))]
    pub out: Option<PathBuf>,
    /// Train nothing: score --model-init on all of --data (each example once, in order) as
    /// the held-out evaluation does, and print {"batches", "eval_loss", metrics…, "seconds"}
    /// as JSON (for a classifier's test set, say). Text a language model reads has no end:
    /// it is scored on --eval-batches draws, the batches a run's evaluations score with the
    /// same --seed. The model must have the objective's head.
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(long, requires = "model_init", conflicts_with_all = ["resume", "replay_batches", "eval_every", "eval_data"]))]
    pub eval_only: bool,
    /// A distillation's teacher and loss (`sesame distill`'s flags), and the student made
    /// from the teacher when there is no `model_init`.
    #[cfg_attr(all(feature = "cli", not(target_arch = "wasm32")), arg(skip))]
    pub distillation: Option<Distillation>,
}

impl Default for RunSpec {
    /// What `sesame train` runs without flags (a run needs its data or replayed batches, and
    /// its `out`).
    fn default() -> RunSpec {
        RunSpec {
            objective: Objective::Clm,
            model_init: None,
            arch: None,
            layers: None,
            heads: 4,
            hidden: 128,
            context: None,
            embedding_size: None,
            elmo_options: None,
            tokenizer: "char".into(),
            data: None,
            replay_batches: None,
            resume: false,
            steps: None,
            epochs: None,
            batch_size: 8,
            grad_accum: 1,
            seq_len: None,
            lr: 1e-3,
            warmup: 0,
            warmup_ratio: None,
            schedule: Decay::Cosine,
            min_lr: 0.0,
            discriminative_lr: None,
            unfreeze_every: None,
            freeze: None,
            optimizer: OptimizerKind::AdamW,
            weight_decay: 0.01,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            clip_grad_norm: 1.0,
            mask_probability: 0.15,
            whole_word_mask: false,
            mask_level: MaskSchedule::default(),
            gazetteer: None,
            tasks: Vec::new(),
            stage_steps: Vec::new(),
            max_ngram: 1,
            pretokenized: false,
            shuffle: true,
            group_by_length: false,
            doc_stride: None,
            lm_coef: DEFAULT_LM_COEF,
            dropout: None,
            drop_mult: None,
            labels: Vec::new(),
            seed: 0,
            eval_every: 0,
            eval_batches: 20,
            eval_data: None,
            unlabeled_data: None,
            checkpoint_every: 0,
            save_total_limit: 2,
            out: None,
            eval_only: false,
            distillation: None,
        }
    }
}

impl RunSpec {
    /// The layers of a fresh model: `layers`, else [`DEFAULT_LAYERS`].
    pub fn layers(&self) -> usize {
        self.layers.unwrap_or(DEFAULT_LAYERS)
    }

    /// The spec of `sesame train`'s flags (`args`, without `train`), as the command line
    /// parses them (a flag given twice: the last wins).
    #[cfg(all(feature = "cli", not(target_arch = "wasm32")))]
    pub fn from_flags<S: Into<std::ffi::OsString> + Clone>(args: &[S]) -> crate::Result<RunSpec> {
        use clap::{Args, FromArgMatches};
        let command = RunSpec::augment_args(clap::Command::new("train").no_binary_name(true).args_override_self(true));
        let bad = |e: clap::Error| crate::error::arg_err!("train", "{e}");
        RunSpec::from_arg_matches(&command.try_get_matches_from(args.iter().cloned()).map_err(bad)?).map_err(bad)
    }

    /// The spec of `sesame distill`'s flags (`args`, without `distill`): a run's flags and
    /// the teacher's ([`Distillation`]), as the command line parses them.
    #[cfg(all(feature = "cli", not(target_arch = "wasm32")))]
    pub fn from_distill_flags<S: Into<std::ffi::OsString> + Clone>(args: &[S]) -> crate::Result<RunSpec> {
        use clap::{Args, FromArgMatches};
        let command = Distillation::augment_args(RunSpec::augment_args(clap::Command::new("distill").no_binary_name(true).args_override_self(true)));
        let bad = |e: clap::Error| crate::error::arg_err!("distill", "{e}");
        let matches = command.try_get_matches_from(args.iter().cloned()).map_err(bad)?;
        let distillation = Distillation::from_arg_matches(&matches).map_err(bad)?;
        Ok(RunSpec { distillation: Some(distillation), ..RunSpec::from_arg_matches(&matches).map_err(bad)? })
    }

    /// The warmup steps of a run of `steps`: `warmup`, or `warmup_ratio` of the steps.
    pub fn warmup_steps(&self, steps: u64) -> u64 {
        self.warmup_ratio.map_or(self.warmup, |ratio| (steps as f64 * ratio as f64).ceil() as u64)
    }

    /// How the lines of `data` become the words an ELMo reads.
    pub fn word_split(&self) -> WordSplit {
        if self.pretokenized {
            WordSplit::Pretokenized
        } else {
            WordSplit::Raw
        }
    }
}

#[cfg(all(test, all(feature = "cli", not(target_arch = "wasm32"))))]
mod tests {
    use super::RunSpec;

    #[test]
    fn the_flags_defaults_are_the_specs() {
        let spec = RunSpec::from_flags(&["--out", "out", "--data", "data.txt"]).unwrap();
        assert_eq!(spec, RunSpec { out: Some("out".into()), data: Some("data.txt".into()), ..RunSpec::default() });
        let json = serde_json::to_string(&spec).unwrap();
        assert_eq!(serde_json::from_str::<RunSpec>(&json).unwrap(), spec, "as data, the same run");
        let partial: RunSpec = serde_json::from_str(r#"{"objective": "mlm", "lr": 0.0001}"#).unwrap();
        assert_eq!(partial, RunSpec { objective: crate::models::training::Objective::Mlm, lr: 1e-4, ..RunSpec::default() }, "what it omits is the default");
        assert!(serde_json::from_str::<RunSpec>(r#"{"learning_rate": 0.1}"#).is_err(), "an unknown setting is an error");
        assert_eq!(RunSpec::from_flags(&["--out", "o", "--data", "d", "--seed", "1", "--seed", "2"]).unwrap().seed, 2, "the last wins");
        let flags = ["--out", "o", "--data", "d", "--no-shuffle", "--epochs", "2.5", "--warmup-ratio", "0.1", "--labels", "neg,pos", "--freeze", "2"];
        let fine_tuning = RunSpec::from_flags(&flags).unwrap();
        let freeze = Some(crate::train::optim::Freeze::Bottom(2));
        let expected = RunSpec { shuffle: false, epochs: Some(2.5), warmup_ratio: Some(0.1), labels: vec!["neg".into(), "pos".into()], freeze, ..spec.clone() };
        assert_eq!(fine_tuning, RunSpec { out: Some("o".into()), data: Some("d".into()), ..expected });
        assert_eq!((fine_tuning.warmup_steps(25), spec.warmup_steps(25)), (3, 0), "a share of the steps, rounded up");
        assert!(RunSpec::from_flags(&["--out", "o", "--data", "d", "--epochs", "1", "--steps", "5"]).is_err(), "epochs or steps");
        let err = RunSpec::from_flags(&["--data", "d"]).unwrap_err().to_string();
        assert!(err.contains("--out"), "{err}");
    }
}
