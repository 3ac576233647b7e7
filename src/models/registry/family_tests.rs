//! Every family as its registry entry describes it: the heads a fine-tuning run adds under
//! each family's names, the fresh models each makes, and — so that no family can be left out
//! of a table again — every objective a family lists trained from its own fixture.

use safetensors::Dtype;

use super::testing::tiny;
use super::{family, family_of, fresh_family, with_head, FAMILIES};
use crate::gpu::testing::gpu;
use crate::models::auto::AutoModel;
use crate::models::family::Family;
use crate::models::training::fresh::{default_labels, Fresh, FreshShape, FreshVocabulary, RunData, Texts};
use crate::models::training::Objective;
use crate::weights::{self, Checkpoint, Recorded, Weights};

fn parse(config: &[u8]) -> serde_json::Value {
    serde_json::from_slice(config).unwrap()
}

fn architecture(config: &[u8]) -> String {
    parse(config)["architectures"][0].as_str().unwrap().to_string()
}

fn sorted_names(weights: &[u8]) -> Vec<String> {
    let mut names: Vec<String> = Checkpoint::from_bytes(weights.to_vec()).unwrap().names().map(String::from).collect();
    names.sort();
    names
}

fn labels(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

/// A checkpoint of one 2 × 2 (or `shape`) tensor of 0.5s named `name`.
fn one_tensor(name: &str) -> Vec<u8> {
    weights::serialize(&[(name, Dtype::F32, &[2, 2], bytemuck::cast_slice(&[0.5f32; 4]))]).unwrap()
}

fn rms(checkpoint: &Checkpoint, name: &str) -> f64 {
    let (v, _) = checkpoint.to_f32(name).unwrap();
    (v.iter().map(|x| (*x as f64).powi(2)).sum::<f64>() / v.len() as f64).sqrt()
}

/// A fixture folder's config.json and model.safetensors.
fn fixture(family: &str, class: &str) -> (Vec<u8>, Vec<u8>) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(family).join(class);
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{}: {e}", dir.join(name).display()));
    (read("config.json"), read("model.safetensors"))
}

#[test]
fn every_family_trains_every_objective_it_lists_from_its_own_checkpoint() {
    for family in FAMILIES {
        let Some(training) = family.training else { continue };
        // A checkpoint without a task head: the family's base model, else the one it ships.
        let (class, (config, weights)) = match family.model_type {
            "awd_lstm" => ("a language model", fixture("train/awd-lstm", "init")),
            "cove" | "cvt" => ("tiny", fixture(family.model_type, "tiny")),
            _ => {
                let class = family.architectures.iter().find(|a| a.ends_with("Model")).unwrap();
                (*class, fixture(family.model_type, class))
            }
        };
        for objective in training.objectives() {
            // A folder of several models (ELECTRA's pretraining, a multi-task model) or one that
            // needs its run's data to be made (a translation decoder's target words).
            if matches!(objective, Objective::Electra | Objective::MultiTask | Objective::Translation) {
                continue;
            }
            let label = format!("{} {class} with {objective}", family.model_type);
            let (config, weights) = match (family.model_type, objective) {
                // The pair heads are pretraining's: the family's pretraining class has them.
                (_, Objective::MlmNsp | Objective::MlmSop | Objective::Rtd) => {
                    let class = family.architectures.iter().find(|a| a.ends_with("ForPreTraining")).unwrap();
                    fixture(family.model_type, class)
                }
                // ELECTRA's masked LM is its generator, and no fresh multiple-choice head is made.
                ("electra", Objective::Mlm) => fixture("electra", "ElectraForMaskedLM"),
                ("electra", Objective::MultipleChoice) => fixture("electra", "ElectraForMultipleChoice"),
                _ => {
                    // A decoder's classifier pads with a padding id (its tokenizer's end of text).
                    let mut config = parse(&config);
                    if config["pad_token_id"].is_null() && config["eos_token_id"].is_null() {
                        config["pad_token_id"] = 0.into();
                    }
                    with_head(objective, config.to_string().as_bytes(), weights.clone(), &labels(&["A", "B", "C"]), 1)
                        .unwrap_or_else(|e| panic!("{label}: {e}"))
                }
            };
            let checkpoint = Checkpoint::from_bytes(weights).unwrap();
            let weights = Weights::new(gpu(), &checkpoint).recording();
            let model = family.load_trainable(&config, &weights, objective).unwrap_or_else(|e| panic!("{label}: {e}"));
            model.check(objective).unwrap_or_else(|e| panic!("{label}: {e}"));
            assert!(model.objectives().contains(&objective), "{label}: trains {:?}", model.objectives());
        }
        // What the family's classes and heads are called agrees with the classes it has.
        let base = training.base_model_prefix();
        if let Some(base) = base {
            assert!(training.objectives().contains(&Objective::MultiTask), "{}: a base model to share, and no multi-task", family.model_type);
            assert!(!base.is_empty());
        }
    }
}

