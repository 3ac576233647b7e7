// The demo site, used as a visitor would: each page loads its default model (in a Web
// Worker), takes input, shows a result, and logs no console error. Screenshots go to
// test-artifacts/.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { artifacts, newPage, root, start } from './harness.mjs';
import { PAGES, visitPage } from './visit-pages.mjs';
import { startMockHub } from '../shared/mock-hub.mjs';

let h;
before(async () => { h = await start(); });
after(async () => { await h?.close(); });

/** Opens a demo page and waits until its model is loaded. */
async function open(name) {
  const { page, checkErrors } = await newPage(h.browser, `${h.base}/${name}`);
  await page.waitForFunction(() => /^Ready|error/i.test(document.getElementById('status')?.textContent ?? ''), null, { timeout: 120_000 });
  assert.match(await page.textContent('#status'), /^Ready/);
  return { page, checkErrors, shot: (label) => page.screenshot({ path: path.join(artifacts, `${label}.png`), fullPage: true }) };
}

test('overview names the adapter', async () => {
  const { page, checkErrors } = await newPage(h.browser, `${h.base}/index.html`);
  await page.waitForFunction(() => !/checking/.test(document.getElementById('adapter').textContent));
  assert.match(await page.textContent('#adapter'), /kernels/);
  await page.screenshot({ path: path.join(artifacts, 'index.png'), fullPage: true });
  checkErrors();
});

