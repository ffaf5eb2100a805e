#!/bin/sh
# test_cli.sh — the fp16probe binary as a user meets it: --help, --version, unknown commands and
# arguments give one line and a non-zero status, and a CUDA build still starts without a GPU.
bin="${top_builddir:-.}/fp16probe"
. "$(dirname "$0")/tap.sh"
echo "1..14"
check "--help exits 0 and lists the commands" sh -c "'$bin' --help | grep -q 'devices'"
check "--version prints the version" sh -c "'$bin' --version | grep -q '^fp16probe [0-9]'"
check "no arguments is a usage error (status 2)" sh -c "'$bin'; test \$? -eq 2"
check "unknown command: status 2" sh -c "'$bin' frobnicate; test \$? -eq 2"
check "unknown command: one line naming it and the valid ones" \
    sh -c "out=\$('$bin' frobnicate 2>&1); test \$(printf '%s\n' \"\$out\" | wc -l) -eq 1 && printf '%s' \"\$out\" | grep -q \"'frobnicate'.*devices\""
check "devices starts without a GPU and says why" sh -c "'$bin' devices | grep -Eq '^gpu: (unavailable: .+; using the CPU|.+device)'"
check "devices rejects a stray argument (status 2)" sh -c "'$bin' devices --bogus; test \$? -eq 2"
check "formats prints the fp16 row with 65504" sh -c "'$bin' formats | grep -Eq '^fp16 .* 65504 '"
check "formats prints the e4m3 row saturating at 448" sh -c "'$bin' formats | grep -Eq '^e4m3 .* 448 .*saturates'"
check "models --image-size 64 lists resnet50" sh -c "'$bin' models --image-size 64 | grep -q '^resnet50 '"
check "models --image-size ' 64' (a leading space): status 2, one line naming the value" \
    sh -c "out=\$('$bin' models --image-size ' 64' 2>&1 >/dev/null); test \$? -eq 2 && test \$(printf '%s\n' \"\$out\" | wc -l) -eq 1 && printf '%s' \"\$out\" | grep -q \"got ' 64'\""
# OpenBLAS's kernels (trainer/run/blas_core.c): a user's OPENBLAS_CORETYPE wins; unset, a CPU with AVX2 never runs
# OpenBLAS's generic fallback kernels (its detection falls back to them where a VM hides the CPU model).
skip() { n=$((n + 1)); echo "ok $n # SKIP $1"; }
generic='Unknown|Katmai|Coppermine|Northwood|Prescott|Banias|Core2|Penryn|Dunnington|Nehalem|Atom|Athlon|Opteron|Opteron_SSE3|Barcelona|Nano'
kernels() { "$@" "$bin" devices | sed -n 's/^cpu: BLAS kernels: //p'; }
user_wins() { kernels env OPENBLAS_CORETYPE=Prescott | grep -q '^Prescott (OPENBLAS_CORETYPE)$'; }
not_generic() { k=$(kernels env -u OPENBLAS_CORETYPE -u FP16PROBE_BLAS_CORE); [ -n "$k" ] && ! echo "$k" | grep -Eq "^($generic) "; }
once() { kernels env -u OPENBLAS_CORETYPE FP16PROBE_BLAS_CORE=x | grep -q .; }
if [ -n "$(kernels env)" ]; then
    check "devices: OPENBLAS_CORETYPE=Prescott is kept and named as the chooser" user_wins
    if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
        check "devices: OPENBLAS_CORETYPE unset on a CPU with AVX2 + FMA: not a generic kernel set" not_generic
    else
        skip "no AVX2 + FMA on this CPU"
    fi
    check "FP16PROBE_BLAS_CORE set (a second start): no restart loop, devices answers" once
else
    skip "not OpenBLAS"; skip "not OpenBLAS"; skip "not OpenBLAS"
fi
exit $fail
