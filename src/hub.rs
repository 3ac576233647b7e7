//! Hugging Face hub ids, natively (the twin of the package's js/hub.js and js/hub-cache.js):
//! `org/name` (or `name`) is the model folder `{endpoint}/{id}/resolve/{revision}/`, its files
//! kept in huggingface_hub's cache layout, so that files Python downloaded are used here and the
//! other way round:
//!   {HF_HUB_CACHE, or HF_HOME/hub, or ~/.cache/huggingface/hub}/models--{org}--{name}/
//!     refs/{revision}             the commit a branch or tag was last seen at
//!     blobs/{etag}                each file's bytes, named by the hub's ETag
//!     snapshots/{commit}/{file}   a relative link to the blob
//!     .no_exist/{commit}/{file}   an optional file the commit lacks
//! Online, a HEAD request names each file's commit and ETag, and a blob already held is not
//! fetched again; offline (`HF_HUB_OFFLINE=1`), or when the hub cannot be reached, the cache
//! answers alone. The endpoint is `HF_ENDPOINT` (default the public hub), the token `HF_TOKEN`.
//! (hf-hub, the hub's own Rust client, re-downloads files whose blob is held and reads neither
//! HF_HUB_OFFLINE nor HF_HUB_CACHE in its blocking 0.4 API; its 1.0 is async and much larger.)

use std::path::{Path, PathBuf};

use crate::error::{Result, SesameError};
use crate::files::io_err;
use crate::weights::CheckpointIndex;

const PUBLIC_HUB: &str = "https://huggingface.co";

/// Whether `model` reads as a hub id: one or two parts of letters, digits, `-`, `_` and `.`,
/// each starting with a letter or digit (a local path that exists is read as a folder first).
pub fn is_hub_id(model: &str) -> bool {
    let part = |p: &str| p.chars().next().is_some_and(|c| c.is_ascii_alphanumeric()) && p.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    let parts: Vec<&str> = model.split('/').collect();
    parts.len() <= 2 && parts.iter().all(|p| part(p)) && !model.contains("..")
}

/// Where hub files come from and go: the environment's settings, as huggingface_hub reads them.
pub struct Hub {
    endpoint: String,
    token: Option<String>,
    cache: PathBuf,
    offline: bool,
    /// Redirects not followed: a redirect's own headers name the file's commit and ETag.
    head_agent: ureq::Agent,
    agent: ureq::Agent,
}

/// A file's commit and ETag, from the hub's answer to a HEAD request.
struct FileInfo {
    commit: String,
    etag: String,
}

impl Hub {
    /// The hub of `HF_ENDPOINT`, `HF_TOKEN`, `HF_HUB_OFFLINE` and the cache of `HF_HUB_CACHE`
    /// (or `HF_HOME/hub`, or `~/.cache/huggingface/hub`).
    pub fn from_env() -> Hub {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let cache = var("HF_HUB_CACHE").map(PathBuf::from).unwrap_or_else(|| {
            let home = var("HF_HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(var("HOME").unwrap_or_default()).join(".cache/huggingface"));
            home.join("hub")
        });
        let offline = var("HF_HUB_OFFLINE").is_some_and(|v| ["1", "ON", "YES", "TRUE"].contains(&v.to_ascii_uppercase().as_str()));
        let config = || ureq::Agent::config_builder().http_status_as_error(false).timeout_connect(Some(std::time::Duration::from_secs(30)));
        Hub {
            endpoint: var("HF_ENDPOINT").unwrap_or_else(|| PUBLIC_HUB.into()).trim_end_matches('/').to_string(),
            token: var("HF_TOKEN"),
            cache,
            offline,
            head_agent: config().max_redirects(0).build().into(),
            agent: config().build().into(),
        }
    }

    /// The snapshot folder of hub model `id` at `revision` with its files: the config
    /// (config.json, or an ELMo's options.json), the weights (model.safetensors, or the sharded
    /// index and its shards) and the first tokenizer whose files are all there.
    pub fn model_folder(&self, id: &str, revision: &str) -> Result<PathBuf> {
        self.snapshot(id, revision, true)
    }

    /// The snapshot folder of hub model `id` at `revision` with its config and tokenizer files
    /// only: what tokenizing needs, without downloading the weights.
    pub fn tokenizer_folder(&self, id: &str, revision: &str) -> Result<PathBuf> {
        self.snapshot(id, revision, false)
    }

    fn snapshot(&self, id: &str, revision: &str, weights: bool) -> Result<PathBuf> {
        let repo = Repo { hub: self, id, revision, dir: self.cache.join(format!("models--{}", id.replace('/', "--"))) };
        let elmo = repo.get("config.json", true)?.is_none();
        if elmo {
            repo.get("options.json", false)?;
        }
        if weights && repo.get(crate::weights::SINGLE_FILE, true)?.is_none() {
            let index = repo.get(crate::weights::INDEX_FILE, false)?.unwrap_or_default();
            for shard in CheckpointIndex::parse(&crate::files::read_file(&index)?)?.shards {
                repo.get(&shard, false)?;
            }
        }
        if !elmo && repo.get("tokenizer.json", true)?.is_none() {
            if repo.get("vocab.txt", true)?.is_some() {
                repo.get("tokenizer_config.json", true)?;
            } else if repo.get("vocab.json", true)?.is_some() {
                repo.get("merges.txt", true)?;
            }
        }
        let commit =
            repo.commit().ok_or_else(|| SesameError::Io(format!("hub model \"{id}\": no commit of revision \"{revision}\" in {}", repo.dir.display())))?;
        Ok(repo.dir.join("snapshots").join(commit))
    }

    fn authorized<B>(&self, request: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        match &self.token {
            Some(token) => request.header("authorization", format!("Bearer {token}")),
            None => request,
        }
    }
}

/// One hub model at one revision, and its folder in the cache.
struct Repo<'a> {
    hub: &'a Hub,
    id: &'a str,
    revision: &'a str,
    dir: PathBuf,
}

