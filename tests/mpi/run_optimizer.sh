#!/bin/sh
# HIPRESS_OPTIMIZER: with it unset (auto) or adam, a compressor that holds
# under SGD only (onebit, terngrad, q2, ...) runs the staging codec (q4,
# stochastic, no residual) on every buffer, so it puts exactly the bytes of
# q4 with stochastic rounding on the wire and keeps no residual; with sgd it
# runs itself.  Rank 0 says so once at start-up under auto, and nothing
# under adam or sgd.  An mpi4py program (three allreduces of 1M floats on 3
# ranks, fixed plan) reports hipress_stats_get's bytes and buffers.
set -u
HP_MPI_TIMEOUT=${HP_MPI_TIMEOUT:-120}
. "${HP_SRCDIR:-$(dirname "$0")/../..}/tests/hp_test_lib.sh"

"$HP_PYTHON" -c 'import mpi4py, numpy' 2>/dev/null || { echo "SKIP: $HP_PYTHON has no mpi4py and numpy"; exit 77; }
out=$(mktemp) err=$(mktemp) prog=$(mktemp --suffix=.py)
trap 'rm -f "$out" "$err" "$prog"' EXIT
cat >"$prog" <<'PY'
import ctypes
import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
x = np.empty(1 << 20, dtype=np.float32)
for t in range(3):
    x[:] = np.sin(np.arange(x.size, dtype=np.float32) * 0.001 * (comm.rank + 1 + t))
    comm.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM)
st = (ctypes.c_ulonglong * 64)()
lib = ctypes.CDLL(None)
lib.hipress_stats_get(st)
if comm.rank == 0:
    print("optimizer: compressed %d, wire %d" % (st[1], st[4]))
PY

# run LABEL SETTINGS...: the program's compressed calls and wire bytes in $comp, $wire
run() {
    label=$1
    shift
    hp_mpirun 3 -x LD_PRELOAD="$HP_PRELOAD" -x HIPRESS_ALGO=allgather -x HIPRESS_PARTITION_BYTES=1M -x HIPRESS_STATS=1 \
        "$@" "$HP_PYTHON" "$prog" >"$out" 2>"$err"
    rc=$?
    comp=$(sed -n 's/^optimizer: compressed \([0-9]*\), wire \([0-9]*\)$/\1/p' "$out")
    wire=$(sed -n 's/^optimizer: compressed \([0-9]*\), wire \([0-9]*\)$/\2/p' "$out")
    warns=$(grep -c "HIPRESS_OPTIMIZER is not set" "$err")
    ef=$(sed -n 's/^  error feedback  *\([0-9]*\) buffers.*/\1/p' "$err")
    echo "# $label: exit $rc, $comp compressed, $wire bytes sent by rank 0, $ef buffers with a residual, $warns notices"
    [ $rc -eq 0 ] && [ "${comp:-0}" -eq 3 ] || { hp_fail "$label: exit $rc, ${comp:-no} compressed calls"; cat "$err"; }
}

run "q4, stochastic" -x HIPRESS_COMPRESSOR=q4 -x HIPRESS_Q_ROUNDING=stochastic -x HIPRESS_OPTIMIZER=sgd
q4=$wire
run "onebit, sgd" -x HIPRESS_COMPRESSOR=onebit -x HIPRESS_OPTIMIZER=sgd
[ "$wire" != "$q4" ] || hp_fail "onebit under sgd sent q4's bytes"
[ "$ef" -eq 1 ] || hp_fail "onebit under sgd kept no residual"
[ "$warns" -eq 0 ] || hp_fail "onebit under sgd: a notice"
for opt in auto adam; do
    for c in onebit terngrad tbq q2; do
        run "$c, $opt" -x HIPRESS_COMPRESSOR=$c -x HIPRESS_OPTIMIZER=$opt
        [ "$wire" = "$q4" ] || hp_fail "$c under $opt sent $wire bytes, not q4's $q4"
        [ "$ef" -eq 0 ] || hp_fail "$c under $opt kept a residual"
        want=0
        [ $opt = auto ] && want=1
        [ "$warns" -eq $want ] || hp_fail "$c under $opt: $warns notices, want $want"
    done
done
# a compressor that holds under both is itself under auto
run "q8, auto" -x HIPRESS_COMPRESSOR=q8 -x HIPRESS_OPTIMIZER=auto
[ "$wire" != "$q4" ] && [ "$ef" -eq 1 ] && [ "$warns" -eq 0 ] || hp_fail "q8 under auto did not run itself"
exit $status
