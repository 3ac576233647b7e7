//! `sesame tokenize`: token ids of texts with the model's tokenizer, one line per text
//! (`--json`: a JSON array of ids; otherwise the tokens and their ids).

use std::path::PathBuf;

use sesame::error::Result;
use sesame::models::auto::ModelFiles;
use sesame::models::registry::family_of;
use sesame::tokenize::Vocabulary;

use super::{non_empty, print_json, read_bytes, read_text};

#[derive(clap::Args)]
pub struct TokenizeArgs {
    /// A model folder or hub id with tokenizer.json, vocab.txt, or vocab.json + merges.txt.
    #[arg(long)]
    model: PathBuf,
    /// Texts to tokenize.
    #[arg(long, num_args = 1.., required_unless_present = "file", conflicts_with = "file")]
    text: Vec<String>,
    /// A file of texts, one per line.
    #[arg(long)]
    file: Option<PathBuf>,
    /// Leave out the model's special tokens ([CLS], [SEP], …).
    #[arg(long)]
    no_special_tokens: bool,
    /// One JSON array of ids per text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: &TokenizeArgs) -> Result<()> {
    let model = super::tokenizer_dir(&args.model)?;
    let files = ModelFiles::read_tokenizer_files(&model)?;
    // The family's vocabulary files, when the folder says its family; else GPT-2's BPE where
    // there is a vocab.json, BERT's WordPiece otherwise.
    let config = model.join("config.json");
    let vocabulary = match config.is_file() {
        true => family_of(&read_bytes(&config)?)?.vocabulary,
        false if files.vocab_json.is_some() => Vocabulary::ByteLevelBpe,
        false => Vocabulary::WordPiece,
    };
    let tokenizer = files.tokenizer(vocabulary)?;
    let file_text = args.file.as_deref().map(read_text).transpose()?;
    let texts: Vec<&str> = match &file_text {
        Some(contents) => contents.lines().collect(),
        None => args.text.iter().map(String::as_str).collect(),
    };
    for text in texts {
        // A file's blank lines tokenize to nothing (or just the special tokens); a text given
        // on the command line must not be blank.
        if args.file.is_none() {
            non_empty("tokenize", text)?;
        }
        let ids = tokenizer.encode(text, !args.no_special_tokens)?;
        if args.json {
            print_json(&ids)?;
        } else {
            let tokens: Vec<String> = ids.iter().map(|&id| format!("{}({id})", tokenizer.id_to_token(id).unwrap_or_default())).collect();
            println!("{}", tokens.join(" "));
        }
    }
    Ok(())
}
