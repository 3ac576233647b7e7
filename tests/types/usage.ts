// A program written against sesame-lm's types as a user writes it: `tsc --noEmit -p
// tests/types` (scripts/test.sh) checks js/index.d.ts and this use of it, so a type that
// drifts from the API, or a declaration that does not parse, fails the tests. The
// `@ts-expect-error` lines are misuses the types must refuse.
import {
  adapterInfo,
  clearCache,
  fineTune,
  fineTuneInWorker,
  getDevice,
  loadElmo,
  loadModel,
  loadModelFiles,
  pipeline,
  pipelineInWorker,
  stats,
  TASK_NAMES,
  type AdapterInfo,
  type Answer,
  type Device,
  type ElmoResult,
  type FillMaskCandidate,
  type GenerationResult,
  type LabelScore,
  type ModelInfo,
  type Task,
  type Tensor,
} from 'sesame-lm';

export async function everyTask(signal: AbortSignal): Promise<void> {
  const device: Device = await getDevice({ device: 'auto', threads: 'auto' });
  const info: AdapterInfo = await adapterInfo();
  const kernels: 'tiled' | 'blocked' | 'host' = info.kernels;
  const threads: number | null = info.threads;
  console.log(device.info(), device.lost() ?? 'not lost', kernels, threads, (await stats()).liveBytes);

  const embed = await pipeline('feature-extraction', 'Xenova/all-MiniLM-L6-v2', { dtype: 'q8', onProgress: (e) => console.log(e.status) });
  const vectors = await embed(['a text', 'another'], { pooling: 'mean', normalize: true });
  const rows: number[][] = vectors.tolist();

  const fill = await pipeline('fill-mask', '/models/bert/');
  const candidates = (await fill('Paris is the [MASK] of France.', { topK: 5 })) as FillMaskCandidate[];
  const best: string = candidates[0].tokenStr;

  const generate = await pipeline('text-generation', './models/gpt2/', { cache: false });
  const result: GenerationResult = await generate('Once upon a time', { maxNewTokens: 8, temperature: 0.8, topK: 40, seed: 1, signal });
  for await (const { text, token } of generate.stream('Once', { maxNewTokens: 4 })) console.log(text, token);

  const classify = await pipeline('text-classification', '/models/sst2/');
  const scores: LabelScore[] = await classify('great film', { topK: null, textPair: 'a pair' });
  const eachBest: LabelScore[] = await classify(['great film', 'dull'], { textPair: ['a', 'b'] });
  const eachAll: LabelScore[][] = await classify(['great film', 'dull'], { topK: null });
  const answer = (await (await pipeline('question-answering', '/models/squad/'))('Who?', 'Ada did.', { topK: 1, docStride: 64 })) as Answer;
  const tags = await (await pipeline('token-classification', '/models/ner/'))('Ada Lovelace', { ignoreLabels: ['O'] });
  const zeroShot = await (await pipeline('zero-shot-classification', '/models/nli/'))('text', ['a', 'b'], { multiLabel: true });
  const choices = await (await pipeline('multiple-choice', '/models/swag/'))('A man', ['runs', 'sits']);
  const perplexity = await (await pipeline('perplexity', '/models/gpt2/'))('some text', { window: 64, stride: 32 });

  const elmo = await loadElmo('/models/elmo/');
  const sentence: ElmoResult = await (await pipeline('elmo-embeddings', elmo))('The bank was closed.');
  const sentences: ElmoResult[] = await (await pipeline('elmo-embeddings', elmo))([['The', 'bank'], ['A', 'river']]);

  const model = await loadModel({ 'config.json': new ArrayBuffer(0), 'model.safetensors': new Uint8Array(0) });
  const summary: ModelInfo = model.info;
  const outputs: Record<string, Tensor> = await model.forward({ input_ids: [[101, 2023, 102]], attention_mask: [[1, 1, 1]] }, { hiddenStates: true });
  const encoded = model.tokenize('Hello', { pair: 'world' });
  console.log(model.decode(encoded.inputIds, { skipSpecialTokens: true }), summary.tasks, outputs.logits.dims);
  model.dispose();

  const worker = await pipelineInWorker('feature-extraction', '/models/minilm/', { workers: 2, threads: 1 });
  console.log(worker.info.modelType, worker.adapter.kernels, await worker(['batch', 'of', 'texts']));
  worker.dispose();

  const files = await loadModelFiles('org/name', { revision: 'main', allowRemote: false, integrity: { 'config.json': 'sha256-…' } });
  await clearCache();
  const tasks: readonly Task[] = TASK_NAMES;
  console.log(rows, best, result.generatedText, scores, eachBest[0].label, eachAll[1].length, answer.answer, tags, zeroShot.labels, choices[0].index, perplexity.perplexity, sentence.tokens, sentences.length, files, tasks);

  // @ts-expect-error: not a task
  await pipeline('summarization', '/models/t5/');
  // @ts-expect-error: the device is one of three kinds
  await getDevice({ device: 'cuda' });
  // @ts-expect-error: a text-generation pipeline takes a prompt string
  await generate(42);
  // @ts-expect-error: dtype names a stored precision
  await loadModel('/models/bert/', { dtype: 'int4' });
}

export async function fineTuning(signal: AbortSignal): Promise<void> {
  const run = await fineTune('text-classification', 'Xenova/all-MiniLM-L6-v2', {
    train: [{ text: 'great film', label: 'positive' }, { text: 'dull', label: 'negative' }],
    validation: [{ text: 'fine', textPair: 'really', label: 'positive' }],
    epochs: 1, batchSize: 2, learningRate: 5e-5, schedule: 'constant', warmupRatio: 0, shuffle: false, signal,
    onProgress: (p) => { if (p.status === 'training') console.log(p.step, p.steps, p.loss, p.validation?.f1); },
  });
  const losses: readonly number[] = run.losses;
  const scores = await run.evaluate([{ text: 'good', label: 'positive' }]);
  const classify = await run.pipeline();
  const labels: LabelScore[] = await classify('great');
  const files: Record<string, Uint8Array> = await run.save();
  console.log(losses, scores.accuracy, labels, files['config.json']);
  const inWorker = await fineTuneInWorker('text-classification', 'tiny/bert', { train: [{ text: 'good', label: 'a' }], signal, threads: 'auto' });
  const workerLabels: LabelScore[] = await (await inWorker.pipeline())('good');
  const workerThreads: number = inWorker.threads;
  console.log(workerLabels, inWorker.losses, workerThreads);
  const tagger = await fineTune('token-classification', 'tiny/bert', { train: [{ tokens: ['Paris'], labels: ['B-LOC'] }] });
  console.log(tagger.labels);
  // @ts-expect-error a token-classification example has tokens and labels, not text
  await fineTune('token-classification', 'tiny/bert', { train: [{ text: 'Paris', label: 'LOC' }] });
  const loaded = await pipeline('fill-mask', 'tiny/bert');
  const lm = await fineTune('fill-mask', loaded, { train: ['the cat sat.', 'a dog ran.'] });
  await fineTuneInWorker('fill-mask', loaded.model, { train: ['the cat sat.'] });
  console.log((await lm.evaluate(['the cat ran.'])).perplexity);
  // @ts-expect-error summarization is not a task fineTune trains
  await fineTune('summarization', 'tiny/bert', { train: [] });
}
