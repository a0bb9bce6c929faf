/*
 * The kernels of cuda/kern/hp_kern*.cu run serially on the host: the same grid
 * (CTAs, warps, lanes, chunks), the same per-thread functions (hp_kern.h),
 * in an order a GPU could have run them in.  Here those of hp_kern.cu (the
 * element-wise kernels, powersgd's passes); each family of formats has its
 * file, as the kernels do (hp_kern_emu_quant.c, hp_kern_emu_half.c,
 * hp_kern_emu_sparse.c).  What the warp collectives do on the device (a
 * ballot, the 32 lane totals gathered by shuffles, a block-wide scan) is
 * done here with plain loops over the lanes.
 *
 * Built into tests/gpu/kern/check_kern (which compares the bytes with the CPU
 * compressors) and, with HP_KL_TRANSLATE, into the emulated CUDA module of
 * the MPI tests, where device pointers are regions of the stand-in driver
 * (tests/gpu/standins/mock_cuda.c) and are translated to their host shadow first.
 */
#include "hp_kern_emu.h"
#include <stddef.h>
#include <stdio.h>

/* ------------------------------------------------------------- launch */

#ifdef HP_KL_TRANSLATE
typedef struct {
    int (*run)(void *args);
    size_t size;
    max_align_t args[];
} emu_launch_t;

static void emu_trampoline(void *p)
{
    emu_launch_t *l = (emu_launch_t *)p;
    if (l->run(l->args) != 0) {
        fprintf(stderr, "hipress emulated module: an emulated kernel failed (out of host memory)\n");
        abort();
    }
    free(l);
}
#endif

int hp_emu_launch(void *stream, int (*run)(void *args), const void *args, size_t size)
{
#ifdef HP_KL_TRANSLATE
    static int (*launch)(void *, void (*)(void *), void *);
    static int looked;
    emu_launch_t *l;
    if (!__atomic_load_n(&looked, __ATOMIC_ACQUIRE)) {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        launch = h != NULL ? (int (*)(void *, void (*)(void *), void *))dlsym(h, "cuLaunchHostFunc") : NULL;
        __atomic_store_n(&looked, 1, __ATOMIC_RELEASE);
    }
    if (launch != NULL) {
        if ((l = (emu_launch_t *)malloc(sizeof(*l) + size)) == NULL)
            return -1;
        l->run = run;
        l->size = size;
        memcpy(l->args, args, size);
        if (launch(stream, emu_trampoline, l) != 0) {
            free(l);
            return -1;
        }
        return 0;
    }
#else
    (void)stream;
    (void)size;
#endif
    /* no queue to put it in: at once (its arguments are the caller's) */
    return run((void *)(uintptr_t)args);
}

/* ------------------------------------------------------------ helpers */

/* nothing to load: the host runs every "kernel" */
int hp_kl_preload(void)
{
    return 0;
}

/* the host runs every "kernel" */
HP_EMU_KERNEL(probe, (uint32_t *, word))
{
    word = P(uint32_t *, word);
    *word = HP_KL_PROBE_WORD;
    return 0;
}

HP_EMU_KERNEL(finite, (const float *, x), (size_t, n), (uint32_t *, flags))
{
    x = P(const float *, x);
    flags = P(uint32_t *, flags);
    for (size_t i = 0; i < n; i++)
        if (hp_nonfinite(x[i]))
            flags[0] |= HP_K_F_NONFINITE;
    return 0;
}

HP_EMU_KERNEL(fold, (float *, buf), (float *, r), (size_t, n), (const uint32_t *, flags))
{
    buf = P(float *, buf);
    r = P(float *, r);
    flags = P(const uint32_t *, flags);
    if (flags[0] & HP_K_F_NONFINITE)
        return 0;
    for (size_t i = 0; i < n; i++) {
        buf[i] = hp_k_add(buf[i], r[i]);
        r[i] = 0.0f;
    }
    return 0;
}

HP_EMU_KERNEL(momentum, (float *, u), (float *, buf), (float, m), (size_t, n), (const uint32_t *, flags))
{
    u = P(float *, u);
    buf = P(float *, buf);
    flags = P(const uint32_t *, flags);
    if (flags[0] & HP_K_F_NONFINITE)
        return 0;
    for (size_t i = 0; i < n; i++) {
        u[i] = hp_canon(hp_k_sparse_u(buf, u, m, i));
        buf[i] = u[i];
    }
    return 0;
}

HP_EMU_KERNEL(mask_zero, (float *, mask), (size_t, n), (const uint32_t *, flags), (const uint32_t *, gate))
{
    mask = P(float *, mask);
    flags = P(const uint32_t *, flags);
    gate = P(const uint32_t *, gate);
    if ((flags != NULL && (flags[0] & HP_K_F_NONFINITE)) || (gate[0] & HP_K_F_NONFINITE))
        return 0;
    for (size_t i = 0; i < n; i++)
        mask[i] = 0.0f;
    return 0;
}

