//! Training against PyTorch, on the fixtures tests/reference/make_train_fixtures.py wrote
//! (tests/fixtures/train/): a tiny GPT-2 and a tiny GPT (openai-gpt, post-LN; both causal LM)
//! and a tiny BERT (masked LM + next sentence): the loss and every parameter's gradient at the initial weights, then 20 AdamW
//! steps (warmup + cosine, weight decay on matrices, clipping at 1.0) on replayed batches:
//! each step's loss and gradient norm, and the final weights. The `-dropout` fixtures train
//! the same models with every dropout at 0.2, PyTorch drawing Sesame's masks; `bert-classify`
//! fine-tunes a BertForSequenceClassification (3 labels, dropout 0.2) the same way, and
//! `gpt2-classify` and `openai-gpt-classify` a GPT2ForSequenceClassification and an
//! OpenAIGPTForSequenceClassification with GPT's auxiliary LM loss (L = L_task + 0.5·L_LM
//! through the LM head tied to the token embeddings, padded rows, dropout 0.2);
//! `bert-token-classify` a BertForTokenClassification (5 labels, −100 on special tokens,
//! padding and some words, dropout 0.2); `bert-qa` a BertForQuestionAnswering (answer spans,
//! some at [CLS] and some past the sequence, which are ignored; dropout 0.2);
//! `bert-multiple-choice` (tests/reference/make_multiple_choice_fixtures.py) a
//! BertForMultipleChoice (2 examples of 2 choices per step, replayed as [steps, batch,
//! choices, seq]; dropout 0.2).
//!
//! The other encoder families (tests/reference/make_family_train_fixtures.py), each with
//! dropout 0.2 at its own sites: `roberta-mlm` (RoBERTa's positions after the padding id,
//! masked LM alone), `xlm-roberta-xl-mlm` (pre-LN layers and a final LayerNorm), `distilbert-mlm` (no token types, no dropout after the attention's
//! projection), `albert-sop` (E → H projection, layers shared across depths, sentence-order
//! prediction with dropout before its head), `ernie-nsp` (task type embeddings) and
//! `electra-rtd` (the discriminator's replaced-token detection); `albert-lamb` (albert-sop's
//! run with LAMB, against tests/reference/lamb.py, written from You et al. 2019); and the classifiers on the
//! first token: `roberta-classify`, `electra-classify` (dropout before and after the dense
//! layer) and `distilbert-classify` (after it only).

mod common;

use common::train::{compare_parameters, compare_parameters_except, dir, run_settings, scalar, trainable, trajectory};
use common::{devices, read};
use sesame::models::training::Batch;
use sesame::models::training::{Objective, StepOptions, Trainable};
use sesame::ops::dropout::DropoutStream;
use sesame::train::checkpoint::ModelFolder;
use sesame::train::data::ReplayBatches;
use sesame::train::params::{Parameters, Part};
use sesame::train::trainer::Trainer;
use sesame::weights::{Checkpoint, Weights};
use sesame::Device;

/// A fixture's initial model with its parameters (names as in model.safetensors) on `gpu`.
fn initial(gpu: &Device, family: &str) -> (Box<dyn Trainable>, Parameters) {
    let init = dir(family).join("init");
    let checkpoint = Checkpoint::from_bytes(read(&init, "model.safetensors")).unwrap();
    let weights = Weights::new(gpu, &checkpoint).recording();
    let model = trainable(&read(&init, "config.json"), &weights, objective(family));
    let params = Parameters::from_weights(&weights).unwrap();
    (model, params)
}

/// The objective each fixture was trained with.
fn objective(family: &str) -> Objective {
    match family {
        "bert-token-classify" | "distilbert-token-classify" => Objective::TokenClassify,
        f if f.ends_with("-classify") => Objective::Classify,
        "bert-qa" | "distilbert-qa" => Objective::Qa,
        "bert-multiple-choice" => Objective::MultipleChoice,
        "roberta-mlm" | "xlm-roberta-xl-mlm" | "distilbert-mlm" => Objective::Mlm,
        "albert-sop" | "albert-lamb" => Objective::MlmSop,
        "ernie-nsp" => Objective::MlmNsp,
        "electra-rtd" => Objective::Rtd,
        f if f.starts_with("bert") => Objective::MlmNsp,
        _ => Objective::Clm,
    }
}

