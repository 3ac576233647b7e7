//! The model a run trains: loaded from a checkpoint folder (Hugging Face's layout or ELMo's),
//! or built fresh from `--arch`, with its trainable parameters and the files its checkpoints
//! copy.

use std::cell::OnceCell;
use std::path::Path;

use crate::error::{arg_err, Result};
use crate::models::auto::{folder_kind, FolderKind};
use crate::models::cove::translation::TARGET_TOKENIZER;
use crate::models::elmo::classify::ElmoClassifier;
use crate::models::elmo::fresh::{fresh_options_json, init_bilm_safetensors, with_softmax, with_task_head};
use crate::models::elmo::train::ElmoBiLm;
use crate::models::elmo::ElmoOptions;
use crate::models::registry::{family_of, fresh_family, with_dropout, with_dropout_scaled, with_head};
use crate::models::training::formats::label_names;
use crate::models::training::fresh::{default_labels, with_labels, word_vocab_size, Fresh, FreshShape, FreshVocabulary, RunData, RunText, TrainingFolder};
use crate::models::training::{JointFolder, Objective, Trainable};
use crate::tokenize::TextTokenizer;
use crate::train::classification::{num_labels, tsv_rows};
use crate::train::elmo::WordVocab;
use crate::train::ernie2::{StructureTask, CAPITALIZATION_LABELS};
use crate::train::masking::{MaskLevel, MaskSchedule};
use crate::train::multitask::{multi_task_checkpoint, parse_tasks, MultiTaskModel, TaskSpec};
use crate::train::params::Parameters;
use crate::train::tokenizer::{TokenizerSpec, END_OF_TEXT};
use crate::weights::{Checkpoint, Weights};
use crate::Device;

use super::data::split_corpus;
use super::spec::RunSpec;
use crate::files::Files;
use crate::train::checkpoint::ModelFolder;

/// A folder's tokenizer files, which every checkpoint copies: tokenizer.json,
/// tokenizer_config.json (its settings: a BERT's casing, fastai's text rules) and a
/// translation model's target_tokenizer.json.
#[derive(Default)]
pub struct TokenizerFiles {
    pub json: Option<Vec<u8>>,
    pub config: Option<Vec<u8>>,
    pub target: Option<Vec<u8>>,
}

impl TokenizerFiles {
    fn read(files: &dyn Files, dir: &Path) -> Result<TokenizerFiles> {
        let optional = |name: &str| files.is_file(&dir.join(name)).then(|| files.read(&dir.join(name))).transpose();
        Ok(TokenizerFiles { json: optional("tokenizer.json")?, config: optional("tokenizer_config.json")?, target: optional(TARGET_TOKENIZER)? })
    }

    fn files(self) -> impl Iterator<Item = (&'static str, Vec<u8>)> {
        let named = [("tokenizer.json", self.json), ("tokenizer_config.json", self.config), (TARGET_TOKENIZER, self.target)];
        named.into_iter().filter_map(|(name, bytes)| bytes.map(|bytes| (name, bytes)))
    }
}

/// The model, its parameters and the files a checkpoint copies.
pub struct Loaded {
    pub model: Box<dyn Trainable>,
    pub params: Parameters,
    pub folder: ModelFolder,
}

