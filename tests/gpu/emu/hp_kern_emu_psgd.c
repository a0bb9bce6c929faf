/*
 * The kernels of cuda/kern/hp_kern_psgd.cu (powersgd's stream-ordered steps)
 * run serially on the host, over the same per-thread functions
 * (cuda/kern/hp_kern_psgd.h), as tests/gpu/emu/hp_kern_emu.c says.
 */
#include "hp_kern_emu.h"
#include "hp_kern_psgd.h"

HP_EMU_KERNEL(psgd_start_q, (float *, qt), (const float *, warm), (size_t, r), (size_t, c), (uint64_t, key))
{
    qt = P(float *, qt);
    warm = P(const float *, warm);
    /* one thread per row */
    for (size_t k = 0; k < r; k++)
        hp_k_psgd_start_row(qt + k * c, warm != NULL ? warm + k * c : NULL, k, c, key);
    return 0;
}

HP_EMU_KERNEL(psgd_orth, (float *, p), (size_t, m), (size_t, r), (double *, work), (const uint8_t *, flag),
              (uint32_t, bytes))
{
    p = P(float *, p);
    work = P(double *, work);
    flag = P(const uint8_t *, flag);
    if (!hp_k_flag_set(flag, bytes))
        hp_k_psgd_orth(p, m, r, work);
    return 0;
}

HP_EMU_KERNEL(psgd_recon_if, (float *, buf), (float *, res), (size_t, n), (size_t, c), (size_t, r),
              (const float *, p), (const float *, qs), (const float *, ql), (const uint8_t *, flag), (uint32_t, bytes))
{
    buf = P(float *, buf);
    res = P(float *, res);
    p = P(const float *, p);
    qs = P(const float *, qs);
    ql = P(const float *, ql);
    flag = P(const uint8_t *, flag);
    if (res != NULL && hp_k_flag_set(flag, bytes))
        res = NULL;
    for (size_t e = 0; e < n; e++)
        hp_k_psgd_recon_at(buf, res, e, c, r, p, qs, ql);
    return 0;
}

HP_EMU_KERNEL(copy_if, (float *, dst), (const float *, src), (size_t, n), (const uint8_t *, flag), (uint32_t, bytes))
{
    dst = P(float *, dst);
    src = P(const float *, src);
    flag = P(const uint8_t *, flag);
    if (!hp_k_flag_set(flag, bytes))
        memcpy(dst, src, n * sizeof(float));
    return 0;
}
