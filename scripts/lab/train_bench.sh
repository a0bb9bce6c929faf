#!/bin/bash
# End-to-end training speed on the emulated cluster (scripts/cluster.sh),
# hipress against what PyTorch users already have, side by side: images per
# second of ResNet-18 (or the digits MLP) under PyTorch DDP (its own
# allreduce and its hooks), Horovod (plain and its own fp16), hipress through
# Horovod and hipress through its DDP comm hook, and the compute floor.
#
#   scripts/lab/train_bench.sh [options] -o OUTDIR
#   scripts/lab/train_bench.sh --quick -o /tmp/tb      # a few steps, 1 repeat: checks the set-up only
#
# Each repeat starts one fresh cluster of H hosts per link rate (its links
# prove their rate first) and runs every model under every configuration
# there, one mpirun each, 4 ranks, one a host by default:
#
#   ddp-floor          DDP with a hook that returns each bucket at once: the
#                      exchange skipped, the compute floor (scripts/lab/ddp_bench.py)
#   ddp                DDP over gloo, its own allreduce (no hook)
#   ddp-fp16           DDP's fp16_compress_hook: the anchor of the ratios
#   ddp-powersgd       DDP's powerSGD_hook (rank 4)
#   ddp-hipress-C      hipress.torch.allreduce_hook, HIPRESS_COMPRESSOR=C
#   plain              Horovod, its default fusion (scripts/lab/train_bench.py;
#                      HOROVOD_CPU_OPERATIONS=MPI, gradients zeroed in place)
#   plain-nofusion     Horovod, HOROVOD_FUSION_THRESHOLD=0
#   hvd-fp16           hvd.Compression.fp16
#   hipress-C-fusion   libhipress.so under Horovod's default fusion (the
#                      README's recipe), HIPRESS_COMPRESSOR=C
#   hipress-C          the same with HOROVOD_FUSION_THRESHOLD=0
#   hipress-C-group1   the same with groups=1 (one fused buffer a step)
#   any of them:VAR=VAL[,VAR=VAL]   with more -x settings
#                      (e.g. ddp-hipress-onebit:HIPRESS_OPTIMIZER=sgd)
#
# OUTDIR gets raw.csv (every run: images/s, s/step, the first steps' time,
# CPU seconds a step, hipress' calls and bytes, the load average before the
# run), runs.log (every run's output), checks.txt (the link checks),
# summary.csv and summary.md (per rate, model and configuration: the median
# images/s over the repeats, each repeat, the ratio of medians to DDP's fp16
# hook (plain Horovod where it did not run) and to the floor, the first
# steps against as many steady ones, CPU per step) and train_bench.png.
# A run's timed figure is its timed steps only (after --warmup steps, which
# are timed apart: the plan's measurements happen there), between two
# barriers, not Python's start-up.
#
# Options:
#   --hosts H (4)  --ranks-per-host R (1)  --rates "RATE ..." (1gbit)  --repeats N (3)
#   --models "resnet18"  --steps N (30)  --warmup N (20)
#   --configs "ddp-floor ddp ddp-fp16 ..."   (default: every peer and hipress with onebit)
#   --quick        steps 3, warmup 2, 1 repeat: validates the set-up, times nothing
#   --venv DIR     the Horovod venv (default /opt/hipress-horovod; scripts/install_horovod.sh)
# Needs a build in HP_BUILDDIR (default ./_build), root (cluster.sh), and a
# venv with Horovod and torchvision (scripts/install_horovod.sh installs both).
# Run it on a quiet machine: the floor is the two cores' compute, and every
# other job moves it.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
self=$(readlink -f "$0")

hosts=4 rph=1 rates=1gbit repeats=3 steps=30 warmup=20 models="resnet18"
configs="ddp-floor ddp ddp-fp16 ddp-powersgd plain hvd-fp16 hipress-onebit-fusion ddp-hipress-onebit:HIPRESS_OPTIMIZER=sgd"
venv=${HP_HOROVOD_VENV:-/opt/hipress-horovod}
out= in_cluster=0 rate=
while [ $# -gt 0 ]; do
    case "$1" in
    --hosts) hosts=$2; shift 2 ;;
    --ranks-per-host) rph=$2; shift 2 ;;
    --rates | --rate) rates=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --quick) steps=3 warmup=2 repeats=1; shift ;;
    --venv) venv=$2; shift 2 ;;
    -o) out=$2; shift 2 ;;
    --in-cluster) in_cluster=$2 rate=$3; shift 3 ;;
    -h | --help) sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "train_bench: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