/// Every tensor of `checkpoint` was read by the model loaded through `weights` (a recording
/// view).
fn assert_every_tensor_read(model_type: &str, checkpoint: &Checkpoint, weights: &Weights) {
    let loaded: Vec<String> = weights
        .take_loaded()
        .into_iter()
        .map(|r| match r {
            Recorded::Trainable { name, .. } | Recorded::Frozen { name, .. } | Recorded::Buffer { name, .. } => name,
        })
        .collect();
    for name in checkpoint.names() {
        assert!(loaded.iter().any(|l| l == name), "{model_type}: {name} is stored but not read");
    }
}

#[test]
fn every_fresh_family_makes_a_model_that_loads_with_every_tensor_read() {
    let shaped = |f: &&&Family| f.training.is_some_and(|t| matches!(t.fresh(), Some(Fresh::Shaped { .. })));
    for family in FAMILIES.iter().filter(shaped) {
        assert_eq!(fresh_family(family.model_type).unwrap().model_type, family.model_type);
        let shape = FreshShape { layers: 3, heads: 2, width: 16, context: 12 };
        let pad = family.training.unwrap().fresh().unwrap().pads().then_some(3);
        let folder = family.fresh(&shape, &FreshVocabulary { size: 30, pad, eos: None }, 1).unwrap();
        let config = folder.file("config.json").unwrap();
        let checkpoint = Checkpoint::from_bytes(folder.file("model.safetensors").unwrap().to_vec()).unwrap();
        let weights = Weights::new(gpu(), &checkpoint).recording();
        // A family with a joint folder makes its fresh models as one, whose parts are models.
        let model = match family.training.unwrap().joint_folder() {
            Some(joint) => {
                let other = folder.file(joint.other_config).unwrap_or_else(|| panic!("{}: no {}", family.model_type, joint.other_config));
                assert_eq!((joint.load)(config, other, &weights).unwrap().max_positions(), Some(12));
                for part in (joint.parts)(config, other, &checkpoint).unwrap() {
                    let (part_checkpoint, label) = (Checkpoint::from_bytes(part.safetensors).unwrap(), format!("{} {}", family.model_type, part.prefix));
                    let part_weights = Weights::new(gpu(), &part_checkpoint).recording();
                    AutoModel::load(&part.config_json, &part_weights).unwrap_or_else(|e| panic!("{label}: {e}"));
                    assert_every_tensor_read(&label, &part_checkpoint, &part_weights);
                }
                None
            }
            None => Some(AutoModel::load(config, &weights).unwrap_or_else(|e| panic!("{}: {e}", family.model_type))),
        };
        assert_every_tensor_read(family.model_type, &checkpoint, &weights);
        if let Some(model) = model {
            assert_eq!(model.sizes().layers, 3, "{}: three layers deep", family.model_type);
        }
        if let Some(pad) = pad {
            let base = family.training.unwrap().base_model_prefix().unwrap();
            let (words, dims) = checkpoint.to_f32(&format!("{base}.embeddings.word_embeddings.weight")).unwrap();
            let width = dims[1];
            let row = pad as usize * width;
            assert!(words[row..row + width].iter().all(|&x| x == 0.0) && words.iter().any(|&x| x != 0.0), "{}: only the padding row is 0", family.model_type);
        }
    }
    let err = fresh_family("distilbert").err().unwrap().to_string();
    assert!(err.contains("unknown architecture `distilbert`") && err.contains("gpt2") && err.contains("cove"), "{err}");
}