test('fill-mask page fills the blank with the trained BERT', async () => {
  const { page, checkErrors, shot } = await open('fill-mask.html');
  await page.waitForFunction(() => /^Ready: BertForPreTraining, 2 layers × 128/.test(document.getElementById('status').textContent), null, { timeout: 60_000 });
  assert.equal(await page.isVisible('#random-warning'), false, 'the WikiText-2 BERT is trained');
  assert.equal(await page.inputValue('#text'), 'she became one of [MASK] most popular singers .', 'its own example');
  await page.fill('#text', 'the dog ran to the [MASK] .');
  await page.click('#run');
  await page.waitForSelector('#candidates tr');
  assert.equal(await page.locator('#candidates tr').count(), 5);
  assert.match(await page.textContent('#candidates tr:first-child'), /the dog ran to the \w+/);
  await shot('fill-mask');
  // A failed run shows its error alone, not under the last run's candidates.
  await page.fill('#text', 'no blank here');
  await page.click('#run');
  await page.waitForFunction(() => document.getElementById('run-status').classList.contains('error'), null, { timeout: 30_000 });
  assert.match(await page.textContent('#run-status'), /\[MASK\]/);
  assert.equal(await page.isVisible('#result'), false, 'the previous result is hidden under the error');
  // An over-long text: the model's limit, in terms the page offers (no CLI flag or option).
  await page.fill('#text', `${'the dog ran . '.repeat(200)}[MASK] .`);
  await page.click('#run');
  await page.waitForFunction(() => /positions/.test(document.getElementById('run-status').textContent), null, { timeout: 30_000 });
  assert.match(await page.textContent('#run-status'), /the text is \d+ tokens, longer than the model's \d+ positions: shorten it$/);
  await page.fill('#text', 'the dog ran to the [MASK] .');
  // A model that fails to load leaves the page with no model: Run waits, nothing hangs, and
  // loading a good one again works.
  await page.selectOption('#model', 'custom');
  await page.fill('#model-url', `${new URL(page.url()).origin}/models/no-such-model/`);
  await page.click('#load');
  await page.waitForFunction(() => /config\.json/.test(document.getElementById('status').textContent), null, { timeout: 30_000 });
  assert.equal(await page.isDisabled('#run'), true, 'no model, no run');
  await page.selectOption('#model', '0');
  await page.click('#load');
  await page.waitForFunction(() => /^Ready: BertForPreTraining/.test(document.getElementById('status').textContent), null, { timeout: 60_000 });
  await page.click('#run');
  await page.waitForFunction(() => /the dog ran to the \w+/.test(document.querySelector('#candidates tr')?.textContent ?? ''), null, { timeout: 30_000 });
  checkErrors();
});

test('the picker loads a model by hub id, from the cache when offline, and says when the hub cannot be reached', async () => {
  // The public hub's address, answered by the mock hub: its redirects to another origin, its
  // 404s for optional files. The context's route sees the requests of the page's workers too.
  const hub = await startMockHub({ 'sesame-test/bert-wikitext': path.join(root, 'models', 'bert-wikitext') });
  const context = await h.browser.newContext();
  let online = true;
  await context.route('https://huggingface.co/**', async (route) => {
    if (!online) return route.abort('internetdisconnected');
    const answer = await route.fetch({ url: route.request().url().replace('https://huggingface.co', hub.url), maxRedirects: 0 });
    await route.fulfill({ response: answer });
  });
  const { page, checkErrors } = await newPage(context, `${h.base}/fill-mask.html`);
  try {
    await page.waitForFunction(() => /^Ready/.test(document.getElementById('status').textContent), null, { timeout: 60_000 });
    const loadById = async (id, expected) => {
      await page.selectOption('#model', 'custom');
      await page.fill('#model-url', id);
      await page.click('#load');
      await page.waitForFunction((re) => new RegExp(re).test(document.getElementById('status').textContent), expected.source, { timeout: 60_000 });
    };
    await loadById('sesame-test/bert-wikitext', /^Ready: BertForPreTraining, 2 layers × 128/);
    assert.ok(hub.requests.some((r) => r.url === '/sesame-test/bert-wikitext/resolve/main/model.safetensors'), 'the weights came from the hub');
    await page.click('#run');
    await page.waitForFunction(() => /she became one of \S+ most popular singers/.test(document.querySelector('#candidates tr')?.textContent ?? ''), null, { timeout: 30_000 });
    // Offline: the model loaded before comes from the browser's cache; another one cannot load, and the page says why.
    online = false;
    await loadById('sesame-test/bert-wikitext', /^Ready: BertForPreTraining, 2 layers × 128/);
    await loadById('sesame-test/never-loaded', /cannot be reached/);
    assert.match(await page.textContent('#status'), /the hub at https:\/\/huggingface\.co cannot be reached for "sesame-test\/never-loaded" .*check the connection; a model loaded before is read from the cache/);
    assert.equal(await page.isDisabled('#run'), true, 'no model, no run');
  } finally {
    await context.close();
    await hub.close();
  }
  checkErrors();
});

test('generation page: a prompt over the baby GPT window is cut and said so; unknown characters are named', async () => {
  const { page, checkErrors } = await open('generate.html');
  await page.waitForFunction(() => /^Ready: GPT2LMHeadModel, 4 layers × 128/.test(document.getElementById('status').textContent), null, { timeout: 60_000 });
  await page.fill('#prompt', 'ROMEO: '.repeat(20));
  await page.fill('#max-tokens', '4');
  await page.click('#run');
  await page.waitForFunction(() => /^Done: 4 pieces/.test(document.getElementById('run-status').textContent), null, { timeout: 60_000 });
  assert.match(await page.textContent('#run-status'), /its first 76 tokens were left out/);
  await page.fill('#prompt', 'héllo ✓');
  await page.click('#run');
  await page.waitForFunction(() => document.getElementById('run-status').classList.contains('error'), null, { timeout: 60_000 });
  assert.match(await page.textContent('#run-status'), /the text holds "é", "✓", which this model's vocabulary of 65 lacks/);
  checkErrors();
});

test('generation page streams text for the trained baby GPT and for GPT', async () => {
  const { page, checkErrors, shot } = await open('generate.html');
  // The baby GPT (trained by sesame train, shipped in models/) starts with its own example.
  await page.waitForFunction(() => /^Ready: GPT2LMHeadModel, 4 layers × 128/.test(document.getElementById('status').textContent), null, { timeout: 60_000 });
  assert.equal(await page.isVisible('#random-warning'), false, 'the baby GPT is trained');
  for (const [option, prompt] of [['0', 'ROMEO:\nI'], ['1', 'the old dog sat by the river']]) {
    if (option === '1') {
      await page.selectOption('#model', option);
      await page.click('#load');
      await page.waitForFunction(() => /^Ready: OpenAIGPT/.test(document.getElementById('status').textContent), null, { timeout: 60_000 });
      assert.equal(await page.isVisible('#random-warning'), true);
    }
    assert.equal(await page.inputValue('#prompt'), prompt, 'each model starts with its example');
    await page.fill('#max-tokens', '12');
    await page.click('#run');
    await page.waitForFunction(() => /^Done: 12 pieces/.test(document.getElementById('run-status').textContent), null, { timeout: 60_000 });
    const text = await page.textContent('#output');
    assert.ok(text.startsWith(prompt) && text.length >= prompt.length + 12, text);
  }
  // Stop ends a long generation early. On the CPU a piece takes a few milliseconds, less than
  // a round trip to the test, so Stop is clicked from the page as the first piece shows.
  await page.fill('#max-tokens', '200');
  const stopAtFirstPiece = page.evaluate(() => new Promise((resolve) => {
    const status = document.getElementById('run-status');
    const watch = new MutationObserver(() => {
      if (!/^\d+ pieces/.test(status.textContent)) return;
      watch.disconnect();
      document.getElementById('stop').click();
      resolve();
    });
    watch.observe(status, { childList: true, characterData: true, subtree: true });
  }));
  await page.click('#run');
  await stopAtFirstPiece;
  await page.waitForFunction(() => /^Stopped after \d+ pieces/.test(document.getElementById('run-status').textContent), null, { timeout: 60_000 });
  const pieces = Number((await page.textContent('#run-status')).match(/\d+/)[0]);
  assert.ok(pieces < 200, `stopped after ${pieces} pieces`);
  assert.equal(await page.isDisabled('#stop'), true);
  await shot('generate');
  checkErrors();
});

test('similarity page ranks MiniLM sentence pairs', { skip: process.env.SESAME_DOWNLOADS === 'unavailable' && '!!! SKIPPED: MiniLM could not be downloaded' }, async () => {
  const { page, checkErrors, shot } = await open('similarity.html');
  assert.equal(await page.isVisible('#random-warning'), false, 'MiniLM is pretrained');
  await page.click('#run');
  await page.waitForSelector('#result:not([hidden])', { timeout: 60_000 });
  // A real model pairs the two sentences about eating.
  assert.match(await page.textContent('#best'), /A man is eating/);
  assert.match(await page.textContent('#best'), /(piece of bread|having a meal)/);
  assert.equal(await page.locator('#matrix tr').count(), 6);
  await shot('similarity');
  checkErrors();
});

test('similarity page compares sentences with the trained CoVe', async () => {
  const { page, checkErrors, shot } = await open('similarity.html');
  const cove = await page.$$eval('#model option', (options) => options.find((o) => o.textContent.startsWith('CoVe (MT-LSTM: 2 biLSTM'))?.value);
  assert.ok(cove, 'the trained CoVe is offered');
  await page.selectOption('#model', cove);
  await page.click('#load');
  await page.waitForFunction(() => /^Ready: CoveModel, 2 layers × 256/.test(document.getElementById('status').textContent), null, { timeout: 60_000 });
  assert.equal(await page.isVisible('#random-warning'), false, 'the CoVe here is trained');
  await page.fill('#sentences', 'file not found\ndirectory not found\ncannot open the file\nthe cat sat on the mat');
  await page.click('#run');
  await page.waitForSelector('#result:not([hidden])', { timeout: 60_000 });
  assert.equal(await page.locator('#matrix tr').count(), 5);
  await shot('similarity-cove');
  checkErrors();
});

test('sentiment page: the SST-2 classifier tells a glowing review from a scathing one', async () => {
  const { page, checkErrors, shot } = await open('sentiment.html');
  assert.match(await page.textContent('#status'), /^Ready: AwdLstmForSequenceClassification/);
  assert.equal(await page.isVisible('#random-warning'), false, 'the SST-2 classifier is trained');
  await page.click('#run');
  await page.waitForSelector('#result:not([hidden])');
  assert.match(await page.textContent('#labels tr:first-child'), /^positive/);
  await page.fill('#text', 'a dull , lifeless mess .');
  await page.click('#run');
  await page.waitForFunction(() => /^negative/.test(document.querySelector('#labels tr')?.textContent ?? ''), null, { timeout: 30_000 });
  assert.equal(await page.locator('#labels tr').count(), 2);
  await shot('sentiment');
  checkErrors();
});

test('teach-it page: checks the examples, trains in a worker with a live plot, stops on request, classifies and downloads the folder', async () => {
  const { page, checkErrors } = await newPage(h.browser, `${h.base}/teach.html`);
  assert.match(await page.textContent('#private'), /Nothing leaves this machine/);
  await page.fill('#examples', 'the sun shone\thappy\nno label here\ncold rain fell,sad');
  assert.match(await page.textContent('#examples-status'), /Line 2: each line is a text, then a tab or a comma, then its label/);
  assert.equal(await page.isDisabled('#train'), true);
  const examples = ['the sun shone', 'cold rain fell', 'she was happy', 'dark night', 'the bird sang', 'the town slept', 'warm fire', 'long cold night', '"children played, with ball"', 'rain fell on roof']
    .map((text, i) => `${text}${i === 8 ? ',' : '\t'}${i % 2 ? 'sad' : 'happy'}`).join('\n');
  await page.fill('#examples', examples);
  assert.match(await page.textContent('#examples-status'), /^10 examples; labels: happy \(5\), sad \(5\)\.$/);
  await page.selectOption('#model', '2');
  await page.fill('#lr', '1e-2');
  await page.click('#train');
  await page.waitForFunction(() => /^Trained in \d+ s: \d+% of the 1 held-out examples right\.$/.test(document.getElementById('train-status').textContent), null, { timeout: 120_000 });
  assert.equal(await page.locator('#plot polyline.loss').count(), 1);
  assert.ok((await page.getAttribute('#plot polyline.loss', 'points')).split(' ').length === 3, 'a point a step: 9 examples in batches of 16, 3 epochs');
  await page.waitForFunction(() => !document.getElementById('try').hidden && document.getElementById('run-status').textContent === '');
  await page.click('#run');
  await page.waitForFunction(() => document.querySelectorAll('#labels tr').length === 2);
  const downloads = [];
  page.on('download', (d) => downloads.push(d.suggestedFilename()));
  await page.click('#download');
  await page.waitForFunction(() => /^Downloaded/.test(document.getElementById('run-status').textContent));
  await page.waitForTimeout(500);
  assert.deepEqual(downloads.sort(), ['config.json', 'model.safetensors', 'tokenizer.json']);

  // A long run, stopped after its first step: the model as trained so far is ready. Its
  // steps take milliseconds, so the run is long enough that the stop always lands inside it.
  await page.fill('#epochs', '2000');
  await page.click('#train');
  await page.waitForFunction(() => /^Step \d+ of 2000/.test(document.getElementById('train-status').textContent), null, { timeout: 60_000 });
  await page.click('#stop');
  await page.waitForFunction(() => /^Stopped after step \d+: the model as trained so far is below\.$/.test(document.getElementById('train-status').textContent), null, { timeout: 60_000 });
  await page.waitForFunction(() => !document.getElementById('try').hidden && document.getElementById('run-status').textContent === '');
  await page.screenshot({ path: path.join(artifacts, 'teach.png'), fullPage: true });
  checkErrors();
});

test("word-classes page: CVT's tagger names each word's part of speech", async () => {
  const { page, checkErrors, shot } = await open('tags.html');
  assert.match(await page.textContent('#status'), /^Ready: CvtForTokenClassification/);
  assert.equal(await page.isVisible('#random-warning'), false, 'the tagger is trained');
  await page.click('#run');
  await page.waitForSelector('#result:not([hidden])');
  // A header row and one per word of "The old mill stood by the river for two hundred years ."
  assert.equal(await page.locator('#tags tr').count(), 13);
  assert.match(await page.textContent('#tags tr:nth-child(4)'), /^mill\s*NN/);
  await shot('tags');
  checkErrors();
});

test('next-sentence page gives a probability', async () => {
  const { page, checkErrors, shot } = await open('next-sentence.html');
  await page.click('#run');
  await page.waitForSelector('#result:not([hidden])');
  assert.match(await page.textContent('#verdict'), /\d+\.\d% that it does/);
  await shot('next-sentence');
  checkErrors();
});

test('perplexity page measures a text, and says when it is empty', async () => {
  const { page, checkErrors, shot } = await open('perplexity.html');
  await page.click('#run');
  await page.waitForSelector('#result:not([hidden])');
  assert.match(await page.textContent('#score'), /^Perplexity \d+\.\d\d$/);
  await page.fill('#text', '   ');
  await page.click('#run');
  await page.waitForFunction(() => document.getElementById('run-status').classList.contains('error'));
  assert.match(await page.textContent('#run-status'), /empty/);
  await shot('perplexity');
  checkErrors();
});

test('attention page draws lines and a heatmap for a chosen layer and head', async () => {
  const { page, checkErrors, shot } = await open('attention.html');
  // The tiny BERT: 2 layers × 4 heads.
  await page.selectOption('#model', await page.locator('#model option', { hasText: /^BERT masked-LM, tiny/ }).getAttribute('value'));
  await page.click('#load');
  await page.waitForFunction(() => /^Ready: BertForMaskedLM/.test(document.getElementById('status').textContent));
  await page.fill('#text', 'the cat sat on the mat .');
  await page.click('#run');
  await page.waitForSelector('#attention-lines');
  const tokens = 9; // [CLS] 7 words [SEP]
  assert.equal(await page.locator('#attention-lines line').count(), tokens * tokens);
  assert.equal(await page.locator('#attention-lines text[data-side=query]').count(), tokens);
  // Each token's attention sums to 1 over the keys.
  const sums = await page.$$eval('#attention-lines line', (lines) => {
    const s = {};
    for (const l of lines) s[l.dataset.query] = (s[l.dataset.query] ?? 0) + Number(l.getAttribute('stroke-opacity'));
    return Object.values(s);
  });
  sums.forEach((s) => assert.ok(Math.abs(s - 1) < 0.01, `row sum ${s}`));
  await page.selectOption('#layer', '1');
  await page.selectOption('#head', '3');
  await page.selectOption('#view', 'heatmap');
  assert.equal(await page.locator('#attention-heatmap tr').count(), tokens + 1);
  await shot('attention');
  checkErrors();
});

test('words-in-context page: the token layer ignores context, the LSTM layers use it', async () => {
  const { page, checkErrors, shot } = await open('elmo.html');
  await page.waitForFunction(() => /^Ready: ELMo/.test(document.getElementById('status').textContent), null, { timeout: 60_000 });
  assert.equal(await page.isVisible('#random-warning'), false, 'the WikiText-2 ELMo is trained');
  await page.click('#run');
  await page.waitForSelector('#result:not([hidden])', { timeout: 60_000 });
  const matrices = await page.$$eval('table.similarity', (tables) => tables.map((t) => Array.from(t.querySelectorAll('tr')).slice(1).map((r) => Array.from(r.querySelectorAll('td'), (td) => Number(td.textContent)))));
  assert.equal(matrices.length, 3, 'token layer and two LSTM layers');
  assert.ok(matrices[0].flat().every((v) => v === 1), `the same word has one token-layer vector: ${JSON.stringify(matrices[0])}`);
  for (const m of matrices.slice(1)) assert.ok(m.flat().some((v) => v < 0.999), `context moves the LSTM vectors: ${JSON.stringify(m)}`);
  // The shades span the values shown: the least similarity is the lightest cell, 1 the darkest.
  const least = Math.min(...matrices.flat(2));
  assert.match(await page.textContent('#scale'), new RegExp(`^Shades run from ${least.toFixed(3)} \\(lightest\\)`));
  const alphas = await page.$$eval('table.similarity td', (cells) => cells.map((td) => Number(td.style.background.match(/rgba\([^)]*,\s*([\d.]+)\)/)?.[1] ?? 1)));
  assert.equal(Math.min(...alphas), 0.08);
  // A sentence without the word is named.
  await page.fill('#sentences', 'the bank is here\nno such word');
  await page.click('#run');
  await page.waitForFunction(() => /Sentence 2 does not use/.test(document.getElementById('run-status').textContent));
  await shot('elmo');
  checkErrors();
});

test('any-model page: a URL or a folder from disk, its facts, and a form per task it serves', async () => {
  const { page, checkErrors } = await newPage(h.browser, `${h.base}/models.html`);
  await page.waitForFunction(() => /^Ready|error/i.test(document.getElementById('status').textContent), null, { timeout: 60_000 });
  const option = async (text) => page.locator('#source option', { hasText: text }).getAttribute('value');
  await page.selectOption('#source', await option('RoBERTa NLI'));
  await page.click('#load');
  await page.waitForFunction(() => /^Ready: RobertaForSequenceClassification/.test(document.getElementById('status').textContent), null, { timeout: 60_000 });
  const facts = await page.textContent('#facts');
  assert.match(facts, /RoBERTa \(model_type roberta\)/);
  assert.match(facts, /text-classification, feature-extraction, zero-shot-classification/);
  assert.match(facts, /contradiction, neutral, entailment/);
  await page.click('#zero-shot-classification-run');
  await page.waitForFunction(() => document.getElementById('zero-shot-classification-output').textContent.split('\n').length === 3, null, { timeout: 30_000 });
  assert.match(await page.textContent('#zero-shot-classification-output'), /%  (cat|dog|rain)/);
  assert.equal(await page.locator('#task-fill-mask').count(), 0, 'only the tasks it serves');
  // A folder picked from disk: ALBERT, whose mask token fills the fill-mask form.
  await page.selectOption('#source', 'folder');
  await page.setInputFiles('#model-folder', path.join(root, 'tests/fixtures/albert/AlbertForPreTraining'));
  await page.click('#load');
  await page.waitForFunction(() => /^Ready: AlbertForPreTraining/.test(document.getElementById('status').textContent), null, { timeout: 60_000 });
  assert.equal(await page.inputValue('#fill-mask-text'), 'the cat sat on the [MASK] .');
  await page.click('#next-sentence-prediction-run');
  await page.waitForFunction(() => /B follows A: \d/.test(document.getElementById('next-sentence-prediction-output').textContent), null, { timeout: 30_000 });
  // ELECTRA's trained discriminator: a probability per token.
  await page.selectOption('#source', await option("ELECTRA's discriminator"));
  await page.click('#load');
  await page.waitForFunction(() => /^Ready: ElectraForPreTraining/.test(document.getElementById('status').textContent), null, { timeout: 60_000 });
  await page.click('#replaced-token-detection-run');
  await page.waitForFunction(() => document.getElementById('replaced-token-detection-output').textContent.split('\n').length === 7, null, { timeout: 30_000 });
  assert.match(await page.textContent('#replaced-token-detection-output'), /^the  \d+\.\d%/);
  await page.screenshot({ path: path.join(artifacts, 'models.png'), fullPage: true });
  checkErrors();
});

test('a browser without WebGPU says so and fills the blank on the CPU', async () => {
  const { page, checkErrors } = await newPage(h.browser);
  await page.addInitScript(() => { Object.defineProperty(Navigator.prototype, 'gpu', { get: () => undefined }); });
  await page.goto(`${h.base}/index.html`);
  await page.waitForFunction(() => !/Checking/.test(document.getElementById('runs-on').textContent));
  assert.match(await page.textContent('#runs-on'), /^CPU: WebAssembly SIMD, 1 thread per model\. .*This browser has no WebGPU, so/);
  await page.waitForFunction(() => !/checking/.test(document.getElementById('adapter').textContent));
  assert.match(await page.textContent('#adapter'), /Sesame host \(wasm SIMD128\).*host kernels/);
  await page.screenshot({ path: path.join(artifacts, 'no-webgpu.png') });
  // The pipeline API on the same page: WebGPU is missing, so "auto" runs on wasm.
  const filled = await page.evaluate(async () => {
    const { pipeline } = await import('/dist/index.js');
    const fill = await pipeline('fill-mask', '/models/trained/bert-wikitext/');
    const [best] = await fill('the dog ran to the [MASK] .');
    fill.dispose();
    return best.sequence;
  });
  assert.match(filled, /the dog ran to the \w+/);
  checkErrors();
});

test('each page says where its models run, also when WebGPU has no adapter', async () => {
  // Headless Chromium's WebGPU is SwiftShader, a software renderer: the CPU path, and why.
  const { page, checkErrors } = await newPage(h.browser, `${h.base}/fill-mask.html`);
  await page.waitForFunction(() => !/Checking/.test(document.getElementById('runs-on')?.textContent ?? 'Checking'));
  assert.match(await page.textContent('#runs-on'), /^CPU: WebAssembly SIMD, 1 thread per model\. .*has WebGPU, but no GPU behind it/);
  checkErrors();
  // navigator.gpu present, but requestAdapter() finds none.
  const { page: noAdapter, checkErrors: noAdapterErrors } = await newPage(h.browser);
  await noAdapter.addInitScript(() => { GPU.prototype.requestAdapter = async () => null; });
  await noAdapter.goto(`${h.base}/fill-mask.html`);
  await noAdapter.waitForFunction(() => /^Ready|error/i.test(document.getElementById('status')?.textContent ?? ''), null, { timeout: 120_000 });
  assert.match(await noAdapter.textContent('#runs-on'), /^CPU: WebAssembly SIMD, 1 thread per model\. .*has WebGPU, but no GPU behind it/);
  assert.match(await noAdapter.textContent('#status'), /^Ready/);
  noAdapterErrors();
});

test('benchmark page offers its run, and its random GPT-2 and ELMo checkpoints load', async () => {
  const { page, checkErrors } = await newPage(h.browser, `${h.base}/bench.html`);
  assert.equal(await page.isEnabled('#run'), true);
  // The checkpoint the benchmark builds in the page, at a small size: a valid GPT-2.
  const info = await page.evaluate(async () => {
    const { randomGpt2 } = await import('/bench.js');
    const { loadModel } = await import('/dist/index.js');
    const { shape, ...files } = randomGpt2({ layers: 2, width: 64, heads: 4, vocab: 300, positions: 32 });
    const model = await loadModel({ ...files, 'tokenizer.json': await (await fetch('/models/fixtures/gpt2/GPT2LMHeadModel/tokenizer.json')).arrayBuffer() });
    const out = await model.forward({ input_ids: [[1, 2, 3]] });
    model.dispose();
    return { architecture: model.info.architecture, dims: out.logits.dims, finite: out.logits.data.every(Number.isFinite) };
  });
  assert.deepEqual(info, { architecture: 'GPT2LMHeadModel', dims: [1, 3, 300], finite: true });
  const elmo = await page.evaluate(async () => {
    const { randomElmo } = await import('/bench.js');
    const { pipeline } = await import('/dist/index.js');
    const { shape, ...files } = randomElmo({ cells: 12, projection: 6, highways: 2, filters: [[1, 4], [3, 5]] });
    const embed = await pipeline('elmo-embeddings', files);
    const out = await embed('three short words');
    embed.dispose();
    return { shape, dims: out.layers.dims, mixes: out.representations.length, finite: out.layers.data.every(Number.isFinite) };
  });
  assert.deepEqual(elmo, { shape: '12 cells, 6 projection, 9 CNN filters, 2 highway', dims: [3, 3, 12], mixes: 1, finite: true });
  checkErrors();
});

test('benchmark page runs in a worker: the page stays responsive and shows each result as it comes', { skip: process.env.SESAME_DOWNLOADS === 'unavailable' && '!!! SKIPPED: MiniLM could not be downloaded' }, async () => {
  const { page, checkErrors } = await newPage(h.browser);
  // The longest the page's main thread went without running a 50 ms timer.
  await page.addInitScript(() => {
    window.longestStall = 0;
    let last = performance.now();
    setInterval(() => { const now = performance.now(); window.longestStall = Math.max(window.longestStall, now - last - 50); last = now; }, 50);
  });
  await page.goto(`${h.base}/bench.html?auto&runs=1&elmo=none`);
  // MiniLM on 32 texts of 128 tokens: seconds of compute in one call, on this page's thread before.
  await page.waitForFunction(() => /32x128/.test(document.getElementById('results').textContent), null, { timeout: 120_000 });
  assert.match(await page.textContent('#results'), /page_load_to_first_result.*minilm_embeddings1x128.*minilm_embeddings32x128/);
  const stall = await page.evaluate(() => window.longestStall);
  assert.ok(stall < 1000, `the page's main thread stalled ${stall.toFixed(0)} ms during the benchmark`);
  await page.close();
  checkErrors();
});

test('no page is wider than a 390 px phone screen, with its example run', async () => {
  for (const name of PAGES) {
    const { page, overflow, wide } = await visitPage(h.browser, h.base, name, 390);
    // The navigation is one row that scrolls, cued as such, and the page's first control
    // starts on the first screen (the banner's explanation folded away).
    const phone = await page.evaluate(() => ({
      navHeight: document.querySelector('header').getBoundingClientRect().height,
      navCue: ['hidden-left', 'hidden-right'].some((edge) => document.querySelector('header').classList.contains(edge)),
      firstControl: Math.min(...[...document.querySelectorAll('main select, main textarea, main input, main button')]
        .map((e) => e.getBoundingClientRect()).filter((box) => box.height > 0).map((box) => box.top + scrollY)),
      matrixCue: document.querySelector('#matrix')?.parentElement.classList.contains('hidden-right'),
    }));
    await page.close();
    assert.ok(overflow <= 0, `${name} is ${overflow} px wider than the screen: ${wide.join(', ')}`);
    assert.ok(phone.navHeight < 60 && phone.navCue, `${name}'s navigation: ${JSON.stringify(phone)}`);
    // (The overview page has none: Infinity.)
    assert.ok(phone.firstControl < 844 || (name === 'index.html' && phone.firstControl === Infinity), `${name}'s first control starts at ${phone.firstControl} px, below a 844 px screen`);
    // The similarity matrix's five columns do not fit: its hidden part is cued.
    if (name === 'similarity.html') assert.equal(phone.matrixCue, true);
  }
});
