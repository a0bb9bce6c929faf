/*
 * hipress' ncclAllReduce when no NCCL is in the global scope
 * (tests/gpu/nccl/run_nccl.sh).  Run under the preload, with MOCKDIR the build's
 * tests/gpu/nccl/.libs:
 *   1. no NCCL loaded at all: the call fails with ncclSystemError and
 *      hipress says why on stderr (once);
 *   2. libnccl_user.so, which needs the stand-in libnccl.so.2, is loaded
 *      with RTLD_LOCAL: its ncclAllReduce reaches hipress, which must find
 *      the stand-in in that local scope and forward the call unchanged.
 * Prints "nccl_local: ok" or exits 1.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <nccl.h>
#include "mock_nccl.h"
#include <stdio.h>
#include <string.h>


int main(int argc, char **argv)
{
    __typeof__(&ncclAllReduce) allreduce = (__typeof__(&ncclAllReduce))dlsym(RTLD_DEFAULT, "ncclAllReduce");
    ncclResult_t (*user)(const void *, void *, size_t, ncclComm_t, cudaStream_t);
    ncclComm_t (*comm_new)(void);
    int (*ncalls)(void);
    const mock_call_t *(*call)(int);
    const mock_call_t *c;
    char path[4096];
    void *h;
    ncclComm_t comm;
    ncclResult_t rc;

    if (argc != 2) {
        fprintf(stderr, "usage: nccl_local TESTS_LIBS_DIR\n");
        return 2;
    }
    if (allreduce == NULL) {
        fprintf(stderr, "nccl_local: no ncclAllReduce in the process: run it with libhipress.so preloaded\n");
        return 1;
    }
    for (int i = 0; i < 2; i++) {
        rc = allreduce((void *)0x1000, (void *)0x2000, 4, ncclFloat32, ncclSum, NULL, NULL);
        if (rc != ncclSystemError) {
            fprintf(stderr, "nccl_local: without NCCL the call returned %d, want ncclSystemError\n", (int)rc);
            return 1;
        }
    }
    snprintf(path, sizeof(path), "%s/libnccl_user.so", argv[1]);
    if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL)) == NULL) {
        fprintf(stderr, "nccl_local: %s\n", dlerror());
        return 1;
    }
    user = (ncclResult_t (*)(const void *, void *, size_t, ncclComm_t, cudaStream_t))dlsym(h, "nccl_user_allreduce");
    comm_new = (ncclComm_t (*)(void))dlsym(h, "mock_nccl_comm_new");
    ncalls = (int (*)(void))dlsym(h, "mock_nccl_ncalls");
    call = (const mock_call_t *(*)(int))dlsym(h, "mock_nccl_call");
    if (!user || !comm_new || !ncalls || !call) {
        fprintf(stderr, "nccl_local: %s lacks its functions\n", path);
        return 1;
    }
    if (dlsym(RTLD_DEFAULT, "mock_nccl_ncalls") != NULL) {
        fprintf(stderr, "nccl_local: the stand-in NCCL is in the global scope; the test needs it local\n");
        return 1;
    }
    comm = comm_new();
    rc = user((void *)0x10000, (void *)0x20000, 123, comm, (cudaStream_t)0x77);
    c = call(-1);
    if (rc != ncclSuccess || ncalls() != 1 || c == NULL || strcmp(c->fn, "ncclAllReduce") != 0 ||
        c->sendbuf != (void *)0x10000 || c->recvbuf != (void *)0x20000 || c->count != 123 ||
        c->datatype != ncclFloat32 || c->op != ncclSum || c->comm != (void *)comm || c->stream != (void *)0x77) {
        fprintf(stderr, "nccl_local: the call did not reach the local NCCL unchanged (rc %d, %d calls)\n", (int)rc,
                ncalls());
        return 1;
    }
    printf("nccl_local: ok\n");
    return 0;
}
