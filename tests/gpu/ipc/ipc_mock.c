/*
 * The stand-in driver's CUDA IPC and stream memory operations between
 * processes (tests/gpu/ipc/run_ipc.sh), what the IPC stand-in NCCL rests
 * on when it runs over that driver.  The driver through dlopen, as the
 * IPC stand-in loads it.
 *
 *   nompi_launch 2 T ipc_mock LIBCUDA pingpong
 *       rank 0 exports a block (cuIpcGetMemHandle) and hands the handle on
 *       through HP_RDZV; rank 1 opens it (twice: the same mapping) and reads
 *       rank 0's bytes through it.  Then 16 rounds of ping and pong on two
 *       flags of the block, wrapping past 2^32 (each stream waits for the
 *       other rank's value, GEQ, then writes its own; the last wait EQ),
 *       rank 1 copying its bytes into the block first: each host only
 *       watches a host function at the end of its stream, calling nothing,
 *       so the streams move on by the other process's writes alone.  Last,
 *       rank 0's host waits in cuStreamSynchronize for a flag that rank 1
 *       writes 1.5 s later, from a thread that sleeps meanwhile: no
 *       deadlock may be reported.
 *   nompi_launch 2 T ipc_mock LIBCUDA deadlock
 *       each rank's stream waits for a flag the other writes only after its
 *       own wait: both must end with the driver's deadlock report (86).
 *   ipc_mock LIBCUDA lonely
 *       one process's stream waits for a flag nothing writes: the same.
 *
 * Prints "ipc_mock: ok ..." and exits 0; exits 1 on a failed check.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef unsigned long long dptr_t;
typedef struct {
    unsigned char b[64];
} handle_t;
enum { GEQ = 0, EQ = 1, ROUNDS = 16, BLOCK = 16384, DATA = 4096, BACK = 8192 };
#define BASE 0xfffffff8u

static void *lib;
static int rank;
static int (*alloc_)(dptr_t *, size_t), (*htod)(dptr_t, const void *, size_t), (*dtoh)(void *, dptr_t, size_t);
static int (*wait32)(void *, dptr_t, uint32_t, unsigned), (*write32)(void *, dptr_t, uint32_t, unsigned);
static int (*copy)(dptr_t, dptr_t, size_t, void *), (*hostfn)(void *, void (*)(void *), void *);
static int (*sync_)(void *), (*query)(void *);

static void *sym(const char *name)
{
    void *f = dlsym(lib, name);
    if (f == NULL) {
        fprintf(stderr, "ipc_mock: the driver has no %s\n", name);
        exit(1);
    }
    return f;
}

#define CK(call)                                                                              \
    do {                                                                                      \
        int rc_ = (call);                                                                     \
        if (rc_ != 0) {                                                                       \
            fprintf(stderr, "ipc_mock rank %d:%d: %s: CUresult %d\n", rank, __LINE__, #call, rc_); \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)
#define EXPECT(cond, ...)                                                                     \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "ipc_mock rank %d:%d: ", rank, __LINE__);                         \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fprintf(stderr, "\n");                                                            \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

static void nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static void *setup(void)
{
    int (*init)(unsigned) = sym("cuInit"), (*get)(int *, int) = sym("cuDeviceGet");
    int (*retain)(void **, int) = sym("cuDevicePrimaryCtxRetain"), (*push)(void *) = sym("cuCtxPushCurrent_v2");
    int (*screate)(void **, unsigned) = sym("cuStreamCreate"), (*cdev)(int *) = sym("cuCtxGetDevice");
    void *ctx, *s;
    int d = -1;
    *(void **)&alloc_ = sym("cuMemAlloc_v2");
    *(void **)&htod = sym("cuMemcpyHtoD_v2");
    *(void **)&dtoh = sym("cuMemcpyDtoH_v2");
    *(void **)&wait32 = sym("cuStreamWaitValue32_v2");
    *(void **)&write32 = sym("cuStreamWriteValue32_v2");
    *(void **)&copy = sym("cuMemcpyAsync");
    *(void **)&hostfn = sym("cuLaunchHostFunc");
    *(void **)&sync_ = sym("cuStreamSynchronize");
    *(void **)&query = sym("cuStreamQuery");
    CK(init(0));
    CK(get(&d, 0));
    CK(retain(&ctx, d));
    CK(push(ctx));
    CK(cdev(&d));
    EXPECT(d == 0, "cuCtxGetDevice says %d", d);
    CK(screate(&s, 1));
    return s;
}

/* the handle through a file in HP_RDZV */
static void put_handle(const handle_t *h)
{
    char path[4096], tmp[4096];
    FILE *f;
    snprintf(tmp, sizeof(tmp), "%s/.handle", getenv("HP_RDZV"));
    snprintf(path, sizeof(path), "%s/handle", getenv("HP_RDZV"));
    EXPECT((f = fopen(tmp, "wb")) != NULL && fwrite(h, sizeof(*h), 1, f) == 1 && fclose(f) == 0 &&
               rename(tmp, path) == 0, "cannot write to HP_RDZV");
}

