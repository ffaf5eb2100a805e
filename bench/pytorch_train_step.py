#!/usr/bin/python3
# pytorch_train_step.py — the PyTorch side of fp16probe's CPU training-step comparison: times a
# torchvision ResNet training step (forward, backward, SGD) in NCHW and channels_last and prints
# "pytorch: layout=... ms_per_step=..." lines, the best layout last as "pytorch: best_ms=...".
import argparse
import statistics
import sys
import time

try:
    import torch
    import torchvision
except ImportError as exc:  # the C benchmark reports PyTorch as unavailable
    print(f"pytorch: unavailable ({exc})")
    sys.exit(3)


def time_layout(model_name, image_size, batch, steps, warmup, channels_last):
    torch.manual_seed(0)
    model = getattr(torchvision.models, model_name)(num_classes=10)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 3, image_size, image_size)
    y = torch.randint(0, 10, (batch,))
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    model.train()
    loss_fn = torch.nn.CrossEntropyLoss()
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        t1 = time.perf_counter()
        if i >= warmup:
            times.append((t1 - t0) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    best = None
    for layout, cl in (("nchw", False), ("channels_last", True)):
        ms = time_layout(a.model, a.image_size, a.batch, a.steps, a.warmup, cl)
        print(f"pytorch: layout={layout} ms_per_step={ms:.1f}", flush=True)
        best = ms if best is None else min(best, ms)
    print(f"pytorch: best_ms={best:.1f}")


if __name__ == "__main__":
    main()
