#!/bin/bash
# The device kit's run script: scripts/gpu-kit copies it into the kit as
# run.sh, and the kit's RUN (one command) runs it from the repository root
# of a copy of the working tree:
#
#   bash gpu-kit/run.sh [OUTDIR]       (OUTDIR: $OUT, else gpu-kit-out/)
#
# Everything it uses is in the kit: hipress built for sm_90 (binaries with
# $ORIGIN-relative library paths), the CUDA runtime the test programs link,
# Open MPI's runtime relocated (OPAL_PREFIX), hwloc, libevent, PMIx, a
# compute-sanitizer when one was carried, and the stand-ins.  Logs, at most
# eight files, the summary first:
#   0-summary.txt  one line per step (PASS, FAIL, SKIP) and the figures
#   1-driver.log   nvidia-smi, hipress_info --gpu, the machine (glibc,
#                  Python, PyTorch), the kit, the relocated Open MPI
#   2-kern.log     gpu_kern: every kernel bit for bit against the CPU
#   3-sanitizer.log compute-sanitizer racecheck, synccheck and memcheck on
#                  gpu_kern --quick --small (the sparse select first)
#   4-mpi.log      mpi_cuda_codec at 4 ranks on cudaMalloc'd buffers
#   5-torch.log    PyTorch (nccl backend, world size 1) under the preload:
#                  libhipress.so, then libhipress_nccl.so without Open MPI
#   6-kernels.log  hipress-bench --kernels --gpu: the CSV and the targets
#   7-mpi_bench.log tests/gpu/mpi_cuda_bench at 4 ranks: device and host speedups
# Without a GPU (nvidia-smi missing, failing or listing no GPU; or
# HP_KIT_NO_GPU=1) the steps that need the device say "skipped: needs a GPU"
# and their stand-in forms run instead (the stand-in CUDA driver, the
# emulated CUDA module, the stand-in NCCL): what scripts/gpu-kit --selftest
# checks.  HP_KIT_BUDGET (seconds, default 420) bounds all the steps
# together; each has its own timeout within it.  HP_KIT_FULL=1: gpu_kern
# without --quick.  Exit 0 when nothing failed.
set -u

kit=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:-${OUT:-$PWD/gpu-kit-out}}
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
summary=$out/0-summary.txt
: >"$summary"
budget=${HP_KIT_BUDGET:-420}
t_start=$(date +%s)
failed=0

say() {
    echo "$*" | tee -a "$summary"
}

# step NAME LOG LIMIT CMD...: CMD's output appended to LOG, under
# min(LIMIT, what is left of the budget); 0 pass, else fail (124: over time)
step() {
    local name=$1 log=$out/$2 limit=$3 left rc t0 dt
    shift 3
    left=$((budget - ($(date +%s) - t_start)))
    if [ "$left" -lt 15 ]; then
        say "SKIP  $name: out of time (budget ${budget}s)"
        return 99
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    echo "## $name: $* (limit ${limit}s)" >>"$log"
    t0=$(date +%s)
    timeout -k 10 "$limit" "$@" >>"$log" 2>&1
    rc=$?
    dt=$(($(date +%s) - t0))
    echo "## $name: exit $rc after ${dt}s" >>"$log"
    case $rc in
        0) say "PASS  $name (${dt}s)" ;;
        124|137) say "FAIL  $name: over ${limit}s (see $(basename "$log"))"; failed=1 ;;
        *) say "FAIL  $name (exit $rc, ${dt}s): see $(basename "$log")"; failed=1 ;;
    esac
    return $rc
}

# ------------------------------------------------------- the environment
ompi=$kit/ompi/usr
ompilib=$ompi/lib/x86_64-linux-gnu
export OPAL_PREFIX=$ompi OPAL_SYSCONFDIR=$kit/ompi/etc/openmpi
# Debian's PMIx names its folders outright: each one set
p=$ompilib/pmix2
export PMIX_PREFIX=$p PMIX_EXEC_PREFIX=$p PMIX_LIBDIR=$p/lib PMIX_PKGLIBDIR=$p/lib/pmix PMIX_DATAROOTDIR=$p/share \
    PMIX_DATADIR=$p/share PMIX_PKGDATADIR=$p/share/pmix PMIX_SYSCONFDIR=$p/share
