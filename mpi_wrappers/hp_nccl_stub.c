/* The public NCCL calls of a build without NCCL interception. */
#include "hp_core.h"
#include <string.h>

HP_EXPORT void hipress_nccl_stats_get(hipress_nccl_stats_t *s)
{
    memset(s, 0, sizeof(*s));
}

HP_EXPORT int hipress_nccl_comm_set(void *nccl_comm, const char *name, const char *value)
{
    (void)nccl_comm; (void)name; (void)value;
    return HIPRESS_ERR_UNSUPPORTED;
}
