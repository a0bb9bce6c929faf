/*
 * The device backend of hp_backend.h: compressed MPI_Allreduce on device
 * buffers through the CUDA module's codec (hp_gpu_ops_v2_t), the routing
 * decision, page-locked message memory, and the host copies through which
 * exact MPI runs on device buffers (src/backend/hp_backend_mpi.c: this file
 * uses no MPI, so that the NCCL-only library, libhipress_nccl.so, carries
 * it).  A call's start, its codec context's owner and the device memory
 * that outlives a call are src/backend/hp_gpu_owner.c.
 *
 * A compressor whose hp_comp_ext_t names no device format (a plugin) still
 * runs on a device buffer: its range, residual and state are copied to host
 * memory, encoded or decoded there by the compressor itself, and copied
 * back -- the same bytes, slower.  A collective compressor's run on a
 * device buffer is the algorithm layer's (src/algo/hp_collectives.def).
 */
#define _GNU_SOURCE
#include "hp_backend.h"
#include "hp_elem.h"
#include "hp_ops_sparse.h"
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ the module */

const hp_gpu_ops_v2_t *hp_gpu_codec(void)
{
    return hp_gpu_module_v2();
}

/* Whether the codec's kernels run in a context: probed once per context. */
#define PROBED_MAX 32
static struct {
    pthread_mutex_t lock;
    int             n;
    struct { void *ctx; int device, ok; } e[PROBED_MAX];
} probed = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int codec_usable(const hp_gpu_ops_v2_t *g, const hp_gpu_ptr_t *where)
{
    int ok = -1;
    pthread_mutex_lock(&probed.lock);
    for (int i = 0; i < probed.n; i++)
        if (probed.e[i].ctx == where->ctx && probed.e[i].device == where->device)
            ok = probed.e[i].ok;
    if (ok < 0) {
        ok = g->codec_probe(where) == HP_GPU_OK;
        /* INFO, not WARN: the calls stay correct (staged, exact); hipress_info
         * --gpu and HIPRESS_STATS ("compressed on the GPU") show it too */
        if (!ok)
            HP_INFO("gpu: device buffers are not compressed on device %d: %s", where->device,
                    g->base.last_error());
        else
            HP_INFO("gpu: the allreduce of device %d's buffers is compressed on the GPU", where->device);
        if (probed.n < PROBED_MAX) {
            probed.e[probed.n].ctx = where->ctx;
            probed.e[probed.n].device = where->device;
            probed.e[probed.n++].ok = ok;
        }
    }
    pthread_mutex_unlock(&probed.lock);
    return ok;
}

int hp_gpu_compress_route(const hp_config_t *cfg, const hp_gpu_ptr_t kinds[2], const void *sendbuf,
                          const void *recvbuf)
{
    const hp_gpu_ops_v2_t *g;
    (void)sendbuf;
    if (recvbuf == NULL || kinds[1].kind == HP_MEM_HOST)
        return 0;   /* the result goes to host memory: staged, exact */
    if (hp_cfg_i(cfg, HP_S_GPU) != HP_GPU_SETTING_AUTO)
        return 0;   /* HIPRESS_GPU=stage */
    g = hp_gpu_codec();
    return g != NULL && codec_usable(g, &kinds[1]);
}

/* ------------------------------------------------ host memory of a thread */

/* Host memory per thread and kind, kept: the message slots of a device
 * call (so the codec's copies are asynchronous) and the host copies of the
 * fallbacks.  Page-locked memory is allocated once per thread and kind, at
 * its first device call, and freed only when the thread exits (in the
 * context it was allocated in, `where`: a thread may move between
 * devices): both synchronise the device, which no later call may.  A
 * request that does not fit it gets ordinary memory (grown and freed at
 * will: the copies from it are slower, never wrong). */
#define ARENA_PINNED_MIN ((size_t)1 << 20)
typedef struct {
    void        *p[2];          /* page-locked */
    size_t       bytes[2];
    int          pinned[2];     /* tried: p is page-locked memory, or none could be had */
    hp_gpu_ptr_t where[2];
    void        *h[2];          /* ordinary */
    size_t       hbytes[2];
} arena_t;

static pthread_key_t arena_key;
static pthread_once_t arena_once = PTHREAD_ONCE_INIT;

