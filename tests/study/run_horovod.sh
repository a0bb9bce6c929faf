#!/bin/sh
# Horovod under the preload: a 4-rank hvd.DistributedOptimizer training
# (tests/study/horovod_train.py: PyTorch, HOROVOD_CPU_OPERATIONS=MPI) with the
# stable-layout recipe of doc/measured/horovod-layouts.md (HOROVOD_FUSION_THRESHOLD=0,
# gradients zeroed in place), run once plain and once with libhipress.so and
# onebit.  Checks: every rank ends with bit-identical parameters (the program
# compares hashes); hipress compressed the gradients (HIPRESS_STATS=1 table,
# rank 0); Horovod's integer coordination calls passed through; residual keys
# did not keep growing; the test accuracy is within ACC_MARGIN of the plain
# run's.  Then the same pair with Horovod's default fusion: the fused
# buffer runs onebit's residual-free form (HIPRESS_STAGING_FORM).
#
# Skips (exit 77) when the Horovod venv is missing: scripts/install_horovod.sh
# makes it (HP_HOROVOD_VENV names another one); scripts/test.sh (CI) installs
# it before `make check`, so there it always runs.  By hand, from the build
# directory:
#   HP_SRCDIR=.. HP_BUILDDIR=. MPIEXEC=mpirun sh ../tests/study/run_horovod.sh
set -u
HP_MPI_TIMEOUT=${HP_MPI_TIMEOUT:-300}
VENV=${HP_HOROVOD_VENV:-/opt/hipress-horovod}
. "${HP_SRCDIR:-$(dirname "$0")/../..}/tests/hp_test_lib.sh"

NP=4
STEPS=${HP_HOROVOD_STEPS:-200}
SEED=1
# The accuracy bound, in absolute test accuracy (360 test images: 0.04 is 14
# of them).  Measured at 200 steps over seeds 1-5, onebit minus plain was
# between -0.017 and +0.008 (ring and allgather); at 100 steps onebit was
# still 0.03-0.05 behind, which is why the run has 200 steps.
ACC_MARGIN=0.04
ACC_FLOOR=0.93   # the plain run itself must have learned

PY=$VENV/bin/python
if [ ! -x "$PY" ]; then
    echo "SKIP: no Horovod venv at $VENV (run scripts/install_horovod.sh, or set HP_HOROVOD_VENV)"
    exit 77
fi
if ! "$PY" -c 'import horovod.torch as hvd, sklearn; assert hvd.mpi_built()' >/dev/null 2>&1; then
    echo "SKIP: $PY cannot import horovod.torch (built with MPI) and sklearn (run scripts/install_horovod.sh)"
    exit 77
fi

out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

# train LABEL MPIRUN_ARGS...: run the program, leave its output in $out and
# $err; 0 when it printed its ok line
FUSION=0
train() {
    label=$1
    shift
    t0=$(date +%s)
    hp_mpirun $NP -x HOROVOD_CPU_OPERATIONS=MPI -x HOROVOD_FUSION_THRESHOLD=$FUSION "$@" \
        "$PY" "$HP_SRCDIR/tests/study/horovod_train.py" --steps "$STEPS" --seed "$SEED" >"$out" 2>"$err"
    rc=$?
    echo "# $label: exit $rc, $(($(date +%s) - t0)) s: $(grep '^horovod_train:' "$out")"
    if [ $rc -ne 0 ] || ! grep -q '^horovod_train: ok' "$out"; then
        hp_fail "$label: exit status $rc, or the replicas differ"
        cat "$out" "$err"
        return 1
    fi
    return 0
}

# field NAME: the number after "NAME " in the program's ok line
field() {
    sed -n "s/^horovod_train: ok.* $1 \([0-9.][0-9.]*\).*/\1/p" "$out"
}

# row LABEL: the number after a row label of the statistics table (0 when
# the row is absent)
row() {
    _v=$(sed -n "s/^  $1  *\([0-9][0-9]*\).*/\1/p" "$err")
    echo "${_v:-0}"
}

train "plain" || exit $status
acc_plain=$(field "test accuracy")

# A fixed plan (ps, within onebit's quality budget of 2 stages; 256 KiB
# partitions), so the run does not depend on timing and repeats exactly.
train "onebit" -x LD_PRELOAD="$HP_PRELOAD" -x HIPRESS_COMPRESSOR=onebit -x HIPRESS_ALGO=ps \
    -x HIPRESS_PARTITION_BYTES=256K -x HIPRESS_MIN_BYTES=1M -x HIPRESS_STATS=1 || exit $status
acc_onebit=$(field "test accuracy")

# The statistics table, printed by rank 0 at MPI_Finalize (Horovod finalizes
# MPI in hvd.shutdown(), having initialised it).
if ! grep -q "^hipress statistics (rank 0 of $NP)" "$err"; then
    hp_fail "no statistics table from rank 0: not intercepted, or MPI_Finalize never ran"
    cat "$err"
    exit $status
fi
sed -n '/^hipress statistics/,/^  non-finite/p' "$err" | sed 's/^/# /'

