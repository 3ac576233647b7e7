#!/usr/bin/env bash
# The README's test command: every native test (kernel parity on whatever adapter is present,
# lavapipe without a GPU), then the wasm32 build and its size budget.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

echo "== native tests"
cargo test --all-targets --locked

echo "== wasm32 build"
cargo build --lib --profile wasm-release --locked --target wasm32-unknown-unknown --target-dir target/wasm
bash scripts/wasm-size.sh target/wasm/wasm32-unknown-unknown/wasm-release/sesame.wasm
