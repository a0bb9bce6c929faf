#!/bin/sh
# The tables are the only seam: the algorithm cases of
# tests/mpi/run_algos.sh (tests/mpi/mpi_algos, the same arguments) run with the test
# library preloaded (tests/mpi/.libs/libhipress_test.so, tests/mpi/tables.mk) and
# HP_TEST_TRANSPORT=delay, so every send and receive of the algorithms and
# of the driver's own exchanges goes through the delay transport
# (src/transport/hp_tp_delay.c): held back, posted in a shuffled order
# within MPI's matching rule, buffers read late and filled with garbage
# until their data arrive.  Every result must still be right.  The same
# cases also run the test algorithm `star` (HP_TEST_ALGOS=star; its row in
# src/algo/hp_algos.def exists only in this library, src/algo/hp_algo_star.c),
# which the stats must show was used.
#
# The transport must really be in use: every rank reports at exit how many
# operations it held back and how many it posted out of their issue order,
# and the reordered ones must be many.  And the test must be able to fail:
# one last run breaks the matching rule on purpose (HP_TEST_DELAY_BREAK=1:
# two sends to one peer swapped), which must fail.
set -u
. "${HP_SRCDIR:-$(dirname "$0")/../..}/tests/mpi_env.sh"
prog="$HP_BUILDDIR/tests/mpi/mpi_algos"
lib="$HP_BUILDDIR/tests/mpi/.libs/libhipress_test.so"
for f in "$prog" "$lib"; do
    [ -e "$f" ] || { echo "FAIL: $f is missing (build first: make check builds it)"; exit 1; }
done
# a sanitizer build: the ASan runtime first (as tests/hp_test_lib.sh does)
preload=$lib
asan=$(ldd "$lib" 2>/dev/null | awk '/libasan/ { print $3 }')
if [ -n "$asan" ]; then
    preload="$asan $lib"
    ASAN_OPTIONS=detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}
    export ASAN_OPTIONS
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/hp-run-tables.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT

status=0
# run NP ARGS...: mpi_algos over the delay transport; its report checked
run() {
    np=$1; shift
    echo "== np $np: $*${brk:+ (matching rule broken)}"
    t0=$(date +%s)
    hp_mpirun "$np" -x LD_PRELOAD="$preload" -x HP_TEST_TRANSPORT=delay ${brk:+-x HP_TEST_DELAY_BREAK=1} \
        -x HP_TEST_ALGOS=star -x HIPRESS_STATS=1 "$prog" "$@" >"$out/log" 2>&1
    rc=$?
    # the test algorithm's row (src/algo/hp_algo_star.c) ran the same cases
    # (matched inside the line: another rank's output can split the stats line)
    if [ -z "$brk" ] && ! grep -q ' star [1-9][0-9]*, collective' "$out/log"; then
        echo "FAIL: the test algorithm (star) did not run"
        grep '^  algorithms' "$out/log"
        rc=98
    fi
    if [ -z "$brk" ]; then
        cat "$out/log"
    else    # the failures it must have: counted, not listed
        grep -c ': FAIL ' "$out/log" | sed 's/$/ failed checks/'
        grep 'mpi_algos np=' "$out/log"
    fi
    echo "($(($(date +%s) - t0)) s)"
    # hp_tp_delay: T transports, H sends and receives held back, R posted
    # out of their issue order, B against the matching rule
    grep '^hp_tp_delay: ' "$out/log" | awk -v np="$np" -v rc="$rc" -v brk="${brk:-}" '
        { n++; held += $4; reord += $10; broken += $17 }
        END {
            # (with the rule broken a failing rank ends the job, and mpirun may
            # stop the others before they report: one report is enough)
            if (n != np && (brk == "" || n < 1)) { printf "FAIL: %d of %d ranks report the delay transport\n", n, np; exit 1 }
            printf "delay transport: %d sends and receives held back, %d posted out of issue order, %d against the rule\n", held, reord, broken
            if (reord < held / 20) { print "FAIL: too few operations reordered"; exit 1 }
            if (brk == "" && broken != 0) { print "FAIL: the matching rule was broken"; exit 1 }
            if (brk != "" && broken == 0) { print "FAIL: the matching rule was not broken"; exit 1 }
        }' || rc=99
    return $rc
}
brk=
run 2 matrix comms plan fail range memory 3000 || status=1
run 3 matrix comms plan fail range || status=1
run 4 matrix comms plan fail hier range || status=1
run 5 matrix fail range || status=1
run 6 hier || status=1
run 8 matrix range || status=1

# The negative control: with two sends to one peer swapped, results must be
# wrong or the calls must fail (the failure protocol keeps it from hanging).
brk=1
HP_MPI_TIMEOUT=300 run 3 matrix
case $? in
    1) echo "the broken matching rule was noticed, as it must be" ;;
    0) echo "FAIL: a delay transport that breaks MPI's matching rule went unnoticed"; status=1 ;;
    *) echo "FAIL: with the matching rule broken the run did not fail cleanly (a hang, a crash or no report)"; status=1 ;;
esac
exit $status
