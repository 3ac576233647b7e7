// fineTune in Node.js (the training wasm module, the CPU path): each task learns, the run
// equals `sesame train` on the same data and settings step for step, the saved folder runs
// in pipeline(), an abort and a loss that is not finite keep the work, bad input is refused.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import * as sesame from '../../dist/index.js';
import { compareTensors, parseSafetensors } from '../shared/tensors.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
// A tiny BERT without a head (fineTune adds one) and its 99-word vocabulary.
const bert = path.join(root, 'tests/fixtures/bert/BertModel');

const positive = ['the sun shone', 'children played with ball', 'she was happy', 'the bird sang', 'warm fire kept us happy', 'green field in morning', 'red ball in park', 'they walked home'];
const negative = ['cold rain fell', 'dark night', 'the old mill was quiet', 'wind blew through leaves', 'cold dark road', 'rain fell on roof', 'long cold night', 'the town slept'];
/** 16 sentences, alternating labels. */
const sentiment = positive.flatMap((p, i) => [{ text: p, label: 'happy' }, { text: negative[i], label: 'sad' }]);

const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;

test('text-classification learns the labels, reports each step and epoch, and its folder runs in pipeline()', async () => {
  const events = [];
  const run = await sesame.fineTune('text-classification', bert, {
    train: sentiment, validation: sentiment.slice(0, 8), epochs: 12, batchSize: 4, learningRate: 1e-2, dropout: 0, onProgress: (p) => events.push(p),
  });
  assert.deepEqual(run.labels, ['happy', 'sad'], 'the sorted labels of train');
  assert.equal(run.steps, 48, '12 epochs of 4 batches');
  assert.equal(run.losses.length, 48);
  const steps = events.filter((e) => e.status === 'training');
  assert.deepEqual(steps.map((e) => e.step), Array.from({ length: 48 }, (_, i) => i + 1));
  assert.ok(steps.every((e) => Number.isFinite(e.loss) && e.examplesPerSecond > 0 && e.learningRate >= 0));
  assert.ok(Math.abs(steps[0].learningRate - 1e-2 / 5) < 1e-9, 'a linear warmup over a tenth of the steps (5)');
  assert.deepEqual(steps.filter((e) => e.validation).map((e) => e.epoch), Array.from({ length: 12 }, (_, i) => i + 1), 'validated after each epoch');
  assert.ok(mean(run.losses.slice(-4)) < 0.5 * mean(run.losses.slice(0, 4)), `the loss falls: ${run.losses.map((l) => l.toFixed(3))}`);
  const scores = await run.evaluate(sentiment);
  assert.equal(scores.accuracy, 1, JSON.stringify(scores));
  assert.equal(scores.f1, 1);

  const files = await run.save();
  const config = JSON.parse(new TextDecoder().decode(files['config.json']));
  assert.deepEqual([config.architectures, config.id2label, config.label2id], [['BertForSequenceClassification'], { 0: 'happy', 1: 'sad' }, { happy: 0, sad: 1 }]);
  assert.ok(files['model.safetensors'].length > 1000 && files['tokenizer.json']);
  const classify = await run.pipeline();
  assert.equal((await classify('the sun shone'))[0].label, 'happy');
  assert.equal((await classify('cold rain fell'))[0].label, 'sad');
  classify.dispose();
  run.dispose();
});

/** tests/reference/make_fine_tune_fixtures.py's run in transformers + torch.optim.AdamW. */
const reference = path.join(root, 'tests/fixtures/fine-tune/bert-classify');

/** Options of fineTune for the reference run's settings. */
export function referenceRun() {
  const trajectory = JSON.parse(readFileSync(path.join(reference, 'trajectory.json'), 'utf8'));
  const s = trajectory.settings;
  const options = {
    train: JSON.parse(readFileSync(path.join(reference, 'train.json'), 'utf8')), labels: ['negative', 'positive'],
    epochs: s.epochs, batchSize: s.batch_size, learningRate: s.lr, weightDecay: s.weight_decay, schedule: s.schedule, warmupRatio: 0, shuffle: false, dropout: 0,
  };
  return { options, losses: trajectory.losses };
}