# (its pmix-mca-params.conf names the components' folder outright too)
export PMIX_MCA_mca_base_component_path=$p/lib/pmix
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PATH=$ompi/bin:$PATH
# a system library Open MPI needs and the machine lacks (zlib, libudev):
# the kit's copy, after the machine's own
libs=$ompilib
if LD_LIBRARY_PATH=$libs ldd "$ompilib/libopen-pal.so.40" "$ompilib/libmpi.so.40" 2>/dev/null | grep -q 'not found'; then
    libs=$libs:$kit/fallback
fi
base_ld=${LD_LIBRARY_PATH:-}
export LD_LIBRARY_PATH=$kit/lib:$kit/cudart:$libs${base_ld:+:$base_ld}
# single node, no network, as root: shared memory only (its files in
# $TMPDIR, not a container's small /dev/shm; no single-copy, which needs
# ptrace rights), the launcher local
mpirun="$ompi/bin/mpirun --oversubscribe --bind-to none --mca plm isolated --mca btl self,vader --mca pml ob1
    --mca btl_vader_single_copy_mechanism none --mca btl_vader_backing_directory ${TMPDIR:-/tmp}"
for v in $(env | sed -n 's/^\(HIPRESS_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
export HIPRESS_CUDA_MODULE=$kit/lib/libhipress_cuda.so

gpu=0
if [ "${HP_KIT_NO_GPU:-0}" != 1 ] && command -v nvidia-smi >/dev/null 2>&1 &&
   nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    gpu=1
fi
ngpu=0
[ $gpu = 1 ] && ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')

say "# hipress device kit $(sed -n 's/^source: //p' "$kit/MANIFEST" 2>/dev/null), run $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname)"
say "# $( [ $gpu = 1 ] && echo "$ngpu GPU(s): the device steps run" || echo "no GPU (no nvidia-smi, or it lists none): the device steps are skipped, their stand-in forms run")"

# ------------------------------------------------------------- driver
drv=$out/1-driver.log
{
    echo "## the kit"
    cat "$kit/MANIFEST" 2>/dev/null
    echo "## the machine"
    uname -a
    echo "glibc $(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')"
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -n 1
    echo "## relocated Open MPI"
    "$ompi/bin/ompi_info" --path prefix --path libdir --path pkglibdir --path pkgdatadir 2>&1 | head -n 8
    "$ompi/bin/mpirun" --version 2>&1 | head -n 1
} >>"$drv" 2>&1
need=$(sed -n 's/^glibc needed: //p' "$kit/MANIFEST" 2>/dev/null)
have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
if [ -n "$need" ] && [ -n "$have" ] &&
   [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n 1)" != "$need" ]; then
    say "FAIL  glibc: the kit needs $need, this machine has $have (build the kit on an older system)"
    failed=1
fi
if [ $gpu = 1 ]; then
    step driver 1-driver.log 30 nvidia-smi
    say "#     $(nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)"
    # the module loads, finds the device and runs its kernel there
    step info 1-driver.log 60 "$kit/bin/hipress_info" --gpu
else
    say "SKIP  driver: skipped: needs a GPU ($(command -v nvidia-smi >/dev/null 2>&1 && echo 'nvidia-smi lists no GPU' || echo 'no nvidia-smi'))"
fi

# -------------------------------------------------------------- kern
quick=--quick
[ "${HP_KIT_FULL:-0}" = 1 ] && quick=
if [ $gpu = 1 ]; then
    step kern 2-kern.log 180 "$kit/bin/gpu_kern" $quick &&
        say "#     $(grep '^gpu_kern: ok' "$out/2-kern.log" | tail -n 1)"
else
    say "SKIP  kern: skipped: needs a GPU"
    LD_LIBRARY_PATH=$kit/standin:$LD_LIBRARY_PATH HIPRESS_CUDA_MODULE=$kit/standin/libhipress_cuda_emu.so \
        step kern_standin 2-kern.log 120 "$kit/bin/gpu_kern" --quick --small --only none,onebit,graddrop,fp16,ops &&
        say "#     the emulated module: $(grep '^gpu_kern: ok' "$out/2-kern.log" | tail -n 1)"
fi

# ---------------------------------------------------------------- mpi
# rank 0 prints "PROG: ok, N device calls"; HIPRESS_STATS must count the
# N calls as compressed on the GPU
mpi_check() {
    local prog=$1 log=$out/4-mpi.log n c s
    n=$(sed -n "s/^$prog: ok, \\([0-9]*\\) device calls.*/\\1/p" "$log" | tail -n 1)
    c=$(sed -n 's/^  compressed on the GPU  *\([0-9][0-9]*\).*/\1/p' "$log" | tail -n 1)
    s=$(sed -n 's/^  staged through host memory  *\([0-9][0-9]*\).*/\1/p' "$log" | tail -n 1)
    if [ -z "$n" ] || [ "$c" != "$n" ]; then
        say "FAIL  $prog: ${n:-no} device calls, ${c:-?} compressed on the GPU"
        failed=1
    else
        say "#     $prog at 4 ranks: $n device calls, all compressed on the GPU (${s:-?} staged)"
    fi
}
if [ $gpu = 1 ]; then
    step mpi 4-mpi.log 180 $mpirun -np 4 -x LD_PRELOAD="$kit/lib/libhipress.so" -x HIPRESS_STATS=1 \
        -x HIPRESS_CUDA_MODULE -x LD_LIBRARY_PATH "$kit/bin/mpi_cuda_codec" && mpi_check mpi_cuda_codec
else
    say "SKIP  mpi: skipped: needs a GPU (mpi_cuda_codec on cudaMalloc'd buffers)"
    LD_LIBRARY_PATH=$kit/standin:$LD_LIBRARY_PATH HIPRESS_CUDA_MODULE=$kit/standin/libhipress_cuda_emu.so \
        step mpi_standin 4-mpi.log 150 $mpirun -np 4 -x LD_PRELOAD="$kit/lib/libhipress.so" -x HIPRESS_STATS=1 \
        -x HIPRESS_CUDA_MODULE -x LD_LIBRARY_PATH "$kit/standin/mpi_gpu_codec" "$kit/standin/libcuda.so.1" &&
        mpi_check mpi_gpu_codec
fi

# -------------------------------------------------------------- torch
# the preload in a process without MPI: libhipress.so with only Open MPI's
# libraries on the path (it needs libmpi.so.40), not the kit's CUDA runtime;
# then the NCCL-only libhipress_nccl.so with none of the kit's libraries on
# the path (the machine's own only: no Open MPI), as under torchrun
tlog=$out/5-torch.log
# section STEP: the lines of STEP's run in the torch log
section() {
    awk -v m="## $1:" 'index($0, "## ") == 1 { on = index($0, m) == 1 } on' "$tlog"
}
# torch_check STEP MODE [LIBRARY]: the ok line, the preload saw every call,
# and (LIBRARY) hipress_library() said LIBRARY and no libmpi was mapped
torch_check() {
    local name=$1 mode=$2 want=${3:-} k n
    k=$(section "$name" | sed -n "s/^torch_check $mode: ok, \\([0-9]*\\) all_reduce calls.*/\\1/p" | tail -n 1)
    n=$(section "$name" | awk '/^  ncclAllReduce calls/ { v = $3 } END { print v }')
    if [ -z "$k" ]; then
        say "FAIL  $name: no ok line"
        failed=1
    elif [ -z "$n" ] || [ "$n" -lt "$k" ]; then
        say "FAIL  $name: the preload saw ${n:-no} ncclAllReduce calls of PyTorch's $k (PyTorch binds NCCL past the preload, or skips NCCL with one rank)"
        failed=1
    elif [ -n "$want" ] && ! section "$name" | grep -q "^hipress library: $want\$"; then
        say "FAIL  $name: hipress_library() is not $want"
        failed=1
    elif [ -n "$want" ] && ! section "$name" | grep -q '^libmpi mapped: none$'; then
        say "FAIL  $name: a libmpi was mapped"
        failed=1
    else
        say "#     $name: the preload saw $n ncclAllReduce calls ($k from the check), results exact${want:+, $want without libmpi}"
    fi
}
# the machine's own library path only (none of the kit's folders)
if [ -n "$base_ld" ]; then nompi_env=(env LD_LIBRARY_PATH="$base_ld"); else nompi_env=(env -u LD_LIBRARY_PATH); fi
if [ $gpu = 1 ]; then
    for mode in pass compress; do
        LD_LIBRARY_PATH="$libs${base_ld:+:$base_ld}" HIPRESS_STATS=1 HIPRESS_NCCL=$mode \
            MASTER_ADDR=127.0.0.1 MASTER_PORT=$((29500 + $$ % 1000)) RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 \
            step torch_$mode 5-torch.log 120 env LD_PRELOAD="$kit/lib/libhipress.so" python3 "$kit/torch_check.py" $mode &&
            torch_check torch_$mode $mode
    done
    for mode in pass compress; do
        HIPRESS_STATS=1 HIPRESS_NCCL=$mode \
            MASTER_ADDR=127.0.0.1 MASTER_PORT=$((29600 + $$ % 1000)) RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 \
            step torch_nompi_$mode 5-torch.log 120 "${nompi_env[@]}" LD_PRELOAD="$kit/lib/libhipress_nccl.so" \
            python3 "$kit/torch_check.py" $mode &&
            torch_check torch_nompi_$mode $mode libhipress_nccl
    done
    [ "$ngpu" -lt 2 ] && say "SKIP  nccl_ranks: one GPU cannot run multi-rank NCCL (a device per rank): the multi-rank NCCL figures wait for a machine with two or more GPUs"
else
    say "SKIP  torch: skipped: needs a GPU (PyTorch's nccl backend)"
    LD_LIBRARY_PATH="$kit/standin:$libs${base_ld:+:$base_ld}" HIPRESS_STATS=1 \
        step nccl_standin 5-torch.log 60 env LD_PRELOAD="$kit/lib/libhipress.so" "$kit/standin/nccl_local" "$kit/standin" &&
        if grep -q '^nccl_local: ok' "$tlog" && grep -Eq '^  ncclAllReduce calls +[1-9]' "$tlog"; then
            say "#     the preload, with the kit's Open MPI libraries and no MPI_Init, saw ncclAllReduce from a local scope (the stand-in NCCL)"
        else
            say "FAIL  nccl_standin: no ok line or no ncclAllReduce calls counted"
            failed=1
        fi
    # the NCCL-only library with none of the kit's folders on the path (no
    # Open MPI), over the stand-in NCCL built without MPI
    HIPRESS_STATS=1 step nompi_standin 5-torch.log 60 "${nompi_env[@]}" LD_PRELOAD="$kit/lib/libhipress_nccl.so" \
        "$kit/standin_nompi/nompi_calls" all "$kit/standin" &&
        if section nompi_standin | grep -q '^nccl_calls: ok' &&
           section nompi_standin | grep -Eq '^  ncclAllReduce calls +[1-9]'; then
            say "#     libhipress_nccl.so, without Open MPI on the library path, passed every nccl_calls case (the stand-in NCCL without MPI)"
        else
            say "FAIL  nompi_standin: no ok line or no ncclAllReduce calls counted"
            failed=1
        fi
    say "SKIP  nccl_ranks: one GPU cannot run multi-rank NCCL (a device per rank): the multi-rank NCCL figures wait for a machine with two or more GPUs"
fi

# ------------------------------------------------------------ kernels
klog=$out/6-kernels.log
if [ $gpu = 1 ]; then
    if step kernels 6-kernels.log 150 "$kit/bin/hipress-bench" --kernels --gpu --bytes 256M --csv; then
        # the targets (doc/gpu.md): ratio to the device-to-device copy
        awk -F, '/^#/ || /^## / { next } $2 == "encode" || $2 == "decode" {
            t = ""
            if ($1 == "tbq" || $1 == "fp16" || $1 == "bf16") t = 0.6
            else if ($1 == "tbq-b65536" || $1 == "onebit" || $1 == "onebit-noef" || $1 == "terngrad") t = 0.4
            else if (($1 == "graddrop" || $1 == "dgc") && $2 == "encode") t = 0.2
            if ($2 == "decode" && $1 != "none" && (t == "" || t < 0.5)) t = 0.5
            if (t == "") { printf "#     %-12s %-6s %6.2f of the copy (%.0f GB/s)\n", $1, $2, $6, $4; next }
            printf "#     %-12s %-6s %6.2f of the copy (%.0f GB/s), target %.1f: %s\n", $1, $2, $6, $4, t,
                   ($6 >= t ? "met" : "BELOW")
        }' "$klog" | tee -a "$summary"
    fi
