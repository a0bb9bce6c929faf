/*
 * libFuzzer harness for every registered decoder (and, in one mode, every
 * encoder feeding its own decoder).  See doc/dev/fuzzing.md.
 *
 * Input layout:
 *   byte 0        mode bits
 *                   0x01 accumulate (else overwrite)
 *                   0x02 set the header's kind byte to the chosen compressor
 *                   0x04 set the header's kind byte to `none` (dense fallback)
 *                   0x08 set the header's n and payload-length fields to match
 *                   0x10 encode mode: the message bytes are float inputs
 *                   0xc0 parameter variant (0..3)
 *   byte 1        L (at most 16), then L bytes: the compressor's name (an
 *                 unknown name picks compressor (hash of the name) % count,
 *                 so every input reaches some decoder)
 *   2 bytes       n - 1, little endian, modulo HP_FUZZ_MAX_N (encode mode:
 *                 the k asked for, modulo n / 2 + 1)
 *   rest          the message (decode mode) or the float values (encode mode,
 *                 n = their count, at most HP_FUZZ_MAX_N)
 * Selecting by name keeps a corpus valid when the registry order (the kind
 * byte on the wire) changes; the 0x02 / 0x08 bits keep a seed's header in
 * step with the registry it runs against.
 *
 * Decode mode: hp_msg_decode on the message, and the compressor's decode on
 * its payload copied to an exact-size heap block (so ASan sees a read past
 * the end); out sits between guard regions that must keep their pattern; a
 * payload that decodes does so to the same bits twice and on every ISA path.
 * Encode mode: hp_msg_encode into an exact-size buffer must succeed, give
 * the same bytes (and residual / state) on every ISA path, and decode; a
 * NaN/Inf input must give the NaN message (lossy compressors) or come back
 * bit for bit (lossless ones); a finite input of a rounding format (fp16,
 * bf16) must decode to finite values near it.
 *
 * Built with -DHP_FUZZ_MAIN it is also a plain program (tests/unit/fuzz_replay):
 *   fuzz_replay FILE|DIR...      run each input once (regression replay)
 *   fuzz_replay --generate DIR   write the seed corpus (tests/unit/fuzz_corpus)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hp_comp.h"

#define HP_FUZZ_MAX_N 4096
#define GUARD 16
#define GUARD_BITS 0x7fa5a5a5u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *name, size_t n)
{
    fprintf(stderr, "fuzz_decode: %s (compressor %s, n=%zu)\n", what, name, n);
    abort();
}

static hipress_comp_params_t variant(int v, int isa)
{
    static hipress_comp_params_t def;
    static int have_def;
    hipress_comp_params_t p;

    if (!have_def) {
        hipress_comp_params_default(&def);
        have_def = 1;
    }
    p = def;
    switch (v) {
    case 1:
        p.onebit_block = 32;
        p.tbq_block = 32;
        p.fp16_block = 32;
        p.terngrad_block = 32;
        p.sparse_block = 64;
        p.terngrad_bits = 1;
        p.q_block = 32;
        p.q_rounding = 1;
        p.powersgd_rank = 1;
        p.sparse_ratio = 0.05;
        break;
    case 2:
        p.onebit_block = 1024;
        p.tbq_block = 1024;
        p.fp16_block = 1024;
        p.terngrad_block = 1024;
        p.sparse_block = 1024;
        p.terngrad_bits = 8;
        p.q_block = 1024;
        p.powersgd_rank = 16;
        p.tbq_threshold = 0.5f;
        break;
    case 3:
        p.terngrad_bits = 4;
        p.q_rounding = 1;
        p.sparse_ratio = 0.3;
        p.tbq_scale = 2.0f;
        p.dgc_momentum = 0.5f;
        break;
    default:
        break;
    }
    p.isa = isa;
    return p;
}

static float *guarded(size_t n, float fill)
{
    float *m = (float *)malloc((n + 2 * GUARD) * sizeof(float));
    uint32_t b = GUARD_BITS;
    if (m == NULL)
        abort();
    for (size_t i = 0; i < n + 2 * GUARD; i++)
        memcpy(&m[i], &b, 4);
    for (size_t i = 0; i < n; i++)
        m[GUARD + i] = fill;
    return m;
}

static void guard_check(const float *m, size_t n, const char *name)
{
    for (size_t i = 0; i < GUARD; i++) {
        uint32_t a, b;
        memcpy(&a, &m[i], 4);
        memcpy(&b, &m[GUARD + n + i], 4);
        if (a != GUARD_BITS || b != GUARD_BITS)
            fail("write outside out[0..n)", name, n);
    }
}

/* Decode `payload` directly with every ISA path; all must agree. */
static void direct_decode(hp_comp_t *c, const uint8_t *payload, size_t plen, size_t n, int acc,
                          int pv)
{
    uint8_t *pl = (uint8_t *)malloc(plen ? plen : 1);
    float *o[3];
    int rc[3];

    if (pl == NULL)
        abort();
    memcpy(pl, payload, plen);
    for (int isa = 0; isa < 3; isa++) {
        hipress_comp_params_t p = variant(pv, isa);
        o[isa] = guarded(n, 0.5f);
        rc[isa] = c->decode(pl, plen, n, o[isa] + GUARD, acc, &p);
        guard_check(o[isa], n, c->name);
    }
    for (int isa = 1; isa < 3; isa++) {
        if (rc[isa] != rc[0])
            fail("ISA paths disagree on accepting a payload", c->name, n);
        if (rc[0] == HIPRESS_COMP_OK && memcmp(o[0], o[isa], (n + 2 * GUARD) * sizeof(float)) != 0)
            fail("ISA paths decode a payload to different bits", c->name, n);
    }
    for (int isa = 0; isa < 3; isa++)
        free(o[isa]);
    free(pl);
}

