#!/bin/sh
# test_dist.sh — data-parallel training on one machine, `mpirun --oversubscribe -np 2` (as root with Open MPI's
# two environment variables): tests/test_dist (the ranks' weights against one process with both shards, the fp16
# all-reduce's rounding, every rank skipping the step of rank 1's Inf), then `fp16probe train` on 2 ranks (one
# session, one run, the data-parallel line and event; the store's rows: dist_steps per rank per step, bytes halved
# with --allreduce fp16 against fp32, allreduce_error at the sampled steps with rel. L2 bounded, the run's ranks in
# ls, exposed within the all-reduce's time, report --summary's data-parallel section), and a rank killed mid-run:
# rank 1 (rank 0 stops within seconds with one line naming it, the run is marked failed, the steps committed before
# stay) and rank 0, the store's writer (rank 1 stops within seconds naming it; the database stays readable with the
# steps committed before, the run reported interrupted by its readers). Skips without mpirun.
bin="${top_builddir:-.}/fp16probe"
prog="${top_builddir:-.}/tests/test_dist"
. "$(dirname "$0")/tap.sh"
tap_mpi
prog_abs=$(cd "$(dirname "$prog")" && pwd)/$(basename "$prog")
bin_abs=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
tap_workdir dist
if ! timeout 300 $MPI "$prog_abs" >prog.txt 2>prog.err; then
    if grep -q "^1\.\.0 # SKIP" prog.txt; then cat prog.txt; exit 0; fi
fi
if grep -q "^1\.\.0 # SKIP" prog.txt; then cat prog.txt; exit 0; fi
# the C program's TAP lines, renumbered after ours
m=$(grep -c '^\(not \)\?ok ' prog.txt)
echo "1..$((m + 24))"
grep '^#' prog.txt
grep '^\(not \)\?ok ' prog.txt | sed 's/^\(not \)\?ok [0-9]*/&/' | while IFS= read -r l; do echo "$l"; done
grep -q '^not ok' prog.txt && fail=1
test "$m" -eq 12 || { echo "# test_dist ran $m of 12 checks"; sed 's/^/# /' prog.err | tail -5; fail=1; }
n=$m

T="$bin_abs train --model tinynet --data synthetic:200 --image-size 32 --threads 1 --eval-batches 2"
check "2 ranks: train finishes with one summary line (rank 0 prints)" \
    sh -c "timeout 300 $MPI $T --precision fp16 --batch 4 --steps 6 --allreduce fp16 --error-every 3 --db ok.db >run.txt 2>run.err && test \$(grep -c '^finished 6 steps' run.txt) -eq 1"
check "the data-parallel line: ranks, global batch, all-reduce format, share, bytes" \
    grep -Eq '^data parallel: 2 ranks, global batch 8, all-reduce fp16 [0-9.]+ ms/step \(exposed [0-9.]+ ms, [0-9.]+% of the step\), [0-9.]+ MB/step per rank, rounding vs fp32 rel. L2 [0-9.e-]+$' run.txt
check "one session with one run in one database" \
    sh -c "'$bin_abs' ls --db ok.db >ls.txt && test \$(grep -c '^session ' ls.txt) -eq 1 && grep -q '^session 1 .*(1 run)' ls.txt"
check "the run's event: ranks, global batch, each rank's mean step, the fp16 rounding" \
    sh -c "'$bin_abs' export --db ok.db --run 1 --table events | grep -q 'data parallel: 2 ranks, global batch 8, all-reduce fp16.* r0 [0-9.]* ms r1 [0-9.]* ms; all-reduce rounding vs fp32 at step 6: rel. L2 [0-9]'"

# the store's rows (docs/schema.md: dist_steps, allreduce_error), read through export's CSV
"$bin_abs" export --db ok.db --run 1 --table dist_steps | tr -d '\r' >ds16.csv
"$bin_abs" export --db ok.db --run 1 --table allreduce_error | tr -d '\r' >ae16.csv
check "dist_steps: one row per rank per step, both ranks, steps 1-6, times and bytes measured (exposed may be 0)" \
    sh -c "test \"\$(awk -F, 'NR > 1 && \$4 > 0 && \$5 > 0 && \$6 != \"\" && \$6 >= 0 && \$7 > 0 { print \$2 \"-\" \$3 }' ds16.csv | sort -u | tr '\\n' ' ')\" = '1-0 1-1 2-0 2-1 3-0 3-1 4-0 4-1 5-0 5-1 6-0 6-1 '"
