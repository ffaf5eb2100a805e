#!/usr/bin/python3
"""digits_to_cifar10.py OUTDIR — scikit-learn's handwritten digits (load_digits: 1,797 8x8 images, 16 grey
levels) upscaled to 32x32 (nearest neighbour, x4) and written as the CIFAR-10 binary version: records of
1 label byte + 3,072 bytes (R, G and B planes of 32x32, here the same grey), 1,497 training images in
data_batch_1.bin, the last 300 in test_batch.bin. For bench/digits_precision.sh (issue 19)."""
import os
import sys

import numpy as np
from sklearn.datasets import load_digits


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    d = load_digits()
    img = (d.images * (255.0 / 16.0)).clip(0, 255).astype(np.uint8)          # n x 8 x 8
    img = img.repeat(4, axis=1).repeat(4, axis=2)                              # n x 32 x 32
    rec = np.concatenate([d.target.astype(np.uint8)[:, None],
                          np.tile(img.reshape(len(img), 1, 1024), (1, 3, 1)).reshape(len(img), 3072)], axis=1)
    rng = np.random.default_rng(0)
    rec = rec[rng.permutation(len(rec))]
    rec[:-300].tofile(os.path.join(out, "data_batch_1.bin"))
    rec[-300:].tofile(os.path.join(out, "test_batch.bin"))
    print(f"{out}: {len(rec) - 300} training, 300 test images (CIFAR-10 binary layout)")


if __name__ == "__main__":
    main()
