#!/bin/sh
# test_compare_cli.sh — `fp16probe compare` and `fp16probe <model>` as a user meets them, on tinynet at 32x32
# (batch 8, a few steps): the alias, progress lines and the summary table, bad choices (exit 2, the valid
# ones listed, no database), a failing arm (exit 1, the other finishes, the summary says why), Ctrl-C
# (exit 130, runs interrupted, the summary so far printed); the data options `train` takes (--augment, --shuffle).
bin="${top_builddir:-.}/fp16probe"
. "$(dirname "$0")/tap.sh"
if ! "$bin" compare --help >/dev/null 2>&1; then
    echo "1..0 # SKIP fp16probe has no 'compare' command"; exit 0
fi
tap_workdir compare
O="--data synthetic:100 --batch 8 --image-size 32 --threads 1 --eval-batches 2 --no-tui"
usage_error() { # usage_error PATTERN ARGS...: exit 2, one stderr line matching PATTERN, no database
    pat=$1; shift
    rm -f bad.db
    "$bin" "$@" --db bad.db >out.txt 2>err.txt; got=$?
    test "$got" -eq 2 && test "$(wc -l <err.txt)" -eq 1 && grep -Eq "^fp16probe: compare: .*$pat" err.txt &&
        ! test -e bad.db
}
echo "1..26"
check "compare --help lists --turn and --precision" sh -c "'$bin' compare --help | grep -q -- '--turn' && '$bin' compare --help | grep -q -- '--precision'"
check "fp16probe tinynet --steps 4 --no-tui finishes (exit 0)" sh -c "'$bin' tinynet --steps 4 $O --db a.db >a.txt 2>a.err"
check "... progress lines per arm: step, loss, img/s, eta" sh -c "grep -Eq '^fp32  step 4/4  loss [0-9.]+  [0-9.]+ img/s.* eta ' a.txt && grep -Eq '^fp16  step 4/4 .* scale 65536' a.txt"
check "summary table after 8 steps (5 warm-up): speedup, throughput, memory, energy, loss, top-1 and gap, scale" \
    sh -c "'$bin' tinynet --steps 8 $O --db a8.db >a8.txt && grep -q '^summary: tinynet' a8.txt && grep -Eq '^  speedup +1.00x +[0-9.]+x' a8.txt && grep -Eq '^  throughput \\(img/s\\) +[0-9.]+ +[0-9.]+' a8.txt && grep -Eq '^  memory ratio +1.00x +0\\.[0-9]+x' a8.txt && grep -Eq '^  energy / step \\(J\\) +(n/a|[0-9.]+) ' a8.txt && grep -Eq '^  final train loss +[0-9.]+ +[0-9.]+' a8.txt && grep -Eq '^  top-1 gap +- +[-+][0-9.]+ pt' a8.txt && grep -Eq '^  skipped steps +0 +0' a8.txt && grep -Eq '^  final loss scale +- +65536' a8.txt"
check "... overflow / underflow: sampled once at the last step of a short run" sh -c "grep -A4 'most underflow' a.txt | grep -q '^    fp16 '"
check "... a 4-step run samples once at its last step: hist, error and trace every 4 in the session's settings" \
    sh -c "'$bin' export --db a.db --run 1 --table runs | grep -q 'hist_every\"\":4,\"\"error_every\"\":4,\"\"trace_every\"\":4[,}]'"
check "an explicit --trace-every is kept (7 over 2 steps; 0: off)" \
    sh -c "'$bin' tinynet --steps 2 --trace-every 7 --hist-every 0 $O --db t7.db >t7.txt && '$bin' export --db t7.db --run 1 --table runs | grep -q 'trace_every\"\":7[,}]' && '$bin' tinynet --steps 2 --trace-every 0 --hist-every 0 $O --db t0.db >t0.txt && '$bin' export --db t0.db --run 1 --table runs | grep -q 'trace_every\"\":0[,}]'"
check "--augment none --shuffle off: every arm's settings say so" \
    sh -c "'$bin' tinynet --steps 1 --augment none --shuffle off $O --db aug.db >aug.txt && '$bin' export --db aug.db --run 1 --table runs | grep -q 'augment\"\":false,\"\"shuffle\"\":false' && '$bin' export --db aug.db --run 2 --table runs | grep -q 'augment\"\":false,\"\"shuffle\"\":false'"
check "--hist-every 0: overflow / underflow n/a (no histograms sampled)" \
    sh -c "'$bin' tinynet --steps 2 --hist-every 0 $O --db h0.db >h0.txt && grep -q 'most overflow.*n/a (no histograms sampled)' h0.txt"
