//! ERNIE 2.0's continual multi-task learning (Sun et al. 2020, §3.2): training runs in stages,
//! each task joining at its stage and trained from then on beside the tasks before it, so a
//! new task is learnt without forgetting the old. Within a stage every step trains one of the
//! tasks joined so far, in rounds: each round a seeded shuffle of them, so each task gets an
//! equal share of the stage's steps and its batches are drawn in its own order. A step of
//! several micro-batches (gradient accumulation) takes them all from its task.

use super::data::BatchSource;
use crate::error::{arg_err, Result};
use crate::models::training::{rng_for, Batch};
use rand::seq::SliceRandom;

const OP: &str = "stages";

pub struct StagedMixture {
    sources: Vec<Box<dyn BatchSource>>,
    /// The stage each task joins at (0 the first).
    joins: Vec<usize>,
    /// The step each stage starts at; the last stage runs without end.
    starts: Vec<u64>,
    /// Micro-batches per optimizer step.
    batches_per_step: u64,
    seed: u64,
}

impl StagedMixture {
    /// `sources[t]` joins at stage `joins[t]` (0-based); stage k lasts `stage_steps[k]` steps,
    /// the last stage (`stage_steps.len()`) to the end of the run. Every stage adds a task.
    /// A step takes `batches_per_step` micro-batches.
    pub fn new(
        names: &[&str],
        sources: Vec<Box<dyn BatchSource>>,
        joins: &[usize],
        stage_steps: &[u64],
        batches_per_step: u64,
        seed: u64,
    ) -> Result<StagedMixture> {
        if names.len() != sources.len() || names.len() != joins.len() {
            return Err(arg_err!(OP, "{} task names, {} tasks' data and {} stages to join at", names.len(), sources.len(), joins.len()));
        }
        if batches_per_step == 0 {
            return Err(arg_err!(OP, "a step takes at least one batch"));
        }
        let stages = stage_steps.len() + 1;
        if let Some((name, &stage)) = names.iter().zip(joins).find(|(_, &s)| s >= stages) {
            return Err(arg_err!(OP, "task `{name}` joins at stage {}, but the stages' steps name {stages} stages (the last runs to the end)", stage + 1));
        }
        if let Some(empty) = (0..stages).find(|k| !joins.contains(k)) {
            return Err(arg_err!(OP, "no task joins at stage {} of {stages}: each stage adds one or more tasks", empty + 1));
        }
        if let Some(k) = stage_steps.iter().position(|&s| s == 0) {
            return Err(arg_err!(OP, "stage {} has no steps", k + 1));
        }
        let starts = std::iter::once(0)
            .chain(stage_steps.iter().scan(0u64, |end, &steps| {
                *end = end.saturating_add(steps);
                Some(*end)
            }))
            .collect();
        // Its own stream, apart from the tasks' data drawn with the run's seed.
        let seed = seed ^ 0x57A6_E5C4_ED01_E000;
        Ok(StagedMixture { sources, joins: joins.to_vec(), starts, batches_per_step, seed })
    }

    /// The tasks trained in stage `k`, in task order.
    fn active(&self, k: usize) -> Vec<usize> {
        (0..self.joins.len()).filter(|&t| self.joins[t] <= k).collect()
    }

    /// Round `round` of stage `k`: the order its tasks (as indices into `active(k)`) train in.
    fn round(&self, k: usize, round: u64, tasks: usize) -> Vec<usize> {
        let mut order: Vec<usize> = (0..tasks).collect();
        order.shuffle(&mut rng_for(self.seed.wrapping_add((k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)), round));
        order
    }

    /// How many of the first `steps` steps of stage `k` train task `task`.
    fn steps_of(&self, k: usize, steps: u64, task: usize) -> u64 {
        let active = self.active(k);
        let Some(slot) = active.iter().position(|&t| t == task) else { return 0 };
        let n = active.len() as u64;
        let (rounds, rest) = (steps / n, steps % n);
        let in_partial = rest > 0 && self.round(k, rounds, active.len()).iter().position(|&s| s == slot).is_some_and(|p| (p as u64) < rest);
        rounds + in_partial as u64
    }
}

impl BatchSource for StagedMixture {
    fn batches(&self) -> Option<usize> {
        None
    }