static void get_handle(handle_t *h)
{
    char path[4096];
    FILE *f = NULL;
    snprintf(path, sizeof(path), "%s/handle", getenv("HP_RDZV"));
    for (int i = 0; i < 30000 && (f = fopen(path, "rb")) == NULL; i++)
        nap(0.001);
    EXPECT(f != NULL && fread(h, sizeof(*h), 1, f) == 1, "no handle in HP_RDZV after 30 s");
    fclose(f);
}

/* (a pointer's size: the stand-in driver reads a host function's
 * argument's first pointer, the emulated kernels' body) */
static void set_done(void *arg)
{
    __atomic_store_n((long *)arg, 1, __ATOMIC_RELEASE);
}

/* the host watches its stream's end, calling nothing of the driver */
static void watch(long *done, const char *what)
{
    for (int i = 0; i < 20000 && !__atomic_load_n(done, __ATOMIC_ACQUIRE); i++)
        nap(0.001);
    EXPECT(__atomic_load_n(done, __ATOMIC_ACQUIRE), "%s: the stream did not move on within 20 s", what);
}

static unsigned char pat(int r, size_t i)
{
    return (unsigned char)(i * 7 + (size_t)r * 101 + 3);
}

static dptr_t block_export(void *s)
{
    int (*get)(handle_t *, dptr_t) = sym("cuIpcGetMemHandle");
    int (*open_)(dptr_t *, handle_t, unsigned) = sym("cuIpcOpenMemHandle_v2");
    unsigned char *h = malloc(BLOCK);
    uint32_t *w = (uint32_t *)h;
    handle_t hd;
    dptr_t a, own;
    for (size_t i = 0; i < BLOCK; i++)
        h[i] = pat(0, i);
    w[0] = w[1] = BASE;
    w[2] = 5;
    w[4] = w[5] = 0;
    CK(alloc_(&a, BLOCK));
    CK(htod(a, h, BLOCK));
    EXPECT(get(&hd, (dptr_t)(uintptr_t)h) != 0, "cuIpcGetMemHandle of host memory");
    CK(get(&hd, a));
    EXPECT(open_(&own, hd, 1) != 0, "cuIpcOpenMemHandle_v2 in the exporting process");
    /* in one process: wrap-safe GEQ, EQ, a wait that holds the stream's
     * later entries only, released by another stream's write */
    CK(wait32(s, a + 8, 0xfffffffeu, GEQ));   /* 5 is 7 past 0xfffffffe */
    CK(wait32(s, a + 8, 5, EQ));
    CK(sync_(s));
    CK(wait32(s, a + 8, 6, GEQ));
    nap(0.05);
    EXPECT(query(s) == 600, "a wait for a value nobody wrote passed");
    {
        void *s2;
        int (*screate)(void **, unsigned) = sym("cuStreamCreate");
        CK(screate(&s2, 1));
        CK(write32(s2, a + 8, 6, 0));
        CK(sync_(s));
    }
    EXPECT(wait32(s, a + 2, 1, GEQ) != 0, "a wait on an unaligned word was taken");
    put_handle(&hd);
    free(h);
    return a;
}

