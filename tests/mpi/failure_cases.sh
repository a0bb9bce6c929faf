#!/bin/bash
# How plain Open MPI (no hipress) behaves on the emulated cluster when things
# go wrong: a probe, not a pass/fail test (not part of `make check`).
#
#   tests/mpi/failure_cases.sh [options] [CASE...]      (as root)
#
# Cases (all by default), each in a fresh cluster (scripts/cluster.sh), with
# tests/mpi/mpi_failure looping on a large MPI_Allreduce:
#   kill      SIGKILL one rank (the last, on the last host) while the others
#             are inside MPI_Allreduce
#   linkdown  `ip link set hpvH down` (the last host's link, from the head)
#             while the job runs; wait --wait seconds; if the job is still
#             there, bring the link up again and watch --recover seconds for
#             progress; then SIGTERM mpirun
#   linkcut   as linkdown, with net.ipv4.tcp_retries2=4 in every namespace of
#             the cluster (TCP gives up on a connection after about 6 s
#             instead of about 15 minutes), and no link up again: what
#             Open MPI does when its TCP connections fail
#   late      the last rank arrives 5 s late at one MPI_Allreduce
# For each: does mpirun exit, with which status and message, how long after
# the event, and which processes (orted, ranks) are left once it has.
#
# Options: --hosts H (2), --ranks-per-host R (2), --rate RATE (1gbit),
#          --mib N (16: MiB per allreduce), --wait S (60), --recover S (40),
#          --late S (5), --no-check (skip the link check of scripts/cluster.sh).
# Needs a build: HP_BUILDDIR (default ./_build) holding tests/mpi/mpi_failure
# (`make -C _build tests/mpi/mpi_failure`, or `make check`).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
self=$(readlink -f "$0")

hosts=2 rph=2 rate=1gbit mib=16 wait_s=60 recover_s=40 late_s=5
in_cluster=
check=()
cases=()
while [ $# -gt 0 ]; do
    case "$1" in
    --hosts) hosts=$2; shift 2 ;;
    --ranks-per-host) rph=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --mib) mib=$2; shift 2 ;;
    --wait) wait_s=$2; shift 2 ;;
    --recover) recover_s=$2; shift 2 ;;
    --late) late_s=$2; shift 2 ;;
    --in-cluster) in_cluster=$2; shift 2 ;;
    --no-check) check=(--no-check); shift ;;
    -h | --help) sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'; exit 0 ;;
    kill | linkdown | linkcut | late) cases+=("$1"); shift ;;
    *) echo "failure_cases: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