impl Repo<'_> {
    /// The commit the revision names: itself when it is a commit hash, else the one the cache last saw.
    fn commit(&self) -> Option<String> {
        if self.revision.len() == 40 && self.revision.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Some(self.revision.to_string());
        }
        std::fs::read_to_string(self.dir.join("refs").join(self.revision)).ok().map(|c| c.trim().to_string())
    }

    /// `file` in the snapshot, fetched unless the cache holds it: its path, or None when it is
    /// `optional` and the model lacks it.
    fn get(&self, file: &str, optional: bool) -> Result<Option<PathBuf>> {
        if self.hub.offline {
            return self.cached(file, optional, "downloads are off (HF_HUB_OFFLINE)");
        }
        let url = format!("{}/{}/resolve/{}/{file}", self.hub.endpoint, self.id, self.revision);
        let info = match self.head(&url) {
            Ok(info) => info,
            // The hub unreachable: the cached copy, as huggingface_hub falls back to it.
            Err(Unreachable(why)) => return self.cached(file, optional, &format!("the hub cannot be reached ({why})")),
        };
        let Some(FileInfo { commit, etag }) = self.answer(file, optional, info)? else { return Ok(None) };
        let blob = self.dir.join("blobs").join(&etag);
        if !blob.is_file() {
            self.download(&url, file, &blob)?;
        }
        let snapshot_file = self.dir.join("snapshots").join(&commit).join(file);
        link(&blob, &snapshot_file)?;
        if self.commit().as_deref() != Some(commit.as_str()) {
            write_whole(&self.dir.join("refs").join(self.revision), commit.as_bytes())?;
        }
        Ok(Some(snapshot_file))
    }

    fn cached(&self, file: &str, optional: bool, why: &str) -> Result<Option<PathBuf>> {
        let missing = || {
            SesameError::Io(format!(
                "{file} of hub model \"{}\" (revision \"{}\") is not in the hub cache {}, and {why}",
                self.id,
                self.revision,
                self.dir.display()
            ))
        };
        let Some(commit) = self.commit() else { return if optional { Ok(None) } else { Err(missing()) } };
        let snapshot_file = self.dir.join("snapshots").join(&commit).join(file);
        if snapshot_file.is_file() {
            return Ok(Some(snapshot_file));
        }
        if optional || self.dir.join(".no_exist").join(&commit).join(file).exists() {
            return Ok(None);
        }
        Err(missing())
    }

    /// The hub's answer to a HEAD request for `url`: redirects within the hub (a renamed
    /// repository) are followed; one to another host (the content store) is the answer, as
    /// its headers carry the file's commit and ETag.
    fn head(&self, url: &str) -> std::result::Result<HeadAnswer, Unreachable> {
        let mut url = url.to_string();
        for _ in 0..10 {
            let response = self.hub.authorized(self.hub.head_agent.head(&url)).call().map_err(|e| Unreachable(e.to_string()))?;
            let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(String::from);
            let status = response.status().as_u16();
            let location = header("location");
            match location {
                Some(next) if (300..400).contains(&status) && next.starts_with('/') => url = format!("{}{next}", origin(&url)),
                _ => {
                    return Ok(HeadAnswer {
                        status,
                        commit: header("x-repo-commit"),
                        etag: header("x-linked-etag").or_else(|| header("etag")),
                        error_code: header("x-error-code"),
                    })
                }
            }
        }
        Err(Unreachable(format!("{url}: too many redirects")))
    }

    /// What a HEAD answer means for `file`: its commit and ETag, None for an optional file the
    /// model lacks (remembered in .no_exist), or the error a user can act on.
    fn answer(&self, file: &str, optional: bool, head: HeadAnswer) -> Result<Option<FileInfo>> {
        let (id, revision) = (self.id, self.revision);
        let status = head.status;
        let error = |message: String| Err(SesameError::Io(message));
        match (status, head.error_code.as_deref()) {
            (200..=399, _) => {}
            (401, _) | (_, Some("RepoNotFound")) => {
                return error(format!("the hub has no model \"{id}\" that can be read (HTTP {status}), and there is no local folder of that name: check the id; a private model needs a token (HF_TOKEN)"))
            }
            (_, Some("RevisionNotFound")) => return error(format!("the model \"{id}\" on the hub has no revision \"{revision}\" (HTTP {status})")),
            (403, _) | (_, Some("GatedRepo")) => {
                return error(format!("the model \"{id}\" on the hub is gated or forbidden to this token (HTTP {status}): accept its terms on the hub, or use a token that may read it"))
            }
            (404, _) if optional => {
                if let Some(commit) = head.commit.filter(|c| c.len() == 40 && c.bytes().all(|b| b.is_ascii_hexdigit())) {
                    write_whole(&self.dir.join(".no_exist").join(commit).join(file), b"")?;
                }
                return Ok(None);
            }
            (404, _) => return error(format!("the model \"{id}\" on the hub has no {file} (revision \"{revision}\")")),
            _ => return error(format!("fetching {file} of \"{id}\" from the hub failed: HTTP {status}")),
        }
        let etag = head.etag.map(|e| e.trim_start_matches("W/").replace('"', "")).filter(|e| !e.is_empty() && !e.contains(['/', '\\']) && !e.starts_with('.'));
        match (head.commit, etag) {
            (Some(commit), Some(etag)) => Ok(Some(FileInfo { commit, etag })),
            _ => error(format!(
                "the hub's answer for {file} of \"{id}\" lacks its commit or ETag (X-Repo-Commit, ETag): is {} a Hugging Face hub?",
                self.hub.endpoint
            )),
        }
    }

    /// Fetches `url` into `blob`, through a temporary file, with a progress bar on a terminal.
    fn download(&self, url: &str, file: &str, blob: &Path) -> Result<()> {
        let response = self.hub.authorized(self.hub.agent.get(url)).call().map_err(|e| SesameError::Io(format!("fetching {url} failed: {e}")))?;
        if !response.status().is_success() {
            return Err(SesameError::Io(format!("fetching {url} failed: HTTP {}", response.status().as_u16())));
        }
        let length = response.headers().get("content-length").and_then(|v| v.to_str().ok()?.parse().ok());
        let bar = indicatif::ProgressBar::new(length.unwrap_or(0)).with_message(format!("{} {file}", self.id));
        bar.set_style(
            indicatif::ProgressStyle::with_template("{msg}: {bytes}/{total_bytes} {wide_bar} {eta}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        let mut reader = bar.wrap_read(response.into_body().into_reader());
        let parent = blob.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).map_err(io_err(parent))?;
        let tmp = blob.with_extension(format!("{}.incomplete", std::process::id()));
        let written = std::fs::File::create(&tmp).and_then(|mut out| std::io::copy(&mut reader, &mut out)).and_then(|_| std::fs::rename(&tmp, blob));
        bar.finish_and_clear();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written.map_err(|e| SesameError::Io(format!("downloading {url} to {}: {e}", blob.display())))
    }
}

