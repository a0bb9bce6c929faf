/*
 * The stand-in NCCL's record of calls (tests/gpu/standins/mock_nccl.c) and the API the
 * test programs use to read it.
 */
#ifndef HP_TESTS_MOCK_NCCL_H
#define HP_TESTS_MOCK_NCCL_H

#include <nccl.h>
#include <stddef.h>

typedef struct {
    char        fn[32];
    const void *sendbuf;
    void       *recvbuf;
    size_t      count;
    int         datatype;
    int         op;
    int         root;       /* root or peer */
    void       *comm;
    void       *stream;
    int         depth;      /* the thread's group depth at the call */
} mock_call_t;

int mock_nccl_ncalls(void);
/* Threads blocked in an ncclGroupEnd by MOCK_NCCL_CONNECT_HANG. */
int mock_nccl_connecting(void);
const mock_call_t *mock_nccl_call(int i);
int mock_nccl_depth(void);
ncclComm_t mock_nccl_comm_new(void);
void mock_nccl_next_split(ncclComm_t c);
/* Polls of ncclCommGetAsyncError before comm's operation in progress is done (0: none). */
int mock_nccl_pending(ncclComm_t comm);
/* The polls of the next operations in progress (0: MOCK_NCCL_POLLS, default 3). */
void mock_nccl_set_polls(int n);

#endif