/// Tiny training data for each family that learns a fresh model's vocabulary from a run's
/// data: the objective it trains with, and text in the format that reads.
fn learnt_from(model_type: &str) -> (Objective, &'static str) {
    match model_type {
        "awd_lstm" => (Objective::Clm, "The cat sat on the mat .\nThe dog sat .\n"),
        "cove" => (Objective::Translation, "the cat sat\tdie katze saß\na dog\tein hund\n"),
        "cvt" => (Objective::TokenClassify, "The DET\ncat NOUN\n\nA DET\ndog NOUN\nsat VERB\n"),
        other => panic!("{other} learns a fresh model from a run's data: give this test data it reads"),
    }
}

#[test]
fn every_family_that_learns_from_data_makes_a_model_that_loads_with_every_tensor_read() {
    let learnt = |f: &&&Family| f.training.is_some_and(|t| matches!(t.fresh(), Some(Fresh::Learnt(_))));
    assert!(FAMILIES.iter().filter(learnt).count() >= 3);
    for family in FAMILIES.iter().filter(learnt) {
        let Some(Fresh::Learnt(make)) = family.training.unwrap().fresh() else { unreachable!() };
        assert_eq!(fresh_family(family.model_type).unwrap().model_type, family.model_type);
        let (objective, train) = learnt_from(family.model_type);
        let text = Texts { train, ..Texts::default() };
        let data = RunData {
            objective,
            text: &text,
            eval_only: false,
            tokenizer: "words:40",
            layers: None,
            width: 6,
            embedding_size: Some(4),
            dropout: None,
            seed: 1,
        };
        let folder = make(&data).unwrap_or_else(|e| panic!("{}: {e}", family.model_type));
        let tokenizer = crate::tokenize::TextTokenizer::from_bytes(folder.file("tokenizer.json").unwrap()).unwrap();
        assert!(tokenizer.token_to_id("sat").is_some(), "{}: its vocabulary has the data's words", family.model_type);
        let config = folder.file("config.json").unwrap();
        let checkpoint = Checkpoint::from_bytes(folder.file("model.safetensors").unwrap().to_vec()).unwrap();
        let weights = Weights::new(gpu(), &checkpoint).recording();
        let model = family.require_training().unwrap().load(config, &weights, objective).unwrap_or_else(|e| panic!("{}: {e}", family.model_type));
        model.check(objective).unwrap();
        assert_every_tensor_read(family.model_type, &checkpoint, &weights);
        // A model learnt from data needs the run's `words:N`, and the objective it trains.
        let err = make(&RunData { tokenizer: "char", ..data }).err().unwrap().to_string();
        assert!(err.contains("words:N"), "{}: {err}", family.model_type);
        if family.model_type != "awd_lstm" {
            let err = make(&RunData { objective: Objective::Mlm, ..data }).err().unwrap().to_string();
            assert!(err.contains(&format!("trains with --objective {objective}")), "{}: {err}", family.model_type);
        }
    }
}

