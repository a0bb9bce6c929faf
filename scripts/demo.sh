#!/bin/bash
# The hipress demo: a 16-64 MiB float32 MPI_Allreduce on 4 emulated hosts,
# each with its own 1 Gbit/s link (scripts/cluster.sh), one rank per host,
# plain MPI against hipress, from the build tree.
#
#   scripts/demo.sh [COMPRESSOR]
#
# COMPRESSOR defaults to onebit when this build has it, else fp16
# (`hipress_info --compressors` lists them).  Takes one to two minutes; needs
# root (network namespaces).  Exits non-zero when the benchmark fails or a
# result differs between ranks.
#
# Environment:
#   HP_BUILDDIR          build directory (default: _build at the top of the tree)
#   HP_DEMO_COMPRESSOR   compressor, when no argument is given
#   HP_DEMO_ALGO         collective algorithm (default auto)
#   HP_DEMO_RATE         emulated rate per host link (default 1gbit; "off" for none)
#   HP_DEMO_NP           hosts, one rank each (default 4)
#   HP_DEMO_NET          cluster (default: a link per host) or shared (one
#                        rate-limited loopback shared by all ranks, scripts/netem.sh)
#   HP_DEMO_ITERS        timed iterations per size (default 5; the median is shown)
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=${HP_BUILDDIR:-$top/_build}
algo=${HP_DEMO_ALGO:-auto}
rate=${HP_DEMO_RATE:-1gbit}
np=${HP_DEMO_NP:-4}
iters=${HP_DEMO_ITERS:-5}
net=${HP_DEMO_NET:-cluster}
case $net in cluster | shared) ;; *) echo "demo: error: HP_DEMO_NET=$net: cluster or shared" >&2; exit 1 ;; esac

die() {
    echo "demo: error: $*" >&2
    exit 1
}

[ $# -le 1 ] || die "usage: $0 [COMPRESSOR]"
[ -x "$build/hipress-bench" ] && [ -x "$build/hipress_info" ] ||
    die "no hipress build in $build: build first (see README.md) or set HP_BUILDDIR"

compressors=$("$build/hipress_info" --compressors) || die "$build/hipress_info --compressors failed"
has() { printf '%s\n' "$compressors" | grep -qx "$1"; }
comp=${1:-${HP_DEMO_COMPRESSOR:-}}
if [ -z "$comp" ]; then
    if has onebit; then comp=onebit; else comp=fp16; fi
fi
has "$comp" || die "compressor '$comp' is not in this build; choose one of: $(echo $compressors)"

# Biased compressors ("(ef)" in hipress_info) carry what a call drops into
# the next call: one call's error is large by design, so say so.
ef=0
case " $("$build/hipress_info" 2>/dev/null | grep '^compressors:' || true) " in
*" $comp(ef) "*) ef=1 ;;
esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ "$net" = cluster ]; then
    if [ "$rate" = off ]; then where="$np emulated hosts with unlimited links"
    else where="$np emulated hosts, each with its own $rate link"; fi
else
    if [ "$rate" = off ]; then where="unlimited loopback"; else where="a $rate network (emulated, shared by all ranks)"; fi
fi
echo "hipress demo: float32 MPI_Allreduce, $np ranks, over $where"
echo "plain MPI (PMPI_Allreduce) against hipress with compressor $comp, algorithm $algo;"
echo "median of $iters timed calls per size; this takes a minute or two."
echo

# One CSV row per size on stdout, as it is measured; rows are also printed
# as they arrive so the wait is visible.
start=$(date +%s)
bench="$build/hipress-bench -b 16M -e 64M -f 2 -n $iters -w 1 -c $comp -a $algo --csv"
if [ "$net" = cluster ]; then
    # the cluster checks its links first (90% of the rate, all at once)
    "$top/scripts/cluster.sh" --hosts "$np" --rate "$rate" -q -- sh -c "cluster-mpirun $bench"
else
    "$top/scripts/netem.sh" "$rate" -- mpirun --oversubscribe -np "$np" $bench
fi 2>"$tmp/stderr" | tee "$tmp/bench.csv" | awk -F, '
        NR == 1 { printf "  %9s  %12s  %12s  %8s  %10s  %10s  %s\n", "size", "plain (ms)", "hipress (ms)", "speedup", "wire ratio", "rel. error", "identical on all ranks"; next }
        { printf "  %5d MiB  %12.1f  %12.1f  %7.2fx  %10.2f  %10.1e  %s\n", $1 / 1048576, $8 / 1000, $7 / 1000, $9, $12, $13, $14; fflush() }
    ' || {
    cat "$tmp/stderr" >&2
    die "the benchmark failed (its messages are above)"
}
elapsed=$(( $(date +%s) - start ))

rows=$(awk -F, 'NR > 1' "$tmp/bench.csv" | wc -l)
[ "$rows" -ge 1 ] || { cat "$tmp/stderr" >&2; die "the benchmark printed no result"; }

echo
awk -F, -v np="$np" -v comp="$comp" -v secs="$elapsed" -v ef="$ef" '
    NR > 1 { last = $0; if ($14 != "yes") bad++ }
    END {
        split(last, f, ",")
        printf "%d MiB float32 allreduce, %d ranks: %.2f s with plain MPI, %.2f s with hipress (%s): %.2fx %s.\n",
               f[1] / 1048576, np, f[8] / 1e6, f[7] / 1e6, comp, f[9], (f[9] >= 1 ? "faster" : "(slower)")
        printf "Relative error against the exact sum: %.1e; bytes on the wire: %.1fx fewer than a plain ring.\n", f[13], f[12]
        if (ef) printf "(%s uses error feedback: what one call drops is added to the next call, so a single\n call is far off by design while the error of the sum over many calls shrinks; see doc/compressors.md.)\n", comp
        if (bad) printf "RESULTS DIFFER BETWEEN RANKS for %d size(s).\n", bad
        else printf "Every rank ended with bit-identical results at every size.\n"
        printf "(demo ran in %d s)\n", secs
    }' "$tmp/bench.csv"

! awk -F, 'NR > 1 && $14 != "yes" { found = 1 } END { exit !found }' "$tmp/bench.csv" ||
    die "results differ between ranks"
