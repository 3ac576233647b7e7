//! `sesame generate`: continues a prompt with a GPT-2 / GPT language model, streaming the
//! text as tokens arrive, or printing `{"ids", "text", "new_tokens"}` with `--json` (ids and
//! text include the prompt, as transformers' `generate` and `text-generation` return them).

use std::io::Write;
use std::path::PathBuf;

use sesame::error::{Result, SesameError};
use sesame::generate::{generate, CausalLm, GenerationConfig, TextStream};
use sesame::models::auto::AutoModel;
use sesame::tokenize::TextTokenizer;
use sesame::Gpu;

use super::{print_json, LoadedModel};

#[derive(clap::Args)]
pub struct GenerateArgs {
    /// A GPT-2 or GPT model folder with a language-model head.
    #[arg(long)]
    model: PathBuf,
    #[arg(long)]
    prompt: String,
    #[arg(long, default_value_t = 20)]
    max_new_tokens: usize,
    /// 0: greedy decoding; above 0: sample from softmax(logits / temperature).
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    /// Sample among the k most likely tokens only (0: all; at most 256).
    #[arg(long, default_value_t = 0)]
    top_k: usize,
    /// Sample among the most likely tokens covering this probability mass.
    #[arg(long, default_value_t = 1.0)]
    top_p: f32,
    /// Seed of the sampler, for reproducible samples.
    #[arg(long)]
    seed: Option<u64>,
    /// Print one JSON object at the end instead of streaming text.
    #[arg(long)]
    json: bool,
}

#[derive(serde::Serialize)]
struct Generated {
    ids: Vec<u32>,
    text: String,
    new_tokens: usize,
}

async fn run_with<M: CausalLm>(model: &M, tokenizer: &TextTokenizer, prompt: Vec<u32>, config: &GenerationConfig, json: bool) -> Result<()> {
    let mut stream = TextStream::new(tokenizer, &prompt)?;
    if !json {
        print!("{}", stream.text()?);
    }
    let new = generate(model, std::slice::from_ref(&prompt), config, |_, token| {
        if let (false, Some(piece)) = (json, stream.push(token)) {
            print!("{piece}");
            let _ = std::io::stdout().flush();
        }
    })
    .await?
    .concat();
    if json {
        let ids = [prompt, new.clone()].concat();
        print_json(&Generated { text: tokenizer.decode(&ids, true)?, ids, new_tokens: new.len() })
    } else {
        println!();
        Ok(())
    }
}

pub fn run(gpu: &Gpu, args: GenerateArgs) -> Result<()> {
    let loaded = LoadedModel::load(gpu, &args.model, false)?;
    let (prompt, _) = loaded.encode("generate", &args.prompt, None)?;
    let config = GenerationConfig { max_new_tokens: args.max_new_tokens, temperature: args.temperature, top_k: args.top_k, top_p: args.top_p, seed: args.seed, eos_token_id: None };
    let tokenizer = loaded.tokenizer()?;
    pollster::block_on(async {
        match &loaded.model {
            AutoModel::Gpt2(m) => run_with(m, tokenizer, prompt, &config, args.json).await,
            AutoModel::OpenAiGpt(m) => run_with(m, tokenizer, prompt, &config, args.json).await,
            AutoModel::Bert(_) => Err(SesameError::InvalidArgument { op: "generate", message: "generation needs a GPT-2 or GPT model; BERT is an encoder".into() }),
        }
    })
}