/// Loads a checkpoint folder: ELMo's when it has options.json, else Hugging Face's.
pub fn load(gpu: &Device, files: &dyn Files, dir: &Path, spec: &RunSpec) -> Result<Loaded> {
    let read = |name: &str| files.read(&dir.join(name));
    let kind = folder_kind(files, dir)?;
    if kind == FolderKind::Elmo && spec.objective == Objective::Classify {
        return load_elmo_classifier(gpu, files, read("options.json")?, read("model.safetensors")?, spec);
    }
    if kind == FolderKind::Elmo {
        let vocab_txt = match files.is_file(&dir.join("vocab.txt")) {
            true => files.read_text(&dir.join("vocab.txt"))?,
            false => train_word_vocab(files, spec)?.to_vocab_txt(),
        };
        let options_json = read("options.json")?;
        let options = ElmoOptions::from_json(&options_json)?;
        let vocab = WordVocab::from_vocab_txt(&vocab_txt)?;
        let safetensors = with_softmax(read("model.safetensors")?, options.lstm.projection_dim, vocab.len(), spec.seed)?;
        return load_bilm(gpu, options_json, safetensors, vocab, spec);
    }
    let tokenizer_json = TokenizerFiles::read(files, dir)?;
    if files.is_file(&dir.join("tasks.json")) && spec.objective != Objective::MultiTask {
        return Err(arg_err!(
            "train",
            "{} is a multi-task folder (tasks.json): train it with --objective multi-task, or one task's model alone from its tasks/<name>/ folder",
            dir.display()
        ));
    }
    if let Some(joint) = family_of(&read("config.json")?)?.training.and_then(|t| t.joint_folder()) {
        let is_joint = files.is_file(&dir.join(joint.other_config));
        if is_joint != (spec.objective == joint.objective) {
            return Err(match is_joint {
                true => arg_err!(
                    "train",
                    "{} is an {} ({} beside config.json): train it with --objective {}, or one of its models alone from its own folder",
                    dir.display(),
                    joint.name,
                    joint.other_config,
                    joint.objective
                ),
                false => arg_err!(
                    "train",
                    "objective {} trains an {} (config.json and {}); {} has no {}",
                    joint.objective,
                    joint.name,
                    joint.other_config,
                    dir.display(),
                    joint.other_config
                ),
            });
        }
        if is_joint {
            return load_joint(gpu, joint, read("config.json")?, read(joint.other_config)?, read("model.safetensors")?, tokenizer_json, spec);
        }
    }
    if spec.objective == Objective::MultiTask {
        let (config_json, safetensors) = (read("config.json")?, read("model.safetensors")?);
        let (tasks_json, safetensors) = match files.is_file(&dir.join("tasks.json")) {
            true => (read("tasks.json")?, safetensors),
            false => with_task_heads(files, &config_json, safetensors, spec)?,
        };
        return load_multi_task(gpu, config_json, tasks_json, safetensors, tokenizer_json, spec);
    }
    let mut folder = TrainingFolder::new(read("config.json")?, read("model.safetensors")?);
    folder.files.extend(tokenizer_json.files());
    let family = family_of(folder.require("config.json")?)?;
    family.check_trains(spec.objective)?;
    let text = RunFiles::new(files, spec);
    let folder = family.require_training()?.fit_to_data(folder, &run_data(spec, &text))?;
    load_folder(gpu, files, folder, spec)
}

/// What a family reads of the run to make or fit its model.
fn run_data<'a>(spec: &'a RunSpec, text: &'a RunFiles) -> RunData<'a> {
    RunData {
        objective: spec.objective,
        tokenizer: &spec.tokenizer,
        layers: spec.layers,
        width: spec.hidden,
        embedding_size: spec.embedding_size,
        dropout: spec.dropout,
        eval_only: spec.eval_only,
        seed: spec.seed,
        text,
    }
}

/// The run's text from its files (--data split as the run splits it, --unlabeled-data), read
/// on first use.
struct RunFiles<'a> {
    files: &'a dyn Files,
    spec: &'a RunSpec,
    /// --data, the length of its training part (the rest, or --eval-data, is held out), and
    /// the held-out text.
    data: OnceCell<(String, usize, Option<String>)>,
    unlabeled: OnceCell<Option<String>>,
}

impl<'a> RunFiles<'a> {
    fn new(files: &'a dyn Files, spec: &'a RunSpec) -> RunFiles<'a> {
        RunFiles { files, spec, data: OnceCell::new(), unlabeled: OnceCell::new() }
    }

    /// --data, the length of its training part, and the held-out text.
    fn split(&self) -> Result<&(String, usize, Option<String>)> {
        if let Some(split) = self.data.get() {
            return Ok(split);
        }
        let spec = self.spec;
        let data = spec.data.as_ref().ok_or_else(|| arg_err!("train", "the model learns its vocabulary from the run's text: give --data"))?;
        let text = self.files.read_text(data)?;
        let (train, held_out) = split_corpus(self.files, spec, spec.objective, &text, spec.eval_data.as_deref())?;
        log::info!("learning the model's vocabulary from {:.1} MB of text", train.len() as f64 / 1e6);
        // The training part is a prefix of the text.
        let train = train.len();
        Ok(self.data.get_or_init(|| (text, train, held_out)))
    }
}

