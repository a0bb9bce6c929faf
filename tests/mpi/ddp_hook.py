"""The DDP comm hook (hipress.torch.allreduce_hook) under mpirun: what DDP does
with its buckets, checked against exact sums.  Run by tests/mpi/run_ddp_hook.sh:

    mpirun -np N -x LD_PRELOAD=libhipress.so -x HIPRESS_COMPRESSOR=none -x HIPRESS_MIN_BYTES=0 \\
        python tests/mpi/ddp_hook.py exact        # every case below, lossless: exact means
    mpirun ... -x HIPRESS_COMPRESSOR=onebit python tests/mpi/ddp_hook.py lossy   # replicas identical
    mpirun ... python tests/mpi/ddp_hook.py mismatch   # rank 0's buckets differ: HipressError everywhere

exact: models whose gradients are integers (each Linear layer gets integer
inputs and the loss weighs its outputs with integer coefficients), so the
mean over 2 or 4 ranks is exact whatever the summation order, and every
gradient after the hook must equal the mean each rank computes from every
rank's inputs itself.  Cases: several buckets (bucket_cap_mb 0.5), the bucket
rebuild after the first iteration (layers used in the reverse order of
their registration), no_sync (two micro-batches accumulated, then a synced
one), an unused parameter (find_unused_parameters), static_graph, and
gradient_as_bucket_view.  Each case runs 3 iterations and must have made
compressed calls (hipress' stats).

lossy: onebit, 6 SGD steps through the hook (layers used in the reverse
order of their registration, so DDP's rebuild lays the buckets out anew):
every rank ends with the same parameters, and the loss stays finite.

mismatch: rank 0's hook says each bucket is the next one, so its buckets
differ from the others': every rank must get a HipressError naming the
bucket, not hang.

Prints "ddp_hook: CASE ok" per case from rank 0; exits 1 on a failure.
"""
import ctypes
import hashlib
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import hipress
from hipress.torch import HipressError, allreduce_hook

RANK = int(os.environ["OMPI_COMM_WORLD_RANK"])
SIZE = int(os.environ["OMPI_COMM_WORLD_SIZE"])
FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL: rank %d: %s" % (RANK, what), flush=True)


def compressed_calls():
    buf = (ctypes.c_ulonglong * 64)()
    lib = hipress.library()
    lib.hipress_stats_get.restype = None
    lib.hipress_stats_get(buf)
    return buf[1]


class Parallel(nn.Module):
    """Independent Linear layers; forward takes one input per layer and
    returns the integer-weighted sum of their outputs."""

    def __init__(self, sizes, reverse=False, unused=False):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(i, o) for i, o in sizes)
        self.reverse = reverse
        self.spare = nn.Linear(4, 4) if unused else None

    def forward(self, xs, cs):
        order = range(len(self.layers))
        if self.reverse:
            order = reversed(order)
        return sum((self.layers[k](xs[k]) * cs[k]).sum() for k in order)


SIZES = [(64, 512), (512, 256), (128, 1024), (256, 300), (32, 64)]


def batch(rank, it, micro=0):
    g = torch.Generator().manual_seed(1000 * rank + 10 * it + micro + 1)
    xs = [torch.randint(-3, 4, (4, i), generator=g).float() for i, _ in SIZES]
    cs = [torch.randint(-2, 3, (4, o), generator=g).float() for _, o in SIZES]
    return xs, cs


def expected_grads(model, it, micros):
    """the mean over every rank of the gradients of the local model's loss"""
    ref = [torch.zeros_like(p) for p in model.parameters()]
    for r in range(SIZE):
        for m in range(micros):
            model.zero_grad(set_to_none=False)
            xs, cs = batch(r, it, m)
            model(xs, cs).backward()
            for acc, p in zip(ref, model.parameters()):
                if p.grad is not None:
                    acc += p.grad
    return [a / SIZE for a in ref]


