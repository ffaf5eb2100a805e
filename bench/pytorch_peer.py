#!/usr/bin/python3
# pytorch_peer.py — the PyTorch "peer" of fp16probe's GPU check: the same model, weights and batch
# trained by PyTorch, so that fp16probe's numbers can be held against a reference.
#
#   prepare  seeds a torchvision ResNet (num_classes=10), writes its parameters and BN buffers to
#            DIR/weights.safetensors (torchvision names, F32; num_batches_tracked as I64 — what
#            `fp16probe train --weights FILE` loads) and ONE batch of random images and labels as
#            CIFAR-10 binary files in DIR (data_batch_1.bin holds exactly --batch records, so that
#            fp16probe's first step takes all of them; test_batch.bin repeats them for the final
#            evaluation), plus DIR/peer.json with the settings.
#   loss     the step-1 (and optionally later steps') training-mode loss in PyTorch from DIR, on the
#            batch fp16probe's first step sees: the records of data_batch_1.bin in fp16probe's
#            shuffle order with its crop/flip augmentation (trainer/data.c, data_loader.c,
#            data_cifar10.c, reproduced below bit for bit; pass --augment none / --shuffle off
#            when fp16probe ran with them), normalised with ImageNet's mean/std in fp32 exactly as
#            trainer/image_transform.c does; model in train mode (BN on batch statistics),
#            channels_last.  Prints "peer: policy=P loss=X".  With --fp16probe-loss Y it also
#            prints the agreement line and exits 1 when it is out of tolerance.  --policy fp64 is a
#            float64 reference (diagnostic).  --steps N --lr LR,.. also gives the losses of steps
#            2..N after SGD steps as fp16probe's (momentum 0.9, weight decay 5e-4 on every tensor):
#            they matched fp16probe's CPU backend to 1.5e-7 / 2e-5 at steps 2 / 3 on resnet18, batch
#            32, lr 1e-3; random-init ResNet-50 at 32x32 is too sharp for that (its fp32 gradients
#            differ from fp64 ones by 2-4% per tensor in torch as in fp16probe; step-2 losses by
#            0.2% .. 3% between any two of torch fp32, torch fp64, fp16probe), so only step 1 is
#            checked there.
#   agree    the agreement line for two given losses:
#            "peer: step1 loss fp16probe[P]=Y torch[P]=X rel_diff=D tol=T ok|FAIL" (exit 0 / 1).
#   speed    images/s of a full training step (forward, backward, SGD momentum 0.9 with GradScaler
#            for fp16; autocast for fp16 / bf16; TF32 allowed for tf32 only) per precision policy on
#            random data, channels_last, eager, cudnn.benchmark on, timed with CUDA events,
#            median over the steps after warm-up:
#            "bench: name=pytorch_<model>_<policy>_images_per_s value=V unit=img/s".
#
# bench/peer_step1.sh drives prepare -> fp16probe train -> export -> loss -> agree.
# Needs python3 with torch (1.13 or 2.x), torchvision and numpy; no safetensors package, no network.
# Exit status: 0 ok, 1 disagreement, 2 usage or input error, 3 PyTorch (or the asked-for policy) unavailable.
import argparse
import gc
import json
import math
import os
import statistics
import struct
import sys
import time

try:
    import numpy as np
    import torch
    import torchvision
except ImportError as exc:
    print(f"peer: unavailable ({exc})")
    sys.exit(3)

CIFAR_REC = 3073          # 1 label byte + 3 x 32 x 32 bytes (R plane, G plane, B plane)
CIFAR_SIDE = 32
# trainer/data.c: fp_imagenet_mean / fp_imagenet_std (float32 constants)
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)

