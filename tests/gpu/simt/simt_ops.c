/*
 * tests/gpu/simt/simt_kern's buffer operations (fold, momentum, add, fill,
 * divide, nan_if, convert, the sparse mask, the probe), powersgd's passes
 * and steps, and dgc's momentum with a masked encode, on the kernels
 * running on the SIMT emulator, against the CPU's expressions and
 * functions, as tests/gpu/kern/gpu_kern_ops.c holds the device to them.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "hp_comp.h"
#include "hp_ops.h"
#include "hp_psgd.h"
#include "hp_kern.h"
#include "hp_klaunch.h"
#include "hp_cuda_kernels.h"
#include "simt_kern.h"

/* dgc's momentum in stream order, and a message whose encode masks it
 * (the dense formats zero all of it, the sparse the sent elements), gated
 * on the device by whether the momentum was applied (not with a NaN) */
void simt_masked(const char *name, int fmt, size_t n, uint64_t seed)
{
    const int kind = hp_comp_find(name);
    const float mom = 0.5f;
    hipress_comp_params_t p;
    size_t cap;
    float *x = malloc(n * 4 + 4), *u = malloc(n * 4 + 4), *gx = malloc(n * 4 + 4), *gu = malloc(n * 4 + 4);
    uint8_t *cm, *dm;
    hipress_encode_args_t a;
    hp_gpu_enc_t e;
    size_t clen = 0, at = 0;
    int nf = 0;

    hipress_comp_params_default(&p);
    cap = hp_msg_max_bytes(kind, n, &p) + 16;
    cm = calloc(1, cap);
    dm = calloc(1, cap);
    for (int nan = 0; nan < 2; nan++) {
        int applied = 1;
        simt_cases++;
        simt_fill(x, n, D_GRAD, seed + (uint64_t)nan);
        simt_fill(u, n, D_GRAD, seed + 5);
        if (nan && n > 0)
            x[n - 1] = NAN;
        memcpy(gx, x, n * 4);
        memcpy(gu, u, n * 4);
        for (size_t i = 0; i < n && applied; i++)
            applied = isfinite(x[i]);
        for (size_t i = 0; i < n && applied; i++) {
            u[i] = mom * u[i] + x[i];
            x[i] = u[i];
        }
        memset(&a, 0, sizeof(a));
        a.in = x;
        a.n = n - n / 3;   /* the message covers the first part */
        a.params = &p;
        if (hp_msg_encode(kind, &a, cm, cap, &clen, &nf) != HP_OK)
            FAILF("%s masked: cpu encode failed", name);
        if (applied && !nf && fmt != HP_GPU_FMT_SPARSE)
            memset(u, 0, a.n * 4);
        for (size_t j = 0; applied && !nf && fmt == HP_GPU_FMT_SPARSE && j < (clen - HP_MSG_HEADER) / 8; j++) {
            uint32_t i;
            memcpy(&i, cm + HP_MSG_HEADER + 8 * j, 4);
            u[i] = 0.0f;
        }
        memset(&e, 0, sizeof(e));
        hp_comp_gpu_fmt(kind, &p, a.n, 0, &e.fmt);
        e.in = gx;
        e.n = a.n;
        e.mask = gu;
        if (hp_codec_momentum_q(simt_codec(), gu, gx, mom, n) != HP_GPU_OK ||
            hp_codec_encode_msg(simt_codec(), &e, (uint32_t)kind, dm, cap) != HP_GPU_OK)
            FAILF("%s masked: momentum_q or encode_msg failed", name);
        if (hp_msg_len(dm, cap) != clen || memcmp(dm, cm, clen) != 0)
            FAILF("%s masked n=%zu nan %d: the device message differs", name, n, nan);
        if (!simt_same(u, gu, n, &at))
            FAILF("%s masked n=%zu nan %d: u[%zu] cpu %a gpu %a", name, n, nan, at, u[at], gu[at]);
        if (!simt_same(x, gx, n, &at))
            FAILF("%s masked n=%zu nan %d: buf[%zu] cpu %a gpu %a", name, n, nan, at, x[at], gx[at]);
    }
    free(x); free(u); free(gx); free(gu); free(cm); free(dm);
}

/* The module's self-test kernel: every element its hash, nothing past n
 * written (a partial last CTA when n is not a multiple of its block). */
