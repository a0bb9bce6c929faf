/*
 * The device codec: how a message is encoded and decoded on the GPU, as a
 * sequence of kernel launches (hp_klaunch.h) and copies, with the device
 * workspace it needs.  Plain C over two small interfaces -- the launchers and
 * hp_dev_ops_t (memory, copies, streams, events) -- so the same code runs in
 * libhipress_cuda.so (CUDA kernels, driver API) and in the tests (emulated
 * kernels; host memory or the stand-in driver).  Each format's launches,
 * copies and host-side checks are its row (hp_codec_fmt.h), chosen by the
 * format's id (hp_gpu_fmt_t, filled by the compressor).
 *
 * Streams: kernels on the compute stream, host copies on the copy stream.
 * An encode runs its kernels piece by piece (HP_CODEC_PIECE elements of
 * whole blocks) and copies each piece's payload to the host as soon as the
 * piece is done, so the copy of piece p overlaps the kernels of piece p+1;
 * a decode copies the payload in (into one of two staging buffers, so the
 * copy of the next message overlaps the kernels of this one) and queues the
 * kernels; it returns once the host payload may be reused.
 */
#ifndef HP_CODEC_H
#define HP_CODEC_H

#define HP_GPU_OPS_ONLY
#include "hp_gpu.h"
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { HP_STREAM_COMPUTE = 0, HP_STREAM_COPY = 1 };
/* HP_EV_JOIN and HP_EV_REL0/1: the fork from and the join back to a
 * caller's stream (the module's stream_join, stream_release); HP_EV_WS:
 * the streams' order around memory allocated or freed in stream order. */
enum { HP_EV_PIECE = 0, HP_EV_DEC0, HP_EV_DEC1, HP_EV_FREE0, HP_EV_FREE1, HP_EV_COMPUTE, HP_EV_JOIN, HP_EV_REL0,
       HP_EV_REL1, HP_EV_WS, HP_EV_N };

/* Memory, copies and ordering for the codec.  Every function returns 0 or
 * -1 (with a reason the caller can read where it came from). */
typedef struct hp_dev_ops {
    int (*alloc)(void *self, size_t bytes, void **p_p);      /* device, synchronous (warm-up) */
    void (*release)(void *self, void *p);                    /* after a sync of both streams */
    int (*halloc)(void *self, size_t bytes, void **p_p);     /* page-locked host */
    void (*hrelease)(void *self, void *p);
    int (*copy)(void *self, void *dst, const void *src, size_t bytes, int stream);
    int (*memset)(void *self, void *p, int byte, size_t bytes, int stream);
    int (*record)(void *self, int event, int stream);
    int (*wait)(void *self, int stream, int event);          /* stream waits for the event */
    int (*sync)(void *self, int stream);
    int (*sync_event)(void *self, int event);
    void *(*stream)(void *self, int stream);                 /* for the launchers */
    /* Device memory in a stream's order (no wait, no synchronisation of
     * the device), or NULL where there is none: the workspace then grows
     * with alloc and release after a wait. */
    int (*alloc_q)(void *self, size_t bytes, void **p_p, int stream);
    void (*release_q)(void *self, void *p, int stream);
} hp_dev_ops_t;

/* Device workspace slots, each grown on demand and kept. */
enum { HP_WS_MSG = 0, HP_WS_TMP, HP_WS_DEC0, HP_WS_DEC1, HP_WS_WORK, HP_WS_INFO, HP_WS_N };

/* Elements per piece of an encode (a multiple of the block is used). */
#define HP_CODEC_PIECE ((size_t)1 << 22)

typedef struct hp_codec {
    const hp_dev_ops_t *dev;
    void               *self;
    void               *ws[HP_WS_N];
    size_t              wsb[HP_WS_N];
    uint32_t           *hinfo;     /* page-locked copy of the info words */
    int                 dec_slot;  /* staging buffer of the next decode */
    int                 bad;       /* a malformed message was seen on the device */
    size_t              piece;     /* elements per piece (HP_CODEC_PIECE; tests set it) */
    int                 devonly;   /* benchmark: payloads stay in device memory (encode
                                    * leaves it in the HP_WS_MSG slot, decode reads a
                                    * device payload unchecked) */
} hp_codec_t;

/* Info words on the device: [0] the encode's flags (HP_K_F_*), [1] its pair
 * count, [2] sticky decode errors, [3] a scratch flag (fold, momentum). */
#define HP_INFO_WORDS 4
/* Device-only words after them: [4..6] the status of the message a device
 * decode is reading (hp_kl_msg_check, hp_kl_msg_fix), [7] whether it is a
 * sparse format's dense fallback (hp_kl_sparse_dec_msg). */
