//! A run's checkpoints in memory, laid out as a directory holds them ([`Checkpointing`]'s
//! `out/checkpoint-NNNNNN/` folders, the final model in `out`), so that a run resumes from
//! them through [`Files`](crate::files::Files) as from a directory: a browser's store.

use super::{checkpoint_dir, checkpoints, CheckpointStore, Checkpointing};
use crate::error::Result;
use crate::files::MemoryFiles;

/// The checkpoints and final model of a run that keeps them in `files`, where and as often as
/// `plan` says.
#[derive(Clone, Debug)]
pub struct MemoryCheckpoints {
    pub plan: Checkpointing,
    pub files: MemoryFiles,
}

impl CheckpointStore for MemoryCheckpoints {
    fn every(&self) -> u64 {
        self.plan.every
    }

    fn save_checkpoint(&mut self, step: u64, files: &[(String, Vec<u8>)]) -> Result<()> {
        let dir = checkpoint_dir(&self.plan.out, step);
        self.files.remove_dir(&dir);
        for (name, bytes) in files {
            self.files.insert(dir.join(name), bytes.clone());
        }
        let all = checkpoints(&self.files, &self.plan.out)?;
        for (_, old) in &all[..all.len().saturating_sub(self.plan.keep.max(1))] {
            self.files.remove_dir(old);
        }
        Ok(())
    }

    fn save_model(&mut self, files: &[(String, Vec<u8>)]) -> Result<()> {
        for (name, bytes) in files {
            self.files.insert(self.plan.out.join(name), bytes.clone());
        }
        Ok(())
    }
}
