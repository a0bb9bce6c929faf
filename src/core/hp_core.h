/*
 * hipress core: status codes, logging, small utilities shared by every layer.
 * Internal header; the public API is include/hipress.h.
 */
#ifndef HP_CORE_H
#define HP_CORE_H

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include "hipress.h"

#define HP_EXPORT __attribute__((visibility("default")))
#define HP_LIKELY(x)   __builtin_expect(!!(x), 1)
#define HP_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HP_MIN(a, b) ((a) < (b) ? (a) : (b))
#define HP_MAX(a, b) ((a) > (b) ? (a) : (b))
#define HP_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Internal status: HP_OK (0) or an error < 0, the public hipress_status_t
 * values.  An error of another library keeps that library's code as its
 * cause (HP_ST_MPI, HP_ST_NCCL, HP_ST_CUDA): -(class | cause << 8), so
 * HP_ST_CLASS(st) is the HP_ERR_* value and HP_ST_CAUSE(st) the code.
 * Compare classes, never whole statuses: HP_ST_CLASS(st) == HP_ERR_PEER. */
typedef int hp_status_t;
#define HP_OK            HIPRESS_OK
#define HP_ERR_INVALID   HIPRESS_ERR_INVALID
#define HP_ERR_NOMEM     HIPRESS_ERR_NOMEM
#define HP_ERR_MPI       HIPRESS_ERR_MPI
#define HP_ERR_MESSAGE   HIPRESS_ERR_MESSAGE
#define HP_ERR_PEER      HIPRESS_ERR_PEER
#define HP_ERR_UNSUPPORTED HIPRESS_ERR_UNSUPPORTED
#define HP_ERR_STATE     HIPRESS_ERR_STATE
#define HP_ERR_DEVICE    HIPRESS_ERR_DEVICE
#define HP_ERR_NCCL      HIPRESS_ERR_NCCL

static inline hp_status_t hp_st_make(hp_status_t cls, int cause)
{
    return cause > 0 && cause < (1 << 22) ? -((-cls) | (cause << 8)) : cls;
}
#define HP_ST_CLASS(st) ((st) >= 0 ? (st) : -((-(st)) & 0xff))
#define HP_ST_CAUSE(st) ((st) >= 0 ? 0 : (-(st)) >> 8)
#define HP_ST_MPI(rc)  hp_st_make(HP_ERR_MPI, (rc))
#define HP_ST_NCCL(rc) hp_st_make(HP_ERR_NCCL, (int)(rc))
#define HP_ST_CUDA(rc) hp_st_make(HP_ERR_DEVICE, (int)(rc))

/* An even split (the algorithms' chunks): n elements into `parts` chunks: chunk i starts at
 * hp_chunk_off(n, parts, i) and holds hp_chunk_len(n, parts, i) elements; the
 * first n % parts chunks are one longer.  Defined for parts >= 1. */
static inline size_t hp_chunk_off(size_t n, size_t parts, size_t i)
{
    size_t base = n / parts, rem = n % parts;
    return i * base + (i < rem ? i : rem);
}
static inline size_t hp_chunk_len(size_t n, size_t parts, size_t i)
{
    return n / parts + (i < n % parts ? 1 : 0);
}


/* ------------------------------------------------------------------ log */
typedef enum {
    HP_LOG_NONE = 0,
    HP_LOG_WARN = 1,
    HP_LOG_INFO = 2,
    HP_LOG_TRACE = 3
} hp_log_level_t;

extern int hp_log_level;   /* from HIPRESS_DEBUG */
extern int hp_log_rank;    /* -1 until MPI_Init */

void hp_log_emit(int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Costs one load and compare when the level is off. */
#define HP_LOG(lvl, ...) \
    do { if (HP_UNLIKELY(hp_log_level >= (lvl))) hp_log_emit((lvl), __FILE__, __LINE__, __VA_ARGS__); } while (0)
#define HP_WARN(...)  HP_LOG(HP_LOG_WARN, __VA_ARGS__)
#define HP_INFO(...)  HP_LOG(HP_LOG_INFO, __VA_ARGS__)
#define HP_TRACE(...) HP_LOG(HP_LOG_TRACE, __VA_ARGS__)

/* The error trail: evaluate an hp_status_t expression; on failure log it
 * with file:line (TRACE: a failing call logs its whole path) and jump to
 * `label` with `st` holding the status. */
#define HP_CHECK_GOTO(expr, st, label) \
    do { (st) = (expr); \
         if (HP_UNLIKELY((st) != HP_OK)) { \
             HP_TRACE("%s: %s", #expr, hipress_status_string(st)); goto label; } } while (0)

/* The same, keeping a first error: st_first is set only while it is
 * HP_OK, and the code goes on (every rank must still run the protocol). */
#define HP_CHECK_KEEP(expr, st_first) \
    do { hp_status_t hp_st_ = (expr); \
         if (HP_UNLIKELY(hp_st_ != HP_OK)) { \
             HP_TRACE("%s: %s", #expr, hipress_status_string(hp_st_)); \
             if ((st_first) == HP_OK) (st_first) = hp_st_; } } while (0)

/* HP_CHECK_KEEP as a test: 1 when expr succeeded, else 0 with its error
 * kept (where a step's result is used only when it succeeded). */
#define HP_CHECK_OK(expr, st_first) \
    ({ hp_status_t hp_st_ = (expr); \
       if (HP_UNLIKELY(hp_st_ != HP_OK)) { \
           HP_TRACE("%s: %s", #expr, hipress_status_string(hp_st_)); \
           if ((st_first) == HP_OK) (st_first) = hp_st_; } \
       hp_st_ == HP_OK; })

/* ------------------------------------------------------------------ util */
static inline double hp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* 64-bit FNV-1a, for setting agreement and result hashes. */
static inline uint64_t hp_hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++) {
        h ^= c[i];
        h *= 1099511628211ULL;
    }
    return h;
}
#define HP_HASH_INIT 14695981039346656037ULL

void *hp_aligned_alloc(size_t bytes);   /* 64-byte aligned, NULL on failure */

#endif /* HP_CORE_H */
