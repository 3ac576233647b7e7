//! GPT-2 and GPT (openai-gpt) against transformers, on the fixtures that
//! tests/reference/make_gpt_fixtures.py wrote: every head's outputs, all hidden states and
//! attention probabilities for a padded batch (1e-4 / 1e-5), cached decoding equal to the full
//! forward pass, and 32 greedy tokens identical to `generate(do_sample=False)`.

mod common;

use std::ops::ControlFlow;

use common::{compare, devices, fixture, gpu, inputs, read};
use sesame::models::decoder::{CausalLm, DecoderInputs, KvCache};
use sesame::models::gpt::{self, OpenAiGptModel};
use sesame::models::gpt2::{self, Gpt2Model};
use sesame::models::{ForwardOptions, ModelOutput};
use sesame::weights::{Checkpoint, Weights};
use sesame::{Device, Result};

const ALL: ForwardOptions = ForwardOptions { hidden_states: true, attentions: true, last_hidden_state: false, last_position_only: false };

fn gpt2_on(gpu: &Device, arch: &str) -> (std::path::PathBuf, Gpt2Model) {
    let dir = fixture("gpt2", arch);
    let model = gpt2::load(&read(&dir, "config.json"), &Weights::new(gpu, &Checkpoint::from_bytes(read(&dir, "model.safetensors")).unwrap())).unwrap();
    (dir, model)
}

fn gpt_on(gpu: &Device, arch: &str) -> (std::path::PathBuf, OpenAiGptModel) {
    let dir = fixture("openai-gpt", arch);
    let model = gpt::load(&read(&dir, "config.json"), &Weights::new(gpu, &Checkpoint::from_bytes(read(&dir, "model.safetensors")).unwrap())).unwrap();
    (dir, model)
}

fn gpt2(arch: &str) -> (std::path::PathBuf, Gpt2Model) {
    gpt2_on(gpu(), arch)
}

fn forward_fixture(dir: &std::path::Path, run: impl Fn(&DecoderInputs) -> Result<ModelOutput>, expected: &[&str]) {
    let i = inputs(dir);
    let decoder_inputs = DecoderInputs { input_ids: &i.input_ids, attention_mask: Some(&i.attention_mask), position_ids: None, batch: i.batch, seq: i.seq };
    compare(dir, &run(&decoder_inputs).unwrap(), expected);
}

#[test]
fn gpt2_model_matches_transformers() {
    for gpu in devices() {
        let (dir, m) = gpt2_on(gpu, "GPT2Model");
        forward_fixture(&dir, |x| m.forward(x, ALL, None), &["last_hidden_state", "hidden_states.2", "attentions.1"]);
    }
}

#[test]
fn gpt2_lm_head_matches_transformers() {
    for gpu in devices() {
        let (dir, m) = gpt2_on(gpu, "GPT2LMHeadModel");
        forward_fixture(&dir, |x| m.forward(x, ALL, None), &["logits"]);
    }
}

#[test]
fn a_sharded_checkpoint_loads_from_its_index_as_transformers_reads_it() {
    // transformers saved the LM fixture in three shards (make_sharded_fixture.py).
    let dir = fixture("gpt2", "GPT2LMHeadModel-sharded");
    assert!(!dir.join("model.safetensors").exists() && dir.join("model-00003-of-00003.safetensors").exists());
    for gpu in devices() {
        let loaded = sesame::models::auto::LoadedModel::load(gpu, &dir, false).unwrap();
        compare(&dir, &loaded.model.forward(&inputs(&dir).batch(), ALL).unwrap(), &["logits", "hidden_states.2"]);
    }
}

#[test]
fn gpt2_sequence_classification_matches_transformers() {
    for gpu in devices() {
        let (dir, m) = gpt2_on(gpu, "GPT2ForSequenceClassification");
        forward_fixture(&dir, |x| m.forward(x, ALL, None), &["logits"]);
    }
}

#[test]
fn gpt_model_matches_transformers() {
    for gpu in devices() {
        let (dir, m) = gpt_on(gpu, "OpenAIGPTModel");
        forward_fixture(&dir, |x| m.forward(x, ALL, None), &["last_hidden_state", "hidden_states.2", "attentions.1"]);
    }
}

