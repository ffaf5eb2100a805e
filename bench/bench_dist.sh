#!/bin/sh
# bench_dist.sh — what data parallelism costs per step on this CPU: `fp16probe train` on 2 ranks (mpirun
# --oversubscribe, one machine), resnet18 at 32x32, batch 16 per rank, 12 steps, the gradients all-reduced in
# fp32 and in fp16 (MPI_Iallreduce, DDP's buckets posted during the backward), against the same run in one
# process. Prints each run's data-parallel line and "bench: dist_allreduce_<fmt>_ms=..." lines (all-reduce time per
# step from the first bucket posted, exposed part: the rank's time in the hook's MPI work and the final wait,
# which includes waiting for the slower rank, and its share of the step; bytes per rank), then what --sync-bn adds
# to the fp32 run's step ("bench: dist_sync_bn_ms=...": the step time with it and without it). top_builddir picks
# the build (e.g. an older one, side by side). OPENBLAS_CORETYPE /
# OPENBLAS_L2_SIZE are unset on every side alike.
bin="${top_builddir:-.}/fp16probe"
if ! command -v mpirun >/dev/null 2>&1; then
    echo "bench: dist_allreduce skipped=1 unit=none why=no-mpirun"; exit 0
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T="$bin train --model resnet18 --image-size 32 --data synthetic:2000 --batch 16 --steps 12 --threads 1 \
--eval-every 0 --eval-batches 1 --hist-every 0"
out=$(mktemp "${TMPDIR:-/tmp}/fp16probe-bench-dist-XXXXXX") || exit 1
db="$out.db"
trap 'rm -f "$out" "$db" "$db-wal" "$db-shm"' EXIT
one=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $T --precision fp32 --db "$db" | sed -n 's/.* \([0-9.]*\) ms\/step.*/\1/p')
echo "1 process: $one ms/step (batch 16)"
step_ms() { sed -n 's/^finished .* \([0-9.]*\) ms\/step;.*/\1/p' "$out"; }
for fmt in fp32 fp16; do
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE mpirun --oversubscribe -np 2 $T --precision fp32 \
        --db "$db" --allreduce $fmt --error-every 6 >"$out" 2>&1 || { cat "$out"; exit 1; }
    grep '^finished\|^data parallel' "$out"
    [ $fmt = fp32 ] && plain=$(step_ms)
    sed -n 's/^data parallel: .* all-reduce [a-z0-9]* \([0-9.]*\) ms\/step (exposed \([0-9.]*\) ms, \([0-9.]*\)% of the step), \([0-9.]*\) MB.*/\1 \2 \3 \4/p' "$out" |
        awk -v f=$fmt -v one="$one" '{ printf "bench: dist_allreduce_%s_ms=%s unit=ms/step exposed_ms=%s share_pct=%s mb_per_rank=%s ranks=2 one_process_ms=%s\n", f, $1, $2, $3, $4, one }'
done
# --sync-bn: the batchnorm statistics reduced over the ranks (two small all-reduces per batchnorm forward, one per
# backward, on the critical path), against the fp32 run above (the same flags but the option)
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE mpirun --oversubscribe -np 2 $T --precision fp32 \
    --db "$db" --allreduce fp32 --error-every 6 --sync-bn >"$out" 2>&1 || { cat "$out"; exit 1; }
grep '^finished\|^data parallel' "$out"
sync=$(step_ms)
awk -v s="$sync" -v p="$plain" 'BEGIN { printf "bench: dist_sync_bn_ms=%s unit=ms/step without_ms=%s extra_pct=%.1f ranks=2\n", s, p, (p > 0 ? 100 * (s - p) / p : 0) }'