impl RunText for RunFiles<'_> {
    fn train(&self) -> Result<&str> {
        let (text, train, _) = self.split()?;
        Ok(&text[..*train])
    }

    fn held_out(&self) -> Result<Option<&str>> {
        Ok(self.split()?.2.as_deref())
    }

    fn unlabeled(&self) -> Result<Option<&str>> {
        if self.unlabeled.get().is_none() {
            let text = self.spec.unlabeled_data.as_deref().map(|path| self.files.read_text(path)).transpose()?;
            let _ = self.unlabeled.set(text);
        }
        Ok(self.unlabeled.get().and_then(Option::as_deref))
    }
}

/// An encoder checkpoint turned into a multi-task one (tasks.json, model.safetensors) with a
/// fresh head per --task, each as a single-task run would add it for the task's data.
fn with_task_heads(files: &dyn Files, config_json: &[u8], safetensors: Vec<u8>, spec: &RunSpec) -> Result<(Vec<u8>, Vec<u8>)> {
    if spec.tasks.is_empty() {
        return Err(arg_err!(
            "train",
            "objective multi-task on an encoder checkpoint needs its tasks: --task NAME=KIND:TRAIN_FILE[,EVAL_FILE][@STAGE] for each"
        ));
    }
    let architecture =
        serde_json::from_slice::<serde_json::Value>(config_json).ok().and_then(|c| c["architectures"][0].as_str().map(String::from)).unwrap_or_default();
    if ["ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering", "ForMultipleChoice"].iter().any(|h| architecture.ends_with(h)) {
        return Err(arg_err!("train", 
            "a multi-task run starts from an encoder (…Model, or a pretraining checkpoint), not a fine-tuned `{architecture}`, whose head every task would share"
        ));
    }
    let mut tasks = Vec::new();
    for (i, task) in spec.tasks.iter().enumerate() {
        let seed = spec.seed.wrapping_add(i as u64);
        let text = || files.read_text(&task.data);
        let labels = match (task.pretraining, task.objective) {
            (Some(StructureTask::Capitalization), _) => CAPITALIZATION_LABELS.map(String::from).to_vec(),
            (Some(pretraining), _) => default_labels(pretraining.num_labels()),
            (None, Objective::Mlm | Objective::Qa) => Vec::new(),
            (None, Objective::Classify) => default_labels(num_labels(&tsv_rows(&text()?)?.into_iter().map(|(_, label)| label).collect::<Vec<_>>())),
            (None, Objective::TokenClassify) => label_names(&text()?)?,
            (None, other) => {
                return Err(arg_err!("train", "task `{}`: a multi-task run trains mlm, classify, token-classify and qa tasks, not {other}", task.name))
            }
        };
        let (config, weights) = with_head(task.objective, config_json, safetensors.clone(), &labels, seed)?;
        let config: serde_json::Value = serde_json::from_slice(&config).map_err(|e| arg_err!("train", "task `{}`'s config: {e}", task.name))?;
        // ERNIE 2.0: each task's id in the task-type embeddings, when the model has them.
        let task_type_id = (config["use_task_id"].as_bool() == Some(true)).then_some(i as u32);
        tasks.push((TaskSpec { name: task.name.clone(), objective: task.objective, config, task_type_id }, weights));
    }
    multi_task_checkpoint(tasks)
}

