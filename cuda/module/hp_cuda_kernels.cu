/*
 * The module's self-test (hipress_info --gpu, hpcu_selftest): a kernel that
 * proves this build's code runs on a device.  The kernel and its launcher
 * are written in the kernels' dialect (hp_kern_cu.cuh), so they also run on
 * the CPU, on the SIMT emulator (tests/gpu/simt/kern_selftest.cc, driven by
 * tests/gpu/simt/simt_ops.c); the rest (a device, its memory, the copy back)
 * is the CUDA runtime's, under nvcc only.
 */
#include "hp_kern_cu.cuh"
#include "hp_cuda_kernels.h"
#include <stdio.h>
#include <stdlib.h>

/* A value every element can check independently: a 32-bit integer hash
 * (no floating point, so no question of contraction or rounding). */
__host__ __device__ static inline unsigned hp_selftest_value(unsigned i)
{
    unsigned x = i * 2654435761u + 0x9e3779b9u;
    x ^= x >> 15;
    x *= 0x2c1b3c6du;
    x ^= x >> 12;
    return x;
}

#define SELFTEST_TPB 256

__global__ static void __launch_bounds__(SELFTEST_TPB) hp_selftest_kernel(unsigned *out, unsigned n)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = hp_selftest_value(i);
}

extern "C" int hp_kl_selftest(void *stream, unsigned *out, unsigned n)
{
    if (n == 0)
        return 0;
    HP_LAUNCH(hp_selftest_kernel, (n + SELFTEST_TPB - 1) / SELFTEST_TPB, SELFTEST_TPB, (cudaStream_t)stream)(out, n);
    return (int)cudaGetLastError();
}

extern "C" unsigned hp_kl_selftest_value(unsigned i)
{
    return hp_selftest_value(i);
}

#if defined(__CUDACC__)
extern "C" int hp_cuda_selftest(int device, char *err, size_t errlen)
{
    const unsigned n = 1u << 16;
    unsigned *host = (unsigned *)malloc(n * sizeof(unsigned));
    unsigned *dev = NULL;
    int prev = -1, bad = -1;
    cudaError_t rc;
    const char *what = "";

    if (host == NULL) {
        snprintf(err, errlen, "out of host memory");
        return -1;
    }
    if ((rc = cudaGetDevice(&prev)) != cudaSuccess) {
        what = "cudaGetDevice";
        goto out;
    }
    if ((rc = cudaSetDevice(device)) != cudaSuccess) {
        what = "cudaSetDevice";
        goto out;
    }
    if ((rc = cudaMalloc((void **)&dev, n * sizeof(unsigned))) != cudaSuccess) {
        what = "cudaMalloc";
        goto restore;
    }
    if ((rc = (cudaError_t)hp_kl_selftest(NULL, dev, n)) != cudaSuccess) {
        what = "kernel launch";
        goto release;
    }
    if ((rc = cudaMemcpy(host, dev, n * sizeof(unsigned), cudaMemcpyDeviceToHost)) != cudaSuccess) {
        what = "cudaMemcpy";
        goto release;
    }
    bad = 0;
    for (unsigned i = 0; i < n && !bad; i++)
        if (host[i] != hp_selftest_value(i)) {
            snprintf(err, errlen, "element %u is %u, want %u", i, host[i], hp_selftest_value(i));
            bad = 1;
        }
release:
    cudaFree(dev);
restore:
    cudaSetDevice(prev);
out:
    if (bad < 0)
        snprintf(err, errlen, "%s: %s (%s)", what, cudaGetErrorName(rc), cudaGetErrorString(rc));
    free(host);
    return bad == 0 ? 0 : -1;
}
#endif
