// fineTune in headless Chromium, on the CPU path (wasm) and on WebGPU (SwiftShader here): the
// losses of the reference run in transformers + torch AdamW (tests/fixtures/fine-tune/), the
// trained model as a pipeline, an abort that keeps the work, and in a worker of a cross-origin
// isolated page the threaded training module.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { newPage, root, start } from './harness.mjs';
import { ISOLATION_HEADERS, serve } from '../../scripts/serve.mjs';

const reference = path.join(root, 'tests/fixtures/fine-tune/bert-classify');
const trajectory = JSON.parse(readFileSync(path.join(reference, 'trajectory.json'), 'utf8'));
const train = JSON.parse(readFileSync(path.join(reference, 'train.json'), 'utf8'));
const s = trajectory.settings;
/** fineTune's options for the reference run's settings. */
const options = {
  train, labels: ['negative', 'positive'], epochs: s.epochs, batchSize: s.batch_size, learningRate: s.lr, weightDecay: s.weight_decay,
  schedule: s.schedule, warmupRatio: 0, shuffle: false, dropout: 0,
};

let h;
before(async () => {
  h = await start();
});
after(async () => {
  await h?.close();
});

/** A fresh page with the package as `sesame` (one device a page: each device gets its own). */
async function sesamePage() {
  const { page, checkErrors } = await newPage(h.browser, `${h.base}/tests/browser/blank.html`);
  await page.evaluate(async () => {
    window.sesame = await import('/dist/index.js');
  });
  return { page, checkErrors };
}

for (const device of ['wasm', 'webgpu']) {
  test(`fineTune on ${device}: the reference run's 20 losses (≤ 1e-4), then the model as a pipeline`, async () => {
    const { page, checkErrors } = await sesamePage();
    const got = await page.evaluate(async ({ options, device }) => {
      const steps = [];
      const run = await sesame.fineTune('text-classification', '/models/fixtures/fine-tune/bert-classify/init/', {
        ...options, device, onProgress: (p) => { if (p.status === 'training') steps.push(p.step); },
      });
      const classify = await run.pipeline({ device: 'wasm' });
      const labels = await classify(options.train[0].text, { topK: null });
      const saved = Object.keys(await run.save()).sort();
      const scores = await run.evaluate(options.train);
      run.dispose();
      return { losses: run.losses, steps, labels, saved, scores };
    }, { options, device });
    assert.deepEqual(got.steps, Array.from({ length: 20 }, (_, i) => i + 1));
    got.losses.forEach((loss, i) => {
      const expected = trajectory.losses[i];
      assert.ok(Math.abs(loss - expected) <= 1e-4 * Math.abs(expected), `${device}, step ${i}: fineTune ${loss}, PyTorch ${expected}`);
    });
    assert.deepEqual(got.labels.map((l) => l.label).sort(), ['negative', 'positive']);
    assert.deepEqual(got.saved, ['config.json', 'model.safetensors', 'tokenizer.json']);
    assert.ok(got.scores.accuracy >= 0 && got.scores.accuracy <= 1 && Number.isFinite(got.scores.loss));
    await page.close();
    checkErrors();
  });
}

test('an abort stops the run between steps with an AbortError that holds the model trained so far', async () => {
  const { page, checkErrors } = await sesamePage();
  const got = await page.evaluate(async (options) => {
    const controller = new AbortController();
    const error = await sesame.fineTune('text-classification', '/models/fixtures/fine-tune/bert-classify/init/', {
      ...options, device: 'wasm', signal: controller.signal, onProgress: (p) => { if (p.step === 5) controller.abort(); },
    }).then(() => undefined, (e) => e);
    const files = await error.run.save();
    return { name: error.name, message: error.message, losses: error.run.losses.length, weights: files['model.safetensors'].length };
  }, options);
  assert.equal(got.name, 'AbortError');
  assert.match(got.message, /aborted after 5 of 20 steps/);
  assert.equal(got.losses, 5);
  assert.ok(got.weights > 1000);
  await page.close();
  checkErrors();
});

test('fineTuneInWorker: the same run in a Web Worker, its progress on the page, its pipeline in a worker', async () => {
  const { page, checkErrors } = await sesamePage();
  const got = await page.evaluate(async (options) => {
    const steps = [];
    const run = await sesame.fineTuneInWorker('text-classification', '/models/fixtures/fine-tune/bert-classify/init/', {
      ...options, device: 'wasm', onProgress: (p) => { if (p.status === 'training') steps.push(p.step); },
    });
    const classify = await run.pipeline();
    const label = (await classify(options.train[0].text))[0].label;
    classify.dispose();
    run.dispose();
    return { losses: run.losses, steps: steps.length, label, threads: run.threads };
  }, options);
  assert.equal(got.steps, 20);
  assert.equal(got.threads, 1, 'a page that is not isolated trains on one thread');
  got.losses.forEach((loss, i) => assert.ok(Math.abs(loss - trajectory.losses[i]) <= 1e-4 * trajectory.losses[i], `step ${i}: ${loss} vs ${trajectory.losses[i]}`));
  assert.ok(['negative', 'positive'].includes(got.label));
  await page.close();
  checkErrors();
});

test('on a cross-origin isolated page fineTuneInWorker trains on every core (the threaded module), with the same losses', async () => {
  const isolated = await serve(0, undefined, { headers: ISOLATION_HEADERS });
  try {
    const { page, checkErrors } = await newPage(h.browser, `http://127.0.0.1:${isolated.address().port}/tests/browser/blank.html`);
    const got = await page.evaluate(async (options) => {
      const sesame = await import('/dist/index.js');
      const run = await sesame.fineTuneInWorker('text-classification', '/models/fixtures/fine-tune/bert-classify/init/', { ...options, device: 'wasm', threads: 2 });
      run.dispose();
      const mainThread = await sesame.fineTune('text-classification', '/models/fixtures/fine-tune/bert-classify/init/', { ...options, threads: 2 })
        .then(() => 'no error', (e) => e.message);
      return { isolated: crossOriginIsolated, losses: run.losses, threads: run.threads, mainThread };
    }, options);
    assert.equal(got.isolated, true);
    assert.equal(got.threads, 2);
    got.losses.forEach((loss, i) => assert.ok(Math.abs(loss - trajectory.losses[i]) <= 1e-4 * trajectory.losses[i], `step ${i}: ${loss} vs ${trajectory.losses[i]}`));
    assert.match(got.mainThread, /threads: 2 needs a Web Worker .*fineTuneInWorker/);
    await page.close();
    checkErrors();
  } finally {
    isolated.close();
  }
});
