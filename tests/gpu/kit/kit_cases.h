/*
 * The calls the device kit compares between the NCCL and MPI paths
 * (kit_nccl.c, kit_mpi.c): the same cases, inputs, fixed plans and result
 * lines on both, so the lines of one are the lines of the other.
 *
 * A case is a compressor and an algorithm with every setting that shapes
 * the plan fixed (no cost model, no exploration, no plain plan), one
 * communicator, one buffer of KIT_N elements reduced KIT_CALLS times in a
 * row (the error feedback carried from call to call).  float16 and
 * bfloat16 cases go to NCCL as such; on MPI, which takes float32 only, the
 * same values widened, the float result narrowed on the host (to nearest
 * even), as hipress' NCCL front end widens and narrows.  ncclAvg: the
 * float sum divided by the rank count on the host.
 *
 * A result line: "CASE CALL RANK RESULT-HASH RESIDUAL-HASH", FNV-1a of the
 * result's bytes in the call's type and of the rank's residual
 * (hipress_comm_residual / hipress_nccl_comm_residual, float32).
 */
#ifndef HP_TESTS_KIT_CASES_H
#define HP_TESTS_KIT_CASES_H

#include "hp_elem.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define KIT_N ((size_t)100003)
#define KIT_CALLS 3

typedef struct {
    const char *comp, *algo;
    int         half;   /* 0 float32, 1 float16, 2 bfloat16 */
    int         avg;    /* ncclAvg */
    int         oop;    /* out of place */
} kit_case_t;

static const kit_case_t kit_cases[] = {
    {"onebit", "ring", 0, 0, 0},  {"tbq", "allgather", 0, 0, 0},   {"q4", "ps", 0, 0, 0},
    {"fp16", "tree", 0, 1, 0},    {"graddrop", "ring", 0, 0, 0},   {"dgc", "ps", 0, 0, 0},
    {"terngrad", "allgather", 0, 0, 0}, {"q8", "ring", 1, 0, 0},   {"bf16", "tree", 2, 0, 0},
    {"onebit", "ps", 0, 0, 1},
};
#define KIT_NCASES ((int)(sizeof(kit_cases) / sizeof(kit_cases[0])))

/* the settings of a case, as name/value pairs, NULL-terminated */
static inline void kit_settings(const kit_case_t *k, const char *kv[32])
{
    const char *all[] = {"HIPRESS_COMPRESSOR", k->comp, "HIPRESS_ALGO", k->algo,
                         "HIPRESS_PARTITION_BYTES", strcmp(k->algo, "ring") == 0 ? "16K" : "64K",
                         "HIPRESS_HIERARCHICAL", "off", "HIPRESS_MIN_BYTES", "1K", "HIPRESS_SPARSE_RATIO", "0.01",
                         "HIPRESS_ONEBIT_BLOCK", "1024", "HIPRESS_SPARSE_BLOCK", "4096", "HIPRESS_DGC_MOMENTUM", "0.5",
                         "HIPRESS_DGC_WARMUP", "1", "HIPRESS_ALLOW_PLAIN", "0", "HIPRESS_TBQ_SCALE", "1", NULL};
    memcpy(kv, all, sizeof(all));
}

/* rank r's input of call t, element i, as the call's type holds it */
static inline float kit_input(const kit_case_t *k, int r, int t, size_t i)
{
    uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ULL + (uint64_t)(r * 131 + t * 7919 + 17);
    float v;
    z ^= z >> 31;
    z *= 0xbf58476d1ce4e5b9ULL;
    z ^= z >> 29;
    v = (float)(0.01 * sin((double)i * 0.001 + t + r) + ((double)(z >> 40) / 16777216.0 - 0.5) * 0.003);
    return k->half == 1 ? hp_f16_to_f32(hp_f32_to_f16(v)) : k->half == 2 ? hp_bf16_to_f32(hp_f32_to_bf16(v)) : v;
}

static inline size_t kit_esize(const kit_case_t *k)
{
    return k->half ? 2 : 4;
}

/* the input in the call's type into buf */
static inline void kit_fill(const kit_case_t *k, int r, int t, void *buf)
{
    for (size_t i = 0; i < KIT_N; i++) {
        float v = kit_input(k, r, t, i);
        if (k->half == 1)
            ((uint16_t *)buf)[i] = hp_f32_to_f16(v);
        else if (k->half == 2)
            ((uint16_t *)buf)[i] = hp_f32_to_bf16(v);
        else
            ((float *)buf)[i] = v;
    }
}

static inline uint64_t kit_hash(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

typedef struct {
    int                case_, call, rank;
    unsigned long long result, residual;
} kit_line_t;

static inline void kit_print(FILE *f, const kit_line_t *l)
{
    fprintf(f, "%d %d %d %016llx %016llx\n", l->case_, l->call, l->rank, l->result, l->residual);
}

/* Compare `mine` with the reference file's line of the same case, call and
 * rank; a line on stderr for a difference or a missing line.  Returns 1
 * when they are the same. */
static inline int kit_compare(const char *ref, const kit_line_t *mine, const char *who)
{
    FILE *f = fopen(ref, "r");
    char line[256];
    kit_line_t r;
    int found = 0, same = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (line[0] != '#' && sscanf(line, "%d %d %d %llx %llx", &r.case_, &r.call, &r.rank, &r.result,
                                     &r.residual) == 5 &&
            r.case_ == mine->case_ && r.call == mine->call && r.rank == mine->rank) {
            found = 1;
            same = r.result == mine->result && r.residual == mine->residual;
            break;
        }
    if (f != NULL)
        fclose(f);
    if (!found)
        fprintf(stderr, "%s rank %d: case %d (%s/%s) call %d: no line in %s\n", who, mine->rank, mine->case_,
                kit_cases[mine->case_].comp, kit_cases[mine->case_].algo, mine->call, ref);
    else if (!same)
        fprintf(stderr, "%s rank %d: case %d (%s/%s%s%s) call %d: %s differs from the reference %s\n", who,
                mine->rank, mine->case_, kit_cases[mine->case_].comp, kit_cases[mine->case_].algo,
                kit_cases[mine->case_].half == 1 ? " float16" : kit_cases[mine->case_].half == 2 ? " bfloat16" : "",
                kit_cases[mine->case_].avg ? " avg" : "", mine->call,
                r.result != mine->result ? "the result" : "the residual", ref);
    return found && same;
}

#endif
