#!/usr/bin/python3
"""Convergence study: data-parallel training under the hipress preload.

    mpirun -np 4 --oversubscribe -x LD_PRELOAD=$PWD/_build/.libs/libhipress.so \\
        /usr/bin/python3 scripts/lab/convergence.py --preset trial --seeds 3 --out study/np4

    /usr/bin/python3 scripts/lab/convergence.py --summarize study/np4.csv   # no MPI
    /usr/bin/python3 scripts/lab/plot_convergence.py -o loss.png study/np4.csv

What it trains: a 64-1024-1024-10 MLP (ReLU, softmax
cross-entropy; 1 126 410 float32 parameters, He init from the run seed) on
scikit-learn's digits (8x8 images scaled to [0, 1]; a fixed 1400/397
train/test split drawn from --split-seed), momentum SGD (0.9, lr 0.05, no
weight decay), batch 32 per rank, 10 epochs.  Each epoch the run seed
shuffles the training set; global batch s is perm[s*32N : (s+1)*32N] and rank
r takes part r of it (numpy.array_split; the last batch of an epoch is
smaller), so 11 steps an epoch on 4 ranks, 6 on 8.

--global-batch B instead takes B images a step on every number of ranks
(rank r takes part r of each, B/N when N divides B): the global batches of a
seed, their order and the steps of an epoch (ceil(1400/B)) are then the same
at 4, 8 and 16 ranks, and so is the arithmetic apart from the reduction, so
--epochs (or --steps) fixes the steps across N.  With --batch the steps shrink
as N grows (at 16 ranks and 32 a rank, 3 steps an epoch).

--task mnist1d trains on MNIST-1D (Greydanus 2020; PyPI mnist1d) instead:
5000 sequences of 40 floats, 10 classes, generated here by the package's own
make_dataset with its default arguments (seed 42 + --split-seed; 4000
train / 1000 test, standardised; rank 0 generates, nothing is downloaded),
a 40-512-512-10 MLP by default (288 778 parameters), the same optimizer and
data parallelism.  An MLP does not saturate it (well below a CNN's 90+ %),
so differences between configurations are not hidden by a ceiling.

The gradient of every
layer lives in one persistent flat float32 buffer (views per layer) reduced
every step by one comm.Allreduce(MPI.IN_PLACE, flat, op=MPI.SUM) -- the shape
of a Horovod fusion buffer -- then divided by the number of ranks.  The
training loss is the mean over all samples of the step, summed across ranks
in float64 (never compressed); test loss and accuracy are computed every
epoch on the 397 held-out images, split across ranks, summed in float64.

Many configurations run in one mpirun, seed after seed (seed outer, configs
inner, so machine load drifts evenly over configs).  Each run gets a fresh
communicator, MPI.COMM_WORLD.Dup() with MPI_Comm_set_info keys, freed at the
end, so hipress' residuals, plans and call numbers start clean.

Configurations (--config SPEC, repeatable, and/or --preset NAME):

    plain                      hipress_compress=false: plain MPI_Allreduce
    COMP[:algo=A][,KEY=VAL..]  hipress_compressor=COMP, hipress_algo=A (auto
                               unless given), hipress_KEY=VAL for every other
                               key (e.g. partition_bytes=256K, tbq_scale=2,
                               sparse_ratio=0.01, seed=7)
    COMP:ref[,KEY=VAL..]       the textbook reference of COMP (below)

Separators after the first ':' may be ',' or ':'.  Script-level keys, not
sent to hipress: label=TEXT (the name in tables), lr=, momentum= (optimizer),
layerwise=1 (powersgd reference only, below), layout=fused (below).  Every config trains with the
same optimizer (momentum 0.9 unless momentum= is given): dgc's defaults have
its momentum correction off (HIPRESS_DGC_MOMENTUM=0), for an optimizer with
momentum of its own; set dgc_momentum=0.9,momentum=0 to try the DGC paper's
pairing.
Compression is forced on: a fixed algorithm always compresses; an `auto`
config also gets hipress_allow_plain=false (HIPRESS_ALLOW_PLAIN: auto keeps
its choice among compressed algorithms), unless --no-force-compress.  All
configurations are applied to a throw-away communicator before the first run,
so an info key the library does not know stops the job at once.

The textbook reference (COMP:ref) runs in the same job on an opted-out
communicator: every rank encodes its own v = g + r with the library's own
compressor, called through ctypes on the preloaded libhipress.so
(hipress_compressor_find / encode / decode), with worker-side error feedback
(residual vector; dgc also its momentum state vector, and its density
warm-up: sparse_ratio of step t as hp_dgc_density gives it), the whole flat
gradient as one message, rng_key = (seed, rank, step, 0), rng_offset 0;
the encoded payloads are allgathered (MPI_BYTE) and every rank decodes all N
messages and sums them in float64 in rank order: the exact sum of the decoded
messages, the same on every rank, no relay, no re-encode.  Any non-finite
message makes the whole sum NaN, as in the library.  powersgd is a collective
compressor whose textbook form (Vogels et al. 2019) is not a per-rank
encode: its reference is PowerSGD written here in numpy (float64): the flat
buffer as the library's m x c matrix (c = ceil(sqrt n)), rank r, M = g + res,
P = sum_ranks M Q, orthonormalise P (QR), Q_local = M^T P, Q = sum_ranks
Q_local (warm start for the next step), result P Q^T, res = M - P Q_local^T;
the first Q is Gaussian from numpy seeded by (seed, 4242), the same on all
ranks.  powersgd:ref,layerwise=1 is PowerSGD as the paper applies it: one
matrix per weight tensor, biases summed exactly (a diagnostic: the library
sees one fusion buffer, not the layers).  Parameters of the reference come
from hipress_comp_params_default, then from the config's keys (onebit_block,
tbq_threshold, tbq_scale, tbq_block, terngrad_bits, sparse_ratio,
sample_ratio, sparse_block, dgc_momentum, dgc_warmup, powersgd_rank, isa,
seed).  Check of the reference: the
library's allgather with one partition (COMP:algo=allgather,
partition_bytes=8M) does the same arithmetic except that it adds in float32;
its per-step losses equal the reference's to the CSV's 6 digits for the
first 20 steps or so for onebit, tbq, graddrop and dgc (terngrad: from the
fourth step they differ in the sixth digit, the float32 sum moving a
stochastic rounding now and then).

Presets: full (every compressor x every algorithm, powersgd once, plain, the
references, the layerwise powersgd reference), auto (every compressor under
auto, plain, references), np8 (auto plus onebit and fp16 under every fixed
algorithm), trial (onebit and tbq under ring, allgather, auto; plain;
references), quick (plain, onebit under auto and ps: the CI test), sum
(the sum-codec study: plain, and for each of onebit, tbq and terngrad its textbook
reference, ps with sum_codec=auto, =same (the worker's codec, the form
before sum codecs), the other of q2 and q4 (auto is q4 for onebit and tbq,
q2 for terngrad), and auto), sumcore (sum without the q2/q4 pair), sumci (onebit's
reference and ps with its sum codec: the CI's paired check), fused (the
fused-layout study: plain, and every compressor and q4 under auto with layout=fused and
min_bytes=0).

layout=fused reduces the gradient the way Horovod's fusion does: each step
the tensors (weights and biases) are put in a random order, cut into one to
three groups at random places (the same on every rank: seeded by the run
seed and the step), and each group is copied into one persistent fusion
buffer at offset 0, reduced there (MPI_Allreduce of the group's count at the
buffer's one address) and copied back.  The address sees changing counts and
layouts, so hipress treats it as a staging buffer: every compressor that
needs error feedback runs its residual-free form there
(HIPRESS_STAGING_FORM, doc/usage.md).

Output (rank 0).  PREFIX.csv, one table, rows of three kinds (column
`record`), appended run by run (--resume skips runs already there):

    record       step | epoch | run
    config       the configuration's label (e.g. onebit/ring, onebit/ref, plain)
    compressor   none for plain; the compressor otherwise
    algo         auto/ring/tree/ps/allgather; ref for a reference; plain
    np           number of ranks
    seed         run seed (init, shuffling)
    epoch        1-based epoch (step rows: the epoch of the step)
    step         0-based step (epoch rows: the last step of the epoch;
                 run rows: steps run)
    train_loss   step: loss of that step (mean over the global batch);
                 epoch and run: mean of the epoch's / last epoch's step losses
    test_loss    epoch, run: mean cross-entropy on the test images (397
                 digits, 1000 mnist1d)
    test_acc     epoch, run: accuracy on them (0..1)
    compressed   run: MPI_Allreduce calls hipress compressed during the run
                 (hipress_stats_get on rank 0, after minus before); a
                 reference or plain run compresses nothing
    calls        run: MPI_Allreduce calls hipress saw during the run
    wire_ratio   run: raw bytes / bytes sent of the compressed calls
    plan         run: hipress_comm_plan() for the gradient's size at the end
    diverged     run: 1 if a final loss is not finite or the last epoch's
                 training loss is not below the first epoch's
    identical    run: 1 if the parameters ended bit-identical on all ranks
    wall_s       run: seconds of the run (rank 0, barrier to barrier)
    reduce_s     run: seconds inside the gradient reduction (max over ranks)
    spec         run: the configuration as given (--config syntax)
    task         run: digits or mnist1d (older files lack it)
    global_batch run: images per step

PREFIX_summary.md (also printed) and PREFIX_summary.csv: per configuration
and np, over seeds, the mean and 95% confidence interval (Student t) of the
final test accuracy, training loss and test loss; the paired difference of
accuracy against plain and against the compressor's reference (same seeds;
mean and 95% CI), divergences, the fewest compressed calls of a run, and the
study's targets: EF compressors under auto within 1 point of the reference,
fp16 and bf16 within 0.5 points of plain, no divergence; and (the sum-codec study)
onebit, tbq and terngrad under auto and under ps with a sum codec other than
`same` within 1 point of the reference.  After the targets the CSV adds the
paired differences of final training and test loss against the reference
(vs_ref_train_loss, vs_ref_test_loss, with _ci).  A target is `pass`
when the CI's lower end is above the bound, `FAIL` when its upper end is
below it, `open` otherwise (more seeds needed).

--check (CI) makes the exit status non-zero when a compressed run compressed
nothing (or its final plan is plain), a run diverged or ended with different
parameters on different ranks, or a compressed config's accuracy minus
plain's, paired by seed and averaged over seeds, is below -(--check-drop)
(when plain is among the configs); with --check-ref DROP,RISE also when a
compressed config's accuracy minus its reference's, paired and averaged, is
below -DROP, or its final test loss minus the reference's above RISE.
"""
import argparse
import csv
import ctypes
import hashlib
import math
import os
import struct
import sys
import time
from collections import OrderedDict, defaultdict

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")   # 4 ranks on 2 cores: no BLAS threads

