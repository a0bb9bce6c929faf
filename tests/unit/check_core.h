/*
 * What the files of tests/unit/check_core share: the includes, a check that
 * costs nothing when it holds, the default compressor parameters, and the
 * functions that add each file's tests to a test case (check_core.c builds
 * the suite from them).
 */
#ifndef CHECK_CORE_H
#define CHECK_CORE_H

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hp_algo.h"
#include "hp_comp.h"
#include "hp_plan.h"
#include "hp_ops.h"
#include "hp_ops_sparse.h"
#include "hp_config.h"
#include "hp_elem.h"
#include "hp_eligible.h"
#include "hp_residual.h"

/* ck_assert_msg records a checkpoint (a write and flush) on every success,
 * which costs seconds over the millions of checks of the loops below; this
 * one only acts on failure. */
#define REQUIRE(expr, fmt, ...) \
    do { if (HP_UNLIKELY(!(expr))) ck_abort_msg("'%s' failed: " fmt, #expr, ##__VA_ARGS__); } while (0)

/* The default compressor parameters, made once. */
static inline const hipress_comp_params_t *params(void)
{
    static hipress_comp_params_t p;
    static int done;
    if (!done) {
        hipress_comp_params_default(&p);
        done = 1;
    }
    return &p;
}

/* check_core_plan.c: the eligibility rule; the chunk arithmetic; the
 * grain-aligned spans, the plan's stages, budgets and ties, the sum codec,
 * dgc's warm-up. */
void core_eligible_tests(TCase *tc);
void core_chunk_tests(TCase *tc);
void core_plan_tests(TCase *tc);
/* check_core_residual.c: the residual store. */
void core_residual_tests(TCase *tc);
/* check_core_msg.c: the message header, encode and decode. */
void core_msg_tests(TCase *tc);
/* check_core_fp16.c: the fp16 conversions against F16C. */
void core_fp16_tests(TCase *tc);

#endif
