#!/bin/sh
# test_file_limits.sh — a write past the file size limit (`ulimit -f`): fp16probe does not die of SIGXFSZ
# (status 153, nothing printed, runs left `running`); it exits 1 with one line naming the limit, the runs are
# marked failed, and no temporary file is left behind.
bin="$(cd "${top_builddir:-.}" && pwd)/fp16probe"
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
echo "1..4"
# before the schema is committed
(cd "$work" && ulimit -f 64 && "$bin" compare --model tinynet --image-size 32 --batch 4 --steps 30 \
    --precision fp32,fp16 --no-tui --db a.db >a.out 2>&1; echo $? >a.rc)
rc=$(cat "$work/a.rc")
if [ "$rc" = 1 ] && grep -q '^fp16probe: compare: a.db: the file size limit (ulimit -f) was reached' "$work/a.out"; then
    echo "ok 1 - limit hit while creating the store: exit 1, one line naming the limit"
else
    echo "not ok 1 - limit hit while creating the store: exit 1, one line naming the limit (exit $rc)"; sed 's/^/# /' "$work/a.out"
fi
# in the middle of a run (histograms every step fill the file)
(cd "$work" && ulimit -f 300 && "$bin" compare --model tinynet --image-size 32 --batch 4 --steps 200 --hist-every 1 \
    --precision fp32,fp16 --no-tui --db b.db >b.out 2>&1; echo $? >b.rc)
rc=$(cat "$work/b.rc")
if [ "$rc" = 1 ] && grep -q 'the file size limit (ulimit -f) was reached' "$work/b.out"; then
    echo "ok 2 - limit hit mid-run: exit 1 (not 153), the limit named"
else
    echo "not ok 2 - limit hit mid-run: exit 1 (not 153), the limit named (exit $rc)"; sed 's/^/# /' "$work/b.out"
fi
left=$("$bin" ls --db "$work/b.db" 2>&1 | grep -c ' running')
[ "$left" = 0 ] && "$bin" ls --db "$work/b.db" 2>&1 | grep -q ' failed' &&
    echo "ok 3 - no run is left running; the runs say failed" ||
    { echo "not ok 3 - no run is left running; the runs say failed"; "$bin" ls --db "$work/b.db" 2>&1 | sed 's/^/# /'; }
tmp=$(ls "$work" | grep -c '\.tmp\.')
[ "$tmp" = 0 ] && echo "ok 4 - no temporary file left behind" || { echo "not ok 4 - no temporary file left behind"; ls "$work" | sed 's/^/# /'; }
