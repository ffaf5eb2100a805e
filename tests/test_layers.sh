#!/bin/sh
# test_layers.sh — every include points down (tools/check-layers on this tree), and the checker itself
# catches an upward include in a scratch tree (probe/ including the engine, the engine including run/).
src="${top_srcdir:-.}"
echo "1..3"
if out=$("$src/tools/check-layers" "$src" 2>&1); then
    echo "ok 1 - no include points up in the tree"
else
    echo "not ok 1 - no include points up in the tree"; echo "$out" | sed 's/^/# /'
fi
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lib" "$work/probe" "$work/trainer/run" "$work/trainer/cpu" "$work/tui" "$work/reports" "$work/cli"
printf '#include "error.h"\n' >"$work/lib/error.h"
printf '#include "trainer/model.h"\n' >"$work/probe/p.c"
: >"$work/trainer/model.h"
if out=$("$src/tools/check-layers" "$work" 2>&1); then
    echo "not ok 2 - probe/ including the engine is caught"
else
    echo "$out" | grep -q 'probe/p.c:1: probe includes trainer/model.h (engine)' &&
        echo "ok 2 - probe/ including the engine is caught" || { echo "not ok 2 - probe/ including the engine is caught"; echo "$out" | sed 's/^/# /'; }
fi
rm "$work/probe/p.c"
: >"$work/trainer/run/arm.h"
printf '#include "trainer/run/arm.h"\n' >"$work/trainer/cpu/conv.c"
if out=$("$src/tools/check-layers" "$work" 2>&1); then
    echo "not ok 3 - the engine including run/ is caught"
else
    echo "$out" | grep -q 'engine includes trainer/run/arm.h (run)' && echo "ok 3 - the engine including run/ is caught" ||
        { echo "not ok 3 - the engine including run/ is caught"; echo "$out" | sed 's/^/# /'; }
fi