void simt_selftest(size_t n)
{
    unsigned *out = malloc(n * sizeof(unsigned) + 4 * sizeof(unsigned));
    simt_cases++;
    for (size_t i = 0; i < n + 4; i++)
        out[i] = 0xdeadbeefu;
    if (hp_kl_selftest(NULL, out, (unsigned)n) != 0)
        FAILF("selftest n=%zu: the launch failed", n);
    for (size_t i = 0; i < n + 4; i++)
        if (out[i] != (i < n ? hp_kl_selftest_value((unsigned)i) : 0xdeadbeefu)) {
            FAILF("selftest n=%zu: [%zu] is 0x%08x", n, i, out[i]);
            break;
        }
    free(out);
}

/* --------------------------------------------------- buffer operations */

/* fold, momentum, add, fill, divide, nan_if, convert, the sparse mask
 * and the probe, against the CPU's expressions (a computed NaN canonical,
 * hp_canon; a divided NaN kept as it is), with NaNs of several payloads
 * and Infs in the residual and the momentum every other kind of data */
void simt_ops(size_t n, uint64_t seed)
{
    float *b = malloc(n * 4 + 4), *r = malloc(n * 4 + 4), *u = malloc(n * 4 + 4), *t = malloc(n * 4 + 4);
    float *gb = malloc(n * 4 + 4), *gr = malloc(n * 4 + 4), *gu = malloc(n * 4 + 4);
    uint16_t *h = malloc(n * 2 + 2), *gh = malloc(n * 2 + 2);
    uint8_t *pairs = malloc(8 * (n / 2 + 1)), flag[8];
    uint32_t word = 0, cnt, flags = 0;
    size_t at = 0;
    int applied = 0;

    simt_cases++;
    for (int dk = 0; dk < D_N; dk++) {
        simt_fill(b, n, dk, seed + (uint64_t)dk);
        simt_fill(r, n, D_WIDE, seed + 20);
        simt_fill(u, n, D_GRAD, seed + 21);
        if (dk & 1)
            simt_nonfinite(r, n, seed + 22);
        if (dk % 3 == 0)
            simt_nonfinite(u, n, seed + 23);
        memcpy(gb, b, n * 4);
        memcpy(gr, r, n * 4);
        memcpy(gu, u, n * 4);
        if (hp_codec_fold(simt_codec(), gb, gr, n) != HP_GPU_OK ||
            hp_codec_momentum(simt_codec(), gu, gb, 0.9f, n, &applied) != HP_GPU_OK ||
            hp_codec_add(simt_codec(), gb, gr, n) != HP_GPU_OK) {
            FAILF("ops n=%zu: a launch failed", n);
            break;
        }
        {
            int fin = 1;
            for (size_t i = 0; i < n; i++)
                fin &= isfinite(b[i]) != 0;
            for (size_t i = 0; i < n && fin; i++) {
                b[i] = hp_canon(b[i] + r[i]);
                r[i] = 0.0f;
            }
            for (size_t i = 0; i < n; i++)
                fin &= isfinite(b[i]) != 0;
            for (size_t i = 0; i < n && fin; i++) {
                u[i] = hp_canon(0.9f * u[i] + b[i]);
                b[i] = u[i];
            }
            for (size_t i = 0; i < n; i++)
                b[i] = hp_canon(b[i] + r[i]);
            if (applied != fin)
                FAILF("ops n=%zu %s: momentum applied %d, cpu %d", n, simt_dname[dk], applied, fin);
        }
        if (!simt_same(b, gb, n, &at) || !simt_same(r, gr, n, &at) || !simt_same(u, gu, n, &at))
            FAILF("ops n=%zu %s: fold, momentum or add [%zu]", n, simt_dname[dk], at);
        /* (the add writes every element; the momentum, when applied, all of u) */
        if (!simt_canonical(gb, n, &at) || (applied && !simt_canonical(gu, n, &at)))
            FAILF("ops n=%zu %s: momentum or add: [%zu] a NaN not canonical", n, simt_dname[dk], at);
        /* divide by 3 and by 7: a NaN moved as it is, payload and all (a
         * signalling one too, which x86's division would make quiet) */
        memcpy(gb, b, n * 4);
        hp_codec_divide(simt_codec(), gb, n, dk & 1 ? 7.0f : 3.0f);
        for (size_t i = 0; i < n; i++)
            t[i] = b[i] != b[i] ? b[i] : b[i] / (dk & 1 ? 7.0f : 3.0f);
        if (!simt_same(t, gb, n, &at))
            FAILF("divide n=%zu %s: [%zu] cpu %a gpu %a", n, simt_dname[dk], at, t[at], gb[at]);
        /* convert both ways, both 16-bit forms */
        for (int f16 = 0; f16 < 2; f16++) {
            hp_codec_convert(simt_codec(), gh, b, n, f16 ? HP_GPU_CVT_F32_F16 : HP_GPU_CVT_F32_BF16);
            hp_codec_convert(simt_codec(), gb, gh, n, f16 ? HP_GPU_CVT_F16_F32 : HP_GPU_CVT_BF16_F32);
            for (size_t i = 0; i < n; i++) {
                h[i] = f16 ? hp_f32_to_f16(b[i]) : hp_f32_to_bf16(b[i]);
                t[i] = f16 ? hp_f16_to_f32(h[i]) : hp_bf16_to_f32(h[i]);
            }
            if (memcmp(h, gh, n * 2) != 0 || !simt_same(t, gb, n, &at))
                FAILF("convert %s n=%zu %s", f16 ? "f16" : "bf16", n, simt_dname[dk]);
        }
    }
    /* fill, then nan_if on a flag clear and set */
    memset(flag, 0, sizeof(flag));
    hp_codec_fill(simt_codec(), gb, 1.5f, n);
    hp_codec_nan_if(simt_codec(), gb, n, flag, 8);
    for (size_t i = 0; i < n; i++)
        if (gb[i] != 1.5f) {
            FAILF("fill or nan_if (clear) n=%zu: [%zu] %a", n, i, gb[i]);
            break;
        }
    flag[5] = 0x10;
    hp_codec_nan_if(simt_codec(), gb, n, flag, 8);
    for (size_t i = 0; i < n; i++)
        if (!isnan(gb[i])) {
            FAILF("nan_if (set) n=%zu: [%zu] %a", n, i, gb[i]);
            break;
        }
    /* the sparse mask: every other element, flags clear then set */
    cnt = (uint32_t)(n / 2);
    for (uint32_t j = 0; j < cnt; j++) {
        uint32_t i = 2 * j + 1, v = 0x3f800000u;
        memcpy(pairs + 8 * j, &i, 4);
        memcpy(pairs + 8 * j + 4, &v, 4);
    }
    for (int set = 0; set < 2; set++) {
        simt_fill(gu, n, D_GRAD, seed + 30);
        memcpy(u, gu, n * 4);
        flags = set ? HP_K_F_NONFINITE : 0;
        for (size_t i = 1; i < n && !set; i += 2)
            u[i] = 0.0f;
        if (hp_kl_sparse_mask(NULL, pairs, &cnt, gu, n, &flags) != 0 || !simt_same(u, gu, n, &at))
            FAILF("sparse_mask n=%zu flags %u: [%zu]", n, flags, at);
    }
    if (hp_kl_probe(NULL, &word) != 0 || word != HP_KL_PROBE_WORD)
        FAILF("probe: 0x%08x", word);
    free(b); free(r); free(u); free(t); free(gb); free(gr); free(gu); free(h); free(gh); free(pairs);
}

