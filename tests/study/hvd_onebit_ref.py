"""Textbook onebit on Horovod's groups=1 buffer (doc/measured/horovod-layouts.md, "groups=1 and onebit").

Two modes, both for the model of tests/study/horovod_train.py (64-H-H-H-10, H = --hidden):

compare DIR  (no MPI; /usr/bin/python3 or the Horovod venv)
    Reads the dumps of tests/study/hvd_dump_shim.c (DIR/dump.<rank>: every float32
    MPI_SUM call's input and output on every rank, in call order), recomputes
    each call with textbook single-stage onebit with error feedback, in numpy,
    on exactly those inputs (the buffer as it was: its layout, its blocks of
    --block elements from the buffer's first element, one residual per rank
    carried from call to call, the decoded messages summed in rank order;
    the sum Horovod divides by the size afterwards), and prints per call and
    in total how far hipress' output is from the textbook's, and the error of
    each against the exact sum, per tensor.  Beside it, open-loop on the same
    inputs: the textbook with blocks restarting at every tensor ("tensor
    blocks") and with the tensors under --min-bytes summed exactly ("small
    exact": recipe 1's split inside the one buffer).

        /usr/bin/python3 tests/study/hvd_onebit_ref.py compare /tmp/d [--hidden 512] [--block 4096]

train  (under mpirun, with the Horovod venv, without libhipress.so)
    The training of tests/study/horovod_train.py --single-group (same data, shards,
    seeds, model, optimizer and steps), with the gradient exchange done here:
    the gradients concatenated in parameter order (Horovod's groups=1
    buffer), encoded per rank by the textbook FORM, every rank's decoded values
    allgathered and summed in rank order in float32 (as hipress' allgather),
    divided by the size (exact: hvd.allreduce(op=Sum) of the gradients).  Prints the
    same ok line as horovod_train.py.  FORM: exact (no compression: must equal
    plain horovod_train.py), onebit (blocks over the buffer, as hipress),
    onebit-tensor (blocks restart at each tensor), onebit-small-exact (tensors
    under --min-bytes exact, the rest onebit with tensor blocks), onebit-nores
    (no error feedback), sr2 (unbiased: stochastic rounding to 4 levels of each
    block's min-max range, no residual).

        mpirun -np 4 $VENV/bin/python tests/study/hvd_onebit_ref.py train --form onebit [--seed S]
"""
import argparse
import hashlib
import os
import sys
import time

import numpy as np

TENSORS = ("0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias", "6.weight", "6.bias")


def tensor_sizes(h):
    """float counts of horovod_train.py's gradients in parameter order"""
    return [64 * h, h, h * h, h, h * h, h, 10 * h, 10]


CHUNK = 2048   # HP_OPS_CHUNK: the library sums a block chunk by chunk
LANES = 32


