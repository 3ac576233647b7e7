// The package in Node.js: the wasm module loads from the package's own file, models from local
// folders (paths and file: URLs) and from memory, every pipeline runs on the CPU path against
// the fixtures the browser tests use, the checkpoints `sesame train` wrote load, worker pipelines run on worker_threads, and a process
// with an idle worker pipeline still exits.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import * as sesame from '../../dist/index.js';
import { runCases } from '../shared/pipeline-cases.js';
import { checkCases, checkForwardReport } from '../shared/check-cases.mjs';
import { CLASSIFICATION_CASES, ENCODER_FAMILY_CASES, FORWARD_FIXTURES, LANGUAGE_MODEL_CASES, RECURRENT_CASES } from '../shared/fixture-runs.mjs';
import { compareTensors, elmoMaxError, parseSafetensors } from '../shared/tensors.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const fixture = (dir) => path.join(root, 'tests/fixtures', dir);
const fixtureJson = (dir, name) => JSON.parse(readFileSync(path.join(fixture(dir), name), 'utf8'));
const reference = (dir) => parseSafetensors(new Uint8Array(readFileSync(path.join(fixture(dir), 'reference.safetensors'))));
const attempt = (p) => p.then(() => 'no error', (e) => e.message);

test('the device is the CPU path, with the wasm module read from the package', async () => {
  const info = await sesame.adapterInfo();
  assert.equal(info.name, 'Sesame host (wasm SIMD128)');
  assert.equal(info.kernels, 'host');
  assert.equal(info.threads, 1);
  // Node.js runs the plain build: more threads are an Error saying what to use instead.
  assert.match(await attempt(sesame.getDevice({ threads: 2 })), /threads > 1 needs a browser .*pipelineInWorker\(task, model, \{ workers: n \}\)/);
  assert.match(await attempt(sesame.getDevice({ threads: 1.5 })), /threads must be "auto" or an integer from 1 to 64, got 1\.5/);
  assert.equal((await sesame.getDevice({ threads: 1 })) === (await sesame.getDevice()), true);
});

test('forward matches the transformers fixtures for every architecture, from local folders', async () => {
  for (const dir of FORWARD_FIXTURES) {
    const model = await sesame.loadModel(fixture(dir));
    const out = await model.forward(fixtureJson(dir, 'inputs.json'), { hiddenStates: true, attentions: true });
    model.dispose();
    checkForwardReport(dir, compareTensors(out, reference(dir)));
  }
});

test('every pipeline matches transformers on the fixtures', async () => {
  for (const [dir, task, file] of [...LANGUAGE_MODEL_CASES, ...CLASSIFICATION_CASES, ...ENCODER_FAMILY_CASES, ...RECURRENT_CASES]) {
    const json = fixtureJson(dir, file);
    const cases = Array.isArray(json) ? json : json[task];
    const got = await runCases(sesame, fixture(dir), task, cases);
    assert.ok(got.info.tasks.includes(task), `${dir}: ${got.info.tasks}`);
    checkCases(dir, task, cases, got.out);
  }
});

test('checkpoints sesame train wrote, of every family, load and give the logits transformers computes from them', async () => {
  const trained = ['bert-pretraining', 'openai-gpt-clm', 'roberta-mlm', 'xlm-roberta-xl-mlm', 'distilbert-mlm', 'albert-sop', 'ernie-nsp', 'electra-rtd', 'ernie2-mlm', 'ernie2-caps', 'ernie2-order', 'electra-pretraining-discriminator', 'electra-pretraining-generator'];
  for (const name of trained) {
    // tests/reference/check_sesame_checkpoints.py's ids and transformers' outputs.
    const { input_ids: ids, ...want } = parseSafetensors(new Uint8Array(readFileSync(fixture(`roundtrip/${name}.safetensors`))));
    const model = await sesame.loadModel(fixture(`roundtrip/${name}`));
    const out = await model.forward({ input_ids: [ids.data] });
    model.dispose();
    const report = compareTensors(out, want);
    assert.ok(Object.keys(report).length >= 1, name);
    for (const [output, err] of Object.entries(report)) assert.ok(typeof err === 'number' && err <= 1e-4, `${name} ${output}: ${err}`);
    console.log(`${name}: ${Object.entries(report).map(([n, e]) => `${n} ${e.toExponential(1)}`).join(', ')}`);
  }
});

