/* A dumping shim for checking hipress against a textbook computation on the
 * exact buffers a framework reduces (doc/measured/horovod-layouts.md, "groups=1 and
 * onebit").  Not part of the library and not built by make:
 *
 *   mpicc -shared -fPIC -O2 -o libhvddump.so tests/study/hvd_dump_shim.c -ldl
 *   mpirun -np 4 -x LD_PRELOAD="$PWD/libhvddump.so $PWD/_build/.libs/libhipress.so" \
 *       -x HVD_DUMP_DIR=/tmp/d [-x HVD_DUMP_MIN=1024] python ...
 *
 * Preloaded before libhipress.so, it wraps MPI_Allreduce only: a float32
 * MPI_SUM call of at least HVD_DUMP_MIN elements (default 1024) has its
 * input (sendbuf, or recvbuf for MPI_IN_PLACE) written to
 * $HVD_DUMP_DIR/dump.<world rank>, then the next MPI_Allreduce in the
 * symbol order is called (hipress' when it is preloaded after this shim,
 * else MPI's), then its output (recvbuf) is written.  Every other call goes
 * to the next MPI_Allreduce unchanged, unrecorded.
 *
 * File format, per recorded call: a 32-byte header of four little-endian
 * int64 (seq, count, in_place, recvbuf address), count float32 of input,
 * count float32 of output.  tests/study/hvd_onebit_ref.py reads it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef int (*allreduce_fn)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);

static allreduce_fn next_allreduce;
static FILE *out;
static int64_t seq;

static FILE *dump_file(void)
{
    if (out)
        return out;
    int rank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *dir = getenv("HVD_DUMP_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/dump.%d", dir && *dir ? dir : ".", rank);
    out = fopen(path, "wb");
    if (!out) {
        perror(path);
        abort();
    }
    return out;
}

static void write_or_die(const void *p, size_t size, size_t n)
{
    if (fwrite(p, size, n, out) != n) {
        perror("hvd_dump_shim: write");
        abort();
    }
}

int MPI_Allreduce(const void *sb, void *rb, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
    if (next_allreduce == NULL) {
        next_allreduce = (allreduce_fn)dlsym(RTLD_NEXT, "MPI_Allreduce");
        if (next_allreduce == NULL) {
            fprintf(stderr, "hvd_dump_shim: no next MPI_Allreduce: %s\n", dlerror());
            abort();
        }
    }
    const char *m = getenv("HVD_DUMP_MIN");
    long min = m && *m ? atol(m) : 1024;
    if (dt != MPI_FLOAT || op != MPI_SUM || count < min)
        return next_allreduce(sb, rb, count, dt, op, comm);

    int in_place = sb == MPI_IN_PLACE;
    int64_t head[4] = {seq++, count, in_place, (int64_t)(uintptr_t)rb};
    dump_file();
    write_or_die(head, sizeof head, 1);
    write_or_die(in_place ? rb : sb, sizeof(float), (size_t)count);
    int rc = next_allreduce(sb, rb, count, dt, op, comm);
    write_or_die(rb, sizeof(float), (size_t)count);
    fflush(out);
    return rc;
}