    /// Micro-batch `index`: its step's task, and that task's next batch — its batch
    /// i × batches_per_step + the micro-batch, where i is how many steps before trained it.
    fn batch(&self, index: u64) -> Result<Batch> {
        let (global, micro) = (index / self.batches_per_step, index % self.batches_per_step);
        let k = self.starts.partition_point(|&start| start <= global) - 1;
        let active = self.active(k);
        let step = global - self.starts[k];
        let n = active.len() as u64;
        let task = active[self.round(k, step / n, active.len())[(step % n) as usize]];
        let before: u64 = (0..k).map(|s| self.steps_of(s, self.starts[s + 1] - self.starts[s], task)).sum::<u64>() + self.steps_of(k, step, task);
        Ok(Batch { task: Some(task), ..self.sources[task].batch(before * self.batches_per_step + micro)? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Batch i of a task says i in its labels.
    struct Counting;

    impl BatchSource for Counting {
        fn batches(&self) -> Option<usize> {
            None
        }

        fn batch(&self, index: u64) -> Result<Batch> {
            Ok(Batch { labels: vec![index as i64], batch: 1, seq: 1, ..Default::default() })
        }
    }

    fn counting(tasks: usize) -> Vec<Box<dyn BatchSource>> {
        (0..tasks).map(|_| Box::new(Counting) as Box<dyn BatchSource>).collect()
    }

    #[test]
    fn tasks_join_at_their_stage_share_it_equally_and_draw_their_batches_in_order() {
        // mlm from stage 1 (10 steps), caps from stage 2 (9 steps), reorder and distance from stage 3.
        let mixture = StagedMixture::new(&["mlm", "caps", "reorder", "distance"], counting(4), &[0, 1, 2, 2], &[10, 9], 1, 3).unwrap();
        let steps: Vec<(usize, i64)> = (0..31).map(|i| mixture.batch(i).unwrap()).map(|b| (b.task.unwrap(), b.labels[0])).collect();
        assert!(steps[..10].iter().all(|&(t, _)| t == 0), "stage 1 trains mlm alone: {steps:?}");
        let count = |range: std::ops::Range<usize>, task: usize| steps[range].iter().filter(|&&(t, _)| t == task).count();
        let stage_2 = [count(10..19, 0), count(10..19, 1)];
        assert!(stage_2.contains(&4) && stage_2.contains(&5), "stage 2's 9 steps: 4 rounds of both and one more step: {stage_2:?}");
        assert!((10..18).step_by(2).all(|i| steps[i].0 != steps[i + 1].0), "each round trains both once: {steps:?}");
        assert_eq!((0..4).map(|t| count(19..31, t)).collect::<Vec<_>>(), [3, 3, 3, 3], "stage 3: 3 rounds of 4 tasks");
        // Each task's batches are its own 0, 1, 2, … in the order it is trained.
        for task in 0..4 {
            let labels: Vec<i64> = steps.iter().filter(|&&(t, _)| t == task).map(|&(_, l)| l).collect();
            assert_eq!(labels, (0..labels.len() as i64).collect::<Vec<_>>(), "task {task}");
        }
        let rounds: Vec<Vec<usize>> = (0..3).map(|r| steps[19 + 4 * r..23 + 4 * r].iter().map(|&(t, _)| t).collect()).collect();
        assert!(rounds.windows(2).any(|w| w[0] != w[1]), "the rounds are shuffled: {rounds:?}");
        assert_eq!(mixture.batch(1000).unwrap(), mixture.batch(1000).unwrap(), "a batch depends on its index alone");
        let late = mixture.batch(1000).unwrap();
        let task = late.task.unwrap();
        assert_eq!(late.labels[0] as usize, count(0..19, task) + (1000 - 19) / 4, "task {task}'s batches before stage 3 and its rounds in it");
    }

    #[test]
    fn a_step_of_several_micro_batches_takes_them_all_from_its_task() {
        let mixture = StagedMixture::new(&["a", "b"], counting(2), &[0, 1], &[2], 3, 7).unwrap();
        let batches: Vec<(usize, i64)> = (0..18).map(|i| mixture.batch(i).unwrap()).map(|b| (b.task.unwrap(), b.labels[0])).collect();
        assert_eq!(batches[..6], [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (0, 5)], "stage 1: two steps of a");
        for step in batches[6..].chunks(3) {
            let task = step[0].0;
            assert!(step.iter().all(|&(t, _)| t == task), "one task per step: {batches:?}");
            assert!(step.windows(2).all(|w| w[1].1 == w[0].1 + 1), "its consecutive batches: {batches:?}");
        }
        for task in 0..2 {
            let labels: Vec<i64> = batches.iter().filter(|&&(t, _)| t == task).map(|&(_, l)| l).collect();
            assert_eq!(labels, (0..labels.len() as i64).collect::<Vec<_>>(), "task {task}");
        }
    }

    #[test]
    fn stages_without_a_new_task_or_steps_are_refused() {
        let err = |joins: &[usize], steps: &[u64]| StagedMixture::new(&["a", "b"], counting(2), joins, steps, 1, 0).err().unwrap().to_string();
        assert!(err(&[0, 2], &[5, 5]).contains("no task joins at stage 2"));
        assert!(err(&[0, 2], &[5]).contains("joins at stage 3"));
        assert!(err(&[1, 1], &[5]).contains("no task joins at stage 1"));
        assert!(err(&[0, 1], &[0]).contains("stage 1 has no steps"));
        assert!(StagedMixture::new(&["a", "b"], counting(2), &[0, 0], &[], 1, 0).is_ok(), "one stage of both");
        assert!(StagedMixture::new(&["a", "b"], counting(2), &[0], &[], 1, 0).is_err(), "a stage per task");
    }
}
