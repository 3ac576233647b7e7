//! A model folder in the Hugging Face layout, and the model its `config.json` describes
//! (`model_type` picks the family, `architectures` the head).

use serde::Deserialize;

use super::bert::{BertInputs, BertModel, ForwardOptions};
use super::config::{BertConfig, Gpt2Config, HeadConfig, OpenAiGptConfig};
use super::gpt::OpenAiGptModel;
use super::gpt2::{DecoderInputs, Gpt2Model};
use super::ModelOutput;
use crate::error::{arg_err, Result, SesameError};
use crate::generate::CausalLm;
use crate::gpu::Gpu;
use crate::tokenize::{Encoded, TextTokenizer};
use crate::weights::{Checkpoint, Weights};

/// The files of a model folder, in memory: natively read from a directory, in the browser
/// fetched or handed over by the page.
#[derive(Default)]
pub struct ModelFiles {
    pub config_json: Vec<u8>,
    pub model_safetensors: Vec<u8>,
    pub tokenizer_json: Option<Vec<u8>>,
    /// BERT's WordPiece vocabulary, used when there is no tokenizer.json.
    pub vocab_txt: Option<Vec<u8>>,
    /// GPT-2's BPE vocabulary and merges, used when there is no tokenizer.json.
    pub vocab_json: Option<Vec<u8>>,
    pub merges_txt: Option<Vec<u8>>,
    /// Read for `do_lower_case` when building a WordPiece tokenizer from vocab.txt.
    pub tokenizer_config_json: Option<Vec<u8>>,
}

impl ModelFiles {
    /// Reads a model directory: config.json and model.safetensors are required, the
    /// tokenizer files optional.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_dir(dir: &std::path::Path) -> Result<ModelFiles> {
        let read = |name: &str| std::fs::read(dir.join(name)).map_err(|e| SesameError::Io(format!("{}: {e}", dir.join(name).display())));
        Ok(ModelFiles { config_json: read("config.json")?, model_safetensors: read("model.safetensors")?, ..ModelFiles::read_tokenizer_files(dir)? })
    }

    /// Reads only the tokenizer files of a model directory (those present).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_tokenizer_files(dir: &std::path::Path) -> Result<ModelFiles> {
        let optional = |name: &str| {
            let path = dir.join(name);
            path.is_file().then(|| std::fs::read(&path).map_err(|e| SesameError::Io(format!("{}: {e}", path.display())))).transpose()
        };
        if !dir.is_dir() {
            return Err(SesameError::Io(format!("{}: not a model directory", dir.display())));
        }
        Ok(ModelFiles {
            tokenizer_json: optional("tokenizer.json")?,
            vocab_txt: optional("vocab.txt")?,
            vocab_json: optional("vocab.json")?,
            merges_txt: optional("merges.txt")?,
            tokenizer_config_json: optional("tokenizer_config.json")?,
            ..ModelFiles::default()
        })
    }

    /// Parses the weights, handing their bytes over (they are not copied).
    pub fn take_checkpoint(&mut self) -> Result<Checkpoint> {
        Checkpoint::from_bytes(std::mem::take(&mut self.model_safetensors))
    }

    /// The tokenizer: tokenizer.json, else vocab.txt (WordPiece), else vocab.json +
    /// merges.txt (byte-level BPE).
    pub fn tokenizer(&self) -> Result<TextTokenizer> {
        let text = |bytes: &[u8], name: &str| std::str::from_utf8(bytes).map(str::to_owned).map_err(|e| SesameError::Tokenizer(format!("{name} is not UTF-8: {e}")));
        if let Some(json) = &self.tokenizer_json {
            return TextTokenizer::from_bytes(json);
        }
        if let Some(vocab) = &self.vocab_txt {
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
            return TextTokenizer::from_wordpiece_vocab(&text(vocab, "vocab.txt")?, lowercase);
        }
        if let (Some(vocab), Some(merges)) = (&self.vocab_json, &self.merges_txt) {
            return TextTokenizer::from_byte_level_bpe(vocab, &text(merges, "merges.txt")?);
        }
        Err(SesameError::Tokenizer("the model folder has no tokenizer.json, vocab.txt, or vocab.json + merges.txt".into()))
    }
}

/// Any model Sesame runs.
pub enum AutoModel {
    Bert(BertModel),
    Gpt2(Gpt2Model),
    OpenAiGpt(OpenAiGptModel),
}

impl AutoModel {
    /// The longest sequence the model takes (its position embeddings).
    pub fn max_positions(&self) -> usize {
        match self {
            AutoModel::Bert(m) => m.config.max_position_embeddings,
            AutoModel::Gpt2(m) => m.config.n_positions,
            AutoModel::OpenAiGpt(m) => m.config.n_positions,
        }
    }