#[test]
fn gpt2_from_scratch_has_every_tensor_with_gpt2_init() {
    let gpt2 = family("gpt2").unwrap();
    let shape = FreshShape { layers: 2, heads: 2, width: 16, context: 8 };
    let vocabulary = FreshVocabulary { size: 11, ..FreshVocabulary::default() };
    let safetensors = |seed| gpt2.fresh(&shape, &vocabulary, seed).unwrap().file("model.safetensors").unwrap().to_vec();
    let checkpoint = Checkpoint::from_bytes(safetensors(3)).unwrap();
    assert_eq!(checkpoint.names().count(), 2 + 2 * 12 + 2);
    assert!((rms(&checkpoint, "transformer.h.0.mlp.c_fc.weight") - 0.02).abs() < 0.002);
    assert!((rms(&checkpoint, "transformer.h.1.mlp.c_proj.weight") - 0.01).abs() < 0.001, "c_proj scaled by 1/√(2·2)");
    assert_eq!(checkpoint.to_f32("transformer.ln_f.weight").unwrap().0, vec![1.0; 16]);
    assert_eq!(checkpoint.to_f32("transformer.h.0.attn.c_attn.bias").unwrap(), (vec![0.0; 48], vec![48]));
    assert_ne!(safetensors(3), safetensors(4), "seeded");
    assert!(gpt2.fresh(&FreshShape { heads: 3, ..shape }, &vocabulary, 3).is_err(), "a width that is not a multiple of the heads");
}

#[test]
fn bert_from_scratch_has_the_pretraining_heads_and_a_zero_padding_row() {
    let bert = family("bert").unwrap();
    let shape = FreshShape { layers: 2, heads: 2, width: 16, context: 12 };
    let folder = bert.fresh(&shape, &FreshVocabulary { size: 30, pad: Some(3), eos: None }, 1).unwrap();
    let checkpoint = Checkpoint::from_bytes(folder.file("model.safetensors").unwrap().to_vec()).unwrap();
    // Embeddings 5, 16 per layer, pooler 2, prediction head 5, NSP head 2.
    assert_eq!(checkpoint.names().count(), 5 + 2 * 16 + 2 + 5 + 2);
    let (words, dims) = checkpoint.to_f32("bert.embeddings.word_embeddings.weight").unwrap();
    assert_eq!(dims, vec![30, 16]);
    assert!(words[3 * 16..4 * 16].iter().all(|&x| x == 0.0) && words[..16].iter().any(|&x| x != 0.0), "row 3 (padding) is 0");
    assert!((rms(&checkpoint, "bert.encoder.layer.1.intermediate.dense.weight") - 0.02).abs() < 0.002);
    assert_eq!(checkpoint.to_f32("cls.seq_relationship.weight").unwrap().1, vec![2, 16]);
    let config = parse(folder.file("config.json").unwrap());
    assert_eq!((config["pad_token_id"].as_u64(), config["intermediate_size"].as_u64()), (Some(3), Some(64)));
    assert!(bert.fresh(&shape, &FreshVocabulary { size: 30, pad: Some(30), eos: None }, 1).is_err(), "padding id outside the vocabulary");
}

#[test]
fn a_fresh_electra_is_a_discriminator_and_a_quarter_width_generator_over_shared_embeddings() {
    use crate::models::electra::train::generator_shape;
    let shape = FreshShape { layers: 2, heads: 4, width: 32, context: 12 };
    assert_eq!((generator_shape(&shape).heads, generator_shape(&shape).width), (1, 8));
    let folder = family("electra").unwrap().fresh(&shape, &FreshVocabulary { size: 30, pad: Some(0), eos: None }, 1).unwrap();
    let checkpoint = Checkpoint::from_bytes(folder.file("model.safetensors").unwrap().to_vec()).unwrap();
    assert_eq!(checkpoint.shape("electra.embeddings.word_embeddings.weight"), Some(&[30, 32][..]), "min(128, width) wide");
    assert_eq!(checkpoint.shape("generator.electra.embeddings_project.weight"), Some(&[8, 32][..]));
    assert!(!checkpoint.contains("discriminator.electra.embeddings_project.weight"), "as wide as the embeddings: no projection");
    assert_eq!(checkpoint.shape("generator.generator_lm_head.bias"), Some(&[30][..]));
    assert_eq!(architecture(folder.file("generator_config.json").unwrap()), "ElectraForMaskedLM");
    let bert = family("bert").unwrap().fresh(&shape, &FreshVocabulary { size: 30, pad: Some(0), eos: None }, 1).unwrap();
    assert!(bert.file("generator_config.json").is_none());
}

