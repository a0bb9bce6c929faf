"""The device kit's PyTorch DDP training (scripts/gpu-kit copies it into the
kit as ddp.py): a short data-parallel training of a small MLP, every rank
on the one GPU, through whatever libnccl.so.2 the process has (the kit
preloads the IPC stand-in, tests/gpu/ipc/, after hipress):

    nompi_launch 2 T python3 ddp.py [--steps N] [--device cuda|cpu]
    torchrun --standalone --nproc-per-node 2 ddp.py ...

RANK, WORLD_SIZE (and MASTER_ADDR, MASTER_PORT) come from the launcher;
KIT_CHECK_DIR (default: HP_RDZV, else a folder under /tmp) is where the
ranks compare their parameters.  --device cpu runs the same training with
the gloo backend (the kit's self-test, where there is no GPU).

N steps (default 5, at least 3, so that DDP rebuilds its buckets after the
first); 1 MiB buckets, so that each step makes several allreduce calls.
Then every rank hashes its parameters' bits: the replicas must be
identical (hipress gives every rank the same bits of every compressed
call), and every loss finite.  Printed: which hipress library is in the
process (hipress_library()), which libnccl and libmpi files it mapped, the
NCCL functions libtorch_cuda.so imports that this libnccl lacks, the
losses, and "gpu_kit_ddp: ok, ..."; hipress' table at exit (HIPRESS_STATS=1,
from RANK 0) says how many calls it compressed.  Exit 1 on a difference.
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
            if shndx != 0:
                continue
            end = data.index(b"\0", strtab[4] + name_off)
            name = data[strtab[4] + name_off:end].decode()
            if name.startswith("nccl") and (info >> 4) in (1, 2):
                out.append(name)
    return sorted(set(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
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
        print("replicas:", "identical (sha256 %s...)" % digest[:16] if same else "DIFFER: " + " ".join(
            d[:16] for d in others))
        bad = int(not same or not finite)
        if not finite:
            print("a loss is not finite")
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0 and not bad:
        print("gpu_kit_ddp: ok, %d steps at %d ranks on %s (%s), replicas identical, loss %.4f -> %.4f, %.2f s" % (
            len(losses), world, dev, "nccl" if cuda else "gloo", losses[0], losses[-1], dt))
    sys.stdout.flush()
    return bad


if __name__ == "__main__":
    sys.exit(main())
