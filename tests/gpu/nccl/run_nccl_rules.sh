#!/bin/sh
# The compressed ncclAllReduce under the stand-ins' strict rules
# (tests/gpu/nccl/nccl_rules.c; doc/dev/standins.md, "The rules the stand-ins
# keep"): a rule broken stops a process with 87 and a line naming both
# sides; every case must pass with the same bits on every rank:
#   destroy, finalize  a communicator ended right after a stream-ordered
#                      call: its memory freed in stream order;
#   twostream          one communicator from two streams, stream-ordered
#                      and host-synchronous calls in turn;
#   localfail          one rank's wait fails, each wait of a call in turn:
#                      every rank still makes the same NCCL calls (the
#                      stand-in NCCL compares them) and ends alike;
#   capfail            one rank's capture query fails: no rank alone takes
#                      the real ncclAllReduce;
#   probe              a first compressed call while another stream holds an
#                      NCCL operation its peer makes later: nothing in the
#                      call waits for the whole device;
#   groupa2a           the program's group of an allreduce with an
#                      ncclAlltoAll (ncclGather, ncclScatter): passed to NCCL
#                      in the group, exact;
# at 2 ranks, with the immediate and the deferred schedules, and at 3.
set -u
HP_MPI_TIMEOUT=${HP_MPI_TIMEOUT:-120}
. "${HP_SRCDIR:-$(dirname "$0")/../../..}/tests/hp_test_lib.sh"
. "${HP_SRCDIR:-$(dirname "$0")/../../..}/tests/gpu/nccl/nccl_run.sh"
nccl_setup nccl_rules

for c in destroy finalize twostream localfail capfail probe groupa2a; do
    nccl_run $c 2 0
    nccl_run $c 2 1
done
nccl_run destroy 3 2
nccl_run twostream 3 2
nccl_run localfail 3 2
exit $status
