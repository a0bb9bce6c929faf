#!/bin/sh
# libhipress.so exports only the interposed MPI_* entry points, the public
# hipress_* API and, in a build with NCCL, the interposed nccl* functions
# (exactly those), and no PMPI_* or pnccl* symbol (its pass-through calls
# libmpi's PMPI_*, which an exported PMPI_* of its own would turn into
# endless recursion; NCCL's pnccl* names must keep reaching NCCL).
set -u
. "${HP_SRCDIR:-$(dirname "$0")/../..}/tests/hp_test_lib.sh"

command -v nm >/dev/null || { echo "FAIL: nm (binutils) not found"; exit 1; }
defined=$(nm -D --defined-only "$HP_LIB" | awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }')
undefined=$(nm -D --undefined-only "$HP_LIB" | awk '{ sub(/@.*/, "", $NF); print $NF }')
[ -n "$defined" ] || hp_fail "nm lists no defined dynamic symbol in $HP_LIB"

nccl_wrapped="ncclAllReduce ncclGroupStart ncclGroupEnd ncclCommDestroy ncclCommAbort ncclCommFinalize
ncclCommSplit ncclCommInitRankConfig ncclCommInitRank ncclBroadcast ncclBcast ncclReduce ncclAllGather ncclReduceScatter ncclSend ncclRecv
ncclAlltoAll ncclGather ncclScatter"
nccl=no
grep -q '^#define HP_HAVE_NCCL_INTERCEPT 1' "$HP_BUILDDIR/config.h" 2>/dev/null && nccl=yes
echo "# NCCL interception in this build: $nccl"
for s in $defined; do
    case "$s" in
    PMPI_* | pnccl*) hp_fail "exports $s" ;;
    MPI_* | hipress_*) ;;
    nccl*)
        [ $nccl = yes ] || hp_fail "exports $s in a build without NCCL interception"
        echo "$nccl_wrapped" | tr ' ' '\n' | grep -qx "$s" || hp_fail "exports $s, which it does not wrap"
        ;;
    *) hp_fail "exports $s, neither MPI_*, hipress_* nor a wrapped nccl*" ;;
    esac
done
for s in MPI_Init MPI_Init_thread MPI_Finalize MPI_Allreduce MPI_Comm_set_info MPI_Bcast MPI_Allgatherv \
         hipress_comm_set hipress_stats_get hipress_version hipress_status_string \
         hipress_compressor_find hipress_compressor_count hipress_compressor_name \
         hipress_nccl_stats_get hipress_nccl_comm_set hipress_nccl_comm_residual; do
    echo "$defined" | grep -qx "$s" || hp_fail "does not export $s"
done
if [ $nccl = yes ]; then
    for s in $nccl_wrapped; do
        echo "$defined" | grep -qx "$s" || hp_fail "does not export $s"
    done
fi
# nothing of CUDA or NCCL is linked: the driver and NCCL are found at run time
ldd "$HP_LIB" | grep -Eq 'libcuda|libcudart|libnccl' && hp_fail "links CUDA or NCCL: $(ldd "$HP_LIB" | grep -E 'libcuda|libcudart|libnccl')"
# the library's own traffic and pass-through go to libmpi's PMPI entry points
for s in PMPI_Allreduce PMPI_Init PMPI_Finalize; do
    echo "$undefined" | grep -qx "$s" || hp_fail "does not call libmpi's $s"
done
echo "# $(echo "$defined" | wc -l) exported symbols"
[ $status -eq 0 ] || echo "$defined"
exit $status
