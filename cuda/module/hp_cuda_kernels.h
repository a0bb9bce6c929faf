/*
 * The module's self-test kernel (cuda/module/hp_cuda_kernels.cu), as the module's host code
 * calls it.  C linkage; no CUDA type in the interface.
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

/* Its kernel alone, on any build of the kernels (the SIMT emulator's too):
 * out[i] = hp_kl_selftest_value(i) for i < n, queued on stream (device
 * memory).  0, or the CUDA error of the launch. */
int hp_kl_selftest(void *stream, unsigned *out, unsigned n);
unsigned hp_kl_selftest_value(unsigned i);

#ifdef __cplusplus
}
#endif
#endif
