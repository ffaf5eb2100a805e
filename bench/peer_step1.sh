#!/bin/sh
# peer_step1.sh — fp16probe's step-1 loss against PyTorch's (bench/pytorch_peer.py) on the same
# torchvision weights and the same batch: prepare DIR (weights.safetensors + one CIFAR-10 batch),
# train 1 step with fp16probe per policy, read the step-1 loss from its database (export --table
# steps), compute the step-1 training-mode loss in PyTorch and print per policy
#   peer: step1 loss fp16probe[P]=X torch[P]=Y rel_diff=D tol=T ok|FAIL
# then "peer: step1 summary ok=N fail=N skip=N".  Exit 0 all compared agree, 1 a disagreement or a
# failed fp16probe run, 2 usage, 3 PyTorch missing (nothing compared).
#
# usage: bench/peer_step1.sh [--device cuda|cpu] [--model resnet50] [--batch 32] [--seed 1]
#                            [--policies fp32,fp16] [--via train|compare] [--dir DIR] [--keep]
#                            [--bin FP16PROBE] [--python PY]
# --batch: 32 or more for ResNet-50 (see the tolerances in pytorch_peer.py: at batch 8 its 1x1
# layer4 BN makes the loss ~10x more sensitive to rounding).  --via compare trains all policies as
# the arms of one `fp16probe compare` session (augmentation and shuffling on, as there), --via train
# one `fp16probe train` run each.  Env: FP16PROBE (binary), FP16PROBE_PYTHON (python with torch).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
peer="$here/pytorch_peer.py"
device=cuda model=resnet50 batch=32 seed=1 policies=fp32,fp16 via=train dir="" keep=0
bin=${FP16PROBE:-}
py=${FP16PROBE_PYTHON:-}

usage() { sed -n '10,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
    case $1 in
    --device) device=$2; shift ;;
    --model) model=$2; shift ;;
    --batch) batch=$2; shift ;;
    --seed) seed=$2; shift ;;
    --policies) policies=$2; shift ;;
    --via) via=$2; shift ;;
    --dir) dir=$2; shift ;;
    --keep) keep=1 ;;
    --bin) bin=$2; shift ;;
    --python) py=$2; shift ;;
    -h|--help) usage ;;
    *) echo "peer_step1.sh: unknown option $1" >&2; usage ;;
    esac
    shift || usage
done
case $device in cuda|cpu) ;; *) echo "peer_step1.sh: --device cuda|cpu" >&2; exit 2 ;; esac
case $via in train|compare) ;; *) echo "peer_step1.sh: --via train|compare" >&2; exit 2 ;; esac

if [ -z "$bin" ]; then
    for b in "${top_builddir:-}/fp16probe" "$top/build/fp16probe" "$top/fp16probe"; do
        [ -x "$b" ] && { bin=$b; break; }
    done
fi
if [ -z "$bin" ] || [ ! -x "$bin" ]; then echo "peer_step1.sh: no fp16probe binary (--bin or FP16PROBE)" >&2; exit 2; fi
if [ -z "$py" ]; then   # the first python that has torch (Debian's /usr/bin/python3 carries python3-torch)
    for p in python3 /usr/bin/python3; do
        if "$p" -c 'import torch, torchvision, numpy' >/dev/null 2>&1; then py=$p; break; fi
    done
fi
if [ -z "$py" ]; then
    echo "peer: unavailable (no python3 with torch, torchvision and numpy; set FP16PROBE_PYTHON)"
    exit 3
fi
if [ -z "$dir" ]; then
    dir=$(mktemp -d) || exit 1
    [ "$keep" = 1 ] || trap 'rm -rf "$dir"' EXIT
fi

# step1_loss DB RUN -> "loss device" of step 1 of RUN (from fp16probe export)
step1_loss() {
    { "$bin" export --db "$1" --run "$2" --table steps --csv - &&
      echo "--runs--" &&
      "$bin" export --db "$1" --run "$2" --table runs --csv -; } |
    "$py" -c '
import csv, sys
text = sys.stdin.read().replace("\r", "")
steps, runs = text.split("--runs--\n")
loss = dev = "nan"
for r in csv.DictReader(steps.splitlines()):
    if r["step"] == "1":
        loss = r["loss"]
for r in csv.DictReader(runs.splitlines()):
    dev = r["device"].replace(" ", "_") or "?"
print(loss, dev)'
}