/// The parameters the fixture's loss does not depend on (see
/// [`common::train::compare_parameters_except`]): under a span head, the bias of
/// `qa_outputs` and of the last LayerNorm shift every position's start (and end) logit alike.
fn loss_invariant(family: &str) -> &'static [&'static str] {
    match family {
        "bert-qa" => &["qa_outputs.bias", "bert.encoder.layer.1.output.LayerNorm.bias"],
        // A dropout before qa_outputs: the last LayerNorm's bias shifts the logits unevenly.
        "distilbert-qa" => &["qa_outputs.bias"],
        // One score per choice: its bias shifts every choice's alike.
        "bert-multiple-choice" => &["classifier.bias"],
        _ => &[],
    }
}

/// The parameters not compared after 20 steps on `gpu`: the loss-invariant ones and, on the
/// host device, XLM-RoBERTa-XL's key biases. A key bias adds q·b to every score of a query's
/// row, which softmax ignores (so in every family); there AdamW's steps on its rounding noise
/// differ between PyTorch and the host's gemm by more than the tolerance after 20 steps.
fn not_compared_after_steps(family: &str, gpu: &sesame::Device) -> Vec<&'static str> {
    let mut names = loss_invariant(family).to_vec();
    if family == "xlm-roberta-xl-mlm" && gpu.is_host() {
        names.extend(["roberta.encoder.layer.0.attention.self.key.bias", "roberta.encoder.layer.1.attention.self.key.bias"]);
    }
    names
}

/// Whether the fixture's model drops anything (its config's dropout probabilities).
fn has_dropout(family: &str) -> bool {
    let config: serde_json::Value = serde_json::from_slice(&read(&dir(family).join("init"), "config.json")).unwrap();
    ["resid_pdrop", "hidden_dropout_prob", "dropout"].iter().any(|key| config[key].as_f64().is_some_and(|p| p > 0.0))
}

/// The settings of the fixture's step `step`: its dropout keys, and GPT's LM coefficient.
fn step_options(family: &str, step: usize, loss_scale: f32) -> StepOptions {
    let t = trajectory(family);
    StepOptions { loss_scale, dropout: DropoutStream { seed: t.dropout_seed, batch_index: step as u64 }, lm_coef: t.lm_coef }
}

/// On each device: the host twins answer to the same fixtures as the GPU kernels.
fn gradients_match_pytorch(family: &str) {
    for gpu in devices() {
        let (model, params) = initial(gpu, family);
        let batches = ReplayBatches::from_bytes(&read(&dir(family), "batches.safetensors")).unwrap();
        let batch = batches.batch(0).unwrap();
        let loss = model.loss_backward(objective(family), &batch, &params.gradients(), &step_options(family, 0, 1.0)).unwrap();
        let want_loss = trajectory(family).steps[0].loss;
        let got_loss = scalar(&loss)[0];
        let device = &gpu.adapter_info().name;
        eprintln!("{family} on {device}: step-0 loss {got_loss} (PyTorch {want_loss})");
        assert!((got_loss - want_loss).abs() <= 1e-5 * want_loss, "{device}: loss {got_loss} vs {want_loss}");
        let eval_loss = scalar(&model.loss(objective(family), &batch).unwrap())[0];
        if has_dropout(family) {
            // Ten times the tolerance the training loss matches PyTorch's with.
            assert!((eval_loss - want_loss).abs() > 1e-4 * want_loss, "{device}: the inference forward drops nothing, so its loss differs: {eval_loss}");
        } else {
            assert!((eval_loss - want_loss).abs() <= 1e-5 * want_loss, "{device}: the inference forward's loss {eval_loss} vs {want_loss}");
        }
        let grads = Checkpoint::from_bytes(read(&dir(family), "grads.safetensors")).unwrap();
        compare_parameters_except(&format!("{family} gradient on {device}"), &params, Part::Grad, &grads, 1e-4, loss_invariant(family));
    }
}

/// The 20 steps (AdamW, or the fixture's LAMB) driven by the library's Trainer, as `sesame
/// train --replay-batches` drives them.
fn twenty_steps_match_pytorch(family: &str) {
    for gpu in devices() {
        let device = &gpu.adapter_info().name;
        let (model, params) = initial(gpu, family);
        let batches = ReplayBatches::from_bytes(&read(&dir(family), "batches.safetensors")).unwrap();
        let t = trajectory(family);
        let first = batches.batch(0).unwrap();
        let settings = run_settings(family, objective(family), first.batch, first.seq);
        let mut trainer = Trainer::new(gpu, model, params, ModelFolder { files: Vec::new() }, settings).unwrap();
        assert_eq!(batches.steps, t.steps.len());
        for (step, want) in t.steps.iter().enumerate() {
            let report = pollster::block_on(trainer.step(&batches)).unwrap();
            let (loss, norm, lr) = (report.loss, report.grad_norm, report.lr);
            assert_eq!(report.step, step as u64);
            assert!((lr - want.lr).abs() <= 1e-6 * want.lr, "{device} step {step}: lr {lr} vs PyTorch {}", want.lr);
            eprintln!("{family} on {device} step {step}: loss {loss:.6} (PyTorch {:.6}), grad norm {norm:.5} (PyTorch {:.5})", want.loss, want.grad_norm);
            assert!((loss - want.loss).abs() <= 1e-5 * want.loss, "{device} step {step}: loss {loss} vs PyTorch {}", want.loss);
            assert!((norm - want.grad_norm).abs() <= 1e-3 * want.grad_norm, "{device} step {step}: grad norm {norm} vs PyTorch {}", want.grad_norm);
        }
        let last = Checkpoint::from_bytes(read(&dir(family).join("final"), "model.safetensors")).unwrap();
        compare_parameters_except(
            &format!("{family} after 20 steps on {device}"),
            trainer.params(),
            Part::Value,
            &last,
            1e-4,
            &not_compared_after_steps(family, gpu),
        );
    }
}

