//! The files Sesame reads — model folders, training data, checkpoints — through [`Files`]:
//! natively the disk ([`Disk`], and the functions that read and write it), anywhere the
//! files a program holds in memory ([`MemoryFiles`]: a browser page's).

#[cfg(not(target_arch = "wasm32"))]
mod disk;

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

#[cfg(not(target_arch = "wasm32"))]
pub use disk::*;

use crate::error::{Result, SesameError};

/// Where files are read from. Paths are as on a disk: a model folder's files are
/// `dir.join(name)`.
pub trait Files {
    /// The bytes of the file at `path`; an error naming it when there is none.
    fn read(&self, path: &Path) -> Result<Vec<u8>>;

    /// Whether a file is at `path`.
    fn is_file(&self, path: &Path) -> bool;

    /// Whether a folder is at `path`.
    fn is_dir(&self, path: &Path) -> bool;

    /// The names of the files and folders directly in folder `dir`.
    fn entries(&self, dir: &Path) -> Result<Vec<String>>;

    /// `path` on this machine's disk, when these are its files (so that large ones can be read
    /// a part at a time).
    fn local_path(&self, _path: &Path) -> Option<PathBuf> {
        None
    }

    /// [`Files::read`] as UTF-8 text.
    fn read_text(&self, path: &Path) -> Result<String> {
        String::from_utf8(self.read(path)?).map_err(|e| SesameError::Io(format!("{}: not UTF-8 text: {e}", path.display())))
    }
}

/// Files held in memory by their paths; a folder is the prefix of a file's path.
#[derive(Clone, Debug, Default)]
pub struct MemoryFiles {
    files: BTreeMap<PathBuf, Vec<u8>>,
}

impl MemoryFiles {
    /// Adds (or replaces) the file at `path` (`a/./b` and `a//b` are `a/b`).
    pub fn insert(&mut self, path: impl AsRef<Path>, bytes: Vec<u8>) {
        self.files.insert(normal(path.as_ref()), bytes);
    }

    /// Removes the file at `path`, if there is one.
    pub fn remove(&mut self, path: &Path) {
        self.files.remove(&normal(path));
    }

    /// Removes the folder `dir` and every file in it.
    pub fn remove_dir(&mut self, dir: &Path) {
        let dir = normal(dir);
        self.files.retain(|file, _| !file.starts_with(&dir) || file == &dir);
    }

    /// The files, by path.
    pub fn iter(&self) -> impl Iterator<Item = (&Path, &[u8])> {
        self.files.iter().map(|(path, bytes)| (path.as_path(), bytes.as_slice()))
    }
}

/// `path` without `.` components and repeated separators, so that one file has one key.
fn normal(path: &Path) -> PathBuf {
    path.components().filter(|c| *c != Component::CurDir).collect()
}

impl Files for MemoryFiles {
    fn read(&self, path: &Path) -> Result<Vec<u8>> {
        self.files.get(&normal(path)).cloned().ok_or_else(|| SesameError::Io(format!("{}: no such file", path.display())))
    }

    fn is_file(&self, path: &Path) -> bool {
        self.files.contains_key(&normal(path))
    }

    fn is_dir(&self, path: &Path) -> bool {
        let dir = normal(path);
        self.files.keys().any(|file| file != &dir && file.starts_with(&dir))
    }

    fn entries(&self, dir: &Path) -> Result<Vec<String>> {
        let dir = normal(dir);
        let mut names: Vec<String> = self
            .files
            .keys()
            .filter_map(|file| file.strip_prefix(&dir).ok())
            .filter_map(|rest| rest.components().next())
            .map(|first| first.as_os_str().to_string_lossy().into_owned())
            .collect();
        names.dedup();
        match names.is_empty() && !self.is_dir(&dir) {
            true => Err(SesameError::Io(format!("{}: no such folder", dir.display()))),
            false => Ok(names),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_files_have_folders_by_their_paths() {
        let mut files = MemoryFiles::default();
        files.insert("run/checkpoint-000002/config.json", b"{}".to_vec());
        files.insert("run/./checkpoint-000002/model.safetensors", vec![1]);
        files.insert("run/config.json", b"{}".to_vec());
        assert_eq!(files.read("run//checkpoint-000002/model.safetensors".as_ref()).unwrap(), [1]);
        assert!(files.is_file("run/config.json".as_ref()) && !files.is_file("run".as_ref()));
        assert!(files.is_dir("run".as_ref()) && files.is_dir("run/checkpoint-000002".as_ref()) && !files.is_dir("run/config.json".as_ref()));
        assert_eq!(files.entries("run".as_ref()).unwrap(), ["checkpoint-000002", "config.json"]);
        assert!(files.entries("elsewhere".as_ref()).unwrap_err().to_string().contains("elsewhere: no such folder"));
        assert!(files.read_text("run/tokenizer.json".as_ref()).unwrap_err().to_string().contains("run/tokenizer.json: no such file"));
        files.remove_dir("run/checkpoint-000002".as_ref());
        assert_eq!(files.iter().map(|(path, _)| path.to_path_buf()).collect::<Vec<_>>(), [PathBuf::from("run/config.json")]);
    }
}
