/*
 * Test data shared by tests/gpu/kern/check_kern.c (the kernels' per-thread math
 * on the host) and tests/gpu/kern/gpu_kern_fmt.c (the kernels on a GPU): one
 * counter-based stream and the fp16/bf16 edge values, so both hold the
 * kernels to the CPU on the same inputs.  Include once per program (in the
 * one file that draws from the stream: its state is static).
 */
#ifndef HP_TESTS_KERN_DATA_H
#define HP_TESTS_KERN_DATA_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include "hp_elem.h"

static uint64_t rs;
static uint64_t rnd(void) { rs += 0x9E3779B97F4A7C15ULL; return hp_mix64(rs); }
static double unit(void) { return (double)(rnd() >> 11) * 0x1p-53; }

/* The fp16 and bf16 edges, by runs of 32 elements in the first half and of
 * 1024 in the second (so whole blocks of 32 and of 1024 of each kind):
 * zero runs (signed), float subnormals, tiny normals (fp16's exponent at
 * its clamp), values at FLT_MAX (bf16's saturation, fp16's e = -112) with
 * small ones beside them (flushed to 0 or subnormal halves), values that
 * scale into [65504, 65536) (fp16's saturation) or onto binary16's and
 * bfloat16's rounding ties, and magnitudes from 1e-30 to 1e30 in one run. */
static float edge_value(size_t i, size_t n)
{
    const size_t run = i < n / 2 ? i / 32 : i / 1024 + 7;
    const uint32_t sg = (uint32_t)(rnd() & 1) << 31;
    switch (run % 8) {
    case 0: return hp_u2f(sg);
    case 1: return hp_u2f(sg | (uint32_t)(rnd() & 0x7fffffu));
    case 2: return hp_u2f(sg | (uint32_t)((1 + rnd() % 26) << 23) | (uint32_t)(rnd() & 0x7fffffu));
    case 3:
        return rnd() % 4 == 0 ? hp_u2f(sg | (0x7f7fffffu - (uint32_t)(rnd() % 70000)))
                              : hp_u2f(sg | (uint32_t)(rnd() % 0x7f000000u));
    case 4: return hp_u2f(sg | (uint32_t)((100 + rnd() % 60) << 23) | 0x7fe000u | (uint32_t)(rnd() & 0x1fffu));
    case 5:   /* a binary16 tie (for the block's largest exponent), or a bfloat16 tie */
        if (rnd() & 1)
            return hp_u2f(sg | (uint32_t)((20 + rnd() % 200) << 23) | ((uint32_t)(rnd() & 0x3ffu) << 13) | 0x1000u);
        return hp_u2f(sg | (uint32_t)((1 + rnd() % 253) << 23) | ((uint32_t)(rnd() & 0x7fu) << 16) | 0x8000u);
    case 6: return (float)((double)(unit() - 0.5) * pow(10.0, (double)(rnd() % 61) - 30.0));
    default: return (float)(0.01 * (unit() - 0.5));
    }
}

#endif
