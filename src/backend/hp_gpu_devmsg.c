/*
 * The device backend's device-message mode (hp_mem_device_msgs in
 * hp_backend.h): the table of hp_mem_dev with the message operations
 * replaced by ones that keep every message in device memory and never wait
 * for the device -- encode through the module's encode_msg (header and
 * payload written on the device, the bytes hp_msg_encode writes), decode
 * through decode_msg (checked on the device; a rejected message sets the
 * codec's sticky flag), the message operations of the algorithms answered
 * from what the host knows (capacities), and the slots in memory the caller
 * gives.  Chosen once per call by the NCCL front end's stream-ordered calls
 * (src/front/nccl/hp_front_nccl.c); the algorithms see only the table.
 */
#include "hp_backend.h"
#include "hp_elem.h"
#include <pthread.h>
#include <string.h>

static const hp_gpu_ops_v2_t *g2(void)
{
    return hp_gpu_codec();
}

static hp_status_t gpu_status(int rc)
{
    return rc == HP_GPU_OK ? HP_OK : rc == HP_GPU_ERR_INVALID ? HP_ERR_INVALID
         : rc == HP_GPU_ERR_NOMEM ? HP_ERR_NOMEM : rc == HP_GPU_ERR_UNSUPPORTED ? HP_ERR_UNSUPPORTED
         : HP_ERR_DEVICE;
}

int hp_mem_device_msgs_format(int kind, const hipress_comp_params_t *p)
{
    hp_gpu_fmt_t f;
    const hp_comp_t *c = kind >= 0 ? hp_comp_get(kind) : NULL;
    /* a plugin has no device format; a collective compressor no message.
     * A sparse format's length is written on the device (its capacity, the
     * format's largest, is the host's), and its dense fallback is the
     * host's choice from the message's length and density; dgc's momentum
     * is applied, and its masking gated, on the device (dm_momentum). */
    if (c == NULL || hp_comp_is_collective(kind))
        return 0;
    return hp_comp_gpu_fmt(kind, p, 1024, 0, &f) == HP_OK;
}

/* The message of a->in[0..n) at out (device memory, cap bytes); its length
 * is the format's largest, known on the host (the NaN message and a sparse
 * format's, shorter, are made on the device and sent with the same
 * capacity). */
static hp_status_t dm_encode(hp_mem_t *m, int kind, hipress_encode_args_t *a, hp_src_t src, float *mask,
                             void *out, size_t cap, size_t *len_p, int *nonfinite_p, size_t *except_p)
{
    hp_gpu_enc_t e;
    hp_status_t st;
    int rc;

    (void)src;   /* never exceptions: a non-finite value gives the NaN message */
    *except_p = 0;
    *nonfinite_p = 0;   /* known on the device only */
    if (m->cx == NULL)
        return m->err != HP_OK ? m->err : HP_ERR_DEVICE;
    memset(&e, 0, sizeof(e));
    st = hp_comp_gpu_fmt(kind, a->params, a->n, a->k, &e.fmt);
    if (st != HP_OK) {
        HP_WARN("gpu: compressor %s has no device message: a stream-ordered call cannot encode it",
                hp_comp_get(kind) != NULL ? hp_comp_get(kind)->name : "?");
        return st;
    }
    e.in = a->in;
    e.residual = a->residual;
    e.state = a->state;
    e.mask = mask;   /* zeroed on the device where sent, if the momentum was applied */
    e.n = a->n;
    e.rng_key = hp_rng_key(a->rng_key);
    e.rng_offset = a->rng_offset;
    rc = g2()->encode_msg(m->cx, &e, (uint32_t)kind, out, cap);
    if (rc != HP_GPU_OK) {
        HP_WARN("gpu: a device message: %s", g2()->base.last_error());
        return gpu_status(rc);
    }
    *len_p = HP_MSG_HEADER + (a->n > 0 ? e.fmt.payload : 0);
    return HP_OK;
}

/* Check and decode the message at msg (device memory; len: the capacity
 * its bytes lie in) on the device. */
