// The fixtures' pipeline cases (pipeline.json, fill_mask.json, perplexity.json, made by
// transformers, or by fastai and the MT-LSTM for the recurrent families): how each task's case is run, in a browser page and in Node.js alike.
// tests/shared/check-cases.mjs compares the outputs with the fixture.

/** One case of `task` through `pipe`. */
function runCase(pipe, task, c) {
  switch (task) {
    case 'fill-mask': return pipe(c.text, { topK: c.top_k });
    case 'zero-shot-classification': return pipe(c.text, c.labels, { multiLabel: c.multi_label, hypothesisTemplate: c.hypothesis_template });
    case 'text-classification': return pipe(c.text, { topK: null, textPair: c.text_pair });
    case 'multiple-choice': return pipe(c.prompt, c.choices);
    case 'next-sentence-prediction': return pipe(c.text, c.text_pair);
    case 'token-classification': return pipe(c.text);
    case 'question-answering': return pipe(c.question, c.context, { topK: c.top_k, maxSeqLen: c.max_seq_len, docStride: c.doc_stride });
    case 'feature-extraction': return pipe(c.text, { pooling: c.pooling });
    case 'perplexity': return pipe(c.text, c.window === null ? {} : { window: c.window, stride: c.stride });
    default: throw new Error(`no fixture cases for ${task}`);
  }
}

/** Runs every case of `task` on the model at `model` with `sesame` (the package); returns {out, info}. */
export async function runCases(sesame, model, task, cases) {
  const pipe = await sesame.pipeline(task, model);
  try {
    const out = [];
    for (const c of cases) out.push(await runCase(pipe, task, c));
    return { out, info: pipe.model.info };
  } finally {
    pipe.dispose();
  }
}
