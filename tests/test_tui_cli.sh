#!/bin/sh
# test_tui_cli.sh — `fp16probe tui` from the command line (TAP): the headless frame of the fixture
# equals the golden screen; a missing file gives one line naming it and exit 1; no TERM gives one
# clear line and exit 1 (documented: no dumb fallback, --headless is the text mode); bad options (not plain decimals too) exit 2.
bin="${top_builddir:-.}/fp16probe"
fix="${top_builddir:-.}/tests/test_tui_fixture"
golden="${top_srcdir:-..}/tests/fixtures/tui/screen_80x24.txt"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tui_cli.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
n=0; fail=0
ok() { n=$((n+1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi; }
echo "1..10"
"$fix" "$tmp/f.db"; ok $? "fixture written"
"$bin" tui --db "$tmp/f.db" --headless 80x24 --ascii >"$tmp/out.txt" 2>"$tmp/err.txt"; ok $? "headless 80x24 exits 0"
cmp -s "$tmp/out.txt" "$golden"; r=$?; [ $r = 0 ] || diff "$golden" "$tmp/out.txt" | sed 's/^/# /' | head -20
ok $r "headless frame equals $golden"
"$bin" tui --db "$tmp/nope.db" >"$tmp/o" 2>"$tmp/e"; r=$?
[ $r = 1 ] && [ "$(wc -l <"$tmp/e")" = 1 ] && grep -q "nope.db" "$tmp/e" && [ ! -e "$tmp/nope.db" ]; ok $? "missing db: exit 1, one line naming it: $(cat "$tmp/e")"
env -u TERM "$bin" tui --db "$tmp/f.db" </dev/null >"$tmp/o" 2>"$tmp/e"; r=$?
[ $r = 1 ] && [ "$(wc -l <"$tmp/e")" = 1 ] && grep -q "TERM is not set" "$tmp/e"; ok $? "no TERM: exit 1, one clear line: $(cat "$tmp/e")"
"$bin" tui --db "$tmp/f.db" --refresh 5 >"$tmp/o" 2>"$tmp/e"; ok $([ $? = 2 ] && echo 0 || echo 1) "bad --refresh: exit 2"
"$bin" tui --db "$tmp/f.db" --refresh ' 500' --headless 80x24 >"$tmp/o" 2>"$tmp/e"; r=$?
[ $r = 2 ] && grep -q "' 500'" "$tmp/e"; ok $? "--refresh ' 500' (a space strtoll would take): exit 2 naming it"
"$bin" tui --db "$tmp/f.db" --session +1 --headless 80x24 >"$tmp/o" 2>"$tmp/e"; r=$?
[ $r = 2 ] && grep -q "'+1'" "$tmp/e"; ok $? "--session +1: exit 2 naming it"
"$bin" tui --db "$tmp/f.db" --headless 60x20 >"$tmp/o" 2>&1
grep -q "terminal too small: 60x20" "$tmp/o"; ok $? "headless 60x20: too small message"
"$bin" tui --db "$tmp/f.db" --headless 200x50 --keys 'jjjjjjr' >"$tmp/o" 2>&1
grep -q "layer3.2.conv2 act grad fp16" "$tmp/o"; ok $? "headless keys: select and role"
exit $fail
