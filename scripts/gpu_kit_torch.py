"""The device kit's PyTorch check (scripts/gpu-kit copies it into the kit as
torch_check.py; its run.sh runs it under LD_PRELOAD=libhipress.so, then
under the NCCL-only libhipress_nccl.so without Open MPI on the library path,
with HIPRESS_STATS=1):

    python3 torch_check.py pass|compress

One GPU, world size 1: torch.distributed with the nccl backend (env init,
MASTER_ADDR=127.0.0.1), then all_reduce of float32, float16 and bfloat16
tensors of several sizes.  With one rank the sum is the input, so every
result must be the input's bits (compared as integers: signed zeros and
NaN payloads count).  Prints which hipress library is in the process
(hipress_library()), which libnccl it mapped (the wheel's, loaded by PyTorch
through the dynamic loader), whether it mapped a libmpi, and
"torch_check MODE: ok, K all_reduce calls"; hipress' table at exit
(HIPRESS_STATS) says how many ncclAllReduce calls the preload saw, which
run.sh compares with K.  Exit 1 on a wrong result.
"""
import ctypes
import os
import sys


def mapped(name):
    with open("/proc/self/maps") as f:
        return sorted({line.split()[-1] for line in f if name in line and "/" in line})


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "pass"
    import torch
    import torch.distributed as dist

    print("torch", torch.__version__, "cuda", torch.version.cuda, "device", torch.cuda.get_device_name(0))
    print("preload", os.environ.get("LD_PRELOAD", "(none)"), "HIPRESS_NCCL", os.environ.get("HIPRESS_NCCL", ""))
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", init_method="env://", rank=0, world_size=1)
    print("libhipress mapped:", mapped("libhipress") or "NO")
    try:
        name = ctypes.CDLL(None).hipress_library
        name.restype = ctypes.c_char_p
        print("hipress library:", name().decode())
    except AttributeError:  # no hipress in the process, or one older than hipress_library
        print("hipress library: none")
    calls, bad = 0, 0
    int_of = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1234)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for n in (1, 1000, 1 << 20, (1 << 22) + 3):
            x = (torch.randn(n, device="cuda", generator=gen) * 0.01).to(dtype)
            if n > 8:
                x[3] = -0.0
                x[5] = float("nan")
            y = x.clone()
            dist.all_reduce(y)
            calls += 1
            torch.cuda.synchronize()
            if not torch.equal(x.view(int_of[dtype]), y.view(int_of[dtype])):
                diff = (x.view(int_of[dtype]) != y.view(int_of[dtype])).nonzero()
                print("WRONG: %s n=%d: %d elements differ, first at %d" % (dtype, n, diff.numel(), int(diff[0])))
                bad += 1
    print("libnccl mapped:", mapped("libnccl") or "none")
    print("libmpi mapped:", mapped("libmpi") or "none")
    try:
        print("nccl version", torch.cuda.nccl.version())
    except Exception as e:  # only informative
        print("nccl version: unknown (%s)" % e)
    dist.destroy_process_group()
    if bad:
        print("torch_check %s: %d of %d all_reduce calls wrong" % (mode, bad, calls))
        return 1
    print("torch_check %s: ok, %d all_reduce calls, each result the input's bits" % (mode, calls))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
