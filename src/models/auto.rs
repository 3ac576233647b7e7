//! A model folder in the Hugging Face layout, and the model its `config.json` describes: the
//! family's loader from the [registry](super::registry) (`model_type`), its head from
//! `architectures`, its tokenizer from tokenizer.json or the family's vocabulary files.

use std::path::Path;

use serde::Deserialize;

use super::family::Family;
use super::registry::family_of;
use super::{Capability, IdsBatch, Model};
use crate::error::{arg_err, Result, SesameError};
use crate::files::Files;
use crate::gpu::Device;
use crate::quantize::{QuantFormat, WeightDtype};
use crate::tokenize::{Encoded, TextTokenizer, Vocabulary};
use crate::weights::{Checkpoint, Weights};

/// The files of a model folder, in memory: natively read from a directory, in the browser
/// fetched or handed over by the page.
#[derive(Default)]
pub struct ModelFiles {
    pub config_json: Vec<u8>,
    /// The weights: model.safetensors, or a sharded index and its shards.
    pub checkpoint: Checkpoint,
    pub tokenizer_json: Option<Vec<u8>>,
    /// BERT's WordPiece vocabulary, used when there is no tokenizer.json.
    pub vocab_txt: Option<Vec<u8>>,
    /// GPT-2's BPE vocabulary and merges, used when there is no tokenizer.json.
    pub vocab_json: Option<Vec<u8>>,
    pub merges_txt: Option<Vec<u8>>,
    /// Read for `do_lower_case` when building a WordPiece tokenizer from vocab.txt, and for
    /// the mask token.
    pub tokenizer_config_json: Option<Vec<u8>>,
    /// The SentencePiece model file present (`sentencepiece.bpe.model`, `spiece.model`),
    /// named in the error that asks for tokenizer.json.
    pub sentencepiece_model: Option<&'static str>,
    /// The precision to load the weight matrices in; None: as the folder stores them (its
    /// config's `sesame_quantization`, else f32).
    pub dtype: Option<WeightDtype>,
}

/// The key of config.json that says how `sesame quantize` stored a folder's matrices:
/// `{"format": "q8", "version": 2}` (transformers keeps unknown keys and ignores them). Version 2
/// stores q8's scales a block of 32 apiece; version 1 stored one a row (still read).
pub const QUANTIZATION_KEY: &str = "sesame_quantization";

/// The version of the layouts `sesame quantize` writes.
pub const QUANTIZATION_VERSION: u32 = 2;

/// The quantization a folder's config.json records (see [`QUANTIZATION_KEY`]), if any.
pub fn stored_quantization(config_json: &[u8]) -> Result<Option<QuantFormat>> {
    #[derive(Deserialize)]
    struct Stored {
        format: String,
        version: u32,
    }
    let config: serde_json::Value = serde_json::from_slice(config_json).map_err(|e| SesameError::Checkpoint(format!("config.json is not valid JSON: {e}")))?;
    let Some(stored) = config.get(QUANTIZATION_KEY).filter(|v| !v.is_null()) else { return Ok(None) };
    let bad = |message: String| SesameError::Checkpoint(format!("config.json: {QUANTIZATION_KEY}: {message}"));
    let stored = Stored::deserialize(stored).map_err(|e| bad(e.to_string()))?;
    if !(1..=QUANTIZATION_VERSION).contains(&stored.version) {
        return Err(bad(format!("version {} is not one this Sesame reads (1 to {QUANTIZATION_VERSION})", stored.version)));
    }
    stored.format.parse().map(Some).map_err(|_| bad(format!("unknown format `{}` (this Sesame reads f16, q8 and q4)", stored.format)))
}

/// What a model folder holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FolderKind {
    /// config.json: a Hugging Face-layout model of a family in the registry.
    HuggingFace,
    /// options.json (and no config.json): an ELMo.
    Elmo,
}

/// Tells a Hugging Face folder from an ELMo one, or says what `dir` lacks.
pub fn folder_kind(files: &dyn Files, dir: &Path) -> Result<FolderKind> {
    if !files.is_dir(dir) {
        return Err(SesameError::Io(format!("{}: not a model directory", dir.display())));
    }
    match (files.is_file(&dir.join("config.json")), files.is_file(&dir.join("options.json"))) {
        (true, _) => Ok(FolderKind::HuggingFace),
        (false, true) => Ok(FolderKind::Elmo),
        (false, false) => {
            Err(SesameError::Io(format!("{}: holds neither config.json (a Hugging Face-layout model) nor options.json (an ELMo)", dir.display())))
        }
    }
}

