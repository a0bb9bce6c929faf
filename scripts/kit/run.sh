#!/bin/bash
# The device kit's run script: scripts/gpu-kit copies it into the kit as
# run.sh; the kit's RUN (one command) runs it from the root of a copy of the
# working tree on the lent machine:
#
#   bash gpu-kit/run.sh [OUTDIR]       (OUTDIR: $OUT, else gpu-kit-out/)
#
# The steps, in this order, each under its own limit within HP_KIT_BUDGET
# seconds (default 400: the kit has 7 minutes), each with a status line:
#   1-preflight.log  the driver's CUDA version against the kit's runtime,
#                    cuDeviceGetCount, CUDA IPC and stream memory operations
#                    between two processes (tests/gpu/kit/kit_preflight), the
#                    module loading and running its kernel (hipress_info
#                    --gpu), the NCCL functions this PyTorch imports against
#                    the IPC stand-in's exports (a difference stops the run
#                    before device time is spent), the machine and the kit
#   2-kern.log       every kernel bit for bit against the CPU (gpu_kern)
#   3-sanitizer.log  compute-sanitizer racecheck, synccheck and memcheck on
#                    a small case of every kernel
#   4-nccl.log       the compressed, stream-ordered ncclAllReduce at 2, 3
#                    and 4 processes on the GPU through the NCCL stand-in on
#                    CUDA IPC (kit_nccl), each call's result and residual the
#                    bits of the same call through the MPI path, recorded
#                    when the kit was made; MPI on cuMemAlloc'd buffers too
#   5-ddp.log        PyTorch DDP, 2 processes on the GPU, libhipress.so
#                    preloaded before the IPC stand-in: calls compressed,
#                    every bucket's allreduce within a bound of the exact
#                    (float64, uncompressed) sum, replicas identical
#   6-torchrun.log   the same under torchrun with libhipress_nccl.so, no
#                    Open MPI on the library path
#   7-kernels.log    hipress-bench --kernels --gpu: each kernel's throughput
#                    against the device-to-device copy
# and 0-summary.txt, one page (scripts/kit/summary.sh).  Without a GPU
# (no driver library, no /dev/nvidia*; or HP_KIT_NO_GPU=1) each device step
# says "skipped: needs a GPU" and its stand-in form runs (the stand-in CUDA
# driver, the emulated module, the stand-in NCCL on shared memory): what
# scripts/gpu-kit --selftest checks.  A step whose tool is missing (no
# python3 with a CUDA PyTorch, no compute-sanitizer) says SKIP with the
# reason, and the summary lists what was not proven.  A GPU that is there but unusable stops
# the run with a STOP line.  HP_KIT_STEPS=kern,sanitizer,nccl,ddp,kernels
# runs only those (ddp: DDP and torchrun) after the preflight.  Exit 0 when
# nothing failed.
set -u

