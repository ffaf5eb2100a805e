#!/bin/sh
# bench_compare_default.sh — times the embedded default comparison (`fp16probe resnet50`: resnet50 at 64x64,
# fp32 + fp16, synthetic data) end to end, evaluations included; it must stay under 3 minutes on a 2-core CPU.
# Prints the summary table and a final "bench: compare_default_s=..." line.
bin="${top_builddir:-.}/fp16probe"
db=$(mktemp "${TMPDIR:-/tmp}/fp16probe-bench-XXXXXX") || exit 1
trap 'rm -f "$db" "$db-wal" "$db-shm"' EXIT
rm -f "$db"
start=$(date +%s.%N)
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$bin" resnet50 --no-tui --db "$db" "$@" || exit 1
end=$(date +%s.%N)
awk -v s="$start" -v e="$end" 'BEGIN { t = e - s; printf "bench: compare_default_s=%.1f unit=s limit=180 ratio=%.2f\n", t, t / 180 }'