#[test]
fn albert_shares_its_layer_and_roberta_numbers_positions_after_the_padding_id() {
    let count = |layers| {
        let folder = family("albert")
            .unwrap()
            .fresh(&FreshShape { layers, heads: 2, width: 16, context: 12 }, &FreshVocabulary { size: 30, pad: Some(0), eos: None }, 1)
            .unwrap();
        Checkpoint::from_bytes(folder.file("model.safetensors").unwrap().to_vec()).unwrap().names().count()
    };
    assert_eq!(count(2), count(6), "its weights do not grow with depth");
    let roberta = family("roberta")
        .unwrap()
        .fresh(&FreshShape { layers: 1, heads: 2, width: 16, context: 12 }, &FreshVocabulary { size: 30, pad: Some(1), eos: None }, 1)
        .unwrap();
    assert_eq!(parse(roberta.file("config.json").unwrap())["max_position_embeddings"], 14, "RoBERTa's positions start after the padding id");
}

#[test]
fn token_and_span_heads_are_added_to_every_encoder_family_and_kept() {
    let (config, weights) = tiny("bert", 1, 8, 12, 30, 1);
    let (qa_config, qa) = with_head(Objective::Qa, &config, weights, &[], 1).unwrap();
    assert!(Checkpoint::from_bytes(qa).unwrap().contains("qa_outputs.weight"));
    assert_eq!(architecture(&qa_config), "BertForQuestionAnswering");
    // A DistilBERT that has its span head keeps it as it is.
    let distilbert = br#"{"model_type": "distilbert", "architectures": ["DistilBertForQuestionAnswering"]}"#;
    let (kept, bytes) = with_head(Objective::Qa, distilbert, vec![1, 2, 3], &[], 1).unwrap();
    assert_eq!((kept.as_slice(), bytes.as_slice()), (&distilbert[..], &[1u8, 2, 3][..]));
    // Every encoder family gets its own class with the same head names.
    for (model_type, class) in
        [("roberta", "RobertaForTokenClassification"), ("albert", "AlbertForTokenClassification"), ("ernie", "ErnieForTokenClassification")]
    {
        let (config, weights) = tiny(model_type, 1, 8, 12, 30, 1);
        let (tagger, tagger_weights) = with_head(Objective::TokenClassify, &config, weights.clone(), &labels(&["A", "B"]), 1).unwrap();
        assert_eq!(architecture(&tagger), class);
        assert_eq!(Checkpoint::from_bytes(tagger_weights).unwrap().shape("classifier.weight"), Some(&[2, 8][..]), "{class}");
        let (span, span_weights) = with_head(Objective::Qa, &config, weights, &[], 1).unwrap();
        assert!(architecture(&span).ends_with("ForQuestionAnswering"));
        assert_eq!(Checkpoint::from_bytes(span_weights).unwrap().shape("qa_outputs.weight"), Some(&[2, 8][..]), "{class}");
    }
    let (config, weights) = tiny("gpt2", 1, 8, 12, 30, 1);
    let err = with_head(Objective::TokenClassify, &config, weights, &labels(&["A"]), 1).unwrap_err().to_string();
    assert!(err.contains("objective token-classify trains BERT (bert)") && err.contains("GPT-2 (gpt2) trains clm, classify"), "{err}");
}

