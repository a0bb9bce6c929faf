/*
 * The SIMT runtime's shared-memory race detector, exact per lane.
 * ThreadSanitizer sees a large CTA's warp as one thread (hp_simt_rt.h
 * TSAN_UNITS), so races between lanes of one warp are not its to see; this
 * is: the kernels are compiled with clang's -fsanitize-coverage=
 * trace-loads,trace-stores (tests/gpu/simt/simt.mk), which calls the hooks at
 * the end of this file before every load and store, and an access that
 * falls in a shared array of the running lane's CTA is checked and
 * recorded here, in every build (plain, ThreadSanitizer, AddressSanitizer,
 * the emulated module).
 *
 * The rule, compute-sanitizer racecheck's: two accesses to one 32-bit word
 * by different threads of a CTA, at least one a write, race unless a
 * barrier of the CTA lies between them, or a __syncwarp whose mask names
 * both threads.  Per word the record is the last write (its thread, when,
 * where) and the reads since (the latest, the latest by another thread,
 * the lanes that read when all are of one warp, else "several warps"); a
 * write clears the reads (a read before it that raced with a later access
 * raced with the write first, and the first race ends the run).  Atomics
 * are not seen (they are not loads and stores; the dialect's relaxed loads
 * are exempt: hp_simt.h HP_SIMT_NOCOV), nor are shuffles and votes, which
 * touch no shared memory.  A chain of partial-mask __syncwarp calls (lane a
 * with b, then b with c) is not followed: a and c are reported.  Two
 * threads writing different bytes of one word are reported (the kernels'
 * shared arrays hold 32-bit and wider elements).
 */
#include "hp_simt_rt.h"
#include <dlfcn.h>
#include <elf.h>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace hp_simt {

/* The record of one shared word.  Threads are stored + 1 (0: none); times
 * are the CTA's synchronisation count (cta_t seq) when the access ran. */
struct race_word {
    uint32_t w_thr, w_seq;       /* the last write */
    uint32_t r_thr, r_seq;       /* the latest read since it */
    uint32_t r2_thr, r2_seq;     /* the latest read by a thread other than r_thr */
    uint32_t r_mask, r_warp;     /* the lanes that read, all of warp r_warp; or r_warp SEVERAL */
    const void *w_pc, *r_pc, *r2_pc;
};
static const uint32_t SEVERAL = 0xffffffffu;

/* the lane running on this OS thread (its accesses are checked) */
static __thread thr_t *running;
/* shared accesses checked in this process */
static std::atomic<unsigned long long> n_checked;

void race_lane(thr_t *t)
{
    running = t;
}

void race_array(cta_t *c, shalloc *a)
{
    a->words = (race_word *)calloc((a->bytes + 3) / 4 + 1, sizeof(race_word));
    if (a->words == nullptr)
        fail(c, "out of memory for the race record of shared array %s", a->name);
}

void race_barrier(cta_t *c)
{
    c->bar_seq = ++c->seq;
}

void race_syncwarp(cta_t *c, unsigned w, unsigned mask)
{
    const uint32_t now = ++c->seq;
    if (c->wpair[w] == nullptr && (c->wpair[w] = (uint32_t(*)[32])calloc(32, sizeof(*c->wpair[w]))) == nullptr)
        fail(c, "out of memory for the race record of warp %u", w);
    for (unsigned a = 0; a < 32; a++)
        if (mask >> a & 1u)
            for (unsigned b = 0; b < 32; b++)
                if (mask >> b & 1u)
                    c->wpair[w][a][b] = now;
}

void race_end(cta_t *c)
{
    n_checked += c->checked;
    for (unsigned i = 0; i < c->nsh; i++) {
        free(c->sh[i].words);
        c->sh[i].words = nullptr;
    }
    for (unsigned w = 0; w < 32; w++) {
        free(c->wpair[w]);
        c->wpair[w] = nullptr;
    }
}

/* ------------------------------------------------------------ reports */

/* the source line of a code address, by addr2line when it is there (a
 * report only), else the object and offset */
