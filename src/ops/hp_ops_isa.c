/*
 * The CPU probe and the run-time choice of operator table: the generic
 * table (hp_ops.c) everywhere, the AVX2 one (hp_ops_avx2.c) where this CPU
 * and this build can run it.  The tables use nothing of this file, so the
 * choice sits above both of them.
 */
#include "hp_ops_avx2.h"

#if defined(__x86_64__)
#include <cpuid.h>

int hp_isa_detect(void)
{
    static int have = -1; /* racing first calls store the same value */
    int h = __atomic_load_n(&have, __ATOMIC_RELAXED);
    if (h < 0) {
        unsigned a = 0, b = 0, c = 0, d = 0;
        __builtin_cpu_init();
        /* F16C: CPUID.1:ECX bit 29 (clang's __builtin_cpu_supports does not
         * know "f16c"); the AVX2 check already covers the OS saving the
         * vector state */
        h = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt") &&
            __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) ? 1 : 0;
        __atomic_store_n(&have, h, __ATOMIC_RELAXED);
    }
    return h ? HP_ISA_AVX2 : HP_ISA_GENERIC;
}

const hp_ops_t *hp_ops_avx2_table(void)
{
    return hp_isa_detect() == HP_ISA_AVX2 ? &hp_ops_avx2 : NULL;
}
#else
int hp_isa_detect(void)
{
    return HP_ISA_GENERIC;
}

const hp_ops_t *hp_ops_avx2_table(void)
{
    return NULL;
}
#endif

int hp_isa_resolve(int isa)
{
    return isa == HP_ISA_AUTO || isa == HP_ISA_AVX2 ? hp_isa_detect() : HP_ISA_GENERIC;
}

const hp_ops_t *hp_ops_get(int isa)
{
    const hp_ops_t *avx2 = hp_isa_resolve(isa) == HP_ISA_AVX2 ? hp_ops_avx2_table() : NULL;
    return avx2 != NULL ? avx2 : &hp_ops_generic;
}