[ -n "$out" ] || { echo "train_bench: -o OUTDIR is required" >&2; exit 2; }
builddir=${HP_BUILDDIR:-$top/_build}
lib=$builddir/.libs/libhipress.so
py=$venv/bin/python

# config_args SPEC: the mpirun -x settings, the worker and its options of a
# configuration, into xs[], worker and ws[]; 1 for an unknown name
config_args() {
    local spec=$1 name extra c
    name=${spec%%:*}
    xs=() ws=() worker=$top/scripts/lab/train_bench.py
    case "$name" in
    ddp-floor | ddp | ddp-fp16 | ddp-powersgd | ddp-hipress-*)
        worker=$top/scripts/lab/ddp_bench.py
        xs=(-x MASTER_ADDR="${HP_CLUSTER_HOSTNAMES%% *}")
        case "$name" in
        ddp-floor) ws=(--hook floor) ;;
        ddp) ws=(--hook none) ;;
        ddp-fp16) ws=(--hook fp16) ;;
        ddp-powersgd) ws=(--hook powersgd) ;;
        ddp-hipress-*)
            c=${name#ddp-hipress-}
            ws=(--hook hipress)
            xs+=(-x PYTHONPATH="$top/src/python" -x LD_PRELOAD="$lib" -x HIPRESS_COMPRESSOR="$c" -x HIPRESS_STATS=1)
            ;;
        esac
        ;;
    plain) xs=(-x HOROVOD_CPU_OPERATIONS=MPI) ;;
    plain-nofusion) xs=(-x HOROVOD_CPU_OPERATIONS=MPI -x HOROVOD_FUSION_THRESHOLD=0) ;;
    hvd-fp16) xs=(-x HOROVOD_CPU_OPERATIONS=MPI) ws=(--hvd-fp16) ;;
    hipress-*)
        c=${name#hipress-}
        xs=(-x HOROVOD_CPU_OPERATIONS=MPI)
        case "$c" in
        *-fusion) c=${c%-fusion} ;;
        *-group1) c=${c%-group1}; ws+=(--groups1) ;;
        *) xs+=(-x HOROVOD_FUSION_THRESHOLD=0) ;;
        esac
        [ -n "$c" ] || return 1
        xs+=(-x LD_PRELOAD="$lib" -x HIPRESS_COMPRESSOR="$c" -x HIPRESS_STATS=1)
        ;;
    *) return 1 ;;
    esac
    if [ "$spec" != "$name" ]; then
        IFS=, read -r -a extra <<<"${spec#*:}"
        for c in "${extra[@]}"; do xs+=(-x "$c"); done
    fi
    return 0
}

