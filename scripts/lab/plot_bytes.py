#!/usr/bin/python3
"""Plot scripts/lab/bytes_scale.sh's CSV: the wire ratio against a plain ring
(higher is fewer bytes) against the number of ranks, one panel per
compressor, one line per algorithm, with the formulas' lines for ps with
its sum codec and for allgather.

    /usr/bin/python3 scripts/lab/plot_bytes.py -o bytes.png bytes.csv
"""
import argparse
import csv
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    rows = list(csv.DictReader(open(a.csv)))
    if not rows:
        sys.exit("plot_bytes: no rows in %s" % a.csv)
    comps = []
    for r in rows:
        if r["compressor"] not in comps:
            comps.append(r["compressor"])
    fig, axes = plt.subplots(1, len(comps), figsize=(5 * len(comps), 4.2), squeeze=False)
    styles = {"auto": ("k", "o", "-"), "ps": ("tab:blue", "s", "-"), "allgather": ("tab:orange", "^", "-"),
              "ring": ("tab:green", "v", "--"), "tree": ("tab:red", "d", "--")}
    for ax, comp in zip(axes[0], comps):
        for algo, (col, mk, ls) in styles.items():
            pts = sorted((int(r["np"]), float(r["wire_ratio"]), r["plan"]) for r in rows
                         if r["compressor"] == comp and r["algo"] == algo and r["wire_ratio"])
            if not pts:
                continue
            label = algo
            if algo == "auto":
                label = "auto (%s)" % ", ".join("%d: %s" % (n, p.split(" ")[0]) for n, _, p in pts)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color=col, marker=mk, ls=ls, label=label)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(sorted({int(r["np"]) for r in rows}))
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.set_xlabel("ranks")
        ax.set_ylabel("plain ring bytes / hipress bytes (busiest rank)")
        ax.set_title(comp)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Bytes per rank from the statistics (HIPRESS_ALLOW_PLAIN=0; ps with its sum codec)")
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)


if __name__ == "__main__":
    main()
