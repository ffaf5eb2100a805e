#!/bin/sh
# test_dist_sync_bn.sh — --sync-bn under `mpirun --oversubscribe -np 2` (as root with Open MPI's two environment
# variables): tests/test_dist_sync_bn (the ranks' weights and running statistics against one process on the global
# batch), then `fp16probe train --sync-bn` on 2 ranks (finishes, the data-parallel line says sync-bn, the run's
# configuration records "sync_bn":true, and false without the option), `--sync-bn=3` refused in one line, and
# `--sync-bn` alone (no launcher) training with one line saying it has no effect. Skips without mpirun.
bin="${top_builddir:-.}/fp16probe"
prog="${top_builddir:-.}/tests/test_dist_sync_bn"
. "$(dirname "$0")/tap.sh"
tap_mpi
prog_abs=$(cd "$(dirname "$prog")" && pwd)/$(basename "$prog")
bin_abs=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
tap_workdir dist-sync-bn
timeout 300 $MPI "$prog_abs" >prog.txt 2>prog.err
if grep -q "^1\.\.0 # SKIP" prog.txt; then cat prog.txt; exit 0; fi
m=$(grep -c '^\(not \)\?ok ' prog.txt)
echo "1..$((m + 7))"
grep '^#' prog.txt
grep '^\(not \)\?ok ' prog.txt
grep -q '^not ok' prog.txt && fail=1
test "$m" -eq 10 || { echo "# test_dist_sync_bn ran $m of 10 checks"; sed 's/^/# /' prog.err | tail -5; fail=1; }
n=$m

T="$bin_abs train --model tinynet --data synthetic:200 --image-size 32 --threads 1 --eval-batches 2 --batch 4"
check "2 ranks, --sync-bn: train finishes with one summary line" \
    sh -c "timeout 300 $MPI $T --precision fp16 --steps 3 --sync-bn --db sbn.db >run.txt 2>run.err && test \$(grep -c '^finished 3 steps' run.txt) -eq 1"
check "the data-parallel line ends with sync-bn" grep -Eq '^data parallel: 2 ranks, global batch 8, .*, sync-bn$' run.txt
check "the run's configuration records \"sync_bn\":true" \
    sh -c "'$bin_abs' export --db sbn.db --run 1 --table runs | grep -q '\"\"sync_bn\"\":true'"
check "2 ranks without --sync-bn: recorded \"sync_bn\":false, no sync-bn in the data-parallel line" \
    sh -c "timeout 300 $MPI $T --precision fp32 --steps 2 --db plain.db >plain.txt 2>plain.err && '$bin_abs' export --db plain.db --run 1 --table runs | grep -q '\"\"sync_bn\"\":false' && grep -q '^data parallel: ' plain.txt && ! grep -q 'sync-bn' plain.txt"
check "--sync-bn=3: one line, exit 2" \
    sh -c "$T --steps 1 --sync-bn=3 --db '' >bad.txt 2>bad.err; test \$? -eq 2 && test \$(wc -l <bad.err) -eq 1 && grep -q '^fp16probe: train: --sync-bn takes no value (got .3.)' bad.err"
check "--sync-bn alone: trains, one line says it has no effect" \
    sh -c "$T --precision fp32 --steps 2 --sync-bn --db '' >one.txt 2>one.err && grep -q '^finished 2 steps' one.txt && test \$(grep -c -- '--sync-bn: no effect: one process' one.err) -eq 1"
check "--help lists --sync-bn" sh -c "'$bin_abs' train --help | grep -q -- '--sync-bn'"
exit $fail
