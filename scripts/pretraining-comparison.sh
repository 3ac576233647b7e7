#!/usr/bin/env bash
# Issue 26's pretraining comparison (TRAINING.md, "Pretraining recipes side by side"): RoBERTa,
# ALBERT and ERNIE recipes at the size and budget of the demo's WikiText BERT (2 layers × 128,
# WordPiece 4,000, 3,000 steps of 16 × 128 tokens), trained on WikiText-2's test split and
# evaluated on its validation split. Each run writes runs/NAME/ and runs/NAME.jsonl; a run
# that was stopped resumes from its last checkpoint, a finished one is skipped.
#
#     bash scripts/pretraining-comparison.sh [roberta|albert|ernie ...]   (default: all three)
set -euo pipefail
cd "$(dirname "$0")/.."
data=../shared/data/wikitext-2
sesame=${SESAME:-target/release/sesame}
mkdir -p runs

# The BERT run's recipe; only the architecture and objective differ.
common=(--tokenizer wordpiece:4000 --layers 2 --heads 2 --hidden 128
    --data "$data/test.txt" --eval-data "$data/valid.txt"
    --seq-len 128 --batch-size 16 --steps 3000 --lr 1e-3 --warmup 100 --schedule linear --min-lr 1e-5
    --weight-decay 0.01 --dropout 0.1 --eval-every 250 --eval-batches 20 --checkpoint-every 250 --seed 1)

run() {
    local name=$1; shift
    if [ -f "runs/$name/model.safetensors" ] && grep -q '"step":3000' "runs/$name.jsonl" 2>/dev/null; then
        echo "runs/$name: finished"; return
    fi
    local resume=()
    if compgen -G "runs/$name/checkpoint-*" > /dev/null; then resume=(--resume); fi
    echo "runs/$name: $*"
    "$sesame" train "${common[@]}" "$@" --out "runs/$name" --log "runs/$name.jsonl" "${resume[@]}"
}

for recipe in "${@:-roberta albert ernie}"; do
    for r in $recipe; do
        case $r in
        roberta) run roberta-small --arch roberta --objective mlm ;;
        albert) run albert-small --arch albert --objective mlm+sop --max-ngram 3 ;;
        ernie)
            [ -f runs/places.txt ] || python3 scripts/make-gazetteer.py --out runs/places.txt
            run ernie-small --arch ernie --objective mlm+nsp --mask-level token:1000,phrase:1000,entity --gazetteer runs/places.txt ;;
        *) echo "unknown recipe $r (roberta, albert, ernie)" >&2; exit 2 ;;
        esac
    done
done
