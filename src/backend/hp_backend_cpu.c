/*
 * The CPU backend (hp_backend.h): a compressed call's buffer in host
 * memory.  Its operations are the compressors' own host encode and decode
 * and the operator layer's kernels; it has no queue, so sync only reports
 * the first error.  Also the momentum masking both backends' encodes apply
 * (hp_mask_sent).
 */
#include "hp_backend.h"
#include "hp_ops.h"
#include <string.h>

/* Momentum factor masking: the momentum of the elements a message carried
 * starts again from zero (a dense message carried all of them). */
void hp_mask_sent(float *mom, int kind, const unsigned char *msg, size_t mlen, size_t len)
{
    const hp_comp_t *c = hp_comp_get(kind);
    if (c == NULL || !(c->flags & HIPRESS_COMP_SPARSE)) {
        memset(mom, 0, len * sizeof(float));
        return;
    }
    for (size_t j = HP_MSG_HEADER; j + 8 <= mlen; j += 8) {
        uint32_t i;
        memcpy(&i, msg + j, 4);
        if (i < len)
            mom[i] = 0.0f;
    }
}

static hp_status_t cpu_encode(hp_mem_t *m, int kind, hipress_encode_args_t *a, hp_src_t src, float *mask,
                              void *out, size_t cap, size_t *len_p, int *nonfinite_p, size_t *except_p)
{
    hp_status_t st = hp_msg_encode_x(kind, a, out, cap, src, len_p, nonfinite_p, except_p);
    (void)m;
    /* a message with exceptions carries them before its payload: no mask */
    if (st == HP_OK && mask != NULL && !*nonfinite_p && ((const unsigned char *)out)[2] == 0)
        hp_mask_sent(mask, kind, (const unsigned char *)out, *len_p, a->n);
    return st;
}

static hp_status_t cpu_decode(hp_mem_t *m, int kind, const void *msg, size_t len, size_t n, float *dst,
                              int accumulate, const hipress_comp_params_t *p)
{
    (void)m;
    return hp_msg_decode(kind, msg, len, n, dst, accumulate, p);
}

static int cpu_fold(hp_mem_t *m, float *buf, float *r, size_t n)
{
    const hp_ops_t *ops = hp_ops_get(HP_ISA_AUTO);
    (void)m;
    if (ops->nonfinite(buf, n))
        return 0;
    ops->add(buf, r, buf, n);
    memset(r, 0, n * sizeof(float));
    return 1;
}

static int cpu_nonfinite(hp_mem_t *m, const float *buf, size_t n)
{
    (void)m;
    return hp_ops_get(HP_ISA_AUTO)->nonfinite(buf, n) != 0;
}

static void cpu_copy(hp_mem_t *m, void *dst, const void *src, size_t bytes)
{
    (void)m;
    if (dst != src)
        memcpy(dst, src, bytes);
}

static void cpu_add(hp_mem_t *m, float *dst, const float *src, size_t n)
{
    (void)m;
    /* (a NaN canonical: the device's k_add stores the same bits) */
    for (size_t i = 0; i < n; i++)
        dst[i] = hp_canon(dst[i] + src[i]);
}

static float *cpu_work(hp_mem_t *m, void *host_extra, size_t n)
{
    (void)m; (void)n;
    return (float *)host_extra;
}

static size_t cpu_work_host_bytes(size_t n)
{
    return n * sizeof(float);
}

static int cpu_momentum(hp_mem_t *m, float *u, float *buf, float mom, size_t n)
{
    const hp_ops_t *ops = hp_ops_get(HP_ISA_AUTO);
    (void)m;
    if (ops->nonfinite(buf, n))
        return 0;
    for (size_t i = 0; i < n; i++) {
        float v = mom * u[i];
        u[i] = hp_canon(v + buf[i]);
        buf[i] = u[i];
    }
    return 1;
}

static hp_status_t cpu_sync(hp_mem_t *m)
{
    return m->err;
}

/* ----------------------------------------- messages in host memory */

size_t hp_mem_host_msg_len(hp_mem_t *m, const void *msg, size_t cap)
{
    (void)m;
    return hp_msg_len(msg, cap);
}

size_t hp_mem_host_msg_error(hp_mem_t *m, void *out, size_t len)
{
    (void)m;
    return hp_msg_error(out, len);
}

int hp_mem_host_msg_nonfinite(hp_mem_t *m, const void *msg, size_t len)
{
    (void)m;
    return len >= HP_MSG_HEADER && (((const unsigned char *)msg)[2] & HP_MSG_NONFINITE) != 0;
}

void hp_mem_host_msg_corrupt(hp_mem_t *m, void *msg)
{
    (void)m;
    ((unsigned char *)msg)[8] ^= 0x5a;
}

const hp_mem_ops_t hp_mem_cpu = {
    .id = HP_BACKEND_CPU,
    .name = "cpu",
    .encode = cpu_encode,
    .decode = cpu_decode,
    .fold = cpu_fold,
    .nonfinite = cpu_nonfinite,
    .copy = cpu_copy,
    .add = cpu_add,
    .work = cpu_work,
    .work_host_bytes = cpu_work_host_bytes,
    .momentum = cpu_momentum,
    .scratch = NULL,
    .sync = cpu_sync,
    .msg_len = hp_mem_host_msg_len,
    .msg_error = hp_mem_host_msg_error,
    .msg_nonfinite = hp_mem_host_msg_nonfinite,
    .msg_corrupt = hp_mem_host_msg_corrupt,
    .msg_mem = NULL,
};
