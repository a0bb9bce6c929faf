"""What Horovod passes to MPI_Allreduce, step by step (doc/measured/horovod-layouts.md).

Run under mpirun with the tracing shim tests/study/hvd_trace_shim.c preloaded:

    mpirun -np 4 -x LD_PRELOAD=$SHIM -x HVD_TRACE_SHIM=$SHIM -x HVD_TRACE_DIR=$DIR \
        -x HOROVOD_CPU_OPERATIONS=MPI $VENV/bin/python tests/study/hvd_layout_study.py [options]

then summarise with tests/study/hvd_trace_summary.py $DIR.  The model is an MLP
64-H-H-...-H-10 on scikit-learn's digits with several same-shaped hidden
layers (H x H weights and H biases), SGD with momentum, hvd.DistributedOptimizer.
A gradient hook registered before Horovod's tells the shim where each
gradient lives and what it holds, so the shim can name the tensors in each
fused buffer; the hook also records every gradient's address at each step
(ptrs.<rank>.json) to see whether addresses move between steps.
"""
import argparse
import ctypes
import json
import os

import numpy as np
import torch
import torch.nn as nn
import horovod.torch as hvd
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=4, help="hidden layers (all but the first are HxH)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--groups", default="",
                    help="N: DistributedOptimizer(groups=N); 'layer': one explicit group per layer "
                         "(weight and bias); 'all': one explicit group of every parameter")
    ap.add_argument("--set-to-none", action="store_true", help="zero_grad(set_to_none=True)")
    args = ap.parse_args()

    hvd.init()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    rank, size = hvd.rank(), hvd.size()

    shim = None
    if os.environ.get("HVD_TRACE_SHIM"):
        shim = ctypes.CDLL(os.environ["HVD_TRACE_SHIM"])
        shim.hvdtrace_register.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_long]
        shim.hvdtrace_mark.argtypes = [ctypes.c_char_p]

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.2, random_state=0, stratify=y)
    xtr, ytr = torch.from_numpy(xtr[rank::size]), torch.from_numpy(ytr[rank::size])

    mods = [nn.Linear(64, args.hidden), nn.ReLU()]
    for _ in range(args.layers - 1):
        mods += [nn.Linear(args.hidden, args.hidden), nn.ReLU()]
    mods.append(nn.Linear(args.hidden, 10))
    model = nn.Sequential(*mods)
    params = list(model.named_parameters())

    # Our hook on each gradient accumulator, registered before Horovod's, so
    # it runs first: the gradient is complete and not yet handed to Horovod.
    ptrs = []          # per step: {param index: address}
    keep = []
    for i, (name, p) in enumerate(params):
        acc = p.expand_as(p).grad_fn.next_functions[0][0]

        def hook(*_unused, i=i, p=p):
            g = p.grad
            ptrs[-1][i] = g.data_ptr()
            if shim is not None:
                shim.hvdtrace_register(i, g.data_ptr(), g.numel())
        acc.register_hook(hook)
        keep.append(acc)

    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    kw = {}
    if args.groups == "layer":
        kw["groups"] = [[w, b] for w, b in zip(list(model.parameters())[0::2], list(model.parameters())[1::2])]
    elif args.groups == "all":
        kw["groups"] = [list(model.parameters())]
    elif args.groups:
        kw["groups"] = int(args.groups)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(), **kw)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)

    if rank == 0:
        print("tensors: " + ", ".join("%d=%s:%d" % (i, n, p.numel()) for i, (n, p) in enumerate(params)))
    gen = torch.Generator().manual_seed(args.seed * 1000 + rank)
    lossf = nn.CrossEntropyLoss()
    order = torch.randperm(len(xtr), generator=gen)
    pos = 0
    for step in range(args.steps):
        if shim is not None:
            shim.hvdtrace_mark(("step %d" % step).encode())
            shim.hvdtrace_reset()
        ptrs.append({})
        if pos + args.batch > len(order):
            order, pos = torch.randperm(len(xtr), generator=gen), 0
        idx = order[pos:pos + args.batch]
        pos += args.batch
        # Horovod 0.28.1's DistributedOptimizer.zero_grad() takes no argument
        # (it uses torch's default); the module's zero_grad takes one.
        model.zero_grad(set_to_none=args.set_to_none)
        loss = lossf(model(xtr[idx]), ytr[idx])
        loss.backward()
        opt.step()
    if shim is not None:
        shim.hvdtrace_mark(b"end")

    with torch.no_grad():
        acc = (model(torch.from_numpy(xte)).argmax(1).numpy() == yte).mean()
    if rank == 0:
        print("final loss %.4f test accuracy %.4f" % (loss.item(), acc))
    d = os.environ.get("HVD_TRACE_DIR")
    if d:
        with open(os.path.join(d, "ptrs.%d.json" % rank), "w") as f:
            json.dump({"names": [n for n, _ in params], "numel": [p.numel() for _, p in params],
                       "ptrs": [[s.get(i) for i in range(len(params))] for s in ptrs]}, f)
    hvd.shutdown()


if __name__ == "__main__":
    main()