#[test]
fn gpt2_gradients_match_pytorch() {
    gradients_match_pytorch("gpt2");
}

#[test]
fn gpt2_twenty_adamw_steps_match_pytorch() {
    twenty_steps_match_pytorch("gpt2");
}

#[test]
fn openai_gpt_gradients_match_pytorch() {
    gradients_match_pytorch("openai-gpt");
}

#[test]
fn openai_gpt_twenty_adamw_steps_match_pytorch() {
    twenty_steps_match_pytorch("openai-gpt");
}

#[test]
fn bert_gradients_match_pytorch() {
    gradients_match_pytorch("bert");
}

#[test]
fn bert_twenty_adamw_steps_match_pytorch() {
    twenty_steps_match_pytorch("bert");
}

#[test]
fn gpt2_with_dropout_gradients_match_pytorch() {
    gradients_match_pytorch("gpt2-dropout");
}

#[test]
fn gpt2_with_dropout_twenty_adamw_steps_match_pytorch() {
    twenty_steps_match_pytorch("gpt2-dropout");
}

#[test]
fn bert_with_dropout_gradients_match_pytorch() {
    gradients_match_pytorch("bert-dropout");
}

#[test]
fn bert_with_dropout_twenty_adamw_steps_match_pytorch() {
    twenty_steps_match_pytorch("bert-dropout");
}

#[test]
fn bert_sequence_classification_gradients_match_pytorch() {
    gradients_match_pytorch("bert-classify");
}

#[test]
fn bert_sequence_classification_twenty_adamw_steps_match_pytorch() {
    twenty_steps_match_pytorch("bert-classify");
}

#[test]
fn gpt2_classification_with_the_auxiliary_lm_gradients_match_pytorch() {
    gradients_match_pytorch("gpt2-classify");
}

#[test]
fn gpt2_classification_with_the_auxiliary_lm_twenty_adamw_steps_match_pytorch() {
    twenty_steps_match_pytorch("gpt2-classify");
}

#[test]
fn gpt_classification_with_the_auxiliary_lm_gradients_match_pytorch() {
    gradients_match_pytorch("openai-gpt-classify");
}

#[test]
fn gpt_classification_with_the_auxiliary_lm_twenty_adamw_steps_match_pytorch() {
    twenty_steps_match_pytorch("openai-gpt-classify");
}

#[test]
fn bert_token_classification_gradients_match_pytorch() {
    gradients_match_pytorch("bert-token-classify");
}

#[test]
fn bert_token_classification_twenty_adamw_steps_match_pytorch() {
    twenty_steps_match_pytorch("bert-token-classify");
}

#[test]
fn bert_question_answering_gradients_match_pytorch() {
    gradients_match_pytorch("bert-qa");
}

#[test]
fn bert_question_answering_twenty_adamw_steps_match_pytorch() {
    twenty_steps_match_pytorch("bert-qa");
}

#[test]
fn bert_multiple_choice_gradients_match_pytorch() {
    gradients_match_pytorch("bert-multiple-choice");
}

#[test]
fn bert_multiple_choice_twenty_adamw_steps_match_pytorch() {
    twenty_steps_match_pytorch("bert-multiple-choice");
}

#[test]
fn roberta_gradients_match_pytorch() {
    gradients_match_pytorch("roberta-mlm");
}

#[test]
fn roberta_twenty_adamw_steps_match_pytorch() {
    twenty_steps_match_pytorch("roberta-mlm");
}

#[test]
fn xlm_roberta_xl_with_pre_ln_layers_gradients_match_pytorch() {
    gradients_match_pytorch("xlm-roberta-xl-mlm");
}