static void decode_mode(int kind, uint8_t mode, size_t n, const uint8_t *msg, size_t len)
{
    hp_comp_t *c = hp_comp_get(kind);
    hipress_comp_params_t p = variant(mode >> 6, 0);
    uint8_t *m = (uint8_t *)malloc(len ? len : 1);
    float *out = guarded(n, 0.5f);
    hp_status_t st;

    if (m == NULL)
        abort();
    memcpy(m, msg, len);
    if (len >= HP_MSG_HEADER) {
        if (mode & 0x04)
            m[1] = (uint8_t)hp_kind_none;
        else if (mode & 0x02)
            m[1] = (uint8_t)kind;
        if (mode & 0x08) {
            uint32_t n32 = (uint32_t)n, p32 = (uint32_t)(len - HP_MSG_HEADER);
            memcpy(m + 4, &n32, 4);
            memcpy(m + 8, &p32, 4);
        }
    }
    st = hp_msg_decode(kind, m, len, n, out + GUARD, mode & 1, &p);
    guard_check(out, n, c->name);
    if (st != HP_OK && st != HP_ERR_MESSAGE && st != HP_ERR_PEER && st != HP_ERR_NOMEM)
        fail("hp_msg_decode returned an unexpected status", c->name, n);
    if (len >= HP_MSG_HEADER) {
        hp_msg_header_t h;
        /* the payload with the decoder the header names (if registered) */
        if (hp_msg_header(m, len, &h) == HP_OK && h.kind < hp_comp_count())
            direct_decode(hp_comp_get(h.kind), m + HP_MSG_HEADER, len - HP_MSG_HEADER, n, mode & 1,
                          mode >> 6);
        direct_decode(c, m + HP_MSG_HEADER, len - HP_MSG_HEADER, n, mode & 1, mode >> 6);
    } else {
        direct_decode(c, m, len, n, mode & 1, mode >> 6);
    }
    free(out);
    free(m);
}

static int has_nonfinite(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return 1;
    return 0;
}

