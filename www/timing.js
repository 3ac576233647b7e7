// Timing shared by the browser benchmark pages (www/bench.js and bench/transformersjs/):
// the median of `runs` timed calls, after one warm-up call unless `warmUp` is false.

export const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export async function timeRuns(runs, f, { warmUp = true } = {}) {
  if (warmUp) await f(); // pipelines compile, buffers pool
  const times = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    await f();
    times.push(performance.now() - t0);
  }
  return median(times);
}