else
    say "SKIP  kernels: skipped: needs a GPU"
    LD_LIBRARY_PATH=$kit/standin:$LD_LIBRARY_PATH HIPRESS_CUDA_MODULE=$kit/standin/libhipress_cuda_emu.so \
        step kernels_standin 6-kernels.log 60 "$kit/bin/hipress-bench" --kernels --gpu --bytes 1M --csv &&
        if [ "$(grep -Ec '^(fp16|onebit|graddrop|dgc|tbq),(en|de)code,' "$klog")" -eq 10 ]; then
            say "#     hipress-bench --kernels --gpu on the emulated module: $(grep -Ec ',(en|de)code,' "$klog") rows"
        else
            say "FAIL  kernels_standin: not every format timed"
            failed=1
        fi
fi

# ---------------------------------------------------------- sanitizer
san=
if [ -f "$kit/sanitizer.tar.gz" ]; then
    sandir=${TMPDIR:-/tmp}/hipress-kit-sanitizer.$$
    mkdir -p "$sandir" && tar xzf "$kit/sanitizer.tar.gz" -C "$sandir" && san=$sandir/bin/compute-sanitizer
fi
[ -n "$san" ] || san=$(command -v compute-sanitizer 2>/dev/null)
for c in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
    [ -z "$san" ] && [ -x "$c" ] && san=$c
