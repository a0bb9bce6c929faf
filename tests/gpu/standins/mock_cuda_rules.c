/*
 * The documented rules the stand-in driver keeps where a real driver gives
 * no error but a GPU would compute garbage (see mock_cuda.c): a use of
 * stream-ordered memory after its free, or on a stream not ordered after
 * its allocation (mock_cuda_mem.c keeps the order).  What breaks one stops the process
 * (MOCK_RULE_EXIT) with a line naming both sides: the entry that uses the
 * memory (its stream, its number there, what it is) and what freed it.
 * doc/dev/standins.md lists each rule with where the real API documents it.
 */
#include "mock_cuda_int.h"
#include <dlfcn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void mock_rule_broken(const char *fmt, ...)
{
    char line[2048];
    int k = snprintf(line, sizeof(line), "mock_cuda rank %d (pid %d): ", mock_rank(), (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + k, sizeof(line) - (size_t)k - 1, fmt, ap);
    va_end(ap);
    /* one write: the ranks' lines do not interleave */
    strcat(line, "\n");
    fflush(stdout);
    fflush(stderr);
    if (write(2, line, strlen(line)) < 0)
        _exit(MOCK_RULE_EXIT);
    _exit(MOCK_RULE_EXIT);
}

/* " (called from F)": the function that called the stand-in, when the
 * dynamic linker can name it. */
void mock_caller(const void *ret, char *buf, size_t len)
{
    Dl_info di;
    buf[0] = '\0';
    if (ret != NULL && dladdr(ret, &di) != 0 && di.dli_sname != NULL)
        snprintf(buf, len, " (called from %s)", di.dli_sname);
}

/* The entry this thread runs (the executor's, or a waiting host thread's),
 * for the lines of a broken rule. */
static __thread const mstream_t *run_s;
static __thread const op_t *run_o;

void mock_run_set(const mstream_t *s, const op_t *o)
{
    run_s = s;
    run_o = o;
}

static void op_describe(const mstream_t *s, const op_t *o, char *buf, size_t len)
{
    char what[160];
    switch (o->kind) {
    case OP_COPY: snprintf(what, sizeof(what), "a copy of %zu bytes from %p to %p", o->n, o->src, o->dst); break;
    case OP_MEMSET: snprintf(what, sizeof(what), "a set of %zu bytes at %p", o->n, o->dst); break;
    case OP_FN: snprintf(what, sizeof(what), "a kernel (host function %p)", (void *)(uintptr_t)o->fn); break;
    case OP_WAIT: snprintf(what, sizeof(what), "an event wait"); break;
    case OP_EXT: o->xo->describe(o->xarg, what, sizeof(what)); break;
    case OP_FREE: snprintf(what, sizeof(what), "cuMemFreeAsync(%p)", o->dst); break;
    case OP_MARK: snprintf(what, sizeof(what), "an allocation"); break;
    case OP_WAIT_VALUE: snprintf(what, sizeof(what), "cuStreamWaitValue32 on %p", o->dst); break;
    default: snprintf(what, sizeof(what), "cuStreamWriteValue32 to %p", o->dst); break;
    }
    snprintf(buf, len, "stream %d's entry #%llu, %s", s->id, o->seq, what);
}

void mock_running_entry(const mstream_t **s_p, unsigned long long *seq_p)
{
    *s_p = run_o != NULL ? run_s : NULL;
    *seq_p = run_o != NULL ? run_o->seq : 0;
}

void mock_running(char *buf, size_t len)
{
    if (run_o != NULL)
        op_describe(run_s, run_o, buf, len);
    else
        snprintf(buf, len, "the host (not a stream's entry)");
}

static int overlaps(const void *a, size_t an, const void *p, size_t n)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)p;
    return an > 0 && n > 0 && x < y + n && y < x + an;
}

int mock_pending_use(const void *p, size_t n, char *buf, size_t len)
{
    int found = 0;
    pthread_mutex_lock(&qlock);
    FOR_STREAMS(s) {
        for (const op_t *o = s->head; o != NULL && !found; o = o->next) {
            int k = o->kind;
            found = ((k == OP_COPY || k == OP_MEMSET) && overlaps(o->dst, o->n, p, n)) ||
                    (k == OP_COPY && overlaps(o->src, o->n, p, n)) ||
                    ((k == OP_WAIT_VALUE || k == OP_WRITE_VALUE) && overlaps(o->dst, 4, p, n)) ||
                    (k == OP_FREE && o->dst == p) ||
                    (k == OP_EXT && o->xo->uses != NULL && o->xo->uses(o->xarg, p, n));
            if (found) {
                char what[220];
                op_describe(s, o, what, sizeof(what));
                snprintf(buf, len, "%s, uses it and %s", what, s->running && o == s->head ? "is running" : "has not run");
            }
        }
        if (found)
            break;
    }
    pthread_mutex_unlock(&qlock);
    return found;
}

