/*
 * The module's self-test kernel in a program linked by nvcc (tests/gpu/gpu.mk).
 * The kernels' source is compiled into this program directly, so the test
 * needs nothing from libhipress.
 *
 *   cuda_selftest [DEVICE]   prints one line; exit 0 when the kernel ran
 *                            and every element was right, 2 when CUDA
 *                            reported an error (no driver, no device), 1
 *                            when a result was wrong
 */
#include "hp_cuda_kernels.cu"
#include <string.h>

int main(int argc, char **argv)
{
    char err[256] = "";
    int device = argc > 1 ? atoi(argv[1]) : 0;
    if (hp_cuda_selftest(device, err, sizeof(err)) == 0) {
        printf("cuda_selftest: device %d: ok\n", device);
        return 0;
    }
    printf("cuda_selftest: device %d: %s\n", device, err);
    return strncmp(err, "element", 7) == 0 ? 1 : 2;
}