done
slog=$out/3-sanitizer.log
if [ -z "$san" ]; then
    say "SKIP  sanitizer: no compute-sanitizer on this machine or in the kit"
elif [ $gpu = 1 ]; then
    echo "## $san: $("$san" --version 2>&1 | tail -n 1)" >>"$slog"
    # the sparse select (k_sparse_select: graddrop, dgc) first: the race fix
    # (racecheck: shared-memory hazards; synccheck: barriers some threads
    # of a block miss; memcheck: out-of-bounds and misaligned accesses)
    all=none,onebit,tbq,terngrad,q2,q4,q8,graddrop,dgc,fp16,bf16,ops
    for run in "racecheck graddrop,dgc 150" "synccheck graddrop,dgc 60" "memcheck $all 120" \
               "racecheck none,onebit,tbq,terngrad,q2,q4,q8,fp16,bf16,ops 90"; do
        set -- $run
        before=$(wc -l <"$slog")
        step "$1($2)" 3-sanitizer.log "$3" "$san" --tool "$1" --error-exitcode 3 --print-limit 20 \
            "$kit/bin/gpu_kern" --quick --small --only "$2"
        line=$(tail -n +"$((before + 1))" "$slog" | grep 'ERROR SUMMARY\|RACECHECK SUMMARY' | tail -n 1)
        [ -n "$line" ] && say "#     $line"
    done
