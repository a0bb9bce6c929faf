#!/bin/bash
# End-to-end training speed under Horovod on the emulated cluster
# (scripts/cluster.sh): images per second of ResNet-18 and of the digits MLP,
# plain Horovod against Horovod's own fp16 and hipress per compressor.
#
#   scripts/lab/train_bench.sh [options] -o OUTDIR
#   scripts/lab/train_bench.sh --quick -o /tmp/tb      # a few steps, 1 repeat: checks the set-up only
#
# Each repeat starts two fresh clusters of H hosts (their links prove their
# rate first): one without a rate limit for the floor, one at RATE for the
# other configurations, and runs every model under every configuration there,
# one mpirun each (scripts/lab/train_bench.py: 4 ranks, one a host by default,
# HOROVOD_CPU_OPERATIONS=MPI, gradients zeroed in place):
#
#   floor                 plain Horovod (fusion on), no rate limit: the compute floor
#   plain                 plain Horovod, its default fusion
#   plain-nofusion        plain Horovod, HOROVOD_FUSION_THRESHOLD=0
#   hvd-fp16              hvd.Compression.fp16 (fusion on)
#   hipress-C             libhipress.so, HIPRESS_COMPRESSOR=C, its recommended
#                         recipe (README: HOROVOD_FUSION_THRESHOLD=0)
#   hipress-C-fusion      the same with Horovod's default fusion
#   hipress-C-group1      the same with groups=1 (one fused buffer a step)
#   hipress-C...:VAR=VAL[,VAR=VAL]   any of these with more -x settings
#                         (e.g. hipress-onebit:HIPRESS_ALGO=ps)
#
# OUTDIR gets raw.csv (every run: images/s, s/step, hipress' calls and bytes,
# the load average before the run), runs.log (every run's output),
# checks.txt (the link checks), summary.csv and summary.md (per model and
# configuration: the median images/s over the repeats, the runs, and the
# ratio of medians to plain with fusion on) and train_bench.png (the medians,
# each repeat as a dot).  The timed figure of a run is its timed steps only
# (after the warm-up steps, between two barriers), not Python's start-up.
#
# Options:
#   --hosts H (4)  --ranks-per-host R (1)  --rate RATE (1gbit)  --repeats N (3)
#   --models "resnet18 mlp"  --steps N (30)  --warmup N (5)
#   --configs "floor plain plain-nofusion hvd-fp16 hipress-onebit ... hipress-powersgd-fusion"
#   --quick        steps 3, warmup 1, 1 repeat: validates the set-up, times nothing
#   --venv DIR     the Horovod venv (default /opt/hipress-horovod; scripts/install_horovod.sh)
# Needs a build in HP_BUILDDIR (default ./_build), root (cluster.sh), and a
# venv with Horovod and torchvision (scripts/install_horovod.sh installs both).
# Run it on a quiet machine: the floor is the two cores' compute, and every
# other job moves it.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
self=$(readlink -f "$0")

hosts=4 rph=1 rate=1gbit repeats=3 steps=30 warmup=5 models="resnet18 mlp"
comps="onebit tbq fp16 powersgd"
configs="floor plain plain-nofusion hvd-fp16"
for c in $comps; do configs="$configs hipress-$c"; done
for c in $comps; do configs="$configs hipress-$c-fusion"; done
venv=${HP_HOROVOD_VENV:-/opt/hipress-horovod}
out= in_cluster=0 phase=
while [ $# -gt 0 ]; do
    case "$1" in
    --hosts) hosts=$2; shift 2 ;;
    --ranks-per-host) rph=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --quick) steps=3 warmup=1 repeats=1; shift ;;
    --venv) venv=$2; shift 2 ;;
    -o) out=$2; shift 2 ;;
    --in-cluster) in_cluster=$2 phase=$3; shift 3 ;;
    -h | --help) sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "train_bench: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
[ -n "$out" ] || { echo "train_bench: -o OUTDIR is required" >&2; exit 2; }
builddir=${HP_BUILDDIR:-$top/_build}
lib=$builddir/.libs/libhipress.so
py=$venv/bin/python
worker=$top/scripts/lab/train_bench.py