#[test]
fn gpt_lm_head_matches_transformers() {
    for gpu in devices() {
        let (dir, m) = gpt_on(gpu, "OpenAIGPTLMHeadModel");
        forward_fixture(&dir, |x| m.forward(x, ALL, None), &["logits"]);
    }
}

fn logits(out: &ModelOutput) -> Vec<f32> {
    pollster::block_on(out.get("logits").unwrap().to_vec::<f32>()).unwrap()
}

/// Decoding token by token through the cache gives the logits of one full forward pass.
fn check_cache(step: impl Fn(&DecoderInputs, Option<&mut KvCache>) -> Result<ModelOutput>, mut cache: KvCache, vocab: usize) {
    let ids = [5u32, 17, 45, 98, 3, 60, 4];
    let full = logits(&step(&DecoderInputs { input_ids: &ids, attention_mask: None, position_ids: None, batch: 1, seq: ids.len() }, None).unwrap());
    // A 3-token prefill, then one token at a time.
    let mut got = logits(&step(&DecoderInputs { input_ids: &ids[..3], attention_mask: None, position_ids: None, batch: 1, seq: 3 }, Some(&mut cache)).unwrap());
    for t in 3..ids.len() {
        got.extend(logits(
            &step(&DecoderInputs { input_ids: &ids[t..t + 1], attention_mask: None, position_ids: None, batch: 1, seq: 1 }, Some(&mut cache)).unwrap(),
        ));
    }
    assert_eq!(cache.len, ids.len());
    assert_eq!(got.len(), ids.len() * vocab);
    let max_err = got.iter().zip(&full).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    eprintln!("cached decoding vs full forward: max abs err {max_err:.2e}");
    assert!(max_err <= 1e-4, "{max_err}");
    // The cache is full at its capacity: one more token is an error, not a panic.
    let err = step(&DecoderInputs { input_ids: &[1], attention_mask: None, position_ids: None, batch: 1, seq: 1 }, Some(&mut cache)).err().unwrap();
    assert!(err.to_string().contains("capacity"), "{err}");
}

#[test]
fn cached_decoding_equals_the_full_forward_pass() {
    for gpu in devices() {
        let (_, m) = gpt2_on(gpu, "GPT2LMHeadModel");
        check_cache(|x, c| m.forward(x, ForwardOptions::default(), c), m.new_cache(1, 7).unwrap(), 99);
        let (_, m) = gpt_on(gpu, "OpenAIGPTLMHeadModel");
        check_cache(|x, c| m.forward(x, ForwardOptions::default(), c), m.new_cache(1, 7).unwrap(), 99);
    }
}

#[test]
fn bad_inputs_are_clear_errors() {
    let (_, m) = gpt2("GPT2LMHeadModel");
    let opts = ForwardOptions::default();
    let long = vec![1u32; 49];
    let err = m.forward(&DecoderInputs { input_ids: &long, attention_mask: None, position_ids: None, batch: 1, seq: 49 }, opts, None).err().unwrap();
    assert!(err.to_string().contains("n_positions 48"), "{err}");
    let err = m.forward(&DecoderInputs { input_ids: &[3, 99], attention_mask: None, position_ids: None, batch: 1, seq: 2 }, opts, None).err().unwrap();
    assert!(err.to_string().contains("99"), "{err}");
    let err = m.forward(&DecoderInputs { input_ids: &[], attention_mask: None, position_ids: None, batch: 0, seq: 0 }, opts, None).err().unwrap();
    assert!(err.to_string().contains("empty"), "{err}");
    let (_, cls) = gpt2("GPT2ForSequenceClassification");
    assert!(cls.forward(&DecoderInputs { input_ids: &[1, 2, 3, 4], attention_mask: Some(&[1, 1]), position_ids: None, batch: 2, seq: 2 }, opts, None).is_err());
}