    /// What a user interface shows of a model.
    pub fn summary(&self) -> ModelSummary {
        let (model_type, layers, heads, hidden_size, vocab_size) = match self {
            AutoModel::Bert(m) => ("bert", m.config.num_hidden_layers, m.config.num_attention_heads, m.config.hidden_size, m.config.vocab_size),
            AutoModel::Gpt2(m) => ("gpt2", m.config.n_layer, m.config.n_head, m.config.n_embd, m.config.vocab_size),
            AutoModel::OpenAiGpt(m) => ("openai-gpt", m.config.n_layer, m.config.n_head, m.config.n_embd, m.config.vocab_size),
        };
        let head = self.head_config();
        let default = match self {
            AutoModel::Bert(_) => "BertModel",
            AutoModel::Gpt2(_) => "GPT2Model",
            AutoModel::OpenAiGpt(_) => "OpenAIGPTModel",
        };
        let architecture = head.architecture(default).to_string();
        let labels = if architecture.ends_with("Classification") { (0..head.num_labels()).map(|i| head.label(i)).collect() } else { Vec::new() };
        ModelSummary { model_type, architecture, layers, heads, hidden_size, vocab_size, max_positions: self.max_positions(), labels }
    }

    /// The BERT model, or an error saying that `op` needs one.
    pub fn bert(&self, op: &'static str) -> Result<&BertModel> {
        match self {
            AutoModel::Bert(m) => Ok(m),
            _ => Err(arg_err!(op, "needs a BERT model, this one is `{}`", self.summary().architecture)),
        }
    }

    /// The model as a left-to-right language model, or an error saying that `op` needs one.
    pub fn causal_lm(&self, op: &'static str) -> Result<&dyn CausalLm> {
        match self {
            AutoModel::Gpt2(m) => Ok(m),
            AutoModel::OpenAiGpt(m) => Ok(m),
            AutoModel::Bert(_) => Err(arg_err!(op, "needs a GPT-2 or GPT language model; BERT is an encoder")),
        }
    }

    /// The config fields that choose the task head (architecture, labels, padding).
    pub fn head_config(&self) -> &HeadConfig {
        match self {
            AutoModel::Bert(m) => &m.config.head,
            AutoModel::Gpt2(m) => &m.config.head,
            AutoModel::OpenAiGpt(m) => &m.config.head,
        }
    }

    /// One forward pass over a batch of ids; outputs are named as transformers names them.
    pub fn forward(&self, batch: &IdsBatch, options: ForwardOptions) -> Result<ModelOutput> {
        batch.validate()?;
        let decoder_inputs = || -> Result<DecoderInputs<'_>> {
            if batch.token_type_ids.is_some() {
                return Err(arg_err!("forward", "token_type_ids given for a model without token types"));
            }
            Ok(DecoderInputs { input_ids: &batch.input_ids, attention_mask: batch.attention_mask.as_deref(), position_ids: None, batch: batch.batch, seq: batch.seq })
        };
        match self {
            AutoModel::Bert(m) => {
                let inputs = BertInputs { input_ids: &batch.input_ids, attention_mask: batch.attention_mask.as_deref(), token_type_ids: batch.token_type_ids.as_deref(), batch: batch.batch, seq: batch.seq };
                m.forward(&inputs, options)
            }
            AutoModel::Gpt2(m) => m.forward(&decoder_inputs()?, options, None),
            AutoModel::OpenAiGpt(m) => m.forward(&decoder_inputs()?, options, None),
        }
    }

    /// Loads the model of `config_json` from `weights` (whose checkpoint can be dropped
    /// afterwards: the weights then live on the GPU only).
    pub fn load(config_json: &[u8], weights: &Weights) -> Result<AutoModel> {
        #[derive(Deserialize)]
        struct ModelType {
            model_type: Option<String>,
        }
        let kind: ModelType = serde_json::from_slice(config_json).map_err(|e| SesameError::Checkpoint(format!("config.json: {e}")))?;
        let config = config_json;
        match kind.model_type.as_deref() {
            Some("bert") => Ok(AutoModel::Bert(BertModel::load(BertConfig::from_json(config)?, weights)?)),
            Some("gpt2") => Ok(AutoModel::Gpt2(Gpt2Model::load(Gpt2Config::from_json(config)?, weights)?)),
            Some("openai-gpt") => Ok(AutoModel::OpenAiGpt(OpenAiGptModel::load(OpenAiGptConfig::from_json(config)?, weights)?)),
            Some(other) => Err(SesameError::Checkpoint(format!("config.json: unknown model_type `{other}` (supported: bert, gpt2, openai-gpt)"))),
            None => Err(SesameError::Checkpoint("config.json has no model_type".into())),
        }
    }
}

