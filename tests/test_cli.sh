#!/bin/sh
# test_cli.sh — the fp16probe binary as a user meets it: --help, --version, unknown commands and
# arguments give one line and a non-zero status, and a CUDA build still starts without a GPU.
bin="${top_builddir:-.}/fp16probe"
. "$(dirname "$0")/tap.sh"
echo "1..11"
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
exit $fail
