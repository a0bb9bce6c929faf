/*
 * The SIMT runtime's own structures, shared by its scheduler (hp_simt.cc)
 * and its launch and bookkeeping (hp_simt_launch.cc).  Private to
 * tests/gpu/simt.
 */
#ifndef HP_SIMT_RT_H
#define HP_SIMT_RT_H

#include "hp_simt.h"
#include "hp_simt_fiber.h"
#include <atomic>
#include <vector>

namespace hp_simt {

/* a thread: ready to run, at a barrier, at a warp intrinsic, ended */
enum { T_READY, T_BAR, T_WARP, T_DONE };

struct cta_t;

/* A CUDA thread, and what it waits at. */
struct thr_t {
    coords c;
    unsigned lin, lane, warp;
    int state;
    site at;          /* where it waits */
    int kind;         /* BAR_* or W_* */
    int pred, arg, width;
    unsigned mask;
    uint64_t val, res;
    fiber_t *f;
    cta_t *cta;
    unsigned unit;    /* its ThreadSanitizer thread in the CTA */
};

struct race_word;

/* A shared array of a CTA, by its declaration's tag: its memory, its
 * declaration (for reports) and the race detector's record of each of its
 * 32-bit words (hp_simt_race.cc). */
struct shalloc {
    const void *tag;
    void *p;
    size_t bytes, elem;
    const char *name;
    site at;
    race_word *words;
};

/* A CTA's shared arrays lie in an arena of its own, each SH_ALIGN-aligned
 * with a gap of at least SH_ALIGN bytes after it, poisoned under
 * AddressSanitizer (which sees each array's ends as it would separate
 * allocations'), so that an address tells its array by its SH_ALIGN-byte
 * slot (the race detector's lookup, in one step) and only shared memory
 * lies in the arena's span (its quick test of every access). */
enum { SH_ALIGN = 64, SH_MAX_ARRAYS = 32, SH_ARENA = (48 << 10) + SH_MAX_ARRAYS * 2 * SH_ALIGN };

struct grid_t;

/* ThreadSanitizer's cost grows with the threads it knows (vector clocks):
 * a CTA of at most 64 threads gets one of its threads per CUDA thread, a
 * larger one one per warp (races between lanes of a warp are not its to
 * see then), and no more than TSAN_MAX are in flight. */
enum { TSAN_UNITS = 64, TSAN_LANES = 64, TSAN_MAX = 128 };

/* A CTA in flight. */
struct cta_t {
    grid_t *g;
    unsigned long long id;
    unsigned nthr, nwarps, nbar, ndone;
    thr_t *th;
    unsigned wready[32];   /* ready threads per warp */
    unsigned wwait[32];    /* threads per warp waiting at a warp intrinsic */
    unsigned wgen[32];     /* __syncwarp generations */
    site bar_at;
    int bar_kind;
    unsigned bar_gen;
    shalloc sh[SH_MAX_ARRAYS];
    unsigned nsh;
    char *arena;
    size_t arena_used;
    uint8_t sh_slot[SH_ARENA / SH_ALIGN];   /* the array (+ 1) of each slot, 0: a gap */
    size_t shbytes;
    uint64_t rng;
    int rpos[32];          /* where each warp is in the grid's ready list, or -1 */
    uint32_t prio[32];     /* the warps' priorities (the skewed order) */
    /* ThreadSanitizer: its threads (one per CUDA thread, or per warp in a
     * large CTA: TSAN_UNITS), how many CUDA threads each stands for, the
     * barrier arrivals and starts and ends counted per unit (a unit
     * releases when its last thread arrives or ends, acquires when its
     * first resumes or starts), and the synchronisation objects */
    void *tsan[TSAN_UNITS];
    unsigned usize[TSAN_UNITS], uarr[TSAN_UNITS], uacq[TSAN_UNITS], ustart[TSAN_UNITS], uend[TSAN_UNITS];
    char sync_start, sync_end, sync_bar[2], sync_warp[32][2];
    /* the shared-memory race detector (hp_simt_race.cc): the span of the
     * shared arrays' addresses (a quick test of an access), the
     * synchronisation events so far (barriers and __syncwarp), the one the
     * last barrier was, and per warp, once it calls __syncwarp, the last
     * event each pair of its lanes took part in together, and the accesses
 * checked */
    uint32_t seq, bar_seq;
    unsigned long long checked;   /* shared accesses checked */
    uint32_t (*wpair[32])[32];
};

/* A grid being run. */
struct grid_t {
    launch_info li;
    void *closure;
    void (*run)(void *);
    uint64_t seed, ordinal, rng;
    int skew;              /* pick the ready warp of highest priority, not any */
    unsigned unit;         /* CUDA threads per ThreadSanitizer thread: 1 or 32 */
    std::vector<std::pair<cta_t *, unsigned>> ready;   /* warps with a thread ready */
};

/* The shared-memory race detector (hp_simt_race.cc).  race_array: the
 * record of a new shared array a of c (its words never accessed);
 * race_barrier and race_syncwarp: a barrier of c, or a __syncwarp of warp w
 * over mask, completed; race_end: c's records freed; race_lane: t now runs
 * on this OS thread (NULL: none). */
void race_array(cta_t *c, shalloc *a);
void race_barrier(cta_t *c);
void race_syncwarp(cta_t *c, unsigned w, unsigned mask);
void race_end(cta_t *c);
void race_lane(thr_t *t);

/* A grid, run to its end on the calling thread (hp_simt.cc). */
void run_grid(grid_t *g);
/* The seed of the launches now. */
uint64_t seed_now(void);
/* The end of a run that broke a rule (hp_simt_report.cc): the kernel, its
 * launch and CTA c (NULL: none) and the message, then abort(). */
[[noreturn]] void fail(const cta_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

HP_SIMT_NOTSAN static inline uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

/* the next number of a seeded sequence */
HP_SIMT_NOTSAN static inline uint64_t next(uint64_t *s)
{
    *s += 0x9E3779B97F4A7C15ULL;
    return mix(*s);
}

} /* namespace hp_simt */

#endif
