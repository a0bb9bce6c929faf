#!/bin/sh
# Instructions per compressed MPI_Allreduce, old build against new, counted by
# callgrind: a measure of the refactor's cost that the machine's load does not
# move (wall-clock A/B on this 2-core VM scatters by about 7%).
#
#   scripts/lab/ab_callgrind.sh OLD_BUILD NEW_BUILD [OUT_DIR]
#
# For every compressor in COMPS, algorithm in ALGOS and rank count in NPS,
# the plan fixed (HIPRESS_ALGO and -a, HIPRESS_PARTITION_BYTES=PART, default
# 256K: with 0 the cost model picks the partitions from measured rates, and
# the two builds may then run different plans), each build's own
# hipress-bench runs under mpirun with that build's libhipress.so preloaded,
# every rank under callgrind, on SIZES (one run: -b 1M -e 4M -f 4 by
# default), the old build then the new one. OLD_ARGS and NEW_ARGS add mpirun
# arguments to one side (e.g. NEW_ARGS="-x HIPRESS_SUM_CODEC=same" against a
# build that has no such setting). callgrind dumps its counters when hipress-bench calls
# hipress_stats_get, which it does just before and just after its ITERS timed
# calls of one size, so the dump in between holds those calls alone: no
# start-up, no warm-up (-w WARM), no verification. scripts/lab/cg_objects.py
# splits each dump by object: hp_self, the instructions inside libhipress.so;
# hp_ext, those its calls cause in libc/libm (memcpy, malloc...); hp, their
# sum. Calls into MPI are left out: their count depends on how long a peer
# takes (busy polling). The same run twice gives the same hp_self exactly and
# hp within about 100 instructions (clock_gettime, malloc).
#
# Writes OUT_DIR/ranks.csv (one line per build, case and rank; APPEND=1 adds
# to it, for a second pass with other COMPS/NPS/sizes) and OUT_DIR/summary.csv
# (per case in ranks.csv: hp instructions per call and rank, averaged over
# the ranks, old and new, and new / old), and prints the summary.
# Needs valgrind and Open MPI's suppressions (/usr/share/openmpi).
set -eu
[ $# -ge 2 ] || { sed -n '2,30p' "$0" >&2; exit 2; }
old=$(cd "$1" && pwd)
new=$(cd "$2" && pwd)
out=${3:-doc/measured/refactor-ab}
COMPS=${COMPS:-"onebit tbq fp16"}
ALGOS=${ALGOS:-"ring ps allgather"}
NPS=${NPS:-"2 4"}
MINB=${MINB:-1M}
MAXB=${MAXB:-4M}
FACTOR=${FACTOR:-4}
ITERS=${ITERS:-4}
WARM=${WARM:-1}
PART=${PART:-256K}
here=$(cd "$(dirname "$0")" && pwd)
supp=/usr/share/openmpi/openmpi-valgrind.supp
py=/usr/bin/python3
[ -x "$py" ] || py=python3
for b in "$old" "$new"; do
    [ -x "$b/.libs/hipress-bench" ] && [ -f "$b/.libs/libhipress.so" ] ||
        { echo "ab_callgrind: $b: no .libs/hipress-bench or .libs/libhipress.so (build it first)" >&2; exit 1; }
done
command -v valgrind >/dev/null || { echo "ab_callgrind: valgrind not found" >&2; exit 1; }
[ -f "$supp" ] || { echo "ab_callgrind: $supp not found" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# the sizes hipress-bench runs, in bytes (its own loop: b, b*f, ... <= e)
bytes() { numfmt --from=iec "$1"; }
sizes=$(awk -v b="$(bytes "$MINB")" -v e="$(bytes "$MAXB")" -v f="$FACTOR" \
    'BEGIN { for (s = b; s <= e * 1.0000001; s *= f) printf "%d ", int(s / 4) * 4 }')

[ "${APPEND:-0}" = 1 ] && [ -f "$out/ranks.csv" ] ||
    echo "build,compressor,algo,ranks,bytes,rank,calls,hp_self,hp_ext,hp,total" > "$out/ranks.csv"
for np in $NPS; do
    for c in $COMPS; do
        for a in $ALGOS; do
            for side in old new; do
                if [ $side = old ]; then b=$old; extra=${OLD_ARGS:-}; else b=$new; extra=${NEW_ARGS:-}; fi
                rm -f "$tmp"/cg.*
                # shellcheck disable=SC2086
                nice -n 10 mpirun --oversubscribe -np "$np" -x LD_PRELOAD="$b/.libs/libhipress.so" \
                    -x LD_LIBRARY_PATH="$b/.libs" -x HIPRESS_ALGO="$a" -x HIPRESS_PARTITION_BYTES="$PART" -x HIPRESS_TIMEOUT=0 $extra \
                    valgrind -q --tool=callgrind --suppressions="$supp" \
                    --callgrind-out-file="$tmp/cg.%q{OMPI_COMM_WORLD_RANK}" \
                    --compress-strings=no --compress-pos=no --dump-before=hipress_stats_get \
                    "$b/.libs/hipress-bench" -b "$MINB" -e "$MAXB" -f "$FACTOR" -n "$ITERS" -w "$WARM" \
                    -c "$c" -a "$a" --csv > "$tmp/bench.out" 2> "$tmp/bench.err" ||
                    { echo "ab_callgrind: $side $c $a np $np failed:" >&2; cat "$tmp/bench.err" >&2; exit 1; }
                k=0
                for s in $sizes; do
                    k=$((k + 1))
                    r=0
                    while [ $r -lt "$np" ]; do
                        f="$tmp/cg.$r.$((2 * k))"
                        [ -f "$f" ] || { echo "ab_callgrind: no dump $f" >&2; exit 1; }
                        $py "$here/cg_objects.py" "$f" | awk -v p="$side,$c,$a,$np,$s,$r,$ITERS" '{
                            for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                            print p "," v["hp_self"] "," v["hp_ext"] "," v["hp"] "," v["total"] }' >> "$out/ranks.csv"
                        r=$((r + 1))
                    done
                done
                echo "  $side $c $a np $np done" >&2
            done
        done
    done
done

# per case: hp per call and rank, averaged over ranks; new / old
awk -F, 'NR > 1 { k = $2 "," $3 "," $4 "," $5; hp[$1 "," k] += $10 / $7; sf[$1 "," k] += $8 / $7;
                  n[$1 "," k]++; if (!(k in seen)) { seen[k] = 1; order[++m] = k } }
    END { print "compressor,algo,ranks,bytes,old_hp_per_call,new_hp_per_call,new_over_old,old_self_per_call,new_self_per_call,self_new_over_old"
          for (i = 1; i <= m; i++) { k = order[i]; o = hp["old," k] / n["old," k]; w = hp["new," k] / n["new," k]
              so = sf["old," k] / n["old," k]; sw = sf["new," k] / n["new," k]
              printf "%s,%.0f,%.0f,%.4f,%.0f,%.0f,%.4f\n", k, o, w, w / o, so, sw, sw / so } }' \
    "$out/ranks.csv" > "$out/summary.csv"
column -s, -t < "$out/summary.csv"
