/*
 * The device kit's first step (scripts/kit/run.sh): is there a GPU,
 * and can the kit use it?  Asks the driver itself (libcuda.so.1, through
 * dlopen), never nvidia-smi.
 *
 *   kit_preflight [--need VERSION]     VERSION: the CUDA version the kit's
 *                                      runtime needs, as cuDriverGetVersion
 *                                      says it (13000 for CUDA 13.0)
 *
 * Prints the driver (its CUDA version and, from /proc/driver/nvidia/version,
 * its release), cuDeviceGetCount, each device (name, compute capability,
 * memory), then two probes on device 0 that the multi-process steps rest
 * on: stream memory operations (a stream waits for a value another stream
 * writes) and CUDA IPC (a second process maps this one's memory, reads it
 * and writes a flag through the mapping, which this one then sees).  The
 * last line is "preflight: ..." with the verdict.  Exit:
 *   0   the GPU is usable, the probes passed
 *   77  no GPU: no driver library and no /dev/nvidia* device
 *   1   a GPU is there but unusable (no driver library for a device node,
 *       cuInit fails, no device, a driver older than VERSION needs)
 *   3   the GPU is usable but a probe failed: single-process steps can run,
 *       the multi-process ones cannot
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <glob.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;
static void *lib;

#define SYM(name) ((CUresult(*)())sym(#name))
static void *(sym)(const char *name)
{
    return lib != NULL ? dlsym(lib, name) : NULL;
}

static const char *ename(CUresult rc)
{
    const char *s = NULL;
    CUresult (*f)(CUresult, const char **) = (CUresult(*)(CUresult, const char **))sym("cuGetErrorName");
    if (f == NULL || f(rc, &s) != CUDA_SUCCESS || s == NULL)
        return "an error";
    return s;
}

static int has_device_nodes(void)
{
    glob_t g;
    int n = glob("/dev/nvidia[0-9]*", 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
    globfree(&g);
    return n > 0 || access("/dev/nvidiactl", F_OK) == 0;
}

/* the driver's release ("580.159.03"), when the kernel module says */
static void driver_release(char *buf, size_t len)
{
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    char line[512], *p;
    snprintf(buf, len, "unknown");
    if (f == NULL)
        return;
    if (fgets(line, sizeof(line), f) != NULL && (p = strstr(line, "Kernel Module")) != NULL) {
        p += strlen("Kernel Module");
        while (*p == ' ' || *p == '\t')
            p++;
        snprintf(buf, len, "%.*s", (int)strcspn(p, " \t\n"), p);
    }
    fclose(f);
}

static int wait_stream(CUstream s, double seconds)
{
    CUresult (*query)(CUstream) = (CUresult(*)(CUstream))sym("cuStreamQuery");
    struct timespec t0, t, nap = {0, 1000000};
    CUresult rc;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while ((rc = query(s)) == CUDA_ERROR_NOT_READY) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) * 1e-9 > seconds)
            return -1;
        nanosleep(&nap, NULL);
    }
    return rc == CUDA_SUCCESS ? 0 : -2;
}

static int context(void)
{
    CUcontext c;
    CUdevice d;
    return SYM(cuDeviceGet)(&d, 0) == CUDA_SUCCESS && SYM(cuDevicePrimaryCtxRetain)(&c, d) == CUDA_SUCCESS &&
                   SYM(cuCtxPushCurrent_v2)(c) == CUDA_SUCCESS
               ? 0
               : -1;
}

