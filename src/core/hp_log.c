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

HP_EXPORT const char *hipress_status_string(int status)
{
    switch (status) {
    case HIPRESS_OK:              return "success";
    case HIPRESS_ERR_INVALID:     return "invalid argument";
    case HIPRESS_ERR_NOMEM:       return "out of memory";
    case HIPRESS_ERR_MPI:         return "transport error (an MPI or NCCL call failed)";
    case HIPRESS_ERR_MESSAGE:     return "malformed compressed message";
    case HIPRESS_ERR_PEER:        return "failure on another rank";
    case HIPRESS_ERR_UNSUPPORTED: return "unsupported";
    case HIPRESS_ERR_STATE:       return "called at the wrong time";
    case HIPRESS_ERR_DEVICE:      return "cuda or nccl error";
    default:                      return "unknown status";
    }
}

HP_EXPORT const char *hipress_version(void)
{
    return PACKAGE_VERSION;
}
