#!/usr/bin/python3
"""Plot hipress-bench CSV results.

    scripts/lab/plot_bench.py -o bench.png -t "4 ranks, 1 Gbit/s" run1.csv [run2.csv ...]

Reads one or more files written by `hipress-bench --csv` and draws two panels
against the buffer size: the speedup over plain MPI_Allreduce, and the bus
bandwidth (nccl-tests' busbw: algbw * 2(N-1)/N), one line per
(compressor, algorithm, ranks).  The bus bandwidth of plain MPI measured in
the same runs is drawn dashed.  When a (compressor, algorithm, ranks, size)
appears more than once the median is drawn.  Points whose result differed
between ranks are marked with a red cross.

Needs matplotlib (apt-get install python3-matplotlib); run it with
/usr/bin/python3.
"""
import argparse
import csv
import math
import statistics
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator  # noqa: E402

COLUMNS = ("bytes", "compressor", "algo", "ranks", "time_us", "base_time_us",
           "speedup", "busbw_gbps", "identical")


def human_size(nbytes):
    """8192 -> '8K', 67108864 -> '64M'; binary units, as hipress-bench's -b/-e take them."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= scale:
            v = nbytes / scale
            return ("%d%s" if v == int(v) else "%.3g%s") % (v, unit)
    return "%dB" % nbytes


def read_rows(paths):
    rows = []
    for path in paths:
        with open(path, newline="") as f:
            lines = [ln for ln in f if ln.strip() and not ln.startswith("#")]
        reader = csv.DictReader(lines)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            sys.exit("plot_bench: %s is not hipress-bench --csv output (missing columns: %s)"
                     % (path, ", ".join(missing)))
        for r in reader:
            if r["bytes"] == "bytes":   # header repeated by concatenated files
                continue
            try:
                rows.append({
                    "bytes": int(r["bytes"]),
                    "key": (r["compressor"], r["algo"], int(r["ranks"])),
                    "speedup": float(r["speedup"]),
                    "busbw": float(r["busbw_gbps"]),
                    "ranks": int(r["ranks"]),
                    # plain MPI's bus bandwidth from its time in the same run
                    "base_busbw": (int(r["bytes"]) / (float(r["base_time_us"]) * 1e-6) / 1e9
                                   * 2.0 * (int(r["ranks"]) - 1) / int(r["ranks"])),
                    "identical": r["identical"].strip() == "yes",
                })
            except (ValueError, ZeroDivisionError) as e:
                sys.exit("plot_bench: %s: bad row %r (%s)" % (path, r, e))
    if not rows:
        sys.exit("plot_bench: no data rows in %s" % ", ".join(paths))
    return rows


def series(rows):
    """{key: [(bytes, speedup, busbw, all_identical)]} with medians of repeats,
    and {ranks: [(bytes, plain busbw)]}."""
    groups = defaultdict(lambda: defaultdict(list))
    plain = defaultdict(lambda: defaultdict(list))
    for r in rows:
        groups[r["key"]][r["bytes"]].append(r)
        plain[r["ranks"]][r["bytes"]].append(r["base_busbw"])
    out = {}
    for key, by_size in groups.items():
        out[key] = [(b,
                     statistics.median(x["speedup"] for x in rs),
                     statistics.median(x["busbw"] for x in rs),
                     all(x["identical"] for x in rs))
                    for b, rs in sorted(by_size.items())]
    base = {n: [(b, statistics.median(v)) for b, v in sorted(by_size.items())]
            for n, by_size in plain.items()}
    return out, base


def size_axis(ax, sizes):
    ax.set_xscale("log", base=2)
    ticks = sorted(sizes)
    # at most about 10 labels: keep every k-th power of two
    exps = sorted({int(round(math.log2(s))) for s in ticks})
    step = max(1, math.ceil(len(exps) / 10))
    ax.xaxis.set_major_locator(FixedLocator([2.0 ** e for e in exps[::step]]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: human_size(int(round(v)))))
    ax.set_xlabel("allreduce size (float32)")
    ax.grid(True, which="major", alpha=0.3)


def value_axis(ax, values, fmt):
    """Linear from 0, or log with 1-2-5 ticks when the values span more than 20x."""
    values = [v for v in values if v > 0]
    if values and max(values) / min(values) > 20:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_minor_locator(NullLocator())
    else:
        ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt % v))


def main():
    p = argparse.ArgumentParser(description="Plot hipress-bench --csv results.")
    p.add_argument("csv", nargs="+", help="CSV files from hipress-bench --csv")
    p.add_argument("-o", "--output", default="bench.png", help="PNG to write (default bench.png)")
    p.add_argument("-t", "--title", default="hipress-bench", help="figure title")
    args = p.parse_args()

    data, base = series(read_rows(args.csv))
    fig, (ax_s, ax_b) = plt.subplots(1, 2, figsize=(13, 5.2))
    sizes = set()
    multi_ranks = len({k[2] for k in data}) > 1
    bad_shown = False
    markers = "osD^vP*Xh<>"
    for i, key in enumerate(sorted(data)):
        comp, algo, ranks = key
        pts = data[key]
        x = [b for b, _, _, _ in pts]
        sizes.update(x)
        label = "%s, %s, %d ranks" % (comp, algo, ranks)
        style = dict(marker=markers[i % len(markers)], markersize=5, linewidth=1.6, label=label)
        line, = ax_s.plot(x, [s for _, s, _, _ in pts], **style)
        ax_b.plot(x, [bw for _, _, bw, _ in pts], color=line.get_color(), **style)
        bad = [(b, s, bw) for b, s, bw, ok in pts if not ok]
        if bad:
            kw = dict(marker="x", color="red", s=90, zorder=5, linewidths=2)
            ax_s.scatter([b for b, _, _ in bad], [s for _, s, _ in bad],
                         label=None if bad_shown else "results differ between ranks", **kw)
            ax_b.scatter([b for b, _, _ in bad], [bw for _, _, bw in bad], **kw)
            bad_shown = True

    dashes = ["--", ":", "-.", (0, (5, 1, 1, 1, 1, 1))]
    for j, n in enumerate(sorted(base)):
        pts = base[n]
        ax_b.plot([b for b, _ in pts], [bw for _, bw in pts], linestyle=dashes[j % len(dashes)],
                  color="0.3", linewidth=1.3,
                  label="plain MPI" + (", %d ranks" % n if multi_ranks else ""))

    ax_s.axhline(1.0, color="0.35", linestyle="--", linewidth=1.2, label="plain MPI (1x)")
    value_axis(ax_s, [s for pts in data.values() for _, s, _, _ in pts] + [1.0], "%gx")
    value_axis(ax_b, [bw for pts in data.values() for _, _, bw, _ in pts]
               + [bw for pts in base.values() for _, bw in pts], "%g")
    ax_s.set_ylabel("speedup over plain MPI_Allreduce")
    ax_s.set_title("speedup (higher is better)")
    ax_b.set_ylabel("bus bandwidth (GB/s)")
    ax_b.set_title("busbw = size / time x 2(N-1)/N")
    for ax in (ax_s, ax_b):
        size_axis(ax, sizes)
    ax_s.legend(fontsize=8, loc="best")
    ax_b.legend(fontsize=8, loc="best")
    fig.suptitle(args.title, fontsize=13)
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print("plot_bench: wrote %s (%d series)" % (args.output, len(data)))


if __name__ == "__main__":
    main()