import numpy as np  # noqa: E402

COMPRESSORS = ("fp16", "bf16", "onebit", "tbq", "terngrad", "graddrop", "dgc", "powersgd")
EF_COMPRESSORS = ("onebit", "tbq", "graddrop", "dgc", "powersgd")
ALGOS = ("auto", "ring", "tree", "ps", "allgather")
# keys that change how the library moves data, not what the compressor is:
# configs differing only in these share a reference
TRANSPORT_KEYS = {"algo", "sum_codec", "partition_bytes", "min_bytes", "allow_plain", "hierarchical",
                  "node_size", "net_gbps", "net_latency_us", "isa", "debug", "stats",
                  "verify", "residual_max_mb", "enable"}
SCRIPT_KEYS = {"label", "lr", "momentum", "ref", "layerwise", "layout"}
TRAIN_KEYS = ("lr", "momentum")
PARAM_FIELDS = {"onebit_block": int, "tbq_threshold": float, "tbq_scale": float,
                "terngrad_bits": int, "sparse_ratio": float, "sample_ratio": float,
                "dgc_momentum": float, "powersgd_rank": int, "isa": None,
                "tbq_block": int, "sparse_block": int, "dgc_warmup": int}

CSV_COLUMNS = ("record", "config", "compressor", "algo", "np", "seed", "epoch", "step",
               "train_loss", "test_loss", "test_acc", "compressed", "calls", "wire_ratio",
               "plan", "diverged", "identical", "wall_s", "reduce_s", "spec",
               "task", "global_batch")
SUM_COMPRESSORS = ("onebit", "tbq", "terngrad")   # whose auto sum codec differs from the worker's


# ------------------------------------------------------------------ configs

class Config:
    def __init__(self, spec):
        self.spec = spec
        name, _, rest = spec.partition(":")
        self.name = name.strip().lower()
        self.keys = OrderedDict()
        self.ref = False
        for item in rest.replace(":", ",").split(","):
            item = item.strip()
            if not item:
                continue
            if item == "ref":
                self.ref = True
                continue
            if "=" not in item:
                raise ValueError("config %r: %r is not KEY=VALUE" % (spec, item))
            k, v = item.split("=", 1)
            k = k.strip().lower()
            if k.startswith("hipress_"):
                k = k[len("hipress_"):]
            self.keys[k] = v.strip()
        if self.keys.pop("ref", None) is not None:
            self.ref = True
        self.plain = self.name == "plain"
        if self.plain and (self.ref or "algo" in self.keys):
            raise ValueError("config %r: plain takes no algo or ref" % spec)
        if not self.plain and not self.ref:
            self.keys.setdefault("algo", "auto")
        if self.ref and "algo" in self.keys:
            raise ValueError("config %r: a reference has no algo" % spec)
        self.algo = "plain" if self.plain else ("ref" if self.ref else self.keys["algo"])
        self.lr = float(self.keys["lr"]) if "lr" in self.keys else None
        self.momentum = float(self.keys["momentum"]) if "momentum" in self.keys else None
        extra = ["%s=%s" % (k, v) for k, v in self.keys.items()
                 if k not in ("algo", "label")]
        if "label" in self.keys:
            self.label = self.keys["label"]
        else:
            self.label = "plain" if self.plain else "%s/%s" % (self.name, self.algo)
            if extra:
                self.label += "+" + "+".join(extra)

    @property
    def compressor(self):
        return "none" if self.plain else self.name

    def family(self):
        """What pairs a config with its reference: compressor and its parameters."""
        params = tuple(sorted((k, v) for k, v in self.keys.items()
                              if k not in TRANSPORT_KEYS and k not in SCRIPT_KEYS
                              or k == "layerwise"))
        return (self.compressor, params, self.train_key())

    def train_key(self):
        return tuple((k, self.keys[k]) for k in TRAIN_KEYS if k in self.keys)

    def info_items(self, force, extra=()):
        """The MPI info keys of its communicator (extra: --set KEY=VAL, unless
        the config gives KEY itself)."""
        if self.plain or self.ref:
            return [("hipress_compress", "false")]
        items = [("hipress_compress", "true"), ("hipress_compressor", self.name)]
        for k, v in self.keys.items():
            if k in SCRIPT_KEYS:
                continue
            items.append(("hipress_" + k, v))
        for k, v in extra:
            if k not in self.keys:
                items.append(("hipress_" + k, v))
        if force and self.keys["algo"] == "auto" and "allow_plain" not in self.keys:
            items.append(("hipress_allow_plain", "false"))
        return items


