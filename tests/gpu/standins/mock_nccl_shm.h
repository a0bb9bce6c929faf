/*
 * The stand-in NCCL's transport (tests/gpu/standins/mock_nccl_shm.c): the ranks of a
 * communicator share one POSIX shared-memory segment with, per ordered pair
 * of ranks (src, dst), a byte channel and the record of which transfers
 * each side has reached (with their descriptions, so a mismatch names both
 * sides).  Nothing here blocks except the rendezvous of the ranks.
 */
#ifndef HP_TESTS_MOCK_NCCL_SHM_H
#define HP_TESTS_MOCK_NCCL_SHM_H

#include <stddef.h>
#include <stdint.h>

typedef struct mock_shm mock_shm_t;

/* Results: as ncclResult_t's values */
enum { MOCK_SHM_OK = 0, MOCK_SHM_SYSTEM = 2, MOCK_SHM_ARG = 4, MOCK_SHM_USAGE = 5 };

/* What one side of a transfer belongs to: the operation (its kind, counts,
 * type, reduction or root) and its number among the rank's operations on
 * the communicator.  Two sides match when a send meets a receive of the
 * same count and type, or a collective the same collective. */
enum { MOCK_D_SEND = 1, MOCK_D_RECV, MOCK_D_ALLREDUCE, MOCK_D_ALLGATHER, MOCK_D_BCAST, MOCK_D_ALLTOALL, MOCK_D_GATHER,
       MOCK_D_SCATTER };
typedef struct {
    int32_t  kind, dt, op, root;
    uint64_t count, bytes;
    uint32_t opno, rank;
} mock_desc_t;

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
int mock_shm_pid(const mock_shm_t *w, int rank);
/* The communicator's number (the same on every rank). */
uint64_t mock_shm_uid(const mock_shm_t *w);

/* Side `send` (1: src's, 0: dst's) of transfer n (from 1) on the pair
 * (src, dst) reached, described by d. */
void mock_shm_reach(mock_shm_t *w, int src, int dst, int send, uint64_t n, const mock_desc_t *d);
/* Whether that side has reached transfer n; its description then in *d_p
 * (may be NULL). */
int mock_shm_reached(mock_shm_t *w, int src, int dst, int send, uint64_t n, mock_desc_t *d_p);
/* The issue-time record of the NCCL calls (mock_nccl_seq.c compares the
 * ranks'): side `send` of transfer n on (src, dst) issued, described by d,
 * after `colls` collectives of its rank; whether the other side's is
 * there (and what).  A rank's k-th collective (from 1), after it had
 * issued cnt[p] transfers to and cnt[nranks + p] from each rank p; its
 * end, after `colls` collectives.  The _of functions answer 0 while the
 * record is not there (not yet, or overwritten: the rings hold the last
 * 64). */
void mock_shm_issue(mock_shm_t *w, int src, int dst, int send, uint64_t n, const mock_desc_t *d, uint64_t colls);
int mock_shm_issued(mock_shm_t *w, int src, int dst, int send, uint64_t n, mock_desc_t *d_p, uint64_t *colls_p);
void mock_shm_log_coll(mock_shm_t *w, uint64_t k, const mock_desc_t *d, const uint64_t *cnt);
int mock_shm_coll_of(mock_shm_t *w, int r, uint64_t k, mock_desc_t *d_p, uint64_t *cnt);
void mock_shm_log_end(mock_shm_t *w, uint64_t colls, const uint64_t *cnt);
int mock_shm_end_of(mock_shm_t *w, int r, uint64_t *colls_p, uint64_t *cnt);
/* Move bytes of the pair's channel, never blocking: write at most len
 * bytes of p (this rank is src), read at most len into p (this rank is
 * dst); the bytes moved. */
size_t mock_shm_write(mock_shm_t *w, int dst, const void *p, size_t len);
size_t mock_shm_read(mock_shm_t *w, int src, void *p, size_t len);
/* This rank reached its first group with a send or receive with `peer`
 * (NCCL connects the pair there); whether `peer` reached its own with this
 * rank. */
void mock_shm_connect(mock_shm_t *w, int peer);
int mock_shm_connected(const mock_shm_t *w, int peer);
/* This rank's communicator was aborted (its peers' transfers with it fail);
 * whether rank r's was. */
void mock_shm_abort(mock_shm_t *w);
int mock_shm_aborted(const mock_shm_t *w, int r);

/* The MOCK_NCCL_SHM_DROP and _FLIP mutations on a message received from
 * rank `from` with ncclRecv: zeroed, or one bit flipped. */
void mock_shm_mutate(const mock_shm_t *w, int from, void *buf, size_t bytes);
/* acc op= x over count elements of ncclDataType_t dt with ncclRedOp_t op
 * (ncclAvg sums); -1 for a type or op the stand-in does not reduce. */
int mock_shm_reduce(void *acc, const void *x, size_t count, int dt, int op);
/* r /= n for ncclAvg (the floating types). */
void mock_shm_avg(void *r, size_t count, int dt, int n);
size_t mock_shm_dt_bytes(int dt);

#endif
