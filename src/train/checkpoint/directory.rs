//! A run's checkpoints in a directory: `OUT/checkpoint-NNNNNN/` folders, each written under a
//! temporary name and renamed when complete, so that a crash or a full disk never leaves a
//! half-written checkpoint under a final name, and `--resume` picks the newest complete one.

use std::path::{Path, PathBuf};

use super::{checkpoint_dir, checkpoints, CheckpointStore, Checkpointing, PREFIX};
use crate::error::{Result, SesameError};
use crate::files::{io_err, write_atomic, Disk, Files};

impl CheckpointStore for Checkpointing {
    fn every(&self) -> u64 {
        self.every
    }

    fn save_checkpoint(&mut self, step: u64, files: &[(String, Vec<u8>)]) -> Result<()> {
        save(&self.out, step, files, self.keep).map(|_| ())
    }

    fn save_model(&mut self, files: &[(String, Vec<u8>)]) -> Result<()> {
        write_files(&self.out, files)
    }
}

/// Writes `files` (each atomically) into `dir`, making their folders.
fn write_files(dir: &Path, files: &[(String, Vec<u8>)]) -> Result<()> {
    for (name, bytes) in files {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io_err(parent))?;
        }
        write_atomic(&path, bytes)?;
    }
    Ok(())
}

/// Writes `files` as `OUT/checkpoint-{step}` and removes all but the newest `keep` checkpoints.
pub fn save(out: &Path, step: u64, files: &[(String, Vec<u8>)], keep: usize) -> Result<PathBuf> {
    let dir = checkpoint_dir(out, step);
    let tmp = out.join(format!(".{PREFIX}{step:06}.tmp-{}", std::process::id()));
    let written = (|| -> Result<()> {
        std::fs::create_dir_all(&tmp).map_err(io_err(&tmp))?;
        write_files(&tmp, files)?;
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(io_err(&dir))?;
        }
        std::fs::rename(&tmp, &dir).map_err(io_err(&dir))
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(SesameError::Io(format!("saving the checkpoint of step {step} failed (earlier checkpoints are kept): {e}")));
    }
    let all = list(out)?;
    for (_, old) in all.iter().take(all.len().saturating_sub(keep.max(1))) {
        std::fs::remove_dir_all(old).map_err(io_err(old))?;
    }
    Ok(dir)
}

/// The complete checkpoints under `out`, oldest first, after removing the temporary folders
/// of an interrupted save by another process (one run writes to a folder at a time).
fn list(out: &Path) -> Result<Vec<(u64, PathBuf)>> {
    for name in Disk.entries(out)? {
        let temporary = name.strip_prefix('.').filter(|n| n.starts_with(PREFIX)).and_then(|n| n.rsplit_once(".tmp-"));
        if temporary.is_some_and(|(_, pid)| pid.parse::<u32>().is_ok_and(|pid| pid != std::process::id())) {
            let _ = std::fs::remove_dir_all(out.join(&name));
        }
    }
    checkpoints(&Disk, out)
}