/// A multi-task folder (config.json, tasks.json, model.safetensors): every task's model over
/// the shared encoder, --dropout or --drop-mult applied to each task's config.
fn load_multi_task(
    gpu: &Device,
    config_json: Vec<u8>,
    tasks_json: Vec<u8>,
    safetensors: Vec<u8>,
    tokenizer_json: TokenizerFiles,
    spec: &RunSpec,
) -> Result<Loaded> {
    let tasks_json = match (spec.dropout, spec.drop_mult) {
        (None, None) => tasks_json,
        _ => {
            let mut tasks = parse_tasks(&tasks_json)?;
            for task in &mut tasks {
                let config = run_dropouts(serde_json::to_vec(&task.config).map_err(|e| arg_err!("train", "tasks.json: {e}"))?, spec)?;
                task.config = serde_json::from_slice(&config).map_err(|e| arg_err!("train", "tasks.json: {e}"))?;
            }
            serde_json::to_vec_pretty(&tasks).map_err(|e| arg_err!("train", "tasks.json: {e}"))?
        }
    };
    let checkpoint = Checkpoint::from_bytes(safetensors)?;
    let weights = Weights::new(gpu, &checkpoint).recording();
    let model = Box::new(MultiTaskModel::load(&tasks_json, &weights)?);
    let params = Parameters::from_weights(&weights)?;
    let mut files = vec![("config.json", config_json), ("tasks.json", tasks_json)];
    files.extend(tokenizer_json.files());
    Ok(Loaded { model, params, folder: ModelFolder { files } })
}

/// A family's joint folder (ELECTRA's generator and discriminator over their shared
/// embeddings), --dropout or --drop-mult applied to both configs.
fn load_joint(
    gpu: &Device,
    joint: &JointFolder,
    config_json: Vec<u8>,
    other_config: Vec<u8>,
    safetensors: Vec<u8>,
    tokenizer_json: TokenizerFiles,
    spec: &RunSpec,
) -> Result<Loaded> {
    let (config_json, other_config) = (run_dropouts(config_json, spec)?, run_dropouts(other_config, spec)?);
    let checkpoint = Checkpoint::from_bytes(safetensors)?;
    let weights = Weights::new(gpu, &checkpoint).recording();
    let model = (joint.load)(&config_json, &other_config, &weights)?;
    let params = Parameters::from_weights(&weights)?;
    let mut files = vec![("config.json", config_json), (joint.other_config, other_config)];
    files.extend(tokenizer_json.files());
    Ok(Loaded { model, params, folder: ModelFolder { files } })
}

/// The model of these files as the run trains it: its dropouts set by --dropout or
/// multiplied by --drop-mult when given, and the objective's task head (a classifier for
/// --data's labels, a tagger, a span head, a multiple-choice head) added when the checkpoint
/// has none.
pub fn load_files(
    gpu: &Device,
    files: &dyn Files,
    config_json: Vec<u8>,
    safetensors: Vec<u8>,
    tokenizer_json: TokenizerFiles,
    spec: &RunSpec,
) -> Result<Loaded> {
    let family = family_of(&config_json)?;
    family.check_trains(spec.objective)?;
    let architecture =
        serde_json::from_slice::<serde_json::Value>(&config_json).ok().and_then(|c| c["architectures"][0].as_str().map(String::from)).unwrap_or_default();
    match spec.objective {
        Objective::Classify => has_trained_head(spec, architecture.ends_with("ForSequenceClassification"), "sequence-classification head")?,
        Objective::TokenClassify => has_trained_head(spec, architecture.ends_with("ForTokenClassification"), "token-classification head")?,
        Objective::Qa => has_trained_head(spec, architecture.ends_with("ForQuestionAnswering"), "span head (…ForQuestionAnswering)")?,
        Objective::MultipleChoice => has_trained_head(spec, architecture.ends_with("ForMultipleChoice"), "multiple-choice head")?,
        _ => {}
    }
    // The head the objective trains, added when the checkpoint has none: a classifier for
    // --data's labels, a tagger for its tags, a span or multiple-choice head.
    let labels = match (spec.objective, &spec.data) {
        (Objective::TokenClassify, Some(data)) => Some(tag_names(&label_names(&files.read_text(data)?)?, spec)?),
        (Objective::Qa | Objective::MultipleChoice, _) => Some(Vec::new()),
        _ => data_labels(files, spec)?.map(|count| class_names(count, spec)).transpose()?,
    };
    let (config_json, safetensors) = match labels {
        Some(labels) => family.with_head(spec.objective, &config_json, safetensors, &labels, spec.seed)?,
        None => (config_json, safetensors),
    };
    let config_json = match spec.objective {
        Objective::Classify | Objective::TokenClassify if !spec.labels.is_empty() => renamed_classes(&config_json, &spec.labels)?,
        _ => config_json,
    };
    let config_json = run_dropouts(config_json, spec)?;
    let checkpoint = Checkpoint::from_bytes(safetensors)?;
    let weights = Weights::new(gpu, &checkpoint).recording();
    let model = family_of(&config_json)?.load_trainable(&config_json, &weights, spec.objective)?;
    if spec.unlabeled_data.is_some() && !model.learns_from_unlabeled_text() {
        return Err(arg_err!("train", "--unlabeled-data is cross-view training's unlabelled text, and {} does not learn from it", model.architecture()));
    }
    if spec.unlabeled_data.is_some() && spec.grad_accum > 1 {
        return Err(arg_err!(
            "train",
            "cross-view training takes a labelled and an unlabelled batch in turn, each a step: --grad-accum {} would mix them in one step",
            spec.grad_accum
        ));
    }
    let params = Parameters::from_weights(&weights)?;
    let mut files = vec![("config.json", config_json)];
    files.extend(tokenizer_json.files());
    Ok(Loaded { model, params, folder: ModelFolder { files } })
}

