// www/data/sst2-sample.tsv: the "Teach it" demo's bundled training set — 500 SST-2 training
// sentences (250 positive, 250 negative) of at least 8 words (GLUE's SST-2 training set also
// holds the treebank's short phrases), drawn with a fixed seed from ../shared/data/sst2/train.tsv.
// Run from the repository root: node scripts/sst2-sample.mjs
import { readFileSync, writeFileSync } from 'node:fs';

const rows = readFileSync('../shared/data/sst2/train.tsv', 'utf8').trim().split('\n').slice(1)
  .map((line) => line.split('\t'))
  .filter(([sentence]) => sentence.trim().split(/\s+/).length >= 8)
  .map(([sentence, label]) => [sentence.trim(), label.trim()]);
// mulberry32: a small seeded generator, so the sample is the same on every machine.
let seed = 20261129;
const random = () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const shuffled = rows.map((row) => [random(), row]).sort((a, b) => a[0] - b[0]).map(([, row]) => row);
const pick = (label) => shuffled.filter((row) => row[1] === label).slice(0, 250);
const sample = [...pick('0'), ...pick('1')].map((row) => [random(), row]).sort((a, b) => a[0] - b[0]).map(([, row]) => row);
writeFileSync('www/data/sst2-sample.tsv', `sentence\tlabel\n${sample.map(([s, l]) => `${s}\t${l === '1' ? 'positive' : 'negative'}`).join('\n')}\n`);
console.log(`${sample.length} sentences of ${rows.length} long enough`);
