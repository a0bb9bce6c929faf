#!/bin/sh
# End-to-end training step time under hipress, against the compute floor,
# measured in one run.
#
#   scripts/lab/step_time.sh [BUILDDIR] [SEEDS]        (as root; BUILDDIR default _build)
#
# The training of scripts/lab/convergence.py (digits MLP, 1.13M float32
# parameters, one flat MPI_Allreduce per step, 110 steps, 4 ranks) runs on
# scripts/netem.sh's emulated network (MPI over TCP on a private loopback):
#   floor       plain MPI, the loopback not limited;
#   1 Gbit/s    the loopback limited to 1 Gbit/s (one token bucket shared by
#               all ranks, as scripts/netem.sh does): plain MPI, and hipress
#               with fp16 and with onebit under the default plan (auto).
# Every configuration runs SEEDS times (default 3) inside one mpirun per
# network, alternating configurations seed by seed; the table gives the
# median milliseconds per step (the run's wall time over its steps,
# evaluation included) and the ratio to the floor.  Run it on a quiet
# machine: the floor is compute, and other jobs move it.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top/_build}
seeds=${2:-3}
lib=$build/.libs/libhipress.so
[ -f "$lib" ] || { echo "step_time: $lib not found (build first)" >&2; exit 2; }
out=$(mktemp -d "${TMPDIR:-/tmp}/hp-step-time.XXXXXX")
trap 'rm -rf "$out"' EXIT
py=/usr/bin/python3
train="$py $top/scripts/lab/convergence.py --seeds $seeds --no-force-compress"

# plain MPI without a limit: the compute floor
"$top/scripts/netem.sh" off -- mpirun --oversubscribe -np 4 -x LD_PRELOAD="$lib" \
    $train --config plain --out "$out/off" >"$out/off.log" 2>&1 ||
    { cat "$out/off.log"; exit 1; }
# the same training at 1 Gbit/s: plain, fp16, onebit
"$top/scripts/netem.sh" 1gbit -- mpirun --oversubscribe -np 4 -x LD_PRELOAD="$lib" \
    $train --config plain --config fp16:algo=auto --config onebit:algo=auto --out "$out/1g" \
    >"$out/1g.log" 2>&1 || { cat "$out/1g.log"; exit 1; }

"$py" - "$out/off.csv" "$out/1g.csv" <<'EOF'
import csv, statistics, sys
def runs(path):
    out = {}
    for r in csv.DictReader(open(path)):
        if r["record"] == "run":
            out.setdefault(r["config"], []).append((1e3 * float(r["wall_s"]) / int(r["step"]), r["plan"]))
    return out
off, g1 = runs(sys.argv[1]), runs(sys.argv[2])
floor = statistics.median(t for t, _ in off["plain"])
print("%-24s %10s %9s  %s" % ("configuration", "ms/step", "x floor", "runs (ms/step), plan"))
print("%-24s %10.1f %9.2f  %s" % ("floor: plain, no limit", floor, 1.0,
                                    " ".join("%.1f" % t for t, _ in off["plain"])))
for c in ("plain", "fp16/auto", "onebit/auto"):
    ts = g1.get(c, [])
    if not ts:
        continue
    m = statistics.median(t for t, _ in ts)
    print("%-24s %10.1f %9.2f  %s  %s" % ("1 Gbit/s: " + c, m, m / floor,
                                         " ".join("%.1f" % t for t, _ in ts),
                                         sorted(set(p for _, p in ts if p))))
EOF
