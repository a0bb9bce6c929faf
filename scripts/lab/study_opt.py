#!/usr/bin/env python3
"""Paired-seed accuracy study of hipress' forms under an optimizer: the
trainings of tests/study/study_train.py, every configuration with every
seed, compared with a reference configuration seed by seed.

    scripts/lab/study_opt.py --task lm --seeds 1,2,3 -o OUT \\
        ddp-plain:ddp:none \\
        onebit-sgd:ddp:hipress:HIPRESS_COMPRESSOR=onebit,HIPRESS_OPTIMIZER=sgd \\
        onebit-auto:ddp:hipress:HIPRESS_COMPRESSOR=onebit \\
        hvd-q4:hvd::HIPRESS_COMPRESSOR=q4

A configuration is NAME:DIST:HOOK[:VAR=VAL,...]: DIST ddp or hvd, HOOK none
or hipress (ddp), the VARs passed to every rank with mpirun -x.
libhipress.so (HP_BUILDDIR, default ./_build) is preloaded when HOOK is
hipress or a HIPRESS_* variable is given; Horovod runs get
HOROVOD_CPU_OPERATIONS=MPI.  The first configuration is the reference.

Seeds run in the outer loop, configurations in the inner one, so a slow
spell of the machine spreads over all of them.  OUT gets raw.csv (every run)
and summary.md: per configuration the mean of the validation loss (lm: also
in bits per byte) or the test accuracy (digits) and, against the reference,
the mean difference paired by seed with its 95% Student-t interval (lm: the
loss in percent of the reference's; digits: accuracy in points).

Options: --np N (4), --steps N, --python PY (the Horovod venv's, which has
torch, torchvision and horovod), extra arguments for study_train.py after
--.
"""
import argparse
import csv
import math
import os
import re
import statistics
import subprocess
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23, 11: 2.20,
       12: 2.18, 13: 2.16, 14: 2.14, 15: 2.13, 19: 2.09, 29: 2.05}


def t95(df):
    return T95.get(df) or T95[max(k for k in T95 if k <= df)]


def run(cfg, seed, args):
    name, dist, hook, env = cfg
    lib = os.path.join(os.environ.get("HP_BUILDDIR", os.path.join(TOP, "_build")), ".libs", "libhipress.so")
    xs = ["-x", "PYTHONPATH=%s" % os.path.join(TOP, "src", "python"), "-x", "MASTER_PORT=%d" % (29700 + seed % 200)]
    if hook == "hipress" or any(k.startswith("HIPRESS_") for k in env):
        xs += ["-x", "LD_PRELOAD=%s" % lib]
    if dist == "hvd":
        xs += ["-x", "HOROVOD_CPU_OPERATIONS=MPI"]
    for k, v in env.items():
        xs += ["-x", "%s=%s" % (k, v)]
    cmd = ["mpirun", "--oversubscribe", "-np", str(args.np)] + xs + [
        args.python, os.path.join(TOP, "tests", "study", "study_train.py"), "--task", args.task, "--dist", dist,
        "--hook", hook or "none", "--seed", str(seed)] + (["--steps", str(args.steps)] if args.steps else []) + args.rest
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    line = next((l for l in p.stdout.splitlines() if l.startswith("study_train: ok")), None)
    row = {"config": name, "seed": seed, "status": "ok" if line else "fail", "wall_s": "%.0f" % (time.time() - t0)}
    if line:
        for key in ("train_loss", "val_loss", "val_bpb", "test_acc", "s/step"):
            m = re.search(r"%s (\S+?)(,|$)" % re.escape(key), line)
            row[key.replace("/", "_per_")] = m.group(1) if m else ""
    else:
        tail = (p.stdout + p.stderr).strip().splitlines()[-5:]
        print("study_opt: %s seed %d failed: %s" % (name, seed, " | ".join(tail)), file=sys.stderr)
    return row


