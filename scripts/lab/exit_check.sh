#!/bin/bash
# Does a DDP job exit?  Runs scripts/lab/ddp_bench.py (ResNet-18, a few
# steps, 4 ranks on loopback) RUNS times and counts the jobs that printed
# their figure but had not exited 20 s later; for each such job it writes
# every rank's threads' stacks (gdb) to OUTDIR/stacks-N.txt, then stops it.
#
#   scripts/lab/exit_check.sh [--runs N (10)] [--hook hipress|floor|fp16|none] -o OUTDIR
#
# Needs a build in HP_BUILDDIR (default ./_build) for --hook hipress, gdb,
# and the Horovod venv's python (HP_HOROVOD_VENV, default /opt/hipress-horovod),
# which has torch and torchvision.  OUTDIR/runs.txt: one line a run.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
runs=10 hook=hipress out=
while [ $# -gt 0 ]; do
    case "$1" in
    --runs) runs=$2; shift 2 ;;
    --hook) hook=$2; shift 2 ;;
    -o) out=$2; shift 2 ;;
    *) echo "exit_check: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -n "$out" ] || { echo "exit_check: -o OUTDIR is required" >&2; exit 2; }
mkdir -p "$out"
build=${HP_BUILDDIR:-$top/_build}
py=${HP_HOROVOD_VENV:-/opt/hipress-horovod}/bin/python
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
hung=0
for i in $(seq "$runs"); do
    log=$out/run-$i.log
    mpirun --oversubscribe -np 4 -x MASTER_ADDR=127.0.0.1 -x PYTHONPATH="$top/src/python" \
        -x LD_PRELOAD="$build/.libs/libhipress.so" -x HIPRESS_COMPRESSOR=onebit -x HIPRESS_OPTIMIZER=sgd \
        "$py" "$top/scripts/lab/ddp_bench.py" --hook "$hook" --model resnet18 --steps 10 --warmup 5 >"$log" 2>&1 &
    mp=$!
    while kill -0 "$mp" 2>/dev/null && ! grep -q '^train_bench: ok' "$log"; do sleep 1; done
    what="exited"
    for _ in $(seq 20); do kill -0 "$mp" 2>/dev/null || break; sleep 1; done
    if kill -0 "$mp" 2>/dev/null; then
        what="HUNG (stacks-$i.txt)"
        hung=$((hung + 1))
        for p in $(pgrep -f ddp_bench.py); do
            [ "$(cat "/proc/$p/comm" 2>/dev/null)" = python ] || continue
            echo "=== pid $p"
            gdb -p "$p" -batch -ex "thread apply all bt 25" 2>/dev/null | grep -E '^#|^Thread'
        done >"$out/stacks-$i.txt"
        kill -TERM "$mp"; sleep 3; kill -KILL "$mp" 2>/dev/null; pkill -KILL -f ddp_bench.py
    fi
    wait "$mp" 2>/dev/null
    grep -q '^train_bench: ok' "$log" || what="$what, no figure (see run-$i.log)"
    echo "run $i: $what" | tee -a "$out/runs.txt"
    [ "$what" = exited ] && rm -f "$log"
done
echo "exit_check: $hung of $runs jobs did not exit (hook $hook)" | tee -a "$out/runs.txt"