static void arena_free(void *v)
{
    arena_t *a = (arena_t *)v;
    const hp_gpu_ops_v2_t *g = hp_gpu_codec();
    for (int i = 0; i < 2; i++) {
        if (a->p[i] != NULL && g != NULL)
            g->base.host_free(a->p[i], &a->where[i]);
        free(a->h[i]);
    }
    free(a);
}

static void arena_init(void)
{
    pthread_key_create(&arena_key, arena_free);
}

enum { ARENA_MSG = 0, ARENA_STAGE = 1 };

static void *arena(int which, size_t bytes, const hp_gpu_ptr_t *where)
{
    arena_t *a;
    const hp_gpu_ops_v2_t *g = hp_gpu_codec();
    size_t nb;
    pthread_once(&arena_once, arena_init);
    a = (arena_t *)pthread_getspecific(arena_key);
    if (a == NULL) {
        a = (arena_t *)calloc(1, sizeof(*a));
        if (a == NULL || pthread_setspecific(arena_key, a) != 0) {
            free(a);
            return NULL;
        }
    }
    if (!a->pinned[which]) {
        nb = bytes > ARENA_PINNED_MIN ? bytes : ARENA_PINNED_MIN;
        nb = (nb + 65535) & ~(size_t)65535;
        a->pinned[which] = 1;
        if (g != NULL && g->base.host_alloc(nb, where, &a->p[which]) == HP_GPU_OK) {
            a->bytes[which] = nb;
            a->where[which] = *where;
        } else {
            a->p[which] = NULL;
        }
    }
    if (a->bytes[which] >= bytes && a->p[which] != NULL)
        return a->p[which];
    if (a->hbytes[which] >= bytes && a->h[which] != NULL)
        return a->h[which];
    nb = bytes > 2 * a->hbytes[which] ? bytes : 2 * a->hbytes[which];
    nb = (nb + 65535) & ~(size_t)65535;
    free(a->h[which]);
    a->h[which] = hp_aligned_alloc(nb);
    a->hbytes[which] = a->h[which] != NULL ? nb : 0;
    return a->h[which];
}

void hp_gpu_codec_setup(const hp_config_t *cfg)
{
    const hp_gpu_ops_v2_t *g;
    hp_gpu_ptr_t where;
    if (hp_cfg_i(cfg, HP_S_GPU) != HP_GPU_SETTING_AUTO || !hp_gpu_watch_fired() || !hp_gpu_current_where(&where) ||
        (g = hp_gpu_codec()) == NULL || !codec_usable(g, &where))
        return;
    (void)arena(ARENA_MSG, 0, &where);
    (void)arena(ARENA_STAGE, 0, &where);
}

/* -------------------------------------------------------- device errors */

static const hp_gpu_ops_v2_t *g2(void)
{
    return hp_gpu_codec();
}

/* A failed operation that returns nothing: the call fails. */
static void dev_fail(hp_mem_t *m, const char *what)
{
    const hp_gpu_ops_v2_t *g = g2();
    if (m->err == HP_OK)
        HP_WARN("gpu: %s failed: %s", what, g != NULL ? g->base.last_error() : "no cuda module");
    if (m->err == HP_OK)
        m->err = HP_ERR_DEVICE;
}

