//! `sesame train --config RUN.toml` (and `sesame distill`'s): a run's settings in a file. Its keys are the long flags
//! (`lr = 1e-3`, `whole_word_mask = true`, `data = "corpus.txt"`); flags given on the command
//! line win over the file's.

use std::ffi::OsString;
use std::path::Path;

use sesame::error::{Result, SesameError};

use crate::cli::read_text;

/// The command line with the flags of the `--config` file of a `train` command inserted
/// right after `train` (so the command line's own flags, parsed later, override them).
pub fn expand(args: Vec<OsString>) -> Result<Vec<OsString>> {
    // `distill` takes every flag of `train`.
    let Some(train) = args.iter().position(|a| a == "train" || a == "distill") else { return Ok(args) };
    let mut path = None;
    for (i, arg) in args.iter().enumerate().skip(train + 1) {
        let arg = arg.to_string_lossy();
        if arg == "--config" {
            path = args.get(i + 1).map(|p| p.to_string_lossy().into_owned());
        } else if let Some(p) = arg.strip_prefix("--config=") {
            path = Some(p.to_string());
        }
    }
    let Some(path) = path else { return Ok(args) };
    let flags = flags_of(&read_text(Path::new(&path))?, &path)?;
    let mut expanded = args[..=train].to_vec();
    expanded.extend(flags.into_iter().map(OsString::from));
    expanded.extend_from_slice(&args[train + 1..]);
    Ok(expanded)
}

/// The flags a TOML table of settings stands for.
fn flags_of(toml_text: &str, path: &str) -> Result<Vec<String>> {
    let bad = |message: String| SesameError::InvalidArgument { op: "train", message: format!("--config {path}: {message}") };
    let table: toml::Table = toml_text.parse().map_err(|e| bad(format!("{e}")))?;
    let mut flags = Vec::new();
    for (key, value) in table {
        let flag = format!("--{}", key.replace('_', "-"));
        match value {
            toml::Value::Boolean(true) => flags.push(flag),
            toml::Value::Boolean(false) => {}
            toml::Value::String(s) => flags.extend([flag, s]),
            toml::Value::Integer(n) => flags.extend([flag, n.to_string()]),
            toml::Value::Float(x) => flags.extend([flag, x.to_string()]),
            other => return Err(bad(format!("`{key}` must be a string, number or boolean, got {}", other.type_str()))),
        }
    }
    Ok(flags)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_config_file_becomes_flags_that_the_command_line_overrides() {
        let path = std::env::temp_dir().join(format!("sesame-config-{}.toml", std::process::id()));
        std::fs::write(&path, "arch = \"gpt2\"\nlr = 0.001\nsteps = 2000\nwhole_word_mask = true\nresume = false\n").unwrap();
        let args = os(&["sesame", "train", "--config", path.to_str().unwrap(), "--lr", "0.01"]);
        let expanded: Vec<String> = expand(args).unwrap().into_iter().map(|a| a.into_string().unwrap()).collect();
        let from_file = ["--arch", "gpt2", "--lr", "0.001", "--steps", "2000", "--whole-word-mask"];
        assert_eq!(&expanded[2..9], &from_file, "{expanded:?}");
        assert_eq!(&expanded[9..], &["--config", path.to_str().unwrap(), "--lr", "0.01"], "the command line comes last, so it wins");
        std::fs::write(&path, "layers = [1, 2]\n").unwrap();
        let err = expand(os(&["sesame", "train", &format!("--config={}", path.display())])).unwrap_err().to_string();
        assert!(err.contains("`layers` must be"), "{err}");
        std::fs::write(&path, "lr = \n").unwrap();
        assert!(expand(os(&["sesame", "train", "--config", path.to_str().unwrap()])).is_err(), "not TOML");
        std::fs::remove_file(&path).unwrap();
        assert_eq!(expand(os(&["sesame", "info"])).unwrap(), os(&["sesame", "info"]));
    }
}
