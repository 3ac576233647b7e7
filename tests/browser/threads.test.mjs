// The threaded wasm build in headless Chromium: on a cross-origin isolated page (the demo
// server's COOP/COEP headers), a pipelineInWorker on the wasm device splits its kernels over
// a pool of Web Workers and answers as the one-thread build does; threads asked for where they
// cannot run (the page's main thread, a page that is not isolated) are Errors saying why.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { newPage, root, start } from './harness.mjs';
import { ISOLATION_HEADERS, serve } from '../../scripts/serve.mjs';

const MINILM = '/models/all-MiniLM-L6-v2/';
const TEXTS = ['A man is eating food.', 'The new movie is awesome, and the whole cast was brilliant in every single scene of it.', 'hello'];

let h;

before(async () => {
  h = await start({ headers: ISOLATION_HEADERS });
});

after(async () => {
  await h?.close();
});

test('a worker on an isolated page runs the threaded build and answers as one thread does', async () => {
  const { page, checkErrors } = await newPage(h.browser, `${h.base}/tests/browser/blank.html`);
  const got = await page.evaluate(async ({ model, texts }) => {
    const sesame = await import('/dist/index.js');
    const threaded = await sesame.pipelineInWorker('feature-extraction', model, { device: 'wasm', threads: 2 });
    const auto = await sesame.pipelineInWorker('feature-extraction', model, { device: 'wasm' });
    const single = await sesame.pipelineInWorker('feature-extraction', model, { device: 'wasm', threads: 1 });
    const [a, b, c] = await Promise.all([threaded(texts, { pooling: 'mean', normalize: true }), auto(texts, { pooling: 'mean', normalize: true }), single(texts, { pooling: 'mean', normalize: true })]);
    const mainThread = await sesame.pipeline('feature-extraction', model, { device: 'wasm', threads: 2 }).then(() => 'no error', (e) => e.message);
    const maxDiff = (x, y) => x.data.reduce((m, v, i) => Math.max(m, Math.abs(v - y.data[i])), 0);
    const result = {
      isolated: crossOriginIsolated,
      threads: [threaded.adapter.threads, auto.adapter.threads, single.adapter.threads],
      dims: a.dims,
      threadedVsSingle: maxDiff(a, c),
      autoVsSingle: maxDiff(b, c),
      mainThread,
    };
    [threaded, auto, single].forEach((p) => p.dispose());
    return result;
  }, { model: MINILM, texts: TEXTS });
  assert.equal(got.isolated, true);
  assert.deepEqual(got.threads, [2, got.threads[1], 1]);
  assert.ok(got.threads[1] >= 1 && got.threads[1] === Math.min(await page.evaluate(() => navigator.hardwareConcurrency), 16), `auto: ${got.threads[1]}`);
  assert.deepEqual(got.dims, [3, 384]);
  // Every split computes each value as the one-thread loop does (the same blocks, in the same
  // order along K), but the threaded build fuses its multiply-adds (relaxed SIMD): one rounding
  // where the plain build has two, on sums of a few hundred terms, in unit-length embeddings.
  assert.ok(got.threadedVsSingle <= 1e-5, `threads 2 vs 1: ${got.threadedVsSingle}`);
  assert.ok(got.autoVsSingle <= 1e-5, `threads auto vs 1: ${got.autoVsSingle}`);
  assert.match(got.mainThread, /threads: 2 needs a Web Worker .*pipelineInWorker/);
  checkErrors();
  await page.close();
});