/* stream B waits for the value stream A writes */
static const char *probe_memops(void)
{
    CUdeviceptr p;
    CUstream a, b;
    if (sym("cuStreamWaitValue32_v2") == NULL || sym("cuStreamWriteValue32_v2") == NULL)
        return "the driver has no cuStreamWaitValue32_v2/cuStreamWriteValue32_v2";
    if (SYM(cuMemAlloc_v2)(&p, 256) != CUDA_SUCCESS || SYM(cuStreamCreate)(&a, CU_STREAM_NON_BLOCKING) ||
        SYM(cuStreamCreate)(&b, CU_STREAM_NON_BLOCKING) || SYM(cuMemsetD8Async)(p, 0, 256, a) ||
        SYM(cuStreamSynchronize)(a))
        return "cannot allocate or clear 256 bytes";
    if (SYM(cuStreamWaitValue32_v2)(b, p, 7, CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS)
        return "cuStreamWaitValue32 was refused";
    if (wait_stream(b, 0.2) != -1)
        return "a stream waiting for a value nobody wrote completed";
    if (SYM(cuStreamWriteValue32_v2)(a, p, 9, CU_STREAM_WRITE_VALUE_DEFAULT) != CUDA_SUCCESS)
        return "cuStreamWriteValue32 was refused";
    if (wait_stream(b, 5) != 0)
        return "a stream waiting for a value another stream wrote did not complete within 5 s";
    return NULL;
}

static void hex(const unsigned char *b, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
}

/* the child: map the parent's block, check its bytes, write 1234 into
 * its first word through the mapping */
static int ipc_child(const char *h)
{
    CUipcMemHandle mh;
    CUdeviceptr p;
    CUstream s;
    unsigned char b[16];
    CUresult rc;
    for (size_t i = 0; i < sizeof(mh); i++)
        sscanf(h + 2 * i, "%2hhx", &((unsigned char *)&mh)[i]);
    if (context() != 0)
        return 10;
    if ((rc = SYM(cuIpcOpenMemHandle_v2)(&p, mh, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) != CUDA_SUCCESS) {
        fprintf(stderr, "kit_preflight: cuIpcOpenMemHandle: %s\n", ename(rc));
        return 11;
    }
    if (SYM(cuMemcpyDtoH_v2)(b, p + 16, 16) != CUDA_SUCCESS || b[0] != 0x5a || b[15] != 0x5a)
        return 12;
    if (SYM(cuStreamCreate)(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
        SYM(cuStreamWriteValue32_v2)(s, p, 1234, CU_STREAM_WRITE_VALUE_DEFAULT) != CUDA_SUCCESS ||
        SYM(cuStreamSynchronize)(s) != CUDA_SUCCESS)
        return 13;
    if (sym("cuIpcCloseMemHandle") != NULL)
        SYM(cuIpcCloseMemHandle)(p);
    return 0;
}

static const char *probe_ipc(void)
{
    static char why[160];
    CUipcMemHandle mh;
    CUdeviceptr p;
    CUstream s;
    CUresult rc;
    char h[2 * sizeof(mh) + 1], *argv[4];
    uint32_t word = 0;
    pid_t pid;
    int st;
    if (sym("cuIpcGetMemHandle") == NULL || sym("cuIpcOpenMemHandle_v2") == NULL)
        return "the driver has no cuIpcGetMemHandle/cuIpcOpenMemHandle_v2";
    if (SYM(cuMemAlloc_v2)(&p, 64) != CUDA_SUCCESS || SYM(cuStreamCreate)(&s, CU_STREAM_NON_BLOCKING) ||
        SYM(cuMemsetD8Async)(p, 0x5a, 64, s) || SYM(cuMemsetD8Async)(p, 0, 4, s) || SYM(cuStreamSynchronize)(s))
        return "cannot allocate or fill 64 bytes";
    if ((rc = SYM(cuIpcGetMemHandle)(&mh, p)) != CUDA_SUCCESS) {
        snprintf(why, sizeof(why), "cuIpcGetMemHandle: %s", ename(rc));
        return why;
    }
    hex((unsigned char *)&mh, sizeof(mh), h);
    argv[0] = (char *)"kit_preflight";
    argv[1] = (char *)"--ipc-child";
    argv[2] = h;
    argv[3] = NULL;
    if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ) != 0)
        return "cannot start a second process";
    for (int i = 0; i < 300 && waitpid(pid, &st, WNOHANG) == 0; i++) {
        struct timespec t = {0, 100000000};
        nanosleep(&t, NULL);
        if (i == 299) {
            kill(pid, 9);
            waitpid(pid, &st, 0);
            return "the second process did not finish within 30 s";
        }
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        snprintf(why, sizeof(why), "the second process failed (exit %d: %s)", WIFEXITED(st) ? WEXITSTATUS(st) : -1,
                 WIFEXITED(st) && WEXITSTATUS(st) == 11 ? "it could not map the memory" :
                 WIFEXITED(st) && WEXITSTATUS(st) == 12 ? "it read other bytes" : "see above");
        return why;
    }
    if (SYM(cuMemcpyDtoH_v2)(&word, p, 4) != CUDA_SUCCESS || word != 1234) {
        snprintf(why, sizeof(why), "the flag the second process wrote through its mapping reads %u, not 1234", word);
        return why;
    }
    return NULL;
}

static const char *const required[] = {
    "cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName", "cuDeviceGetAttribute",
    "cuDeviceTotalMem_v2", "cuDevicePrimaryCtxRetain", "cuCtxPushCurrent_v2", "cuMemAlloc_v2", "cuMemsetD8Async",
    "cuMemcpyDtoH_v2", "cuStreamCreate", "cuStreamQuery", "cuStreamSynchronize",
};

int main(int argc, char **argv)
{
    int need = 0, drv = 0, n = 0, bad = 0;
    char rel[64], name[256];
    CUresult rc;
    const char *memops, *ipc;

    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--need") == 0 && i + 1 < argc)
            need = atoi(argv[++i]);
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (argc == 3 && strcmp(argv[1], "--ipc-child") == 0)
        return lib != NULL && SYM(cuInit)(0) == CUDA_SUCCESS ? ipc_child(argv[2]) : 10;
    if (lib == NULL) {
        int nodes = has_device_nodes();
        printf("preflight: %s: no libcuda.so.1 (%s)\n", nodes ? "STOP" : "no GPU", dlerror());
        return nodes ? 1 : 77;
    }
    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++)
        if (sym(required[i]) == NULL) {
            printf("preflight: STOP: the CUDA driver has no %s\n", required[i]);
            return 1;
        }
    driver_release(rel, sizeof(rel));
    SYM(cuDriverGetVersion)(&drv);
    printf("driver: release %s, CUDA %d.%d (cuDriverGetVersion %d); the kit's runtime needs %d.%d\n", rel,
           drv / 1000, drv % 1000 / 10, drv, need / 1000, need % 1000 / 10);
    if ((rc = SYM(cuInit)(0)) != CUDA_SUCCESS) {
        int nodes = has_device_nodes();
        printf("preflight: %s: cuInit failed: %s%s\n", nodes ? "STOP" : "no GPU", ename(rc),
               nodes ? " (the device nodes are there: the GPU is unusable)" : "");
        return nodes ? 1 : 77;
    }
    if ((rc = SYM(cuDeviceGetCount)(&n)) != CUDA_SUCCESS || n < 1) {
        printf("preflight: STOP: cuDeviceGetCount says %d device(s) (%s)\n", n, ename(rc));
        return 1;
    }
    for (int d = 0; d < n; d++) {
        int maj = 0, min = 0;
        size_t mem = 0;
        CUdevice dev;
        SYM(cuDeviceGet)(&dev, d);
        SYM(cuDeviceGetName)(name, (int)sizeof(name), dev);
        SYM(cuDeviceGetAttribute)(&maj, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
        SYM(cuDeviceGetAttribute)(&min, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
        SYM(cuDeviceTotalMem_v2)(&mem, dev);
        printf("device %d: %s, sm_%d%d, %.1f GiB\n", d, name, maj, min, (double)mem / (1 << 30));
    }
    if (need > 0 && drv < need) {
        printf("preflight: STOP: the driver supports CUDA %d.%d, the kit's runtime needs %d.%d (for CUDA 13: a "
               "580-series driver or newer); build the kit with the CUDA the device's driver supports\n",
               drv / 1000, drv % 1000 / 10, need / 1000, need % 1000 / 10);
        return 1;
    }
    if (need >= 13000 && strcmp(rel, "unknown") != 0 && atoi(rel) < 580) {
        printf("preflight: STOP: driver release %s: CUDA 13 needs a 580-series driver or newer\n", rel);
        return 1;
    }
    if (context() != 0) {
        printf("preflight: STOP: cannot make device 0's primary context current\n");
        return 1;
    }
    memops = probe_memops();
    ipc = probe_ipc();
    printf("stream memory operations: %s\n", memops == NULL ? "ok" : memops);
    printf("CUDA IPC: %s\n", ipc == NULL ? "ok (a second process mapped this one's memory, read it and wrote a "
                                           "flag through the mapping)" : ipc);
    bad = memops != NULL || ipc != NULL;
    printf("preflight: %s: %d device(s), %s, driver %s (CUDA %d.%d)%s%s\n", bad ? "usable, multi-process NO" : "ok",
           n, name, rel, drv / 1000, drv % 1000 / 10, bad ? ": " : "", bad ? (memops ? memops : ipc) : "");
    return bad ? 3 : 0;
}
