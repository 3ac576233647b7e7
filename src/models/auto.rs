//! A model folder in the Hugging Face layout, and the model its `config.json` describes
//! (`model_type` picks the family, `architectures` the head).

use serde::Deserialize;

use super::bert::BertModel;
use super::config::{BertConfig, Gpt2Config, OpenAiGptConfig};
use super::gpt::OpenAiGptModel;
use super::gpt2::Gpt2Model;
use crate::error::{Result, SesameError};
use crate::tokenize::TextTokenizer;
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
