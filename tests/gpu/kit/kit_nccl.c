/*
 * The device kit's multi-process compressed ncclAllReduce: one process of a
 * job of N on the one GPU (tests/gpu/nccl/nompi_launch gives RANK, WORLD_SIZE and
 * HP_RDZV, a folder the processes share), every rank on device 0, under the
 * preloaded libhipress_nccl.so with HIPRESS_NCCL=compress, over the NCCL
 * that libnccl.so.2 is: the IPC stand-in on a GPU (tests/gpu/ipc/), the
 * stand-in over shared memory with the stand-in driver and the emulated
 * module elsewhere.
 *
 *   nompi_launch N T kit_nccl (--ref FILE | --out FILE)
 *
 * As a torchrun user does: rank 0 makes the ncclUniqueId and hands it on
 * (through HP_RDZV), every rank calls ncclCommInitRank; a communicator per
 * case of kit_cases.h, its plan fixed with hipress_nccl_comm_set; buffers
 * from cuMemAlloc, a stream of its own, each result read after the stream
 * is done.  --ref: every rank's result lines must be FILE's, the MPI
 * path's (kit_mpi --out, recorded when the kit was made); --out: rank 0
 * writes every rank's lines.  The results must be the same bits on every
 * rank.  Rank 0 prints "kit_nccl: ok, C calls at N ranks ..."; exit 1 on a
 * failed call, a difference, or a stream that does not complete within
 * KIT_STREAM_TIMEOUT seconds (60).
 */
#define _GNU_SOURCE
#define HIPRESS_NO_MPI
#include <dlfcn.h>
#include <hipress.h>
#include <nccl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "kit_cases.h"

typedef unsigned long long dptr_t;
static int (*cu_query)(void *), (*cu_alloc)(dptr_t *, size_t), (*cu_htod)(dptr_t, const void *, size_t);
static int (*cu_dtoh)(void *, dptr_t, size_t);
static int (*comm_set)(void *, const char *, const char *);
static int (*comm_residual)(void *, const void *, size_t, float *);
static int rank, size, bad;
static const char *rdzv;

/* ncclGetLastError where the NCCL has it (the stand-in on shared memory
 * has not) */
static const char *last_error(void)
{
    const char *(*f)(ncclComm_t);
    *(void **)&f = dlsym(RTLD_DEFAULT, "ncclGetLastError");
    return f != NULL ? f(NULL) : "(no ncclGetLastError)";
}

static void die(const char *what)
{
    fprintf(stderr, "kit_nccl rank %d: %s\n", rank, what);
    exit(1);
}

static void nap(void)
{
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
}

/* every rank's `bytes` of mine into all, through files in HP_RDZV */
static void xchg(const void *mine, size_t bytes, void *all)
{
    static unsigned seq;
    char path[4096], tmp[4096];
    FILE *f;
    time_t t0 = time(NULL);
    seq++;
    snprintf(tmp, sizeof(tmp), "%s/.k%u.%d", rdzv, seq, rank);
    snprintf(path, sizeof(path), "%s/k%u.%d", rdzv, seq, rank);
    if ((f = fopen(tmp, "wb")) == NULL || fwrite(mine, 1, bytes, f) != bytes || fclose(f) != 0 ||
        rename(tmp, path) != 0)
        die("cannot write to HP_RDZV");
    for (int j = 0; j < size; j++) {
        snprintf(path, sizeof(path), "%s/k%u.%d", rdzv, seq, j);
        while ((f = fopen(path, "rb")) == NULL) {
            if (time(NULL) - t0 > 120)
                die("a peer wrote nothing to HP_RDZV in 120 s");
            nap();
        }
        if (fread((char *)all + (size_t)j * bytes, 1, bytes, f) != bytes)
            die("a short file in HP_RDZV");
        fclose(f);
    }
}

static void stream_done(void *s, const char *what)
{
    const char *e = getenv("KIT_STREAM_TIMEOUT");
    time_t t0 = time(NULL), limit = e != NULL && atoi(e) > 0 ? atoi(e) : 60;
    int rc;
    while ((rc = cu_query(s)) == 600)   /* CUDA_ERROR_NOT_READY */
        if (time(NULL) - t0 > limit) {
            fprintf(stderr, "kit_nccl rank %d: %s: the stream did not complete within %d s\n", rank, what,
                    (int)limit);
            exit(1);
        } else {
            nap();
        }
    if (rc != 0) {
        fprintf(stderr, "kit_nccl rank %d: %s: the stream failed (CUDA error %d)\n", rank, what, rc);
        exit(1);
    }
}

