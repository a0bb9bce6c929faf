/*
 * The SIMT runtime (hp_simt.h): grids run CTA by CTA, a few CTAs at a time,
 * each CUDA thread a fiber (hp_simt_fiber.h); the scheduler picks a warp at
 * random (seeded) among those with a thread ready and runs its ready lanes
 * in a random order, each until it blocks (a barrier, a warp intrinsic) or
 * ends.  Every block is checked against the strict rules of hp_simt.h when
 * it happens; a rule broken ends the process with the kernel, the CTA, the
 * threads and the source lines.  Shared arrays lie in an arena per CTA
 * (hp_simt_rt.h SH_ARENA), filled with seeded garbage.  The scheduler's bookkeeping is
 * invisible to ThreadSanitizer; barriers and __syncwarp are told to it as
 * release/acquire pairs, and nothing else (shuffles and votes order no
 * memory), so it sees the kernels' shared-memory races.
 */
#include "hp_simt_rt.h"
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace hp_simt {

__thread const coords *cur;

static const size_t SHARED_MAX = 48 << 10;   /* static shared memory of a CTA */

#if HP_SIMT_ASAN
#include <sanitizer/asan_interface.h>
#define SH_POISON(p, n) __asan_poison_memory_region((p), (n))
#define SH_UNPOISON(p, n) __asan_unpoison_memory_region((p), (n))
#else
#define SH_POISON(p, n) ((void)0)
#define SH_UNPOISON(p, n) ((void)0)
#endif

/* ------------------------------------------------------------ reports */

static std::string site_str(const site &s)
{
    char b[400];
    snprintf(b, sizeof(b), "%s at %s:%d", s.what, s.file, s.line);
    return b;
}

/* the threads of c for which pick(t) holds, as ranges */
template <class F>
static std::string threads(const cta_t *c, F pick)
{
    std::string out;
    char b[64];
    for (unsigned i = 0; i < c->nthr;) {
        if (!pick(&c->th[i])) {
            i++;
            continue;
        }
        unsigned j = i;
        while (j + 1 < c->nthr && pick(&c->th[j + 1]))
            j++;
        snprintf(b, sizeof(b), i == j ? "%s%u" : "%s%u-%u", out.empty() ? "" : ",", i, j);
        out += b;
        i = j + 1;
    }
    return out.empty() ? "none" : out;
}

static inline bool same_site(const site &a, const site &b)
{
    return a.line == b.line && (a.file == b.file || strcmp(a.file, b.file) == 0) &&
           (a.what == b.what || strcmp(a.what, b.what) == 0);
}

/* --------------------------------------------------- thread transitions */

/* (the scheduler's side only) */
static void set_ready(cta_t *c, thr_t *t)
{
    t->state = T_READY;
    if (c->wready[t->warp]++ == 0) {
        c->rpos[t->warp] = (int)c->g->ready.size();
        c->g->ready.emplace_back(c, t->warp);
    }
}

static void unready(cta_t *c, thr_t *t)
{
    if (--c->wready[t->warp] == 0) {
        auto &r = c->g->ready;
        const int at = c->rpos[t->warp];
        r[at] = r.back();
        r[at].first->rpos[r[at].second] = at;
        r.pop_back();
        c->rpos[t->warp] = -1;
    }
}

static unsigned warp_lanes(const cta_t *c, unsigned w)
{
    unsigned left = c->nthr - 32 * w;
    return left < 32 ? left : 32;
}

/* t's warp-mates that wait at a warp intrinsic naming t's lane */
static thr_t *waiting_on(cta_t *c, const thr_t *t)
{
    if (c->wwait[t->warp] == 0)
        return nullptr;
    for (unsigned l = 0; l < warp_lanes(c, t->warp); l++) {
        thr_t *u = &c->th[32 * t->warp + l];
        if (u != t && u->state == T_WARP && (u->mask >> t->lane & 1u))
            return u;
    }
    return nullptr;
}

static void on_exit(cta_t *c, thr_t *t)
{
    thr_t *u;
    c->ndone++;
    if (c->nbar > 0)
        fail(c, "thread %u ended while threads %s wait at %s: a barrier not every thread reaches", t->lin,
             threads(c, [](const thr_t *x) { return x->state == T_BAR; }).c_str(), site_str(c->bar_at).c_str());
    if ((u = waiting_on(c, t)) != nullptr)
        fail(c, "thread %u (lane %u of warp %u) ended while lane %u waits for it at %s (mask 0x%08x)", t->lin,
             t->lane, t->warp, u->lane, site_str(u->at).c_str(), u->mask);
}

static void on_bar(cta_t *c, thr_t *t)
{
    thr_t *u;
    if (c->nbar == 0) {
        c->bar_at = t->at;
        c->bar_kind = t->kind;
    } else if (!same_site(c->bar_at, t->at)) {
        const site a = c->bar_at;
        fail(c, "threads meet at different barriers: %s by threads %s, %s by thread %u", site_str(a).c_str(),
             threads(c, [&](const thr_t *x) { return x->state == T_BAR && same_site(x->at, a); }).c_str(),
             site_str(t->at).c_str(), t->lin);
    }
    c->nbar++;
    if (c->ndone > 0)
        fail(c, "%s reached by thread %u after threads %s ended: a barrier not every thread reaches",
             site_str(t->at).c_str(), t->lin, threads(c, [](const thr_t *x) { return x->state == T_DONE; }).c_str());
    if ((u = waiting_on(c, t)) != nullptr)
        fail(c, "thread %u waits at %s while lane %u of its warp waits for it at %s (mask 0x%08x)", t->lin,
             site_str(t->at).c_str(), u->lane, site_str(u->at).c_str(), u->mask);
    if (c->nbar < c->nthr)
        return;
    unsigned cnt = 0;
    for (unsigned i = 0; i < c->nthr; i++)
        cnt += c->th[i].pred != 0;
    uint64_t r = c->bar_kind == BAR_OR ? cnt > 0 : c->bar_kind == BAR_AND ? cnt == c->nthr : cnt;
    c->nbar = 0;
    c->bar_gen++;
    race_barrier(c);
    for (unsigned i = 0; i < c->nthr; i++) {
        c->th[i].res = r;
        set_ready(c, &c->th[i]);
    }
}

static unsigned src_lane(const thr_t *t)
{
    const unsigned w = (unsigned)t->width, seg = t->lane & ~(w - 1), in = t->lane & (w - 1);
    switch (t->kind) {
    case W_IDX: return seg + ((unsigned)t->arg & (w - 1));
    case W_UP: return t->arg >= 0 && in >= (unsigned)t->arg ? t->lane - (unsigned)t->arg : t->lane;
    case W_DOWN: return t->arg >= 0 && in + (unsigned)t->arg < w ? t->lane + (unsigned)t->arg : t->lane;
    default: {
        unsigned s = t->lane ^ (unsigned)t->arg;
        return s >= seg && s < seg + w ? s : t->lane;
    }
    }
}

static void on_warp(cta_t *c, thr_t *t)
{
    const unsigned base = 32 * t->warp, nl = warp_lanes(c, t->warp);
    const unsigned exist = nl == 32 ? 0xffffffffu : (1u << nl) - 1u;
    c->wwait[t->warp]++;
    if (!(t->mask >> t->lane & 1u))
        fail(c, "lane %u of warp %u (thread %u) calls %s with mask 0x%08x, which does not name it", t->lane, t->warp,
             t->lin, site_str(t->at).c_str(), t->mask);
    if (t->mask & ~exist)
        fail(c, "%s: mask 0x%08x names lanes past the block's end (warp %u has %u lanes; thread %u)",
             site_str(t->at).c_str(), t->mask, t->warp, nl, t->lin);
    if (t->width < 1 || t->width > 32 || (t->width & (t->width - 1)))
        fail(c, "%s: width %d (thread %u)", site_str(t->at).c_str(), t->width, t->lin);
    for (unsigned l = 0; l < nl; l++) {
        thr_t *u = &c->th[base + l];
        if (!(t->mask >> l & 1u) || u == t)
            continue;
        if (u->state == T_DONE)
            fail(c, "lane %u (thread %u) waits at %s (mask 0x%08x) for lane %u, which ended", t->lane, t->lin,
                 site_str(t->at).c_str(), t->mask, l);
        if (u->state == T_BAR)
            fail(c, "lane %u (thread %u) waits at %s (mask 0x%08x) for lane %u, which waits at %s", t->lane, t->lin,
                 site_str(t->at).c_str(), t->mask, l, site_str(u->at).c_str());
        if (u->state == T_WARP && (!same_site(u->at, t->at) || u->kind != t->kind || u->mask != t->mask))
            fail(c, "lanes of warp %u meet at different warp intrinsics: lane %u at %s (mask 0x%08x), lane %u at %s "
                 "(mask 0x%08x)", t->warp, t->lane, site_str(t->at).c_str(), t->mask, l, site_str(u->at).c_str(),
                 u->mask);
        if (u->state != T_WARP)
            return;   /* to come */
    }
    /* every lane named is here: the collective */
    uint64_t ballot = 0;
    for (unsigned l = 0; l < nl; l++)
        if (t->mask >> l & 1u)
            ballot |= (uint64_t)(c->th[base + l].val != 0) << l;
    for (unsigned l = 0; l < nl; l++) {
        thr_t *u = &c->th[base + l];
        if (!(t->mask >> l & 1u))
            continue;
        if (u->kind == W_BALLOT) {
            u->res = ballot;
        } else if (u->kind == W_SYNC) {
            u->res = 0;
        } else {
            unsigned s = src_lane(u);
            if (!(t->mask >> s & 1u))
                fail(c, "lane %u (thread %u) reads lane %u, outside mask 0x%08x, at %s", l, u->lin, s, t->mask,
                     site_str(u->at).c_str());
            u->res = c->th[base + s].val;
        }
    }
    if (t->kind == W_SYNC) {
        c->wgen[t->warp]++;
        race_syncwarp(c, t->warp, t->mask);
    }
    for (unsigned l = 0; l < nl; l++)
        if (t->mask >> l & 1u) {
            set_ready(c, &c->th[base + l]);
            c->wwait[t->warp]--;
        }
}

/* ------------------------------------------------ the threads' side */

HP_SIMT_NOTSAN static thr_t *self(const char *what)
{
    fiber_t *f = fiber_running();
    if (f == nullptr)
        fail(nullptr, "%s outside a kernel", what);
    return f->t;
}

/* every fiber's body: the thread's kernel */
HP_SIMT_NOTSAN static void thread_body(fiber_t *f)
{
    thr_t *t = f->t;
    cta_t *c = t->cta;
    if (c->ustart[t->unit]++ == 0)
        HP_SIMT_ACQUIRE(&c->sync_start);
    c->g->run(c->g->closure);
    t->state = T_DONE;
    if (++c->uend[t->unit] == c->usize[t->unit])
        HP_SIMT_RELEASE(&c->sync_end);
}

HP_SIMT_NOTSAN int barrier(site s, int kind, int pred)
{
    thr_t *t = self(s.what);
    cta_t *c = t->cta;
    const unsigned gen = c->bar_gen, u = t->unit;
    t->at = s;
    t->kind = kind;
    t->pred = pred;
    t->state = T_BAR;
    if (++c->uarr[u] == c->usize[u]) {
        c->uarr[u] = 0;
        HP_SIMT_RELEASE(&c->sync_bar[gen & 1]);
    }
    fiber_yield(t->f);
    if (c->uacq[u] != gen + 1) {
        c->uacq[u] = gen + 1;
        HP_SIMT_ACQUIRE(&c->sync_bar[gen & 1]);
    }
    return (int)t->res;
}

HP_SIMT_NOTSAN uint64_t warp_op(site s, int op, unsigned mask, uint64_t val, int arg, int width)
{
    thr_t *t = self(s.what);
    cta_t *c = t->cta;
    const unsigned gen = c->wgen[t->warp] & 1;
    t->at = s;
    t->kind = op;
    t->mask = mask;
    t->val = val;
    t->arg = arg;
    t->width = width;
    t->state = T_WARP;
    /* (lanes of a warp that are one ThreadSanitizer thread need nothing) */
    if (op == W_SYNC && c->usize[t->unit] == 1)
        HP_SIMT_RELEASE(&c->sync_warp[t->warp][gen]);
    fiber_yield(t->f);
    if (op == W_SYNC && c->usize[t->unit] == 1)
        HP_SIMT_ACQUIRE(&c->sync_warp[t->warp][gen]);
    (void)gen;
    return t->res;
}

void unmasked(site s)
{
    thr_t *t = self(s.what);
    fail(t->cta, "thread %u calls %s, a warp intrinsic without a mask (undefined since Volta; use the _sync form)",
         t->lin, site_str(s).c_str());
}

HP_SIMT_NOTSAN void *shared_get(const void *tag, size_t elem, size_t n, const char *name, site s)
{
    thr_t *t = self("a shared array");
    cta_t *c = t->cta;
    const size_t bytes = elem * n;
    shalloc *a = nullptr;
    for (unsigned i = 0; i < c->nsh && a == nullptr; i++)
        if (c->sh[i].tag == tag)
            a = &c->sh[i];
    if (a == nullptr) {
        if (c->shbytes + bytes > SHARED_MAX)
            fail(c, "shared array %s (%s) takes the CTA's static shared memory past %zu bytes", name,
                 site_str(s).c_str(), SHARED_MAX);
        if (c->nsh == SH_MAX_ARRAYS)
            fail(c, "shared array %s (%s): more than %d shared arrays", name, site_str(s).c_str(), SH_MAX_ARRAYS);
        if (c->arena == nullptr) {
            if ((c->arena = (char *)malloc(SH_ARENA)) == nullptr)
                fail(c, "out of memory for shared memory");
            SH_POISON(c->arena, SH_ARENA);
        }
        /* (the gaps fit: at most SH_ALIGN - 1 + SH_ALIGN bytes an array) */
        const size_t off = (c->arena_used + SH_ALIGN - 1) & ~(size_t)(SH_ALIGN - 1);
        a = &c->sh[c->nsh++];
        a->p = c->arena + off;
        c->arena_used = off + bytes + SH_ALIGN;
        SH_UNPOISON(a->p, bytes);
        for (size_t k = off / SH_ALIGN; k * SH_ALIGN < off + bytes; k++)
            c->sh_slot[k] = (uint8_t)c->nsh;
        a->tag = tag;
        a->bytes = bytes;
        a->elem = elem;
        a->name = name;
        a->at = s;
        c->shbytes += bytes;
        /* garbage: what a CTA finds in shared memory it has not written */
        for (size_t i = 0; i < bytes; i += 8) {
            uint64_t r = next(&c->rng);
            memcpy((char *)a->p + i, &r, bytes - i < 8 ? bytes - i : 8);
        }
        race_array(c, a);
        HP_SIMT_RELEASE(a->p);
    }
    HP_SIMT_ACQUIRE(a->p);
    return a->p;
}

void index_fail(const char *name, long long i, size_t n, const char *file, int line)
{
    thr_t *t = self("a shared array");
    fail(t->cta, "shared array %s[%zu] (declared at %s:%d) indexed at %lld by thread %u", name, n, file, line, i,
         t->lin);
}

/* --------------------------------------------------------- scheduler */

/* ThreadSanitizer's threads for the fibers, kept for the next CTAs */
static thread_local std::vector<void *> *tsan_pool;

static void *tsan_get(void)
{
    void *p;
    if (tsan_pool == nullptr)
        tsan_pool = new std::vector<void *>();
    if (tsan_pool->empty())
        return tsan_context();
    p = tsan_pool->back();
    tsan_pool->pop_back();
    return p;
}

static void tsan_put(void *p)
{
    tsan_pool->push_back(p);
}

static void cta_start(grid_t *g, cta_t *c, unsigned long long id)
{
    const dim3 b = g->li.block, gd = g->li.grid;
    memset((void *)c, 0, sizeof(*c));
    for (int w = 0; w < 32; w++) {
        c->rpos[w] = -1;
        c->prio[w] = (uint32_t)next(&g->rng);
    }
    c->g = g;
    c->id = id;
    c->nthr = b.x * b.y * b.z;
    c->nwarps = (c->nthr + 31) / 32;
    c->th = new thr_t[c->nthr]();
    c->rng = mix(g->seed ^ mix(g->ordinal) ^ (id << 1));
    for (unsigned u = 0; u < (c->nthr + g->unit - 1) / g->unit; u++) {
        c->tsan[u] = tsan_get();
        c->usize[u] = c->nthr - u * g->unit < g->unit ? c->nthr - u * g->unit : g->unit;
    }
    for (unsigned i = 0; i < c->nthr; i++) {
        thr_t *t = &c->th[i];
        t->lin = i;
        t->lane = i % 32;
        t->warp = i / 32;
        t->unit = i / g->unit;
        t->c.tid = uint3{i % b.x, i / b.x % b.y, i / (b.x * b.y)};
        t->c.bid = uint3{(unsigned)(id % gd.x), (unsigned)(id / gd.x % gd.y),
                         (unsigned)(id / ((unsigned long long)gd.x * gd.y))};
        t->c.bdim = b;
        t->c.gdim = gd;
        t->cta = c;
        t->f = fiber_get(thread_body);
        t->f->t = t;
        set_ready(c, t);
    }
    HP_SIMT_RELEASE(&c->sync_start);
}

static void cta_end(cta_t *c)
{
    HP_SIMT_ACQUIRE(&c->sync_end);
    race_end(c);
    if (c->arena != nullptr) {
        SH_UNPOISON(c->arena, SH_ARENA);
        free(c->arena);
    }
    for (unsigned i = 0; i < c->nthr; i++)
        fiber_put(c->th[i].f);
    for (unsigned u = 0; u < (c->nthr + c->g->unit - 1) / c->g->unit; u++)
        tsan_put(c->tsan[u]);
    delete[] c->th;
    c->th = nullptr;
}

/* (cur is read by the kernels: written where ThreadSanitizer does not look) */
HP_SIMT_NOTSAN static void set_cur(const coords *c)
{
    cur = c;
}

static void run_lane(cta_t *c, thr_t *t)
{
    unready(c, t);
    set_cur(&t->c);
    race_lane(t);
    fiber_run(t->f, c->tsan[t->unit]);
    race_lane(nullptr);
    set_cur(nullptr);
    switch (t->state) {
    case T_DONE: on_exit(c, t); break;
    case T_BAR: on_bar(c, t); break;
    case T_WARP: on_warp(c, t); break;
    default: fail(c, "thread %u yielded while ready", t->lin);
    }
}

[[noreturn]] static void deadlock(cta_t *act, unsigned nact)
{
    std::string s;
    for (unsigned k = 0; k < nact; k++) {
        cta_t *c = &act[k];
        if (c->th == nullptr)
            continue;
        s += "\n  CTA " + std::to_string(c->id) + ":";
        for (unsigned i = 0; i < c->nthr; i++) {
            const thr_t *t = &c->th[i];
            if (t->state == T_DONE)
                continue;
            bool first = true;
            for (unsigned j = 0; j < i; j++)
                if (c->th[j].state == t->state && same_site(c->th[j].at, t->at))
                    first = false;
            if (!first)
                continue;
            s += "\n    threads " +
                 threads(c, [&](const thr_t *x) { return x->state == t->state && same_site(x->at, t->at); }) +
                 " wait at " + site_str(t->at);
        }
    }
    fail(&act[0], "a wait cycle: no thread can run%s", s.c_str());
}

void run_grid(grid_t *g)
{
    const dim3 gd = g->li.grid;
    const unsigned long long ncta = (unsigned long long)gd.x * gd.y * gd.z;
    unsigned long long started = 0;
    unsigned k = 1 + (unsigned)(next(&g->rng) % 4), nact = 0;
    std::vector<cta_t> act;
    thr_t *lanes[32];

    if (fiber_running() != nullptr)
        fail(nullptr, "%s launched from inside a kernel", g->li.name);
    /* half the grids in a uniformly random order, half skewed: warps of
     * random priority, the highest ready one always first, so some run far
     * ahead of others (of their CTA and of the CTAs beside it) */
    g->skew = (int)(next(&g->rng) & 1);
    {
        const unsigned nthr = g->li.block.x * g->li.block.y * g->li.block.z;
        g->unit = nthr <= TSAN_LANES ? 1 : 32;
#if HP_SIMT_TSAN
        const unsigned units = (nthr + g->unit - 1) / g->unit;
        if (k * units > TSAN_MAX)
            k = TSAN_MAX / units > 0 ? TSAN_MAX / units : 1;
#endif
        act.resize(k);
    }
    for (;;) {
        /* keep k CTAs in flight */
        for (unsigned i = 0; i < k && started < ncta; i++)
            if (act[i].th == nullptr) {
                cta_start(g, &act[i], started++);
                nact++;
            }
        if (nact == 0)
            break;
        if (g->ready.empty())
            deadlock(act.data(), k);
        auto pick = g->ready[next(&g->rng) % g->ready.size()];
        if (g->skew)
            for (const auto &r : g->ready)
                if (r.first->prio[r.second] > pick.first->prio[pick.second])
                    pick = r;
        cta_t *c = pick.first;
        unsigned n = 0;
        for (unsigned l = 0; l < warp_lanes(c, pick.second); l++) {
            thr_t *t = &c->th[32 * pick.second + l];
            if (t->state == T_READY)
                lanes[n++] = t;
        }
        for (unsigned i = n; i > 1; i--) {
            unsigned j = (unsigned)(next(&g->rng) % i);
            thr_t *x = lanes[i - 1];
            lanes[i - 1] = lanes[j];
            lanes[j] = x;
        }
        for (unsigned i = 0; i < n; i++)
            if (lanes[i]->state == T_READY)
                run_lane(c, lanes[i]);
        if (c->ndone == c->nthr) {
            cta_end(c);
            nact--;
        }
    }
}

} /* namespace hp_simt */

extern "C" void hp_simt_misaligned(const void *p, unsigned bytes)
{
    using namespace hp_simt;
    thr_t *t = self("a word access");
    fail(t->cta, "thread %u accesses %u bytes at %p, not %u-byte aligned (a fault on the device)", t->lin, bytes, p,
         bytes);
}
