/* CompLL registry, plugin loading and the message header. */
#include "hp_comp.h"
#include "hp_elem.h"
#include "hp_ops_sparse.h"
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

/* Built-in compressors, each defined in its own hp_comp_*.c, in registry
 * order (the kind byte of a message is the index, the same on every rank). */
#define HP_BUILTIN(name) extern const hipress_compressor_v1_t hp_comp_##name; \
                         extern const hp_comp_ext_t hp_compx_##name;
#include "hp_builtins.def"
#undef HP_BUILTIN

static hp_comp_t *const builtins[] = {
#define HP_BUILTIN(name) &hp_comp_##name,
#include "hp_builtins.def"
#undef HP_BUILTIN
};
static const hp_comp_ext_t *const builtin_ext[] = {
#define HP_BUILTIN(name) &hp_compx_##name,
#include "hp_builtins.def"
#undef HP_BUILTIN
};

static hp_comp_t *registry[HP_MAX_COMPRESSORS];
static const hp_comp_ext_t *registry_ext[HP_MAX_COMPRESSORS];
static hp_comp_ext_t plugin_ext[HP_MAX_COMPRESSORS];
static int registry_count = -1;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

static void registry_init(void)
{
    if (registry_count >= 0)
        return;
    registry_count = 0;
    for (size_t i = 0; i < HP_ARRAY_SIZE(builtins); i++) {
        registry_ext[registry_count] = builtin_ext[i];
        registry[registry_count++] = builtins[i];
    }
}

const hp_comp_ext_t *hp_comp_ext(int kind)
{
    static const hp_comp_ext_t none = {.qclass = HP_QCLASS_EXACT};
    registry_init();
    return (kind >= 0 && kind < registry_count) ? registry_ext[kind] : &none;
}

int hp_comp_is_collective(int kind)
{
    hp_comp_t *c = hp_comp_get(kind);
    return c != NULL && kind < HP_BUILTIN_COUNT && (c->flags & HIPRESS_COMP_COLLECTIVE) != 0;
}

size_t hp_comp_grain(int kind, const hipress_comp_params_t *p)
{
    const hp_comp_ext_t *x = hp_comp_ext(kind);
    size_t g = x->grain != NULL ? x->grain(p) : 1;
    return g ? g : 1;
}

int hp_comp_sum_kind(int kind, int setting, const hipress_comp_params_t *p)
{
    static const int fixed[] = {
        [HP_SUM_Q2] = HP_BUILTIN_q2,     [HP_SUM_Q4] = HP_BUILTIN_q4,     [HP_SUM_Q8] = HP_BUILTIN_q8,
        [HP_SUM_FP16] = HP_BUILTIN_fp16, [HP_SUM_BF16] = HP_BUILTIN_bf16, [HP_SUM_NONE] = HP_BUILTIN_none,
    };
    const hp_comp_ext_t *x = hp_comp_ext(kind);
    if (hp_comp_get(kind) == NULL || hp_comp_is_collective(kind) || setting == HP_SUM_SAME)
        return kind;
    if (setting == HP_SUM_AUTO)
        return x->sum_codec != NULL ? x->sum_codec(p) : kind;
    return setting > HP_SUM_SAME && setting <= HP_SUM_NONE ? fixed[setting] : kind;
}

int hp_comp_sum_cost(int kind, int sum_kind)
{
    return sum_kind != kind && hp_comp_ext(sum_kind)->owner_free ? 0 : 1;
}

size_t hp_comp_grain2(int kind, int sum_kind, const hipress_comp_params_t *p)
{
    size_t a = hp_comp_grain(kind, p), b = hp_comp_grain(sum_kind, p), x = a, y = b;
    while (y != 0) {
        size_t t = x % y;
        x = y;
        y = t;
    }
    return a / x * b;
}

int hp_comp_unbiased_kind(int kind, const hipress_comp_params_t *p, int dense_q)
{
    const hp_comp_ext_t *x = hp_comp_ext(kind);
    int form = hp_comp_get(kind) != NULL && x->unbiased != NULL ? x->unbiased(p) : kind;
    return form == HP_FORM_DENSE_Q ? dense_q : form;
}

void hp_comp_unbiased_params(const hipress_comp_params_t *p, hipress_comp_params_t *out)
{
    *out = *p;
    out->q_rounding = 1;
}

