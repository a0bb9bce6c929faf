#!/bin/sh
# The PyTorch DDP comm hook (src/python/hipress/torch.py) in a DDP job over
# gloo under mpirun, at 2 and 4 ranks (tests/mpi/ddp_hook.py says what each
# case checks): exact means through the compressed path with a lossless
# compressor (several buckets, the rebuild after the first iteration,
# no_sync, an unused parameter, static_graph, gradient_as_bucket_view),
# identical replicas with onebit, the residuals of the first iteration's
# buckets dropped and counted, a rank whose buckets differ failing every
# rank with an error instead of hanging; then the clear errors of a job not
# started under mpirun and of MPI initialised below MPI_THREAD_SERIALIZED.
# Skips (77) where $HP_PYTHON has no torch.
set -u
HP_MPI_TIMEOUT=${HP_MPI_TIMEOUT:-240}
. "${HP_SRCDIR:-$(dirname "$0")/../..}/tests/hp_test_lib.sh"

"$HP_PYTHON" -c 'import torch.distributed' 2>/dev/null || { echo "SKIP: $HP_PYTHON cannot import torch"; exit 77; }
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
py="$HP_SRCDIR/tests/mpi/ddp_hook.py"
pp="$HP_SRCDIR/src/python"
port=$((29600 + $$ % 300))

# run NAME NP CASE [mpirun args]: one mpirun of the program; its output in $out, $err
run() {
    name=$1 np=$2 case=$3
    shift 3
    port=$((port + 1))
    hp_mpirun "$np" -x LD_PRELOAD="$HP_PRELOAD" -x PYTHONPATH="$pp" -x HP_DDP_PORT=$port -x HIPRESS_STATS=1 \
        "$@" "$HP_PYTHON" "$py" "$case" >"$out" 2>"$err"
    rc=$?
    echo "# $name, $np ranks: exit $rc"
    sed 's/^/#   /' "$out"
}

for np in 2 4; do
    # (a fixed ring: on one machine the plan could send everything plain)
    run exact $np exact -x HIPRESS_COMPRESSOR=none -x HIPRESS_MIN_BYTES=0 -x HIPRESS_ALGO=ring \
        -x HIPRESS_PARTITION_BYTES=64K
    [ $rc -eq 0 ] || { hp_fail "exact, $np ranks: exit $rc"; tail -20 "$err"; }
    for c in buckets rebuild no_sync unused static_graph bucket_view; do
        grep -q "^ddp_hook: $c ok" "$out" || hp_fail "exact, $np ranks: case $c did not pass"
    done
    grep -q "of which from a comm hook" "$err" || hp_fail "exact, $np ranks: no statistics of the hook's calls"

    run lossy $np lossy -x HIPRESS_COMPRESSOR=onebit -x HIPRESS_MIN_BYTES=0 -x HIPRESS_OPTIMIZER=sgd \
        -x HIPRESS_ALGO=allgather
    [ $rc -eq 0 ] && grep -q "^ddp_hook: lossy ok" "$out" || { hp_fail "lossy, $np ranks: exit $rc"; tail -20 "$err"; }
    # DDP lays its buckets out again after the first iteration: the first
    # layout's residuals are dropped, and counted
    grep -q "bucket laid out again" "$err" || hp_fail "lossy, $np ranks: no residual of the first layout counted as dropped"

    run mismatch $np mismatch -x HIPRESS_COMPRESSOR=onebit -x HIPRESS_MIN_BYTES=0 -x HIPRESS_TIMEOUT=60
    [ $rc -eq 0 ] && grep -q "^ddp_hook: mismatch ok" "$out" ||
        { hp_fail "mismatch, $np ranks: exit $rc (a hang ends at the timeout)"; tail -20 "$err"; }
    grep -q "reduce different buckets" "$err" ||
        hp_fail "mismatch, $np ranks: no warning saying the buckets differ"
done

# not under mpirun: a clear error, not an MPI abort
PYTHONPATH="$pp" LD_PRELOAD="$HP_PRELOAD" "$HP_PYTHON" -c '
import hipress._lib as l
try:
    l.mpi_ready()
except l.HipressError as e:
    print(e)
' >"$out" 2>&1
echo "# outside mpirun: $(cat "$out")"
grep -q "not started by mpirun" "$out" || hp_fail "outside mpirun: no clear error"

# MPI initialised at MPI_THREAD_SINGLE: a clear error (mpi4py, told to)
if "$HP_PYTHON" -c 'import mpi4py' 2>/dev/null; then
    hp_mpirun 1 -x LD_PRELOAD="$HP_PRELOAD" -x PYTHONPATH="$pp" "$HP_PYTHON" -c '
import mpi4py
mpi4py.rc.thread_level = "single"
from mpi4py import MPI
import hipress._lib as l
try:
    l.mpi_ready()
except l.HipressError as e:
    print(e)
' >"$out" 2>&1
    echo "# thread level single: $(cat "$out" | head -3)"
    grep -q "MPI_THREAD_SERIALIZED" "$out" || hp_fail "MPI_THREAD_SINGLE: no clear error"
fi
exit $status
