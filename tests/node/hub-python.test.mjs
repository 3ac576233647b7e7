// The hub cache shared with Python, against the mock hub: files huggingface_hub downloads are
// read by sesame-lm offline, and a model sesame-lm downloads is loaded offline by transformers.
// Needs python3 with huggingface_hub and transformers (the fixture scripts' environment); where
// they are missing the test is skipped, saying so loudly.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import * as sesame from '../../dist/index.js';
import { startMockHub } from '../shared/mock-hub.mjs';

const fixtures = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../fixtures');
const hasPython = spawnSync('python3', ['-c', 'import huggingface_hub, transformers']).status === 0;
const python = async (code, env) => (await promisify(execFile)('python3', ['-c', code], { env: { ...process.env, ...env }, encoding: 'utf8' })).stdout;
let hub;
let cache;

before(async () => {
  cache = mkdtempSync(path.join(tmpdir(), 'sesame-hub-python-'));
  hub = await startMockHub({ 'tiny/bert-mlm': path.join(fixtures, 'bert/BertForMaskedLM'), 'tiny/gpt2': path.join(fixtures, 'gpt2/GPT2LMHeadModel') });
});

after(() => hub?.close());

test('huggingface_hub and sesame-lm share the hub cache both ways', { skip: !hasPython && '!!! SKIPPED: python3 with huggingface_hub and transformers is not installed' }, async () => {
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
