#!/usr/bin/env bash
# `npm run build`: the npm package in dist/ — the wasm module (cargo, wasm32 release profile,
# then wasm-bindgen --target web into dist/wasm/) and the JS layer with its types (js/). No
# wasm-opt: Debian's breaks current wasm-bindgen output, and binaryen 132's -Oz makes this
# module larger gzipped (856 KB → 890 KB, measured). The reset-state function lets the package
# instantiate the module afresh after a trap (js/trap.js); it adds about 0.5 KB of gzipped glue.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --lib --profile wasm-release --locked --target wasm32-unknown-unknown --target-dir target/wasm
rm -rf dist.tmp && mkdir -p dist.tmp/wasm
wasm-bindgen --target web --experimental-reset-state-function --out-dir dist.tmp/wasm --out-name sesame target/wasm/wasm32-unknown-unknown/wasm-release/sesame.wasm
cp js/*.js js/*.d.ts dist.tmp/
rm -rf dist && mv dist.tmp dist
bash scripts/web-size.sh dist
