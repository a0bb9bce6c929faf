"""One timed PyTorch DDP training for scripts/lab/train_bench.sh: images per second.

    mpirun -np 4 -x MASTER_ADDR=h1 [-x LD_PRELOAD=libhipress.so -x HIPRESS_COMPRESSOR=onebit] \\
        python scripts/lab/ddp_bench.py --hook hipress --model resnet18 [--steps 30] [--warmup 20]

DDP over gloo on CPU tensors, one process a rank (rank and size from
mpirun's OMPI_COMM_WORLD_*), the same models, data, batch and optimizer as
scripts/lab/train_bench.py's Horovod runs.  --hook picks what reduces the
buckets:

  none       DDP's own allreduce (no hook)
  fp16       DDP's fp16_compress_hook
  powersgd   DDP's powerSGD_hook (rank 4, start_powerSGD_iter 2)
  hipress    hipress.torch.allreduce_hook (src/python; HIPRESS_* from the environment)
  floor      a hook that returns the bucket at once: the exchange skipped (the compute floor)

DDP_BUCKET_MB in the environment sets DDP's bucket_cap_mb (default 25).

The first --warmup steps are timed apart (between two barriers: the plan's
measurements happen there), then --steps timed steps.  Rank 0 prints one
line:

    train_bench: ok, model M, ranks N, batch B, steps S, s/step T, images/s I, warmup W steps X s, loss L[, hipress calls C compressed K]

and every rank checks that all end with the same parameters (a hash
allgathered); "FAIL: ..." and exit 1 otherwise.  An exception in a hook
(PowerSGD over gloo on some versions) prints "FAIL: <the error>".
"""
import argparse
import ctypes
import gc
import hashlib
import os
import resource
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def hipress_counters():
    try:
        get = ctypes.CDLL(None).hipress_stats_get
    except AttributeError:
        return None
    get.restype = None
    buf = (ctypes.c_ulonglong * 64)()
    get(buf)
    return buf[0], buf[1]


def thread_cpu():
    """(user, system) CPU seconds of hipress' exchange thread, None without one"""
    try:
        import hipress.torch as ht
        tid = ht._exchange.thread.native_id
        f = open("/proc/self/task/%d/stat" % tid).read().rsplit(")", 1)[1].split()
    except (ImportError, AttributeError, OSError):
        return None
    hz = os.sysconf("SC_CLK_TCK")
    return int(f[11]) / hz, int(f[12]) / hz


def floor_hook(state, bucket):
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=("resnet18", "mlp"), default="resnet18")
    ap.add_argument("--hook", choices=("none", "fp16", "powersgd", "hipress", "floor"), default="none")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--batch", type=int)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    size = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    addr = os.environ.get("MASTER_ADDR", "127.0.0.1")
    port = os.environ.get("MASTER_PORT", "29533")
    dist.init_process_group("gloo", init_method="tcp://%s:%s" % (addr, port), rank=rank, world_size=size)
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
    # DDP_BUCKET_MB: DDP's bucket_cap_mb (its default, 25, when unset)
    ddp = DDP(model, bucket_cap_mb=float(os.environ.get("DDP_BUCKET_MB", "25")))
    if args.hook == "fp16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif args.hook == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
        ddp.register_comm_hook(psgd.PowerSGDState(process_group=None, matrix_approximation_rank=4,
                                                  start_powerSGD_iter=2), psgd.powerSGD_hook)
    elif args.hook == "hipress":
        from hipress.torch import allreduce_hook
        ddp.register_comm_hook(None, allreduce_hook)
    elif args.hook == "floor":
        ddp.register_comm_hook(None, floor_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    lossf = nn.CrossEntropyLoss()
    ddp.train()

    def step(i):
        xb, yb = batches(i)
        opt.zero_grad(set_to_none=False)
        loss = lossf(ddp(xb), yb)
        loss.backward()
        opt.step()
        return loss

    try:
        dist.barrier()
        t0 = time.perf_counter()
        for i in range(args.warmup):
            step(i)
        dist.barrier()
        t1 = time.perf_counter()
        c1 = resource.getrusage(resource.RUSAGE_SELF)
        x1 = thread_cpu()
        for i in range(args.steps):
            loss = step(args.warmup + i)
        dist.barrier()
        t2 = time.perf_counter()
        c2 = resource.getrusage(resource.RUSAGE_SELF)
        x2 = thread_cpu()
    except Exception as e:   # a hook that cannot run here: say why, on one line
        print("FAIL: %s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""), flush=True)
        os._exit(1)
    dt = t2 - t1
    # this process's CPU seconds a step (all its threads): what the step
    # costs the cores, whatever else runs on them
    cpu = torch.tensor([(c2.ru_utime + c2.ru_stime - c1.ru_utime - c1.ru_stime) / args.steps], dtype=torch.float64)
    dist.all_reduce(cpu)
    # of which hipress' exchange thread, user and system
    xcpu = torch.tensor([(x2[0] - x1[0]) / args.steps, (x2[1] - x1[1]) / args.steps] if x1 and x2 else [0.0, 0.0],
                        dtype=torch.float64)
    dist.all_reduce(xcpu)
    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.detach().numpy().tobytes())
    mine = torch.tensor([int.from_bytes(digest.digest()[:8], "little", signed=True)], dtype=torch.int64)
    hashes = [torch.zeros(1, dtype=torch.int64) for _ in range(size)]
    dist.all_gather(hashes, mine)
    # (the floor exchanges nothing: its replicas differ by design)
    ok = len(set(int(h) for h in hashes)) == 1 or args.hook == "floor"
    counters = hipress_counters()
    if rank == 0:
        if ok:
            line = ("train_bench: ok, model %s, ranks %d, batch %d, steps %d, s/step %.4f, images/s %.2f, "
                    "warmup %d steps %.3f s, cpu/step %.4f, loss %.4f"
                    % (args.model, size, batch, args.steps, dt / args.steps, size * batch * args.steps / dt,
                       args.warmup, t1 - t0, cpu.item() / size, loss.item()))
            if x1 and x2:
                line += ", exchange cpu/step %.4f user %.4f system" % (xcpu[0].item() / size, xcpu[1].item() / size)
            if counters is not None:
                line += ", hipress calls %d compressed %d" % counters
            print(line, flush=True)
        else:
            print("FAIL: parameters differ across ranks: %d distinct hashes" % len(set(int(h) for h in hashes)),
                  flush=True)
    # DDP's reducer holds the process group: let it go while the group
    # lives, so that the group's destructor (which joins gloo's threads) runs
    # in destroy_process_group without the GIL.  Left to the end of main,
    # torch 1.13 destroys the group from the reducer's destructor with the
    # GIL held, and a gloo thread releasing a tensor waits for the GIL: the
    # rank never exits (about one run in ten).
    del step, ddp
    gc.collect()
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
