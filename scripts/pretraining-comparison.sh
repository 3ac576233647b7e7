#!/usr/bin/env bash
# Issue 26's pretraining comparison (TRAINING.md, "Pretraining recipes side by side"): RoBERTa,
# ALBERT, ERNIE and ELECTRA recipes at the size and budget of the demo's WikiText BERT (2 layers
# × 128, WordPiece 4,000, 3,000 steps of 16 × 128 tokens), and DistilBERT's (the BERT distilled
# into a half-depth DistilBERT on the same data and budget), trained on WikiText-2's test split
# and evaluated on its validation split; then each pretrained model (and the demo's BERT)
# fine-tuned on SST-2 with one recipe and scored once on its test set; and MT-DNN's
# multi-task fine-tuning of the BERT (SST-2 beside WikiText's sentence distance).
#
# Each run writes runs/NAME/ and runs/NAME.jsonl; a run that was stopped resumes from its last
# checkpoint, a finished one is skipped. Runs go on the host device (the CPU twins) with one
# thread each (THREADS=N for more), so steps run side by side use the cores fully;
# ADAPTER=llvmpipe (or a GPU's name) picks another device.
#
#     bash scripts/pretraining-comparison.sh STEP ...
#
# STEP: roberta | albert | ernie | electra | distilbert (pretraining), sst2-NAME (fine-tune
# runs/NAME-small — ELECTRA's discriminator for sst2-electra, the demo's BERT for sst2-bert —
# then score it on test.tsv), multitask.
set -euo pipefail
cd "$(dirname "$0")/.."
data=../shared/data/wikitext-2
adapter=${ADAPTER:-host}
sesame=("${SESAME:-target/release/sesame}" --adapter "$adapter")
if [ "$adapter" = host ]; then sesame+=(--threads "${THREADS:-1}"); fi
mkdir -p runs

# The BERT run's shape and recipe; only the architecture and objective differ.
shape=(--tokenizer wordpiece:4000 --layers 2 --heads 2 --hidden 128)
pretraining=(--data "$data/test.txt" --eval-data "$data/valid.txt"
    --seq-len 128 --batch-size 16 --steps 3000 --lr 1e-3 --warmup 100 --schedule linear --min-lr 1e-5
    --weight-decay 0.01 --dropout 0.1 --eval-every 250 --eval-batches 20 --checkpoint-every 250 --seed 1)
# The SST-2 recipe of TRAINING.md's distillation teacher.
sst2_data=(--data ../shared/data/sst2/train.tsv --eval-data ../shared/data/sst2/dev.tsv)
sst2=(--seq-len 64 --batch-size 32 --lr 3e-4 --warmup 100 --schedule linear --weight-decay 0.01 --dropout 0.1
    --eval-batches 211 --save-total-limit 4 --seed 1)

# run NAME COMMAND FLAGS…: `sesame COMMAND` (train or distill) into runs/NAME unless it
# finished (a run writes loss.svg when it ends).
run() {
    local name=$1 command=$2; shift 2
    if [ -f "runs/$name/loss.svg" ]; then
        echo "runs/$name: finished"; return
    fi
    local resume=()
    if compgen -G "runs/$name/checkpoint-*" > /dev/null; then resume=(--resume); fi
    echo "runs/$name: $*"
    "${sesame[@]}" "$command" "$@" --out "runs/$name" --log "runs/$name.jsonl" "${resume[@]}"
}

# score NAME: runs/NAME's accuracy on SST-2's test set, read once.
score() {
    echo "runs/$1 on sst2/test.tsv:"
    "${sesame[@]}" train --objective classify --model-init "runs/$1" --data ../shared/data/sst2/test.tsv --seq-len 64 --batch-size 32 --eval-only
}

for step in "$@"; do
    case $step in
    roberta) run roberta-small train --arch roberta --objective mlm "${shape[@]}" "${pretraining[@]}" ;;
    albert) run albert-small train --arch albert --objective mlm+sop --max-ngram 3 "${shape[@]}" "${pretraining[@]}" ;;
    ernie)
        [ -f runs/places.txt ] || python3 scripts/make-gazetteer.py --out runs/places.txt
        run ernie-small train --arch ernie --objective mlm+nsp --mask-level token:1000,phrase:1000,entity --gazetteer runs/places.txt "${shape[@]}" "${pretraining[@]}" ;;
    electra) run electra-small train --arch electra --objective electra "${shape[@]}" "${pretraining[@]}" ;;
    # DistilBERT's defaults: T = 2, 5·soft + 2·masked LM + 1·cosine.
    distilbert) run distilbert-small distill --teacher models/bert-wikitext --student-layers 1 --student-arch distilbert "${pretraining[@]}" ;;
    sst2-*)
        name=${step#sst2-}
        case $name in
        bert) init=models/bert-wikitext ;;
        electra) init=runs/electra-small/discriminator ;;
        *) init=runs/$name-small ;;
        esac
        run "$name-sst2" train --objective classify --model-init "$init" "${sst2_data[@]}" "${sst2[@]}" --group-by-length --steps 2000 --eval-every 500 --checkpoint-every 500
        score "$name-sst2" ;;
    multitask)
        # SST-2 and sentence distance take turns, so SST-2 gets the 2,000 steps of the
        # single-task run (its batches not grouped by length: a multi-task run mixes tasks).
        run bert-mtdnn train --objective multi-task --model-init models/bert-wikitext "${sst2[@]}" \
            --task sst2=classify:../shared/data/sst2/train.tsv,../shared/data/sst2/dev.tsv \
            --task distance=sentence-distance:"$data/test.txt","$data/valid.txt" \
            --steps 4000 --eval-every 1000 --checkpoint-every 1000
        score bert-mtdnn/tasks/sst2 ;;
    *) echo "unknown step $step (roberta, albert, ernie, electra, distilbert, sst2-NAME, multitask)" >&2; exit 2 ;;
    esac
done