/// For `classify` with --data: the number of classes its labels name.
fn data_labels(files: &dyn Files, spec: &RunSpec) -> Result<Option<usize>> {
    match (spec.objective, &spec.data) {
        (Objective::Classify, Some(data)) => {
            let labels: Vec<i64> = tsv_rows(&files.read_text(data)?)?.into_iter().map(|(_, label)| label).collect();
            Ok(Some(num_labels(&labels)))
        }
        _ => Ok(None),
    }
}

/// The names of the `count` classes classify's data labels: --labels (at least that many),
/// else transformers' defaults.
fn class_names(count: usize, spec: &RunSpec) -> Result<Vec<String>> {
    match spec.labels.len() {
        0 => Ok(default_labels(count)),
        named if named < count => Err(arg_err!("train", "--data has labels up to {}, and --labels names {named} classes", count - 1)),
        _ => Ok(spec.labels.clone()),
    }
}

/// The tags of a token-classification head: --labels when given (holding every tag of the
/// data, `tags`), else the data's.
fn tag_names(tags: &[String], spec: &RunSpec) -> Result<Vec<String>> {
    if spec.labels.is_empty() {
        return Ok(tags.to_vec());
    }
    match tags.iter().find(|tag| !spec.labels.contains(tag)) {
        Some(tag) => Err(arg_err!("train", "--data has the tag `{tag}`, which --labels does not name ({})", spec.labels.join(", "))),
        None => Ok(spec.labels.clone()),
    }
}

/// A classifier's config.json with its classes named `labels` (id2label, label2id): as many
/// as its head has.
fn renamed_classes(config_json: &[u8], labels: &[String]) -> Result<Vec<u8>> {
    let config: serde_json::Value = serde_json::from_slice(config_json).map_err(|e| arg_err!("train", "config.json: {e}"))?;
    let classes = config["id2label"].as_object().map_or(0, |names| names.len());
    if classes != labels.len() {
        return Err(arg_err!("train", "the model's classifier has {classes} classes, and --labels names {}", labels.len()));
    }
    let architecture = config["architectures"][0].as_str().unwrap_or_default().to_string();
    with_labels(config, &architecture, labels)
}

/// Refuses to score, with --eval-only, a model without the trained task head (the head a
/// run would add is random).
fn has_trained_head(spec: &RunSpec, has_head: bool, head: &str) -> Result<()> {
    if spec.eval_only && !has_head {
        return Err(arg_err!("train", "--eval-only scores a trained model, and this one has no {head}"));
    }
    Ok(())
}