test('with the order, dropout and schedule fixed, the losses are those of transformers + torch AdamW; the saved folder gives transformers\' logits', async () => {
  const { options, losses } = referenceRun();
  const run = await sesame.fineTune('text-classification', path.join(reference, 'init'), { ...options, device: 'wasm' });
  assert.equal(run.losses.length, 20);
  run.losses.forEach((loss, i) => {
    assert.ok(Math.abs(loss - losses[i]) <= 1e-4 * Math.abs(losses[i]), `step ${i}: fineTune ${loss}, PyTorch ${losses[i]}`);
  });
  // The round trip: transformers loaded this run's folder (tests/fixtures/roundtrip/
  // fine-tune-bert-classify, tests/reference/make_fine_tune_roundtrip.mjs), every weight found
  // and its id2label checked, and recorded its logits (check_sesame_checkpoints.py); the folder
  // saved now gives the same.
  const files = await run.save();
  const config = JSON.parse(new TextDecoder().decode(files['config.json']));
  assert.deepEqual(config.id2label, { 0: 'negative', 1: 'positive' });
  const { input_ids: ids, ...want } = parseSafetensors(new Uint8Array(readFileSync(path.join(root, 'tests/fixtures/roundtrip/fine-tune-bert-classify.safetensors'))));
  const model = await sesame.loadModel(files);
  const report = compareTensors(await model.forward({ input_ids: [ids.data] }), want);
  model.dispose();
  assert.deepEqual(Object.keys(report), ['logits']);
  assert.ok(report.logits <= 1e-4, `logits against transformers': ${report.logits}`);
  run.dispose();
});

test('a loaded model, or a pipeline, trains a copy of the files it was loaded from and stays as it was', async () => {
  const { options, losses } = referenceRun();
  const init = path.join(reference, 'init');
  const classify = await sesame.pipeline('text-classification', init);
  const before = await classify('a film of quiet grace');
  const fromPipeline = await sesame.fineTune('text-classification', classify, { ...options, device: 'wasm' });
  const fromModel = await sesame.fineTuneInWorker('text-classification', classify.model, { ...options, epochs: options.epochs / 4, device: 'wasm' });
  fromPipeline.losses.forEach((loss, i) => assert.ok(Math.abs(loss - losses[i]) <= 1e-4 * Math.abs(losses[i]), `step ${i}: ${loss}, PyTorch ${losses[i]}`));
  assert.deepEqual(fromModel.losses, fromPipeline.losses.slice(0, fromModel.losses.length), 'in a worker, the same run');
  assert.deepEqual(await classify('a film of quiet grace'), before, 'the loaded model is not trained');
  // A model loaded from bytes in memory keeps none of them: the error says to give the files.
  const files = await sesame.loadModelFiles(init);
  const fromBytes = await sesame.loadModel(files);
  await assert.rejects(sesame.fineTune('text-classification', fromBytes, options), /loaded from bytes in memory, which it does not keep .*: give fineTune the files/);
  fromBytes.dispose();
  fromPipeline.dispose();
  fromModel.dispose();
  classify.dispose();
});

