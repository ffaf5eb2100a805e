#!/bin/sh
# test_configure.sh — configure's answers to bad input: an unknown option, a bad --with-cuda
# directory or architecture, and a missing required library each stop it with a message that
# names the problem (and, for libraries, the Debian package to install).
src="${top_srcdir:-.}"
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
n=0; fail=0
expect_error() { # expect_error DESCRIPTION PATTERN ENV-AND-ARGS...
    n=$((n + 1)); d=$1; pat=$2; shift 2
    if (cd "$work" && env "$@" >out.txt 2>&1); then
        echo "not ok $n - $d (configure succeeded)"; fail=1
    elif grep -q "error: .*$pat" "$work/out.txt"; then
        echo "ok $n - $d"
    else
        echo "not ok $n - $d"; sed 's/^/# /' "$work/out.txt" | tail -5; fail=1
    fi
}
echo "1..5"
expect_error "unknown option is an error naming it" "unrecognized option.*--with-cudaa" "$src/configure" --with-cudaa
expect_error "unknown --enable is an error" "unrecognized option.*--enable-turbo" "$src/configure" --enable-turbo
expect_error "--with-cuda=DIR that does not exist" "no CUDA toolkit in /nonexistent/cuda" "$src/configure" --with-cuda=/nonexistent/cuda
expect_error "bad --with-cuda-arch" "sm_banana" "$src/configure" --without-cuda --with-cuda-arch=sm_banana
expect_error "missing SQLite names the Debian package" "libsqlite3-dev" PKG_CONFIG_LIBDIR=/nonexistent "$src/configure" --without-cuda
exit $fail
