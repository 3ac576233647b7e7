// "Teach it": fine-tunes a pretrained model on the visitor's labelled examples in a Web Worker
// (fineTuneInWorker), plots the loss and the held-out accuracy as it goes, then classifies the
// visitor's sentences with the result and offers its files. Nothing is sent anywhere.

import { fineTuneInWorker } from '/dist/index.js';
import { el, header, setStatus, showWhereItRuns } from './app.js';

const MODELS = [
  { url: '/models/all-MiniLM-L6-v2/', name: 'all-MiniLM-L6-v2 (BERT, 6 layers × 384, pretrained: 90 MB)' },
  { url: '/models/trained/bert-wikitext/', name: 'Small BERT (2 layers × 128) trained on WikiText-2 (fast, less accurate)' },
  { url: '/models/fixtures/bert/BertModel/', name: 'BERT, tiny — random weights (knows a few dozen words: a quick trial)' },
];
const BATCH = 16;

const $ = (id) => document.getElementById(id);
header();
showWhereItRuns(document.querySelector('main'), 'wasm');
$('model').append(...MODELS.map((m, i) => el('option', { value: String(i) }, m.name)));

/** One CSV line's fields: commas separate them, a quoted field may hold commas and "" for a quote. */
function csvFields(line) {
  const fields = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quoted && c === '"' && line[i + 1] === '"') {
      field += '"';
      i++;
    } else if (c === '"') {
      quoted = !quoted;
    } else if (c === ',' && !quoted) {
      fields.push(field);
      field = '';
    } else {
      field += c;
    }
  }
  fields.push(field);
  return fields;
}

/**
 * The examples of the text box: `text<TAB>label` lines, or CSV `text,label` (the label last; a
 * first line whose label is "label" is a header). Returns {examples, problems}.
 */
function parseExamples(text) {
  const examples = [];
  const problems = [];
  text.split(/\r?\n/).forEach((line, i) => {
    if (!line.trim()) return;
    const fields = line.includes('\t') ? line.split('\t') : csvFields(line);
    const label = fields.pop().trim();
    const sentence = fields.join(' ').trim();
    if (i === 0 && label.toLowerCase() === 'label') return;
    if (!sentence || !label) problems.push(i + 1);
    else examples.push({ text: sentence, label });
  });
  return { examples, problems };
}

/** Checks the examples as typed; enables Train when they can train. */
function checkExamples() {
  const { examples, problems } = parseExamples($('examples').value);
  const labels = [...new Set(examples.map((e) => e.label))].sort();
  const ready = examples.length >= 4 && labels.length >= 2 && problems.length === 0;
  const counts = labels.map((l) => `${l} (${examples.filter((e) => e.label === l).length})`).join(', ');
  const message = problems.length
    ? `Line${problems.length > 1 ? 's' : ''} ${problems.slice(0, 5).join(', ')}${problems.length > 5 ? '…' : ''}: each line is a text, then a tab or a comma, then its label.`
    : examples.length === 0 ? 'Type or paste examples, open a file, or use the movie reviews.'
      : labels.length < 2 ? `${examples.length} examples, all labelled ${labels[0]}: give at least two labels.`
        : examples.length < 4 ? 'Give at least 4 examples.'
          : `${examples.length} examples; labels: ${counts}.`;
  setStatus($('examples-status'), message, problems.length > 0);
  $('train').disabled = !ready || training;
  return ready ? examples : undefined;
}
$('examples').addEventListener('input', checkExamples);
$('sample').addEventListener('click', async () => {
  const text = await (await fetch('data/sst2-sample.tsv')).text();
  $('examples').value = text;
  checkExamples();
});
$('file').addEventListener('change', async () => {
  const file = $('file').files[0];
  if (file) {
    $('examples').value = await file.text();
    checkExamples();
  }
});

/** The loss (left scale) and validation accuracy (0–100%, right scale) so far. */
function plot(losses, accuracies, steps) {
  const [w, h, pad] = [600, 180, 28];
  const top = Math.max(...losses, 0.1);
  const x = (step) => pad + ((w - 2 * pad) * step) / Math.max(steps, 1);
  const line = (points, cls) => el('polyline', { class: cls, points: points.map(([s, y]) => `${x(s).toFixed(1)},${y.toFixed(1)}`).join(' ') });
  const svg = $('plot');
  svg.replaceChildren();
  const ns = (node) => {
    const made = document.createElementNS('http://www.w3.org/2000/svg', node.tagName.toLowerCase());
    for (const a of node.attributes) made.setAttribute(a.name, a.value);
    made.textContent = node.textContent;
    return made;
  };
  const parts = [
    el('line', { x1: pad, y1: h - pad, x2: w - pad, y2: h - pad, class: 'axis' }),
    el('text', { x: 2, y: pad - 6, class: 'tick' }, `loss ${top.toFixed(2)}`),
    el('text', { x: w - pad - 40, y: pad - 6, class: 'tick' }, 'acc. 100%'),
    el('text', { x: pad, y: h - 8, class: 'tick' }, `step 0 … ${steps}`),
    line(losses.map((l, i) => [i + 1, h - pad - ((h - 2 * pad) * l) / top]), 'loss'),
    line(accuracies.map(([step, a]) => [step, h - pad - (h - 2 * pad) * a]), 'accuracy'),
    ...accuracies.map(([step, a]) => el('circle', { cx: x(step), cy: h - pad - (h - 2 * pad) * a, r: 3, class: 'accuracy' })),
  ];
  svg.append(...parts.map(ns));
}

