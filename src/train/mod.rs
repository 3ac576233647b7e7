//! Training: the loop every front end drives ([`trainer`], with the held-out
//! evaluation of [`evaluate`]) over any model that implements
//! [`Trainable`](crate::models::training::Trainable) — each family's training, reached through
//! its registry entry, says what it trains and computes each objective's loss and backward.
//! Here: the parameters with their gradients and optimizer moments ([`params`]), AdamW and
//! LAMB with warmup and decay schedules and clipping ([`optim`]), checkpoints ([`checkpoint`]),
//! knowledge distillation ([`distill`]), multi-task models ([`multitask`], with ERNIE 2.0's
//! continual [`stages`] and tasks drawn from text in [`ernie2`]), and the batches a run
//! consumes: replayed or sampled ([`data`]), BERT's masked pairs ([`masking`]), the fine-tuning
//! data of [`classification`], [`token_classification`], [`multiple_choice`] and
//! [`question_answering`] (answers scored per question as SQuAD scores them), ELMo's sentences
//! ([`elmo`]), CoVe's sentence pairs ([`cove`]), and fresh tokenizers ([`tokenizer`]).
//!
//! All of it compiles for the browser (the `training` feature, which the package's inference
//! modules leave out): steps, evaluations and checkpoints wait on the device without blocking
//! (`async`), checkpoints go to a [`CheckpointStore`](checkpoint::CheckpointStore) as files,
//! and a [`run`] reads its [`RunSpec`](run::RunSpec)'s paths through
//! [`Files`](crate::files::Files). What stays native: checkpoint directories, blocking
//! wrappers (`run::prepare`, `Run::run`), jieba's Chinese words for whole-word masking, and
//! ELECTRA pretraining on WebGPU (its steps read the generator's samples back).

pub mod checkpoint;
pub mod classification;
pub mod cove;
pub mod data;
pub mod distill;
pub mod elmo;
pub mod ernie2;
pub mod evaluate;
pub mod masking;
pub mod multiple_choice;
pub mod multitask;
pub mod optim;
pub mod params;
pub mod question_answering;
pub mod run;
pub mod stages;
pub mod token_classification;
pub mod tokenizer;
pub mod trainer;
