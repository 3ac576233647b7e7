//! The batches a run trains and evaluates on: replayed, or drawn from --data (or, for a
//! multi-task run, from each --task's data) as the objective reads it.

use std::path::Path;

use crate::error::{arg_err, Result};
use crate::models::training::{Objective, Trainable};
use crate::tokenize::TextTokenizer;
use crate::train::checkpoint::ModelFolder;
use crate::train::classification::LabelledSentences;
use crate::train::cove::{PairBatches, TranslationPairs};
use crate::train::data::{BatchSource, Draw, ReplayBatches, TokenStream};
use crate::train::elmo::{SentenceCorpus, WordVocab};
use crate::train::ernie2::{StructureTask, StructureTaskData};
use crate::train::evaluate::HeldOut;
use crate::train::masking::knowledge::{annotated_documents, plain_documents, Gazetteer};
use crate::train::masking::{MaskedLmCorpus, MaskingConfig, Replacement, SentencePairs};
use crate::train::multiple_choice::MultipleChoiceExamples;
use crate::train::multitask::{parse_tasks, MultiTaskReplay, TaskMixture};
use crate::train::question_answering::{squad_examples, QaWindows};
use crate::train::stages::StagedMixture;
use crate::train::token_classification::{Alternating, LabelledTokens, TokenBatches};

use super::spec::RunSpec;
use crate::files::Files;
use crate::models::cove::translation::TARGET_TOKENIZER;

/// The text a run trains on and, when it evaluates, its held-out text: `eval`, or else the
/// last ~10% of `text`.
pub fn split_corpus<'a>(files: &dyn Files, spec: &RunSpec, objective: Objective, text: &'a str, eval: Option<&Path>) -> Result<(&'a str, Option<String>)> {
    Ok(match (eval, spec.eval_every) {
        (_, 0) => (text, None),
        (Some(eval), _) => (text, Some(files.read_text(eval)?)),
        (None, _) if objective == Objective::Qa => return Err(arg_err!("train", "objective qa evaluates on --eval-data (a SQuAD file is not split by lines)")),
        (None, _) if objective == Objective::MultipleChoice => {
            return Err(arg_err!(
                "train",
                "objective multiple-choice evaluates on --eval-data (a CSV is not split by lines: its header, and quoted fields across lines)"
            ))
        }
        (None, _) => {
            let (train, held_out) = split_held_out(text);
            (train, Some(held_out.to_string()))
        }
    })
}

/// The first 90% of `text` and the rest (nanoGPT's split), cut at a blank line near the 90%
/// mark when there is one (so no document is split), else at a line end.
fn split_held_out(text: &str) -> (&str, &str) {
    let mark = text.floor_char_boundary(text.len() * 9 / 10);
    let cut = text[..mark].rfind("\n\n").filter(|&at| at > text.len() * 8 / 10).or_else(|| text[..mark].rfind('\n')).map_or(mark, |at| at + 1);
    text.split_at(cut)
}

/// A run's training batches (none for --eval-only) and, when it evaluates, its held-out ones.
pub type BatchSources = (Option<Box<dyn BatchSource>>, Option<HeldOut>);

/// The run's training batches and, when evaluating, the held-out ones: replayed, or drawn
/// from --data as the objective needs them (--eval-only: all of --data, held out).
pub fn batch_sources(files: &dyn Files, spec: &RunSpec, folder: &ModelFolder, model: &dyn Trainable, seq: usize) -> Result<BatchSources> {
    if let Some(path) = &spec.replay_batches {
        if spec.eval_every > 0 {
            return Err(arg_err!("train", "--eval-every needs text (--data), not replayed batches"));
        }
        if spec.objective == Objective::MultiTask {
            let names = task_names(folder)?;
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            return Ok((Some(Box::new(MultiTaskReplay::from_bytes(&files.read(path)?, &names)?)), None));
        }
        return Ok((Some(Box::new(ReplayBatches::from_bytes(&files.read(path)?)?)), None));
    }
    if spec.objective == Objective::MultiTask {
        return task_sources(files, spec, folder, seq);
    }
    let path = spec.data.as_ref().ok_or_else(|| arg_err!("train", "give --data or --replay-batches"))?;
    let text = files.read_text(path)?;
    if text.trim().is_empty() {
        return Err(arg_err!("train", "{} holds no text", path.display()));
    }
    let (train, held_out) = split_corpus(files, spec, spec.objective, &text, spec.eval_data.as_deref())?;
    let reader = Reader { chars_per_token: model.chars_per_token(), ..Reader::new(files, spec, folder, seq)? };
    let eval_annotated = spec.eval_data.as_deref().map_or(jsonl(path), jsonl);
    let config = folder.file("config.json").unwrap_or_default();
    if spec.eval_only {
        // The whole file as held-out batches.
        return Ok((None, Some(HeldOut::one(reader.source(spec.objective, config, &text, true, eval_annotated)?))));
    }
    let held_out = held_out.map(|text| reader.source(spec.objective, config, &text, true, eval_annotated)).transpose()?;
    Ok((Some(reader.source(spec.objective, config, train, false, jsonl(path))?), held_out.map(HeldOut::one)))
}