/// The names SentencePiece models go by in Hugging Face folders.
pub const SENTENCEPIECE_FILES: [&str; 2] = ["sentencepiece.bpe.model", "spiece.model"];

impl ModelFiles {
    /// Reads a model directory: config.json and the weights (model.safetensors, or
    /// model.safetensors.index.json and its shards, read a tensor at a time as the model
    /// loads) are required, the tokenizer files optional.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_dir(dir: &Path) -> Result<ModelFiles> {
        ModelFiles::read_from(&crate::files::Disk, dir)
    }

    /// [`ModelFiles::read_dir`] through `files`.
    pub fn read_from(files: &dyn Files, dir: &Path) -> Result<ModelFiles> {
        // Training folders of several models: their transformers folders are beside.
        for (file, parts) in [("generator_config.json", "discriminator/ or generator/"), ("tasks.json", "tasks/<name>/")] {
            if files.is_file(&dir.join(file)) {
                return Err(SesameError::Io(format!(
                    "{} holds several models ({file}), as training keeps them; load one from its {parts} folder",
                    dir.display()
                )));
            }
        }
        let tokenizer = ModelFiles::read_tokenizer_files_from(files, dir)?;
        Ok(ModelFiles { config_json: files.read(&dir.join("config.json"))?, checkpoint: Checkpoint::read_dir(files, dir)?, ..tokenizer })
    }

    /// Reads only the tokenizer files of a model directory (those present).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_tokenizer_files(dir: &Path) -> Result<ModelFiles> {
        ModelFiles::read_tokenizer_files_from(&crate::files::Disk, dir)
    }

    /// [`ModelFiles::read_tokenizer_files`] through `files`.
    pub fn read_tokenizer_files_from(files: &dyn Files, dir: &Path) -> Result<ModelFiles> {
        let optional = |name: &str| {
            let path = dir.join(name);
            files.is_file(&path).then(|| files.read(&path)).transpose()
        };
        if !files.is_dir(dir) {
            return Err(SesameError::Io(format!("{}: not a model directory", dir.display())));
        }
        Ok(ModelFiles {
            tokenizer_json: optional("tokenizer.json")?,
            vocab_txt: optional("vocab.txt")?,
            vocab_json: optional("vocab.json")?,
            merges_txt: optional("merges.txt")?,
            tokenizer_config_json: optional("tokenizer_config.json")?,
            sentencepiece_model: SENTENCEPIECE_FILES.into_iter().find(|name| files.is_file(&dir.join(name))),
            ..ModelFiles::default()
        })
    }

    /// The weights, handed over (they are not copied).
    pub fn take_checkpoint(&mut self) -> Checkpoint {
        std::mem::take(&mut self.checkpoint)
    }

    /// The tokenizer: tokenizer.json, else the family's vocabulary files (vocab.txt, or
    /// vocab.json + merges.txt).
    pub fn tokenizer(&self, vocabulary: Vocabulary) -> Result<TextTokenizer> {
        let text =
            |bytes: &[u8], name: &str| std::str::from_utf8(bytes).map(str::to_owned).map_err(|e| SesameError::Tokenizer(format!("{name} is not UTF-8: {e}")));
        if let Some(json) = &self.tokenizer_json {
            return TextTokenizer::from_files(json, self.tokenizer_config_json.as_deref());
        }
        match (vocabulary, &self.vocab_txt, &self.vocab_json, &self.merges_txt) {
            (Vocabulary::WordPiece, Some(vocab), _, _) => {
                #[derive(Deserialize)]
                struct TokenizerConfig {
                    do_lower_case: Option<bool>,
                }
                let lowercase = self
                    .tokenizer_config_json
                    .as_ref()
                    .and_then(|j| serde_json::from_slice::<TokenizerConfig>(j).ok())
                    .and_then(|c| c.do_lower_case)
                    .unwrap_or(true);
                TextTokenizer::from_wordpiece_vocab(&text(vocab, "vocab.txt")?, lowercase)
            }
            (Vocabulary::ByteLevelBpe, _, Some(vocab), Some(merges)) => TextTokenizer::from_byte_level_bpe(vocab, &text(merges, "merges.txt")?),
            (Vocabulary::RobertaBpe, _, Some(vocab), Some(merges)) => TextTokenizer::from_roberta_bpe(vocab, &text(merges, "merges.txt")?),
            (Vocabulary::WordPiece, ..) => Err(SesameError::Tokenizer("the model folder has no tokenizer.json or vocab.txt".into())),
            (Vocabulary::ByteLevelBpe | Vocabulary::RobertaBpe, ..) => Err(SesameError::Tokenizer("the model folder has no tokenizer.json, or vocab.json + merges.txt".into())),
            (Vocabulary::WordLevel, ..) => {
                Err(SesameError::Tokenizer("the model folder has no tokenizer.json (sesame convert-ulmfit writes one from the vocabulary)".into()))
            }
            (Vocabulary::SentencePiece, ..) => Err(SesameError::Tokenizer(match self.sentencepiece_model {
                Some(file) => format!("this model's tokenizer is a SentencePiece model ({file}), which Sesame reads only as tokenizer.json: save one with transformers (AutoTokenizer.from_pretrained(dir).save_pretrained(dir))"),
                None => "the model folder has no tokenizer.json (this family's SentencePiece tokenizer is read from tokenizer.json)".into(),
            })),
        }
    }

    /// The mask token tokenizer_config.json names (`mask_token`), if it names one.
    pub fn mask_token(&self) -> Option<String> {
        let config: serde_json::Value = serde_json::from_slice(self.tokenizer_config_json.as_ref()?).ok()?;
        match &config["mask_token"] {
            serde_json::Value::String(token) => Some(token.clone()),
            // An AddedToken: {"content": "<mask>", ...}.
            other => other["content"].as_str().map(str::to_string),
        }
    }
}

