#!/usr/bin/env bash
# Fuzzes Sesame's file inputs with cargo-fuzz (libFuzzer; the nightly toolchain):
#   scripts/fuzz.sh [SECONDS] [TARGET ...]     each target for SECONDS (default 30), all by default
#   RUNS=1000000 scripts/fuzz.sh 1800 config   stop at 1M executions or 30 minutes, whichever first
#   SANITIZER=none scripts/fuzz.sh 15          without AddressSanitizer (the test command's brief
#                                              runs: the build takes 7.6 minutes instead of 12.9)
# Seeds come from fuzz/corpus/<target> (committed; fuzz/make_seeds.py writes them) and
# fuzz/regressions/<target> (inputs that once crashed, kept once fixed); what the fuzzer learns
# goes to target/fuzz-corpus/<target>, crashes to fuzz/artifacts/<target>.
# Prints one line per target: {"target", "seconds", "executions", "crashed"}; exits 1 on a crash.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(safetensors safetensors_index weights config tokenizer_json vocab_files elmo_options elmo_hdf5 ids_json trainer_state training_data)
fi

if ! rustup toolchain list | grep -q '^nightly'; then
    echo "fuzz: installing the nightly toolchain"
    rustup toolchain install nightly --profile minimal
fi
if [ "$(cargo fuzz --version 2>/dev/null | awk '{print $2}')" != "0.13.2" ]; then
    echo "fuzz: installing cargo-fuzz 0.13.2"
    cargo install cargo-fuzz --version 0.13.2 --locked
fi

# Built once, then each target's binary runs by itself: `cargo fuzz run` would rebuild first,
# so an edit to src/ during a long run would end the next target with a build error.
# AddressSanitizer by default (it checks the unsafe code under the parsers, Sesame's and its
# dependencies'); SANITIZER=none for runs too brief to pay for its build.
(cd fuzz && cargo +nightly fuzz build -O --sanitizer "${SANITIZER:-address}")
bin="fuzz/target/$(rustc +nightly -vV | awk '/^host:/ { print $2 }')/release"
failed=0
for target in "${targets[@]}"; do
    work="target/fuzz-corpus/$target"
    mkdir -p "$work" "fuzz/artifacts/$target" "fuzz/regressions/$target"
    log="target/fuzz-$target.log"
    status=0
    started=$SECONDS
    # A 256 MiB memory budget is set inside the targets; libFuzzer's 2 GiB RSS limit backs it.
    "$bin/$target" "$work" "fuzz/corpus/$target" "fuzz/regressions/$target" -artifact_prefix="fuzz/artifacts/$target/" \
        -max_total_time="$seconds" ${RUNS:+-runs="$RUNS"} -rss_limit_mb=2048 -timeout=30 \
        -print_final_stats=1 -close_fd_mask=1 > "$log" 2>&1 || status=$?
    executions=$(awk '/stat::number_of_executed_units/ { print $2 }' "$log" | tail -1)
    crashed=false
    if [ "$status" -ne 0 ]; then
        crashed=true
        failed=1
        echo "fuzz: $target crashed; the input is in fuzz/artifacts/$target, the log in $log:" >&2
        grep -E "panicked|ERROR: libFuzzer|SUMMARY|Test unit written" "$log" | head -20 >&2 || true
    fi
    echo "{\"target\": \"$target\", \"seconds\": $((SECONDS - started)), \"executions\": ${executions:-0}, \"crashed\": $crashed}"
done
exit $failed
