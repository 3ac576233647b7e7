#!/usr/bin/env bash
# Installs what a fresh Debian machine lacks for building and testing Sesame:
# a Vulkan driver (lavapipe, Vulkan on the CPU, when there is no GPU), curl and unzip for
# the model downloads, node and npm with the package's dev dependencies, Chromium (browser
# tests, WebGPU on SwiftShader), the wasm32 target, nightly with rust-src (the threaded wasm
# build) and wasm-bindgen-cli.
# Idempotent: skips whatever is already there.
set -euo pipefail

need_apt=()
# The Vulkan loader and Mesa's drivers (lavapipe); harmless next to a real GPU's driver.
[ -e /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] || [ -e /usr/share/vulkan/icd.d/lvp_icd.aarch64.json ] || need_apt+=(mesa-vulkan-drivers)
ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1' || need_apt+=(libvulkan1)
# For scripts/fetch-models.sh.
command -v curl >/dev/null || need_apt+=(curl)
command -v unzip >/dev/null || need_apt+=(unzip)
# Runs the wasm tests (wasm-bindgen-test-runner's node mode), the demo server and the
# browser tests (playwright-core driving Debian's Chromium).
command -v node >/dev/null || need_apt+=(nodejs)
command -v npm >/dev/null || need_apt+=(npm)
command -v chromium >/dev/null || need_apt+=(chromium)
# Runs the relaxed-SIMD wasm tests in Chromium (wasm-bindgen-test-runner's browser mode).
command -v chromedriver >/dev/null || need_apt+=(chromium-driver)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "setup: installing ${need_apt[*]}"
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# The format and lint gates of the test command.
for component in rustfmt clippy; do
    if ! rustup component list --installed 2>/dev/null | grep -q "^$component"; then
        echo "setup: adding the $component component"
        rustup component add "$component"
    fi
done

# The threaded browser build (scripts/build-web.sh) rebuilds std with atomics through nightly's
# -Z build-std, which needs the rust-src component.
if ! rustup toolchain list | grep -q '^nightly'; then
    echo "setup: installing the nightly toolchain (the threaded wasm build)"
    rustup toolchain install nightly --profile minimal --component rust-src
elif ! rustup component list --toolchain nightly --installed 2>/dev/null | grep -q '^rust-src'; then
    echo "setup: adding nightly's rust-src component (the threaded wasm build)"
    rustup component add rust-src --toolchain nightly
fi

if ! rustup target list --installed 2>/dev/null | grep -q '^wasm32-unknown-unknown$'; then
    echo "setup: adding the wasm32-unknown-unknown target"
    rustup target add wasm32-unknown-unknown
fi

# The wasm test runner, at exactly the wasm-bindgen version in Cargo.lock.
wasm_bindgen_version=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' "$(dirname "$0")/../Cargo.lock")
if [ "$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')" != "$wasm_bindgen_version" ]; then
    echo "setup: installing wasm-bindgen-cli $wasm_bindgen_version (a few minutes)"
    cargo install wasm-bindgen-cli --version "$wasm_bindgen_version"
fi

# The npm dev dependencies (playwright-core, sirv, vite, …), reinstalled when package-lock.json changes.
cd "$(dirname "$0")/.."
lock_sum=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ "$(cat node_modules/.sesame-lock 2>/dev/null)" != "$lock_sum" ]; then
    echo "setup: npm ci"
    npm ci --no-audit --no-fund --loglevel=error
    echo "$lock_sum" > node_modules/.sesame-lock
fi