/// A model of any family, loaded: the model, its family, and the size of its weights.
pub struct AutoModel {
    model: Box<dyn Model>,
    pub family: &'static Family,
    /// Values in the weights it loaded (a tensor shared by several modules counts once).
    pub parameters: usize,
    /// Bytes those weights take on the device (quantized matrices as stored).
    pub weight_bytes: usize,
}

impl std::ops::Deref for AutoModel {
    type Target = dyn Model;
    fn deref(&self) -> &(dyn Model + 'static) {
        self.model.as_ref()
    }
}

impl AutoModel {
    /// Loads the model of `config_json` from `weights` (whose checkpoint can be dropped
    /// afterwards: the weights then live on the device only). Tensors of the checkpoint that
    /// no module reads are an error, except other heads' (as transformers drops them).
    pub fn load(config_json: &[u8], weights: &Weights) -> Result<AutoModel> {
        let family = family_of(config_json)?;
        let model = family.load_checked(config_json, weights)?;
        Ok(AutoModel { model, family, parameters: weights.parameter_count(), weight_bytes: weights.weight_bytes() })
    }

    /// What a user interface shows of a model.
    pub fn summary(&self) -> ModelSummary {
        let sizes = self.model.sizes();
        let capabilities = self.model.capabilities().list();
        let head = self.model.head_config();
        let mut tasks: Vec<&'static str> = capabilities.iter().map(|c| c.task()).collect();
        let inputs = self.model.inputs();
        // An NLI classifier (a label for entailment, over text pairs) classifies by
        // hypotheses too.
        if capabilities.contains(&Capability::SequenceClassification) && inputs.pairs && head.entailment_label().is_some() {
            tasks.push("zero-shot-classification");
        }
        let architecture = self.model.architecture().to_string();
        let labels = if capabilities.contains(&Capability::SequenceClassification) || capabilities.contains(&Capability::TokenClassification) {
            (0..head.num_labels()).map(|i| head.label(i)).collect()
        } else {
            Vec::new()
        };
        ModelSummary {
            model_type: self.family.model_type,
            family: self.family.name,
            architecture,
            capabilities,
            tasks,
            layers: sizes.layers,
            heads: sizes.heads,
            hidden_size: sizes.hidden_size,
            vocab_size: sizes.vocab_size,
            max_positions: self.model.max_positions(),
            token_types: inputs.token_types,
            task_types: inputs.task_types,
            parameters: self.parameters,
            weight_bytes: self.weight_bytes,
            labels,
            mask_token: None,
        }
    }