/// The examples of `path` (read from `files`) as the run's held-out batches: in order, each
/// once (text a language model reads: drawn without end).
pub fn held_out_source(
    files: &dyn Files,
    spec: &RunSpec,
    folder: &ModelFolder,
    model: &dyn Trainable,
    seq: usize,
    path: &Path,
) -> Result<Box<dyn BatchSource>> {
    if spec.objective == Objective::MultiTask {
        return Err(arg_err!("train", "a multi-task model is scored task by task: give each --task its held-out file"));
    }
    let text = files.read_text(path)?;
    let reader = Reader { chars_per_token: model.chars_per_token(), ..Reader::new(files, spec, folder, seq)? };
    reader.source(spec.objective, folder.file("config.json").unwrap_or_default(), &text, true, jsonl(path))
}

/// Masked-LM text with its phrases and entities marked is JSON lines, by file name (for qa,
/// JSON lines are SQuAD examples).
fn jsonl(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "jsonl")
}

/// The names of a multi-task folder's tasks, in tasks.json's order.
fn task_names(folder: &ModelFolder) -> Result<Vec<String>> {
    let tasks = parse_tasks(folder.file("tasks.json").ok_or_else(|| arg_err!("train", "objective multi-task needs the model's tasks.json"))?)?;
    Ok(tasks.into_iter().map(|t| t.name).collect())
}

/// A multi-task run's batches: each --task's data read as its objective reads it, mixed as
/// MT-DNN mixes them; held out, each task's own.
fn task_sources(files: &dyn Files, spec: &RunSpec, folder: &ModelFolder, seq: usize) -> Result<BatchSources> {
    let specs = parse_tasks(folder.file("tasks.json").ok_or_else(|| arg_err!("train", "objective multi-task needs the model's tasks.json"))?)?;
    if let Some(extra) = spec.tasks.iter().find(|t| !specs.iter().any(|s| s.name == t.name)) {
        return Err(arg_err!("train", "--task {} is not a task of the model's tasks.json", extra.name));
    }
    let reader = Reader::new(files, spec, folder, seq)?;
    let (mut train, mut held_out) = (Vec::new(), Vec::new());
    for task_spec in &specs {
        let task = spec
            .tasks
            .iter()
            .find(|t| t.name == task_spec.name)
            .ok_or_else(|| arg_err!("train", "task `{}` has no data: give --task {}={}:FILE", task_spec.name, task_spec.name, task_spec.objective))?;
        if task.objective != task_spec.objective {
            return Err(arg_err!("train", "task `{}` is a {} task in tasks.json, not {}", task_spec.name, task_spec.objective, task.objective));
        }
        let classes = task_spec.config["id2label"].as_object().map_or(0, |labels| labels.len());
        if let Some(pretraining) = task.pretraining.filter(|p| p.num_labels() != classes) {
            return Err(arg_err!(
                "train",
                "task `{}`: {pretraining} predicts {} classes, and the model's head has {classes}",
                task_spec.name,
                pretraining.num_labels()
            ));
        }
        let text = files.read_text(&task.data)?;
        if text.trim().is_empty() {
            return Err(arg_err!("train", "task `{}`: {} holds no text", task_spec.name, task.data.display()));
        }
        let config = serde_json::to_vec(&task_spec.config).map_err(|e| arg_err!("train", "task `{}`'s config: {e}", task_spec.name))?;
        let (text_train, text_held_out) = split_corpus(files, spec, task_spec.objective, &text, task.eval_data.as_deref())?;
        let source = |text: &str, held_out: bool| {
            match task.pretraining {
                Some(pretraining) => reader.pretraining_source(pretraining, text, held_out),
                None => reader.source(task_spec.objective, &config, text, held_out, task_spec.objective == Objective::Mlm && jsonl(&task.data)),
            }
            .map_err(|e| arg_err!("train", "task `{}`{}: {e}", task_spec.name, if held_out { "'s held-out text (--eval-data, else the last 10%)" } else { "" }))
        };
        if spec.eval_only {
            held_out.push(Some(source(&text, true)?));
            continue;
        }
        train.push(source(text_train, false)?);
        held_out.push(text_held_out.map(|text| source(&text, true)).transpose()?);
    }
    let evaluated = held_out.iter().any(Option::is_some).then_some(HeldOut { sets: held_out });
    if spec.eval_only {
        return Ok((None, evaluated));
    }
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    // ERNIE 2.0's stages, or tasks drawn from text (which have no epochs to mix): the
    // continual schedule; else MT-DNN's epochs.
    let joins: Vec<usize> = specs.iter().map(|s| spec.tasks.iter().find(|t| t.name == s.name).map_or(0, |t| t.stage)).collect();
    let staged = !spec.stage_steps.is_empty() || joins.iter().any(|&j| j > 0) || train.iter().any(|source| source.batches_per_epoch().is_none());
    if staged {
        return Ok((Some(Box::new(StagedMixture::new(&names, train, &joins, &spec.stage_steps, spec.grad_accum, spec.seed)?)), evaluated));
    }
    Ok((Some(Box::new(TaskMixture::new(&names, train, spec.seed)?)), evaluated))
}

