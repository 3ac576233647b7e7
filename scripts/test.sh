#!/usr/bin/env bash
# The README's test command: the format and lint gates, every native test (kernel parity on
# whatever adapter is present, lavapipe without a GPU), the wasm tests under node, the npm
# package build and its size budgets, the package's tests under Node.js, the browser tests in headless Chromium, then each fuzz
# target briefly. The wasm tests run twice: under node (plain SIMD), and the integer products
# again in Chromium built with relaxed SIMD (its dot product of bytes, which Node.js 20 lacks). Ends with one line totalling the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Pretrained files for the real-model and tokenizer parity tests. Where they cannot be
# downloaded those tests skip, each saying so loudly; anywhere else a missing file fails them.
export SESAME_CACHE="${SESAME_CACHE:-$HOME/.cache/sesame}"
if ! bash scripts/fetch-models.sh; then
    echo "!!! test: the pretrained downloads failed: MiniLM and tokenizer parity tests will be SKIPPED" >&2
    export SESAME_DOWNLOADS=unavailable
fi
# Each phase's header says when it began (minutes since the start), to see where CI's time goes.
phase() { echo "== [$((SECONDS / 60)) min] $*"; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# A one-off build: incremental caches would only take disk (a CI run once ran out of it).
export CARGO_INCREMENTAL=0
phase "disk before the builds: $(df -h --output=avail . | tail -1 | tr -d ' ') free"

# The wasm builds with relaxed SIMD (as the package's threaded one, without its threads).
relaxed_simd="-C target-feature=+simd128,+relaxed-simd"

phase "format and lints (rustfmt.toml; clippy on the native build and the wasm32 one; rustdoc's links; the package's types)"
cargo fmt --check
# js/index.d.ts and a program written against it (tests/types/usage.ts), strictly type-checked.
npx tsc --noEmit -p tests/types
cargo clippy --locked --all-targets -- -D warnings
# wasm32: with training, and with the features of the package's inference modules (scripts/build-web.sh).
cargo clippy --locked --lib --test tokenizer_parity --test train_in_memory --test int8_products --target wasm32-unknown-unknown --target-dir target/wasm -- -D warnings
cargo clippy --locked --lib --no-default-features --target wasm32-unknown-unknown --target-dir target/wasm -- -D warnings
RUSTFLAGS="$relaxed_simd" cargo clippy --locked --lib --test int8_products --target wasm32-unknown-unknown --target-dir target/wasm-relaxed -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps --lib

phase "native tests"
# Every test binary runs, so that one failure does not hide the others.
cargo test --locked --no-fail-fast 2>&1 | tee "$log"

phase "wasm32 tests (node, wasm-bindgen-test)"
CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
    cargo test --locked --target wasm32-unknown-unknown --target-dir target/wasm --test tokenizer_parity --test train_in_memory --test int8_products 2>&1 | tee -a "$log"

phase "wasm32 tests with relaxed SIMD (headless Chromium through chromedriver, wasm-bindgen-test; webdriver.json)"
RUSTFLAGS="$relaxed_simd" WASM_BINDGEN_USE_BROWSER=1 CHROMEDRIVER="$(command -v chromedriver)" CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
    cargo test --locked --target wasm32-unknown-unknown --target-dir target/wasm-relaxed --test int8_products 2>&1 | tee -a "$log"

phase "npm package build (the plain and the threaded wasm builds, for inference and for training, + JS layer) and size budgets"
bash scripts/build-web.sh

phase "the package in Node.js: every pipeline on the fixtures and MiniLM, worker_threads, argument checking (fast-check properties)"
node --test tests/node/ 2>&1 | tee -a "$log"

phase "browser tests (headless Chromium, WebGPU)"
node --test --test-concurrency=1 tests/browser/ 2>&1 | tee -a "$log"

phase "fuzzing: every target 15 s from its committed seeds and past crashes, without ASan (scripts/fuzz.sh; RELIABILITY.md has the long runs, with it)"
SANITIZER=none bash scripts/fuzz.sh 15

phase "disk after the builds: $(df -h --output=avail . | tail -1 | tr -d ' ') free; build outputs: $(du -sh target fuzz/target 2>/dev/null | awk '{print $2 " " $1}' | paste -sd ' ')"

# cargo prints one "test result" line per test binary, node's runner "# pass N" / "# fail N";
# total them.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     /^# pass / { p += $3 } /^# fail / { f += $3 }
     END { printf "all tests: %d passed, %d failed%s\n", p, f, skipped; if (p == 0 || f > 0) exit 1 }' \
    skipped="${SESAME_DOWNLOADS:+ — the MiniLM and tokenizer parity tests were SKIPPED (downloads failed): counted as passed, they checked nothing}" "$log"