    /// The output holding `capability`'s result, or an error for `op` saying what this model
    /// can do instead.
    pub fn require(&self, capability: Capability, op: &'static str) -> Result<&'static str> {
        self.model.capabilities().output(capability, op, self.model.architecture())
    }

    /// The model as a left-to-right language model for `capability` (generation or
    /// perplexity), or an error for `op` saying what it can do instead.
    pub fn causal_lm(&self, capability: Capability, op: &'static str) -> Result<&dyn super::decoder::CausalLm> {
        self.require(capability, op)?;
        self.model.as_causal_lm().ok_or_else(|| arg_err!(op, "`{}` is not a left-to-right language model", self.model.architecture()))
    }
}

/// A model's family, head, sizes and what it can do.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ModelSummary {
    /// config.json's `model_type`.
    pub model_type: &'static str,
    /// The family's name (`RoBERTa`).
    pub family: &'static str,
    /// The transformers class (`BertForMaskedLM`, `GPT2LMHeadModel`, …).
    pub architecture: String,
    pub capabilities: Vec<Capability>,
    /// The pipelines it serves (`fill-mask`, `text-classification`, …).
    pub tasks: Vec<&'static str>,
    pub layers: usize,
    pub heads: usize,
    pub hidden_size: usize,
    pub vocab_size: usize,
    pub max_positions: usize,
    /// It reads token type (segment) ids.
    pub token_types: bool,
    /// It reads task type ids (ERNIE).
    pub task_types: bool,
    /// Values in its weights, each shared tensor once.
    pub parameters: usize,
    /// The memory its weights take on the device (f32).
    pub weight_bytes: usize,
    /// A classification head's labels, by index.
    pub labels: Vec<String>,
    /// The tokenizer's mask token (`[MASK]`, `<mask>`), for a model that fills masks.
    pub mask_token: Option<String>,
}

/// A model folder loaded onto the GPU, with its tokenizer: what the CLI commands and the
/// browser library work on.
pub struct LoadedModel {
    pub model: AutoModel,
    /// The tokenizer, or why the folder has none (only work on text needs one).
    tokenizer: std::result::Result<TextTokenizer, String>,
    /// The mask token tokenizer_config.json names, when it names one.
    mask_token: Option<String>,
}

impl LoadedModel {
    /// Uploads the weights of `files` (whose bytes are freed once on the GPU). With
    /// `truncate`, texts longer than the model's positions are cut to fit; without it they
    /// are an error that says so.
    pub fn from_files(gpu: &Device, mut files: ModelFiles, truncate: bool) -> Result<LoadedModel> {
        let checkpoint = files.take_checkpoint();
        let dtype = match files.dtype {
            Some(dtype) => Some(dtype),
            None => stored_quantization(&files.config_json)?.map(WeightDtype::Quantized),
        };
        let model = AutoModel::load(&files.config_json, &Weights::new(gpu, &checkpoint).with_dtype(dtype))?;
        drop(checkpoint);
        let tokenizer = files.tokenizer(model.family.vocabulary).and_then(|mut tokenizer| {
            if truncate {
                tokenizer.truncate_to(Some(model.max_positions()))?;
            }
            Ok(tokenizer)
        });
        Ok(LoadedModel { model, tokenizer: tokenizer.map_err(|e| e.to_string()), mask_token: files.mask_token() })
    }