def preset(name):
    if name == "full":
        out = ["plain"]
        for c in COMPRESSORS:
            for a in (("auto",) if c == "powersgd" else ALGOS):
                out.append("%s:algo=%s" % (c, a))
        out += ["%s:ref" % c for c in EF_COMPRESSORS] + ["powersgd:ref,layerwise=1"]
        return out
    if name == "auto":          # every compressor under auto (e.g. the np 8 subset)
        return ["plain"] + ["%s:algo=auto" % c for c in COMPRESSORS] + \
               ["%s:ref" % c for c in EF_COMPRESSORS] + ["powersgd:ref,layerwise=1"]
    if name == "np8":           # auto for all, every algorithm for onebit and fp16
        return preset("auto") + ["%s:algo=%s" % (c, a) for c in ("onebit", "fp16")
                                 for a in ALGOS if a != "auto"]
    if name == "trial":
        return ["plain"] + ["%s:algo=%s" % (c, a) for c in ("onebit", "tbq")
                            for a in ("ring", "allgather", "auto")] + ["onebit:ref", "tbq:ref"]
    if name == "quick":         # CI
        # auto with sum_codec=same: ps over the budget, allgather its only
        # candidate, so the run does not depend on the exploration's timing
        # (with the sum codec, auto chooses between allgather and ps by
        # measured time, and 110 chaotic steps then land on different
        # trajectories: doc/measured/sum-codecs.md; the sum check of
        # tests/study/run_train.sh covers ps with its sum codec)
        return ["plain", "onebit:algo=auto,sum_codec=same", "onebit:algo=ps"]
    if name == "sum":           # ps with the owner's sum codec
        out = ["plain"]
        for c in SUM_COMPRESSORS:
            out += ["%s:ref" % c, "%s:algo=ps,sum_codec=auto" % c, "%s:algo=ps,sum_codec=same" % c]
            # the other q codec than auto's: auto is q4 for onebit and tbq,
            # q2 for terngrad at its default 2 bits
            out.append("%s:algo=ps,sum_codec=%s" % (c, "q4" if c == "terngrad" else "q2"))
            out.append("%s:algo=auto" % c)
        return out
    if name == "sumcore":       # the sum preset without the q2/q4 comparison
        return [s for s in preset("sum") if "sum_codec=q" not in s]
    if name == "sumci":         # CI: onebit's ps with its sum codec against its textbook form
        return ["onebit:ref", "onebit:algo=ps,sum_codec=auto"]
    if name == "fused":         # a fusion buffer's changing layout, every compressor's form
        return ["plain"] + ["%s:algo=auto,layout=fused,min_bytes=0" % c for c in COMPRESSORS + ("q4",)]
    raise ValueError("unknown preset %r (%s)" % (name, ", ".join(PRESETS)))


PRESETS = ("full", "auto", "np8", "trial", "quick", "sum", "sumcore", "sumci", "fused")


# -------------------------------------------------------------- statistics

def t975(df):
    """Two-sided 95% Student t quantile."""
    try:
        from scipy.stats import t
        return float(t.ppf(0.975, df))
    except ImportError:
        table = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365,
                 8: 2.306, 9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}
        k = max(d for d in table if d <= df) if df >= 1 else 1
        return table[k] if df < 60 else 1.96


def mean_ci(xs):
    """(mean, 95% CI half-width); half-width nan for fewer than 2 values."""
    xs = [x for x in xs]
    n = len(xs)
    if n == 0:
        return float("nan"), float("nan")
    m = sum(xs) / n
    if n < 2:
        return m, float("nan")
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    return m, t975(n - 1) * sd / math.sqrt(n)


def verdict(m, h, bound):
    """pass / FAIL / open for 'difference >= bound' (bound negative)."""
    if not math.isfinite(m):
        return "FAIL"
    if not math.isfinite(h):           # one seed: no interval, no verdict
        return "open"
    if m - h >= bound:
        return "pass"
    if m + h < bound:
        return "FAIL"
    return "open"


def read_runs(paths):
    runs = []
    for p in paths:
        with open(p, newline="") as f:
            for row in csv.DictReader(f):
                if row["record"] == "run":
                    runs.append(row)
    return runs


