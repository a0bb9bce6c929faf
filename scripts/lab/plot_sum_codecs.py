#!/usr/bin/python3
"""Plot the sum-codec study: accuracy against the textbook
reference, per number of ranks.

    scripts/lab/plot_sum_codecs.py -o sum-codecs.png np4_summary.csv np8_summary.csv np16_summary.csv

Reads the *_summary.csv files scripts/lab/convergence.py writes (any number of
them, any np).  One panel per compressor (onebit, tbq, terngrad): for each of
its configurations other than the reference, the paired difference of final
test accuracy against the reference (points, mean over seeds) with its 95%
interval as an error bar, at each np; a dashed line at -1 point (the target)
and a solid one at 0 (--ylim LOW,HIGH clips the axis).  Points of one configuration are joined and slightly
offset sideways so that the bars do not hide each other.  onebit's and
tbq's sum codec auto is q4, so an explicit q4 of theirs is not drawn again.  --metric
test_loss plots the paired difference of final test loss instead.

Needs matplotlib; run it with /usr/bin/python3.
"""
import argparse
import csv
import math
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COMPRESSORS = ("onebit", "tbq", "terngrad")
STYLE = {  # config suffix -> (label, colour, marker)
    "ps+sum_codec=auto": ("ps, sum codec auto", "tab:purple", "o"),
    "ps+sum_codec=same": ("ps, sum codec same (old)", "tab:grey", "x"),
    "ps+sum_codec=q2": ("ps, sum codec q2", "tab:blue", "s"),
    "ps+sum_codec=q4": ("ps, sum codec q4", "tab:green", "s"),
    "auto": ("auto", "tab:red", "^"),
}


def fnum(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return float("nan")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--metric", choices=("test_acc", "test_loss"), default="test_acc")
    ap.add_argument("--title", default="")
    ap.add_argument("--ylim", type=lambda v: tuple(float(x) for x in v.split(",")),
                    help="LOW,HIGH of the y axis (bars beyond it are clipped)")
    ap.add_argument("summaries", nargs="+")
    args = ap.parse_args(argv)
    col = "vs_ref" if args.metric == "test_acc" else "vs_ref_test_loss"
    scale = 100.0 if args.metric == "test_acc" else 1.0
    pts = defaultdict(list)     # (compressor, suffix) -> [(np, m, h, seeds)]
    for p in args.summaries:
        with open(p, newline="") as f:
            for r in csv.DictReader(f):
                comp, _, suffix = r["config"].partition("/")
                if comp not in COMPRESSORS or suffix not in STYLE:
                    continue
                if suffix == "ps+sum_codec=q4" and comp != "terngrad":
                    continue        # their auto is q4: the same runs, bit for bit
                m, h = fnum(r.get(col)), fnum(r.get(col + "_ci"))
                if math.isfinite(m):
                    pts[(comp, suffix)].append((int(r["np"]), scale * m, scale * h, int(r["seeds"])))
    nps = sorted({n for v in pts.values() for n, *_ in v})
    if not nps:
        print("plot_sum_codecs: nothing to plot", file=sys.stderr)
        return 1
    fig, axes = plt.subplots(1, len(COMPRESSORS), figsize=(5 * len(COMPRESSORS), 4.2), sharey=True)
    suffixes = list(STYLE)
    for ax, comp in zip(axes, COMPRESSORS):
        for i, suffix in enumerate(suffixes):
            v = sorted(pts.get((comp, suffix), []))
            if not v:
                continue
            label, colour, marker = STYLE[suffix]
            off = (i - (len(suffixes) - 1) / 2) * 0.09
            xs = [math.log2(n) + off for n, *_ in v]
            ax.errorbar(xs, [m for _, m, _, _ in v],
                        yerr=[h if math.isfinite(h) else 0 for _, _, h, _ in v],
                        color=colour, marker=marker, capsize=3, lw=1.2, label=label)
        ax.axhline(0, color="black", lw=0.8)
        if args.metric == "test_acc":
            ax.axhline(-1, color="black", lw=0.8, ls="--")
        ax.set_xticks([math.log2(n) for n in nps])
        ax.set_xticklabels([str(n) for n in nps])
        ax.set_xlabel("ranks (global batch and steps fixed)")
        ax.set_title(comp)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("test accuracy - textbook reference (points)" if args.metric == "test_acc"
                       else "test loss - textbook reference")
    handles, labels = {}, []
    for ax in axes:
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in handles:
                handles[l] = h
                labels.append(l)
    fig.legend([handles[l] for l in labels], labels, fontsize=8, loc="lower center",
               ncol=len(labels), frameon=False)
    if args.ylim:
        for ax in axes:
            ax.set_ylim(*args.ylim)
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(args.output, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
