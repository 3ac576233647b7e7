// The sesame-lm API in headless Chromium on WebGPU: forward outputs and every pipeline against
// the fixtures the native tests use, loading (URL, cache, integrity, in-memory files), errors,
// Web Worker pipelines, and a leak test.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { newPage, root, start } from './harness.mjs';
import { startMockHub } from '../shared/mock-hub.mjs';
import { checkCases, checkForwardReport, close } from '../shared/check-cases.mjs';
import { CLASSIFICATION_CASES, ENCODER_FAMILY_CASES, FORWARD_FIXTURES, LANGUAGE_MODEL_CASES, RECURRENT_CASES } from '../shared/fixture-runs.mjs';

const FIXTURES = path.join(root, 'tests/fixtures');
const fixtureJson = (dir, name) => JSON.parse(readFileSync(path.join(FIXTURES, dir, name), 'utf8'));

let h;
let page;
let checkErrors;
let consoleErrors;

before(async () => {
  h = await start();
  ({ page, checkErrors, errors: consoleErrors } = await newPage(h.browser, `${h.base}/tests/browser/blank.html`));
  await page.evaluate(async () => {
    window.sesame = await import('/dist/index.js');
    window.check = await import('/tests/shared/tensors.js');
    window.pipelineCases = await import('/tests/shared/pipeline-cases.js');
  });
});

after(async () => {
  await h?.close();
});

/** Runs `fn(arg)` in the page, with `sesame` and `check` in scope as globals. */
const inPage = (fn, arg) => page.evaluate(fn, arg);

/** Runs each [fixture folder, task, cases file] in the page and checks it against the fixture. */
async function pipelineCasesMatch(runs) {
  for (const [dir, task, file] of runs) {
    const json = fixtureJson(dir, file);
    const cases = Array.isArray(json) ? json : json[task];
    const got = await inPage(({ dir, task, cases }) => pipelineCases.runCases(sesame, `/models/fixtures/${dir}/`, task, cases), { dir, task, cases });
    assert.ok(got.info.tasks.includes(task), `${dir}: ${got.info.tasks}`);
    checkCases(dir, task, cases, got.out);
  }
}

/** Every architecture's forward (hidden states and attentions too) on `on` against its fixture. */
async function forwardMatchesFixtures(on) {
  for (const dir of FORWARD_FIXTURES) {
    const inputs = fixtureJson(dir, 'inputs.json');
    const report = await on.evaluate(async ({ dir, inputs }) => {
      const url = `/models/fixtures/${dir}/`;
      const model = await sesame.loadModel(url);
      const out = await model.forward(inputs, { hiddenStates: true, attentions: true });
      model.dispose();
      return check.compareTensors(out, await check.readSafetensors(url + 'reference.safetensors'));
    }, { dir, inputs });
    checkForwardReport(dir, report);
  }
}

test('forward matches the transformers fixtures for every architecture (≤ 1e-4), on wasm (auto on SwiftShader)', async () => {
  assert.match((await inPage(() => sesame.adapterInfo())).name, /Sesame host \(wasm SIMD128\)/, 'auto picks wasm over SwiftShader');
  const other = await inPage(() => sesame.getDevice({ device: 'webgpu' }).then(() => 'no error', (e) => e.message));
  assert.match(other, /already run on device "auto".*device "webgpu" cannot be used too/);
  assert.equal(await inPage(() => sesame.getDevice({ device: 'auto' }).then(() => 'same device')), 'same device');
  await forwardMatchesFixtures(page);
  checkErrors();
});

test('forward matches the transformers fixtures for every architecture (≤ 1e-4), on WebGPU', async () => {
  const { page: webgpu, checkErrors: webgpuErrors } = await newPage(h.browser, `${h.base}/tests/browser/blank.html`);
  const adapter = await webgpu.evaluate(async () => {
    window.sesame = await import('/dist/index.js');
    window.check = await import('/tests/shared/tensors.js');
    await sesame.getDevice({ device: 'webgpu' });
    return sesame.adapterInfo();
  });
  assert.notEqual(adapter.kernels, 'host', `WebGPU asked for, got ${JSON.stringify(adapter)}`);
  await forwardMatchesFixtures(webgpu);
  await webgpu.close();
  webgpuErrors();
});