#define HP_INFO_MSG 4
/* [8]: whether the call's momentum (hp_codec_momentum, _q) was applied
 * (HP_K_F_NONFINITE: not, the range held NaN or Inf), the gate of every
 * mask an encode zeroes (dgc's momentum masking: none without momentum,
 * as on the CPU); 0 from the context's start. */
#define HP_INFO_MOM 8

int hp_codec_init(hp_codec_t *cx, const hp_dev_ops_t *dev, void *self);
/* Frees the workspace (after a sync). */
void hp_codec_fini(hp_codec_t *cx);
/* Frees the workspace in stream order, after everything queued, with no
 * wait (alloc_q's devices; else as hp_codec_fini). */
void hp_codec_fini_q(hp_codec_t *cx);

int hp_codec_encode(hp_codec_t *cx, const hp_gpu_enc_t *e, void *out, size_t cap, size_t *plen_p,
                    int *nonfinite_p);
int hp_codec_decode(hp_codec_t *cx, const hp_gpu_dec_t *d, const void *payload, size_t plen, float *dst);
int hp_codec_fill(hp_codec_t *cx, float *dst, float v, size_t n);
int hp_codec_fold(hp_codec_t *cx, float *buf, float *r, size_t n);
int hp_codec_add(hp_codec_t *cx, float *dst, const float *src, size_t n);
/* dst = src converted (how: HP_KL_CVT_*, hp_kl_convert). */
int hp_codec_convert(hp_codec_t *cx, void *dst, const void *src, size_t n, int how);
int hp_codec_copy(hp_codec_t *cx, void *dst, const void *src, size_t bytes, int host_involved);
int hp_codec_momentum(hp_codec_t *cx, float *u, float *buf, float m, size_t n, int *applied_p);
/* The same in stream order, with no wait: whether it was applied is known
 * on the device only (HP_INFO_MOM), where the masks read it. */
int hp_codec_momentum_q(hp_codec_t *cx, float *u, float *buf, float m, size_t n);
int hp_codec_work(hp_codec_t *cx, size_t bytes, void **p_p);
int hp_codec_nonfinite(hp_codec_t *cx, const float *x, size_t n, int *nonfinite_p);
/* Wait for everything queued; *bad_p: a malformed message was decoded since
 * the last sync (cleared). */
int hp_codec_sync(hp_codec_t *cx, int *bad_p);

/*
 * Whole messages in device memory, stream-ordered (nothing waits on the
 * host once the workspace has grown).  encode_msg writes the message
 * hp_msg_encode writes (header and payload) at dmsg (device, cap bytes),
 * kind its header's kind (a sparse format's length, its pair count, is
 * written into the header on the device); an input with NaN or
 * Inf gives the NaN message (never one with exceptions: the host's
 * hp_msg_except needs the host).  decode_msg checks the message at dmsg
 * (cap bytes) on the device and decodes it into dst: the NaN message gives
 * NaN; a rejected one (malformed, an error message, exceptions, which the
 * device does not decode, or the dense fallback `none` for a dense format;
 * a sparse format's decoder takes it, as the host's) sets the sticky flag that
 * hp_codec_sync reports and hp_codec_bad_word points at, and leaves dst
 * unspecified.  HP_GPU_ERR_INVALID only for parameters the receiver gave.
 */
int hp_codec_encode_msg(hp_codec_t *cx, const hp_gpu_enc_t *e, uint32_t kind, void *dmsg, size_t cap);
int hp_codec_decode_msg(hp_codec_t *cx, const hp_gpu_dec_t *d, uint32_t kind, const void *dmsg, size_t cap,
                        float *dst);
/* The device word of the sticky flag (HP_K_F_BAD once a decode rejected a
 * message; cleared by hp_codec_sync). */
uint32_t *hp_codec_bad_word(hp_codec_t *cx);
/* The end of a stream-ordered call: the sticky flag cleared on the device
 * after everything queued (whoever read it on the device has), and on the
 * host; no wait. */
int hp_codec_release(hp_codec_t *cx);
/* dst = NaN (n floats) when any of `bytes` bytes at flag (device memory)
 * is not zero, in stream order. */
int hp_codec_nan_if(hp_codec_t *cx, float *dst, size_t n, const void *flag, uint32_t bytes);
/* dst /= d on the compute stream (a stream-ordered ncclAvg). */
int hp_codec_divide(hp_codec_t *cx, float *dst, size_t n, float d);

/* Host-side checks of a payload (the cheap ones; per-element checks run on
 * the device): 0 when acceptable. */
int hp_codec_check(const hp_gpu_dec_t *d, const void *payload, size_t plen);

#ifdef __cplusplus
}
#endif
#endif