kit=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:-${OUT:-$PWD/gpu-kit-out}}
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
summary=$out/0-summary.txt
: >"$summary"
work=$(mktemp -d "${TMPDIR:-/tmp}/hipress-kit-run.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
rec=$work/records
: >"$rec"
budget=${HP_KIT_BUDGET:-400}
t_start=$(date +%s)
failed=0

say() {
    echo "$*" | tee -a "$summary"
}
# record STATUS NAME SECONDS NOTE: a step's line (0-summary.txt as it goes,
# and the records the final page is made of)
record() {
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$rec"
    say "$(printf '%-4s  %-16s %5s  %s' "$1" "$2" "$3" "$4")"
    [ "$1" = FAIL ] && failed=1
    return 0
}
# target NAME STATE DETAIL: a line of the targets' block
target() {
    printf 'T\t%s\t%s\t%s\n' "$1" "$2" "$3" >>"$rec"
}
left() {
    echo $((budget - ($(date +%s) - t_start)))
}
# run NAME LOG LIMIT CMD...: CMD's output appended to LOG under
# min(LIMIT, the budget left); sets rc (124: over time, 99: no time) and dt
run() {
    local name=$1 log=$out/$2 limit=$3 l t0
    shift 3
    l=$(left)
    if [ "$l" -lt 15 ]; then
        rc=99 dt=0
        return 99
    fi
    [ "$limit" -gt "$l" ] && limit=$l
    echo "## $name: $* (limit ${limit}s)" >>"$log"
    t0=$(date +%s)
    timeout -k 10 "$limit" "$@" >>"$log" 2>&1
    rc=$?
    dt=$(($(date +%s) - t0))
    [ $rc -eq 137 ] && rc=124
    echo "## $name: exit $rc after ${dt}s" >>"$log"
    return $rc
}
# verdict NAME LOG OK-NOTE [CHECK...]: PASS with the note (or the check's
# $check_note) when rc is 0 and CHECK, a command, succeeds; else FAIL with
# why ($check_why for a failed check)
verdict() {
    local name=$1 log=$2 note=$3
    shift 3
    check_note=
    if [ $rc -eq 99 ]; then
        record SKIP "$name" - "out of time (budget ${budget}s)"
    elif [ $rc -eq 124 ]; then
        record FAIL "$name" "${dt}s" "over its time limit (see $log)"
    elif [ $rc -ne 0 ]; then
        record FAIL "$name" "${dt}s" "exit $rc (see $log)"
    elif [ $# -gt 0 ] && ! "$@"; then
        record FAIL "$name" "${dt}s" "$check_why (see $log)"
    else
        record PASS "$name" "${dt}s" "${check_note:-$note}"
        return 0
    fi
    return 1
}
check_why= check_note=
# section LOG NAME: the lines of NAME's run in LOG
section() {
    awk -v m="## $2:" 'index($0, "## ") == 1 { on = index($0, m) == 1 } on' "$out/$1"
}

# ------------------------------------------------------- the environment
ompi=$kit/ompi/usr
ompilib=$ompi/lib/x86_64-linux-gnu
export OPAL_PREFIX=$ompi OPAL_SYSCONFDIR=$kit/ompi/etc/openmpi
p=$ompilib/pmix2   # Debian's PMIx names its folders outright: each one set
export PMIX_PREFIX=$p PMIX_EXEC_PREFIX=$p PMIX_LIBDIR=$p/lib PMIX_PKGLIBDIR=$p/lib/pmix PMIX_DATAROOTDIR=$p/share \
    PMIX_DATADIR=$p/share PMIX_PKGDATADIR=$p/share/pmix PMIX_SYSCONFDIR=$p/share
export PMIX_MCA_mca_base_component_path=$p/lib/pmix
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PATH=$ompi/bin:$PATH
libs=$ompilib   # and, where the machine lacks zlib or libudev, the kit's copies
if LD_LIBRARY_PATH=$libs ldd "$ompilib/libopen-pal.so.40" "$ompilib/libmpi.so.40" 2>/dev/null | grep -q 'not found'; then
    libs=$libs:$kit/fallback
fi
base_ld=${LD_LIBRARY_PATH:-}
export LD_LIBRARY_PATH=$kit/lib:$libs${base_ld:+:$base_ld}
# one node, shared memory only, its files in $TMPDIR (not a small
# /dev/shm), no single-copy (it needs ptrace rights), the launcher local
mpirun="$ompi/bin/mpirun --oversubscribe --bind-to none --mca plm isolated --mca btl self,vader --mca pml ob1
    --mca btl_vader_single_copy_mechanism none --mca btl_vader_backing_directory ${TMPDIR:-/tmp}"
for v in $(env | sed -n 's/^\(HIPRESS_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
export HIPRESS_CUDA_MODULE=$kit/lib/libhipress_cuda.so
# the processes sharing the GPU: each stream its own hardware queue where
# possible (a stream waiting for a peer must not hold up another stream)
export CUDA_DEVICE_MAX_CONNECTIONS=32 HP_IPC_TIMEOUT=30 KIT_STREAM_TIMEOUT=30
need=$(sed -n 's/^cuda runtime needs: //p' "$kit/MANIFEST" 2>/dev/null)
standin=$kit/standin
emu=$standin/libhipress_cuda_emu.so
py=$(command -v python3)
# the machine's own library path only (none of the kit's folders: no Open MPI)
if [ -n "$base_ld" ]; then nompi_env=(env LD_LIBRARY_PATH="$base_ld"); else nompi_env=(env -u LD_LIBRARY_PATH); fi

printf 'H\thipress device kit %s, run %s on %s\n' "$(sed -n 's/^source: //p' "$kit/MANIFEST")" \
    "$(date -u '+%Y-%m-%d %H:%M UTC')" "$(hostname)" >>"$rec"
say "# hipress device kit $(sed -n 's/^source: //p' "$kit/MANIFEST"), run $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname)"

# ------------------------------------------------------------- preflight
plog=$out/1-preflight.log
{
    echo "## the kit"
    cat "$kit/MANIFEST"
    echo "## the machine"
    uname -a
    echo "glibc $(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')"
    ls -l /dev/nvidia* 2>&1 | head -n 8
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    [ -n "$py" ] && "$py" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -n 1
    echo "## relocated Open MPI"
    "$ompi/bin/mpirun" --version 2>&1 | head -n 1
} >>"$plog" 2>&1
gneed=$(sed -n 's/^glibc needed: //p' "$kit/MANIFEST")
ghave=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
if [ -n "$gneed" ] && [ -n "$ghave" ] && [ "$(printf '%s\n%s\n' "$gneed" "$ghave" | sort -V | head -n 1)" != "$gneed" ]; then
    record FAIL glibc - "the kit needs glibc $gneed, this machine has $ghave (build the kit on an older system)"
fi
gpu=0 ipc=0
if [ "${HP_KIT_NO_GPU:-0}" = 1 ]; then
    echo "preflight: no GPU: HP_KIT_NO_GPU=1" >>"$plog"
    rc=77
else
    run preflight 1-preflight.log 30 "$kit/bin/kit_preflight" --need "${need:-0}"
fi
pline=$(grep '^preflight: ' "$plog" | tail -n 1)
case $rc in
    0) gpu=1 ipc=1; record PASS preflight "${dt}s" "${pline#preflight: ok: }" ;;
    3) gpu=1; record FAIL preflight "${dt}s" "${pline#preflight: } (the multi-process steps cannot run)" ;;
    77) record SKIP preflight - "no GPU (${pline#preflight: no GPU: }): each device step is skipped, its stand-in form runs" ;;
    *) record FAIL preflight "${dt:-0}s" "STOP: ${pline#preflight: STOP: }"
       say "# STOP: a GPU is here but the kit cannot use it (1-preflight.log); nothing else runs"
       bash "$kit/summary.sh" "$rec" "$summary" >/dev/null 2>&1
       exit 1 ;;