hp_status_t hp_comp_gpu_fmt(int kind, const hipress_comp_params_t *p, size_t n, size_t k, hp_gpu_fmt_t *f)
{
    const hp_comp_ext_t *x = hp_comp_ext(kind);
    memset(f, 0, sizeof(*f));
    if (x->gpu_fmt == NULL || p == NULL)
        return HP_ERR_UNSUPPORTED;
    return x->gpu_fmt(p, n, k, f);
}

int hp_comp_count(void)
{
    registry_init();
    return registry_count;
}

hp_comp_t *hp_comp_get(int kind)
{
    registry_init();
    return (kind >= 0 && kind < registry_count) ? registry[kind] : NULL;
}

int hp_comp_find(const char *name)
{
    registry_init();
    for (int i = 0; i < registry_count; i++)
        if (strcmp(registry[i]->name, name) == 0)
            return i;
    return -1;
}

int hp_comp_name_ok(const char *name)
{
    return hp_comp_find(name) >= 0;
}

hp_status_t hp_comp_register(hp_comp_t *c, char *err, size_t errlen)
{
    hp_status_t st = HP_OK;
    if (c == NULL || c->abi_version != HIPRESS_COMPRESSOR_ABI_VERSION || c->name == NULL ||
        c->max_payload == NULL || c->encode == NULL || c->decode == NULL) {
        snprintf(err, errlen, "compressor struct is incomplete or of abi version %u (hipress knows %d)",
                 c ? c->abi_version : 0, HIPRESS_COMPRESSOR_ABI_VERSION);
        return HP_ERR_INVALID;
    }
    pthread_mutex_lock(&registry_lock);
    registry_init();
    if (hp_comp_find(c->name) >= 0) {
        snprintf(err, errlen, "compressor '%s' is already registered", c->name);
        st = HP_ERR_INVALID;
    } else if (registry_count >= HP_MAX_COMPRESSORS) {
        snprintf(err, errlen, "too many compressors (at most %d)", HP_MAX_COMPRESSORS);
        st = HP_ERR_INVALID;
    } else {
        /* a plugin: element-wise, its class from its flags; a collective
         * plugin is not supported by ABI v1 (no hook for its exchanges:
         * hp_comp_is_collective) */
        hp_comp_ext_t *x = &plugin_ext[registry_count];
        memset(x, 0, sizeof(*x));
        x->qclass = (c->flags & HIPRESS_COMP_LOSSLESS) ? HP_QCLASS_EXACT
                    : (c->flags & HIPRESS_COMP_SPARSE) ? HP_QCLASS_SPARSE : HP_QCLASS_QUANT;
        x->max_stages = hp_comp_default_budget(x->qclass);
        /* a plugin that needs a residual runs the dense q form where none can be kept */
        if (c->flags & (HIPRESS_COMP_EF | HIPRESS_COMP_MOMENTUM)) {
            x->unbiased = hp_unbiased_dense_q;
            x->sgd_only = 1;   /* (unmeasured under Adam: its form is the safe side) */
        }
        registry_ext[registry_count] = x;
        registry[registry_count++] = c;
    }
    pthread_mutex_unlock(&registry_lock);
    return st;
}

hp_status_t hp_comp_load_plugin(const char *path, char *err, size_t errlen)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    hp_comp_t *one;
    hp_comp_t *const *many;
    hp_status_t st;

    if (h == NULL) {
        snprintf(err, errlen, "HIPRESS_PLUGIN='%s': %s", path, dlerror());
        return HP_ERR_INVALID;
    }
    many = (hp_comp_t *const *)dlsym(h, "hipress_compressors_v1");
    if (many != NULL) {
        for (; *many != NULL; many++)
            if ((st = hp_comp_register(*many, err, errlen)) != HP_OK)
                return st;
        return HP_OK;
    }
    one = (hp_comp_t *)dlsym(h, "hipress_compressor_v1");
    if (one == NULL) {
        snprintf(err, errlen, "HIPRESS_PLUGIN='%s': exports neither hipress_compressor_v1 nor hipress_compressors_v1", path);
        dlclose(h);
        return HP_ERR_INVALID;
    }
    return hp_comp_register(one, err, errlen);
}

double hp_sparse_density(int contribs, const hipress_comp_params_t *p)
{
    double d = (p != NULL ? p->sparse_ratio : 0.001) * (double)HP_MAX(contribs, 1);
    return d < 1.0 ? d : 1.0;
}

size_t hp_sparse_k2(size_t len, int contribs, const hipress_comp_params_t *p)
{
    hipress_comp_params_t q;
    if (p != NULL) {
        q = *p;
    } else {
        memset(&q, 0, sizeof(q));   /* the encoder's defaults for a NULL params */
    }
    q.sparse_ratio = hp_sparse_density(contribs, p);
    return hp_sparse_k_blocks(len, &q);
}