def main():
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("--task", choices=("lm", "digits"), required=True)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--steps", type=int)
    ap.add_argument("--python", default=os.environ.get("HP_HOROVOD_VENV", "/opt/hipress-horovod") + "/bin/python")
    ap.add_argument("-o", dest="out", required=True)
    ap.add_argument("configs", nargs="+")
    argv = sys.argv[1:]
    rest = []
    if "--" in argv:
        rest = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    args = ap.parse_args(argv)
    args.rest = rest
    cfgs = []
    for spec in args.configs:
        parts = spec.split(":", 3)
        if len(parts) < 3 or parts[1] not in ("ddp", "hvd"):
            ap.error("configuration %r: NAME:DIST:HOOK[:VAR=VAL,...]" % spec)
        env = dict(kv.split("=", 1) for kv in parts[3].split(",") if kv) if len(parts) > 3 else {}
        cfgs.append((parts[0], parts[1], parts[2], env))
    os.makedirs(args.out, exist_ok=True)
    raw = os.path.join(args.out, "raw.csv")
    cols = ["config", "seed", "status", "train_loss", "val_loss", "val_bpb", "test_acc", "s_per_step", "wall_s"]
    new = not os.path.exists(raw)
    with open(raw, "a", newline="") as f:
        w = csv.DictWriter(f, cols, extrasaction="ignore")
        if new:
            w.writeheader()
        for seed in [int(s) for s in args.seeds.split(",")]:
            for cfg in cfgs:
                row = run(cfg, seed, args)
                w.writerow(row)
                f.flush()
                print("study_opt: seed %d %-24s %s" % (seed, cfg[0], " ".join("%s=%s" % (k, row.get(k, ""))
                      for k in ("val_loss", "val_bpb", "test_acc", "s_per_step"))), flush=True)
    summarize(args, [c[0] for c in cfgs], raw)


def summarize(args, names, raw):
    rows = [r for r in csv.DictReader(open(raw)) if r["status"] == "ok"]
    metric = "val_loss" if args.task == "lm" else "test_acc"
    by = {}
    for r in rows:
        by.setdefault(r["config"], {})[int(r["seed"])] = r
    ref = names[0]
    out = ["%s, %d ranks, seeds %s; reference %s\n" % (args.task, args.np, args.seeds, ref),
           "| configuration | runs | %s (mean) | %s | paired against %s |" %
           (("val loss", "bits/byte", ref + ", loss in %") if args.task == "lm" else
            ("test accuracy", "test loss", ref + ", accuracy in points")),
           "|---|---|---|---|---|"]
    for n in names:
        runs = by.get(n, {})
        if not runs:
            out.append("| %s | 0 | | | |" % n)
            continue
        vals = [float(r[metric]) for r in runs.values()]
        second = [float(r["val_bpb" if args.task == "lm" else "val_loss"]) for r in runs.values()]
        diffs = []
        for s, r in runs.items():
            b = by.get(ref, {}).get(s)
            if b is None:
                continue
            if args.task == "lm":
                diffs.append(100.0 * (float(r[metric]) / float(b[metric]) - 1.0))
            else:
                diffs.append(100.0 * (float(r[metric]) - float(b[metric])))
        if n == ref or not diffs:
            pair = ""
        elif len(diffs) == 1:
            pair = "%+.2f (one seed)" % diffs[0]
        else:
            m, sd = statistics.mean(diffs), statistics.stdev(diffs)
            pair = "%+.2f ± %.2f" % (m, t95(len(diffs) - 1) * sd / math.sqrt(len(diffs)))
        out.append("| %s | %d | %.4f | %.4f | %s |" % (n, len(vals), statistics.mean(vals), statistics.mean(second),
                                                      pair))
    text = "\n".join(out) + "\n"
    open(os.path.join(args.out, "summary.md"), "w").write(text)
    print(text)


if __name__ == "__main__":
    main()
