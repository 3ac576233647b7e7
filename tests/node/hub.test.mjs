// Hub ids in Node.js against a mock hub (tests/node/mock-hub.mjs): the files of `org/name` come
// from {endpoint}/{id}/resolve/{revision}/, optional tokenizer files probed, progress per file,
// the endpoint from hubUrl or HF_ENDPOINT, a token sent; kept in huggingface_hub's cache
// layout, read from it offline, refreshed when the hub's ETag changes; and an error a user can
// act on for a missing repository, revision or file.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as sesame from '../../dist/index.js';
import { startMockHub } from '../shared/mock-hub.mjs';

const fixtures = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../fixtures');
let hub;

let cacheDir;

before(async () => {
  cacheDir = mkdtempSync(path.join(tmpdir(), 'sesame-hub-cache-'));
  process.env.HF_HUB_CACHE = cacheDir;
  hub = await startMockHub({
    'tiny/bert-mlm': path.join(fixtures, 'bert/BertForMaskedLM'),
    'tiny/gpt2': path.join(fixtures, 'gpt2/GPT2LMHeadModel'),
    'tiny/gpt2-sharded': path.join(fixtures, 'gpt2/GPT2LMHeadModel-sharded'),
    'tiny/elmo-only': path.join(fixtures, 'elmo/small'),
  }, { revisions: ['main', 'v1'] });
});

after(() => hub?.close());

const attempt = (p) => p.then(() => 'no error', (e) => e.message);

test('a hub id loads from the hub: redirects followed, tokenizer files probed, progress per file', async () => {
  const events = [];
  const fill = await sesame.pipeline('fill-mask', 'tiny/bert-mlm', { hubUrl: hub.url, onProgress: (e) => events.push(e) });
  const local = await sesame.pipeline('fill-mask', path.join(fixtures, 'bert/BertForMaskedLM'));
  assert.deepEqual(await fill('the [MASK] sat'), await local('the [MASK] sat'));
  fill.dispose();
  local.dispose();
  const done = events.filter((e) => e.status === 'done').map((e) => e.file);
  assert.deepEqual(done, ['config.json', 'model.safetensors', 'tokenizer.json']);
  assert.ok(events.some((e) => e.status === 'progress' && e.file === 'model.safetensors' && e.loaded === e.total));
  assert.ok(hub.requests.some((r) => r.url === '/tiny/bert-mlm/resolve/main/model.safetensors'));
  assert.ok(hub.requests.some((r) => r.url.startsWith('/cdn/')), 'the redirect was followed');

  // huggingface_hub's layout: refs/main names the commit, whose snapshot links to the blobs.
  const repo = path.join(cacheDir, 'models--tiny--bert-mlm');
  const commit = readFileSync(path.join(repo, 'refs/main'), 'utf8');
  assert.equal(commit, hub.commitOf(hub.repos['tiny/bert-mlm']));
  const snapshot = path.join(repo, 'snapshots', commit, 'model.safetensors');
  assert.ok(lstatSync(snapshot).isSymbolicLink());
  assert.match(readlinkSync(snapshot), /^\.\.\/\.\.\/blobs\/[0-9a-f]{64}$/);
  assert.deepEqual(readFileSync(snapshot), readFileSync(path.join(fixtures, 'bert/BertForMaskedLM/model.safetensors')));

  // A second load asks the hub for each file's ETag and fetches no bytes.
  const before = hub.requests.length;
  const again = await sesame.loadModelFiles('tiny/bert-mlm', { hubUrl: hub.url });
  assert.deepEqual(Object.keys(again).sort(), ['config.json', 'model.safetensors', 'tokenizer.json']);
  assert.ok(hub.requests.slice(before).every((r) => r.method === 'HEAD'), JSON.stringify(hub.requests.slice(before)));
});

test('a sharded checkpoint on the hub: the index, then each shard it names, cached', async () => {
  const events = [];
  const model = await sesame.loadModel('tiny/gpt2-sharded', { hubUrl: hub.url, onProgress: (e) => events.push(e) });
  const local = await sesame.loadModel(path.join(fixtures, 'gpt2/GPT2LMHeadModel'));
  const ids = { input_ids: [[5, 17, 45, 98, 3, 60, 4]] };
  assert.deepEqual((await model.forward(ids)).logits.data, (await local.forward(ids)).logits.data);
  model.dispose();
  local.dispose();
  const shards = ['model-00001-of-00003.safetensors', 'model-00002-of-00003.safetensors', 'model-00003-of-00003.safetensors'];
  assert.deepEqual(events.filter((e) => e.status === 'done').map((e) => e.file), ['config.json', 'model.safetensors.index.json', ...shards, 'tokenizer.json']);
  const repo = path.join(cacheDir, 'models--tiny--gpt2-sharded');
  const commit = readFileSync(path.join(repo, 'refs/main'), 'utf8');
  // The probe of model.safetensors found none: remembered as huggingface_hub does.
  assert.ok(existsSync(path.join(repo, '.no_exist', commit, 'model.safetensors')));
  for (const shard of shards) assert.ok(lstatSync(path.join(repo, 'snapshots', commit, shard)).isSymbolicLink(), shard);
});

