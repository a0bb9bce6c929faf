#!/bin/sh
# Golden hashes of compressed MPI_Allreduce: tests/mpi/mpi_golden at 2, 3, 4 and
# 5 ranks (one mpirun per rank count, the cases looped inside), its lines
#   golden <path> <isa> np=<N> <comp> <algo> part=<bytes> n=<count> <hash>
# against tests/mpi/golden/hashes.txt: a line that differs, is missing or is new
# fails the test, with a diff.  Path `cpu`: host buffers; path `dev`: device
# buffers of the stand-in driver (tests/gpu/mock/.libs/libcuda.so.1) through the
# emulated CUDA module (tests/gpu/mock/.libs/libhipress_cuda_emu.so), skipped
# when that is not built (a build without CUDA); every device call must be
# compressed on the GPU, none staged.
#
#   HP_GOLDEN_RECORD=1  rewrite tests/mpi/golden/hashes.txt from this build (all
#                       rank counts, both paths; only from a known-good build)
#   HP_GOLDEN_NPS="2 3" the rank counts to run (default 2 3 4 5)
#   HP_GOLDEN_SET="HIPRESS_SEED=7 ..."  settings applied to every case (a
#                       perturbation: the comparison must then fail)
set -u
HP_MPI_TIMEOUT=${HP_MPI_TIMEOUT:-300}
. "${HP_SRCDIR:-$(dirname "$0")/../..}/tests/hp_test_lib.sh"

prog="$HP_BUILDDIR/tests/mpi/mpi_golden"
plugin="$HP_BUILDDIR/tests/mpi/.libs/plugin_example.so"
mock="$HP_BUILDDIR/tests/gpu/mock/.libs"
emu="$mock/libhipress_cuda_emu.so"
golden="$HP_SRCDIR/tests/mpi/golden/hashes.txt"
nps=${HP_GOLDEN_NPS:-2 3 4 5}
record=${HP_GOLDEN_RECORD:-0}

for f in "$prog" "$plugin"; do
    [ -e "$f" ] || { echo "FAIL: $f is missing (make check builds it)"; exit 1; }
done
dev=0
if [ -e "$emu" ] && [ -e "$mock/libcuda.so.1" ]; then
    dev=1
else
    echo "# device cases skipped: $emu is not built (a build without CUDA)"
fi
if [ "$record" = 1 ] && { [ $dev = 0 ] || [ "$nps" != "2 3 4 5" ] || [ -n "${HP_GOLDEN_SET:-}" ]; }; then
    echo "FAIL: HP_GOLDEN_RECORD=1 needs the device path, HP_GOLDEN_NPS unset and HP_GOLDEN_SET unset"
    exit 1
fi
[ -n "$nps" ] || { echo "# no rank counts to run"; exit 77; }

sets=
for kv in ${HP_GOLDEN_SET:-}; do
    sets="$sets --set $kv"
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: >"$tmp/got"
start=$(date +%s)
for np in $nps; do
    t0=$(date +%s)
    if [ $dev = 1 ]; then
        # shellcheck disable=SC2086
        hp_mpirun "$np" -x HIPRESS_PLUGIN="$plugin" -x HIPRESS_STATS=1 -x HIPRESS_CUDA_MODULE="$emu" \
            "$prog" --dev "$mock/libcuda.so.1" $sets >"$tmp/out" 2>"$tmp/err"
    else
        # shellcheck disable=SC2086
        hp_mpirun "$np" -x HIPRESS_PLUGIN="$plugin" "$prog" $sets >"$tmp/out" 2>"$tmp/err"
    fi
    rc=$?
    done_line=$(grep '^golden-done ' "$tmp/out")
    echo "# np $np: exit $rc, $(grep -c '^golden ' "$tmp/out") golden lines, ${done_line:-no golden-done line}, $(($(date +%s) - t0)) s"
    if [ $rc -ne 0 ] || [ -z "$done_line" ]; then
        hp_fail "mpi_golden np $np ($(grep -c 'mpi_golden rank .*: FAIL' "$tmp/err") failed checks; the first 40 lines of its errors:)"
        grep -v '^golden ' "$tmp/out"
        head -n 40 "$tmp/err"
        continue
    fi
    if [ $dev = 1 ]; then
        ndev=$(echo "$done_line" | sed -n 's/.* dev_calls=\([0-9]*\).*/\1/p')
        gpu=$(sed -n 's/^  compressed on the GPU  *\([0-9][0-9]*\).*/\1/p' "$tmp/err" "$tmp/out")
        staged=$(sed -n 's/^  staged through host memory  *\([0-9][0-9]*\).*/\1/p' "$tmp/err" "$tmp/out")
        if [ -z "$ndev" ] || [ "$ndev" = 0 ] || [ "${gpu:-x}" != "$ndev" ] || [ "${staged:-x}" != 0 ]; then
            hp_fail "np $np: $ndev device calls, ${gpu:-?} compressed on the GPU, ${staged:-?} staged"
            cat "$tmp/err"
        fi
    fi
    grep '^golden ' "$tmp/out" >>"$tmp/got"
done
echo "# $(wc -l <"$tmp/got") golden lines in $(($(date +%s) - start)) s"

if [ "$record" = 1 ]; then
    if [ $status -ne 0 ]; then
        echo "FAIL: not recording: the runs failed"
        exit 1
    fi
    {
        echo "# Golden hashes of tests/mpi/mpi_golden (tests/mpi/run_golden.sh compares them)."
        echo "# Recorded with HP_GOLDEN_RECORD=1 from $(cd "$HP_SRCDIR" && git describe --always --dirty 2>/dev/null || echo 'an unknown commit')."
        echo "# golden <path> <isa> np=<N> <comp> <algo> part=<bytes> n=<count> <hash of 3 results and every rank's residuals>"
        cat "$tmp/got"
    } >"$golden"
    echo "# recorded $(wc -l <"$tmp/got") lines in $golden"
    exit 0
fi

[ -f "$golden" ] || { echo "FAIL: $golden is missing (HP_GOLDEN_RECORD=1 writes it)"; exit 1; }
# the expected lines of what ran: these rank counts, and no device lines
# when the device path is skipped
want_np=$(for np in $nps; do printf ' np=%s ' "$np"; done)
grep '^golden ' "$golden" | while read -r _g path isa npf rest; do
    case "$want_np" in *" $npf "*) ;; *) continue ;; esac
    [ $dev = 0 ] && [ "$path" = dev ] && continue
    echo "golden $path $isa $npf $rest"
done | sort >"$tmp/want"
sort "$tmp/got" >"$tmp/got.sorted"
if ! [ -s "$tmp/want" ]; then
    hp_fail "no expected lines in $golden for np $nps"
elif ! diff -u "$tmp/want" "$tmp/got.sorted" >"$tmp/diff"; then
    hp_fail "$(grep -c '^-golden' "$tmp/diff") of $(wc -l <"$tmp/want") golden lines differ or are missing ($(grep -c '^+golden' "$tmp/diff") unexpected): - $golden, + this build"
    cat "$tmp/diff"
else
    echo "# all $(wc -l <"$tmp/want") golden lines match $golden"
fi
exit $status
