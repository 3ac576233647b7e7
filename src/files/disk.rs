//! The disk (native only): reads bounded by the host memory budget and refused for anything
//! but a regular file, and writes that never leave a half-written file under its final name.

use std::path::{Path, PathBuf};

use super::Files;
use crate::error::{Result, SesameError};

/// The files on this machine's disk.
pub struct Disk;

impl Files for Disk {
    fn read(&self, path: &Path) -> Result<Vec<u8>> {
        read_file(path)
    }

    fn is_file(&self, path: &Path) -> bool {
        path.is_file()
    }

    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }

    fn local_path(&self, path: &Path) -> Option<PathBuf> {
        Some(path.to_path_buf())
    }

    fn entries(&self, dir: &Path) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io_err(dir))? {
            names.push(entry.map_err(io_err(dir))?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }
}

/// Turns an I/O error on `path` into an error that names the path.
pub fn io_err(path: &Path) -> impl Fn(std::io::Error) -> SesameError + '_ {
    move |source| SesameError::File { path: path.to_path_buf(), source }
}

/// Opens a model, data or state file with its length: it must be a regular file (links are
/// followed to one, so /dev/zero or a FIFO is refused before a read that would never end).
pub fn open_regular(path: &Path) -> Result<(std::fs::File, u64)> {
    let metadata = std::fs::metadata(path).map_err(io_err(path))?;
    if !metadata.is_file() {
        let kind = if metadata.is_dir() { "a directory" } else { "not a regular file (a device, FIFO or socket)" };
        return Err(SesameError::Io(format!("{}: {kind}; expected a file", path.display())));
    }
    Ok((std::fs::File::open(path).map_err(io_err(path))?, metadata.len()))
}

/// Reads a whole regular file ([`open_regular`]) that fits the host memory budget.
pub fn read_file(path: &Path) -> Result<Vec<u8>> {
    use std::io::Read;

    let (file, len) = open_regular(path)?;
    crate::limits::check_host_bytes(|| format!("reading {}", path.display()), len)?;
    // The size read above bounds the read even if the file grows meanwhile.
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(len).read_to_end(&mut bytes).map_err(io_err(path))?;
    Ok(bytes)
}

/// [`read_file`] as UTF-8 text.
pub fn read_text(path: &Path) -> Result<String> {
    Disk.read_text(path)
}

/// Writes `bytes` to `path` through a temporary file and a rename, so that a crash never
/// leaves a half-written file under the final name.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp-{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let written = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        // A full disk must not leave the partial file behind.
        let _ = std::fs::remove_file(&tmp);
    }
    written.map_err(io_err(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn only_regular_files_are_read() {
        let dir = std::env::temp_dir().join(format!("sesame-files-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let link = dir.join("model.safetensors");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let err = read_file(&link).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
        assert!(read_file(&dir).unwrap_err().to_string().contains("a directory"));
        let file = dir.join("a.txt");
        std::fs::write(&file, "text").unwrap();
        assert_eq!(read_text(&file).unwrap(), "text");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_write_leaves_no_temporary_file() {
        let dir = std::env::temp_dir().join(format!("sesame-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // The final name is a directory: the rename fails after the temporary file is written.
        std::fs::create_dir_all(dir.join("taken")).unwrap();
        assert!(write_atomic(&dir.join("taken"), b"bytes").is_err());
        write_atomic(&dir.join("kept"), b"bytes").unwrap();
        let names: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert!(names.iter().all(|n| !n.contains(".tmp-")), "{names:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
