#!/bin/bash
# hipress-bench on the emulated cluster (scripts/cluster.sh), repeated, with
# medians: the figures of doc/benchmarks.md (doc/measured/cluster-runs.md).
#
#   scripts/lab/bench_cluster.sh [options] -o OUTDIR
#
# Each repeat starts a fresh cluster (whose links must prove their rate) and
# runs, for every variant, compressor and algorithm:
#   mpirun --host h1:R,... -x LD_PRELOAD=libhipress.so -x HIPRESS_DEBUG=INFO [-x VAR=VAL...]
#          hipress-bench -b SIZE -e SIZE -n 5 -w 2 -c COMP -a ALGO --csv
# OUTDIR gets raw.csv (every run), plans.txt (the plan each run chose, from
# hipress' INFO log), checks.txt (the link checks) and summary.md (medians
# over the repeats: compressed time, plain MPI_Allreduce time, and speedup,
# the median of each run's speedup column).
#
# Options:
#   --hosts H (4)  --ranks-per-host R (1)  --rate RATE (1gbit)  --repeats N (3)
#   --size SIZE (64M)  --iters N (5)  --warmup N (2)
#   --comps "onebit tbq fp16"  --algos "auto ring"
#   --variant NAME[:VAR=VAL[,VAR=VAL...]]   (repeatable; default one variant
#                                            "default" with no extra setting)
# Needs a build in HP_BUILDDIR (default ./_build) and root.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
self=$(readlink -f "$0")

hosts=4 rph=1 rate=1gbit repeats=3 size=64M iters=5 warmup=2
comps="onebit tbq fp16" algos="auto ring"
variants=() out= in_cluster=0
while [ $# -gt 0 ]; do
    case "$1" in
    --hosts) hosts=$2; shift 2 ;;
    --ranks-per-host) rph=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --comps) comps=$2; shift 2 ;;
    --algos) algos=$2; shift 2 ;;
    --variant) variants+=("$2"); shift 2 ;;
    -o) out=$2; shift 2 ;;
    --in-cluster) in_cluster=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_cluster: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
[ -n "$out" ] || { echo "bench_cluster: -o OUTDIR is required" >&2; exit 2; }
[ ${#variants[@]} -gt 0 ] || variants=(default)
builddir=${HP_BUILDDIR:-$top/_build}
lib=$builddir/.libs/libhipress.so
bench=$builddir/hipress-bench

# ------------------------------------------------------------ on the head
if [ "$in_cluster" != 0 ]; then
    rep=$in_cluster
    for v in "${variants[@]}"; do
        name=${v%%:*}
        xs=()
        if [ "$v" != "$name" ]; then
            IFS=, read -r -a kv <<<"${v#*:}"
            for x in "${kv[@]}"; do xs+=(-x "$x"); done
        fi
        for c in $comps; do
            for a in $algos; do
                log=$(mktemp)
                mpirun $HP_CLUSTER_MPIRUN_ARGS -x LD_PRELOAD="$lib" -x HIPRESS_DEBUG=INFO "${xs[@]}" \
                    "$bench" -b "$size" -e "$size" -n "$iters" -w "$warmup" -c "$c" -a "$a" --csv >"$log" 2>&1
                rc=$?
                grep -E '^[0-9]+,' "$log" | sed "s/^/$rep,$name,/" >>"$out/raw.csv"
                grep -E '^hipress [^:]*:[0-9]+:0 info (plan|hierarchy)' "$log" |
                    sed "s/^/$rep $name $c $a: /" >>"$out/plans.txt"
                line=$(grep -E '^[0-9]+,' "$log" | tail -1)
                echo "bench_cluster: repeat $rep $name $c $a: ${line:-no result (exit $rc)}" >&2
                [ -n "$line" ] || sed 's/^/    /' "$log" | tail -20 >&2
                rm -f "$log"
            done
        done
    done
    exit 0
fi

# ------------------------------------------------------------ the driver
[ -x "$bench" ] && [ -f "$lib" ] || { echo "bench_cluster: build first ($bench, $lib)" >&2; exit 2; }
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
[ -f "$out/raw.csv" ] ||
    echo "repeat,variant,bytes,count,type,compressor,algo,ranks,time_us,base_time_us,speedup,algbw_gbps,busbw_gbps,wire_ratio,rel_err,identical" >"$out/raw.csv"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
vargs=()
for v in "${variants[@]}"; do vargs+=(--variant "$v"); done
for r in $(seq 1 "$repeats"); do
    # a link check that fails (the machine too busy just now) is tried again
    for try in 1 2 3 4 5; do
        "$top/scripts/cluster.sh" --hosts "$hosts" --ranks-per-host "$rph" --rate "$rate" -- \
            "$BASH" "$self" --size "$size" --iters "$iters" --warmup "$warmup" --comps "$comps" \
            --algos "$algos" "${vargs[@]}" -o "$out" --in-cluster "$r" 2> >(tee -a "$out/cluster.log" >&2)
        rc=$?
        [ $rc -eq 3 ] || break
        echo "bench_cluster: repeat $r: link check failed (try $try), again in 20 s" >&2
        sleep 20
    done
    [ $rc -eq 0 ] || { echo "bench_cluster: repeat $r: cluster.sh exit status $rc" >&2; exit 1; }
done
sleep 0.5
grep 'link check' "$out/cluster.log" >"$out/checks.txt"

# medians over the repeats
/usr/bin/python3 - "$out" "$hosts" "$rph" "$rate" "$size" <<'EOF'
import csv, statistics, sys
out, hosts, rph, rate, size = sys.argv[1:]
rows = list(csv.DictReader(open(f"{out}/raw.csv")))
groups = {}
for r in rows:
    groups.setdefault((r["variant"], r["compressor"], r["algo"]), []).append(r)
plans = {}
for line in open(f"{out}/plans.txt") if __import__("os").path.exists(f"{out}/plans.txt") else []:
    head, _, msg = line.partition(": ")
    rep, var, c, a = head.split()
    if " info plan for " in msg:
        plans.setdefault((var, c, a), []).append(msg.split(": ", 1)[1].split(" (")[0].strip())
    elif " info hierarchy: " in msg:
        plans.setdefault(("hier", var, c, a), []).append(msg.split("hierarchy: ", 1)[1].strip())
with open(f"{out}/summary.md", "w") as f:
    f.write(f"{hosts} hosts x {rph} ranks, {rate} per host link, {size}, "
            f"median of {max(len(g) for g in groups.values())} runs\n\n")
    f.write("| variant | compressor | algo | plan | hipress (ms) | plain (ms) | speedup | runs' speedups | wire | identical |\n")
    f.write("|---|---|---|---|---|---|---|---|---|---|\n")
    for (v, c, a), g in groups.items():
        t = statistics.median(float(x["time_us"]) for x in g) / 1e3
        b = statistics.median(float(x["base_time_us"]) for x in g) / 1e3
        s = statistics.median(float(x["speedup"]) for x in g)
        ss = " / ".join(f"{float(x['speedup']):.2f}" for x in g)
        w = statistics.median(float(x["wire_ratio"]) for x in g)
        ident = "yes" if all(x["identical"] == "yes" for x in g) else "NO"
        p = sorted(set(plans.get((v, c, a), [])))
        h = sorted(set(plans.get(("hier", v, c, a), [])))
        plan = ", ".join(p) + ("; " + ", ".join(h) if h else "")
        f.write(f"| {v} | {c} | {a} | {plan} | {t:.1f} | {b:.1f} | {s:.2f}x | {ss} | {w:.1f} | {ident} |\n")
print(open(f"{out}/summary.md").read())
EOF
