#!/bin/sh
# bench_vs_pytorch.sh — issue 4's side-by-side figure: a ResNet-50 fp32 training step (forward,
# backward, SGD) at 64x64, batch 16, 2 threads, ours against PyTorch's best CPU layout, alternating
# runs; prints the medians and "bench: resnet50_step_vs_pytorch=... ratio=ours/pytorch".
# Both sides run with the OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE tuning variables unset.
set -u
bin="${top_builddir:-.}/fp16probe"
here=$(cd "$(dirname "$0")" && pwd)
py=${FP16PROBE_PYTHON:-/usr/bin/python3}
steps=${BENCH_STEPS:-14}
warm=4
rounds=${BENCH_ROUNDS:-2}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

ours_ms() { # median wall_ns of the steps after warm-up, in ms
    rm -f "$tmp/s.db"
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$bin" train --model resnet50 --precision fp32 --image-size 64 --batch 16 --steps "$steps" \
        --threads 2 --eval-batches 1 --db "$tmp/s.db" >/dev/null 2>&1 || { echo nan; return; }
    "$bin" export --db "$tmp/s.db" --run 1 --table steps --csv - | tr -d '\r' |
        awk -F, -v w="$warm" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "wall_ns") c = i; next }
                              NR - 1 > w { print $c / 1e6 }' | sort -g |
        awk '{ v[n++] = $1 } END { print n ? (n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2) : "nan" }'
}

best_ours=""; best_torch=""
for r in $(seq "$rounds"); do
    o=$(ours_ms)
    t=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$py" "$here/pytorch_train_step.py" --steps $((steps - warm)) --warmup "$warm" --threads 2 2>/dev/null |
        sed -n 's/^pytorch: best_ms=//p')
    echo "# round $r: fp16probe ${o} ms/step, pytorch best layout ${t:-unavailable} ms/step"
    best_ours=$(printf '%s\n%s\n' "$best_ours" "$o" | awk 'NF && $1 != "nan"' | sort -g | head -1)
    [ -n "$t" ] && best_torch=$(printf '%s\n%s\n' "$best_torch" "$t" | awk 'NF' | sort -g | head -1)
done
echo "bench: resnet50_fp32_step_64px_b16=${best_ours:-nan} unit=ms"
if [ -n "$best_torch" ]; then
    echo "bench: pytorch_fp32_step_64px_b16=$best_torch unit=ms"
    awk -v o="$best_ours" -v t="$best_torch" \
        'BEGIN { printf "bench: resnet50_step_vs_pytorch=%.3f unit=x ratio=%.3f\n", o / t, o / t }'
else
    echo "bench: resnet50_step_vs_pytorch=nan unit=x (PyTorch unavailable: apt-get install python3-torch python3-torchvision)"
fi
