// The hub cache shared with Python, against the mock hub: files huggingface_hub downloads are
// read offline by sesame-lm and by the sesame CLI (target/debug/sesame, which the native tests
// build first), and models they download are loaded offline by transformers. Needs python3
// with huggingface_hub and transformers (the fixture scripts' environment); where they are
// missing the tests are skipped, saying so loudly.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import * as sesame from '../../dist/index.js';
import { startMockHub } from '../shared/mock-hub.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const fixtures = path.join(root, 'tests/fixtures');
const cli = path.join(root, 'target/debug/sesame');
const hasPython = spawnSync('python3', ['-c', 'import huggingface_hub, transformers']).status === 0;
const skip = !hasPython && '!!! SKIPPED: python3 with huggingface_hub and transformers is not installed';
const python = async (code, env) => (await promisify(execFile)('python3', ['-c', code], { env: { ...process.env, ...env }, encoding: 'utf8' })).stdout;
let hub;
let cache;

before(async () => {
  cache = mkdtempSync(path.join(tmpdir(), 'sesame-hub-python-'));
  hub = await startMockHub({ 'tiny/bert-mlm': path.join(fixtures, 'bert/BertForMaskedLM'), 'tiny/gpt2': path.join(fixtures, 'gpt2/GPT2LMHeadModel') });
});

after(() => hub?.close());

test('huggingface_hub and sesame-lm share the hub cache both ways', { skip }, async () => {
  const env = { HF_HUB_CACHE: cache, HF_ENDPOINT: hub.url };
  await python('from huggingface_hub import hf_hub_download\nfor f in ["config.json", "model.safetensors", "tokenizer.json"]: hf_hub_download("tiny/bert-mlm", f)', env);
  process.env.HF_HUB_CACHE = cache;
  try {
    const fill = await sesame.pipeline('fill-mask', 'tiny/bert-mlm', { allowRemote: false });
    assert.equal((await fill('the [MASK] sat')).length, 5);
    fill.dispose();
    await sesame.loadModelFiles('tiny/gpt2', { hubUrl: hub.url });
  } finally {
    delete process.env.HF_HUB_CACHE;
  }
  const loaded = await python('from transformers import AutoModelForCausalLM\nprint(type(AutoModelForCausalLM.from_pretrained("tiny/gpt2")).__name__)', { ...env, HF_HUB_OFFLINE: '1' });
  assert.equal(loaded.trim(), 'GPT2LMHeadModel');
});

test('huggingface_hub and the sesame CLI share the hub cache both ways', { skip }, async () => {
  assert.ok(existsSync(cli), `${cli} is missing: build the CLI first (cargo build)`);
  const env = { HF_HUB_CACHE: mkdtempSync(path.join(tmpdir(), 'sesame-hub-cli-')), HF_ENDPOINT: hub.url };
  await python('from huggingface_hub import hf_hub_download\nfor f in ["config.json", "model.safetensors", "tokenizer.json"]: hf_hub_download("tiny/bert-mlm", f)', env);
  const sesameCli = async (args, extra = {}) => JSON.parse((await promisify(execFile)(cli, ['--adapter', 'host', ...args], { env: { ...process.env, ...env, ...extra }, encoding: 'utf8' })).stdout);
  const candidates = await sesameCli(['fill-mask', '--model', 'tiny/bert-mlm', '--text', 'the [MASK] sat', '--json'], { HF_HUB_OFFLINE: '1' });
  assert.equal(candidates.length, 5, 'the CLI reads what Python downloaded, offline');
  assert.equal((await sesameCli(['info', '--json', '--model', 'tiny/gpt2'])).architecture, 'GPT2LMHeadModel');
  const loaded = await python('from transformers import AutoModelForCausalLM\nprint(type(AutoModelForCausalLM.from_pretrained("tiny/gpt2")).__name__)', { ...env, HF_HUB_OFFLINE: '1' });
  assert.equal(loaded.trim(), 'GPT2LMHeadModel', 'transformers reads what the CLI downloaded, offline');
});