static void *device_init(void)
{
    void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL), *ctx, *s;
    int (*init)(unsigned), (*get)(int *, int), (*retain)(void **, int), (*push)(void *);
    int (*screate)(void **, unsigned);
    int dev;
    if (cu == NULL)
        die(dlerror());
    *(void **)&init = dlsym(cu, "cuInit");
    *(void **)&get = dlsym(cu, "cuDeviceGet");
    *(void **)&retain = dlsym(cu, "cuDevicePrimaryCtxRetain");
    *(void **)&push = dlsym(cu, "cuCtxPushCurrent_v2");
    *(void **)&screate = dlsym(cu, "cuStreamCreate");
    *(void **)&cu_query = dlsym(cu, "cuStreamQuery");
    *(void **)&cu_alloc = dlsym(cu, "cuMemAlloc_v2");
    *(void **)&cu_htod = dlsym(cu, "cuMemcpyHtoD_v2");
    *(void **)&cu_dtoh = dlsym(cu, "cuMemcpyDtoH_v2");
    if (init == NULL || get == NULL || retain == NULL || push == NULL || screate == NULL || cu_query == NULL ||
        cu_alloc == NULL || cu_htod == NULL || cu_dtoh == NULL)
        die("the CUDA driver lacks a function");
    if (init(0) != 0 || get(&dev, 0) != 0 || retain(&ctx, dev) != 0 || push(ctx) != 0)
        die("no usable device 0");
    if (screate(&s, 1) != 0)   /* CU_STREAM_NON_BLOCKING */
        die("cuStreamCreate");
    return s;
}

static ncclComm_t new_comm(void)
{
    ncclUniqueId id, *all = malloc((size_t)size * sizeof(id));
    ncclComm_t c = NULL;
    ncclResult_t rc;
    memset(&id, 0, sizeof(id));
    if (rank == 0 && ncclGetUniqueId(&id) != ncclSuccess)
        die("ncclGetUniqueId");
    xchg(&id, sizeof(id), all);
    if ((rc = ncclCommInitRank(&c, size, all[0], rank)) != ncclSuccess) {
        fprintf(stderr, "kit_nccl rank %d: ncclCommInitRank: %s: %s\n", rank, ncclGetErrorString(rc),
                last_error());
        exit(1);
    }
    free(all);
    return c;
}