esac
if [ $gpu = 1 ]; then
    run module 1-preflight.log 60 "$kit/bin/hipress_info" --gpu
    verdict module 1-preflight.log "libhipress_cuda.so loads and runs its kernel on the GPU" ||
        say "#     (the module's own report is in 1-preflight.log)"
else
    run preflight_standin 1-preflight.log 30 env LD_LIBRARY_PATH="$standin:$LD_LIBRARY_PATH" \
        "$kit/bin/kit_preflight" --need "${need:-0}"
    check_why="no stand-in device found"
    verdict preflight_standin 1-preflight.log "kit_preflight on the stand-in driver: $(section 1-preflight.log preflight_standin | grep '^preflight:' | tail -n 1)" \
        grep -q '^device 0: hipress mock device' "$plog"
fi

# ------------------------------------------- PyTorch's NCCL, before any device time
# PyTorch loads the IPC stand-in in NCCL's place only if the stand-in
# exports every NCCL function libtorch_cuda.so imports: compared here, by
# ddp.py --symbols (no torch imported), and a difference stops the run.
# torch_why: why the PyTorch steps cannot run (empty: they can)
torch_why=
want_ddp=0
case ,${HP_KIT_STEPS:-ddp}, in *,ddp,*) want_ddp=1 ;; esac
if [ $want_ddp = 1 ] && [ -z "$py" ]; then
    torch_why="no python3 on this machine"
    record SKIP nccl_imports - "$torch_why: the DDP and torchrun steps cannot run"
elif [ $want_ddp = 1 ]; then
    run nccl_imports 1-preflight.log 30 "$py" "$kit/ddp.py" --symbols "$kit/ipc/libnccl.so.2"
    line=$(section 1-preflight.log nccl_imports | grep '^nccl symbols: ' | tail -n 1)
    case $rc in
        0) record PASS nccl_imports "${dt}s" "PyTorch's NCCL imports: ${line#nccl symbols: }" ;;
        77) torch_why=${line#nccl symbols: }
            record SKIP nccl_imports - "$torch_why: the DDP and torchrun steps cannot run" ;;
        3) record FAIL nccl_imports "${dt}s" "STOP: ${line#nccl symbols: }: PyTorch would not load the IPC stand-in (export them from tests/gpu/ipc and make the kit again)"
           say "# STOP: the IPC stand-in lacks NCCL functions this PyTorch imports (1-preflight.log); nothing else runs"
           bash "$kit/summary.sh" "$rec" "$summary" "$gpu" >/dev/null 2>&1
           exit 1 ;;
        *) torch_why="the NCCL symbol check failed (exit $rc)"
           record FAIL nccl_imports "${dt}s" "exit $rc (see 1-preflight.log)" ;;
    esac