def run_exact(name, reverse=False, unused=False, no_sync=False, **ddp_kw):
    torch.manual_seed(0)
    local = Parallel(SIZES, reverse=reverse, unused=unused)
    model = Parallel(SIZES, reverse=reverse, unused=unused)
    model.load_state_dict(local.state_dict())
    ddp = DDP(model, bucket_cap_mb=0.5, **ddp_kw)
    ddp.register_comm_hook(None, allreduce_hook)
    before = compressed_calls()
    for it in range(3):
        ddp.zero_grad(set_to_none=False)
        micros = 2 if no_sync else 1
        if no_sync:
            with ddp.no_sync():
                xs, cs = batch(RANK, it, 0)
                ddp(xs, cs).backward()
        xs, cs = batch(RANK, it, micros - 1)
        ddp(xs, cs).backward()
        want = expected_grads(local, it, micros)
        for k, (p, w) in enumerate(zip(model.parameters(), want)):
            if p.grad is None:
                check(unused and k >= 2 * len(SIZES), "%s it %d: parameter %d has no gradient" % (name, it, k))
                continue
            bad = (p.grad != w).sum().item()
            check(bad == 0, "%s it %d: parameter %d: %d elements differ from the exact mean (max diff %g)"
                  % (name, it, k, bad, (p.grad - w).abs().max().item()))
    check(compressed_calls() > before, "%s: no call was compressed" % name)
    if RANK == 0 and not FAILS:
        print("ddp_hook: %s ok" % name, flush=True)


def case_exact():
    run_exact("buckets")
    run_exact("rebuild", reverse=True)
    run_exact("no_sync", no_sync=True)
    run_exact("unused", unused=True, find_unused_parameters=True)
    run_exact("static_graph", reverse=True, static_graph=True)
    run_exact("bucket_view", gradient_as_bucket_view=True)


def case_lossy():
    torch.manual_seed(0)
    # (layers used in the reverse order of their registration: DDP's
    # rebuild after the first iteration lays the buckets out anew)
    model = Parallel(SIZES, reverse=True)
    ddp = DDP(model, bucket_cap_mb=0.5)
    ddp.register_comm_hook(None, allreduce_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.001, momentum=0.9)
    before = compressed_calls()
    for it in range(6):
        xs, cs = batch(RANK, it)
        opt.zero_grad(set_to_none=False)
        loss = ddp(xs, cs)
        loss.backward()
        opt.step()
    check(torch.isfinite(loss).item(), "lossy: loss %s" % loss.item())
    digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).digest()
    mine = torch.tensor([int.from_bytes(digest[:8], "little", signed=True)])
    hashes = [torch.zeros(1, dtype=torch.int64) for _ in range(SIZE)]
    dist.all_gather(hashes, mine)
    check(len(set(int(h) for h in hashes)) == 1, "lossy: parameters differ across ranks")
    check(compressed_calls() > before, "lossy: no call was compressed")
    if RANK == 0 and not FAILS:
        print("ddp_hook: lossy ok", flush=True)


class Shifted:
    """a bucket that says it is the next one: rank 0's buckets then differ
    from everybody else's (DDP itself broadcasts rank 0's bucket layout at
    its rebuild, so only a client of another kind, or a broken DDP, would)"""

    def __init__(self, bucket):
        self.b = bucket

    def buffer(self):
        return self.b.buffer()

    def index(self):
        return self.b.index() + 1

    def is_last(self):
        return self.b.is_last()

    def parameters(self):
        return self.b.parameters()


def shifted_hook(state, bucket):
    return allreduce_hook(state, Shifted(bucket))


def case_mismatch():
    torch.manual_seed(0)
    model = Parallel(SIZES)
    ddp = DDP(model, bucket_cap_mb=0.5)
    ddp.register_comm_hook(None, shifted_hook if RANK == 0 else allreduce_hook)
    try:
        # (DDP's first iteration has one layout everywhere; the bucket sizes
        # apply from its rebuild on)
        for it in range(3):
            xs, cs = batch(RANK, it)
            ddp(xs, cs).backward()
        check(False, "mismatch: three backward passes returned without an error")
    except HipressError as e:
        check("bucket" in str(e), "mismatch: the error does not name the bucket: %s" % e)
    except RuntimeError as e:   # DDP re-raises the future's exception as its own
        check("bucket" in str(e), "mismatch: the error does not name the bucket: %s" % e)
    if RANK == 0 and not FAILS:
        print("ddp_hook: mismatch ok", flush=True)
    sys.stdout.flush()


def main():
    case = sys.argv[1]
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%s" % os.environ.get("HP_DDP_PORT", "29561"),
                            rank=RANK, world_size=SIZE)
    torch.set_num_threads(1)
    {"exact": case_exact, "lossy": case_lossy, "mismatch": case_mismatch}[case]()
    dist.destroy_process_group()
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