static int pingpong(void *s)
{
    unsigned char *h = malloc(DATA);
    long done = 0;
    if (rank == 0) {
        dptr_t a = block_export(s), b;
        CK(alloc_(&b, DATA));
        for (uint32_t k = 1; k <= ROUNDS; k++) {
            CK(write32(s, a, BASE + k, 0));
            CK(wait32(s, a + 4, BASE + k, GEQ));
        }
        CK(wait32(s, a + 4, BASE + ROUNDS, EQ));
        CK(copy(b, a + BACK, DATA, s));
        CK(hostfn(s, set_done, &done));
        watch(&done, "ping");
        CK(dtoh(h, b, DATA));
        for (size_t i = 0; i < DATA; i++)
            EXPECT(h[i] == pat(1, i), "byte %zu that rank 1 copied into the block reads %u", i, h[i]);
        /* a host wait for a flag another process writes later */
        CK(wait32(s, a + 4, BASE + ROUNDS + 1, GEQ));
        CK(sync_(s));
        printf("ipc_mock: ok, a block shared by 2 processes, %d rounds of flags across 2^32, bytes both ways\n",
               ROUNDS);
        return 0;
    }
    handle_t hd;
    int (*open_)(dptr_t *, handle_t, unsigned) = sym("cuIpcOpenMemHandle_v2");
    int (*close_)(dptr_t) = sym("cuIpcCloseMemHandle");
    dptr_t p, p2, c, d;
    get_handle(&hd);
    CK(open_(&p, hd, 1));
    CK(open_(&p2, hd, 1));
    EXPECT(p2 == p, "the same handle opened twice: two mappings");
    CK(close_(p2));
    CK(alloc_(&c, DATA));
    CK(alloc_(&d, DATA));
    CK(copy(c, p + DATA, DATA, s));   /* rank 0's bytes, through the mapping */
    for (size_t i = 0; i < DATA; i++)
        h[i] = pat(1, i);
    CK(htod(d, h, DATA));
    CK(copy(p + BACK, d, DATA, s));
    for (uint32_t k = 1; k <= ROUNDS; k++) {
        CK(wait32(s, p, BASE + k, GEQ));
        CK(write32(s, p + 4, BASE + k, 0));
    }
    CK(hostfn(s, set_done, &done));
    watch(&done, "pong");
    CK(dtoh(h, c, DATA));
    for (size_t i = 0; i < DATA; i++)
        EXPECT(h[i] == pat(0, DATA + i), "byte %zu of rank 0's block reads %u through the mapping", DATA + i, h[i]);
    nap(1.5);
    CK(write32(s, p + 4, BASE + ROUNDS + 1, 0));
    CK(sync_(s));
    CK(close_(p));
    EXPECT(close_(p) != 0, "a mapping closed twice");
    return 0;
}

/* each stream waits for the flag the other writes after its own wait */
static int deadlock(void *s)
{
    dptr_t a, p;
    if (rank == 0) {
        a = block_export(s);
        CK(wait32(s, a + 16, 1, GEQ));
        CK(write32(s, a + 20, 1, 0));
    } else {
        handle_t hd;
        int (*open_)(dptr_t *, handle_t, unsigned) = sym("cuIpcOpenMemHandle_v2");
        get_handle(&hd);
        CK(open_(&p, hd, 1));
        CK(wait32(s, p + 20, 1, GEQ));
        CK(write32(s, p + 16, 1, 0));
    }
    CK(sync_(s));
    fprintf(stderr, "ipc_mock rank %d: a wait for a flag that is never written passed\n", rank);
    return 1;
}

int main(int argc, char **argv)
{
    void *s;
    if (argc != 3 || (lib = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL)) == NULL) {
        fprintf(stderr, "usage: ipc_mock LIBCUDA pingpong|deadlock|lonely\n");
        return 2;
    }
    rank = getenv("RANK") != NULL ? atoi(getenv("RANK")) : 0;
    if (strcmp(argv[2], "lonely") != 0 && getenv("HP_RDZV") == NULL) {
        fprintf(stderr, "ipc_mock: %s runs under nompi_launch 2\n", argv[2]);
        return 2;
    }
    s = setup();
    if (strcmp(argv[2], "pingpong") == 0)
        return pingpong(s);
    if (strcmp(argv[2], "deadlock") == 0)
        return deadlock(s);
    if (strcmp(argv[2], "lonely") == 0) {
        dptr_t a;
        CK(alloc_(&a, 64));
        CK(wait32(s, a, 1, GEQ));
        CK(sync_(s));
        fprintf(stderr, "ipc_mock: a wait for a flag nothing writes passed\n");
        return 1;
    }
    fprintf(stderr, "ipc_mock: unknown mode %s\n", argv[2]);
    return 2;
}
