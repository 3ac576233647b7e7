// Checks outputs against the fixtures: pipeline cases (tests/shared/pipeline-cases.js) give
// the same labels, tokens and spans as transformers' pipelines, with scores within 1e-4, and
// forward passes match reference.safetensors.

import assert from 'node:assert/strict';

export const close = (got, want, tol, label) => assert.ok(Math.abs(got - want) <= tol, `${label}: ${got} vs ${want} (tolerance ${tol})`);

/** Asserts `out` (one output per case) matches `cases` of `task`; `label` names the model. */
export function checkCases(label, task, cases, out) {
  assert.equal(out.length, cases.length, label);
  cases.forEach((c, i) => {
    const g = out[i];
    const where = `${label} ${task} case ${i}`;
    if (task === 'fill-mask') {
      const have = Array.isArray(g[0]) ? g : [g];
      const want = Array.isArray(c.result[0]) ? c.result : [c.result];
      assert.equal(have.length, want.length, where);
      want.forEach((candidates, m) => candidates.forEach((w, k) => {
        assert.deepEqual([have[m][k].token, have[m][k].tokenStr, have[m][k].sequence], [w.token, w.token_str, w.sequence], `${where} mask ${m}`);
        close(have[m][k].score, w.score, 1e-4, `${where} mask ${m} candidate ${k}`);
      }));
    } else if (task === 'zero-shot-classification') {
      assert.deepEqual(g.labels, c.result.labels, where);
      c.result.scores.forEach((s, k) => close(g.scores[k], s, 1e-4, where));
    } else if (task === 'multiple-choice') {
      g.forEach((choice) => { assert.equal(choice.choice, c.choices[choice.index]); close(choice.score, c.scores[choice.index], 1e-4, `${where} choice ${choice.index}`); });
    } else if (task === 'next-sentence-prediction') {
      close(g.score, c.is_next_probability, 1e-4, where);
      assert.equal(g.isNext, c.is_next_probability >= 0.5, where);
    } else if (task === 'feature-extraction') {
      assert.deepEqual(g.dims, [1, c.result.length], where);
      c.result.forEach((v, k) => close(g.data[k], v, 1e-4, `${where} value ${k}`));
    } else if (task === 'perplexity') {
      close(g.perplexity, c.perplexity, 1e-4 * c.perplexity, `${where} window ${c.window}`);
      assert.equal(g.scoredTokens, c.scored_tokens, where);
    } else {
      // text-classification, token-classification, question-answering: lists of labelled items.
      const have = Array.isArray(g) ? g : [g];
      assert.equal(have.length, c.result.length, `${where}: ${JSON.stringify(c)}`);
      c.result.forEach((w, k) => {
        const { score, ...rest } = w;
        const { score: gotScore, ...gotRest } = have[k];
        assert.deepEqual(gotRest, rest, `${where} item ${k}`);
        close(gotScore, score, 1e-4, `${where} item ${k}`);
      });
    }
  });
}

/** Asserts a compareTensors report of a forward pass: every output within 1e-4 (attentions 1e-5). */
export function checkForwardReport(label, report) {
  assert.ok(Object.keys(report).length >= 3, `${label}: ${JSON.stringify(report)}`);
  for (const [name, err] of Object.entries(report)) {
    const tolerance = name.startsWith('attentions') ? 1e-5 : 1e-4;
    assert.ok(typeof err === 'number' && err <= tolerance, `${label} ${name}: ${err} (tolerance ${tolerance})`);
  }
  console.log(`${label}: ${Object.entries(report).map(([n, e]) => `${n} ${e.toExponential(1)}`).join(', ')}`);
}
