"""Data-parallel trainings under mpirun for the accuracy studies of
doc/accuracy.md: a transformer language model with AdamW, and the digits MLP
with momentum SGD, through PyTorch DDP (with or without hipress' comm hook)
or Horovod.

    mpirun -np 4 [-x LD_PRELOAD=libhipress.so -x HIPRESS_COMPRESSOR=onebit] \\
        python tests/study/study_train.py --task lm --dist ddp --hook hipress [--steps 300] [--seed 1]

--task lm: the licence texts every Debian system ships
  (/usr/share/common-licenses, about 220 KB of English), bytes as tokens;
  the last tenth of each file held out for validation.  A pre-norm
  decoder-only transformer (--layers, --dim, --heads, context --ctx, a
  feed-forward of 4 x dim: 1 MiB matrices at dim 256), learned positions,
  tied embedding.  AdamW (lr 1e-3, betas 0.9/0.95, weight decay 0.1 on
  matrices), --warmup steps of linear warm-up, cosine decay to a tenth.
  Reported: the validation loss in nats and bits per byte (16 fixed windows
  of 16).
--task digits: scikit-learn's digits, the MLP 64-H-H-10 (H = --dim, default
  1024 here) of the convergence study, each rank its own shard, batch 32,
  SGD (lr 0.05, momentum 0.9).  Reported: test accuracy and loss on the
  held-out quarter.
--opt overrides the task's optimizer (adamw or sgd).

--dist: ddp (PyTorch DDP over gloo, rank and size from mpirun; --hook none:
DDP's own allreduce, --hook hipress: hipress.torch.allreduce_hook) or hvd
(Horovod's DistributedOptimizer, its default fusion; HOROVOD_CPU_OPERATIONS
=MPI makes its MPI_Allreduce calls reach a preloaded libhipress.so).  Each
rank draws its own batches (seeded by --seed and its rank); every rank
starts from the same weights.

Rank 0 prints one line, after checking that every rank ends with the same
parameters:

    study_train: ok, task T, dist D, hook H, opt O, ranks N, steps S, seed K, train_loss X, val_loss V, val_bpb B, test_acc A, s/step Y

("FAIL: ..." and exit 1 on different parameters or a non-finite loss).
"""
import argparse
import gc
import glob
import hashlib
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def corpus(val_frac=0.1):
    """(train bytes, validation bytes): each licence file split at 90%"""
    train, val = bytearray(), bytearray()
    for path in sorted(glob.glob("/usr/share/common-licenses/*")):
        if os.path.islink(path):
            continue   # (GPL -> GPL-3 and the like: each text once)
        data = open(path, "rb").read()
        cut = int(len(data) * (1 - val_frac))
        train += data[:cut]
        val += data[cut:]
    if len(train) < 100000:
        raise SystemExit("FAIL: /usr/share/common-licenses holds too little text (%d bytes)" % len(train))
    return torch.tensor(list(train), dtype=torch.long), torch.tensor(list(val), dtype=torch.long)


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.ff(self.ln2(x))


class ByteLM(nn.Module):
    def __init__(self, layers, dim, heads, ctx):
        super().__init__()
        self.emb = nn.Embedding(256, dim)
        self.pos = nn.Parameter(torch.zeros(ctx, dim))
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)
        nn.init.normal_(self.pos, std=0.02)
        nn.init.normal_(self.emb.weight, std=0.02)
        self.register_buffer("mask", torch.triu(torch.full((ctx, ctx), float("-inf")), diagonal=1))

    def forward(self, idx):
        T = idx.shape[1]
        x = self.emb(idx) + self.pos[:T]
        for b in self.blocks:
            x = b(x, self.mask[:T, :T])
        return self.ln(x) @ self.emb.weight.t()


def windows(data, ctx, batch, gen):
    i = torch.randint(0, len(data) - ctx - 1, (batch,), generator=gen)
    x = torch.stack([data[j:j + ctx] for j in i.tolist()])
    y = torch.stack([data[j + 1:j + ctx + 1] for j in i.tolist()])
    return x, y


class LMTask:
    def __init__(self, args, rank, size):
        self.train, self.val = corpus()
        self.args = args
        torch.manual_seed(args.seed)
        self.model = ByteLM(args.layers, args.dim or 256, args.heads, args.ctx)

    def opt_groups(self):
        named = list(self.model.named_parameters())
        decay = [p for n, p in named if p.dim() >= 2 and n != "pos"]
        rest = [p for n, p in named if not (p.dim() >= 2 and n != "pos")]
        return [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}]

    def batch(self, step, gen):
        return windows(self.train, self.args.ctx, self.args.batch or 8, gen)

    def loss(self, out, y):
        return F.cross_entropy(out.reshape(-1, 256), y.reshape(-1))

    def evaluate(self):
        vgen = torch.Generator().manual_seed(12345)
        vl = sum(self.loss(self.model(x), y).item()
                 for x, y in (windows(self.val, self.args.ctx, 16, vgen) for _ in range(16))) / 16
        return {"val_loss": vl, "val_bpb": vl / math.log(2), "test_acc": float("nan")}