/// `config_json` with the run's dropouts: --dropout's probability for every one, or each of
/// its own multiplied by --drop-mult.
fn run_dropouts(config_json: Vec<u8>, spec: &RunSpec) -> Result<Vec<u8>> {
    Ok(match (spec.dropout, spec.drop_mult) {
        (Some(p), _) => with_dropout(&config_json, p)?,
        (None, Some(factor)) => with_dropout_scaled(&config_json, factor)?,
        (None, None) => config_json,
    })
}

/// Refuses --dropout and --drop-mult for the ELMo models, which have no dropout sites yet.
fn no_elmo_dropout(spec: &RunSpec) -> Result<()> {
    match (spec.dropout, spec.drop_mult) {
        (Some(p), _) if p > 0.0 => Err(arg_err!("train", "--dropout is not implemented for ELMo's biLM or its task head yet")),
        (_, Some(_)) => Err(arg_err!("train", "--drop-mult: ELMo's biLM and its task head have no dropouts to scale yet")),
        _ => Ok(()),
    }
}

/// A frozen ELMo with a task's scalar mix and a classifier for --data's labels (both added,
/// as [`with_task_head`] draws them, when the folder has none). Its checkpoints are ELMo
/// folders: options.json and model.safetensors with the mix and `classifier.*`.
fn load_elmo_classifier(gpu: &Device, files: &dyn Files, options_json: Vec<u8>, safetensors: Vec<u8>, spec: &RunSpec) -> Result<Loaded> {
    no_elmo_dropout(spec)?;
    let options = ElmoOptions::from_json(&options_json)?;
    let labels = data_labels(files, spec)?.ok_or_else(|| arg_err!("train", "objective classify needs --data (sentence<TAB>label lines)"))?;
    has_trained_head(spec, Checkpoint::from_bytes(safetensors.clone())?.contains("classifier.weight"), "classifier (classifier.weight)")?;
    let safetensors = with_task_head(safetensors, options.lstm.n_layers + 1, 2 * options.lstm.projection_dim, labels, spec.seed)?;
    let checkpoint = Checkpoint::from_bytes(safetensors)?;
    let weights = Weights::new(gpu, &checkpoint).recording();
    let model = Box::new(ElmoClassifier::load(options, &weights, labels)?);
    let params = Parameters::from_weights(&weights)?;
    Ok(Loaded { model, params, folder: ModelFolder { files: vec![("options.json", options_json)] } })
}

/// An ELMo biLM from its options.json, weights with a softmax over `vocab`, and the vocabulary.
fn load_bilm(gpu: &Device, options_json: Vec<u8>, safetensors: Vec<u8>, vocab: WordVocab, spec: &RunSpec) -> Result<Loaded> {
    no_elmo_dropout(spec)?;
    let checkpoint = Checkpoint::from_bytes(safetensors)?;
    let weights = Weights::new(gpu, &checkpoint).recording();
    let model = Box::new(ElmoBiLm::load(ElmoOptions::from_json(&options_json)?, &weights, vocab.len())?);
    let params = Parameters::from_weights(&weights)?;
    Ok(Loaded { model, params, folder: ModelFolder { files: vec![("options.json", options_json), ("vocab.txt", vocab.to_vocab_txt().into_bytes())] } })
}

