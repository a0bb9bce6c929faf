/*
 * The device codec's formats, one row each (hp_codec_fmt_t), and what a
 * row's functions may use of the codec: its workspace, the copy of a
 * finished piece to the host, the info words.  Private to the codec
 * (cuda/codec/hp_codec*.c).
 *
 * hp_codec_frame.c runs every encode and decode through the row of its format
 * (hp_gpu_fmt_t.id), found in a table built from src/comp/hp_gpu_fmt.def:
 * it checks, allocates, reads the flags and copies payloads in; a row
 * queues its kernels (hp_klaunch.h) and the copies out, and checks the
 * payload's layout on the host.  A new format is a row of hp_gpu_fmt.def, a
 * hp_codec_fmt_<name> here (in the codec file of its family), and its
 * launchers: nothing else in the codec changes.
 */
#ifndef HP_CODEC_FMT_H
#define HP_CODEC_FMT_H

#include "hp_codec.h"
#include "hp_kern.h"
#include "hp_klaunch.h"
#include "hp_kern_msg.h"

#define CK(expr) do { if ((expr) != 0) return HP_GPU_ERR_DEVICE; } while (0)
#define STREAM(cx) ((cx)->dev->stream((cx)->self, HP_STREAM_COMPUTE))

typedef struct hp_codec_fmt {
    /* 0 when e's parameters (e->fmt, e->n) suit the kernels: checked before
     * any work is queued (else HP_GPU_ERR_INVALID). */
    int (*enc_ok)(const hp_gpu_enc_t *e);
    /* Queue the encode of e: kernels on the compute stream writing the
     * payload into dmsg (device memory of e->fmt.payload bytes), each
     * finished piece copied to the same bytes of out (host) with
     * hp_codec_put.  The flags go to hp_codec_info(cx) (HP_K_F_*, zeroed
     * before); the codec reads them after.  HP_GPU_OK or an HP_GPU_ERR_*. */
    int (*encode)(hp_codec_t *cx, const hp_gpu_enc_t *e, uint8_t *out, uint8_t *dmsg);
    /* The payload's bytes once the info words are on the host (hinfo):
     * formats of varying length; NULL: e->fmt.payload. */
    size_t (*length)(const hp_gpu_enc_t *e, const uint32_t *hinfo);
    /* The host-side checks of a payload of plen bytes (the cheap ones;
     * what needs every element is the decode kernels'): 0 when acceptable. */
    int (*check)(const hp_gpu_dec_t *d, const uint8_t *p, size_t plen);
    /* Queue the decode of the payload dp (device memory, checked) into dst
     * (added when d->accumulate); a malformed payload sets HP_K_F_BAD in
     * *bad on the device. */
    int (*decode)(hp_codec_t *cx, const hp_gpu_dec_t *d, const uint8_t *dp, size_t plen, float *dst,
                  uint32_t *bad);
    /* 1: encode copies the input itself (no device message buffer, dmsg
     * NULL, except for a benchmark's device-only encode). */
    int direct;
    /* The payload's checks as items (HP_K_CHK_*, hp_kern_msg.h): the host
     * check runs them after its length and parameter checks, and a decode
     * of a message in device memory runs them in a kernel. */
    uint32_t dcheck;
    /* A format of varying length (length != NULL) with messages in device
     * memory: the bytes of its payload per unit of info word 1, which the
     * device writes into the header (0: none, encode_msg unsupported), and
     * the checks and decode of the message at m (cap bytes; the header too,
     * status the HP_INFO_MSG words, [1..3] zeroed) on the device. */
    uint32_t msg_unit;
    int (*decode_msg)(hp_codec_t *cx, const hp_gpu_dec_t *d, uint32_t kind, const uint8_t *m, size_t cap,
                      float *dst, uint32_t *status);
} hp_codec_fmt_t;

#define HP_GPU_FMT_ROW(id, NAME, name) extern const hp_codec_fmt_t hp_codec_fmt_##name;
#include "hp_gpu_fmt.def"
#undef HP_GPU_FMT_ROW

/* Workspace slot `slot` (HP_WS_*) of at least `bytes`. */
int hp_codec_ws(hp_codec_t *cx, int slot, size_t bytes, void **p_p);

/* After the kernels queued so far: the copy stream may read their output. */
int hp_codec_to_copy(hp_codec_t *cx);

/* Copy [lo, hi) of the device payload dmsg to the same bytes of out, on
 * the copy stream (nothing for a device-only encode). */
int hp_codec_put(hp_codec_t *cx, uint8_t *out, const uint8_t *dmsg, size_t lo, size_t hi);

/* The device info words (HP_INFO_WORDS; [0] the encode's flags). */
static inline uint32_t *hp_codec_info(hp_codec_t *cx)
{
    return (uint32_t *)cx->ws[HP_WS_INFO];
}

/* The payload-check items of a decode of d (hp_kern_msg.h). */
static inline hp_k_msgfmt_t hp_codec_msgfmt(const hp_gpu_dec_t *d, uint32_t chk)
{
    hp_k_msgfmt_t f;
    f.chk = chk;
    f.n = (uint32_t)d->n;
    f.B = d->fmt.block;
    f.bits = d->fmt.iarg[0];
    return f;
}

/* Every item of the payload check on the host: 0 when acceptable. */
static inline int hp_codec_items_ok(const hp_gpu_dec_t *d, uint32_t chk, const uint8_t *p)
{
    hp_k_msgfmt_t f = hp_codec_msgfmt(d, chk);
    size_t items = hp_k_msg_items(&f);
    for (size_t j = 0; j < items; j++)
        if (hp_k_msg_item(&f, p, j) != 0)
            return -1;
    return 0;
}

/* Whether B is a block size of the block formats: a power of two >= 32. */
static inline int hp_codec_block_ok(uint32_t B)
{
    return B >= 32 && (B & (B - 1)) == 0;
}

#endif