test('elmo-embeddings matches the ELMo reference per sentence, with its words (≤ 1e-4)', async () => {
  for (const name of ['small', 'tanh']) {
    const { sentences } = fixtureJson(`elmo/${name}`, 'inputs.json');
    const got = await inPage(async ({ name, sentences }) => {
      const url = `/models/fixtures/elmo/${name}/`;
      const elmo = await sesame.pipeline('elmo-embeddings', url);
      const results = await elmo(sentences);
      const fromText = await elmo('A river bank!');
      const ref = await check.readSafetensors(url + 'reference.safetensors');
      const [, layers, , width] = ref.elmo_layers.dims;
      const maxErr = check.elmoMaxError(results, ref);
      const dims = results.map((r) => [r.layers.dims, r.representations.map((m) => m.dims)]);
      const info = elmo.model.info;
      elmo.dispose();
      return { maxErr, dims, words: results.map((r) => r.tokens), fromText: fromText.tokens, info, layers, width };
    }, { name, sentences });
    assert.deepEqual(got.words, sentences);
    assert.ok(got.maxErr <= 1e-4, `${name}: max abs err ${got.maxErr}`);
    got.dims.forEach(([layerDims, mixDims], b) => {
      assert.deepEqual(layerDims, [got.layers, sentences[b].length, got.width]);
      assert.equal(mixDims.length, got.info.mixes);
    });
    assert.deepEqual(got.fromText, ['A', 'river', 'bank', '!'], 'a text is split into words');
    console.log(`elmo/${name}: max abs err ${got.maxErr.toExponential(1)} over ${got.layers} layers and ${got.info.mixes} mixes`);
  }
  const errors = await inPage(async () => {
    const elmo = await sesame.pipeline('elmo-embeddings', '/models/fixtures/elmo/small/');
    const attempt = async (f) => { try { await f(); return 'no error'; } catch (e) { return e.message; } };
    const result = {
      empty: await attempt(() => elmo(['a b', '  '])),
      surrogate: await attempt(() => elmo(['bad \ud800 text'])),
      type: await attempt(() => elmo([3])),
      none: await attempt(() => elmo([])),
      notElmo: await attempt(() => sesame.pipeline('elmo-embeddings', '/models/fixtures/bert/BertModel/')),
      elmoForMask: await attempt(() => sesame.pipeline('fill-mask', '/models/fixtures/elmo/small/')),
    };
    elmo.dispose();
    return result;
  });
  assert.match(errors.empty, /sentence 1 is empty/);
  assert.match(errors.surrogate, /sentence 0 holds a lone UTF-16 surrogate/);
  assert.match(errors.type, /sentence 0 must be a string or a string\[\]/);
  assert.match(errors.none, /non-empty array of sentences/);
  assert.match(errors.notElmo, /options\.json \(HTTP 404/);
  assert.match(errors.elmoForMask, /config\.json \(HTTP 404/);
  consoleErrors.length = 0; // the 404s above are expected
});

test('fill-mask matches the transformers pipeline', async () => {
  await pipelineCasesMatch(LANGUAGE_MODEL_CASES.filter(([, task]) => task === 'fill-mask'));
});

test('text-generation: greedy ids as transformers, streamed by onToken and by the async iterator', async () => {
  for (const dir of ['gpt2/GPT2LMHeadModel', 'openai-gpt/OpenAIGPTLMHeadModel']) {
    const want = fixtureJson(dir, 'generation.json');
    const got = await inPage(async ({ dir, text }) => {
      const generate = await sesame.pipeline('text-generation', `/models/fixtures/${dir}/`);
      const pieces = [];
      const result = await generate(text, { maxNewTokens: 8, onToken: (piece, token) => pieces.push([piece, token]) });
      const streamed = [];
      for await (const { text: piece } of generate.stream(text, { maxNewTokens: 8 })) streamed.push(piece);
      const sampled = [await generate('the old dog', { maxNewTokens: 6, temperature: 0.8, topK: 5, seed: 3 }), await generate('the old dog', { maxNewTokens: 6, temperature: 0.8, topK: 5, seed: 3 })];
      generate.dispose();
      return { result, pieces, streamed, sampled };
    }, { dir, text: want.text });
    assert.deepEqual(got.result.tokenIds, want.text_ids, dir);
    assert.equal(got.result.newTokens, 8);
    assert.deepEqual(got.pieces.map(([, t]) => t), want.text_ids.slice(-8), `${dir}: onToken ids`);
    assert.equal(want.text + got.pieces.map(([p]) => p).join(''), got.result.generatedText, `${dir}: the pieces add up to the text`);
    assert.deepEqual(got.streamed, got.pieces.map(([p]) => p), `${dir}: the async iterator yields the same pieces`);
    assert.deepEqual(got.sampled[0].tokenIds, got.sampled[1].tokenIds, `${dir}: the same seed gives the same sample`);
  }
});

test('text-generation stops early: onToken answering false, an AbortSignal, leaving the stream; on the page and in a worker', async () => {
  const got = await inPage(async () => {
    const url = '/models/fixtures/gpt2/GPT2LMHeadModel/';
    const stops = async (generate) => {
      let called = 0;
      // Room for 400 tokens: on the CPU the tiny model makes 40 before a stop message crosses.
      const byCallback = await generate('the old dog', { maxNewTokens: 400, onToken: () => ++called < 3 });
      const controller = new AbortController();
      let seen = 0;
      const bySignal = await generate('the old dog', { maxNewTokens: 400, signal: controller.signal, onToken: () => { if (++seen === 2) controller.abort(); } });
      const streamed = [];
      for await (const { text } of generate.stream('the old dog', { maxNewTokens: 40 })) {
        streamed.push(text);
        if (streamed.length === 4) break;
      }
      const next = await generate('the old dog', { maxNewTokens: 3 });
      let early;
      try {
        await generate('the old dog', { signal: AbortSignal.abort() });
      } catch (e) {
        early = e.name;
      }
      const brief = (r) => ({ newTokens: r.newTokens, stopped: r.stopped });
      return { byCallback: brief(byCallback), bySignal: brief(bySignal), streamed: streamed.length, next: brief(next), early };
    };
    const local = await sesame.pipeline('text-generation', url);
    const inWorker = await sesame.pipelineInWorker('text-generation', url);
    const result = { page: await stops(local), worker: await stops(inWorker) };
    local.dispose();
    inWorker.dispose();
    return result;
  });
  const { page: onPage, worker } = got;
  assert.deepEqual(onPage.byCallback, { newTokens: 3, stopped: true }, 'stops right after the token whose callback said false');
  assert.deepEqual(onPage.bySignal, { newTokens: 2, stopped: true });
  for (const [how, r] of Object.entries({ byCallback: worker.byCallback, bySignal: worker.bySignal })) {
    // The stop crosses to the worker as a message, so more tokens may come first.
    assert.ok(r.stopped && r.newTokens >= 2 && r.newTokens < 400, `worker ${how}: ${JSON.stringify(r)}`);
  }
  for (const r of [onPage, worker]) {
    assert.equal(r.streamed, 4);
    assert.deepEqual(r.next, { newTokens: 3, stopped: false }, 'the model works on after an abandoned stream');
    assert.equal(r.early, 'AbortError', 'a signal aborted before the call rejects');
  }
});

test('perplexity matches transformers, in one window and in sliding windows', async () => {
  await pipelineCasesMatch(LANGUAGE_MODEL_CASES.filter(([, task]) => task === 'perplexity'));
});

test('classification, NSP, token-classification and question-answering match transformers', async () => {
  await pipelineCasesMatch(CLASSIFICATION_CASES);
});

test('the recurrent families: text-classification with a ULMFiT classifier matches fastai, feature-extraction with CoVe matches the MT-LSTM, token-classification with a CVT tagger matches the paper reference', async () => {
  await pipelineCasesMatch(RECURRENT_CASES);
  const infos = await inPage(async () => {
    const attempt = async (f) => { try { await f(); return 'no error'; } catch (e) { return e.message; } };
    const clf = await sesame.loadModel('/models/fixtures/awd_lstm/fastai-classifier/');
    const cove = await sesame.loadModel('/models/fixtures/cove/tiny/');
    const cvt = await sesame.loadModel('/models/fixtures/cvt/tiny/');
    const result = {
      clf: clf.info.tasks,
      cove: cove.info.tasks,
      cvt: cvt.info.tasks,
      cvtWithoutChars: await attempt(() => cvt.forward({ input_ids: [[2, 5, 3]] })),
      cvtBadChars: await attempt(() => cvt.forward({ input_ids: [[2, 5, 3]], char_ids: [[[0, 2, 4, 3]]] })),
      wrongTask: await attempt(() => sesame.pipeline('fill-mask', clf)),
      coveWidth: (await (await sesame.pipeline('feature-extraction', cove))(['the cat', 'a dog ran'])).dims,
    };
    clf.dispose();
    cove.dispose();
    cvt.dispose();
    return result;
  });
  assert.deepEqual(infos.cvt, ['token-classification']);
  assert.match(infos.cvtWithoutChars, /reads each token's characters: the batch has no char_ids/);
  assert.match(infos.cvtBadChars, /char_ids must be \[batch, seq, width\] for input_ids \[1,3\], got \[1,1,4\]/);
  assert.ok(infos.clf.includes('text-classification'), String(infos.clf));
  assert.ok(infos.cove.includes('feature-extraction'), String(infos.cove));
  assert.match(infos.wrongTask, /fill-mask cannot run on this model \(AwdLstmForSequenceClassification\)/);
  assert.deepEqual(infos.coveWidth, [2, 10]);
});

test('the encoder families: each model lists its tasks; fill-mask with <mask>, zero-shot, multiple choice and sentence order match transformers', async () => {
  await pipelineCasesMatch(ENCODER_FAMILY_CASES);
  const infos = await inPage(async () => {
    const attempt = async (f) => { try { await f(); return 'no error'; } catch (e) { return e.message; } };
    const model = await sesame.loadModel('/models/fixtures/ernie/ErnieForPreTraining/');
    const info = model.info;
    model.dispose();
    return { info, wrongTask: await attempt(() => sesame.pipeline('question-answering', '/models/fixtures/electra/ElectraForMaskedLM/')) };
  });
  assert.deepEqual([infos.info.modelType, infos.info.family, infos.info.taskTypes], ['ernie', 'ERNIE', true]);
  assert.deepEqual(infos.info.tasks, ['fill-mask', 'next-sentence-prediction', 'feature-extraction']);
  assert.match(infos.wrongTask, /question-answering cannot run on this model \(ElectraForMaskedLM\); it serves fill-mask, feature-extraction/);
});

test('feature-extraction on the real all-MiniLM-L6-v2 matches sentence-transformers', { skip: process.env.SESAME_DOWNLOADS === 'unavailable' && '!!! SKIPPED: MiniLM could not be downloaded' }, async () => {
  const want = fixtureJson('minilm', 'embeddings.json');
  const got = await inPage(async (sentences) => {
    const embed = await sesame.pipeline('feature-extraction', '/models/all-MiniLM-L6-v2/');
    const out = await embed(sentences, { pooling: 'mean', normalize: true });
    embed.dispose();
    return { dims: out.dims, rows: out.tolist() };
  }, want.sentences);
  assert.deepEqual(got.dims, [want.sentences.length, 384]);
  let max = 0;
  got.rows.forEach((row, i) => row.forEach((v, j) => { max = Math.max(max, Math.abs(v - want.embeddings[i][j])); }));
  console.log(`MiniLM in the browser: max abs error ${max.toExponential(2)} over ${want.sentences.length} sentences`);
  assert.ok(max <= 1e-4, `max abs error ${max}`);
});

test('MiniLM quantized as it loads (dtype q8) stays within cosine 0.998 of sentence-transformers, on wasm and on WebGPU', { skip: process.env.SESAME_DOWNLOADS === 'unavailable' && '!!! SKIPPED: MiniLM could not be downloaded' }, async () => {
  const want = fixtureJson('minilm', 'embeddings.json');
  const { page: webgpu, checkErrors: webgpuErrors } = await newPage(h.browser, `${h.base}/tests/browser/blank.html`);
  await webgpu.evaluate(async () => {
    window.sesame = await import('/dist/index.js');
    await sesame.getDevice({ device: 'webgpu' });
  });
  // This page's device is auto: wasm, over SwiftShader.
  for (const [on, name] of [[page, 'wasm'], [webgpu, 'WebGPU']]) {
    const rows = await on.evaluate(async (sentences) => {
      const embed = await sesame.pipeline('feature-extraction', '/models/all-MiniLM-L6-v2/', { dtype: 'q8' });
      const out = await embed(sentences, { pooling: 'mean', normalize: true });
      embed.dispose();
      return out.tolist();
    }, want.sentences);
    const cosines = rows.map((row, i) => row.reduce((sum, v, j) => sum + v * want.embeddings[i][j], 0));
    console.log(`MiniLM q8 in the browser on ${name}: min cosine ${Math.min(...cosines).toFixed(5)}`);
    cosines.forEach((c, i) => assert.ok(c >= 0.998, `${name}: ${want.sentences[i]}: cosine ${c}`));
  }
  await webgpu.close();
  webgpuErrors();
});

test('files load from memory (ArrayBuffer, Blob/File) as from a URL', async () => {
  const got = await inPage(async () => {
    const base = '/models/fixtures/bert/BertForMaskedLM/';
    const get = async (name) => (await fetch(base + name)).arrayBuffer();
    const files = { 'config.json': await get('config.json'), 'model.safetensors': new Blob([await get('model.safetensors')]), 'tokenizer.json': new File([await get('tokenizer.json')], 'tokenizer.json') };
    const fromMemory = await sesame.pipeline('fill-mask', files);
    const fromUrl = await sesame.pipeline('fill-mask', base);
    const a = await fromMemory('the cat sat on the [MASK] .');
    const b = await fromUrl('the cat sat on the [MASK] .');
    fromMemory.dispose();
    fromUrl.dispose();
    return [a, b];
  });
  assert.deepEqual(got[0], got[1]);
});

test('a sharded checkpoint loads from memory with its files in pieces (tensors across piece boundaries), and a missing shard is named', async () => {
  const got = await inPage(async () => {
    const base = '/models/fixtures/gpt2/GPT2LMHeadModel-sharded/';
    const get = async (name) => new Uint8Array(await (await fetch(base + name)).arrayBuffer());
    // Pieces of 1000 bytes and odd lengths: every tensor's bytes span pieces.
    const pieces = (bytes, size) => Array.from({ length: Math.ceil(bytes.length / size) }, (_, i) => bytes.subarray(i * size, (i + 1) * size));
    const index = await get('model.safetensors.index.json');
    const shards = Object.keys(Object.fromEntries(Object.values(JSON.parse(new TextDecoder().decode(index)).weight_map).map((f) => [f, 1])));
    const files = { 'config.json': await get('config.json'), 'tokenizer.json': await get('tokenizer.json'), 'model.safetensors.index.json': index };
    for (const [i, shard] of shards.entries()) files[shard] = pieces(await get(shard), [1000, 777, 4096][i % 3]);
    const ids = { input_ids: [[5, 17, 45, 98, 3, 60, 4]] };
    const fromPieces = await sesame.loadModel(files);
    const fromUrl = await sesame.loadModel(base);
    const [a, b] = [await fromPieces.forward(ids), await fromUrl.forward(ids)];
    fromPieces.dispose();
    fromUrl.dispose();
    const { [shards[1]]: _, ...withoutShard } = files;
    const missing = await sesame.loadModel(withoutShard).then(() => 'loaded', (e) => e.message);
    return { shards: shards.length, same: a.logits.data.every((v, i) => v === b.logits.data[i]), length: a.logits.data.length, missing };
  });
  assert.equal(got.shards, 3);
  assert.ok(got.same && got.length > 0);
  assert.equal(got.missing, 'sesame-lm: the model files have no model-00002-of-00003.safetensors, a shard model.safetensors.index.json names (given: config.json, tokenizer.json, model.safetensors.index.json, model-00001-of-00003.safetensors, model-00003-of-00003.safetensors)');
});

test('a hub id loads from the hub (a mock on another origin), and a missing model is a clear Error', async () => {
  const hub = await startMockHub({ 'tiny/bert-mlm': path.join(FIXTURES, 'bert/BertForMaskedLM') });
  try {
    const got = await inPage(async (hubUrl) => {
      const attempt = (p) => p.then(() => 'no error', (e) => e.message);
      const fromHub = await sesame.pipeline('fill-mask', 'tiny/bert-mlm', { hubUrl, cache: false });
      const fromUrl = await sesame.pipeline('fill-mask', '/models/fixtures/bert/BertForMaskedLM/');
      const result = [await fromHub('the [MASK] sat'), await fromUrl('the [MASK] sat')];
      fromHub.dispose();
      fromUrl.dispose();
      return { result, missing: await attempt(sesame.pipeline('fill-mask', 'nobody/nothing', { hubUrl, cache: false })) };
    }, hub.url);
    assert.deepEqual(got.result[0], got.result[1]);
    assert.match(got.missing, /the hub has no model "nobody\/nothing" that can be read \(HTTP 401\): check the id/);
    assert.ok(hub.requests.some((r) => r.url === '/tiny/bert-mlm/resolve/main/model.safetensors'));
  } finally {
    await hub.close();
    consoleErrors.length = 0; // the page logs the 401 above
  }
});

test('a second load comes from the Cache API, and a corrupted cache entry is refetched', async () => {
  const got = await inPage(async () => {
    await sesame.clearCache();
    const url = '/models/fixtures/gpt2/GPT2Model/';
    const events = [];
    const load = async () => {
      events.length = 0;
      (await sesame.loadModel(url, { onProgress: (e) => events.push(e) })).dispose();
      return events.filter((e) => e.status === 'done').map((e) => [e.file, e.cached]);
    };
    const first = await load();
    const second = await load();
    const progress = events.some((e) => e.status === 'progress' && e.file === 'model.safetensors' && e.loaded > 0);
    // Corrupt the cached weights (same digest header, other bytes): must be refetched.
    const cache = await caches.open('sesame-lm-models-v1');
    const key = new URL(url + 'model.safetensors', location.href).href;
    const hit = await cache.match(key);
    const bytes = new Uint8Array(await hit.arrayBuffer());
    bytes[bytes.length - 1] ^= 0xff;
    await cache.put(key, new Response(bytes, { headers: hit.headers }));
    const third = await load();
    let integrity;
    try {
      await sesame.loadModel(url, { cache: false, integrity: { 'config.json': 'sha256-' + '0'.repeat(64) } });
    } catch (e) {
      integrity = e.message;
    }
    return { first, second, third, progress, integrity };
  });
  assert.ok(got.first.every(([, cached]) => !cached), JSON.stringify(got.first));
  assert.ok(got.second.every(([, cached]) => cached), JSON.stringify(got.second));
  assert.deepEqual(got.third.find(([f]) => f === 'model.safetensors'), ['model.safetensors', false]);
  assert.ok(got.progress, 'progress events while reading the weights');
  assert.match(got.integrity, /config\.json failed its integrity check/);
});

test('bad input is a clear Error, never a trap', async () => {
  const messages = await inPage(async () => {
    const attempt = async (f) => { try { await f(); return 'no error'; } catch (e) { return `${e.constructor.name}: ${e.message}`; } };
    const fill = await sesame.pipeline('fill-mask', '/models/fixtures/bert/BertForMaskedLM/');
    const qa = await sesame.pipeline('question-answering', '/models/fixtures/bert/BertForQuestionAnswering/');
    const long = Array(60).fill('cat').join(' ');
    const out = {
      task: await attempt(() => sesame.pipeline('summarization', '/models/fixtures/bert/BertModel/')),
      missing: await attempt(() => sesame.loadModel('/models/fixtures/no-such-model/')),
      head: await attempt(() => sesame.pipeline('text-generation', '/models/fixtures/bert/BertModel/')),
      empty: await attempt(() => fill('   ')),
      notText: await attempt(() => fill(42)),
      noMask: await attempt(() => fill('the cat sat')),
      long: await attempt(() => fill(long + ' [MASK]')),
      topK: await attempt(() => fill('the [MASK]', { topK: -1 })),
      hugeTopK: await attempt(() => fill('the [MASK]', { topK: 2 ** 32 })),
      docStride: await attempt(() => qa('who sat ?', long, { docStride: 1.5 })),
      narrowWindow: await attempt(() => qa('who sat ?', long, { maxSeqLen: 12, docStride: 6 })),
      forward: await attempt(() => fill.model.forward({ input_ids: [[1, 2], [3]] })),
      outOfVocab: await attempt(() => fill.model.forward({ input_ids: [2, 5000, 3] })),
      noFiles: await attempt(() => sesame.loadModel({ 'config.json': '{}' })),
      badConfig: await attempt(async () => sesame.loadModel({ 'config.json': '{"model_type": "t5"}', 'model.safetensors': await (await fetch('/models/fixtures/bert/BertModel/model.safetensors')).arrayBuffer() })),
      truncatedWeights: await attempt(async () => sesame.loadModel({ 'config.json': await (await fetch('/models/fixtures/bert/BertModel/config.json')).text(), 'model.safetensors': new Uint8Array((await (await fetch('/models/fixtures/bert/BertModel/model.safetensors')).arrayBuffer()).slice(0, 1000)) })),
    };
    out.longContext = (await qa('who sat ?', long, { docStride: null })).answer;
    fill.dispose();
    qa.dispose();
    out.disposed = await attempt(() => fill('the [MASK]'));
    return out;
  });
  const expect = {
    task: /unknown task "summarization"/, missing: /has no config\.json \(HTTP 404/, head: /text-generation cannot run on this model \(BertModel\); it serves feature-extraction/,
    empty: /the text is empty/, notText: /TypeError: .*must be a string/, noMask: /mask/i, long: /longer than the model's 40 positions/,
    topK: /topK must be an integer/, hugeTopK: /topK must be an integer from 1 to 2³²−1/, docStride: /docStride must be an integer/,
    narrowWindow: /leaves 6 for the context, not more than the doc_stride of 6/, longContext: /^cat/, forward: /rows differ in length/, outOfVocab: /5000/, noFiles: /no model\.safetensors/,
    badConfig: /unknown model_type `t5`/, truncatedWeights: /safetensors/i, disposed: /disposed/,
  };
  for (const [name, pattern] of Object.entries(expect)) assert.match(messages[name], pattern, name);
  for (const [name, message] of Object.entries(messages)) assert.doesNotMatch(message, /unreachable|RuntimeError/, name);
  // The missing folder's 404 is logged by the browser; that one was asked for.
  assert.deepEqual(consoleErrors.splice(0), ['Failed to load resource: the server responded with a status of 404 (Not Found)']);
});

test('a pipeline runs in a Web Worker with progress and streamed tokens', async () => {
  const got = await inPage(async () => {
    const progress = [];
    const generate = await sesame.pipelineInWorker('text-generation', '/models/fixtures/gpt2/GPT2LMHeadModel/', { onProgress: (e) => progress.push(e.status) });
    const pieces = [];
    const result = await generate('the old dog', { maxNewTokens: 5, onToken: (p) => pieces.push(p) });
    const streamed = [];
    for await (const { text } of generate.stream('the old dog', { maxNewTokens: 5 })) streamed.push(text);
    const local = await sesame.pipeline('text-generation', '/models/fixtures/gpt2/GPT2LMHeadModel/');
    const expected = await local('the old dog', { maxNewTokens: 5 });
    local.dispose();
    const embed = await sesame.pipelineInWorker('feature-extraction', '/models/fixtures/bert/BertModel/');
    const vectors = await embed(['the cat', 'the dog sat'], { normalize: true });
    generate.dispose();
    embed.dispose();
    return { progress, result, expected, pieces, streamed, info: generate.info, dims: vectors.dims, list: vectors.tolist().length };
  });
  assert.deepEqual(got.result, got.expected);
  assert.equal(got.pieces.length, 5);
  assert.deepEqual(got.streamed, got.pieces);
  assert.ok(got.progress.includes('ready'), JSON.stringify(got.progress));
  assert.equal(got.info.architecture, 'GPT2LMHeadModel');
  assert.deepEqual(got.dims, [2, 32]);
  assert.equal(got.list, 2);
});

test('a pool of workers splits a batch and puts it back in order', async () => {
  const got = await inPage(async () => {
    const texts = ['the cat', 'the dog sat on the mat', 'a bird', 'it rained all day long', 'hello'];
    const local = await sesame.pipeline('feature-extraction', '/models/fixtures/bert/BertModel/');
    const expected = await local(texts);
    local.dispose();
    const pool = await sesame.pipelineInWorker('feature-extraction', '/models/fixtures/bert/BertModel/', { workers: 2 });
    const split = await pool(texts);
    const single = await pool('hello');
    const elmo = await sesame.pipelineInWorker('elmo-embeddings', '/models/fixtures/elmo/small/', { workers: 2 });
    const sentences = await elmo(['a river bank', 'the bank', 'money in the bank']);
    pool.dispose();
    elmo.dispose();
    const badWorkers = await sesame.pipelineInWorker('fill-mask', '/models/fixtures/bert/BertForMaskedLM/', { workers: 0 }).then(() => 'no error', (e) => e.message);
    let maxErr = 0;
    expected.data.forEach((v, i) => { maxErr = Math.max(maxErr, Math.abs(v - split.data[i])); });
    return { dims: split.dims, expectedDims: expected.dims, maxErr, workers: pool.workers, single: single.dims, words: sentences.map((s) => s.tokens), badWorkers };
  });
  assert.deepEqual(got.dims, got.expectedDims);
  assert.ok(got.maxErr <= 1e-5, `pool vs one pipeline: ${got.maxErr}`);
  assert.equal(got.workers, 2);
  assert.deepEqual(got.single, [1, 32]);
  assert.deepEqual(got.words, [['a', 'river', 'bank'], ['the', 'bank'], ['money', 'in', 'the', 'bank']]);
  assert.match(got.badWorkers, /workers must be an integer from 1 to 64, got 0/);
});

test('every promise settles: a disposed pipeline, a crashed worker, a trap in a worker and on the page (where the next load starts the module afresh)', async () => {
  const got = await inPage(async () => {
    const outcome = (p) => p.then(() => 'resolved', (e) => `rejected: ${e.message}`);
    const url = '/models/fixtures/gpt2/GPT2LMHeadModel/';
    // Disposed while a generation runs, then called again.
    const generate = await sesame.pipelineInWorker('text-generation', url);
    // An argument that cannot be copied to the worker rejects that call alone.
    const uncopyable = { call: await outcome(generate('the old dog', { maxNewTokens: () => 3 })), next: await outcome(generate('the old dog', { maxNewTokens: 1 })) };
    const inFlight = outcome(generate('the old dog', { maxNewTokens: 400 }));
    generate.dispose();
    const disposed = { inFlight: await inFlight, after: await outcome(generate('the old dog')) };
    // A worker that dies: the call in flight and later ones reject (a given worker cannot be
    // replaced).
    const dying = new Worker('/tests/browser/crashing-worker.js', { type: 'module' });
    const crashed = await sesame.pipelineInWorker('text-generation', url, { worker: dying });
    const beforeCrash = outcome(crashed('the old dog', { maxNewTokens: 400 }));
    dying.postMessage({ type: 'crash' });
    const crash = { inFlight: await beforeCrash, after: await outcome(crashed('the old dog')) };
    // A trap in the worker's module while a generation runs there.
    const trapping = new Worker('/tests/browser/crashing-worker.js', { type: 'module' });
    const trapped = await sesame.pipelineInWorker('text-generation', url, { worker: trapping });
    const beforeTrap = outcome(trapped('the old dog', { maxNewTokens: 400 }));
    trapping.postMessage({ type: 'trap' });
    const trap = { inFlight: await beforeTrap, after: await outcome(trapped('the old dog')) };
    // A worker its owner terminates (a Web Worker tells nobody when it is).
    const ended = new Worker('/dist/worker.js', { type: 'module' });
    const onEnded = await sesame.pipelineInWorker('text-generation', url, { worker: ended });
    const beforeEnd = outcome(onEnded('the old dog', { maxNewTokens: 400 }));
    ended.terminate();
    const terminated = { inFlight: await beforeEnd, after: await outcome(onEnded('the old dog')) };
    crashed.dispose();
    trapped.dispose();
    onEnded.dispose();
    return { uncopyable, disposed, crash, trap, terminated };
  });
  assert.match(got.uncopyable.call, /^rejected: sesame-lm: the arguments cannot be sent to the worker \(.+\)$/);
  assert.equal(got.uncopyable.next, 'resolved');
  assert.deepEqual(got.disposed, { inFlight: 'rejected: sesame-lm: the worker pipeline was disposed', after: 'rejected: sesame-lm: the worker pipeline was disposed' });
  assert.match(got.crash.inFlight, /^rejected: sesame-lm: the worker failed: .*crashed on purpose/);
  assert.equal(got.crash.after, got.crash.inFlight);
  assert.match(got.trap.inFlight, /^rejected: sesame-lm: the wasm module trapped \(unreachable\)/);
  assert.equal(got.trap.after, got.trap.inFlight);
  assert.deepEqual(got.terminated, { inFlight: 'rejected: sesame-lm: the worker was terminated', after: 'rejected: sesame-lm: the worker was terminated' });

  // On a page of its own: a trap makes the call in flight and every later one reject.
  const fresh = await newPage(h.browser, `${h.base}/tests/browser/blank.html`);
  const onPage = await fresh.page.evaluate(async () => {
    const sesame = await import('/dist/index.js');
    const outcome = (p) => p.then(() => 'resolved', (e) => `rejected: ${e.message}`);
    const generate = await sesame.pipeline('text-generation', '/models/fixtures/gpt2/GPT2LMHeadModel/');
    const fill = await sesame.pipeline('fill-mask', '/models/fixtures/bert/BertForMaskedLM/');
    let trapped = false;
    const inFlight = outcome(generate('the old dog', { maxNewTokens: 400, onToken: () => {
      if (!trapped) {
        trapped = true;
        setTimeout(() => { throw new WebAssembly.RuntimeError('unreachable'); });
      }
    } }));
    const result = { inFlight: await inFlight, after: await outcome(fill('the [MASK] sat')) };
    // The next load starts the module afresh; the models of the trapped one stay lost.
    const again = await sesame.pipeline('fill-mask', '/models/fixtures/bert/BertForMaskedLM/');
    result.reloaded = (await again('the [MASK] sat'))[0].tokenStr;
    result.lost = await outcome(fill('the [MASK] sat'));
    result.tokenize = await outcome((async () => fill.model.tokenize('the cat'))());
    generate.dispose();
    fill.dispose();
    result.afterDispose = (await again('the [MASK] sat'))[0].tokenStr;
    again.dispose();
    return result;
  });
  assert.match(onPage.inFlight, /^rejected: sesame-lm: the wasm module trapped \(unreachable\): this is a bug in sesame-lm/);
  assert.equal(onPage.after, onPage.inFlight);
  assert.equal(typeof onPage.reloaded, 'string');
  assert.equal(onPage.afterDispose, onPage.reloaded);
  assert.equal(onPage.lost, 'rejected: sesame-lm: this model was lost when the wasm module trapped (unreachable); load it again');
  assert.equal(onPage.tokenize, onPage.lost);
  await fresh.page.close();
});

test('a lost GPU device rejects the calls on it, and the next load gets a new device', async () => {
  // SwiftShader cannot lose its device by itself: the page destroys it, as a driver reset would.
  const fresh = await newPage(h.browser, `${h.base}/tests/browser/blank.html`);
  const got = await fresh.page.evaluate(async () => {
    const devices = [];
    const requestDevice = GPUAdapter.prototype.requestDevice;
    GPUAdapter.prototype.requestDevice = async function (...args) {
      const device = await requestDevice.apply(this, args);
      devices.push(device);
      return device;
    };
    const sesame = await import('/dist/index.js');
    const outcome = (p) => p.then((v) => `resolved: ${v[0].tokenStr}`, (e) => `rejected: ${e.message}`);
    await sesame.getDevice({ device: 'webgpu' });
    const fill = await sesame.pipeline('fill-mask', '/models/fixtures/bert/BertForMaskedLM/');
    const before = await outcome(fill('the [MASK] sat'));
    devices[0].destroy();
    const result = { before, lost: await outcome(fill('the [MASK] sat')), again: await outcome(fill('the [MASK] sat')) };
    const reloaded = await sesame.pipeline('fill-mask', '/models/fixtures/bert/BertForMaskedLM/');
    result.reloaded = await outcome(reloaded('the [MASK] sat'));
    result.devices = devices.length;
    result.adapter = (await sesame.adapterInfo()).name;
    fill.dispose();
    reloaded.dispose();
    return result;
  });
  assert.match(got.before, /^resolved: /);
  assert.equal(got.lost, 'rejected: the GPU device was lost (Destroyed: Device was destroyed.): the models on it are gone; load them again');
  assert.equal(got.again, got.lost);
  assert.equal(got.reloaded, got.before);
  assert.equal(got.devices, 2);
  assert.doesNotMatch(got.adapter, /wasm/);
  fresh.checkErrors();
  await fresh.page.close();
});

test('500 inferences leave no GPU buffers behind', async () => {
  const got = await inPage(async () => {
    const before = await sesame.stats();
    const fill = await sesame.pipeline('fill-mask', '/models/fixtures/bert/BertForMaskedLM/');
    const generate = await sesame.pipeline('text-generation', '/models/fixtures/gpt2/GPT2LMHeadModel/');
    const loaded = await sesame.stats();
    for (let i = 0; i < 250; i++) await fill('the cat sat on the [MASK] .');
    const afterFill = await sesame.stats();
    for (let i = 0; i < 250; i++) await generate('the old dog', { maxNewTokens: 2 });
    const afterGenerate = await sesame.stats();
    fill.dispose();
    generate.dispose();
    await new Promise((r) => setTimeout(r, 0));
    return { before, loaded, afterFill, afterGenerate, after: await sesame.stats() };
  });
  console.log('GPU buffers:', JSON.stringify(got));
  assert.ok(got.loaded.liveBuffers > got.before.liveBuffers, 'the models hold buffers');
  assert.equal(got.afterFill.liveBuffers, got.loaded.liveBuffers, 'fill-mask leaks no buffers');
  assert.equal(got.afterGenerate.liveBuffers, got.loaded.liveBuffers, 'generation leaks no buffers');
  assert.equal(got.after.liveBuffers, got.before.liveBuffers, 'dispose frees every buffer');
  assert.equal(got.after.liveBytes, got.before.liveBytes);
  assert.equal(got.after.pooledBytes, 0, 'dispose trims the pool');
  checkErrors();
});
