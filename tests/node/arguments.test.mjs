// Property tests of the package's argument checking (fast-check): whatever a caller passes, a
// pipeline either rejects with a sesame-lm Error or hands the wasm core arguments of the types
// it takes (non-empty strings, u32 counts, ids that fit their shape) — never a value the core
// would wrap, truncate or trap on. The core here is a stand-in that records its calls.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { SesameModel, pipeline } from '../../dist/index.js';

const U32_MAX = 0xffffffff;
const isCount = (v, min = 0) => Number.isInteger(v) && v >= min && v <= U32_MAX;
const isText = (v) => typeof v === 'string' && v.trim() !== '';

/** A SesameModel over a recording core that serves every task these tests call. */
function fakeModel(calls) {
  const info = {
    model_type: 'bert', family: 'BERT', architecture: 'BertForMaskedLM', layers: 1, heads: 1, hidden_size: 2, vocab_size: 10,
    max_positions: 8, token_types: true, task_types: false, parameters: 1, weight_bytes: 4, labels: [],
    tasks: ['fill-mask', 'feature-extraction', 'text-generation', 'question-answering'],
  };
  const record = (name, result) => (...args) => {
    calls.push([name, args]);
    return Promise.resolve(result);
  };
  return new SesameModel({
    info: () => JSON.stringify(info),
    fillMask: record('fillMask', '[[]]'),
    embed: record('embed', { data: new Float32Array(2), dims: [1, 2] }),
    generate: record('generate', '{"text": "", "ids": [], "new_tokens": 0}'),
    answerQuestion: record('answerQuestion', '[{"start": 0, "end": 0}]'),
    forward: record('forward', {}),
  });
}

/** Runs `call`; an error must be a sesame-lm Error. Returns the core's calls. */
async function settle(call) {
  const calls = [];
  const model = fakeModel(calls);
  try {
    await call(model);
  } catch (e) {
    assert.ok(e instanceof Error && e.message.startsWith('sesame-lm: '), `not a sesame-lm Error: ${e}`);
    assert.equal(calls.length, 0, 'nothing reaches the core after an error');
  }
  return calls;
}

// Values of every JSON-ish kind, the numbers that break u32 conversions, and objects that throw
// when turned into a string or number, or claim a length no one could allocate.
const hostile = [{ toString: 0 }, { valueOf() { throw new Error('valueOf'); } }, Symbol('s'), { length: 1e15 }, { data: { length: 1e15 }, dims: [1, 1e15] }, 10n];
const anything = fc.oneof(fc.anything(), fc.double(), fc.integer(), fc.constantFrom(-1, 0, 1, 2 ** 32, 2 ** 53, NaN, Infinity, -0, '3', null, undefined, ...hostile));

test('fill-mask and feature-extraction hand the core a non-empty text and u32 counts, or reject', async () => {
  await fc.assert(fc.asyncProperty(anything, anything, async (text, topK) => {
    const calls = await settle(async (model) => (await pipeline('fill-mask', model))(text, { topK }));
    for (const [, [t, k]] of calls) assert.ok(isText(t) && isCount(k, 1), JSON.stringify([t, k]));
  }), { numRuns: 2000 });
  await fc.assert(fc.asyncProperty(fc.oneof(anything, fc.array(anything)), anything, async (texts, pooling) => {
    const calls = await settle(async (model) => (await pipeline('feature-extraction', model))(texts, { pooling }));
    for (const [, [list, how]] of calls) assert.ok(list.length > 0 && list.every(isText) && ['mean', 'cls'].includes(how));
  }), { numRuns: 2000 });
});

test('text-generation and question-answering options reach the core as numbers in range, or reject', async () => {
  await fc.assert(fc.asyncProperty(anything, anything, anything, anything, anything, anything, async (prompt, maxNewTokens, temperature, topK, topP, seed) => {
    const calls = await settle(async (model) => (await pipeline('text-generation', model))(prompt, { maxNewTokens, temperature, topK, topP, seed }));
    for (const [, [p, n, t, k, pp, s]] of calls) {
      assert.ok(isText(p) && isCount(n) && isCount(k), JSON.stringify([p, n, k]));
      assert.ok(typeof t === 'number' && Number.isFinite(t) && t >= 0, `temperature ${t}`);
      assert.ok(typeof pp === 'number' && pp > 0 && pp <= 1, `topP ${pp}`);
      assert.ok(s === undefined || isCount(s), `seed ${s}`);
    }
  }), { numRuns: 3000 });
  // The same with every other option valid, so that each bad one is met alone.
  const valid = { prompt: 'the old dog', maxNewTokens: 2, temperature: 0.5, topK: 3, topP: 0.9, seed: 1 };
  await fc.assert(fc.asyncProperty(fc.constantFrom(...Object.keys(valid)), anything, async (option, value) => {
    const { prompt, ...options } = { ...valid, [option]: value };
    const calls = await settle(async (model) => (await pipeline('text-generation', model))(prompt, options));
    for (const [, [p, n, t, k, pp, s]] of calls) {
      assert.ok(isText(p) && isCount(n) && isCount(k) && typeof t === 'number' && Number.isFinite(t) && t >= 0 && typeof pp === 'number' && pp > 0 && pp <= 1 && (s === undefined || isCount(s)), JSON.stringify({ option, value }));
    }
  }), { numRuns: 3000 });
  await fc.assert(fc.asyncProperty(anything, anything, anything, anything, anything, async (question, context, topK, maxSeqLen, docStride) => {
    const calls = await settle(async (model) => (await pipeline('question-answering', model))(question, context, { topK, maxSeqLen, docStride }));
    for (const [, [q, c, k, , len, stride]] of calls) {
      assert.ok(isText(q) && isText(c) && isCount(k, 1) && isCount(len, 1) && (stride === undefined || isCount(stride)));
    }
  }), { numRuns: 2000 });
});

test('forward hands the core ids that fit their shape, or rejects', async () => {
  const ids = fc.oneof(
    anything,
    fc.array(fc.oneof(fc.integer({ min: -2, max: 20 }), fc.double())),
    fc.array(fc.array(fc.integer({ min: 0, max: 20 }), { maxLength: 4 }), { maxLength: 4 }),
    fc.array(fc.array(fc.array(fc.integer({ min: 0, max: 20 }), { maxLength: 3 }), { maxLength: 3 }), { maxLength: 3 }),
    fc.record({ data: fc.array(fc.integer({ min: -1, max: 20 })), dims: fc.array(fc.integer({ min: -1, max: 5 }), { maxLength: 4 }) }),
  );
  await fc.assert(fc.asyncProperty(ids, fc.option(ids), async (inputIds, mask) => {
    const calls = await settle((model) => model.forward({ input_ids: inputIds, attention_mask: mask ?? undefined }));
    for (const [, [flat, flatMask, , , chars, batch, choices, seq]] of calls) {
      assert.ok(flat instanceof Uint32Array && isCount(batch) && isCount(seq) && (choices === undefined || isCount(choices)));
      assert.equal(chars, undefined, 'no char_ids given');
      assert.equal(flat.length, batch * (choices ?? 1) * seq);
      assert.ok(flatMask === undefined || flatMask.length === flat.length);
    }
  }), { numRuns: 3000 });
});