check "dist_steps: the exposed all-reduce time fits in the rank's step" \
    sh -c "test \$(awk -F, 'NR > 1 && \$6 + 0 <= \$4 + 0' ds16.csv | wc -l) -eq 12"
check "dist_steps: the exposed time is part of the all-reduce's (exposed <= comm on every row)" \
    sh -c "test \$(awk -F, 'NR > 1 && \$6 + 0 <= \$5 + 0' ds16.csv | wc -l) -eq 12"
check "report --summary: the data-parallel section (ranks, images/s, shares, straggler, labelled efficiency, rounding)" \
    sh -c "'$bin_abs' report --db ok.db --summary >rep.txt && grep -Eq '^    fp16 +2 ranks, global batch 8, [0-9.]+ images/s \(job step [0-9.]+ [mu]?s\), all-reduce fp16 ' rep.txt && grep -Eq 'communication share: exposed [0-9.]+% of wall' rep.txt && grep -Eq 'straggler rank [01]: [0-9.]+x the fastest' rep.txt && grep -q 'scaling efficiency estimate .*(communication-bound' rep.txt && grep -Eq 'all-reduce rounding \(fp16 vs fp32, 2 sampled steps\): rel. L2 mean [0-9.e-]+' rep.txt"
check "allreduce_error: rows at the sampled steps 3 and 6 only, fp16, the whole gradient (layer -1) and layers" \
    sh -c "test \"\$(awk -F, 'NR > 1 && \$3 == -1 && \$4 == \"fp16\" { print \$2 }' ae16.csv | tr '\\n' ' ')\" = '3 6 ' && test \$(awk -F, 'NR > 1 && \$3 >= 0' ae16.csv | wc -l) -ge 4 && test \$(awk -F, 'NR > 1 && \$2 != 3 && \$2 != 6' ae16.csv | wc -l) -eq 0"
check "allreduce_error: rel. L2 of the fp16 all-reduce against fp32 in (0, 1e-2) on every row, counts on layer -1" \
    sh -c "test \$(awk -F, 'NR > 1 && !(\$5 + 0 > 0 && \$5 + 0 < 0.01)' ae16.csv | wc -l) -eq 0 && test \$(awk -F, 'NR > 1 && \$3 == -1 && \$6 != \"\" && \$7 != \"\"' ae16.csv | wc -l) -eq 2"
check "ls shows the run's ranks and its slowest rank" \
    grep -Eq '^  run 1 .* ranks 2 \(slowest rank [01]: [0-9.]+x the fastest' ls.txt
check "2 ranks, --allreduce fp32: trains and records its ranks' steps" \
    sh -c "timeout 300 $MPI $T --precision fp16 --batch 4 --steps 3 --allreduce fp32 --error-every 3 --db f32.db >f32.txt 2>f32.err && '$bin_abs' export --db f32.db --run 1 --table dist_steps | tr -d '\r' >ds32.csv && test \$(awk 'NR > 1' ds32.csv | wc -l) -eq 6"
b16=$(awk -F, 'NR == 2 { print $7 }' ds16.csv); b32=$(awk -F, 'NR == 2 { print $7 }' ds32.csv)
echo "# bytes per rank and step: fp16 $b16, fp32 $b32"
check "bytes halved with --allreduce fp16 (every row of each run the same)" \
    sh -c "test -n '$b16' && test \$(( $b16 * 2 )) -eq '$b32' && test \$(awk -F, 'NR > 1 { print \$7 }' ds16.csv | sort -u | wc -l) -eq 1 && test \$(awk -F, 'NR > 1 { print \$7 }' ds32.csv | sort -u | wc -l) -eq 1"
check "an fp32 all-reduce has no rounding rows (nothing to compare)" \
    sh -c "test \$('$bin_abs' export --db f32.db --run 1 --table allreduce_error | wc -l) -eq 1"

# a rank that dies: rank 1 is killed once rank 0 has recorded a few steps (at most 60 s in); rank 0 must stop
# within seconds, naming it
cat >die.sh <<EOS
#!/bin/sh
if [ "\$OMPI_COMM_WORLD_RANK" = 1 ]; then
    (i=0; until [ \$i -ge 300 ] || "$bin_abs" ls --db die.db 2>/dev/null | grep -Eq 'steps ([3-9]|[1-9][0-9]+) '; do
        sleep 0.2; i=\$((i + 1)); done; kill -9 \$\$) &
