/*
 * Where a compressed call's buffer lives, and the operations the algorithms
 * and the driver apply to it, behind one table: the CPU backend (host
 * memory, src/backend/hp_backend_cpu.c) and the device backend (device
 * memory, the CUDA module's codec, src/backend/hp_gpu_backend.c).  Each
 * table has an id (HP_BACKEND_*) by which the algorithm layer keeps what it
 * has per backend (a collective compressor's runs,
 * src/algo/hp_collectives.def).  The algorithms are written
 * once against hp_call_encode / hp_call_decode / hp_call_fold /
 * hp_call_copy / hp_call_add / hp_call_work (src/algo/hp_algo.h); which memory a
 * call works on is decided once per call (hp_mem_begin), never by a branch
 * in an algorithm.
 *
 * Messages live in host memory (the MPI transport's) on the CPU backend and
 * on the device backend; there an encode produces them on the GPU and copies
 * only the encoded bytes to the (page-locked) message slot, and a decode
 * copies them back and decodes on the GPU.  The device backend's
 * device-message mode (hp_mem_device_msgs, chosen once per call by the NCCL
 * front end for its stream-ordered calls) keeps them in device memory: the
 * module's encode_msg and decode_msg, no host wait, the message operations
 * below answering without reading a message on the host.  Every form
 * produces the same bytes for the same input, so a message decodes to the
 * same bits wherever it was made.
 */
#ifndef HP_BACKEND_H
#define HP_BACKEND_H

#include "hp_config.h"
#include "hp_comp.h"
#include "hp_gpu.h"
#include "hp_residual.h"

typedef struct hp_mem hp_mem_t;

/* The backends' ids: hp_mem_ops_t.id, an index of tables kept per backend. */
enum { HP_BACKEND_CPU, HP_BACKEND_DEVICE, HP_BACKEND_COUNT };

typedef struct hp_mem_ops {
    int         id;     /* HP_BACKEND_* */
    const char *name;   /* "cpu", "cuda" */
    /* Encode a->in[0..a->n) (a->residual, a->state: the call's vectors, in
     * the buffer's memory) as one message of `kind` into out (host); mask:
     * dgc's momentum of the range, zeroed where the message carries an
     * element (all of it for a `none` message; none of it for a message
     * with exceptions), or NULL.  src and *except_p: as for
     * hp_msg_encode_x (an overflowed sum travels as exceptions). */
    hp_status_t (*encode)(hp_mem_t *m, int kind, hipress_encode_args_t *a, hp_src_t src, float *mask,
                          void *out, size_t cap, size_t *len_p, int *nonfinite_p, size_t *except_p);
    /* Validate and decode a message (host) into dst (the buffer's memory). */
    hp_status_t (*decode)(hp_mem_t *m, int kind, const void *msg, size_t len, size_t n, float *dst,
                          int accumulate, const hipress_comp_params_t *p);
    /* buf += r, r = 0, unless buf holds NaN or Inf; 1 when it did (the
     * device backend does not wait to know: 1). */
    int (*fold)(hp_mem_t *m, float *buf, float *r, size_t n);
    /* Whether buf[0..n) holds NaN or Inf: 1 yes, 0 no, -1 unknown (the
     * caller then assumes it does).  hp_call_merge_begin's own-data check. */
    int (*nonfinite)(hp_mem_t *m, const float *buf, size_t n);
    /* Copy bytes (either side may be host memory on the device backend). */
    void (*copy)(hp_mem_t *m, void *dst, const void *src, size_t bytes);
    void (*add)(hp_mem_t *m, float *dst, const float *src, size_t n);
    /* n floats of the buffer's memory for the algorithm, valid during the
     * call: the CPU backend returns host_extra (carved by the caller from
     * its message scratch, work_host_bytes(n) bytes). */
    float *(*work)(hp_mem_t *m, void *host_extra, size_t n);
    size_t (*work_host_bytes)(size_t n);
    /* u = mom u + buf; buf = u, unless buf holds NaN or Inf: 1 when done. */
    int (*momentum)(hp_mem_t *m, float *u, float *buf, float mom, size_t n);
    /* Host memory for the messages of the call (page-locked on the device
     * backend), or NULL: the communicator's scratch. */
    void *(*scratch)(hp_mem_t *m, size_t bytes);
    /* Wait for the queued work; the first error since begin (a malformed
     * message found on the device: HP_ERR_MESSAGE). */
    hp_status_t (*sync)(hp_mem_t *m);
    /* The algorithms' operations on message bytes (messages in host memory:
     * hp_msg_len, hp_msg_error, the header's non-finite flag; device
     * messages: see hp_mem_device_msgs).  msg_len: the length to decode a
     * received message (cap bytes of slot) with; msg_error: write an error
     * message for len elements, its length; msg_nonfinite: 1 when the
     * message says it carries NaN or Inf (or that cannot be known), else 0;
     * msg_corrupt: the corruption test knob (byte 8 of the header flipped: a
     * message whose header lies about its payload, which every decoder
     * rejects). */
    size_t (*msg_len)(hp_mem_t *m, const void *msg, size_t cap);
    size_t (*msg_error)(hp_mem_t *m, void *out, size_t len);
    int (*msg_nonfinite)(hp_mem_t *m, const void *msg, size_t len);
    void (*msg_corrupt)(hp_mem_t *m, void *msg);
    /* Memory for the message slots when it is not the host scratch (device
     * messages: the caller's, hp_mem_device_msgs), else NULL. */
    void *(*msg_mem)(hp_mem_t *m, size_t bytes);
} hp_mem_ops_t;

