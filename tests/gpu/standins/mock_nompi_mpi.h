/*
 * The MPI names of the stand-in NCCL's replay mode (tests/gpu/standins/mock_nccl.c:
 * its communicators' rendezvous through MPI) for its build without MPI
 * (tests/gpu/mock_nompi/libnccl.so.2, -DMOCK_NCCL_NO_MPI): a process with
 * no MPI at all (tests/gpu/nccl/run_nompi.sh).  PMPI_Initialized answers "not
 * initialised", so replay is always off and the other calls are never
 * reached; they fail if they were.  No symbol of libmpi is named.
 */
#ifndef MOCK_NOMPI_MPI_H
#define MOCK_NOMPI_MPI_H

typedef int MPI_Datatype;
typedef int MPI_Comm;

enum { MPI_SUCCESS = 0, MPI_ERR_OTHER = 16 };
enum { MPI_BYTE = 1, MPI_INT };
enum { MPI_COMM_WORLD = 1 };

/* volatile: the compiler must not prove the replay code unreachable (its
 * warnings on the dead paths) */
static volatile int mock_nompi_initialized;
static inline int PMPI_Initialized(int *flag) { *flag = mock_nompi_initialized; return MPI_SUCCESS; }
static inline int PMPI_Finalized(int *flag) { *flag = 0; return MPI_SUCCESS; }
static inline int PMPI_Comm_size(MPI_Comm c, int *n) { (void)c; *n = 1; return MPI_ERR_OTHER; }
static inline int PMPI_Comm_rank(MPI_Comm c, int *r) { (void)c; *r = 0; return MPI_ERR_OTHER; }
static inline int PMPI_Bcast(void *b, int n, MPI_Datatype t, int root, MPI_Comm c)
{
    (void)b; (void)n; (void)t; (void)root; (void)c;
    return MPI_ERR_OTHER;
}
static inline int PMPI_Allgather(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt,
                                 MPI_Comm c)
{
    (void)s; (void)sc; (void)st; (void)r; (void)rc; (void)rt; (void)c;
    return MPI_ERR_OTHER;
}

#endif
