/*
 * The SIMT runtime's end of a run that broke a rule (hp_simt_rt.h fail):
 * the kernel, its launch, the seed and the CTA, then the message, then
 * abort().  Its own file, used by the scheduler (hp_simt.cc) and the race
 * detector (hp_simt_race.cc) alike.
 */
#include "hp_simt_rt.h"
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace hp_simt {

static void dim_str(char *b, size_t n, dim3 d)
{
    if (d.y == 1 && d.z == 1)
        snprintf(b, n, "%u", d.x);
    else
        snprintf(b, n, "(%u,%u,%u)", d.x, d.y, d.z);
}

static std::string where(const grid_t *g)
{
    char gs[48], bs[48], b[512];
    dim_str(gs, sizeof(gs), g->li.grid);
    dim_str(bs, sizeof(bs), g->li.block);
    snprintf(b, sizeof(b), "%s<<<%s, %s>>> (launched at %s:%d, seed %llu, launch %llu)", g->li.name, gs, bs,
             g->li.file, g->li.line, (unsigned long long)g->seed, (unsigned long long)g->ordinal);
    return b;
}

void fail(const cta_t *c, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (c != nullptr)
        fprintf(stderr, "hp_simt: %s, CTA %llu: %s\n", where(c->g).c_str(), c->id, msg);
    else
        fprintf(stderr, "hp_simt: %s\n", msg);
    fflush(stderr);
    abort();
}

} /* namespace hp_simt */
