// The package from a bundler: a Vite app (tests/vite-app) that imports `sesame-lm` by name is
// built with Vite and run in headless Chromium, on the page and in a worker.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, rmSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { build } from 'vite';
import { newPage, root, artifacts, start } from './harness.mjs';
import { serve } from '../../scripts/serve.mjs';

const app = path.join(root, 'tests/vite-app');
const out = path.join(artifacts, 'vite-app');
let h;
let server;

before(async () => {
  // Install the package into the app as npm would from a local path (a link to this repository).
  const modules = path.join(app, 'node_modules');
  rmSync(modules, { recursive: true, force: true });
  mkdirSync(modules);
  symlinkSync(root, path.join(modules, 'sesame-lm'), 'dir');
  await build({ root: app, logLevel: 'warn', build: { outDir: out, emptyOutDir: true } });
  h = await start();
  server = await serve(0, [['/models/fixtures/', path.join(root, 'tests/fixtures')], ['/', out]]);
});

after(async () => {
  await h?.close();
  server?.close();
  rmSync(path.join(app, 'node_modules'), { recursive: true, force: true });
});

test('a Vite-built app imports sesame-lm and runs fill-mask on the page and in a worker', async () => {
  const base = `http://127.0.0.1:${server.address().port}`;
  const { page, checkErrors } = await newPage(h.browser, `${base}/index.html?model=/models/fixtures/bert/BertForMaskedLM/`);
  await page.waitForFunction(() => !document.getElementById('result').textContent.startsWith('working'), null, { timeout: 60_000 });
  const text = await page.textContent('#result');
  assert.doesNotMatch(text, /^error/, text);
  const { onPage, fromWorker } = JSON.parse(text);
  assert.equal(onPage.length, 3);
  assert.equal(onPage[0].tokenStr, 'a'); // as transformers' pipeline (tests/fixtures/bert/BertForMaskedLM/fill_mask.json)
  assert.deepEqual(fromWorker, onPage);
  checkErrors();
});
