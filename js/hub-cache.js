// Node.js: hub files kept in huggingface_hub's cache layout, so that files Python downloaded
// are reused here and the other way round:
//   {HF_HUB_CACHE, or HF_HOME/hub, or ~/.cache/huggingface/hub}/models--{org}--{name}/
//     refs/{revision}                 the commit a branch or tag was last seen at
//     blobs/{etag}                    each file's bytes, named by the hub's ETag
//     snapshots/{commit}/{file}       a relative link to the blob
//     .no_exist/{commit}/{file}       an optional file the commit lacks
// Online, a HEAD request names the file's commit and ETag (a blob already held is not fetched
// again); offline (HF_HUB_OFFLINE=1, or allowRemote: false) the files come from the cache alone.

import { nodeModule } from './platform.js';
import { byteLength, readLocalFile, writeLocalFile } from './bytes.js';

const COMMIT = /^[0-9a-f]{40}$/;

/** The hub cache folder, as huggingface_hub finds it. */
async function cacheRoot() {
  const { homedir } = await nodeModule('node:os');
  const { join } = await nodeModule('node:path');
  if (process.env.HF_HUB_CACHE) return process.env.HF_HUB_CACHE;
  return join(process.env.HF_HOME || join(homedir(), '.cache', 'huggingface'), 'hub');
}

const normalizeEtag = (etag) => etag?.replace(/^W\//, '').replace(/"/g, '');

/** Whether the cache must answer alone: HF_HUB_OFFLINE set to a true value, or allowRemote false. */
function offline(options) {
  return options.allowRemote === false || ['1', 'ON', 'YES', 'TRUE'].includes(String(process.env.HF_HUB_OFFLINE ?? '').toUpperCase());
}

/**
 * The hub's HEAD answer for `url`: redirects within the hub (a renamed repository) are
 * followed; one to another origin (the content host) is the answer, as its headers carry the
 * file's commit and ETag.
 */
async function headOnHub(url, fetchOptions) {
  for (let hops = 0; hops < 10; hops++) {
    const response = await fetch(url, { ...fetchOptions, method: 'HEAD', redirect: 'manual' });
    const location = response.headers.get('location');
    if (response.status < 300 || response.status >= 400 || !location) return response;
    const target = new URL(location, url);
    if (target.origin !== new URL(url).origin) return response;
    url = target.href;
  }
  throw new Error('too many redirects');
}

/**
 * A reader of hub model `id` at `revision` through the cache: (file, {optional}) → bytes, or
 * undefined for an optional file the model lacks. `base` is the model's resolve URL,
 * `failure` turns a failed answer into an Error (or undefined: an optional file missing).
 */
export async function cachedHubFolder(id, revision, base, { fetchOptions, onProgress, failure, readBody, allowRemote }) {
  const fs = await nodeModule('node:fs/promises');
  const { join, dirname, relative } = await nodeModule('node:path');
  const repo = join(await cacheRoot(), `models--${id.replace(/\//g, '--')}`);
  const remote = !offline({ allowRemote });
  const readText = (p) => fs.readFile(p, 'utf8').then((t) => t.trim(), () => undefined);
  const exists = (p) => fs.stat(p).then(() => true, () => false);
  /** Writes `bytes` to `path` whole: a temporary file, then a rename. */
  const writeWhole = async (path, bytes) => {
    await fs.mkdir(dirname(path), { recursive: true });
    const tmp = `${path}.${process.pid}.incomplete`;
    await writeLocalFile(tmp, bytes);
    await fs.rename(tmp, path);
  };
  const link = async (blob, snapshotFile) => {
    await fs.mkdir(dirname(snapshotFile), { recursive: true });
    await fs.rm(snapshotFile, { force: true });
    // A copy where links cannot be made (as huggingface_hub does on such systems).
    await fs.symlink(relative(dirname(snapshotFile), blob), snapshotFile).catch(() => fs.copyFile(blob, snapshotFile));
  };
  let commit = COMMIT.test(revision) ? revision : undefined;

  /** The cached copy of `file` at the known commit: bytes, 'missing' (.no_exist), or undefined. */
  const fromCache = async (file) => {
    commit ??= await readText(join(repo, 'refs', revision));
    if (!commit) return undefined;
    const snapshotFile = join(repo, 'snapshots', commit, file);
    if (await exists(snapshotFile)) return readLocalFile(snapshotFile);
    if (await exists(join(repo, '.no_exist', commit, file))) return 'missing';
    return undefined;
  };

  return async (file, { optional } = {}) => {
    const url = `${base}${encodeURIComponent(file)}`;
    onProgress?.({ status: 'initiate', file, url });
    const done = (bytes, cached) => {
      onProgress?.({ status: 'done', file, url, cached, bytes: byteLength(bytes) });
      return bytes;
    };
    if (!remote) {
      const cached = await fromCache(file);
      if (cached === 'missing' || (cached === undefined && optional)) return undefined;
      if (cached === undefined) {
        throw new Error(`sesame-lm: ${file} of hub model "${id}" (revision "${revision}") is not in the hub cache ${repo}, and downloads are off (HF_HUB_OFFLINE or allowRemote: false)`);
      }
      return done(cached, true);
    }
    // The file's commit and ETag; a redirect's headers carry them (the bytes live elsewhere).
    let head;
    try {
      head = await headOnHub(url, fetchOptions);
    } catch (e) {
      // The hub unreachable: the cached copy, as huggingface_hub falls back to it.
      const cached = await fromCache(file);
      if (cached === 'missing') return undefined;
      if (cached) return done(cached, true);
      throw new Error(`sesame-lm: fetching ${url} failed (${e.message}), and the hub cache has no copy`);
    }
    const isRedirect = head.status >= 300 && head.status < 400;
    if (!head.ok && !isRedirect) {
      const error = failure(file, head, optional);
      const missingCommit = head.headers.get('x-repo-commit');
      if (!error && COMMIT.test(missingCommit ?? '')) await writeWhole(join(repo, '.no_exist', missingCommit, file), new Uint8Array());
      if (error) throw error;
      return undefined;
    }
    commit = head.headers.get('x-repo-commit') ?? commit;
    const etag = normalizeEtag(head.headers.get('x-linked-etag') ?? head.headers.get('etag'));
    if (!commit || !etag) throw new Error(`sesame-lm: the hub's answer for ${url} lacks its commit or ETag (X-Repo-Commit, ETag): is ${base} a Hugging Face hub?`);
    const blob = join(repo, 'blobs', etag);
    const snapshotFile = join(repo, 'snapshots', commit, file);
    let bytes;
    const cached = await exists(blob);
    if (cached) {
      bytes = await readLocalFile(blob);
    } else {
      let response;
      try {
        response = await fetch(url, fetchOptions);
      } catch (e) {
        throw new Error(`sesame-lm: fetching ${url} failed: ${e.message}`);
      }
      if (!response.ok) throw failure(file, response, false);
      bytes = await readBody(response, file, onProgress);
      await writeWhole(blob, bytes);
    }
    await link(blob, snapshotFile);
    if (!COMMIT.test(revision)) await writeWhole(join(repo, 'refs', revision), commit);
    return done(bytes, cached);
  };
}