class DigitsTask:
    def __init__(self, args, rank, size):
        import numpy as np
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
        x, y = load_digits(return_X_y=True)
        x = (x / 16.0).astype(np.float32)
        xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)
        self.x, self.y = torch.from_numpy(xtr[rank::size]), torch.from_numpy(ytr[rank::size])
        self.xte, self.yte = torch.from_numpy(xte), torch.from_numpy(yte)
        self.args = args
        h = args.dim or 1024
        torch.manual_seed(args.seed)
        self.model = nn.Sequential(nn.Linear(64, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 10))

    def opt_groups(self):
        return [{"params": list(self.model.parameters())}]

    def batch(self, step, gen):
        idx = torch.randint(0, len(self.x), (self.args.batch or 32,), generator=gen)
        return self.x[idx], self.y[idx]

    def loss(self, out, y):
        return F.cross_entropy(out, y)

    def evaluate(self):
        out = self.model(self.xte)
        return {"val_loss": F.cross_entropy(out, self.yte).item(), "val_bpb": float("nan"),
                "test_acc": (out.argmax(1) == self.yte).float().mean().item()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", choices=("lm", "digits"), default="lm")
    ap.add_argument("--dist", choices=("ddp", "hvd"), default="ddp")
    ap.add_argument("--hook", choices=("none", "hipress"), default="none")
    ap.add_argument("--opt", choices=("adamw", "sgd"))
    ap.add_argument("--steps", type=int)
    ap.add_argument("--warmup", type=int, default=30, help="lm: warm-up steps")
    ap.add_argument("--lr", type=float)
    ap.add_argument("--batch", type=int, help="per rank (lm: windows, default 8; digits: 32)")
    ap.add_argument("--ctx", type=int, default=128)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--dim", type=int, help="lm: model width (256); digits: hidden width (1024)")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    opt_name = args.opt or ("adamw" if args.task == "lm" else "sgd")
    steps = args.steps or (300 if args.task == "lm" else 110)

    torch.set_num_threads(1)
    if args.dist == "ddp":
        import torch.distributed as dist
        rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
        size = int(os.environ["OMPI_COMM_WORLD_SIZE"])
        dist.init_process_group("gloo", init_method="tcp://%s:%s" % (os.environ.get("MASTER_ADDR", "127.0.0.1"),
                                                                     os.environ.get("MASTER_PORT", "29541")),
                                rank=rank, world_size=size)
    else:
        import horovod.torch as hvd
        hvd.init()
        rank, size = hvd.rank(), hvd.size()
    task = (LMTask if args.task == "lm" else DigitsTask)(args, rank, size)
    model = task.model
    if opt_name == "adamw":
        opt = torch.optim.AdamW(task.opt_groups(), lr=args.lr or 1e-3, betas=(0.9, 0.95))
    else:
        opt = torch.optim.SGD(task.opt_groups(), lr=args.lr or 0.05, momentum=0.9)
    warm = args.warmup if args.task == "lm" else 0
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm else
        (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, (s - warm) / max(1, steps - warm))))
         if args.task == "lm" else 1.0))
    if args.dist == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        net = DDP(model)
        if args.hook == "hipress":
            from hipress.torch import allreduce_hook
            net.register_comm_hook(None, allreduce_hook)
    else:
        net = model
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    gen = torch.Generator().manual_seed(args.seed * 7919 + rank)
    model.train()
    t0 = time.perf_counter()
    for step in range(steps):
        x, y = task.batch(step, gen)
        model.zero_grad(set_to_none=False)
        loss = task.loss(net(x), y)
        loss.backward()
        opt.step()
        sched.step()
        if not math.isfinite(loss.item()):
            print("FAIL: rank %d: loss %s at step %d" % (rank, loss.item(), step), flush=True)
            return 1
    dt = time.perf_counter() - t0
    model.eval()
    with torch.no_grad():
        ev = task.evaluate()
    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.detach().numpy().tobytes())
    mine = torch.tensor([int.from_bytes(digest.digest()[:8], "little", signed=True)], dtype=torch.int64)
    if args.dist == "ddp":
        hashes = [torch.zeros(1, dtype=torch.int64) for _ in range(size)]
        dist.all_gather(hashes, mine)
        hashes = [int(h) for h in hashes]
    else:
        hashes = hvd.allgather(mine, name="param_hash").tolist()
    ok = len(set(hashes)) == 1
    if rank == 0:
        if ok:
            print("study_train: ok, task %s, dist %s, hook %s, opt %s, ranks %d, steps %d, seed %d, train_loss %.4f, "
                  "val_loss %.4f, val_bpb %.4f, test_acc %.4f, s/step %.3f"
                  % (args.task, args.dist, args.hook, opt_name, size, steps, args.seed, loss.item(), ev["val_loss"],
                     ev["val_bpb"], ev["test_acc"], dt / steps), flush=True)
        else:
            print("FAIL: parameters differ across ranks: %d distinct hashes" % len(set(hashes)), flush=True)
    if args.dist == "hvd":
        hvd.shutdown()
    else:
        # the DDP model goes first, then the group (scripts/lab/ddp_bench.py
        # says why: torch 1.13 can deadlock at exit otherwise)
        del net
        gc.collect()
        dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
