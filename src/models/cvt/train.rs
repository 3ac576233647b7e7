//! Training CVT's tagger (Clark et al. 2018) on its two kinds of batches, as cvt_text does:
//! - a labelled batch: the primary module's cross entropy against the gold tags smoothed by
//!   `label_smoothing`, averaged over the batch's words, with dropout `labeled_dropout`;
//! - an unlabelled batch: the primary module without dropout is the teacher (a constant);
//!   each auxiliary view, under dropout `unlabeled_dropout`, learns to match it — the sum
//!   over full, forwards, backwards, future and past of KL(teacher ‖ view) at the view's
//!   positions (future at t against the teacher at t + 1, past against t − 1), each averaged
//!   over its own positions. cvt_text minimises the cross entropy instead, which differs by
//!   the teacher's entropy: the same gradients.
//!
//! The smoothed cross entropy is (1 − ε)·CE(gold) + ε·CE(uniform), and CE(uniform) is
//! KL(uniform ‖ p) + ln K: the hard-label and soft-target kernels between them.
//!
//! Dropout (one rate, elementwise) sits where cvt_text puts it: site 0 the word embeddings,
//! 1 the character CNN's output, 2 + 2·layer + direction each LSTM direction's output.

use super::{has_relu, CvtConfig, ModuleInput, AUXILIARY};
use crate::error::{arg_err, Result};
use crate::models::rnn::right_padded_lengths;
use crate::models::training::{Batch, Objective, StepOptions, Trainable};
use crate::models::{IdsBatch, InputKinds, ModelOutput};
use crate::nn::{Gradients, Linear};
use crate::ops::char_cnn::{char_cnn_backward, char_cnn_saved, Activation, CharCnnOutput, ConvFilter};
use crate::ops::cross_entropy::{cross_entropy, cross_entropy_backward, DEFAULT_IGNORE_INDEX};
use crate::ops::distillation::{soft_target_loss, soft_target_loss_backward};
use crate::ops::dropout::{dropout, Dropout, DropoutStream};
use crate::ops::elementwise::{add, mul, unary, unary_backward, Unary};
use crate::ops::embedding::{embedding, embedding_backward, EmbeddingIds};
use crate::ops::lstm::LstmConfig;
use crate::ops::lstm_train::{lstm_sequence_backward, lstm_sequence_traced, LstmTensors, LstmTrace};
use crate::ops::matmul::{matmul_accumulate, Matmul};
use crate::ops::rows::{columns, concat_columns};
use crate::tensor::{DType, Tensor};
use crate::weights::Weights;

/// One direction of a projected LSTM layer (`encoder.{k}.…{suffix}`).
struct TrainDirection {
    /// `weight_ih` and `bias`: the gates' input half for every step at once.
    input: Linear,
    weight_hh: Tensor,
    weight_hr: Tensor,
    /// The step kernels' own bias: 0 (the layer's bias is the input half's).
    zero_bias: Tensor,
    cell: usize,
    reverse: bool,
}

/// One prediction module: `hidden`, ReLU (not for `full`), `output`.
struct TrainModule {
    hidden: Linear,
    relu: bool,
    output: Linear,
}

/// A module's forward, for its backward.
struct ModuleSaved {
    /// The hidden Linear's output (before the ReLU) and the output Linear's input.
    hidden: Tensor,
    activated: Tensor,
    logits: Tensor,
}

impl TrainModule {
    fn forward(&self, x: &Tensor) -> Result<ModuleSaved> {
        let hidden = self.hidden.forward(x)?;
        let activated = if self.relu { unary(&hidden, Unary::Relu)? } else { hidden.clone() };
        Ok(ModuleSaved { logits: self.output.forward(&activated)?, hidden, activated })
    }

    /// The gradient of the module's input for `d_logits`; adds its weights' gradients.
    fn backward(&self, x: &Tensor, saved: &ModuleSaved, d_logits: &Tensor, grads: &Gradients) -> Result<Tensor> {
        let d = self.output.backward(&saved.activated, d_logits, grads)?;
        let d = if self.relu { unary_backward(&saved.hidden, &d, Unary::Relu)? } else { d };
        self.hidden.backward(x, &d, grads)
    }
}

