/*
 * Which calls hipress compresses: pure functions of a call's descriptor
 * (src/drive/hp_eligible.h), unit-tested in tests/unit/check_core.c and
 * tests/gpu/host/check_gpu.c.
 */
#include "hp_eligible.h"

hp_elig_t hp_eligible(const hp_call_desc_t *d)
{
    size_t bytes;
    const char *s, *r;

    if (!d->enabled)
        return HP_ELIG_DISABLED;
    if (d->null_handle)
        return HP_ELIG_NULL_HANDLE;
    if (!d->op_is_sum)
        return HP_ELIG_OP;
    if (!d->dtype_is_float)
        return HP_ELIG_DATATYPE;
    if (d->count <= 0 || __builtin_mul_overflow((size_t)d->count, d->elem_size, &bytes))
        return HP_ELIG_COUNT;
    if (d->recvbuf == NULL || (!d->in_place && d->sendbuf == NULL))
        return HP_ELIG_NULL_BUFFER;
    if (!d->in_place) {
        s = (const char *)d->sendbuf;
        r = (const char *)d->recvbuf;
        if (s < r + bytes && r < s + bytes)
            return HP_ELIG_OVERLAP;
    }
    if (d->is_inter)
        return HP_ELIG_INTERCOMM;
    if (d->comm_size == 1)
        return HP_ELIG_SMALL_COMM;
    if (d->opted_out)
        return HP_ELIG_OPTED_OUT;
    if (d->device)
        return HP_ELIG_DEVICE;
    if (bytes < d->min_bytes)
        return HP_ELIG_TOO_SMALL;
    if (d->in_user_group)
        return HP_ELIG_GROUP;
    if (d->capturing != 0)
        return HP_ELIG_CAPTURE;
    return HP_ELIG_YES;
}

hp_elig_t hp_eligible_shared(const hp_call_desc_t *d)
{
    static const char probe;
    hp_call_desc_t g = *d;
    g.recvbuf = &probe;   /* any buffer, not overlapping: the buffers are local */
    g.in_place = 1;
    g.device = 0;
    return hp_eligible(&g);
}

const char *hp_elig_name(hp_elig_t r)
{
    static const char *names[HP_ELIG_NREASONS] = {
        "eligible", "disabled", "null handle", "op", "datatype", "count",
        "null buffer", "overlap", "intercomm", "single rank", "opted out",
        "small", "device buffer", "another rank", "group", "graph capture", "no plan"};
    return (r >= 0 && r < HP_ELIG_NREASONS) ? names[r] : "?";
}
