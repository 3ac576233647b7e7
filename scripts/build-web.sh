#!/usr/bin/env bash
# `npm run build`: the npm package in dist/ — two wasm builds (cargo, wasm32 release profile,
# then wasm-bindgen --target web) and the JS layer with its types (js/):
# - dist/wasm/: the plain build, one thread (every browser, Node.js);
# - dist/wasm-threads/: the threaded build (atomics and shared memory, rayon over Web Workers
#   through wasm-bindgen-rayon), which the package loads inside a Web Worker of a cross-origin
#   isolated page whose browser has relaxed SIMD: its multiply-adds are fused
#   (f32x4.relaxed_madd), which took MiniLM 32 × 128 from 2.22 to 1.79 s (BENCHMARKS.md). std must be rebuilt with atomics: nightly's -Z build-std (scripts/setup.sh
#   installs nightly with rust-src). The linker is told to share and import the memory (and to
#   export the thread-local storage symbols wasm-bindgen's threads transform needs); shared
#   memory must declare a maximum: 4 GiB, wasm32's whole address space (only a reservation).
# Every build is unstripped (the wasm-release profile): wasm-bindgen reads the target_features
# section — for the threaded builds, to apply its threads transform (shared, imported memory; a
# stack a thread) — then drops the names and producers itself.
# Both are inference modules: built without the default features, so without training (the
# `training` feature), which their size budget has no room for.
# - dist/wasm-train/ and dist/wasm-train-threads/: the training modules (the `training`
#   feature; plain and threaded as above), which the package loads on the first fineTune call
#   only (the threaded one in a worker of an isolated page); they have a budget of their own.
# No wasm-opt: Debian's breaks current wasm-bindgen output, and binaryen 132's -Oz makes this
# module larger gzipped (856 KB → 890 KB, measured). The reset-state function lets the package
# instantiate the plain module afresh after a trap (js/trap.js); it adds about 0.5 KB of
# gzipped glue. The threaded module cannot start afresh (its workers share its memory): a
# worker whose module trapped is replaced instead.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf dist.tmp && mkdir -p dist.tmp/wasm
cargo build --lib --profile wasm-release --locked --no-default-features --target wasm32-unknown-unknown --target-dir target/wasm
bindgen="wasm-bindgen --target web --remove-name-section --remove-producers-section"
# Nightly's note that the threaded builds' `-C target-feature=+atomics` is unstable, printed by
# every threaded build (and the "generated 1 warning" it makes), is left out; any other
# warning is shown.
quiet_atomics_note() {
    awk '/^warning: unstable feature specified for `-Ctarget-feature`: `atomics`$/ { skip = 1; next }
         skip && /^$/ { skip = 0; next }
         skip { next }
         /^warning: `sesame` \(lib\) generated 1 warning$/ { next }
         { print }' >&2
}
$bindgen --experimental-reset-state-function --out-dir dist.tmp/wasm --out-name sesame target/wasm/wasm32-unknown-unknown/wasm-release/sesame.wasm
# The training module shares the plain build's dependencies (one target dir; its own
# sesame.wasm replaces the plain one there, which wasm-bindgen has read). Its own code is
# built at opt-level 3, not "s": the loops of the training kernels (AdamW, dropout's hash,
# packing) are then vectorized and unrolled, which took a MiniLM step (16 × 64) from 2.73 to
# 2.39 s in Node.js, for 214 KB more gzipped (its budget has room; the dependencies stay "z").
CARGO_PROFILE_WASM_RELEASE_OPT_LEVEL=3 cargo build --lib --profile wasm-release --locked --no-default-features --features training --target wasm32-unknown-unknown --target-dir target/wasm
$bindgen --out-dir dist.tmp/wasm-train --out-name sesame target/wasm/wasm32-unknown-unknown/wasm-release/sesame.wasm
threads_link="--shared-memory --import-memory --max-memory=4294967296 --export=__wasm_init_tls --export=__tls_size --export=__tls_align --export=__tls_base"
RUSTFLAGS="-C target-feature=+simd128,+relaxed-simd,+atomics,+bulk-memory,+mutable-globals $(printf -- ' -C link-arg=%s' $threads_link)" \
    cargo +nightly build --lib --profile wasm-release --locked --target wasm32-unknown-unknown --target-dir target/wasm-threads \
    --no-default-features --features wasm-threads -Z build-std=panic_abort,std 2> >(quiet_atomics_note)
$bindgen --out-dir dist.tmp/wasm-threads --out-name sesame \
    target/wasm-threads/wasm32-unknown-unknown/wasm-release/sesame.wasm
# The threaded training module: the same build with training (at opt-level 3, as the plain
# one), sharing its dependencies (about a minute more).
RUSTFLAGS="-C target-feature=+simd128,+relaxed-simd,+atomics,+bulk-memory,+mutable-globals $(printf -- ' -C link-arg=%s' $threads_link)" \
    CARGO_PROFILE_WASM_RELEASE_OPT_LEVEL=3 cargo +nightly build --lib --profile wasm-release --locked --target wasm32-unknown-unknown --target-dir target/wasm-threads \
    --no-default-features --features wasm-threads,training -Z build-std=panic_abort,std 2> >(quiet_atomics_note)
$bindgen --out-dir dist.tmp/wasm-train-threads --out-name sesame \
    target/wasm-threads/wasm32-unknown-unknown/wasm-release/sesame.wasm
cp js/*.js js/*.d.ts dist.tmp/
rm -rf dist && mv dist.tmp dist
bash scripts/web-size.sh dist