/// A direction's training forward.
struct DirectionSaved {
    trace: LstmTrace,
    drop: Option<Dropout>,
}

/// The modules' inputs (as `CvtTraining::module_inputs`) and, per module run (its index),
/// its record.
type ModulesForward = ([Tensor; 3], Vec<(usize, ModuleSaved)>);

/// The encoder's training forward.
struct EncoderForward {
    /// The word embeddings after their dropout (before the scale), and that dropout.
    embedded: Tensor,
    embed_drop: Option<Dropout>,
    /// The characters' embeddings [N, chars, C], the CNN's record and its output's drop.
    chars: Tensor,
    cnn: CharCnnOutput,
    cnn_drop: Option<Dropout>,
    /// Each layer's input and per direction its record; each layer's output [fw; bw] after
    /// dropout (layer 0's is layer 1's input).
    inputs: [Tensor; 2],
    directions: [[DirectionSaved; 2]; 2],
    outputs: [Tensor; 2],
}

/// CVT's tagger as a run trains it.
pub struct CvtTraining {
    pub config: CvtConfig,
    word_embeddings: Tensor,
    /// `emb_scale` [1].
    emb_scale: Tensor,
    char_embeddings: Tensor,
    char_cnn: Vec<(Tensor, Tensor)>,
    layers: [[TrainDirection; 2]; 2],
    /// The primary module, then [`AUXILIARY`]'s.
    modules: Vec<TrainModule>,
    labeled_dropout: f32,
    unlabeled_dropout: f32,
    label_smoothing: f32,
}

/// The dropout of `p` at `site`, when training (`stream`) and p > 0.
fn site(stream: Option<&DropoutStream>, p: f32, site: usize) -> Result<Option<Dropout>> {
    stream.map_or(Ok(None), |d| d.site(p, site as u32))
}

/// A regularizer's setting from config.json: `key` in [0, 1), else `default`.
/// cvt_text's dropout on labelled batches (config.json's `labeled_dropout` by default).
pub const LABELED_DROPOUT: f32 = 0.5;
/// cvt_text's dropout on the views' pass over unlabelled text (`unlabeled_dropout`).
pub const UNLABELED_DROPOUT: f32 = 0.2;

fn probability(config: &serde_json::Value, key: &str, default: f32) -> Result<f32> {
    match config.get(key) {
        None => Ok(default),
        Some(value) => match value.as_f64() {
            Some(p) if (0.0..1.0).contains(&p) => Ok(p as f32),
            _ => Err(arg_err!("train", "config.json's {key} must be a number in [0, 1), not {value}")),
        },
    }
}