/// What reading a run's text takes: ELMo's word vocabulary, else the model's tokenizer; the
/// gazetteer of entity-level masking.
struct Reader<'a> {
    files: &'a dyn Files,
    spec: &'a RunSpec,
    seq: usize,
    vocab: Option<WordVocab>,
    tokenizer: Option<TextTokenizer>,
    /// A translation model's target vocabulary.
    target: Option<TextTokenizer>,
    gazetteer: Option<Gazetteer>,
    /// Each token's characters, in rows of this many ids, for a model that reads them (CVT).
    chars_per_token: usize,
}

impl<'a> Reader<'a> {
    fn new(files: &'a dyn Files, spec: &'a RunSpec, folder: &ModelFolder, seq: usize) -> Result<Reader<'a>> {
        // An ELMo reads words: a biLM predicts them from its vocabulary; a classifier reads them.
        let elmo = folder.file("options.json").is_some();
        let vocab = match spec.objective {
            Objective::BiLm => Some(WordVocab::from_vocab_txt(&String::from_utf8_lossy(
                folder.file("vocab.txt").ok_or_else(|| arg_err!("train", "the ELMo has no vocab.txt"))?,
            ))?),
            _ => None,
        };
        let tokenizer = match elmo {
            true => None,
            false => {
                let json = folder.file("tokenizer.json").ok_or_else(|| arg_err!("train", "the model has no tokenizer.json to tokenize --data"))?;
                Some(TextTokenizer::from_files(json, folder.file("tokenizer_config.json"))?)
            }
        };
        let gazetteer = spec.gazetteer.as_ref().map(|file| Gazetteer::new(&files.read_text(file)?)).transpose()?;
        let target = folder.file(TARGET_TOKENIZER).map(TextTokenizer::from_bytes).transpose()?;
        Ok(Reader { files, spec, seq, vocab, tokenizer, target, gazetteer, chars_per_token: 0 })
    }

    /// `text` as `objective` reads it, for a model of config.json `config` (its labels and
    /// padding id); `annotated`: masked-LM text as JSON lines.
    fn source(&self, objective: Objective, config: &[u8], text: &str, held_out: bool, annotated: bool) -> Result<Box<dyn BatchSource>> {
        let (spec, seq) = (self.spec, self.seq);
        // The held-out batches use their own seed: the same batches at every evaluation.
        let seed = if held_out { spec.seed ^ 0x5EED } else { spec.seed };
        let grouped = spec.group_by_length && !held_out;
        let draw = match (held_out, spec.shuffle) {
            (true, _) => Draw::HeldOut,
            (false, true) => Draw::Shuffled(seed),
            (false, false) => Draw::InOrder,
        };
        if draw == Draw::InOrder
            && (grouped || matches!(objective, Objective::Clm | Objective::Mlm | Objective::MlmNsp | Objective::MlmSop | Objective::Electra))
        {
            return Err(arg_err!(
                "train",
                "--no-shuffle keeps the order of a file of examples; objective {objective}{} draws its batches otherwise",
                if grouped { " with --group-by-length" } else { "" }
            ));
        }
        if let Some(vocab) = &self.vocab {
            // Held-out sentences in order, each once.
            return Ok(Box::new(SentenceCorpus::new(text, spec.word_split(), vocab, draw, spec.batch_size, seq)?));
        }
        let Some(tokenizer) = &self.tokenizer else {
            if objective != Objective::Classify {
                return Err(arg_err!("train", "an ELMo trains with objective bilm or classify, not {objective}"));
            }
            // Held-out sentences in file order, each once.
            let sentences = LabelledSentences::from_tsv_words(text, spec.word_split(), draw, spec.batch_size, seq)?;
            return Ok(Box::new(if grouped { sentences.grouped_by_length() } else { sentences }));
        };
        Ok(match objective {
            Objective::Clm => Box::new(TokenStream::new(tokenizer.encode(text, false)?, seed, spec.batch_size, seq)?),
            // ELECTRA's generator reads rows masked as RoBERTa's (whole sentences, no pairs),
            // 85% of the selected tokens [MASK]ed and the rest kept.
            Objective::Mlm | Objective::MlmNsp | Objective::MlmSop | Objective::Electra => {
                let config = MaskingConfig {
                    probability: spec.mask_probability,
                    whole_word: spec.whole_word_mask,
                    pairs: match objective {
                        Objective::MlmNsp => Some(SentencePairs::NextSentence),
                        Objective::MlmSop => Some(SentencePairs::SentenceOrder),
                        _ => None,
                    },
                    max_ngram: spec.max_ngram,
                    schedule: spec.mask_level.clone(),
                    batches_per_step: spec.grad_accum,
                    replacement: if objective == Objective::Electra { Replacement::Electra } else { Replacement::Bert },
                };
                let config = if held_out { config.held_out() } else { config };
                let documents = if annotated { annotated_documents(text)? } else { plain_documents(text) };
                Box::new(MaskedLmCorpus::from_documents(documents, self.gazetteer.as_ref(), tokenizer, config, seed, spec.batch_size, seq)?)
            }
            // Held-out sentences in file order, each once.
            Objective::Classify => {
                let sentences = LabelledSentences::from_tsv(text, tokenizer, pad_id(config, tokenizer)?, draw, spec.batch_size, seq)?;
                Box::new(if grouped { sentences.grouped_by_length() } else { sentences })
            }
            // Held-out sentences in file order, each once.
            // With --unlabeled-data (cross-view training), training alternates labelled and
            // unlabelled batches.
            Objective::TokenClassify => {
                let labels = config_labels(config)?;
                let layout = TokenBatches { pad_id: pad_id(config, tokenizer)?, chars_per_token: self.chars_per_token, batch: spec.batch_size, seq };
                let sentences = LabelledTokens::from_conll(text, tokenizer, &labels, layout, draw)?;
                let labelled = Box::new(if grouped { sentences.grouped_by_length() } else { sentences });
                match (&spec.unlabeled_data, held_out) {
                    (Some(path), false) => {
                        let unlabelled = LabelledTokens::from_lines(&self.files.read_text(path)?, tokenizer, layout, Some(seed ^ 0xC7))?;
                        Box::new(Alternating::new(labelled, Box::new(if grouped { unlabelled.grouped_by_length() } else { unlabelled })))
                    }
                    _ => labelled,
                }
            }
            // Held-out windows in file order, each once.
            Objective::Qa => {
                let doc_stride = spec.doc_stride.unwrap_or(seq / 3);
                let examples = squad_examples(text)?;
                let windows = QaWindows::new(examples, tokenizer, pad_id(config, tokenizer)?, draw, spec.batch_size, seq, doc_stride)?;
                // Answers are scored per question, so the evaluated batches must hold one whole.
                let evaluated = (spec.eval_batches as usize).saturating_mul(spec.batch_size);
                if held_out && !spec.eval_only && windows.questions_within(evaluated) == 0 {
                    return Err(arg_err!("train", "--eval-batches {} of {} windows holds no whole question of --eval-data: raise it", spec.eval_batches, spec.batch_size));
                }
                Box::new(windows)
            }
            Objective::BiLm => return Err(arg_err!("train", "objective bilm needs an ELMo")),
            // Held-out examples in file order, each once.
            Objective::MultipleChoice => {
                Box::new(MultipleChoiceExamples::from_csv(text, tokenizer, pad_id(config, tokenizer)?, draw, spec.batch_size, seq)?)
            }
            Objective::MultiTask => return Err(arg_err!("train", "a task of a multi-task run has an objective of its own")),
            // Held-out pairs in file order, each once.
            Objective::Translation => {
                let target = self.target.as_ref().ok_or_else(|| arg_err!("train", "objective translation needs the model's {TARGET_TOKENIZER}"))?;
                let target_pad = target.token_to_id("<pad>").unwrap_or(0);
                let layout = PairBatches { source_pad: pad_id(config, tokenizer)?, target_pad, batch: spec.batch_size, seq };
                let pairs = TranslationPairs::from_tsv(text, tokenizer, target, layout, draw)?;
                if pairs.truncated > 0 {
                    let part = if held_out { "held-out" } else { "training" };
                    log::info!("{} {part} pairs are longer than --seq-len {seq} tokens on a side: cut to it", pairs.truncated);
                }
                Box::new(pairs)
            }
            // Its data needs a generator's replacements: objective electra trains both.
            Objective::Rtd => return Err(arg_err!("train", "objective rtd trains ELECTRA's discriminator alone on replayed batches (--replay-batches with labels 1 at replaced tokens); from text, objective electra trains it with its generator")),
        })
    }

    /// An ERNIE 2.0 task's batches drawn from `text`, plain documents separated by blank lines.
    fn pretraining_source(&self, task: StructureTask, text: &str, held_out: bool) -> Result<Box<dyn BatchSource>> {
        let tokenizer = self.tokenizer.as_ref().ok_or_else(|| arg_err!("train", "ERNIE 2.0's {task} task trains a transformer encoder, not an ELMo"))?;
        // Each task its own stream (tasks often read the same text).
        let seed = if held_out { self.spec.seed ^ 0x5EED } else { self.spec.seed }.wrapping_add(1 + task as u64);
        let documents = plain_documents(text);
        Ok(Box::new(StructureTaskData::new(task, &documents, tokenizer, seed, self.spec.batch_size, self.seq)?))
    }
}

