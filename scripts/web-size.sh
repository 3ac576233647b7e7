#!/usr/bin/env bash
# The browser budgets, on what a page downloads from dist/ (gzipped, as served): the wasm
# module ≤ 1.01 MB (1.01 · 10^6 bytes; 1 MB until the host's integer q8 product, 3–6 KB, which
# halves a decoded token's time) — a page loads one, the plain build or the threaded one; the
# threaded one ≤ 1.02 MB, for its integer tiles of relaxed SIMD (about 11 KB, which take q8
# MiniLM from f32's time to 0.66–0.71 of it: BENCHMARKS.md) — and the
# JavaScript — the JS layer plus the glue of the build it loads (the threaded build's with the
# thread pool's worker script) — ≤ 50 KB. The training modules, which only a page that
# fine-tunes loads (on its first fineTune call), ≤ 2 MB each with its glue and fine-tune*.js. Fails when any is over.
set -euo pipefail
dist="$1"
gz() { cat "$@" | gzip -9 -c | wc -c; }
# Gzipped bytes of the .js files under a folder (only at its top with -maxdepth 1).
# fine-tune*.js are the training module's: imported on the first fineTune(InWorker) call.
js_in() { local n=0; while IFS= read -r f; do n=$((n + $(gz "$f"))); done < <(find "$@" -name '*.js' ! -name 'fine-tune*.js'); echo "$n"; }
wasm=$(gz "$dist/wasm/sesame_bg.wasm")
threaded=$(gz "$dist/wasm-threads/sesame_bg.wasm")
fine_tune_js=$(gz "$dist"/fine-tune*.js)
training=$(( $(gz "$dist/wasm-train/sesame_bg.wasm") + $(js_in "$dist/wasm-train") + fine_tune_js ))
training_threaded=$(( $(gz "$dist/wasm-train-threads/sesame_bg.wasm") + $(js_in "$dist/wasm-train-threads") + fine_tune_js ))
layer=$(js_in "$dist" -maxdepth 1)
plain_js=$((layer + $(js_in "$dist/wasm")))
threaded_js=$((layer + $(js_in "$dist/wasm-threads")))
echo "browser size: wasm $wasm bytes gzipped, threaded $threaded (budgets 1010000 and 1020000); JS $plain_js, threaded $threaded_js (budget 50000 each); training module $training, threaded $training_threaded (budget 2000000 each)"
if [ "$wasm" -gt 1010000 ] || [ "$threaded" -gt 1020000 ] || [ "$plain_js" -gt 50000 ] || [ "$threaded_js" -gt 50000 ] || [ "$training" -gt 2000000 ] || [ "$training_threaded" -gt 2000000 ]; then
    echo "browser size: over budget" >&2
    exit 1
fi
