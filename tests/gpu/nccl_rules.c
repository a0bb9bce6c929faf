/*
 * Scenarios of the compressed ncclAllReduce under the stand-ins' strict
 * rules (tests/gpu/run_nccl_rules.sh; doc/standins.md lists each rule with
 * where the real API documents it): what a real driver or NCCL accepts
 * without an error while the GPU computes garbage, or one rank waits for
 * ever, and what the stand-ins stop instead (exit 87, a line naming both
 * sides).  An MPI program under the preload, as tests/gpu/nccl_scenarios.c.
 *
 *   nccl_rules CASE MOCKDIR/libcuda.so.1
 *
 *   destroy    stream-ordered calls, the last one followed at once by
 *              ncclCommDestroy: the communicator's stream-ordered memory is
 *              freed in its stream order, after the call's work (not at
 *              once, under work still queued); the result the same bits
 *              as a twin communicator's, waited for;
 *   finalize   the same with ncclCommFinalize, then ncclCommDestroy.
 * Rank 0 prints "nccl_rules CASE: ok" or the program exits 1.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mock_nccl.h"
#include "nccl_scen.h"

/* Calls of T steps on a communicator and its twin (the same data): the
 * twin's waited for after each, the last call of the other followed at
 * once by its end (ncclCommFinalize first when `finalize`); the results
 * the same bits. */
static void case_end(int finalize)
{
    const size_t n = 200000;
    const int T = 4;
    ncclComm_t c = new_comm(), twin = new_comm();
    void *d = dev(n), *dt = dev(n);
    float *h = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
    for (int t = 0; t < T; t++) {
        fill(h, n, t, 11);
        dwrite(d, h, n * sizeof(float));
        dwrite(dt, h, n * sizeof(float));
        CHECK(call(twin, SB, dt, n, NULL) == ncclSuccess, "twin call %d", t);
        cu_sync(SB);
        CHECK(call(c, SA, d, n, NULL) == ncclSuccess, "call %d", t);
        if (t < T - 1)
            continue;
        /* at once: the call's work may still be queued */
        if (finalize)
            CHECK(ncclCommFinalize(c) == ncclSuccess, "ncclCommFinalize");
        CHECK(ncclCommDestroy(c) == ncclSuccess, "ncclCommDestroy");
    }
    dread(want, dt, n * sizeof(float));
    same_bits(d, want, n, finalize ? "the call before ncclCommFinalize" : "the call before ncclCommDestroy");
    nccl_ok(twin, "the twin");
    CHECK(ncclCommDestroy(twin) == ncclSuccess, "ncclCommDestroy of the twin");
    cu_ctx_sync();
    free(h);
    free(want);
}

int main(int argc, char **argv)
{
    scen_init(&argc, &argv, "nccl_rules");
    if (strcmp(argv[1], "destroy") == 0)
        case_end(0);
    else if (strcmp(argv[1], "finalize") == 0)
        case_end(1);
    else
        CHECK(0, "unknown case %s", argv[1]);
    return scen_end(argv[1]);
}