test('MiniLM in q8 on the threaded build (integer tiles of relaxed SIMD where the CPU has VNNI) keeps 256 SST-2 sentences within cosine 0.998 of sentence-transformers', { skip: process.env.SESAME_DOWNLOADS === 'unavailable' && '!!! SKIPPED: MiniLM could not be downloaded' }, async () => {
  // The native test's sentences and reference (tests/quantized.rs, made by
  // tests/reference/make_minilm_reference.py), in one batch: hundreds of rows, the tiles' path.
  const fixtures = path.join(root, 'tests/fixtures/minilm');
  const { sentences } = JSON.parse(readFileSync(path.join(fixtures, 'sst2-256.json'), 'utf8'));
  const want = safetensorsF32(readFileSync(path.join(fixtures, 'sst2-256.safetensors')), 'embeddings');
  const { page, checkErrors } = await newPage(h.browser, `${h.base}/tests/browser/blank.html`);
  const rows = await page.evaluate(async ({ model, sentences }) => {
    const sesame = await import('/dist/index.js');
    const embed = await sesame.pipelineInWorker('feature-extraction', model, { device: 'wasm', threads: 2, dtype: 'q8' });
    const out = await embed(sentences, { pooling: 'mean', normalize: true });
    embed.dispose();
    return out.tolist();
  }, { model: MINILM, sentences });
  assert.deepEqual(want.shape, [sentences.length, 384]);
  // Both sides are normalized: the cosine is the dot product.
  const cosines = rows.map((row, i) => row.reduce((sum, v, j) => sum + v * want.values[i * 384 + j], 0));
  console.log(`MiniLM q8 on the threaded build, ${cosines.length} SST-2 sentences in one batch: min cosine ${Math.min(...cosines).toFixed(5)}`);
  cosines.forEach((c, i) => assert.ok(c >= 0.998, `${sentences[i]}: cosine ${c}`));
  checkErrors();
  await page.close();
});

/** Tensor `name` of a safetensors file (F32, little-endian): its shape and values. */
function safetensorsF32(bytes, name) {
  const headerLength = Number(bytes.readBigUInt64LE(0));
  const tensor = JSON.parse(bytes.subarray(8, 8 + headerLength).toString('utf8'))[name];
  assert.equal(tensor.dtype, 'F32');
  const [begin, end] = tensor.data_offsets.map((offset) => 8 + headerLength + offset);
  const data = bytes.subarray(begin, end);
  return { shape: tensor.shape, values: new Float32Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength)) };
}

test("a demo page's banner on an isolated page gives the threads its worker pipelines run on", async () => {
  // The page's main thread runs on one; its model runs in a worker on every core.
  const { page, checkErrors } = await newPage(h.browser, `${h.base}/fill-mask.html`);
  await page.waitForFunction(() => /^Ready|error/i.test(document.getElementById('status')?.textContent ?? ''), null, { timeout: 120_000 });
  assert.match(await page.textContent('#status'), /^Ready/);
  const cores = Math.min(await page.evaluate(() => navigator.hardwareConcurrency), 16);
  const threads = `${cores} thread${cores === 1 ? '' : 's'} per model`;
  assert.match(await page.textContent('#runs-on'), new RegExp(`^CPU: WebAssembly SIMD, ${threads}\\.`));
  checkErrors();
  await page.close();
});

test('threads on a page that is not isolated are an Error naming the headers', async () => {
  const plain = await serve(0);
  try {
    const { page, checkErrors } = await newPage(h.browser, `http://127.0.0.1:${plain.address().port}/tests/browser/blank.html`);
    const got = await page.evaluate(async (model) => {
      const sesame = await import('/dist/index.js');
      const refused = await sesame.pipelineInWorker('feature-extraction', model, { device: 'wasm', threads: 2 }).then(() => 'no error', (e) => e.message);
      // "auto" falls back to one thread (and the multi-worker path) without complaint.
      const auto = await sesame.pipelineInWorker('feature-extraction', model, { device: 'wasm' });
      const threads = auto.adapter.threads;
      auto.dispose();
      const badCount = await sesame.pipeline('feature-extraction', model, { device: 'wasm', threads: 0 }).then(() => 'no error', (e) => e.message);
      return { isolated: crossOriginIsolated, refused, threads, badCount };
    }, MINILM);
    assert.equal(got.isolated, false);
    assert.match(got.refused, /needs a cross-origin isolated page .*Cross-Origin-Opener-Policy: same-origin.*Cross-Origin-Embedder-Policy: require-corp/);
    assert.equal(got.threads, 1);
    assert.match(got.badCount, /threads must be "auto" or an integer from 1 to 64, got 0/);
    checkErrors();
    await page.close();
  } finally {
    plain.close();
  }
});