/// Refuses an objective that the model of --arch or --model-init cannot train, before any
/// vocabulary is built. (A resumed run loads its checkpoint, whose objective was checked.)
pub fn check_family(files: &dyn Files, spec: &RunSpec) -> Result<()> {
    if spec.doc_stride.is_some() && spec.objective != Objective::Qa {
        return Err(arg_err!("train", "--doc-stride sets the overlap of qa's context windows, not a setting of {}", spec.objective));
    }
    if spec.max_ngram != 1 && !matches!(spec.objective, Objective::Mlm | Objective::MlmNsp | Objective::MlmSop) {
        return Err(arg_err!("train", "--max-ngram sets the spans the masked LM selects, not a setting of {}", spec.objective));
    }
    if !spec.tasks.is_empty() && spec.objective != Objective::MultiTask {
        return Err(arg_err!("train", "--task names a task of objective multi-task, not of {}", spec.objective));
    }
    let masked_lm = matches!(spec.objective, Objective::Mlm | Objective::MlmNsp | Objective::MlmSop);
    if !masked_lm && (spec.mask_level != MaskSchedule::default() || spec.gazetteer.is_some()) {
        return Err(arg_err!("train", "--mask-level and --gazetteer set the masked LM's units, not settings of {}", spec.objective));
    }
    if spec.gazetteer.is_some() && !spec.mask_level.uses(MaskLevel::Entity) {
        return Err(arg_err!("train", "--gazetteer finds the entities of entity-level masking, but --mask-level {} has no entity stage", spec.mask_level));
    }
    if spec.group_by_length && !matches!(spec.objective, Objective::Classify | Objective::TokenClassify) {
        return Err(arg_err!("train", "--group-by-length groups the labelled sentences of classify and token-classify, not the data of {}", spec.objective));
    }
    let elmo = match (&spec.arch, &spec.model_init) {
        _ if spec.resume => return Ok(()),
        (Some(arch), _) => arch == "elmo",
        (None, Some(dir)) => files.is_file(&dir.join("options.json")),
        (None, None) => return Ok(()),
    };
    if spec.pretokenized && !elmo {
        return Err(arg_err!("train", "--pretokenized splits the words an ELMo reads; objective {} reads text with the model's tokenizer", spec.objective));
    }
    if let (Some(arch), false) = (&spec.arch, elmo) {
        let family = fresh_family(arch)?;
        if let Some(joint) = family.training.and_then(|t| t.joint_folder()).filter(|j| j.objective != spec.objective) {
            return Err(arg_err!(
                "train",
                "--arch {arch} builds an {} (config.json and {}), trained with objective {}, not {}",
                joint.name,
                joint.other_config,
                joint.objective,
                spec.objective
            ));
        }
        family.check_trains(spec.objective)?;
    }
    match (elmo, spec.objective) {
        (true, Objective::Classify) if spec.arch.is_some() => Err(arg_err!("train", "objective classify trains a task head on a pretrained ELMo: give the ELMo with --model-init (--arch elmo builds a biLM to pretrain with objective bilm)")),
        (true, Objective::BiLm | Objective::Classify) | (false, Objective::Clm | Objective::Mlm | Objective::MlmNsp | Objective::MlmSop | Objective::Rtd | Objective::Classify | Objective::TokenClassify | Objective::Qa | Objective::MultipleChoice | Objective::Translation | Objective::Electra) => Ok(()),
        (true, other) => Err(arg_err!("train", "an ELMo trains with objective bilm (its biLM) or classify (its features), not {other}")),
        (false, Objective::BiLm) => Err(arg_err!("train", "objective bilm trains ELMo (--arch elmo, or an ELMo folder with options.json)")),
        (false, Objective::MultiTask) => match &spec.model_init {
            Some(dir) if files.is_file(&dir.join("tasks.json")) => Ok(()),
            Some(_) if spec.replay_batches.is_some() => Err(arg_err!("train", "replayed multi-task batches name tasks.json's tasks: --model-init a multi-task folder")),
            Some(_) => Ok(()),
            None => Err(arg_err!("train", "objective multi-task fine-tunes an encoder checkpoint (with --task for each task) or a multi-task folder (tasks.json) given with --model-init")),
        },
    }
}

/// `--tokenizer words:N` learnt from the training part of --data.
fn train_word_vocab(files: &dyn Files, spec: &RunSpec) -> Result<WordVocab> {
    let size = word_vocab_size(&spec.tokenizer)?;
    let data = spec.data.as_ref().ok_or_else(|| arg_err!("train", "--tokenizer {} builds its vocabulary from --data", spec.tokenizer))?;
    let text = files.read_text(data)?;
    let (corpus, _) = split_corpus(files, spec, spec.objective, &text, spec.eval_data.as_deref())?;
    log::info!("counting the words of {:.1} MB of text for a vocabulary of {size}", corpus.len() as f64 / 1e6);
    WordVocab::train(corpus, spec.word_split(), size)
}

