/*
 * The CUDA module's contexts and waits (hp_cuda_mod.h).
 *
 * Every function that works on a device's memory enters the allocation's
 * context (or its device's primary context) and leaves the caller's
 * current context as it found it.
 *
 * Every wait of the module is a poll of cuStreamQuery or cuEventQuery,
 * never cuStreamSynchronize or cuEventSynchronize: a stuck kernel or copy
 * must not hang the rank for ever.  The poll yields the processor a few
 * times (a healthy wait is short), then sleeps from 20 us, doubling to
 * 1 ms, and gives up after wait_bound_s seconds (set_wait_bound:
 * libhipress passes half of HIPRESS_TIMEOUT, so the rank that waits fails
 * and tells its peers before their watchdog ends the job) with a reason
 * naming what was waited for (the entry point's op) and on which stream or
 * event.
 */
#include "hp_cuda_mod.h"
#include <sched.h>
#include <time.h>

/* ------------------------------------------------------------ contexts */

int hp_cu_primary(int device, CUcontext *ctx_p)
{
    CUdevice d;
    CUresult rc;
    int st = HP_GPU_OK;

    if (device < 0 || device >= HP_GPU_MAX_PROBED)
        return hp_cu_fail(HP_GPU_ERR_INVALID, "device %d out of range", device);
    pthread_mutex_lock(&hp_cu.lock);
    if (hp_cu.primary[device] == NULL) {
        if ((rc = hp_cu.DeviceGet(&d, device)) != CUDA_SUCCESS)
            st = CU_FAIL("cuDeviceGet", rc);
        else if ((rc = hp_cu.DevicePrimaryCtxRetain(&hp_cu.primary[device], d)) != CUDA_SUCCESS)
            st = CU_FAIL("cuDevicePrimaryCtxRetain", rc);
    }
    *ctx_p = hp_cu.primary[device];
    pthread_mutex_unlock(&hp_cu.lock);
    return st;
}

int hp_cu_scope_enter(const hp_gpu_ptr_t *where, hp_cu_scope_t *sc)
{
    CUcontext want = NULL, cur = NULL;
    CUresult rc;
    int st;

    sc->pushed = 0;
    if (where != NULL && where->ctx != NULL)
        want = (CUcontext)where->ctx;
    else if (where != NULL && where->device >= 0 && (st = hp_cu_primary(where->device, &want)) != HP_GPU_OK)
        return st;
    if (want == NULL)
        return HP_GPU_OK;    /* the caller's current context */
    if ((rc = hp_cu.CtxGetCurrent(&cur)) != CUDA_SUCCESS)
        return CU_FAIL("cuCtxGetCurrent", rc);
    if (cur == want)
        return HP_GPU_OK;
    if ((rc = hp_cu.CtxPushCurrent(want)) != CUDA_SUCCESS)
        return CU_FAIL("cuCtxPushCurrent", rc);
    sc->pushed = 1;
    return HP_GPU_OK;
}

void hp_cu_scope_exit(const hp_cu_scope_t *sc)
{
    CUcontext popped;
    if (sc->pushed)
        hp_cu.CtxPopCurrent(&popped);
}

/* --------------------------------------------------------------- waits */

#define WAIT_BOUND_DEFAULT 150.0
static double wait_bound_s = WAIT_BOUND_DEFAULT;

double hp_cu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int hp_cu_wait(int is_event, void *h, const char *on)
{
    double bound;
    double t0 = 0.0;
    long ns = 20000;
    __atomic_load(&wait_bound_s, &bound, __ATOMIC_RELAXED);
    for (unsigned long k = 0;; k++) {
        CUresult rc = is_event ? hp_cu.EventQuery((CUevent)h) : hp_cu.StreamQuery((CUstream)h);
        if (rc == CUDA_SUCCESS)
            return HP_GPU_OK;
        if (rc != CUDA_ERROR_NOT_READY) {
            hp_cu_wait_failed = 1;
            return hp_cu_fail(HP_GPU_ERR_DEVICE, "%s: %s (%d), waiting for %s on %s %p",
                              is_event ? "cuEventQuery" : "cuStreamQuery", hp_cu_name(rc), (int)rc, hp_cu_op_name(),
                              on, h);
        }
        if (k == 0) {
            t0 = hp_cu_now();
            continue;
        }
        if (bound > 0 && hp_cu_now() - t0 > bound) {
            hp_cu_wait_failed = 1;
            return hp_cu_fail(HP_GPU_ERR_DEVICE, "the device did not finish %s on %s %p within %g s (the bound of "
                              "a device wait, HIPRESS_TIMEOUT / 2): a kernel or copy is stuck", hp_cu_op_name(), on,
                              h, bound);
        }
        if (k < 64) {
            sched_yield();
        } else {
            struct timespec ts = {0, ns};
            nanosleep(&ts, NULL);
            if (ns < 1000000)
                ns *= 2;
        }
    }
}

int hpcu_set_wait_bound(double seconds)
{
    if (!(seconds >= 0) || seconds > 1e9)
        return hp_cu_fail(HP_GPU_ERR_INVALID, "a wait bound of %g s", seconds);
    __atomic_store(&wait_bound_s, &seconds, __ATOMIC_RELAXED);
    return HP_GPU_OK;
}