[ ${#cases[@]} -gt 0 ] || cases=(kill linkdown linkcut late)

ts() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(ts)" 'BEGIN { printf "%.1f", b - a }'; }

# ------------------------------------------------------------ inside the cluster
# Runs on the head, in the cluster's namespaces (its own PID namespace: ps
# lists the cluster's processes only).
if [ -n "$in_cluster" ]; then
    prog=$PROG
    dir=$HP_CLUSTER_DIR/failure
    mkdir -p "$dir"
    np=$HP_CLUSTER_NP
    last=$((np - 1))
    lasthost=${HP_CLUSTER_HOSTNAMES##* }
    lastlink=${HP_CLUSTER_LINKS##* }
    log=$RESULTS/$in_cluster.log
    left() { # the job's processes still alive (not zombies)
        ps -eo pid=,stat=,comm= | awk '$2 !~ /^Z/ && ($3 == "orted" || $3 == "mpi_failure" || $3 == "mpirun")' |
            awk '{ printf "%s%s(%s)", sep, $3, $1; sep = " " }'
    }
    wait_exit() { # wait_exit PID SECONDS: 0 once PID has exited
        local t
        for t in $(seq 1 $(($2 * 10))); do
            kill -0 "$1" 2>/dev/null || return 0
            sleep 0.1
        done
        return 1
    }
    wait_loop() { # until every rank wrote its pid and rank 0 reported twice
        local t
        for t in $(seq 1 600); do
            [ "$(ls "$dir"/rank*.pid 2>/dev/null | wc -l)" -eq "$np" ] &&
                [ "$(grep -c '^loop:' "$log")" -ge 2 ] && return 0
            sleep 0.1
        done
        return 1
    }
    report() { echo "$*" >>"$RESULTS/summary"; echo "failure_cases: $*" >&2; }
    settle() { # what is left 2 s after mpirun exited, and if anything, whether it goes within 60 s
        local t l
        sleep 2
        l=$(left)
        if [ -z "$l" ]; then
            echo "left 2 s later: none"
            return
        fi
        for t in $(seq 1 580); do
            [ -z "$(left)" ] && { echo "left 2 s later: [$l], gone $(awk -v t="$t" 'BEGIN { printf "%.0f", 2 + t / 10 }') s after mpirun exited"; return; }
            sleep 0.1
        done
        echo "left 2 s later: [$l], still there 60 s later: [$(left)]"
    }

    if [ "$in_cluster" = linkcut ]; then
        sysctl -qw net.ipv4.tcp_retries2=4
        for h in $HP_CLUSTER_HOSTNAMES; do "$HP_CLUSTER_RSH" "$h" sysctl -qw net.ipv4.tcp_retries2=4; done
    fi
    case $in_cluster in
    kill | linkdown | linkcut)
        # appending: the driver's "===" lines must not be overwritten
        : >"$log"
        mpirun $HP_CLUSTER_MPIRUN_ARGS -x HP_FAIL_PIDDIR="$dir" "$prog" loop "$mib" 600 >>"$log" 2>&1 &
        mp=$!
        wait_loop || { report "$in_cluster: the loop did not start"; kill -TERM $mp; exit 1; }
        if [ "$in_cluster" = kill ]; then
            victim=$(cat "$dir/rank$last.pid")
            t0=$(ts)
            echo "=== $(date +%T) SIGKILL rank $last (pid $victim on $lasthost)" >>"$log"
            kill -KILL "$victim"
            if wait_exit $mp "$wait_s"; then
                wait $mp
                rc=$?
                dt=$(since "$t0")
                report "kill: mpirun exited with status $rc ${dt} s after the SIGKILL; $(settle)"
            else
                report "kill: mpirun still running ${wait_s} s after the SIGKILL; processes: [$(left)]"
                kill -TERM $mp
                wait_exit $mp 30
            fi
        elif [ "$in_cluster" = linkcut ]; then
            t0=$(ts)
            echo "=== $(date +%T) ip link set $lastlink down (host $lasthost), tcp_retries2=4" >>"$log"
            ip link set "$lastlink" down
            if wait_exit $mp "$wait_s"; then
                wait $mp
                rc=$?
                dt=$(since "$t0")
                report "linkcut: mpirun exited with status $rc ${dt} s after the link went down; $(settle)"
            else
                report "linkcut: no exit ${wait_s} s after the link went down; processes: [$(left)]"
                t2=$(ts)
                kill -TERM $mp
                if wait_exit $mp 30; then
                    wait $mp
                    rc=$?
                    dt=$(since "$t2")
                    report "linkcut: SIGTERM to mpirun: exit status $rc after ${dt} s; $(settle)"
                else
                    report "linkcut: SIGTERM to mpirun: still running 30 s later; processes: [$(left)]"
                fi
            fi
        else
            t0=$(ts)
            calls0=$(grep -c '^loop:' "$log")
            echo "=== $(date +%T) ip link set $lastlink down (host $lasthost)" >>"$log"
            ip link set "$lastlink" down
            if wait_exit $mp "$wait_s"; then
                wait $mp
                rc=$?
                report "linkdown: mpirun exited with status $rc $(since "$t0") s after the link went down; $(settle)"
            else
                n1=$(grep -c '^loop:' "$log")
                report "linkdown: no exit ${wait_s} s after the link went down (rank 0 reported $((n1 - calls0)) more seconds of progress meanwhile); processes: [$(left)]"
                t1=$(ts)
                echo "=== $(date +%T) ip link set $lastlink up" >>"$log"
                ip link set "$lastlink" up
                resumed=
                for t in $(seq 1 $((recover_s * 10))); do
                    [ "$(grep -c '^loop:' "$log")" -gt "$n1" ] && { resumed=$(since "$t1"); break; }
                    kill -0 $mp 2>/dev/null || break
                    sleep 0.1
                done
                if [ -n "$resumed" ]; then
                    report "linkdown: link up again: the loop resumed ${resumed} s later"
                elif kill -0 $mp 2>/dev/null; then
                    report "linkdown: link up again: no progress within ${recover_s} s"
                else
                    wait $mp
                    report "linkdown: link up again: mpirun exited with status $? $(since "$t1") s later"
                fi
                if kill -0 $mp 2>/dev/null; then
                    t2=$(ts)
                    echo "=== $(date +%T) SIGTERM mpirun" >>"$log"
                    kill -TERM $mp
                    if wait_exit $mp 30; then
                        wait $mp
                        rc=$?
                        dt=$(since "$t2")
                        report "linkdown: SIGTERM to mpirun: exit status $rc after ${dt} s; $(settle)"
                    else
                        report "linkdown: SIGTERM to mpirun: still running 30 s later; processes: [$(left)]"
                    fi
                fi
            fi
        fi
        ;;
    late)
        t0=$(ts)
        mpirun $HP_CLUSTER_MPIRUN_ARGS "$prog" late "$mib" "$late_s" "$last" >"$log" 2>&1
        rc=$?
        inside=$(awk '/inside MPI_Allreduce/ { printf "%s%s %s s", sep, $2, $5; sep = ", " }' "$log")
        report "late: mpirun exit status $rc after $(since "$t0") s; time inside MPI_Allreduce per rank: $inside (rank $last arrived ${late_s} s late); left: [$(left)]"
        ;;
    esac
    exit 0
fi

# ------------------------------------------------------------ the driver
builddir=${HP_BUILDDIR:-$top/_build}
prog=$builddir/tests/mpi/mpi_failure
[ -x "$prog" ] || { echo "failure_cases: $prog is missing: make -C $builddir tests/mpi/mpi_failure" >&2; exit 2; }
results=$(mktemp -d "${TMPDIR:-/tmp}/hp-failure.XXXXXX") || exit 1
: >"$results/summary"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for c in "${cases[@]}"; do
    echo "=== case $c: $hosts hosts x $rph ranks, $rate, $mib MiB allreduce" >&2
    # a link check that fails (exit 3: the machine is too busy to carry the
    # rate just now) is tried again, up to three times
    for try in 1 2 3; do
        PROG=$prog RESULTS=$results "$top/scripts/cluster.sh" --hosts "$hosts" --ranks-per-host "$rph" \
            --rate "$rate" "${check[@]}" -- \
            "$BASH" "$self" --hosts "$hosts" --ranks-per-host "$rph" --mib "$mib" --wait "$wait_s" \
            --recover "$recover_s" --late "$late_s" --in-cluster "$c"
        rc=$?
        [ $rc -eq 3 ] || break
        sleep 5
    done
    [ $rc -eq 0 ] || echo "case $c: cluster.sh exit status $rc" | tee -a "$results/summary" >&2
    if [ -f "$results/$c.log" ]; then
        echo "--- what mpirun printed ($c):" >&2
        grep -v '^loop:' "$results/$c.log" | head -40 >&2
        echo "    ($(grep -c '^loop:' "$results/$c.log") progress lines of rank 0 left out)" >&2
    fi
done
echo
echo "Summary ($hosts hosts x $rph ranks, $rate per link, $mib MiB MPI_Allreduce, Open MPI $(mpirun --version 2>/dev/null | sed -n '1s/.* //p')):"
sed 's/^/  /' "$results/summary"
echo "(logs in $results)"