static hp_status_t dm_decode(hp_mem_t *m, int kind, const void *msg, size_t len, size_t n, float *dst,
                             int accumulate, const hipress_comp_params_t *p)
{
    hp_gpu_dec_t d;
    hp_status_t st;
    int rc;

    if (m->cx == NULL)
        return m->err != HP_OK ? m->err : HP_ERR_DEVICE;
    memset(&d, 0, sizeof(d));
    st = hp_comp_gpu_fmt(kind, p, n, 0, &d.fmt);
    if (st != HP_OK)
        return st;
    d.accumulate = accumulate;
    d.n = n;
    rc = g2()->decode_msg(m->cx, &d, (uint32_t)kind, msg, len, dst);
    if (rc != HP_GPU_OK) {
        HP_WARN("gpu: decoding a device message: %s", g2()->base.last_error());
        return gpu_status(rc);
    }
    return HP_OK;
}

/* dgc's momentum correction in stream order: applied on the device where
 * this rank's range is finite, and "applied" for the host, so the call
 * keeps u as its mask; the device gates every masking of the call on
 * whether it was (the host's choice after a wait, made there). */
static int dm_momentum(hp_mem_t *m, float *u, float *buf, float mom, size_t n)
{
    if (m->cx == NULL || g2()->momentum_q(m->cx, u, buf, mom, n) != HP_GPU_OK) {
        HP_WARN("gpu: dgc's momentum on the device: %s", g2()->base.last_error());
        if (m->err == HP_OK)
            m->err = HP_ERR_DEVICE;
        return 0;
    }
    return 1;
}

/* The own-data check of a merge is not made: the device encoder gives the
 * NaN message for any non-finite value, whatever its source. */
static int dm_nonfinite(hp_mem_t *m, const float *buf, size_t n)
{
    (void)m; (void)buf; (void)n;
    return -1;
}

static size_t dm_msg_len(hp_mem_t *m, const void *msg, size_t cap)
{
    (void)m; (void)msg;
    return cap;   /* the device decoder reads the header */
}

/* An error message (a rank that failed locally: the failure agreement
 * fails the call anyway): the host's bytes copied in. */
static size_t dm_msg_error(hp_mem_t *m, void *out, size_t len)
{
    unsigned char h[64];
    size_t bytes = hp_msg_error(h, len);
    if (m->cx == NULL || g2()->copy(m->cx, out, h, bytes) != HP_GPU_OK) {
        if (m->err == HP_OK)
            m->err = HP_ERR_DEVICE;
    }
    return bytes;
}

static int dm_msg_nonfinite(hp_mem_t *m, const void *msg, size_t len)
{
    (void)m; (void)msg; (void)len;
    return 1;   /* unknown on the host */
}

/* The corruption test knob: byte 8 flipped through the host (a test's
 * call: its waits do not matter). */
static void dm_msg_corrupt(hp_mem_t *m, void *msg)
{
    unsigned char b = 0;
    if (m->cx == NULL || g2()->copy(m->cx, &b, (unsigned char *)msg + 8, 1) != HP_GPU_OK)
        return;
    b ^= 0x5a;
    g2()->copy(m->cx, (unsigned char *)msg + 8, &b, 1);
}

static void *dm_msg_mem(hp_mem_t *m, size_t bytes)
{
    return m->msg_alloc != NULL ? m->msg_alloc(m->msg_ctx, bytes) : NULL;
}

static hp_mem_ops_t devmsg_ops;
static pthread_once_t devmsg_once = PTHREAD_ONCE_INIT;

static void devmsg_init(void)
{
    devmsg_ops = hp_mem_dev;
    devmsg_ops.name = "cuda-devmsg";
    devmsg_ops.encode = dm_encode;
    devmsg_ops.decode = dm_decode;
    devmsg_ops.nonfinite = dm_nonfinite;
    devmsg_ops.momentum = dm_momentum;
    devmsg_ops.msg_len = dm_msg_len;
    devmsg_ops.msg_error = dm_msg_error;
    devmsg_ops.msg_nonfinite = dm_msg_nonfinite;
    devmsg_ops.msg_corrupt = dm_msg_corrupt;
    devmsg_ops.msg_mem = dm_msg_mem;
}

hp_status_t hp_mem_device_msgs(hp_mem_t *m, void *(*msg_alloc)(void *ctx, size_t bytes), void *ctx)
{
    if (m->ops != &hp_mem_dev || m->cx == NULL || m->err != HP_OK || msg_alloc == NULL)
        return HP_ERR_INVALID;
    pthread_once(&devmsg_once, devmsg_init);
    m->msg_alloc = msg_alloc;
    m->msg_ctx = ctx;
    m->ops = &devmsg_ops;
    return HP_OK;
}