test('offline (HF_HUB_OFFLINE=1 or allowRemote: false) the cache answers alone', async () => {
  const dead = 'http://127.0.0.1:9';
  await sesame.loadModelFiles('tiny/bert-mlm', { hubUrl: hub.url });
  const offline = await sesame.loadModelFiles('tiny/bert-mlm', { hubUrl: dead, allowRemote: false });
  assert.deepEqual(Object.keys(offline).sort(), ['config.json', 'model.safetensors', 'tokenizer.json']);
  process.env.HF_HUB_OFFLINE = '1';
  try {
    const fill = await sesame.pipeline('fill-mask', 'tiny/bert-mlm', { hubUrl: dead });
    assert.equal((await fill('the [MASK] sat')).length, 5);
    fill.dispose();
    assert.match(await attempt(sesame.pipeline('fill-mask', 'tiny/never-loaded', { hubUrl: dead })),
      /config\.json of hub model "tiny\/never-loaded" \(revision "main"\) is not in the hub cache .*models--tiny--never-loaded, and downloads are off/);
  } finally {
    delete process.env.HF_HUB_OFFLINE;
  }
  // The hub unreachable while online: the cached copy, as huggingface_hub does.
  assert.ok((await sesame.loadModelFiles('tiny/bert-mlm', { hubUrl: dead }))['config.json']);
});

test('files huggingface_hub downloaded are read, and a new commit with new ETags is fetched', async () => {
  // A cache entry as Python leaves it: blobs, a snapshot of links, refs/main.
  const repo = path.join(cacheDir, 'models--py--bert');
  const commit = 'a'.repeat(40);
  for (const file of ['config.json', 'model.safetensors', 'tokenizer.json']) {
    mkdirSync(path.join(repo, 'blobs'), { recursive: true });
    mkdirSync(path.join(repo, 'snapshots', commit), { recursive: true });
    writeFileSync(path.join(repo, 'blobs', `etag-${file}`), readFileSync(path.join(fixtures, 'bert/BertForMaskedLM', file)));
    writeFileSync(path.join(repo, 'snapshots', commit, file), readFileSync(path.join(repo, 'blobs', `etag-${file}`)));
  }
  mkdirSync(path.join(repo, 'refs'));
  writeFileSync(path.join(repo, 'refs/main'), commit);
  const files = await sesame.loadModelFiles('py/bert', { allowRemote: false });
  assert.deepEqual(Object.keys(files).sort(), ['config.json', 'model.safetensors', 'tokenizer.json']);

  // The hub's model changes (a new commit): a vocab.txt tokenizer in place of tokenizer.json.
  // The new file is fetched, the unchanged ones (same ETag) are not, refs/main moves, and the
  // files the new commit lacks are marked in .no_exist.
  hub.repos['tiny/swap'] = path.join(fixtures, 'bert/BertForMaskedLM');
  await sesame.loadModelFiles('tiny/swap', { hubUrl: hub.url });
  const vocabOnly = mkdtempSync(path.join(tmpdir(), 'sesame-vocab-only-'));
  for (const file of ['config.json', 'model.safetensors', 'vocab.txt']) writeFileSync(path.join(vocabOnly, file), readFileSync(path.join(fixtures, 'bert/BertForMaskedLM', file)));
  hub.repos['tiny/swap'] = vocabOnly;
  const before = hub.requests.length;
  const swapped = await sesame.loadModelFiles('tiny/swap', { hubUrl: hub.url });
  assert.deepEqual(Object.keys(swapped).sort(), ['config.json', 'model.safetensors', 'vocab.txt']);
  const fetched = hub.requests.slice(before).filter((r) => r.url.startsWith('/cdn/')).map((r) => decodeURIComponent(r.url.split('/').pop()));
  assert.deepEqual(fetched, ['vocab.txt'], 'only the new file is fetched');
  const swapRepo = path.join(cacheDir, 'models--tiny--swap');
  const commit2 = hub.commitOf(vocabOnly);
  assert.equal(readFileSync(path.join(swapRepo, 'refs/main'), 'utf8'), commit2);
  for (const missing of ['tokenizer.json', 'tokenizer_config.json']) assert.ok(existsSync(path.join(swapRepo, '.no_exist', commit2, missing)), missing);
  const offline = await sesame.loadModelFiles('tiny/swap', { allowRemote: false });
  assert.deepEqual(Object.keys(offline).sort(), ['config.json', 'model.safetensors', 'vocab.txt']);
});

test('a hub that cannot be reached is an error saying so (a model cached before still loads)', async () => {
  // Port 9 (discard) refuses connections; the cache folder has no copy of this model.
  const message = await attempt(sesame.loadModelFiles('tiny/nowhere', { hubUrl: 'http://127.0.0.1:9', cache: false }));
  assert.match(message, /^sesame-lm: the hub at http:\/\/127\.0\.0\.1:9 cannot be reached for "tiny\/nowhere" \(.+\): check the connection/);
});

test('a missing repository, revision or file is an error naming it', async () => {
  assert.match(await attempt(sesame.pipeline('fill-mask', 'nobody/nothing', { hubUrl: hub.url })),
    /the hub has no model "nobody\/nothing" that can be read \(HTTP 401\), and there is no local folder of that name/);
  assert.match(await attempt(sesame.pipeline('fill-mask', 'tiny/bert-mlm', { hubUrl: hub.url, revision: 'v9' })),
    /the model "tiny\/bert-mlm" on the hub has no revision "v9"/);
  assert.match(await attempt(sesame.pipeline('fill-mask', 'tiny/elmo-only', { hubUrl: hub.url })),
    /the model "tiny\/elmo-only" on the hub has no config\.json \(revision "main"\)/);
  assert.match(await attempt(sesame.pipeline('fill-mask', 'tiny/uncached', { hubUrl: 'http://127.0.0.1:9' })), /fetching .*config\.json failed \(.+\), and the hub cache has no copy/);
});