int main(int argc, char **argv)
{
    const char *ref = NULL, *out = NULL, *e;
    const char *(*library)(void);
    int nl = KIT_NCASES * KIT_CALLS, diffs = 0;
    void *s, *h = malloc(KIT_N * 4), *back = malloc(KIT_N * 4);
    float *res = malloc(KIT_N * 4);
    kit_line_t *mine = calloc((size_t)nl, sizeof(*mine)), *all;
    dptr_t d, ds;

    e = getenv("RANK");
    rank = e != NULL ? atoi(e) : -1;
    e = getenv("WORLD_SIZE");
    size = e != NULL ? atoi(e) : 0;
    rdzv = getenv("HP_RDZV");
    for (int i = 1; i + 1 < argc; i += 2)
        if (strcmp(argv[i], "--ref") == 0)
            ref = argv[i + 1];
        else if (strcmp(argv[i], "--out") == 0)
            out = argv[i + 1];
    if (rank < 0 || size < 1 || rank >= size || rdzv == NULL || (ref == NULL) == (out == NULL))
        die("usage: nompi_launch N T kit_nccl (--ref FILE | --out FILE)");
    all = calloc((size_t)nl * size, sizeof(*all));
    if (h == NULL || back == NULL || res == NULL || mine == NULL || all == NULL)
        die("out of memory");
    *(void **)&comm_set = dlsym(RTLD_DEFAULT, "hipress_nccl_comm_set");
    *(void **)&comm_residual = dlsym(RTLD_DEFAULT, "hipress_nccl_comm_residual");
    *(void **)&library = dlsym(RTLD_DEFAULT, "hipress_library");
    if (comm_set == NULL || comm_residual == NULL || library == NULL)
        die("hipress is not preloaded");
    s = device_init();
    if (cu_alloc(&d, KIT_N * 4) != 0 || cu_alloc(&ds, KIT_N * 4) != 0)
        die("cuMemAlloc");
    if (rank == 0) {
        Dl_info di;
        void *f = dlsym(RTLD_DEFAULT, "ncclCommInitRank");
        printf("kit_nccl: %d ranks on device 0, %s preloaded, NCCL from %s, %zu elements per call\n", size, library(),
               f != NULL && dladdr(f, &di) && di.dli_fname != NULL ? di.dli_fname : "?", KIT_N);
    }
    for (int k = 0; k < KIT_NCASES; k++) {
        const kit_case_t *kc = &kit_cases[k];
        const char *kv[32];
        ncclComm_t c = new_comm();
        char what[128];
        kit_settings(kc, kv);
        for (int i = 0; kv[i] != NULL; i += 2)
            if (comm_set(c, kv[i], kv[i + 1]) != 0)
                die("hipress_nccl_comm_set refused a setting");
        for (int t = 0; t < KIT_CALLS; t++) {
            kit_line_t *l = &mine[k * KIT_CALLS + t];
            size_t bytes = KIT_N * kit_esize(kc);
            ncclResult_t rc;
            snprintf(what, sizeof(what), "case %d (%s/%s) call %d", k, kc->comp, kc->algo, t);
            kit_fill(kc, rank, t, h);
            if (cu_htod(kc->oop ? ds : d, h, bytes) != 0)
                die("cuMemcpyHtoD");
            rc = ncclAllReduce((void *)(uintptr_t)(kc->oop ? ds : d), (void *)(uintptr_t)d, KIT_N,
                               kc->half == 1 ? ncclFloat16 : kc->half == 2 ? ncclBfloat16 : ncclFloat32,
                               kc->avg ? ncclAvg : ncclSum, c, (cudaStream_t)s);
            if (rc != ncclSuccess) {
                fprintf(stderr, "kit_nccl rank %d: %s: ncclAllReduce: %s: %s\n", rank, what, ncclGetErrorString(rc),
                        last_error());
                exit(1);
            }
            stream_done(s, what);
            if (cu_dtoh(back, d, bytes) != 0)
                die("cuMemcpyDtoH");
            if (comm_residual(c, (void *)(uintptr_t)d, KIT_N, res) != 0)
                die("hipress_nccl_comm_residual");
            l->case_ = k;
            l->call = t;
            l->rank = rank;
            l->result = kit_hash(back, bytes);
            l->residual = kit_hash(res, KIT_N * 4);
            if (ref != NULL && !kit_compare(ref, l, "kit_nccl"))
                diffs++;
        }
        if (ncclCommDestroy(c) != ncclSuccess)
            die("ncclCommDestroy");
    }
    xchg(mine, (size_t)nl * sizeof(*mine), all);
    for (int r = 1; r < size; r++)
        for (int i = 0; i < nl; i++)
            if (all[r * nl + i].result != all[i].result) {
                fprintf(stderr, "kit_nccl rank %d: case %d call %d: rank %d's result differs from rank 0's\n", rank,
                        all[i].case_, all[i].call, r);
                bad = 1;
            }
    if (rank == 0 && out != NULL) {
        FILE *f = fopen(out, "w");
        if (f == NULL)
            die("cannot write the output file");
        fprintf(f, "# kit_nccl: kit_cases.h through ncclAllReduce, %d ranks, %zu elements\n", size, KIT_N);
        for (int i = 0; i < nl * size; i++)
            kit_print(f, &all[i]);
        fclose(f);
    }
    xchg(&diffs, sizeof(diffs), all);   /* (every rank done with the reference) */
    diffs = 0;
    for (int r = 0; r < size; r++)
        diffs += ((int *)all)[r];
    if (diffs)
        fprintf(stderr, "kit_nccl rank %d: %d of %d lines of the job differ from %s\n", rank, diffs, nl * size, ref);
    if (rank == 0 && !bad && !diffs)
        printf("kit_nccl: ok, %d ncclAllReduce calls at %d ranks, the same bits on every rank%s%s\n", nl,
               size, ref != NULL ? ", identical to the MPI path's " : "", ref != NULL ? ref : "");
    return bad || diffs ? 1 : 0;
}
