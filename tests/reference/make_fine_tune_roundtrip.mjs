// Writes tests/fixtures/roundtrip/fine-tune-bert-classify/: the folder fineTune saves after the
// reference run of tests/fixtures/fine-tune/bert-classify (20 steps in order, dropout 0, the
// settings of its trajectory.json), which check_sesame_checkpoints.py then loads into
// transformers. Needs `npm run build`. Run from the repository root:
//   node tests/reference/make_fine_tune_roundtrip.mjs
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import * as sesame from '../../dist/index.js';

const reference = 'tests/fixtures/fine-tune/bert-classify';
const out = 'tests/fixtures/roundtrip/fine-tune-bert-classify';
const s = JSON.parse(readFileSync(path.join(reference, 'trajectory.json'), 'utf8')).settings;
const run = await sesame.fineTune('text-classification', path.join(reference, 'init'), {
  train: JSON.parse(readFileSync(path.join(reference, 'train.json'), 'utf8')), labels: ['negative', 'positive'], epochs: s.epochs, batchSize: s.batch_size,
  learningRate: s.lr, weightDecay: s.weight_decay, schedule: s.schedule, warmupRatio: 0, shuffle: false, dropout: 0, device: 'wasm',
});
mkdirSync(out, { recursive: true });
for (const [name, bytes] of Object.entries(await run.save())) writeFileSync(path.join(out, name), bytes);
console.log(`${out}: ${run.steps} steps, last loss ${run.losses.at(-1)}`);
run.dispose();
