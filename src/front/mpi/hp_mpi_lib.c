/*
 * What only libhipress.so defines: its name (the NCCL-only library's is
 * src/front/nccl/hp_nccl_lib.c's).  Not in libhpcore.la, so that a program
 * linking the core statically names no library.
 */
#include "hp_core.h"

HP_EXPORT const char *hipress_library(void)
{
    return "libhipress";
}