static std::string pc_str(const void *pc)
{
    Dl_info di;
    char cmd[1024], line[512];
    std::string out;
    if (pc == nullptr)
        return "an unknown place";
    if (dladdr(pc, &di) == 0 || di.dli_fname == nullptr) {
        snprintf(line, sizeof(line), "%p", pc);
        return line;
    }
    /* an executable of fixed address is read at the address itself */
    uintptr_t off = (uintptr_t)pc - 1;
    if (((const Elf64_Ehdr *)di.dli_fbase)->e_type == ET_DYN)
        off -= (uintptr_t)di.dli_fbase;
    snprintf(cmd, sizeof(cmd), "addr2line -C -f -i -e '%s' 0x%lx 2>/dev/null", di.dli_fname, (unsigned long)off);
    if (FILE *p = popen(cmd, "r")) {
        /* pairs of lines, the innermost inlined frame first: the first
         * pair names the access, the last the function it is inlined in */
        std::string fn, first, last;
        while (fgets(line, sizeof(line), p) != nullptr) {
            std::string l(line);
            if (!l.empty() && l.back() == '\n')
                l.pop_back();
            if (fn.empty()) {
                fn = l;
                continue;
            }
            if (first.empty())
                first = l + " (" + fn + ")";
            else
                last = " in " + fn;
            fn.clear();
        }
        pclose(p);
        if (!first.empty() && first.compare(0, 2, "??") != 0)
            return first + last;
    }
    snprintf(line, sizeof(line), "%s+0x%lx", di.dli_fname, (unsigned long)off);
    return line;
}

static std::string who(const cta_t *c, uint32_t thr)
{
    char b[96];
    if (thr == 0 || thr > c->nthr)
        return "a thread of another warp";
    snprintf(b, sizeof(b), "thread %u (lane %u of warp %u)", thr - 1, (thr - 1) % 32, (thr - 1) / 32);
    return b;
}

[[noreturn]] static void report(const cta_t *c, const shalloc *a, uintptr_t addr, const thr_t *t, bool write,
                                const void *pc, uint32_t other, bool other_wrote, const void *other_pc)
{
    const size_t off = addr - (uintptr_t)a->p;
    const char *kind = write ? (other_wrote ? "write after write" : "write after read") : "read after write";
    fail(c,
         "a shared-memory race (%s) on %s[%zu] (byte %zu of the array of %zu declared at %s:%d): %s %s it at %s; "
         "%s %s it at %s, with no barrier between (nor a __syncwarp naming both)",
         kind, a->name, off / a->elem, off, a->bytes, a->at.file, a->at.line, who(c, other).c_str(),
         other_wrote ? "wrote" : "read", pc_str(other_pc).c_str(), who(c, t->lin + 1).c_str(),
         write ? "writes" : "reads", pc_str(pc).c_str());
}

/* ------------------------------------------------------------- checks */

/* 1 when an access by thread u (stored + 1) at time `when` is ordered
 * before one of thread t now: the same thread, a barrier since, or a
 * __syncwarp since naming both */
static inline bool ordered(const cta_t *c, uint32_t u, uint32_t when, const thr_t *t)
{
    if (u == t->lin + 1 || when < c->bar_seq)
        return true;
    const uint32_t ul = (u - 1) % 32, uw = (u - 1) / 32;
    return uw == t->warp && c->wpair[uw] != nullptr && c->wpair[uw][ul][t->lane] > when;
}

