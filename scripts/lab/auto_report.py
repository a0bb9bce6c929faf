#!/usr/bin/python3
"""Compare HIPRESS_ALGO=auto with the better of plain and the best fixed
algorithm, per size, from hipress-bench CSV files of one compressor.

Target: auto is at most 1.25x slower below 1 MiB, 1.1x from 1 MiB up.
Each run reports medians over its iterations; where several runs cover one
(algorithm, size), the median over the runs is used.  Plain time per size =
median of the base_time_us of all runs at that size."""
import csv
import statistics
import sys


def main(paths):
    rows = []
    for p in paths:
        with open(p) as f:
            rows += list(csv.DictReader(f))
    sizes = sorted({int(r["bytes"]) for r in rows})
    worst = 0.0
    ok = True
    print(f"{'bytes':>10} {'plain_us':>10} {'best_fixed':>18} {'auto_us':>10} {'ratio':>6} {'limit':>5}")
    for s in sizes:
        at = [r for r in rows if int(r["bytes"]) == s]
        plain = statistics.median(float(r["base_time_us"]) for r in at)
        # several runs of one (algorithm, size): the median of their medians
        algos = sorted({r["algo"] for r in at})
        times = {a: statistics.median(float(r["time_us"]) for r in at if r["algo"] == a) for a in algos}
        fixed = {a: t for a, t in times.items() if a != "auto"}
        autos = [times["auto"]] if "auto" in times else []
        if not autos or not fixed:
            continue
        best_name, best = min(fixed.items(), key=lambda kv: kv[1])
        ref_name, ref = ("plain", plain) if plain < best else (best_name, best)
        ratio = autos[0] / ref
        limit = 1.25 if s < (1 << 20) else 1.10
        worst = max(worst, ratio / limit)
        flag = "" if ratio <= limit else "  <-- over"
        ok &= ratio <= limit
        print(f"{s:>10} {plain:>10.1f} {best_name + ' ' + format(best, '.1f'):>18} {autos[0]:>10.1f} {ratio:>6.2f} {limit:>5.2f}{flag}  (vs {ref_name})")
    print("auto within target at every size" if ok else "auto OVER target at some size")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
