#!/bin/sh
# test_tui_signals.sh — the real `fp16probe tui` under signals and odd terminals (TAP, issue 21): after
# SIGWINCH (sent straight and through a tmux resize) the dashboard stays idle between polls (no spin:
# under 0.3 s of CPU per second, where the old loop burned a core) and still follows the file (a
# session added afterwards appears); TERM=dumb is refused with one line and exit 1, like an unknown
# TERM, and the terminal is left alone. Skips without tmux or sqlite3.
bin="${top_builddir:-.}/fp16probe"
fix="${top_builddir:-.}/tests/test_tui_fixture"
command -v tmux >/dev/null 2>&1 || { echo "1..0 # SKIP tmux is not installed"; exit 0; }
command -v sqlite3 >/dev/null 2>&1 || { echo "1..0 # SKIP sqlite3 is not installed"; exit 0; }
[ -r /proc/self/stat ] || { echo "1..0 # SKIP no /proc"; exit 0; }
case "$bin" in /*) ;; *) bin="$PWD/$bin" ;; esac
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tui_sig.XXXXXX") || exit 1
sock="$tmp/sock"
T() { tmux -S "$sock" "$@"; }
cleanup() { T kill-server >/dev/null 2>&1; rm -rf "$tmp"; }
trap cleanup EXIT
n=0; fail=0
ok() { n=$((n+1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; T capture-pane -p -t "$3" 2>/dev/null | sed 's/^/# /'; fi; }
waitfor() { i=0; while [ $i -lt 100 ]; do T capture-pane -p -t "$1" | grep -q -- "$2" && return 0; sleep 0.05; i=$((i+1)); done; return 1; }
# CPU ticks (user + system) of process $1
ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }
hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
# ticks burned over one second of wall time, as a percentage of a core
busy() { a=$(ticks "$1"); sleep 1; b=$(ticks "$1"); echo $(( (b - a) * 100 / hz )); }
echo "1..6"
"$fix" "$tmp/f.db" >/dev/null || { echo "Bail out! fixture"; exit 1; }
T -f /dev/null new-session -d -s tui -x 100 -y 30 \
    "sh -c 'echo \$\$ >$tmp/pid; exec env LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=screen-256color $bin tui --db $tmp/f.db --refresh 100'; echo EXITED \$?; sleep 5"
T set-option -t tui status off >/dev/null 2>&1
waitfor tui "speedup 2.00x"; ok $? "dashboard up" tui
pid=$(cat "$tmp/pid")
kill -WINCH "$pid"; sleep 0.2; kill -WINCH "$pid"
T resize-window -t tui -x 120 -y 40 >/dev/null 2>&1
sleep 0.5
b=$(busy "$pid")
[ "$b" -lt 30 ]; ok $? "after SIGWINCH x2 and a resize: idle between polls (${b}% of a core over 1 s)" tui
now=$(date +%s)000000000
sqlite3 "$tmp/f.db" "PRAGMA busy_timeout=5000; INSERT INTO sessions(id, name, start) VALUES (2, 'after the signal', $now);" >/dev/null
waitfor tui "session 2 has no runs yet"; ok $? "after the signals: still polling (a new session appears)" tui
T send-keys -t tui q
waitfor tui "EXITED 0"; ok $? "q quits with status 0" tui
# TERM=dumb: newterm accepts it, but it cannot address the cursor
T new-window -d -t tui -n dumb \
    "env LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=dumb $bin tui --db $tmp/f.db --refresh 100 2>$tmp/dumb.err; echo EXITED \$?; sleep 5"
waitfor tui:dumb "EXITED"
T capture-pane -p -t tui:dumb | grep -q "EXITED 1"; ok $? "TERM=dumb: exit 1" tui:dumb
[ "$(wc -l <"$tmp/dumb.err")" = 1 ] && grep -q "terminal type 'dumb'" "$tmp/dumb.err"
ok $? "TERM=dumb: one line naming the terminal: $(cat "$tmp/dumb.err")" tui:dumb
exit $fail