static void check_word(cta_t *c, const shalloc *a, race_word *e, uintptr_t addr, thr_t *t, bool write,
                       const void *pc)
{
    const uint32_t me = t->lin + 1, now = c->seq;
    if (e->w_thr != 0 && !ordered(c, e->w_thr, e->w_seq, t))
        report(c, a, addr, t, write, pc, e->w_thr, true, e->w_pc);
    const bool reads = e->r_thr != 0 && e->r_seq >= c->bar_seq;
    if (write) {
        if (reads) {
            if (e->r_warp == SEVERAL || e->r_warp != t->warp) {
                /* a reader of another warp: never ordered within a barrier
                 * interval (named when it is one of the two recorded) */
                if ((e->r_thr - 1) / 32 != t->warp)
                    report(c, a, addr, t, true, pc, e->r_thr, false, e->r_pc);
                if (e->r2_thr != 0 && (e->r2_thr - 1) / 32 != t->warp)
                    report(c, a, addr, t, true, pc, e->r2_thr, false, e->r2_pc);
                report(c, a, addr, t, true, pc, 0, false, nullptr);
            }
            const uint32_t others = e->r_mask & ~(1u << t->lane);
            if (others != 0) {
                /* lanes of this warp: each ordered by a __syncwarp with this
                 * lane after the latest read by a thread other than this */
                const uint32_t when = e->r_thr == me ? e->r2_seq : e->r_seq;
                for (unsigned l = 0; l < 32; l++)
                    if ((others >> l & 1u) && !ordered(c, 32 * t->warp + l + 1, when, t))
                        report(c, a, addr, t, true, pc, e->r_thr == me ? e->r2_thr : e->r_thr, false,
                               e->r_thr == me ? e->r2_pc : e->r_pc);
            }
        }
        e->w_thr = me;
        e->w_seq = now;
        e->w_pc = pc;
        e->r_thr = e->r2_thr = 0;
        e->r_mask = 0;
        return;
    }
    if (!reads) {
        e->r_thr = me;
        e->r_seq = now;
        e->r_pc = pc;
        e->r2_thr = 0;
        e->r_mask = 1u << t->lane;
        e->r_warp = t->warp;
        return;
    }
    if (e->r_thr != me) {
        e->r2_thr = e->r_thr;
        e->r2_seq = e->r_seq;
        e->r2_pc = e->r_pc;
    }
    e->r_thr = me;
    e->r_seq = now;
    e->r_pc = pc;
    if (e->r_warp != t->warp)
        e->r_warp = SEVERAL;
    else
        e->r_mask |= 1u << t->lane;
}

/* an access of n bytes at x in c's arena (hp_simt_rt.h SH_ARENA): the
 * array its slot holds, if any (a gap or a slot's tail past its array is
 * AddressSanitizer's and the index check's to report) */
__attribute__((noinline)) static void access_shared(cta_t *c, thr_t *t, uintptr_t x, size_t n, bool write,
                                                    const void *pc)
{
    const unsigned k = c->sh_slot[(x - (uintptr_t)c->arena) / SH_ALIGN];
    if (k == 0)
        return;
    shalloc *a = &c->sh[k - 1];
    const uintptr_t off = x - (uintptr_t)a->p;
    if (off >= a->bytes)
        return;
    size_t w1 = (off + n - 1) / 4;
    if (w1 >= (a->bytes + 3) / 4)
        w1 = (a->bytes + 3) / 4 - 1;   /* past the end: the index check's and AddressSanitizer's */
    for (size_t w = off / 4; w <= w1; w++)
        check_word(c, a, &a->words[w], x, t, write, pc);
    c->checked++;
}

/* an access of n bytes at p by the running lane, if any (the hooks' fast
 * path: most accesses are to global memory or the stack) */
static inline void access(const void *p, size_t n, bool write, const void *pc)
{
    thr_t *t = running;
    if (t == nullptr)
        return;
    cta_t *c = t->cta;
    const uintptr_t x = (uintptr_t)p;
    if (x - (uintptr_t)c->arena < SH_ARENA)
        access_shared(c, t, x, n, write, pc);
}

} /* namespace hp_simt */

extern "C" unsigned long long hp_simt_race_checked(void)
{
    return hp_simt::n_checked.load();
}

/* The hooks clang's -fsanitize-coverage=trace-loads,trace-stores calls
 * before each load and store of the kernels' code. */
#define HP_SIMT_HOOK(n, T)                                                          \
    extern "C" HP_SIMT_NOTSAN void __sanitizer_cov_load##n(T *p)                  \
    {                                                                               \
        hp_simt::access(p, n, false, __builtin_return_address(0));                  \
    }                                                                               \
    extern "C" HP_SIMT_NOTSAN void __sanitizer_cov_store##n(T *p)                 \
    {                                                                               \
        hp_simt::access(p, n, true, __builtin_return_address(0));                   \
    }
HP_SIMT_HOOK(1, uint8_t)
HP_SIMT_HOOK(2, uint16_t)
HP_SIMT_HOOK(4, uint32_t)
HP_SIMT_HOOK(8, uint64_t)
HP_SIMT_HOOK(16, void)