static void encode_mode(int kind, uint8_t mode, size_t kraw, const uint8_t *bytes, size_t len)
{
    hp_comp_t *c = hp_comp_get(kind);
    size_t n = len / 4, cap;
    float *in, *res[3], *state[3];
    uint8_t *msg[3];
    size_t mlen[3];
    int nf[3];

    if (n == 0)
        return;
    if (n > HP_FUZZ_MAX_N)
        n = HP_FUZZ_MAX_N;
    in = (float *)malloc(n * sizeof(float));
    if (in == NULL)
        abort();
    memcpy(in, bytes, n * sizeof(float));
    for (int isa = 0; isa < 3; isa++) {
        hipress_comp_params_t p = variant(mode >> 6, isa);
        hipress_encode_args_t a;
        hp_status_t st;

        cap = hp_msg_max_bytes(kind, n, &p);
        msg[isa] = (uint8_t *)malloc(cap); /* exact: an overrun shows under ASan */
        res[isa] = (float *)calloc(n, sizeof(float));
        state[isa] = (float *)calloc(n, sizeof(float));
        if (msg[isa] == NULL || res[isa] == NULL || state[isa] == NULL)
            abort();
        /* a residual from a previous step: the input reversed, scaled */
        for (size_t i = 0; i < n; i++)
            res[isa][i] = (mode & 1) && isfinite(in[n - 1 - i]) ? 0.5f * in[n - 1 - i] : 0.0f;
        memset(&a, 0, sizeof(a));
        a.in = in;
        a.residual = (c->flags & HIPRESS_COMP_EF) ? res[isa] : NULL;
        a.state = (c->flags & HIPRESS_COMP_MOMENTUM) ? state[isa] : NULL;
        a.n = n;
        /* the framework's k2 never exceeds n / 2 (denser goes `none`) */
        a.k = kraw % (n / 2 + 1);
        a.params = &p;
        a.rng_key[0] = 7;
        a.rng_key[1] = mode;
        st = hp_msg_encode(kind, &a, msg[isa], cap, &mlen[isa], &nf[isa]);
        if (st != HP_OK)
            fail("encode failed", c->name, n);
        if (mlen[isa] > cap)
            fail("encoded message longer than hp_msg_max_bytes", c->name, n);
    }
    for (int isa = 1; isa < 3; isa++) {
        if (mlen[isa] != mlen[0] || memcmp(msg[isa], msg[0], mlen[0]) != 0)
            fail("ISA paths encode to different bytes", c->name, n);
        if (memcmp(res[isa], res[0], n * sizeof(float)) != 0 ||
            memcmp(state[isa], state[0], n * sizeof(float)) != 0)
            fail("ISA paths leave different residual / state", c->name, n);
    }
    {
        hipress_comp_params_t p = variant(mode >> 6, 0);
        float *out = guarded(n, 0.5f);
        hp_status_t st = hp_msg_decode(kind, msg[0], mlen[0], n, out + GUARD, 0, &p);
        int bad_in = has_nonfinite(in, n);
        guard_check(out, n, c->name);
        if (st != HP_OK)
            fail("a message from the encoder is rejected by its decoder", c->name, n);
        if (c->flags & HIPRESS_COMP_LOSSLESS) {
            if (!nf[0] && memcmp(out + GUARD, in, n * sizeof(float)) != 0)
                fail("lossless compressor changed the values", c->name, n);
        } else if (bad_in && !nf[0]) {
            fail("NaN/Inf input did not give the NaN message", c->name, n);
        }
        if (nf[0]) {
            for (size_t i = 0; i < n; i++)
                if (!isnan(out[GUARD + i]))
                    fail("the NaN message decoded to a number", c->name, n);
        }
        /* a rounding format (fp16, bf16) has float32's range: finite in,
         * finite out, each value within a quarter of itself (a loose check
         * of the scale: one rounding is 2^-8 at most) or of the absolute
         * steps: 2^-40 of the block's largest (fp16), the subnormal step of
         * bfloat16 (2^-133) */
        if (hp_comp_ext(kind)->qclass == HP_QCLASS_ROUNDING && !bad_in) {
            double m = 0;
            if (nf[0])
                fail("finite input gave the NaN message", c->name, n);
            for (size_t i = 0; i < n; i++)
                m = fabs((double)in[i]) > m ? fabs((double)in[i]) : m;
            for (size_t i = 0; i < n; i++) {
                double o = out[GUARD + i];
                if (!isfinite(o) || fabs(o - in[i]) > 0.25 * fabs((double)in[i]) + 0x1p-40 * m + 0x1p-133)
                    fail("finite input decoded to a non-finite or distant value", c->name, n);
            }
        }
        free(out);
    }
    for (int isa = 0; isa < 3; isa++) {
        free(msg[isa]);
        free(res[isa]);
        free(state[isa]);
    }
    free(in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t pos, L, nraw, n;
    int kind = -1, count = hp_comp_count();
    uint8_t mode;
    char name[17];

    if (size < 4 || count <= 0)
        return 0;
    mode = data[0];
    L = data[1];
    if (L > 16 || 2 + L + 2 > size)
        return 0;
    memcpy(name, data + 2, L);
    name[L] = '\0';
    if (memchr(name, '\0', L) == NULL)
        kind = hp_comp_find(name);
    if (kind < 0) {
        unsigned h = (unsigned)L;
        for (size_t i = 0; i < L; i++)
            h = h * 31u + data[2 + i];
        kind = (int)(h % (unsigned)count);
    }
    pos = 2 + L;
    nraw = (size_t)data[pos] | ((size_t)data[pos + 1] << 8);
    pos += 2;
    n = 1 + nraw % HP_FUZZ_MAX_N;
    if (mode & 0x10)
        encode_mode(kind, mode, nraw, data + pos, size - pos);
    else
        decode_mode(kind, mode, n, data + pos, size - pos);
    return 0;
}

#ifdef HP_FUZZ_MAIN
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf;
    long sz;

    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (sz = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fprintf(stderr, "fuzz_replay: cannot read %s: %s\n", path, strerror(errno));
        if (f)
            fclose(f);
        return 1;
    }
    buf = (uint8_t *)malloc(sz ? (size_t)sz : 1);
    if (buf == NULL || fread(buf, 1, (size_t)sz, f) != (size_t)sz) {
        fprintf(stderr, "fuzz_replay: cannot read %s\n", path);
        fclose(f);
        free(buf);
        return 1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)sz);
    free(buf);
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file of a directory, in name order; returns files run. */
static int run_dir(const char *dir, int *errs)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **names = NULL;
    size_t cnt = 0, cap = 0;
    int ran = 0;

    if (d == NULL) {
        fprintf(stderr, "fuzz_replay: cannot open %s: %s\n", dir, strerror(errno));
        (*errs)++;
        return 0;
    }
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (cnt == cap) {
            cap = cap ? 2 * cap : 64;
            names = (char **)realloc(names, cap * sizeof(char *));
            if (names == NULL)
                abort();
        }
        names[cnt++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, cnt, sizeof(char *), cmp_str);
    for (size_t i = 0; i < cnt; i++) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            *errs += run_file(path);
            ran++;
        }
        free(names[i]);
    }
    free(names);
    return ran;
}

