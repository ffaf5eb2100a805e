# tests/tap.sh — sourced by the shell tests (`. "$(dirname "$0")/tap.sh"`): TAP counters n and fail,
# `check DESCRIPTION COMMAND...` (ok when the command succeeds; its output is discarded) and
# `tap_workdir NAME` (a fresh $tmp, removed on exit, made the current directory) and `tap_mpi` (the multi-rank
# tests' launcher). Tests end with `exit $fail`.
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
tap_mpi() { # tap_mpi: skip the whole test without mpirun; else $MPI, 2 ranks on one machine (as root too)
    if ! command -v mpirun >/dev/null 2>&1; then
        echo "1..0 # SKIP mpirun not found (Debian: openmpi-bin)"; exit 0
    fi
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
    # Under the ASan suite: Open MPI's own allocations (its components, freed or unloaded at MPI_Finalize) are
    # reported as leaks by LeakSanitizer with no usable stack, so MPI ranks run without leak detection (address and
    # UB checks stay on); our code's leaks are checked by the single-process tests.
    case "${ASAN_OPTIONS:-}" in *detect_leaks=1*) export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" ;; esac
    MPI="mpirun --oversubscribe -np 2"
}
