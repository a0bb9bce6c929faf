/*
 * The stand-in driver's own interface (tests/gpu/standins/mock_cuda*.c): what the
 * stand-in NCCL (tests/gpu/standins/mock_nccl*.c) puts on its streams, and the
 * functions the tests reach with dlsym.  doc/dev/standins.md describes the
 * model.
 */
#ifndef HP_TESTS_MOCK_CUDA_H
#define HP_TESTS_MOCK_CUDA_H

#include <stddef.h>
#include <stdint.h>

/* A transfer an entry waits for: its key (the same number on both sides)
 * and the process of the peer that must reach its side. */
typedef struct {
    uint64_t key;
    int      pid;
} mock_wkey_t;

/*
 * An entry of a stream that completes when something outside the process
 * allows it (the stand-in NCCL's operations).  The functions run under the
 * driver's queue lock and never block.
 *   reach     the entry is at the head of its stream (everything queued
 *             before it has run): once, before any progress;
 *   progress  move what can move now; 1 when complete (done or failed);
 *   waits     the transfers it still waits for because the peer has not
 *             reached its side (at most max into w; the count);
 *   keys      the transfers it takes part in (its side; at most max);
 *   describe  one line for reports ("ncclSend of 400 bytes to rank 1 ...");
 *   wanted    whether a peer has reached its side of one of the transfers
 *             (under MOCK_CUDA_DEFERRED: a demand for the entry's stream);
 *   release   free it (after completion, or when its stream goes);
 *   uses      whether it reads or writes device memory in [p, p + n) (a
 *             free of that memory while it is queued is then a use after
 *             free: mock_cuda_mem.c).
 */
typedef struct mock_ext_ops {
    void (*reach)(void *arg);
    int (*progress)(void *arg);
    int (*waits)(void *arg, mock_wkey_t *w, int max);
    int (*keys)(void *arg, uint64_t *k, int max);
    void (*describe)(void *arg, char *buf, size_t len);
    int (*wanted)(void *arg);
    void (*release)(void *arg);
    int (*uses)(void *arg, const void *p, size_t n);
} mock_ext_ops_t;

/* The exit status of a process the stand-ins stop because it broke a
 * documented rule of the driver or of NCCL (a use of memory after its
 * free, stream-ordered memory used outside its stream's order, ranks
 * whose NCCL calls differ): the line before it names both sides.  (A
 * deadlock is 86.) */
#define MOCK_RULE_EXIT 87

/* Queue an external entry on `stream` (0, or a CUresult); the calling
 * thread is counted among the process's NCCL threads (the wait-for graph's
 * "this rank has not enqueued it yet"). */
typedef int (*mock_cuda_enqueue_ext_fn)(void *stream, const mock_ext_ops_t *ops, void *arg);
/* Whether `stream` is being captured into a graph (1) and, then, the
 * capture's record of an external entry (described) in place of running it. */
typedef int (*mock_cuda_captured_fn)(void *stream, const char *what);

#endif
