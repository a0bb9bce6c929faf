/* Levelled, rank-prefixed logging to stderr. */
#include "hp_core.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int hp_log_level = HP_LOG_WARN;
int hp_log_rank = -1;

void hp_log_emit(int level, const char *file, int line, const char *fmt, ...)
{
    static const char *names[] = {"", "warn", "info", "trace"};
    char host[64] = "?";
    char msg[1024];
    va_list ap;

    gethostname(host, sizeof(host) - 1);
    host[sizeof(host) - 1] = '\0';
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (level >= HP_LOG_TRACE) {
        const char *base = strrchr(file, '/');
        fprintf(stderr, "hipress %s:%d:%d %s %s:%d %s\n", host, (int)getpid(), hp_log_rank,
                names[level], base ? base + 1 : file, line, msg);
    } else {
        fprintf(stderr, "hipress %s:%d:%d %s %s\n", host, (int)getpid(), hp_log_rank,
                names[level], msg);
    }
}

void *hp_aligned_alloc(size_t bytes)
{
    void *p = NULL;
    if (bytes == 0)
        bytes = 64;
    if (posix_memalign(&p, 64, (bytes + 63) & ~(size_t)63) != 0)
        return NULL;
    return p;
}

static const char *class_string(int cls)
{
    switch (cls) {
    case HIPRESS_OK:              return "success";
    case HIPRESS_ERR_INVALID:     return "invalid argument";
    case HIPRESS_ERR_NOMEM:       return "out of memory";
    case HIPRESS_ERR_MPI:         return "an MPI call failed";
    case HIPRESS_ERR_MESSAGE:     return "malformed compressed message";
    case HIPRESS_ERR_PEER:        return "failure on another rank";
    case HIPRESS_ERR_UNSUPPORTED: return "unsupported";
    case HIPRESS_ERR_STATE:       return "called at the wrong time";
    case HIPRESS_ERR_DEVICE:      return "a CUDA call failed";
    case HIPRESS_ERR_NCCL:        return "an NCCL call failed";
    default:                      return "unknown status";
    }
}

HP_EXPORT int hipress_status_class(int status)
{
    return HP_ST_CLASS(status);
}

HP_EXPORT int hipress_status_cause(int status)
{
    return HP_ST_CAUSE(status);
}

HP_EXPORT const char *hipress_status_string(int status)
{
    static __thread char buf[96];
    static const char *what[] = {[-HIPRESS_ERR_MPI] = "mpi error", [-HIPRESS_ERR_DEVICE] = "CUresult",
                                 [-HIPRESS_ERR_NCCL] = "ncclResult_t"};
    int cls = HP_ST_CLASS(status), cause = HP_ST_CAUSE(status);
    if (cause == 0 || cls < HIPRESS_ERR_NCCL || what[-cls] == NULL)
        return class_string(cls);
    snprintf(buf, sizeof(buf), "%s (%s %d)", class_string(cls), what[-cls], cause);
    return buf;
}

HP_EXPORT const char *hipress_version(void)
{
    return PACKAGE_VERSION;
}
