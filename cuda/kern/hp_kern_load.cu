/*
 * Every kernel of the module loaded at once (hp_klaunch.h hp_kl_preload),
 * file by file, so that none loads lazily inside a stream-ordered call.
 */
#include "hp_kern_cu.cuh"

extern "C" int hp_kl_preload(void)
{
    int (*const files[])(void) = {hp_kl_preload_base, hp_kl_preload_quant, hp_kl_preload_half,
                                  hp_kl_preload_sparse, hp_kl_preload_psgd};
    int n = 0;
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        const int m = files[i]();
        if (m < 0)
            return -1;
        n += m;
    }
    return n;
}
