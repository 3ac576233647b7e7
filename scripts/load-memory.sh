#!/usr/bin/env bash
# The memory peak of loading a model natively: the maximum resident set size of `sesame
# forward` (the load and one 4-token forward pass) on the host device and on lavapipe, for each
# model folder given; with none, the random checkpoints of scripts/make-load-memory-models.py
# (bert-base, 438 MB, and gpt2-large's shape, 3.1 GB, each whole and sharded), made under
# target/load-memory/ the first time.
#   scripts/load-memory.sh [MODEL_DIR ...]
# Prints a Markdown table (BENCHMARKS.md, "Loading memory").
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --bin sesame >&2
dirs=("$@")
if [ ${#dirs[@]} -eq 0 ]; then
    python3 scripts/make-load-memory-models.py target/load-memory >&2
    dirs=(target/load-memory/{bert-base,gpt2-large}-{single,sharded})
fi
measure=$(mktemp)
outputs=$(mktemp --suffix=.safetensors)
ids=$(mktemp --suffix=.json)
trap 'rm -f "$measure" "$outputs" "$ids"' EXIT
echo '{"input_ids": [[101, 7592, 2088, 102]]}' > "$ids"
echo "| model | weights | device | peak RSS | seconds |"
echo "|---|---|---|---|---|"
for dir in "${dirs[@]}"; do
    weights=$(cat "$dir"/*.safetensors | wc -c)
    for adapter in host llvmpipe; do
        /usr/bin/time -o "$measure" -f "%M %e" target/release/sesame forward --adapter "$adapter" --model "$dir" \
            --ids "$ids" --out "$outputs" > /dev/null
        read -r kilobytes seconds < "$measure"
        echo "| $(basename "$dir") | $((weights / 1000000)) MB | $adapter | $((kilobytes / 1000)) MB | $seconds |"
    done
done