/// `tie_word_embeddings: false` reads `lm_head.weight`; a tied config ties whatever copy the
/// checkpoint holds, as transformers does; an untied config without the tensor names it.
#[test]
fn an_untied_lm_head_is_read_and_a_tied_one_ignores_the_copy() {
    use sesame::models::auto::AutoModel;
    use sesame::models::IdsBatch;
    let dir = fixture("gpt2", "GPT2LMHeadModel");
    let checkpoint = Checkpoint::from_bytes(read(&dir, "model.safetensors")).unwrap();
    let mut tensors: Vec<(String, Vec<usize>, Vec<f32>)> =
        checkpoint.names().map(|n| (n.to_string(), checkpoint.to_f32(n).unwrap())).map(|(n, (v, s))| (n, s, v)).collect();
    let (wte, shape) = checkpoint.to_f32(if checkpoint.contains("transformer.wte.weight") { "transformer.wte.weight" } else { "wte.weight" }).unwrap();
    tensors.push(("lm_head.weight".into(), shape, wte.iter().map(|v| 2.0 * v).collect()));
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> =
        tensors.iter().map(|(n, s, v)| (n.clone(), s.clone(), v.iter().flat_map(|x| x.to_le_bytes()).collect())).collect();
    let entries: Vec<_> = bytes.iter().map(|(n, s, b)| (n.as_str(), safetensors::Dtype::F32, s.as_slice(), b.as_slice())).collect();
    let with_head = Checkpoint::from_bytes(sesame::weights::serialize(&entries).unwrap()).unwrap();
    let mut config: serde_json::Value = serde_json::from_slice(&read(&dir, "config.json")).unwrap();
    let batch = IdsBatch { input_ids: vec![5, 17, 45], batch: 1, seq: 3, ..IdsBatch::default() };
    let logits = |config: &serde_json::Value, checkpoint: &Checkpoint| -> Result<Vec<f32>> {
        let model = AutoModel::load(&serde_json::to_vec(config).unwrap(), &Weights::new(gpu(), checkpoint))?;
        Ok(pollster::block_on(model.forward(&batch, ForwardOptions::default())?.get("logits").unwrap().to_vec::<f32>()).unwrap())
    };
    let tied = logits(&config, &checkpoint).unwrap();
    assert_eq!(logits(&config, &with_head).unwrap(), tied, "a tied config ignores the checkpoint's copy");
    config["tie_word_embeddings"] = false.into();
    let untied = logits(&config, &with_head).unwrap();
    let err = untied.iter().zip(&tied).map(|(u, t)| (u - 2.0 * t).abs()).fold(0f32, f32::max);
    assert!(err <= 1e-4, "logits through lm_head.weight (2 × wte): {err}");
    let missing = logits(&config, &checkpoint).unwrap_err().to_string();
    assert!(missing.contains("`lm_head.weight` is missing"), "{missing}");
}

mod generation {
    use super::*;
    use sesame::generate::{generate, GenerationConfig};

    #[derive(serde::Deserialize)]
    struct Expected {
        prompt: Vec<u32>,
        greedy: Vec<u32>,
    }

    fn expected(dir: &std::path::Path) -> Expected {
        serde_json::from_slice(&read(dir, "generation.json")).unwrap()
    }

    fn run<M: CausalLm>(model: &M, prompts: &[Vec<u32>], cfg: &GenerationConfig) -> Vec<Vec<u32>> {
        pollster::block_on(generate(model, prompts, cfg, |_, _| ControlFlow::Continue(()))).unwrap()
    }

    fn greedy(n: usize) -> GenerationConfig {
        GenerationConfig { max_new_tokens: n, ..Default::default() }
    }

    #[test]
    fn greedy_generation_matches_transformers() {
        for gpu in devices() {
            let on = &gpu.adapter_info().name;
            let (dir, m) = gpt2_on(gpu, "GPT2LMHeadModel");
            let e = expected(&dir);
            assert_eq!(run(&m, std::slice::from_ref(&e.prompt), &greedy(32))[0], e.greedy, "GPT-2 on {on}");
            let (dir, m) = gpt_on(gpu, "OpenAIGPTLMHeadModel");
            let e = expected(&dir);
            assert_eq!(run(&m, std::slice::from_ref(&e.prompt), &greedy(32))[0], e.greedy, "GPT on {on}");
        }
    }

    #[test]
    fn a_batch_gives_each_prompt_its_own_tokens_and_streams_them() {
        let (_, m) = gpt2("GPT2LMHeadModel");
        let prompts = vec![vec![5, 17, 33, 2], vec![9], vec![40, 41, 42, 43, 44, 45]];
        let mut streamed = vec![Vec::new(); prompts.len()];
        let batched = pollster::block_on(generate(&m, &prompts, &greedy(10), |b, t| {
            streamed[b].push(t);
            ControlFlow::Continue(())
        }))
        .unwrap();
        assert_eq!(streamed, batched);
        for (prompt, tokens) in prompts.iter().zip(&batched) {
            assert_eq!(&run(&m, std::slice::from_ref(prompt), &greedy(10))[0], tokens, "prompt {prompt:?}");
        }
    }

