#!/bin/sh
# test_configure.sh — configure's answers to bad input: an unknown option, a bad --with-cuda
# directory or architecture, a --with-cudnn directory without cuDNN, and a missing required library
# each stop it with a message that names the problem (and, for libraries, the Debian package to
# install). With a CUDA toolkit here: a wheel-style cuDNN (lib/libcudnn.so.9 only, no libcudnn.so) is
# found through --with-cudnn, and the newest architecture's PTX is embedded.
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
echo "1..8"
expect_error "unknown option is an error naming it" "unrecognized option.*--with-cudaa" "$src/configure" --with-cudaa
expect_error "unknown --enable is an error" "unrecognized option.*--enable-turbo" "$src/configure" --enable-turbo
expect_error "--with-cuda=DIR that does not exist" "no CUDA toolkit in /nonexistent/cuda" "$src/configure" --with-cuda=/nonexistent/cuda
expect_error "bad --with-cuda-arch" "sm_banana" "$src/configure" --without-cuda --with-cuda-arch=sm_banana
expect_error "missing SQLite names the Debian package" "libsqlite3-dev" PKG_CONFIG_LIBDIR=/nonexistent "$src/configure" --without-cuda
expect_error "--with-cudnn=DIR without cudnn.h" "no include/cudnn.h in /nonexistent/cudnn" "$src/configure" --with-cuda --with-cudnn=/nonexistent/cudnn
cuda=/usr/local/cuda
if [ -x "$cuda/bin/nvcc" ] && [ -e "$cuda/lib64/libcudnn.so.9" ] && [ -f "$cuda/include/cudnn.h" ]; then
    wheel="$work/wheel/nvidia/cudnn"   # the layout of the nvidia-cudnn-cu13 wheel: no libcudnn.so link
    mkdir -p "$wheel/include" "$wheel/lib"
    for h in "$cuda"/include/cudnn*.h; do ln -s "$h" "$wheel/include/"; done
    ln -s "$cuda/lib64/libcudnn.so.9" "$wheel/lib/libcudnn.so.9"
    if (cd "$work" && "$src/configure" --with-cuda="$cuda" --with-cudnn="$wheel" --with-cuda-arch=sm_80,sm_90 \
            >out.txt 2>&1) && grep -q "cuDNN .*yes (>= 9, $wheel/lib)" "$work/out.txt"; then
        echo "ok 7 - --with-cudnn finds a wheel's libcudnn.so.9"
    else
        echo "not ok 7 - --with-cudnn finds a wheel's libcudnn.so.9"; grep -iE "cudnn|error" "$work/out.txt" | sed 's/^/# /'; fail=1
    fi
    if grep -q '^NVCCFLAGS = .*arch=compute_90,code=sm_90 .*arch=compute_90,code=compute_90' "$work/Makefile" &&
        ! grep -q '^NVCCFLAGS = .*arch=compute_80,code=compute_80' "$work/Makefile"; then
        echo "ok 8 - machine code for sm_80 and sm_90, PTX for compute_90 only"
    else
        echo "not ok 8 - machine code for sm_80 and sm_90, PTX for compute_90 only"; grep '^NVCCFLAGS' "$work/Makefile" | sed 's/^/# /'; fail=1
    fi
else
    echo "ok 7 # SKIP no CUDA toolkit with cuDNN in $cuda"
    echo "ok 8 # SKIP no CUDA toolkit with cuDNN in $cuda"
fi
exit $fail
