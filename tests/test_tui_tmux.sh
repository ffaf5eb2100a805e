#!/bin/sh
# test_tui_tmux.sh — the real `fp16probe tui` in a detached tmux session on the fixture database
# (TAP): at 80x24 and 200x50, keys select a layer, change role (r) and format (f), sort (s), resize
# (tmux resize-window), help, and quit (q); capture-pane shows the right numbers. Skips without tmux.
bin="${top_builddir:-.}/fp16probe"
fix="${top_builddir:-.}/tests/test_tui_fixture"
if ! command -v tmux >/dev/null 2>&1; then echo "1..0 # SKIP tmux is not installed"; exit 0; fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tui_tmux.XXXXXX") || exit 1
sock="$tmp/sock"
T() { tmux -S "$sock" "$@"; }
cleanup() { T kill-server >/dev/null 2>&1; rm -rf "$tmp"; }
trap cleanup EXIT
n=0; fail=0
ok() { n=$((n+1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; T capture-pane -p -t tui | sed 's/^/# /'; fi; }
# wait until the pane shows $1 (up to ~3 s)
waitfor() { i=0; while [ $i -lt 60 ]; do T capture-pane -p -t tui | grep -q -- "$1" && return 0; sleep 0.05; i=$((i+1)); done; return 1; }
echo "1..12"
"$fix" "$tmp/f.db" || { echo "Bail out! fixture"; exit 1; }
T -f /dev/null new-session -d -s tui -x 80 -y 24 "env ESCDELAY=25 LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=screen-256color $bin tui --db $tmp/f.db --refresh 100; echo EXITED \$?; sleep 5"
T set-option -t tui status off >/dev/null 2>&1
T resize-window -t tui -x 80 -y 24 >/dev/null 2>&1
waitfor "speedup 2.00x"; ok $? "80x24: header and speedup 2.00x"
waitfor "layer3.2.conv2"; ok $? "80x24: layer table"
T capture-pane -p -t tui | grep -q "E n/a"; ok $? "80x24: energy n/a"
T send-keys -t tui j j j j j j
waitfor "ovf 3 sub 4 unf 2"; ok $? "j x6: histogram of layer3.2.conv2 (fp16 ovf 3 sub 4 unf 2)"
T send-keys -t tui r
waitfor "role:act grad"; ok $? "r: role activation gradient"
T send-keys -t tui R f
waitfor "fmt:bf16"; ok $? "f: format bf16"
T send-keys -t tui F s s s s s s s s
waitfor "sort:overflow"; ok $? "s: sort by overflow"
T resize-window -t tui -x 200 -y 50
waitfor "first non-finite gradient in layer3.2.conv2"; ok $? "resize to 200x50: events panel appears"
waitfor "loss scale 65536 -> 32768"; ok $? "200x50: loss-scale change event"
T resize-window -t tui -x 60 -y 20
waitfor "terminal too small: 60x20"; ok $? "resize to 60x20: too small message"
T resize-window -t tui -x 100 -y 30
T send-keys -t tui g Enter
waitfor "layer 6: layer3.2.conv2"; ok $? "Enter: layer detail"
T send-keys -t tui Enter
sleep 0.2
T send-keys -t tui q
waitfor "EXITED 0"; ok $? "q quits with status 0"
exit $fail