def fnum(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return float("nan")


def summarize(runs):
    """Rows of the summary table (dicts), in the order configs first appear."""
    by = OrderedDict()
    for r in runs:
        by.setdefault((r["config"], int(r["np"])), {})[int(r["seed"])] = r
    cfg_of = {}
    for label, _ in by:
        if label not in cfg_of:
            cfg_of[label] = Config(spec_of_label(label, runs))
    rows = []
    for (label, npr), seeds in by.items():
        cfg = cfg_of[label]
        row = OrderedDict(config=label, np=npr, seeds=len(seeds))
        for col in ("test_acc", "train_loss", "test_loss"):
            m, h = mean_ci([fnum(r[col]) for r in seeds.values()])
            row[col] = m
            row[col + "_ci"] = h
        row["diverged"] = sum(int(r["diverged"]) for r in seeds.values())
        row["not_identical"] = sum(1 - int(r["identical"]) for r in seeds.values())
        row["min_compressed"] = min(int(r["compressed"]) for r in seeds.values())
        row["wire_ratio"] = mean_ci([fnum(r["wire_ratio"]) for r in seeds.values()])[0]
        plans = sorted(set(r["plan"] for r in seeds.values()))
        row["plan"] = " / ".join(plans)
        row["wall_s"] = mean_ci([fnum(r["wall_s"]) for r in seeds.values()])[0]

        def paired(other_label, col="test_acc"):
            other = by.get((other_label, npr))
            if other is None or other_label == label:
                return float("nan"), float("nan"), 0
            common = sorted(set(seeds) & set(other))
            d = [fnum(seeds[s][col]) - fnum(other[s][col]) for s in common]
            m, h = mean_ci(d)
            return m, h, len(common)

        plain_label = next((l for l in cfg_of if cfg_of[l].plain and
                            cfg_of[l].train_key() == cfg.train_key()), None)
        ref_label = next((l for l in cfg_of if cfg_of[l].ref and
                          cfg_of[l].family() == cfg.family()), None)
        row["vs_plain"], row["vs_plain_ci"], row["vs_plain_n"] = paired(plain_label)
        row["vs_ref"], row["vs_ref_ci"], row["vs_ref_n"] = (
            paired(ref_label) if (ref_label and not cfg.ref) else (float("nan"), float("nan"), 0))
        has_ref = bool(ref_label and not cfg.ref)
        targets = []
        if row["diverged"]:
            targets.append("DIVERGED")
        if not cfg.plain and not cfg.ref:
            if row["min_compressed"] == 0:
                targets.append("NOT COMPRESSED")
            elif any(r["plan"] == "plain" for r in seeds.values()):
                targets.append("PLAN PLAIN in %d" % sum(r["plan"] == "plain" for r in seeds.values()))
        if row["vs_ref_n"] and (
                (cfg.name in EF_COMPRESSORS and cfg.algo == "auto") or
                (cfg.name in SUM_COMPRESSORS and cfg.algo in ("auto", "ps")
                 and cfg.keys.get("sum_codec", "auto") != "same")):
            targets.append("ref-1pt " + verdict(row["vs_ref"], row["vs_ref_ci"], -0.01))
        if cfg.name in ("fp16", "bf16") and not cfg.ref and row["vs_plain_n"]:
            targets.append("plain-0.5pt " + verdict(row["vs_plain"], row["vs_plain_ci"], -0.005))
        row["targets"] = "; ".join(targets)
        # appended columns (older summaries end at targets): paired loss
        # differences against the reference (positive: higher loss than it)
        for col in ("train_loss", "test_loss"):
            m, h, _ = paired(ref_label, col) if has_ref else (float("nan"), float("nan"), 0)
            row["vs_ref_" + col], row["vs_ref_" + col + "_ci"] = m, h
        rows.append(row)
    return rows


def spec_of_label(label, runs):
    """Rebuild a config from a run row's label (for --summarize)."""
    for r in runs:
        if r["config"] == label and r.get("spec"):
            return r["spec"]
    if label == "plain":
        return "plain"
    base, _, extra = label.partition("+")
    comp, _, algo = base.partition("/")
    keys = [k for k in extra.split("+") if k]
    if algo == "ref":
        return "%s:ref%s" % (comp, "".join("," + k for k in keys))
    return "%s:algo=%s%s" % (comp, algo, "".join("," + k for k in keys))


def fmt_pct(m, h):
    if not math.isfinite(m):
        return ""
    return "%.2f ± %.2f" % (100 * m, 100 * h) if math.isfinite(h) else "%.2f" % (100 * m)


def fmt_loss(m, h):
    if not math.isfinite(m):
        return "%s" % m
    return "%.4f ± %.4f" % (m, h) if math.isfinite(h) else "%.4f" % m


def summary_markdown(rows):
    head = ("| config | np | seeds | test acc % | vs plain (pts) | vs ref (pts) | train loss "
            "| test loss | test loss vs ref | min compressed | wire ratio | plan | s/run | targets |")
    out = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        tl = r["vs_ref_test_loss"]
        out.append("| %s | %d | %d | %s | %s | %s | %s | %s | %s | %d | %s | %s | %.1f | %s |" % (
            r["config"], r["np"], r["seeds"], fmt_pct(r["test_acc"], r["test_acc_ci"]),
            fmt_pct(r["vs_plain"], r["vs_plain_ci"]), fmt_pct(r["vs_ref"], r["vs_ref_ci"]),
            fmt_loss(r["train_loss"], r["train_loss_ci"]), fmt_loss(r["test_loss"], r["test_loss_ci"]),
            ("%+.4f ± %.4f" % (tl, r["vs_ref_test_loss_ci"]) if math.isfinite(r["vs_ref_test_loss_ci"])
             else "%+.4f" % tl) if math.isfinite(tl) else "",
            r["min_compressed"], "%.1f" % r["wire_ratio"] if math.isfinite(r["wire_ratio"]) else "",
            r["plan"], r["wall_s"], r["targets"]))
    out.append("")
    out.append("Means over seeds ± half-width of the 95% Student-t confidence interval; "
               "differences are paired by seed (accuracy points).")
    return "\n".join(out)


def write_summary(prefix, rows):
    md = summary_markdown(rows)
    with open(prefix + "_summary.md", "w") as f:
        f.write(md + "\n")
    if rows:
        with open(prefix + "_summary.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rows)
    return md


# ------------------------------------------------------------ the library

class Params(ctypes.Structure):
    _fields_ = [("onebit_block", ctypes.c_uint32), ("tbq_threshold", ctypes.c_float),
                ("tbq_scale", ctypes.c_float), ("terngrad_bits", ctypes.c_uint32),
                ("sparse_ratio", ctypes.c_double), ("sample_ratio", ctypes.c_double),
                ("dgc_momentum", ctypes.c_float), ("powersgd_rank", ctypes.c_uint32),
                ("isa", ctypes.c_int), ("tbq_block", ctypes.c_uint32),
                ("sparse_block", ctypes.c_uint32), ("dgc_warmup", ctypes.c_uint32),
                ("fp16_block", ctypes.c_uint32), ("terngrad_block", ctypes.c_uint32),
                ("q_block", ctypes.c_uint32), ("q_rounding", ctypes.c_uint32)]  # the layout of hipress_comp_params_t


class EncodeArgs(ctypes.Structure):
    _fields_ = [("in_", ctypes.POINTER(ctypes.c_float)), ("residual", ctypes.POINTER(ctypes.c_float)),
                ("state", ctypes.POINTER(ctypes.c_float)), ("n", ctypes.c_size_t),
                ("k", ctypes.c_size_t), ("out", ctypes.c_void_p), ("out_cap", ctypes.c_size_t),
                ("rng_key", ctypes.c_uint64 * 4), ("rng_offset", ctypes.c_uint64),
                ("params", ctypes.POINTER(Params))]


MAX_PAYLOAD = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_size_t, ctypes.POINTER(Params))
ENCODE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(EncodeArgs), ctypes.POINTER(ctypes.c_size_t),
                          ctypes.POINTER(ctypes.c_int))
DECODE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t,
                          ctypes.POINTER(ctypes.c_float), ctypes.c_int, ctypes.POINTER(Params))


class CompressorV1(ctypes.Structure):
    _fields_ = [("abi_version", ctypes.c_uint32), ("name", ctypes.c_char_p),
                ("flags", ctypes.c_uint32), ("max_payload", MAX_PAYLOAD),
                ("encode", ENCODE), ("decode", DECODE)]


class Stats(ctypes.Structure):
    _fields_ = [("calls", ctypes.c_ulonglong), ("compressed", ctypes.c_ulonglong),
                ("passthrough", ctypes.c_ulonglong), ("bytes_raw", ctypes.c_ulonglong),
                ("bytes_wire", ctypes.c_ulonglong), ("nonfinite", ctypes.c_ulonglong),
                ("errors", ctypes.c_ulonglong), ("encode_s", ctypes.c_double),
                ("decode_s", ctypes.c_double), ("total_s", ctypes.c_double)]


COMP_EF, COMP_COLLECTIVE, COMP_MOMENTUM = 0x2, 0x8, 0x10


class Lib:
    """The public API of the preloaded libhipress.so."""

    def __init__(self):
        proc = ctypes.CDLL(None)
        try:
            self.stats_get = proc.hipress_stats_get
        except AttributeError:
            raise SystemExit("convergence.py: hipress_stats_get not found: run with "
                             "-x LD_PRELOAD=.../libhipress.so")
        self.stats_get.restype = None
        self.stats_get.argtypes = [ctypes.POINTER(Stats)]
        self.find = proc.hipress_compressor_find
        self.find.restype = ctypes.POINTER(CompressorV1)
        self.find.argtypes = [ctypes.c_char_p]
        self.params_default = proc.hipress_comp_params_default
        self.params_default.restype = None
        self.params_default.argtypes = [ctypes.POINTER(Params)]
        self.comm_plan = proc.hipress_comm_plan
        self.comm_plan.restype = ctypes.c_int
        self.comm_plan.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
        self.version = proc.hipress_version
        self.version.restype = ctypes.c_char_p

    def stats(self):
        s = Stats()
        self.stats_get(ctypes.byref(s))
        return s

    def plan(self, comm, nbytes):
        from mpi4py import MPI
        buf = ctypes.create_string_buffer(128)
        self.comm_plan(ctypes.c_void_p(MPI._handleof(comm)), nbytes, buf, len(buf))
        return buf.value.decode(errors="replace")

    def compressor(self, name):
        p = self.find(name.encode())
        if not p:
            raise SystemExit("convergence.py: the library has no compressor %r" % name)
        c = p.contents
        if c.abi_version != 1 or c.name.decode() != name:
            raise SystemExit("convergence.py: compressor %r: unexpected ABI %d / name %r"
                             % (name, c.abi_version, c.name))
        return c


def fptr(a):
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_float))