HP_EMU_KERNEL(add, (float *, dst), (const float *, src), (size_t, n))
{
    dst = P(float *, dst);
    src = P(const float *, src);
    for (size_t i = 0; i < n; i++)
        dst[i] = hp_k_add(dst[i], src[i]);
    return 0;
}

HP_EMU_KERNEL(fill, (float *, dst), (float, v), (size_t, n))
{
    dst = P(float *, dst);
    for (size_t i = 0; i < n; i++)
        dst[i] = v;
    return 0;
}

/* ------------------------------------------- messages in device memory */

HP_EMU_KERNEL(msg_header, (uint8_t *, m), (uint32_t, kind), (uint32_t, n), (uint32_t, payload),
              (const uint32_t *, flags))
{
    m = P(uint8_t *, m);
    flags = P(const uint32_t *, flags);
    hp_k_msg_put_header(m, kind, (flags[0] & HP_K_F_NONFINITE) != 0, n, payload);
    return 0;
}

HP_EMU_KERNEL(msg_check, (const uint8_t *, m), (size_t, cap), (uint32_t, kind), (uint32_t, payload),
              (hp_k_msgfmt_t, f), (uint32_t *, status))
{
    size_t items = hp_k_msg_items(&f);
    m = P(const uint8_t *, m);
    status = P(uint32_t *, status);
    /* thread 0 the header; a thread per item (grid-stride) */
    status[0] = hp_k_msg_head(m, cap, kind, f.n, payload);
    for (size_t j = 0; j < items; j++)
        if (hp_k_msg_item(&f, m + HP_K_MSG_HEADER, j) != 0)
            status[1] |= 1u;
    return 0;
}

HP_EMU_KERNEL(msg_fix, (float *, dst), (size_t, n), (const uint32_t *, status), (uint32_t *, sticky))
{
    dst = P(float *, dst);
    status = P(const uint32_t *, status);
    sticky = P(uint32_t *, sticky);
    if (status[0] == HP_K_MSG_NAN) {
        for (size_t i = 0; i < n; i++)
            dst[i] = NAN;
    } else if (status[0] != HP_K_MSG_OK || status[1] != 0 || status[2] != 0) {
        sticky[0] |= HP_K_F_BAD;
    }
    return 0;
}

HP_EMU_KERNEL(divide, (float *, dst), (size_t, n), (float, d))
{
    dst = P(float *, dst);
    for (size_t i = 0; i < n; i++)
        dst[i] = dst[i] / d;
    return 0;
}

HP_EMU_KERNEL(nan_if, (float *, dst), (size_t, n), (const uint8_t *, flag), (uint32_t, bytes))
{
    int set = 0;
    dst = P(float *, dst);
    flag = P(const uint8_t *, flag);
    for (uint32_t i = 0; i < bytes; i++)
        set |= flag[i] != 0;
    if (set)
        for (size_t i = 0; i < n; i++)
            dst[i] = NAN;
    return 0;
}

/* ----------------------------------------------------------- powersgd */

HP_EMU_KERNEL(psgd_mq, (const float *, M), (size_t, n), (size_t, m), (size_t, c), (size_t, r), (size_t, T),
              (const float *, qt), (float *, p))
{
    M = P(const float *, M);
    qt = P(const float *, qt);
    p = P(float *, p);
    /* one thread per (row, k) */
    for (size_t i = 0; i < m; i++)
        for (size_t k = 0; k < r; k++)
            p[i * r + k] = hp_k_psgd_dot(M + i * c, hp_k_psgd_row_len(n, c, i), qt + k * c, T);
    return 0;
}

HP_EMU_KERNEL(psgd_mtp, (const float *, M), (size_t, n), (size_t, m), (size_t, c), (size_t, r), (const float *, p),
              (float *, qt))
{
    M = P(const float *, M);
    p = P(const float *, p);
    qt = P(float *, qt);
    /* one thread per (k, column) */
    for (size_t k = 0; k < r; k++)
        for (size_t j = 0; j < c; j++)
            qt[k * c + j] = hp_k_psgd_col(M, n, m, c, p, r, k, j);
    return 0;
}

HP_EMU_KERNEL(psgd_recon, (float *, buf), (float *, res), (size_t, n), (size_t, c), (size_t, r), (const float *, p),
              (const float *, qs), (const float *, ql))
{
    buf = P(float *, buf);
    res = P(float *, res);
    p = P(const float *, p);
    qs = P(const float *, qs);
    ql = P(const float *, ql);
    for (size_t e = 0; e < n; e++)
        hp_k_psgd_recon_at(buf, res, e, c, r, p, qs, ql);
    return 0;
}
