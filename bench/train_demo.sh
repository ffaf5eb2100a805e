#!/bin/sh
# train_demo.sh — the end-to-end figures of `fp16probe train` that are too slow for make check: ResNet-18
# learning synthetic data (loss falls, validation top-1 well above the 10% of chance within 300 steps)
# and the ResNet-50 64x64 batch-16 step time. Prints figures, never fails on them.
# usage: bench/train_demo.sh [BUILD_DIR]   (threads: $THREADS, default 2)
b="${1:-${top_builddir:-.}}/fp16probe"
threads="${THREADS:-2}"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fp16probe-demo-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
run() { env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$b" train --threads "$threads" --db "$tmp/demo.db" "$@"; }

run --model resnet18 --precision fp32 --steps 300 --image-size 32 --batch 32 --eval-every 100 --eval-batches 20 \
    | tee "$tmp/r18.txt" | grep -E '^(eval|finished)'
awk '/^finished/ { for (i = 1; i <= NF; i++) { if ($i == "loss") l = $(i + 1); if ($i == "top-1") t = $(i + 1) } }
     END { gsub(/[,%]/, "", l); gsub(/[,%]/, "", t); printf "bench: train_resnet18_32px_300steps loss=%s val_top1=%s unit=%%\n", l, t }' "$tmp/r18.txt"

run --model resnet50 --precision fp32 --steps 12 --image-size 64 --batch 16 --eval-batches 1 \
    | tee "$tmp/r50.txt" | grep -E '^finished'
awk '/^finished/ { for (i = 1; i <= NF; i++) if ($i ~ /ms\/step/) ms = $(i - 1) }
     END { printf "bench: train_resnet50_64px_b16 step_ms=%s unit=ms\n", ms }' "$tmp/r50.txt"