fi
exec $T --precision fp32 --batch 4 --steps 100000 --db die.db
EOS
chmod +x die.sh
start=$(date +%s)
timeout 180 $MPI ./die.sh >die.txt 2>die.err; st=$?
took=$(( $(date +%s) - start ))
echo "# rank 1 killed: mpirun exit $st after ${took} s"
sed 's/^/#   /' die.err | grep -v '^#   *$' | head -4
check "the job ends (not the 180 s timeout) with a failure" sh -c "test $st -ne 0 && test $st -ne 124 && test $took -lt 120"
check "rank 0 says in one line that rank 1 died" \
    sh -c "test \$(grep -c '^fp16probe: train: rank 0: step [0-9]*: rank 1 (pid [0-9]* on .*) died' die.err) -eq 1"
check "the run is marked failed, naming rank 1" \
    sh -c "'$bin_abs' ls --db die.db | grep -q '^  run 1 .* failed' && '$bin_abs' export --db die.db --run 1 --table runs | grep -q 'rank 1 (pid'"
check "the steps committed before the death are kept" \
    sh -c "'$bin_abs' ls --db die.db | grep -Eq '^  run 1 .* steps ([2-9]|[1-9][0-9]+) '"
# rank 0, the store's writer, dies (same trigger, its own shell kills it and notes the time and the steps it saw):
# rank 1 must stop within seconds, naming it; the database stays readable with every step committed before the
# death, and its readers report the run interrupted (fp_run_liveness: the writer process is gone)
cat >die0.sh <<EOS
#!/bin/sh
if [ "\$OMPI_COMM_WORLD_RANK" = 0 ]; then
    (i=0; until [ \$i -ge 300 ] || "$bin_abs" ls --db die0.db 2>/dev/null | grep -Eq 'steps ([3-9]|[1-9][0-9]+) '; do
        sleep 0.2; i=\$((i + 1)); done
     "$bin_abs" ls --db die0.db 2>/dev/null | sed -n 's/^  run 1 .* steps \([0-9]*\) .*/\1/p' >die0.seen
     date +%s >die0.killed; kill -9 \$\$) &
fi
exec $T --precision fp32 --batch 4 --steps 100000 --db die0.db
EOS
chmod +x die0.sh
timeout 180 $MPI ./die0.sh >die0.txt 2>die0.err; st0=$?
end0=$(date +%s)
killed0=$(cat die0.killed 2>/dev/null || echo 0)
seen0=$(cat die0.seen 2>/dev/null)
echo "# rank 0 killed: mpirun exit $st0, $((end0 - killed0)) s after the kill; rank 0 had recorded ${seen0:-?} steps"
sed 's/^/#   /' die0.err | grep -v '^#   *$' | head -4
check "rank 0 killed: the job ends with a failure within 10 s of the kill" \
    sh -c "test $st0 -ne 0 && test $st0 -ne 124 && test $killed0 -gt 0 && test $((end0 - killed0)) -le 10"
check "rank 1 says in one line that rank 0 died" \
    sh -c "test \$(grep -c '^fp16probe: train: rank 1: .*rank 0 (pid [0-9]* on .*) died' die0.err) -eq 1"
check "the database stays readable: ls, export and report --summary" \
    sh -c "'$bin_abs' ls --db die0.db >ls0.txt && '$bin_abs' export --db die0.db --run 1 --table steps >steps0.csv && '$bin_abs' report --db die0.db --summary >rep0.txt"
check "every step rank 0 had committed before its death is kept (steps 1..N, N >= ${seen0:-?})" \
    sh -c "test -n '$seen0' && test $(awk -F, 'NR > 1 { n++ } END { print n + 0 }' steps0.csv 2>/dev/null || echo 0) -ge '$seen0' && test \$(tr -d '\r' <steps0.csv | awk -F, 'NR > 1 && \$2 != NR - 1' | wc -l) -eq 0"
check "its readers report the run interrupted, its writer gone (ls; the gate's status check fails it)" \
    sh -c "grep -q '^  run 1 .* interrupted (writer gone)' ls0.txt && '$bin_abs' gate --candidate die0.db >gate0.txt; test \$? -eq 1 && grep -q '^status\[fp32\] *FAIL .*interrupted or killed .*writer process [0-9]* is gone' gate0.txt"
check "without mpirun the same command trains alone (no data-parallel line)" \
    sh -c "$T --precision fp32 --batch 4 --steps 2 --allreduce bf16 --db '' >one.txt && grep -q '^finished 2 steps' one.txt && ! grep -q 'data parallel' one.txt"
exit $fail
