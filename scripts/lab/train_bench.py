"""One timed Horovod training for scripts/lab/train_bench.sh: images per second.

    mpirun -np 4 [-x LD_PRELOAD=libhipress.so -x HIPRESS_COMPRESSOR=onebit] \\
        -x HOROVOD_CPU_OPERATIONS=MPI [-x HOROVOD_FUSION_THRESHOLD=0] \\
        $VENV/bin/python scripts/lab/train_bench.py --model resnet18 [--steps 30] [--warmup 20] \\
        [--hvd-fp16] [--groups1]

Models:
  resnet18  torchvision's ResNet-18 (1000 classes, 11.7M parameters, 62
            gradient tensors), synthetic 32x32 RGB images and labels drawn
            once per rank (nothing is downloaded), batch 16 per rank;
  mlp       the digits MLP of tests/study/horovod_train.py, 64-H-H-H-10 (H =
            --hidden, default 1024: 2.2M parameters, two 4 MiB weights) on
            scikit-learn's digits, batch 32 per rank.
SGD (lr 0.01, momentum 0.9), hvd.DistributedOptimizer (with
hvd.Compression.fp16 for --hvd-fp16, groups=1 for --groups1); gradients
zeroed in place (model.zero_grad(set_to_none=False): doc/recipes.md,
Horovod), one thread per rank.  The first --warmup steps are timed apart
(the plan's measurements happen there); the timed steps run between two hvd
barriers (an allreduce of one integer); cpu/step is the mean over the ranks
of each process's CPU seconds a timed step.
Rank 0 prints one line:

    train_bench: ok, model M, ranks N, batch B, steps S, s/step T, images/s I, warmup W steps X s, cpu/step C, loss L[, hipress calls C compressed K]

and every rank checks that all end with the same parameters (a hash
allgathered); "FAIL: ..." and exit 1 otherwise.
"""
import argparse
import ctypes
import hashlib
import resource
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import horovod.torch as hvd


def hipress_counters():
    """rank-local (calls, compressed), or None without the preload"""
    try:
        get = ctypes.CDLL(None).hipress_stats_get
    except AttributeError:
        return None
    get.restype = None
    buf = (ctypes.c_ulonglong * 64)()
    get(buf)
    return buf[0], buf[1]


def barrier():
    hvd.allreduce(torch.zeros(1, dtype=torch.int32), name="train_bench_barrier", op=hvd.Sum)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=("resnet18", "mlp"), default="resnet18")
    ap.add_argument("--steps", type=int, default=30, help="timed steps")
    ap.add_argument("--warmup", type=int, default=20, help="steps timed apart first")
    ap.add_argument("--batch", type=int, help="per rank (default 16 for resnet18, 32 for mlp)")
    ap.add_argument("--hidden", type=int, default=1024, help="mlp width")
    ap.add_argument("--hvd-fp16", action="store_true", help="hvd.Compression.fp16")
    ap.add_argument("--groups1", action="store_true", help="groups=1: one fused call of every gradient a step")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.steps < 1 or args.warmup < 0:
        ap.error("--steps must be at least 1 and --warmup at least 0")

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(args.seed * 1000 + rank)
    if args.model == "resnet18":
        import torchvision
        batch = args.batch or 16
        model = torchvision.models.resnet18()
        x = torch.randn(batch, 3, 32, 32, generator=gen)
        y = torch.randint(0, 1000, (batch,), generator=gen)
        batches = lambda step: (x, y)
    else:
        from sklearn.datasets import load_digits
        batch = args.batch or 32
        h = args.hidden
        model = nn.Sequential(nn.Linear(64, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(),
                              nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 10))
        dx, dy = load_digits(return_X_y=True)
        dx = torch.from_numpy((dx / 16.0).astype(np.float32)[rank::size])
        dy = torch.from_numpy(dy[rank::size])
        order = torch.randperm(len(dx), generator=gen)

        def batches(step):
            i = (step * batch) % (len(order) - batch)
            idx = order[i:i + batch]
            return dx[idx], dy[idx]
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                   compression=hvd.Compression.fp16 if args.hvd_fp16 else hvd.Compression.none,
                                   groups=1 if args.groups1 else None)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    lossf = nn.CrossEntropyLoss()
    model.train()

    def step(i):
        xb, yb = batches(i)
        model.zero_grad(set_to_none=False)
        loss = lossf(model(xb), yb)
        loss.backward()
        opt.step()
        return loss

    barrier()
    tw = time.perf_counter()
    for i in range(args.warmup):
        step(i)
    barrier()
    t0 = time.perf_counter()
    c0 = resource.getrusage(resource.RUSAGE_SELF)
    for i in range(args.steps):
        loss = step(args.warmup + i)
    barrier()
    dt = time.perf_counter() - t0
    c1 = resource.getrusage(resource.RUSAGE_SELF)
    # this process's CPU seconds a step (all its threads), the mean over ranks
    cpu = hvd.allreduce(torch.tensor([(c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime) / args.steps],
                                     dtype=torch.float64), name="cpu_per_step", op=hvd.Average).item()

    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.detach().numpy().tobytes())
    mine = torch.tensor([int.from_bytes(digest.digest()[:8], "little", signed=True)], dtype=torch.int64)
    hashes = hvd.allgather(mine, name="param_hash").tolist()
    counters = hipress_counters()
    ok = len(set(hashes)) == 1
    if rank == 0:
        if ok:
            line = ("train_bench: ok, model %s, ranks %d, batch %d, steps %d, s/step %.4f, images/s %.2f, "
                    "warmup %d steps %.3f s, cpu/step %.4f, loss %.4f"
                    % (args.model, size, batch, args.steps, dt / args.steps, size * batch * args.steps / dt,
                       args.warmup, t0 - tw, cpu, loss.item()))
            if counters is not None:
                line += ", hipress calls %d compressed %d" % counters
            print(line, flush=True)
        else:
            print("FAIL: parameters differ across ranks: %d distinct hashes" % len(set(hashes)), flush=True)
    hvd.shutdown()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
