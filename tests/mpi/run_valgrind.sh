#!/bin/sh
# Valgrind (memcheck) on short mpirun runs with the library preloaded: np 2,
# compressed and pass-through calls, once with the default settings (the
# adaptive plan measures and explores) and once with fp16 on a fixed ring
# with HIPRESS_STATS and HIPRESS_VERIFY.  Any memcheck error or definite leak
# fails the run (--error-exitcode=1); the only suppressions are Open MPI's
# own file and tests/mpi/valgrind/openmpi-extra.supp (Open MPI / PMIx internals,
# each justified there).  Then the algorithm tests' failure paths and a loop
# of error-feedback calls.  About a minute; `make check-valgrind` runs it alone.
set -u
HP_MPI_TIMEOUT=${HP_MPI_TIMEOUT:-300}
. "${HP_SRCDIR:-$(dirname "$0")/../..}/tests/hp_test_lib.sh"

if [ -n "$HP_ASAN" ]; then
    # not a missing dependency: ASan and memcheck exclude each other
    echo "SKIP: a sanitizer build cannot run under valgrind; run make check-valgrind in a build configured without --enable-sanitizers"
    exit 77
fi
command -v valgrind >/dev/null || { echo "FAIL: valgrind not found (apt-get install valgrind)"; exit 1; }
ompi_supp=/usr/share/openmpi/openmpi-valgrind.supp
[ -f "$ompi_supp" ] || { echo "FAIL: $ompi_supp not found"; exit 1; }
prog="$HP_BUILDDIR/tests/mpi/mpi_basic"
[ -x "$prog" ] || { echo "FAIL: $prog is missing"; exit 1; }
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

# The preload is set by `env` under --trace-children, so that it applies to
# the program (next to valgrind's own preload) and not to valgrind's launcher.
vg="valgrind -q --trace-children=yes --error-exitcode=1 --leak-check=full \
 --errors-for-leak-kinds=definite --show-leak-kinds=definite --num-callers=60 \
 --suppressions=$ompi_supp --suppressions=$HP_SRCDIR/tests/mpi/valgrind/openmpi-extra.supp"

run() {
    label=$1
    shift
    t0=$(date +%s)
    hp_mpirun 2 "$@" $vg env LD_PRELOAD="$HP_PRELOAD" "$prog" 2 >"$out" 2>"$err"
    rc=$?
    echo "# $label: exit $rc after $(( $(date +%s) - t0 )) s"
    if [ $rc -ne 0 ] || ! grep -q '^mpi_basic: ok' "$out" || grep -q '^==[0-9]*== ' "$err"; then
        hp_fail "$label: memcheck reported errors or the program failed (exit $rc)"
        cat "$out" "$err"
    fi
}
run "defaults"
run "fp16 ring, stats, verify" -x HIPRESS_COMPRESSOR=fp16 -x HIPRESS_ALGO=ring -x HIPRESS_PARTITION_BYTES=64K \
    -x HIPRESS_STATS=1 -x HIPRESS_VERIFY=1
# The collectives: every algorithm's failure paths (a corrupted
# message, an allocation failure) and a loop of error-feedback calls over
# rotating buffers with a 1 MiB residual bound (evictions).  mpi_algos links
# libhipress itself: run the real binary (not its libtool wrapper script,
# whose sed and sh would be traced too) with the library's directory.
t0=$(date +%s)
hp_mpirun 2 -x LD_LIBRARY_PATH="$HP_BUILDDIR/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    -x HP_TEST_RSS_SLACK_KIB=32768 $vg "$HP_BUILDDIR/tests/mpi/.libs/mpi_algos" fail memory 300 >"$out" 2>"$err"
rc=$?
echo "# algorithms, failures, 300 error-feedback calls: exit $rc after $(( $(date +%s) - t0 )) s"
if [ $rc -ne 0 ] || ! grep -q 'failed$' "$out" || grep -q ' [1-9][0-9]* failed$' "$out" || grep -q '^==[0-9]*== ' "$err"; then
    hp_fail "mpi_algos under memcheck: errors, leaks or failed checks (exit $rc)"
    cat "$out" "$err"
fi
exit $status