    #[test]
    fn sampling_is_reproducible_by_seed_and_respects_its_limits() {
        let (_, m) = gpt2("GPT2LMHeadModel");
        let prompt = vec![vec![5, 17, 33, 2]];
        let sampled = |seed, top_k, top_p| {
            run(&m, &prompt, &GenerationConfig { max_new_tokens: 24, temperature: 1.5, top_k, top_p, seed: Some(seed), eos_token_id: None })
        };
        assert_eq!(sampled(7, 0, 1.0), sampled(7, 0, 1.0));
        assert_ne!(sampled(7, 0, 1.0), sampled(8, 0, 1.0), "different seeds, different text (24 tokens at temperature 1.5)");
        // top_k = 1 and a tiny top_p both leave only the most likely token: greedy.
        let g = run(&m, &prompt, &greedy(24));
        assert_eq!(sampled(3, 1, 1.0), g);
        assert_eq!(sampled(3, 0, 1e-6), g);
        assert_eq!(sampled(3, 50, 1e-6), g);
    }

    #[test]
    fn stops_at_end_of_text_and_rejects_bad_settings() {
        let (dir, m) = gpt2("GPT2LMHeadModel");
        let e = expected(&dir);
        // Declare the 5th greedy token end-of-text: generation stops right after it.
        let eos = e.greedy[4];
        let first = e.greedy.iter().position(|&t| t == eos).unwrap();
        let got = run(&m, std::slice::from_ref(&e.prompt), &GenerationConfig { eos_token_id: Some(eos), ..greedy(32) });
        assert_eq!(got[0], e.greedy[..=first]);
        let bad = |cfg: GenerationConfig| pollster::block_on(generate(&m, std::slice::from_ref(&e.prompt), &cfg, |_, _| ControlFlow::Continue(()))).is_err();
        assert!(bad(GenerationConfig { temperature: -1.0, ..greedy(4) }));
        assert!(bad(GenerationConfig { top_p: 0.0, temperature: 1.0, ..greedy(4) }));
        assert!(bad(greedy(sesame::generate::MAX_NEW_TOKENS + 1)), "a token budget past the bound");
        assert!(pollster::block_on(generate(&m, &[vec![]], &greedy(4), |_, _| ControlFlow::Continue(()))).is_err(), "empty prompt");
    }

    #[test]
    fn generation_slides_past_the_models_positions() {
        let (_, m) = gpt2("GPT2LMHeadModel");
        let positions = m.config.max_positions;
        let prompt = vec![5, 17, 33, 2, 9];
        let long = run(&m, std::slice::from_ref(&prompt), &greedy(2 * positions))[0].clone();
        assert_eq!(long.len(), 2 * positions);
        // Until the cache is full, the same tokens as a run that fits.
        let fits = positions - prompt.len();
        assert_eq!(run(&m, std::slice::from_ref(&prompt), &greedy(fits))[0], long[..fits]);
        // Then the cache is rebuilt from the last half of the text: the next token is what
        // that half, given as a fresh prompt, continues with.
        let text: Vec<u32> = prompt.iter().chain(&long[..=fits]).copied().collect();
        let half = text[text.len() - positions / 2..].to_vec();
        assert_eq!(run(&m, &[half], &greedy(1))[0][0], long[fits + 1]);
        // A prompt longer than the positions keeps its last ones.
        let too_long: Vec<u32> = (0..positions as u32 + 7).map(|i| 5 + i % 50).collect();
        let kept = too_long[7..].to_vec();
        assert_eq!(run(&m, &[too_long], &greedy(3)), run(&m, &[kept], &greedy(3)));
    }

    #[test]
    fn the_callback_can_stop_generation() {
        let (dir, m) = gpt2("GPT2LMHeadModel");
        let e = expected(&dir);
        let mut seen = 0;
        let got = pollster::block_on(generate(&m, std::slice::from_ref(&e.prompt), &greedy(32), |_, _| {
            seen += 1;
            if seen == 3 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        }))
        .unwrap();
        assert_eq!(got[0], e.greedy[..3], "stops right after the token that asked");
    }
}