# Relative tolerance of |loss_fp16probe - loss_torch| / |loss_torch| at step 1, per policy.
# Measured on the CPU (fp16probe's CPU backend against torch 1.13, random-init torchvision models on
# random 32x32 images, --image-size 32): see bench/peer_step1.sh.
#  fp32: both sides compute the same fp32 math from the same weights and the same input bits; they
#        differ only in summation order (OpenBLAS / cuDNN / oneDNN blocking, BN and mean reductions).
#        Measured: resnet50 b8 9.3e-6, b32 1.7e-5, b64 6.5e-6; resnet18 b32 8.7e-7 — the same size
#        as torch fp32 against torch fp64 (2e-6 .. 1.5e-5) or torch against itself with the batch
#        reordered (3e-6).  1e-4 leaves a margin of ~6x on the worst of these, while a semantic
#        difference (a wrong batch — other crops move it by 6e-3 —, eps, biased/unbiased variance, a
#        weight layout, label or normalisation) moves the loss by far more.
#  tf32: GEMM/conv inputs rounded to 10 mantissa bits (u = 4.9e-4), fp32 accumulation and storage;
#        which products get rounded depends on the kernels: ~1e-3 expected, 1e-2 allowed.
#  fp16: autocast rounds conv/linear inputs and weights to fp16 (u = 4.9e-4) and keeps activations in
#        fp16; two implementations round at different places (BN output, residual add, inside the
#        kernels), and through ResNet-50's ~50 layers the error grows like sqrt(depth) * u ~ 3e-3 at
#        the logits.  Measured: fp16probe's fp16 arm against its own fp32 arm 2.6e-3 (b32),
#        4.5e-4 (b64), 3.9e-3 (b128), 1.6e-4 (resnet18 b32); the peer against fp16probe should be of
#        that size, and 1e-2 (~20 units of fp16 roundoff) catches a wrong loss scale, an overflow or a
#        layer left in another precision.  Not at batch 8: ResNet-50's layer4 runs at 1x1 there
#        and BN normalises over the 8 samples alone, which makes the loss ~10x more sensitive
#        (fp16probe's own fp16-vs-fp32 gap 2.8e-2) — use --batch 32 or more.
#  bf16: u = 3.9e-3 (8 mantissa bits), the same reasoning: fp16probe's bf16-vs-fp32 gap 1e-3 .. 4e-2
#        on ResNet-50; torch's CPU bf16 autocast against fp16probe's bf16 0.9e-2 .. 2.7e-2 (resnet18
#        1.7e-5): 5e-2.
TOLERANCE = {"fp32": 1e-4, "tf32": 1e-2, "fp16": 1e-2, "bf16": 5e-2}
POLICIES = ("fp32", "tf32", "fp16", "bf16")

# ---------------------------------------------------------------- fp16probe's data RNG (data_internal.h)
M64 = (1 << 64) - 1
FP_RNG_AUGMENT, FP_RNG_SHUFFLE = 2, 3
FP_SPLIT_TRAIN = 0


def _mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


class DataRng:
    """splitmix64 over a seed mixed from keys: fp_data_rng_seed / _next / _uniform / _below."""

    def __init__(self, seed, tag, split, a, b):
        h = _mix64((seed ^ 0x5851F42D4C957F2D) & M64)
        h = _mix64(h ^ ((tag * 0x9E3779B97F4A7C15) & M64))
        h = _mix64(h ^ ((split + 0x632BE59BD9B4E019) & M64))
        h = _mix64(h ^ (a & M64))
        h = _mix64(h ^ ((b * 0xD6E8FEB86659FD93) & M64))
        self.s = h

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & M64
        return _mix64(self.s)

    def uniform(self):
        return (self.next() >> 11) * 2.0 ** -53

    def below(self, n):
        return (self.next() * n) >> 64