class LibReference:
    """Textbook form of a compressor with the library's own encode/decode."""

    def __init__(self, lib, cfg, comm, n):
        self.comm, self.n = comm, n
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.comp = lib.compressor(cfg.name)
        self.params = Params()
        lib.params_default(ctypes.byref(self.params))
        self.seed = 12345
        for k, v in cfg.keys.items():
            if k == "seed":
                self.seed = int(v)
            elif k == "isa":
                self.params.isa = {"auto": 0, "generic": 1, "avx2": 2}[v]
            elif k in PARAM_FIELDS:
                setattr(self.params, k, PARAM_FIELDS[k](v))
        flags = self.comp.flags
        self.warmup_ratio = self.params.sparse_ratio if cfg.name == "dgc" else None
        self.residual = np.zeros(n, np.float32) if flags & COMP_EF else None
        self.state = np.zeros(n, np.float32) if flags & COMP_MOMENTUM else None
        cap = self.comp.max_payload(n, ctypes.byref(self.params))
        if self.warmup_ratio is not None:
            cap = max(cap, 8 * n)   # dgc's warm-up sends up to 25% of the elements
        self.out = np.zeros(cap, np.uint8)
        self.tmp = np.zeros(n, np.float32)
        self.acc = np.zeros(n, np.float64)
        a = self.args = EncodeArgs()
        a.residual = fptr(self.residual) if self.residual is not None else None
        a.state = fptr(self.state) if self.state is not None else None
        a.n, a.k = n, 0
        a.out, a.out_cap = self.out.ctypes.data, cap
        a.rng_key[0], a.rng_key[1], a.rng_key[3] = self.seed, self.rank, 0
        a.rng_offset = 0
        a.params = ctypes.pointer(self.params)

    def reduce(self, g, step):
        from mpi4py import MPI
        a = self.args
        a.in_ = fptr(g)
        a.rng_key[2] = step
        if self.warmup_ratio is not None:
            # dgc's density warm-up (the library applies it per buffer:
            # hp_dgc_density in src/ops/hp_ops_sparse.c)
            ratio, w = self.warmup_ratio, self.params.dgc_warmup
            d = ratio
            if w and step < w and ratio < 0.25:
                d = max(ratio, 0.25 * (ratio / 0.25) ** (step / w))
            self.params.sparse_ratio = d
        out_len, nonfinite = ctypes.c_size_t(0), ctypes.c_int(0)
        rc = self.comp.encode(ctypes.byref(a), ctypes.byref(out_len), ctypes.byref(nonfinite))
        if rc != 0:
            raise RuntimeError("encode returned %d" % rc)
        mine = np.array([out_len.value if not nonfinite.value else 0, nonfinite.value], np.int64)
        allinfo = np.zeros((self.size, 2), np.int64)
        self.comm.Allgather(mine, allinfo)
        lens = [int(x) for x in allinfo[:, 0]]
        displs = [sum(lens[:i]) for i in range(self.size)]
        gathered = np.zeros(max(sum(lens), 1), np.uint8)
        self.comm.Allgatherv(self.out[:lens[self.rank]], [gathered, lens, displs, MPI.BYTE])
        if allinfo[:, 1].any():
            g[:] = np.nan
            return
        self.acc[:] = 0
        for r in range(self.size):
            rc = self.comp.decode(gathered[displs[r]:].ctypes.data, lens[r], self.n,
                                  fptr(self.tmp), 0, ctypes.byref(self.params))
            if rc != 0:
                raise RuntimeError("decode of rank %d's message returned %d" % (r, rc))
            self.acc += self.tmp
        g[:] = self.acc


