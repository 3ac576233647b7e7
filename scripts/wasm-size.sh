#!/usr/bin/env bash
# Fails when the wasm module (tokenizers included) exceeds its budget of 1 MiB gzipped.
set -euo pipefail
wasm="$1"
budget=$((1024 * 1024))
raw=$(stat -c %s "$wasm")
gz=$(gzip -9 -c "$wasm" | wc -c)
echo "wasm size: $raw bytes, $gz bytes gzipped (budget $budget)"
if [ "$gz" -gt "$budget" ]; then
    echo "wasm size: over budget" >&2
    exit 1
fi