impl CvtTraining {
    /// The tagger's parameters, read through a recording view so the run trains and saves
    /// them under their names; `labeled_dropout` (0.5), `unlabeled_dropout` (0.2) and
    /// `label_smoothing` (0.1) from config.json, cvt_text's by default.
    pub fn load(config_json: &[u8], w: &Weights) -> Result<CvtTraining> {
        let config = CvtConfig::from_json(config_json)?;
        let raw: serde_json::Value = serde_json::from_slice(config_json).map_err(|e| arg_err!("train", "config.json: {e}"))?;
        let c = &config;
        let labels = c.head.num_labels();
        let p = c.projection_size;
        let direction = |k: usize, suffix: &str, input: usize| -> Result<TrainDirection> {
            let layer = w.pp(format!("encoder.{k}"));
            let cell = c.lstm_sizes[k];
            Ok(TrainDirection {
                input: Linear::from_tensors(
                    layer.tensor(&format!("weight_ih{suffix}"), &[4 * cell, input])?,
                    Some(layer.tensor(&format!("bias{suffix}"), &[4 * cell])?),
                ),
                weight_hh: layer.tensor(&format!("weight_hh{suffix}"), &[4 * cell, p])?,
                weight_hr: layer.tensor(&format!("weight_hr{suffix}"), &[p, cell])?,
                zero_bias: Tensor::zeros(w.gpu(), &[4 * cell], DType::F32)?,
                cell,
                reverse: !suffix.is_empty(),
            })
        };
        let layer = |k: usize, input: usize| -> Result<[TrainDirection; 2]> { Ok([direction(k, "", input)?, direction(k, "_reverse", input)?]) };
        let module = |name: &str| -> Result<TrainModule> {
            let input = ModuleInput::of(name).width(p);
            let m = w.pp(name);
            Ok(TrainModule {
                hidden: Linear::load(&m.pp("hidden"), input, c.module_size)?,
                relu: has_relu(name),
                output: Linear::load(&m.pp("output"), c.module_size, labels)?,
            })
        };
        let char_cnn = c.load_char_cnn(w)?;
        Ok(CvtTraining {
            word_embeddings: w.tensor("word_embeddings.weight", &[c.vocab_size, c.word_embedding_size])?,
            emb_scale: w.tensor("emb_scale", &[1])?,
            char_embeddings: w.tensor("char_embeddings.weight", &[super::CHAR_VOCAB, c.char_embedding_size])?,
            char_cnn,
            layers: [layer(0, c.word_repr_size())?, layer(1, 2 * p)?],
            modules: std::iter::once("primary").chain(AUXILIARY).map(module).collect::<Result<_>>()?,
            labeled_dropout: probability(&raw, "labeled_dropout", LABELED_DROPOUT)?,
            unlabeled_dropout: probability(&raw, "unlabeled_dropout", UNLABELED_DROPOUT)?,
            label_smoothing: probability(&raw, "label_smoothing", 0.1)?,
            config,
        })
    }

