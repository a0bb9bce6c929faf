#!/bin/sh
# Mutants of the kernels, each of which tests/gpu/simt/simt_kern_tsan must catch
# (run by run_simt.sh): a copy of one kernel file with one defect is
# compiled as that program's build compiles it (ThreadSanitizer) and linked
# with the program's other objects; a short run of the group it belongs to
# must fail.  The defects: each __syncthreads() of k_sparse_select, and of
# the scan and pick it calls, removed; a shuffle whose mask leaves out lanes
# that call it; a shuffle without a mask; a shared index one past the end;
# the early return of k_sparse_select read by every thread again; two
# races between lanes of one warp in CTAs of 256 threads, where
# ThreadSanitizer sees one thread per warp, so the emulator's own race
# detector must name them: k_tg_pairs' tree reduction without its barrier
# once one warp is left (a read after write), and two lanes of
# k_sparse_offsets writing their warp's total (a write after write), and
# two lanes of k_onebit_enc storing the same sums (results unchanged); and
# three stores that leave a NaN's bits to the hardware (x86 keeps a
# payload where NVIDIA makes 0x7fffffff, so the CPU path's canonical NaN
# differs): k_add, the decoders' accumulating store, powersgd's M Q.
set -u
: "${HP_SRCDIR:=$(cd "$(dirname "$0")/../../.." && pwd)}"
: "${HP_BUILDDIR:=$(pwd)}"
: "${HP_SIMT_KERN_CXX:=c++}"
: "${HP_SIMT_LINK_CXX:=c++}"
: "${HP_SIMT_MUTANT_FLAGS:?set by make check (tests/gpu/simt/simt.mk)}"
cuda="$HP_SRCDIR/cuda/kern"
rt="$HP_BUILDDIR/tests/gpu/simt/.libs/libhpsimt_tsan.a"
base="$HP_BUILDDIR/.libs/libhpbase.a"
status=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
objs=$(find "$HP_BUILDDIR/cuda" "$HP_BUILDDIR/tests" -name '*simt_kern_tsan-*.o' | sort)
for f in "$rt" "$base"; do
    [ -f "$f" ] || { echo "FAIL: $f is missing"; exit 1; }
done
[ "$(echo "$objs" | grep -c 'kern_sparse\.o$')" = 1 ] ||
    { echo "FAIL: the objects of simt_kern_tsan are not found"; exit 1; }
export TSAN_OPTIONS="halt_on_error=1:exitcode=66"

# the lines of a function (from its name at the start of a definition to
# the closing brace at the start of a line) that match a pattern
lines_in() {
    awk -v fn="$2" -v pat="$3" '
        index($0, fn "(") && !infn && !/;$/ { infn = 1 }
        infn && $0 ~ pat { print NR }
        infn && /^}/ { infn = 0 }' "$cuda/$1"
}

n=0
caught=0
# mutant FILE LINE SED-EXPRESSION GROUP WHAT [OUTPUT-PATTERN [UNIT]]: caught
# when the run fails, with a line matching the pattern when one is given
# (empty: any failure).  UNIT: the kernel file to build when FILE is a
# header it includes
mutant() {
    file=$1 line=$2 expr=$3 group=$4 what=$5 want=${6:-} unit=${7:-$1}
    n=$((n + 1))
    rm -f "$tmp"/*.cu "$tmp"/*.cuh "$tmp"/*.h
    sed "${line}$expr" "$cuda/$file" >"$tmp/$file"
    if cmp -s "$cuda/$file" "$tmp/$file"; then
        echo "FAIL: mutant $n ($what, $file:$line) does not apply: the source changed"
        status=1
        return
    fi
    if [ "$unit" != "$file" ]; then
        # every header of cuda/kern beside the unit's copy, so that each one
        # that includes the mutated header reads the copy
        cp "$cuda/$unit" "$tmp/"
        for h in "$cuda"/*.h "$cuda"/*.cuh; do
            [ -e "$tmp/${h##*/}" ] || cp "$h" "$tmp/"
        done
    fi
    printf '#include "%s"\n' "$unit" >"$tmp/m.cc"
    own="-$(basename "$unit" .cu | sed 's/^hp_//')\.o$"   # its object in the program
    # shellcheck disable=SC2086
    if ! $HP_SIMT_KERN_CXX -I"$tmp" $HP_SIMT_MUTANT_FLAGS -c "$tmp/m.cc" -o "$tmp/m.o" >"$tmp/cc.log" 2>&1 ||
        ! $HP_SIMT_LINK_CXX -fsanitize=thread -o "$tmp/mutant" "$tmp/m.o" \
            $(echo "$objs" | grep -v -- "$own") "$rt" "$base" -lm -lpthread -ldl \
            >>"$tmp/cc.log" 2>&1; then
        echo "FAIL: mutant $n ($what) does not build"
        head -n 20 "$tmp/cc.log"
        status=1
        return
    fi
    "$tmp/mutant" --quick --only "$group" --sizes 4097 --large none >"$tmp/out" 2>&1
    rc=$?
    how=$(grep -m 1 -E '^(WARNING: ThreadSanitizer|hp_simt:|FAIL:)' "$tmp/out")
    if [ -n "$want" ] && [ $rc -ne 0 ]; then
        how=$(grep -m 1 -E "$want" "$tmp/out")
        [ -n "$how" ] || rc=0
    fi
    if [ $rc -eq 0 ]; then
        echo "FAIL: mutant $n not caught: $what ($file:$line)${want:+ (no line matching '$want')}"
        head -n 5 "$tmp/out" | sed 's/^/  /'
        status=1
    else
        caught=$((caught + 1))
        echo "# mutant $n caught (exit $rc): $what ($file:$line): ${how:-$(tail -n 1 "$tmp/out")}"
    fi
}