/// A model's family, head and sizes.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ModelSummary {
    pub model_type: &'static str,
    /// The transformers class (`BertForMaskedLM`, `GPT2LMHeadModel`, …).
    pub architecture: String,
    pub layers: usize,
    pub heads: usize,
    pub hidden_size: usize,
    pub vocab_size: usize,
    pub max_positions: usize,
    /// A classification head's labels, by index.
    pub labels: Vec<String>,
}

/// A batch of token ids, row-major [batch, seq], as a tokenizer returns them.
#[derive(Clone, Debug, Default)]
pub struct IdsBatch {
    pub input_ids: Vec<u32>,
    /// 1 for real tokens, 0 for padding; default all 1.
    pub attention_mask: Option<Vec<u32>>,
    /// BERT's segment ids; default all 0.
    pub token_type_ids: Option<Vec<u32>>,
    pub batch: usize,
    pub seq: usize,
}

impl IdsBatch {
    fn validate(&self) -> Result<()> {
        let expected = self.batch * self.seq;
        let check = |name: &str, len: usize| {
            if len != expected {
                return Err(arg_err!("forward", "{name} has {len} ids, but batch {} × seq {} is {expected}", self.batch, self.seq));
            }
            Ok(())
        };
        if expected == 0 {
            return Err(arg_err!("forward", "the batch is empty (batch {}, seq {})", self.batch, self.seq));
        }
        check("input_ids", self.input_ids.len())?;
        self.attention_mask.as_ref().map_or(Ok(()), |m| check("attention_mask", m.len()))?;
        self.token_type_ids.as_ref().map_or(Ok(()), |t| check("token_type_ids", t.len()))
    }
}

/// A model folder loaded onto the GPU, with its tokenizer: what the CLI commands and the
/// browser library work on.
pub struct LoadedModel {
    pub model: AutoModel,
    /// The tokenizer, or why the folder has none (only work on text needs one).
    tokenizer: std::result::Result<TextTokenizer, String>,
}

impl LoadedModel {
    /// Uploads the weights of `files` (whose bytes are freed once on the GPU). With
    /// `truncate`, texts longer than the model's positions are cut to fit; without it they
    /// are an error that says so.
    pub fn from_files(gpu: &Gpu, mut files: ModelFiles, truncate: bool) -> Result<LoadedModel> {
        let checkpoint = files.take_checkpoint()?;
        let model = AutoModel::load(&files.config_json, &Weights::new(gpu, &checkpoint))?;
        drop(checkpoint);
        let tokenizer = files.tokenizer().and_then(|mut tokenizer| {
            if truncate {
                tokenizer.truncate_to(Some(model.max_positions()))?;
            }
            Ok(tokenizer)
        });
        Ok(LoadedModel { model, tokenizer: tokenizer.map_err(|e| e.to_string()) })
    }

    /// Reads and loads the model folder `dir`.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load(gpu: &Gpu, dir: &std::path::Path, truncate: bool) -> Result<LoadedModel> {
        LoadedModel::from_files(gpu, ModelFiles::read_dir(dir)?, truncate)
    }

    pub fn tokenizer(&self) -> Result<&TextTokenizer> {
        self.tokenizer.as_ref().map_err(|e| SesameError::Tokenizer(format!("{e} (needed to read text)")))
    }

    /// Ids and token types of a text (or pair), checked against the model's positions.
    pub fn encode(&self, op: &'static str, text: &str, pair: Option<&str>) -> Result<(Vec<u32>, Vec<u32>)> {
        let encoded = self.encode_detailed(op, text, pair)?;
        Ok((encoded.ids, encoded.type_ids))
    }

    /// [`LoadedModel::encode`] with offsets and special-token marks.
    pub fn encode_detailed(&self, op: &'static str, text: &str, pair: Option<&str>) -> Result<Encoded> {
        non_empty(op, text)?;
        if let Some(pair) = pair {
            non_empty(op, pair)?;
        }
        let encoded = self.tokenizer()?.encode_detailed(text, pair)?;
        let max = self.model.max_positions();
        if encoded.ids.len() > max {
            return Err(arg_err!(op, "the text is {} tokens, longer than the model's {max} positions (turn truncation on to cut it: --truncate on the command line, {{ truncation: true }} in JavaScript)", encoded.ids.len()));
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
