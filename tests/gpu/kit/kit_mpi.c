/*
 * The device kit's reference for the compressed ncclAllReduce: the calls
 * of kit_cases.h through MPI_Allreduce under the preloaded libhipress.so,
 * on host buffers (the CPU compressors) or, --device, on cuMemAlloc'd
 * buffers (the CUDA module's kernels; the stand-in driver's memory with
 * the emulated module where there is no GPU).
 *
 *   mpirun -np N kit_mpi [--device] (--out FILE | --ref FILE)
 *
 * --out: rank 0 writes every rank's result lines (kit_cases.h) to FILE:
 * scripts/gpu-kit records them, for 2, 3 and 4 ranks, when it makes the
 * kit.  --ref: each line must be FILE's (on the GPU: the device path's bits
 * are the host path's).  Checked as well: the results are the same bits on
 * every rank, and every call was compressed (hipress_stats_get).  Rank 0
 * prints "kit_mpi: ok, C calls ..."; exit 1 on any failure.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <hipress.h>
#include <mpi.h>
#include <stdlib.h>
#include "kit_cases.h"

static int rank, size, bad;
static int (*comm_set)(MPI_Comm, const char *, const char *);
static int (*comm_residual)(MPI_Comm, const void *, size_t, float *);
static void (*stats_get)(hipress_stats_t *);
static int (*dev_alloc)(unsigned long long *, size_t);
static int (*htod)(unsigned long long, const void *, size_t);
static int (*dtoh)(void *, unsigned long long, size_t);

static void die(const char *what)
{
    fprintf(stderr, "kit_mpi rank %d: %s\n", rank, what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void device_init(void)
{
    void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    int (*init)(unsigned), (*get)(int *, int), (*retain)(void **, int), (*push)(void *);
    void *ctx;
    int dev;
    if (cu == NULL)
        die(dlerror());
    *(void **)&init = dlsym(cu, "cuInit");
    *(void **)&get = dlsym(cu, "cuDeviceGet");
    *(void **)&retain = dlsym(cu, "cuDevicePrimaryCtxRetain");
    *(void **)&push = dlsym(cu, "cuCtxPushCurrent_v2");
    *(void **)&dev_alloc = dlsym(cu, "cuMemAlloc_v2");
    *(void **)&htod = dlsym(cu, "cuMemcpyHtoD_v2");
    *(void **)&dtoh = dlsym(cu, "cuMemcpyDtoH_v2");
    if (init == NULL || get == NULL || retain == NULL || push == NULL || dev_alloc == NULL || htod == NULL ||
        dtoh == NULL)
        die("the CUDA driver lacks a function");
    if (init(0) != 0 || get(&dev, 0) != 0 || retain(&ctx, dev) != 0 || push(ctx) != 0)
        die("no usable device 0");
}

int main(int argc, char **argv)
{
    const char *out = NULL, *ref = NULL;
    int device = 0, nl = KIT_NCASES * KIT_CALLS, diffs = 0;
    float *h, *hs, *back, *res;
    uint16_t *narrow;
    unsigned long long d = 0, ds = 0;
    kit_line_t *mine, *all = NULL;
    hipress_stats_t st;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--device") == 0)
            device = 1;
        else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (strcmp(argv[i], "--ref") == 0 && i + 1 < argc)
            ref = argv[++i];
        else
            die("usage: kit_mpi [--device] (--out FILE | --ref FILE)");
    }
    *(void **)&comm_set = dlsym(RTLD_DEFAULT, "hipress_comm_set");
    *(void **)&comm_residual = dlsym(RTLD_DEFAULT, "hipress_comm_residual");
    *(void **)&stats_get = dlsym(RTLD_DEFAULT, "hipress_stats_get");
    if (comm_set == NULL || comm_residual == NULL || stats_get == NULL)
        die("libhipress.so is not preloaded");
    if (device)
        device_init();
    h = malloc(KIT_N * 4);
    hs = malloc(KIT_N * 4);
    back = malloc(KIT_N * 4);
    res = malloc(KIT_N * 4);
    narrow = malloc(KIT_N * 2);
    mine = calloc((size_t)nl, sizeof(*mine));
    if (rank == 0)
        all = calloc((size_t)nl * size, sizeof(*all));
    if (h == NULL || hs == NULL || back == NULL || res == NULL || narrow == NULL || mine == NULL ||
        (rank == 0 && all == NULL))
        die("out of memory");
    if (device && (dev_alloc(&d, KIT_N * 4) != 0 || dev_alloc(&ds, KIT_N * 4) != 0))
        die("cuMemAlloc");
    for (int k = 0; k < KIT_NCASES; k++) {
        const kit_case_t *kc = &kit_cases[k];
        const char *kv[32];
        MPI_Comm c;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
        kit_settings(kc, kv);
        for (int i = 0; kv[i] != NULL; i += 2)
            if (comm_set(c, kv[i], kv[i + 1]) != 0)
                die("hipress_comm_set refused a setting");
        for (int t = 0; t < KIT_CALLS; t++) {
            float *in = kc->oop ? hs : h;
            void *sp = device ? (void *)(uintptr_t)(kc->oop ? ds : d) : (void *)in;
            void *rp = device ? (void *)(uintptr_t)d : (void *)h;
            kit_line_t *l = &mine[k * KIT_CALLS + t];
            for (size_t i = 0; i < KIT_N; i++)
                in[i] = kit_input(kc, rank, t, i);
            if (device && htod((unsigned long long)(uintptr_t)sp, in, KIT_N * 4) != 0)
                die("cuMemcpyHtoD");
            if (MPI_Allreduce(kc->oop ? sp : MPI_IN_PLACE, rp, (int)KIT_N, MPI_FLOAT, MPI_SUM, c) != MPI_SUCCESS)
                die("MPI_Allreduce failed");
            if (device ? dtoh(back, d, KIT_N * 4) != 0 : (memcpy(back, h, KIT_N * 4), 0))
                die("cuMemcpyDtoH");
            for (size_t i = 0; i < KIT_N && kc->avg; i++)
                back[i] = back[i] / (float)size;
            for (size_t i = 0; i < KIT_N && kc->half; i++)
                narrow[i] = kc->half == 1 ? hp_f32_to_f16(back[i]) : hp_f32_to_bf16(back[i]);
            if (comm_residual(c, rp, KIT_N, res) != 0)
                die("hipress_comm_residual");
            l->case_ = k;
            l->call = t;
            l->rank = rank;
            l->result = kc->half ? kit_hash(narrow, KIT_N * 2) : kit_hash(back, KIT_N * 4);
            l->residual = kit_hash(res, KIT_N * 4);
        }
        MPI_Comm_free(&c);
    }
    memset(&st, 0, sizeof(st));
    stats_get(&st);
    if (st.compressed != (unsigned long long)nl) {
        fprintf(stderr, "kit_mpi rank %d: %llu of %d calls compressed\n", rank, st.compressed, nl);
        bad = 1;
    }
    MPI_Gather(mine, nl * (int)sizeof(*mine), MPI_BYTE, all, nl * (int)sizeof(*mine), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        FILE *f = out != NULL ? fopen(out, "w") : NULL;
        if (out != NULL && f == NULL)
            die("cannot write the reference file");
        if (f != NULL)
            fprintf(f, "# kit reference: kit_cases.h through MPI_Allreduce on %s buffers, %d ranks, %zu elements\n",
                    device ? "device" : "host", size, KIT_N);
        for (int r = 0; r < size; r++)
            for (int i = 0; i < nl; i++) {
                kit_line_t *l = &all[r * nl + i];
                if (l->result != all[i].result) {
                    fprintf(stderr, "kit_mpi: case %d call %d: rank %d's result differs from rank 0's\n", l->case_,
                            l->call, r);
                    bad = 1;
                }
                if (f != NULL)
                    kit_print(f, l);
                if (ref != NULL && !kit_compare(ref, l, "kit_mpi"))
                    diffs++;
            }
        if (f != NULL)
            fclose(f);
        if (diffs)
            fprintf(stderr, "kit_mpi: %d of %d lines differ from %s\n", diffs, nl * size, ref);
        if (!bad && !diffs)
            printf("kit_mpi: ok, %d calls at %d ranks on %s buffers, all compressed%s%s\n", nl, size,
                   device ? "device" : "host", ref != NULL ? ", identical to " : "", ref != NULL ? ref : "");
    }
    MPI_Bcast(&diffs, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return bad || diffs ? 1 : 0;
}
