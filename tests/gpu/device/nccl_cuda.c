/*
 * ncclAllReduce through the preloaded libhipress.so with the real NCCL on
 * a real GPU, in one process without MPI (tests/gpu/device/run_gpu_device.sh; skipped
 * without a GPU).  A communicator over device 0 alone (ncclCommInitAll),
 * so every all-reduce leaves its buffer as it was; that must hold, and
 * hipress must classify the calls:
 * a plain float32 sum and PyTorch's one-call group are eligible, a
 * two-call group is the user's, a call on a stream under graph capture is
 * not taken.  The current device must be the same after each call.
 * Prints "nccl_cuda: ok" or exits 1.
 */
#define _GNU_SOURCE
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <hipress.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

static int failures;

#define CHECK(cond, ...) \
    do { if (!(cond)) { fprintf(stderr, "nccl_cuda:%d: ", __LINE__); fprintf(stderr, __VA_ARGS__); \
                        fprintf(stderr, "\n"); failures++; } } while (0)
#define CUDA(call) \
    do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
        fprintf(stderr, "nccl_cuda: %s: %s\n", #call, cudaGetErrorString(e_)); exit(2); } } while (0)
#define NCCL(call) \
    do { ncclResult_t r_ = (call); if (r_ != ncclSuccess) { \
        fprintf(stderr, "nccl_cuda: %s: %s\n", #call, ncclGetErrorString(r_)); exit(2); } } while (0)

#define N (1 << 20)

int main(void)
{
    void (*stats_get)(hipress_nccl_stats_t *) =
        (void (*)(hipress_nccl_stats_t *))dlsym(RTLD_DEFAULT, "hipress_nccl_stats_get");
    hipress_nccl_stats_t a, b;
    ncclComm_t comm;
    cudaStream_t stream;
    cudaGraph_t graph;
    float *x, *h = malloc(N * sizeof(float));
    int dev0 = 0, dev = -1;

    if (stats_get == NULL) {
        fprintf(stderr, "nccl_cuda: run it with libhipress.so preloaded\n");
        return 1;
    }
    NCCL(ncclCommInitAll(&comm, 1, &dev0));
    CUDA(cudaSetDevice(0));
    CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CUDA(cudaMalloc((void **)&x, N * sizeof(float)));
    for (int i = 0; i < N; i++)
        h[i] = (float)(i % 7);
    CUDA(cudaMemcpy(x, h, N * sizeof(float), cudaMemcpyHostToDevice));

    stats_get(&a);
    NCCL(ncclAllReduce(x, x, N, ncclFloat32, ncclSum, comm, stream));   /* one rank: unchanged */
    NCCL(ncclGroupStart());
    NCCL(ncclAllReduce(x, x, N, ncclFloat32, ncclSum, comm, stream));
    NCCL(ncclGroupEnd());
    CUDA(cudaStreamSynchronize(stream));
    stats_get(&b);
    CHECK(b.eligible == a.eligible + 2, "eligible %llu, want 2", b.eligible - a.eligible);
    CUDA(cudaGetDevice(&dev));
    CHECK(dev == 0, "the current device changed to %d", dev);

    stats_get(&a);
    NCCL(ncclGroupStart());
    NCCL(ncclAllReduce(x, x, N, ncclFloat32, ncclSum, comm, stream));
    NCCL(ncclAllReduce(x, x, N, ncclFloat16, ncclSum, comm, stream));
    NCCL(ncclGroupEnd());
    CUDA(cudaStreamSynchronize(stream));
    stats_get(&b);
    CHECK(b.in_group == a.in_group + 2, "user's group %llu, want 2", b.in_group - a.in_group);

    stats_get(&a);
    CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    NCCL(ncclAllReduce(x, x, N, ncclFloat32, ncclSum, comm, stream));
    CUDA(cudaStreamEndCapture(stream, &graph));
    CUDA(cudaGraphDestroy(graph));
    stats_get(&b);
    CHECK(b.capturing == a.capturing + 1, "capturing %llu, want 1", b.capturing - a.capturing);

    /* on one rank every all-reduce (whatever its type) leaves x as it was;
     * the captured one never ran */
    CUDA(cudaMemcpy(h, x, N * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < N; i++)
        if (h[i] != (float)(i % 7)) {
            CHECK(0, "x[%d] = %g, want %d", i, h[i], i % 7);
            break;
        }
    NCCL(ncclCommDestroy(comm));
    stats_get(&b);
    CHECK(b.group_depth == 0, "group depth %d", b.group_depth);
    cudaFree(x);
    free(h);
    if (failures == 0)
        printf("nccl_cuda: ok\n");
    return failures == 0 ? 0 : 1;
}