def epoch_order(seed, n, epoch, shuffle):
    """fp_data_permutation: Fisher-Yates from the end, seeded by (seed, train split, epoch)."""
    perm = list(range(n))
    if not shuffle:
        return perm
    rng = DataRng(seed, FP_RNG_SHUFFLE, FP_SPLIT_TRAIN, epoch, 0)
    for i in range(n - 1, 0, -1):
        j = rng.below(i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def cifar_sample(rec, seed, epoch, index, augment):
    """cifar_get at image size 32: (HWC float32 normalised image, label)."""
    label = int(rec[0])
    planes = np.frombuffer(bytes(rec[1:]), dtype=np.uint8).reshape(3, CIFAR_SIDE, CIFAR_SIDE)
    img = planes.transpose(1, 2, 0)                    # HWC uint8
    dy = dx = 4
    flip = False
    if augment:   # RandomCrop(32, padding=4): top, then left, in [0, 8]; then the flip draw
        rng = DataRng(seed, FP_RNG_AUGMENT, FP_SPLIT_TRAIN, epoch, index)
        dy = rng.below(9)
        dx = rng.below(9)
        flip = rng.uniform() < 0.5
    padded = np.zeros((CIFAR_SIDE + 8, CIFAR_SIDE + 8, 3), dtype=np.uint8)
    padded[4:4 + CIFAR_SIDE, 4:4 + CIFAR_SIDE] = img
    crop = padded[dy:dy + CIFAR_SIDE, dx:dx + CIFAR_SIDE]
    if flip:
        crop = crop[:, ::-1]
    # fp_image_normalise: ((float)p / 255.0f - mean[c]) / std[c], every operation in fp32
    x = crop.astype(np.float32) / np.float32(255.0)
    x = (x - IMAGENET_MEAN) / IMAGENET_STD
    return x.astype(np.float32), label


def read_cifar_train(d):
    recs = bytearray()
    for b in range(1, 6):
        p = os.path.join(d, f"data_batch_{b}.bin")
        if os.path.exists(p):
            with open(p, "rb") as f:
                recs += f.read()
    if not recs or len(recs) % CIFAR_REC:
        die(f"peer: {d}: no whole CIFAR-10 training records")
    return [recs[i:i + CIFAR_REC] for i in range(0, len(recs), CIFAR_REC)]


def fp16probe_batch(d, batch, seed, step, augment, shuffle):
    """The batch fp16probe's training step `step` (1-based) takes from cifar10:d: the loader's
    batch g = step - 1 is (epoch, index) = divmod(g, n // batch) (drop_last on the train split)."""
    recs = read_cifar_train(d)
    n = len(recs)
    per_epoch = n // batch
    if per_epoch == 0:
        die(f"peer: {d}: {n} records, fewer than one batch of {batch}")
    epoch, index = divmod(step - 1, per_epoch)
    order = epoch_order(seed, n, epoch, shuffle)
    xs, ys = [], []
    for i in order[index * batch:(index + 1) * batch]:
        x, y = cifar_sample(recs[i], seed, epoch, i, augment)
        xs.append(x)
        ys.append(y)
    x = torch.from_numpy(np.stack(xs)).permute(0, 3, 1, 2)     # NHWC storage = channels_last NCHW
    return x.contiguous(memory_format=torch.channels_last), torch.tensor(ys, dtype=torch.int64)


# ---------------------------------------------------------------- safetensors without the package
ST_DTYPES = {torch.float32: ("F32", np.float32), torch.float16: ("F16", np.float16),
             torch.int64: ("I64", np.int64), torch.int32: ("I32", np.int32)}
ST_NP = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64, "I32": np.int32,
         "U8": np.uint8, "I8": np.int8}