size_t hp_msg_max_bytes(int kind, size_t n, const hipress_comp_params_t *p)
{
    hp_comp_t *c = hp_comp_get(kind);
    size_t m = c ? c->max_payload(n, p) : 4 * n;
    /* sparse compressors may fall back to a dense `none` message */
    if (c && (c->flags & HIPRESS_COMP_SPARSE))
        m = HP_MAX(m, 4 * n);
    return HP_MSG_HEADER + m;
}

static void put_header(void *out, int kind, int flags, size_t n, size_t payload)
{
    unsigned char *o = (unsigned char *)out;
    uint32_t n32 = (uint32_t)n, p32 = (uint32_t)payload;
    o[0] = HP_MSG_MAGIC;
    o[1] = (unsigned char)kind;
    o[2] = (unsigned char)flags;
    o[3] = HP_MSG_VERSION;
    memcpy(o + 4, &n32, 4);
    memcpy(o + 8, &p32, 4);
}

/* Read a header (msg holds at least HP_MSG_HEADER bytes); 0 when its magic,
 * version or flags are not a message's. */
static int parse_header(const void *msg, hp_msg_header_t *h)
{
    const unsigned char *m = (const unsigned char *)msg;
    h->magic = m[0];
    h->kind = m[1];
    h->flags = m[2];
    h->version = m[3];
    memcpy(&h->n, m + 4, 4);
    memcpy(&h->payload, m + 8, 4);
    return h->magic == HP_MSG_MAGIC && h->version == HP_MSG_VERSION &&
           (h->flags & ~(HP_MSG_NONFINITE | HP_MSG_EXCEPT)) == 0 && h->flags != (HP_MSG_NONFINITE | HP_MSG_EXCEPT);
}

hp_status_t hp_msg_header(const void *msg, size_t len, hp_msg_header_t *h)
{
    if (msg == NULL || len < HP_MSG_HEADER || !parse_header(msg, h) || (size_t)h->payload != len - HP_MSG_HEADER)
        return HP_ERR_MESSAGE;
    return HP_OK;
}

size_t hp_msg_len(const void *msg, size_t cap)
{
    hp_msg_header_t h;
    if (msg == NULL || cap < HP_MSG_HEADER || !parse_header(msg, &h) || (size_t)h.payload > cap - HP_MSG_HEADER)
        return 0;
    return HP_MSG_HEADER + (size_t)h.payload;
}

void hp_msg_arrived(void *msg, size_t got, size_t cap)
{
    /* a message is at least a header, so byte 0 is the receiver's */
    if (msg != NULL && cap >= HP_MSG_HEADER && (got > cap || got < HP_MSG_HEADER || hp_msg_len(msg, got) != got))
        ((unsigned char *)msg)[0] = 0;    /* not HP_MSG_MAGIC: hp_msg_len gives 0 */
}

void hp_msg_put_header(void *out, int kind, int nonfinite, size_t n, size_t payload)
{
    put_header(out, kind, nonfinite ? HP_MSG_NONFINITE : 0, n, payload);
}

size_t hp_msg_error(void *out, size_t n)
{
    put_header(out, HP_KIND_ERROR, 0, n, 0);
    return HP_MSG_HEADER;
}

hp_status_t hp_msg_encode(int kind, hipress_encode_args_t *args, void *out, size_t cap,
                          size_t *len_p, int *nonfinite_p)
{
    hp_comp_t *c = hp_comp_get(kind);
    size_t plen = 0;
    int nonfinite = 0, rc;

    if (c == NULL || cap < HP_MSG_HEADER || args->n > UINT32_MAX)
        return HP_ERR_INVALID;
    if (args->n == 0) {
        /* an empty range (grain-aligned spans can be): header only, whatever
         * the format, so no compressor has to define n = 0 */
        put_header(out, kind, 0, 0, 0);
        *len_p = HP_MSG_HEADER;
        *nonfinite_p = 0;
        return HP_OK;
    }
    args->out = (unsigned char *)out + HP_MSG_HEADER;
    args->out_cap = cap - HP_MSG_HEADER;
    rc = c->encode(args, &plen, &nonfinite);
    if (rc != HIPRESS_COMP_OK || plen > args->out_cap) {
        HP_WARN("compressor %s failed to encode %zu elements (rc %d)", c->name, args->n, rc);
        return rc == HIPRESS_COMP_ENOMEM ? HP_ERR_NOMEM : HP_ERR_INVALID;
    }
    if (nonfinite)
        plen = 0;
    put_header(out, kind, nonfinite ? HP_MSG_NONFINITE : 0, args->n, plen);
    *len_p = HP_MSG_HEADER + plen;
    *nonfinite_p = nonfinite;
    return HP_OK;
}

