#!/bin/sh
# Scenarios that hang or break on a GPU when hipress synchronises what it
# must not (tests/gpu/nccl/nccl_scenarios.c): the compressed ncclAllReduce under
# the stand-ins' model (doc/dev/standins.md: NCCL operations wait for their
# peers, allocation synchronises the device, captures refuse it, wait
# cycles are reported as deadlocks, exit 86).  Every run must pass, with
# the same bits on every rank and no deadlock reported:
#   twocomm        two communicators on two streams in opposite orders on
#                  even and odd ranks once their first calls are done;
#   evict          rank 1's residuals evicted (HIPRESS_RESIDUAL_MAX_MB=2 there);
#   ddp            DDP's buckets rebuilt at iteration 2, no synchronisation
#                  after;
#   capture        a global-mode graph capture on another thread during calls;
#   capture_first  the same while a new communicator's first call runs (its
#                  memory is had in its stream order);
#   allocfail      a device allocation failing on one rank in a call that
#                  grows its message memory (reserved by agreement: every rank
#                  sends that call plain, no count mismatch);
#   abort          ncclCommAbort from a second thread in a call's middle: the
#                  call returns, enqueues nothing more on the communicator
#                  (it says so; the stand-in stops a process that uses an
#                  ended communicator), nothing is left queued;
#   abort_hang     the same with the call blocked inside NCCL
#                  (MOCK_NCCL_CONNECT_HANG: its group never connects): the
#                  abort waits its bound (2 s), says so, and ends the
#                  communicator under the call, which returns naming
#                  NCCL's error (the transport's failure, its cause kept);
#   stats          the same calls through MPI_Allreduce and ncclAllReduce: the
#                  same stats rows (one stats path);
# at 2 ranks, and at 3 with the deferred and adversarial schedules.
#
# By hand only (`run_nccl_scenarios.sh all`), a known limit:
#   twocomm_cold   the same interleaving from the very first call: a
#                  communicator's first compressed call agrees its settings
#                  on the host (src/drive/hp_drive.c), which needs every
#                  rank's first call on it; ranks that start two
#                  communicators in opposite orders wait for each other
#                  (deadlock, 86).  doc/gpu.md says so.
set -u
HP_MPI_TIMEOUT=${HP_MPI_TIMEOUT:-120}
. "${HP_SRCDIR:-$(dirname "$0")/../../..}/tests/hp_test_lib.sh"

. "${HP_SRCDIR:-$(dirname "$0")/../../..}/tests/gpu/nccl/nccl_run.sh"
nccl_setup nccl_scenarios

# scenario CASE NP DEFERRED [MPIRUN ARGS...]: nccl_run, the program's "# "
# lines, and what the abort cases must say
scenario() {
    nccl_run "$@" || return
    grep '^# ' "$out"
    if [ "$1" = abort ] && ! grep -q 'was ended .* nothing more is enqueued on it' "$err"; then
        hp_fail "abort: the call in progress did not see its communicator closed"
        cat "$err"
    elif [ "$1" = abort_hang ] && ! grep -q 'ncclCommAbort: a compressed ncclAllReduce on another thread was still inside NCCL after 2 s' "$err"; then
        hp_fail "abort_hang: the abort did not say it ended the communicator under a blocked call"
        cat "$err"
    elif [ "$1" = abort_hang ] && ! grep -q 'floats failed: an NCCL call failed (ncclResult_t' "$err"; then
        hp_fail "abort_hang: the call's failure does not name NCCL's error (its cause lost)"
        cat "$err"
    fi
}

cases="twocomm evict ddp capture capture_first allocfail abort stats"
[ "${1:-}" = all ] && cases="$cases twocomm_cold"
for c in $cases; do
    scenario $c 2 0
done
for c in twocomm evict ddp capture abort; do
    scenario $c 3 1
    scenario $c 3 2
done
# a call blocked inside NCCL (a group that never connects) when it is aborted
scenario abort_hang 2 0 -x MOCK_NCCL_CONNECT_HANG=1
exit $status
