/*
 * What only the NCCL-only library (libhipress_nccl.so) defines: its name.
 * It has no MPI layer (doc/dev/architecture.md, "Two libraries"): settings load
 * at the first NCCL call (hp_settings_without_mpi), the statistics print at
 * exit, and the MPI-communicator calls of hipress.h are not in it.
 */
#include "hp_core.h"

HP_EXPORT const char *hipress_library(void)
{
    return "libhipress_nccl";
}
