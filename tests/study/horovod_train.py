"""Data-parallel training with Horovod for tests/study/run_horovod.sh.

    HOROVOD_CPU_OPERATIONS=MPI HOROVOD_FUSION_THRESHOLD=0 \
    mpirun -np 4 [-x LD_PRELOAD=libhipress.so -x HIPRESS_COMPRESSOR=onebit ...] \
        $VENV/bin/python tests/study/horovod_train.py [--steps N] [--seed S]

An MLP 64-H-H-H-10 (two same-shaped HxH hidden layers) on scikit-learn's
digits, each rank training on its own shard with batch 32, SGD with
momentum, hvd.DistributedOptimizer; fixed seeds, a fixed number of steps.
It follows the stable-layout recipe 1 of doc/measured/horovod-layouts.md: the caller
sets HOROVOD_FUSION_THRESHOLD=0 (each gradient is reduced in its own tensor)
and gradients are zeroed in place (zero_grad(set_to_none=False)), so each
gradient keeps its address from step to step.  --single-group follows
recipe 2 instead: groups=1, one fused call of every gradient a step.

At the end it checks that every rank holds bit-identical parameters (a hash
allgathered with hvd), and rank 0 prints one line

    horovod_train: ok, steps N, test accuracy A, test loss L, train loss T, time S s[, hipress ...]

("FAIL: ..." and exit status 1 on a mismatch).  When libhipress.so is
preloaded, the line also gives rank 0's hipress counters (calls, compressed,
passed through), read with hipress_stats_get.
"""
import argparse
import ctypes
import hashlib
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import horovod.torch as hvd
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def hipress_counters():
    """rank-local (calls, compressed, passthrough), or None without the preload"""
    try:
        get = ctypes.CDLL(None).hipress_stats_get
    except AttributeError:
        return None
    get.restype = None
    buf = (ctypes.c_ulonglong * 64)()   # the first three fields; room for the rest
    get(buf)
    return buf[0], buf[1], buf[2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--single-group", action="store_true",
                    help="recipe 2: all gradients in one group (groups=1), reduced in one fused call a step; "
                         "for it, leave HOROVOD_FUSION_THRESHOLD at its default")
    args = ap.parse_args()

    t0 = time.time()
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    if rank == 0 and not args.single_group and os.environ.get("HOROVOD_FUSION_THRESHOLD") != "0":
        print("horovod_train: note: HOROVOD_FUSION_THRESHOLD is not 0: Horovod fuses gradients into a "
              "buffer whose layout changes from step to step (hipress runs its residual-free form there)",
              file=sys.stderr, flush=True)

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.2, random_state=0, stratify=y)
    xtr, ytr = torch.from_numpy(xtr[rank::size]), torch.from_numpy(ytr[rank::size])
    xte, yte = torch.from_numpy(xte), torch.from_numpy(yte)

    h = args.hidden
    model = nn.Sequential(nn.Linear(64, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(),
                          nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 10))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                   groups=1 if args.single_group else None)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)

    lossf = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(args.seed * 1000 + rank)
    order, pos = torch.randperm(len(xtr), generator=gen), 0
    for _ in range(args.steps):
        if pos + args.batch > len(order):
            order, pos = torch.randperm(len(xtr), generator=gen), 0
        idx = order[pos:pos + args.batch]
        pos += args.batch
        # Keep each gradient at its address.  Horovod 0.28.1's
        # DistributedOptimizer.zero_grad() takes no argument and uses torch's
        # default (False in 1.13, True from 2.0): zero through the module.
        model.zero_grad(set_to_none=False)
        loss = lossf(model(xtr[idx]), ytr[idx])
        loss.backward()
        opt.step()

    with torch.no_grad():
        out = model(xte)
        test_loss = lossf(out, yte).item()
        acc = (out.argmax(1) == yte).double().mean().item()

    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.detach().numpy().tobytes())
    mine = torch.tensor([int.from_bytes(digest.digest()[:8], "little", signed=True)], dtype=torch.int64)
    hashes = hvd.allgather(mine, name="param_hash").tolist()
    counters = hipress_counters()
    elapsed = time.time() - t0
    ok = len(set(hashes)) == 1
    if rank == 0:
        if ok:
            line = ("horovod_train: ok, steps %d, test accuracy %.4f, test loss %.4f, train loss %.4f, time %.1f s"
                    % (args.steps, acc, test_loss, loss.item(), elapsed))
            if counters is not None:
                line += ", hipress calls %d compressed %d passthrough %d" % counters
            print(line, flush=True)
        else:
            print("FAIL: parameters differ across ranks: %d distinct hashes %s"
                  % (len(set(hashes)), ["%016x" % (v & (2**64 - 1)) for v in hashes]), flush=True)
    hvd.shutdown()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