/* An exception value: non-finite, or beyond what the formats carry. */
static int exceptional(float v)
{
    return (hp_f2u(v) & 0x7fffffffu) >= 0x7e800000u;   /* |v| >= 2^126, Inf, NaN */
}

hp_status_t hp_msg_encode_x(int kind, hipress_encode_args_t *args, void *out, size_t cap,
                            hp_src_t src, size_t *len_p, int *nonfinite_p, size_t *except_p)
{
    hp_status_t st;

    if (except_p != NULL)
        *except_p = 0;
    st = hp_msg_encode(kind, args, out, cap, len_p, nonfinite_p);
    if (st != HP_OK || !*nonfinite_p)
        return st;
    return hp_msg_except(kind, args, out, cap, src, len_p, nonfinite_p, except_p);
}

hp_status_t hp_msg_except(int kind, hipress_encode_args_t *args, void *out, size_t cap,
                          hp_src_t src, size_t *len_p, int *nonfinite_p, size_t *except_p)
{
    unsigned char *o = (unsigned char *)out;
    float *in = (float *)(uintptr_t)args->in;
    uint32_t idx[HP_MSG_MAX_EXCEPT];
    float val[HP_MSG_MAX_EXCEPT];
    size_t k = 0, plen, head;
    hp_comp_t *c = hp_comp_get(kind);
    int nonfinite = 0, rc;

    if (except_p != NULL)
        *except_p = 0;
    if (src == HP_SRC_BAD)
        return HP_OK;
    for (size_t i = 0; i < args->n; i++) {
        if (!exceptional(in[i]))
            continue;
        if (src == HP_SRC_INPUT && hp_nonfinite(in[i]))
            return HP_OK;            /* the input's own NaN or Inf */
        if (k == HP_MSG_MAX_EXCEPT)
            return HP_OK;            /* too many: the partition is non-finite */
        idx[k] = (uint32_t)i;
        val[k++] = in[i];
    }
    head = 4 + 8 * k;
    if (k == 0 || cap < HP_MSG_HEADER + head + c->max_payload(args->n, args->params))
        return HP_OK;                /* not an exception the compressor saw, or no room */
    for (size_t j = 0; j < k; j++)
        in[idx[j]] = 0.0f;
    args->out = o + HP_MSG_HEADER + head;
    args->out_cap = cap - HP_MSG_HEADER - head;
    plen = 0;
    rc = c->encode(args, &plen, &nonfinite);
    for (size_t j = 0; j < k; j++)
        in[idx[j]] = val[j];
    if (rc != HIPRESS_COMP_OK || plen > args->out_cap)
        return HP_ERR_INVALID;
    if (nonfinite)
        return HP_OK;                /* still non-finite (an overflow of g + r): as it was */
    {
        uint32_t k32 = (uint32_t)k;
        memcpy(o + HP_MSG_HEADER, &k32, 4);
        for (size_t j = 0; j < k; j++) {
            memcpy(o + HP_MSG_HEADER + 4 + 8 * j, &idx[j], 4);
            memcpy(o + HP_MSG_HEADER + 8 + 8 * j, &val[j], 4);
        }
    }
    put_header(out, kind, HP_MSG_EXCEPT, args->n, head + plen);
    *len_p = HP_MSG_HEADER + head + plen;
    *nonfinite_p = 0;
    if (except_p != NULL)
        *except_p = k;
    return HP_OK;
}

hp_status_t hp_msg_check(const void *msg, size_t len, int kind, size_t n, hp_msg_header_t *h)
{
    if (hp_msg_header(msg, len, h) != HP_OK)
        return HP_ERR_MESSAGE;
    if (h->kind == HP_KIND_ERROR)
        return HP_ERR_PEER;
    if ((size_t)h->n != n || (h->kind != kind && h->kind != hp_kind_none))
        return HP_ERR_MESSAGE;
    if (n == 0)
        return h->payload == 0 && h->flags == 0 ? HP_OK : HP_ERR_MESSAGE;
    if ((h->flags & HP_MSG_NONFINITE) && h->payload != 0)
        return HP_ERR_MESSAGE;
    return HP_OK;
}

