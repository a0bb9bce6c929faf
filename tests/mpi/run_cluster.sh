#!/bin/sh
# The emulated cluster (scripts/cluster.sh): 2 hosts x 2 ranks, links at
# 500 Mbit/s that must prove their rate, one compressed allreduce.  Checks:
#   * the cluster starts (skip, exit 77, only where this machine cannot run it:
#     not root, namespaces, veth, bridges or tbf forbidden; a missing tool of
#     scripts/install_deps.sh is a failure);
#   * the ranks ran on two distinct emulated hosts (h1, h2), two on each, as
#     seen by the ranks themselves and by hipress' own log prefix;
#   * a compressed allreduce (onebit, ring) ends bit-identical on all ranks;
#   * hipress finds the two nodes from the ranks' hosts (its hierarchy);
#   * nothing is left behind: no process of the cluster's PID namespace, no
#     process holding one of its hosts' network namespaces, `ip netns list`
#     and this machine's interfaces as they were before.
set -u
HP_MPI_TIMEOUT=${HP_MPI_TIMEOUT:-120}
. "${HP_SRCDIR:-$(dirname "$0")/../..}/tests/hp_test_lib.sh"
. "$HP_SRCDIR/tests/mpi/hp_cluster_lib.sh"

cluster="$HP_SRCDIR/scripts/cluster.sh"
bench="$HP_BUILDDIR/hipress-bench"
[ -x "$bench" ] || { echo "FAIL: $bench is missing"; exit 1; }
hp_cluster_prereqs
comp=onebit
"$HP_BUILDDIR/hipress_info" --compressors 2>/dev/null | grep -qx onebit || comp=fp16

out=$(mktemp -d "${TMPDIR:-/tmp}/hp-run-cluster.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT

# what runs on the head: record the namespaces, where ranks land, one bench
cat >"$out/cmd.sh" <<'EOF'
set -u
readlink /proc/self/ns/pid >"$OUT/pidns"
for h in $HP_CLUSTER_HOSTNAMES; do "$HP_CLUSTER_RSH" "$h" readlink /proc/self/ns/net; done >"$OUT/netns"
$MPIEXEC $HP_CLUSTER_MPIRUN_ARGS sh -c 'echo "$OMPI_COMM_WORLD_RANK $(hostname)"' >"$OUT/where" || exit 10
asan=
[ -n "${ASAN_OPTIONS:-}" ] && asan="-x ASAN_OPTIONS"
$MPIEXEC $HP_CLUSTER_MPIRUN_ARGS -x LD_PRELOAD="$HP_PRELOAD" -x HIPRESS_DEBUG=INFO $asan \
    "$BENCH" -b 4M -e 4M -n 3 -w 1 -c "$COMP" -a ring >"$OUT/bench" 2>&1 || exit 11
EOF
t0=$(date +%s)
OUT=$out BENCH=$bench COMP=$comp HP_PRELOAD=$HP_PRELOAD MPIEXEC=$MPIEXEC \
    timeout "$HP_MPI_TIMEOUT" "$cluster" --hosts 2 --ranks-per-host 2 --rate 500mbit -- \
    sh "$out/cmd.sh" 2>"$out/cluster.err"
rc=$?
t1=$(date +%s)
cat "$out/cluster.err"
echo "# cluster.sh: exit $rc after $((t1 - t0)) s"
if [ $rc -eq 77 ]; then
    echo "SKIP: this machine cannot run the emulated cluster (see the message above)"
    exit 77
fi
case $rc in
0) ;;
124) hp_fail "no result within ${HP_MPI_TIMEOUT} s (a hang)" ;;
3) hp_fail "the links did not prove their rate (the link check above)" ;;
10) hp_fail "mpirun of hostname across the cluster failed" ;;
11) hp_fail "hipress-bench across the cluster failed"; cat "$out/bench" ;;
*) hp_fail "cluster.sh exit status $rc" ;;
esac

# where the ranks ran
if [ -s "$out/where" ]; then
    sort -n "$out/where" | sed 's/^/# rank /'
    w=$(sort -n "$out/where" | awk '{ printf "%s ", $2 }')
    [ "$w" = "h1 h1 h2 h2 " ] || hp_fail "ranks 0..3 ran on '$w', expected 'h1 h1 h2 h2'"
elif [ $rc -eq 0 ]; then
    hp_fail "no rank reported its host"
fi

# the bench: one line for 4 MiB, identical on all ranks; hipress' log
# prefix (hipress HOST:PID:RANK) names the hosts
if [ -s "$out/bench" ]; then
    grep -v '^hipress ' "$out/bench"
    line=$(awk '$1 == 4194304' "$out/bench")
    [ -n "$line" ] || hp_fail "no 4 MiB result in the bench output"
    [ -n "$line" ] && [ "$(echo "$line" | awk '{ print $NF }')" != yes ] &&
        hp_fail "the $comp allreduce was not bit-identical on all ranks: $line"
    hosts=$(sed -n 's/^hipress \([^:]*\):[0-9]*:[0-9]* .*/\1/p' "$out/bench" | sort -u | tr '\n' ' ')
    echo "# hosts in hipress' log: $hosts"
    [ "$hosts" = "h1 h2 " ] || hp_fail "hipress logged from hosts '$hosts', expected 'h1 h2'"
    # the hierarchy from the ranks' hosts (no HIPRESS_NODE_SIZE): two nodes
    # of two ranks, every rank compressing its shard across the nodes
    grep -q '^hipress h1:[0-9]*:0 info hierarchy: 2 nodes of 2 to 2 ranks: node reduce-scatter' "$out/bench" ||
        hp_fail "hipress did not find 2 nodes of 2 ranks from the hosts (its hierarchy log line)"
elif [ $rc -eq 0 ]; then
    hp_fail "no bench output"
fi

# nothing left behind
[ -s "$out/pidns" ] || [ $rc -ne 0 ] || hp_fail "the cluster did not report its PID namespace"
hp_cluster_left "$out"
[ $((t1 - t0)) -le 60 ] || echo "# note: took $((t1 - t0)) s (budget 60 s)"
[ $status -eq 0 ] && echo "# PASS: cluster started, ran on h1 and h2, identical results, nothing left behind"
exit $status