test('text-generation: greedy ids as transformers, streamed', async () => {
  for (const dir of ['gpt2/GPT2LMHeadModel', 'openai-gpt/OpenAIGPTLMHeadModel']) {
    const want = fixtureJson(dir, 'generation.json');
    const generate = await sesame.pipeline('text-generation', pathToFileURL(fixture(dir)));
    const pieces = [];
    for await (const { text } of generate.stream(want.text, { maxNewTokens: 8 })) pieces.push(text);
    const result = await generate(want.text, { maxNewTokens: 8 });
    generate.dispose();
    assert.deepEqual(result.tokenIds, want.text_ids, dir);
    assert.equal(want.text + pieces.join(''), result.generatedText, `${dir}: the streamed pieces add up to the text`);
  }
});

test('elmo-embeddings matches the ELMo reference', async () => {
  const { sentences } = fixtureJson('elmo/small', 'inputs.json');
  const elmo = await sesame.pipeline('elmo-embeddings', fixture('elmo/small'));
  const results = await elmo(sentences);
  elmo.dispose();
  assert.deepEqual(results.map((r) => r.tokens), sentences);
  const maxErr = elmoMaxError(results, reference('elmo/small'));
  assert.ok(maxErr <= 1e-4, `max abs err ${maxErr}`);
});

const minilm = path.join(process.env.SESAME_CACHE ?? path.join(process.env.HOME, '.cache/sesame'), 'models/all-MiniLM-L6-v2');
test('feature-extraction on the real all-MiniLM-L6-v2 matches sentence-transformers', { skip: process.env.SESAME_DOWNLOADS === 'unavailable' && '!!! SKIPPED: MiniLM could not be downloaded' }, async () => {
  const want = fixtureJson('minilm', 'embeddings.json');
  const embed = await sesame.pipeline('feature-extraction', minilm);
  const out = await embed(want.sentences, { pooling: 'mean', normalize: true });
  embed.dispose();
  assert.deepEqual(out.dims, [want.sentences.length, 384]);
  let max = 0;
  out.tolist().forEach((row, i) => row.forEach((v, j) => { max = Math.max(max, Math.abs(v - want.embeddings[i][j])); }));
  console.log(`MiniLM in Node: max abs error ${max.toExponential(2)} over ${want.sentences.length} sentences`);
  assert.ok(max <= 1e-4, `max abs error ${max}`);
});

test('dtype q8 and q4 quantize MiniLM as it loads, within their cosine targets; a bad dtype is an Error', { skip: process.env.SESAME_DOWNLOADS === 'unavailable' && '!!! SKIPPED: MiniLM could not be downloaded' }, async () => {
  const want = fixtureJson('minilm', 'embeddings.json');
  for (const [dtype, target] of [['q8', 0.998], ['q4', 0.95]]) {
    const embed = await sesame.pipeline('feature-extraction', minilm, { dtype });
    const rows = (await embed(want.sentences, { pooling: 'mean', normalize: true })).tolist();
    embed.dispose();
    // Both sides are normalized: the cosine is the dot product.
    const cosines = rows.map((row, i) => row.reduce((sum, v, j) => sum + v * want.embeddings[i][j], 0));
    console.log(`MiniLM ${dtype} in Node: min cosine ${Math.min(...cosines).toFixed(5)}`);
    cosines.forEach((c, i) => assert.ok(c >= target, `${dtype}: ${want.sentences[i]}: cosine ${c}`));
  }
  await assert.rejects(sesame.pipeline('feature-extraction', fixture('bert/BertModel'), { dtype: 'int8' }), /unknown dtype `int8` \(expected fp32, f16, q8 or q4\)/);
  await assert.rejects(sesame.pipeline('feature-extraction', fixture('bert/BertModel'), { dtype: 8 }), /dtype must be 'fp32', 'f16', 'q8' or 'q4', got number/);
});