class Blocks:
    """onebit's blocks of a buffer of the given tensor sizes: from the
    buffer's first element, or restarting at each tensor (per_tensor)"""

    def __init__(self, sizes, block, per_tensor):
        n = sum(sizes)
        if per_tensor:
            spans, o = [], 0
            for s in sizes:
                spans += [(o + b, min(block, s - b)) for b in range(0, s, block)]
                o += s
        else:
            spans = [(b, min(block, n - b)) for b in range(0, n, block)]
        self.nb = len(spans)
        self.ids = np.empty(n, np.int64)
        # each element's place in a chunk-padded array: chunk row, then position in the chunk
        self.dest = np.empty(n, np.int64)
        chunk_block, row = [], 0
        for b, (st, ln) in enumerate(spans):
            self.ids[st:st + ln] = b
            k = np.arange(ln)
            self.dest[st:st + ln] = (row + k // CHUNK) * CHUNK + k % CHUNK
            nc = -(-ln // CHUNK)
            chunk_block += [b] * nc
            row += nc
        self.nchunks = row
        self.chunk_block = np.array(chunk_block, np.int64)
        # a block's chunks in order: chunk j of block b at chunk_index[b, j] (-1: none)
        maxc = max(-(-ln // CHUNK) for _, ln in spans)
        self.chunk_index = np.full((self.nb, maxc), -1, np.int64)
        first = np.searchsorted(self.chunk_block, np.arange(self.nb))
        for j in range(maxc):
            c = first + j
            ok = (c < row) & (self.chunk_block[np.minimum(c, row - 1)] == np.arange(self.nb))
            self.chunk_index[ok, j] = c[ok]

    def sums(self, w):
        """per block, the sum of float32 w in the library's order: 32 float32
        lanes per chunk (element i of the chunk in lane i % 32, in order),
        the lanes summed in double, the chunks' sums in chunk order"""
        a = np.zeros(self.nchunks * CHUNK, np.float32)
        a[self.dest] = w
        a = a.reshape(self.nchunks, CHUNK // LANES, LANES)
        lanes = np.zeros((self.nchunks, LANES), np.float32)
        for i in range(CHUNK // LANES):
            lanes += a[:, i, :]
        cs = np.zeros(self.nchunks, np.float64)
        for j in range(LANES):
            cs += lanes[:, j].astype(np.float64)
        cs = np.append(cs, 0.0)   # index -1: a missing chunk adds 0
        out = np.zeros(self.nb, np.float64)
        for j in range(self.chunk_index.shape[1]):
            out += cs[self.chunk_index[:, j]]
        return out


def onebit_decode(v, blocks):
    """textbook onebit of float32 v: per block, s+ = mean of the v >= 0, s- =
    mean of the v < 0 (an empty class has scale 0); each element decodes to
    its class's scale (float32).  The sums are taken in the library's order
    (Blocks.sums), so the scales are the library's to the bit."""
    ids, nb = blocks.ids, blocks.nb
    pos = v >= 0
    zero = np.float32(0.0)
    sp = blocks.sums(np.where(pos, v, zero))
    sn = blocks.sums(np.where(pos, zero, v))
    cp = np.bincount(ids, weights=pos, minlength=nb)
    cn = np.bincount(ids, weights=~pos, minlength=nb)
    mp = np.where(cp > 0, sp / np.maximum(cp, 1), 0.0).astype(np.float32)
    mn = np.where(cn > 0, sn / np.maximum(cn, 1), 0.0).astype(np.float32)
    return np.where(pos, mp[ids], mn[ids])


def sr2_decode(v, ids, rng):
    """unbiased 2-bit: stochastic rounding to 4 evenly spaced levels of each block's [min, max]"""
    nb = int(ids[-1]) + 1
    lo = np.full(nb, np.inf, np.float32)
    hi = np.full(nb, -np.inf, np.float32)
    np.minimum.at(lo, ids, v)
    np.maximum.at(hi, ids, v)
    step = (hi - lo) / 3
    s = step[ids]
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.where(s > 0, (v - lo[ids]) / s, 0.0)
    q = np.floor(t)
    q += rng.random(v.shape) < (t - q)
    return (lo[ids] + np.minimum(q, 3) * s).astype(np.float32)


class Form:
    """one rank's encoder: decoded value of its contribution, residual kept here"""

    def __init__(self, name, sizes, block, min_floats, seed, rank):
        self.name, self.sizes = name, sizes
        n = sum(sizes)
        per_tensor = name in ("onebit-tensor", "onebit-small-exact")
        self.blocks = Blocks(sizes, block, per_tensor)
        self.exact = np.zeros(n, bool)
        if name == "onebit-small-exact":
            o = 0
            for s in sizes:
                if s < min_floats:
                    self.exact[o:o + s] = True
                o += s
        self.residual = np.zeros(n, np.float32) if name.startswith("onebit") and name != "onebit-nores" else None
        self.rng = np.random.default_rng([seed, rank, 777])

    def __call__(self, g):
        if self.name == "exact":
            return g.copy()
        v = g + self.residual if self.residual is not None else g.copy()
        d = sr2_decode(v, self.blocks.ids, self.rng) if self.name == "sr2" else onebit_decode(v, self.blocks)
        d[self.exact] = v[self.exact]
        if self.residual is not None:
            self.residual = v - d
        return d


# ------------------------------------------------------------------ compare

def read_dump(path):
    """yield (seq, count, input, output) of every recorded call"""
    with open(path, "rb") as f:
        while True:
            head = f.read(32)
            if not head:
                return
            seq, count, _inplace, _addr = np.frombuffer(head, "<i8")
            x = np.fromfile(f, "<f4", int(count))
            y = np.fromfile(f, "<f4", int(count))
            if len(y) != count:
                raise SystemExit("%s: truncated at call %d" % (path, seq))
            yield int(seq), int(count), x, y


def rel(a, b):
    nb = np.linalg.norm(b.astype(np.float64))
    return np.linalg.norm((a - b).astype(np.float64)) / nb if nb > 0 else 0.0


def compare(args):
    ranks = sorted(int(f.split(".")[1]) for f in os.listdir(args.dir) if f.startswith("dump."))
    if ranks != list(range(len(ranks))) or len(ranks) < 2:
        raise SystemExit("%s: want dump.0 .. dump.N-1, found ranks %s" % (args.dir, ranks))
    N = len(ranks)
    sizes = tensor_sizes(args.hidden)
    n = sum(sizes)
    offs = np.cumsum([0] + sizes)
    readers = [read_dump(os.path.join(args.dir, "dump.%d" % r)) for r in ranks]
    min_floats = args.min_bytes // 4
    forms = {name: [Form(name, sizes, args.block, min_floats, 0, r) for r in ranks]
             for name in ("onebit", "onebit-tensor", "onebit-small-exact")}
    nt = len(sizes)
    err = {name: np.zeros(nt) for name in list(forms) + ["hipress"]}
    gnorm = np.zeros(nt)
    worst_diff, worst_call, ident, total, calls = 0.0, 0, 0, 0, 0
    diffs = []
    print("# call  |hipress - textbook|max / |textbook|max  identical  rel.err hipress  textbook (whole buffer, vs exact sum)")
    for recs in zip(*readers):
        if args.calls and calls >= args.calls:
            break
        seqs = {s for s, _, _, _ in recs}
        counts = {c for _, c, _, _ in recs}
        if len(seqs) != 1 or counts != {n}:
            raise SystemExit("call %s: counts %s, want %d on every rank (the --hidden %d model's %d floats)"
                             % (sorted(seqs), sorted(counts), n, args.hidden, n))
        outs = [y for _, _, _, y in recs]
        if any(not np.array_equal(outs[0], o, equal_nan=True) for o in outs[1:]):
            raise SystemExit("call %d: hipress' outputs differ across ranks" % calls)
        hip = outs[0]
        exact = np.zeros(n, np.float64)
        for _, _, x, _ in recs:
            exact += x
        res = {}
        for name, per_rank in forms.items():
            s = np.zeros(n, np.float32)
            for r, (_, _, x, _) in enumerate(recs):
                s += per_rank[r](x)   # rank order, float32, as hipress' allgather decodes
            res[name] = s
        ref = res["onebit"]
        scale = float(np.max(np.abs(ref))) or 1.0
        d = float(np.max(np.abs(hip - ref))) / scale
        diffs.append(d)
        if d > worst_diff:
            worst_diff, worst_call = d, calls
        ident += int(np.count_nonzero(hip == ref))
        total += n
        for t in range(nt):
            sl = slice(offs[t], offs[t + 1])
            gnorm[t] += np.linalg.norm(exact[sl])
            err["hipress"][t] += rel(hip[sl], exact[sl])
            for name in forms:
                err[name][t] += rel(res[name][sl], exact[sl])
        if calls < 5 or calls % args.every == 0:
            print("%6d  %.3g  %.6f  %.4f  %.4f" % (calls, d, np.count_nonzero(hip == ref) / n,
                                                  rel(hip, exact), rel(ref, exact)))
        calls += 1
    if calls == 0:
        raise SystemExit("no call recorded")
    print("calls %d, ranks %d, floats %d, block %d" % (calls, N, n, args.block))
    print("hipress against the textbook: max |difference| / max |textbook| %.3g (call %d), median %.3g; "
          "%.4f%% of elements bit-identical" % (worst_diff, worst_call, float(np.median(diffs)),
                                                100.0 * ident / total))
    print("mean over calls of |result - exact sum| / |exact sum|, per tensor:")
    print("(lag: |sum of the ranks' residuals| after the last call / mean |exact sum| of a call: the steps of\n"
          " gradient the applied updates are behind; by conservation, sum of outputs = sum of inputs - residuals)")
    print("%-10s %9s %8s %8s %8s %13s %12s %8s %13s" % ("tensor", "floats", "blocks", "hipress", "textbook",
                                                      "tensor blocks", "small exact", "lag", "lag (tensor)"))
    ids = Blocks(sizes, args.block, False).ids
    lag = {}
    for name in ("onebit", "onebit-tensor"):
        rsum = np.zeros(n, np.float64)
        for f in forms[name]:
            rsum += f.residual
        lag[name] = [np.linalg.norm(rsum[offs[t]:offs[t + 1]]) / (gnorm[t] / calls) for t in range(nt)]
    for t in range(nt):
        sl = slice(offs[t], offs[t + 1])
        shared = np.unique(ids[sl])
        print("%-10s %9d %8s %8.4f %8.4f %13.4f %12.4f %8.2f %13.2f" % (
            TENSORS[t], sizes[t], "%d-%d" % (shared[0], shared[-1]), err["hipress"][t] / calls,
            err["onebit"][t] / calls, err["onebit-tensor"][t] / calls, err["onebit-small-exact"][t] / calls,
            lag["onebit"][t], lag["onebit-tensor"][t]))
    return 0 if worst_diff <= args.tol else 1


# -------------------------------------------------------------------- train

def train(args):
    import torch
    import torch.nn as nn
    import horovod.torch as hvd
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    t0 = time.time()
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    # tests/study/horovod_train.py's data, model and optimizer, line for line
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.2, random_state=0, stratify=y)
    xtr, ytr = torch.from_numpy(xtr[rank::size]), torch.from_numpy(ytr[rank::size])
    xte, yte = torch.from_numpy(xte), torch.from_numpy(yte)
    h = args.hidden
    model = nn.Sequential(nn.Linear(64, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(),
                          nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 10))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    params = list(model.parameters())
    sizes = [p.numel() for p in params]
    assert sizes == tensor_sizes(h), sizes
    form = Form(args.form, sizes, args.block, args.min_bytes // 4, args.seed, rank)

    lossf = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(args.seed * 1000 + rank)
    order, pos = torch.randperm(len(xtr), generator=gen), 0
    for step in range(args.steps):
        if pos + args.batch > len(order):
            order, pos = torch.randperm(len(xtr), generator=gen), 0
        idx = order[pos:pos + args.batch]
        pos += args.batch
        model.zero_grad(set_to_none=False)
        loss = lossf(model(xtr[idx]), ytr[idx])
        loss.backward()
        flat = torch.cat([p.grad.reshape(-1) for p in params]).numpy()
        if args.form == "exact":
            total = hvd.allreduce(torch.from_numpy(flat.copy()), op=hvd.Sum, name="flat")
        else:
            # every rank's decoded contribution, summed in rank order in
            # float32 (as hipress' allgather decodes)
            parts = hvd.allgather(torch.from_numpy(form(flat)), name="flat").numpy().reshape(size, -1)
            s = np.zeros(parts.shape[1], np.float32)
            for r in range(size):
                s += parts[r]
            total = torch.from_numpy(s)
        total = total * (1.0 / size)   # Horovod's postscale of op=Average
        o = 0
        for p in params:
            p.grad.copy_(total[o:o + p.numel()].view_as(p.grad))
            o += p.numel()
        opt.step()

    with torch.no_grad():
        out = model(xte)
        test_loss = lossf(out, yte).item()
        acc = (out.argmax(1) == yte).double().mean().item()
    digest = hashlib.sha256()
    for p in params:
        digest.update(p.detach().numpy().tobytes())
    mine = torch.tensor([int.from_bytes(digest.digest()[:8], "little", signed=True)], dtype=torch.int64)
    hashes = hvd.allgather(mine, name="param_hash").tolist()
    ok = len(set(hashes)) == 1
    if rank == 0:
        if ok:
            print("hvd_onebit_ref: ok, form %s, steps %d, test accuracy %.4f, test loss %.4f, train loss %.4f, "
                  "time %.1f s" % (args.form, args.steps, acc, test_loss, loss.item(), time.time() - t0),
                  flush=True)
        else:
            print("FAIL: parameters differ across ranks", flush=True)
    hvd.shutdown()
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("compare")
    c.add_argument("dir")
    c.add_argument("--every", type=int, default=20, help="print every K-th call")
    c.add_argument("--calls", type=int, default=0, help="stop after this many calls (0: all)")
    c.add_argument("--tol", type=float, default=1e-5,
                   help="exit 1 when hipress differs from the textbook by more (relative to the largest value)")
    t = sub.add_parser("train")
    t.add_argument("--form", default="onebit", choices=("exact", "onebit", "onebit-tensor", "onebit-small-exact",
                                                        "onebit-nores", "sr2"))
    t.add_argument("--steps", type=int, default=200)
    t.add_argument("--seed", type=int, default=1)
    t.add_argument("--batch", type=int, default=32)
    t.add_argument("--lr", type=float, default=0.05)
    for p in (c, t):
        p.add_argument("--hidden", type=int, default=512)
        p.add_argument("--block", type=int, default=4096, help="onebit's block (HIPRESS_ONEBIT_BLOCK)")
        p.add_argument("--min-bytes", type=int, default=1 << 20,
                       help="small exact: tensors under this many bytes are summed exactly")
    args = ap.parse_args()
    return compare(args) if args.mode == "compare" else train(args)


if __name__ == "__main__":
    sys.exit(main())
