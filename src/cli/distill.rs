//! `sesame distill`: trains a student on a teacher's softened distribution (knowledge
//! distillation, as DistilBERT and distilgpt2 were trained): every flag of `sesame train`
//! (its data, replayed batches, log, checkpoints and --resume), plus the teacher, the
//! temperature and the weights of the three losses (the library's [`Distillation`]). The
//! student is --model-init, or is made from the teacher with --student-layers (every other
//! teacher layer for half its depth), as a DistilBERT with --student-arch distilbert.

use sesame::error::Result;
use sesame::train::distill::Distillation;
use sesame::Device;

use super::train::{self, TrainArgs};

#[derive(clap::Args)]
pub struct DistillArgs {
    #[command(flatten)]
    distillation: Distillation,
    #[command(flatten)]
    train: TrainArgs,
}

pub fn run(gpu: &Device, args: DistillArgs) -> Result<()> {
    let DistillArgs { distillation, mut train } = args;
    train.spec.distillation = Some(distillation);
    train::run(gpu, train)
}
