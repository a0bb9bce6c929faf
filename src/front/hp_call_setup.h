/*
 * One compressed call's set-up, shared by the MPI and the NCCL front ends
 * (src/front/hp_call_setup.c): what a front end's communicator gives the
 * call, and the functions that turn it into the hp_call_t the algorithms
 * run on.
 */
#ifndef HP_CALL_SETUP_H
#define HP_CALL_SETUP_H

#include "hp_algo.h"
#include "hp_backend.h"
#include "hp_residual.h"

/* What the front end's communicator gives one call. */
typedef struct hp_call_env {
    hp_transport_t              *tp;        /* the ranks the algorithm runs on */
    hp_mem_t                    *mem;       /* the buffer's memory */
    int                          kind;      /* compressor */
    int                          sum_kind;  /* its sum codec (hp_comp_sum_kind) */
    const hipress_comp_params_t *params;    /* this call's (hp_call_params_for) */
    hp_residual_store_t         *res;
    hp_res_buf_t                *rb;        /* the buffer's state, or NULL */
    uint64_t                     seed, call_no;
    int                          corrupt, kill;   /* test knobs */
} hp_call_env_t;

/* The buffer's error-feedback state bound to the call's memory, NULL when
 * there is none (layout `none`; or a buffer whose vectors are in another
 * memory).  `create`: a compressor that keeps state creates it; any call
 * finds what an earlier one left so it can be folded in.  *staging_p
 * (may be NULL) is set when the address was found to be a staging buffer. */
hp_res_buf_t *hp_call_buffer_state(hp_residual_store_t *res, hp_mem_t *mem, void *recvbuf, size_t count,
                                   int create, int layout, int *staging_p);

/* The residual rb holds for a buffer of count elements, or NULL. */
float *hp_call_held_residual(const hp_res_buf_t *rb, size_t count);

/* This call's compressor parameters (dgc's warm-up counts calls on the
 * buffer). */
void hp_call_params_for(int kind, const hipress_comp_params_t *params, const hp_res_buf_t *rb,
                        hipress_comp_params_t *out);

/* Whether a call of worker codec `kind` and sum codec `sum_kind` keeps
 * per-buffer state (error feedback in either, or momentum). */
int hp_call_keeps_state(int kind, int sum_kind);

/* The codecs of the residual-free form (HIPRESS_STAGING_FORM=unbiased) of
 * worker codec `kind` and sum codec `sum_kind` under cfg's
 * HIPRESS_STAGING_CODEC: its parameters (*fparams), worker (*fkind) and sum
 * codec (*fsum_kind).  Shared by both fronts, so they resolve alike. */
void hp_call_form_codecs(const hp_config_t *cfg, int kind, int sum_kind, const hipress_comp_params_t *params,
                         hipress_comp_params_t *fparams, int *fkind, int *fsum_kind);

/* hp_call_t.scratch for a memory whose backend has message memory of its
 * own (page-locked on the device backend): ctx is the call's hp_mem_t. */
void *hp_call_mem_scratch(void *ctx, size_t bytes);

/* Fill *call for elements [base, base + n) of recvbuf (count elements),
 * which holds this rank's data: residual and momentum vectors at base (dgc's
 * momentum applied to the range), grain, seed and call number.  The
 * caller zeroes *call first and sets its scratch, partitioning and err. */
void hp_call_prepare(hp_call_t *call, const hp_call_env_t *env, float *recvbuf, size_t count, size_t base,
                     size_t n);

#endif
