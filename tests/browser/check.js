// Loaded into test pages: fetches a fixture's reference.safetensors and compares tensors.

/** {name: {data: Float32Array, dims}} of a safetensors file (F32 tensors). */
export async function readSafetensors(url) {
  const bytes = new Uint8Array(await (await fetch(url)).arrayBuffer());
  const view = new DataView(bytes.buffer);
  const headerLength = Number(view.getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLength)));
  const tensors = {};
  for (const [name, t] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    if (t.dtype !== 'F32') throw new Error(`${name}: dtype ${t.dtype}`);
    const [begin, end] = t.data_offsets;
    const data = new Float32Array(bytes.slice(8 + headerLength + begin, 8 + headerLength + end).buffer);
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