for l in $(lines_in hp_kern_sparse.cu k_sparse_select '__syncthreads\(\);'); do
    mutant hp_kern_sparse.cu "$l" 's/__syncthreads();/(void)0;/' sparse "a __syncthreads of k_sparse_select removed"
done
for fn in scan01 pick; do
    for l in $(lines_in hp_kern_sparse.cu "$fn" '__syncthreads\(\);'); do
        mutant hp_kern_sparse.cu "$l" 's/__syncthreads();/(void)0;/' sparse "a __syncthreads of $fn removed"
    done
done
l=$(lines_in hp_kern_sparse.cu k_sparse_select 'if \(s_skip\)' | head -n 1)
mutant hp_kern_sparse.cu "$l" 's/if (s_skip)/if (hp_k_ld_relaxed(flags) \& HP_K_F_NONFINITE)/' sparse \
    "k_sparse_select's early return read by every thread after its first barrier"
l=$(lines_in hp_kern_quant.cu k_tbq_enc_reg '__shfl_down_sync\(FULL, c, 1\)' | head -n 1)
mutant hp_kern_quant.cu "$l" 's/__shfl_down_sync(FULL, c, 1)/__shfl_down_sync(0x0000ffffu, c, 1)/' tbq \
    "a shuffle of k_tbq_enc_reg whose mask leaves out the lanes 16-31 that call it"
l=$(lines_in hp_kern_half.cu cta_umax '__shfl_xor_sync\(FULL, v, o\)' | head -n 1)
mutant hp_kern_half.cu "$l" 's/__shfl_xor_sync(FULL, v, o)/__shfl_xor(v, o)/' half \
    "a shuffle of cta_umax without a mask"
l=$(lines_in hp_kern_quant.cu k_tg_pairs 'sm\[threadIdx\.x\] = a;' | head -n 1)
mutant hp_kern_quant.cu "$l" 's/sm\[threadIdx\.x\] = a;/sm[threadIdx.x + 1] = a;/' tg \
    "a shared index of k_tg_pairs one past the end"

l=$(lines_in hp_kern_quant.cu k_tg_pairs '__syncthreads\(\);' | sed -n 2p)
mutant hp_kern_quant.cu "$l" 's/__syncthreads();/if (s > 32) __syncthreads();/' tg \
    "k_tg_pairs' reduction without its barrier once one warp is left (lanes of warp 0 race)" \
    'hp_simt: .*shared-memory race \((read after write|write after read)\) on sm\['
l=$(lines_in hp_kern_sparse.cu k_sparse_offsets 'if \(lane == 31\)' | head -n 1)
mutant hp_kern_sparse.cu "$l" 's/if (lane == 31)/if (lane >= 30)/' sparse \
    "lanes 30 and 31 of k_sparse_offsets both write their warp's total" \
    'hp_simt: .*shared-memory race \(write after write\) on wsum\['
# the same values written twice: the results do not change, and the CTA
# has 256 threads, so nothing but the race detector can see it
l=$(lines_in hp_kern_quant.cu k_onebit_enc 'if \(lane == 0\) \{' | head -n 1)
mutant hp_kern_quant.cu "$l" 's/if (lane == 0) {/if (lane < 2) {/' onebit \
    "lanes 0 and 1 of k_onebit_enc both store their warp's sums (the same values)" \
    'hp_simt: .*shared-memory race \(write after write\) on cpos\['

l=$(lines_in hp_kern.cu k_add 'hp_k_add\(dst\[i\], src\[i\]\)' | head -n 1)
mutant hp_kern.cu "$l" 's/hp_k_add(dst\[i\], src\[i\])/dst[i] + src[i]/' ops \
    "k_add storing the NaN the hardware makes" 'FAIL: .*(fold, momentum or add|not canonical)'
l=$(lines_in hp_kern.h hp_k_store 'hp_k_add\(out\[i\], v\)' | head -n 1)
mutant hp_kern.h "$l" 's/out\[i\] = hp_k_add(out\[i\], v);/out[i] += v;/' onebit \
    "the decoders' accumulating store keeping a NaN's payload" 'FAIL: onebit .*acc 1: decode' hp_kern_quant.cu
l=$(lines_in hp_kern.h hp_k_psgd_dot 'return hp_canon\(p\);' | head -n 1)
mutant hp_kern.h "$l" 's/return hp_canon(p);/return p;/' ops \
    "powersgd's M Q storing the NaN of Inf - Inf the hardware makes" 'FAIL: psgd products' hp_kern.cu

echo "# $caught of $n mutants caught"
[ "$n" -ge 20 ] || { echo "FAIL: $n mutants, 20 or more expected"; status=1; }
exit $status
