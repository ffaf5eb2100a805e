#!/bin/sh
# test_dist_overlap.sh — the gradient all-reduce overlapped with the backward: tests/test_dist_overlap under
# `mpirun --oversubscribe -np 2` (as root with Open MPI's two environment variables); its TAP lines as they are.
# Skips without mpirun, or when the program skips (a build without MPI).
prog="${top_builddir:-.}/tests/test_dist_overlap"
. "$(dirname "$0")/tap.sh"
tap_mpi
prog_abs=$(cd "$(dirname "$prog")" && pwd)/$(basename "$prog")
out=$(mktemp "${TMPDIR:-/tmp}/fp16probe-dist-overlap-XXXXXX") || exit 1
trap 'rm -f "$out" "$out.err"' EXIT
timeout 300 $MPI "$prog_abs" >"$out" 2>"$out.err"; st=$?
cat "$out"
if grep -q '^1\.\.0 # SKIP' "$out"; then exit 0; fi
if [ $st -ne 0 ] || grep -q '^not ok' "$out" || ! grep -q '^1\.\.[1-9]' "$out"; then
    echo "# mpirun exit $st"; sed 's/^/# /' "$out.err" | tail -5
    exit 1
fi
exit 0