/// The class names of a classifier's config.json (id2label), by id.
fn config_labels(config: &[u8]) -> Result<Vec<String>> {
    let config: serde_json::Value = serde_json::from_slice(config).map_err(|e| arg_err!("train", "config.json: {e}"))?;
    let id2label = config["id2label"].as_object().ok_or_else(|| arg_err!("train", "config.json has no id2label to name the token classes"))?;
    (0..id2label.len())
        .map(|id| {
            id2label
                .get(&id.to_string())
                .and_then(|name| name.as_str())
                .map(String::from)
                .ok_or_else(|| arg_err!("train", "config.json's id2label has no class {id}"))
        })
        .collect()
}

/// The id classification (and translation) batches pad with: config.json's pad_token_id,
/// else the tokenizer's [PAD] or <pad>.
fn pad_id(config: &[u8], tokenizer: &TextTokenizer) -> Result<u32> {
    let config: serde_json::Value = serde_json::from_slice(config).unwrap_or_default();
    let id = config["pad_token_id"]
        .as_u64()
        .and_then(|id| u32::try_from(id).ok())
        .or_else(|| tokenizer.token_to_id("[PAD]"))
        .or_else(|| tokenizer.token_to_id("<pad>"));
    id.ok_or_else(|| arg_err!("train", "the model has no pad_token_id in config.json, and its tokenizer no [PAD] or <pad> token, to pad batches with"))
}
