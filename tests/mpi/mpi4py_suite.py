"""The drop-in library under an mpi4py program (run by tests/mpi/run_mpi4py.sh
with libhipress.so preloaded and a fixed plan).

Checks that float32 sums of >= 1 MiB are compressed (hipress_stats_get,
reached through ctypes in the preloaded library) and exact for
integer-valued data, that other calls pass through with exact results, and
that a communicator opted out through Comm.Set_info is not compressed.
Prints "mpi4py_suite: ok" on rank 0; exits 1 on any failure, a failed import
included.
"""
import ctypes
import sys

try:
    from mpi4py import MPI
    import numpy as np
except ImportError as e:  # a missing dependency is a failure, not a skip
    print("FAIL: cannot import mpi4py/numpy with %s: %s" % (sys.executable, e), flush=True)
    sys.exit(1)

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("rank %d: FAIL: %s" % (rank, what), file=sys.stderr, flush=True)


# hipress_stats_get from the preloaded library: its first three fields are
# calls, compressed, passthrough (unsigned long long); a generous buffer
# leaves room for the fields after them.
try:
    _get = ctypes.CDLL(None).hipress_stats_get
except AttributeError:
    print("FAIL: hipress_stats_get not found: libhipress.so is not preloaded", flush=True)
    sys.exit(1)
_get.restype = None


def stats():
    buf = (ctypes.c_ulonglong * 64)()
    _get(buf)
    return {"calls": buf[0], "compressed": buf[1], "passthrough": buf[2]}


def inputs(r, n, salt):
    i = np.arange(n, dtype=np.int64)
    return (((i * 7 + r * 13 + salt) % 17) - 8).astype(np.float32)


def expected(n, salt):
    return sum(inputs(q, n, salt).astype(np.float64) for q in range(size))


N_BIG = (1 << 18) + 3          # 1 MiB + 12 bytes of float32: eligible
compressed_calls = 0

# compressed float32 sums, out of place and in place
for k, n in enumerate([N_BIG, 1000003]):
    s0 = stats()
    x = inputs(rank, n, k)
    y = np.empty_like(x)
    comm.Allreduce(x, y, op=MPI.SUM)
    s1 = stats()
    check(np.array_equal(y.astype(np.float64), expected(n, k)), "float32 sum of %d elements is not exact" % n)
    check(s1["compressed"] - s0["compressed"] == (1 if size > 1 else 0),
          "float32 sum of %d elements: compressed counter moved by %d" % (n, s1["compressed"] - s0["compressed"]))
    z = inputs(rank, n, k + 10)
    comm.Allreduce(MPI.IN_PLACE, z, op=MPI.SUM)
    check(np.array_equal(z.astype(np.float64), expected(n, k + 10)), "in-place float32 sum of %d elements" % n)
    s2 = stats()
    check(s2["compressed"] - s1["compressed"] == (1 if size > 1 else 0), "in-place float32 sum not compressed")

# pass-through calls: other types, other ops, small buffers
s0 = stats()
a = np.arange(1000, dtype=np.int64) + rank
b = np.empty_like(a)
comm.Allreduce(a, b, op=MPI.SUM)
check(np.array_equal(b, np.arange(1000, dtype=np.int64) * size + size * (size - 1) // 2), "int64 sum")
d = np.full(N_BIG, float(rank), dtype=np.float64)
e = np.empty_like(d)
comm.Allreduce(d, e, op=MPI.MAX)
check(bool(np.all(e == size - 1)), "float64 max")
f = inputs(rank, 1000, 3)
g = np.empty_like(f)
comm.Allreduce(f, g, op=MPI.SUM)
check(np.array_equal(g.astype(np.float64), expected(1000, 3)), "small float32 sum")
h = inputs(rank, N_BIG, 4)
m = np.empty_like(h)
comm.Allreduce(h, m, op=MPI.MAX)
check(np.array_equal(m, np.max([inputs(q, N_BIG, 4) for q in range(size)], axis=0)), "large float32 max")
s1 = stats()
check(s1["compressed"] == s0["compressed"], "a pass-through call was compressed")
check(s1["passthrough"] - s0["passthrough"] == 4, "passthrough counter moved by %d, want 4"
      % (s1["passthrough"] - s0["passthrough"]))

# a communicator opted out through an info key is never compressed
dup = comm.Dup()
info = MPI.Info.Create()
info.Set("hipress_compress", "false")
dup.Set_info(info)
info.Free()
s0 = stats()
x = inputs(rank, N_BIG, 5)
y = np.empty_like(x)
dup.Allreduce(x, y, op=MPI.SUM)
s1 = stats()
check(s1["compressed"] == s0["compressed"], "opted-out communicator was compressed")
check(np.array_equal(y.astype(np.float64), expected(N_BIG, 5)), "float32 sum on the opted-out communicator")
dup.Free()

nfail = comm.allreduce(len(failures), op=MPI.SUM)
if rank == 0:
    print("mpi4py_suite: ok" if nfail == 0 else "mpi4py_suite: %d failures" % nfail, flush=True)
sys.exit(0 if nfail == 0 else 1)