/* ------------------------------------------------------ seed generator */

static int write_seed(const char *dir, const char *fname, uint8_t mode, const char *name,
                      size_t n, const uint8_t *body, size_t blen)
{
    char path[4096];
    FILE *f;
    uint8_t head[2 + 16 + 2];
    size_t L = strlen(name), nraw = (n - 1) % HP_FUZZ_MAX_N;

    head[0] = mode;
    head[1] = (uint8_t)L;
    memcpy(head + 2, name, L);
    head[2 + L] = (uint8_t)(nraw & 0xff);
    head[3 + L] = (uint8_t)(nraw >> 8);
    snprintf(path, sizeof(path), "%s/%s", dir, fname);
    f = fopen(path, "wb");
    if (f == NULL || fwrite(head, 1, 4 + L, f) != 4 + L || fwrite(body, 1, blen, f) != blen) {
        fprintf(stderr, "fuzz_replay: cannot write %s\n", path);
        if (f)
            fclose(f);
        return 1;
    }
    return fclose(f) != 0;
}

/* Valid messages of every registered compressor at a few n and parameter
 * variants, a NaN message, and encode-mode seeds. */
static int generate(const char *dir)
{
    static const size_t ns[] = {1, 33, 300};
    uint64_t s = 0x9E3779B97F4A7C15ULL;
    int errs = 0;

    for (int kind = 0; kind < hp_comp_count(); kind++) {
        hp_comp_t *c = hp_comp_get(kind);
        if (strlen(c->name) > 16)
            continue;
        for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++) {
            for (int v = 0; v < 3; v++) {
                size_t n = ns[ni], len = 0;
                hipress_comp_params_t p = variant(v, 0);
                size_t cap = hp_msg_max_bytes(kind, n, &p);
                uint8_t *msg = (uint8_t *)malloc(cap);
                float *in = (float *)malloc(n * sizeof(float));
                float *res = (float *)calloc(n, sizeof(float));
                float *st = (float *)calloc(n, sizeof(float));
                hipress_encode_args_t a;
                int nf = 0;
                char fname[256];

                for (size_t i = 0; i < n; i++) {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    in[i] = (float)((double)(s >> 40) / 16777216.0 - 0.5);
                }
                memset(&a, 0, sizeof(a));
                a.in = in;
                a.residual = (c->flags & HIPRESS_COMP_EF) ? res : NULL;
                a.state = (c->flags & HIPRESS_COMP_MOMENTUM) ? st : NULL;
                a.n = n;
                a.params = &p;
                if (hp_msg_encode(kind, &a, msg, cap, &len, &nf) != HP_OK) {
                    fprintf(stderr, "fuzz_replay: %s cannot encode %zu values\n", c->name, n);
                    errs++;
                } else {
                    snprintf(fname, sizeof(fname), "%s-n%zu-p%d", c->name, n, v);
                    errs += write_seed(dir, fname, (uint8_t)(0x0a | (v << 6) | (ni & 1)), c->name,
                                       n, msg, len);
                }
                if (ni == 1 && v == 0) {
                    /* the NaN message, and encode-mode seeds */
                    uint8_t nanmsg[HP_MSG_HEADER];
                    memcpy(nanmsg, msg, HP_MSG_HEADER);
                    nanmsg[2] = HP_MSG_NONFINITE;
                    memset(nanmsg + 8, 0, 4);
                    snprintf(fname, sizeof(fname), "%s-nan", c->name);
                    errs += write_seed(dir, fname, 0x0a, c->name, n, nanmsg, HP_MSG_HEADER);
                    snprintf(fname, sizeof(fname), "%s-enc", c->name);
                    errs += write_seed(dir, fname, 0x10, c->name, 5, (const uint8_t *)in,
                                       n * sizeof(float));
                    {
                        /* a message with exceptions (an overflowed sum) */
                        size_t xcap = cap + HP_MSG_EXCEPT_BYTES, xlen = 0;
                        uint8_t *xmsg = (uint8_t *)malloc(xcap);
                        float keep0 = in[0], keep3 = in[3];
                        in[0] = INFINITY;
                        in[3] = -0x1p127f;
                        memset(res, 0, n * sizeof(float));
                        if (xmsg != NULL &&
                            hp_msg_encode_x(kind, &a, xmsg, xcap, HP_SRC_SUM, &xlen, &nf, NULL) == HP_OK) {
                            snprintf(fname, sizeof(fname), "%s-exc", c->name);
                            errs += write_seed(dir, fname, 0x0a, c->name, n, xmsg, xlen);
                        }
                        free(xmsg);
                        in[0] = keep0;
                        in[3] = keep3;
                    }
                    in[n / 2] = NAN;
                    snprintf(fname, sizeof(fname), "%s-enc-nan", c->name);
                    errs += write_seed(dir, fname, 0x11, c->name, 9, (const uint8_t *)in,
                                       n * sizeof(float));
                }
                free(msg), free(in), free(res), free(st);
            }
        }
    }
    return errs;
}

int main(int argc, char **argv)
{
    int errs = 0, ran = 0;

    if (argc == 3 && strcmp(argv[1], "--generate") == 0)
        return generate(argv[2]) ? 1 : 0;
    if (argc < 2) {
        fprintf(stderr, "usage: fuzz_replay FILE|DIR... | fuzz_replay --generate DIR\n");
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            ran += run_dir(argv[i], &errs);
        } else {
            errs += run_file(argv[i]);
            ran++;
        }
    }
    printf("fuzz_replay: %d inputs, %d unreadable\n", ran, errs);
    return errs ? 1 : 0;
}
#endif