fi
if [ $gpu = 0 ] && [ -n "$py" ]; then
    # the check itself, on the kit's own files: kit_nccl's imports are all in
    # the IPC stand-in, and three of them are not in libhipress_nccl.so
    run imports_ok 1-preflight.log 30 "$py" "$kit/ddp.py" --symbols "$kit/ipc/libnccl.so.2" --torch-lib "$kit/bin/kit_nccl"
    c1=$rc
    run imports_missing 1-preflight.log 30 "$py" "$kit/ddp.py" --symbols "$kit/lib/libhipress_nccl.so" \
        --torch-lib "$kit/bin/kit_nccl"
    c2=$rc
    line=$(section 1-preflight.log imports_missing | grep '^nccl symbols: MISSING' | tail -n 1)
    rc=0
    check_why="the comparison passed the IPC stand-in with exit $c1, and libhipress_nccl.so with exit $c2 (want 0 and 3)"
    verdict imports_standin 1-preflight.log "the comparison itself: kit_nccl's imports all in the IPC stand-in; ${line#nccl symbols: } named" \
        eval '[ $c1 = 0 ] && [ $c2 = 3 ] && [ -n "$line" ]'
fi

# ------------------------------------------------------------------ kern
step_kern() {
local klog=2-kern.log ok
if [ $gpu = 1 ]; then
    run kern $klog 90 "$kit/bin/gpu_kern" --quick
    ok=$(grep '^gpu_kern: ok' "$out/$klog" | tail -n 1)
    check_why="no ok line"
    if verdict kern $klog "${ok#gpu_kern: ok, }" test -n "$ok"; then
        target "kernels bit-identical to the CPU" met "${ok#gpu_kern: ok, }"
    else
        target "kernels bit-identical to the CPU" "NOT MET" "see 2-kern.log"
    fi
else
    record SKIP kern - "skipped: needs a GPU"
    run kern_standin $klog 90 env LD_LIBRARY_PATH="$standin:$LD_LIBRARY_PATH" HIPRESS_CUDA_MODULE="$emu" \
        "$kit/bin/gpu_kern" --quick --small --only none,onebit,graddrop,fp16,ops
    ok=$(grep '^gpu_kern: ok' "$out/$klog" | tail -n 1)
    check_why="no ok line"
    verdict kern_standin $klog "the emulated module: ${ok#gpu_kern: ok, }" test -n "$ok"
    target "kernels bit-identical to the CPU" "not run" "no GPU"
fi
}

