/*
 * What the host emulation of the kernels shares (cuda/hp_kern_emu*.c): the
 * translation of a device pointer to memory the host can touch.  Private
 * to those files.
 */
#ifndef HP_KERN_EMU_H
#define HP_KERN_EMU_H

#include "hp_klaunch.h"
#include "hp_kern.h"
#include <stdlib.h>
#include <string.h>

#ifdef HP_KL_TRANSLATE
/* the stand-in driver's host shadow of a device address (itself for host
 * memory), looked up once */
#include <dlfcn.h>
static inline void *xlate(const void *p)
{
    static void *(*fn)(const void *);
    if (p == NULL)
        return NULL;
    if (fn == NULL) {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        fn = h != NULL ? (void *(*)(const void *))dlsym(h, "mock_cuda_shadow") : NULL;
        if (fn == NULL)
            abort();   /* the emulated module runs under the stand-in driver only */
    }
    return fn(p);
}
#define P(T, p) ((T)xlate((const void *)(p)))
#else
#define P(T, p) ((T)(p))
#endif

#endif