test('the trained models that ship in models/ run', async () => {
  for (const name of ['bert-wikitext', 'roberta-wikitext', 'albert-wikitext', 'ernie-wikitext', 'electra-wikitext/generator', 'distilbert-wikitext']) {
    const fill = await sesame.pipeline('fill-mask', path.join(root, 'models', name));
    const candidates = await fill('the city is in the [MASK] of the country .', { topK: 3 });
    fill.dispose();
    assert.equal(candidates.length, 3, name);
  }
  // ELECTRA's discriminator: one probability per token that is not special.
  const detect = await sesame.pipeline('replaced-token-detection', path.join(root, 'models/electra-wikitext/discriminator'));
  const sentence = 'she became one of the most popular songs .';
  const tokens = await detect(sentence);
  detect.dispose();
  assert.deepEqual(tokens.map((t) => t.word), sentence.split(' '));
  assert.ok(tokens.every((t) => t.score > 0 && t.score < 1 && t.replaced === t.score > 0.5 && sentence.slice(t.start, t.end) === t.word), JSON.stringify(tokens));
  assert.match(await attempt(sesame.pipeline('replaced-token-detection', path.join(root, 'models/electra-wikitext/generator'))), /replaced-token-detection/);
  const generate = await sesame.pipeline('text-generation', path.join(root, 'models/baby-gpt-shakespeare'));
  const text = await generate('ROMEO:', { maxNewTokens: 20 });
  assert.equal(text.newTokens, 20);
  // Its window is 64 characters, and it knows 65 characters.
  const long = 'ROMEO: '.repeat(20);
  assert.match(await attempt(generate(long)), /the prompt is 140 tokens, longer than the model's 64 positions: shorten it, or have its start cut/);
  const cut = await generate(long, { maxNewTokens: 5, truncation: true });
  assert.equal(cut.promptTokensCut, 140 - 64);
  assert.ok(cut.generatedText.startsWith(long.slice(140 - 64)), cut.generatedText);
  assert.match(await attempt(generate('héllo ✓')), /the text holds "é", "✓", which this model's vocabulary of 65 lacks/);
  generate.dispose();
  const elmo = await sesame.pipeline('elmo-embeddings', path.join(root, 'models/elmo-wikitext'));
  const [bank] = await elmo(['the river bank']);
  elmo.dispose();
  assert.deepEqual(bank.tokens, ['the', 'river', 'bank']);
  // The LSTM lineage: ULMFiT's classifier, CVT's tagger, CoVe's vectors.
  const sentiment = await sesame.pipeline('text-classification', path.join(root, 'models/awd-lstm-sst2'));
  assert.equal((await sentiment('a gripping , beautifully acted film .'))[0].label, 'positive');
  assert.equal((await sentiment('a dull , lifeless mess .'))[0].label, 'negative');
  // An array of texts, as transformers.js takes it: each text's best label, or each one's list.
  const texts = ['a gripping , beautifully acted film .', 'a dull , lifeless mess .'];
  const best = await sentiment(texts);
  assert.deepEqual(best.map((l) => l.label), ['positive', 'negative']);
  assert.deepEqual(best[1], (await sentiment(texts[1]))[0]);
  const all = await sentiment(texts, { topK: null });
  assert.deepEqual(all.map((labels) => labels.length), [2, 2]);
  assert.deepEqual(all[0][0], best[0]);
  assert.match(await attempt(sentiment([])), /the texts must be a non-empty string\[\]/);
  assert.match(await attempt(sentiment(['fine', 3])), /the texts\[1\] must be a string, got number/);
  assert.match(await attempt(sentiment(texts, { textPair: ['one'] })), /textPair holds 1 texts for 2 texts/);
  assert.match(await attempt(sentiment(7)), /text-classification takes a text or a non-empty string\[\], got 7/);
  sentiment.dispose();
  const tagger = await sesame.pipeline('token-classification', path.join(root, 'models/cvt-pos-wikitext'));
  const tags = await tagger('the river flowed past the old mill .', { ignoreLabels: [] });
  tagger.dispose();
  assert.deepEqual(tags.map((t) => t.word), ['the', 'river', 'flowed', 'past', 'the', 'old', 'mill', '.']);
  assert.equal(tags[1].entity, 'NN');
  const cove = await sesame.pipeline('feature-extraction', path.join(root, 'models/cove-gettext'));
  const vectors = await cove(['file not found', 'cannot open the directory'], { pooling: 'mean', normalize: true });
  cove.dispose();
  assert.deepEqual(vectors.dims, [2, 256]);
});

test('files load from memory as from a folder; a missing folder or file is a clear Error', async () => {
  const dir = fixture('bert/BertForMaskedLM');
  const files = Object.fromEntries(['config.json', 'model.safetensors', 'tokenizer.json'].map((f) => [f, readFileSync(path.join(dir, f))]));
  const [fromMemory, fromFolder] = await Promise.all([sesame.pipeline('fill-mask', files), sesame.pipeline('fill-mask', dir)]);
  assert.deepEqual(await fromMemory('the [MASK] sat'), await fromFolder('the [MASK] sat'));
  fromMemory.dispose();
  fromFolder.dispose();
  assert.match(await attempt(sesame.pipeline('fill-mask', path.join(root, 'no-such-folder'))), /the model folder .*no-such-folder cannot be read: it does not exist/);
  assert.match(await attempt(sesame.pipeline('fill-mask', path.join(dir, 'config.json'))), /config\.json is not a folder/);
  assert.match(await attempt(sesame.pipeline('fill-mask', fixture('elmo/small'))), /the model folder .*elmo\/small has no config\.json/);
  assert.match(await attempt(sesame.pipeline('fill-mask', dir, { integrity: { 'config.json': '00' } })), /config\.json failed its integrity check/);
});

test('worker pipelines run on worker_threads: a pool splits a batch, tokens stream back', async () => {
  const texts = ['a river bank', 'the bank', 'money in the bank'];
  const single = await sesame.pipeline('feature-extraction', fixture('bert/BertModel'));
  const expected = await single(texts);
  single.dispose();
  const pool = await sesame.pipelineInWorker('feature-extraction', fixture('bert/BertModel'), { workers: 2 });
  const split = await pool(texts);
  pool.dispose();
  assert.deepEqual(split.dims, expected.dims);
  assert.ok(split.data.every((v, i) => Math.abs(v - expected.data[i]) <= 1e-6));

  const generate = await sesame.pipelineInWorker('text-generation', fixture('gpt2/GPT2LMHeadModel'));
  const tokens = [];
  const result = await generate('the old dog', { maxNewTokens: 5, onToken: (text, token) => tokens.push(token) });
  generate.dispose();
  assert.deepEqual(tokens, result.tokenIds.slice(-5));
  assert.match(await attempt(generate('the old dog')), /the worker pipeline was disposed/);
});

test('a process whose worker pipeline is idle and never disposed still exits', () => {
  const script = `import { pipelineInWorker } from ${JSON.stringify(pathToFileURL(path.join(root, 'dist/index.js')).href)};
    const generate = await pipelineInWorker('text-generation', ${JSON.stringify(fixture('gpt2/GPT2LMHeadModel'))});
    console.log((await generate('the old dog', { maxNewTokens: 2 })).newTokens);`;
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { timeout: 60_000, encoding: 'utf8' });
  assert.equal(run.signal, null, 'the process did not exit by itself within 60 s');
  assert.equal(run.status, 0, run.stderr);
  assert.equal(run.stdout.trim(), '2');
});