class PowerSGDReference:
    """PowerSGD (Vogels et al. 2019) with error feedback and warm start, in
    numpy (float64).  By default on the library's matrix: the whole flat
    buffer as m x c, c the power of two nearest sqrt(n), as hp_psgd_shape.  With the config key layerwise=1, as in
    the paper: each weight matrix (in x out) is its own matrix, biases and
    matrices too small to shrink are summed exactly."""

    def __init__(self, lib, cfg, comm, n, shapes):
        self.comm, self.n = comm, n
        params = Params()
        lib.params_default(ctypes.byref(params))
        rank = int(cfg.keys.get("powersgd_rank", params.powersgd_rank))
        seed = int(cfg.keys.get("seed", 12345))
        if cfg.keys.get("layerwise", "0") not in ("0", "false", "no", "off"):
            blocks, o = [], 0
            for s in shapes:
                k = int(np.prod(s))
                blocks.append((o, k, s if len(s) == 2 else None))
                o += k
        else:
            # hp_psgd_shape: c the power of two nearest sqrt(n)
            lo = 1
            while (2 * lo) * (2 * lo) <= n:
                lo *= 2
            c = lo if n <= 2 * lo * lo else 2 * lo
            blocks = [(0, n, ((n + c - 1) // c, c))]
        self.blocks = []
        rng = np.random.default_rng([seed, 4242])
        for o, k, shape in blocks:
            if shape is not None:
                m, c = shape
                r = min(rank, m, c)
                if r * (m + c) >= k:
                    shape = None
            if shape is None:
                self.blocks.append(dict(o=o, k=k, exact=True))
                continue
            self.blocks.append(dict(o=o, k=k, exact=False, m=m, c=c,
                                    M=np.zeros(m * c, np.float64), res=np.zeros(k, np.float64),
                                    Q=rng.standard_normal((c, r))))

    def reduce(self, g, step):
        from mpi4py import MPI
        out = np.zeros(self.n, np.float64)
        for b in self.blocks:
            o, k = b["o"], b["k"]
            if b["exact"]:
                x = g[o:o + k].astype(np.float64)
                self.comm.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM)
                out[o:o + k] = x
                continue
            b["M"][:k] = g[o:o + k]
            b["M"][:k] += b["res"]
            M = b["M"].reshape(b["m"], b["c"])
            P = M @ b["Q"]
            flag = np.array([0.0 if np.isfinite(P).all() else 1.0])
            self.comm.Allreduce(MPI.IN_PLACE, P, op=MPI.SUM)
            self.comm.Allreduce(MPI.IN_PLACE, flag, op=MPI.SUM)
            if flag[0] or not np.isfinite(P).all():
                out[o:o + k] = np.nan
                continue
            P, _ = np.linalg.qr(P)
            Ql = M.T @ P
            Q = Ql.copy()
            self.comm.Allreduce(MPI.IN_PLACE, Q, op=MPI.SUM)
            if not np.isfinite(Q).all():
                out[o:o + k] = np.nan
                continue
            b["res"][:] = (M - P @ Ql.T).ravel()[:k]
            b["Q"] = Q
            out[o:o + k] = (P @ Q.T).ravel()[:k]
        g[:] = out


# ------------------------------------------------------------------- model

class Data:
    def __init__(self, split_seed, n_test, task="digits", world=None):
        if task == "mnist1d":
            self._mnist1d(split_seed, world)
            return
        from sklearn.datasets import load_digits
        d = load_digits()
        x = (d.data / 16.0).astype(np.float32)
        y = d.target.astype(np.int64)
        perm = np.random.default_rng(split_seed).permutation(len(y))
        te, tr = perm[:n_test], perm[n_test:]
        self.xtr, self.ytr, self.xte, self.yte = x[tr], y[tr], x[te], y[te]

    def _mnist1d(self, split_seed, world):
        """MNIST-1D (Greydanus 2020), generated here by the package's own
        make_dataset with its default arguments (5000 sequences of 40, 4000
        train / 1000 test, standardised), its seed 42 + --split-seed; rank 0
        generates (a few seconds) and broadcasts.  Nothing is downloaded."""
        d = None
        if world is None or world.Get_rank() == 0:
            try:
                from mnist1d.data import make_dataset, get_dataset_args
            except ImportError:
                raise SystemExit("convergence.py: --task mnist1d needs the mnist1d package "
                                 "(/usr/bin/python3 -m pip install --break-system-packages mnist1d)")
            a = get_dataset_args()
            a.seed = 42 + split_seed
            raw = make_dataset(a)
            d = tuple(np.ascontiguousarray(v) for v in (
                raw["x"].astype(np.float32), raw["y"].astype(np.int64),
                raw["x_test"].astype(np.float32), raw["y_test"].astype(np.int64)))
        if world is not None:
            d = world.bcast(d, root=0)
        self.xtr, self.ytr, self.xte, self.yte = d


class MLP:
    """64-H-H-10, parameters and gradient each in one flat float32 buffer."""

    def __init__(self, sizes, seed):
        self.shapes = []
        for i in range(len(sizes) - 1):
            self.shapes += [(sizes[i], sizes[i + 1]), (sizes[i + 1],)]
        self.n = sum(int(np.prod(s)) for s in self.shapes)
        self.w = np.zeros(self.n, np.float32)
        self.g = np.zeros(self.n, np.float32)
        self.W, self.G = self._views(self.w), self._views(self.g)
        rng = np.random.default_rng([seed, 1])
        for i in range(0, len(self.W), 2):
            fan_in = self.W[i].shape[0]
            self.W[i][...] = rng.standard_normal(self.W[i].shape) * math.sqrt(2.0 / fan_in)

    def _views(self, flat):
        out, o = [], 0
        for s in self.shapes:
            k = int(np.prod(s))
            out.append(flat[o:o + k].reshape(s))
            o += k
        return out

    def forward(self, x):
        acts = [x]
        h = x
        L = len(self.W) // 2
        for i in range(L):
            z = h @ self.W[2 * i] + self.W[2 * i + 1]
            if i < L - 1:
                np.maximum(z, 0, out=z)
            acts.append(z)
            h = z
        return acts

    @staticmethod
    def loss_terms(logits, y):
        """Per-sample cross-entropy (float64) and softmax probabilities (float32)."""
        z = logits.astype(np.float64)
        z -= z.max(axis=1, keepdims=True)
        lse = np.log(np.exp(z).sum(axis=1))
        ce = lse - z[np.arange(len(y)), y]
        p = np.exp(z - lse[:, None]).astype(np.float32)
        return ce, p

    def gradient(self, x, y):
        """Mean-loss gradient of the batch into self.g; returns the summed loss."""
        if len(y) == 0:
            self.g[:] = 0
            return 0.0
        acts = self.forward(x)
        ce, p = self.loss_terms(acts[-1], y)
        dz = p
        dz[np.arange(len(y)), y] -= 1.0
        dz /= np.float32(len(y))
        L = len(self.W) // 2
        for i in range(L - 1, -1, -1):
            np.matmul(acts[i].T, dz, out=self.G[2 * i])
            np.sum(dz, axis=0, out=self.G[2 * i + 1])
            if i > 0:
                dz = dz @ self.W[2 * i].T
                dz *= acts[i] > 0
        return float(ce.sum())

    def evaluate(self, x, y):
        if len(y) == 0:
            return 0.0, 0.0
        logits = self.forward(x)[-1]
        ce, _ = self.loss_terms(logits, y)
        return float((logits.argmax(axis=1) == y).sum()), float(ce.sum())


# ---------------------------------------------------------------- training

def hidden_of(args):
    return args.hidden if args.hidden else (512 if args.task == "mnist1d" else 1024)


def global_batch(args, N):
    """Images per step: --global-batch (the same on every N; rank r takes part
    r of it, numpy.array_split) or --batch per rank."""
    if args.global_batch:
        if args.global_batch < N:
            raise SystemExit("convergence.py: --global-batch %d < %d ranks" % (args.global_batch, N))
        return args.global_batch
    return args.batch * N


def train(args, cfg, seed, data, lib, world):
    from mpi4py import MPI
    rank, N = world.Get_rank(), world.Get_size()
    lr = cfg.lr if cfg.lr is not None else args.lr
    mom = cfg.momentum if cfg.momentum is not None else args.momentum
    comm = world.Dup()
    info = MPI.Info.Create()
    for k, v in cfg.info_items(args.force_compress, args.set):
        info.Set(k, v)
    comm.Set_info(info)
    info.Free()
    metric = world.Dup()                      # float64 sums only; opted out anyway
    info = MPI.Info.Create()
    info.Set("hipress_compress", "false")
    metric.Set_info(info)
    info.Free()

    model = MLP([data.xtr.shape[1]] + [hidden_of(args)] * args.layers + [10], seed)
    vel = np.zeros(model.n, np.float32)
    ref = None
    if cfg.ref:
        if cfg.name == "powersgd":
            ref = PowerSGDReference(lib, cfg, comm, model.n, model.shapes)
        else:
            ref = LibReference(lib, cfg, comm, model.n)
    ntr = len(data.ytr)
    G = global_batch(args, N)
    steps_per_epoch = (ntr + G - 1) // G
    total = args.epochs * steps_per_epoch if args.steps is None else args.steps
    epochs = (total + steps_per_epoch - 1) // steps_per_epoch
    test_part = np.array_split(np.arange(len(data.yte)), N)[rank]
    rows = []
    first_epoch_loss = None
    reduce_s = 0.0
    step = 0
    buf = np.zeros(2, np.float64)
    fused = cfg.keys.get("layout") == "fused" and ref is None
    if cfg.keys.get("layout", "fused") != "fused":
        raise ValueError("config %r: layout=fused is the only layout" % cfg.spec)
    offs = np.cumsum([0] + [int(np.prod(sh)) for sh in model.shapes])
    fbuf = np.zeros(model.n, np.float32) if fused else None
    s0 = lib.stats()
    world.Barrier()
    t0 = time.perf_counter()
    with np.errstate(all="ignore"):
        for epoch in range(1, epochs + 1):
            perm = np.random.default_rng([seed, 2, epoch]).permutation(ntr)
            losses = []
            for s in range(steps_per_epoch):
                if step >= total:
                    break
                mine = np.array_split(perm[s * G:(s + 1) * G], N)[rank]
                buf[0] = model.gradient(data.xtr[mine], data.ytr[mine])
                buf[1] = len(mine)
                t1 = time.perf_counter()
                if fused:
                    rng = np.random.default_rng([seed, 7, step])
                    order = rng.permutation(len(model.shapes))
                    k = int(rng.integers(1, 4))
                    cuts = sorted(rng.choice(np.arange(1, len(order)), size=k - 1, replace=False)) if k > 1 else []
                    for grp in np.split(order, cuts):
                        cnt = 0
                        for t in grp:
                            ln = offs[t + 1] - offs[t]
                            fbuf[cnt:cnt + ln] = model.g[offs[t]:offs[t + 1]]
                            cnt += ln
                        comm.Allreduce(MPI.IN_PLACE, fbuf[:cnt], op=MPI.SUM)
                        cnt = 0
                        for t in grp:
                            ln = offs[t + 1] - offs[t]
                            model.g[offs[t]:offs[t + 1]] = fbuf[cnt:cnt + ln]
                            cnt += ln
                elif ref is None:
                    comm.Allreduce(MPI.IN_PLACE, model.g, op=MPI.SUM)
                else:
                    ref.reduce(model.g, step)
                reduce_s += time.perf_counter() - t1
                model.g *= np.float32(1.0 / N)
                vel *= np.float32(mom)
                vel += model.g
                model.w -= np.float32(lr) * vel
                metric.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
                loss = buf[0] / buf[1]
                losses.append(loss)
                rows.append(dict(record="step", epoch=epoch, step=step, train_loss=loss))
                step += 1
            correct, lsum = model.evaluate(data.xte[test_part], data.yte[test_part])
            ev = np.array([correct, lsum], np.float64)
            metric.Allreduce(MPI.IN_PLACE, ev, op=MPI.SUM)
            ep_loss = float(np.mean(losses)) if losses else float("nan")
            if first_epoch_loss is None:
                first_epoch_loss = ep_loss
            rows.append(dict(record="epoch", epoch=epoch, step=step - 1, train_loss=ep_loss,
                             test_loss=ev[1] / len(data.yte), test_acc=ev[0] / len(data.yte)))
    world.Barrier()
    wall = time.perf_counter() - t0
    s1 = lib.stats()
    plan = "" if (cfg.plain or cfg.ref) else lib.plan(comm, 4 * model.n)
    digest = int.from_bytes(hashlib.sha1(model.w.tobytes()).digest()[:7], "little")
    digests = world.allgather(digest)
    red = np.array([reduce_s])
    metric.Allreduce(MPI.IN_PLACE, red, op=MPI.MAX)
    comm.Free()
    metric.Free()

    last = rows[-1]
    final_train, final_test = last["train_loss"], last["test_loss"]
    diverged = not (math.isfinite(final_train) and math.isfinite(final_test)
                    and (epochs == 1 or final_train < first_epoch_loss))
    raw, wire = s1.bytes_raw - s0.bytes_raw, s1.bytes_wire - s0.bytes_wire
    rows.append(dict(record="run", epoch=epochs, step=step, train_loss=final_train,
                     test_loss=final_test, test_acc=last["test_acc"],
                     compressed=s1.compressed - s0.compressed, calls=s1.calls - s0.calls,
                     wire_ratio=("%.3f" % (raw / wire)) if wire else "", plan=plan,
                     diverged=int(diverged), identical=int(len(set(digests)) == 1),
                     wall_s="%.3f" % wall, reduce_s="%.3f" % red[0],
                     spec=cfg.spec + "".join(",%s=%s" % kv for kv in args.set
                                             if not (cfg.plain or cfg.ref) and kv[0] not in cfg.keys),
                     task=args.task, global_batch=G))
    for r in rows:
        r.update(config=cfg.label, compressor=cfg.compressor, algo=cfg.algo, np=N, seed=seed)
        for k in ("train_loss", "test_loss", "test_acc"):
            if k in r and isinstance(r[k], float):
                r[k] = "%.6g" % r[k]
    return rows


def check_configs(configs, args, world):
    """Apply every config's info keys to a scratch communicator: fail fast."""
    from mpi4py import MPI
    for cfg in configs:
        c = world.Dup()
        info = MPI.Info.Create()
        items = cfg.info_items(args.force_compress, args.set)
        for k, v in items:
            info.Set(k, v)
        try:
            c.Set_info(info)
            err = None
        except MPI.Exception as e:
            err = str(e)
        info.Free()
        c.Free()
        if err is not None:
            if world.Get_rank() == 0:
                keys = " ".join("%s=%s" % kv for kv in items)
                msg = "convergence.py: config %s: MPI_Comm_set_info refused %s (%s)" % (cfg.label, keys, err)
                if any(k == "hipress_allow_plain" for k, _ in items):
                    msg += ("; if this library has no HIPRESS_ALLOW_PLAIN yet, rerun with "
                            "--no-force-compress (auto may then choose plain)")
                print(msg, file=sys.stderr, flush=True)
            return False
    return True


def done_runs(path):
    done = set()
    if os.path.exists(path):
        for r in read_runs([path]):
            done.add((r["config"], int(r["np"]), int(r["seed"])))
    return done


def main_mpi(args, configs):
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    rank, N = world.Get_rank(), world.Get_size()
    lib = Lib()
    if not check_configs(configs, args, world):
        return 2
    data = Data(args.split_seed, args.test_size, args.task, world)
    seeds = args.seed_list or list(range(args.first_seed, args.first_seed + args.seeds))
    path = args.out + ".csv"
    done = done_runs(path) if (rank == 0 and args.resume) else set()
    done = world.bcast(done, root=0)
    f = writer = None
    if rank == 0:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        new = not (args.resume and os.path.exists(path))
        f = open(path, "w" if new else "a", newline="")
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        if new:
            writer.writeheader()
        print("# hipress %s, np %d, %d configs x %d seeds -> %s" % (
            lib.version().decode(), N, len(configs), len(seeds), path), flush=True)
    t_all = time.perf_counter()
    for seed in seeds:
        for cfg in configs:
            if (cfg.label, N, seed) in done:
                continue
            rows = train(args, cfg, seed, data, lib, world)
            if rank == 0:
                writer.writerows(rows)
                f.flush()
                r = rows[-1]
                print("%-24s seed %-3d acc %-8s train %-10s test %-10s compressed %-4s wire %-6s "
                      "plan %-14s %s s (reduce %s s)%s" % (
                          cfg.label, seed, r["test_acc"], r["train_loss"], r["test_loss"],
                          r["compressed"], r["wire_ratio"] or "-", r["plan"] or "-", r["wall_s"],
                          r["reduce_s"],
                          "" if r["identical"] else "  NOT IDENTICAL"), flush=True)
    status = 0
    if rank == 0:
        f.close()
        print("# total %.1f s" % (time.perf_counter() - t_all), flush=True)
        runs = [r for r in read_runs([path]) if int(r["np"]) == N]
        rows = summarize(runs)
        print(write_summary(args.out, rows), flush=True)
        if args.check:
            status = check(runs, configs)
    return world.bcast(status, root=0)


def check(runs, configs):
    """CI verdict on the runs of these configs: every compressed run compressed
    (and its final plan is not plain), no run diverged or ended with different
    parameters on different ranks, and the mean over seeds of each compressed
    config's accuracy minus plain's (paired by seed) is at least -CHECK_DROP."""
    labels = {c.label: c for c in configs}
    have_plain = any(c.plain for c in configs)
    plain = {int(r["seed"]): fnum(r["test_acc"]) for r in runs if r["config"] == "plain"}
    refs = {c.family(): c.label for c in configs if c.ref}
    by_seed = defaultdict(dict)
    for r in runs:
        by_seed[r["config"]][int(r["seed"])] = r
    bad = []
    diffs = defaultdict(list)
    ref_diffs = defaultdict(list)
    for r in runs:
        cfg = labels.get(r["config"])
        if cfg is None:
            continue
        what = "%s seed %s" % (r["config"], r["seed"])
        if int(r["diverged"]):
            bad.append("%s diverged" % what)
        if not int(r["identical"]):
            bad.append("%s: parameters differ between ranks" % what)
        if cfg.plain or cfg.ref:
            continue
        if int(r["compressed"]) == 0:
            bad.append("%s: no call was compressed (final plan %r)" % (what, r["plan"]))
        elif r["plan"] == "plain":
            if cfg.algo == "auto" and CHECK_ALLOW_PLAIN_AUTO[0]:
                print("check: note: %s settled on plain after %s compressed calls "
                      "(tolerated: --check-allow-plain-auto)" % (what, r["compressed"]), flush=True)
            else:
                bad.append("%s: final plan plain (%s calls compressed)" % (what, r["compressed"]))
        ref_label = refs.get(cfg.family())
        if ref_label is not None and CHECK_REF[0] is not None:
            o = by_seed[ref_label].get(int(r["seed"]))
            if o is None:
                bad.append("%s: no %s run at this seed to compare with" % (what, ref_label))
            else:
                ref_diffs[r["config"]].append((fnum(r["test_acc"]) - fnum(o["test_acc"]),
                                               fnum(r["test_loss"]) - fnum(o["test_loss"])))
        if not have_plain:
            continue
        p = plain.get(int(r["seed"]))
        if p is None:
            bad.append("%s: no plain run at this seed to compare with" % what)
        else:
            diffs[r["config"]].append(fnum(r["test_acc"]) - p)
    for label, d in diffs.items():
        m = sum(d) / len(d)
        print("check: %s accuracy - plain = %+.2f points (mean of %d seeds; bound %+.2f)"
              % (label, 100 * m, len(d), -100 * CHECK_DROP[0]), flush=True)
        if not m >= -CHECK_DROP[0]:
            bad.append("%s: accuracy %.2f points below plain (bound %.2f)" % (label, -100 * m, 100 * CHECK_DROP[0]))
    for label, d in ref_diffs.items():
        ma = sum(x for x, _ in d) / len(d)
        ml = sum(y for _, y in d) / len(d)
        drop, rise = CHECK_REF[0]
        print("check: %s - its reference: accuracy %+.2f points (bound %+.2f), test loss %+.4f "
              "(bound %+.4f) (means of %d paired seeds)"
              % (label, 100 * ma, -100 * drop, ml, rise, len(d)), flush=True)
        if not ma >= -drop:
            bad.append("%s: accuracy %.2f points below its reference (bound %.2f)"
                       % (label, -100 * ma, 100 * drop))
        if not ml <= rise:
            bad.append("%s: test loss %+.4f above its reference's (bound %+.4f)" % (label, ml, rise))
    for b in bad:
        print("FAIL: " + b, flush=True)
    print("convergence check: %s" % ("FAIL" if bad else "ok"), flush=True)
    return 1 if bad else 0


CHECK_DROP = [0.05]
CHECK_REF = [None]          # (accuracy drop, test-loss rise) against the reference
CHECK_ALLOW_PLAIN_AUTO = [False]


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", action="append", default=[], metavar="SPEC",
                    help="a configuration, e.g. onebit:algo=ring (repeatable)")
    ap.add_argument("--preset", action="append", default=[], choices=PRESETS,
                    help="a list of configurations: " + ", ".join(PRESETS))
    ap.add_argument("--list", action="store_true", help="print the configurations and exit")
    ap.add_argument("--seeds", type=int, default=5, help="number of seeds (default 5)")
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--seed-list", type=lambda s: [int(x) for x in s.split(",")],
                    help="explicit seeds, e.g. 1,2,3")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--steps", type=int, help="stop after this many steps (overrides --epochs)")
    ap.add_argument("--batch", type=int, default=32, help="batch per rank (default 32)")
    ap.add_argument("--global-batch", type=int, metavar="B",
                    help="images per step on every N (rank r takes part r of each; overrides "
                         "--batch): with --epochs or --steps, the same steps on every N")
    ap.add_argument("--task", choices=("digits", "mnist1d"), default="digits",
                    help="digits (scikit-learn, default) or mnist1d (generated locally)")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--hidden", type=int, help="hidden width (default 1024; mnist1d 512)")
    ap.add_argument("--layers", type=int, default=2, help="hidden layers (default 2)")
    ap.add_argument("--split-seed", type=int, default=0)
    ap.add_argument("--test-size", type=int, default=397)
    ap.add_argument("--force-compress", dest="force_compress", action="store_true", default=True,
                    help="give auto configs hipress_allow_plain=false (default)")
    ap.add_argument("--no-force-compress", dest="force_compress", action="store_false",
                    help="let auto choose plain (for a library without HIPRESS_ALLOW_PLAIN)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VAL",
                    type=lambda kv: tuple(x.strip() for x in kv.split("=", 1)),
                    help="hipress_KEY=VAL for every compressed config that does not set KEY "
                         "(e.g. partition_bytes=1M for a fixed plan); not part of the labels")
    ap.add_argument("--out", default="convergence", help="output prefix (default ./convergence)")
    ap.add_argument("--resume", action="store_true", help="append to PREFIX.csv, skipping runs there")
    ap.add_argument("--check", action="store_true", help="CI: exit 1 on a failed run (see above)")
    ap.add_argument("--check-drop", type=float, default=0.05,
                    help="--check: largest mean accuracy drop below plain (default 0.05)")
    ap.add_argument("--check-ref", metavar="DROP,RISE",
                    type=lambda s: tuple(float(x) for x in s.split(",")),
                    help="--check: also compare every compressed config with its reference "
                         "(paired by seed, mean over seeds): fail when its accuracy is more than "
                         "DROP (0..1) below or its final test loss more than RISE above")
    ap.add_argument("--check-allow-plain-auto", action="store_true",
                    help="--check: tolerate an auto config whose final plan is plain (for a "
                         "library without HIPRESS_ALLOW_PLAIN), if it compressed some calls")
    ap.add_argument("--record", metavar="FILE",
                    help="record every rank's gradient of a plain run (the first seed) into FILE, "
                         "for hipress-bench --quality, and exit")
    ap.add_argument("--record-steps", type=int, default=100, help="steps to record (default 100)")
    ap.add_argument("--summarize", nargs="+", metavar="CSV",
                    help="no training: summarize these CSV files (per np) into --out")
    args = ap.parse_args(argv)
    CHECK_DROP[0] = args.check_drop
    if args.check_ref is not None:
        if len(args.check_ref) != 2:
            ap.error("--check-ref DROP,RISE")
        CHECK_REF[:] = [args.check_ref]
    else:
        CHECK_REF[:] = [None]
    CHECK_ALLOW_PLAIN_AUTO[0] = args.check_allow_plain_auto
    specs = []
    for p in args.preset:
        specs += preset(p)
    specs += args.config
    configs, seen = [], set()
    for s in specs:
        c = Config(s)
        if c.label not in seen:
            seen.add(c.label)
            configs.append(c)
    return args, configs


