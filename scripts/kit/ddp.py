"""The device kit's PyTorch DDP training (scripts/gpu-kit copies it into the
kit as ddp.py): a short data-parallel training of a small MLP, every rank
on the one GPU, through whatever libnccl.so.2 the process has (the kit
preloads the IPC stand-in, tests/gpu/ipc/, after hipress):

    nompi_launch 2 T python3 ddp.py [--steps N] [--device cuda|cpu] [--bound B] [--corrupt]
    torchrun --standalone --nproc-per-node 2 ddp.py ...
    python3 ddp.py --symbols NCCL_LIB [--torch-lib LIB]

RANK, WORLD_SIZE (and MASTER_ADDR, MASTER_PORT) come from the launcher;
KIT_CHECK_DIR (default: HP_RDZV, else a folder under /tmp) is where the
ranks compare their parameters.  --device cpu runs the same training with
the gloo backend (the kit's self-test, where there is no GPU).

N steps (default 5, at least 3, so that DDP rebuilds its buckets after the
first); 1 MiB buckets, so that each step makes several allreduce calls.
A wrong answer identical on every rank leaves the replicas identical, so
each bucket's allreduce is checked against the exact one: a communication
hook (DDP's own allreduce otherwise) first reduces a float64 copy of the
bucket (hipress compresses float32 and 16-bit sums only, so this one goes
to NCCL as it is), then the bucket itself (compressed under hipress), and
the relative error of the second against the first (the L2 norm of the
difference over that of the exact sum) must stay within B (default 0.02:
the kit runs the near-lossless fp16 and bf16 compressors, whose error is
below 0.005; a block, a rank or a scale gone wrong is far above it).
--corrupt plants a wrong answer (every rank's result scaled by 1.1, the
replicas still identical), which the check must catch (the kit's
self-test).  Then every rank hashes its parameters' bits: the replicas
must be identical (hipress gives every rank the same bits of every
compressed call), and every loss finite.  Printed: which hipress library is in the
process (hipress_library()), which libnccl and libmpi files it mapped, the
NCCL functions libtorch_cuda.so imports that this libnccl lacks, the
losses, the exact check, and "gpu_kit_ddp: ok, ..."; hipress' table at exit
(HIPRESS_STATS=1, from RANK 0) says how many calls it compressed.  Exit 1
on a difference or an error past the bound.

--symbols NCCL_LIB: before any device time is spent, without importing
torch: the NCCL functions this PyTorch's libtorch_cuda.so (or LIB, or the
file KIT_TORCH_LIB names: the kit's self-test plants one) imports
against those NCCL_LIB (the kit's IPC stand-in) exports.  Exit 0 when every
one is there, 3 naming those missing (PyTorch would not load with it), 77
when there is nothing to compare (no PyTorch, a CPU build of it, or one
with NCCL linked in statically, which no stand-in can replace).
"""
import argparse
import ctypes
import hashlib
import math
import os
import struct
import sys
import time


def mapped(name):
    with open("/proc/self/maps") as f:
        return sorted({line.split()[-1] for line in f if name in line and "/" in line})


def undefined_nccl(path):
    """The nccl* functions an ELF file imports (its undefined dynamic symbols)."""
    return sorted(set(n for n, defined in dynamic_nccl(path) if not defined))


def exported_nccl(path):
    """The nccl* functions an ELF file exports (its defined dynamic symbols)."""
    return sorted(set(n for n, defined in dynamic_nccl(path) if defined))


