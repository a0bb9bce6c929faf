/*
 * The kernels of libhipress_cuda.so (the .cu files of cuda/), as the module's host code
 * calls them.  C linkage; no CUDA type in the interface.
 */
#ifndef HP_CUDA_KERNELS_H
#define HP_CUDA_KERNELS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Run a small kernel on `device` (its primary context, made current for the
 * call and the caller's device restored after), copy its output back and
 * check every element.  0 on success, else -1 with a reason in err (for
 * example that the build has no code for the device's architecture). */
int hp_cuda_selftest(int device, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