#[test]
fn xlm_roberta_xl_with_pre_ln_layers_twenty_adamw_steps_match_pytorch() {
    twenty_steps_match_pytorch("xlm-roberta-xl-mlm");
}

#[test]
fn distilbert_gradients_match_pytorch() {
    gradients_match_pytorch("distilbert-mlm");
}

#[test]
fn distilbert_twenty_adamw_steps_match_pytorch() {
    twenty_steps_match_pytorch("distilbert-mlm");
}

#[test]
fn albert_with_shared_layers_and_sentence_order_gradients_match_pytorch() {
    gradients_match_pytorch("albert-sop");
}

#[test]
fn albert_with_shared_layers_and_sentence_order_twenty_adamw_steps_match_pytorch() {
    twenty_steps_match_pytorch("albert-sop");
}

#[test]
fn albert_twenty_lamb_steps_match_the_papers_algorithm_in_pytorch() {
    twenty_steps_match_pytorch("albert-lamb");
}

#[test]
fn ernie_with_task_types_gradients_match_pytorch() {
    gradients_match_pytorch("ernie-nsp");
}

#[test]
fn ernie_with_task_types_twenty_adamw_steps_match_pytorch() {
    twenty_steps_match_pytorch("ernie-nsp");
}

#[test]
fn electra_discriminator_gradients_match_pytorch() {
    gradients_match_pytorch("electra-rtd");
}

#[test]
fn electra_discriminator_twenty_adamw_steps_match_pytorch() {
    twenty_steps_match_pytorch("electra-rtd");
}

#[test]
fn roberta_sequence_classification_gradients_match_pytorch() {
    gradients_match_pytorch("roberta-classify");
}

#[test]
fn roberta_sequence_classification_twenty_adamw_steps_match_pytorch() {
    twenty_steps_match_pytorch("roberta-classify");
}

#[test]
fn electra_sequence_classification_gradients_match_pytorch() {
    gradients_match_pytorch("electra-classify");
}

#[test]
fn electra_sequence_classification_twenty_adamw_steps_match_pytorch() {
    twenty_steps_match_pytorch("electra-classify");
}

#[test]
fn distilbert_sequence_classification_gradients_match_pytorch() {
    gradients_match_pytorch("distilbert-classify");
}

#[test]
fn distilbert_sequence_classification_twenty_adamw_steps_match_pytorch() {
    twenty_steps_match_pytorch("distilbert-classify");
}

#[test]
fn accumulated_half_batches_give_the_full_batch_gradient() {
    // Rows of equal length (no padding): every row scores seq − 1 positions, so the mean loss
    // of the batch is the mean of its halves' means, and two micro-batches at loss scale ½
    // must give the gradient of the whole batch.
    let (model, params) = initial(common::gpu(), "gpt2");
    let batches = ReplayBatches::from_bytes(&read(&dir("gpt2"), "batches.safetensors")).unwrap();
    let step0 = batches.batch(0).unwrap();
    let seq = step0.seq;
    let rows = |picked: &[usize]| {
        let input_ids: Vec<u32> = picked.iter().flat_map(|&r| step0.input_ids[r * seq..(r + 1) * seq].to_vec()).collect();
        assert!(picked.iter().all(|&r| step0.attention_mask.as_ref().unwrap()[r * seq..(r + 1) * seq].iter().all(|&m| m == 1)));
        Batch { labels: input_ids.iter().map(|&t| t as i64).collect(), input_ids, batch: picked.len(), seq, ..Default::default() }
    };
    model.loss_backward(Objective::Clm, &rows(&[0, 1, 2, 1]), &params.gradients(), &step_options("gpt2", 0, 1.0)).unwrap();
    let full = Checkpoint::from_bytes(pollster::block_on(params.to_safetensors(Part::Grad)).unwrap()).unwrap();
    params.zero_grads();
    for half in [[0, 1], [2, 1]] {
        model.loss_backward(Objective::Clm, &rows(&half), &params.gradients(), &step_options("gpt2", 0, 0.5)).unwrap();
    }
    compare_parameters("gpt2 accumulated gradient", &params, Part::Grad, &full, 1e-5);
}

#[test]
fn distilbert_token_classification_gradients_match_pytorch() {
    gradients_match_pytorch("distilbert-token-classify");
}

#[test]
fn distilbert_token_classification_twenty_adamw_steps_match_pytorch() {
    twenty_steps_match_pytorch("distilbert-token-classify");
}

#[test]
fn distilbert_question_answering_gradients_match_pytorch() {
    gradients_match_pytorch("distilbert-qa");
}

#[test]
fn distilbert_question_answering_twenty_adamw_steps_match_pytorch() {
    twenty_steps_match_pytorch("distilbert-qa");
}