# config_args NAME: the mpirun -x settings and worker options of a
# configuration, into xs[] and ws[]; 1 for an unknown name
config_args() {
    local spec=$1 name extra c
    name=${spec%%:*}
    xs=(-x HOROVOD_CPU_OPERATIONS=MPI) ws=()
    case "$name" in
    floor | plain) ;;
    plain-nofusion) xs+=(-x HOROVOD_FUSION_THRESHOLD=0) ;;
    hvd-fp16) ws+=(--hvd-fp16) ;;
    hipress-*)
        c=${name#hipress-}
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
            # the floor runs on the unlimited cluster, everything else on the limited one
            if [ "$spec" = floor ]; then [ "$phase" = off ] || continue; else [ "$phase" = on ] || continue; fi
            config_args "$spec"
            load=$(cut -d' ' -f1 /proc/loadavg)
            log=$(mktemp)
            t0=$(date +%s)
            mpirun $HP_CLUSTER_MPIRUN_ARGS "${xs[@]}" "$py" "$worker" --model "$m" --steps "$steps" \
                --warmup "$warmup" "${ws[@]}" >"$log" 2>&1
            rc=$?
            wall=$(($(date +%s) - t0))
            line=$(grep '^train_bench: ok' "$log" | tail -1)
            num() { sed -n "s|.* $1 \([0-9.][0-9.]*\).*|\1|p" <<<"$line"; }
            sent=$(sed -n 's/^  bytes  *\([0-9.]*\) MiB raw, \([0-9.]*\) MiB sent.*/\1,\2/p' "$log" | head -1)
            [ -n "$sent" ] || sent=,
            r=$([ "$spec" = floor ] && echo off || echo "$rate")
            echo "$rep,$m,\"$spec\",$r,$hosts,$rph,$(num ranks),$(num batch),$(num steps),$(num s/step),$(num images/s),$(num calls),$(num compressed),$sent,$load,$wall,$([ -n "$line" ] && echo ok || echo "fail $rc")" >>"$out/raw.csv"
            { echo "=== repeat $rep $m $spec (exit $rc, $wall s)"; cat "$log"; } >>"$out/runs.log"
            echo "train_bench: repeat $rep $m $spec: ${line:-FAILED (exit $rc), see runs.log}" >&2
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
for spec in $configs; do
    config_args "$spec" || { echo "train_bench: unknown configuration '$spec'" >&2; exit 2; }
done
for m in $models; do
    case "$m" in resnet18 | mlp) ;; *) echo "train_bench: unknown model '$m'" >&2; exit 2 ;; esac
done
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
[ -f "$out/raw.csv" ] ||
    echo "repeat,model,config,rate,hosts,ranks_per_host,ranks,batch,steps,s_per_step,images_per_s,hipress_calls,hipress_compressed,raw_mib,sent_mib,load_before,wall_s,status" >"$out/raw.csv"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
has_floor=0
for spec in $configs; do [ "$spec" = floor ] && has_floor=1; done
for r in $(seq 1 "$repeats"); do
    for phase in off on; do
        if [ $phase = off ]; then
            [ $has_floor = 1 ] || continue
            crate=off
        else
            crate=$rate
        fi
        # a link check that fails (the machine too busy just now) is tried again
        for try in 1 2 3 4 5; do
            "$top/scripts/cluster.sh" --hosts "$hosts" --ranks-per-host "$rph" --rate "$crate" --quiet -- \
                "$BASH" "$self" --hosts "$hosts" --ranks-per-host "$rph" --rate "$rate" --models "$models" \
                --steps "$steps" --warmup "$warmup" --configs "$configs" --venv "$venv" -o "$out" \
                --in-cluster "$r" "$phase" 2> >(tee -a "$out/cluster.log" >&2)
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

# medians over the repeats, the ratios, the plot
/usr/bin/python3 - "$out" "$hosts" "$rph" "$rate" "$steps" "$warmup" <<'EOF'
import csv, statistics, sys
out, hosts, rph, rate, steps, warmup = sys.argv[1:]
rows = [r for r in csv.DictReader(open(f"{out}/raw.csv"))]
order, groups = [], {}
for r in rows:
    k = (r["model"], r["config"])
    if k not in groups:
        order.append(k)
    groups.setdefault(k, []).append(r)
# per model (in the order they ran), the configurations in the order they ran
mods = list(dict.fromkeys(m for m, _ in order))
cfgs = list(dict.fromkeys(c for _, c in order if c == "floor")) + \
    list(dict.fromkeys(c for _, c in order if c != "floor"))