    /// Reads and loads the model folder `dir`, its weight matrices as stored.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load(gpu: &Device, dir: &std::path::Path, truncate: bool) -> Result<LoadedModel> {
        LoadedModel::load_as(gpu, dir, truncate, None)
    }

    /// [`LoadedModel::load`] with the weight matrices in `dtype` (None: as stored).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load_as(gpu: &Device, dir: &std::path::Path, truncate: bool, dtype: Option<WeightDtype>) -> Result<LoadedModel> {
        LoadedModel::from_files(gpu, ModelFiles { dtype, ..ModelFiles::read_dir(dir)? }, truncate)
    }

    pub fn tokenizer(&self) -> Result<&TextTokenizer> {
        self.tokenizer.as_ref().map_err(|e| SesameError::Tokenizer(format!("{e} (needed to read text)")))
    }

    /// Ids and token types of a text (or pair), checked against the model's positions.
    pub fn encode(&self, op: &'static str, text: &str, pair: Option<&str>) -> Result<(Vec<u32>, Vec<u32>)> {
        let encoded = self.encode_detailed(op, text, pair)?;
        Ok((encoded.ids, encoded.type_ids))
    }

    /// Encoded (ids, token types) rows as one batch, right-padded with the model's padding id
    /// (RoBERTa's positions count its non-padding tokens), with token types only where the
    /// model reads them (a family with one type, RoBERTa's, is fed none, as its tokenizers
    /// return none).
    pub fn batch(&self, rows: &[(Vec<u32>, Vec<u32>)]) -> IdsBatch {
        let batch = IdsBatch::padded(rows, self.model.head_config().pad_token_id.unwrap_or(0));
        IdsBatch { token_type_ids: batch.token_type_ids.filter(|_| self.model.inputs().token_types), ..batch }
    }

    /// One encoded text (or pair) as a batch of one, with its tokens' characters for a model
    /// that reads them.
    pub fn single(&self, encoded: &Encoded) -> IdsBatch {
        IdsBatch { char_ids: encoded.char_ids.clone(), ..self.batch(&[(encoded.ids.clone(), encoded.type_ids.clone())]) }
    }

    /// The model's summary, with its tokenizer's mask token where it fills masks.
    pub fn summary(&self) -> ModelSummary {
        let mask_token = self.model.capabilities().has(Capability::FillMask).then(|| self.mask_token().ok().map(|(token, _)| token)).flatten();
        ModelSummary { mask_token, ..self.model.summary() }
    }

    /// The mask token and its id: the one tokenizer_config.json names, else the vocabulary's
    /// `[MASK]` or `<mask>`.
    pub fn mask_token(&self) -> Result<(String, u32)> {
        let tokenizer = self.tokenizer()?;
        let named = self.mask_token.as_ref().and_then(|token| tokenizer.token_to_id(token).map(|id| (token.clone(), id)));
        named
            .or_else(|| tokenizer.mask_token().map(|(token, id)| (token.to_string(), id)))
            .ok_or_else(|| SesameError::Tokenizer("the tokenizer has no mask token ([MASK] or <mask>)".into()))
    }

    /// The ids of a prompt to continue, and how many were cut from its start. A prompt longer
    /// than the model's positions is an error (cut, it is continued from a later place than
    /// its writer meant), unless `keep_end`: then its last positions are kept.
    pub fn encode_prompt(&self, op: &'static str, prompt: &str, keep_end: bool) -> Result<(Vec<u32>, usize)> {
        non_empty(op, prompt)?;
        // Whole: the loaded truncation cuts a text's end, which would continue a prompt from
        // the middle.
        let mut ids = self.tokenizer()?.encode_whole(prompt, true)?;
        let max = self.model.max_positions();
        if ids.len() <= max {
            return Ok((ids, 0));
        }
        if !keep_end {
            return Err(arg_err!(
                op,
                "the prompt is {} tokens, longer than the model's {max} positions: shorten it, or have its start cut (--truncate on the command line, {{ truncation: true }} in JavaScript)",
                ids.len()
            ));
        }
        let cut = ids.len() - max;
        ids.drain(..cut);
        Ok((ids, cut))
    }

    /// [`LoadedModel::encode`] with offsets and special-token marks.
    pub fn encode_detailed(&self, op: &'static str, text: &str, pair: Option<&str>) -> Result<Encoded> {
        non_empty(op, text)?;
        if let Some(pair) = pair {
            non_empty(op, pair)?;
            if !self.model.inputs().pairs {
                return Err(arg_err!(op, "`{}` reads one text, not a pair (pairs are for encoders)", self.model.architecture()));
            }
        }
        let mut encoded = self.tokenizer()?.encode_detailed(text, pair)?;
        let max = self.model.max_positions();
        if encoded.ids.len() > max {
            return Err(arg_err!(op, "the text is {} tokens, longer than the model's {max} positions (turn truncation on to cut it: --truncate on the command line, {{ truncation: true }} in JavaScript)", encoded.ids.len()));
        }
        let chars = self.model.inputs().chars_per_token;
        if chars > 0 {
            encoded.char_ids = Some(super::cvt::char_ids(&encoded.token_texts([text, pair.unwrap_or_default()]), chars));
        }
        Ok(encoded)
    }
}

/// An error naming `op` when `text` has nothing but whitespace.
pub fn non_empty(op: &'static str, text: &str) -> Result<()> {
    if text.trim().is_empty() {
        return Err(arg_err!(op, "the text is empty"));
    }
    Ok(())
}
