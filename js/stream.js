// Small helpers shared by the page-side and worker-side pipelines.

/**
 * Tokens as an async iterator of {text, token} while `start(onToken)` runs; ends when it does.
 * Leaving the loop early (break, return, throw) stops the generation: onToken answers false.
 */
export async function* tokenStream(start) {
  const queue = [];
  let wake;
  let finished = false;
  let abandoned = false;
  let failure;
  start((text, token) => {
    if (abandoned) return false;
    queue.push({ text, token });
    wake?.();
    return true;
  })
    .catch((e) => { failure = e; })
    .finally(() => { finished = true; wake?.(); });
  try {
    for (;;) {
      if (queue.length) {
        yield queue.shift();
      } else if (finished) {
        break;
      } else {
        await new Promise((resolve) => { wake = resolve; });
        wake = undefined;
      }
    }
  } finally {
    abandoned = true;
  }
  if (failure) throw failure;
}

/** A [rows, width] tensor as feature-extraction returns it: {data, dims, tolist()}. */
export function tensorResult(data, dims) {
  const tolist = () => Array.from({ length: dims[0] }, (_, i) => Array.from(data.subarray(i * dims[1], (i + 1) * dims[1])));
  return { data, dims, tolist };
}