order.sort(key=lambda k: (mods.index(k[0]), cfgs.index(k[1])))
summary = []
for k in order:
    g = groups[k]
    ok = [float(r["images_per_s"]) for r in g if r["status"] == "ok" and r["images_per_s"]]
    sps = [float(r["s_per_step"]) for r in g if r["status"] == "ok" and r["s_per_step"]]
    sent = [float(r["sent_mib"]) for r in g if r["sent_mib"]]
    raw = [float(r["raw_mib"]) for r in g if r["raw_mib"]]
    summary.append(dict(model=k[0], config=k[1], runs=len(g), ok=len(ok),
                        images_per_s=statistics.median(ok) if ok else float("nan"),
                        s_per_step=statistics.median(sps) if sps else float("nan"),
                        all=" / ".join("%.1f" % x for x in ok),
                        wire_ratio=(statistics.median(raw) / statistics.median(sent)) if sent and raw and statistics.median(sent) > 0 else float("nan")))
for s in summary:
    base = [t for t in summary if t["model"] == s["model"] and t["config"] == "plain"]
    s["vs_plain"] = s["images_per_s"] / base[0]["images_per_s"] if base and base[0]["images_per_s"] > 0 else float("nan")
cols = ["model", "config", "runs", "ok", "images_per_s", "s_per_step", "vs_plain", "wire_ratio", "all"]
with open(f"{out}/summary.csv", "w", newline="") as f:
    w = csv.DictWriter(f, cols)
    w.writeheader()
    for s in summary:
        w.writerow({c: ("%.4g" % s[c] if isinstance(s[c], float) else s[c]) for c in cols})
nrep = max(s["runs"] for s in summary)
with open(f"{out}/summary.md", "w") as f:
    f.write(f"{hosts} hosts x {rph} ranks, {rate} per host link (floor: no limit), {steps} timed steps "
            f"after {warmup}, median of {nrep} repeats\n\n")
    f.write("| model | configuration | images/s | s/step | vs plain (fusion on) | hipress wire ratio | runs (images/s) |\n")
    f.write("|---|---|---|---|---|---|---|\n")
    for s in summary:
        wr = "" if s["wire_ratio"] != s["wire_ratio"] else "%.1f" % s["wire_ratio"]
        bad = "" if s["ok"] == s["runs"] else " (%d of %d failed)" % (s["runs"] - s["ok"], s["runs"])
        f.write("| %s | %s | %.1f | %.3f | %.2f | %s | %s%s |\n" % (
            s["model"], s["config"], s["images_per_s"], s["s_per_step"], s["vs_plain"], wr, s["all"], bad))
print(open(f"{out}/summary.md").read())

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
models = list(dict.fromkeys(s["model"] for s in summary))
fig, axes = plt.subplots(1, len(models), figsize=(6.5 * len(models), 0.45 * max(len([s for s in summary if s["model"] == m]) for m in models) + 1.6), squeeze=False)
for ax, m in zip(axes[0], models):
    ss = [s for s in summary if s["model"] == m]
    ys = range(len(ss))
    colors = ["0.6" if s["config"] in ("floor",) else "tab:gray" if s["config"].startswith(("plain", "hvd"))
              else "tab:blue" for s in ss]
    ax.barh(list(ys), [s["images_per_s"] for s in ss], color=colors)
    for y, s in zip(ys, ss):
        xs = [float(r["images_per_s"]) for r in groups[(m, s["config"])] if r["status"] == "ok" and r["images_per_s"]]
        ax.plot(xs, [y] * len(xs), "k.", ms=4)
        if s["vs_plain"] == s["vs_plain"]:
            ax.text(s["images_per_s"], y, " %.2fx" % s["vs_plain"], va="center", fontsize=8)
    ax.set_yticks(list(ys))
    ax.set_yticklabels([s["config"] for s in ss], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("images per second (median; dots: repeats; ratio to plain)")
    ax.set_title(f"{m}, {hosts} hosts x {rph} ranks, {rate} (floor: no limit)", fontsize=9)
    ax.set_xlim(0, 1.18 * max(s["images_per_s"] for s in ss if s["images_per_s"] == s["images_per_s"]))
fig.tight_layout()
fig.savefig(f"{out}/train_bench.png", dpi=110)
print(f"train_bench: wrote {out}/raw.csv, summary.csv, summary.md, train_bench.png")
EOF
