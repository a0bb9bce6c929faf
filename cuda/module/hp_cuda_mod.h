/*
 * What the host side of the CUDA module (libhipress_cuda.so, and the
 * emulated module built from the same files) shares between its files;
 * private to them.  The files, along the module's seams:
 *   hp_cuda_driver.c  the driver's functions (reached through the
 *                     process's libcuda.so.1), errors, probe, pointer query
 *   hp_cuda_wait.c    CUDA contexts (a scope per call) and the bounded waits
 *   hp_cuda_stream.c  copies, streams, events, device memory, the self-test
 *   hp_cuda_cx.c      codec contexts, their owners, the codec's probe
 *   hp_cuda_calls.c   the codec's entry points
 *   hp_cuda_bench.c   hipress-bench --kernels --gpu
 *   hp_cuda_module.c  the tables the module exports
 */
#ifndef HP_CUDA_MOD_H
#define HP_CUDA_MOD_H

#define _GNU_SOURCE
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#define HP_GPU_OPS_ONLY
#include "hp_gpu.h"
#include "hp_codec.h"
#include <cuda.h>
#include <pthread.h>

/* ------------------------------------------------ the driver's functions */

typedef struct {
    pthread_mutex_t lock;
    int             ready;
    __typeof__(&cuInit)                        Init;
    __typeof__(&cuDriverGetVersion)            DriverGetVersion;
    __typeof__(&cuDeviceGetCount)              DeviceGetCount;
    __typeof__(&cuDeviceGet)                   DeviceGet;
    __typeof__(&cuDeviceGetName)               DeviceGetName;
    __typeof__(&cuDeviceGetAttribute)          DeviceGetAttribute;
    __typeof__(&cuDeviceTotalMem_v2)           DeviceTotalMem;
    __typeof__(&cuGetErrorName)                GetErrorName;
    __typeof__(&cuPointerGetAttributes)        PointerGetAttributes;
    __typeof__(&cuCtxGetCurrent)               CtxGetCurrent;
    __typeof__(&cuCtxPushCurrent_v2)           CtxPushCurrent;
    __typeof__(&cuCtxPopCurrent_v2)            CtxPopCurrent;
    __typeof__(&cuDevicePrimaryCtxRetain)      DevicePrimaryCtxRetain;
    __typeof__(&cuMemcpyDtoHAsync_v2)          MemcpyDtoHAsync;
    __typeof__(&cuMemcpyHtoDAsync_v2)          MemcpyHtoDAsync;
    __typeof__(&cuMemHostAlloc)                MemHostAlloc;
    __typeof__(&cuMemFreeHost)                 MemFreeHost;
    __typeof__(&cuStreamCreate)                StreamCreate;
    __typeof__(&cuStreamDestroy_v2)            StreamDestroy;
    __typeof__(&cuStreamIsCapturing)           StreamIsCapturing;
    __typeof__(&cuEventCreate)                 EventCreate;
    __typeof__(&cuEventRecord)                 EventRecord;
    __typeof__(&cuEventDestroy_v2)             EventDestroy;
    /* the device codec (hp_gpu_ops_v2_t) */
    __typeof__(&cuMemAlloc_v2)                 MemAlloc;
    __typeof__(&cuMemFree_v2)                  MemFree;
    __typeof__(&cuMemsetD8Async)               MemsetD8Async;
    __typeof__(&cuMemcpyAsync)                 MemcpyAsync;
    __typeof__(&cuStreamWaitEvent)             StreamWaitEvent;
    /* the bounded waits */
    __typeof__(&cuStreamQuery)                 StreamQuery;
    __typeof__(&cuEventQuery)                  EventQuery;
    /* stream-ordered memory (CUDA 11.2 on; NULL in an older driver: the
     * module then allocates and frees synchronously) */
    __typeof__(&cuMemAllocAsync)               MemAllocAsync;
    __typeof__(&cuMemFreeAsync)                MemFreeAsync;
    /* primary contexts this module retained, kept for the process's life */
    CUcontext       primary[HP_GPU_MAX_PROBED];
} hp_cu_drv_t;

extern hp_cu_drv_t hp_cu;

/* "CUDA_ERROR_INVALID_VALUE" */
const char *hp_cu_name(CUresult rc);

/* ------------------------------------------------------------- errors */

/* The thread's last failure (last_error()); returns status. */
int hp_cu_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *hpcu_last_error(void);
/* What this thread's entry point is doing, for a wait that times out to
 * name ("the encode of 40003 elements (onebit)"); resets hp_cu_wait_failed. */
