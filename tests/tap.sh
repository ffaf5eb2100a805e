# tests/tap.sh — sourced by the shell tests (`. "$(dirname "$0")/tap.sh"`): TAP counters n and fail,
# `check DESCRIPTION COMMAND...` (ok when the command succeeds; its output is discarded) and
# `tap_workdir NAME` (a fresh $tmp, removed on exit, made the current directory). Tests end with `exit $fail`.
n=0; fail=0
check() { # check DESCRIPTION COMMAND...
    n=$((n + 1)); d=$1; shift
    if "$@" >/dev/null 2>&1; then echo "ok $n - $d"; else echo "not ok $n - $d"; fail=1; fi
}
tap_workdir() { # tap_workdir NAME: $tmp is ${TMPDIR:-/tmp}/fp16probe-NAME-XXXXXX
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/fp16probe-$1-XXXXXX") || exit 1
    trap 'rm -rf "$tmp"' EXIT
    cd "$tmp" || exit 1
}