let training = false;
let run;
let classify;
let controller;

$('train').addEventListener('click', async () => {
  const examples = checkExamples();
  if (!examples) return;
  const epochs = Number($('epochs').value);
  const learningRate = Number($('lr').value);
  if (!Number.isInteger(epochs) || epochs < 1 || !(learningRate > 0)) return setStatus($('train-status'), 'Epochs must be a whole number ≥ 1 and the learning rate a number > 0.', true);
  // Every tenth example is held out.
  const train = examples.filter((_, i) => i % 10 !== 9);
  const validation = examples.filter((_, i) => i % 10 === 9);
  training = true;
  $('train').disabled = true;
  $('stop').disabled = false;
  $('try').hidden = true;
  classify?.dispose();
  run?.dispose();
  [classify, run] = [undefined, undefined];
  controller = new AbortController();
  const progress = $('progress');
  progress.hidden = false;
  progress.value = 0;
  $('curves').hidden = false;
  const losses = [];
  const accuracies = [];
  const started = performance.now();
  const model = MODELS[Number($('model').value)];
  const onProgress = (p) => {
    if (p.status === 'progress') setStatus($('train-status'), `Downloading ${p.file}: ${(p.loaded / 1e6).toFixed(1)} MB`);
    if (p.status !== 'training') return;
    losses.push(p.loss);
    if (p.validation) accuracies.push([p.step, p.validation.accuracy]);
    progress.value = (100 * p.step) / p.steps;
    const elapsed = (performance.now() - started) / 1000;
    const left = p.step < p.steps ? ` · about ${Math.ceil((elapsed / p.step) * (p.steps - p.step))} s left` : '';
    const accuracy = accuracies.length ? ` · held-out accuracy ${(100 * accuracies.at(-1)[1]).toFixed(0)}%` : '';
    setStatus($('train-status'), `Step ${p.step} of ${p.steps} · loss ${p.loss.toFixed(3)}${accuracy} · ${p.examplesPerSecond.toFixed(1)} examples/s${left}`);
    plot(losses, accuracies, p.steps);
  };
  setStatus($('train-status'), `Loading ${model.name}…`);
  try {
    run = await fineTuneInWorker('text-classification', model.url, {
      train, validation, epochs, batchSize: BATCH, learningRate, groupByLength: true, device: 'wasm', signal: controller.signal, onProgress,
    });
    const seconds = ((performance.now() - started) / 1000).toFixed(0);
    const accuracy = accuracies.length ? `: ${(100 * accuracies.at(-1)[1]).toFixed(0)}% of the ${validation.length} held-out examples right` : '';
    setStatus($('train-status'), `Trained in ${seconds} s${accuracy}.`);
  } catch (e) {
    if (!e.run) {
      setStatus($('train-status'), e.message, true);
      return;
    }
    run = e.run;
    setStatus($('train-status'), e.name === 'AbortError' ? `Stopped after step ${run.losses.length}: the model as trained so far is below.` : e.message, e.name !== 'AbortError');
  } finally {
    training = false;
    $('stop').disabled = true;
    progress.hidden = true;
    checkExamples();
  }
  setStatus($('run-status'), 'Loading the trained model…');
  $('try').hidden = false;
  classify = await run.pipeline({ device: 'wasm' });
  setStatus($('run-status'), '');
});
$('stop').addEventListener('click', () => controller?.abort());

$('run').addEventListener('click', async () => {
  if (!classify) return;
  try {
    const labels = await classify($('text').value, { topK: null });
    $('labels').replaceChildren(...labels.map((l) => el('tr', {},
      el('td', {}, l.label), el('td', { class: 'mono' }, `${(100 * l.score).toFixed(1)}%`),
      el('td', { style: 'width: 50%' }, el('div', { class: 'bar', style: `width: ${Math.max(1, 100 * l.score)}%` })))));
    setStatus($('run-status'), '');
  } catch (e) {
    setStatus($('run-status'), e.message, true);
  }
});

$('download').addEventListener('click', async () => {
  const files = await run.save();
  // One download a file: the folder transformers and pipeline() load.
  for (const [name, bytes] of Object.entries(files)) {
    const link = el('a', { href: URL.createObjectURL(new Blob([bytes])), download: name });
    link.click();
    URL.revokeObjectURL(link.href);
  }
  setStatus($('run-status'), `Downloaded ${Object.keys(files).join(', ')}: put them in one folder.`);
});

checkExamples();