void hp_cu_op_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *hp_cu_op_name(void);
/* A wait of this entry point failed and the last error says how (the entry
 * point's own message does not replace it). */
extern __thread int hp_cu_wait_failed;

#define CU_FAIL(call, rc) hp_cu_fail(HP_GPU_ERR_DEVICE, "%s: %s (%d)", call, hp_cu_name(rc), (int)(rc))
/* An entry point's failure: its own reason, unless a wait said more. */
#define OP_FAIL(st, ...) (hp_cu_wait_failed ? (st) : hp_cu_fail((st), __VA_ARGS__))
#define NEED_DRIVER() \
    do { if (!hp_cu.ready) return hp_cu_fail(HP_GPU_ERR_UNSUPPORTED, "the CUDA module is not initialised"); } while (0)

/* ------------------------------------------------------ contexts, waits */

typedef struct {
    int pushed;
} hp_cu_scope_t;

/* The primary context of `device`, retained once and kept. */
int hp_cu_primary(int device, CUcontext *ctx_p);
/* Make where's context current (pushed only when it is not already); exit
 * restores the caller's. */
int hp_cu_scope_enter(const hp_gpu_ptr_t *where, hp_cu_scope_t *sc);
void hp_cu_scope_exit(const hp_cu_scope_t *sc);

/* Run `call` (a CUresult expression) inside where's context. */
#define IN_SCOPE(where, name, call) \
    do { \
        hp_cu_scope_t sc_; CUresult rc_; int st_; \
        NEED_DRIVER(); \
        if ((st_ = hp_cu_scope_enter((where), &sc_)) != HP_GPU_OK) return st_; \
        rc_ = (call); \
        hp_cu_scope_exit(&sc_); \
        return rc_ == CUDA_SUCCESS ? HP_GPU_OK : CU_FAIL(name, rc_); \
    } while (0)

double hp_cu_now(void);
/* Wait for stream h (is_event 0) or event h, `on` naming it: a poll,
 * bounded (set_wait_bound). */
int hp_cu_wait(int is_event, void *h, const char *on);
/* Under a scope: the current context's copy stream (made once, kept). */
int hp_cu_xfer_stream(CUstream *s_p);

/* --------------------------------------------------------- codec contexts */

struct mod_owner;

/* A codec context: one call at a time uses it (call_begin .. call_end); an
 * owner's (a communicator's), or one of a pool per CUDA context. */
typedef struct mod_cx {
    hp_codec_t        codec;
    CUcontext         ctx;
    CUstream          s[2];
    CUevent           ev[HP_EV_N];
    int               busy;      /* in a call */
    int               retired;   /* never reused (a wait of it timed out, or its end failed) */
    int               stuck;     /* a wait timed out: its streams are not waited for again (a stuck
                                  * kernel stays stuck) */
    struct mod_owner *owner;     /* NULL: the pool's */
    struct mod_cx    *next;
} mod_cx_t;

/* The context a codec context works in, as a `where`. */
hp_gpu_ptr_t hp_cu_cx_where(const mod_cx_t *m);

/* Run `body` (statements setting int st_) inside m's context. */
#define IN_CX(m, body) \
    do { \
        hp_cu_scope_t sc_; hp_gpu_ptr_t w_ = hp_cu_cx_where(m); int st_; \
        NEED_DRIVER(); \
        if ((st_ = hp_cu_scope_enter(&w_, &sc_)) != HP_GPU_OK) return st_; \
        body; \
        hp_cu_scope_exit(&sc_); \
        return st_; \
    } while (0)

/* A format's name by its id (hp_gpu_fmt.def), for messages. */
const char *hp_cu_fmt_name(uint32_t id);

/* ------------------------------------------- the tables' functions */

int hpcu_init(int load_driver);
int hpcu_probe(hp_gpu_probe_t *probe_p);
int hpcu_ptr_query(const void *p, hp_gpu_ptr_t *ptr_p);
int hpcu_set_wait_bound(double seconds);
int hpcu_memcpy_d2h(void *dst, const void *src, size_t bytes, const hp_gpu_ptr_t *where);
int hpcu_memcpy_h2d(void *dst, const void *src, size_t bytes, const hp_gpu_ptr_t *where);
int hpcu_host_alloc(size_t bytes, const hp_gpu_ptr_t *where, void **p_p);
int hpcu_host_free(void *p, const hp_gpu_ptr_t *where);
int hpcu_stream_create(const hp_gpu_ptr_t *where, void **stream_p);
int hpcu_stream_destroy(void *stream, const hp_gpu_ptr_t *where);
int hpcu_stream_sync(void *stream);
int hpcu_stream_wait(void *stream, const char *what);
int hpcu_stream_capturing(void *stream, int *capturing_p);
int hpcu_event_create(const hp_gpu_ptr_t *where, void **event_p);
int hpcu_event_record(void *event, void *stream);
int hpcu_event_sync(void *event);
int hpcu_event_destroy(void *event, const hp_gpu_ptr_t *where);
int hpcu_selftest(int device);
int hpcu_dev_alloc(const hp_gpu_ptr_t *where, size_t bytes, void **p_p);
int hpcu_dev_free(const hp_gpu_ptr_t *where, void *p);
int hpcu_dev_l1(const hp_gpu_ptr_t *where, const float *p, size_t n, double *l1_p);

