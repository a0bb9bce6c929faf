/*
 * HIPRESS_STAGING_FORM on the NCCL front end (src/front/hp_nccl_form.c):
 * which codecs a compressed ncclAllReduce runs where some rank keeps no
 * residual for its buffer (a staging buffer, HIPRESS_EF_LAYOUT=none), the
 * same choice on every rank without a host agreement in a steady-state
 * call.  The design and its limits: doc/gpu.md, "Staging buffers on NCCL".
 */
#ifndef HP_NCCL_FORM_H
#define HP_NCCL_FORM_H

#include "hp_backend.h"
#include "hp_config.h"
#include "hp_nccl_ctx.h"
#include "hp_residual.h"
#include "hp_transport.h"

/* HIPRESS_STAGING_FORM's values, in the setting's order (the MPI front
 * end's HP_FORM_* in hp_state.h, which this library cannot include). */
enum { HP_NCCL_FORM_UNBIASED, HP_NCCL_FORM_EXACT, HP_NCCL_FORM_BIASED };

/* The element counts whose verdict is kept (least recently used first out). */
#define HP_NCCL_FORM_COUNTS 32

typedef struct {
    size_t             count;
    uintptr_t          addr;    /* this rank's buffer at the count's last call */
    unsigned long long used;    /* the table's clock then (the same on every rank) */
    int                form;    /* the verdict agreed: some rank keeps no residual */
    int                local;   /* this rank found a staging buffer of this count since */
} hp_nccl_form_count_t;

/* A communicator's codecs and verdicts (zeroed with it; kept when its
 * settings are agreed again, as its residuals are). */
typedef struct {
    int                   mode;     /* HP_NCCL_FORM_* */
    int                   layout;   /* HIPRESS_EF_LAYOUT (hp_layout_t) */
    int                   need;     /* the compressor keeps state: a form may be needed */
    int                   kind, sum_kind;   /* the form's codecs */
    hipress_comp_params_t params;           /* and their parameters (stochastic rounding) */
    unsigned long long    clock;    /* calls looked up since the residuals were made */
    int                   n;
    hp_nccl_form_count_t  c[HP_NCCL_FORM_COUNTS];
    int                   warned;   /* 1: a late staging buffer, 2: one under biased */
} hp_nccl_form_t;

/* The form's codecs of compressor `kind` (sum codec sum_kind, parameters
 * params) under cfg's HIPRESS_STAGING_FORM, STAGING_CODEC and EF_LAYOUT,
 * as the MPI front end resolves them (hp_comm_state_refresh).  At each
 * agreement of the communicator's settings. */
void hp_nccl_form_setup(hp_nccl_form_t *f, const hp_config_t *cfg, int kind, int sum_kind,
                        const hipress_comp_params_t *params);

/* The codecs a call runs with: the communicator's, or their form. */
typedef struct {
    int                          kind, sum_kind;
    const hipress_comp_params_t *params;
    int                          form;   /* the form's (the plans are keyed by it) */
} hp_nccl_codecs_t;

/* The codecs (*out) of a call of `count` elements into recvbuf (this rank's
 * address: the residuals' key) on a communicator of compressor kind, sum
 * codec sum_kind, parameters params.  Every rank reaches the same verdict:
 * it is agreed over tp (a host-synchronous agreement of one int64 per kept
 * count, on every rank alike, after a wait for t's stream: earlier
 * stream-ordered calls may still use the device memory it stages in) at
 * the first call of a count other than the communicator's very first, and
 * kept for that count; EF_LAYOUT none is the
 * form always, trust never.  A rank whose buffer turns out to be a staging
 * buffer after its count's verdict (no form) runs that call without error
 * feedback (one warning), and its finding enters the next agreement.
 * Returns 0 (compress with *out), 1 (the call goes plain:
 * STAGING_FORM=exact), or -1 when the agreement failed (NCCL's error is the
 * caller's). */
int hp_nccl_form_call(hp_nccl_form_t *f, hp_residual_store_t *res, hp_nccl_ctx_t *t, hp_transport_t *tp,
                      const void *recvbuf, size_t count, int kind, int sum_kind, const hipress_comp_params_t *params,
                      hp_nccl_codecs_t *out);

/* The buffer's error-feedback state for a compressed call with codecs cc
 * (sum_kind: the plan's sum codec), as hp_call_buffer_state: NULL in the
 * form (it keeps none); a staging buffer under STAGING_FORM=biased is
 * warned of once. */
hp_res_buf_t *hp_nccl_form_buffer(hp_nccl_form_t *f, hp_residual_store_t *res, hp_mem_t *mem, void *key,
                                  size_t count, const hp_nccl_codecs_t *cc, int sum_kind);

/* A call in the form (cc->form; else nothing): what this rank still holds
 * for (key, count) (its own buffer stable) is folded into its data, so it
 * travels unbiasedly encoded and nothing is lost (as the MPI path); the
 * call is counted. */
void hp_nccl_form_fold(const hp_nccl_codecs_t *cc, hp_residual_store_t *res, int layout, hp_mem_t *mem, void *key,
                       float *data, size_t count);

#endif