struct hp_mem {
    const hp_mem_ops_t *ops;
    void               *cx;      /* device: the module's codec context, NULL when none */
    hp_gpu_ptr_t        where;   /* device: the buffer's allocation */
    hp_status_t         err;     /* first failure of an operation that returns none */
    /* device messages (hp_mem_device_msgs): the caller's device memory for
     * the call's message slots */
    void             *(*msg_alloc)(void *ctx, size_t bytes);
    void               *msg_ctx;
};

/* The host-message forms of hp_mem_ops_t's message operations (both
 * backends' tables). */
size_t hp_mem_host_msg_len(hp_mem_t *m, const void *msg, size_t cap);
size_t hp_mem_host_msg_error(hp_mem_t *m, void *out, size_t len);
int hp_mem_host_msg_nonfinite(hp_mem_t *m, const void *msg, size_t len);
void hp_mem_host_msg_corrupt(hp_mem_t *m, void *msg);

/* The CPU backend, and the device backend with its messages in host memory
 * (hp_mem_begin's choice for a device buffer). */
extern const hp_mem_ops_t hp_mem_cpu;
extern const hp_mem_ops_t hp_mem_dev;

/* The call's memory: the device backend when recvbuf is device or managed
 * memory (the caller routed it here: hp_gpu_compress_route), else the CPU.
 * A device backend whose codec context cannot be had is still returned,
 * with m->err set: the call then fails on every rank through the usual
 * protocol.  Ends with hp_mem_end. */
void hp_mem_begin(hp_mem_t *m, const void *recvbuf);
/* The same with a codec context of the owner *owner_p (a communicator's,
 * made at its first call; the module's third table), so that its calls
 * share streams with no other communicator's, and its residuals are
 * allocated and freed in its contexts' stream order; a module without the
 * third table: hp_mem_begin. */
void hp_mem_begin_owned(hp_mem_t *m, const void *recvbuf, void **owner_p);
/* The owner's end (its communicator's release): no wait, nothing freed
 * synchronously (hp_gpu_ops_v3_t.owner_release).  After the residual
 * store whose vectors it allocated went. */
void hp_mem_owner_release(void **owner_p);
/* Waits for the device; the call's first device error, or HP_OK. */
hp_status_t hp_mem_end(hp_mem_t *m);
/* The device-message mode of a call on the device backend (the NCCL
 * front end's stream-ordered calls): from here on the call's messages are
 * device memory from msg_alloc(ctx, bytes) (valid for the call; the
 * algorithms' slots), written by the module's encode_msg and checked and
 * decoded on the device by decode_msg, in stream order with no host wait: a
 * rejected message only sets the codec's sticky flag (the caller turns it
 * into NaN on the device: nan_if), an encode reports no non-finite count
 * (the NaN message is made on the device), the own-data check of a merge is
 * not made (the device encoder never writes exceptions), a received
 * message's length is its slot's capacity (the device decoder reads the
 * header), an empty range's message is neither written nor read.  Only the
 * formats with a device message (hp_mem_device_msgs_format) may be encoded;
 * any other fails the call (HP_ERR_UNSUPPORTED).  HP_OK, or an error (not
 * the device backend, no codec context) with the call unchanged. */
