// A stand-in for the Hugging Face hub on 127.0.0.1, with its URL layout and answers:
// /{id}/resolve/{revision}/{file} redirects (302) to a content URL on another origin, with the
// commit and ETag in its headers, as the hub does for large files; a missing file is 404 EntryNotFound (with the
// commit), an unknown repository 401 RepoNotFound, an unknown revision 404 RevisionNotFound.
// Repositories are local folders.

import { createHash } from 'node:crypto';
import http from 'node:http';
import { readFile } from 'node:fs/promises';
import path from 'node:path';

/**
 * Serves `repos` ({id: folder}; change it to publish a new commit), each with the revisions
 * `revisions` (default ['main']). Returns {url, repos, requests (each {method, url,
 * authorization}), commitOf(folder), close()}.
 */
export async function startMockHub(repos, { revisions = ['main'] } = {}) {
  const requests = [];
  const base = () => `http://127.0.0.1:${server.address().port}`;
  // A repository's commit follows its folder, so that pointing an id at another folder is a new commit.
  const commitOf = (folder) => createHash('sha1').update(folder).digest('hex');
  const server = http.createServer(async (req, res) => {
    requests.push({ method: req.method, url: req.url, authorization: req.headers.authorization });
    // Readable from a page on another origin, as the hub is.
    res.setHeader('access-control-allow-origin', '*');
    res.setHeader('access-control-expose-headers', 'x-error-code, x-repo-commit, x-linked-etag, x-linked-size, etag');
    const fail = (status, code) => {
      res.writeHead(status, { 'x-error-code': code, 'content-type': 'text/plain' });
      res.end(code);
    };
    const content = /^\/cdn\/(.+)\/([^/]+)\/([^/]+)$/.exec(req.url);
    if (content) {
      const [, id, , file] = content.map(decodeURIComponent);
      const bytes = await readFile(path.join(repos[id], file));
      res.writeHead(200, { 'content-length': bytes.length, etag: `"${bytes.length}"` });
      res.end(bytes);
      return;
    }
    const match = /^\/(.+)\/resolve\/([^/]+)\/([^/]+)$/.exec(req.url);
    if (!match) return fail(404, 'NotFound');
    const [, id, revision, file] = match.map(decodeURIComponent);
    if (!repos[id]) return fail(401, 'RepoNotFound');
    if (!revisions.includes(revision)) return fail(404, 'RevisionNotFound');
    const exists = await readFile(path.join(repos[id], file)).then(() => true, () => false);
    if (!exists) {
      res.writeHead(404, { 'x-error-code': 'EntryNotFound', 'x-repo-commit': commitOf(repos[id]) });
      res.end('EntryNotFound');
      return;
    }
    // As the hub answers for a large file: an absolute redirect, with the file's commit, ETag
    // (its sha256) and size.
    const bytes = await readFile(path.join(repos[id], file));
    res.writeHead(302, {
      location: `http://127.0.0.1:${cdn.address().port}/cdn/${encodeURIComponent(id)}/${encodeURIComponent(revision)}/${encodeURIComponent(file)}`,
      'x-repo-commit': commitOf(repos[id]),
      'x-linked-etag': `"${createHash('sha256').update(bytes).digest('hex')}"`,
      'x-linked-size': String(bytes.length),
    });
    res.end();
  });
  // The content host is another origin, as the hub's CDN is: clients follow the redirect for
  // the bytes but read the file's metadata from the hub's own answer.
  const cdn = http.createServer((req, res) => server.emit('request', req, res));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  await new Promise((resolve) => cdn.listen(0, '127.0.0.1', resolve));
  const close = () => Promise.all([server, cdn].map((s) => new Promise((resolve) => s.close(resolve))));
  return { url: base(), repos, requests, commitOf, close };
}
