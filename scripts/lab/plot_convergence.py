#!/usr/bin/python3
"""Plot loss curves of a convergence study (scripts/lab/convergence.py).

    scripts/lab/plot_convergence.py -o loss_np4.png study/np4.csv [more.csv ...]
    scripts/lab/plot_convergence.py --metric test_acc -o acc_np4.png study/np4.csv

One panel per compressor.  Each panel draws, averaged over the seeds of the
runs found: plain MPI (grey, dashed; the same curve in every panel), the
compressor's textbook reference (black), and the compressor under each
collective algorithm (auto, ring, tree, ps, allgather; a fixed colour per
algorithm).  --metric train_loss (default) uses the per-step rows, smoothed by
a centred moving average of --smooth steps; test_loss and test_acc use the
per-epoch rows.  The loss axis is logarithmic.  Configurations with extra keys
(labels with '+') are drawn dotted in the colour of their algorithm.  With
runs at several numbers of ranks, --np picks one (default: the smallest).

Needs matplotlib (python3-matplotlib); run it with /usr/bin/python3.
"""
import argparse
import csv
import math
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ALGO_COLOURS = {"auto": "tab:red", "ring": "tab:blue", "tree": "tab:green",
                "ps": "tab:purple", "allgather": "tab:orange"}
ORDER = ("fp16", "bf16", "onebit", "tbq", "terngrad", "graddrop", "dgc", "powersgd")


def load(paths, metric):
    """{(np, config): {seed: {x: value}}} and config -> (compressor, algo)."""
    kind = "step" if metric == "train_loss" else "epoch"
    xcol = "step" if kind == "step" else "epoch"
    data = defaultdict(lambda: defaultdict(dict))
    meta = {}
    for p in paths:
        with open(p, newline="") as f:
            for r in csv.DictReader(f):
                if r["record"] != kind:
                    continue
                try:
                    v = float(r[metric])
                except ValueError:
                    v = float("nan")
                key = (int(r["np"]), r["config"])
                data[key][int(r["seed"])][int(r[xcol])] = v
                meta[r["config"]] = (r["compressor"], r["algo"])
    return data, meta


def mean_curve(seeds, smooth):
    xs = sorted(set().union(*[set(s) for s in seeds.values()]))
    ys = []
    for x in xs:
        vals = [s[x] for s in seeds.values() if x in s]
        ys.append(sum(vals) / len(vals) if vals else float("nan"))
    if smooth > 1:
        h = smooth // 2
        sm = []
        for i in range(len(ys)):
            w = [y for y in ys[max(0, i - h):i + h + 1] if math.isfinite(y)]
            sm.append(sum(w) / len(w) if w else float("nan"))
        ys = sm
    return xs, ys


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", nargs="+", help="PREFIX.csv files written by convergence.py")
    ap.add_argument("-o", "--output", default="convergence.png")
    ap.add_argument("--metric", default="train_loss", choices=("train_loss", "test_loss", "test_acc"))
    ap.add_argument("--np", type=int, help="number of ranks to plot (default: the smallest found)")
    ap.add_argument("--smooth", type=int, default=5, help="moving average over steps (train_loss)")
    ap.add_argument("--title", default="")
    args = ap.parse_args(argv)

    data, meta = load(args.csv, args.metric)
    if not data:
        print("plot_convergence: no %s rows in %s" % (args.metric, " ".join(args.csv)), file=sys.stderr)
        return 1
    nps = sorted(set(n for n, _ in data))
    npr = args.np if args.np is not None else nps[0]
    if npr not in nps:
        print("plot_convergence: no runs at np %d (found %s)" % (npr, nps), file=sys.stderr)
        return 1
    configs = [c for n, c in data if n == npr]
    comps = sorted(set(meta[c][0] for c in configs if meta[c][1] != "plain"),
                   key=lambda c: (ORDER.index(c) if c in ORDER else len(ORDER), c))
    if not comps:
        comps = ["plain"]
    ncols = min(4, len(comps))
    nrows = (len(comps) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.4 * nrows), squeeze=False,
                             sharex=True, sharey=True)
    smooth = args.smooth if args.metric == "train_loss" else 1
    plain = [c for c in configs if meta[c][1] == "plain"]
    for i, comp in enumerate(comps):
        ax = axes[i // ncols][i % ncols]
        for c in plain:
            xs, ys = mean_curve(data[(npr, c)], smooth)
            ax.plot(xs, ys, color="0.5", ls="--", lw=1.2, label="plain (%d)" % len(data[(npr, c)]))
        mine = [c for c in configs if meta[c][0] == comp and meta[c][1] != "plain"]
        mine.sort(key=lambda c: (meta[c][1] != "ref", list(ALGO_COLOURS).index(meta[c][1])
                                 if meta[c][1] in ALGO_COLOURS else 9, c))
        for c in mine:
            algo = meta[c][1]
            xs, ys = mean_curve(data[(npr, c)], smooth)
            colour = "black" if algo == "ref" else ALGO_COLOURS.get(algo, "tab:brown")
            style = ":" if "+" in c else "-"
            name = c.split("/", 1)[1]
            if algo == "ref":   # "ref+layerwise=1" -> "reference, layerwise=1"
                name = "reference" + (", " + c.split("+", 1)[1] if "+" in c else "")
            ax.plot(xs, ys, color=colour, ls=style, lw=1.6 if algo == "ref" else 1.1,
                    label="%s (%d)" % (name, len(data[(npr, c)])))
        ax.set_title(comp)
        if args.metric != "test_acc":
            ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper right" if args.metric != "test_acc" else "lower right")
        if i // ncols == nrows - 1:
            ax.set_xlabel("step" if args.metric == "train_loss" else "epoch")
        if i % ncols == 0:
            ax.set_ylabel({"train_loss": "training loss", "test_loss": "test loss",
                           "test_acc": "test accuracy"}[args.metric])
    for j in range(len(comps), nrows * ncols):
        axes[j // ncols][j % ncols].axis("off")
    what = {"train_loss": "training loss (moving average of %d steps)" % smooth,
            "test_loss": "test loss per epoch", "test_acc": "test accuracy per epoch"}[args.metric]
    fig.suptitle(args.title or "%s, %d ranks, mean over seeds (count in legend)" % (what, npr))
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print("plot_convergence: wrote %s" % args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