else
    if "$san" --version >>"$slog" 2>&1; then
        say "SKIP  sanitizer: skipped: needs a GPU ($(tail -n 1 "$slog" | tr -s ' ') runs here)"
    else
        say "FAIL  sanitizer: $san does not run here (see 3-sanitizer.log)"
        failed=1
    fi
fi
[ -n "${sandir:-}" ] && rm -rf "$sandir"

# ---------------------------------------------------------- mpi_bench
if [ $gpu = 1 ]; then
    blog=$out/7-mpi_bench.log
    for c in onebit tbq; do
        step "mpi_bench($c)" 7-mpi_bench.log 120 $mpirun -np 4 -x LD_PRELOAD="$kit/lib/libhipress.so" \
            -x HIPRESS_CUDA_MODULE -x LD_LIBRARY_PATH "$kit/bin/mpi_cuda_bench" -c $c -b 64M -e 64M -n 5 -w 16
    done
    grep -E '^[0-9]' "$blog" 2>/dev/null | awk -F, '{ printf "#     %-8s %5d MiB: device %.2fx (%.1f -> %.1f ms), host %.2fx (%.1f -> %.1f ms): %s\n",
        $2, $1 / 1048576, $8, $6, $7, $5, $3, $4, ($8 >= $5 ? "device >= host" : "DEVICE BELOW HOST") }' | tee -a "$summary"
else
    say "SKIP  mpi_bench: skipped: needs a GPU"
fi

say "# $(($(date +%s) - t_start)) s in all; $( [ $failed = 0 ] && echo 'nothing failed' || echo 'FAILURES above'); logs in $out"
exit $failed