# run_id DB POLICY -> the run of the compare session whose policy is POLICY
run_id() {
    n=1
    while out=$("$bin" export --db "$1" --run "$n" --table runs --csv - 2>/dev/null) && [ -n "$out" ]; do
        p=$(printf '%s\n' "$out" | tr -d '\r' | "$py" -c 'import csv,sys
rows = list(csv.DictReader(sys.stdin))
print(rows[0]["policy"] if rows else "")')
        [ -z "$p" ] && break
        [ "$p" = "$2" ] && { echo "$n"; return; }
        n=$((n + 1))
        [ "$n" -gt 16 ] && break
    done
    echo ""
}

echo "# peer_step1: $model batch $batch seed $seed image-size 32, policies $policies, device $device, via $via"
echo "# fp16probe: $bin; python: $py; dir: $dir"
"$py" "$peer" prepare --dir "$dir" --model "$model" --batch "$batch" --image-size 32 --seed "$seed" || exit 1

common="--model $model --weights $dir/weights.safetensors --data cifar10:$dir --batch $batch --image-size 32"
common="$common --steps 1 --eval-every 0 --eval-batches 1 --seed $seed --device $device"
if [ "$via" = compare ]; then
    rm -f "$dir/compare.db"
    echo "# $bin compare --precision $policies $common --hist-every 0 --error-every 0 --no-tui --db $dir/compare.db"
    # shellcheck disable=SC2086
    "$bin" compare --precision "$policies" $common --hist-every 0 --error-every 0 --no-tui \
        --db "$dir/compare.db" >"$dir/compare.log" 2>&1 ||
        { cat "$dir/compare.log"; echo "peer: fp16probe compare failed"; }
fi

ok=0 fail=0 skip=0 ref_ours="" ref_torch=""
for p in $(echo "$policies" | tr ',' ' '); do
    if [ "$via" = train ]; then
        db="$dir/$p.db" run=1
        rm -f "$db"
        echo "# $bin train --precision $p $common --db $db"
        # shellcheck disable=SC2086
        "$bin" train --precision "$p" $common --db "$db" >"$dir/$p.log" 2>&1 ||
            { cat "$dir/$p.log"; echo "peer: fp16probe train --precision $p failed"; fail=$((fail + 1)); continue; }
        grep -i 'gpu:' "$dir/$p.log"
    else
        db="$dir/compare.db" run=$(run_id "$db" "$p")
        [ -n "$run" ] || { echo "peer: no $p arm in $db"; fail=$((fail + 1)); continue; }
    fi
    # shellcheck disable=SC2046
    set -- $(step1_loss "$db" "$run")
    ours=${1:-nan} where=${2:-?}
    case $where in
    cpu*) [ "$device" = cuda ] && echo "peer: warning: fp16probe[$p] trained on $where, not on the GPU" ;;
    esac
    out=$("$py" "$peer" loss --dir "$dir" --device "$device" --policy "$p" --fp16probe-loss "$ours" 2>&1)
    rc=$?
    printf '%s\n' "$out"
    theirs=$(printf '%s\n' "$out" | sed -n "s/^peer: policy=$p loss=//p")
    case $rc in
    0) ok=$((ok + 1)) ;;
    3) skip=$((skip + 1)); echo "peer: step1 loss fp16probe[$p]=$ours torch[$p]=unavailable skip" ;;
    *) fail=$((fail + 1)) ;;
    esac
    if [ "$p" = fp32 ]; then
        ref_ours=$ours ref_torch=$theirs
    elif [ -n "$ref_ours" ]; then   # context: how far each side's low precision is from its fp32
        "$py" -c 'import sys
o, t, ro, rt = (float(v) if v else float("nan") for v in sys.argv[2:6])
print("peer: step1 %s-vs-fp32 gap fp16probe=%.3g torch=%.3g"
      % (sys.argv[1], abs(o - ro) / abs(ro), abs(t - rt) / abs(rt)))' \
            "$p" "$ours" "${theirs:-}" "$ref_ours" "$ref_torch"
    fi
done
echo "peer: step1 summary ok=$ok fail=$fail skip=$skip"
[ "$fail" -gt 0 ] && exit 1
[ "$ok" -eq 0 ] && exit 3
exit 0
