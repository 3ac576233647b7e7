// Serves the demo site: www/ at /, the built package at /dist/, and the models under /models/:
// the trained models that ship in models/ (/models/trained/…), the random-weight fixture
// models that ship with the repository (/models/fixtures/…) and the
// pretrained MiniLM and GPT-2's vocabulary that scripts/fetch-models.sh puts in $SESAME_CACHE
// (/models/all-MiniLM-L6-v2/, /models/gpt2-vocab/).
// Usage: node scripts/serve.mjs [--port 8080]   (or PORT=…)

import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import sirv from 'sirv';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const cacheDir = process.env.SESAME_CACHE ?? path.join(os.homedir(), '.cache', 'sesame');

/** URL prefix → folder, longest prefix first. */
export const MOUNTS = [
  ['/models/all-MiniLM-L6-v2/', path.join(cacheDir, 'models', 'all-MiniLM-L6-v2')],
  ['/models/gpt2-vocab/', path.join(cacheDir, 'vocab', 'gpt2')],
  ['/models/fixtures/', path.join(root, 'tests', 'fixtures')],
  ['/models/trained/', path.join(root, 'models')],
  ['/tests/browser/', path.join(root, 'tests', 'browser')],
  ['/tests/shared/', path.join(root, 'tests', 'shared')],
  ['/dist/', path.join(root, 'dist')],
  ['/', path.join(root, 'www')],
];

/**
 * The headers that make a page cross-origin isolated (crossOriginIsolated, SharedArrayBuffer),
 * which the threaded wasm build needs: the demo site sends them.
 */
export const ISOLATION_HEADERS = { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' };

/**
 * Starts the server (on `mounts`: [URL prefix, folder], longest prefix first; `headers`: extra response headers,
 * e.g. COOP/COEP for cross-origin isolation); resolves to it once it listens.
 */
export function serve(port, mounts = MOUNTS, { headers = {} } = {}) {
  const handlers = mounts.map(([prefix, dir]) => [prefix, sirv(dir, { dev: true, dotfiles: false })]);
  const server = http.createServer((req, res) => {
    for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
    const mount = handlers.find(([prefix]) => req.url.startsWith(prefix));
    if (!mount) {
      res.statusCode = 404;
      return res.end('not found');
    }
    req.url = '/' + req.url.slice(mount[0].length);
    mount[1](req, res, () => {
      res.statusCode = 404;
      res.end('not found');
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const flag = process.argv.indexOf('--port');
  const port = Number(flag > 0 ? process.argv[flag + 1] : process.env.PORT ?? 8080);
  const server = await serve(port, MOUNTS, { headers: ISOLATION_HEADERS }).catch((e) => {
    console.error(`serve: cannot listen on port ${port}: ${e.message} (pass --port N or set PORT)`);
    process.exit(1);
  });
  console.log(`Sesame demo: http://localhost:${server.address().port}/`);
}
