/* Host memory as the device (kern_host_dev.h). */
#include <stdlib.h>
#include <string.h>
#include "kern_host_dev.h"

static int h_alloc(void *self, size_t bytes, void **p_p)
{
    (void)self;
    *p_p = calloc(1, bytes);
    return *p_p != NULL ? 0 : -1;
}
static void h_release(void *self, void *p) { (void)self; free(p); }
static int h_copy(void *self, void *dst, const void *src, size_t bytes, int stream)
{
    (void)self; (void)stream;
    memmove(dst, src, bytes);
    return 0;
}
static int h_memset(void *self, void *p, int byte, size_t bytes, int stream)
{
    (void)self; (void)stream;
    memset(p, byte, bytes);
    return 0;
}
static int h_event(void *self, int a, int b) { (void)self; (void)a; (void)b; return 0; }
static int h_sync(void *self, int a) { (void)self; (void)a; return 0; }
static void *h_stream(void *self, int s) { (void)self; (void)s; return NULL; }

const hp_dev_ops_t kern_host_dev = {
    .alloc = h_alloc, .release = h_release, .halloc = h_alloc, .hrelease = h_release,
    .copy = h_copy, .memset = h_memset, .record = h_event, .wait = h_event,
    .sync = h_sync, .sync_event = h_sync, .stream = h_stream,
};