/// A fresh model of `--arch` with its tokenizer: a character vocabulary covers all of
/// --data (it cannot represent an unseen character); a trained one learns from the training
/// part only.
pub fn from_scratch(gpu: &Device, files: &dyn Files, spec: &RunSpec, arch: &str) -> Result<Loaded> {
    if arch == "elmo" {
        let options_json = match &spec.elmo_options {
            Some(path) => files.read(path)?,
            None => fresh_options_json(spec.layers(), spec.hidden)?,
        };
        let options = ElmoOptions::from_json(&options_json)?;
        let vocab = train_word_vocab(files, spec)?;
        let safetensors = init_bilm_safetensors(&options, vocab.len(), spec.seed)?;
        return load_bilm(gpu, options_json, safetensors, vocab, spec);
    }
    let family = fresh_family(arch)?;
    let (pads, make) = match family.require_training()?.fresh() {
        Some(&Fresh::Shaped { pads, make }) => (pads, make),
        Some(&Fresh::Learnt(make)) => return load_folder(gpu, files, make(&run_data(spec, &RunFiles::new(files, spec)))?, spec),
        None => return Err(arg_err!("train", "no fresh {} model is made", family.name)),
    };
    // Its sizes are checked before a tokenizer is trained for it.
    let shape = FreshShape { layers: spec.layers(), heads: spec.heads, width: spec.hidden, context: spec.context.or(spec.seq_len).unwrap_or(128) };
    shape.validate(1)?;
    let tokenizer_spec = TokenizerSpec::parse(&spec.tokenizer, files)?;
    let tokenizer_json = match &tokenizer_spec {
        TokenizerSpec::File(path) => files.read(path)?,
        tokenizer_spec => {
            let data = spec.data.as_ref().ok_or_else(|| arg_err!("train", "--tokenizer {} builds its vocabulary from --data", spec.tokenizer))?;
            let text = files.read_text(data)?;
            let corpus =
                if *tokenizer_spec == TokenizerSpec::Char { &text[..] } else { split_corpus(files, spec, spec.objective, &text, spec.eval_data.as_deref())?.0 };
            if *tokenizer_spec != TokenizerSpec::Char {
                log::info!("training the {} tokenizer on {:.1} MB of text", spec.tokenizer, corpus.len() as f64 / 1e6);
            }
            tokenizer_spec.build(files, corpus)?
        }
    };
    let tokenizer = TextTokenizer::from_bytes(&tokenizer_json)?;
    let pad = match pads {
        true => Some(
            tokenizer
                .token_to_id("[PAD]")
                .or_else(|| tokenizer.token_to_id("<pad>"))
                .ok_or_else(|| arg_err!("train", "an encoder's tokenizer needs a [PAD] (or <pad>) token (use --tokenizer wordpiece:N)"))?,
        ),
        false => None,
    };
    // A decoder's text begins and ends with the end-of-text token.
    let eos = tokenizer.token_to_id(END_OF_TEXT).filter(|_| !pads);
    let folder = make(&shape, &FreshVocabulary { size: tokenizer.vocab_size(), pad, eos }, spec.seed)?;
    let mut folder = folder;
    folder.files.push(("tokenizer.json", tokenizer_json));
    load_folder(gpu, files, folder, spec)
}

/// A folder as the run trains it: a joint folder's models (ELECTRA's pretraining folder),
/// else the one of config.json.
fn load_folder(gpu: &Device, files: &dyn Files, mut folder: TrainingFolder, spec: &RunSpec) -> Result<Loaded> {
    let (config_json, safetensors) = (folder.take_required("config.json")?, folder.take_required("model.safetensors")?);
    let joint = family_of(&config_json)?.training.and_then(|t| t.joint_folder());
    let joint = joint.and_then(|joint| Some((joint, folder.take(joint.other_config)?)));
    let tokenizer = TokenizerFiles { json: folder.take("tokenizer.json"), config: folder.take("tokenizer_config.json"), target: folder.take(TARGET_TOKENIZER) };
    match joint {
        Some((joint, other_config)) => load_joint(gpu, joint, config_json, other_config, safetensors, tokenizer, spec),
        None => load_files(gpu, files, config_json, safetensors, tokenizer, spec),
    }
}