# ------------------------------------------------------------- sanitizer
step_sanitizer() {
local slog=$out/3-sanitizer.log san= notes= clean=1 refused=0 line c run_
if [ -f "$kit/sanitizer.tar.gz" ]; then
    mkdir -p "$work/san" && tar xzf "$kit/sanitizer.tar.gz" -C "$work/san" && san=$work/san/bin/compute-sanitizer
fi
[ -n "$san" ] || san=$(command -v compute-sanitizer 2>/dev/null)
for c in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
    [ -z "$san" ] && [ -x "$c" ] && san=$c
done
if [ -z "$san" ]; then
    record SKIP sanitizer - "no compute-sanitizer on this machine or in the kit"
    target "racecheck, synccheck and memcheck clean" "not run" "no compute-sanitizer"
elif [ $gpu = 1 ]; then
    echo "## $san: $("$san" --version 2>&1 | tail -n 1)" >>"$slog"
    # racecheck: shared-memory hazards between a block's threads; synccheck:
    # barriers some threads of a block miss; memcheck: out-of-bounds and
    # misaligned accesses to global and shared memory, and device-side
    # errors.  The sparse select first (its shared memory is the largest),
    # then the others in groups, each run under what is left of the tool's
    # time, so a slow run still covers the first ones
    for run_ in "racecheck 70 graddrop,dgc fp16,bf16,onebit,tbq,terngrad q2,q4,q8,none,ops" \
                "synccheck 30 graddrop,dgc,fp16,bf16,onebit,tbq,terngrad,q2,q4,q8,none,ops" \
                "memcheck 45 graddrop,dgc fp16,bf16,onebit,tbq,terngrad q2,q4,q8,none,ops"; do
        set -- $run_
        local tool=$1 t_end=$(($(date +%s) + $2)) done_= miss= lim g
        shift 2
        for g in "$@"; do
            lim=$((t_end - $(date +%s)))
            if [ $lim -lt 8 ]; then
                miss="$miss${miss:+,}$g"
                continue
            fi
            run "$tool($g)" 3-sanitizer.log $lim "$san" --tool "$tool" --error-exitcode 3 --print-limit 20 \
                "$kit/bin/gpu_kern" --quick --small --only "$g"
            line=$(section 3-sanitizer.log "$tool($g)" | grep 'ERROR SUMMARY\|RACECHECK SUMMARY' | tail -n 1)
            if section 3-sanitizer.log "$tool($g)" | grep -q 'Device not supported\|not supported on this'; then
                refused=1
                break
            elif [ $rc -eq 124 ] || [ $rc -eq 99 ]; then
                miss="$miss${miss:+,}$g"
            elif [ $rc -ne 0 ] || ! section 3-sanitizer.log "$tool($g)" | grep -q '^gpu_kern: ok'; then
                clean=0
                notes="$notes${notes:+; }$tool $g: ${line:-exit $rc}"
            else
                done_="$done_${done_:+,}$g"
            fi
        done
        [ -n "$done_" ] && notes="$notes${notes:+; }$tool clean: $done_"
        [ -n "$miss" ] && clean=0 && notes="$notes${notes:+; }$tool over its time, not checked (no finding): $miss"
    done
    if [ $refused = 1 ]; then
        record SKIP sanitizer - "compute-sanitizer refused this device (as on gVisor machines): $notes"
        target "racecheck, synccheck and memcheck clean" "not run" "the sanitizer cannot attach here"
    elif [ $clean = 1 ]; then
        record PASS sanitizer - "$notes"
        target "racecheck, synccheck and memcheck clean" met "$notes"
    else
        record FAIL sanitizer - "$notes (see 3-sanitizer.log)"
        target "racecheck, synccheck and memcheck clean" "NOT MET" "$notes"
    fi
else
    if "$san" --version >>"$slog" 2>&1; then
        record SKIP sanitizer - "skipped: needs a GPU ($(tail -n 1 "$slog" | tr -s ' ') runs here)"
    else
        record FAIL sanitizer - "$san does not run here (see 3-sanitizer.log)"
    fi
    target "racecheck, synccheck and memcheck clean" "not run" "no GPU"
fi
}