/* powersgd's passes and steps against the host's functions
 * (tests/gpu/kern/gpu_kern_ops.c psgd_ops): P = M Q, Q^T = M^T P, the
 * reconstruction with its residual (plain, and written only when the flag
 * is clear), the start Q (cold and warm, warm rows zero, NaN, Inf), the
 * orthonormalisation (dependent, zero, tiny and huge columns; nothing when
 * flagged), the flagged copy. */
void simt_psgd(size_t m, size_t c, size_t r, uint64_t seed)
{
    const size_t n = m * c - (c > 1 ? c / 3 : 0), mr = m * r, rc = r * c, T = hp_psgd_tile_cols(r, c);
    const hp_ops_t *K = hp_ops_get(HP_ISA_AUTO);
    float *M = malloc(n * 4), *p = malloc(mr * 4), *gp = malloc(mr * 4), *q = malloc(rc * 4), *gq = malloc(rc * 4);
    float *w = malloc(rc * 4), *ql = malloc(rc * 4), *res = malloc(n * 4), *gres = malloc(n * 4);
    float *out = malloc(n * 4), *gout = malloc(n * 4), *row = malloc(4 * T * 4 + 64), *ones = malloc(rc * 4);
    double *work = malloc(mr * sizeof(double)), *gwork = malloc(mr * sizeof(double));
    void *scratch = hp_aligned_alloc(HP_PSGD_SCRATCH(r));
    const uint8_t clear[4] = {0, 0, 0, 0}, set[4] = {0, 0, 1, 0};
    size_t at = 0;

    simt_cases++;
    simt_fill(M, n, D_GRAD, seed);
    simt_fill(q, rc, D_GRAD, seed + 1);
    hp_psgd_pass_mq(K, M, NULL, NULL, row, n, m, c, r, q, p);
    hp_kl_psgd_mq(NULL, M, n, m, c, r, T, q, gp);
    if (!simt_same(p, gp, mr, &at))
        FAILF("psgd_mq m=%zu c=%zu r=%zu: [%zu] cpu %a gpu %a", m, c, r, at, p[at], gp[at]);
    hp_psgd_pass_mtp(K, M, NULL, row, n, m, c, r, p, q);
    hp_kl_psgd_mtp(NULL, M, n, m, c, r, p, gq);
    if (!simt_same(q, gq, rc, &at))
        FAILF("psgd_mtp m=%zu c=%zu r=%zu: [%zu] cpu %a gpu %a", m, c, r, at, q[at], gq[at]);
    /* warm rows: 0 finite, 1 zero, 2 NaN, 3 Inf */
    simt_fill(w, rc, D_GRAD, seed + 2);
    if (r > 1)
        memset(w + c, 0, c * 4);
    if (r > 2)
        w[2 * c + c / 2] = NAN;
    if (r > 3)
        w[3 * c] = INFINITY;
    for (int warm = 0; warm < 2; warm++) {
        hp_psgd_start_q(q, warm ? w : NULL, r, c, seed, 7);
        hp_kl_psgd_start_q(NULL, gq, warm ? w : NULL, r, c, hp_psgd_q_key(seed, 7));
        if (!simt_same(q, gq, rc, &at))
            FAILF("psgd start_q warm %d r=%zu c=%zu: [%zu]", warm, r, c, at);
    }
    /* P: column 1 = 2 column 0, 2 zero, 3 tiny, 4 huge, the rest near 0 */
    simt_fill(p, mr, D_GRAD, seed + 3);
    for (size_t i = 0; i < m; i++)
        for (size_t k = 1; k < r; k++)
            p[i * r + k] = k == 1 ? 2.0f * p[i * r] : k == 2 ? 0.0f : k == 3 ? p[i * r + k] * 1e-30f
                         : k == 4 ? p[i * r + k] * 1e30f : p[i * r] + 1e-3f * p[i * r + k];
    memcpy(gp, p, mr * 4);
    hp_kl_psgd_orth(NULL, gp, m, r, gwork, set, 4);
    if (!simt_same(p, gp, mr, &at))
        FAILF("psgd orth flagged wrote [%zu]", at);
    hp_psgd_orthonormalise(p, m, r, work);
    hp_kl_psgd_orth(NULL, gp, m, r, gwork, clear, 4);
    if (!simt_same(p, gp, mr, &at))
        FAILF("psgd orth m=%zu r=%zu: [%zu] cpu %a gpu %a", m, r, at, p[at], gp[at]);
    /* the reconstruction: out = P Qs^T, res = M - P Ql^T */
    simt_fill(ql, rc, D_GRAD, seed + 4);
    for (int how = 0; how < 3; how++) {
        simt_fill(res, n, D_WIDE, seed + 5);
        memcpy(gres, res, n * 4);
        memcpy(gout, M, n * 4);
        if (how < 2)
            hp_psgd_pass_recon(K, p, n, m, c, r, NULL, NULL, 0, ql, M, NULL, res, scratch);
        hp_psgd_pass_recon(K, p, n, m, c, r, q, out, 0, NULL, NULL, NULL, NULL, scratch);
        if (how == 0)
            hp_kl_psgd_recon(NULL, gout, gres, n, c, r, p, q, ql);
        else
            hp_kl_psgd_recon_if(NULL, gout, gres, n, c, r, p, q, ql, how == 1 ? clear : set, 4);
        if (!simt_same(res, gres, n, &at) || !simt_same(out, gout, n, &at))
            FAILF("psgd recon (%d) m=%zu c=%zu r=%zu: [%zu]", how, m, c, r, at);
    }
    /* M whose products overflow both ways (Q all ones: the even lanes of
     * a row to +Inf, the odd ones to -Inf, their sum NaN), then M with NaNs
     * of several payloads: every product canonical, as on the CPU */
    for (size_t i = 0; i < rc; i++)
        ones[i] = 1.0f;
    for (int bad = 0; bad < 2; bad++) {
        for (size_t i = 0; i < n; i++)
            M[i] = bad ? M[i] : (i & 1 ? -3e38f : 3e38f);
        if (bad)
            simt_nonfinite(M, n, seed + 6);
        hp_psgd_pass_mq(K, M, NULL, NULL, row, n, m, c, r, ones, p);
        hp_kl_psgd_mq(NULL, M, n, m, c, r, T, ones, gp);
        hp_psgd_pass_mtp(K, M, NULL, row, n, m, c, r, p, w);
        hp_kl_psgd_mtp(NULL, M, n, m, c, r, p, gq);
        simt_fill(res, n, D_WIDE, seed + 7);
        memcpy(gres, res, n * 4);
        hp_psgd_pass_recon(K, p, n, m, c, r, NULL, NULL, 0, ql, M, NULL, res, scratch);
        hp_psgd_pass_recon(K, p, n, m, c, r, ones, out, 0, NULL, NULL, NULL, NULL, scratch);
        memcpy(gout, M, n * 4);
        hp_kl_psgd_recon(NULL, gout, gres, n, c, r, p, ones, ql);
        if (!simt_same(p, gp, mr, &at) || !simt_same(w, gq, rc, &at) || !simt_same(res, gres, n, &at) ||
            !simt_same(out, gout, n, &at))
            FAILF("psgd products (%s) m=%zu c=%zu r=%zu: [%zu] differ", bad ? "NaN" : "overflow", m, c, r, at);
        {
            size_t nan = 0;
            for (size_t i = 0; i < mr; i++)
                nan += gp[i] != gp[i];
            if (!bad && c >= 64 && nan == 0)
                FAILF("psgd products (overflow) m=%zu c=%zu r=%zu: no Inf - Inf made", m, c, r);
        }
        if (!simt_canonical(gp, mr, &at) || !simt_canonical(gq, rc, &at) || !simt_canonical(gres, n, &at) ||
            !simt_canonical(gout, n, &at))
            FAILF("psgd products (%s) m=%zu c=%zu r=%zu: [%zu] a NaN not canonical", bad ? "NaN" : "overflow", m, c,
                  r, at);
        /* and that P (NaN, Inf) orthonormalised: the host's bits */
        if (r > 1)
            p[r - 1] = bad ? INFINITY : hp_u2f(simt_nan_bits[0]);
        memcpy(gp, p, mr * 4);
        hp_psgd_orthonormalise(p, m, r, work);
        hp_kl_psgd_orth(NULL, gp, m, r, gwork, clear, 4);
        if (!simt_same(p, gp, mr, &at))
            FAILF("psgd orth of a non-finite P m=%zu r=%zu: [%zu] cpu 0x%08x gpu 0x%08x", m, r, at, hp_f2u(p[at]),
                  hp_f2u(gp[at]));
    }
    memcpy(gq, ql, rc * 4);
    hp_kl_copy_if(NULL, gq, q, rc, set, 4);
    if (!simt_same(gq, ql, rc, &at))
        FAILF("copy_if flagged wrote [%zu]", at);
    hp_kl_copy_if(NULL, gq, q, rc, clear, 4);
    if (!simt_same(gq, q, rc, &at))
        FAILF("copy_if clear: [%zu]", at);
    free(M); free(p); free(gp); free(q); free(gq); free(w); free(ql); free(res); free(gres); free(out);
    free(gout); free(row); free(work); free(gwork); free(scratch); free(ones);
}
