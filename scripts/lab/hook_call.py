"""The time of one comm hook call on a single rank: hipress_hook_allreduce
of a ResNet-18-sized bucket (11.2M floats) with the mean, where one rank
has nothing to exchange, so what it times is the call's own work on the
buffer (MPI's in-place allreduce of one rank copies nothing; the division
by the ranks reads and writes every element).  Medians of REPS calls.

    /usr/bin/python3 scripts/lab/hook_call.py [--lib _build/.libs/libhipress.so] [--floats N] [--reps R]

Run it with two builds (before and after a change) one after the other on
a quiet machine.
"""
import argparse
import ctypes
import os
import statistics
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default=os.path.join(TOP, "_build", ".libs", "libhipress.so"))
    ap.add_argument("--floats", type=int, default=11_200_000)
    ap.add_argument("--reps", type=int, default=21)
    args = ap.parse_args()
    lib = ctypes.CDLL(os.path.abspath(args.lib), mode=ctypes.RTLD_GLOBAL)
    provided = ctypes.c_int()
    if lib.MPI_Init_thread(None, None, 3, ctypes.byref(provided)) != 0:
        sys.exit("hook_call: MPI_Init_thread failed")
    hook = ctypes.c_void_p()
    st = lib.hipress_hook_open(ctypes.byref(hook))
    if st != 0:
        sys.exit("hook_call: hipress_hook_open failed (%d)" % st)
    buf = (ctypes.c_float * args.floats)()
    for i in range(0, args.floats, 4096):
        buf[i] = 1.0
    times = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        st = lib.hipress_hook_allreduce(hook, buf, ctypes.c_size_t(args.floats), 0, 1, ctypes.c_ulonglong(0), 1)
        times.append(time.perf_counter() - t0)
        if st != 0:
            sys.exit("hook_call: hipress_hook_allreduce failed (%d)" % st)
    print("hook_call: %s: %d floats, median %.2f ms a call (min %.2f, max %.2f, %d calls)"
          % (args.lib, args.floats, 1e3 * statistics.median(times), 1e3 * min(times), 1e3 * max(times), args.reps))
    lib.hipress_hook_close(hook)
    lib.MPI_Finalize()


if __name__ == "__main__":
    main()
