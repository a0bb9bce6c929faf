/*
 * The hooks several built-in compressors share (hp_comp.h): their sum codec
 * and their residual-free form.  Apart from the registry (hp_comp.c), which
 * names the compressors, so that the compressors' uses run one way.
 */
#include "hp_comp.h"

int hp_sum_codec_q4(const hipress_comp_params_t *p)
{
    (void)p;
    return HP_BUILTIN_q4;
}

int hp_unbiased_dense_q(const hipress_comp_params_t *p)
{
    (void)p;
    return HP_FORM_DENSE_Q;
}