def main(argv):
    args, configs = parse(argv)
    if args.summarize:
        runs = read_runs(args.summarize)
        rows = summarize(runs)
        print(write_summary(args.out, rows))
        return 0
    if args.list:
        for c in configs:
            print("%-32s %s" % (c.label, " ".join("%s=%s" % kv for kv in c.info_items(args.force_compress, args.set))))
        return 0
    if args.record:
        return record(args)
    if not configs:
        print("convergence.py: no configuration (--config or --preset)", file=sys.stderr)
        return 2
    return main_mpi(args, configs)


RECORD_MAGIC = b"HPGRAD1\0"


def record(args):
    """Plain training; every step's gradient of every rank (before the
    allreduce) into one file for hipress-bench --quality:
        8 bytes "HPGRAD1\0", uint32 ranks, uint32 steps, uint64 n
        (little-endian), then float32 [steps][ranks][n]."""
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    rank, N = world.Get_rank(), world.Get_size()
    data = Data(args.split_seed, args.test_size, args.task, world)
    seed = args.first_seed
    model = MLP([data.xtr.shape[1]] + [hidden_of(args)] * args.layers + [10], seed)
    vel = np.zeros(model.n, np.float32)
    ntr = len(data.ytr)
    G = global_batch(args, N)
    spe = (ntr + G - 1) // G
    steps = args.record_steps
    f = None
    allg = np.zeros((N, model.n), np.float32) if rank == 0 else None
    if rank == 0:
        f = open(args.record, "wb")
        f.write(RECORD_MAGIC + struct.pack("<IIQ", N, steps, model.n))
    step = 0
    while step < steps:
        epoch = step // spe + 1
        perm = np.random.default_rng([seed, 2, epoch]).permutation(ntr)
        s = step % spe
        mine = np.array_split(perm[s * G:(s + 1) * G], N)[rank]
        model.gradient(data.xtr[mine], data.ytr[mine])
        world.Gather(model.g, allg, root=0)
        if rank == 0:
            f.write(allg.tobytes())
        # plain float64 sum: the recorded run is uncompressed, whatever is preloaded
        g64 = model.g.astype(np.float64)
        world.Allreduce(MPI.IN_PLACE, g64, op=MPI.SUM)
        model.g[:] = (g64 / N).astype(np.float32)
        vel *= np.float32(args.momentum)
        vel += model.g
        model.w -= np.float32(args.lr) * vel
        step += 1
    if rank == 0:
        f.close()
        print("# recorded %d steps x %d ranks x %d floats into %s" % (steps, N, model.n, args.record),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
