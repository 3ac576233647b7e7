// For the browser and Node tests: a fixture's reference.safetensors, read, and tensors compared.

/** {name: {data: Float32Array, dims}} of a safetensors file fetched from `url` (F32 tensors;
 * I64 ones, such as token ids, as arrays of numbers). */
export async function readSafetensors(url) {
  return parseSafetensors(new Uint8Array(await (await fetch(url)).arrayBuffer()));
}

/** The same from the file's bytes. */
export function parseSafetensors(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLength = Number(view.getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLength)));
  const tensors = {};
  for (const [name, t] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const [begin, end] = t.data_offsets;
    const raw = bytes.slice(8 + headerLength + begin, 8 + headerLength + end).buffer;
    let data;
    if (t.dtype === 'F32') data = new Float32Array(raw);
    else if (t.dtype === 'I64') data = Array.from(new BigInt64Array(raw), Number);
    else throw new Error(`${name}: dtype ${t.dtype}`);
    tensors[name] = { data, dims: t.shape };
  }
  return tensors;
}

/** Max abs difference per reference tensor, and shape mismatches or missing outputs. */
export function compareTensors(got, want) {
  const report = {};
  for (const [name, w] of Object.entries(want)) {
    const g = got[name];
    if (!g) { report[name] = 'missing'; continue; }
    if (g.dims.join() !== w.dims.join()) { report[name] = `dims [${g.dims}] vs [${w.dims}]`; continue; }
    let max = 0;
    for (let i = 0; i < w.data.length; i++) max = Math.max(max, Math.abs(g.data[i] - w.data[i]));
    report[name] = max;
  }
  return report;
}

/**
 * Max |Sesame − reference| over every layer and mix of every sentence's words: `results` from
 * the elmo-embeddings pipeline, `ref` the ELMo fixture's reference tensors.
 */
export function elmoMaxError(results, ref) {
  const [, layers, tokens, width] = ref.elmo_layers.dims;
  let maxErr = 0;
  results.forEach((r, b) => {
    const n = r.tokens.length;
    for (let l = 0; l < layers; l++) for (let i = 0; i < n * width; i++) {
      maxErr = Math.max(maxErr, Math.abs(r.layers.data[l * n * width + i] - ref.elmo_layers.data[(b * layers + l) * tokens * width + i]));
    }
    r.representations.forEach((m, k) => {
      const want = ref[`elmo_representations.${k}`].data;
      for (let i = 0; i < n * width; i++) maxErr = Math.max(maxErr, Math.abs(m.data[i] - want[b * tokens * width + i]));
    });
  });
  return maxErr;
}
