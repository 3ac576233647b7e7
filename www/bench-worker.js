// The benchmark page's worker: runs www/bench.js off the page's main thread, so that the page
// stays responsive for the minutes a CPU run takes. Gets {options, timeOrigin} (the page's
// performance.timeOrigin); posts {record} per result, then {done: records} or {error}.

import { runBench } from './bench.js';

self.onmessage = async ({ data: { options, timeOrigin } }) => {
  try {
    const records = await runBench({ ...options, timeOrigin, log: (record) => self.postMessage({ record }) });
    self.postMessage({ done: records });
  } catch (e) {
    self.postMessage({ error: e?.message ?? String(e) });
  }
};