    fn filters(&self) -> Vec<ConvFilter<'_>> {
        self.char_cnn.iter().map(|(weight, bias)| ConvFilter { weight, bias }).collect()
    }

    /// The encoder over `batch`, with dropout `p` from `stream` when training.
    fn encode(&self, batch: &IdsBatch, p: f32, stream: Option<&DropoutStream>) -> Result<EncoderForward> {
        let op = "cvt";
        batch.validate()?;
        let c = &self.config;
        let (width, chars) = (c.chars_per_token(), c.chars(batch)?);
        let lengths = right_padded_lengths(op, batch)?;
        let (b, t) = (batch.batch, batch.seq);
        let n = b * t;
        let ids = |tokens| EmbeddingIds { tokens, positions: None, segments: None };
        let embed_drop = site(stream, p, 0)?;
        let embedded = dropout(&embedding(&self.word_embeddings, None, None, &ids(&batch.input_ids), &[n])?, embed_drop)?;
        let scaled = mul(&embedded.reshape(&[n * c.word_embedding_size, 1])?, &self.emb_scale)?.reshape(&[n, c.word_embedding_size])?;
        let char_vectors = embedding(&self.char_embeddings, None, None, &ids(chars), &[n * width])?.reshape(&[n, width, c.char_embedding_size])?;
        let cnn = char_cnn_saved(&char_vectors, &self.filters(), Activation::Relu)?;
        let cnn_drop = site(stream, p, 1)?;
        let mut x = concat_columns(&[&scaled, &dropout(&cnn.out, cnn_drop)?])?;
        let mut inputs = Vec::with_capacity(2);
        let mut directions = Vec::with_capacity(2);
        let mut outputs = Vec::with_capacity(2);
        for (k, layer) in self.layers.iter().enumerate() {
            let mut saved = Vec::with_capacity(2);
            let mut outs = Vec::with_capacity(2);
            for (d, dir) in layer.iter().enumerate() {
                let gates = dir.input.forward(&x)?.reshape(&[b, t, 4 * dir.cell])?;
                let weights = LstmTensors { state_linearity: &dir.weight_hh, state_bias: &dir.zero_bias, state_projection: Some(&dir.weight_hr) };
                let trace = lstm_sequence_traced(&gates, &lengths, &weights, &LstmConfig { reverse: dir.reverse, ..LstmConfig::default() })?;
                let drop = site(stream, p, 2 + 2 * k + d)?;
                outs.push(dropout(&trace.outputs.reshape(&[n, c.projection_size])?, drop)?);
                saved.push(DirectionSaved { trace, drop });
            }
            let out = concat_columns(&[&outs[0], &outs[1]])?;
            inputs.push(std::mem::replace(&mut x, out.clone()));
            outputs.push(out);
            directions.push(<[DirectionSaved; 2]>::try_from(saved).map_err(|_| arg_err!(op, "two directions"))?);
        }
        let pair = |v: Vec<Tensor>| <[Tensor; 2]>::try_from(v).map_err(|_| arg_err!(op, "two layers"));
        Ok(EncoderForward {
            embedded,
            embed_drop,
            chars: char_vectors,
            cnn,
            cnn_drop,
            inputs: pair(inputs)?,
            directions: <[[DirectionSaved; 2]; 2]>::try_from(directions).map_err(|_| arg_err!(op, "two layers"))?,
            outputs: pair(outputs)?,
        })
    }

    /// Each module's input: [fw1; bw1; fw2; bw2] for primary and full, fw1 for forwards and
    /// future, bw1 for backwards and past.
    fn module_inputs(&self, f: &EncoderForward) -> Result<[Tensor; 3]> {
        let p = self.config.projection_size;
        Ok([concat_columns(&[&f.outputs[0], &f.outputs[1]])?, columns(&f.outputs[0], 0, p)?, columns(&f.outputs[0], p, p)?])
    }

    /// Which of [`Self::module_inputs`] module `i` (0 primary, then [`AUXILIARY`]) reads.
    fn input_of(i: usize) -> usize {
        let name = if i == 0 { "primary" } else { AUXILIARY[i - 1] };
        match ModuleInput::of(name) {
            ModuleInput::Both => 0,
            ModuleInput::Forward => 1,
            ModuleInput::Backward => 2,
        }
    }

    /// Backpropagates `d_out` [N, 2P], the gradient of layer `k`'s output [fw; bw] (plus
    /// `extra` per direction), through the layer; returns the gradient of its input.
    fn layer_backward(&self, k: usize, f: &EncoderForward, d_out: &Tensor, extra: [Option<&Tensor>; 2], grads: &Gradients) -> Result<Tensor> {
        let p = self.config.projection_size;
        let (batch, seq) = (f.directions[k][0].trace.outputs.shape()[0], f.directions[k][0].trace.outputs.shape()[1]);
        let mut d_input: Option<Tensor> = None;
        for (d, dir) in self.layers[k].iter().enumerate() {
            let mut d_dir = columns(d_out, d * p, p)?;
            if let Some(extra) = extra[d] {
                d_dir = add(&d_dir, extra)?;
            }
            let saved = &f.directions[k][d];
            let d_h = dropout(&d_dir, saved.drop)?.reshape(&[batch, seq, p])?;
            let weights = LstmTensors { state_linearity: &dir.weight_hh, state_bias: &dir.zero_bias, state_projection: Some(&dir.weight_hr) };
            // The step kernels' bias is the constant 0: its gradient goes nowhere.
            let unused = Tensor::zeros(dir.zero_bias.gpu(), &[4 * dir.cell], DType::F32)?;
            let layer_grads =
                LstmTensors { state_linearity: grads.of(&dir.weight_hh)?, state_bias: &unused, state_projection: Some(grads.of(&dir.weight_hr)?) };
            let d_gates = lstm_sequence_backward(&saved.trace, &weights, &d_h, &layer_grads)?;
            let dx = dir.input.backward(&f.inputs[k], &d_gates.reshape(&[batch * seq, 4 * dir.cell])?, grads)?;
            d_input = Some(match d_input {
                Some(sum) => add(&sum, &dx)?,
                None => dx,
            });
        }
        Ok(d_input.expect("two directions"))
    }

    /// Backpropagates the gradients of the module inputs (`d_inputs`, as
    /// [`Self::module_inputs`]; None where no module read one) through the encoder.
    fn backward(&self, batch: &IdsBatch, f: EncoderForward, d_inputs: [Option<Tensor>; 3], grads: &Gradients) -> Result<()> {
        let c = &self.config;
        let (p, n) = (c.projection_size, batch.batch * batch.seq);
        let [d_both, d_fw1, d_bw1] = d_inputs;
        let d_both = match d_both {
            Some(d) => d,
            None => Tensor::zeros(self.word_embeddings.gpu(), &[n, 4 * p], DType::F32)?,
        };
        let d_out1 = columns(&d_both, 0, 2 * p)?;
        let d_out1 = add(&d_out1, &self.layer_backward(1, &f, &columns(&d_both, 2 * p, 2 * p)?, [None, None], grads)?)?;
        let d_x = self.layer_backward(0, &f, &d_out1, [d_fw1.as_ref(), d_bw1.as_ref()], grads)?;
        let e = c.word_embedding_size;
        // The character CNN's output, then the characters' embeddings.
        let d_cnn = dropout(&columns(&d_x, e, d_x.shape()[1] - e)?, f.cnn_drop)?;
        let filter_grads: Vec<ConvFilter> =
            self.char_cnn.iter().map(|(weight, bias)| Ok(ConvFilter { weight: grads.of(weight)?, bias: grads.of(bias)? })).collect::<Result<_>>()?;
        let d_chars = char_cnn_backward(&f.chars, &self.filters(), Activation::Relu, &f.cnn, &d_cnn, &filter_grads)?;
        let chars = batch.char_ids.as_ref().expect("checked by encode");
        embedding_backward(&d_chars.reshape(&[chars.len(), c.char_embedding_size])?, chars, grads.of(&self.char_embeddings)?)?;
        // x = scale · dropped embeddings: d scale = Σ d ⊙ dropped, d dropped = scale · d.
        let d_scaled = columns(&d_x, 0, e)?.reshape(&[n * e, 1])?;
        matmul_accumulate(&f.embedded.reshape(&[1, n * e])?, &d_scaled, Matmul::default(), &grads.of(&self.emb_scale)?.reshape(&[1, 1])?)?;
        let d_embedded = dropout(&mul(&d_scaled, &self.emb_scale)?.reshape(&[n, e])?, f.embed_drop)?;
        embedding_backward(&d_embedded, &batch.input_ids, grads.of(&self.word_embeddings)?)?;
        Ok(())
    }

    /// The forward of the modules `which` on the encoder's output.
    fn modules_forward(&self, f: &EncoderForward, which: &[usize]) -> Result<ModulesForward> {
        let inputs = self.module_inputs(f)?;
        let saved = which.iter().map(|&i| Ok((i, self.modules[i].forward(&inputs[Self::input_of(i)])?))).collect::<Result<_>>()?;
        Ok((inputs, saved))
    }

    /// Backpropagates each module's logit gradient `d_logits` and then the encoder.
    fn modules_backward(
        &self,
        batch: &IdsBatch,
        f: EncoderForward,
        inputs: &[Tensor; 3],
        saved: &[(usize, ModuleSaved)],
        d_logits: Vec<Option<Tensor>>,
        grads: &Gradients,
    ) -> Result<()> {
        let mut d_inputs: [Option<Tensor>; 3] = [None, None, None];
        for ((i, record), d) in saved.iter().zip(d_logits) {
            let Some(d) = d else { continue };
            let slot = Self::input_of(*i);
            let dx = self.modules[*i].backward(&inputs[slot], record, &d, grads)?;
            d_inputs[slot] = Some(match d_inputs[slot].take() {
                Some(sum) => add(&sum, &dx)?,
                None => dx,
            });
        }
        self.backward(batch, f, d_inputs, grads)
    }

    /// The primary module's logits [B, T, labels] without dropout (the teacher, and
    /// held-out evaluation).
    pub fn logits(&self, batch: &IdsBatch) -> Result<Tensor> {
        let f = self.encode(batch, 0.0, None)?;
        let (_, saved) = self.modules_forward(&f, &[0])?;
        let logits = &saved[0].1.logits;
        logits.reshape(&[batch.batch, batch.seq, logits.shape()[1]])
    }

    /// The labelled loss of `batch` against `labels` (one per token, −100 off the words) and
    /// its backward, adding `loss_scale` × the gradients into `grads`. Returns the loss `[1]`.
    pub fn labeled_loss_backward(&self, batch: &IdsBatch, labels: &[i64], grads: &Gradients, loss_scale: f32, stream: &DropoutStream) -> Result<Tensor> {
        let op = "cvt";
        let n = batch.batch * batch.seq;
        if labels.len() != n {
            return Err(arg_err!(op, "{} labels for {n} tokens", labels.len()));
        }
        let k = self.config.head.num_labels();
        let words: Vec<usize> = (0..n).filter(|&r| labels[r] != DEFAULT_IGNORE_INDEX).collect();
        if let Some(&bad) = words.iter().find(|&&r| labels[r] < 0 || labels[r] as usize >= k) {
            return Err(arg_err!(op, "label {} at token {bad} is not one of the {k} tags", labels[bad]));
        }
        let f = self.encode(batch, self.labeled_dropout, Some(stream))?;
        let (inputs, saved) = self.modules_forward(&f, &[0])?;
        let gpu = self.word_embeddings.gpu().clone();
        if words.is_empty() {
            return Tensor::zeros(&gpu, &[1], DType::F32);
        }
        let logits = saved[0].1.logits.select_rows(&words)?;
        let gold: Vec<i64> = words.iter().map(|&r| labels[r]).collect();
        let eps = self.label_smoothing;
        let scalar = |v: f32| Tensor::from_slice(&gpu, &[v], &[1]);
        // (1 − ε)·CE(gold) + ε·(KL(uniform ‖ p) + ln K); the soft term's backward first (the
        // hard one's overwrites the logits).
        let mut loss = Tensor::zeros(&gpu, &[1], DType::F32)?;
        let mut d_rows: Option<Tensor> = None;
        if eps > 0.0 {
            let uniform = Tensor::zeros(&gpu, logits.shape(), DType::F32)?;
            let soft = soft_target_loss(&logits, &uniform, 1.0)?;
            loss = add(&mul(&soft.loss, &scalar(eps)?)?, &scalar(eps * (k as f32).ln())?)?;
            d_rows = Some(soft_target_loss_backward(&logits, &uniform, &soft, eps * loss_scale)?);
        }
        let hard = cross_entropy(&logits, &gold, DEFAULT_IGNORE_INDEX)?;
        loss = add(&loss, &mul(&hard.loss, &scalar(1.0 - eps)?)?)?;
        let d_hard = cross_entropy_backward(logits, &hard, (1.0 - eps) * loss_scale)?;
        let d_rows = match d_rows {
            Some(d_soft) => add(&d_soft, &d_hard)?,
            None => d_hard,
        };
        let d_logits = Tensor::zeros(&gpu, &[n, k], DType::F32)?;
        let rows: Vec<u32> = words.iter().map(|&r| r as u32).collect();
        embedding_backward(&d_rows, &rows, &d_logits)?;
        self.modules_backward(batch, f, &inputs, &saved, vec![Some(d_logits)], grads)?;
        Ok(loss)
    }

    /// CVT's loss on the unlabelled `batch` and its backward: the auxiliary views against the
    /// primary module's predictions without dropout. Returns the loss `[1]`.
    pub fn unlabeled_loss_backward(&self, batch: &IdsBatch, grads: &Gradients, loss_scale: f32, stream: &DropoutStream) -> Result<Tensor> {
        let teacher = self.logits(batch)?;
        let (n, k) = (batch.batch * batch.seq, self.config.head.num_labels());
        let teacher = teacher.reshape(&[n, k])?;
        let lengths = right_padded_lengths("cvt", batch)?;
        // The words: every position but <start>, <end> and padding.
        let word = |r: usize| {
            let t = r % batch.seq;
            t > 0 && t + 1 < lengths[r / batch.seq]
        };
        let f = self.encode(batch, self.unlabeled_dropout, Some(stream))?;
        let auxiliary: Vec<usize> = (1..self.modules.len()).collect();
        let (inputs, saved) = self.modules_forward(&f, &auxiliary)?;
        let gpu = self.word_embeddings.gpu().clone();
        let mut loss = Tensor::zeros(&gpu, &[1], DType::F32)?;
        let mut d_logits = Vec::with_capacity(saved.len());
        for (i, record) in &saved {
            let shift: isize = match AUXILIARY[i - 1] {
                "future" => 1,
                "past" => -1,
                _ => 0,
            };
            // A view at t learns the teacher at t + shift, where both are words of one sentence.
            let rows: Vec<usize> = (0..n)
                .filter(|&r| {
                    let target = r as isize + shift;
                    word(r) && target >= 0 && (target as usize) / batch.seq == r / batch.seq && word(target as usize)
                })
                .collect();
            if rows.is_empty() {
                d_logits.push(None);
                continue;
            }
            let targets: Vec<usize> = rows.iter().map(|&r| (r as isize + shift) as usize).collect();
            let student = record.logits.select_rows(&rows)?;
            let teacher_rows = teacher.select_rows(&targets)?;
            let soft = soft_target_loss(&student, &teacher_rows, 1.0)?;
            loss = add(&loss, &soft.loss)?;
            let d_rows = soft_target_loss_backward(&student, &teacher_rows, &soft, loss_scale)?;
            let d = Tensor::zeros(&gpu, &[n, k], DType::F32)?;
            embedding_backward(&d_rows, &rows.iter().map(|&r| r as u32).collect::<Vec<_>>(), &d)?;
            d_logits.push(Some(d));
        }
        self.modules_backward(batch, f, &inputs, &saved, d_logits, grads)?;
        Ok(loss)
    }
}

