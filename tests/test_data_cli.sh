#!/bin/sh
# test_data_cli.sh — bad data sets through `fp16probe train` (TAP, issue 21): every problem with an image
# folder's contents exits 1 with one line naming it, whichever check finds it (missing train/, an empty
# one, a class without images, a val class unknown to train/, an undecodable image found while training;
# a bad spec stays a usage error, exit 2); a FIFO given as a CIFAR-10 file or as an image is refused
# within seconds (the old fopen waited forever for a writer).
bin="${top_builddir:-.}/fp16probe"
. "$(dirname "$0")/tap.sh"
if ! "$bin" train --help >/dev/null 2>&1; then
    echo "1..0 # SKIP fp16probe has no 'train' command"; exit 0
fi
case "$bin" in /*) ;; *) bin="$PWD/$bin" ;; esac
tap_workdir data-cli
T="$bin train --model tinynet --precision fp32 --batch 2 --steps 2 --threads 1 --eval-batches 0"
# status STATUS PATTERN DATA: `train --data DATA` exits STATUS within 30 s, one stderr line matching PATTERN
status() {
    want=$1; pat=$2; data=$3
    timeout 30 $T --data "$data" --db "d$n.db" >out.txt 2>err.txt; got=$?
    test "$got" -eq "$want" && test "$(wc -l <err.txt)" -eq 1 && grep -Eq "^fp16probe: .*$pat" err.txt
}
echo "1..8"
mkdir -p none empty/train noimg/train/cat valbad/train/cat valbad/val/dog corrupt/train/cat
printf 'not an image' >valbad/train/cat/a.png
printf 'not an image' >corrupt/train/cat/a.png
printf 'not an image' >corrupt/train/cat/b.png
check "imagefolder without train/: exit 1" status 1 "none/train" imagefolder:none
check "imagefolder with an empty train/: exit 1 (was 2)" status 1 "is empty" imagefolder:empty
check "imagefolder class without images: exit 1 (was 2)" status 1 "cat: class directory has no" imagefolder:noimg
check "imagefolder val class unknown to train/: exit 1 (was 2)" status 1 "validation class 'dog'" imagefolder:valbad
check "imagefolder image that does not decode: exit 1" status 1 "cat/[ab].png: not a JPEG or PNG" imagefolder:corrupt
check "a bad spec is still a usage error: exit 2" status 2 "needs a directory" imagefolder
mkdir -p cif
mkfifo cif/data_batch_1.bin
check "a FIFO as a CIFAR-10 file: exit 1 at once, naming it" status 1 "data_batch_1.bin: not a regular file \\(a FIFO\\)" cifar10:cif
mkdir -p fifo/train/cat
mkfifo fifo/train/cat/a.png
ln -s a.png fifo/train/cat/b.png
printf 'not an image' >fifo/train/cat/c.png
printf 'not an image' >fifo/train/cat/d.png
check "FIFOs in an image folder are not listed (not waited on): the files are used" \
    status 1 "/[cd].png" imagefolder:fifo
exit $fail
