#!/bin/sh
# digits_precision.sh [STEPS] — issue 19's check on real data: scikit-learn's digits written as CIFAR-10
# (bench/digits_to_cifar10.py), resnet18 under fp32, fp16, half and fp16-noscale, then the precision summary
# (`report --summary`) and summary.csv's precision columns. What it must show: fp16-noscale's and half's
# underflow (the values they flushed to zero), half's lost updates, and fp16's headline not made of
# update-role counts. Needs /usr/bin/python3 with numpy and sklearn (apt-get install python3-sklearn):
# without them it says so and exits 77 (skip).
# Environment: FP16PROBE (the binary; default build/fp16probe), KEEP=1 keeps the work directory.
set -u
steps=${1:-150}
bin=${FP16PROBE:-build/fp16probe}
py=/usr/bin/python3
here=$(dirname "$0")
if ! "$py" -c 'import numpy, sklearn' 2>/dev/null; then
    echo "digits_precision: SKIP: $py lacks numpy / sklearn (apt-get install -y python3-sklearn)"; exit 77
fi
[ -x "$bin" ] || { echo "digits_precision: no binary at $bin (set FP16PROBE)"; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/digits-XXXXXX") || exit 1
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
"$py" "$here/digits_to_cifar10.py" "$work/digits" || exit 1
db="$work/runs.db"
"$bin" compare --model resnet18 --precision fp32,fp16,half,fp16-noscale --data "cifar10:$work/digits" \
    --classes 10 --image-size 32 --batch 16 --steps "$steps" --hist-every 10 --eval-batches 0 --no-tui \
    --db "$db" >"$work/compare.out" 2>&1 || { tail -20 "$work/compare.out"; exit 1; }
sed -n '/^summary:/,$p' "$work/compare.out"
echo
"$bin" report --db "$db" --summary --csv "$work/csv" --html "$work/report.html" || exit 1
echo
echo "summary.csv (precision columns):"
"$py" - "$work/csv/summary.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
cols = ["policy", "final_loss_scale", "hist_sampled_steps", "underflow", "underflow_flushed", "overflow",
        "lost_updates_pct", "val_top1", "val_images", "val_top1_ci95_lo", "val_top1_ci95_hi",
        "top1_gap_within_uncertainty", "emulated_on_cpu"]
print(",".join(cols))
for r in rows:
    print(",".join(r.get(c, "?") for c in cols))
ok = True
by = {r["policy"]: r for r in rows}
for p in ("half", "fp16-noscale"):
    if p in by and int(by[p]["underflow"] or 0) == 0:
        print(f"FAIL: {p} shows no underflow"); ok = False
if "half" in by and not by["half"]["lost_updates_pct"]:
    print("FAIL: half's lost updates missing"); ok = False
print("digits_precision: " + ("PASS" if ok else "FAIL"))
sys.exit(0 if ok else 1)
PY
