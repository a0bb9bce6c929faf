#!/usr/bin/env python3
"""Instructions of one callgrind dump split by object, with hipress's share.

    scripts/lab/cg_objects.py [--lib libhipress] [--functions K] FILE...

Reads callgrind output written with --compress-strings=no --compress-pos=no
(the form scripts/lab/ab_callgrind.sh asks for) and prints, per FILE, one line:

    FILE hp_self=N hp_ext=N hp=N total=N

hp_self: instructions executed inside the object whose path contains --lib
(default libhipress); hp_ext: instructions that object's functions caused in
the C library, libm and the loader (memcpy, memset, malloc, expf, qsort...),
the inclusive cost of its calls into them less the cost of their calls back
into it (a qsort comparator is counted once); hp = hp_self + hp_ext. Calls
into MPI (PMPI_Isend, PMPI_Wait...) are not counted: their cost depends on
how long a peer takes, busy polling included. total: every instruction of the
dump. With --functions K it also prints the K functions of the object with
the most self instructions, for finding what moved between two builds.
With --calls-from OBJ it prints instead, for each function of the object
called from an object whose path contains OBJ (hipress-bench --kernels calls
every compressor's encode and decode through its table), the number of calls
and the inclusive instructions per call:

    FILE call FUNCTION calls=N per_call=N

Standard library only.
"""
import argparse
import re
import sys

# objects whose instructions hipress causes deterministically when it calls them
EXT = re.compile(r"(/libc\.so|/libm\.so|/ld-linux|/libgcc_s|/libmvec|vdso|/libpthread)")


def parse(path, lib, calls_from=None):
    """Return (self by object, ext cost, self by hipress function, total,
    {callee: [calls, inclusive]} for calls from calls_from into lib)."""
    self_ob = {}
    self_fn = {}
    ext = 0
    ob = fn = None
    cob = cfn = None
    in_call = False   # next cost line is a call's inclusive cost
    total = 0
    calls_in = {}     # callee in lib, called from calls_from: [calls, inclusive]
    ncalls = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            c = line[0] if line else ""
            if c.isdigit() or c in "+-*":
                if in_call:
                    in_call = False
                    parts = line.split()
                    cost = int(parts[1]) if len(parts) > 1 else 0
                    callee = cob if cob is not None else ob
                    if lib in ob and lib not in callee and EXT.search(callee):
                        ext += cost
                    elif EXT.search(ob) and lib in callee:
                        ext -= cost
                    if calls_from and calls_from in ob and lib not in ob and lib in callee:
                        e = calls_in.setdefault(cfn, [0, 0])
                        e[0] += ncalls
                        e[1] += cost
                    cob = None
                    continue
                parts = line.split()
                cost = int(parts[1]) if len(parts) > 1 else 0
                self_ob[ob] = self_ob.get(ob, 0) + cost
                if lib in ob:
                    self_fn[fn] = self_fn.get(fn, 0) + cost
                continue
            if line.startswith("ob="):
                ob = line[3:].strip()
            elif line.startswith("fn="):
                fn = line[3:].strip()
                cob = None
            elif line.startswith("cob="):
                cob = line[4:].strip()
            elif line.startswith("cfn="):
                cfn = line[4:].strip()
            elif line.startswith("calls="):
                in_call = True
                ncalls = int(line[6:].split()[0])
            elif line.startswith("totals:") or line.startswith("summary:"):
                total = int(line.split()[1])
    if total == 0:
        total = sum(self_ob.values())
    return self_ob, ext, self_fn, total, calls_in


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--lib", default="libhipress")
    ap.add_argument("--functions", type=int, default=0)
    ap.add_argument("--calls-from", default=None)
    a = ap.parse_args()
    for p in a.files:
        self_ob, ext, self_fn, total, calls_in = parse(p, a.lib, a.calls_from)
        if a.calls_from:
            for name, (n, v) in sorted(calls_in.items()):
                print(f"{p} call {name} calls={n} per_call={v // max(n, 1)}")
            continue
        hp_self = sum(v for k, v in self_ob.items() if k and a.lib in k)
        print(f"{p} hp_self={hp_self} hp_ext={ext} hp={hp_self + ext} total={total}")
        for name, v in sorted(self_fn.items(), key=lambda kv: -kv[1])[: a.functions]:
            print(f"  {v:>14} {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