# ------------------------------------------------------------------ nccl
# kit_nccl NAME NP ENV...: NP processes on device 0 under libhipress_nccl.so
# with HIPRESS_NCCL=compress; every result line the MPI path's; the table of
# rank 0 (HIPRESS_STATS) counts every call compressed
nlog=4-nccl.log
identical=
kit_nccl() {
    local name=$1 np=$2 calls
    shift 2
    run "$name" $nlog 45 env "$@" LD_PRELOAD="$kit/lib/libhipress_nccl.so" HIPRESS_NCCL=compress HIPRESS_STATS=1 \
        "$kit/bin/nompi_launch" "$np" 40 "$kit/bin/kit_nccl" --ref "$kit/ref/kit-ref-$np.txt"
    calls=$(section $nlog "$name" | sed -n 's/^  nccl compressed  *\([0-9]*\)$/\1/p' | tail -n 1)
    check_why="no ok line, or ${calls:-no} of 30 calls compressed"
    verdict "$name" $nlog "$np processes: 30 compressed calls, every result and residual the MPI path's bits" \
        eval 'section $nlog "$name" | grep -q "^kit_nccl: ok, 30 ncclAllReduce calls at $np ranks" && [ "$calls" = 30 ]' &&
        identical="$identical${identical:+, }$np"
}
step_nccl() {
local np
if [ $gpu = 1 ] && [ $ipc = 0 ]; then
    record FAIL nccl_ipc - "needs CUDA IPC and stream memory operations: ${pline#*multi-process NO: }"
    target "the multi-process compressed call identical to the MPI path" "not run" "no CUDA IPC here"
elif [ $gpu = 1 ]; then
    for np in 2 3 4; do
        kit_nccl nccl_ipc_$np $np LD_LIBRARY_PATH="$kit/ipc:$LD_LIBRARY_PATH"
    done
    run mpi_device $nlog 45 $mpirun -np 4 -x LD_PRELOAD="$kit/lib/libhipress.so" -x HIPRESS_CUDA_MODULE \
        -x LD_LIBRARY_PATH "$kit/bin/kit_mpi" --device --ref "$kit/ref/kit-ref-4.txt"
    check_why="no ok line"
    verdict mpi_device $nlog "MPI_Allreduce on cuMemAlloc'd buffers at 4 ranks: the host path's bits" \
        eval 'section $nlog mpi_device | grep -q "^kit_mpi: ok"'
    if [ "$identical" = "2, 3, 4" ]; then
        target "the multi-process compressed call identical to the MPI path" met "2, 3 and 4 processes, 30 calls each"
    else
        target "the multi-process compressed call identical to the MPI path" "NOT MET" "identical at: ${identical:-none}"
    fi
else
    record SKIP nccl_ipc - "skipped: needs a GPU (the NCCL stand-in on CUDA IPC)"
    for np in 2 3 4; do
        kit_nccl nccl_standin_$np $np LD_LIBRARY_PATH="$kit/standin_nompi:$standin:$LD_LIBRARY_PATH" MOCK_NCCL_SHM=1 \
            HIPRESS_CUDA_MODULE="$emu"
    done
    run mpi_standin $nlog 60 $mpirun -np 4 -x LD_PRELOAD="$kit/lib/libhipress.so" -x HIPRESS_CUDA_MODULE="$emu" \
        -x LD_LIBRARY_PATH="$standin:$LD_LIBRARY_PATH" "$kit/bin/kit_mpi" --device --ref "$kit/ref/kit-ref-4.txt"
    check_why="no ok line"
    verdict mpi_standin $nlog "MPI_Allreduce on the stand-in driver's memory (the emulated module): the host path's bits" \
        eval 'section $nlog mpi_standin | grep -q "^kit_mpi: ok"'
    target "the multi-process compressed call identical to the MPI path" "not run" \
        "no GPU (the stand-in forms: identical at ${identical:-none} processes)"
fi
}

# ----------------------------------------------------- ddp and torchrun
# ddp_check NAME LOG [LIBRARY]: the ok line (replicas identical, every
# bucket's allreduce within the bound of the exact sum), calls compressed
# (rank 0's table), and with LIBRARY: hipress_library() said it and no
# libmpi mapped
ddp_check() {
    local name=$1 log=$2 want=${3:-} n
    n=$(section "$log" "$name" | sed -n 's/^  nccl compressed  *\([0-9]*\)$/\1/p' | tail -n 1)
    check_why="no ok line: $(section "$log" "$name" | grep -m 1 '^a WRONG ANSWER\|^replicas: DIFFER\|^a loss is not' ||
                             echo 'the run did not finish')"
    section "$log" "$name" | grep -q '^gpu_kit_ddp: ok' || return 1
    check_why="no exact check"
    section "$log" "$name" | grep -q '^exact check: [1-9]' || return 1
    check_why="hipress compressed ${n:-no} calls"
    [ "${n:-0}" -gt 0 ] || return 1
    check_why="hipress_library() is not $want, or a libmpi was mapped"
    [ -z "$want" ] || { section "$log" "$name" | grep -q "^hipress library: $want\$" &&
                        section "$log" "$name" | grep -q '^libmpi mapped: none$'; } || return 1
    check_note="$(section "$log" "$name" | sed -n 's/^gpu_kit_ddp: ok, //p' | tail -n 1); $n calls compressed${want:+, $want.so without libmpi}"
}
# a fixed plan (no exploration, no plain plan): every bucket's call
# compressed, by a near-lossless compressor (fp16 for DDP, bf16 for
# torchrun), so that ddp.py's exact check can hold each call to a tight
# bound (KIT_ERR_BOUND, 0.02): a wrong answer cannot hide in the
# compressor's own error
ddp_env=(HIPRESS_NCCL=compress HIPRESS_STATS=1 HIPRESS_ALGO=ring HIPRESS_ALLOW_PLAIN=0 HIPRESS_MIN_BYTES=64K
         MASTER_ADDR=127.0.0.1 PYTHONUNBUFFERED=1 KIT_ERR_BOUND=${KIT_ERR_BOUND:-0.02})