#[test]
fn a_masked_lm_head_is_kept_from_pretraining_or_added_fresh_and_tied() {
    // A pretraining checkpoint keeps its head as it was, without the next-sentence head.
    let (config, pretrained) = tiny("ernie", 1, 8, 12, 30, 1);
    let (config, weights) = with_head(Objective::Mlm, &config, pretrained.clone(), &[], 1).unwrap();
    assert_eq!(architecture(&config), "ErnieForMaskedLM");
    assert!(!sorted_names(&weights).iter().any(|n| n.starts_with("cls.seq_relationship")));
    let (before, after) = (Checkpoint::from_bytes(pretrained).unwrap(), Checkpoint::from_bytes(weights).unwrap());
    let dense = "cls.predictions.transform.dense.weight";
    assert_eq!(after.to_f32(dense).unwrap(), before.to_f32(dense).unwrap());
    // A bare ALBERT gets a fresh head from the hidden size to its embedding size; the decoder
    // is the word embeddings (no weight of its own).
    let (albert_config, albert) = tiny("albert", 1, 8, 12, 30, 1);
    let checkpoint = Checkpoint::from_bytes(albert).unwrap();
    let bare: Vec<(String, Vec<usize>, Vec<f32>)> = checkpoint
        .names()
        .filter(|n| n.starts_with("albert."))
        .map(|n| (n.to_string(), checkpoint.to_f32(n).unwrap().1, checkpoint.to_f32(n).unwrap().0))
        .collect();
    let mut config = parse(&albert_config);
    config["architectures"] = serde_json::json!(["AlbertModel"]);
    let embedding = config["embedding_size"].as_u64().unwrap() as usize;
    let (config, weights) = with_head(Objective::Mlm, config.to_string().as_bytes(), weights::serialize_f32(&bare).unwrap(), &[], 1).unwrap();
    assert_eq!(architecture(&config), "AlbertForMaskedLM");
    let head: Vec<String> = sorted_names(&weights).into_iter().filter(|n| !n.starts_with("albert.")).collect();
    assert_eq!(head, ["predictions.LayerNorm.bias", "predictions.LayerNorm.weight", "predictions.bias", "predictions.dense.bias", "predictions.dense.weight"]);
    let checkpoint = Checkpoint::from_bytes(weights).unwrap();
    assert_eq!(checkpoint.shape("predictions.dense.weight"), Some(&[embedding, 8][..]));
    assert_eq!(checkpoint.shape("predictions.bias"), Some(&[30][..]));
    let electra = br#"{"model_type": "electra", "hidden_size": 8, "architectures": ["ElectraModel"]}"#;
    let err = with_head(Objective::Mlm, electra, one_tensor("w"), &[], 1).unwrap_err().to_string();
    assert!(err.contains("generator"), "{err}");
    let roots = |model_type: &str| family(model_type).unwrap().training.unwrap().head_roots(Objective::Mlm);
    assert_eq!(roots("distilbert"), ["vocab_transform", "vocab_layer_norm", "vocab_projector"]);
    assert!(roots("electra").is_empty());
}

#[test]
fn a_classifier_head_is_added_to_an_encoder() {
    let (config, weights) = tiny("bert", 1, 8, 12, 30, 1);
    let (config, weights) = with_head(Objective::Classify, &config, weights, &default_labels(3), 5).unwrap();
    let checkpoint = Checkpoint::from_bytes(weights.clone()).unwrap();
    assert_eq!(checkpoint.to_f32("classifier.weight").unwrap().1, vec![3, 8]);
    assert_eq!(checkpoint.to_f32("classifier.bias").unwrap().0, vec![0.0; 3]);
    assert!(checkpoint.contains("bert.pooler.dense.weight"), "the encoder is kept");
    let value = parse(&config);
    assert_eq!((value["architectures"][0].as_str(), value["id2label"]["2"].as_str()), (Some("BertForSequenceClassification"), Some("LABEL_2")));
    let (again, same) = with_head(Objective::Classify, &config, weights.clone(), &default_labels(3), 5).unwrap();
    assert_eq!((again, same), (config, weights), "a classifier stays as it is");
}

