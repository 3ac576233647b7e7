#!/usr/bin/env bash
# The browser budgets, on what a page downloads from dist/ (gzipped, as served): the wasm
# module ≤ 1 MB (10^6 bytes) and the JavaScript — wasm-bindgen's glue plus the JS layer —
# ≤ 50 KB. Fails when either is over.
set -euo pipefail
dist="$1"
gz() { cat "$@" | gzip -9 -c | wc -c; }
wasm=$(gz "$dist/wasm/sesame_bg.wasm")
js=0
for f in "$dist"/*.js "$dist"/wasm/*.js; do js=$((js + $(gz "$f"))); done
echo "browser size: wasm $wasm bytes gzipped (budget 1000000), JS $js bytes gzipped (budget 50000)"
if [ "$wasm" -gt 1000000 ] || [ "$js" -gt 50000 ]; then
    echo "browser size: over budget" >&2
    exit 1
fi