step_ddp() {
if [ $gpu = 1 ] && [ $ipc = 1 ] && [ -z "$torch_why" ]; then
    run ddp 5-ddp.log 90 env "${ddp_env[@]}" HIPRESS_COMPRESSOR=fp16 MASTER_PORT=$((29500 + $$ % 1000)) \
        LD_LIBRARY_PATH="$libs${base_ld:+:$base_ld}" LD_PRELOAD="$kit/lib/libhipress.so:$kit/ipc/libnccl.so.2" \
        "$kit/bin/nompi_launch" 2 85 "$py" "$kit/ddp.py"
    verdict ddp 5-ddp.log "" ddp_check ddp 5-ddp.log
    run torchrun 6-torchrun.log 80 "${nompi_env[@]}" "${ddp_env[@]}" HIPRESS_COMPRESSOR=bf16 \
        LD_PRELOAD="$kit/lib/libhipress_nccl.so:$kit/ipc/libnccl.so.2" KIT_CHECK_DIR="$work/torchrun" \
        "$py" -m torch.distributed.run --standalone --nproc_per_node 2 "$kit/ddp.py"
    verdict torchrun 6-torchrun.log "" ddp_check torchrun 6-torchrun.log libhipress_nccl
elif [ $gpu = 1 ] && [ $ipc = 0 ]; then
    record FAIL ddp - "needs CUDA IPC"
    record FAIL torchrun - "needs CUDA IPC"
elif [ $gpu = 1 ]; then
    record SKIP ddp - "$torch_why"
    record SKIP torchrun - "$torch_why"
else
    record SKIP ddp - "skipped: needs a GPU (PyTorch DDP over the IPC stand-in)"
    # the preload with only Open MPI's libraries, no MPI_Init: ncclAllReduce
    # seen from a local scope (the stand-in NCCL)
    run nccl_standin 5-ddp.log 60 env LD_LIBRARY_PATH="$standin:$libs${base_ld:+:$base_ld}" HIPRESS_STATS=1 \
        LD_PRELOAD="$kit/lib/libhipress.so" "$standin/nccl_local" "$standin"
    check_why="no ok line or no ncclAllReduce calls counted"
    verdict nccl_standin 5-ddp.log "the preload with Open MPI's libraries and no MPI_Init saw ncclAllReduce from a local scope" \
        eval 'section 5-ddp.log nccl_standin | grep -q "^nccl_local: ok" && section 5-ddp.log nccl_standin | grep -Eq "^  ncclAllReduce calls +[1-9]"'
    if [ -n "$py" ] && "$py" -c 'import torch' 2>/dev/null; then
        run ddp_standin 5-ddp.log 60 env MASTER_ADDR=127.0.0.1 MASTER_PORT=$((29500 + $$ % 1000)) \
            "$kit/bin/nompi_launch" 2 55 "$py" "$kit/ddp.py" --device cpu
        check_why="no ok line"
        verdict ddp_standin 5-ddp.log "ddp.py on the CPU (gloo), 2 processes: $(section 5-ddp.log ddp_standin | sed -n 's/^exact check: //p' | tail -n 1), replicas $(section 5-ddp.log ddp_standin | sed -n 's/^replicas: //p' | tail -n 1)" \
            eval 'section 5-ddp.log ddp_standin | grep -q "^gpu_kit_ddp: ok"'
        # the exact check must catch a wrong answer the replicas share
        run ddp_wrong 5-ddp.log 60 env MASTER_ADDR=127.0.0.1 MASTER_PORT=$((29501 + $$ % 1000)) \
            "$kit/bin/nompi_launch" 2 55 "$py" "$kit/ddp.py" --device cpu --corrupt
        if [ $rc -eq 0 ]; then
            record FAIL ddp_wrong "${dt}s" "a planted wrong answer (every result scaled by 1.1) passed the exact check"
        else
            [ $rc -ne 124 ] && [ $rc -ne 99 ] && rc=0   # it failed, as it must: why, below
            check_why="the planted wrong answer failed the run, but not by the exact check"
            verdict ddp_wrong 5-ddp.log "a planted wrong answer (every result scaled by 1.1, replicas identical) caught: $(section 5-ddp.log ddp_wrong | sed -n 's/^a WRONG ANSWER: //p' | tail -n 1)" \
                eval 'section 5-ddp.log ddp_wrong | grep -q "^a WRONG ANSWER: relative error" && section 5-ddp.log ddp_wrong | grep -q "^replicas: identical"'
        fi
    else
        record SKIP ddp_standin - "no python3 with PyTorch here"
    fi
    record SKIP torchrun - "skipped: needs a GPU"
    # the NCCL-only library with none of the kit's folders on the path
    run nompi_standin 6-torchrun.log 60 "${nompi_env[@]}" HIPRESS_STATS=1 LD_PRELOAD="$kit/lib/libhipress_nccl.so" \
        "$kit/standin_nompi/nompi_calls" all "$standin"
    check_why="no ok line or no ncclAllReduce calls counted"
    verdict nompi_standin 6-torchrun.log "libhipress_nccl.so without Open MPI on the path passed every nccl_calls case" \
        eval 'section 6-torchrun.log nompi_standin | grep -q "^nccl_calls: ok" && section 6-torchrun.log nompi_standin | grep -Eq "^  ncclAllReduce calls +[1-9]"'
fi
}