def write_safetensors(path, tensors, metadata=None):
    """8-byte little-endian header length, JSON header (padded with spaces to 8 bytes), raw data."""
    header = {}
    blobs = []
    off = 0
    for name, t in tensors.items():
        t = t.detach().cpu().contiguous()
        if t.dtype not in ST_DTYPES:
            die(f"peer: tensor {name}: dtype {t.dtype} not handled")
        code, npdt = ST_DTYPES[t.dtype]
        raw = t.numpy().astype(npdt, copy=False).astype(np.dtype(npdt).newbyteorder("<")).tobytes()
        header[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    hdr = json.dumps(header, separators=(",", ":")).encode()
    hdr += b" " * (-len(hdr) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)))
        f.write(hdr)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def read_safetensors(path):
    with open(path, "rb") as f:
        buf = f.read()
    (hlen,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + hlen])
    data = memoryview(buf)[8 + hlen:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        if e["dtype"] == "BF16":
            u = np.frombuffer(data[b:end], dtype="<u2").astype(np.uint32) << 16
            arr = u.view(np.float32)
        else:
            arr = np.frombuffer(data[b:end], dtype=np.dtype(ST_NP[e["dtype"]]).newbyteorder("<"))
        out[name] = torch.from_numpy(arr.astype(arr.dtype.newbyteorder("="), copy=True).reshape(e["shape"]))
    return out


# ---------------------------------------------------------------- helpers
def die(msg):
    """A usage or input error: the message on stderr, exit status 2."""
    print(msg, file=sys.stderr, flush=True)
    sys.exit(2)


def build_model(name, num_classes=10):
    if not name.startswith("resnet") or not hasattr(torchvision.models, name):
        die(f"peer: unknown model {name} (resnet18/34/50/101/152)")
    return getattr(torchvision.models, name)(num_classes=num_classes)


def set_tf32(on):
    """The legacy flags only (deprecated after torch 2.9 but honoured; mixing them with the new
    fp32_precision API makes torch raise, so this script never touches the new one)."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.backends.cuda.matmul.allow_tf32 = on
        torch.backends.cudnn.allow_tf32 = on     # True by default in every torch: set it both ways


def autocast_dtype(policy):
    return {"fp16": torch.float16, "bf16": torch.bfloat16}.get(policy)


def autocast_works(device, dtype):
    """True when torch.autocast(device, dtype) really computes a linear in dtype (torch 1.13's CPU
    autocast silently disables itself for float16)."""
    import warnings
    try:
        a = torch.ones(2, 2, device=device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.autocast(device_type=device, dtype=dtype):
                return torch.nn.functional.linear(a, a).dtype == dtype
    except Exception:   # noqa: BLE001 - any failure means "not available"
        return False


def make_scaler(device):
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        try:
            return torch.amp.GradScaler(device)
        except TypeError:
            pass
    return torch.cuda.amp.GradScaler()


def backward_and_update(loss, opt, scaler):
    """backward and the optimizer step, through GradScaler when there is one (PyTorch's AMP recipe)"""
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    else:
        loss.backward()
        opt.step()


def agree_line(policy, ours, theirs, tol=None):
    tol = TOLERANCE[policy] if tol is None else tol
    rel = abs(ours - theirs) / max(abs(theirs), 1e-30)
    ok = math.isfinite(ours) and math.isfinite(theirs) and rel <= tol
    print(f"peer: step1 loss fp16probe[{policy}]={ours:.9g} torch[{policy}]={theirs:.9g} "
          f"rel_diff={rel:.3g} tol={tol:g} {'ok' if ok else 'FAIL'}", flush=True)
    return ok


def check_device(device):
    if device == "cuda" and not torch.cuda.is_available():
        print("peer: unavailable (torch.cuda.is_available() is False)")
        sys.exit(3)


# ---------------------------------------------------------------- prepare
def cmd_prepare(a):
    if a.image_size != CIFAR_SIDE:
        die("peer: prepare writes CIFAR-10 records, which fp16probe only passes unresampled "
                         "at --image-size 32")
    os.makedirs(a.dir, exist_ok=True)
    torch.manual_seed(a.seed)
    model = build_model(a.model)
    sd = model.state_dict()
    write_safetensors(os.path.join(a.dir, "weights.safetensors"), sd,
                      {"format": "pt", "model": a.model, "source": "bench/pytorch_peer.py prepare"})
    rng = np.random.default_rng(a.seed)
    labels = rng.integers(0, 10, size=a.batch, dtype=np.uint8)
    images = rng.integers(0, 256, size=(a.batch, 3, CIFAR_SIDE, CIFAR_SIDE), dtype=np.uint8)
    recs = b"".join(bytes([labels[i]]) + images[i].tobytes() for i in range(a.batch))
    for name in ("data_batch_1.bin", "test_batch.bin"):
        with open(os.path.join(a.dir, name), "wb") as f:
            f.write(recs)
    for b in range(2, 6):     # a stale file of an earlier prepare would join the training split
        p = os.path.join(a.dir, f"data_batch_{b}.bin")
        if os.path.exists(p):
            os.remove(p)
    meta = {"model": a.model, "batch": a.batch, "image_size": a.image_size, "seed": a.seed,
            "num_classes": 10, "torch": torch.__version__, "torchvision": torchvision.__version__}
    with open(os.path.join(a.dir, "peer.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(f"peer: prepared {a.dir}: {a.model} ({len(sd)} tensors) weights.safetensors, "
          f"data_batch_1.bin + test_batch.bin ({a.batch} records), seed {a.seed}")


# ---------------------------------------------------------------- loss
def fp16probe_run(db, run, policy):
    """Settings and step-1 loss of an fp16probe run read from its database (the runs and steps
    tables; sqlite3 of the standard library, read-only).  Without run: the newest run of policy."""
    import sqlite3
    if not os.path.exists(db):
        die(f"peer: {db}: no such database")
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        if run is None:
            row = con.execute("SELECT id FROM runs WHERE policy = ? ORDER BY id DESC LIMIT 1", (policy,)).fetchone()
            if not row:
                die(f"peer: {db}: no run of policy {policy}")
            run = row[0]
        row = con.execute("SELECT policy, model, batch_size, image_size, dataset, seed, config, device, status "
                          "FROM runs WHERE id = ?", (run,)).fetchone()
        if not row:
            die(f"peer: {db}: no run {run}")
        st = con.execute("SELECT loss FROM steps WHERE run = ? AND step = 1", (run,)).fetchone()
    finally:
        con.close()
    pol, model, batch, size, dataset, seed, config, device, status = row
    cfg = json.loads(config) if config else {}
    if pol != policy:
        die(f"peer: {db}: run {run} is policy {pol}, not {policy}")
    if st is None or st[0] is None:
        die(f"peer: {db}: run {run} ({status}) has no step-1 loss")
    return {"run": run, "model": model, "batch": batch, "image_size": size, "dataset": dataset, "seed": seed,
            "augment": "on" if cfg.get("augment", True) else "none",
            "shuffle": "on" if cfg.get("shuffle", True) else "off",
            "weights": cfg.get("weights"), "device": device, "loss": float(st[0])}


def cmd_loss(a):
    with open(os.path.join(a.dir, "peer.json")) as f:
        meta = json.load(f)
    if a.db:   # the run's own settings decide which batch it saw
        r = fp16probe_run(a.db, a.run, a.policy)
        for k in ("model", "batch", "seed", "augment", "shuffle"):
            given = getattr(a, k)
            if given is not None and given != r[k]:
                print(f"peer: warning: --{k} {given} differs from run {r['run']}'s {r[k]}; using the run's")
            setattr(a, k, r[k])
        if r["dataset"] != "cifar10:" + a.dir and os.path.realpath(r["dataset"].partition(":")[2]) != \
                os.path.realpath(a.dir):
            print(f"peer: warning: run {r['run']} trained on {r['dataset']}, not cifar10:{a.dir}")
        wfile = os.path.join(a.dir, "weights.safetensors")
        if r["weights"] and os.path.realpath(r["weights"]) != os.path.realpath(wfile):
            print(f"peer: warning: run {r['run']} started from {r['weights']}, not {a.dir}/weights.safetensors")
        if r["image_size"] != CIFAR_SIDE:
            print(f"peer: warning: run {r['run']} used image size {r['image_size']}; this batch is 32x32")
        if a.fp16probe_loss is None:
            a.fp16probe_loss = r["loss"]
        print(f"peer: info fp16probe run {r['run']} of {a.db} on {r['device']}: {r['model']} batch {r['batch']} "
              f"seed {r['seed']} augment {r['augment']} shuffle {r['shuffle']}, step-1 loss {r['loss']:.9g}")
    model_name = a.model or meta["model"]
    batch = a.batch or meta["batch"]
    seed = meta["seed"] if a.seed is None else a.seed
    a.augment = a.augment or "on"
    a.shuffle = a.shuffle or "on"
    check_device(a.device)
    if a.policy == "fp64" and a.fp16probe_loss is not None:
        die("peer: --policy fp64 is a reference only; compare fp16probe against fp32")
    dt = autocast_dtype(a.policy)
    if dt is not None and not autocast_works(a.device, dt):
        print(f"peer: policy={a.policy} device={a.device} unavailable (torch {torch.__version__} has no "
              f"{a.device} autocast to {dt})")
        sys.exit(3)
    if a.policy == "tf32" and a.device != "cuda":
        print("peer: policy=tf32 device=cpu unavailable (TF32 is a CUDA setting)")
        sys.exit(3)
    set_tf32(a.policy == "tf32")
    if a.threads:
        torch.set_num_threads(a.threads)
    where = torch.cuda.get_device_name(0) if a.device == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
    print(f"peer: info torch {torch.__version__} torchvision {torchvision.__version__} on {where}; "
          f"cudnn.allow_tf32={torch.backends.cudnn.allow_tf32} "
          f"matmul.allow_tf32={torch.backends.cuda.matmul.allow_tf32}; autocast={dt}", flush=True)

    model = build_model(model_name, meta.get("num_classes", 10))
    model.load_state_dict(read_safetensors(os.path.join(a.dir, "weights.safetensors")), strict=True)
    model = model.to(a.device, memory_format=torch.channels_last).train()
    if a.policy == "fp64":
        model = model.double()
    opt = torch.optim.SGD(model.parameters(), lr=0.0, momentum=a.momentum, weight_decay=a.weight_decay)
    scaler = make_scaler(a.device) if a.policy == "fp16" else None
    lrs = [float(v) for v in a.lr.split(",")] if a.lr else []
    if a.steps > 1 and len(lrs) < a.steps - 1:
        die("peer: --steps N needs --lr with the learning rates of steps 1 .. N-1")
    loss_fn = torch.nn.CrossEntropyLoss()
    loss1 = None
    for step in range(1, a.steps + 1):
        x, y = fp16probe_batch(a.dir, batch, seed, step, a.augment == "on", a.shuffle == "on")
        x, y = x.to(a.device), y.to(a.device)
        if a.policy == "fp64":
            x = x.double()
        opt.zero_grad(set_to_none=True)
        if dt is not None:
            with torch.autocast(device_type=a.device, dtype=dt):
                loss = loss_fn(model(x), y)
        else:
            loss = loss_fn(model(x), y)
        v = float(loss.detach().float())
        if step == 1:
            loss1 = v
            print(f"peer: policy={a.policy} loss={v:.9g}", flush=True)
        else:
            print(f"peer: policy={a.policy} step={step} loss={v:.9g}", flush=True)
        if step == a.steps:
            break
        for g in opt.param_groups:
            g["lr"] = lrs[step - 1]
        backward_and_update(loss, opt, scaler)
    if a.fp16probe_loss is not None:
        sys.exit(0 if agree_line(a.policy, a.fp16probe_loss, loss1, a.tol) else 1)


def cmd_agree(a):
    sys.exit(0 if agree_line(a.policy, a.fp16probe, a.torch, a.tol) else 1)


# ---------------------------------------------------------------- speed
def time_policy(a, policy):
    dev = a.device
    set_tf32(policy == "tf32")
    dt = autocast_dtype(policy)
    if dt is not None and not autocast_works(dev, dt):
        return None
    torch.manual_seed(0)
    model = build_model(a.model).to(dev, memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = make_scaler(dev) if policy == "fp16" else None
    x = torch.randn(a.batch, 3, a.image_size, a.image_size, device=dev).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (a.batch,), device=dev)
    loss_fn = torch.nn.CrossEntropyLoss()
    cuda = dev == "cuda"

    def step():
        opt.zero_grad(set_to_none=True)
        if dt is not None:
            with torch.autocast(device_type=dev, dtype=dt):
                loss = loss_fn(model(x), y)
        else:
            loss = loss_fn(model(x), y)
        backward_and_update(loss, opt, scaler)

    times = []
    for i in range(a.warmup + a.steps):
        if cuda:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            step()
            e1.record()
            e1.synchronize()
            ms = e0.elapsed_time(e1)
        else:
            t0 = time.perf_counter()
            step()
            ms = (time.perf_counter() - t0) * 1e3
        if i >= a.warmup:
            times.append(ms)
    if cuda:
        torch.cuda.synchronize()
    return statistics.median(times)   # model, optimizer and batch go with this frame


def cmd_speed(a):
    check_device(a.device)
    if a.device == "cuda":
        # cudnn's algorithm search (as a tuned PyTorch run would do) happens in the warm-up steps
        torch.backends.cudnn.benchmark = a.cudnn_benchmark == "on"
        print(f"# torch {torch.__version__} on {torch.cuda.get_device_name(0)}, cudnn "
              f"{torch.backends.cudnn.version()}, benchmark {a.cudnn_benchmark}, channels_last, eager", flush=True)
    if a.threads:
        torch.set_num_threads(a.threads)
    rc = 0
    for policy in a.policy.split(","):
        if policy not in POLICIES:
            die(f"peer: unknown policy {policy} (fp32, tf32, fp16, bf16)")
        if policy == "tf32" and a.device != "cuda":
            print(f"bench: name=pytorch_{a.model}_tf32_images_per_s value=nan unit=img/s")
            print("# tf32: needs CUDA")
            continue
        t0 = time.perf_counter()
        ms = time_policy(a, policy)
        gc.collect()
        if a.device == "cuda":
            torch.cuda.empty_cache()
        name = f"pytorch_{a.model}_{policy}_images_per_s"
        if ms is None:
            print(f"bench: name={name} value=nan unit=img/s")
            print(f"# {policy}: torch {torch.__version__} has no {a.device} autocast to {policy}")
            rc = 3
            continue
        print(f"bench: name={name} value={a.batch / (ms / 1e3):.1f} unit=img/s", flush=True)
        print(f"# {policy}: median {ms:.2f} ms/step over {a.steps} steps after {a.warmup} warm-up, "
              f"batch {a.batch}, {a.image_size}x{a.image_size}; {time.perf_counter() - t0:.1f} s wall", flush=True)
    sys.exit(rc)


# ---------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__ or "fp16probe's PyTorch peer")
    sub = ap.add_subparsers(dest="cmd")
    sub.required = True

    p = sub.add_parser("prepare", help="write DIR/weights.safetensors and one CIFAR-10 batch")
    p.add_argument("--dir", required=True)
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(fn=cmd_prepare)

    p = sub.add_parser("loss", help="the training-mode loss of fp16probe's first step(s), in PyTorch")
    p.add_argument("--dir", required=True)
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--policy", default="fp32", choices=POLICIES + ("fp64",),
                   help="fp64: a float64 reference (diagnostic; no agreement line)")
    p.add_argument("--model", help="default: DIR/peer.json")
    p.add_argument("--batch", type=int, help="default: DIR/peer.json")
    p.add_argument("--seed", type=int, help="fp16probe's --seed (default: DIR/peer.json)")
    p.add_argument("--augment", choices=("on", "none"), help="as fp16probe's --augment (default on)")
    p.add_argument("--shuffle", choices=("on", "off"), help="as fp16probe's --shuffle (default on)")
    p.add_argument("--db", help="fp16probe's database: take the run's seed / batch / augment / shuffle and "
                   "its step-1 loss (to compare against) from it")
    p.add_argument("--run", type=int, help="the run in --db (default: the newest run of --policy)")
    p.add_argument("--steps", type=int, default=1, help="also the losses of steps 2..N (needs --lr)")
    p.add_argument("--lr", help="comma-separated learning rates of steps 1..N-1 (fp16probe's steps.lr)")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--fp16probe-loss", type=float, help="also print the agreement line against this loss")
    p.add_argument("--tol", type=float, help="relative tolerance (default: the policy's)")
    p.set_defaults(fn=cmd_loss)

    p = sub.add_parser("agree", help="the agreement line of two step-1 losses")
    p.add_argument("--policy", required=True, choices=POLICIES)
    p.add_argument("--fp16probe", type=float, required=True)
    p.add_argument("--torch", type=float, required=True)
    p.add_argument("--tol", type=float)
    p.set_defaults(fn=cmd_agree)

    p = sub.add_parser("speed", help="images/s of a full training step per policy")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--model", default="resnet50")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--policy", default="fp32,tf32,fp16,bf16", help="one policy or a comma-separated list")
    p.add_argument("--cudnn-benchmark", default="on", choices=("on", "off"))
    p.add_argument("--threads", type=int, default=0)
    p.set_defaults(fn=cmd_speed)

    a = ap.parse_args()
    if getattr(a, "steps", 1) < 1:
        ap.error("--steps must be >= 1")
    a.fn(a)


if __name__ == "__main__":
    main()