def dynamic_nccl(path):
    """(name, defined) of the nccl* functions in an ELF file's dynamic symbols."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return []
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    out = []
    for s in secs:
        if s[1] != 11:  # SHT_DYNSYM
            continue
        strtab = secs[s[6]]
        for off in range(s[4], s[4] + s[5], 24):
            name_off, info, other, shndx = struct.unpack_from("<IBBH", data, off)
            end = data.index(b"\0", strtab[4] + name_off)
            name = data[strtab[4] + name_off:end].decode()
            if name.startswith("nccl") and (info >> 4) in (1, 2) and (info & 0xF) in (0, 2):
                out.append((name, shndx != 0))
    return out


def symbols(args):
    """--symbols: this PyTorch's NCCL imports against the stand-in's exports."""
    lib = args.torch_lib or os.environ.get("KIT_TORCH_LIB")
    if not lib:
        import importlib.util
        spec = importlib.util.find_spec("torch")
        if spec is None or not spec.submodule_search_locations:
            print("nccl symbols: no PyTorch for %s: nothing to compare" % sys.executable)
            return 77
        lib = os.path.join(list(spec.submodule_search_locations)[0], "lib", "libtorch_cuda.so")
        if not os.path.exists(lib):
            print("nccl symbols: this PyTorch has no libtorch_cuda.so (a build without CUDA): nothing to compare")
            return 77
    need = undefined_nccl(lib)
    have = exported_nccl(args.symbols)
    if not need:
        print("nccl symbols: %s imports no nccl function (NCCL linked in statically): no stand-in can take "
              "its place" % lib)
        return 77
    lacking = [n for n in need if n not in have]
    print("nccl symbols: %s imports %d nccl functions: %s" % (lib, len(need), " ".join(need)))
    print("nccl symbols: %s exports %d" % (args.symbols, len(have)))
    if lacking:
        print("nccl symbols: MISSING from %s: %s" % (os.path.basename(args.symbols), " ".join(lacking)))
        return 3
    print("nccl symbols: ok, all %d imports exported" % len(need))
    return 0


def exact_hook(state, bucket):
    """DDP's allreduce of a bucket, checked: the exact float64 sum first
    (no compression), then the bucket's own (compressed under hipress),
    the relative error of the second against the first recorded."""
    import torch
    import torch.distributed as dist
    t = bucket.buffer()
    exact = t.detach().to(torch.float64)
    dist.all_reduce(exact)
    fut = dist.all_reduce(t, async_op=True).get_future()

    def done(f):
        got = f.value()[0]
        if state["corrupt"]:
            got.mul_(1.1)
        den = float(exact.norm())
        err = float((got.to(torch.float64) - exact).norm()) / (den if den > 0 else 1.0)
        state["calls"] += 1
        if not (err <= state["max"]):   # a NaN error too
            state["max"] = err
        return got.div_(state["world"])
    return fut.then(done)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--bound", type=float, default=float(os.environ.get("KIT_ERR_BOUND", "0.02")))
    ap.add_argument("--corrupt", action="store_true")
    ap.add_argument("--symbols", metavar="NCCL_LIB")
    ap.add_argument("--torch-lib", metavar="LIB")
    args = ap.parse_args()
    if args.symbols:
        return symbols(args)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    check = os.environ.get("KIT_CHECK_DIR") or os.environ.get("HP_RDZV") or "/tmp/hipress-kit-ddp-%s" % (
        os.environ.get("MASTER_PORT", "x"))
    os.makedirs(check, exist_ok=True)
    import torch
    import torch.distributed as dist
    import torch.nn as nn

    cuda = args.device == "cuda"
    dev = torch.device("cuda", 0) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(0)
    if rank == 0:
        print("torch", torch.__version__, "cuda", torch.version.cuda,
              "device", torch.cuda.get_device_name(0) if cuda else "cpu", "world", world)
        print("preload", os.environ.get("LD_PRELOAD", "(none)"), "HIPRESS_NCCL", os.environ.get("HIPRESS_NCCL", ""))
    dist.init_process_group("nccl" if cuda else "gloo", init_method="env://", rank=rank, world_size=world)
    if rank == 0:
        try:
            name = ctypes.CDLL(None).hipress_library
            name.restype = ctypes.c_char_p
            print("hipress library:", name().decode())
        except AttributeError:
            print("hipress library: none")
        print("libnccl mapped:", " ".join(mapped("libnccl")) or "none")
        print("libmpi mapped:", " ".join(mapped("libmpi")) or "none")
        if cuda:
            lib = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cuda.so")
            need = undefined_nccl(lib) if os.path.exists(lib) else []
            glob = ctypes.CDLL(None)
            lacking = [n for n in need if not hasattr(glob, n)]
            print("libtorch_cuda.so imports %d nccl functions; this libnccl lacks: %s" % (
                len(need), " ".join(lacking) or "none"))
            try:
                print("nccl version", torch.cuda.nccl.version())
            except Exception as e:  # only informative
                print("nccl version: unknown (%s)" % e)
    torch.manual_seed(1234)  # the same model everywhere (DDP broadcasts rank 0's anyway)
    model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 512), nn.ReLU(),
                          nn.Linear(512, 10)).to(dev)
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[0] if cuda else None, bucket_cap_mb=1)
    check_state = {"calls": 0, "max": 0.0, "world": world, "corrupt": args.corrupt}
    ddp.register_comm_hook(check_state, exact_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator(device="cpu")
    gen.manual_seed(100 + rank)  # each rank its own data
    losses = []
    t0 = time.time()
    for step in range(max(args.steps, 3)):
        x = torch.randn(64, 256, generator=gen).to(dev)
        y = torch.randint(0, 10, (64,), generator=gen).to(dev)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach().cpu()))
    if cuda:
        torch.cuda.synchronize()
    dt = time.time() - t0
    flat = torch.cat([p.detach().flatten() for p in model.parameters()]).cpu()
    digest = hashlib.sha256(flat.numpy().tobytes()).hexdigest()
    with open(os.path.join(check, "params.%d.tmp" % rank), "w") as f:
        f.write(digest)
    os.rename(os.path.join(check, "params.%d.tmp" % rank), os.path.join(check, "params.%d" % rank))
    dist.barrier()
    bad = 0
    if rank == 0:
        others = []
        for r in range(world):
            with open(os.path.join(check, "params.%d" % r)) as f:
                others.append(f.read())
        same = all(d == digest for d in others)
        finite = all(math.isfinite(v) for v in losses)
        print("losses:", " ".join("%.4f" % v for v in losses))
        print("exact check: %d bucket allreduces against the float64 sum, max relative error %.3g (bound %g)%s" % (
            check_state["calls"], check_state["max"], args.bound, " (a wrong answer planted)" if args.corrupt else ""))
        print("replicas:", "identical (sha256 %s...)" % digest[:16] if same else "DIFFER: " + " ".join(
            d[:16] for d in others))
        within = check_state["calls"] > 0 and check_state["max"] <= args.bound
        bad = int(not same or not finite or not within)
        if not finite:
            print("a loss is not finite")
        if not within:
            print("a WRONG ANSWER: %s" % ("no bucket allreduce was checked" if not check_state["calls"] else
                                          "relative error %.3g past the bound %g" % (check_state["max"], args.bound)))
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0 and not bad:
        print("gpu_kit_ddp: ok, %d steps at %d ranks on %s (%s), replicas identical, every allreduce within %g of the "
              "exact sum (max %.3g), loss %.4f -> %.4f, %.2f s" % (
                  len(losses), world, dev, "nccl" if cuda else "gloo", args.bound, check_state["max"], losses[0],
                  losses[-1], dt))
    sys.stdout.flush()
    return bad


if __name__ == "__main__":
    sys.exit(main())