hp_status_t hp_mem_device_msgs(hp_mem_t *m, void *(*msg_alloc)(void *ctx, size_t bytes), void *ctx);
/* Whether compressor `kind` with parameters p has a device message (the
 * dense fixed-length formats, graddrop, dgc): 1 or 0. */
int hp_mem_device_msgs_format(int kind, const hipress_comp_params_t *p);

/* 1 on the device backend. */
static inline int hp_mem_is_device(const hp_mem_t *m) { return m->ops->id != HP_BACKEND_CPU; }

/* Momentum factor masking on host memory, for both backends' encodes: the
 * elements message msg (mlen bytes) of compressor `kind` carried start again
 * from zero in mom[0..len): those of its (index, value) pairs for a sparse
 * compressor, all of them for any other (a dense message: `none`'s
 * fallback, or a dense sum codec re-encoding an owner's shard of dgc). */
void hp_mask_sent(float *mom, int kind, const unsigned char *msg, size_t mlen, size_t len);

/* Host copies of a device buffer of the call (count floats), for the exact
 * MPI operations of hp_backend_mpi.h: hp_mem_stage_in gives a host copy of
 * dev (uninitialised when dev is NULL) in the backend's staging arena, NULL
 * after an error (m->err set); hp_mem_stage_out copies h back to dev, 0 or
 * -1.  This header and the backends use no MPI (the NCCL-only library). */
float *hp_mem_stage_in(hp_mem_t *m, const void *dev, size_t count);
int hp_mem_stage_out(hp_mem_t *m, void *dev, const float *h, size_t count);

/* Where the error-feedback vectors of the call's buffer live (NULL: host
 * memory), for hp_residual_bind. */
const hp_res_mem_t *hp_mem_residual(const hp_mem_t *m);
/* Copy count floats of a buffer's vector r to host memory out; 0 or -1. */
int hp_mem_residual_read(const hp_res_buf_t *b, const float *r, float *out, size_t count);

/* ---------------------------------------------------------- routing */

/* Whether an eligible MPI_Allreduce on these buffers is compressed on the
 * GPU (1) or, device memory being involved, passed through exactly (0):
 * recvbuf device or managed memory, the CUDA module with the device codec
 * loaded, HIPRESS_GPU=auto in cfg (the settings in effect).  The one place
 * this is decided; every rank of a call must get the same answer (give
 * every rank the same kind of memory: doc/gpu.md). */
int hp_gpu_compress_route(const hp_config_t *cfg, const hp_gpu_ptr_t kinds[2], const void *sendbuf,
                          const void *recvbuf);

/* The set-up of the device codec for the current CUDA context, at a
 * communicator's creation (where NCCL itself synchronises the device): the
 * codec's probe there (its memory, the loading of every kernel, the
 * page-locked words) and the calling thread's page-locked message memory,
 * so that the first compressed call waits for nothing device-wide, which
 * would wait behind another stream's operations (a deadlock where one
 * waits for a peer blocked in this call).  Nothing where HIPRESS_GPU is
 * not auto, no module or no context is current. */
void hp_gpu_codec_setup(const hp_config_t *cfg);

/* The module's v2 table when loaded and usable, else NULL. */
const hp_gpu_ops_v2_t *hp_gpu_codec(void);

/* Device memory of a caller's (*p_p of *bytes_p bytes in *where_p's
 * context; NULL: none yet) holding at least `bytes` afterwards, in where's
 * context, zero-filled when new: grown in the stream order of codec context
 * cx (no wait and no synchronisation of the device: what used the old
 * memory on cx's streams, or before on a stream they joined, runs first;
 * what uses the new memory must be ordered after cx's streams), or, without
 * cx or the module's third table, through a synchronous free and
 * allocation.  0, or -1 with a warning naming `what`. */
int hp_gpu_dev_grow(void *cx, const hp_gpu_ptr_t *where, size_t bytes, void **p_p, size_t *bytes_p,
                    hp_gpu_ptr_t *where_p, const char *what);

#endif
