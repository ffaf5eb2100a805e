#!/bin/sh
# test_store_cli.sh — `fp16probe ls` and `fp16probe export` as a user meets them, on the fixture that
# tests/test_store_fixture writes: one line per session and run, RFC 4180 CSV, one-line errors with
# status 1 (runtime) or 2 (usage), and bad files refused without being created or modified.
bin="${top_builddir:-.}/fp16probe"
. "$(dirname "$0")/tap.sh"
fixture="${top_builddir:-.}/tests/test_store_fixture"
if ! "$bin" ls --help >/dev/null 2>&1; then
    echo "1..0 # SKIP fp16probe has no 'ls' command (cli/store_cli.mk not included)"; exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fp16probe-cli-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
db="$tmp/runs.db"
"$fixture" "$db" || { echo "1..0 # SKIP cannot write the fixture"; exit 0; }
# one_line_error STATUS WORD COMMAND...: exit status STATUS, exactly one stderr line mentioning WORD
one_line_error() {
    want=$1; word=$2; shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"; got=$?
    test "$got" -eq "$want" && test "$(wc -l <"$tmp/err")" -eq 1 && grep -q "^fp16probe: .*$word" "$tmp/err"
}
echo "1..28"
check "ls --help exits 0" sh -c "'$bin' ls --help | grep -q 'usage: fp16probe ls'"
check "export --help lists the tables" sh -c "'$bin' export --help | grep -q 'steps'"
check "ls: one session line" sh -c "test \$('$bin' ls --db '$db' | grep -c '^session 1 .*fixture .*(2 runs)') -eq 1"
check "ls: run 1 line with model, policy, device, steps, status, loss" \
    sh -c "'$bin' ls --db '$db' | grep -Eq '^  run 1 +fp32 +resnet18 +fp32 +cpu +steps 20 +finished +loss 0.15'"
check "ls: run 2 line (fp16 arm)" sh -c "'$bin' ls --db '$db' | grep -Eq '^  run 2 +fp16 +resnet18 +fp16 .*steps 20 +finished +loss 0.4'"
check "ls --db=FILE form" sh -c "'$bin' ls --db='$db' | grep -q '^  run 2'"
check "ls in a directory without a database: status 1, one line naming it" \
    sh -c "cd '$tmp' && mkdir -p empty && cd empty && out=\$('$bin' ls 2>&1); test \$? -eq 1 && test \$(printf '%s\n' \"\$out\" | wc -l) -eq 1 && printf '%s' \"\$out\" | grep -q 'fp16probe.db' && test ! -e fp16probe.db"
check "ls rejects a stray argument (status 2)" one_line_error 2 "'--frob'" "$bin" ls --frob
check "export steps: header with step and loss" sh -c "'$bin' export --db '$db' --run 1 --table steps | head -1 | grep -q '^run,step,loss,'"
check "export steps: CRLF line ends, 21 lines" sh -c "test \$('$bin' export --db '$db' --run 1 --table steps | grep -c \"\$(printf '\r')\$\") -eq 21"
check "export steps: step 1 loss 1.5" sh -c "'$bin' export --db '$db' --run 1 --table steps | grep -q '^1,1,1.5,'"
check "export --csv FILE writes the file" sh -c "'$bin' export --db '$db' --run 2 --table runs --csv '$tmp/runs.csv' && grep -q '\"imagenet, subset \"\"tiny\"\"\"' '$tmp/runs.csv'"
check "export events keeps a quoted newline" sh -c "'$bin' export --db '$db' --run 2 --table events --csv - | grep -q '^scale halved\"'"
check "export kernels resolves names" sh -c "'$bin' export --db '$db' --run 1 --table kernels | grep -q 'sgemm_128x64_nn'"
check "export unknown table: status 2, one line listing the tables" one_line_error 2 "unknown table 'bogus'.*layer_times" \
    "$bin" export --db "$db" --run 1 --table bogus
check "export unknown run: status 1, one line" one_line_error 1 "no run 9" "$bin" export --db "$db" --run 9 --table steps
check "export unknown run leaves no CSV file" sh -c "! '$bin' export --db '$db' --run 9 --table steps --csv '$tmp/none.csv'; test ! -e '$tmp/none.csv'"
check "export without --run: status 2" one_line_error 2 "required" "$bin" export --db "$db" --table steps
check "export --run abc: status 2" one_line_error 2 "abc" "$bin" export --db "$db" --run abc --table steps
printf 'not a database\n' >"$tmp/notes.txt"; cp "$tmp/notes.txt" "$tmp/notes.orig"
check "ls on a text file: status 1, one line naming it" one_line_error 1 "notes.txt: not an fp16probe database" "$bin" ls --db "$tmp/notes.txt"
check "the text file is unchanged, no side files" sh -c "cmp -s '$tmp/notes.txt' '$tmp/notes.orig' && test ! -e '$tmp/notes.txt-wal' && test ! -e '$tmp/notes.txt-shm'"
check "ls on a missing directory: status 1, not created" sh -c "! '$bin' ls --db '$tmp/nope/x.db' 2>/dev/null && test ! -e '$tmp/nope'"
cp "$db" "$tmp/half.db"; size=$(wc -c <"$tmp/half.db"); truncate -s $((size / 2)) "$tmp/half.db" 2>/dev/null || dd if="$db" of="$tmp/half.db" bs=$((size / 2)) count=1 2>/dev/null
check "ls on a truncated database: status 1, one line" one_line_error 1 "half.db: truncated" "$bin" ls --db "$tmp/half.db"
check "ls and export leave the database without side files" sh -c "test ! -e '$db-wal' && test ! -e '$db-shm'"
# a damaged page of the runs table (issue 21 #10): ls and export both name the corruption, with one line
# and status 1 (built with --enable-sanitizers, LeakSanitizer fails ls's error path when it leaks: exit 23)
"$fixture" "$tmp/f2.db" --damage-runs "$tmp/damaged.db" >/dev/null 2>&1
check "ls on a damaged runs page: status 1, one line naming the corruption" \
    one_line_error 1 "damaged.db: the database is corrupt" "$bin" ls --db "$tmp/damaged.db"
check "export on it: status 1, one line naming the corruption (was 'no run 1')" \
    one_line_error 1 "damaged.db: the database is corrupt while looking up run 1" \
    "$bin" export --db "$tmp/damaged.db" --run 1 --table steps
# an output that fills up (issue 21 #10): the cause is kept, the output named, no file left
if [ -w /dev/full ]; then
    check "export to a full device: status 1, one line naming the output and the cause" \
        one_line_error 1 "standard output: cannot write the CSV: No space left on device" \
        sh -c "'$bin' export --db '$db' --run 1 --table layer_times >/dev/full"
else
    n=$((n + 1)); echo "ok $n # SKIP no /dev/full"
fi
check "export --csv FILE past the file size limit: one line naming the file and the cause, no file" \
    sh -c "(ulimit -f 1; '$bin' export --db '$db' --run 1 --table layer_times --csv '$tmp/big.csv' 2>'$tmp/err'); test \$? -eq 1 &&
        test \$(wc -l <'$tmp/err') -eq 1 && grep -q 'big.csv: cannot write the CSV: File too large' '$tmp/err' &&
        test -z \"\$(ls '$tmp' | grep big.csv)\""
exit $fail
