#!/bin/sh
# libhipress.so exports only the interposed MPI_* entry points and the public
# hipress_* API, and no PMPI_* symbol (its pass-through calls libmpi's PMPI_*,
# which an exported PMPI_* of its own would turn into endless recursion).
set -u
. "${HP_SRCDIR:-$(dirname "$0")/..}/tests/hp_test_lib.sh"

command -v nm >/dev/null || { echo "FAIL: nm (binutils) not found"; exit 1; }
defined=$(nm -D --defined-only "$HP_LIB" | awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }')
undefined=$(nm -D --undefined-only "$HP_LIB" | awk '{ sub(/@.*/, "", $NF); print $NF }')
[ -n "$defined" ] || hp_fail "nm lists no defined dynamic symbol in $HP_LIB"

for s in $defined; do
    case "$s" in
    PMPI_*) hp_fail "exports $s" ;;
    MPI_* | hipress_*) ;;
    *) hp_fail "exports $s, neither MPI_* nor hipress_*" ;;
    esac
done
for s in MPI_Init MPI_Init_thread MPI_Finalize MPI_Allreduce MPI_Comm_set_info MPI_Bcast MPI_Allgatherv \
         hipress_comm_set hipress_stats_get hipress_version hipress_status_string \
         hipress_compressor_find hipress_compressor_count hipress_compressor_name; do
    echo "$defined" | grep -qx "$s" || hp_fail "does not export $s"
done
# nothing of CUDA is linked: the driver and the CUDA module are found at run time
ldd "$HP_LIB" | grep -Eq 'libcuda|libcudart' && hp_fail "links CUDA: $(ldd "$HP_LIB" | grep -E 'libcuda|libcudart')"
# the library's own traffic and pass-through go to libmpi's PMPI entry points
for s in PMPI_Allreduce PMPI_Init PMPI_Finalize; do
    echo "$undefined" | grep -qx "$s" || hp_fail "does not call libmpi's $s"
done
echo "# $(echo "$defined" | wc -l) exported symbols"
[ $status -eq 0 ] || echo "$defined"
exit $status