test('a run equals `sesame train` on the same data and settings, step for step', async () => {
  const binary = path.join(root, 'target/debug/sesame');
  assert.ok(existsSync(binary), `${binary} is built by cargo test (scripts/test.sh runs it first)`);
  const dir = mkdtempSync(path.join(tmpdir(), 'sesame-fine-tune-'));
  try {
    const options = { epochs: 2, batchSize: 4, learningRate: 1e-3, weightDecay: 0.01, schedule: 'linear', warmupRatio: 0.25, seed: 7 };
    const run = await sesame.fineTune('text-classification', bert, { train: sentiment, ...options });
    // The same run natively: the labels as ids, the same flags.
    const tsv = path.join(dir, 'train.tsv');
    writeFileSync(tsv, sentiment.map((e) => `${e.text}\t${e.label === 'happy' ? 0 : 1}`).join('\n'));
    const log = path.join(dir, 'log.jsonl');
    execFileSync(binary, ['--adapter', 'host', 'train', '--objective', 'classify', '--model-init', bert, '--data', tsv, '--out', path.join(dir, 'out'),
      '--epochs', '2', '--batch-size', '4', '--lr', '1e-3', '--weight-decay', '0.01', '--schedule', 'linear', '--warmup-ratio', '0.25', '--seed', '7',
      '--labels', 'happy,sad', '--log', log], { stdio: 'pipe' });
    const native = readFileSync(log, 'utf8').trim().split('\n').map((l) => JSON.parse(l)).filter((l) => l.loss !== undefined);
    assert.equal(native.length, run.losses.length);
    native.forEach((line, i) => {
      const relative = Math.abs(line.loss - run.losses[i]) / Math.abs(line.loss);
      assert.ok(relative < 1e-4, `step ${i}: sesame train ${line.loss}, fineTune ${run.losses[i]}`);
    });
    const saved = JSON.parse(readFileSync(path.join(dir, 'out/config.json'), 'utf8'));
    assert.deepEqual(saved.id2label, { 0: 'happy', 1: 'sad' }, '--labels names the classes natively too');
    run.dispose();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('every family that trains natively fine-tunes a classifier: encoders, GPT-2 and GPT (with their LM term), an AWD-LSTM (ULMFiT\'s classifier)', async () => {
  const fixture = (dir) => path.join(root, 'tests/fixtures', dir);
  const three = sentiment.map((e, i) => ({ ...e, label: ['happy', 'sad', 'calm'][i % 3] }));
  const runs = [
    ...['roberta/RobertaModel', 'xlm-roberta/XLMRobertaModel', 'distilbert/DistilBertModel', 'albert/AlbertModel', 'ernie/ErnieModel', 'electra/ElectraModel'].map((dir) => [dir, sentiment]),
    // Heads of 3 classes in the checkpoint (the native training fixtures' init folders).
    ['train/gpt2-classify/init', three], ['train/openai-gpt-classify/init', three],
    // A language model: ULMFiT's classifier is made on it.
    ['train/awd-lstm/init', sentiment],
  ];
  for (const [dir, train] of runs) {
    const run = await sesame.fineTune('text-classification', fixture(dir), { train, epochs: 1, batchSize: 8 });
    assert.ok(run.losses.length === 2 && run.losses.every(Number.isFinite), `${dir}: ${run.losses}`);
    const classify = await run.pipeline();
    assert.ok(run.labels.includes((await classify('the sun shone'))[0].label), dir);
    classify.dispose();
    run.dispose();
  }
});

test('text pairs and token-classification train too', async () => {
  const pairs = sentiment.map((e, i) => ({ text: e.text, textPair: sentiment[(i + 3) % 16].text, label: e.label }));
  const pairRun = await sesame.fineTune('text-classification', bert, { train: pairs, epochs: 1, batchSize: 8 });
  assert.equal(pairRun.losses.length, 2);
  assert.ok(pairRun.losses.every(Number.isFinite));
  pairRun.dispose();

  const sentences = [['the', 'cat', 'sat', 'on', 'the', 'mat'], ['a', 'dog', 'ran', 'to', 'the', 'park'], ['the', 'bird', 'sang'], ['a', 'cat', 'saw', 'the', 'dog']];
  const animals = new Set(['cat', 'dog', 'bird']);
  const tagged = sentences.map((tokens) => ({ tokens, labels: tokens.map((t) => (animals.has(t) ? 'B-ANIMAL' : 'O')) }));
  const run = await sesame.fineTune('token-classification', bert, { train: tagged, epochs: 30, batchSize: 4, learningRate: 1e-2, dropout: 0 });
  assert.deepEqual(run.labels, ['B-ANIMAL', 'O']);
  assert.ok(mean(run.losses.slice(-3)) < 0.3 * mean(run.losses.slice(0, 3)), `the loss falls: ${run.losses.map((l) => l.toFixed(3))}`);
  assert.ok((await run.evaluate(tagged)).accuracy > 0.9);
  const tag = await run.pipeline();
  const entities = await tag('the dog sat on the mat');
  assert.deepEqual(entities.map((e) => [e.word, e.entity]), [['dog', 'B-ANIMAL']]);
  tag.dispose();
  run.dispose();
});

test('fill-mask continues masked-LM training on unlabelled text, and the folder fills masks', async () => {
  const texts = ['the cat sat on the mat. the dog ran to the park.', 'the bird sang in the morning. the sun shone over the hill.', 'children played with ball while parents watched from bench.'];
  const run = await sesame.fineTune('fill-mask', path.join(root, 'tests/fixtures/bert/BertForMaskedLM'), { train: texts, epochs: 60, batchSize: 2, learningRate: 3e-3, schedule: 'constant', dropout: 0 });
  assert.deepEqual(run.labels, []);
  assert.equal(run.steps, 60, 'an epoch: the batches of full rows that hold the text (one here)');
  assert.ok(mean(run.losses.slice(-10)) < 0.6 * mean(run.losses.slice(0, 5)), `the loss falls: ${run.losses.map((l) => l.toFixed(2))}`);
  const { loss, perplexity } = await run.evaluate(texts);
  assert.ok(Math.abs(perplexity - Math.exp(loss)) < 1e-3 * perplexity, `${loss} ${perplexity}`);
  const files = await run.save();
  assert.notDeepEqual(files['model.safetensors'], readFileSync(path.join(root, 'tests/fixtures/bert/BertForMaskedLM/model.safetensors')));
  const fill = await run.pipeline();
  assert.equal((await fill('the dog ran to the [MASK].')).length, 5, 'the trained folder fills masks');
  fill.dispose();
  run.dispose();
  await assert.rejects(sesame.fineTune('fill-mask', bert, { train: texts, labels: ['a'] }), /fill-mask learns from unlabelled text: it takes no labels/);
});

test('an abort and a loss that is not finite stop between steps and keep the model trained so far', async () => {
  const controller = new AbortController();
  const error = await sesame.fineTune('text-classification', bert, {
    train: sentiment, epochs: 2, batchSize: 4, signal: controller.signal, onProgress: (p) => { if (p.step === 3) controller.abort(); },
  }).then(() => assert.fail('the run was aborted'), (e) => e);
  assert.equal(error.name, 'AbortError');
  assert.match(error.message, /after 3 of 8 steps/);
  assert.equal(error.run.losses.length, 3);
  assert.ok((await error.run.save())['model.safetensors']);
  error.run.dispose();

  // A callback that throws stops the run too, and keeps it.
  const thrown = await sesame.fineTune('text-classification', bert, { train: sentiment, epochs: 1, batchSize: 4, onProgress: (p) => { if (p.status === 'training') throw new Error('the page failed'); } })
    .then(() => assert.fail('onProgress threw'), (e) => e);
  assert.equal(thrown.message, 'the page failed');
  assert.equal(thrown.run.losses.length, 1);
  thrown.run.dispose();

  const overflow = await sesame.fineTune('text-classification', bert, { train: sentiment, epochs: 4, batchSize: 4, learningRate: 1e30, warmupRatio: 0 })
    .then(() => assert.fail('a learning rate of 1e30 overflows'), (e) => e);
  assert.match(overflow.message, /the loss became (NaN|inf|-inf) at step (\d+); the weights are those after step/);
  const failedAt = Number(overflow.message.match(/at step (\d+)/)[1]);
  assert.equal(overflow.run.losses.length, failedAt, 'the steps before the failure were kept');
  overflow.run.dispose();
});

/** The tensors of a safetensors file, by name, as Float32Arrays. */
function tensors(bytes) {
  const view = Buffer.from(bytes);
  const headerLength = Number(view.readBigUInt64LE(0));
  const header = JSON.parse(view.subarray(8, 8 + headerLength).toString('utf8'));
  const out = {};
  for (const [name, t] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const [start, end] = t.data_offsets.map((o) => 8 + headerLength + o);
    out[name] = new Float32Array(view.buffer.slice(view.byteOffset + start, view.byteOffset + end));
  }
  return out;
}

test('freeze keeps the base model (or its embeddings and bottom layers) as it was', async () => {
  const initial = tensors(readFileSync(path.join(reference, 'init/model.safetensors')));
  const { options } = referenceRun();
  const changed = async (freeze) => {
    const run = await sesame.fineTune('text-classification', path.join(reference, 'init'), { ...options, epochs: 1, freeze });
    const trained = tensors((await run.save())['model.safetensors']);
    run.dispose();
    return Object.keys(initial).filter((name) => initial[name].some((v, i) => v !== trained[name][i])).sort();
  };
  assert.deepEqual(await changed('encoder'), ['classifier.bias', 'classifier.weight'], 'only the head learns');
  const layer1 = await changed(1);
  assert.ok(layer1.every((name) => !name.includes('embeddings') && !name.includes('layer.0.')), layer1.join(', '));
  assert.ok(layer1.some((name) => name.includes('layer.1.')) && layer1.includes('bert.pooler.dense.weight'), layer1.join(', '));
  assert.ok((await changed('none')).some((name) => name.includes('embeddings')), 'without freeze every weight learns');
});

test('fineTuneInWorker trains in a worker thread: progress, an abort that keeps the run, evaluate, save and a pipeline in a worker', async () => {
  const events = [];
  const run = await sesame.fineTuneInWorker('text-classification', bert, {
    train: sentiment, epochs: 12, batchSize: 4, learningRate: 1e-2, dropout: 0, onProgress: (p) => events.push(p),
  });
  const inPage = await sesame.fineTune('text-classification', bert, { train: sentiment, epochs: 12, batchSize: 4, learningRate: 1e-2, dropout: 0 });
  assert.deepEqual(run.losses, inPage.losses, 'the same run as on the page');
  assert.deepEqual([run.labels, run.steps], [['happy', 'sad'], 48]);
  assert.equal(events.filter((e) => e.status === 'training').length, 48);
  assert.equal((await run.evaluate(sentiment)).accuracy, 1);
  const files = await run.save();
  assert.deepEqual(files['model.safetensors'], (await inPage.save())['model.safetensors']);
  const classify = await run.pipeline();
  assert.equal((await classify('the sun shone'))[0].label, 'happy');
  classify.dispose();
  run.dispose();
  inPage.dispose();
  await assert.rejects(run.evaluate(sentiment), /disposed/);

  const controller = new AbortController();
  const error = await sesame.fineTuneInWorker('text-classification', bert, {
    train: sentiment, epochs: 4, batchSize: 4, signal: controller.signal, onProgress: (p) => { if (p.step === 2) controller.abort(); },
  }).then(() => assert.fail('aborted'), (e) => e);
  assert.equal(error.name, 'AbortError');
  assert.ok(error.run.losses.length >= 2 && error.run.losses.length < 16, `stopped early: ${error.run.losses.length} steps`);
  assert.deepEqual(error.run.labels, ['happy', 'sad']);
  assert.ok((await error.run.save())['model.safetensors']);
  error.run.dispose();
  await assert.rejects(sesame.fineTuneInWorker('text-classification', bert, { train: [] }), /train has no examples/);
});

test('bad input is refused with an error that names it, before anything trains', async () => {
  const refused = async (task, options, pattern, model = bert) => {
    await assert.rejects(sesame.fineTune(task, model, options), pattern);
  };
  await refused('text-classification', { train: [] }, /train has no examples/);
  await refused('text-classification', { train: 'good\t1' }, /train must be an array of examples/);
  await refused('text-classification', { train: sentiment, labels: ['happy'] }, /train\[1\] has the label "sad", which is not one of labels \("happy"\)/);
  await refused('text-classification', { train: sentiment, learningRate: NaN }, /learningRate must be a finite number/);
  await refused('text-classification', { train: sentiment, learningRate: -1e-3 }, /learningRate must be a finite number from 0/);
  await refused('text-classification', { train: [{ text: 'a', label: 'x' }, { text: 'b', textPair: 'c', label: 'y' }] }, /train\[1\] has a textPair, and train\[0\] has none/);
  await refused('text-classification', { train: [{ text: ' ', label: 'x' }] }, /train\[0\]\.text is empty/);
  await refused('text-classification', { train: sentiment, validation: [{ text: 'good', label: 'great' }] }, /validation\[0\] has the label "great"/);
  await refused('text-classification', { train: sentiment, epochs: 0 }, /epochs must be a finite number > 0/);
  await refused('text-classification', { train: sentiment, maxLength: 1000 }, /maxLength 1000 exceeds the model's 40 positions/);
  await refused('text-classification', { train: sentiment, labels: ['happy', 'sad', 'calm'], batchSize: 10_000_000 },
    /micro-batches of batchSize 10000000 × maxLength \d+ keep .* of activations for the backward pass, over the host memory budget of 2147483648 bytes \(2\.0 GiB\): batchSize \d+ fits$/);
  await refused('token-classification', { train: [{ tokens: ['a', 'cat'], labels: ['O'] }] }, /train\[0\]\.labels must be an array with a label for each of its 2 tokens/);
  await refused('token-classification', { train: [{ tokens: ['a cat'], labels: ['O'] }] }, /holds white space/);
  await refused('summarization', { train: sentiment }, /fineTune does not train task "summarization"/);
  const elmo = await sesame.loadElmo(path.join(root, 'tests/fixtures/elmo/small'));
  await refused('text-classification', { train: sentiment }, /fineTune does not train ELMo models \(sesame train trains them natively\)/, elmo);
  elmo.dispose();
  await refused('text-classification', { train: sentiment, freeze: 'heads' }, /freeze must be "none", "encoder" or a number of bottom layers, got "heads"/);
  await refused('text-classification', { train: sentiment, freeze: 'encoder' }, /--freeze|freeze encoder/, path.join(root, 'tests/fixtures/train/awd-lstm/init'));
  // A model that cannot train this task: a GPT-2 language model has no token-classification head.
  await assert.rejects(sesame.fineTune('token-classification', path.join(root, 'tests/fixtures/gpt2/GPT2LMHeadModel'), { train: [{ tokens: ['a'], labels: ['O'] }] }), /token-classify/);
});