int hpcu_codec_probe(const hp_gpu_ptr_t *where);
int hpcu_call_begin(const hp_gpu_ptr_t *where, void **cx_p);
int hpcu_call_end(void *cx, int *bad_p);
int hpcu_call_release(void *cx);
int hpcu_sync(void *cx, int *bad_p);
int hpcu_owner_create(void **owner_p);
int hpcu_owner_release(void *owner);
int hpcu_call_begin_owner(void *owner, const hp_gpu_ptr_t *where, void **cx_p);
int hpcu_mem_alloc(void *cx, size_t bytes, int zero, void **p_p);
int hpcu_mem_free(void *cx, void *p);

int hpcu_encode(void *cx, const hp_gpu_enc_t *e, void *out, size_t cap, size_t *plen_p, int *nonfinite_p,
                   int *bad_p);
int hpcu_decode(void *cx, const hp_gpu_dec_t *d, const void *payload, size_t plen, float *dst);
int hpcu_encode_msg(void *cx, const hp_gpu_enc_t *e, uint32_t kind, void *dmsg, size_t cap);
int hpcu_decode_msg(void *cx, const hp_gpu_dec_t *d, uint32_t kind, const void *dmsg, size_t cap, float *dst);
int hpcu_bad_word(void *cx, uint32_t **word_p);
int hpcu_nan_if(void *cx, float *dst, size_t n, const void *flag, uint32_t bytes);
int hpcu_divide(void *cx, float *dst, size_t n, float d);
int hpcu_momentum_q(void *cx, float *u, float *buf, float mo, size_t n);
int hpcu_stream_join(void *cx, void *stream);
int hpcu_stream_release(void *cx, void *stream);
int hpcu_fill(void *cx, float *dst, float v, size_t n);
int hpcu_fold(void *cx, float *buf, float *r, size_t n);
int hpcu_add(void *cx, float *dst, const float *src, size_t n);
int hpcu_convert(void *cx, void *dst, const void *src, size_t n, int how);
int hpcu_copy(void *cx, void *dst, const void *src, size_t bytes);
int hpcu_momentum(void *cx, float *u, float *buf, float mo, size_t n, int *applied_p);
int hpcu_nonfinite(void *cx, const float *x, size_t n, int *nonfinite_p);
int hpcu_psgd_mq(void *cx, const float *M, size_t n, size_t mr, size_t c, size_t r, size_t T, const float *qt,
                    float *p);
int hpcu_psgd_mtp(void *cx, const float *M, size_t n, size_t mr, size_t c, size_t r, const float *p, float *qt);
int hpcu_psgd_recon(void *cx, float *buf, float *res, size_t n, size_t c, size_t r, const float *p,
                       const float *qs, const float *ql);
int hpcu_flag_nonfinite(void *cx, const float *x, size_t n, uint32_t *flag);
int hpcu_psgd_start_q(void *cx, float *qt, const float *warm, size_t r, size_t c, uint64_t key);
int hpcu_psgd_orth(void *cx, float *p, size_t mr, size_t r, double *work, const void *flag, uint32_t bytes);
int hpcu_psgd_recon_if(void *cx, float *buf, float *res, size_t n, size_t c, size_t r, const float *p,
                          const float *qs, const float *ql, const void *flag, uint32_t bytes);
int hpcu_copy_if(void *cx, float *dst, const float *src, size_t n, const void *flag, uint32_t bytes);
int hpcu_work(void *cx, size_t bytes, void **p_p);
int hpcu_bench(int device, size_t bytes, int reps, const hp_gpu_enc_t *fmts, int nfmts,
                  void (*row)(void *arg, int fmt_index, const char *op, double gbps, double copy_gbps,
                              size_t payload),
                  void *arg);

#endif