# ------------------------------------------------------------ on the head
if [ "$in_cluster" != 0 ]; then
    rep=$in_cluster
    for m in $models; do
        for spec in $configs; do
            config_args "$spec"
            load=$(cut -d' ' -f1 /proc/loadavg)
            log=$(mktemp)
            t0=$(date +%s)
            mpirun $HP_CLUSTER_MPIRUN_ARGS "${xs[@]}" "$py" "$worker" --model "$m" --steps "$steps" \
                --warmup "$warmup" "${ws[@]}" >"$log" 2>&1 &
            mp=$! hung=
            # a job that printed its figure but does not exit within 60 s is
            # stopped; its figure stands, and runs.log says so (ddp_bench.py
            # frees DDP before its process group, which ended torch 1.13's
            # deadlock at exit that did this about one run in ten)
            while kill -0 "$mp" 2>/dev/null; do
                if grep -q '^train_bench: ok' "$log"; then
                    for _ in $(seq 60); do kill -0 "$mp" 2>/dev/null || break; sleep 1; done
                    if kill -0 "$mp" 2>/dev/null; then
                        hung=" (its exit hung: stopped 60 s after its figure)"
                        kill -TERM "$mp"; sleep 5; kill -KILL "$mp" 2>/dev/null
                    fi
                    break
                fi
                sleep 1
            done
            wait "$mp"
            rc=$?
            wall=$(($(date +%s) - t0))
            line=$(grep '^train_bench: ok' "$log" | tail -1)
            num() { sed -n "s|.*, $1 \([0-9.][0-9.]*\).*|\1|p" <<<"$line"; }
            sent=$(sed -n 's/^  bytes  *\([0-9.]*\) MiB raw, \([0-9.]*\) MiB sent.*/\1,\2/p' "$log" | head -1)
            [ -n "$sent" ] || sent=,
            # why a run failed: a library's own check (gloo's enforce, the
            # root cause where one rank aborts), else the worker's FAIL line
            why=$(grep -oE '[A-Za-z_./]+\.(cc|cpp|c):[0-9]+\] .*' "$log" | grep -vm1 'Read error\|Connection reset\|closed')
            [ -n "$why" ] || why=$(grep -m1 '^FAIL' "$log")
            why=$(printf '%s' "$why" | tr ',"' ';'"'" | cut -c1-160)
            echo "$rep,$m,\"$spec\",$rate,$hosts,$rph,$(num ranks),$(num batch),$(num steps),$(num s/step),$(num images/s),$(num 'warmup [0-9]* steps'),$(num cpu/step),$(num "hipress calls"),$(sed -n "s|.* calls [0-9]* compressed \([0-9]*\).*|\1|p" <<<"$line"),$sent,$load,$wall,$([ -n "$line" ] && echo ok || echo "\"fail $rc ${why#FAIL: }\"")" >>"$out/raw.csv"
            { echo "=== repeat $rep $rate $m $spec (exit $rc, $wall s)$hung"; cat "$log"; } >>"$out/runs.log"
            echo "train_bench: repeat $rep $rate $m $spec: ${line:-FAILED (exit $rc), see runs.log}" >&2
            [ -n "$line" ] || tail -15 "$log" | sed 's/^/    /' >&2
            rm -f "$log"
        done
    done
    exit 0
fi

# ------------------------------------------------------------ the driver
[ -f "$lib" ] || { echo "train_bench: build first ($lib)" >&2; exit 2; }
[ -x "$py" ] || { echo "train_bench: no Horovod venv at $venv (scripts/install_horovod.sh)" >&2; exit 2; }
"$py" -c 'import horovod.torch, torchvision, sklearn' 2>/dev/null ||
    { echo "train_bench: $py cannot import horovod.torch, torchvision and sklearn (scripts/install_horovod.sh)" >&2; exit 2; }
HP_CLUSTER_HOSTNAMES="h1"
for spec in $configs; do
    config_args "$spec" || { echo "train_bench: unknown configuration '$spec'" >&2; exit 2; }
done
for m in $models; do
    case "$m" in resnet18 | mlp) ;; *) echo "train_bench: unknown model '$m'" >&2; exit 2 ;; esac
done
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
[ -f "$out/raw.csv" ] ||
    echo "repeat,model,config,rate,hosts,ranks_per_host,ranks,batch,steps,s_per_step,images_per_s,warmup_s,cpu_per_step,hipress_calls,hipress_compressed,raw_mib,sent_mib,load_before,wall_s,status" >"$out/raw.csv"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for r in $(seq 1 "$repeats"); do
    for crate in $rates; do
        # a link check that fails (the machine too busy just now) is tried again
        for try in 1 2 3 4 5; do
            "$top/scripts/cluster.sh" --hosts "$hosts" --ranks-per-host "$rph" --rate "$crate" --quiet -- \
                "$BASH" "$self" --hosts "$hosts" --ranks-per-host "$rph" --models "$models" \
                --steps "$steps" --warmup "$warmup" --configs "$configs" --venv "$venv" -o "$out" \
                --in-cluster "$r" "$crate" 2> >(tee -a "$out/cluster.log" >&2)
            rc=$?
            [ $rc -eq 3 ] || break
            echo "train_bench: repeat $r ($crate): link check failed (try $try), again in 20 s" >&2
            sleep 20
        done
        [ $rc -eq 0 ] || { echo "train_bench: repeat $r ($crate): cluster.sh exit status $rc" >&2; exit 1; }
    done
done
sleep 0.5
grep 'link check' "$out/cluster.log" >"$out/checks.txt"
/usr/bin/python3 "$top/scripts/lab/train_summary.py" "$out" "$hosts" "$rph" "$steps" "$warmup"
