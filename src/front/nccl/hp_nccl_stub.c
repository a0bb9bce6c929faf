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

HP_EXPORT int hipress_nccl_comm_residual(void *nccl_comm, const void *buf, size_t count, float *out)
{
    (void)nccl_comm; (void)buf; (void)count; (void)out;
    return HIPRESS_ERR_UNSUPPORTED;
}
