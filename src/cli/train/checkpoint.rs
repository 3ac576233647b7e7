//! Training checkpoints: `OUT/checkpoint-NNNNNN/` folders in the Hugging Face layout
//! (config.json, model.safetensors, tokenizer.json; ELMo's options.json, model.safetensors,
//! vocab.txt) plus the optimizer moments and
//! trainer_state.json. A folder is written under a temporary name and renamed when complete,
//! so a crash or a full disk never leaves a half-written checkpoint under a final name, and
//! `--resume` picks the newest complete one.

use std::path::{Path, PathBuf};

use sesame::error::{Result, SesameError};
use sesame::train::params::{Parameters, Part};
use sesame::weights::Checkpoint;

use super::Settings;
use crate::cli::{io_err, read_bytes, write_atomic};

const PREFIX: &str = "checkpoint-";

/// What trainer_state.json records: the optimizer steps taken and the run's settings, which
/// a resumed run must repeat.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct TrainerState {
    pub step: u64,
    pub settings: Settings,
}

/// The model's files besides model.safetensors, copied into every checkpoint: (name, bytes),
/// e.g. config.json and tokenizer.json, or ELMo's options.json and vocab.txt.
pub struct ModelFolder {
    pub files: Vec<(&'static str, Vec<u8>)>,
}

impl ModelFolder {
    /// The bytes of file `name`.
    pub fn file(&self, name: &str) -> Option<&[u8]> {
        self.files.iter().find(|(n, _)| *n == name).map(|(_, bytes)| bytes.as_slice())
    }

    /// Writes the model files (each atomically) into `dir`.
    pub fn write(&self, dir: &Path, params: &Parameters) -> Result<()> {
        write_atomic(&dir.join("model.safetensors"), &pollster::block_on(params.to_safetensors(Part::Value))?)?;
        for (name, bytes) in &self.files {
            write_atomic(&dir.join(name), bytes)?;
        }
        Ok(())
    }
}

/// Writes `OUT/checkpoint-{step}` and removes all but the newest `keep` checkpoints.
pub fn save(out: &Path, model: &ModelFolder, params: &Parameters, state: &TrainerState, keep: usize) -> Result<PathBuf> {
    let dir = out.join(format!("{PREFIX}{:06}", state.step));
    let tmp = out.join(format!(".{PREFIX}{:06}.tmp-{}", state.step, std::process::id()));
    let written = (|| -> Result<()> {
        std::fs::create_dir_all(&tmp).map_err(io_err(&tmp))?;
        model.write(&tmp, params)?;
        write_atomic(&tmp.join("optimizer.exp_avg.safetensors"), &pollster::block_on(params.to_safetensors(Part::FirstMoment))?)?;
        write_atomic(&tmp.join("optimizer.exp_avg_sq.safetensors"), &pollster::block_on(params.to_safetensors(Part::SecondMoment))?)?;
        let json = serde_json::to_vec_pretty(state).map_err(|e| SesameError::Io(format!("trainer state: {e}")))?;
        write_atomic(&tmp.join("trainer_state.json"), &json)?;
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(io_err(&dir))?;
        }
        std::fs::rename(&tmp, &dir).map_err(io_err(&dir))
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(SesameError::Io(format!("saving the checkpoint of step {} failed (earlier checkpoints are kept): {e}", state.step)));
    }
    let all = list(out)?;
    for (_, old) in all.iter().take(all.len().saturating_sub(keep.max(1))) {
        std::fs::remove_dir_all(old).map_err(io_err(old))?;
    }
    Ok(dir)
}

/// The complete checkpoints under `out`, oldest first. Temporary folders of an interrupted
/// save by another process are removed (one run writes to a folder at a time).
fn list(out: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(out).map_err(io_err(out))? {
        let entry = entry.map_err(io_err(out))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if let Some(step) = name.strip_prefix(PREFIX).and_then(|n| n.parse::<u64>().ok()) {
            found.push((step, entry.path()));
        } else if let Some((_, pid)) = name.strip_prefix('.').filter(|n| n.starts_with(PREFIX)).and_then(|n| n.rsplit_once(".tmp-")) {
            if pid.parse::<u32>().is_ok_and(|pid| pid != std::process::id()) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    found.sort();
    Ok(found)
}

/// The newest complete checkpoint under `out`.
pub fn latest(out: &Path) -> Result<(PathBuf, TrainerState)> {
    let (_, dir) = list(out)
        .ok()
        .and_then(|mut all| all.pop())
        .ok_or_else(|| SesameError::InvalidArgument { op: "train", message: format!("--resume: no checkpoint-* folder in {}", out.display()) })?;
    let state = serde_json::from_slice(&read_bytes(&dir.join("trainer_state.json"))?)
        .map_err(|e| SesameError::Checkpoint(format!("{}: {e}", dir.join("trainer_state.json").display())))?;
    Ok((dir, state))
}

/// Loads the optimizer moments saved in checkpoint folder `dir`.
pub fn load_moments(dir: &Path, params: &mut Parameters) -> Result<()> {
    for (file, part) in [("optimizer.exp_avg.safetensors", Part::FirstMoment), ("optimizer.exp_avg_sq.safetensors", Part::SecondMoment)] {
        let path = dir.join(file);
        let checkpoint = Checkpoint::from_bytes(read_bytes(&path)?).map_err(|e| SesameError::Checkpoint(format!("{}: {e}", path.display())))?;
        params.load_moments(part, &checkpoint)?;
    }
    Ok(())
}