/* Synchronous copies through the codec context (either side host). */
static int dev_xfer(hp_mem_t *m, void *dst, const void *src, size_t bytes)
{
    if (bytes == 0)
        return 0;
    if (m->cx == NULL || g2()->copy(m->cx, dst, src, bytes) != HP_GPU_OK) {
        dev_fail(m, "a copy between host and device memory");
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------- encode, decode */

/* Host copies of an encode's range, residual and state (in that order in
 * the stage arena, with `extra` more vectors of n floats after them), and
 * `ha` pointing at them. */
static hp_status_t stage_args_in(hp_mem_t *m, const hipress_encode_args_t *a, hipress_encode_args_t *ha, size_t extra,
                            float **h_p)
{
    const size_t n = a->n, fb = n * sizeof(float);
    float *h = (float *)arena(ARENA_STAGE, (3 + extra) * fb + 64, &m->where);
    if (h == NULL)
        return HP_ERR_NOMEM;
    *ha = *a;
    ha->in = h;
    ha->residual = a->residual != NULL ? h + n : NULL;
    ha->state = a->state != NULL ? h + 2 * n : NULL;
    if (dev_xfer(m, h, a->in, fb) || (a->residual && dev_xfer(m, ha->residual, a->residual, fb)) ||
        (a->state && dev_xfer(m, ha->state, a->state, fb)))
        return HP_ERR_DEVICE;
    *h_p = h;
    return HP_OK;
}

/* The host encode's residual and state back to the device. */
static hp_status_t stage_args_out(hp_mem_t *m, const hipress_encode_args_t *a, const hipress_encode_args_t *ha)
{
    const size_t fb = a->n * sizeof(float);
    if ((a->residual && dev_xfer(m, a->residual, ha->residual, fb)) || (a->state && dev_xfer(m, a->state, ha->state, fb)))
        return HP_ERR_DEVICE;
    return HP_OK;
}

/* A compressor without device kernels: on host copies of the range. */
static hp_status_t staged_encode(hp_mem_t *m, int kind, hipress_encode_args_t *a, hp_src_t src, float *mask,
                                 void *out, size_t cap, size_t *len_p, int *nonfinite_p, size_t *except_p)
{
    const size_t n = a->n, fb = n * sizeof(float);
    hipress_encode_args_t ha;
    float *h = NULL;
    hp_status_t st = stage_args_in(m, a, &ha, 1, &h);
    if (st == HP_OK)
        st = hp_msg_encode_x(kind, &ha, out, cap, src, len_p, nonfinite_p, except_p);
    if (st == HP_OK)
        st = stage_args_out(m, a, &ha);
    if (st != HP_OK)
        return st;
    if (mask != NULL && !*nonfinite_p && ((const unsigned char *)out)[2] == 0) {
        float *hm = h + 3 * n;
        if (dev_xfer(m, hm, mask, fb))
            return HP_ERR_DEVICE;
        hp_mask_sent(hm, kind, (const unsigned char *)out, *len_p, n);
        if (dev_xfer(m, mask, hm, fb))
            return HP_ERR_DEVICE;
    }
    return HP_OK;
}

/* The device encode found NaN or Inf where src allows exceptions (an
 * overflowed sum of finite values; a finite input of magnitude >= 2^126):
 * the CPU's hp_msg_except on host copies of the range and of its vectors,
 * which the device encode left as the CPU's first encode does (nothing
 * written, or dgc's error feedback restarted from zero), so the message
 * and the vectors are the CPU's bytes.  Rare: its copies do not matter. */
static hp_status_t staged_except(hp_mem_t *m, int kind, hipress_encode_args_t *a, hp_src_t src, void *out,
                                 size_t cap, size_t *len_p, int *nonfinite_p, size_t *except_p)
{
    hipress_encode_args_t ha;
    float *h = NULL;
    hp_status_t st = stage_args_in(m, a, &ha, 0, &h);
    if (st == HP_OK)
        st = hp_msg_except(kind, &ha, out, cap, src, len_p, nonfinite_p, except_p);
    if (st == HP_OK)   /* the second encode's error feedback (with the exceptions at 0) */
        st = stage_args_out(m, a, &ha);
    return st;
}

static hp_status_t dev_encode(hp_mem_t *m, int kind, hipress_encode_args_t *a, hp_src_t src, float *mask,
                              void *out, size_t cap, size_t *len_p, int *nonfinite_p, size_t *except_p)
{
    hp_gpu_enc_t e;
    hp_status_t st;
    size_t plen = 0;
    int nf = 0, bad = 0, rc;

    *except_p = 0;
    if (m->cx == NULL)
        return m->err != HP_OK ? m->err : HP_ERR_DEVICE;
    if (a->n == 0)
        return hp_msg_encode(kind, a, out, cap, len_p, nonfinite_p);   /* header only */
    memset(&e, 0, sizeof(e));
    /* the compressor says which format and with what parameters; the
     * module's codec runs it (no device form: on host copies) */
    st = hp_comp_gpu_fmt(kind, a->params, a->n, a->k, &e.fmt);
    if (HP_ST_CLASS(st) == HP_ERR_UNSUPPORTED)
        return staged_encode(m, kind, a, src, mask, out, cap, len_p, nonfinite_p, except_p);
    if (st != HP_OK)
        return st;
    e.in = a->in;
    e.residual = a->residual;
    e.state = a->state;
    e.mask = mask;
    e.n = a->n;
    e.rng_key = hp_rng_key(a->rng_key);
    e.rng_offset = a->rng_offset;
    if (cap < HP_MSG_HEADER)
        return HP_ERR_INVALID;
    rc = g2()->encode(m->cx, &e, (unsigned char *)out + HP_MSG_HEADER, cap - HP_MSG_HEADER, &plen, &nf, &bad);
    if (bad) {
        /* a message decoded earlier in this call was malformed */
        if (m->err == HP_OK)
            m->err = HP_ERR_MESSAGE;
        return HP_ERR_MESSAGE;
    }
    if (rc != HP_GPU_OK) {
        HP_WARN("gpu: %s", g2()->base.last_error());
        return rc == HP_GPU_ERR_INVALID ? HP_ERR_INVALID : rc == HP_GPU_ERR_NOMEM ? HP_ERR_NOMEM : HP_ERR_DEVICE;
    }
    if (nf)
        plen = 0;
    hp_msg_put_header(out, kind, nf, a->n, plen);
    *len_p = HP_MSG_HEADER + plen;
    *nonfinite_p = nf;
    if (nf && src != HP_SRC_BAD)
        return staged_except(m, kind, a, src, out, cap, len_p, nonfinite_p, except_p);
    return HP_OK;
}

static hp_status_t dev_decode(hp_mem_t *m, int kind, const void *msg, size_t len, size_t n, float *dst,
                              int accumulate, const hipress_comp_params_t *p)
{
    hp_msg_header_t h;
    hp_gpu_dec_t d;
    hp_status_t st;
    int rc;

    if (m->cx == NULL)
        return m->err != HP_OK ? m->err : HP_ERR_DEVICE;
    /* the header, as hp_msg_decode checks it */
    st = hp_msg_check(msg, len, kind, n, &h);
    if (st != HP_OK || n == 0)
        return st;
    if (h.flags & HP_MSG_NONFINITE) {
        if (g2()->fill(m->cx, dst, NAN, n) != HP_GPU_OK)
            return HP_ERR_DEVICE;
        return HP_OK;
    }
    memset(&d, 0, sizeof(d));
    if ((h.flags & HP_MSG_EXCEPT) || hp_comp_gpu_fmt(h.kind, p, n, 0, &d.fmt) != HP_OK) {
        /* a compressor without device kernels (or settings its encoder
         * rejects), or a message with exceptions (rare: an overflowed sum):
         * by the CPU's decoder on a host copy */
        float *hd = (float *)arena(ARENA_STAGE, n * sizeof(float) + 64, &m->where);
        hp_status_t st;
        if (hd == NULL)
            return HP_ERR_NOMEM;
        if (accumulate && dev_xfer(m, hd, dst, n * sizeof(float)))
            return HP_ERR_DEVICE;
        st = hp_msg_decode(kind, msg, len, n, hd, accumulate, p);
        if (st == HP_OK && dev_xfer(m, dst, hd, n * sizeof(float)))
            return HP_ERR_DEVICE;
        return st;
    }
    d.accumulate = accumulate;
    d.n = n;
    rc = g2()->decode(m->cx, &d, (const unsigned char *)msg + HP_MSG_HEADER, h.payload, dst);
    if (rc == HP_GPU_ERR_INVALID)
        return HP_ERR_MESSAGE;
    if (rc != HP_GPU_OK) {
        HP_WARN("gpu: %s", g2()->base.last_error());
        return HP_ERR_DEVICE;
    }
    return HP_OK;
}

/* ------------------------------------------------------- buffer ops */

static int dev_fold(hp_mem_t *m, float *buf, float *r, size_t n)
{
    if (m->cx == NULL || g2()->fold(m->cx, buf, r, n) != HP_GPU_OK)
        dev_fail(m, "folding a residual into a device buffer");
    return 1;
}

/* hp_call_merge_begin's own-data check: the codec's scan kernel
 * (hp_kl_finite) and a wait for its flag, while the messages travel.  A
 * failure is "unknown" (-1): the merge is then taken as non-finite, as the
 * sum would have been before exceptions existed; the call's next device
 * operation reports the failure. */
static int dev_nonfinite(hp_mem_t *m, const float *buf, size_t n)
{
    int bad = 0;
    if (n == 0)
        return 0;
    if (m->cx == NULL || g2()->nonfinite(m->cx, buf, n, &bad) != HP_GPU_OK)
        return -1;
    return bad != 0;
}

static void dev_copy(hp_mem_t *m, void *dst, const void *src, size_t bytes)
{
    if (dst != src && bytes > 0 && (m->cx == NULL || g2()->copy(m->cx, dst, src, bytes) != HP_GPU_OK))
        dev_fail(m, "a copy of device memory");
}

static void dev_add(hp_mem_t *m, float *dst, const float *src, size_t n)
{
    if (m->cx == NULL || g2()->add(m->cx, dst, src, n) != HP_GPU_OK)
        dev_fail(m, "a sum on the device");
}

static float *dev_work(hp_mem_t *m, void *host_extra, size_t n)
{
    void *p = NULL;
    (void)host_extra;
    if (m->cx == NULL || g2()->work(m->cx, n * sizeof(float), &p) != HP_GPU_OK) {
        dev_fail(m, "device scratch memory");
        return NULL;
    }
    return (float *)p;
}

static size_t dev_work_host_bytes(size_t n)
{
    (void)n;
    return 0;
}

static int dev_momentum(hp_mem_t *m, float *u, float *buf, float mom, size_t n)
{
    int applied = 0;
    if (m->cx == NULL || g2()->momentum(m->cx, u, buf, mom, n, &applied) != HP_GPU_OK) {
        dev_fail(m, "dgc's momentum on the device");
        return 0;
    }
    return applied;
}

static void *dev_scratch(hp_mem_t *m, size_t bytes)
{
    return arena(ARENA_MSG, bytes, &m->where);
}

static hp_status_t dev_sync(hp_mem_t *m)
{
    int bad = 0;
    if (m->cx != NULL && g2()->sync(m->cx, &bad) != HP_GPU_OK)
        dev_fail(m, "waiting for the device");
    if (bad && m->err == HP_OK) {
        HP_WARN("rejected a compressed message on the device (malformed content)");
        m->err = HP_ERR_MESSAGE;
    }
    return m->err;
}

const hp_mem_ops_t hp_mem_dev = {
    .id = HP_BACKEND_DEVICE,
    .name = "cuda",
    .encode = dev_encode,
    .decode = dev_decode,
    .fold = dev_fold,
    .nonfinite = dev_nonfinite,
    .copy = dev_copy,
    .add = dev_add,
    .work = dev_work,
    .work_host_bytes = dev_work_host_bytes,
    .momentum = dev_momentum,
    .scratch = dev_scratch,
    .sync = dev_sync,
    /* the messages are host memory (page-locked slots) */
    .msg_len = hp_mem_host_msg_len,
    .msg_error = hp_mem_host_msg_error,
    .msg_nonfinite = hp_mem_host_msg_nonfinite,
    .msg_corrupt = hp_mem_host_msg_corrupt,
    .msg_mem = NULL,
};

/* ------------------------------------------------------------ a call */

hp_status_t hp_mem_end(hp_mem_t *m)
{
    hp_status_t st = m->ops->sync(m);
    if (hp_mem_is_device(m) && m->cx != NULL) {
        int bad = 0;
        g2()->call_end(m->cx, &bad);
        m->cx = NULL;
    }
    return st;
}

/* ------------------------------------------- host copies (exact MPI) */

float *hp_mem_stage_in(hp_mem_t *m, const void *dev, size_t count)
{
    float *h = (float *)arena(ARENA_STAGE, count * sizeof(float) + 64, &m->where);
    if (h == NULL) {
        if (m->err == HP_OK)
            m->err = HP_ERR_NOMEM;
        return NULL;
    }
    if (dev != NULL && dev_xfer(m, h, dev, count * sizeof(float)))
        return NULL;
    return h;
}

int hp_mem_stage_out(hp_mem_t *m, void *dev, const float *h, size_t count)
{
    return dev_xfer(m, dev, h, count * sizeof(float));
}