# With HOROVOD_FUSION_THRESHOLD=0 each gradient is reduced in its own tensor:
# per step the two 512x512 float32 weights (1 MiB each) are compressed; the
# smaller gradients pass through as small.  With a fixed algorithm the plan
# never sends an eligible call plain.
want=$((2 * STEPS))
comp=$(row 'compressed')
[ "$comp" -gt 0 ] || hp_fail "no compressed call in the table"
[ "$comp" -eq $want ] || hp_fail "$comp compressed calls, want $want (two 1 MiB gradients a step)"
[ "$(field 'compressed')" = "$comp" ] ||
    hp_fail "hipress_stats_get said $(field 'compressed') compressed before shutdown, the table $comp"
[ "$(row 'errors')" = 0 ] || hp_fail "the table reports errors"
[ "$(row 'passed through: small')" -gt 0 ] || hp_fail "no 'passed through: small' row: the small gradients were not seen"
# Horovod's coordination: MPI_Allreduce of MPI_LONG_LONG_INT with MPI_BAND
# (MPI_BOR when its response cache has invalid entries), every cycle.
coord=$(($(row 'passed through: datatype') + $(row 'passed through: op')))
[ "$coord" -ge "$STEPS" ] ||
    hp_fail "only $coord calls passed through for their datatype or op: Horovod's integer coordination calls not seen"
# A stable layout: one error-feedback buffer per compressed gradient, made in
# the first step and reused; no staging buffer (an address reduced with two
# counts) and nothing dropped.  A layout that changes makes new buffers as
# it goes (zero_grad(set_to_none=True) made about one a call in
# doc/measured/horovod-layouts.md), and a fusion buffer is a staging buffer.
keys=$(sed -n 's/^  error feedback *\([0-9][0-9]*\) buffers;.*/\1/p' "$err")
staging=$(sed -n 's/^  error feedback .*; \([0-9][0-9]*\) staging buffers.*/\1/p' "$err")
dropped=$(sed -n 's/^  residuals dropped *\([0-9][0-9]*\) buffers.*/\1/p' "$err")
[ -n "$keys" ] || hp_fail "no 'error feedback' row"
[ "${keys:-0}" -eq 2 ] || hp_fail "${keys:-?} error-feedback buffers in $STEPS steps, want 2: the layout is not stable"
[ "${staging:-1}" -eq 0 ] || hp_fail "${staging:-?} staging buffers: some address was reduced with two counts"
[ "${dropped:-1}" -eq 0 ] || hp_fail "${dropped:-?} residual buffers dropped"

echo "# test accuracy: plain $acc_plain, onebit $acc_onebit (bound: plain - $ACC_MARGIN, plain >= $ACC_FLOOR)"
awk -v p="$acc_plain" -v c="$acc_onebit" -v m="$ACC_MARGIN" -v f="$ACC_FLOOR" \
    'BEGIN { exit !(p >= f && c >= p - m) }' ||
    hp_fail "accuracy out of bounds: plain $acc_plain, onebit $acc_onebit"
[ $status -eq 0 ] || cat "$out" "$err"

# Horovod's default fusion (128 MiB, 1 ms cycles): the gradients are fused
# into a buffer whose layout changes from step to step, a staging buffer, so
# onebit runs its residual-free form there (q2 stochastic; the stable
# buffers of tensors reduced alone keep onebit with its residual).  Checks:
# replicas identical, calls compressed, most of them in the form, no
# error, no staging warning, accuracy within ACC_MARGIN of plain with fusion.
FUSION=134217728
train "plain, fusion on" || exit $status
acc_fplain=$(field "test accuracy")
train "onebit, fusion on" -x LD_PRELOAD="$HP_PRELOAD" -x HIPRESS_COMPRESSOR=onebit -x HIPRESS_ALGO=ps \
    -x HIPRESS_PARTITION_BYTES=256K -x HIPRESS_MIN_BYTES=1M -x HIPRESS_STATS=1 || exit $status
acc_fonebit=$(field "test accuracy")
sed -n '/^hipress statistics/,/^  non-finite/p' "$err" | sed 's/^/# /'
comp=$(row 'compressed')
form=$(sed -n 's/^  staging buffers  *\([0-9][0-9]*\) calls in the residual-free form.*/\1/p' "$err")
[ "$comp" -ge "$STEPS" ] || hp_fail "fusion on: $comp compressed calls in $STEPS steps"
[ "${form:-0}" -gt 0 ] && [ "$((2 * ${form:-0}))" -ge "$comp" ] ||
    hp_fail "fusion on: ${form:-0} of $comp compressed calls in the residual-free form, want most"
[ "$(row 'errors')" = 0 ] || hp_fail "fusion on: the table reports errors"
! grep -q "staging buffer, such as" "$err" || hp_fail "fusion on: a staging-buffer warning in the default form"
echo "# fusion on, test accuracy: plain $acc_fplain, onebit $acc_fonebit ($form of $comp calls residual-free)"
awk -v p="$acc_fplain" -v c="$acc_fonebit" -v m="$ACC_MARGIN" -v f="$ACC_FLOOR" \
    'BEGIN { exit !(p >= f && c >= p - m) }' ||
    hp_fail "fusion on: accuracy out of bounds: plain $acc_fplain, onebit $acc_fonebit"
[ $status -eq 0 ] || cat "$out" "$err"
exit $status
