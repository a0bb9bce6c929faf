/*
 * What the device codec's format rows use of their context
 * (hp_codec_fmt.h): the workspace, the copy stream's wait for the compute
 * stream, a message's bytes to the host.  Below the frame
 * (hp_codec_frame.c, which names every row) and the rows' files, so that
 * uses run one way.
 */
#include "hp_codec_fmt.h"
#include <string.h>

/* ---------------------------------------------------------- workspace */

/* Slot `slot` of at least `bytes`.  In stream order where the device has
 * it (the old buffer freed and the new one allocated on the compute stream
 * after the copy stream's work, the copy stream's later work after them:
 * no wait, no synchronisation of the device, whatever the call); else
 * growing waits for both streams (the old buffer may still be read). */
int hp_codec_ws(hp_codec_t *cx, int slot, size_t bytes, void **p_p)
{
    size_t nb;
    void *p = NULL;
    if (cx->wsb[slot] >= bytes && cx->ws[slot] != NULL) {
        *p_p = cx->ws[slot];
        return HP_GPU_OK;
    }
    nb = cx->wsb[slot] * 2 > bytes ? cx->wsb[slot] * 2 : bytes;
    nb = (nb + 65535) & ~(size_t)65535;
    if (cx->dev->alloc_q != NULL) {
        if (cx->ws[slot] != NULL) {
            CK(cx->dev->record(cx->self, HP_EV_WS, HP_STREAM_COPY));
            CK(cx->dev->wait(cx->self, HP_STREAM_COMPUTE, HP_EV_WS));
            cx->dev->release_q(cx->self, cx->ws[slot], HP_STREAM_COMPUTE);
            cx->ws[slot] = NULL;
            cx->wsb[slot] = 0;
        }
        if (cx->dev->alloc_q(cx->self, nb, &p, HP_STREAM_COMPUTE) != 0)
            return HP_GPU_ERR_NOMEM;
        CK(cx->dev->record(cx->self, HP_EV_WS, HP_STREAM_COMPUTE));
        CK(cx->dev->wait(cx->self, HP_STREAM_COPY, HP_EV_WS));
        cx->ws[slot] = p;
        cx->wsb[slot] = nb;
        *p_p = p;
        return HP_GPU_OK;
    }
    if (cx->ws[slot] != NULL) {
        CK(cx->dev->sync(cx->self, HP_STREAM_COMPUTE));
        CK(cx->dev->sync(cx->self, HP_STREAM_COPY));
        cx->dev->release(cx->self, cx->ws[slot]);
        cx->ws[slot] = NULL;
        cx->wsb[slot] = 0;
    }
    if (cx->dev->alloc(cx->self, nb, &p) != 0)
        return HP_GPU_ERR_NOMEM;
    cx->ws[slot] = p;
    cx->wsb[slot] = nb;
    *p_p = p;
    return HP_GPU_OK;
}

int hp_codec_to_copy(hp_codec_t *cx)
{
    CK(cx->dev->record(cx->self, HP_EV_PIECE, HP_STREAM_COMPUTE));
    CK(cx->dev->wait(cx->self, HP_STREAM_COPY, HP_EV_PIECE));
    return HP_GPU_OK;
}

/* ----------------------------------------------------------- formats */

int hp_codec_put(hp_codec_t *cx, uint8_t *out, const uint8_t *dmsg, size_t lo, size_t hi)
{
    if (hi > lo && !cx->devonly)
        CK(cx->dev->copy(cx->self, out + lo, dmsg + lo, hi - lo, HP_STREAM_COPY));
    return HP_GPU_OK;
}