check "... one session, two runs, fp16 naming fp32 as its reference" \
    sh -c "'$bin' export --db a.db --run 2 --table runs | grep -q '^2,1,fp16,tinynet,fp16,1,' && '$bin' export --db a.db --run 1 --table runs | grep -q '^1,1,fp32,tinynet,fp32,,'"
check "compare --model tinynet --precision fp32,bf16,half: three arms, histograms every 2 steps" \
    sh -c "'$bin' compare --model tinynet --precision fp32,bf16,half --steps 4 --hist-every 2 --turn 2 $O --db b.db >b.txt && grep -Eq '^  +fp32 +bf16 +half\$' b.txt && grep -A6 'most underflow' b.txt | grep -q '^    half'"
check "unknown policy: exit 2, lists fp16-noscale, no database" usage_error "fp16-noscale" tinynet --precision fp32,fp99 $O
check "empty precision list: exit 2" usage_error "empty precision list" tinynet --precision '' $O
check "duplicate policy: exit 2" usage_error "twice" compare --model tinynet --precision fp16,fp16 $O
check "unknown model: exit 2, lists resnet50" usage_error "resnet50" compare --model resnet19 $O
check "bad --turn: exit 2" usage_error "--turn" tinynet --turn 0 $O
check "a failing arm (lr 1e10, fp16-noscale): exit 1, the other arm finishes, the summary says why" \
    sh -c "'$bin' tinynet --precision fp16,fp16-noscale --lr 1e10 --steps 4 $O --db c.db >c.txt 2>c.err; test \$? -eq 1 && grep -q 'fp16-noscale  FAILED' c.txt && grep -Eq '^  status +finished +failed' c.txt && grep -q 'fp16-noscale failed: loss is NaN' c.txt"
check "the fp32 reference listed second: the fp16 arm's rounding error still measured (rows at steps 2 and 4)" \
    sh -c "'$bin' tinynet --precision fp16,fp32 --steps 4 --error-every 2 $O --db r.db >r.txt 2>r.err && '$bin' export --db r.db --run 2 --table precision_error | grep -q '^2,1,2,' && '$bin' export --db r.db --run 2 --table precision_error | grep -q '^2,1,4,'"
check "a missing --weights file: exit 1, one stderr line naming it, nothing recorded (no session without a step)" \
    sh -c "'$bin' tinynet --steps 2 --device cpu --weights nosuch.safetensors $O --db w.db >w.txt 2>w.err; test \$? -eq 1 && test \$(wc -l <w.err) -eq 1 && grep -q 'nosuch.safetensors' w.err && ! grep -q '^summary' w.txt && ! test -e w.db"
check "a missing data directory: exit 1, one line naming it, nothing recorded" \
    sh -c "'$bin' tinynet --steps 2 --device cpu --data cifar10:nodir --batch 8 --image-size 32 --threads 1 --no-tui --db nd.db >nd.txt 2>nd.err; test \$? -eq 1 && test \$(wc -l <nd.err) -eq 1 && grep -q 'nodir' nd.err && ! test -e nd.db"
check "--steps 0: exit 2" usage_error "--steps" tinynet --steps 0 $O
# Ctrl-C: a long run in the background, SIGINT once it has stepped
"$bin" tinynet --steps 100000 $O --db d.db >d.txt 2>d.err &
pid=$!
i=0
while ! grep -q 'step' d.txt 2>/dev/null && test $i -lt 100; do sleep 0.1; i=$((i + 1)); done
sleep 0.3
kill -INT $pid
wait $pid; st=$?
check "Ctrl-C: exit 130 and the summary so far" sh -c "test $st -eq 130 && grep -q '^summary: tinynet, session 1 (interrupted)' d.txt"
check "... both runs stored as interrupted" \
    sh -c "'$bin' export --db d.db --run 1 --table runs | grep -q ',interrupted,' && '$bin' export --db d.db --run 2 --table runs | grep -q ',interrupted,'"
"$bin" tinynet --steps 100000 $O --db e.db >e.txt 2>e.err &
pid=$!
i=0
while ! grep -q 'step' e.txt 2>/dev/null && test $i -lt 100; do sleep 0.1; i=$((i + 1)); done
sleep 0.3
kill -TERM $pid
wait $pid; st=$?
check "SIGTERM: exit 143 (128 + 15; was 130) and the summary so far" sh -c "test $st -eq 143 && grep -q '^summary: tinynet, session 1 (interrupted)' e.txt"
check "a number with a leading space (--steps ' 4'): exit 2" usage_error "--steps" tinynet --steps ' 4' $O
check "an unknown command still lists the commands (compare among them)" \
    sh -c "'$bin' nosuch 2>err.txt; test \$? -eq 2 && grep -q 'compare' err.txt"
exit $fail
