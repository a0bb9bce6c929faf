"""Summarise the traces of tests/study/hvd_trace_shim.c (doc/measured/horovod-layouts.md).

    python3 tests/study/hvd_trace_summary.py DIR [--skip N]

For each rank's DIR/trace.<rank>: the float32 MPI_Allreduce calls (in place
or not), their distinct (address, count) keys, and for each key the layouts
it carried (which registered tensors, in which order) and how often a key
carried a different layout from its previous call (what a residual keyed by
address and count would then be added to); the other calls by function,
datatype and op; whether all ranks saw the same sequence of layouts.  With
DIR/ptrs.<rank>.json (tests/study/hvd_layout_study.py), also how many gradient
addresses changed between steps.  --skip N ignores the first N steps
(warm-up) for the key counts.
"""
import collections
import glob
import json
import os
import sys

SHOW = 16  # keys listed, those with the most calls first


def parse(path, skip):
    floats, other = [], collections.Counter()
    step = -1
    for line in open(path):
        if line.startswith("#"):
            w = line.split()
            if len(w) >= 3 and w[1] == "step":
                step = int(w[2])
            elif len(w) >= 2 and w[1] == "end":
                step = "end"
            continue
        f = line.split()
        func, comm, sb, rb, count, dt, op = f[2], f[3], f[4], f[5], int(f[6]), f[7], f[8]
        lay = ""
        for x in f[9:]:
            if x.startswith("layout="):
                lay = x[len("layout="):]
        if func == "Allreduce" and dt == "MPI_FLOAT":
            floats.append({"step": step, "key": (rb, count), "inplace": sb == "IN_PLACE", "layout": lay,
                           "op": op, "counted": step != "end" and step >= skip})
        else:
            when = "after steps" if step == "end" else "during steps" if step >= 0 else "before steps"
            other[(func, dt, op, when)] += 1
    return floats, other


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    skip = int(sys.argv[sys.argv.index("--skip") + 1]) if "--skip" in sys.argv else 0
    paths = sorted(glob.glob(os.path.join(d, "trace.*")), key=lambda p: int(p.rsplit(".", 1)[1]))
    per_rank = {}
    for p in paths:
        per_rank[int(p.rsplit(".", 1)[1])] = parse(p, skip)
    floats, other = per_rank[0]
    names = {}
    pj = os.path.join(d, "ptrs.0.json")
    if os.path.exists(pj):
        pt = json.load(open(pj))
        names = {str(i): n for i, n in enumerate(pt["names"])}

    print("rank 0: %d float32 MPI_Allreduce calls (%d in place), ops %s"
          % (len(floats), sum(c["inplace"] for c in floats), dict(collections.Counter(c["op"] for c in floats))))
    steps = collections.Counter(c["step"] for c in floats if c["step"] != "end" and c["step"] >= 0)
    print("calls per step: %s" % dict(sorted(collections.Counter(steps.values()).items())))
    counted = [c for c in floats if c["counted"]]
    keys = collections.OrderedDict()
    for c in counted:
        keys.setdefault(c["key"], []).append(c["layout"])
    changes = 0
    print("steps >= %d: %d calls, %d distinct (address, count) keys" % (skip, len(counted), len(keys)))
    shown = sorted(keys, key=lambda k: -len(keys[k]))[:SHOW]
    for k, lays in keys.items():
        ch = sum(1 for a, b in zip(lays, lays[1:]) if a != b)
        changes += ch
        if k not in shown:
            continue
        cnt = collections.Counter(lays)
        desc = "; ".join("%s x%d" % (l, n) for l, n in cnt.most_common(6))
        if len(cnt) > 6:
            desc += "; ... (%d layouts)" % len(cnt)
        print("  %s count %d: %d calls, %d layouts, %d changes of layout: %s"
              % (k[0], k[1], len(lays), len(cnt), ch, desc))
    if len(keys) > SHOW:
        print("  ... and %d more keys" % (len(keys) - SHOW))
    print("calls whose key carried a different layout than at its previous use: %d of %d" % (changes, len(counted)))
    # which tensors did each key carry, by layer name
    if names:
        print("tensor ids: " + ", ".join("%s=%s" % (i, n) for i, n in names.items()))
    print("other MPI calls on rank 0 (function, datatype, op, when): ")
    for k, n in sorted(other.items(), key=lambda kv: -kv[1]):
        print("  %-10s %-18s %-5s %-14s %d" % (k + (n,)))

    seqs = {r: [c["layout"] for c in fl] for r, (fl, _) in per_rank.items()}
    same = all(s == seqs[0] for s in seqs.values())
    print("same layout sequence on all %d ranks: %s" % (len(seqs), "yes" if same else "NO"))
    nkeys = {r: len({c["key"] for c in fl if c["counted"]}) for r, (fl, _) in per_rank.items()}
    print("distinct keys per rank: %s" % nkeys)

    for r in sorted(per_rank):
        pj = os.path.join(d, "ptrs.%d.json" % r)
        if not os.path.exists(pj):
            continue
        pt = json.load(open(pj))["ptrs"]
        moved = sum(1 for a, b in zip(pt, pt[1:]) for i in range(len(a)) if a[i] != b[i])
        steps_moved = sum(1 for a, b in zip(pt, pt[1:]) if a != b)
        swaps = sum(1 for a, b in zip(pt, pt[1:]) for i in range(len(a)) if a[i] != b[i] and b[i] in a)
        distinct = len({x for s in pt for x in s})
        print("rank %d gradient addresses: %d steps, %d distinct addresses for %d tensors, %d steps where one moved, "
              "%d moves, %d of them to an address another gradient had the step before"
              % (r, len(pt), distinct, len(pt[0]), steps_moved, moved, swaps))


if __name__ == "__main__":
    main()