#[test]
fn a_head_is_added_to_a_sentence_encoder_with_an_integer_position_ids_buffer() {
    // sentence-transformers' all-MiniLM-L6-v2 keeps `embeddings.position_ids` as I64.
    let weight = [0.5f32; 8];
    let positions: Vec<u8> = (0..4i64).flat_map(i64::to_le_bytes).collect();
    let weights = weights::serialize(&[
        ("embeddings.position_ids", Dtype::I64, &[1, 4], &positions),
        ("pooler.dense.weight", Dtype::F32, &[8], bytemuck::cast_slice(&weight)),
    ])
    .unwrap();
    let (_, weights) = with_head(Objective::Classify, br#"{"model_type": "bert", "hidden_size": 8}"#, weights, &default_labels(2), 5).unwrap();
    let checkpoint = Checkpoint::from_bytes(weights).unwrap();
    assert!(!checkpoint.contains("embeddings.position_ids"), "the buffer is dropped");
    assert_eq!(checkpoint.to_f32("pooler.dense.weight").unwrap().0, weight.to_vec());
    assert_eq!(checkpoint.shape("classifier.weight"), Some(&[2, 8][..]));
}

#[test]
fn a_score_head_is_added_to_a_gpt2_that_pads_with_its_end_of_text() {
    let (config, weights) = tiny("gpt2", 1, 8, 12, 30, 1);
    let mut with_eos = parse(&config);
    with_eos["eos_token_id"] = 29.into();
    let (classifier, classifier_weights) = with_head(Objective::Classify, with_eos.to_string().as_bytes(), weights.clone(), &default_labels(2), 5).unwrap();
    assert_eq!(Checkpoint::from_bytes(classifier_weights).unwrap().shape("score.weight"), Some(&[2, 8][..]));
    let value = parse(&classifier);
    assert_eq!((value["architectures"][0].as_str(), value["pad_token_id"].as_u64()), (Some("GPT2ForSequenceClassification"), Some(29)));
    let err = with_head(Objective::Classify, &config, weights.clone(), &default_labels(2), 5).unwrap_err().to_string();
    assert!(err.contains("pad_token_id"), "{err}");
    let err = with_head(Objective::Classify, br#"{"model_type": "t5", "d_model": 8}"#, weights.clone(), &default_labels(2), 5).unwrap_err().to_string();
    assert!(err.contains("unknown model_type `t5`"), "{err}");
    let gpt = br#"{"model_type": "openai-gpt", "n_embd": 8, "pad_token_id": 1}"#;
    let (config, _) = with_head(Objective::Classify, gpt, weights, &default_labels(2), 5).unwrap();
    assert_eq!(architecture(&config), "OpenAIGPTForSequenceClassification");
}

#[test]
fn each_encoder_family_gets_its_own_classifier_and_a_missing_pooler() {
    let head = |config: &str, tensor: &str| {
        let (config, weights) = with_head(Objective::Classify, config.as_bytes(), one_tensor(tensor), &default_labels(3), 5).unwrap();
        (architecture(&config), sorted_names(&weights), Checkpoint::from_bytes(weights).unwrap())
    };
    let (class, names, checkpoint) = head(r#"{"model_type": "roberta", "hidden_size": 8}"#, "roberta.embeddings.word_embeddings.weight");
    assert_eq!(class, "RobertaForSequenceClassification");
    assert_eq!(
        names,
        [
            "classifier.dense.bias",
            "classifier.dense.weight",
            "classifier.out_proj.bias",
            "classifier.out_proj.weight",
            "roberta.embeddings.word_embeddings.weight"
        ]
    );
    assert_eq!(checkpoint.shape("classifier.out_proj.weight"), Some(&[3, 8][..]));
    let (class, names, checkpoint) = head(r#"{"model_type": "distilbert", "dim": 6}"#, "distilbert.embeddings.word_embeddings.weight");
    assert_eq!(class, "DistilBertForSequenceClassification");
    assert!(names.contains(&"pre_classifier.weight".to_string()) && checkpoint.shape("classifier.weight") == Some(&[3, 6][..]), "{names:?}");
    // An ALBERT masked-LM checkpoint has no pooler: a fresh one is added under the base.
    let (class, names, _) = head(r#"{"model_type": "albert", "hidden_size": 8}"#, "albert.embeddings.word_embeddings.weight");
    assert_eq!(class, "AlbertForSequenceClassification");
    assert!(names.contains(&"albert.pooler.weight".to_string()) && names.contains(&"classifier.weight".to_string()), "{names:?}");
    // A pooler the checkpoint has is kept as it is.
    let (_, names, checkpoint) = head(r#"{"model_type": "ernie", "hidden_size": 2}"#, "pooler.dense.weight");
    assert_eq!(names, ["classifier.bias", "classifier.weight", "pooler.dense.weight"]);
    assert_eq!(checkpoint.to_f32("pooler.dense.weight").unwrap().0, vec![0.5; 4]);
    let err =
        with_head(Objective::Classify, br#"{"model_type": "distilbert", "hidden_size": 8}"#, one_tensor("w"), &default_labels(3), 5).unwrap_err().to_string();
    assert!(err.contains("no dim"), "{err}");
}

#[test]
fn each_encoder_family_gets_its_multiple_choice_head() {
    let head = |config: &str, tensor: &str| {
        with_head(Objective::MultipleChoice, config.as_bytes(), one_tensor(tensor), &[], 5)
            .map(|(config, weights)| (architecture(&config), sorted_names(&weights)))
    };
    // RoBERTa scores choices on the pooler (not its sequence classifier's first-token head).
    let (class, names) = head(r#"{"model_type": "roberta", "hidden_size": 8}"#, "roberta.embeddings.word_embeddings.weight").unwrap();
    assert_eq!(class, "RobertaForMultipleChoice");
    assert_eq!(
        names,
        ["classifier.bias", "classifier.weight", "roberta.embeddings.word_embeddings.weight", "roberta.pooler.dense.bias", "roberta.pooler.dense.weight"]
    );
    let (class, names) = head(r#"{"model_type": "bert", "architectures": ["BertForPreTraining"], "hidden_size": 8}"#, "pooler.dense.weight").unwrap();
    assert_eq!((class.as_str(), names.len()), ("BertForMultipleChoice", 3), "the pooler kept: {names:?}");
    let (class, names) = head(r#"{"model_type": "distilbert", "dim": 8}"#, "distilbert.embeddings.word_embeddings.weight").unwrap();
    assert_eq!(class, "DistilBertForMultipleChoice");
    assert!(names.contains(&"pre_classifier.weight".to_string()), "{names:?}");
    let (class, names) = head(r#"{"model_type": "albert", "hidden_size": 8}"#, "albert.embeddings.word_embeddings.weight").unwrap();
    assert_eq!(class, "AlbertForMultipleChoice");
    assert!(names.contains(&"albert.pooler.weight".to_string()), "{names:?}");
    // One score per choice.
    let (config, weights) = with_head(Objective::MultipleChoice, br#"{"model_type": "ernie", "hidden_size": 4}"#, one_tensor("w"), &[], 5).unwrap();
    assert_eq!(architecture(&config), "ErnieForMultipleChoice");
    assert_eq!(Checkpoint::from_bytes(weights).unwrap().shape("classifier.weight"), Some(&[1, 4][..]));
    // Refused: ELECTRA, and a model fine-tuned for another task.
    let err = head(r#"{"model_type": "electra", "hidden_size": 8}"#, "w").unwrap_err().to_string();
    assert!(err.contains("no fresh electra multiple-choice head"), "{err}");
    let err = head(r#"{"model_type": "bert", "architectures": ["BertForSequenceClassification"], "hidden_size": 8}"#, "w").unwrap_err().to_string();
    assert!(err.contains("…ForMultipleChoice head") && err.contains("BertForSequenceClassification"), "{err}");
    let kept = br#"{"model_type": "bert", "architectures": ["BertForMultipleChoice"]}"#;
    assert_eq!(with_head(Objective::MultipleChoice, kept, vec![7], &[], 5).unwrap(), (kept.to_vec(), vec![7]));
    assert!(family_of(kept).unwrap().trains(Objective::MultipleChoice));
}
