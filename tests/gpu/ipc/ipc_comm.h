/*
 * The IPC stand-in's communicator as ipc_proto.c (rendezvous, ends) and
 * ipc_watch.c (descriptors, monitor) share it: the shared-memory segment's
 * layout and the rank's own state.  Private to those two files.
 */
#ifndef HP_TESTS_IPC_COMM_H
#define HP_TESTS_IPC_COMM_H

#include "ipc_proto.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#define HPI_MAGIC 0x6870697063763031ULL   /* "hpipcv01" */
#define HPI_ID_MAGIC "hpipc01"
#define HPI_RING 256                       /* descriptors kept per pair and side */
#define HPI_SPLITS 4
#define HPI_MAX_SLOTS 8
#define HPI_FLAG_STRIDE 64
#define HPI_FLAGS_BYTES (2 * HPI_MAX_RANKS * HPI_MAX_SLOTS * HPI_FLAG_STRIDE)
#define HPI_EVENTS 8

typedef struct {
    _Atomic uint32_t seq;   /* the pair's operation number, 1-based; 0 while written */
    uint8_t  kind, dtype;
    int16_t  op;
    int32_t  root;
    uint32_t div;
    uint64_t count, bytes, call;
} hpi_desc_t;

typedef struct {
    _Atomic uint64_t posted;
    char             pad[56];
    hpi_desc_t       d[HPI_RING];
} hpi_side_t;

typedef struct {
    _Atomic int      state;      /* 1: joined, its block exported; 2: the peers' blocks mapped */
    _Atomic int      left;       /* destroyed the communicator */
    _Atomic int      aborted;
    _Atomic int      failed;     /* its sticky ncclResult_t */
    int              pid;
    int              device;
    uint64_t         block_addr; /* in its own process: same-process peers use it */
    hpi_handle_t     block;
    char             msg[512];
    struct {
        _Atomic uint64_t seq;
        int              color, key;
    } split[HPI_SPLITS];
} hpi_rank_t;

typedef struct {
    _Atomic uint64_t magic;      /* set by the creator once chunk and slots are in */
    _Atomic int      nranks;     /* claimed by the first rank to come */
    uint32_t         slots;
    uint64_t         chunk;
    hpi_rank_t       rank[HPI_MAX_RANKS];
    hpi_side_t       side[HPI_MAX_RANKS][HPI_MAX_RANKS][2];   /* [sender][receiver][0 sender, 1 receiver] */
} hpi_shm_t;

struct ncclComm {
    char               name[64];
    int                n, me, device, blocking, ready, opened;
    ncclResult_t       err;
    char               errmsg[512];
    pthread_mutex_t    mu;
    hpi_shm_t         *shm;
    void              *ctx;
    char              *peer[HPI_MAX_RANKS];   /* blocks; mine at [me] */
    size_t             block_bytes;
    uint32_t           slots;
    size_t             chunk;
    uint64_t           sent[HPI_MAX_RANKS], rcvd[HPI_MAX_RANKS];
    double             post_t[2][HPI_MAX_RANKS][HPI_RING];
    void              *side_stream;
    void              *send_stream;   /* a group of sends and receives: its sends (ipc_sched.c) */
    void              *ev[HPI_EVENTS], *ev_stream[HPI_EVENTS];
    int                nev;
    uint64_t           splits, shrinks;
    unsigned long long calls;
    double             t_join;
    struct ncclComm   *next;
};

static inline double hpi_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline void hpi_nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static inline double hpi_env_num(const char *name, double dflt)
{
    const char *s = getenv(name);
    char *end;
    double v;
    if (s == NULL || *s == '\0')
        return dflt;
    v = strtod(s, &end);
    if (*end == 'K' || *end == 'k')
        v *= 1024;
    else if (*end == 'M' || *end == 'm')
        v *= 1048576;
    return v > 0 ? v : dflt;
}

static inline double hpi_timeout(void)
{
    return hpi_env_num("HP_IPC_TIMEOUT", 120);
}

/* the monitor's list: a ready communicator is watched until its end */
void hpi_watch_add(hpi_comm_t *c);
void hpi_watch_remove(hpi_comm_t *c);

#endif