/// The tagger trains with token-classify: a batch with labels is a labelled batch, one
/// without (all −100) unlabelled text for cross-view training.
impl Trainable for CvtTraining {
    fn architecture(&self) -> &str {
        self.config.head.architecture("CvtForTokenClassification")
    }

    fn objectives(&self) -> Vec<Objective> {
        vec![Objective::TokenClassify]
    }

    fn max_positions(&self) -> Option<usize> {
        None
    }

    /// About how many f32 values a training batch of `batch` × `seq` keeps for its backward:
    /// per token and LSTM direction the gate records (7 × cell) and outputs (2 × projection),
    /// the characters' embeddings and convolution outputs, and the modules' activations.
    fn activation_values(&self, batch: usize, seq: usize) -> u64 {
        use crate::limits::saturating_product as product;
        let c = &self.config;
        let lstm: u64 = c.lstm_sizes.iter().map(|&cell| 2 * (7 * cell as u64 + 2 * c.projection_size as u64)).sum();
        let chars = product(&[c.chars_per_token() as u64, (c.char_embedding_size + c.char_filters * c.char_filter_widths.len()) as u64]);
        let modules = product(&[self.modules.len() as u64, 2 * c.module_size as u64 + c.head.num_labels() as u64]);
        product(&[batch as u64, seq as u64, lstm.saturating_add(chars).saturating_add(modules)])
    }

    fn chars_per_token(&self) -> usize {
        self.config.chars_per_token()
    }

    fn learns_from_unlabeled_text(&self) -> bool {
        true
    }

    fn loss_backward(&self, objective: Objective, batch: &Batch, grads: &Gradients, step: &StepOptions) -> Result<Tensor> {
        self.check(objective)?;
        let ids = batch.ids(InputKinds::default());
        match batch.labels.iter().all(|&l| l == DEFAULT_IGNORE_INDEX) {
            true => self.unlabeled_loss_backward(&ids, grads, step.loss_scale, &step.dropout),
            false => self.labeled_loss_backward(&ids, &batch.labels, grads, step.loss_scale, &step.dropout),
        }
    }

    fn forward(&self, objective: Objective, batch: &Batch) -> Result<ModelOutput> {
        self.check(objective)?;
        Ok(ModelOutput::logits(self.logits(&batch.ids(InputKinds::default()))?))
    }
}
