/*
 * The stand-in NCCL's transport without MPI (tests/gpu/mock_nccl_shm.c,
 * MOCK_NCCL_SHM=1): the ranks of a communicator made by ncclGetUniqueId
 * and ncclCommInitRank move bytes through one POSIX shared-memory segment,
 * a byte channel per ordered pair of ranks.  Every wait is bounded
 * (MOCK_NCCL_TIMEOUT seconds, default 60) and ends at once when a peer's
 * process is gone, with a line on stderr naming the peer and the wait.
 */
#ifndef HP_TESTS_MOCK_NCCL_SHM_H
#define HP_TESTS_MOCK_NCCL_SHM_H

#include <stddef.h>

typedef struct mock_shm mock_shm_t;

/* One send or receive of a group: posted in order per peer and direction;
 * the sizes of a send and its receive must be equal. */
typedef struct {
    int         send;
    void       *buf;
    size_t      bytes;
    int         peer;
} mock_shm_op_t;

/* Results: as ncclResult_t's values */
enum { MOCK_SHM_OK = 0, MOCK_SHM_SYSTEM = 2, MOCK_SHM_ARG = 4, MOCK_SHM_USAGE = 5 };

/* Whether MOCK_NCCL_SHM=1 is set. */
int mock_shm_on(void);
/* A fresh rendezvous name into id[0..len). */
void mock_shm_unique_id(char *id, size_t len);
/* Join the communicator named by id as rank `rank` of `nranks`: waits
 * until every rank has joined.  NULL (after a line on stderr) when it
 * cannot. */
mock_shm_t *mock_shm_join(const char *id, int nranks, int rank);
void mock_shm_leave(mock_shm_t *w);
int mock_shm_rank(const mock_shm_t *w);
int mock_shm_size(const mock_shm_t *w);
/* Run ops[0..n) as one group: every send and receive progresses together,
 * the call returns when all are done. */
int mock_shm_run(mock_shm_t *w, const mock_shm_op_t *ops, int n);
/* The MOCK_NCCL_SHM_DROP and _FLIP mutations on a group's ops after it
 * ran: the receives from that rank zeroed, or one bit of each flipped. */
void mock_shm_drop(const mock_shm_t *w, const mock_shm_op_t *ops, int n);
/* Collectives of host memory (dt, op: ncclDataType_t, ncclRedOp_t): the
 * reduction in rank order, so every rank gets the same bits. */
int mock_shm_allreduce(mock_shm_t *w, const void *s, void *r, size_t count, int dt, int op);
int mock_shm_allgather(mock_shm_t *w, const void *s, void *r, size_t bytes);
int mock_shm_bcast(mock_shm_t *w, const void *s, void *r, size_t bytes, int root);

#endif