# --------------------------------------------------------------- kernels
klog=$out/7-kernels.log
# the targets (doc/dev/kit.md): ratio to the device-to-device copy
ratios() {
    awk -F, '/^#/ || /^## / { next } $2 == "encode" || $2 == "decode" {
        t = ""
        if ($1 == "tbq" || $1 == "fp16" || $1 == "bf16") t = 0.6
        else if ($1 == "onebit" || $1 == "terngrad") t = 0.4
        else if (($1 == "graddrop" || $1 == "dgc") && $2 == "encode") t = 0.2
        if ($2 == "decode" && $1 != "none") t = 0.5
        if (t == "") next
        printf "%s %s %.2f %s %s\n", $1, $2, $6, t, ($6 >= t ? "met" : "BELOW")
    }' "$klog"
}
step_kernels() {
local kind below all
if [ $gpu = 1 ]; then
    run kernels 7-kernels.log 75 "$kit/bin/hipress-bench" --kernels --gpu --bytes 256M --csv
    check_why="no rows"
    if verdict kernels 7-kernels.log "ratios to the device-to-device copy below" eval '[ -n "$(ratios)" ]'; then
        for kind in encode decode; do
            below=$(ratios | awk -v k=$kind '$2 == k && $5 == "BELOW" { printf "%s%s %s (want %s)", s, $1, $3, $4; s = ", " }')
            all=$(ratios | awk -v k=$kind '$2 == k { printf "%s%s %s", s, $1, $3; s = ", " }')
            target "$kind throughput against the copy" "$([ -z "$below" ] && echo met || echo BELOW)" \
                "${below:+below: $below; }$all"
        done
    else
        target "encode and decode throughput against the copy" "not run" "see 7-kernels.log"
    fi
else
    record SKIP kernels - "skipped: needs a GPU"
    run kernels_standin 7-kernels.log 60 env LD_LIBRARY_PATH="$standin:$LD_LIBRARY_PATH" HIPRESS_CUDA_MODULE="$emu" \
        "$kit/bin/hipress-bench" --kernels --gpu --bytes 1M --csv
    check_why="not every format timed"
    verdict kernels_standin 7-kernels.log "hipress-bench --kernels --gpu on the emulated module: every format timed" \
        eval '[ "$(grep -Ec "^(fp16|onebit|graddrop|dgc|tbq),(en|de)code," "$klog")" -eq 10 ]'
    target "encode and decode throughput against the copy" "not run" "no GPU"
fi
}

# HP_KIT_STEPS=kern,nccl,...: only those (the preflight always runs)
for st in kern sanitizer nccl ddp kernels; do
    case ,${HP_KIT_STEPS:-$st}, in
        *,$st,*) step_$st ;;
        *) record SKIP "$st" - "not asked for (HP_KIT_STEPS=$HP_KIT_STEPS)" ;;
    esac
done

printf 'H\t%s s of a budget of %s s; %s\n' "$(($(date +%s) - t_start))" "$budget" \
    "$([ $failed = 0 ] && echo 'nothing failed' || echo 'FAILURES: see the steps below')" >>"$rec"
bash "$kit/summary.sh" "$rec" "$summary" "$gpu" || say "# (summary.sh failed: this is the running record)"
cat "$summary"
exit $failed
