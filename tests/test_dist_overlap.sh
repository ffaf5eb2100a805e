#!/bin/sh
# test_dist_overlap.sh — the gradient all-reduce overlapped with the backward: tests/test_dist_overlap under
# `mpirun --oversubscribe -np 2` (as root with Open MPI's two environment variables); its TAP lines as they are.
# Skips without mpirun, or when the program skips (a build without MPI).
prog="${top_builddir:-.}/tests/test_dist_overlap"
if ! command -v mpirun >/dev/null 2>&1; then
    echo "1..0 # SKIP mpirun not found (Debian: openmpi-bin)"; exit 0
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# Under the ASan suite: Open MPI's own allocations (its components, freed or unloaded at MPI_Finalize) are reported as
# leaks by LeakSanitizer with no usable stack, so MPI ranks run without leak detection (address and UB checks stay on);
# our code's leaks are checked by the single-process tests.
case "${ASAN_OPTIONS:-}" in *detect_leaks=1*) export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" ;; esac
prog_abs=$(cd "$(dirname "$prog")" && pwd)/$(basename "$prog")
out=$(mktemp "${TMPDIR:-/tmp}/fp16probe-dist-overlap-XXXXXX") || exit 1
trap 'rm -f "$out" "$out.err"' EXIT
timeout 300 mpirun --oversubscribe -np 2 "$prog_abs" >"$out" 2>"$out.err"; st=$?
cat "$out"
if grep -q '^1\.\.0 # SKIP' "$out"; then exit 0; fi
if [ $st -ne 0 ] || grep -q '^not ok' "$out" || ! grep -q '^1\.\.[1-9]' "$out"; then
    echo "# mpirun exit $st"; sed 's/^/# /' "$out.err" | tail -5
    exit 1
fi
exit 0