/// The hub's answer to a HEAD request.
struct HeadAnswer {
    status: u16,
    commit: Option<String>,
    etag: Option<String>,
    error_code: Option<String>,
}

/// The hub could not be reached (no answer at all).
struct Unreachable(String);

/// `scheme://host[:port]` of a URL.
fn origin(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    url[after_scheme..].find('/').map_or(url, |i| &url[..after_scheme + i])
}

/// Links `snapshot_file` to `blob` by a relative path (a copy where links cannot be made).
fn link(blob: &Path, snapshot_file: &Path) -> Result<()> {
    let parent = snapshot_file.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(io_err(parent))?;
    let _ = std::fs::remove_file(snapshot_file);
    // snapshots/{commit}/{file} → ../../blobs/{etag}
    let target = Path::new("../../blobs").join(blob.file_name().unwrap_or_default());
    #[cfg(unix)]
    let linked = std::os::unix::fs::symlink(&target, snapshot_file);
    #[cfg(not(unix))]
    let linked: std::io::Result<()> = Err(std::io::ErrorKind::Unsupported.into());
    linked.or_else(|_| std::fs::copy(blob, snapshot_file).map(|_| ())).map_err(io_err(snapshot_file))
}

fn write_whole(path: &Path, bytes: &[u8]) -> Result<()> {
    let parent = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(io_err(parent))?;
    crate::files::write_atomic(path, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hub_ids_and_origins() {
        for id in ["gpt2", "sentence-transformers/all-MiniLM-L6-v2", "org/name.v2"] {
            assert!(is_hub_id(id), "{id}");
        }
        for not in ["./model", "/abs/path", "a/b/c", "org/..", "", "-x", "org/"] {
            assert!(!is_hub_id(not), "{not}");
        }
        assert_eq!(origin("http://127.0.0.1:8080/org/name/resolve/main/x"), "http://127.0.0.1:8080");
    }
}