hp_status_t hp_msg_decode(int kind, const void *msg, size_t len, size_t n, float *out,
                          int accumulate, const hipress_comp_params_t *p)
{
    hp_msg_header_t h;
    hp_comp_t *c;
    const unsigned char *pl = (const unsigned char *)msg + HP_MSG_HEADER;
    size_t plen, k = 0;
    uint32_t idx[HP_MSG_MAX_EXCEPT];
    float val[HP_MSG_MAX_EXCEPT], prev[HP_MSG_MAX_EXCEPT];

    hp_status_t st = hp_msg_check(msg, len, kind, n, &h);
    if (st != HP_OK || n == 0)
        return st;
    if (h.flags & HP_MSG_NONFINITE) {
        for (size_t i = 0; i < n; i++)
            out[i] = NAN;
        return HP_OK;
    }
    plen = h.payload;
    if (h.flags & HP_MSG_EXCEPT) {
        uint32_t k32;
        if (plen < 4)
            return HP_ERR_MESSAGE;
        memcpy(&k32, pl, 4);
        k = k32;
        if (k == 0 || k > HP_MSG_MAX_EXCEPT || k > n || plen < 4 + 8 * k)
            return HP_ERR_MESSAGE;
        for (size_t j = 0; j < k; j++) {
            memcpy(&idx[j], pl + 4 + 8 * j, 4);
            memcpy(&val[j], pl + 8 + 8 * j, 4);
            if (idx[j] >= n || (j > 0 && idx[j] <= idx[j - 1]) || !exceptional(val[j]))
                return HP_ERR_MESSAGE;
            prev[j] = accumulate ? out[idx[j]] : 0.0f;
        }
        pl += 4 + 8 * k;
        plen -= 4 + 8 * k;
    }
    c = hp_comp_get(h.kind);
    if (c->decode(pl, plen, n, out, accumulate, p) != HIPRESS_COMP_OK)
        return HP_ERR_MESSAGE;
    for (size_t j = 0; j < k; j++)
        out[idx[j]] = prev[j] + val[j];   /* prev 0 when overwriting: exactly val */
    return HP_OK;
}

HP_EXPORT int hipress_compressor_count(void)
{
    return hp_comp_count();
}

HP_EXPORT const hipress_compressor_v1_t *hipress_compressor_find(const char *name)
{
    return name ? hp_comp_get(hp_comp_find(name)) : NULL;
}

HP_EXPORT const char *hipress_compressor_name(int i)
{
    hp_comp_t *c = hp_comp_get(i);
    return c ? c->name : NULL;
}

int hp_comp_default_budget(hp_qclass_t qclass)
{
    /* For a plugin, from its class (built-ins carry their own, measured:
     * hp_comp_ext_t.max_stages).  Re-encoding a rounded value costs almost
     * nothing; a quantised partial sum costs accuracy at every stage; the
     * sparse compressors showed no cost up to 2 stages. */
    static const int budget[HP_QCLASS_N] = {
        [HP_QCLASS_EXACT] = 0,
        [HP_QCLASS_ROUNDING] = 0,
        [HP_QCLASS_QUANT] = 1,
        [HP_QCLASS_SPARSE] = 2,
        [HP_QCLASS_LOWRANK] = 0,
    };
    return qclass < HP_QCLASS_N ? budget[qclass] : 1;
}

size_t hp_msg_wire_bytes(int kind, size_t len, int contribs, const hipress_comp_params_t *p)
{
    hp_comp_t *c = hp_comp_get(kind);
    if (c != NULL && (c->flags & HIPRESS_COMP_SPARSE)) {
        size_t k2 = hp_sparse_k2(len, contribs, p);
        return HP_MSG_HEADER + HP_MIN(8 * k2, 4 * len);
    }
    return c != NULL ? HP_MSG_HEADER + c->max_payload(len, p) : HP_MSG_HEADER + 4 * len;
}

size_t hp_msg_cap(int kind, size_t n, int contribs, const hipress_comp_params_t *p)
{
    hp_comp_t *c = hp_comp_get(kind);
    if (c != NULL && (c->flags & HIPRESS_COMP_SPARSE)) {
        hipress_comp_params_t sp = *p;
        sp.sparse_ratio = hp_sparse_density(contribs, p);
        if (8 * hp_sparse_k_blocks(n, &sp) < 4 * n)
            return HP_MSG_HEADER + c->max_payload(n, &sp) + HP_MSG_EXCEPT_BYTES;
    }
    return hp_msg_max_bytes(kind, n, p) + HP_MSG_EXCEPT_BYTES;
}
